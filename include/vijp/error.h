/* Error reporting: every fallible library call returns 0 or a negative VIJP_E*
 * code and, when given one, fills a vijp_error with a message for the user. */
#ifndef VIJP_ERROR_H
#define VIJP_ERROR_H

enum {
    VIJP_OK = 0,
    VIJP_EINVAL = -1,    /* malformed argument, unknown name, bad spec */
    VIJP_EDIM = -2,      /* mismatched dimensions */
    VIJP_ESINGULAR = -3, /* a vijp or inverse needs a solve that has no solution */
    VIJP_EDOMAIN = -4,   /* NaN or Inf where finite values are required */
    VIJP_ENOMEM = -5,
    VIJP_EUNSUPPORTED = -6, /* the layer does not provide this operator */
    VIJP_EDECLARATION = -7  /* a layer's structural declaration contradicts its numbers: a bug in the layer */
};

typedef struct {
    int code;
    char msg[256];
} vijp_error;

/* Record an error (printf-style message) and return code. err may be NULL. */
int vijp_fail(vijp_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

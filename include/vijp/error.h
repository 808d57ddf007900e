/* Error reporting and the memory policy.
 *
 * Errors: every fallible library call returns 0 or a negative VIJP_E* code
 * and, when given one, fills a vijp_error with a message for the user.  Such
 * calls are declared VIJP_MUST_CHECK: ignoring their result is a compile-time
 * warning (an error in vijp's own build).
 *
 * Memory policy: running out of memory is fatal, everywhere, through one
 * allocator.  vijp_alloc, vijp_alloc_array, vijp_realloc and vijp_strdup never
 * return NULL; when the system refuses, vijp_out_of_memory prints
 *     vijp: out of memory while <context> (allocating <size>)
 * to stderr, runs the cleanup the program registered (the vijp command
 * removes its unfinished report), and exits with status 1.  GMP and MPFR
 * allocate through the same allocator once vijp_memory_policy_install has run
 * (the vijp command and the test suite call it first thing), so their
 * failures end the same way instead of in GMP's abort().  No code checks an
 * allocation for NULL, and no library call returns VIJP_ENOMEM (the code is
 * kept so the others keep their numbers).  Why fatal rather than returned: a
 * layer's forward/jvp/vjp have void contracts (DESIGN §2), MPFR cannot report
 * a failed allocation at all, and a run that cannot hold its activations has
 * no partial answer worth returning; the commands size a run before
 * allocating (vijp_memory_available) so that the common case is refused up
 * front with "needs about X GiB; Y available" instead.
 *
 * I/O failures are VIJP_EIO, with the path and strerror in the message. */
#ifndef VIJP_ERROR_H
#define VIJP_ERROR_H

#include "vijp/api.h"
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    VIJP_OK = 0,
    VIJP_EINVAL = -1,    /* malformed argument, unknown name, bad spec */
    VIJP_EDIM = -2,      /* mismatched dimensions */
    VIJP_ESINGULAR = -3, /* a vijp or inverse needs a solve that has no solution */
    VIJP_EDOMAIN = -4,   /* NaN or Inf where finite values are required */
    VIJP_ENOMEM = -5,    /* never returned: out of memory is fatal (above) */
    VIJP_EUNSUPPORTED = -6, /* the layer does not provide this operator */
    VIJP_EDECLARATION = -7, /* a layer's structural declaration contradicts its numbers: a bug in the layer */
    VIJP_EIO = -8,       /* reading or writing a file failed (the message names it and why) */
    VIJP_ERANGE = -9     /* a result is NaN or infinite although every input is finite: the
                          * computation left its format's range (a failure, not bad input) */
};

#define VIJP_MUST_CHECK __attribute__((warn_unused_result))

typedef struct {
    int code;
    char msg[256];
} vijp_error;

/* Record an error (printf-style message) and return code. err may be NULL.
 * Control characters in the message (from a spec or a file name the user
 * gave) are written as \xHH, so that a message never acts on a terminal. */
VIJP_API int vijp_fail(vijp_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The allocator (memory policy above).  vijp_alloc returns n zeroed bytes
 * (n may be 0); vijp_alloc_array count·size of them, fatal also when the
 * product overflows; vijp_realloc keeps realloc's contract otherwise. */
VIJP_API void *vijp_alloc(size_t n) __attribute__((malloc, returns_nonnull));
VIJP_API void *vijp_alloc_array(size_t count, size_t size) __attribute__((malloc, returns_nonnull));
/* n bytes whose contents are unspecified, for a buffer the caller writes
 * whole before reading it: no zeroing pass (reused heap memory would
 * otherwise be cleared byte by byte).  Same failure handling as vijp_alloc.
 * Builds with VIJP_POISON_UNSET (make SANITIZE=1) set every byte to 0xff,
 * a NaN in every double and float, so that a read before the write shows. */
VIJP_API void *vijp_alloc_unset(size_t n) __attribute__((malloc, returns_nonnull));
VIJP_API void *vijp_realloc(void *p, size_t n) __attribute__((returns_nonnull));
VIJP_API char *vijp_strdup(const char *s) __attribute__((malloc, returns_nonnull));
VIJP_API void vijp_free(void *p);
/* Print the message, run the cleanup, exit 1. */
VIJP_API void vijp_out_of_memory(size_t bytes) __attribute__((noreturn));

/* Route GMP's, MPFR's, MPFI's and jansson's allocations through the
 * allocator (libc's and OpenBLAS's own stay theirs), and arm the
 * allocation-failure test hook: with VIJP_FAIL_ALLOC=N in the environment
 * the N-th allocation from here on (1-based, vijp's and GMP's together)
 * fails as the system would refuse it.  Call before any MPFR value exists. */
VIJP_API void vijp_memory_policy_install(void);
/* How many allocations the allocator has made since it was installed (the
 * allocation-failure walk's range), counted where VIJP_FAIL_ALLOC or
 * VIJP_ALLOC_STATS was set in the environment then; 0 elsewhere (one
 * counter for every thread's allocations costs the cores' time). */
VIJP_API unsigned long long vijp_memory_allocations(void);
/* What the program is doing, for the message ("running vijp grad"); the
 * string must outlive the run.  NULL: none. */
VIJP_API void vijp_memory_context(const char *what);
/* Called once, before exiting, when memory runs out (NULL: none).  It must
 * not allocate. */
VIJP_API void vijp_memory_on_fatal(void (*cleanup)(void));

#ifdef __cplusplus
}
#endif

#endif

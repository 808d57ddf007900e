/* Real-number arguments of the activations' spec items (elu:ALPHA,
 * softplus:BETA/THRESHOLD, hardtanh:LO/HI): read strictly, printed as the
 * shortest decimal that reads back, without the '+' of a positive exponent
 * (a coupling block's list separates its layers with '+'). */
#ifndef VIJP_LAYERS_NUMARG_H
#define VIJP_LAYERS_NUMARG_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A finite number at *s, up to `stop` (a separator) or the end; *s moves past
 * it.  0 on success, -1 when there is none (a blank, a sign alone, inf, nan). */
static inline int vijp_numarg_read(const char **s, char stop, double *out)
{
    const char *p = *s;
    char *end = NULL;
    if (!*p || isspace((unsigned char)*p)) return -1;
    double v = strtod(p, &end);
    if (end == p || (*end && *end != stop) || !isfinite(v)) return -1;
    *out = v;
    *s = end;
    return 0;
}

/* The shortest decimal that reads back as v, into num (at least 32 bytes);
 * an integer below 10^15 as its digits. */
static inline void vijp_numarg_print(double v, char *num, size_t size)
{
    if (v == rint(v) && fabs(v) < 1e15) { /* an integer: its digits ("20", not "2e01") */
        snprintf(num, size, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(num, size, "%.*g", p, v);
        if (strtod(num, NULL) == v) break;
    }
    char *plus = strchr(num, '+');
    if (plus) memmove(plus, plus + 1, strlen(plus));
}

#endif

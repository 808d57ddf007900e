/* Counts in layer-spec arguments (dense:M, conv1d:CxK, avgpool:P, ...), read
 * strictly.  strtoul and sscanf's %lu accept what no spec means: a sign
 * ("-2" wraps to 2^64 - 2), blanks and '+', and they saturate past
 * ULONG_MAX; a wrapped count then reaches the shape rules, where a product of
 * two of them can wrap to 0 and divide by it (squeeze:4294967296x4294967296
 * died of SIGFPE).  Here a count is plain decimal digits and at most
 * VIJP_WIDTH_MAX: no layer has more channels, taps, rows or units than the
 * widest layer, and products of two counts cannot overflow size_t. */
#ifndef VIJP_LAYERS_ARGS_H
#define VIJP_LAYERS_ARGS_H

#include "vijp/layer.h"

enum { VIJP_ARG_OK = 0, VIJP_ARG_NOT_A_COUNT = -1, VIJP_ARG_TOO_LARGE = -2 };

/* Read the count at *s into *out and move *s past its digits. */
static inline int vijp_arg_count(const char **s, size_t *out)
{
    const char *p = *s;
    size_t v = 0;
    if (*p < '0' || *p > '9') return VIJP_ARG_NOT_A_COUNT;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = 10 * v + (size_t)(*p - '0')) > VIJP_WIDTH_MAX) return VIJP_ARG_TOO_LARGE;
    *out = v;
    *s = p;
    return VIJP_ARG_OK;
}

#endif

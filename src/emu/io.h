/* MPFR values in and out of the native path (src/emu/): exact both ways for
 * the formats vijp_emu_applies accepts, whose values are all doubles. */
#ifndef VIJP_EMU_IO_H
#define VIJP_EMU_IO_H

#include "vijp/error.h"
#include <mpfr.h>
#include <stddef.h>

static inline double *vijp_emu_get(mpfr_t *v, size_t n)
{
    double *d = vijp_alloc_array(n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = mpfr_get_d(v[i], MPFR_RNDN); /* exact: a value of the format */
    return d;
}

/* The m × n column-major matrix v, transposed (row i contiguous). */
static inline double *vijp_emu_get_rows(mpfr_t *v, size_t m, size_t n)
{
    double *d = vijp_alloc_array(m * n, sizeof *d);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) d[k + i * n] = mpfr_get_d(v[i + k * m], MPFR_RNDN);
    return d;
}

static inline void vijp_emu_put(mpfr_t *v, const double *d, size_t n)
{
    for (size_t i = 0; i < n; i++) mpfr_set_d(v[i], d[i], MPFR_RNDN); /* exact: on the format's grid */
}

#endif

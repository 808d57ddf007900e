/* MPFR values in and out of the native path (src/emu/): exact both ways for
 * the formats vijp_emu_applies accepts, whose values are all doubles. */
#ifndef VIJP_EMU_IO_H
#define VIJP_EMU_IO_H

#include "vijp/error.h"
#include <gmp.h>
#include <mpfr.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* v as a double, exactly.  mpfr_get_d costs some 30 ns, more than the
 * arithmetic it feeds (a dense forward in batch 1 reads each weight once),
 * so a regular value of at most 53 bits, which occupies the top of its first
 * limb (MPFR's layout: v = 0.1b₂b₃… × 2^EXP, the significand's top bit the
 * limb's), is written straight into binary64's fields: biased exponent
 * EXP − 1 + 1023, fraction the 52 bits after the leading one.  Exact when
 * EXP − 1 is within binary64's normal exponents, which every format of at
 * most 24 bits is (−148 <= EXP <= 128); anything else goes to mpfr_get_d. */
static inline double vijp_emu_get1(mpfr_srcptr v)
{
#if GMP_NUMB_BITS == 64
    if (mpfr_regular_p(v) && mpfr_get_prec(v) <= 53 && mpfr_get_exp(v) > -1021 && mpfr_get_exp(v) <= 1024) {
        uint64_t top = ((const mp_limb_t *)mpfr_custom_get_significand(v))[0];
        uint64_t bits = (uint64_t)(mpfr_signbit(v) != 0) << 63 | (uint64_t)(mpfr_get_exp(v) + 1022) << 52 | (top << 1) >> 12;
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
#endif
    return mpfr_get_d(v, MPFR_RNDN); /* ±0, ±Inf, NaN: exact too */
}

static inline double *vijp_emu_get(mpfr_t *v, size_t n)
{
    double *d = vijp_alloc_array(n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = vijp_emu_get1(v[i]);
    return d;
}

/* The m × n column-major matrix v, transposed (row i contiguous). */
static inline double *vijp_emu_get_rows(mpfr_t *v, size_t m, size_t n)
{
    double *d = vijp_alloc_array(m * n, sizeof *d);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) d[k + i * n] = vijp_emu_get1(v[i + k * m]);
    return d;
}

static inline void vijp_emu_put(mpfr_t *v, const double *d, size_t n)
{
    for (size_t i = 0; i < n; i++) mpfr_set_d(v[i], d[i], MPFR_RNDN); /* exact: on the format's grid */
}

#endif

/* MPFR values in and out of doubles by their bits, exact both ways: for the
 * native path (src/emu/), whose formats' values are all doubles, and for
 * whatever else moves doubles into MPFR in bulk (vijp_mat_convert's copy of
 * a problem, the comparisons' reading of double gradients). */
#ifndef VIJP_EMU_IO_H
#define VIJP_EMU_IO_H

#include "vijp/error.h"
#include <gmp.h>
#include <math.h>
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

/* A finite nonzero double as MPFR lays it out: |d| = sig·2^(e − 64), the
 * top bit of sig set (MPFR's exponent: |d| in [2^(e−1), 2^e)); the fields
 * vijp_emu_get1 packs, unpacked.  Returns the sign bit. */
static inline int vijp_double_split(double d, uint64_t *sig, long *e)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    unsigned be = (unsigned)(b >> 52) & 0x7ff;
    uint64_t frac = b & (((uint64_t)1 << 52) - 1);
    if (be) { /* (frac + 2^52)·2^(be − 1075) */
        *sig = (frac | (uint64_t)1 << 52) << 11, *e = (long)be - 1022;
    } else { /* subnormal: frac·2^-1074 */
        int lz = __builtin_clzll(frac);
        *sig = frac << lz, *e = -1010 - lz;
    }
    return (int)(b >> 63);
}

/* v := d, mpfr_set_d's value without its general path: d's fields written
 * into MPFR's layout through its custom interface, when d fits v exactly
 * (at most prec(v) significant bits: any double at 53 bits or more, a value
 * on the format's grid below) and its exponent lies in MPFR's current
 * range [emin, emax] (mpfr_get_emin and mpfr_get_emax, which the caller of
 * this form reads once: they are calls into thread-local data that cost
 * more than the rest of the store, in bulk); otherwise, and for NaN and
 * Inf, mpfr_set_d. */
static inline void vijp_emu_set1_range(mpfr_ptr v, double d, mpfr_exp_t emin, mpfr_exp_t emax)
{
#if GMP_NUMB_BITS == 64
    if (isfinite(d)) {
        mp_limb_t *s = mpfr_custom_get_significand(v);
        mpfr_prec_t prec = mpfr_get_prec(v);
        if (d == 0) {
            mpfr_custom_init_set(v, signbit(d) ? -MPFR_ZERO_KIND : MPFR_ZERO_KIND, 0, prec, s);
            return;
        }
        uint64_t sig;
        long e;
        int neg = vijp_double_split(d, &sig, &e);
        if ((prec >= 64 || !(sig << prec)) && e >= emin && e <= emax) {
            size_t n = (size_t)(prec + 63) / 64;
            if (n > 1) memset(s, 0, (n - 1) * sizeof *s);
            s[n - 1] = (mp_limb_t)sig;
            mpfr_custom_init_set(v, neg ? -MPFR_REGULAR_KIND : MPFR_REGULAR_KIND, e, prec, s);
            return;
        }
    }
#else
    (void)emin, (void)emax;
#endif
    mpfr_set_d(v, d, MPFR_RNDN);
}

static inline void vijp_emu_set1(mpfr_ptr v, double d)
{
    vijp_emu_set1_range(v, d, mpfr_get_emin(), mpfr_get_emax());
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
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    for (size_t i = 0; i < n; i++) vijp_emu_set1_range(v[i], d[i], emin, emax); /* exact: on the format's grid */
}

#endif

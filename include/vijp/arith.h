/* Arithmetic in a format, on MPFR values: the public header an MPFR operator
 * (the catalogue's oracles, or a plugin's MPFR twin) is written against.  Every operation is correctly rounded
 * to nearest-even at the format's precision; for the emulated IEEE formats it
 * is then clamped to the format's exponent range and subnormalized, which makes
 * it bit-identical to the IEEE operation (MPFR manual, mpfr_subnormalize).
 * MPFR's exponent range is per-thread state: each operation sets it and puts
 * the previous one back, so callers never see it changed.
 * Oracles use only this file, <mpfr.h> and vijp/format.h for arithmetic:
 * nothing from src/'s fast paths. */
#ifndef VIJP_ARITH_H
#define VIJP_ARITH_H

#include "vijp/api.h"
#include <stddef.h>
#include <mpfr.h>
#include "vijp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

VIJP_API void vo_set(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_set_d(mpfr_t r, double a, const vijp_format *f);
VIJP_API void vo_set_si(mpfr_t r, long a, const vijp_format *f);
VIJP_API void vo_add(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f);
VIJP_API void vo_sub(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f);
VIJP_API void vo_mul(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f);
VIJP_API void vo_div(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f);
VIJP_API void vo_sqrt(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_fma(mpfr_t r, const mpfr_t a, const mpfr_t b, const mpfr_t c, const vijp_format *f);
VIJP_API void vo_tanh(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_atanh(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_sech(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_neg(mpfr_t r, const mpfr_t a, const vijp_format *f);   /* exact */
VIJP_API void vo_exp(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_expm1(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_log(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_log1p(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_erfc(mpfr_t r, const mpfr_t a, const vijp_format *f);
VIJP_API void vo_const_pi(mpfr_t r, const vijp_format *f);

/* r := a (of any precision) rounded once to the format's storage
 * (format.h); vo_set unless mixed. */
VIJP_API void vo_store(mpfr_t r, const mpfr_t a, const vijp_format *f);
/* acc += a·b as a matrix product's inner loop computes it in format f:
 * mixed formats one FMA in the accumulation format (operands first rounded
 * to operand_prec, if any); others vo_mul then vo_add; tensor-core formats
 * (STORE+tc:ARCH) one block of a single product, as vo_dot_acc with n = 1.
 * p: scratch at f's precision (unused, and may be NULL, for mixed formats). */
VIJP_API void vo_madd(mpfr_t acc, const mpfr_t a, const mpfr_t b, mpfr_t p, const vijp_format *f);
/* acc += Σ_k a[k·sa]·b[k·sb], k = 0 … n−1, as a matrix product computes
 * one output in format f: n vo_madd in index order, except for the
 * tensor-core formats, which add the products in blocks of f->tc_group
 * (k = 0 … g−1, g … 2g−1, …), each block with the accumulator in one step
 * (format.h; src/format/tc.c).  p as vo_madd's. */
VIJP_API void vo_dot_acc(mpfr_t acc, const mpfr_t *a, size_t sa, const mpfr_t *b, size_t sb, size_t n, mpfr_t p,
                         const vijp_format *f);

/* n values at the format's precision, set to zero / cleared. */
VIJP_API mpfr_t *vo_vec_new(size_t n, const vijp_format *f);
VIJP_API void vo_vec_free(mpfr_t *v, size_t n);

#ifdef __cplusplus
}
#endif

#endif

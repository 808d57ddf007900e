/* Dot products rounded once: the reference's sums of products (vo_dot).
 *
 * vo_dot(r, c, a, b, n) sets r to Σ_k a[k]·b[k] + c, computed exactly and
 * correctly rounded (to nearest, ties to even) to r's precision: the value
 * mpfr_sum gives over the exact products, except that an exactly zero sum is
 * +0 (as the sequential loop's +0 + … gives).  NaN and Inf propagate as in
 * mpfr_sum over mpfr_mul products (0·Inf is NaN, Inf − Inf is NaN).
 *
 * The sequential loop it replaces rounds 2n times and errs by up to about
 * n·u·Σ|a_k b_k|; vo_dot errs by at most u·|Σ a_k b_k| (u = 2^-P), so it is
 * never less accurate.  How (the technique of Arb's arb_dot): every product of
 * significands (GMP's mpn_mul) is added, in two's complement, into a limb
 * array whose top limb sits one limb above the largest product's exponent and
 * which reaches P + 128 bits below it; bits of a product below the array are
 * cut, at most one unit of its last limb per product.  With T products cut
 * the accumulated A satisfies |S − A| ≤ T ulp_A, and when A − T and A + T
 * round to the same P-bit number that number is the correct rounding of S
 * (rounding is monotone).  Otherwise (heavy cancellation, a tie), and for NaN
 * or Inf inputs, the exact slow path runs: mpfr_sum over exact products.
 *
 * Used by the dense and conv oracles instead of their mul-then-add loops when
 * the format asks for it (vo_dot_fused: the drift study's MPFR reference);
 * the formats under test keep their operation-by-operation rounding. */
#ifndef VIJP_ORACLES_DOT_H
#define VIJP_ORACLES_DOT_H

#include <stddef.h>
#include <mpfr.h>
#include "vijp/format.h"
#include "vijp/layer.h"

/* Nonzero when f's dot products are rounded once (vo_dot) rather than after
 * every multiply and add: only the non-emulated MPFR reference
 * (vijp_format.exact_dots, set by the drift study). */
int vo_dot_fused(const vijp_format *f);

/* Nonzero when the test hook VIJP_BREAK_REFDOT is set (dot.c): a faster
 * path to vo_dot's results (src/emu/dense_ref.c) then leaves every sum to
 * vo_dot, so that the broken reference is what runs. */
int vo_dot_hook_broken(void);

/* r := Σ_{k<n} a[k]·b[k] + c (c may be NULL), rounded once (see above).
 * r may be one of the inputs.  b may be NULL: then the terms are a[k] alone
 * (a plain sum, rounded once). */
void vo_dot(mpfr_ptr r, mpfr_srcptr c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n);

/* vo_dot over one product, a·b (no pointer arrays to set up): the batch-1
 * parameter gradient's outer product, 16.8M of them per reference level of
 * a depth-256 dense:256 net. */
void vo_dot1(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b);

/* The same over strided arrays: terms a[k·sa]·b[k·sb].  ptrs is scratch for
 * 2n pointers. */
void vo_dot_strided(mpfr_ptr r, mpfr_srcptr c, const mpfr_t *a, size_t sa, const mpfr_t *b, size_t sb, size_t n,
                    mpfr_srcptr *ptrs);

/* The exact slow path alone (mpfr_sum over exact products), for the tests
 * and the benchmark. */
void vo_dot_exact(mpfr_ptr r, mpfr_srcptr c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n);

/* The dense oracle's products with every output rounded once
 * (oracles/dense_fused.c), for vo_dot_fused formats: same contracts as
 * vo_dense_forward, _jvp, _vjp, _vjp_param. */
void vo_dense_forward_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y);
void vo_dense_jvp_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *U, size_t B, mpfr_t *V);
void vo_dense_vjp_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *Gy, size_t B, mpfr_t *Gx);
void vo_dense_vjp_param_fused(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt);

#endif

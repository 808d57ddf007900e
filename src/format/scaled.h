/* Tensor-scaled formats (format.h: nvfp4+binary32, fp8[:pow2]+binary32):
 * a tensor's scale from its largest magnitude, and its values quantised
 * under it.  mat.c gathers a matrix's values and lays its lines; arith.c's
 * vo_store quantises one value as a tensor of one.  scaled.c calls no other
 * file of the module (it does its own binary32 and element roundings), so
 * calls run mat.c, arith.c → scaled.c, never back. */
#ifndef VIJP_FORMAT_SCALED_H
#define VIJP_FORMAT_SCALED_H

#include "vijp/format.h"
#include "vijp/mat.h"

typedef struct {
    mpfr_prec_t prec;  /* an element grid, in MPFR's convention (format.c): */
    mpfr_exp_t emin, emax; /* E2M1 2, 0, 3; E4M3 4, -8, 9; E5M2 3, -15, 16 */
    double max;        /* its largest value, to which everything past it saturates */
} vijp_grid;

typedef struct {
    const vijp_format *f;
    vijp_grid elem;    /* the elements' grid: E2M1 (nvfp4), E4M3 or E5M2 (fp8, by role) */
    int special;       /* an Inf or NaN among the values seen, or amax past binary32: every value NaN */
    mpfr_t amax;       /* binary32: the largest magnitude seen, rounded to binary32 */
    mpfr_t scale, inv; /* binary32.  nvfp4: the decode scale S and unused inv; fp8: the scale and 1/scale */
} vijp_tensor_scale;

void vijp_scaled_init(vijp_tensor_scale *t, const vijp_format *f, vijp_store_role role);
/* One more value of the tensor (its magnitude joins amax). */
void vijp_scaled_see(vijp_tensor_scale *t, mpfr_srcptr v);
void vijp_scaled_see_d(vijp_tensor_scale *t, double v);
/* The tensor's scale, once every value has been seen. */
void vijp_scaled_ready(vijp_tensor_scale *t);
/* dst[k·dstride] := src[k·sstride] (k < n), one line of the tensor,
 * quantised: nvfp4 in blocks of 16 from its start (the last one shorter),
 * fp8 value by value.  dst may be src (same stride).  dst's precision holds
 * a binary32. */
void vijp_scaled_line(const vijp_tensor_scale *t, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n);
void vijp_scaled_clear(vijp_tensor_scale *t);
/* r := a quantised as a tensor of one forward value. */
void vijp_scaled_one(const vijp_format *f, mpfr_ptr r, mpfr_srcptr a);

#endif

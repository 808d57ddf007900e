/* MX block quantisation: the blocks (mx.c, for mat.c's matrices along a
 * line), and one value under a block's scale (arith.c, which vo_store uses
 * for a value of its own and mx.c for every element): calls run mx.c →
 * arith.c, never back. */
#ifndef VIJP_FORMAT_MX_H
#define VIJP_FORMAT_MX_H

#include "vijp/format.h"

#define E8M0_EMAX 127 /* scale exponents −127 … 127; code 0xFF NaN */

/* dst[k·dstride] := src[k·sstride] (k < n) quantised as one block of f (an
 * MX format): one scale, each value an element times it.  dst may be src
 * (same stride). */
void vijp_mx_block(const vijp_format *f, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n);
/* In place along a line of n values v[k·stride]: blocks of f->mx_block
 * from its start, the last one shorter when n is no multiple of it. */
void vijp_mx_line(const vijp_format *f, mpfr_t *v, size_t n, size_t stride);
/* r := a quantised as a block of its own (what vo_store does for MX). */
void vijp_mx_one(const vijp_format *f, mpfr_ptr r, mpfr_srcptr a);
/* The scale exponent s (scale 2^s) of a block whose largest magnitude is
 * amax (finite, nonzero), by f's rule (the specification's or :ceil),
 * clamped to E8M0's −127 below; 0 when past its 127 above (a NaN scale). */
int vijp_mx_scale_exponent(const vijp_format *f, mpfr_srcptr amax, long *s);
/* r := the element nearest v/2^s (ties to even, saturating) times 2^s. */
void vijp_mx_element(const vijp_format *f, mpfr_ptr r, mpfr_srcptr v, long s);

#endif

/* MX block quantisation (mx.c), shared by the format module's rounding
 * (arith.c: one value) and its matrices (mat.c: blocks along a line). */
#ifndef VIJP_FORMAT_MX_H
#define VIJP_FORMAT_MX_H

#include "vijp/format.h"

/* dst[k·dstride] := src[k·sstride] (k < n) quantised as one block of f (an
 * MX format): one scale, each value an element times it.  dst may be src
 * (same stride). */
void vijp_mx_block(const vijp_format *f, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n);
/* In place along a line of n values v[k·stride]: blocks of f->mx_block
 * from its start, the last one shorter when n is no multiple of it. */
void vijp_mx_line(const vijp_format *f, mpfr_t *v, size_t n, size_t stride);
/* r := a quantised as a block of its own (what vo_store does for MX). */
void vijp_mx_one(const vijp_format *f, mpfr_ptr r, mpfr_srcptr a);

#endif

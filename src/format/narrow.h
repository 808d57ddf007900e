/* Native rounding of doubles onto the narrow storage grids (FP8 e4m3 and
 * e5m2 with their overflow rules, the MX elements) and the MX blocks, bit
 * for bit what the MPFR route (arith.c's vo_store, mx.c's blocks) gives:
 * tests/t-narrow.c checks every function here against the MPFR route, and
 * the ":ceil" scale of a block whose largest magnitude is negative and
 * exactly max·2^k on both against the specification.  mat.c's stores
 * use them for FP8 grids and MX blocks (not under :sr, :ftz or a tensor
 * scale); its test is there too.
 *
 * One rounding is the classic shift constant: |x| + C − C with
 * C = 1.5·2^(k+52), 2^k the grid's quantum at x, rounds |x| to a multiple
 * of 2^k, to nearest, ties to even (the sum lies in [2^(k+52), 2^(k+53)),
 * whose binary64 spacing is 2^k; the subtraction is exact by Sterbenz).
 * The quantum comes from x's exponent field clamped below to the grid's
 * smallest normal (the subnormal grid has the same quantum throughout)
 * and above to 2^emax (everything there overflows): no branch, so the
 * same steps run portably and in AVX2 and AVX-512 lanes. */
#ifndef VIJP_FORMAT_NARROW_H
#define VIJP_FORMAT_NARROW_H

#include "vijp/format.h"
#include <stddef.h>

/* A storage grid with its overflow rule: p significand bits, MPFR's
 * exponent convention (x = m·2^e, 1/2 <= |m| < 1; smallest subnormal
 * 2^(emin−1)), the largest finite value max, and what lies past it. */
typedef struct {
    int p, emin, emax;
    vijp_overflow rule;
    double max;
} vijp_narrow;

/* f's storage grid (an emulated format with store_prec <= 24, whose
 * store_emax <= 128): the grid vo_store rounds a mixed format's values to,
 * and MX's element grid. */
vijp_narrow vijp_narrow_of(const vijp_format *f);

/* x rounded to g, as arith.c's round_in_place: nearest, ties to even,
 * subnormals; past max, or ±Inf, g's rule (±Inf, NaN with x's sign, ±max);
 * ±0 keep their sign; a NaN comes back as it is. */
double vijp_narrow_round(double x, const vijp_narrow *g);

/* The instruction sets of vijp_narrow_round_array: every one gives the
 * same bits. */
typedef enum { VIJP_NARROW_PORTABLE, VIJP_NARROW_AVX2, VIJP_NARROW_AVX512, VIJP_NARROW_BEST } vijp_narrow_isa;

/* Whether this CPU runs isa (BEST and PORTABLE always). */
int vijp_narrow_isa_ok(vijp_narrow_isa isa);

/* dst[i] := vijp_narrow_round(src[i] · down, g) · up for i < n (dst may be
 * src; a NaN is copied as it is, payload and all).  down and up are powers
 * of two, up = 1/down, in [2^-127, 2^127]: an MX block's scale (1 and 1
 * for a plain rounding).  An isa the CPU lacks runs the portable loop. */
void vijp_narrow_round_array(double *dst, const double *src, size_t n, const vijp_narrow *g, double down, double up,
                             vijp_narrow_isa isa);

/* One MX block of f (mx.c's vijp_mx_block on doubles): dst[k·dstride] :=
 * src[k·sstride] (k < n) quantised with one shared E8M0 scale: NaN
 * everywhere for a block holding ±Inf or NaN or whose scale passes
 * E8M0's 2^127; a block of zeros unchanged; else each value an element
 * (saturating) times the scale.  dst may be src (same stride). */
void vijp_narrow_mx_block(const vijp_format *f, double *dst, size_t dstride, const double *src, size_t sstride,
                          size_t n, vijp_narrow_isa isa);

/* In place along a line of n values v[k·stride], blocks of f->mx_block
 * from its start, the last one shorter (mx.c's vijp_mx_line). */
void vijp_narrow_mx_line(const vijp_format *f, double *v, size_t n, size_t stride, vijp_narrow_isa isa);

#endif

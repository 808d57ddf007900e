/* Helpers of the FORMAT@SET suites (t-b32set.c, t-mixedset.c): binary32
 * values, or a mixed format's storage values, in MPFR matrices, and the
 * check that leaky and relu through a kernel set are the emulation's. */
#ifndef VIJP_F32FIX_H
#define VIJP_F32FIX_H

#include "testutil.h"

/* rows × cols values of format F's storage: N(0, 1) (with special, first
 * ±0, the smallest subnormal, a huge value, ±∞ and a small subnormal),
 * rounded once to the storage format. */
void f32_fill(vijp_mat *a, size_t rows, size_t cols, const vijp_format *F, vijp_rng *rng, int special);
/* b := a's values in format F (exact: both hold the same storage values). */
void f32_same_in(vijp_mat *b, const vijp_mat *a, const vijp_format *F);
/* Every entry the same bits (NaN as NaN, zeros by sign). */
void f32_assert_same_bits(const vijp_mat *a, const vijp_mat *b, const char *what);
/* The entries as floats (exact), one spare; free() it. */
float *f32_floats_of(const vijp_mat *a);
/* leaky:0.3, relu and leaky:3, 37 units × 3, specials included: forward,
 * jvp, vjp, fragment and vijp in S (a FORMAT@SET) bit for bit those of E
 * (the emulated format it runs beside). */
void f32_exact_layers_match(const vijp_format *E, const vijp_format *S, vijp_rng *rng);

#endif

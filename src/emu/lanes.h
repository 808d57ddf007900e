/* The emulated dense products, many outputs at once: C = A·B where every
 * entry is the oracle's dot product in a narrow format (vo_madd from +0,
 * terms in ascending order), for src/emu/dense.c.
 *
 * One SIMD lane per output row: column t of A is a contiguous load, B's
 * entry a broadcast, and each lane performs exactly the scalar sequence of
 * roundings of its own dot product, so every set gives the same bits as the
 * portable one (lanes.c), which is emu.h's scalar code itself.  Three kinds
 * of arithmetic cover the formats vijp_emu_applies accepts:
 *
 *   fused_f  acc := fma(a, b, acc) rounded once to binary32: the mixed
 *            formats (they all accumulate on binary32's grid, emu.h's
 *            vijp_emu_madd).  binary32's grid is IEEE single's, subnormals
 *            and overflow included, so the hardware's single-precision FMA
 *            (one correct rounding of the exact a·b + acc) is vijp_emu_fma
 *            lane by lane.  tf32's operand rounding is done by the caller,
 *            once per element (it is a function of the element alone).
 *   split_f  acc := acc + a·b, each rounded to binary32: binary32 itself
 *            (IEEE single multiply, then add: vijp_emu_mul, vijp_emu_add).
 *   split_d  the same on any other grid g (binary16, bfloat16), in double:
 *            a·b is exact, and emu.h's rounding (the shift constant) runs
 *            lane by lane on the bits (simd.h's round_v).
 *
 * The contract of every kernel: C[i + c·ldc] = dot over t < K of
 * A[i + t·lda] and B[t·bst + c·bsc], for i < m and c < ncols.  m, lda and
 * ldc are multiples of VIJP_EMU_PAD_F floats (VIJP_EMU_PAD_D doubles), so
 * the SIMD sets need no remainder rows: the caller pads A with zeros and
 * drops C's extra rows (a padded lane computes its own, unused, value).
 * The elimination step of the solves (axpy_d) runs the same way, one lane
 * per entry of the row it updates.  Only src/emu/ uses this file. */
#ifndef VIJP_EMU_LANES_H
#define VIJP_EMU_LANES_H

#include "emu.h"
#include <stddef.h>

#define VIJP_EMU_PAD_F 32 /* two AVX-512 vectors of floats */
#define VIJP_EMU_PAD_D 16 /* two AVX-512 vectors of doubles */

typedef struct {
    const char *name;
    void (*fused_f)(size_t m, size_t ncols, size_t K, const float *A, size_t lda, const float *B, size_t bst,
                    size_t bsc, float *C, size_t ldc);
    void (*split_f)(size_t m, size_t ncols, size_t K, const float *A, size_t lda, const float *B, size_t bst,
                    size_t bsc, float *C, size_t ldc);
    void (*split_d)(size_t m, size_t ncols, size_t K, const double *A, size_t lda, const double *B, size_t bst,
                    size_t bsc, double *C, size_t ldc, vijp_emu_grid g);
    /* y[k] := y[k] − t·x[k] for k < n, the product and the difference each
     * rounded to g: the elimination step of vo_ge_solve (dense.c), one
     * lane per k (no alignment or padding asked). */
    void (*axpy_d)(size_t n, double t, const double *x, double *y, vijp_emu_grid g);
    /* axpy_d for c = 0, 1, …, k − 1 in turn, with t[c] and the row x +
     * c·ldx: each y[j] takes the k steps in that order, as k calls would
     * give it, its value kept in a register between them (the solve's
     * trailing update: a panel's steps on one row, dense.c). */
    void (*axpy_many_d)(size_t n, size_t k, const double *t, const double *x, size_t ldx, double *y,
                        vijp_emu_grid g);
} vijp_emu_lanes;

/* Set i: 0 ref (portable), 1 avx2, 2 avx512; NULL where this build or CPU
 * lacks it (the kernel table's detection, src/kernels/kernels.h). */
#define VIJP_EMU_LANES_COUNT 3
const vijp_emu_lanes *vijp_emu_lanes_set(int i);
/* The set the operators run on: the kernel table's choice (VIJP_KERNELS=ref
 * the portable loops, avx2 avx2, otherwise the widest the CPU has).  Every
 * set gives the same bits, so the choice changes speed only. */
const vijp_emu_lanes *vijp_emu_lanes_active(void);

/* Which of the three kinds f's products are (above), or LANES_NONE where
 * none fits (then dense.c runs the scalar loops). */
typedef enum { VIJP_EMU_LANES_NONE, VIJP_EMU_FUSED_F, VIJP_EMU_SPLIT_F, VIJP_EMU_SPLIT_D } vijp_emu_lanes_kind;

static inline vijp_emu_lanes_kind vijp_emu_lanes_kind_of(const vijp_format *f)
{
    vijp_emu_grid g = vijp_emu_arith(f);
    int binary32 = g.p == 24 && g.emin == -148 && g.emax == 128; /* IEEE single's grid, MPFR's exponents */
    if (f->mixed) return binary32 ? VIJP_EMU_FUSED_F : VIJP_EMU_LANES_NONE;
    return binary32 ? VIJP_EMU_SPLIT_F : VIJP_EMU_SPLIT_D;
}

#endif

/* The SIMD sets of the emulated dense products (lanes.h), written once with
 * GCC/Clang vector extensions over VW doubles (2·VW floats) and compiled per
 * instruction set by avx2/lanes.c (VW = 4) and avx512/lanes.c (VW = 8),
 * each with its directory's target flags (mk/lib.mk).
 *
 * One lane per output row, each doing its own dot product's scalar sequence
 * (lanes.c) with the same IEEE operations: the bits are ref's, which
 * tests/t-emu-lanes.c checks for every set against the oracles.  A block is
 * two vectors of rows by up to four columns of C (eight independent chains
 * of dependent roundings in flight); rows need no remainder (lanes.h pads
 * them), columns left over go one at a time.  Vector + and × are the IEEE
 * operations lane by lane; -ffp-contract=off keeps them unfused, and the
 * fused operation is explicit: the single-precision FMA (the mixed
 * formats).  round_v and the split_d kernels hold for grids narrower than
 * binary64's only; nothing hands them that grid. */
#ifndef VIJP_EMU_SIMD_H
#define VIJP_EMU_SIMD_H

#include "emu/lanes.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VF (2 * VW) /* floats per vector */
typedef double vd __attribute__((vector_size(VW * 8)));
typedef int64_t vm __attribute__((vector_size(VW * 8)));
typedef uint64_t vu __attribute__((vector_size(VW * 8)));
typedef float vf __attribute__((vector_size(VW * 8)));
#if VW == 4
static inline vf vfmaf(vf a, vf b, vf c) { return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c); }
#elif VW == 8
static inline vf vfmaf(vf a, vf b, vf c) { return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
#else
#error "VW must be 4 or 8"
#endif

static inline vf load_f(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline vd load_d(const double *p)
{
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
/* x in every lane; x − (+0) is x, −0 included (x + 0 would turn −0 into +0). */
static inline vf splat_f(float x) { return x - (vf){0}; }
static inline vd splat_d(double x) { return x - (vd){0}; }
static inline vm max_m(vm a, vm b) { vm gt = a > b; return (gt & a) | (~gt & b); }
static inline vm min_m(vm a, vm b) { vm lt = a < b; return (lt & a) | (~lt & b); }

/* vijp_emu_round lane by lane: the same shift constant 1.5·2^(k+52) on the
 * same quantum k = max(e − p, emin − 1), so a finite lane gets the scalar
 * function's value by the argument beside it.  The scalar code's branches
 * become masks: ±0 and binary64 subnormals fall out of the arithmetic (the
 * quantum is the grid's smallest, and (|x| + C) − C is 0 for |x| below half
 * of it); k is clamped at emax so that C stays finite for the lanes that
 * overflow anyway (e > emax: there the result is |x| + Inf, which is Inf,
 * or NaN for a NaN lane, as the scalar code's NaN returns x). */
static inline vd round_v(vd x, vijp_emu_grid g)
{
    vm bits = (vm)x, sign = bits & INT64_MIN;
    vm e = (vm)(((vu)bits >> 52) & 0x7ff) - 1022;
    vm k = min_m(max_m(e - g.p, (vm){0} + (g.emin - 1)), (vm){0} + g.emax);
    vd c = (vd)(((k + 1075) << 52) | (INT64_C(1) << 51));
    vd ax = (vd)(bits & INT64_MAX), r = (ax + c) - c;
    double big;
    uint64_t bigbits = (uint64_t)(g.emax + 1023) << 52; /* 2^emax */
    memcpy(&big, &bigbits, sizeof big);
    vm over = (e > g.emax) | (r >= big);
    r = (vd)((over & (vm)(ax + (double)INFINITY)) | (~over & (vm)r));
    return (vd)((vm)r | sign);
}

/* One kind's kernel: blocks of two vectors of rows by NC = 4 columns, then
 * single columns.  STEP(acc, a, b) is one term, lane by lane. */
#define EMU_LANES_KERNEL(NAME, T, VT, LOAD, SPLAT, STEP, GRID_PARAM)                                              \
    static void NAME(size_t m, size_t ncols, size_t K, const T *A, size_t lda, const T *B, size_t bst,            \
                     size_t bsc, T *C, size_t ldc GRID_PARAM)                                                    \
    {                                                                                                             \
        enum { L = sizeof(VT) / sizeof(T) };                                                                      \
        size_t c = 0;                                                                                             \
        for (; c + 4 <= ncols; c += 4)                                                                            \
            for (size_t i = 0; i < m; i += 2 * L) {                                                               \
                VT p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0}, q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};                \
                const T *b = B + c * bsc;                                                                         \
                for (size_t t = 0; t < K; t++, b += bst) {                                                        \
                    VT a0 = LOAD(A + i + t * lda), a1 = LOAD(A + i + L + t * lda);                                \
                    VT b0 = SPLAT(b[0]), b1 = SPLAT(b[bsc]), b2 = SPLAT(b[2 * bsc]), b3 = SPLAT(b[3 * bsc]);      \
                    p0 = STEP(p0, a0, b0), q0 = STEP(q0, a1, b0);                                                 \
                    p1 = STEP(p1, a0, b1), q1 = STEP(q1, a1, b1);                                                 \
                    p2 = STEP(p2, a0, b2), q2 = STEP(q2, a1, b2);                                                 \
                    p3 = STEP(p3, a0, b3), q3 = STEP(q3, a1, b3);                                                 \
                }                                                                                                 \
                T *o = C + i + c * ldc;                                                                           \
                memcpy(o, &p0, sizeof p0), memcpy(o + L, &q0, sizeof q0), o += ldc;                               \
                memcpy(o, &p1, sizeof p1), memcpy(o + L, &q1, sizeof q1), o += ldc;                               \
                memcpy(o, &p2, sizeof p2), memcpy(o + L, &q2, sizeof q2), o += ldc;                               \
                memcpy(o, &p3, sizeof p3), memcpy(o + L, &q3, sizeof q3);                                         \
            }                                                                                                     \
        for (; c < ncols; c++)                                                                                    \
            for (size_t i = 0; i < m; i += 2 * L) {                                                               \
                VT p0 = {0}, q0 = {0};                                                                            \
                const T *b = B + c * bsc;                                                                         \
                for (size_t t = 0; t < K; t++, b += bst) {                                                        \
                    VT b0 = SPLAT(b[0]);                                                                          \
                    p0 = STEP(p0, LOAD(A + i + t * lda), b0), q0 = STEP(q0, LOAD(A + i + L + t * lda), b0);       \
                }                                                                                                 \
                memcpy(C + i + c * ldc, &p0, sizeof p0), memcpy(C + i + L + c * ldc, &q0, sizeof q0);             \
            }                                                                                                     \
    }

/* The three kinds' terms (lanes.h): one rounding of a·b + acc to binary32;
 * a·b then + acc, each rounded to binary32; the same on grid g in double. */
#define STEP_FUSED(acc, a, b) vfmaf((a), (b), (acc))
#define STEP_SPLIT_F(acc, a, b) ((acc) + (a) * (b))
#define STEP_SPLIT_D(acc, a, b) round_v((acc) + round_v((a) * (b), g), g)
#define NO_GRID
#define WITH_GRID , vijp_emu_grid g

EMU_LANES_KERNEL(simd_fused_f, float, vf, load_f, splat_f, STEP_FUSED, NO_GRID)
EMU_LANES_KERNEL(simd_split_f, float, vf, load_f, splat_f, STEP_SPLIT_F, NO_GRID)
EMU_LANES_KERNEL(simd_split_d, double, vd, load_d, splat_d, STEP_SPLIT_D, WITH_GRID)

/* VW floats: a vector of doubles converted. */
typedef float vh __attribute__((vector_size(VW * 4)));

/* binary32's grid in MPFR's convention (emu.h): p 24, smallest subnormal
 * 2^-149, largest finite below 2^128. */
static inline int grid_is_binary32(vijp_emu_grid g) { return g.p == 24 && g.emin == -148 && g.emax == 128; }

/* lanes.h's axpy_d: whole vectors, then the last entries by emu.h's scalar
 * operations (the same sequence).  On binary32's grid, whose values t, x
 * and y are (the solve's operands: the format's values and the results of
 * its operations), the rounded product and difference are float's × and −
 * lane by lane: each correctly rounded to nearest even, with binary32's
 * subnormals and overflow to ±Inf, which is what round_v gives for the
 * exact double product (at most 48 bits) and for the double difference
 * (double rounding through binary64 is innocuous for + − × ÷ of binary32
 * values: 53 >= 2·24 + 2, Figueroa 1995).  The conversions are exact both
 * ways, and half-width vectors skip round_v's two passes. */
static void simd_axpy_d(size_t n, double t, const double *x, double *y, vijp_emu_grid g)
{
    size_t k = 0;
    if (grid_is_binary32(g)) {
        vh tf = (float)t - (vh){0}; /* splat; −0 kept, as splat_d */
        for (; k + VW <= n; k += VW) {
            vh xf = __builtin_convertvector(load_d(x + k), vh), yf = __builtin_convertvector(load_d(y + k), vh);
            vd r = __builtin_convertvector(yf - tf * xf, vd);
            memcpy(y + k, &r, sizeof r);
        }
    }
    vd tv = splat_d(t);
    for (; k + VW <= n; k += VW) {
        vd r = round_v(load_d(y + k) - round_v(tv * load_d(x + k), g), g);
        memcpy(y + k, &r, sizeof r);
    }
    for (; k < n; k++) y[k] = vijp_emu_elim_step(y[k], t, x[k], g);
}

/* lanes.h's axpy_many_d: simd_axpy_d's lanes, each vector of y loaded once
 * and taking the k steps in order before it is stored (on binary32's grid
 * kept as floats between them: the conversions are exact). */
static void simd_axpy_many_d(size_t n, size_t k, const double *t, const double *x, size_t ldx, double *y,
                             vijp_emu_grid g)
{
    size_t j = 0;
    if (grid_is_binary32(g)) {
        /* four vectors of y at a time: four independent chains of k steps,
         * so that a step's latency does not serialise the loop */
        for (; j + 4 * VW <= n; j += 4 * VW) {
            vh y0 = __builtin_convertvector(load_d(y + j), vh), y1 = __builtin_convertvector(load_d(y + j + VW), vh);
            vh y2 = __builtin_convertvector(load_d(y + j + 2 * VW), vh);
            vh y3 = __builtin_convertvector(load_d(y + j + 3 * VW), vh);
            for (size_t c = 0; c < k; c++) {
                const double *xc = x + c * ldx + j;
                vh tf = (float)t[c] - (vh){0};
                y0 = y0 - tf * __builtin_convertvector(load_d(xc), vh);
                y1 = y1 - tf * __builtin_convertvector(load_d(xc + VW), vh);
                y2 = y2 - tf * __builtin_convertvector(load_d(xc + 2 * VW), vh);
                y3 = y3 - tf * __builtin_convertvector(load_d(xc + 3 * VW), vh);
            }
            vd r0 = __builtin_convertvector(y0, vd), r1 = __builtin_convertvector(y1, vd);
            vd r2 = __builtin_convertvector(y2, vd), r3 = __builtin_convertvector(y3, vd);
            memcpy(y + j, &r0, sizeof r0), memcpy(y + j + VW, &r1, sizeof r1);
            memcpy(y + j + 2 * VW, &r2, sizeof r2), memcpy(y + j + 3 * VW, &r3, sizeof r3);
        }
        for (; j + VW <= n; j += VW) {
            vh yf = __builtin_convertvector(load_d(y + j), vh);
            for (size_t c = 0; c < k; c++) {
                vh tf = (float)t[c] - (vh){0}, xf = __builtin_convertvector(load_d(x + c * ldx + j), vh);
                yf = yf - tf * xf;
            }
            vd r = __builtin_convertvector(yf, vd);
            memcpy(y + j, &r, sizeof r);
        }
    }
    for (; j + VW <= n; j += VW) {
        vd yv = load_d(y + j);
        for (size_t c = 0; c < k; c++) yv = round_v(yv - round_v(splat_d(t[c]) * load_d(x + c * ldx + j), g), g);
        memcpy(y + j, &yv, sizeof yv);
    }
    for (; j < n; j++)
        for (size_t c = 0; c < k; c++) y[j] = vijp_emu_elim_step(y[j], t[c], x[c * ldx + j], g);
}

#endif

/* One source, two widths: the SIMD kernels are written once with GCC/Clang
 * vector extensions over VW doubles (VFW floats) and compiled per instruction
 * set by src/kernels/avx2/kernels.c (VW = 4) and src/kernels/avx512/kernels.c
 * (VW = 8), each file with its own target flags (Makefile).  Only what the
 * extensions cannot say (movemask, fma, SLEEF's entry points) is per width.
 * Vector +, −, ×, / and comparisons are the IEEE operations of the scalar
 * code lane by lane; -ffp-contract=off keeps them unfused. */
#ifndef VIJP_KERNELS_SIMD_VEC_H
#define VIJP_KERNELS_SIMD_VEC_H

#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <stdint.h>
#include <string.h>

#if VW == 4
#define VFW 8
typedef double vd __attribute__((vector_size(32)));
typedef int64_t vm __attribute__((vector_size(32)));
typedef float vf __attribute__((vector_size(32)));
typedef int32_t vmf __attribute__((vector_size(32)));
typedef float vfh __attribute__((vector_size(16))); /* VW floats: one vd converted */
static inline uint64_t movemask_d(vm m) { return (uint64_t)_mm256_movemask_pd((__m256d)m); }
static inline uint64_t movemask_f(vmf m) { return (uint64_t)_mm256_movemask_ps((__m256)m); }
static inline vd vfma(vd a, vd b, vd c) { return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c); }
#define V_EXP(x) ((vd)Sleef_expd4_u10avx2((__m256d)(x)))
/* Lane permutations of 4 doubles as 8 int32 indices (vpermd), by mask m:
 * compress moves the lanes set in m to the front, in order; expand moves
 * the first popcount(m) lanes to the lanes set in m. */
static const int32_t compress_lut[16][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 0, 0, 0, 0, 0, 0},
    {2, 3, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 3, 0, 0, 0, 0},
    {4, 5, 0, 0, 0, 0, 0, 0},
    {0, 1, 4, 5, 0, 0, 0, 0},
    {2, 3, 4, 5, 0, 0, 0, 0},
    {0, 1, 2, 3, 4, 5, 0, 0},
    {6, 7, 0, 0, 0, 0, 0, 0},
    {0, 1, 6, 7, 0, 0, 0, 0},
    {2, 3, 6, 7, 0, 0, 0, 0},
    {0, 1, 2, 3, 6, 7, 0, 0},
    {4, 5, 6, 7, 0, 0, 0, 0},
    {0, 1, 4, 5, 6, 7, 0, 0},
    {2, 3, 4, 5, 6, 7, 0, 0},
    {0, 1, 2, 3, 4, 5, 6, 7}};
static const int32_t expand_lut[16][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0},
    {0, 1, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 1, 0, 0, 0, 0},
    {0, 1, 2, 3, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, 1, 0, 0},
    {0, 1, 0, 0, 2, 3, 0, 0},
    {0, 0, 0, 1, 2, 3, 0, 0},
    {0, 1, 2, 3, 4, 5, 0, 0},
    {0, 0, 0, 0, 0, 0, 0, 1},
    {0, 1, 0, 0, 0, 0, 2, 3},
    {0, 0, 0, 1, 0, 0, 2, 3},
    {0, 1, 2, 3, 0, 0, 4, 5},
    {0, 0, 0, 0, 0, 1, 2, 3},
    {0, 1, 0, 0, 2, 3, 4, 5},
    {0, 0, 0, 1, 2, 3, 4, 5},
    {0, 1, 2, 3, 4, 5, 6, 7}};
/* The first c lanes: the mask of a masked load or store of c values. */
static inline __m256i first_lanes(int c) { return _mm256_cmpgt_epi64(_mm256_set1_epi64x(c), _mm256_setr_epi64x(0, 1, 2, 3)); }
/* a with its lanes set in m replaced by p[0], p[1], … in order (no read past them). */
static inline vd expand_load_d(const double *p, uint64_t m, vd a)
{
    __m256d got = _mm256_maskload_pd(p, first_lanes(__builtin_popcountll(m)));
    __m256i idx = _mm256_loadu_si256((const __m256i *)expand_lut[m]);
    vd spread = (vd)_mm256_castsi256_pd(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(got), idx));
    vm in = ((vm){1, 2, 4, 8} & (int64_t)m) != 0;
    return (vd)((in & (vm)spread) | (~in & (vm)a));
}
/* relu_gather stages whole vectors in a buffer (elementwise.h): the lanes of
 * v set in m, packed, at p, which has room for a whole vector; their count.
 * All four lanes stored, the packed ones first: an unmasked store, since
 * AMD's vmaskmovpd store is microcoded (relu gather ran at ref's speed with
 * it in L1). */
#define COMPRESS_STORE_DIRECT 0
static inline size_t compress_full_d(double *p, uint64_t m, vd v)
{
    __m256i idx = _mm256_loadu_si256((const __m256i *)compress_lut[m]);
    _mm256_storeu_pd(p, _mm256_castsi256_pd(_mm256_permutevar8x32_epi32(_mm256_castpd_si256((__m256d)v), idx)));
    return (size_t)__builtin_popcountll(m);
}
/* binary32 (8 lanes): lane by lane. */
static inline size_t compress_full_f(float *p, uint64_t m, vf v)
{
    size_t c = 0;
    for (; m; m &= m - 1) p[c++] = v[__builtin_ctzll(m)];
    return c;
}
static inline vf expand_load_f(const float *p, uint64_t m, vf a)
{
    for (size_t c = 0; m; m &= m - 1) a[__builtin_ctzll(m)] = p[c++];
    return a;
}
#define V_LOG1P(x) ((vd)Sleef_log1pd4_u10avx2((__m256d)(x)))
#define V_TANH(x) ((vd)Sleef_tanhd4_u10avx2((__m256d)(x)))
/* Table lookups (erfc_v): entry i of the rows the lanes picked, as one
 * vector (register inserts, no store-to-load round trip through memory). */
static inline vd lane_entries(const double *const row[VW], int i)
{
    return (vd)_mm256_set_pd(row[3][i], row[2][i], row[1][i], row[0][i]);
}
#elif VW == 8
#define VFW 16
typedef double vd __attribute__((vector_size(64)));
typedef int64_t vm __attribute__((vector_size(64)));
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vmf __attribute__((vector_size(64)));
typedef float vfh __attribute__((vector_size(32)));
static inline uint64_t movemask_d(vm m) { return (uint64_t)_mm512_movepi64_mask((__m512i)m); }
static inline uint64_t movemask_f(vmf m) { return (uint64_t)_mm512_movepi32_mask((__m512i)m); }
static inline vd vfma(vd a, vd b, vd c) { return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c); }
#define V_EXP(x) ((vd)Sleef_expd8_u10avx512f((__m512d)(x)))
/* Store the lanes of v set in m, packed, at p; their count.  And a with its
 * lanes set in m replaced by p[0], p[1], … (AVX-512's own compress/expand). */
static inline size_t compress_store_d(double *p, uint64_t m, vd v)
{
    int c = __builtin_popcountll(m);
    _mm512_mask_storeu_pd(p, (__mmask8)((1u << c) - 1), _mm512_maskz_compress_pd((__mmask8)m, (__m512d)v));
    return (size_t)c;
}
static inline vd expand_load_d(const double *p, uint64_t m, vd a) { return (vd)_mm512_mask_expandloadu_pd((__m512d)a, (__mmask8)m, p); }
static inline size_t compress_store_f(float *p, uint64_t m, vf v)
{
    int c = __builtin_popcountll(m);
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << c) - 1), _mm512_maskz_compress_ps((__mmask16)m, (__m512)v));
    return (size_t)c;
}
static inline vf expand_load_f(const float *p, uint64_t m, vf a) { return (vf)_mm512_mask_expandloadu_ps((__m512)a, (__mmask16)m, p); }
/* relu_gather stores through compress_store_*: compressed in a register,
 * then a store masked to the packed lanes (the memory form of vcompress is
 * slow on some cores: Zen 4).  Measured (bench-kernels, Zen 4, relu gather
 * avx512 at 1K / 16K / 256K units): 35 / 28 / 19 GB/s through a staging
 * buffer, AVX2's way (the reloads of just-stored, misaligned vectors
 * stall), 54-59 / 68-72 / 50-56 GB/s directly; at 8M both are at the copy
 * bandwidth.  AVX2 keeps the buffer: its masked store is microcoded on AMD. */
#define COMPRESS_STORE_DIRECT 1
#define V_LOG1P(x) ((vd)Sleef_log1pd8_u10avx512f((__m512d)(x)))
#define V_TANH(x) ((vd)Sleef_tanhd8_u10avx512f((__m512d)(x)))
static inline vd lane_entries(const double *const row[VW], int i)
{
    return (vd)_mm512_set_pd(row[7][i], row[6][i], row[5][i], row[4][i], row[3][i], row[2][i], row[1][i], row[0][i]);
}
#else
#error "VW must be 4 (AVX2) or 8 (AVX-512)"
#endif

/* Unsigned lanes, for logical shifts of a double's bits. */
typedef uint64_t vu __attribute__((vector_size(sizeof(vd))));

/* Unaligned loads and stores (memcpy: no aliasing or alignment claims). */
static inline vd load_d(const double *p) { vd v; memcpy(&v, p, sizeof v); return v; }
static inline void store_d(double *p, vd v) { memcpy(p, &v, sizeof v); }
static inline vf load_f(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void store_f(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* s in every lane: s − (+0) is s for every s, −0 included (0 + s is not). */
static inline vd splat_d(double s) { return s - (vd){0}; }
static inline vf splat_f(float s) { return s - (vf){0}; }
/* m ? a : b lane by lane (m all ones or all zeros per lane): a bit select. */
static inline vd sel_d(vm m, vd a, vd b) { return (vd)((m & (vm)a) | (~m & (vm)b)); }
static inline vf sel_f(vmf m, vf a, vf b) { return (vf)((m & (vmf)a) | (~m & (vmf)b)); }
static inline vd abs_d(vd x) { return (vd)((vm)x & ~(vm)splat_d(-0.0)); }

#endif

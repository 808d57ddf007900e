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
#define V_LOG1P(x) ((vd)Sleef_log1pd4_u10avx2((__m256d)(x)))
#define V_TANH(x) ((vd)Sleef_tanhd4_u10avx2((__m256d)(x)))
#define V_ERFC(x) ((vd)Sleef_erfcd4_u15avx2((__m256d)(x)))
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
#define V_LOG1P(x) ((vd)Sleef_log1pd8_u10avx512f((__m512d)(x)))
#define V_TANH(x) ((vd)Sleef_tanhd8_u10avx512f((__m512d)(x)))
#define V_ERFC(x) ((vd)Sleef_erfcd8_u15avx512f((__m512d)(x)))
#else
#error "VW must be 4 (AVX2) or 8 (AVX-512)"
#endif

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

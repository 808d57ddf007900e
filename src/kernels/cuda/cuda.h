/* CUDA kernels: a small C API of its own, which the kernel table
 * (src/kernels/kernels.h, VIJP_KERNELS=cuda) wraps.
 *
 * Built from the .cu files of src/kernels/cuda/ into build/libvijp-cuda.a
 * when the Makefile finds nvcc; otherwise (or with CUDA=0, GENERIC=1,
 * SANITIZE=1) src/kernels/cuda/none.c provides the same functions, which
 * fail with "built without CUDA".  Not part of libvijp (Makefile: cuBLAS and
 * cuSOLVER cost ~0.8 GB of address space at load; load them on demand).
 *
 * Pointers: every array argument of a kernel is DEVICE memory (allocate with
 * vijp_cuda_alloc, move data with vijp_cuda_upload / vijp_cuda_download):
 * the benchmark must measure HBM, not PCIe, and a net keeps its activations on
 * the GPU between layers.  A wrapper that takes host arrays copies around the
 * call.  Layouts are the CPU layers': a batch of B samples is B columns,
 * column-major (unit i of sample j at i + j·width); W is m × n column-major.
 *
 * Execution: kernels run in order on the default stream; a kernel returns
 * once it is queued (launch errors are reported, errors during execution by
 * the next call that synchronizes: vijp_cuda_download or vijp_cuda_sync).
 * Not thread-safe per vijp_cuda_blas handle (cuBLAS's rule).
 *
 * Error bounds are stated next to each kernel and tested in tests/t-cuda.c
 * against the MPFR oracles (u = 2^-53 in double, 2^-24 in float). */
#ifndef VIJP_KERNELS_CUDA_H
#define VIJP_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "vijp/error.h"

/* 1 when the kernels can run here: built with CUDA and a GPU of compute
 * capability >= 8.0 is visible.  Otherwise 0 and a one-line reason in why
 * ("built without CUDA", "no CUDA device: cudaGetDeviceCount: ...", ...). */
int vijp_cuda_available(char *why, size_t n);
/* The device's name and the figures the benchmark quotes; 0 or an error. */
VIJP_MUST_CHECK int vijp_cuda_device_info(char *name, size_t n, double *hbm_gib, vijp_error *err);

/* Device memory. */
VIJP_MUST_CHECK int vijp_cuda_alloc(void **dev, size_t bytes, vijp_error *err);
void vijp_cuda_free(void *dev); /* NULL is fine */
VIJP_MUST_CHECK int vijp_cuda_upload(void *dev, const void *host, size_t bytes, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_download(void *host, const void *dev, size_t bytes, vijp_error *err);
/* Device to device (cudaMemcpy): the benchmark's HBM reference. */
VIJP_MUST_CHECK int vijp_cuda_copy(void *dst, const void *src, size_t bytes, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_sync(vijp_error *err);

/* ---- Leaky ReLU, slope alpha: y = x·(x > 0 ? 1 : α) (src/layers/leaky_relu.c).
 * Phase-1 sign bits: bit i % 32 of active[i / 32] is [x_i > 0] (NaN: 0, the
 * CPU slope() too); vijp_cuda_sign_words(n) words, the unused high bits of
 * the last one are 0.  vjp: gx = gy·s_i; vijp: gy = gx / s_i, s_i = 1 or α.
 * Bound: 0 ulps.  Each output is one IEEE multiply or divide (or a copy),
 * exactly as the CPU layer and the MPFR oracle (oracles/elementwise.c) do it:
 * bit-identical to both (subnormals kept: no FTZ in either precision). */
static inline size_t vijp_cuda_sign_words(size_t n) { return n / 32 + (n % 32 != 0); }
VIJP_MUST_CHECK int vijp_cuda_leaky_forward_d(size_t n, double alpha, const double *x, double *y, uint32_t *active,
                                              vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_leaky_vjp_d(size_t n, double alpha, const uint32_t *active, const double *gy, double *gx,
                                          vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_leaky_vijp_d(size_t n, double alpha, const uint32_t *active, const double *gx, double *gy,
                                           vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_leaky_forward_f(size_t n, float alpha, const float *x, float *y, uint32_t *active,
                                              vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_leaky_vjp_f(size_t n, float alpha, const uint32_t *active, const float *gy, float *gx,
                                          vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_leaky_vijp_f(size_t n, float alpha, const uint32_t *active, const float *gx, float *gy,
                                           vijp_error *err);

/* ---- Smooth activations: f and f′ together (nested forward AD), n units.
 * Formulas and bounds: src/kernels/cuda/act_math.h (double: the CPU layers'
 * bounds, kf·u|f| and kd·u|f′| away from the zero of f′, plus 2^-1022;
 * float: the double result rounded once, within (1 + 2^-20)·u_24 + 2^-149). */
typedef enum {
    VIJP_CUDA_TANH, VIJP_CUDA_SIGMOID, VIJP_CUDA_SOFTPLUS, VIJP_CUDA_SILU, VIJP_CUDA_GELU, VIJP_CUDA_MISH,
    VIJP_CUDA_NACT
} vijp_cuda_act;
VIJP_MUST_CHECK int vijp_cuda_act_d(vijp_cuda_act act, size_t n, const double *x, double *f, double *df,
                                    vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_act_f(vijp_cuda_act act, size_t n, const float *x, float *f, float *df, vijp_error *err);

/* ---- Dense y = W x + b through cuBLAS / cuSOLVER (src/kernels/cuda/dense.cu),
 * batched: X n × B, Y m × B, W m × n, b m, all column-major.  A handle holds
 * the cuBLAS and cuSOLVER contexts and a workspace. */
typedef struct vijp_cuda_blas vijp_cuda_blas;
VIJP_MUST_CHECK int vijp_cuda_blas_open(vijp_cuda_blas **h, vijp_error *err);
void vijp_cuda_blas_close(vijp_cuda_blas *h); /* NULL is fine */

/* Forward Y = W X + b: b broadcast into Y, then gemm with β = 1.  cuBLAS's
 * summation order (and its use of FMA) is unspecified, so the bound is the
 * order-free one (Higham, Thm 3.5, any order, FMA or not):
 *   |Ŷ − Y| <= γ_{n+1} (|W||X| + |b|),  γ_k = k·u/(1 − k·u).
 * vjp Gx = Wᵀ Gy:  |Ĝx − Gx| <= γ_m |W|ᵀ|Gy|.  (No bias, no data of X.) */
VIJP_MUST_CHECK int vijp_cuda_dense_forward_d(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const double *W,
                                              const double *b, const double *X, double *Y, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_dense_vjp_d(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const double *W,
                                          const double *Gy, double *Gx, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_dense_forward_f(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const float *W,
                                              const float *b, const float *X, float *Y, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_dense_vjp_f(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const float *W,
                                          const float *Gy, float *Gx, vijp_error *err);

/* vijp: Gy (m × B) with Wᵀ Gy = Gx (n × B), the CPU layer's contract
 * (src/layers/dense.c, oracles/dense.c):
 *   m == n: LU with partial pivoting of W (getrf), then Wᵀ Gy = Gx (getrs);
 *   m <  n: Wᵀ = QR (geqrf of Wᵀ), Gy = R⁻¹ (Qᵀ Gx)[0:m] (ormqr, trsm);
 *   m >  n: W = QR, Gy = Q [R⁻ᵀ Gx; frag] (trsm, ormqr), frag (m − n) × B
 *           the cokernel coordinates the forward pass stored (NULL: zeros).
 * Bounds (normwise, backward stable solvers): with ε the backward error,
 * ‖Ĝy − Gy‖ <= κ(W)·ε/(1 − κ(W)·ε)·‖Gy‖ per column, where
 *   LU (Higham Thm 9.4 + Lemma 9.6): ε <= γ_{3n}(1 + 2(n² − n)ρ_n) in ∞-norm,
 *      ρ_n the growth factor (<= 2 for a diagonally dominant W, Thm 9.9);
 *   QR (Higham Thm 19.10, 20.3): ε <= γ̃_{mn} = c·m·n·u/(1 − c·m·n·u) in the
 *      2-norm with c a small constant (c = 8 in t-cuda, an assumption),
 *      and for this least-squares solve the factor 2 + (κ + 1)‖r‖/(‖W‖‖Gy‖)
 *      of Higham Thm 20.1 (r = Gx − Wᵀ Gy; 0 for an exact Gx).
 * Returns VIJP_ESINGULAR when a pivot or a diagonal of R is exactly 0. */
VIJP_MUST_CHECK int vijp_cuda_dense_vijp_d(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const double *W,
                                           const double *Gx, const double *frag, double *Gy, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_dense_vijp_f(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const float *W,
                                           const float *Gx, const float *frag, float *Gy, vijp_error *err);

/* C = A·Bm (A m × k, Bm k × n, C m × n; cublasDgemm, nothing else):
 * the compute reference the benchmark compares the dense kernels with. */
VIJP_MUST_CHECK int vijp_cuda_gemm_d(vijp_cuda_blas *h, size_t m, size_t n, size_t k, const double *A, const double *Bm,
                                     double *C, vijp_error *err);

/* C := alpha·op(A)·op(B) + beta·C, op(X) = Xᵀ where its flag is nonzero,
 * column-major (BLAS's gemm): cublasDgemm / cublasSgemm, for the kernel
 * set's gemm_d and gemm_f (kernel_set.c).  Bound: the order-free γ_k of
 * Higham Thm 3.5, as the forward's above. */
VIJP_MUST_CHECK int vijp_cuda_gemm_ex_d(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, double alpha,
                                        const double *A, size_t lda, const double *Bm, size_t ldb, double beta,
                                        double *C, size_t ldc, vijp_error *err);
VIJP_MUST_CHECK int vijp_cuda_gemm_ex_f(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                                        const float *A, size_t lda, const float *Bm, size_t ldb, float beta, float *C,
                                        size_t ldc, vijp_error *err);
/* The same with A and B holding values of a narrow storage format (exact in
 * float): converted to it on the device and multiplied by cublasGemmEx with
 * binary32 accumulation (CUBLAS_COMPUTE_32F, tensor cores allowed), what
 * bfloat16+binary32 and binary16+binary32 run on a GPU.  The products are
 * exact (11 × 11 significand bits fit in 24; normal range); the sums' order
 * and the tensor cores' block rounding are cuBLAS's: the bound of
 * vijp_cuda_dense_forward_bf16 below, γ' at 2^-22 per term. */
enum { VIJP_CUDA_BF16 = 1, VIJP_CUDA_F16 = 2 };
/* Elements a column-major rows × cols operand with leading dimension ld
 * spans: ld·(cols − 1) + rows (0 when empty).  op(A) of a gemm is m × k, so
 * A spans vijp_cuda_span(lda, ta ? k : m, ta ? m : k); likewise B and C. */
static inline size_t vijp_cuda_span(size_t ld, size_t rows, size_t cols)
{
    return rows && cols ? ld * (cols - 1) + rows : 0;
}
VIJP_MUST_CHECK int vijp_cuda_gemm_narrow(vijp_cuda_blas *h, int storage, int ta, int tb, size_t m, size_t n,
                                          size_t k, float alpha, const float *A, size_t lda, const float *Bm,
                                          size_t ldb, float beta, float *C, size_t ldc, vijp_error *err);

/* ---- bfloat16 storage, binary32 accumulation: Y = bf16(W X + b), every
 * array bfloat16 bit patterns (uint16_t).  cublasGemmEx with CUDA_R_16BF
 * inputs, CUDA_R_32F output and CUBLAS_COMPUTE_32F (tensor cores allowed),
 * then one kernel adds b in binary32 and rounds once to bfloat16 (RN-even).
 *
 * What the MPFR format `bfloat16+binary32` computes: exact products, binary32
 * sums in index order k = 0..n−1, b added last in binary32, one rounding to
 * bf16.  What the GPU does differently: the products are exact too (8 × 8
 * significand bits fit in binary32's 24; normal range assumed), but the order
 * of the binary32 sums is cuBLAS's and unspecified, and tensor cores add a
 * block of products in one step whose rounding is not specified as RN (on
 * V100–A100 the block's terms are aligned to the largest and truncated:
 * Fasi, Higham, Mikaitis, Pranesh 2021).  So we assume only that each term
 * (product, bias or running sum) loses less than one binary32 ulp of the
 * largest term when it is aligned, and the block's sum one more when it is
 * rounded: at most 2^-22 relative per term and per addition, γ' at 2^-22.
 * Then, with s = Σ_k w_k x_k + b exact and S = Σ_k |w_k x_k| + |b|:
 *   GPU:       |ŷ − s| <= u_8·|s| + (1 + u_8)·γ'_{n+1}·S,
 *   emulation: the same with RN sums (γ_{n+1} at 2^-24 < γ'_{n+1}),
 *   so |ŷ_gpu − ŷ_emul| <= 2·u_8·|s| + 2(1 + u_8)·γ'_{n+1}·S,
 * u_8 = 2^-8 (bf16's unit roundoff), γ'_k = k·2^-22/(1 − k·2^-22): at most
 * one or two bf16 ulps apart when S/|s| is moderate; equal unless s̃ lies
 * within γ'_{n+1}·S of a bf16 rounding boundary.  The workspace is the
 * handle's (m × B binary32). */
VIJP_MUST_CHECK int vijp_cuda_dense_forward_bf16(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const uint16_t *W,
                                                 const uint16_t *b, const uint16_t *X, uint16_t *Y, vijp_error *err);

#ifdef __cplusplus
}
#endif
#endif

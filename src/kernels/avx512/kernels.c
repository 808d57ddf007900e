/* The avx512 kernel set: the width-generic SIMD sources (src/kernels/simd/)
 * at VW = 8 doubles, compiled with this directory's target flags (Makefile). */
#define VW 8
#include "kernels/kernels.h"
#include "kernels/simd/elementwise.h"
#include "kernels/simd/activations.h"
#include "kernels/simd/drift.h"

/* gemm.c: the dense layer's products without packing (its comment says why) */
void vijp_kernels_avx512_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A,
                                size_t lda, const double *B, size_t ldb, double beta, double *C, size_t ldc);

const vijp_kernels vijp_kernels_avx512 = {
    .name = "avx512", VIJP_KERNEL_EXACT_ENTRIES(d), VIJP_KERNEL_EXACT_ENTRIES(f), SIMD_ACT_ENTRIES, .drift_d = drift_d,
    .gemm_d = vijp_kernels_avx512_gemm_d,
};

/* Reference matrix products (kernels.h: gemm_d, gemm_f): the BLAS the
 * library links (OpenBLAS on Debian), called as the dense layer always
 * called it.  Results depend on that BLAS build (its order of summation and
 * its FMAs), never on the kernel set, unless a set brings its own (cuda). */
#include "kernels/kernels.h"
#include <cblas.h>

void vijp_kernels_ref_gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                             const float *B, size_t ldb, float beta, float *C, size_t ldc);

void vijp_kernels_ref_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                             const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

void vijp_kernels_ref_gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                             const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* A mixed format's products: values of the storage format in float, so the
 * products are exact and sgemm's sums are the binary32 accumulation. */
void vijp_kernels_ref_gemm_mixed_f(int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                                   const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                                   size_t ldc)
{
    (void)storage;
    vijp_kernels_ref_gemm_f(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

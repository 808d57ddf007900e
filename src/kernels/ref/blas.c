/* Reference matrix products (kernels.h: gemm_d, gemm_f): the BLAS the
 * library links (OpenBLAS on Debian), called as the dense layer always
 * called it.  Results depend on that BLAS build (its order of summation and
 * its FMAs), never on the kernel set, unless a set brings its own (cuda). */
#include "kernels/kernels.h"
#include <cblas.h>

void vijp_kernels_ref_gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                             const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* C = a·bᵀ (one term, alpha 1, beta 0): the batch-1 parameter gradient of
 * a dense layer.  dgemm's beta = 0 path first zeroes C, a whole pass over
 * a fresh matrix (5% of a depth-256 dense:256 drift curve's CPU in perf,
 * half of it page faults), then adds each product to that zero; written
 * here as 0 + a_i·b_j, the same bits (the product rounded once, an exact
 * −0 made +0 as dgemm's sum into a zeroed C makes it; checked against
 * cblas_dgemm in t-kernels). */
static void outer_product(size_t m, size_t n, const double *a, size_t inca, const double *b, size_t incb, double *C,
                          size_t ldc)
{
    for (size_t j = 0; j < n; j++) {
        double bj = b[j * incb], *c = C + j * ldc;
        if (inca == 1)
            for (size_t i = 0; i < m; i++) c[i] = 0.0 + a[i] * bj;
        else
            for (size_t i = 0; i < m; i++) c[i] = 0.0 + a[i * inca] * bj;
    }
}

void vijp_kernels_ref_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                             const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    if (k == 1 && alpha == 1 && beta == 0) { /* A's column (ta: its row) times B's row (tb: its column) */
        outer_product(m, n, A, ta ? lda : 1, B, tb ? 1 : ldb, C, ldc);
        return;
    }
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

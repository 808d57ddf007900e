/* The CUDA API of cuda.h in a build without CUDA (no nvcc, CUDA=0,
 * GENERIC=1 or SANITIZE=1): unavailable, and every call fails with
 * VIJP_EUNSUPPORTED, so that callers link and decide at run time. */
#include "cuda.h"
#include <stdio.h>

#define NO_CUDA(err) vijp_fail(err, VIJP_EUNSUPPORTED, "built without CUDA")

int vijp_cuda_available(char *why, size_t n)
{
    snprintf(why, n, "built without CUDA (no nvcc, or CUDA=0, GENERIC=1 or SANITIZE=1)");
    return 0;
}

int vijp_cuda_device_info(char *name, size_t n, double *hbm_gib, vijp_error *err)
{
    snprintf(name, n, "none"), *hbm_gib = 0;
    return NO_CUDA(err);
}

int vijp_cuda_alloc(void **dev, size_t bytes, vijp_error *err) { (void)bytes, *dev = NULL; return NO_CUDA(err); }
void vijp_cuda_free(void *dev) { (void)dev; }
int vijp_cuda_upload(void *dev, const void *host, size_t bytes, vijp_error *err)
{ (void)dev, (void)host, (void)bytes; return NO_CUDA(err); }
int vijp_cuda_download(void *host, const void *dev, size_t bytes, vijp_error *err)
{ (void)dev, (void)host, (void)bytes; return NO_CUDA(err); }
int vijp_cuda_copy(void *dst, const void *src, size_t bytes, vijp_error *err)
{ (void)dst, (void)src, (void)bytes; return NO_CUDA(err); }
int vijp_cuda_sync(vijp_error *err) { return NO_CUDA(err); }

#define NO_LEAKY(S, T)                                                                                            \
    int vijp_cuda_leaky_forward_##S(size_t n, T alpha, const T *x, T *y, uint32_t *active, vijp_error *err)      \
    { (void)n, (void)alpha, (void)x, (void)y, (void)active; return NO_CUDA(err); }                               \
    int vijp_cuda_leaky_vjp_##S(size_t n, T alpha, const uint32_t *active, const T *gy, T *gx, vijp_error *err)  \
    { (void)n, (void)alpha, (void)active, (void)gy, (void)gx; return NO_CUDA(err); }                             \
    int vijp_cuda_leaky_vijp_##S(size_t n, T alpha, const uint32_t *active, const T *gx, T *gy, vijp_error *err) \
    { (void)n, (void)alpha, (void)active, (void)gy, (void)gx; return NO_CUDA(err); }
NO_LEAKY(d, double)
NO_LEAKY(f, float)

int vijp_cuda_act_d(vijp_cuda_act act, size_t n, const double *x, double *f, double *df, vijp_error *err)
{ (void)act, (void)n, (void)x, (void)f, (void)df; return NO_CUDA(err); }
int vijp_cuda_act_f(vijp_cuda_act act, size_t n, const float *x, float *f, float *df, vijp_error *err)
{ (void)act, (void)n, (void)x, (void)f, (void)df; return NO_CUDA(err); }

int vijp_cuda_blas_open(vijp_cuda_blas **h, vijp_error *err) { *h = NULL; return NO_CUDA(err); }
void vijp_cuda_blas_close(vijp_cuda_blas *h) { (void)h; }

#define NO_DENSE(S, T)                                                                                              \
    int vijp_cuda_dense_forward_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *b,       \
                                    const T *X, T *Y, vijp_error *err)                                             \
    { (void)h, (void)m, (void)n, (void)B, (void)W, (void)b, (void)X, (void)Y; return NO_CUDA(err); }               \
    int vijp_cuda_dense_vjp_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *Gy, T *Gx,   \
                                vijp_error *err)                                                                   \
    { (void)h, (void)m, (void)n, (void)B, (void)W, (void)Gy, (void)Gx; return NO_CUDA(err); }                      \
    int vijp_cuda_dense_vijp_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *Gx,         \
                                 const T *frag, T *Gy, vijp_error *err)                                            \
    { (void)h, (void)m, (void)n, (void)B, (void)W, (void)Gx, (void)frag, (void)Gy; return NO_CUDA(err); }
NO_DENSE(d, double)
NO_DENSE(f, float)

int vijp_cuda_gemm_d(vijp_cuda_blas *h, size_t m, size_t n, size_t k, const double *A, const double *Bm, double *C,
                     vijp_error *err)
{ (void)h, (void)m, (void)n, (void)k, (void)A, (void)Bm, (void)C; return NO_CUDA(err); }

int vijp_cuda_dense_forward_bf16(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const uint16_t *W,
                                 const uint16_t *b, const uint16_t *X, uint16_t *Y, vijp_error *err)
{ (void)h, (void)m, (void)n, (void)B, (void)W, (void)b, (void)X, (void)Y; return NO_CUDA(err); }

#define NO_GEMM(S, T)                                                                                              \
    int vijp_cuda_gemm_ex_##S(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, T alpha, const T *A, \
                              size_t lda, const T *Bm, size_t ldb, T beta, T *C, size_t ldc, vijp_error *err)      \
    {                                                                                                              \
        (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda, (void)Bm;         \
        (void)ldb, (void)beta, (void)C, (void)ldc;                                                                 \
        return NO_CUDA(err);                                                                                       \
    }
NO_GEMM(d, double)
NO_GEMM(f, float)

int vijp_cuda_gemm_narrow(vijp_cuda_blas *h, int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                          const float *A, size_t lda, const float *Bm, size_t ldb, float beta, float *C, size_t ldc,
                          vijp_error *err)
{
    (void)h, (void)storage, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda, (void)Bm;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return NO_CUDA(err);
}

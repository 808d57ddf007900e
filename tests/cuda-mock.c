/* A host stand-in for the CUDA API of src/kernels/cuda/cuda.h, linked under
 * src/kernels/cuda/kernel_set.c into build/libvijp-cuda-mock.so, so that
 * the cuda kernel set's wrappers (their copies in and out, extents, buffer
 * use, the order of their calls) run in `make check` on machines without a
 * GPU: the suites that test every set (t-kernels, t-b32set, t-mixedset) and
 * t-cuda-set's set tests load it through VIJP_CUDA_LIBRARY.
 *
 * "Device" memory is host memory of exactly the size asked for (so ASan, in
 * the SANITIZE build, sees any read past what a wrapper uploaded); the
 * kernels are transcriptions of elementwise.cu (leaky ReLU through packed
 * sign words) and act_math.h's host instantiation (the very formulas the GPU
 * runs), and the products are BLAS's, the narrow ones on operands rounded to
 * the storage format as dense.cu's conversion kernels round them.  What this
 * cannot test is the GPU itself: the .cu files' launch logic, cuBLAS's
 * arguments and the device arithmetic (t-cuda.c and t-cuda-dense.c, on a
 * GPU). */
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/act_math.h"
#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vijp_cuda_available(char *why, size_t n)
{
    snprintf(why, n, "the host mock (tests/cuda-mock.c)");
    return 1;
}

int vijp_cuda_alloc(void **dev, size_t bytes, vijp_error *err)
{
    *dev = malloc(bytes ? bytes : 1);
    return *dev ? 0 : vijp_fail(err, VIJP_EIO, "mock: out of memory");
}
void vijp_cuda_free(void *dev) { free(dev); }
int vijp_cuda_upload(void *dev, const void *host, size_t bytes, vijp_error *err)
{
    (void)err;
    memcpy(dev, host, bytes);
    return 0;
}
int vijp_cuda_download(void *host, const void *dev, size_t bytes, vijp_error *err)
{
    (void)err;
    memcpy(host, dev, bytes);
    return 0;
}

/* elementwise.cu: active bit = x > 0, y = x or x·α; the scale: g or g·α, g/α */
#define LEAKY(T, S)                                                                                                \
    int vijp_cuda_leaky_forward_##S(size_t n, T alpha, const T *x, T *y, uint32_t *active, vijp_error *err)       \
    {                                                                                                              \
        (void)err;                                                                                                 \
        memset(active, 0, vijp_cuda_sign_words(n) * sizeof *active);                                              \
        for (size_t i = 0; i < n; i++) {                                                                           \
            int pos = x[i] > 0;                                                                                    \
            y[i] = pos ? x[i] : x[i] * alpha;                                                                      \
            active[i / 32] |= (uint32_t)pos << (i % 32);                                                           \
        }                                                                                                          \
        return 0;                                                                                                  \
    }                                                                                                              \
    static void scale_##S(size_t n, T alpha, const uint32_t *active, const T *g, T *out, int divide)              \
    {                                                                                                              \
        for (size_t i = 0; i < n; i++)                                                                             \
            out[i] = (active[i / 32] >> (i % 32) & 1) ? g[i] : divide ? g[i] / alpha : g[i] * alpha;               \
    }                                                                                                              \
    int vijp_cuda_leaky_vjp_##S(size_t n, T alpha, const uint32_t *active, const T *gy, T *gx, vijp_error *err)   \
    {                                                                                                              \
        (void)err, scale_##S(n, alpha, active, gy, gx, 0);                                                         \
        return 0;                                                                                                  \
    }                                                                                                              \
    int vijp_cuda_leaky_vijp_##S(size_t n, T alpha, const uint32_t *active, const T *gx, T *gy, vijp_error *err)  \
    {                                                                                                              \
        (void)err, scale_##S(n, alpha, active, gx, gy, 1);                                                         \
        return 0;                                                                                                  \
    }
LEAKY(double, d)
LEAKY(float, f)

int vijp_cuda_act_d(vijp_cuda_act act, size_t n, const double *x, double *f, double *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    for (size_t i = 0; i < n; i++) vijp_am_eval((int)act, x[i], &f[i], &df[i]);
    return 0;
}
int vijp_cuda_act_f(vijp_cuda_act act, size_t n, const float *x, float *f, float *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    for (size_t i = 0; i < n; i++) vijp_am_eval_f((int)act, x[i], &f[i], &df[i]);
    return 0;
}

struct vijp_cuda_blas {
    int open;
};
int vijp_cuda_blas_open(vijp_cuda_blas **h, vijp_error *err)
{
    *h = malloc(sizeof **h);
    return *h ? 0 : vijp_fail(err, VIJP_EIO, "mock: out of memory");
}
void vijp_cuda_blas_close(vijp_cuda_blas *h) { free(h); }

/* cuBLAS's argument rules, which the wrappers must meet */
static int check(size_t m, size_t n, size_t k, int ta, int tb, size_t lda, size_t ldb, size_t ldc, vijp_error *err)
{
    size_t ra = ta ? k : m, rb = tb ? n : k;
    if (lda < (ra ? ra : 1) || ldb < (rb ? rb : 1) || ldc < (m ? m : 1))
        return vijp_fail(err, VIJP_EINVAL, "mock gemm: a leading dimension below cuBLAS's minimum");
    return 0;
}

#define GEMM_EX(S, T, P)                                                                                           \
    int vijp_cuda_gemm_ex_##S(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, T alpha, const T *A, \
                              size_t lda, const T *Bm, size_t ldb, T beta, T *C, size_t ldc, vijp_error *err)      \
    {                                                                                                              \
        (void)h;                                                                                                   \
        int rc = check(m, n, k, ta, tb, lda, ldb, ldc, err);                                                       \
        if (rc || !m || !n) return rc;                                                                             \
        cblas_##P##gemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m,     \
                        (int)n, (int)k, alpha, A, (int)lda, Bm, (int)ldb, beta, C, (int)ldc);                      \
        return 0;                                                                                                  \
    }
GEMM_EX(d, double, d)
GEMM_EX(f, float, s)

/* float to bfloat16 or binary16 and back, round to nearest even (dense.cu's
 * __float2bfloat16_rn, __float2half_rn) */
static float narrow(int storage, float x)
{
    if (storage == VIJP_CUDA_F16) return (float)(_Float16)x;
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x7fffu + (b >> 16 & 1)) & 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}

int vijp_cuda_gemm_narrow(vijp_cuda_blas *h, int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                          const float *A, size_t lda, const float *Bm, size_t ldb, float beta, float *C, size_t ldc,
                          vijp_error *err)
{
    int rc = check(m, n, k, ta, tb, lda, ldb, ldc, err);
    if (rc || !m || !n) return rc;
    if (storage != VIJP_CUDA_BF16 && storage != VIJP_CUDA_F16)
        return vijp_fail(err, VIJP_EINVAL, "gemm: unknown storage format %d", storage);
    size_t na = vijp_cuda_span(lda, ta ? k : m, ta ? m : k), nb = vijp_cuda_span(ldb, tb ? n : k, tb ? k : n);
    float *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    if (!a || !b) return free(a), free(b), vijp_fail(err, VIJP_EIO, "mock: out of memory");
    for (size_t i = 0; i < na; i++) a[i] = narrow(storage, A[i]);
    for (size_t i = 0; i < nb; i++) b[i] = narrow(storage, Bm[i]);
    rc = vijp_cuda_gemm_ex_f(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, C, ldc, err);
    free(a), free(b);
    return rc;
}

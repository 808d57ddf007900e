/* The CUDA kernel set: kernels.h's table over the kernels of cuda.h, built
 * into libvijp-cuda.so (never into libvijp), which src/kernels/kernels.c
 * loads with dlopen the first time the set is asked for (VIJP_KERNELS=cuda,
 * a double@cuda or binary32@cuda format, vijp_kernels_set(3)): cuBLAS and
 * cuSOLVER map ~0.8 GB, which no other run should pay.
 *
 * The table's arguments are host arrays, so every entry copies its inputs to
 * the device, runs the kernel and copies the result back: a @cuda format
 * measures the GPU's arithmetic (its math library, cuBLAS's order of
 * summation, the tensor cores' accumulation), not its speed; bench-gpu
 * measures speed on device arrays.  One set of device buffers, grown as
 * needed and guarded by one mutex, serves every thread.
 *
 * Entries: leaky ReLU's forward, apply and vijp (exact: one IEEE multiply
 * or divide per unit, bit for bit ref's, cuda.h), the six smooth
 * activations' f and f′ (bounded: act_math.h, the CPU bounds; act_bound is
 * left unset, so kernels.c gives them ref's), and the matrix products
 * gemm_d, gemm_f (cublasDgemm, cublasSgemm) and gemm_mixed_f (cublasGemmEx
 * with bfloat16 or binary16 inputs, binary32 accumulation).  kernels.c
 * completes the rest from ref.
 *
 * The entries cannot return errors (kernels.h): a CUDA failure while one
 * runs (device lost, out of device memory) prints its message and exits 1,
 * as running out of host memory does. */
#include "kernels/kernels.h"
#include "cuda.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* libvijp's vijp_fail and allocator, which the CUDA sources call: this
 * library has its own (the version script keeps them local), so that it
 * depends on nothing of libvijp's but the table's layout. */
int vijp_fail(vijp_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}
void *vijp_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "vijp: CUDA kernel set: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}
void vijp_free(void *p) { free(p); }

static void die(const vijp_error *e)
{
    fprintf(stderr, "vijp: CUDA kernel set: %s\n", e->msg);
    exit(1);
}

/* CUDA cannot be used in a child forked after it started in the parent
 * (the CUDA Programming Guide's rule): such a child stops with that reason
 * instead of CUDA's own error.  (vijp check-layer's isolated checks fork:
 * run it without VIJP_KERNELS=cuda.) */
static pid_t started_in;
static void same_process(void)
{
    if (getpid() == started_in) return;
    fprintf(stderr, "vijp: CUDA kernel set: this process was forked after CUDA started in its parent, and CUDA "
                    "cannot run in it; use the set before forking, or not in forked children\n");
    exit(1);
}
#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        vijp_error e_ = {0};                                                                                       \
        if ((call)) die(&e_);                                                                                      \
    } while (0)
#define E (&e_)

enum { NBUF = 4 };
static struct {
    pthread_mutex_t mu;
    vijp_cuda_blas *blas;
    void *buf[NBUF];
    size_t cap[NBUF];
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Device buffer i, at least bytes long (grow-only). */
static void *dev(int i, size_t bytes)
{
    same_process();
    if (bytes > G.cap[i]) {
        vijp_cuda_free(G.buf[i]);
        G.buf[i] = NULL, G.cap[i] = 0;
        TRY(vijp_cuda_alloc(&G.buf[i], bytes, E));
        G.cap[i] = bytes;
    }
    return G.buf[i];
}
static void *up(int i, const void *host, size_t bytes)
{
    void *d = dev(i, bytes ? bytes : 1);
    if (bytes) TRY(vijp_cuda_upload(d, host, bytes, E));
    return d;
}
static void down(void *host, const void *d, size_t bytes)
{
    if (bytes) TRY(vijp_cuda_download(host, d, bytes, E));
}

/* ---- leaky ReLU: the sign words from the forward kernel, then the scale. */
#define LEAKY(T, S)                                                                                                \
    static void leaky_forward_##S(size_t n, T a, const T *x, T *y)                                                \
    {                                                                                                              \
        if (!n) return;                                                                                            \
        pthread_mutex_lock(&G.mu);                                                                                 \
        T *dx = up(0, x, n * sizeof *x), *dy = dev(1, n * sizeof *y);                                              \
        uint32_t *act = dev(3, vijp_cuda_sign_words(n) * sizeof *act);                                            \
        TRY(vijp_cuda_leaky_forward_##S(n, a, dx, dy, act, E));                                                    \
        down(y, dy, n * sizeof *y);                                                                                \
        pthread_mutex_unlock(&G.mu);                                                                               \
    }                                                                                                              \
    /* v = u·s(x) (divide 0) or g/s(x) (divide 1) */                                                             \
    static void leaky_scale_##S(size_t n, T a, const T *x, const T *g, T *v, int divide)                          \
    {                                                                                                              \
        if (!n) return;                                                                                            \
        pthread_mutex_lock(&G.mu);                                                                                 \
        T *dx = up(0, x, n * sizeof *x), *dg = up(1, g, n * sizeof *g), *dv = dev(2, n * sizeof *v);               \
        uint32_t *act = dev(3, vijp_cuda_sign_words(n) * sizeof *act);                                            \
        TRY(vijp_cuda_leaky_forward_##S(n, a, dx, dv, act, E)); /* dv: scratch until the scale */                \
        TRY(divide ? vijp_cuda_leaky_vijp_##S(n, a, act, dg, dv, E) : vijp_cuda_leaky_vjp_##S(n, a, act, dg, dv, E)); \
        down(v, dv, n * sizeof *v);                                                                                \
        pthread_mutex_unlock(&G.mu);                                                                               \
    }                                                                                                              \
    static void leaky_apply_##S(size_t n, T a, const T *x, const T *u, T *v) { leaky_scale_##S(n, a, x, u, v, 0); } \
    static void leaky_vijp_##S(size_t n, T a, const T *x, const T *g, T *v) { leaky_scale_##S(n, a, x, g, v, 1); }
LEAKY(double, d)
LEAKY(float, f)

/* ---- smooth activations, in the table's order (vijp_kact_names) */
#define ACT_RUN(T, S)                                                                                              \
    static void act_run_##S(vijp_cuda_act act, size_t n, const T *x, T *f, T *df)                                 \
    {                                                                                                              \
        if (!n) return;                                                                                            \
        pthread_mutex_lock(&G.mu);                                                                                 \
        T *dx = up(0, x, n * sizeof *x), *dfv = dev(1, n * sizeof *f), *ddf = dev(2, n * sizeof *f);               \
        TRY(vijp_cuda_act_##S(act, n, dx, dfv, ddf, E));                                                           \
        down(f, dfv, n * sizeof *f);                                                                               \
        if (df) down(df, ddf, n * sizeof *df);                                                                     \
        pthread_mutex_unlock(&G.mu);                                                                               \
    }
ACT_RUN(double, d)
ACT_RUN(float, f)
#define ACT(name, A)                                                                                               \
    static void name##_d(size_t n, const double *x, double *f, double *df) { act_run_d(A, n, x, f, df); }        \
    static void name##_f(size_t n, const float *x, float *f, float *df) { act_run_f(A, n, x, f, df); }
ACT(sigmoid, VIJP_CUDA_SIGMOID)
ACT(softplus, VIJP_CUDA_SOFTPLUS)
ACT(tanh, VIJP_CUDA_TANH)
ACT(silu, VIJP_CUDA_SILU)
ACT(gelu, VIJP_CUDA_GELU)
ACT(mish, VIJP_CUDA_MISH)

/* ---- products: each operand's span (vijp_cuda_span) up, C's back.  C is
 * copied up whatever beta is: with beta = 0 cuBLAS does not read it, and
 * copying the whole span back then restores the rows between ldc's columns
 * that are not C's. */
#define GEMM_RUN(T, S, CALL)                                                                                       \
    {                                                                                                              \
        if (!m || !n) return;                                                                                      \
        size_t na = vijp_cuda_span(lda, ta ? k : m, ta ? m : k), nb = vijp_cuda_span(ldb, tb ? n : k, tb ? k : n); \
        size_t nc = vijp_cuda_span(ldc, m, n);                                                                     \
        lda = lda ? lda : 1, ldb = ldb ? ldb : 1; /* cuBLAS wants >= 1 even for an empty operand */             \
        pthread_mutex_lock(&G.mu);                                                                                 \
        const T *dA = up(0, A, na * sizeof *A), *dB = up(1, B, nb * sizeof *B);                                    \
        T *dC = up(2, C, nc * sizeof *C);                                                                          \
        TRY(CALL);                                                                                                 \
        down(C, dC, nc * sizeof *C);                                                                               \
        pthread_mutex_unlock(&G.mu);                                                                               \
    }
static void gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                   const double *B, size_t ldb, double beta, double *C, size_t ldc)
GEMM_RUN(double, d, vijp_cuda_gemm_ex_d(G.blas, ta, tb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc, E))
static void gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc)
GEMM_RUN(float, f, vijp_cuda_gemm_ex_f(G.blas, ta, tb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc, E))
static void gemm_mixed_f(int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A,
                         size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
GEMM_RUN(float, f,
         vijp_cuda_gemm_narrow(G.blas, storage == VIJP_KSTORE_BF16 ? VIJP_CUDA_BF16
                                        : storage == VIJP_KSTORE_F16 ? VIJP_CUDA_F16 : -1, /* -1: refused there */
                               ta, tb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc, E))

static const vijp_kernels cuda_set = {
    .name = "cuda",
    .leaky_forward_d = leaky_forward_d, .leaky_apply_d = leaky_apply_d, .leaky_vijp_d = leaky_vijp_d,
    .leaky_forward_f = leaky_forward_f, .leaky_apply_f = leaky_apply_f, .leaky_vijp_f = leaky_vijp_f,
    .act_d = {sigmoid_d, softplus_d, tanh_d, silu_d, gelu_d, mish_d},
    .act_f = {sigmoid_f, softplus_f, tanh_f, silu_f, gelu_f, mish_f},
    /* act_bound unset: ref's, which kernels.c's complete() fills (CUDA's
     * primitives are no less accurate than glibc's, act_math.h) */
    .gemm_d = gemm_d, .gemm_f = gemm_f, .gemm_mixed_f = gemm_mixed_f,
};

/* The one symbol this library exports (libvijp-cuda.map).  table_bytes is
 * the loader's sizeof(vijp_kernels) and version its VIJP_KERNELS_TABLE_VERSION:
 * a library built from another version's table is refused rather than
 * misread. */
const vijp_kernels *vijp_cuda_kernel_set(size_t table_bytes, int version, char *why, size_t n);
const vijp_kernels *vijp_cuda_kernel_set(size_t table_bytes, int version, char *why, size_t n)
{
    if (table_bytes != sizeof(vijp_kernels) || version != VIJP_KERNELS_TABLE_VERSION) {
        snprintf(why, n, "libvijp-cuda.so was built with another libvijp (kernel table version %d of %zu bytes, "
                 "not %d of %zu)", VIJP_KERNELS_TABLE_VERSION, sizeof(vijp_kernels), version, table_bytes);
        return NULL;
    }
    if (!vijp_cuda_available(why, n)) return NULL;
    pthread_mutex_lock(&G.mu);
    vijp_error e = {0};
    int rc = G.blas ? 0 : vijp_cuda_blas_open(&G.blas, &e);
    started_in = getpid();
    pthread_mutex_unlock(&G.mu);
    if (rc) {
        snprintf(why, n, "%s", e.msg);
        return NULL;
    }
    return &cuda_set;
}

/* CUDA: the dense layer through cuBLAS and cuSOLVER, in double and float,
 * and the bfloat16-storage / binary32-accumulation forward.  Contracts and
 * bounds in cuda.h. */
#include "cuda.h"
#include <cublas_v2.h>
#include <cusolverDn.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>
#include <stdio.h>

#include "cuda_util.h"

struct vijp_cuda_blas {
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    char *scratch; /* grow-only device workspace */
    size_t scratch_bytes;
};

#define BLAS_TRY(call, what)                                                                                   \
    do {                                                                                                       \
        int vijp_s_ = (int)(call);                                                                             \
        if (vijp_s_ != 0) return vijp_fail(err, VIJP_EIO, "CUDA: %s failed (status %d)", what, vijp_s_);     \
    } while (0)

extern "C" int vijp_cuda_blas_open(vijp_cuda_blas **hp, vijp_error *err)
{
    vijp_cuda_blas *h = (vijp_cuda_blas *)vijp_alloc(sizeof *h);
    *hp = NULL;
    int rc = 0;
    if (cublasCreate(&h->blas) != CUBLAS_STATUS_SUCCESS) {
        h->blas = NULL;
        rc = vijp_fail(err, VIJP_EIO, "CUDA: cublasCreate failed");
    } else if (cusolverDnCreate(&h->solver) != CUSOLVER_STATUS_SUCCESS) {
        h->solver = NULL;
        rc = vijp_fail(err, VIJP_EIO, "CUDA: cusolverDnCreate failed");
    }
    if (rc) {
        vijp_cuda_blas_close(h);
        return rc;
    }
    *hp = h;
    return 0;
}

extern "C" void vijp_cuda_blas_close(vijp_cuda_blas *h)
{
    if (!h) return;
    if (h->solver) cusolverDnDestroy(h->solver);
    if (h->blas) cublasDestroy(h->blas);
    cudaFree(h->scratch);
    vijp_free(h);
}

/* The workspace, at least bytes long; carve() hands out 256-byte aligned pieces. */
static int scratch(vijp_cuda_blas *h, size_t bytes, vijp_error *err)
{
    if (bytes <= h->scratch_bytes) return 0;
    cudaFree(h->scratch);
    h->scratch = NULL, h->scratch_bytes = 0;
    VIJP_CUDA_TRY(cudaMalloc((void **)&h->scratch, bytes), "cudaMalloc of a %zu-byte workspace", bytes);
    h->scratch_bytes = bytes;
    return 0;
}
static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

static int dims_ok(size_t m, size_t n, size_t B, vijp_error *err)
{
    if (m > INT_MAX || n > INT_MAX || B > INT_MAX || (m && n > INT_MAX / m) || (m && B > INT_MAX / m) ||
        (n && B > INT_MAX / n))
        return vijp_fail(err, VIJP_EDIM, "dense %zu x %zu, batch %zu: cuBLAS takes int dimensions", m, n, B);
    return 0;
}

/* ---- type-generic wrappers: double and float */
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, const double *A, int lda,
                           const double *B, int ldb, double beta, double *C, int ldc)
{
    double one = 1;
    return cublasDgemm(h, ta, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc);
}
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc)
{
    float one = 1;
    return cublasSgemm(h, ta, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc);
}
static cublasStatus_t transpose(cublasHandle_t h, int m, int n, const double *A, double *At)
{
    double one = 1, zero = 0;
    return cublasDgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, &one, A, m, &zero, At, n, At, n);
}
static cublasStatus_t transpose(cublasHandle_t h, int m, int n, const float *A, float *At)
{
    float one = 1, zero = 0;
    return cublasSgeam(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, &one, A, m, &zero, At, n, At, n);
}
static cublasStatus_t trsm_upper(cublasHandle_t h, cublasOperation_t t, int m, int n, const double *A, int lda,
                                 double *B, int ldb)
{
    double one = 1;
    return cublasDtrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one, A, lda, B, ldb);
}
static cublasStatus_t trsm_upper(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *A, int lda,
                                 float *B, int ldb)
{
    float one = 1;
    return cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, t, CUBLAS_DIAG_NON_UNIT, m, n, &one, A, lda, B, ldb);
}
#define SOLVER_PAIR(T, P)                                                                                          \
    static cusolverStatus_t getrf_ws(cusolverDnHandle_t h, int n, T *A, int *lw)                                   \
    { return cusolverDn##P##getrf_bufferSize(h, n, n, A, n, lw); }                                               \
    static cusolverStatus_t getrf(cusolverDnHandle_t h, int n, T *A, T *w, int *piv, int *info)                   \
    { return cusolverDn##P##getrf(h, n, n, A, n, w, piv, info); }                                                \
    static cusolverStatus_t getrs_t(cusolverDnHandle_t h, int n, int B, const T *A, const int *piv, T *X, int *info) \
    { return cusolverDn##P##getrs(h, CUBLAS_OP_T, n, B, A, n, piv, X, n, info); }                                \
    static cusolverStatus_t geqrf_ws(cusolverDnHandle_t h, int r, int c, T *A, int *lw)                            \
    { return cusolverDn##P##geqrf_bufferSize(h, r, c, A, r, lw); }                                               \
    static cusolverStatus_t geqrf(cusolverDnHandle_t h, int r, int c, T *A, T *tau, T *w, int lw, int *info)       \
    { return cusolverDn##P##geqrf(h, r, c, A, r, tau, w, lw, info); }                                            \
    static cusolverStatus_t ormqr_ws(cusolverDnHandle_t h, cublasOperation_t t, int r, int B, int c, const T *A,  \
                                     const T *tau, const T *Z, int *lw)                                           \
    { return cusolverDn##P##ormqr_bufferSize(h, CUBLAS_SIDE_LEFT, t, r, B, c, A, r, tau, Z, r, lw); }            \
    static cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasOperation_t t, int r, int B, int c, const T *A,     \
                                  const T *tau, T *Z, T *w, int lw, int *info)                                    \
    { return cusolverDn##P##ormqr(h, CUBLAS_SIDE_LEFT, t, r, B, c, A, r, tau, Z, r, w, lw, info); }
SOLVER_PAIR(double, D)
SOLVER_PAIR(float, S)

template <typename T> __global__ void broadcast_bias(size_t m, size_t B, const T *b, T *Y)
{
    for (size_t i = vijp_cuda_thread(); i < m * B; i += vijp_cuda_threads()) Y[i] = b[i % m];
}

/* flag := 1 if any of the c diagonal entries of A (leading dimension lda) is 0 */
template <typename T> __global__ void zero_diagonal(size_t c, const T *A, size_t lda, int *flag)
{
    for (size_t i = vijp_cuda_thread(); i < c; i += vijp_cuda_threads())
        if (A[i + i * lda] == 0) *flag = 1;
}

template <typename T>
static int forward(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *b, const T *X, T *Y,
                   vijp_error *err)
{
    int rc = dims_ok(m, n, B, err);
    if (rc || !m || !B) return rc;
    broadcast_bias<T><<<vijp_cuda_blocks(m * B), VIJP_CUDA_BLOCK>>>(m, B, b, Y);
    if ((rc = vijp_cuda_launched(err, "dense bias"))) return rc;
    BLAS_TRY(gemm(h->blas, CUBLAS_OP_N, (int)m, (int)B, (int)n, W, (int)m, X, (int)(n ? n : 1), (T)1, Y, (int)m),
             "dense forward gemm");
    return 0;
}

template <typename T>
static int vjp(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *Gy, T *Gx, vijp_error *err)
{
    int rc = dims_ok(m, n, B, err);
    if (rc || !n || !B) return rc;
    BLAS_TRY(gemm(h->blas, CUBLAS_OP_T, (int)n, (int)B, (int)m, W, (int)(m ? m : 1), Gy, (int)(m ? m : 1), (T)0, Gx,
                  (int)n),
             "dense vjp gemm");
    return 0;
}

/* The solver's info and our zero-diagonal flag, read back (synchronizes). */
static int check_info(const int *dev_flags, const char *what, vijp_error *err)
{
    int flags[2];
    VIJP_CUDA_TRY(cudaMemcpy(flags, dev_flags, sizeof flags, cudaMemcpyDeviceToHost), "%s: reading info", what);
    if (flags[0] < 0) return vijp_fail(err, VIJP_EINVAL, "CUDA: %s: argument %d is invalid", what, -flags[0]);
    if (flags[0] > 0 || flags[1])
        return vijp_fail(err, VIJP_ESINGULAR, "dense vijp: W is singular (%s: zero pivot)", what);
    return 0;
}

template <typename T>
static int vijp(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W, const T *Gx, const T *frag, T *Gy,
                vijp_error *err)
{
    int rc = dims_ok(m, n, B, err);
    if (rc || !m || !n || !B) return rc;
    size_t r = m > n ? m : n, c = m > n ? n : m;
    /* workspace: A (r × c), tau (c) and pivots, z (r × B, wide case), info + flag, then the
     * solver's work, whose size is asked with these very pointers (allocated first) */
    size_t oA = 0, oTau = oA + round256(r * c * sizeof(T)), oZ = oTau + round256(c * sizeof(T) + r * sizeof(int)),
           oInfo = oZ + round256(r * B * sizeof(T)), oWork = oInfo + 256;
    if ((rc = scratch(h, oWork, err))) return rc;
    T *A = (T *)(h->scratch + oA), *tau = (T *)(h->scratch + oTau), *z = m > n ? Gy : (T *)(h->scratch + oZ);
    int lw = 0, lw2 = 0;
    if (m == n) BLAS_TRY(getrf_ws(h->solver, (int)n, A, &lw), "getrf_bufferSize");
    else {
        BLAS_TRY(geqrf_ws(h->solver, (int)r, (int)c, A, &lw), "geqrf_bufferSize");
        BLAS_TRY(ormqr_ws(h->solver, m > n ? CUBLAS_OP_N : CUBLAS_OP_T, (int)r, (int)B, (int)c, A, tau, z, &lw2),
                 "ormqr_bufferSize");
        if (lw2 > lw) lw = lw2;
    }
    if ((rc = scratch(h, oWork + round256((size_t)(lw > 0 ? lw : 1) * sizeof(T)), err))) return rc;
    A = (T *)(h->scratch + oA), tau = (T *)(h->scratch + oTau); /* the workspace may have moved */
    if (m < n) z = (T *)(h->scratch + oZ);
    T *work = (T *)(h->scratch + oWork);
    int *piv = (int *)(tau + c), *info = (int *)(h->scratch + oInfo); /* info[0]: solver, info[1]: zero diagonal */
    VIJP_CUDA_TRY(cudaMemset(info, 0, 2 * sizeof(int)), "cudaMemset");
    if (m == n) {
        VIJP_CUDA_TRY(cudaMemcpy(A, W, n * n * sizeof(T), cudaMemcpyDeviceToDevice), "copy of W");
        VIJP_CUDA_TRY(cudaMemcpy(Gy, Gx, n * B * sizeof(T), cudaMemcpyDeviceToDevice), "copy of Gx");
        BLAS_TRY(getrf(h->solver, (int)n, A, work, piv, info), "getrf");
        if ((rc = check_info(info, "getrf", err))) return rc;
        BLAS_TRY(getrs_t(h->solver, (int)n, (int)B, A, piv, Gy, info), "getrs");
        return check_info(info, "getrs", err);
    }
    if (m < n) { /* Wᵀ = QR: Gy = R⁻¹ (Qᵀ Gx)[0:m] */
        VIJP_CUDA_TRY(cudaMemset(A, 0, r * c * sizeof(T)), "cudaMemset"); /* geam might read B at β = 0 */
        BLAS_TRY(transpose(h->blas, (int)m, (int)n, W, A), "geam (transpose)");
        VIJP_CUDA_TRY(cudaMemcpy(z, Gx, n * B * sizeof(T), cudaMemcpyDeviceToDevice), "copy of Gx");
    } else { /* W = QR: Gy = Q [R⁻ᵀ Gx; frag] */
        VIJP_CUDA_TRY(cudaMemcpy(A, W, m * n * sizeof(T), cudaMemcpyDeviceToDevice), "copy of W");
        VIJP_CUDA_TRY(cudaMemcpy2D(z, m * sizeof(T), Gx, n * sizeof(T), n * sizeof(T), B, cudaMemcpyDeviceToDevice),
                      "copy of Gx");
        if (frag)
            VIJP_CUDA_TRY(cudaMemcpy2D(z + n, m * sizeof(T), frag, (m - n) * sizeof(T), (m - n) * sizeof(T), B,
                                       cudaMemcpyDeviceToDevice), "copy of the fragment");
        else
            VIJP_CUDA_TRY(cudaMemset2D(z + n, m * sizeof(T), 0, (m - n) * sizeof(T), B), "zeroing the fragment");
    }
    BLAS_TRY(geqrf(h->solver, (int)r, (int)c, A, tau, work, lw, info), "geqrf");
    zero_diagonal<T><<<vijp_cuda_blocks(c), VIJP_CUDA_BLOCK>>>(c, A, r, info + 1);
    if ((rc = vijp_cuda_launched(err, "zero-diagonal check")) || (rc = check_info(info, "geqrf", err))) return rc;
    if (m < n) {
        BLAS_TRY(ormqr(h->solver, CUBLAS_OP_T, (int)r, (int)B, (int)c, A, tau, z, work, lw, info), "ormqr");
        BLAS_TRY(trsm_upper(h->blas, CUBLAS_OP_N, (int)m, (int)B, A, (int)r, z, (int)r), "trsm");
        VIJP_CUDA_TRY(cudaMemcpy2D(Gy, m * sizeof(T), z, n * sizeof(T), m * sizeof(T), B, cudaMemcpyDeviceToDevice),
                      "copy of Gy");
    } else {
        BLAS_TRY(trsm_upper(h->blas, CUBLAS_OP_T, (int)n, (int)B, A, (int)r, z, (int)r), "trsm");
        BLAS_TRY(ormqr(h->solver, CUBLAS_OP_N, (int)r, (int)B, (int)c, A, tau, z, work, lw, info), "ormqr");
    }
    return check_info(info, "ormqr", err);
}

#define DENSE_API(S, T)                                                                                              \
    extern "C" int vijp_cuda_dense_forward_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W,        \
                                               const T *b, const T *X, T *Y, vijp_error *err)                      \
    { return forward<T>(h, m, n, B, W, b, X, Y, err); }                                                             \
    extern "C" int vijp_cuda_dense_vjp_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W,            \
                                           const T *Gy, T *Gx, vijp_error *err)                                    \
    { return vjp<T>(h, m, n, B, W, Gy, Gx, err); }                                                                  \
    extern "C" int vijp_cuda_dense_vijp_##S(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const T *W,           \
                                            const T *Gx, const T *frag, T *Gy, vijp_error *err)                    \
    { return vijp<T>(h, m, n, B, W, Gx, frag, Gy, err); }
DENSE_API(d, double)
DENSE_API(f, float)

extern "C" int vijp_cuda_gemm_d(vijp_cuda_blas *h, size_t m, size_t n, size_t k, const double *A, const double *Bm,
                                double *C, vijp_error *err)
{
    int rc = dims_ok(m, k, n, err);
    if (rc || !m || !n) return rc;
    BLAS_TRY(gemm(h->blas, CUBLAS_OP_N, (int)m, (int)n, (int)k, A, (int)m, Bm, (int)(k ? k : 1), 0.0, C, (int)m),
             "cublasDgemm");
    return 0;
}

/* ---- bfloat16 storage, binary32 accumulation */
__global__ void bias_round_bf16(size_t m, size_t B, const float *acc, const __nv_bfloat16 *b, __nv_bfloat16 *Y)
{
    for (size_t i = vijp_cuda_thread(); i < m * B; i += vijp_cuda_threads())
        Y[i] = __float2bfloat16_rn(acc[i] + __bfloat162float(b[i % m])); /* one binary32 add, one rounding */
}

extern "C" int vijp_cuda_dense_forward_bf16(vijp_cuda_blas *h, size_t m, size_t n, size_t B, const uint16_t *W,
                                            const uint16_t *b, const uint16_t *X, uint16_t *Y, vijp_error *err)
{
    int rc = dims_ok(m, n, B, err);
    if (rc || !m || !B) return rc;
    if ((rc = scratch(h, m * B * sizeof(float), err))) return rc;
    float *acc = (float *)h->scratch, one = 1, zero = 0;
    if (n)
        BLAS_TRY(cublasGemmEx(h->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)B, (int)n, &one, W, CUDA_R_16BF, (int)m,
                              X, CUDA_R_16BF, (int)n, &zero, acc, CUDA_R_32F, (int)m, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (bf16 inputs, binary32 accumulation)");
    else
        VIJP_CUDA_TRY(cudaMemset(acc, 0, m * B * sizeof(float)), "cudaMemset");
    bias_round_bf16<<<vijp_cuda_blocks(m * B), VIJP_CUDA_BLOCK>>>(m, B, acc, (const __nv_bfloat16 *)b,
                                                                  (__nv_bfloat16 *)Y);
    return vijp_cuda_launched(err, "bf16 bias and rounding");
}

/* ---- general products for the kernel set (kernel_set.c: gemm_d, gemm_f,
 * gemm_mixed_f): BLAS's gemm on device arrays, column-major. */
static int gemm_dims_ok(size_t m, size_t n, size_t k, size_t lda, size_t ldb, size_t ldc, vijp_error *err)
{
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return vijp_fail(err, VIJP_EDIM, "gemm %zu x %zu x %zu: cuBLAS takes int dimensions", m, n, k);
    return 0;
}
static cublasOperation_t op(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

static cublasStatus_t gemm_full(cublasHandle_t h, int ta, int tb, int m, int n, int k, const double *alpha,
                                const double *A, int lda, const double *B, int ldb, const double *beta, double *C,
                                int ldc)
{ return cublasDgemm(h, op(ta), op(tb), m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); }
static cublasStatus_t gemm_full(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
                                const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc)
{ return cublasSgemm(h, op(ta), op(tb), m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); }

template <typename T>
static int gemm_ex(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, T alpha, const T *A, size_t lda,
                   const T *Bm, size_t ldb, T beta, T *C, size_t ldc, vijp_error *err)
{
    int rc = gemm_dims_ok(m, n, k, lda, ldb, ldc, err);
    if (rc || !m || !n) return rc;
    BLAS_TRY(gemm_full(h->blas, ta, tb, (int)m, (int)n, (int)k, &alpha, A, (int)lda, Bm, (int)ldb, &beta, C, (int)ldc),
             sizeof(T) == 8 ? "cublasDgemm" : "cublasSgemm");
    return 0;
}
#define GEMM_EX_API(S, T)                                                                                          \
    extern "C" int vijp_cuda_gemm_ex_##S(vijp_cuda_blas *h, int ta, int tb, size_t m, size_t n, size_t k, T alpha, \
                                         const T *A, size_t lda, const T *Bm, size_t ldb, T beta, T *C, size_t ldc,\
                                         vijp_error *err)                                                          \
    { return gemm_ex<T>(h, ta, tb, m, n, k, alpha, A, lda, Bm, ldb, beta, C, ldc, err); }
GEMM_EX_API(d, double)
GEMM_EX_API(f, float)

/* float → bfloat16 or binary16, RN-even (exact for the values the mixed
 * formats store, which is all this is used for). */
__global__ void narrow_bf16(size_t n, const float *x, __nv_bfloat16 *y)
{
    for (size_t i = vijp_cuda_thread(); i < n; i += vijp_cuda_threads()) y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void narrow_f16(size_t n, const float *x, __half *y)
{
    for (size_t i = vijp_cuda_thread(); i < n; i += vijp_cuda_threads()) y[i] = __float2half_rn(x[i]);
}

extern "C" int vijp_cuda_gemm_narrow(vijp_cuda_blas *h, int storage, int ta, int tb, size_t m, size_t n, size_t k,
                                     float alpha, const float *A, size_t lda, const float *Bm, size_t ldb, float beta,
                                     float *C, size_t ldc, vijp_error *err)
{
    int rc = gemm_dims_ok(m, n, k, lda, ldb, ldc, err);
    if (rc || !m || !n) return rc;
    if (storage != VIJP_CUDA_BF16 && storage != VIJP_CUDA_F16)
        return vijp_fail(err, VIJP_EINVAL, "gemm: unknown storage format %d", storage);
    size_t na = vijp_cuda_span(lda, ta ? k : m, ta ? m : k), nb = vijp_cuda_span(ldb, tb ? n : k, tb ? k : n);
    size_t half = 2; /* both narrow types: 2 bytes */
    if ((rc = scratch(h, round256(na * half) + nb * half + 1, err))) return rc;
    void *a16 = h->scratch, *b16 = h->scratch + round256(na * half);
    if (!na || !nb) { /* k = 0: C := beta·C */
    } else if (storage == VIJP_CUDA_BF16) {
        narrow_bf16<<<vijp_cuda_blocks(na), VIJP_CUDA_BLOCK>>>(na, A, (__nv_bfloat16 *)a16);
        narrow_bf16<<<vijp_cuda_blocks(nb), VIJP_CUDA_BLOCK>>>(nb, Bm, (__nv_bfloat16 *)b16);
    } else {
        narrow_f16<<<vijp_cuda_blocks(na), VIJP_CUDA_BLOCK>>>(na, A, (__half *)a16);
        narrow_f16<<<vijp_cuda_blocks(nb), VIJP_CUDA_BLOCK>>>(nb, Bm, (__half *)b16);
    }
    if ((rc = vijp_cuda_launched(err, "narrowing to the storage format"))) return rc;
    cudaDataType t = storage == VIJP_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    BLAS_TRY(cublasGemmEx(h->blas, op(ta), op(tb), (int)m, (int)n, (int)k, &alpha, a16, t, (int)lda, b16, t, (int)ldb,
                          &beta, C, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx (narrow inputs, binary32 accumulation)");
    return 0;
}

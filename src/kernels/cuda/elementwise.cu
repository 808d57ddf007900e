/* CUDA: availability, device memory, and the elementwise kernels (leaky ReLU
 * with packed sign bits; smooth activations' f and f′).  Contracts and bounds
 * in cuda.h and act_math.h.  Compiled with --fmad=false: every multiply and
 * add is the one written (the CPU build's -ffp-contract=off). */
#include "cuda.h"
#include "act_math.h"
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_util.h"

extern "C" int vijp_cuda_available(char *why, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(why, n, "no CUDA device: cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky-free error state */
        return 0;
    }
    if (count == 0) {
        snprintf(why, n, "no CUDA device (cudaGetDeviceCount found 0)");
        return 0;
    }
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
        snprintf(why, n, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return 0;
    }
    if (p.major < 8) { /* bf16 GEMM, and the PTX is compute_80 */
        snprintf(why, n, "%s has compute capability %d.%d; the kernels need 8.0 or newer", p.name, p.major, p.minor);
        return 0;
    }
    snprintf(why, n, "%s (compute capability %d.%d)", p.name, p.major, p.minor);
    return 1;
}

extern "C" int vijp_cuda_device_info(char *name, size_t n, double *hbm_gib, vijp_error *err)
{
    cudaDeviceProp p;
    VIJP_CUDA_TRY(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    snprintf(name, n, "%s, %d SMs, compute capability %d.%d", p.name, p.multiProcessorCount, p.major, p.minor);
    *hbm_gib = (double)p.totalGlobalMem / (1 << 30);
    return 0;
}

extern "C" int vijp_cuda_alloc(void **dev, size_t bytes, vijp_error *err)
{
    *dev = NULL;
    VIJP_CUDA_TRY(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc of %zu bytes", bytes);
    return 0;
}

extern "C" void vijp_cuda_free(void *dev)
{
    if (dev) cudaFree(dev);
}

extern "C" int vijp_cuda_upload(void *dev, const void *host, size_t bytes, vijp_error *err)
{
    VIJP_CUDA_TRY(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "copy of %zu bytes to the GPU", bytes);
    return 0;
}

extern "C" int vijp_cuda_download(void *host, const void *dev, size_t bytes, vijp_error *err)
{
    VIJP_CUDA_TRY(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "copy of %zu bytes from the GPU", bytes);
    return 0;
}

extern "C" int vijp_cuda_copy(void *dst, const void *src, size_t bytes, vijp_error *err)
{
    VIJP_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "device copy of %zu bytes", bytes);
    return 0;
}

extern "C" int vijp_cuda_sync(vijp_error *err)
{
    VIJP_CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return 0;
}

/* Every elementwise kernel takes VIJP_CUDA_ILP elements a thread, a grid
 * stride apart (so each load instruction of a warp is still one coalesced
 * run), and loads them all before using any.  With one element a thread an
 * H200 had one 4-byte load in flight per thread, too little to cover HBM's
 * latency: the float kernels ran at 0.57 of the copy bandwidth (bench-gpu,
 * 2026-12-04), the double ones at 0.89. */
#define VIJP_CUDA_ILP 4

/* ---- leaky ReLU.  One warp per 32 units, so that one __ballot_sync packs a
 * word of sign bits; every lane of a warp runs the same iterations (the loop
 * bounds are per warp), as __ballot_sync requires, also in the tail. */
template <typename T>
__global__ void leaky_forward(size_t n, T alpha, const T *x, T *y, uint32_t *active)
{
    size_t words = n / 32 + (n % 32 != 0), lane = threadIdx.x % 32, nw = vijp_cuda_warps();
    for (size_t w0 = vijp_cuda_warp(); w0 < words; w0 += VIJP_CUDA_ILP * nw) {
        T v[VIJP_CUDA_ILP];
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++) {
            size_t i = (w0 + k * nw) * 32 + lane;
            v[k] = i < n ? x[i] : T(0);
        }
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++) {
            size_t w = w0 + k * nw, i = w * 32 + lane;
            if (w >= words) break; /* the same w in every lane */
            bool pos = i < n && v[k] > 0;
            if (i < n) y[i] = pos ? v[k] : v[k] * alpha; /* x·1 is x */
            uint32_t bits = __ballot_sync(0xffffffffu, pos);
            if (lane == 0) active[w] = bits;
        }
    }
}

template <typename T>
__global__ void leaky_scale(size_t n, T alpha, const uint32_t *active, const T *g, T *out, bool divide)
{
    size_t nt = vijp_cuda_threads();
    for (size_t i0 = vijp_cuda_thread(); i0 < n; i0 += VIJP_CUDA_ILP * nt) {
        T v[VIJP_CUDA_ILP];
        uint32_t a[VIJP_CUDA_ILP];
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++) {
            size_t i = i0 + k * nt;
            if (i < n) v[k] = g[i], a[k] = active[i / 32];
        }
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++) {
            size_t i = i0 + k * nt;
            if (i < n) out[i] = (a[k] >> (i % 32) & 1) ? v[k] : divide ? v[k] / alpha : v[k] * alpha;
        }
    }
}

/* Blocks for n elements at VIJP_CUDA_ILP a thread (the loops cover any rest). */
static unsigned ilp_blocks(size_t n) { return vijp_cuda_blocks(n / VIJP_CUDA_ILP + 1); }

#define LEAKY_API(S, T)                                                                                         \
    extern "C" int vijp_cuda_leaky_forward_##S(size_t n, T alpha, const T *x, T *y, uint32_t *active,         \
                                               vijp_error *err)                                               \
    {                                                                                                           \
        if (n) leaky_forward<T><<<ilp_blocks(vijp_cuda_sign_words(n) * 32), VIJP_CUDA_BLOCK>>>(n, alpha, x, y, active); \
        return vijp_cuda_launched(err, "leaky forward");                                                       \
    }                                                                                                           \
    extern "C" int vijp_cuda_leaky_vjp_##S(size_t n, T alpha, const uint32_t *active, const T *gy, T *gx,      \
                                           vijp_error *err)                                                   \
    {                                                                                                           \
        if (n) leaky_scale<T><<<ilp_blocks(n), VIJP_CUDA_BLOCK>>>(n, alpha, active, gy, gx, false);        \
        return vijp_cuda_launched(err, "leaky vjp");                                                           \
    }                                                                                                           \
    extern "C" int vijp_cuda_leaky_vijp_##S(size_t n, T alpha, const uint32_t *active, const T *gx, T *gy,     \
                                            vijp_error *err)                                                  \
    {                                                                                                           \
        if (n) leaky_scale<T><<<ilp_blocks(n), VIJP_CUDA_BLOCK>>>(n, alpha, active, gx, gy, true);         \
        return vijp_cuda_launched(err, "leaky vijp");                                                          \
    }
LEAKY_API(d, double)
LEAKY_API(f, float)

/* ---- smooth activations (act_math.h) */
template <typename T, void (*EVAL)(int, T, T *, T *)>
__global__ void act_kernel(int which, size_t n, const T *x, T *f, T *df)
{
    size_t nt = vijp_cuda_threads();
    for (size_t i0 = vijp_cuda_thread(); i0 < n; i0 += VIJP_CUDA_ILP * nt) {
        T v[VIJP_CUDA_ILP];
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++)
            if (i0 + k * nt < n) v[k] = x[i0 + k * nt];
#pragma unroll
        for (int k = 0; k < VIJP_CUDA_ILP; k++)
            if (i0 + k * nt < n) EVAL(which, v[k], &f[i0 + k * nt], &df[i0 + k * nt]);
    }
}

extern "C" int vijp_cuda_act_d(vijp_cuda_act act, size_t n, const double *x, double *f, double *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    if (n) act_kernel<double, vijp_am_eval><<<ilp_blocks(n), VIJP_CUDA_BLOCK>>>((int)act, n, x, f, df);
    return vijp_cuda_launched(err, "activation (double)");
}

extern "C" int vijp_cuda_act_f(vijp_cuda_act act, size_t n, const float *x, float *f, float *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    if (n) act_kernel<float, vijp_am_eval_f><<<ilp_blocks(n), VIJP_CUDA_BLOCK>>>((int)act, n, x, f, df);
    return vijp_cuda_launched(err, "activation (float)");
}

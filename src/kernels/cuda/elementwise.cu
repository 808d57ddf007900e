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

/* ---- leaky ReLU.  One warp per 32 units, so that one __ballot_sync packs a
 * word of sign bits; every lane of a warp runs the same iterations (the loop
 * bound is per warp), as __ballot_sync requires, also in the tail. */
template <typename T>
__global__ void leaky_forward(size_t n, T alpha, const T *x, T *y, uint32_t *active)
{
    size_t words = n / 32 + (n % 32 != 0), lane = threadIdx.x % 32;
    for (size_t w = vijp_cuda_warp(); w < words; w += vijp_cuda_warps()) {
        size_t i = w * 32 + lane;
        bool pos = false;
        if (i < n) {
            T v = x[i];
            pos = v > 0;
            y[i] = pos ? v : v * alpha; /* x·1 is x */
        }
        uint32_t bits = __ballot_sync(0xffffffffu, pos);
        if (lane == 0) active[w] = bits;
    }
}

template <typename T>
__global__ void leaky_scale(size_t n, T alpha, const uint32_t *active, const T *g, T *out, bool divide)
{
    for (size_t i = vijp_cuda_thread(); i < n; i += vijp_cuda_threads()) {
        T v = g[i];
        out[i] = (active[i / 32] >> (i % 32) & 1) ? v : divide ? v / alpha : v * alpha;
    }
}

#define LEAKY_API(S, T)                                                                                         \
    extern "C" int vijp_cuda_leaky_forward_##S(size_t n, T alpha, const T *x, T *y, uint32_t *active,         \
                                               vijp_error *err)                                               \
    {                                                                                                           \
        if (n) leaky_forward<T><<<vijp_cuda_blocks(vijp_cuda_sign_words(n) * 32), VIJP_CUDA_BLOCK>>>(n, alpha, x, y, active); \
        return vijp_cuda_launched(err, "leaky forward");                                                       \
    }                                                                                                           \
    extern "C" int vijp_cuda_leaky_vjp_##S(size_t n, T alpha, const uint32_t *active, const T *gy, T *gx,      \
                                           vijp_error *err)                                                   \
    {                                                                                                           \
        if (n) leaky_scale<T><<<vijp_cuda_blocks(n), VIJP_CUDA_BLOCK>>>(n, alpha, active, gy, gx, false);        \
        return vijp_cuda_launched(err, "leaky vjp");                                                           \
    }                                                                                                           \
    extern "C" int vijp_cuda_leaky_vijp_##S(size_t n, T alpha, const uint32_t *active, const T *gx, T *gy,     \
                                            vijp_error *err)                                                  \
    {                                                                                                           \
        if (n) leaky_scale<T><<<vijp_cuda_blocks(n), VIJP_CUDA_BLOCK>>>(n, alpha, active, gx, gy, true);         \
        return vijp_cuda_launched(err, "leaky vijp");                                                          \
    }
LEAKY_API(d, double)
LEAKY_API(f, float)

/* ---- smooth activations (act_math.h) */
__global__ void act_d(int act, size_t n, const double *x, double *f, double *df)
{
    for (size_t i = vijp_cuda_thread(); i < n; i += vijp_cuda_threads()) vijp_am_eval(act, x[i], &f[i], &df[i]);
}

__global__ void act_f(int act, size_t n, const float *x, float *f, float *df)
{
    for (size_t i = vijp_cuda_thread(); i < n; i += vijp_cuda_threads()) vijp_am_eval_f(act, x[i], &f[i], &df[i]);
}

extern "C" int vijp_cuda_act_d(vijp_cuda_act act, size_t n, const double *x, double *f, double *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    if (n) act_d<<<vijp_cuda_blocks(n), VIJP_CUDA_BLOCK>>>((int)act, n, x, f, df);
    return vijp_cuda_launched(err, "activation (double)");
}

extern "C" int vijp_cuda_act_f(vijp_cuda_act act, size_t n, const float *x, float *f, float *df, vijp_error *err)
{
    if ((unsigned)act >= VIJP_CUDA_NACT) return vijp_fail(err, VIJP_EINVAL, "unknown activation %d", (int)act);
    if (n) act_f<<<vijp_cuda_blocks(n), VIJP_CUDA_BLOCK>>>((int)act, n, x, f, df);
    return vijp_cuda_launched(err, "activation (float)");
}

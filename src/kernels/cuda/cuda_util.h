/* Helpers shared by the .cu files: error translation and launch geometry. */
#ifndef VIJP_KERNELS_CUDA_UTIL_H
#define VIJP_KERNELS_CUDA_UTIL_H

#include <cuda_runtime.h>
#include "cuda.h"

/* A CUDA runtime call that must succeed, else return its message as VIJP_EIO
 * (the device, not the arguments, failed). */
#define VIJP_CUDA_TRY(call, ...)                                                                            \
    do {                                                                                                    \
        cudaError_t vijp_e_ = (call);                                                                       \
        if (vijp_e_ != cudaSuccess) {                                                                       \
            char vijp_what_[160];                                                                           \
            snprintf(vijp_what_, sizeof vijp_what_, __VA_ARGS__);                                           \
            return vijp_fail(err, VIJP_EIO, "CUDA: %s: %s", vijp_what_, cudaGetErrorString(vijp_e_));       \
        }                                                                                                   \
    } while (0)

/* After a launch: a bad configuration or an earlier asynchronous fault. */
static inline int vijp_cuda_launched(vijp_error *err, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : vijp_fail(err, VIJP_EIO, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

/* Grid-stride loops: 256 threads a block (a multiple of the warp), at most
 * 2^16 blocks (enough to fill any GPU; the loop covers the rest). */
#define VIJP_CUDA_BLOCK 256
static inline unsigned vijp_cuda_blocks(size_t threads)
{
    size_t b = (threads + VIJP_CUDA_BLOCK - 1) / VIJP_CUDA_BLOCK;
    return b > 65536 ? 65536u : (unsigned)(b ? b : 1);
}
__device__ __forceinline__ size_t vijp_cuda_thread(void) { return blockIdx.x * (size_t)blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t vijp_cuda_threads(void) { return gridDim.x * (size_t)blockDim.x; }
__device__ __forceinline__ size_t vijp_cuda_warp(void) { return vijp_cuda_thread() / 32; }
__device__ __forceinline__ size_t vijp_cuda_warps(void) { return vijp_cuda_threads() / 32; }

#endif

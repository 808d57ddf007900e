/* Helpers of the CUDA suite (t-cuda.c, t-cuda-dense.c). */
#ifndef VIJP_CUDAFIX_H
#define VIJP_CUDAFIX_H

#include "testutil.h"
#include "oracles/oracles.h"
#include "vijp/arith.h"
#include "kernels/cuda/cuda.h"
#include <stdio.h>

/* The suite (t-cuda.c), run by tests/check_cuda.c, and its dense tests,
 * added to the "gpu" case (t-cuda-dense.c). */
Suite *suite_cuda(void);
void cuda_add_dense_tests(TCase *tc);
void cuda_add_set_tests(Suite *s, TCase *host); /* t-cuda-set.c: its own case "set" */

static inline int gpu_or_skip(const char *test)
{
    char why[256];
    if (vijp_cuda_available(why, sizeof why)) return 1;
    printf("t-cuda: %s SKIPPED: %s\n", test, why);
    return 0;
}

/* A call returning 0 or an error code with err_ filled. */
#define OK(call)                                                                                             \
    do {                                                                                                     \
        vijp_error err_ = {0};                                                                               \
        int rc_ = (call);                                                                                    \
        ck_assert_msg(rc_ == 0, "%s failed (%d): %s", #call, rc_, err_.msg);                                 \
    } while (0)

static inline void *dev_new(size_t bytes)
{
    void *d = NULL;
    OK(vijp_cuda_alloc(&d, bytes, &err_));
    return d;
}
static inline void *dev_copy(const void *host, size_t bytes)
{
    void *d = dev_new(bytes);
    OK(vijp_cuda_upload(d, host, bytes, &err_));
    return d;
}
static inline void host_get(void *host, const void *dev, size_t bytes) { OK(vijp_cuda_download(host, dev, bytes, &err_)); }

/* FNV-1a over bytes: one number to compare a kernel's outputs on a fixed
 * grid across kernel sets (ref, AVX2, AVX-512, CUDA). */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

#endif

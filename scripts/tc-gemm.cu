/* tc-gemm: GEMMs through cuBLAS on the tensor cores, written out for vijp's
 * tensor-core models (STORE+tc:ARCH, src/format/tc.c) to recompute.
 *
 *   tc-gemm DIR [SEED]
 *
 * For each operand type (bfloat16, binary16: cublasGemmEx on bf16 or fp16
 * inputs; tf32: binary32 inputs that are TF32 numbers already, computed with
 * CUBLAS_COMPUTE_32F_FAST_TF32) it multiplies a seeded random A (M × K) by
 * B (K × N), binary32 output, C = 0, and writes DIR/TYPE.bin: three int32
 * M, K, N, then A, B and D = A·B as binary32, each column-major.  The
 * operands' exponents span [−8, 8] with random signs, so that blocks
 * cancel and the alignment's truncation shows.  tests/t-tc.c's gpu_gemm
 * case (VIJP_TC_GEMM_DIR=DIR VIJP_TC_ARCH=h100) recomputes every output in
 * TYPE+tc:ARCH and counts the outputs that differ; scripts/gpu-check.sh
 * runs both.  cuBLAS may split K (split-K, stream-K kernels) and sum the
 * pieces otherwise than in index order: a mismatch can be the library's
 * order, not the model; M = N = 64, K = 512 keep it to one tile's K loop
 * on the GPUs we know.  Exit status 0, 1 on a CUDA or cuBLAS error or a
 * file that cannot be written, 2 on bad arguments. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

enum { M = 64, K = 512, N = 64 };

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A random value of p significand bits, exponent in [−8, 8], random sign. */
static float value(uint64_t *s, int p)
{
    uint64_t r = next(s);
    int e = (int)(r % 17) - 8;
    float m = 1 + (float)((r >> 8) & ((1u << (p - 1)) - 1)) / (float)(1u << (p - 1));
    return ldexpf((r >> 40) & 1 ? -m : m, e);
}

#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "tc-gemm: %s: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define BLAS_OK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "tc-gemm: %s: cuBLAS status %d\n", #call, (int)s_); exit(1); } } while (0)

/* D = A·B for one operand type; a, b: the operands' values as binary32. */
static void gemm(cublasHandle_t h, const char *type, const float *a, const float *b, float *d)
{
    size_t esz = !strcmp(type, "tf32") ? 4 : 2;
    void *ha = malloc(esz * M * K), *hb = malloc(esz * K * N), *da, *db;
    float *dd;
    if (!ha || !hb) { fprintf(stderr, "tc-gemm: out of memory\n"); exit(1); }
    for (size_t i = 0; i < (size_t)M * K + (size_t)K * N; i++) {
        int in_a = i < (size_t)M * K;
        size_t j = in_a ? i : i - (size_t)M * K;
        float v = in_a ? a[j] : b[j];
        void *dst = in_a ? ha : hb;
        if (esz == 4) ((float *)dst)[j] = v;
        else if (!strcmp(type, "bfloat16")) ((__nv_bfloat16 *)dst)[j] = __float2bfloat16_rn(v); /* exact: v has 8 bits */
        else ((__half *)dst)[j] = __float2half_rn(v);                                         /* exact: 11 bits */
    }
    CUDA_OK(cudaMalloc(&da, esz * M * K));
    CUDA_OK(cudaMalloc(&db, esz * K * N));
    CUDA_OK(cudaMalloc((void **)&dd, sizeof(float) * M * N));
    CUDA_OK(cudaMemcpy(da, ha, esz * M * K, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, hb, esz * K * N, cudaMemcpyHostToDevice));
    cudaDataType_t t = esz == 4 ? CUDA_R_32F : !strcmp(type, "bfloat16") ? CUDA_R_16BF : CUDA_R_16F;
    cublasComputeType_t c = esz == 4 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1, zero = 0;
    BLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da, t, M, db, t, K, &zero, dd, CUDA_R_32F, M, c,
                         CUBLAS_GEMM_DEFAULT));
    CUDA_OK(cudaMemcpy(d, dd, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dd));
    free(ha), free(hb);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || !strcmp(argv[1], "--help")) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tc-gemm DIR [SEED]\n");
        return argc == 2 ? 0 : 2;
    }
    uint64_t seed = argc == 3 ? strtoull(argv[2], NULL, 10) : 1;
    cublasHandle_t h;
    BLAS_OK(cublasCreate(&h));
    static const struct {
        const char *type;
        int p;
    } types[] = {{"bfloat16", 8}, {"binary16", 11}, {"tf32", 11}};
    static float a[M * K], b[K * N], d[M * N];
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        uint64_t s = seed + t;
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = value(&s, types[t].p);
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = value(&s, types[t].p);
        gemm(h, types[t].type, a, b, d);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], types[t].type);
        FILE *f = fopen(path, "wb");
        int32_t dims[3] = {M, K, N};
        if (!f || fwrite(dims, sizeof dims, 1, f) != 1 || fwrite(a, sizeof a, 1, f) != 1 ||
            fwrite(b, sizeof b, 1, f) != 1 || fwrite(d, sizeof d, 1, f) != 1 || fclose(f)) {
            fprintf(stderr, "tc-gemm: cannot write %s\n", path);
            return 1;
        }
        printf("tc-gemm: %s: %d x %d x %d written to %s\n", types[t].type, M, K, N, path);
    }
    BLAS_OK(cublasDestroy(h));
    return 0;
}

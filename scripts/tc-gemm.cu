/* tc-gemm: GEMMs through cuBLAS on the tensor cores, written out for vijp's
 * tensor-core models (STORE+tc:ARCH, src/format/tc.c) to recompute.
 *
 *   tc-gemm DIR [SEED]
 *
 * For each operand type (bfloat16, binary16: cublasGemmEx on bf16 or fp16
 * inputs; tf32: binary32 inputs that are TF32 numbers already, computed with
 * CUBLAS_COMPUTE_32F_FAST_TF32; e4m3: cublasLtMatmul on FP8 inputs, see
 * gemm_e4m3) it multiplies a seeded random A (M × K) by B (K × N), binary32
 * output, C = 0, and writes DIR/TYPE.bin: three int32 M, K, N, then A, B
 * and D = A·B as binary32, each column-major.  The operands' exponents span
 * [−8, 8] (e4m3: [−6, 7], its normal range short of 2^8: 1.875·2^8 is
 * e4m3's NaN) with random signs, so that blocks cancel and the alignment's
 * truncation shows.  e4m3 needs compute capability 8.9 or more (Ada,
 * Hopper and later); below, it is skipped with a message and the others are
 * still written.  tests/t-tc.c's gpu_gemm
 * case (VIJP_TC_GEMM_DIR=DIR VIJP_TC_ARCH=h100) recomputes every output in
 * TYPE+tc:ARCH and counts the outputs that differ; scripts/gpu-check.sh
 * runs both.  cuBLAS may split K (split-K, stream-K kernels) and sum the
 * pieces otherwise than in index order: a mismatch can be the library's
 * order, not the model; M = N = 64, K = 512 keep it to one tile's K loop
 * on the GPUs we know.  Exit status 0, 1 on a CUDA or cuBLAS error or a
 * file that cannot be written, 2 on bad arguments. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
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

/* A random value of p significand bits, exponent in [emin, emax], random
 * sign. */
static float value(uint64_t *s, int p, int emin, int emax)
{
    uint64_t r = next(s);
    int e = (int)(r % (uint64_t)(emax - emin + 1)) + emin;
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

/* D = A·B on FP8 (e4m3) operands through cuBLASLt, which cublasGemmEx does
 * not take.  cuBLASLt's documented FP8 requirements (cuBLAS guide,
 * cublasLtMatmul): compute type CUBLAS_COMPUTE_32F with scale type
 * CUDA_R_32F; A transposed and B not ("TN") on sm_89 and sm_90; pointers,
 * dimensions and leading dimensions 16-byte aligned (Tensor Core Usage).
 * A e4m3 × B e4m3 with C and D binary32 is one of its listed type
 * combinations.  So A goes to the GPU as Aᵀ (K × M, leading dimension
 * K = 512) and B as it is (K × N, ld K); D is M × N, ld M = 64 (256
 * bytes); M, N, K are multiples of 16; cudaMalloc's pointers are
 * 256-byte aligned.  The A and B scale pointers stay NULL, which
 * cublasLt.h documents as scale 1; alpha 1, beta 0, C = D's buffer (not
 * read with beta 0).  FAST_ACCUM stays at its default 0: cuBLASLt then
 * promotes the tensor core's accumulator into binary32 periodically, the
 * model's tc_promote (every 128 products, as DeepGEMM; cuBLAS does not
 * document its interval, so a mismatch may be that interval).  The
 * heuristic may pick only kernels without a split-K reduction (reduction
 * scheme mask NONE) and no workspace (where stream-K kernels keep partial
 * tiles), since the model sums K in index order; should no kernel be
 * left, tc-gemm says so and fails after writing the other types. */
static void gemm_e4m3(const float *a, const float *b, float *d)
{
    __nv_fp8_storage_t *hat = (__nv_fp8_storage_t *)malloc((size_t)K * M), *hb = (__nv_fp8_storage_t *)malloc((size_t)K * N);
    if (!hat || !hb) { fprintf(stderr, "tc-gemm: out of memory\n"); exit(1); }
    /* Exact: every value is an e4m3 number (4 significand bits, normal). */
    for (size_t i = 0; i < (size_t)M; i++)
        for (size_t q = 0; q < (size_t)K; q++) hat[q + i * K] = __nv_cvt_float_to_fp8(a[i + q * M], __NV_SATFINITE, __NV_E4M3);
    for (size_t i = 0; i < (size_t)K * N; i++) hb[i] = __nv_cvt_float_to_fp8(b[i], __NV_SATFINITE, __NV_E4M3);
    void *da, *db;
    float *dd;
    CUDA_OK(cudaMalloc(&da, (size_t)K * M));
    CUDA_OK(cudaMalloc(&db, (size_t)K * N));
    CUDA_OK(cudaMalloc((void **)&dd, sizeof(float) * M * N));
    CUDA_OK(cudaMemcpy(da, hat, (size_t)K * M, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, hb, (size_t)K * N, cudaMemcpyHostToDevice));
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    const uint64_t workspace = 0;                               /* the attributes' types */
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_NONE;
    BLAS_OK(cublasLtCreate(&lt));
    BLAS_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    BLAS_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    BLAS_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K)); /* Aᵀ as stored */
    BLAS_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, N, K));
    BLAS_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M)); /* C and D */
    BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof workspace));
    BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                 sizeof reductions));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    BLAS_OK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &found));
    if (!found) { fprintf(stderr, "tc-gemm: e4m3: cuBLASLt has no algorithm for this GEMM\n"); exit(1); }
    const float one = 1, zero = 0;
    BLAS_OK(cublasLtMatmul(lt, op, &one, da, la, db, lb, &zero, dd, ld, dd, ld, &heur.algo, NULL, 0, 0));
    CUDA_OK(cudaMemcpy(d, dd, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
    BLAS_OK(cublasLtMatmulPreferenceDestroy(pref));
    BLAS_OK(cublasLtMatrixLayoutDestroy(la));
    BLAS_OK(cublasLtMatrixLayoutDestroy(lb));
    BLAS_OK(cublasLtMatrixLayoutDestroy(ld));
    BLAS_OK(cublasLtMatmulDescDestroy(op));
    BLAS_OK(cublasLtDestroy(lt));
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dd));
    free(hat), free(hb);
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
    int device, major, minor;
    CUDA_OK(cudaGetDevice(&device));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    static const struct {
        const char *type;
        int p, emin, emax;
    } types[] = {{"bfloat16", 8, -8, 8}, {"binary16", 11, -8, 8}, {"tf32", 11, -8, 8}, {"e4m3", 4, -6, 7}};
    static float a[M * K], b[K * N], d[M * N];
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        int fp8 = !strcmp(types[t].type, "e4m3");
        if (fp8 && major * 10 + minor < 89) {
            printf("tc-gemm: e4m3: skipped: FP8 needs sm_89+ (this GPU is sm_%d%d)\n", major, minor);
            continue;
        }
        uint64_t s = seed + t;
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = value(&s, types[t].p, types[t].emin, types[t].emax);
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = value(&s, types[t].p, types[t].emin, types[t].emax);
        if (fp8) gemm_e4m3(a, b, d);
        else gemm(h, types[t].type, a, b, d);
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

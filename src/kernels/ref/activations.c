/* Reference activation kernels: f and f′ by nested forward AD (dual.h), one
 * unit at a time, with the very code of the layer types' dual_eval
 * (vijp_kact_eval_NAME in dual.c).
 * Bounds: act_bound in the table below, each derived in dual.c (what the
 * numbers mean: vijp_kact_bound, kernels.h); the SIMD and CUDA sets keep
 * these (kernels.c's complete() gives them ref's).  The binary32 kernels
 * evaluate in double and round once to binary32: their bound is that,
 * rounded, plus half an ulp of binary32 (at most 81·2^-53 + 2^-24 relative
 * to the terms: below one binary32 ulp wherever the double bound holds). */
#include "kernels/kernels.h"
#include "kernels/dual.h"
#include <math.h>

#define DEFINE_ACT(NAME)                                                                         \
    static void NAME##_d(size_t n, const double *x, double *f, double *df)                       \
    {                                                                                            \
        for (size_t i = 0; i < n; i++) vijp_kact_eval_##NAME(x[i], &f[i], &df[i]);               \
    }                                                                                            \
    static void NAME##_f(size_t n, const float *x, float *f, float *df)                          \
    {                                                                                            \
        for (size_t i = 0; i < n; i++) {                                                         \
            double fd, dd;                                                                       \
            vijp_kact_eval_##NAME(x[i], &fd, &dd);                                               \
            f[i] = (float)fd, df[i] = (float)dd;                                                 \
        }                                                                                        \
    }
DEFINE_ACT(sigmoid)
DEFINE_ACT(softplus)
DEFINE_ACT(tanh)
DEFINE_ACT(silu)
DEFINE_ACT(gelu)
DEFINE_ACT(mish)

static void erfc_d(size_t n, const double *t, double *y)
{
    for (size_t i = 0; i < n; i++) y[i] = erfc(t[i]);
}

void vijp_kernels_ref_drift_d(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out);
void vijp_kernels_ref_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                             const double *B, size_t ldb, double beta, double *C, size_t ldc);
void vijp_kernels_ref_gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                             const float *B, size_t ldb, float beta, float *C, size_t ldc);
void vijp_kernels_ref_gemm_mixed_f(int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha,
                                   const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                                   size_t ldc);

const vijp_kernels vijp_kernels_ref_bounded = {
    .name = "ref",
    .act_d = {sigmoid_d, softplus_d, tanh_d, silu_d, gelu_d, mish_d},
    .act_f = {sigmoid_f, softplus_f, tanh_f, silu_f, gelu_f, mish_f},
    /* Kf, K1, K2 in u = 2^-53 (vijp_kact_bound), each derived in dual.c above
     * vijp_kact_eval_NAME: this table is where the tests read them. */
    .act_bound = {
        [VIJP_KACT_SIGMOID] = {.f_u = 7, .d1_u = 12},             /* f′ = σ(x)σ(−x) */
        [VIJP_KACT_SOFTPLUS] = {.f_u = 5, .d1_u = 7},             /* f′ = σ(x) */
        [VIJP_KACT_TANH] = {.f_u = 4, .d1_u = 6},                 /* f′ = 4e/(1+e)², e = e^{−2|x|} */
        [VIJP_KACT_SILU] = {.f_u = 8, .d1_u = 8, .d2_u = 14},     /* f′ = σ(x) + x·σ′(x) */
        [VIJP_KACT_GELU] = {.f_u = 16, .d1_u = 17, .d2_u = 10},   /* f′ = Φ(x) + x·φ(x); f_u the far tail's */
        [VIJP_KACT_MISH] = {.f_u = 10, .d1_u = 10, .d2_u = 18, .d2_u_per_softplus = 20}, /* f′ = tanh(sp) + x·sech²(sp)·σ(x) */
    },
    .drift_d = vijp_kernels_ref_drift_d, .erfc_d = erfc_d, .erfc_bound_u = 10, /* glibc: 5 ulps */
    .gemm_d = vijp_kernels_ref_gemm_d, .gemm_f = vijp_kernels_ref_gemm_f,
    .gemm_mixed_f = vijp_kernels_ref_gemm_mixed_f,
};

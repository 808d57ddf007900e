/* The CUDA dense kernels (cuBLAS / cuSOLVER, src/kernels/cuda/dense.cu)
 * against the MPFR oracle of the dense layer (oracles/dense.c) at 1024 bits,
 * where every sum of these products of doubles is exact.  Bounds: cuda.h. */
#include "fixtures/cudafix.h"
#include <math.h>
#include <string.h>

#define DENSE_PREC 1024

static double gamma_k(double k, double u) { return k * u / (1 - k * u); }

typedef struct {
    size_t m, n, B;
} shape;
/* square, tall, wide.  Float is tested on small shapes: the worst-case LU
 * bound below exceeds 1 in float at n = 37 and would test nothing. */
static const shape shapes_d[] = {{37, 37, 5}, {45, 37, 3}, {29, 37, 4}};
static const shape shapes_f[] = {{8, 8, 3}, {10, 8, 3}, {6, 8, 3}};

static double rnd(double v, int is_float) { return is_float ? (double)(float)v : v; }

/* W = 4·I (rectangular) + E, E_ik ~ U(−1, 1)/max(m, n): ‖E‖₂ <= ‖E‖_F <= 1,
 * so W's singular values lie in [3, 5] and κ₂(W) <= 5/3; and every row and
 * column of E sums to at most 1 in absolute value < 4: W is diagonally
 * dominant both ways, LU's growth factor is at most 2 (Higham Thm 9.9). */
static void make_dense(size_t m, size_t n, vijp_rng *rng, int is_float, double *W)
{
    double s = 1.0 / (double)(m > n ? m : n);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < m; i++) W[i + k * m] = rnd((i == k ? 4 : 0) + s * (2 * vijp_rng_uniform(rng) - 1), is_float);
}

static void *upload_as(const double *v, size_t n, int is_float)
{
    if (!is_float) return dev_copy(v, n * sizeof *v);
    float *f = vijp_alloc_array(n ? n : 1, sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
    void *d = dev_copy(f, n * sizeof *f);
    vijp_free(f);
    return d;
}
static void download_as(double *v, const void *dev, size_t n, int is_float)
{
    if (!is_float) {
        host_get(v, dev, n * sizeof *v);
        return;
    }
    float *f = vijp_alloc_array(n ? n : 1, sizeof *f);
    host_get(f, dev, n * sizeof *f);
    for (size_t i = 0; i < n; i++) v[i] = f[i];
    vijp_free(f);
}

static mpfr_t *mp_of(const double *v, size_t n, int absolute, const vijp_format *R)
{
    mpfr_t *m = vo_vec_new(n, R);
    for (size_t i = 0; i < n; i++) mpfr_set_d(m[i], absolute ? fabs(v[i]) : v[i], MPFR_RNDN);
    return m;
}

/* max_i |got_i − exact_i| / (g·mag_i) (all exact in MPFR but the quotient). */
static double worst_ratio(const double *got, mpfr_t *exact, mpfr_t *mag, size_t n, double g, const char *what)
{
    mpfr_t e;
    mpfr_init2(e, DENSE_PREC + 64);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        mpfr_sub_d(e, exact[i], got[i], MPFR_RNDN);
        double r = fabs(mpfr_get_d(e, MPFR_RNDU)) / (1.01 * g * mpfr_get_d(mag[i], MPFR_RNDD));
        ck_assert_msg(r <= 1, "%s: entry %zu = %.17g, exact %.17g: %g of the bound", what, i, got[i],
                      mpfr_get_d(exact[i], MPFR_RNDN), r);
        ck_assert_msg(isfinite(got[i]), "%s: entry %zu is %g", what, i, got[i]);
        if (r > worst) worst = r;
    }
    mpfr_clear(e);
    return worst;
}

/* Forward and vjp against γ_{n+1}(|W||X| + |b|) and γ_m|W|ᵀ|Gy|; vijp per
 * column against κ·ε/(1 − κ·ε)·‖Gy‖₂ (times 3 for QR, below), κ = 5/3
 * (make_dense) and ε the backward error of cuda.h: LU n·γ_{3n}(1 + 2(n² −
 * n)·2) (Higham 9.4, 9.6, ρ <= 2, and ‖·‖∞ to ‖·‖₂ twice: √n·√n), QR
 * γ̃_{mn} = 8mnu/(1 − 8mnu).  QR solves a least-squares problem: Higham Thm
 * 20.1 multiplies by 2 + (κ + 1)‖r‖/(‖W‖‖Gy‖), and the residual r here is
 * only Gx's rounding (‖r‖ <= u‖Gx‖ <= u‖W‖‖Gy‖(1 + κε)), so by at most 3. */
START_TEST(gpu_dense)
{
    if (!gpu_or_skip(_i ? "gpu_dense (float)" : "gpu_dense (double)")) return;
    int is_float = _i;
    const shape *shapes = is_float ? shapes_f : shapes_d;
    double u = is_float ? 0x1p-24 : 0x1p-53;
    vijp_format R;
    ck_assert(!vijp_format_mpfr(&R, DENSE_PREC, NULL));
    vijp_cuda_blas *h;
    OK(vijp_cuda_blas_open(&h, &err_));
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 101 * (uint64_t)is_float);
    for (int s = 0; s < 3; s++) {
        size_t m = shapes[s].m, n = shapes[s].n, B = shapes[s].B, P = m * n + m, F = m > n ? (m - n) * B : 0;
        char spec[32];
        snprintf(spec, sizeof spec, "dense:%zu", m);
        vijp_net net;
        vijp_error err = {0};
        ck_assert_msg(!vijp_net_build(&net, spec, 1, n, &err), "%s", err.msg);
        const vijp_layer *L = &net.layers[0];
        ck_assert(L->in == n && L->out == m);
        double *th = vijp_alloc_array(P, sizeof *th), *X = vijp_alloc_array(n * B, sizeof *X),
               *G = vijp_alloc_array(m * B, sizeof *G), *Y = vijp_alloc_array(m * B, sizeof *Y),
               *Gx = vijp_alloc_array(n * B, sizeof *Gx), *Gy = vijp_alloc_array(m * B, sizeof *Gy),
               *frag = vijp_alloc_array(F + 1, sizeof *frag);
        make_dense(m, n, &rng, is_float, th);
        for (size_t i = 0; i < m; i++) th[m * n + i] = rnd(vijp_rng_normal(&rng), is_float);
        for (size_t i = 0; i < n * B; i++) X[i] = rnd(vijp_rng_normal(&rng), is_float);
        for (size_t i = 0; i < m * B; i++) G[i] = rnd(vijp_rng_normal(&rng), is_float);
        mpfr_t *thR = mp_of(th, P, 0, &R), *thA = mp_of(th, P, 1, &R), *XR = mp_of(X, n * B, 0, &R),
               *XA = mp_of(X, n * B, 1, &R), *GR = mp_of(G, m * B, 0, &R), *GA = mp_of(G, m * B, 1, &R);
        mpfr_t *YR = vo_vec_new(m * B, &R), *YM = vo_vec_new(m * B, &R), *VR = vo_vec_new(n * B, &R),
               *VM = vo_vec_new(n * B, &R), *FR = vo_vec_new(F + 1, &R), *SR = vo_vec_new(m * B, &R);
        void *dW = upload_as(th, m * n, is_float), *db = upload_as(th + m * n, m, is_float),
             *dX = upload_as(X, n * B, is_float), *dG = upload_as(G, m * B, is_float);
        void *dY = upload_as(Y, m * B, is_float), *dGx = upload_as(Gx, n * B, is_float);

        /* forward */
        if (is_float) OK(vijp_cuda_dense_forward_f(h, m, n, B, dW, db, dX, dY, &err_));
        else OK(vijp_cuda_dense_forward_d(h, m, n, B, dW, db, dX, dY, &err_));
        download_as(Y, dY, m * B, is_float);
        vo_dense_forward(L, thR, XR, B, YR, &R), vo_dense_forward(L, thA, XA, B, YM, &R);
        double wf = worst_ratio(Y, YR, YM, m * B, gamma_k((double)n + 1, u), "dense forward");

        /* vjp */
        if (is_float) OK(vijp_cuda_dense_vjp_f(h, m, n, B, dW, dG, dGx, &err_));
        else OK(vijp_cuda_dense_vjp_d(h, m, n, B, dW, dG, dGx, &err_));
        download_as(Gx, dGx, n * B, is_float);
        vo_dense_vjp(L, thR, XR, B, GR, VR, &R), vo_dense_vjp(L, thA, XA, B, GA, VM, &R);
        double wv = worst_ratio(Gx, VR, VM, n * B, gamma_k((double)m, u), "dense vjp");

        /* vijp of Gx = round(Wᵀ G) (and, tall, G's fragment, rounded): exact answer from the oracle */
        for (size_t i = 0; i < n * B; i++) Gx[i] = rnd(mpfr_get_d(VR[i], MPFR_RNDN), is_float);
        if (F) {
            vo_dense_fragment(L, thR, XR, B, GR, FR, &R);
            for (size_t i = 0; i < F; i++) frag[i] = rnd(mpfr_get_d(FR[i], MPFR_RNDN), is_float);
        }
        mpfr_t *GxR = mp_of(Gx, n * B, 0, &R), *fragR = mp_of(frag, F + 1, 0, &R);
        ck_assert(!vo_dense_vijp(L, thR, XR, B, GxR, fragR, SR, &R));
        void *dGxin = upload_as(Gx, n * B, is_float), *dfrag = upload_as(frag, F + 1, is_float);
        if (is_float) OK(vijp_cuda_dense_vijp_f(h, m, n, B, dW, dGxin, F ? dfrag : NULL, dY, &err_));
        else OK(vijp_cuda_dense_vijp_d(h, m, n, B, dW, dGxin, F ? dfrag : NULL, dY, &err_));
        download_as(Gy, dY, m * B, is_float);
        double dn = (double)n, eps = m == n ? dn * gamma_k(3 * dn, u) * (1 + 4 * (dn * dn - dn))
                                            : gamma_k(8 * (double)m * dn, u),
               kappa = 5.0 / 3, rel = kappa * eps / (1 - kappa * eps) * (m == n ? 1 : 3), worst_s = 0;
        ck_assert_msg(kappa * eps < 0.5, "the vijp bound is vacuous for %zu x %zu", m, n);
        for (size_t j = 0; j < B; j++) {
            double e2 = 0, g2 = 0;
            for (size_t i = 0; i < m; i++) {
                double g = mpfr_get_d(SR[i + j * m], MPFR_RNDN), d = Gy[i + j * m] - g;
                e2 += d * d, g2 += g * g;
            }
            double r = sqrt(e2) / (1.01 * rel * sqrt(g2));
            ck_assert_msg(r <= 1, "dense vijp %zu x %zu, column %zu: error %g of the bound", m, n, j, r);
            if (r > worst_s) worst_s = r;
        }
        printf("# t-cuda gpu dense %zux%zu batch %zu (%s): worst of bound forward %.3g, vjp %.3g, vijp %.3g\n", m, n, B,
               is_float ? "float" : "double", wf, wv, worst_s);

        /* NaN in sample 0 spreads to all of its outputs and to no other sample (double) */
        if (!is_float && m == n) {
            double nan = NAN;
            OK(vijp_cuda_upload(dX, &nan, sizeof nan, &err_));
            OK(vijp_cuda_dense_forward_d(h, m, n, B, dW, db, dX, dY, &err_));
            download_as(Y, dY, m * B, 0);
            for (size_t i = 0; i < m * B; i++)
                ck_assert_msg(i < m ? isnan(Y[i]) : isfinite(Y[i]), "NaN input: output %zu is %g", i, Y[i]);
        }
        vijp_cuda_free(dW), vijp_cuda_free(db), vijp_cuda_free(dX), vijp_cuda_free(dG), vijp_cuda_free(dY);
        vijp_cuda_free(dGx), vijp_cuda_free(dGxin), vijp_cuda_free(dfrag);
        vo_vec_free(thR, P), vo_vec_free(thA, P), vo_vec_free(XR, n * B), vo_vec_free(XA, n * B);
        vo_vec_free(GR, m * B), vo_vec_free(GA, m * B), vo_vec_free(YR, m * B), vo_vec_free(YM, m * B);
        vo_vec_free(VR, n * B), vo_vec_free(VM, n * B), vo_vec_free(FR, F + 1), vo_vec_free(SR, m * B);
        vo_vec_free(GxR, n * B), vo_vec_free(fragR, F + 1);
        vijp_free(th), vijp_free(X), vijp_free(G), vijp_free(Y), vijp_free(Gx), vijp_free(Gy), vijp_free(frag);
        vijp_net_free(&net);
    }
    vijp_cuda_blas_close(h);
}
END_TEST

/* ---- bfloat16 storage, binary32 accumulation (cuda.h) */

static uint16_t bf16_of(float f) /* round to nearest even (no NaN here) */
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fff + (b >> 16 & 1);
    return (uint16_t)(b >> 16);
}
static float float_of(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The format `bfloat16+binary32` as the MPFR emulation defines it: exact
 * products (8 × 8 bits fit binary32), binary32 sums in index order, the bias
 * last, one rounding to bf16.  IEEE float arithmetic on the host (SSE, no
 * contraction) is exactly that. */
static uint16_t emulate(size_t m, size_t n, size_t i, size_t j, const uint16_t *W, const uint16_t *b, const uint16_t *X)
{
    float acc = 0;
    for (size_t k = 0; k < n; k++) acc = acc + float_of(W[i + k * m]) * float_of(X[k + j * n]);
    return bf16_of(acc + float_of(b[i]));
}

START_TEST(gpu_dense_bf16)
{
    if (!gpu_or_skip("gpu_dense_bf16")) return;
    enum { M = 33, N = 70, B = 3 };
    uint16_t W[M * N], b[M], X[N * B], Y[M * B];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 7);
    for (size_t i = 0; i < M * N; i++) W[i] = bf16_of((float)(vijp_rng_normal(&rng) / 8));
    for (size_t i = 0; i < M; i++) b[i] = bf16_of((float)vijp_rng_normal(&rng));
    for (size_t i = 0; i < N * B; i++) X[i] = bf16_of((float)vijp_rng_normal(&rng));
    vijp_cuda_blas *h;
    OK(vijp_cuda_blas_open(&h, &err_));
    uint16_t *dW = dev_copy(W, sizeof W), *db = dev_copy(b, sizeof b), *dX = dev_copy(X, sizeof X), *dY = dev_new(sizeof Y);
    OK(vijp_cuda_dense_forward_bf16(h, M, N, B, dW, db, dX, dY, &err_));
    host_get(Y, dY, sizeof Y);
    /* s exact, S = Σ|w x| + |b|; u8 = 2^-8, γ' at 2^-22 per term (cuda.h) */
    const double u8 = 0x1p-8, gp = gamma_k(N + 1, 0x1p-22);
    mpfr_t s, S, p;
    mpfr_inits2(DENSE_PREC, s, S, p, (mpfr_ptr)0);
    size_t differ = 0;
    double worst = 0;
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < M; i++) {
            mpfr_set_flt(s, float_of(b[i]), MPFR_RNDN), mpfr_abs(S, s, MPFR_RNDN);
            for (size_t k = 0; k < N; k++) {
                mpfr_set_flt(p, float_of(W[i + k * M]), MPFR_RNDN), mpfr_mul_d(p, p, float_of(X[k + j * N]), MPFR_RNDN);
                mpfr_add(s, s, p, MPFR_RNDN), mpfr_abs(p, p, MPFR_RNDN), mpfr_add(S, S, p, MPFR_RNDN);
            }
            double sd = fabs(mpfr_get_d(s, MPFR_RNDU)), Sd = mpfr_get_d(S, MPFR_RNDU);
            double one = 1.01 * (u8 * sd + (1 + u8) * gp * Sd); /* each result to s */
            float yg = float_of(Y[i + j * M]), ye = float_of(emulate(M, N, i, j, W, b, X));
            mpfr_sub_d(p, s, yg, MPFR_RNDN);
            double eg = fabs(mpfr_get_d(p, MPFR_RNDU));
            mpfr_sub_d(p, s, ye, MPFR_RNDN);
            double ee = fabs(mpfr_get_d(p, MPFR_RNDU));
            ck_assert_msg(eg <= one, "bf16 dense (%zu, %zu): GPU %g, exact %.9g: error %g > bound %g", i, j, yg,
                          mpfr_get_d(s, MPFR_RNDN), eg, one);
            ck_assert_msg(ee <= one, "bf16 emulation (%zu, %zu): %g, exact %.9g: error %g > bound %g", i, j, ye,
                          mpfr_get_d(s, MPFR_RNDN), ee, one);
            ck_assert_msg(fabs((double)yg - ye) <= 2 * one, "bf16 GPU %g vs emulation %g at (%zu, %zu)", yg, ye, i, j);
            differ += yg != ye;
            if (eg / one > worst) worst = eg / one;
        }
    printf("# t-cuda gpu dense bf16+binary32 %dx%d batch %d: worst %.3g of the bound; %zu of %d outputs differ from "
           "the index-order emulation (each by at most the bound)\n", M, N, B, worst, differ, M * B);
    mpfr_clears(s, S, p, (mpfr_ptr)0);
    vijp_cuda_free(dW), vijp_cuda_free(db), vijp_cuda_free(dX), vijp_cuda_free(dY);
    vijp_cuda_blas_close(h);
}
END_TEST

void cuda_add_dense_tests(TCase *tc)
{
    tcase_add_loop_test(tc, gpu_dense, 0, 2);
    tcase_add_test(tc, gpu_dense_bf16);
}

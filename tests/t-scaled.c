/* Tensor-scaled formats (format.h): nvfp4+binary32 and fp8[:pow2]+binary32,
 * against an oracle written here from the recipes as src/format/scaled.c
 * states them, in C's own binary32 arithmetic (float, IEEE round to
 * nearest even, no contraction: -ffp-contract=off) where the code under
 * test uses MPFR, and the element and scale grids by brute force over
 * tables from OFP8's bit-field formula (E4M3, E5M2) and OCP MX's E2M1
 * list: nearest value, ties to the even code, past the largest the largest
 * (saturation).  Inputs are binary32 values, so each float operation below
 * is the recipe's one rounding.  Facts derived by hand (a scale's tie, a
 * block's underflow threshold, the scales of chosen amax values) are
 * checked beside the oracle.  Every check is equality (the sign of zero
 * included, NaN as a class). */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "vijp/arith.h"
#include "vijp/layer.h"
#include "vijp/mat.h"
#include "vijp/net.h"
#include "vijp/rng.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double v[128]; /* the non-negative finite values, by code */
    int n;
} grid;

static const double E2M1_VALUES[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* OFP8: code = E.M, (1.M)·2^(E−bias), E = 0: (0.M)·2^(1−bias); E4M3's
 * S.1111.111 is NaN (its last code), E5M2's top exponent Inf and NaN. */
static grid ofp8_grid(int ebits, int mbits)
{
    grid g = {{0}, 0};
    int bias = (1 << (ebits - 1)) - 1, codes = 1 << (ebits + mbits);
    for (int c = 0; c < codes; c++) {
        int e = c >> mbits, m = c & ((1 << mbits) - 1);
        if (ebits == 4 && c == codes - 1) break;
        if (ebits == 5 && e == (1 << ebits) - 1) break;
        g.v[g.n++] = e ? ldexp((1 << mbits) + m, e - bias - mbits) : ldexp(m, 1 - bias - mbits);
    }
    return g;
}

static grid e2m1_grid(void)
{
    grid g = {{0}, 8};
    memcpy(g.v, E2M1_VALUES, sizeof E2M1_VALUES);
    return g;
}

/* x (finite or ±Inf) to the grid: nearest, ties to the even code,
 * saturating; the sign kept. */
static float on_grid(const grid *g, float x)
{
    double a = fabs((double)x), best = 0;
    int bi = 0;
    if (a >= g->v[g->n - 1]) best = g->v[g->n - 1];
    else
        for (int c = 0; c < g->n; c++) {
            double d = fabs(a - g->v[c]), bd = fabs(a - g->v[bi]);
            if (d < bd || (d == bd && !(c & 1))) bi = c;
            best = g->v[bi];
        }
    return (float)(signbit(x) ? -best : best);
}

/* The tensor's amax, or −1 where it holds an Inf or NaN. */
static float tensor_amax(const float *v, size_t n)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) return -1;
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
    }
    return amax;
}

/* NVFP4: a line of n values of a tensor whose amax is given (> 0), blocks
 * of 16 from its start. */
static void oracle_nvfp4_line(const float *v, size_t n, float amax, float *out)
{
    grid e4m3 = ofp8_grid(4, 3), e2m1 = e2m1_grid();
    float S = amax / 2688.0f;
    if (S == 0) S = 0x1p-149f;
    for (size_t k = 0; k < n; k += 16) {
        size_t nb = n - k < 16 ? n - k : 16;
        float bam = 0;
        for (size_t i = 0; i < nb; i++) bam = fmaxf(bam, fabsf(v[k + i]));
        float sb = on_grid(&e4m3, bam / 6.0f / S), T = sb * S;
        for (size_t i = 0; i < nb; i++) out[k + i] = T == 0 ? copysignf(0, v[k + i]) : on_grid(&e2m1, v[k + i] / T) * T;
    }
}

/* NVFP4: a rows × cols tensor (column-major), blocks down each column. */
static void oracle_nvfp4(const float *v, size_t rows, size_t cols, float *out)
{
    float amax = tensor_amax(v, rows * cols);
    for (size_t i = 0; i < rows * cols; i++) out[i] = amax < 0 ? NAN : v[i];
    if (amax <= 0) return;
    for (size_t j = 0; j < cols; j++) oracle_nvfp4_line(v + j * rows, rows, amax, out + j * rows);
}

/* TransformerEngine's current scaling: the scale of a tensor of amax > 0. */
static float fp8_scale(float fp8_max, float amax, int pow2)
{
    float scale = fp8_max / amax;
    if (isinf(scale)) scale = FLT_MAX;
    if (pow2) scale = ldexpf(1, ilogbf(scale));
    return scale;
}

static void oracle_fp8(const float *v, size_t n, int gradient, int pow2, float *out)
{
    grid g = gradient ? ofp8_grid(5, 2) : ofp8_grid(4, 3);
    float amax = tensor_amax(v, n);
    for (size_t i = 0; i < n; i++) out[i] = amax < 0 ? NAN : v[i];
    if (amax <= 0) return;
    float scale = fp8_scale((float)g.v[g.n - 1], amax, pow2), inv = 1.0f / scale;
    for (size_t i = 0; i < n; i++) out[i] = on_grid(&g, v[i] * scale) * inv;
}

static void expect(mpfr_srcptr got, float want, const char *what, size_t i, float from)
{
    if (isnan(want)) {
        ck_assert_msg(mpfr_nan_p(got), "%s, entry %zu (from %a): got %a, want NaN", what, i, (double)from,
                      mpfr_get_d(got, MPFR_RNDN));
        return;
    }
    ck_assert_msg(!mpfr_nan_p(got) && mpfr_cmp_d(got, want) == 0 && !mpfr_signbit(got) == !signbit(want),
                  "%s, entry %zu (from %a): got %a, want %a", what, i, (double)from, mpfr_get_d(got, MPFR_RNDN),
                  (double)want);
}

static void parse(const char *name, vijp_format *f)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(name, f, &err), "%s: %s", name, err.msg);
}

/* The matrix of v's values stored by vijp_mat_store_as, by vijp_mat_set_d
 * and by vijp_mat_convert from doubles (the last two forward only), each
 * against want. */
static void check_paths(const vijp_format *f, const float *v, size_t rows, size_t cols, vijp_store_role role,
                        const float *want, const char *what)
{
    size_t n = rows * cols;
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat a, b, d;
    test_mat_init_mp(&a, rows, cols, f);
    for (size_t i = 0; i < n; i++) mpfr_set_flt(a.m[i], v[i], MPFR_RNDN);
    vijp_mat_store_as(&a, role);
    for (size_t i = 0; i < n; i++) expect(a.m[i], want[i], what, i, v[i]);
    if (role == VIJP_STORE_FORWARD) {
        test_mat_init_mp(&d, rows, cols, &fd);
        for (size_t i = 0; i < n; i++) d.d[i] = v[i];
        test_mat_init_mp(&b, rows, cols, f);
        vijp_mat_set_d(&b, d.d);
        for (size_t i = 0; i < n; i++) expect(b.m[i], want[i], "vijp_mat_set_d", i, v[i]);
        vijp_mat_zero(&b);
        vijp_mat_convert(&b, &d);
        for (size_t i = 0; i < n; i++) expect(b.m[i], want[i], "vijp_mat_convert", i, v[i]);
        vijp_mat_clear(&b), vijp_mat_clear(&d);
    }
    vijp_mat_clear(&a);
}

/* 40 × 3 (blocks 16, 16, 8 down each column): column 0 gaussian; column 1
 * one huge value (300, the tensor's amax) among small ones; column 2 a
 * block of zeros, a block whose E4M3 scale is subnormal (bamax ≈ 1e-2:
 * scale ≈ bamax·448/300/6 < 2^-6) and a tail whose scale rounds to 0
 * (3e-7: 2e-7 after ·448/300/6, under 2^-10). */
START_TEST(nvfp4_blocks)
{
    vijp_format f;
    parse("nvfp4+binary32", &f);
    ck_assert_int_eq(f.scale_block, 16);
    ck_assert(f.tensor_scaled && f.mixed && !f.mx_block);
    enum { R = 40, C = 3 };
    float v[R * C], want[R * C];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < R; i++) {
        v[i] = (float)vijp_rng_normal(&rng);
        v[R + i] = i == 0 ? 300.0f : (float)(vijp_rng_normal(&rng) * 10);
        v[2 * R + i] = i < 16 ? 0.0f * (i & 1 ? -1 : 1) : i < 32 ? (float)(vijp_rng_normal(&rng) * 3e-3) : 3e-7f;
    }
    v[2 * R + 1] = -0.0f;
    oracle_nvfp4(v, R, C, want);
    check_paths(&f, v, R, C, VIJP_STORE_FORWARD, want, "nvfp4 vijp_mat_store");
    check_paths(&f, v, R, C, VIJP_STORE_GRADIENT, want, "nvfp4 gradient"); /* one grid for both */
    /* By hand: the tail of column 2 has a zero scale: its values stored as
     * +0.  The huge value's block (column 1, rows 0-15): S = fp32(300/2688),
     * s_b = 448, T = fp32(448·S) ≈ 50, and a value stores as 0 exactly when
     * |x|/T <= 0.25 (the tie to 0.5 goes to the even 0): |x| ~ 10, some of
     * each. */
    vijp_mat a;
    test_mat_init_mp(&a, R, C, &f);
    for (size_t i = 0; i < R * C; i++) mpfr_set_flt(a.m[i], v[i], MPFR_RNDN);
    vijp_mat_store(&a);
    for (size_t i = 32; i < R; i++) ck_assert(mpfr_zero_p(a.m[2 * R + i]) && !mpfr_signbit(a.m[2 * R + i]));
    float S = 300.0f / 2688.0f, T = 448.0f * S;
    int zeros = 0;
    for (size_t i = 1; i < 16; i++) {
        ck_assert(mpfr_zero_p(a.m[R + i]) == (fabsf(v[R + i]) / T <= 0.25f));
        zeros += mpfr_zero_p(a.m[R + i]);
    }
    ck_assert(zeros > 0 && zeros < 15);
    float bam = 0;
    for (size_t i = 16; i < 32; i++) bam = fmaxf(bam, fabsf(v[2 * R + i]));
    ck_assert(bam / 6.0f / S < 0x1p-6f && bam / 6.0f / S > 0x1p-10f); /* the subnormal block scale */
    expect(a.m[R], 6.0f * T, "the huge value: 6·T", R, v[R]);
    vijp_mat_clear(&a);
}
END_TEST

/* The E4M3 block scale's own rounding, by hand, with amax = 2688 (S = 1
 * exactly): bamax 102 gives 17, a tie of 16 (code 0x58, even) and 18: T =
 * 16, 102/16 = 6.375 saturates to 6: 96.  bamax 114 gives 19, between 18
 * and 20 (0x5A, even): 20, 114/20 = 5.7: 6·20 = 120.  bamax 96: T = 16,
 * 80/16 = 5, a tie of 4 (even code) and 6: 64; 4/16 = 0.25, a tie of 0
 * (even) and 0.5: 0; 4.5/16 rounds up to 0.5: 8.  The tensor's own amax
 * (2688, s_b 448) stays. */
START_TEST(nvfp4_scale_rounding)
{
    vijp_format f;
    parse("nvfp4+binary32", &f);
    float v[64] = {0};
    v[0] = 2688, v[16] = 102, v[32] = 114, v[48] = 96, v[49] = 80, v[50] = 4, v[51] = 4.5f, v[52] = -80;
    float want[64];
    oracle_nvfp4(v, 64, 1, want);
    ck_assert(want[0] == 2688 && want[16] == 96 && want[32] == 120 && want[48] == 96 && want[49] == 64 &&
              want[50] == 0 && want[51] == 8 && want[52] == -64); /* the oracle agrees with the hand */
    check_paths(&f, v, 64, 1, VIJP_STORE_FORWARD, want, "nvfp4 scale ties");
}
END_TEST

/* Whole tensors: all zeros keep their signs; one NaN or one Inf anywhere
 * makes every value NaN; a lone value (vo_store, vijp_mat_set_entry_d) is
 * a tensor of one, 1 staying 1. */
START_TEST(specials_and_lone_values)
{
    static const char *names[] = {"nvfp4+binary32", "fp8+binary32", "fp8:pow2+binary32"};
    for (size_t k = 0; k < 3; k++) {
        vijp_format f;
        parse(names[k], &f);
        float v[20], want[20];
        for (size_t i = 0; i < 20; i++) v[i] = i & 1 ? -0.0f : 0.0f;
        check_paths(&f, v, 20, 1, VIJP_STORE_FORWARD, v, "zeros");
        for (size_t i = 0; i < 20; i++) v[i] = (float)i - 7.5f, want[i] = NAN;
        v[17] = NAN;
        check_paths(&f, v, 20, 1, VIJP_STORE_FORWARD, want, "a NaN");
        v[17] = -INFINITY;
        check_paths(&f, v, 20, 1, VIJP_STORE_GRADIENT, want, "an Inf");
        static const float xs[] = {1, -1, 3.3f, 1e-30f, 0x1.fffffep-1f, 1e38f, -0.0f};
        mpfr_t r, x;
        mpfr_inits2(24, r, x, (mpfr_ptr)0);
        vijp_mat a;
        test_mat_init_mp(&a, 1, 1, &f);
        for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
            float w;
            if (k == 0) oracle_nvfp4(&xs[i], 1, 1, &w);
            else oracle_fp8(&xs[i], 1, 0, k == 2, &w);
            if (fabsf(xs[i]) == 1) ck_assert(w == xs[i]);
            mpfr_set_flt(x, xs[i], MPFR_RNDN);
            vo_store(r, x, &f);
            expect(r, w, "vo_store", i, xs[i]);
            vijp_mat_set_entry_d(&a, 0, xs[i]);
            expect(a.m[0], w, "vijp_mat_set_entry_d", i, xs[i]);
        }
        vijp_mat_clear(&a);
        mpfr_clears(r, x, (mpfr_ptr)0);
    }
}
END_TEST

/* The FP8 scale for amax values derived by hand: amax 2 gives 448/2 = 224
 * forward (2·224 = 448 stores 448·fp32(1/224) = 2) and 57344/2 = 28672 for
 * gradients; 1.5 in the same tensor: 336 forward, a tie of 320 (even) and
 * 352, so 320/224; 43008 for gradients, nearest 40960 (spacing 8192):
 * 40960/28672.  amax 3 with :pow2: 448/3 = 149.3 rounds down to 128, 3·128
 * = 384 is an E4M3 value: 3 stays.  Forward values land on E4M3's grid and
 * gradients on E5M2's, so the two differ on a random tensor. */
START_TEST(fp8_hybrid)
{
    vijp_format f, p;
    parse("fp8+binary32", &f);
    parse("fp8:pow2+binary32", &p);
    ck_assert(f.tensor_scaled && f.store_prec == 4 && f.grad_prec == 3 && p.scale_pow2);
    ck_assert_int_eq(vijp_format_value_prec(&f), 3);
    float v[4] = {2, 1.5f, -0.01f, 0}, want[4];
    float fwd[4] = {2, 320.0f * (1.0f / 224.0f), 0, 0}, grd[4] = {2, 40960.0f * (1.0f / 28672.0f), 0, 0};
    ck_assert(fp8_scale(448, 2, 0) == 224 && fp8_scale(57344, 2, 0) == 28672 && fp8_scale(448, 3, 1) == 128);
    oracle_fp8(v, 4, 0, 0, want);
    ck_assert(want[0] == fwd[0] && want[1] == fwd[1]);
    fwd[2] = want[2];
    check_paths(&f, v, 4, 1, VIJP_STORE_FORWARD, fwd, "fp8 forward, amax 2");
    oracle_fp8(v, 4, 1, 0, want);
    ck_assert(want[0] == grd[0] && want[1] == grd[1]);
    grd[2] = want[2];
    check_paths(&f, v, 4, 1, VIJP_STORE_GRADIENT, grd, "fp8 gradient, amax 2");
    float t[2] = {3, 1}, tw[2];
    oracle_fp8(t, 2, 0, 1, tw);
    ck_assert(tw[0] == 3);
    check_paths(&p, t, 2, 1, VIJP_STORE_FORWARD, tw, "fp8:pow2, amax 3");

    enum { R = 37, C = 2 };
    float r[R * C], wf[R * C], wg[R * C];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < R * C; i++) r[i] = (float)(vijp_rng_normal(&rng) * exp(4 * vijp_rng_normal(&rng)));
    for (int pow2 = 0; pow2 < 2; pow2++) {
        oracle_fp8(r, R * C, 0, pow2, wf);
        oracle_fp8(r, R * C, 1, pow2, wg);
        int differ = 0;
        for (size_t i = 0; i < R * C; i++) differ |= wf[i] != wg[i];
        ck_assert(differ);
        check_paths(pow2 ? &p : &f, r, R, C, VIJP_STORE_FORWARD, wf, "fp8 forward, random");
        check_paths(pow2 ? &p : &f, r, R, C, VIJP_STORE_GRADIENT, wg, "fp8 gradient, random");
    }
}
END_TEST

/* The operators say which is which: relu's forward output (max(x, 0),
 * exact before storing) is stored forward, its vjp (g where x > 0, exact)
 * and vijp_mat_sub's result (the loss gradient) as gradients. */
START_TEST(fp8_roles_of_operators)
{
    vijp_format f;
    parse("fp8+binary32", &f);
    enum { N = 12, B = 3 };
    vijp_net net;
    vijp_error err = {0};
    ck_assert(!vijp_net_build(&net, "relu", 1, N, &err));
    vijp_mat X, Y, G, Gx, D;
    test_mat_init_mp(&X, N, B, &f), test_mat_init_mp(&Y, N, B, &f), test_mat_init_mp(&G, N, B, &f);
    test_mat_init_mp(&Gx, N, B, &f), test_mat_init_mp(&D, N, B, &f);
    float x[N * B], g[N * B], y[N * B], gx[N * B], d[N * B], want[N * B];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < N * B; i++) {
        x[i] = (float)vijp_rng_normal(&rng), g[i] = (float)(vijp_rng_normal(&rng) * 1e-3);
        mpfr_set_flt(X.m[i], x[i], MPFR_RNDN), mpfr_set_flt(G.m[i], g[i], MPFR_RNDN);
        y[i] = x[i] > 0 ? x[i] : 0, gx[i] = x[i] > 0 ? g[i] : 0, d[i] = x[i] - g[i];
    }
    ck_assert(!vijp_layer_forward(&net.layers[0], NULL, &X, &Y, &err));
    oracle_fp8(y, N * B, 0, 0, want);
    for (size_t i = 0; i < N * B; i++) expect(Y.m[i], want[i], "relu forward: E4M3", i, y[i]);
    ck_assert(!vijp_layer_vjp(&net.layers[0], NULL, &X, &G, &Gx, &err));
    oracle_fp8(gx, N * B, 1, 0, want);
    for (size_t i = 0; i < N * B; i++) expect(Gx.m[i], want[i], "relu vjp: E5M2", i, gx[i]);
    vijp_mat_sub(&D, &X, &G);
    oracle_fp8(d, N * B, 1, 0, want);
    for (size_t i = 0; i < N * B; i++) expect(D.m[i], want[i], "vijp_mat_sub: E5M2", i, d[i]);
    vijp_mat_clear(&X), vijp_mat_clear(&Y), vijp_mat_clear(&G), vijp_mat_clear(&Gx), vijp_mat_clear(&D);
    vijp_net_free(&net);
}
END_TEST

/* A dense:20 net's θ in NVFP4: one tensor (W and bias: one scale from all
 * of θ), W's blocks along its rows (16 and 4), the bias's down the vector. */
START_TEST(nvfp4_dense_parameters)
{
    vijp_format f;
    parse("nvfp4+binary32", &f);
    enum { W = 20, P = W * W + W };
    vijp_net net;
    vijp_error err = {0};
    ck_assert(!vijp_net_build(&net, "dense:20", 1, W, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, test_seed(), &err));
    for (size_t i = 0; i < P; i++) net.theta[0][i] = (float)net.theta[0][i]; /* binary32 values */
    net.theta[0][5] *= 100; /* one row's block far above the rest */
    float th[P], line[W], want[P], out[W];
    for (size_t i = 0; i < P; i++) th[i] = (float)net.theta[0][i];
    float amax = tensor_amax(th, P);
    for (size_t l = 0; l <= W; l++) { /* row l of W (W(l, c) at l + c·W), then the bias */
        for (size_t c = 0; c < W; c++) line[c] = th[l < W ? l + c * W : W * W + c];
        oracle_nvfp4_line(line, W, amax, out);
        for (size_t c = 0; c < W; c++) want[l < W ? l + c * W : W * W + c] = out[c];
    }
    vijp_mat theta;
    ck_assert(!vijp_net_params(&net, &f, &theta, &err));
    vijp_mat tm; /* θ's values in MPFR, exactly (held as doubles: vijp/mat.h) */
    vijp_mat_init_mp(&tm, &theta, 1);
    for (size_t i = 0; i < P; i++) expect(tm.m[i], want[i], "dense:20 θ in nvfp4", i, th[i]);
    vijp_mat_clear(&tm);
    vijp_net_params_clear(&net, &theta);
    vijp_net_free(&net);
}
END_TEST

/* Through the command: grad in each format, the same bits twice; a drift
 * study at the default tolerances derived in src/drift/stats.c
 * (scaled_tol: 4e-1, 7e-1), which regress reads back unchanged. */
START_TEST(cli_grad_drift_regress)
{
    static const char *const fmts[] = {"nvfp4+binary32", "fp8+binary32", "fp8:pow2+binary32"};
    for (size_t i = 0; i < 3; i++) {
        char args[200];
        snprintf(args, sizeof args, "grad --net dense:20,leaky:0.5 --depth 3 --batch 2 --engine moonwalk --format %s", fmts[i]);
        run_result a = run_vijp(args), b = run_vijp(args);
        ck_assert_msg(a.rc == CLI_OK && strstr(a.out, "moonwalk"), "%s: exit %d: %s", args, a.rc, a.err);
        ck_assert_msg(!strcmp(a.out, b.out), "%s: two runs differ", args);
        run_free(&a), run_free(&b);
    }
    char dir[256], args[600];
    make_temp_dir(dir, sizeof dir, "scaled");
    snprintf(args, sizeof args, "drift --net dense:20,leaky:0.5 --depth 4 --seeds 1 --no-plots --out %s/a "
             "--formats fp8+binary32,nvfp4+binary32", dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    static const char *const want[][2] = {{"fp8+binary32", "4e-01"}, {"nvfp4+binary32", "7e-01"}};
    expect_drift_rows(r.out, want, 2);
    run_free(&r);
    snprintf(args, sizeof args, "regress --strict %s/a/drift.json %s/a/drift.json", dir, dir);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, ": 0 regressions"), "exit %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
    remove_tree(dir);
}
END_TEST

Suite *suite_scaled(void)
{
    Suite *s = suite_create("scaled");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, nvfp4_blocks);
    tcase_add_test(tc, nvfp4_scale_rounding);
    tcase_add_test(tc, specials_and_lone_values);
    tcase_add_test(tc, fp8_hybrid);
    tcase_add_test(tc, fp8_roles_of_operators);
    tcase_add_test(tc, nvfp4_dense_parameters);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 60);
    tcase_add_test(cli, cli_grad_drift_regress);
    suite_add_tcase(s, cli);
    return s;
}

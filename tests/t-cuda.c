/* The CUDA kernels (src/kernels/cuda/, API and bounds in cuda.h and
 * act_math.h) against the MPFR oracles, in double and float.
 *
 * host_*: the activations' formulas as the test suite compiles them for the
 *   host (act_math.h is shared with the GPU code): bit-identical to the CPU
 *   layers' dual_eval, and within the documented bounds of the oracle, using
 *   the very checker the GPU tests use.  These run everywhere.
 * gpu_*: the kernels on the device, when vijp_cuda_available says so;
 *   otherwise each prints one line "t-cuda: NAME SKIPPED: reason" and passes.
 *
 * The oracle runs at 128 bits for the activations (its error, ~2^-120
 * relative, is far below every bound) and at 1024 bits for the dense layer,
 * where sums of at most a few hundred products of doubles are then exact. */
#include "fixtures/cudafix.h"
#include "kernels/cuda/act_math.h"
#include "layer/route.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ACT_PREC 128
#define DENSE_PREC 1024
#define NACT ((int)(sizeof vijp_cuda_act_bounds / sizeof *vijp_cuda_act_bounds))

/* ---------------------------------------------------------------- points */

/* Special inputs: ±0, the smallest subnormal, the smallest normal, tiny,
 * huge, the largest finite, ±∞, NaN, and both sides of GELU's |x| = 40. */
static const double specials_d[] = {0.0, -0.0, 0x1p-1074, -0x1p-1074, DBL_MIN, -DBL_MIN, 1e-300, -1e-300,
                                    1e300, -1e300, DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN, 40, -40,
                                    40.5, -40.5, 1e154, -1e154, 745, -745, 710, -710};
#define NSPECIAL (sizeof specials_d / sizeof *specials_d)

/* n points for activation a: the specials first, then (as t-activations)
 * N(0, 2²), U(−40, −30) (GELU's far tail), U(−746, −700) (e^x subnormal,
 * x·σ(x) and Mish not), ±2^U(−10, 10), all at least 0.5 from the zero x0 of
 * f′ (the bounds relative to |f′|, act_math.h); and points next to x0 (the
 * absolute bound kd0·u there). */
static void act_points(int a, uint64_t seed, size_t n, double *x)
{
    double x0 = vijp_cuda_act_bounds[a].x0;
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        if (i < NSPECIAL) {
            x[i] = specials_d[i];
            continue;
        }
        double u = vijp_rng_uniform(&rng), s = vijp_rng_uniform(&rng) < 0.5 ? -1 : 1, v;
        switch (i % 5) {
        case 0: v = 2 * vijp_rng_normal(&rng); break;
        case 1: v = i % 10 == 1 ? -40 + 10 * u : -746 + 46 * u; break;
        case 2: /* the zero of f′: x0 ± k ulps (x0 itself included), x0 ± 2^U(−50, −1) */
            if (!isnan(x0)) {
                x[i] = i % 10 == 2 ? x0 + (double)((i / 10) % 101 - 50) * ldexp(1, -53) * fabs(x0)
                                   : x0 + s * ldexp(1, -50 + (int)(49 * u));
                continue;
            }
            /* fall through */
        default: v = s * exp2(-10 + 20 * u); break;
        }
        if (fabs(v - x0) < 0.5) v = x0 + s * (0.5 + u); /* NaN x0: never */
        x[i] = v;
    }
}

/* ------------------------------------------------------------- checking */

/* |got − exact| / (rel·|exact| + floor), or +∞ when the classes differ
 * (NaN where the oracle is not, an infinity of the wrong sign, …). */
static double ratio(mpfr_t exact, double got, double rel, double floor_abs)
{
    if (mpfr_nan_p(exact)) return isnan(got) ? 0 : INFINITY;
    if (mpfr_inf_p(exact)) return isinf(got) && !signbit(got) == (mpfr_sgn(exact) > 0) ? 0 : INFINITY;
    if (!isfinite(got)) return INFINITY;
    mpfr_t e;
    mpfr_init2(e, mpfr_get_prec(exact) + 64);
    mpfr_sub_d(e, exact, got, MPFR_RNDN);
    double err = fabs(mpfr_get_d(e, MPFR_RNDU)), mag = fabs(mpfr_get_d(exact, MPFR_RNDU));
    mpfr_clear(e);
    return err / (rel * mag + floor_abs);
}

/* The activation bounds (act_math.h): double kf·u, kd·u relative plus
 * 2^-1022 (f′ within 0.5 of x0: kd0·u absolute); float (1 + 2^-20)·2^-24
 * relative plus 2^-149 (f′ near x0: plus kd0·2^-53).  1.01: slack for
 * evaluating the bound itself in double.  Returns the worst ratio, asserts
 * it is at most 1. */
/* kf of activation a: the ref set's f bound, where it is stated
 * (act_bound, kernels.h). */
static double table_kf(int a)
{
    for (int k = 0; k < VIJP_KACT_COUNT; k++)
        if (!strcmp(vijp_kact_names[k], vijp_cuda_act_bounds[a].name)) return vijp_kernels_set(0, NULL)->act_bound[k].f_u;
    ck_abort_msg("%s: not a kernel-table activation", vijp_cuda_act_bounds[a].name);
    return 0;
}

static double act_check(int a, size_t n, const double *x, const double *f, const double *df, int is_float,
                        const char *who)
{
    const vijp_cuda_act_bound *bd = &vijp_cuda_act_bounds[a];
    double u = 0x1p-53, relf = 1.01 * table_kf(a) * u, reld = 1.01 * bd->kd * u, fl = 0x1p-1022;
    if (is_float) relf = reld = 1.01 * (1 + 0x1p-20) * 0x1p-24, fl = 0x1p-149;
    vijp_format R;
    ck_assert(!vijp_format_mpfr(&R, ACT_PREC, NULL));
    mpfr_t xm, fo, dfo;
    mpfr_inits2(ACT_PREC, xm, fo, dfo, (mpfr_ptr)0);
    double worst = 0, near = 1.01 * bd->kd0 * u; /* within 0.5 of x0: absolute (act_math.h) */
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(xm, x[i], MPFR_RNDN);
        vo_activation_pair(bd->name, fo, dfo, xm, &R);
        int at_zero = fabs(x[i] - bd->x0) < 0.5; /* NaN x0: never */
        double rf = ratio(fo, f[i], relf, fl),
               rd = ratio(dfo, df[i], at_zero && !is_float ? 0 : reld, at_zero ? fl + near : fl);
        ck_assert_msg(rf <= 1 && rd <= 1, "%s %s (%s) at x = %.17g: f = %.17g (oracle %.17g, %g of bound), "
                      "f' = %.17g (oracle %.17g, %g of bound)", who, bd->name, is_float ? "float" : "double", x[i],
                      f[i], mpfr_get_d(fo, MPFR_RNDN), rf, df[i], mpfr_get_d(dfo, MPFR_RNDN), rd);
        if (rf > worst) worst = rf;
        if (rd > worst) worst = rd;
    }
    mpfr_clears(xm, fo, dfo, (mpfr_ptr)0);
    return worst;
}

/* ------------------------------------------------------- host instantiation */

/* act_math.h on the host is the CPU layers' code, operation for operation:
 * bit-identical to their dual_eval (but for GELU beyond |x| = 40, where the
 * CPU formula turns huge x into NaN and act_math.h returns the limits). */
START_TEST(host_matches_cpu_layers)
{
    enum { N = 20000 };
    double *x = vijp_alloc_array(N, sizeof *x);
    for (int a = 0; a < NACT; a++) {
        const vijp_layer_type *T = vijp_layer_type_find(vijp_cuda_act_bounds[a].name);
        ck_assert(T && T->dual_eval);
        act_points(a, test_seed() + (uint64_t)a, N, x);
        size_t compared = 0;
        for (size_t i = 0; i < N; i++) {
            if (a == VIJP_CUDA_GELU && fabs(x[i]) > 40) continue;
            double f1, d1, f2, d2;
            vijp_am_eval(a, x[i], &f1, &d1);
            T->dual_eval(NULL, NULL, x[i], &f2, &d2);
            int same = (isnan(f1) ? isnan(f2) : !memcmp(&f1, &f2, sizeof f1)) &&
                       (isnan(d1) ? isnan(d2) : !memcmp(&d1, &d2, sizeof d1));
            ck_assert_msg(same, "%s(%.17g): act_math.h gives %a, %a; the CPU layer %a, %a", T->name, x[i], f1, d1, f2, d2);
            compared++;
        }
        ck_assert(compared > N / 2);
    }
    vijp_free(x);
}
END_TEST

START_TEST(host_double_vs_oracle)
{
    int a = _i;
    size_t n = (size_t)test_iters(20000);
    double *x = vijp_alloc_array(n, sizeof *x), *f = vijp_alloc_array(n, sizeof *f), *df = vijp_alloc_array(n, sizeof *df);
    act_points(a, test_seed() + 7 * (uint64_t)a, n, x);
    for (size_t i = 0; i < n; i++) vijp_am_eval(a, x[i], &f[i], &df[i]);
    double w = act_check(a, n, x, f, df, 0, "host");
    printf("# t-cuda host %-8s double: worst %.3f of the bound over %zu points\n", vijp_cuda_act_bounds[a].name, w, n);
    vijp_free(x), vijp_free(f), vijp_free(df);
}
END_TEST

/* Float: the points rounded to float (then the specials of float: FLT_MAX,
 * its smallest subnormal), evaluated through vijp_am_eval_f. */
static void float_points(int a, uint64_t seed, size_t n, float *xf, double *x)
{
    act_points(a, seed, n, x);
    static const float fs[] = {FLT_MAX, -FLT_MAX, 0x1p-149f, -0x1p-149f, FLT_MIN, -FLT_MIN, 100, -100};
    for (size_t i = 0; i < n; i++) {
        xf[i] = i < sizeof fs / sizeof *fs ? fs[i] : (float)x[i];
        x[i] = xf[i];
    }
}

START_TEST(host_float_vs_oracle)
{
    int a = _i;
    size_t n = (size_t)test_iters(20000);
    float *xf = vijp_alloc_array(n, sizeof *xf), f1, d1;
    double *x = vijp_alloc_array(n, sizeof *x), *f = vijp_alloc_array(n, sizeof *f), *df = vijp_alloc_array(n, sizeof *df);
    float_points(a, test_seed() + 11 * (uint64_t)a, n, xf, x);
    for (size_t i = 0; i < n; i++) vijp_am_eval_f(a, xf[i], &f1, &d1), f[i] = f1, df[i] = d1;
    double w = act_check(a, n, x, f, df, 1, "host");
    printf("# t-cuda host %-8s float: worst %.3f of the bound over %zu points\n", vijp_cuda_act_bounds[a].name, w, n);
    vijp_free(xf), vijp_free(x), vijp_free(f), vijp_free(df);
}
END_TEST

/* The stub or the real thing: vijp_cuda_available always answers with a
 * reason, and without a GPU every kernel call fails cleanly. */
START_TEST(availability_reason)
{
    char why[256] = "";
    int ok = vijp_cuda_available(why, sizeof why);
    ck_assert_msg(why[0] != '\0', "vijp_cuda_available gave no reason");
    printf("# t-cuda: CUDA %s: %s\n", ok ? "available" : "unavailable", why);
    if (!ok) {
        vijp_error err = {0};
        void *d = NULL;
        ck_assert(vijp_cuda_alloc(&d, 64, &err) != 0 && err.msg[0] && d == NULL);
    }
}
END_TEST

/* ------------------------------------------------------------ GPU tests */

/* n = 100003 points (not a multiple of any block or warp) per activation. */
START_TEST(gpu_activations)
{
    if (!gpu_or_skip("gpu_activations")) return;
    int a = _i;
    size_t n = 100003;
    double *x = vijp_alloc_array(n, sizeof *x), *f = vijp_alloc_array(n, sizeof *f), *df = vijp_alloc_array(n, sizeof *df);
    float *xf = vijp_alloc_array(n, sizeof *xf), *ff = vijp_alloc_array(n, sizeof *ff), *dff = vijp_alloc_array(n, sizeof *dff);
    act_points(a, test_seed() + 13 * (uint64_t)a, n, x);
    double *dx = dev_copy(x, n * sizeof *x), *dfv = dev_new(n * sizeof *f), *ddf = dev_new(n * sizeof *df);
    OK(vijp_cuda_act_d((vijp_cuda_act)a, n, dx, dfv, ddf, &err_));
    host_get(f, dfv, n * sizeof *f), host_get(df, ddf, n * sizeof *df);
    double wd = act_check(a, n, x, f, df, 0, "gpu");
    float_points(a, test_seed() + 17 * (uint64_t)a, n, xf, x);
    float *dxf = dev_copy(xf, n * sizeof *xf), *dff_dev = dev_new(n * sizeof *ff), *ddff = dev_new(n * sizeof *dff);
    OK(vijp_cuda_act_f((vijp_cuda_act)a, n, dxf, dff_dev, ddff, &err_));
    host_get(ff, dff_dev, n * sizeof *ff), host_get(dff, ddff, n * sizeof *dff);
    for (size_t i = 0; i < n; i++) f[i] = ff[i], df[i] = dff[i];
    double wf = act_check(a, n, x, f, df, 1, "gpu");
    printf("# t-cuda gpu %-8s worst of bound: double %.3f, float %.3f over %zu points\n", vijp_cuda_act_bounds[a].name,
           wd, wf, n);
    vijp_cuda_free(dx), vijp_cuda_free(dfv), vijp_cuda_free(ddf), vijp_cuda_free(dxf), vijp_cuda_free(dff_dev),
        vijp_cuda_free(ddff);
    vijp_free(x), vijp_free(f), vijp_free(df), vijp_free(xf), vijp_free(ff), vijp_free(dff);
}
END_TEST

/* Leaky ReLU, α = 0.1 (inexact: rounded to each format, as the oracle
 * does): bound 0 ulps.  Double against the CPU layer itself, float against
 * the binary32 oracle, both bit for bit; sign bits against [x > 0]; and the
 * hash of the double outputs on a fixed grid against the CPU layer's.
 * n = 32·37 + 13: a partial last word of sign bits. */
static double leaky_input(size_t i, vijp_rng *rng)
{
    if (i < NSPECIAL) return specials_d[i];
    double u = vijp_rng_uniform(rng);
    return i % 5 == 0 ? ldexp(u - 0.5, -1060) /* subnormal */ : vijp_rng_normal(rng) * exp2(40 * u - 20);
}

START_TEST(gpu_leaky)
{
    if (!gpu_or_skip("gpu_leaky")) return;
    enum { N = 32 * 37 + 13 };
    const size_t W = vijp_cuda_sign_words(N);
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, "leaky:0.1", 1, N, &err), "%s", err.msg);
    const vijp_layer *L = &net.layers[0];
    static double x[N], g[N], y[N], gx[N], gy[N], ry[N], rgx[N], rgy[N];
    static uint32_t bits[N / 32 + 1];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < N; i++) x[i] = leaky_input(i, &rng), g[i] = leaky_input(N - 1 - i, &rng);
    /* the fixed grid of the hash: x = (i − N/2)/16 in the second half */
    for (size_t i = N / 2; i < N; i++) x[i] = ((double)i - N / 2 - 300) / 16;
    double *dx = dev_copy(x, sizeof x), *dg = dev_copy(g, sizeof g), *dy = dev_new(sizeof y), *dgx = dev_new(sizeof gx),
           *dgy = dev_new(sizeof gy);
    uint32_t *dbits = dev_new(W * sizeof *bits);
    OK(vijp_cuda_leaky_forward_d(N, 0.1, dx, dy, dbits, &err_));
    OK(vijp_cuda_leaky_vjp_d(N, 0.1, dbits, dg, dgx, &err_));
    OK(vijp_cuda_leaky_vijp_d(N, 0.1, dbits, dg, dgy, &err_));
    host_get(y, dy, sizeof y), host_get(gx, dgx, sizeof gx), host_get(gy, dgy, sizeof gy), host_get(bits, dbits, W * 4);
    vijp_format D;
    vijp_format_fixed(&D, VIJP_DOUBLE);
    const vijp_kctx cx = vijp_kctx_of(&D); /* the CPU's default kernels */
    L->type->d->forward(L, &cx, NULL, x, 1, ry);
    L->type->d->vjp(L, &cx, NULL, x, 1, g, rgx);
    ck_assert(!L->type->d->vijp(L, &cx, NULL, x, 1, g, NULL, rgy, &err));
    for (size_t i = 0; i < N; i++) {
        ck_assert_msg((bits[i / 32] >> (i % 32) & 1) == (x[i] > 0), "sign bit %zu of x = %g", i, x[i]);
        ck_assert_msg(!memcmp(&y[i], &ry[i], 8) || (isnan(y[i]) && isnan(ry[i])), "forward(%a) = %a, CPU %a", x[i], y[i], ry[i]);
        ck_assert_msg(!memcmp(&gx[i], &rgx[i], 8) || (isnan(gx[i]) && isnan(rgx[i])), "vjp at %a: %a, CPU %a", x[i], gx[i], rgx[i]);
        ck_assert_msg(!memcmp(&gy[i], &rgy[i], 8) || (isnan(gy[i]) && isnan(rgy[i])), "vijp at %a: %a, CPU %a", x[i], gy[i], rgy[i]);
    }
    for (size_t i = N % 32; i < 32; i++) ck_assert_msg(!(bits[W - 1] >> i & 1), "unused sign bit %zu set", i);
    uint64_t hg = FNV_START, hc = FNV_START;
    hg = fnv1a(hg, y + N / 2, (N - N / 2) * 8), hg = fnv1a(hg, gx + N / 2, (N - N / 2) * 8), hg = fnv1a(hg, gy + N / 2, (N - N / 2) * 8);
    hc = fnv1a(hc, ry + N / 2, (N - N / 2) * 8), hc = fnv1a(hc, rgx + N / 2, (N - N / 2) * 8), hc = fnv1a(hc, rgy + N / 2, (N - N / 2) * 8);
    ck_assert_msg(hg == hc, "leaky grid hash: GPU %016llx, CPU %016llx", (unsigned long long)hg, (unsigned long long)hc);
    printf("# t-cuda gpu leaky:0.1 double: grid hash %016llx (= CPU layer)\n", (unsigned long long)hg);

    /* float against the binary32 oracle */
    vijp_format F;
    ck_assert(!vijp_format_parse("binary32", &F, NULL));
    static float xf[N], gf[N], yf[N], gxf[N], gyf[N];
    for (size_t i = 0; i < N; i++) xf[i] = (float)x[i], gf[i] = (float)g[i];
    float *dxf = dev_copy(xf, sizeof xf), *dgf = dev_copy(gf, sizeof gf), *dyf = dev_new(sizeof yf),
          *dgxf = dev_new(sizeof gxf), *dgyf = dev_new(sizeof gyf);
    OK(vijp_cuda_leaky_forward_f(N, 0.1f, dxf, dyf, dbits, &err_));
    OK(vijp_cuda_leaky_vjp_f(N, 0.1f, dbits, dgf, dgxf, &err_));
    OK(vijp_cuda_leaky_vijp_f(N, 0.1f, dbits, dgf, dgyf, &err_));
    host_get(yf, dyf, sizeof yf), host_get(gxf, dgxf, sizeof gxf), host_get(gyf, dgyf, sizeof gyf);
    mpfr_t *X = vo_vec_new(N, &F), *G = vo_vec_new(N, &F), *Y = vo_vec_new(N, &F), *GX = vo_vec_new(N, &F),
           *GY = vo_vec_new(N, &F);
    for (size_t i = 0; i < N; i++) mpfr_set_flt(X[i], xf[i], MPFR_RNDN), mpfr_set_flt(G[i], gf[i], MPFR_RNDN);
    L->type->mp->forward(L, NULL, X, 1, Y, &F);
    L->type->mp->vjp(L, NULL, X, 1, G, GX, &F);
    ck_assert(!L->type->mp->vijp(L, NULL, X, 1, G, NULL, GY, &F));
    for (size_t i = 0; i < N; i++) {
        float o[3] = {mpfr_get_flt(Y[i], MPFR_RNDN), mpfr_get_flt(GX[i], MPFR_RNDN), mpfr_get_flt(GY[i], MPFR_RNDN)};
        float k[3] = {yf[i], gxf[i], gyf[i]};
        for (int j = 0; j < 3; j++)
            ck_assert_msg(!memcmp(&o[j], &k[j], 4) || (isnan(o[j]) && isnan(k[j])),
                          "leaky float op %d at x = %a, g = %a: GPU %a, oracle %a", j, xf[i], gf[i], k[j], o[j]);
    }
    vo_vec_free(X, N), vo_vec_free(G, N), vo_vec_free(Y, N), vo_vec_free(GX, N), vo_vec_free(GY, N);
    vijp_cuda_free(dx), vijp_cuda_free(dg), vijp_cuda_free(dy), vijp_cuda_free(dgx), vijp_cuda_free(dgy);
    vijp_cuda_free(dxf), vijp_cuda_free(dgf), vijp_cuda_free(dyf), vijp_cuda_free(dgxf), vijp_cuda_free(dgyf);
    vijp_cuda_free(dbits);
    vijp_net_free(&net);
}
END_TEST

Suite *suite_cuda(void)
{
    Suite *s = suite_create("cuda");
    TCase *h = tcase_create("host");
    tcase_set_timeout(h, (double)test_iters(120));
    tcase_add_test(h, availability_reason);
    tcase_add_test(h, host_matches_cpu_layers);
    tcase_add_loop_test(h, host_double_vs_oracle, 0, NACT);
    tcase_add_loop_test(h, host_float_vs_oracle, 0, NACT);
    suite_add_tcase(s, h);
    TCase *g = tcase_create("gpu");
    tcase_set_timeout(g, (double)test_iters(300));
    tcase_add_loop_test(g, gpu_activations, 0, NACT);
    tcase_add_test(g, gpu_leaky);
    cuda_add_dense_tests(g);
    cuda_add_set_tests(s, h);
    suite_add_tcase(s, g);
    return s;
}

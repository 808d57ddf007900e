/* Smooth activations: f and f′ from nested forward AD (dual
 * numbers, src/kernels/dual.h) against the MPFR oracle (oracles/activations.c)
 * over 10^5 points each, including large |x| and the zeros of f′; the zeros
 * themselves; and their certification.
 *
 * Bounds: the ref set's act_bound (the kernel table, src/kernels/kernels.h;
 * the layers' dual_eval is ref's evaluation, derived in
 * src/kernels/ref/dual.c) states, for each, |f̂ − f| <= Kf·u|f| and
 * |f̂′ − f′| <= K1·u|term1| + K2(x)·u|term2|, where f′ = term1 + term2 is
 * the dual-number sum (one term for sigmoid, softplus, tanh).  The terms are
 * recomputed here in MPFR from their definitions.  The oracle runs at 128
 * bits: its error, 2^-120 relative to the terms, is far below 2^-53.  Relative
 * bounds hold down to the smallest normal double 2^-1022, for f and for the
 * terms of f′, even where intermediates (e^x, σ(x), Φ(x)) are subnormal;
 * below it the result is subnormal and |f̂ − f|, |f̂′ − f′| must be within
 * 2^-1022 absolute (one subnormal result's worth of lost digits at most is
 * not a relative statement; underflow is checked by the certification test). */
#include "fixtures/layerfix.h"
#include "fixtures/actterms.h"
#include "oracles/oracles.h"
#include "vijp/certify.h"
#include "vijp/composite.h"
#include "layer/route.h"
#include <math.h>
#include <stdio.h>
#include <string.h>


START_TEST(zeros_of_derivative)
{
    for (size_t a = 0; a < NACTS; a++) {
        if (!acts[a].has_zero) continue;
        double x0 = locate_zero(acts[a].name);
        ck_assert_msg(fabs(x0 - layerfix_deriv_zero(acts[a].name)) <= 1e-12, "%s: f' vanishes at %.17g, layerfix says %.17g",
                      acts[a].name, x0, layerfix_deriv_zero(acts[a].name));
    }
}
END_TEST

START_TEST(dual_derivative_vs_oracle)
{
    const char *name = acts[_i].name;
    const vijp_layer_type *T = vijp_layer_type_find(name);
    ck_assert_msg(T && T->dual_eval, "%s: no dual_eval", name);
    ck_assert_str_eq(vijp_kact_names[_i], name);
    const vijp_kact_bound *B = &vijp_kernels_set(0, NULL)->act_bound[_i];
    double x0 = acts[_i].has_zero ? locate_zero(name) : NAN, u = ldexp(1, -53), tiny = ldexp(1, -1022);
    vijp_format R;
    ck_assert(!vijp_format_mpfr(&R, ORACLE_PREC, NULL));
    mpfr_t xm, f, d, t1, t2, e;
    mpfr_inits2(ORACLE_PREC, xm, f, d, t1, t2, e, (mpfr_ptr)0);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 31 * (uint64_t)_i);
    long n = test_iters(100000), underflowed = 0;
    double worst_d = 0, worst_f = 0, at_d = 0, at_f = 0, max_ulps_d = 0;
    for (long i = 0; i < n; i++) {
        double x = sample_point(&rng, i, x0), fx, dfx, kf, k1, k2;
        T->dual_eval(NULL, NULL, x, &fx, &dfx);
        mpfr_set_d(xm, x, MPFR_RNDN);
        vo_activation_pair(name, f, d, xm, &R);
        acts[_i].terms(t1, t2, x), act_constants(B, x, &kf, &k1, &k2);
        double a1 = fabs(mpfr_get_d(t1, MPFR_RNDU)), a2 = fabs(mpfr_get_d(t2, MPFR_RNDU));
        mpfr_sub_d(e, d, dfx, MPFR_RNDN);
        double err_d = fabs(mpfr_get_d(e, MPFR_RNDU));
        mpfr_sub_d(e, f, fx, MPFR_RNDN);
        double err_f = fabs(mpfr_get_d(e, MPFR_RNDU)), af = fabs(mpfr_get_d(f, MPFR_RNDN));
        if (a1 + a2 < tiny) {
            underflowed++;
            ck_assert_msg(err_d <= tiny, "%s: f'(%.17g) = %g, oracle %g (underflow range)", name, x, dfx,
                          mpfr_get_d(d, MPFR_RNDN));
        } else {
            double bd = 1.01 * u * (k1 * a1 + k2 * a2), r = err_d / bd;
            ck_assert_msg(r <= 1, "%s: f'(%.17g) = %.17g, oracle %.17g: error %g is %g of its bound", name, x, dfx,
                          mpfr_get_d(d, MPFR_RNDN), err_d, r);
            if (r > worst_d) worst_d = r, at_d = x;
            double ulp = ldexp(1, ilogb(a1 + a2) - 52);
            if (err_d / ulp > max_ulps_d) max_ulps_d = err_d / ulp;
        }
        if (af >= tiny) {
            double r = err_f / (1.01 * u * kf * af);
            ck_assert_msg(r <= 1, "%s: f(%.17g) = %.17g, oracle %.17g: %g of its bound", name, x, fx,
                          mpfr_get_d(f, MPFR_RNDN), r);
            if (r > worst_f) worst_f = r, at_f = x;
        } else {
            ck_assert_msg(err_f <= tiny, "%s: f(%.17g) = %g in the underflow range", name, x, fx);
        }
    }
    printf("# %-8s %ld points: f' worst %.2f of bound (x = %.6g), at most %.2f ulps of |terms|; f worst %.2f (x = %.6g); "
           "%ld in the underflow range\n",
           name, n, worst_d, at_d, max_ulps_d, worst_f, at_f, underflowed);
    mpfr_clears(xm, f, d, t1, t2, e, (mpfr_ptr)0);
}
END_TEST

/* Certification over [−1000, 1000]: GELU, SiLU and Mish have exactly one
 * place where f′ may vanish, a tight span around x0; sigmoid and softplus
 * none.  In double, sigmoid′ ≈ e^{−|x|} underflows (rounds to 0) where
 * e^{−|x|} < 2^-1075, |x| > 745.13, and falls below u·max f′ = 2^-53/4 where
 * 4e^{−|x|} < 2^-53, |x| > 38.12 (independent estimates, not the code's). */
/* a and b hold the same MPFR data entry for entry: both NaN, or equal
 * with the same sign (zeros included). */
static void expect_same_entries(const vijp_mat *a, const vijp_mat *b, const char *what)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        mpfr_srcptr x = a->m[i], y = b->m[i];
        int same = mpfr_nan_p(x) ? mpfr_nan_p(y) : !mpfr_nan_p(y) && mpfr_equal_p(x, y) && !mpfr_signbit(x) == !mpfr_signbit(y);
        ck_assert_msg(same, "%s: entry %zu differs", what, i);
    }
}

/* vijp_layer_forward_deriv (layer/route.h: f and f′ in one evaluation, as
 * the engines' forward pass keeps f′) gives, on the MPFR route, the bits of
 * vijp_layer_forward and of vijp_layer_jvp with a tangent of ones, for
 * every activation whose oracle is one pair of f and f′, at 53, 106 and 212
 * bits (the last two with the reference's exact dot products), on random
 * points and on ±0, tiny, large and NaN inputs; it declines (nothing
 * written) for tanh, whose oracle has no such pair, and off the MPFR
 * route.  A pair that let f depend on whether f′ was asked for, or a
 * combined operator that mixed up its two outputs, fails here. */
START_TEST(forward_deriv_is_forward_and_jvp)
{
    static const char *specs[] = {"gelu", "gelu:tanh", "silu", "sigmoid", "softplus", "softplus:2", "mish",
                                  "elu:0.5", "selu", "softsign", "tanh"};
    static const char *fmts[] = {"mpfr:53", "mpfr:106", "mpfr:212"};
    static const double specials[] = {0.0, -0.0, 1e-300, -1e-300, 40.0, -40.0, 700.0, -700.0, NAN};
    for (size_t si = 0; si < sizeof specs / sizeof *specs; si++)
        for (size_t fi = 0; fi < 3; fi++) {
            layerfix t;
            layerfix_init(&t, specs[si], 16, fmts[fi], 3, 5 + si);
            t.F.exact_dots = fi > 0; /* the drift reference's levels */
            for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) mpfr_set_d(t.XF.m[k], specials[k], MPFR_RNDN);
            vijp_mat Y1, D1, Y2, D2, ones;
            size_t n = t.L->in, B = t.B;
            vijp_mat_init(&Y1, n, B, &t.F), vijp_mat_init(&D1, n, B, &t.F), vijp_mat_init(&ones, n, B, &t.F);
            vijp_mat_init(&Y2, n, B, &t.F), vijp_mat_init(&D2, n, B, &t.F);
            for (size_t i = 0; i < n * B; i++) vijp_mat_set_entry_d(&ones, i, 1.0);
            vijp_error err = {0};
            ck_assert(!vijp_layer_forward(t.L, &t.thF, &t.XF, &Y1, &err));
            ck_assert(!vijp_layer_jvp(t.L, &t.thF, &t.XF, &ones, &D1, &err));
            int rc = vijp_layer_forward_deriv(t.L, &t.thF, &t.XF, &Y2, &D2, &err);
            char what[64];
            snprintf(what, sizeof what, "%s in %s", specs[si], fmts[fi]);
            if (!strcmp(specs[si], "tanh")) {
                ck_assert_msg(rc == VIJP_EUNSUPPORTED && !err.msg[0], "%s: not declined", what);
            } else {
                ck_assert_msg(rc == 0, "%s: declined (%d)", what, rc);
                snprintf(what, sizeof what, "%s in %s, f", specs[si], fmts[fi]);
                expect_same_entries(&Y2, &Y1, what);
                snprintf(what, sizeof what, "%s in %s, f'", specs[si], fmts[fi]);
                expect_same_entries(&D2, &D1, what);
            }
            vijp_mat *all[] = {&Y1, &D1, &Y2, &D2, &ones};
            for (size_t k = 0; k < 5; k++) vijp_mat_clear(all[k]);
            layerfix_clear(&t);
        }
    layerfix t; /* off the MPFR route: declined */
    layerfix_init(&t, "gelu", 8, "double", 2, 3);
    vijp_mat Y, D;
    vijp_mat_init(&Y, 8, 2, &t.F), vijp_mat_init(&D, 8, 2, &t.F);
    vijp_error err = {0};
    ck_assert(vijp_layer_forward_deriv(t.L, &t.thF, &t.XF, &Y, &D, &err) == VIJP_EUNSUPPORTED && !err.msg[0]);
    vijp_mat_clear(&Y), vijp_mat_clear(&D);
    layerfix_clear(&t);
}
END_TEST

START_TEST(certification)
{
    for (size_t a = 0; a < NACTS; a++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, acts[a].name, 1, 1, NULL));
        vijp_activation_report r;
        vijp_error err = {0};
        ck_assert_msg(!vijp_activation_analyze(&net.layers[0], NULL, 1000, 1e-9, &r, &err), "%s: %s", acts[a].name, err.msg);
        ck_assert_msg(r.complete, "%s: bisection incomplete after %zu boxes", acts[a].name, r.boxes);
        if (acts[a].has_zero) {
            double x0 = locate_zero(acts[a].name);
            ck_assert_msg(r.n_bad == 1 && r.bad[0].lo <= x0 && x0 <= r.bad[0].hi && r.bad[0].hi - r.bad[0].lo < 1e-6,
                          "%s: %zu spans where f' may vanish, first [%g, %g]; x0 = %.17g", acts[a].name, r.n_bad,
                          r.n_bad ? r.bad[0].lo : NAN, r.n_bad ? r.bad[0].hi : NAN, x0);
        } else {
            ck_assert_msg(r.n_bad == 0, "%s: f' > 0 everywhere, but %zu spans reported", acts[a].name, r.n_bad);
        }
        if (!strcmp(acts[a].name, "sigmoid")) {
            ck_assert_str_eq(r.fmt[0].format, "double");
            ck_assert_msg(r.fmt[0].underflow_at >= 744 && r.fmt[0].underflow_at <= 746, "sigmoid underflow at %g",
                          r.fmt[0].underflow_at);
            ck_assert_msg(r.fmt[0].negligible_at >= 37.5 && r.fmt[0].negligible_at <= 38.6, "sigmoid negligible at %g",
                          r.fmt[0].negligible_at);
        }
        vijp_activation_report_clear(&r);
        vijp_net_free(&net);
    }
}
END_TEST

/* The composite autograd baseline (include/vijp/composite.h):
 *  - what it keeps, by the rules in src/memory/composite.c (exp and 1/a keep their
 *    output, erf its input, a·b both operands, constants nothing):
 *    1/(1+exp(−x)): e, s → 2;  log1p(exp(x)): e → 1;  tanh: its output → 1;
 *    x·σ(x): x, σ → 2;  x·(0.5(1 + erf(x/√2))): x/√2, x, 0.5(1+erf) → 3;
 *    x·tanh(softplus(x)): x, tanh(sp) → 2;
 *  - its gradient is f′ within 4e-13 on [−2, 2]: at most 8 operations of
 *    <= 5 ulps each, conditions <= 22 (1 + erf(t) at t >= −√2 is >= 0.046),
 *    so <= 22·8·5·2u < 4e-13 against |f′| <= 1.1;
 *  - vijp_composite_accuracy over [−40, 40]: nested forward AD within the
 *    ulps its bounds give where f′ has one term (sigmoid 12u|f′| <= 12 ulps,
 *    softplus 7, tanh 6), while the composite tanh′ = 1 − tanh² is 0 from
 *    |x| ≈ 19.1 on: an error of the whole f′, ~2^52 ulps. */
START_TEST(composite_baseline)
{
    static const size_t kept[] = {2, 1, 1, 2, 3, 2}; /* acts[] order: sigmoid softplus tanh silu gelu mish */
    enum { P = 401 };
    double x[P], y[P], gx[P], one[P];
    for (int i = 0; i < P; i++) x[i] = -2 + 4.0 * i / (P - 1), one[i] = 1;
    for (size_t a = 0; a < NACTS; a++) {
        vijp_tape t;
        ck_assert(!vijp_composite_forward(acts[a].name, x, P, y, &t));
        ck_assert_msg(t.count == kept[a], "%s: composite keeps %zu tensors, expected %zu", acts[a].name, t.count, kept[a]);
        vijp_composite_backward(&t, one, gx);
        vijp_tape_clear(&t);
        for (int i = 0; i < P; i++) {
            double d = oracle_deriv(acts[a].name, x[i]);
            ck_assert_msg(fabs(gx[i] - d) <= 4e-13, "%s: composite f'(%g) = %.17g, oracle %.17g", acts[a].name, x[i], gx[i], d);
        }
    }
    static const double nested_max[] = {12, 7, 6};
    for (size_t a = 0; a < 3; a++) {
        vijp_accuracy acc;
        vijp_error err;
        ck_assert_msg(!vijp_composite_accuracy(acts[a].name, -40, 40, 8001, 0.05, &acc, &err), "%s", err.msg);
        ck_assert_msg(acc.nested_ulps <= nested_max[a] && acc.used > 7000, "%s: nested f' %g ulps over %zu points",
                      acts[a].name, acc.nested_ulps, acc.used);
        if (!strcmp(acts[a].name, "tanh")) ck_assert_msg(acc.composite_ulps > 1e15, "composite tanh: %g", acc.composite_ulps);
    }
}
END_TEST

Suite *suite_activations(void)
{
    Suite *s = suite_create("activations");
    TCase *tc = tcase_create("dual");
    tcase_set_timeout(tc, (double)test_iters(300));
    tcase_add_test(tc, zeros_of_derivative);
    tcase_add_loop_test(tc, dual_derivative_vs_oracle, 0, (int)NACTS);
    tcase_add_test(tc, certification);
    tcase_add_test(tc, forward_deriv_is_forward_and_jvp);
    tcase_add_test(tc, composite_baseline);
    suite_add_tcase(s, tc);
    return s;
}

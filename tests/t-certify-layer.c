/* Certification of real layers (vijp_certify_layer, DESIGN §4): known verdicts,
 * declarations checked against the numbers, enclosures that contain the
 * oracle, strided convolutions, and Moonwalk's fragments as long as the
 * proven cokernel. */
#include "fixtures/certfix.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- 5. known verdicts of real layers ---------------------------------- */


/* leaky:0.1 is submersive by declaration; J = diag(1 or α) exactly, so
 * σ_min = α = fl(0.1) exactly when some input is <= 0 (the enclosure of f′
 * there is the point α), and 1 when all are positive. */
START_TEST(layer_leaky)
{
    one_layer o;
    one_layer_init(&o, "leaky:0.1", 8, 1);
    double x[8] = {0.5, -1, 2, -0.25, 3, 1e-300, 7, 0};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_double_eq(c.s, 0.1);
    ck_assert_uint_eq(c.cokernel_dim, 0);
    ck_assert_uint_eq(c.num.rank, 8);
    vijp_certificate_clear(&c);
    double xp[8] = {0.5, 1, 2, 0.25, 3, 1e-300, 7, 4};
    certify_at(&o, xp, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_double_eq(c.s, 1);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* relu: J = diag([x > 0]) exactly; the inactive units (x <= 0, 0 included)
 * are exact zero rows, a proven cokernel of that dimension.  All active: J =
 * I, certified with s = 1 (no declaration: the enclosure's own proof). */
START_TEST(layer_relu)
{
    one_layer o;
    one_layer_init(&o, "relu", 8, 1);
    double x[8] = {0.5, -1, 2, -0.25, 3, 0, 7, -1e-300};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 4);
    ck_assert(isnan(c.s));
    vijp_certificate_clear(&c);
    double xp[8] = {0.5, 1, 2, 0.25, 3, 1e-300, 7, 4};
    certify_at(&o, xp, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_double_eq(c.s, 1);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* dense 12x8 (m > n): never submersive, by declaration and by structure,
 * cokernel dimension exactly 4 (orthogonal W has rank 8).  dense 8x8
 * orthogonal: σ = 1 up to the initialiser's O(u) orthogonality error; the
 * certificate's first try is s = √0.98·σ̂ = 0.98995, so s >= 0.98; and s < 1
 * + 8u (σ_max of W is at most 1 + O(u)). */
START_TEST(layer_dense)
{
    one_layer o;
    one_layer_init(&o, "dense:12x8", 8, 3);
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 4);
    ck_assert_uint_eq(c.num.rank, 8);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);

    one_layer_init(&o, "dense:8x8", 8, 3);
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "certified-double");
    ck_assert_msg(c.s >= 0.98 && c.s < 1 + 8 * 0x1p-53, "s = %.17g", c.s);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* Upper bound on f′(x) = sech²(x): correctly rounded upward at 256 bits. */
static double sech2_up(double x)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_sech(t, t, MPFR_RNDU);
    mpfr_sqr(t, t, MPFR_RNDU);
    double r = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clear(t);
    return r;
}

/* tanh: submersive by declaration.  At |x| = 30·O(1) some f′ = sech² are
 * far below the rank tolerance 8u·max f′ (f′(30) ≈ 4e^-60 ≈ 3.5e-26), so the
 * double numerical rank is < 8 ("numerically degenerate in double") while
 * the MPFI enclosures still prove σ_min = min f′ > s > 0, with s the lower
 * end of a 128-bit enclosure rounded down: s <= f′min <= fmin = RU(f′min),
 * and s >= f′min(1 − 2^-120)(1 − 2^-52) >= fmin(1 − 2^-52)²(1 − 2^-120) >
 * fmin(1 − 2^-50) (enclosure width, the rounding of s, that of fmin).  At
 * |x| = 500, f′ ≈ 4e^-1000 is below double's range: no numerical proof at
 * all, the declaration alone makes it certified. */
START_TEST(layer_tanh)
{
    one_layer o;
    one_layer_init(&o, "tanh", 8, 1);
    double x[8] = {0.5 * 30, -1 * 30, 2 * 30, -0.25 * 30, 0.01 * 30, -0.7 * 30, 1.3 * 30, 0.1 * 30};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_msg(c.num.rank < 8, "rank %zu", c.num.rank);
    double fmin = sech2_up(60); /* the largest |x| */
    ck_assert_msg(c.s > 0 && c.s <= fmin && c.s >= fmin * (1 - 0x1p-50), "s = %.17g, f′min <= %.17g", c.s, fmin);
    vijp_certificate_clear(&c);
    double xb[8] = {500, -500, 0.5, 1, -2, 500, 3, -0.1};
    certify_at(&o, xb, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_uint_eq(c.num.rank, 5);
    ck_assert_msg(strstr(c.reason, "declared submersive") != NULL, "reason '%s'", c.reason);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* ---- 8. declarations checked ------------------------------------------- */

extern const vijp_layer_type vijp_layer_relu, vijp_layer_dense;

static unsigned claims_submersive(const vijp_layer *L)
{
    (void)L;
    return VIJP_DECL_SUBMERSIVE;
}

static unsigned claims_never(const vijp_layer *L)
{
    (void)L;
    return VIJP_DECL_NEVER_SUBMERSIVE;
}

/* A relu that claims to be submersive, at a point with inactive units (a
 * proven cokernel), and a square dense layer that claims never to be, at an
 * orthogonal W (certified): both contradictions are VIJP_EDECLARATION naming the
 * layer.  At a point where relu is submersive the claim stands. */
START_TEST(declarations_checked)
{
    vijp_layer_type liar = vijp_layer_relu;
    liar.name = "relu-claiming-submersive";
    liar.declare = claims_submersive;
    vijp_layer L = {.type = &liar, .in = 6, .out = 6};
    double x[6] = {1, -2, 3, 0, 5, 6};
    vijp_certificate c;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_certify_layer(&L, NULL, x, NULL, &c, &err), VIJP_EDECLARATION);
    ck_assert_msg(strstr(err.msg, "relu-claiming-submersive") != NULL, "message '%s'", err.msg);
    vijp_certificate_clear(&c);
    double xp[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(vijp_certify_layer(&L, NULL, xp, NULL, &c, &err), 0);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    vijp_certificate_clear(&c);

    one_layer o;
    one_layer_init(&o, "dense:6x6", 6, 2);
    vijp_layer_type never = vijp_layer_dense;
    never.name = "dense-claiming-never";
    never.declare = claims_never;
    vijp_layer D = *o.L;
    D.type = &never;
    ck_assert_int_eq(vijp_certify_layer(&D, o.theta, xp, NULL, &c, &err), VIJP_EDECLARATION);
    ck_assert_msg(strstr(err.msg, "dense-claiming-never") != NULL, "message '%s'", err.msg);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST
/* A strided convolution is submersive or not depending on its weights:
 * conv1d:1x3s2 on 4 positions (zero padding) computes y0 = w0·0 + w1·x0 +
 * w2·x1 and y1 = w0·x1 + w1·x2 + w2·x3.  With w = (1, 0, 0) the row of y0
 * is exactly zero: not submersive, cokernel 1, proven by structure; with
 * w = (0, 1, 0) the rows are e_0 and e_2: σ_min = 1, certified. */
START_TEST(strided_conv_certification)
{
    one_layer o;
    one_layer_init(&o, "conv1d:1x3s2", 4, 1);
    double th[4] = {1, 0, 0, 0.25}, x[4] = {0.5, -1, 2, 0.3};
    o.theta = th;
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert_uint_eq(c.cokernel_dim, 1);
    ck_assert(c.cokernel_proven);
    vijp_certificate_clear(&c);
    th[0] = 0, th[1] = 1;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_msg(c.s > 0.98 && c.s <= 1, "proven s = %g (the first trial is 0.99 of the estimate)", c.s);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* The MPFI enclosures of LayerNorm's and softmax's Jacobians contain the
 * 1024-bit oracle Jacobian (independent code, error ~2^-1000) at 20 points
 * each; the radius is the midpoint's rounding to double (<= u|mid|) plus
 * the 128-bit intervals' width (< 1e-25). */
START_TEST(jacobian_enclosures_contain_oracle)
{
    static const char *const specs[] = {"layernorm", "softmax"};
    for (size_t s = 0; s < 2; s++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, specs[s], 1, 7, NULL));
        const vijp_layer *L = &net.layers[0];
        vijp_format R;
        ck_assert(!vijp_format_mpfr(&R, 1024, NULL));
        vijp_rng rng;
        vijp_rng_seed(&rng, test_seed() + 40 + s);
        for (int k = 0; k < 20; k++) {
            double x[7], mid[49], rad[49];
            for (size_t i = 0; i < 7; i++) x[i] = 3 * vijp_rng_normal(&rng);
            ck_assert(!vijp_layer_jacobian_enclosure(L, NULL, x, mid, rad, NULL));
            vijp_mat xm, J;
            vijp_mat_init(&xm, 7, 1, &R), vijp_mat_init(&J, 7, 7, &R);
            for (size_t i = 0; i < 7; i++) vijp_mat_set_entry_d(&xm, i, x[i]);
            ck_assert(!vijp_layer_jacobian(L, NULL, &xm, &J, NULL));
            mpfr_t d;
            mpfr_init2(d, 1100);
            for (size_t i = 0; i < 49; i++) {
                mpfr_sub_d(d, J.m[i], mid[i], MPFR_RNDN); /* exact at 1100 bits */
                mpfr_abs(d, d, MPFR_RNDN);
                ck_assert_msg(mpfr_cmp_d(d, rad[i]) <= 0 && rad[i] <= 0x1p-53 * fabs(mid[i]) + 1e-25,
                              "%s: entry %zu: |J − mid| %g, rad %g", specs[s], i, mpfr_get_d(d, MPFR_RNDU), rad[i]);
            }
            mpfr_clear(d);
            vijp_mat_clear(&xm), vijp_mat_clear(&J);
        }
        vijp_net_free(&net);
    }
}
END_TEST

/* Moonwalk stores, per layer, a fragment as long as the layer's cokernel:
 * the vijp rebuilds everything else.  At 20 random points per layer the
 * fragment length equals the cokernel dimension from certification, proven:
 * by structure for ReLU and the tall dense layer; for LayerNorm and softmax
 * by their exact null directions (1, ŷ) plus a certificate that the rest of
 * J has full rank.  So the fragment is no longer than it must be: minimal. */
START_TEST(fragment_is_cokernel)
{
    static const struct {
        const char *spec;
        size_t width;
    } specs[] = {{"relu", 8}, {"layernorm", 6}, {"softmax", 6}, {"dense:9", 5}, {"dense:6", 6}, {"gelu", 6}};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        one_layer o;
        one_layer_init(&o, specs[s].spec, specs[s].width, 3 + s);
        vijp_rng rng;
        vijp_rng_seed(&rng, test_seed() + s);
        vijp_format fd;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        for (int k = 0; k < 20; k++) {
            double x[16];
            for (size_t i = 0; i < o.L->in; i++) x[i] = vijp_rng_normal(&rng);
            vijp_certificate c;
            certify_at(&o, x, &c);
            vijp_mat th = {.rows = o.L->type->param_count(o.L), .cols = 1, .fmt = &fd, .d = (double *)o.theta};
            vijp_mat xm = {.rows = o.L->in, .cols = 1, .fmt = &fd, .d = x};
            size_t frag = vijp_layer_fragment_count(o.L, &th, &xm);
            ck_assert_msg(frag == c.cokernel_dim, "%s at sample %d: fragment %zu, cokernel dimension %zu (%s)",
                          specs[s].spec, k, frag, c.cokernel_dim, c.method);
            if (s == 1 || s == 2) /* LayerNorm, softmax: known null directions + certified rank */
                ck_assert_msg(c.cokernel_proven, "%s at sample %d: cokernel not proven (%s)", specs[s].spec, k, c.reason);
            vijp_certificate_clear(&c);
        }
        vijp_net_free(&o.net);
    }
}
END_TEST

Suite *suite_certify_layer(void)
{
    Suite *s = suite_create("certify-layer");
    TCase *tc = tcase_create("certify-layer");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layer_leaky);
    tcase_add_test(tc, layer_relu);
    tcase_add_test(tc, layer_dense);
    tcase_add_test(tc, layer_tanh);
    tcase_add_test(tc, fragment_is_cokernel);
    tcase_add_test(tc, strided_conv_certification);
    tcase_add_test(tc, jacobian_enclosures_contain_oracle);
    tcase_add_test(tc, declarations_checked);
    suite_add_tcase(s, tc);
    return s;
}

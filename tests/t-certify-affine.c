/* Affine forms of a net's box (src/certify/affine.c, net_box.c): every
 * point of the box, sent through the layers in MPFR at 256 bits, lands in
 * the form's hull after each layer, and in the box each layer of
 * vijp_certify_net_box is certified over.  The oracle for dense, tanh,
 * silu, sigmoid and gelu is written here from their definitions (not the
 * layers' or the oracles' code); for the net with a LayerNorm it is the
 * oracles (oracles/, apart from certify/). */
#include "fixtures/certfix.h"
#include "certify/affine.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREC 256 /* the oracle's bits: its own rounding, ~2^-250 relative, is far below any enclosure's width */

/* y = f(x) for one layer, from the definitions: dense y = Wx + b (theta =
 * [W column-major, b]); tanh; relu max(x, 0); silu x·σ(x); sigmoid σ(x);
 * gelu x·(1 + erf(x/√2))/2. */
static void layer_256(const vijp_layer *L, const double *theta, mpfr_t *x, mpfr_t *y)
{
    const char *name = L->type->name;
    mpfr_t t;
    mpfr_init2(t, PREC);
    for (size_t j = 0; j < L->out; j++) {
        mpfr_set_zero(t, 1);
        if (!strcmp(name, "dense")) {
            mpfr_set_d(y[j], theta[L->out * L->in + j], MPFR_RNDN);
            for (size_t k = 0; k < L->in; k++)
                mpfr_set_d(t, theta[j + k * L->out], MPFR_RNDN), mpfr_mul(t, t, x[k], MPFR_RNDN), mpfr_add(y[j], y[j], t, MPFR_RNDN);
        } else if (!strcmp(name, "tanh")) mpfr_tanh(y[j], x[j], MPFR_RNDN);
        else if (!strcmp(name, "relu")) mpfr_max(y[j], x[j], t, MPFR_RNDN);
        else if (!strcmp(name, "sigmoid") || !strcmp(name, "silu")) {
            mpfr_neg(t, x[j], MPFR_RNDN), mpfr_exp(t, t, MPFR_RNDN), mpfr_add_ui(t, t, 1, MPFR_RNDN);
            mpfr_ui_div(y[j], 1, t, MPFR_RNDN);
            if (!strcmp(name, "silu")) mpfr_mul(y[j], y[j], x[j], MPFR_RNDN);
        } else if (!strcmp(name, "gelu")) {
            mpfr_sqrt_ui(t, 2, MPFR_RNDN), mpfr_div(t, x[j], t, MPFR_RNDN), mpfr_erf(t, t, MPFR_RNDN);
            mpfr_add_ui(t, t, 1, MPFR_RNDN), mpfr_mul(t, t, x[j], MPFR_RNDN), mpfr_div_2ui(y[j], t, 1, MPFR_RNDN);
        } else ck_abort_msg("no oracle for %s", name);
    }
    mpfr_clear(t);
}

/* Point p of the box: its 2^n corners first, then seeded uniform points. */
static void box_point(size_t p, size_t n, const double *lo, const double *hi, vijp_rng *g, double *x)
{
    for (size_t j = 0; j < n; j++)
        x[j] = p < ((size_t)1 << n) ? (p >> j & 1 ? hi[j] : lo[j]) : lo[j] + (hi[j] - lo[j]) * vijp_rng_uniform(g);
}

static int inside(mpfr_t v, double lo, double hi)
{
    return mpfr_cmp_d(v, lo) >= 0 && mpfr_cmp_d(v, hi) <= 0;
}

#define W 6
#define DEPTH 10
#define POINTS 264 /* 64 corners, 200 inside */

/* The box [lo, hi] carried through net's DEPTH layers as one affine form
 * alone (no interval image intersected), each layer linearised over its
 * own hull: hl[l], hh[l] the hull of layer l's input, hl[DEPTH], hh[DEPTH]
 * the output's. */
static void form_hulls(const vijp_net *net, const double *lo, const double *hi, double hl[][W], double hh[][W])
{
    vijp_error err = {0};
    vijp_affine form;
    vijp_affine_from_box(&form, W, 4 * W, lo, hi);
    vijp_affine_hull(&form, hl[0], hh[0]);
    for (size_t l = 0; l < DEPTH; l++) {
        ck_assert_msg(!vijp_affine_layer(&net->layers[l], net->theta[l], hl[l], hh[l], &form, &err), "layer %zu: %s", l + 1,
                      err.msg);
        ck_assert(form.k <= form.cap && form.n == W);
        vijp_affine_hull(&form, hl[l + 1], hh[l + 1]);
    }
    vijp_affine_free(&form);
}

/* dense:6 → tanh → dense:6 → silu → dense:6 → sigmoid → dense:6 → gelu →
 * dense:6 → relu (its kink inside the pieces), gaussian weights (mixing:
 * the form's generators are shared across units), over a point, a small
 * and a wide box about a random centre: the form alone (no interval image
 * intersected), each layer linearised over its own hull. */
START_TEST(affine_form_encloses_mpfr)
{
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, "dense:6,tanh,dense:6,silu,dense:6,sigmoid,dense:6,gelu,dense:6,relu", DEPTH, W, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 3, &err));
    static const double radii[] = {0, 0.05, 1}; /* 0: a point, where the rounding errors are all the width */
    vijp_rng g;
    vijp_rng_seed(&g, 11);
    for (size_t b = 0; b < 3; b++) {
        double lo[W], hi[W], hl[DEPTH + 1][W], hh[DEPTH + 1][W], x[W];
        for (size_t j = 0; j < W; j++) {
            double c = 2 * vijp_rng_uniform(&g) - 1;
            lo[j] = c - radii[b], hi[j] = c + radii[b];
        }
        form_hulls(&net, lo, hi, hl, hh);
        mpfr_t *v = vijp_alloc_array(2 * W, sizeof *v), *y = v + W;
        for (size_t j = 0; j < 2 * W; j++) mpfr_init2(v[j], PREC);
        for (size_t p = 0; p < POINTS; p++) {
            box_point(p, W, lo, hi, &g, x);
            for (size_t j = 0; j < W; j++) mpfr_set_d(v[j], x[j], MPFR_RNDN);
            for (size_t l = 0; l < DEPTH; l++) {
                layer_256(&net.layers[l], net.theta[l], v, y);
                for (size_t j = 0; j < W; j++) {
                    mpfr_swap(v[j], y[j]);
                    ck_assert_msg(inside(v[j], hl[l + 1][j], hh[l + 1][j]), "radius %g, point %zu, after layer %zu (%s), "
                                  "unit %zu: %.17g outside the form's hull [%.17g, %.17g]", radii[b], p, l + 1,
                                  net.layers[l].type->name, j + 1, mpfr_get_d(v[j], MPFR_RNDN), hl[l + 1][j], hh[l + 1][j]);
                }
            }
        }
        for (size_t j = 0; j < 2 * W; j++) mpfr_clear(v[j]);
        free(v);
    }
    vijp_net_free(&net);
}
END_TEST

/* The piecewise and thresholded activations the chain above leaves out:
 * leaky's and hardtanh's kinks, softplus:2/0.5's jump at βx = T, hardswish,
 * relu6, with the images from the project's MPFR operators at 256 bits
 * (certfix's net_oracle_image).  The point box sits at the origin with the
 * first bias zeroed, so that every leaky input is exactly its kink. */
START_TEST(affine_form_encloses_piecewise)
{
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, "dense:6,leaky:0.1,dense:6,softplus:2/0.5,dense:6,hardtanh,dense:6,hardswish,"
                                  "dense:6,relu6", DEPTH, W, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 5, &err));
    for (size_t j = 0; j < W; j++) net.theta[0][W * W + j] = 0;
    static const double radii[] = {0, 0.05, 1};
    vijp_rng g;
    vijp_rng_seed(&g, 17);
    mpfr_t v[W];
    for (size_t j = 0; j < W; j++) mpfr_init2(v[j], PREC);
    for (size_t b = 0; b < 3; b++) {
        double lo[W], hi[W], hl[DEPTH + 1][W], hh[DEPTH + 1][W], x[W];
        for (size_t j = 0; j < W; j++) {
            double c = b ? 2 * vijp_rng_uniform(&g) - 1 : 0;
            lo[j] = c - radii[b], hi[j] = c + radii[b];
        }
        form_hulls(&net, lo, hi, hl, hh);
        for (size_t p = 0; p < (b ? POINTS : 1); p++) {
            box_point(p, W, lo, hi, &g, x);
            for (size_t l = 1; l <= DEPTH; l++) {
                net_oracle_image(&net, l, x, PREC, v);
                for (size_t j = 0; j < W; j++)
                    ck_assert_msg(inside(v[j], hl[l][j], hh[l][j]), "radius %g, point %zu, after layer %zu (%s), unit %zu: "
                                  "%.17g outside the form's hull [%.17g, %.17g]", radii[b], p, l, net.layers[l - 1].type->name,
                                  j + 1, mpfr_get_d(v[j], MPFR_RNDN), hl[l][j], hh[l][j]);
            }
        }
    }
    for (size_t j = 0; j < W; j++) mpfr_clear(v[j]);
    vijp_net_free(&net);
}
END_TEST

/* The linearisation alone, one unit, over narrow intervals about a jump or
 * a kink, where the chains above are too wide to notice a piece's range
 * going wrong: softplus:2/0.5's drop of log1p(e^-0.5)/2 ≈ 0.237 at x =
 * 0.25, leaky's, hardtanh's, relu6's and hardswish's kinks.  1001 points
 * of each interval (both ends and the kink among them) through the type's
 * MPFR operator at 256 bits: f(x) − α·x in [glo, ghi] at every one. */
START_TEST(linearisation_across_jumps_and_kinks)
{
    static const struct {
        const char *spec;
        double lo, hi;
    } cases[] = {{"softplus:2/0.5", 0.24, 0.26}, {"softplus:2/0.5", 0.2, 0.25},  {"softplus:2/0.5", 0.25, 0.3},
                 {"leaky:0.1", -0.01, 0.01},     {"hardtanh", 0.99, 1.01},       {"relu6", 5.99, 6.01},
                 {"hardswish", -3.01, -2.99},    {"hardswish", 2.99, 3.01}};
    mpfr_t v, t;
    mpfr_inits2(PREC, v, t, (mpfr_ptr)0);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        vijp_net net;
        vijp_error err = {0};
        ck_assert_msg(!vijp_net_build(&net, cases[c].spec, 1, 1, &err), "%s", err.msg);
        double alpha, glo, ghi;
        ck_assert_msg(!vijp_affine_linearise(&net.layers[0], net.theta[0], &cases[c].lo, &cases[c].hi, &alpha, &glo, &ghi, &err),
                      "%s: %s", cases[c].spec, err.msg);
        for (int p = 0; p <= 1000; p++) {
            double x = cases[c].lo + (cases[c].hi - cases[c].lo) * p / 1000;
            net_oracle_image(&net, 1, &x, PREC, &v);
            mpfr_set_d(t, x, MPFR_RNDN), mpfr_mul_d(t, t, alpha, MPFR_RNDN), mpfr_sub(t, v, t, MPFR_RNDN); /* exact at 256 bits */
            ck_assert_msg(inside(t, glo, ghi), "%s over [%g, %g], x = %.17g: f − %.17g·x = %.17g outside [%.17g, %.17g]",
                          cases[c].spec, cases[c].lo, cases[c].hi, x, alpha, mpfr_get_d(t, MPFR_RNDN), glo, ghi);
        }
        vijp_net_free(&net);
    }
    mpfr_clears(v, t, (mpfr_ptr)0);
}
END_TEST

/* The chain's boxes: each layer's is the interval image ∩ the form's hull
 * (the form restarted after the LayerNorm, which has none): every oracle
 * image of a box point lies in the box its layer was certified over. */
START_TEST(net_box_encloses_oracle)
{
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, "dense:6,tanh,dense:6,layernorm,dense:6,silu,dense:6,tanh", 8, W, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 5, &err));
    double lo[W], hi[W], x[W];
    for (size_t j = 0; j < W; j++) lo[j] = -0.5 + 0.1 * (double)j, hi[j] = lo[j] + 1;
    vijp_box_budget budget = {200, 0};
    vijp_certify_opts co = {0};
    vijp_net_box_opts o = {.budget = &budget, .co = &co, .seed = 1};
    vijp_net_box_layer res[8];
    /* no options: the defaults (a zeroed vijp_net_box_opts), the same verdicts */
    vijp_net_box_opts zero = {0};
    ck_assert(!vijp_certify_net_box(net.layers, net.theta, 2, lo, hi, NULL, res, &err));
    vijp_verdict v0 = res[1].c.verdict;
    vijp_net_box_clear(res, 2);
    ck_assert(!vijp_certify_net_box(net.layers, net.theta, 2, lo, hi, &zero, res, &err));
    ck_assert_int_eq(res[1].c.verdict, v0);
    vijp_net_box_clear(res, 2);
    ck_assert(!vijp_certify_net_box(net.layers, net.theta, 8, lo, hi, &o, res, &err));
    vijp_rng g;
    vijp_rng_seed(&g, 13);
    mpfr_t v[W];
    for (size_t j = 0; j < W; j++) mpfr_init2(v[j], PREC);
    for (size_t p = 0; p < 120; p++) {
        box_point(p, W, lo, hi, &g, x);
        for (size_t l = 0; l < 8; l++) {
            ck_assert_msg(res[l].in_lo && !res[l].image_error[0], "layer %zu: no box: %s", l + 1, res[l].image_error);
            net_oracle_image(&net, l, x, PREC, v);
            for (size_t j = 0; j < W; j++)
                ck_assert_msg(inside(v[j], res[l].in_lo[j], res[l].in_hi[j]), "point %zu, layer %zu's input %zu: %.17g "
                              "outside [%.17g, %.17g]", p, l + 1, j + 1, mpfr_get_d(v[j], MPFR_RNDN), res[l].in_lo[j],
                              res[l].in_hi[j]);
        }
    }
    for (size_t j = 0; j < W; j++) mpfr_clear(v[j]);
    vijp_net_box_clear(res, 8);
    vijp_net_free(&net);
}
END_TEST

Suite *suite_certify_affine(void)
{
    Suite *s = suite_create("certify_affine");
    TCase *tc = tcase_create("certify_affine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, affine_form_encloses_mpfr);
    tcase_add_test(tc, affine_form_encloses_piecewise);
    tcase_add_test(tc, linearisation_across_jumps_and_kinks);
    tcase_add_test(tc, net_box_encloses_oracle);
    suite_add_tcase(s, tc);
    return s;
}

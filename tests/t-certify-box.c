/* Certification over a box of inputs (vijp_certify_box, certify --box):
 * verdicts checked against what is known independently of the code: the
 * zero of SiLU's f′ (x0 = −1.278464542761074, mpmath), ReLU's f′ = 0 for
 * x < 0, tanh′(30) = sech²(30), f′ of SiLU on a grid for the lower bound s,
 * a dense layer's point certificate (its J is the same at every x), and a
 * singular W; the enclosures of a layer's values over a box
 * (vijp_layer_image_box) against the MPFR oracles at random points and
 * vertices of the box, and LayerNorm's a-priori bound sqrt(n − 1). */
#include "fixtures/certfix.h"
#include "fixtures/clirun.h"
#include "certify/radius.h"
#include "vijp/arith.h"
#include <lapacke.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double silu_zero = -1.278464542761074; /* mpmath: f′(x0) = 0, SiLU's declared zero */

static vijp_box_certificate box_of(const one_layer *o, double lo, double hi, vijp_box_budget budget)
{
    size_t n = o->L->in;
    double *l = malloc(n * sizeof *l), *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) l[i] = lo, h[i] = hi;
    vijp_box_certificate c;
    vijp_error err = {0};
    vijp_certify_opts co = {0};
    ck_assert_msg(!vijp_certify_box(o->L, o->theta, l, h, &budget, &co, &c, &err), "%s", err.msg);
    free(l), free(h);
    return c;
}

static double silu_deriv(double x) /* σ(x)(1 + x·σ(−x)) in double, relative error a few ulps */
{
    double s = 1 / (1 + exp(-x));
    return s * (1 + x * (1 - s));
}

/* SiLU: the zero x0 of f′ is inside the box, found in an interval of width
 * at most 6·2^-40 that holds it, proven by f′'s signs at its ends; a box
 * that leaves x0 out is certified with s at most the least f′ on a grid
 * (s is a lower bound: s <= f′(x) at every x, up to the grid's rounding of
 * f′, a few ulps, so within a factor 1 + 1e-12). */
START_TEST(silu_zero_found_and_bound)
{
    one_layer o;
    one_layer_init(&o, "silu", 3, 1);
    vijp_box_certificate c = box_of(&o, -3, 3, (vijp_box_budget){0, 0});
    ck_assert_str_eq(vijp_box_verdict_name(c.verdict), "not-submersive");
    ck_assert_msg(!c.exact && c.lo <= silu_zero && silu_zero <= c.hi && c.hi - c.lo <= 6 * 0x1p-40,
                  "the zero %.17g not in [%.17g, %.17g]", silu_zero, c.lo, c.hi);
    c = box_of(&o, -1, 2, (vijp_box_budget){0, 0});
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    double least = INFINITY;
    for (int k = 0; k <= 30000; k++) least = fmin(least, fabs(silu_deriv(-1 + 3.0 * k / 30000)));
    ck_assert_msg(c.s > 0 && c.s <= least * (1 + 1e-12), "s = %.17g, least f′ on the grid %.17g", c.s, least);
    ck_assert_double_eq(c.certified_fraction, 1);
    /* too small a budget: undecided, with the share of the box proven */
    c = box_of(&o, -3, 3, (vijp_box_budget){10, 0});
    ck_assert_int_eq(c.verdict, VIJP_INCONCLUSIVE);
    ck_assert_uint_eq(c.boxes, 10);
    ck_assert_msg(c.n_open > 0 && c.certified_fraction > 0 && c.certified_fraction < 1, "%zu open, fraction %g", c.n_open,
                  c.certified_fraction);
    /* and a time budget already spent: undecided, saying so */
    c = box_of(&o, -3, 3, (vijp_box_budget){0, 1e-9});
    ck_assert_msg(c.verdict == VIJP_INCONCLUSIVE && strstr(c.reason, "time budget"), "%s", c.reason);
    vijp_net_free(&o.net);
}
END_TEST

/* ReLU: f′(−1) = 0 exactly, a proven point; on [0.5, 1] f′ = 1: s = 1.
 * tanh on [−30, 30]: certified, s <= sech²(30) (~3.5e-26), s > 0. */
START_TEST(relu_and_tanh)
{
    one_layer o;
    one_layer_init(&o, "relu", 2, 1);
    vijp_box_certificate c = box_of(&o, -1, 1, (vijp_box_budget){0, 0});
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.exact && c.lo == -1 && c.hi == -1);
    c = box_of(&o, 0.5, 1, (vijp_box_budget){0, 0});
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_double_eq(c.s, 1);
    vijp_net_free(&o.net);
    one_layer_init(&o, "tanh", 2, 1);
    c = box_of(&o, -30, 30, (vijp_box_budget){0, 0});
    double sech2 = 1 / (cosh(30.0) * cosh(30.0));
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_msg(c.s > 0 && c.s <= sech2 * (1 + 1e-12), "s = %g, sech²(30) = %g", c.s, sech2);
    vijp_net_free(&o.net);
}
END_TEST

/* dense: J = W at every x, so the box's certificate is the point
 * certificate, whatever the point; with W = [[1, 0], [0, 0]] a proven
 * cokernel makes the whole box not submersive; m > n never is. */
START_TEST(dense_boxes)
{
    one_layer o;
    one_layer_init(&o, "dense:4", 4, 1);
    vijp_box_certificate c = box_of(&o, -5, 7, (vijp_box_budget){0, 0});
    double x[4] = {3, -2, 0.5, 1e10};
    vijp_certificate p;
    certify_at(&o, x, &p);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "constant-jacobian");
    ck_assert_double_eq(c.s, p.s);
    vijp_certificate_clear(&p);
    vijp_net_free(&o.net);
    one_layer_init(&o, "dense:2", 2, 1);
    double *th = o.net.theta[0];
    th[0] = 1, th[1] = 0, th[2] = 0, th[3] = 0; /* W column-major: [[1, 0], [0, 0]] */
    c = box_of(&o, -1, 1, (vijp_box_budget){0, 0});
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    vijp_net_free(&o.net);
    one_layer_init(&o, "dense:3x2", 2, 1);
    c = box_of(&o, -1, 1, (vijp_box_budget){0, 0});
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    vijp_net_free(&o.net);
}
END_TEST

/* Soundness against brute force: on boxes that keep clear of f′'s zeros
 * (and one whose end lies 6e-5 from SiLU's), each certificate's s must be
 * at most σ_min(J(x)) = min_k |f′(x_k)| at every one of 10^5 points of the
 * boxes (VIJP_TEST_SCALE times more in make check-long): the corners, points
 * within 2^-40 of each end, and uniform ones.  f′ here is written from
 * its formula in MPFR at 128 bits, apart from the layers' code: a few
 * roundings, relative error below 2^-120 (no cancellation on these boxes),
 * far below a double's spacing, so s <= σ_min is checked as doubles. */
static void deriv_mp(const char *type, mpfr_t d, const mpfr_t x)
{
    mpfr_t s, t;
    mpfr_inits2(128, s, t, (mpfr_ptr)0);
    mpfr_neg(s, x, MPFR_RNDN), mpfr_exp(s, s, MPFR_RNDN), mpfr_add_ui(s, s, 1, MPFR_RNDN);
    mpfr_ui_div(s, 1, s, MPFR_RNDN); /* σ(x) */
    if (!strcmp(type, "sigmoid")) {
        mpfr_ui_sub(t, 1, s, MPFR_RNDN), mpfr_mul(d, s, t, MPFR_RNDN);
    } else if (!strcmp(type, "softplus")) {
        mpfr_set(d, s, MPFR_RNDN);
    } else if (!strcmp(type, "silu")) { /* σ(x)(1 + x(1 − σ(x))) */
        mpfr_ui_sub(t, 1, s, MPFR_RNDN), mpfr_mul(t, t, x, MPFR_RNDN), mpfr_add_ui(t, t, 1, MPFR_RNDN);
        mpfr_mul(d, s, t, MPFR_RNDN);
    } else if (!strcmp(type, "tanh")) { /* 1 − tanh² */
        mpfr_tanh(t, x, MPFR_RNDN), mpfr_sqr(t, t, MPFR_RNDN), mpfr_ui_sub(d, 1, t, MPFR_RNDN);
    } else if (!strcmp(type, "gelu")) { /* Φ(x) + x·φ(x), Φ(x) = erfc(−x/√2)/2 */
        mpfr_sqr(t, x, MPFR_RNDN), mpfr_div_2ui(t, t, 1, MPFR_RNDN), mpfr_neg(t, t, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN), mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_const_pi(s, MPFR_RNDN), mpfr_mul_2ui(s, s, 1, MPFR_RNDN), mpfr_sqrt(s, s, MPFR_RNDN);
        mpfr_div(t, t, s, MPFR_RNDN); /* x·φ(x) */
        mpfr_sqrt_ui(s, 2, MPFR_RNDN), mpfr_div(s, x, s, MPFR_RNDN), mpfr_neg(s, s, MPFR_RNDN);
        mpfr_erfc(s, s, MPFR_RNDN), mpfr_div_2ui(s, s, 1, MPFR_RNDN);
        mpfr_add(d, s, t, MPFR_RNDN);
    } else { /* mish: tanh(sp) + x·sech²(sp)·σ(x), sp = log(1 + e^x) */
        mpfr_t sp;
        mpfr_init2(sp, 128);
        mpfr_exp(sp, x, MPFR_RNDN), mpfr_log1p(sp, sp, MPFR_RNDN);
        mpfr_sech(t, sp, MPFR_RNDN), mpfr_sqr(t, t, MPFR_RNDN), mpfr_mul(t, t, s, MPFR_RNDN), mpfr_mul(t, t, x, MPFR_RNDN);
        mpfr_tanh(sp, sp, MPFR_RNDN), mpfr_add(d, sp, t, MPFR_RNDN);
        mpfr_clear(sp);
    }
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_clears(s, t, (mpfr_ptr)0);
}

START_TEST(sound_against_brute_force)
{
    static const struct {
        const char *type;
        double lo, hi;
    } boxes[] = {{"silu", -1, 2},   {"silu", -4, -1.5}, {"silu", -1.2784, 1}, {"gelu", -0.5, 1},
                 {"gelu", -3, -1},  {"tanh", -3, 3},    {"sigmoid", -4, 4},   {"mish", -1, 1}};
    enum { NBOX = sizeof boxes / sizeof *boxes, WIDTH = 2 };
    long per_box = test_iters(100000) / NBOX;
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    mpfr_t x, d, least;
    mpfr_inits2(128, x, d, least, (mpfr_ptr)0);
    for (size_t b = 0; b < NBOX; b++) {
        one_layer o;
        one_layer_init(&o, boxes[b].type, WIDTH, 1);
        vijp_box_certificate c = box_of(&o, boxes[b].lo, boxes[b].hi, (vijp_box_budget){0, 0});
        ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0, "%s on [%g, %g]: %s (%s)", boxes[b].type,
                      boxes[b].lo, boxes[b].hi, vijp_box_verdict_name(c.verdict), c.reason);
        double lo = boxes[b].lo, hi = boxes[b].hi, worst = INFINITY;
        for (long k = 0; k < per_box; k++) {
            mpfr_set_inf(least, 1);
            for (int i = 0; i < WIDTH; i++) {
                double u = vijp_rng_uniform(&rng), at;
                if (k < 4) at = (k >> i) & 1 ? hi : lo; /* the corners */
                else if (k % 10 == 1) at = lo + (hi - lo) * 0x1p-40 * u; /* hugging each end */
                else if (k % 10 == 2) at = hi - (hi - lo) * 0x1p-40 * u;
                else at = lo + (hi - lo) * u;
                if (at < lo) at = lo;
                if (at > hi) at = hi;
                mpfr_set_d(x, at, MPFR_RNDN);
                deriv_mp(boxes[b].type, d, x);
                mpfr_min(least, least, d, MPFR_RNDN);
            }
            double sigma_min = mpfr_get_d(least, MPFR_RNDD);
            if (sigma_min < worst) worst = sigma_min;
            /* c.s, a double <= the true σ_min, is <= its rounding down, which the
             * 128-bit value's rounding up cannot fall below (2^-120 apart) */
            ck_assert_msg(c.s <= mpfr_get_d(least, MPFR_RNDU),
                          "%s on [%g, %g]: certified s = %.17g above σ_min = %.17g at a sampled point", boxes[b].type, lo,
                          hi, c.s, sigma_min);
        }
        printf("# certify_box: %s on [%g, %g]^2: s = %.6g, least sampled σ_min %.6g (ratio %.4f), %ld points\n",
               boxes[b].type, lo, hi, c.s, worst, c.s / worst, per_box);
        vijp_net_free(&o.net);
    }
    mpfr_clears(x, d, least, (mpfr_ptr)0);
}
END_TEST

/* vijp_layer_image_box encloses the layer's values: 200 random points of
 * the box, sent through the layer's double forward, land inside it, up to
 * the forward's own rounding (a few ulps of |y|, well inside 1e-12·max(1, |y|)). */
START_TEST(image_box_encloses)
{
    static const char *const specs[] = {"tanh", "silu", "dense:3x4", "gelu", "leaky:0.2"};
    vijp_format dbl;
    vijp_format_fixed(&dbl, VIJP_DOUBLE);
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        one_layer o;
        one_layer_init(&o, specs[k], 4, 3);
        size_t n = o.L->in, m = o.L->out, P = o.L->type->param_count(o.L);
        double lo[4] = {-2, -0.5, 0.25, -1}, hi[4] = {1.5, 0.5, 0.75, -1}, ylo[4], yhi[4];
        vijp_error err = {0};
        /* an empty or non-finite coordinate is refused, as vijp_certify_box refuses it */
        ck_assert_int_eq(vijp_layer_image_box(o.L, o.theta, hi, lo, ylo, yhi, &err), VIJP_EDOMAIN);
        ck_assert_msg(strstr(err.msg, "coordinate 1 is [1.5, -2]"), "%s", err.msg);
        ck_assert_msg(!vijp_layer_image_box(o.L, o.theta, lo, hi, ylo, yhi, &err), "%s: %s", specs[k], err.msg);
        vijp_rng r;
        vijp_rng_seed(&r, 7);
        for (int t = 0; t < 200; t++) {
            double x[4], y[4];
            for (size_t i = 0; i < n; i++) x[i] = lo[i] + (hi[i] - lo[i]) * vijp_rng_uniform(&r);
            vijp_mat th = {.rows = P, .cols = 1, .fmt = &dbl, .d = (double *)o.theta},
                     xm = {.rows = n, .cols = 1, .fmt = &dbl, .d = x}, ym = {.rows = m, .cols = 1, .fmt = &dbl, .d = y};
            ck_assert(!vijp_layer_forward(o.L, P ? &th : NULL, &xm, &ym, &err));
            for (size_t i = 0; i < m; i++) {
                double tol = 1e-12 * fmax(1, fabs(y[i]));
                ck_assert_msg(ylo[i] - tol <= y[i] && y[i] <= yhi[i] + tol, "%s: f(x)_%zu = %.17g outside [%.17g, %.17g]",
                              specs[k], i, y[i], ylo[i], yhi[i]);
            }
        }
        vijp_net_free(&o.net);
    }
}
END_TEST

/* ---- the enclosures of layernorm, softmax and the coupling blocks ---- */

/* How one enclosure compared with the oracle at its sample points. */
typedef struct {
    double worst_ratio, sum_ratio; /* enclosure width / sampled hull width, over the outputs */
    double worst_excess;           /* enclosure width − sampled hull width */
    size_t outputs;
    double worst_thin_ulps;        /* thin boxes: enclosure width in ulps of the point value */
} image_stats;

static double ulp_of(double v) { return fmax(nextafter(fabs(v), INFINITY) - fabs(v), 0x1p-1074); }

/* The enclosure of o's layer over [lo, hi] (n coordinates) must hold the
 * layer's MPFR forward at 256 bits (its oracle) at `points` seeded random
 * points of the box and at every vertex (2^n, n <= 12: where a monotone
 * map such as softmax takes its extremes, so the sampled hull is the
 * range there).  The oracle's own error: O(n) operations each within
 * 2^-256 relative of intermediates bounded by max|x|/σ (LayerNorm; σ
 * far from 0 at random points) or by the sub-layers' values (couplings),
 * all below 2^8 here: well inside 2^-200·max(1, |y|), the tolerance. */
static void image_check(const one_layer *o, const double *lo, const double *hi, size_t points, uint64_t seed,
                        image_stats *st)
{
    const vijp_layer *L = o->L;
    size_t n = L->in, m = L->out, P = L->type->param_count(L), vertices = n <= 12 ? (size_t)1 << n : 0;
    size_t B = points + vertices;
    double *ylo = malloc(m * sizeof *ylo), *yhi = malloc(m * sizeof *yhi);
    vijp_error err = {0};
    char spec[256];
    vijp_layer_spec(L, spec, sizeof spec);
    ck_assert_msg(!vijp_layer_image_box(L, o->theta, lo, hi, ylo, yhi, &err), "%s: %s", spec, err.msg);
    vijp_format p256;
    ck_assert(!vijp_format_mpfr(&p256, 256, &err));
    vijp_mat th, X, Y;
    vijp_mat_init(&th, P, 1, &p256), vijp_mat_init(&X, n, B, &p256), vijp_mat_init(&Y, m, B, &p256);
    if (P) vijp_mat_set_d(&th, o->theta);
    vijp_rng r;
    vijp_rng_seed(&r, seed);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++)
            mpfr_set_d(X.m[b * n + i], b < points ? lo[i] + (hi[i] - lo[i]) * vijp_rng_uniform(&r)
                                                  : ((b - points) >> i & 1) ? hi[i] : lo[i], MPFR_RNDN);
    ck_assert_msg(!vijp_layer_forward(L, P ? &th : NULL, &X, &Y, &err), "%s: %s", spec, err.msg);
    int thin = 1;
    for (size_t i = 0; i < n; i++) thin &= lo[i] == hi[i];
    mpfr_t tol, a;
    mpfr_inits2(256, tol, a, (mpfr_ptr)0);
    for (size_t i = 0; i < m; i++) {
        double hull_lo = INFINITY, hull_hi = -INFINITY;
        for (size_t b = 0; b < B; b++) {
            mpfr_ptr y = Y.m[b * m + i];
            mpfr_abs(tol, y, MPFR_RNDU);
            if (mpfr_cmp_ui(tol, 1) < 0) mpfr_set_ui(tol, 1, MPFR_RNDU);
            mpfr_mul_2si(tol, tol, -200, MPFR_RNDU);
            mpfr_sub_d(a, y, yhi[i], MPFR_RNDN); /* its rounding, 2^-256 relative, far below tol */
            int above = mpfr_cmp(a, tol) > 0;
            mpfr_sub_d(a, y, ylo[i], MPFR_RNDN), mpfr_neg(a, a, MPFR_RNDN);
            int below = mpfr_cmp(a, tol) > 0;
            if (above || below) /* not ck_assert: each of those writes to check's pipe, 10^5 times here */
                ck_abort_msg("%s over [%g, %g]…: output %zu at point %zu is %.17g, outside its enclosure [%.17g, %.17g]",
                             spec, lo[0], hi[0], i + 1, b, mpfr_get_d(y, MPFR_RNDN), ylo[i], yhi[i]);
            double v = mpfr_get_d(y, MPFR_RNDN);
            hull_lo = fmin(hull_lo, v), hull_hi = fmax(hull_hi, v);
        }
        if (thin) {
            double ulps = (yhi[i] - ylo[i]) / ulp_of(fmax(fabs(ylo[i]), fabs(yhi[i])));
            st->worst_thin_ulps = fmax(st->worst_thin_ulps, ulps);
        } else if (hull_hi > hull_lo) {
            double ratio = (yhi[i] - ylo[i]) / (hull_hi - hull_lo);
            st->worst_excess = fmax(st->worst_excess, (yhi[i] - ylo[i]) - (hull_hi - hull_lo));
            st->worst_ratio = fmax(st->worst_ratio, ratio), st->sum_ratio += ratio, st->outputs++;
        }
    }
    mpfr_clears(tol, a, (mpfr_ptr)0);
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y);
    free(ylo), free(yhi);
}

/* Each new type on three kinds of box at width 8: thin (lo = hi, a random
 * point), narrow (radius 0.01 around a random centre) and wide (radius 1),
 * 2000 points each (the oracle's samples, in one batch).  A thin box's
 * enclosure is the point's value enclosed at 128 bits (relative width
 * ~2^-120, far below an ulp) and rounded outward to doubles: at most 2
 * ulps of the value wide.  softmax's enclosure is its exact range, reached
 * at two vertices, which the samples include: it exceeds the sampled hull
 * by the outward rounding of its ends (an ulp each, of values <= 1: 2^-52)
 * and the hull's ends rounded to double (2^-53 each), 2^-50 in all.  The
 * width ratios are measured, printed (docs/certify.md quotes them) and
 * held to 50, far above what they are: a bound that only an enclosure gone
 * loose by orders of magnitude breaks. */
START_TEST(image_box_new_types)
{
    static const char *const specs[] = {"layernorm", "softmax", "additive", "affine", "affine:exp+dense:4+tanh",
                                        "additive:dense:4+layernorm"};
    static const char *const kinds[] = {"thin", "narrow", "wide"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        one_layer o;
        one_layer_init(&o, specs[k], 8, 5);
        vijp_rng r;
        vijp_rng_seed(&r, 11 + k);
        for (size_t kind = 0; kind < 3; kind++) {
            double lo[8], hi[8], radius = kind == 0 ? 0 : kind == 1 ? 0.01 : 1;
            for (size_t i = 0; i < 8; i++) {
                double c = 4 * vijp_rng_uniform(&r) - 2;
                lo[i] = c - radius, hi[i] = c + radius;
            }
            image_stats st = {0};
            image_check(&o, lo, hi, 2000, 100 + kind, &st);
            if (kind == 0) {
                ck_assert_msg(st.worst_thin_ulps <= 2, "%s thin: %g ulps wide", specs[k], st.worst_thin_ulps);
                printf("image %-28s %-6s width <= %.3g ulps of the value\n", specs[k], kinds[kind], st.worst_thin_ulps);
            } else {
                double mean = st.outputs ? st.sum_ratio / (double)st.outputs : NAN;
                if (!strcmp(specs[k], "softmax"))
                    ck_assert_msg(st.worst_excess <= 0x1p-50, "softmax %s: %g wider than the range", kinds[kind],
                                  st.worst_excess);
                ck_assert_msg(st.worst_ratio <= 50, "%s %s: ratio %g", specs[k], kinds[kind], st.worst_ratio);
                printf("image %-28s %-6s width / sampled hull: mean %.4g, worst %.4g\n", specs[k], kinds[kind], mean,
                       st.worst_ratio);
            }
        }
        vijp_net_free(&o.net);
    }
}
END_TEST

/* LayerNorm over a box holding constant inputs (σ = 0 there, J unbounded):
 * only the a-priori range [−sqrt(n − 1), sqrt(n − 1)] is left, and it
 * holds; a box of constant inputs only (σ = 0 everywhere) gives 0. */
START_TEST(image_box_layernorm_degenerate)
{
    one_layer o;
    one_layer_init(&o, "layernorm", 8, 5);
    double lo[8], hi[8], ylo[8], yhi[8];
    for (size_t i = 0; i < 8; i++) lo[i] = -1, hi[i] = 1;
    image_stats st = {0};
    image_check(&o, lo, hi, 2000, 3, &st);
    vijp_error err = {0};
    ck_assert(!vijp_layer_image_box(o.L, o.theta, lo, hi, ylo, yhi, &err));
    for (size_t i = 0; i < 8; i++)
        ck_assert_msg(ylo[i] <= -sqrt(7) && yhi[i] >= sqrt(7) && yhi[i] <= sqrt(7) * (1 + 1e-15),
                      "output %zu: [%.17g, %.17g]", i, ylo[i], yhi[i]);
    for (size_t i = 0; i < 8; i++) lo[i] = hi[i] = 0.5;
    ck_assert(!vijp_layer_image_box(o.L, o.theta, lo, hi, ylo, yhi, &err));
    for (size_t i = 0; i < 8; i++) ck_assert(ylo[i] == 0 && yhi[i] == 0);
    vijp_net_free(&o.net);
}
END_TEST

/* ---- every registered type's image, the softplus jump, a plugin's mean
 * value form, and the radius test's bound on ‖rad‖₂ ---- */

/* Every built-in type at width 8 (all the registry lists, one item each
 * where arguments change the maths): its enclosure over a box of radius
 * 0.5 about a random centre in [−2, 2] and over a thin box must hold the
 * 256-bit oracle at 100 random points and all 256 vertices (image_check,
 * whose tolerance is derived there); attention alone has none and is
 * refused (VIJP_EUNSUPPORTED).  The normalisations' affine parameters are
 * drawn in [−2, 2] so that w ⊙ ŷ + b is exercised.  The width ratios are
 * printed (docs/certify.md's table) and held to 50 as in
 * image_box_new_types. */
START_TEST(image_box_every_type)
{
    static const char *const specs[] = {
        "leaky:0.1", "relu", "tanh", "sigmoid", "softplus", "softplus:2/20", "silu", "gelu", "gelu:tanh", "mish",
        "elu", "selu", "hardtanh", "relu6", "hardswish", "softsign", "prelu:2", "identity", "dropout:0.1", "flatten",
        "transpose:2x4", "dense:8", "conv1d:2x3", "conv2d:1x3x2", "avgpool:2", "squeeze:2x2", "inv1x1:2",
        "linear:4x4", "actnorm:2", "batchnorm:2:affine", "avgpool2d:1x2x2", "maxpool1d:2x2", "maxpool2d:1x2x2",
        "maxpool1d:1x3s1", "layernorm", "layernorm:4", "layernorm:4:eps=1e-5:affine", "groupnorm:2x4",
        "groupnorm:2x4:eps=0:affine", "softmax", "logsoftmax", "logsoftmax:4", "additive", "affine", "residual",
        "residual:tanh:skip=dense:8"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        one_layer o;
        one_layer_init(&o, specs[k], 8, 5);
        vijp_rng r;
        vijp_rng_seed(&r, 40 + k);
        if (strstr(specs[k], "norm:") && strstr(specs[k], ":affine") && !strstr(specs[k], "batchnorm"))
            for (size_t p = 0; p < o.L->type->param_count(o.L); p++) o.net.theta[0][p] = 4 * vijp_rng_uniform(&r) - 2;
        for (int thin = 0; thin < 2; thin++) {
            double lo[8], hi[8];
            for (size_t i = 0; i < 8; i++) {
                double c = 4 * vijp_rng_uniform(&r) - 2;
                lo[i] = thin ? c : c - 0.5, hi[i] = thin ? c : c + 0.5;
            }
            image_stats st = {0};
            image_check(&o, lo, hi, 100, 200 + k, &st);
            if (thin) ck_assert_msg(st.worst_thin_ulps <= 2, "%s thin: %g ulps wide", specs[k], st.worst_thin_ulps);
            else {
                ck_assert_msg(st.worst_ratio <= 50, "%s: ratio %g", specs[k], st.worst_ratio);
                printf("image %-28s radius 0.5 width / sampled hull: mean %.4g, worst %.4g\n", specs[k],
                       st.outputs ? st.sum_ratio / (double)st.outputs : NAN, st.worst_ratio);
            }
        }
        vijp_net_free(&o.net);
    }
    one_layer o;
    one_layer_init(&o, "attention:4x2", 8, 5);
    double lo[8] = {0}, hi[8] = {0}, ylo[8], yhi[8];
    vijp_error err = {0};
    ck_assert_int_eq(vijp_layer_image_box(o.L, o.theta, lo, hi, ylo, yhi, &err), VIJP_EUNSUPPORTED);
    vijp_net_free(&o.net);
}
END_TEST

/* softplus:2/20 is x itself where 2x > 20 and log(1 + e^(2x))/2 below,
 * which is higher by log1p(e^-20)/2 ≈ 1.03e-9 at the threshold: f jumps
 * down at x = 10.  The box [10 − 4e-10, 10 + 6e-10], narrower than twice
 * the jump, its midpoint m past it (f(m) = m), holds points left of it
 * whose value, x + 1.03e-9, exceeds the mean value form's f(m) + 1·(hi −
 * m) = 10 + 6e-10: the enclosure must hold them (the oracle's 2000 points
 * put about 800 there). */
START_TEST(image_box_softplus_jump)
{
    one_layer o;
    one_layer_init(&o, "softplus:2/20", 2, 5);
    double lo[2] = {10 - 4e-10, 10 - 4e-10}, hi[2] = {10 + 6e-10, 10 + 6e-10};
    image_stats st = {0};
    image_check(&o, lo, hi, 2000, 9, &st);
    vijp_net_free(&o.net);
}
END_TEST

/* certify with the csquare plugin loaded, `what` (--layer TYPE or --net
 * NET) at width n over [lo, hi] (per coordinate, through --box-file), and
 * `extra` options: the parsed JSON (the command's output in *r).  The
 * plugin is loaded by the command: the test binary does not export the
 * library to plugins. */
static json_t *csquare_command(const char *what, size_t n, const double *lo, const double *hi, const char *extra,
                               run_result *r)
{
    char dir[256], lf[300], hf[300], so[1024], cmd[3000];
    make_temp_dir(dir, sizeof dir, "csq");
    snprintf(lf, sizeof lf, "%s/lo.npy", dir), snprintf(hf, sizeof hf, "%s/hi.npy", dir);
    vijp_error err = {0};
    ck_assert(!vijp_npy_write(lf, 1, &n, lo, &err) && !vijp_npy_write(hf, 1, &n, hi, &err));
    test_plugin_path("csquare", so, sizeof so);
    snprintf(cmd, sizeof cmd, "certify --plugin '%s' %s --width %zu --box-file '%s,%s' --json%s", so, what, n, lf, hf, extra);
    *r = run_vijp(cmd);
    remove_tree(dir);
    json_error_t je;
    json_t *o = json_loads(r->out, 0, &je);
    ck_assert_msg(o, "%s: exit %d: %s%s", cmd, r->rc, r->out, r->err);
    return o;
}

/* A plugin's image by the mean value form: the csquare plugin (a·z² on each
 * pair, a = 3/4, its jacobian_box) in the net csquare,identity over a box,
 * and by Taylor's form with the remainder L_J·r²/2 (csquarelip, the same
 * maths with only its Lipschitz constant 2a, attained: the remainder a·Δz²
 * is exactly L_J·|Δz|²/2),
 * the second layer's input enclosure (certify's JSON inputs_lo/inputs_hi)
 * against y = (a(x0² − x1²), 2a·x0·x1) computed here in MPFR at 256 bits
 * (exact: squares and products of doubles, a and 2a powers of two times
 * 3) at 500 random points and the 16 vertices of the box: every one
 * inside, and the enclosure within a few times the sampled range (the
 * form's excess is second order in the width: measured 1.78 at most here,
 * held to 4). */
static void check_plugin_image(const char *type)
{
    double lo[4] = {0.5, -0.25, -1, 0.5}, hi[4] = {1, 0.5, -0.5, 1};
    run_result r;
    char what[64];
    snprintf(what, sizeof what, "--net %s,identity", type);
    json_t *o = csquare_command(what, 4, lo, hi, "", &r);
    json_t *second = json_array_get(json_object_get(o, "layers"), 1);
    json_t *elo = json_object_get(second, "inputs_lo"), *ehi = json_object_get(second, "inputs_hi");
    ck_assert_msg(json_array_size(elo) == 4 && json_array_size(ehi) == 4, "no enclosure after csquare: %s", r.out);
    double ylo[4], yhi[4], hull_lo[4], hull_hi[4];
    for (size_t i = 0; i < 4; i++)
        ylo[i] = json_number_value(json_array_get(elo, i)), yhi[i] = json_number_value(json_array_get(ehi, i)),
        hull_lo[i] = INFINITY, hull_hi[i] = -INFINITY;
    json_decref(o), run_free(&r);
    mpfr_t y, t;
    mpfr_inits2(256, y, t, (mpfr_ptr)0);
    vijp_rng g;
    vijp_rng_seed(&g, 17);
    for (size_t b = 0; b < 500 + 16; b++) {
        double x[4];
        for (size_t i = 0; i < 4; i++) x[i] = b < 500 ? lo[i] + (hi[i] - lo[i]) * vijp_rng_uniform(&g) : ((b - 500) >> i & 1) ? hi[i] : lo[i];
        for (size_t k = 0; k < 4; k += 2) {
            mpfr_set_d(y, x[k], MPFR_RNDN), mpfr_sqr(y, y, MPFR_RNDN), mpfr_set_d(t, x[k + 1], MPFR_RNDN);
            mpfr_sqr(t, t, MPFR_RNDN), mpfr_sub(y, y, t, MPFR_RNDN), mpfr_mul_d(y, y, 0.75, MPFR_RNDN);
            for (int half = 0; half < 2; half++) {
                if (half) mpfr_set_d(y, x[k], MPFR_RNDN), mpfr_mul_d(y, y, x[k + 1], MPFR_RNDN), mpfr_mul_d(y, y, 1.5, MPFR_RNDN);
                size_t i = k + (size_t)half;
                ck_assert_msg(mpfr_cmp_d(y, ylo[i]) >= 0 && mpfr_cmp_d(y, yhi[i]) <= 0, "output %zu at point %zu: %.17g "
                              "outside [%.17g, %.17g]", i + 1, b, mpfr_get_d(y, MPFR_RNDN), ylo[i], yhi[i]);
                hull_lo[i] = fmin(hull_lo[i], mpfr_get_d(y, MPFR_RNDD)), hull_hi[i] = fmax(hull_hi[i], mpfr_get_d(y, MPFR_RNDU));
            }
        }
    }
    mpfr_clears(y, t, (mpfr_ptr)0);
    for (size_t i = 0; i < 4; i++) {
        double ratio = (yhi[i] - ylo[i]) / (hull_hi[i] - hull_lo[i]);
        printf("image %-11s output %zu width / sampled hull %.4g\n", type, i + 1, ratio);
        ck_assert_msg(ratio <= 4, "%s output %zu: ratio %g", type, i + 1, ratio);
    }
}

START_TEST(plugin_image_mean_value)
{
    check_plugin_image("csquare");
    check_plugin_image("csquarelip");
}
END_TEST

/* vijp_radius_norm2_up against σ_max known independently: a diagonal R
 * (σ_max = max r_ii; Collatz–Wielandt gives it exactly, then rounded up:
 * within 2 ulps), R of equal entries r, m × n (rank one, σ_max = r·√(mn)
 * = ‖R‖_F), and seeded random non-negative R with zero rows and columns,
 * against LAPACK's σ_max (its error below 10·max(m, n)·u·σ_max, Demmel–
 * Kahan; the bound must not be below σ̂(1 − 10·max(m,n)·2^-52)) — and
 * never above ‖R‖_F (its own rounding up, 2^-52, and this test's sum of
 * mn squares in double, (mn + 1)·2^-53: (mn + 4)·2^-52 covers both). */
START_TEST(radius_spectral_bound)
{
    double D[36] = {0};
    for (size_t i = 0; i < 6; i++) D[i + 6 * i] = 0.5 + 0.125 * (double)i; /* max 1.125 */
    double b = vijp_radius_norm2_up(D, 6, 6);
    ck_assert_msg(b >= 1.125 && b <= 1.125 * (1 + 0x1p-51), "diagonal: %.17g", b);
    double C[64];
    for (size_t i = 0; i < 64; i++) C[i] = 0x1p-10;
    b = vijp_radius_norm2_up(C, 4, 16);
    ck_assert_msg(b >= 0x1p-7 && b <= 0x1p-7 * (1 + 0x1p-50), "constant: %.17g", b);
    vijp_rng g;
    vijp_rng_seed(&g, 23);
    double worst = 0;
    for (int t = 0; t < 40; t++) {
        size_t m = 1 + (size_t)(7 * vijp_rng_uniform(&g)), n = 1 + (size_t)(9 * vijp_rng_uniform(&g));
        double R[64], A[64], sv[8], sup[8], frob = 0;
        for (size_t k = 0; k < m * n; k++)
            A[k] = R[k] = vijp_rng_uniform(&g) < 0.2 ? 0 : ldexp(vijp_rng_uniform(&g), -(int)(20 * vijp_rng_uniform(&g)));
        if (t % 5 == 0)
            for (size_t j = 0; j < n; j++) R[j * m] = A[j * m] = 0; /* a zero row */
        for (size_t k = 0; k < m * n; k++) frob += R[k] * R[k]; /* within (mn + 1)·2^-53 relative */
        b = vijp_radius_norm2_up(R, m, n);
        ck_assert(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', (int)m, (int)n, A, (int)m, sv, NULL, 1, NULL, 1, sup) == 0);
        double tol = 10 * (double)(m > n ? m : n) * 0x1p-52;
        ck_assert_msg(b >= sv[0] * (1 - tol), "%zu x %zu: bound %.17g below σ_max %.17g", m, n, b, sv[0]);
        ck_assert_msg(b <= sqrt(frob) * (1 + (double)(m * n + 4) * 0x1p-52), "%zu x %zu: bound %.17g above ‖R‖_F %.17g", m, n, b, sqrt(frob));
        if (sv[0] > 0) worst = fmax(worst, b / sv[0]);
    }
    printf("radius bound / σ_max(R) on 40 random non-negative R: worst %.6g\n", worst);
}
END_TEST

/* h = layers 0..i−1 of o's net at x, in MPFR at 256 bits (the oracles),
 * unit k of it into v. */
static void net_value_256(const vijp_net *net, size_t i, const double *x, size_t k, mpfr_t v)
{
    size_t n = net->layers[i].in;
    mpfr_t *h = mp_vec(n);
    net_oracle_image(net, i, x, 256, h);
    mpfr_set(v, h[k], MPFR_RNDN);
    mp_vec_free(h, n);
}

/* SiLU′(h) = σ(h)(1 + h(1 − σ(h))) at 256 bits, written here from the
 * definition (not the layer's code). */
static int silu_deriv_sign(mpfr_t h)
{
    mpfr_t s, t;
    mpfr_inits2(256, s, t, (mpfr_ptr)0);
    mpfr_neg(s, h, MPFR_RNDN), mpfr_exp(s, s, MPFR_RNDN), mpfr_add_ui(s, s, 1, MPFR_RNDN), mpfr_ui_div(s, 1, s, MPFR_RNDN);
    mpfr_ui_sub(t, 1, s, MPFR_RNDN), mpfr_mul(t, t, h, MPFR_RNDN), mpfr_add_ui(t, t, 1, MPFR_RNDN), mpfr_mul(t, t, s, MPFR_RNDN);
    mpfr_abs(s, t, MPFR_RNDN);
    int sign = mpfr_cmp_d(s, 0x1p-200) > 0 ? mpfr_sgn(t) : 0; /* 0: too close to call at 256 bits */
    mpfr_clears(s, t, (mpfr_ptr)0);
    return sign;
}

/* Counterexamples past layer 1 (vijp_net_box_counterexample), each proof
 * checked against the 256-bit oracle and the box:
 *   dense:4,tanh,relu over [−1, 1]⁴: a point whose image's unit k is < 0
 *     (ReLU′ = 0 there): the oracle's h_k must be below −2^-200;
 *   dense:4,dense:4,silu over [−3, 3]⁴: two points whose images give SiLU′
 *     opposite signs on one unit (SiLU′ from its definition, above);
 *   dense:4,tanh,silu over [−1, 1]⁴: tanh's values lie in (−1, 1), where
 *     SiLU′ > 0 (its only zero is at −1.278…): no proof, c untouched. */
START_TEST(net_counterexample_deeper)
{
    static const char *const specs[] = {"dense:4,tanh,relu", "dense:4,dense:4,silu", "dense:4,tanh,silu"};
    static const double radius[] = {1, 3, 1};
    for (size_t t = 0; t < 3; t++) {
        vijp_net net;
        vijp_error err = {0};
        ck_assert_msg(!vijp_net_build(&net, specs[t], 3, 4, &err), "%s", err.msg);
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 1, &err));
        double lo[4], hi[4], xa[4], xb[4];
        for (size_t j = 0; j < 4; j++) lo[j] = -radius[t], hi[j] = radius[t];
        vijp_box_certificate c;
        memset(&c, 0, sizeof c);
        c.verdict = VIJP_INCONCLUSIVE;
        int found = vijp_net_box_counterexample(net.layers, net.theta, 2, lo, hi, 1, &c, xa, xb);
        if (t == 2) {
            ck_assert_msg(!found && c.verdict == VIJP_INCONCLUSIVE && !c.reason[0], "%s: %s", specs[t], c.reason);
            vijp_net_free(&net);
            continue;
        }
        ck_assert_msg(found && c.verdict == VIJP_NOT_SUBMERSIVE, "%s: no proof", specs[t]);
        for (size_t j = 0; j < 4; j++) ck_assert(lo[j] <= xa[j] && xa[j] <= hi[j]);
        mpfr_t h;
        mpfr_init2(h, 256);
        net_value_256(&net, 2, xa, c.coordinate, h);
        if (t == 0) {
            ck_assert_msg(c.exact && mpfr_cmp_d(h, -0x1p-200) < 0, "%s: h_%zu = %g", specs[t], c.coordinate + 1,
                          mpfr_get_d(h, MPFR_RNDN));
        } else {
            ck_assert(!c.exact);
            for (size_t j = 0; j < 4; j++) ck_assert(lo[j] <= xb[j] && xb[j] <= hi[j]);
            int sa = silu_deriv_sign(h);
            net_value_256(&net, 2, xb, c.coordinate, h);
            int sb = silu_deriv_sign(h);
            ck_assert_msg(sa == 1 && sb == -1, "%s: SiLU′ signs %d, %d", specs[t], sa, sb);
        }
        mpfr_clear(h);
        vijp_net_free(&net);
    }
}
END_TEST

/* A net's box widened until its verdict changes: dense:4 (W1) → tanh →
 * dense:4 (W2) → silu, zero biases, W2's first row (½, ½, ½, ½) and its
 * others 0.3·e_k.  The silu layer's input h = W2·tanh(W1·x) reaches SiLU′'s
 * zero x0 first in h_0; the centre is submersive (h = 0), so by the
 * intermediate value theorem a box holds a singular point once a point of
 * it has h_0 <= x0: sampling the box (its 16 corners and 2000 other
 * points, along rays through the centre, in double) gives a radius r_samp
 * at which a singular point is found, an upper bound on the true first one.
 * W1 = 2I: h_0 = ½ Σ tanh(2x_j) is least at the corner −r, so the exact
 * first radius is atanh(−x0/2)/2 = 0.378437…, and every enclosure along the
 * chain is exact (intervals through diagonal and monotone maps): the
 * certified radius must reach it within the bisection's 1e-3.  W1 = 2H, H
 * the 4 × 4 Hadamard matrix over 2 (orthogonal): interval arithmetic widens
 * tanh's inputs to [−4r, 4r] each, a cube about the true rotated one; the
 * affine forms beside the boxes keep the rotation, and the certified
 * radius must clear what intervals alone reach by far: measured, printed,
 * and never above r_samp (soundness). */
static double first_singular_radius_sampled(const double W1[4][4], const double W2[4][4])
{
    vijp_rng g;
    vijp_rng_seed(&g, 5);
    double u[2016][4];
    for (size_t p = 0; p < 2016; p++)
        for (size_t i = 0; i < 4; i++) u[p][i] = p < 16 ? (p >> i & 1 ? 1 : -1) : 2 * vijp_rng_uniform(&g) - 1;
    double a = 0, b = 2; /* the centre is submersive; b: a singular point found */
    for (int step = 0; step < 40; step++) {
        double r = (a + b) / 2;
        int found = 0;
        for (size_t p = 0; p < 2016 && !found; p++) {
            double t[4], h;
            for (size_t j = 0; j < 4; j++) {
                double z = 0;
                for (size_t i = 0; i < 4; i++) z += W1[j][i] * r * u[p][i];
                t[j] = tanh(z);
            }
            for (size_t k = 0; k < 4 && !found; k++) {
                h = 0;
                for (size_t j = 0; j < 4; j++) h += W2[k][j] * t[j];
                found = h <= silu_zero;
            }
        }
        if (found) b = r;
        else a = r;
    }
    return b;
}

static int net_certified_over(const char *net, double r)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "certify --net '%s' --box %.17g,%.17g --json", net, -r, r);
    run_result res = run_vijp(cmd);
    json_error_t je;
    json_t *o = json_loads(res.out, 0, &je);
    ck_assert_msg(o && (res.rc == CLI_OK || res.rc == CLI_FAILED), "%s: exit %d: %s", cmd, res.rc, res.err);
    const char *v = json_string_value(json_object_get(o, "verdict"));
    int certified = v && !strcmp(v, "certified-submersive");
    json_decref(o), run_free(&res);
    return certified;
}

START_TEST(net_box_widened_until_it_fails)
{
    static const double W2[4][4] = {{0.5, 0.5, 0.5, 0.5}, {0.3, 0, 0, 0}, {0, 0.3, 0, 0}, {0, 0, 0.3, 0}};
    static const double W1s[2][4][4] = {{{2, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 2, 0}, {0, 0, 0, 2}},
                                        {{1, 1, 1, 1}, {1, -1, 1, -1}, {1, 1, -1, -1}, {1, -1, -1, 1}}};
    char dir[256], net[300], w1[300], w2[300], b0[300];
    make_temp_dir(dir, sizeof dir, "widen");
    snprintf(net, sizeof net, "%s/net.json", dir), snprintf(w1, sizeof w1, "%s/w1.npy", dir);
    snprintf(w2, sizeof w2, "%s/w2.npy", dir), snprintf(b0, sizeof b0, "%s/b0.npy", dir);
    size_t shape[2] = {4, 4}, four = 4;
    static const double zeros[4] = {0};
    vijp_error err = {0};
    ck_assert(!vijp_npy_write(w2, 2, shape, &W2[0][0], &err) && !vijp_npy_write(b0, 1, &four, zeros, &err));
    FILE *f = fopen(net, "w");
    ck_assert(f);
    fprintf(f, "{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": ["
               "{\"type\": \"dense\", \"args\": \"4\", \"params\": {\"weight\": \"%s\", \"bias\": \"%s\"}}, {\"type\": \"tanh\"}, "
               "{\"type\": \"dense\", \"args\": \"4\", \"params\": {\"weight\": \"%s\", \"bias\": \"%s\"}}, {\"type\": \"silu\"}]}\n",
            w1, b0, w2, b0);
    ck_assert(!fclose(f));
    for (int rotated = 0; rotated < 2; rotated++) {
        ck_assert(!vijp_npy_write(w1, 2, shape, &W1s[rotated][0][0], &err));
        double r_samp = first_singular_radius_sampled(W1s[rotated], W2), lo = 0, hi = 1;
        ck_assert_msg(net_certified_over(net, 0.05), "not certified over the small box [-0.05, 0.05]^4");
        ck_assert_msg(!net_certified_over(net, r_samp * (1 + 1e-9)), "certified over radius %.17g, past the singular "
                      "point sampling found", r_samp * (1 + 1e-9));
        while (hi - lo > 1e-3 * r_samp) { /* the largest certified radius, within 1e-3 */
            double r = (lo + hi) / 2;
            if (net_certified_over(net, r)) lo = r;
            else hi = r;
        }
        printf("# certify_box: net box widened (%s W1): certified up to radius %.4f, sampling finds a singular point "
               "at %.4f: ratio %.3f\n", rotated ? "rotated" : "diagonal", lo, r_samp, lo / r_samp);
        ck_assert_msg(lo <= r_samp, "certified radius %.17g past the sampled singular point %.17g", lo, r_samp);
        if (rotated) { /* intervals wrap tanh's inputs to [−4r, 4r] and h_0 to [−2·tanh(4r), …]: they certify up
                        * to r_int = atanh(−x0/2)/4 = 0.189 and no further; the affine forms keep the rotation, so the
                        * radius must clear r_int by far (twice it; measured 3.4 times) */
            double r_int = atanh(-silu_zero / 2) / 4;
            ck_assert_msg(lo >= 2 * r_int, "rotated net: certified %.17g, intervals alone reach %.17g", lo, r_int);
        }
        if (!rotated) { /* r_samp: 40 halvings of [0, 2] (2^-39) and h_0 in double a few ulps off, so within
                         * 1e-9 of the exact radius; lo: the search stops within 1e-3·r_samp below the true one */
            double exact = atanh(-silu_zero / 2) / 2;
            ck_assert_msg(fabs(r_samp - exact) <= 1e-9 && lo >= exact * (1 - 2e-3), "diagonal net: certified %.17g, "
                          "sampled %.17g, exact first singular radius %.17g", lo, r_samp, exact);
        }
    }
    remove_tree(dir);
}
END_TEST

START_TEST(bad_boxes)
{
    one_layer o;
    one_layer_init(&o, "tanh", 2, 1);
    double lo[2] = {0, 1}, hi[2] = {1, 0.5}, nan_hi[2] = {1, NAN};
    vijp_box_certificate c;
    vijp_error err = {0};
    vijp_certify_opts co = {0};
    ck_assert_int_eq(vijp_certify_box(o.L, o.theta, lo, hi, NULL, &co, &c, &err), VIJP_EDOMAIN);
    ck_assert_msg(strstr(err.msg, "coordinate 2"), "%s", err.msg);
    ck_assert_int_eq(vijp_certify_box(o.L, o.theta, lo, nan_hi, NULL, &co, &c, &err), VIJP_EDOMAIN);
    vijp_net_free(&o.net);
}
END_TEST

/* The command: --json, --box-file's per-coordinate bounds (the zero in
 * coordinate 2 only), and every misuse refused with exit 2. */
START_TEST(certify_box_command)
{
    char dir[256], lo[300], hi[300], cmd[2048];
    make_temp_dir(dir, sizeof dir, "box");
    snprintf(lo, sizeof lo, "%s/lo.npy", dir), snprintf(hi, sizeof hi, "%s/hi.npy", dir);
    static const double l[2] = {1, -3}, h[2] = {2, 3}, wrong[3] = {1, 2, 3};
    size_t two = 2, three = 3;
    vijp_error err = {0};
    ck_assert(!vijp_npy_write(lo, 1, &two, l, &err) && !vijp_npy_write(hi, 1, &two, h, &err));
    snprintf(cmd, sizeof cmd, "certify --layer silu --width 2 --box-file '%s,%s' --json", lo, hi);
    run_result r = run_vijp(cmd);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je), *ce = json_object_get(o, "counterexample");
    ck_assert_msg(r.rc == CLI_FAILED && o, "exit %d: %s%s", r.rc, r.out, r.err);
    ck_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "not-submersive");
    ck_assert_int_eq(json_integer_value(json_object_get(ce, "coordinate")), 2);
    ck_assert(json_real_value(json_object_get(ce, "lo")) <= silu_zero && silu_zero <= json_real_value(json_object_get(ce, "hi")));
    json_decref(o);
    run_free(&r);
    r = run_vijp("certify --layer tanh --width 3 --box -2,2");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "verdict: certified-submersive over the whole box"), "exit %d: %s", r.rc, r.out);
    run_free(&r);
    ck_assert(!vijp_npy_write(hi, 1, &three, wrong, &err));
    snprintf(cmd, sizeof cmd, "certify --layer silu --width 2 --box-file '%s,%s'", lo, hi);
    static const char *const bad[][2] = {
        {"certify --layer tanh --box 3,1", "finite LO <= HI"},
        {"certify --layer tanh --box 1", "LO,HI"},
        {"certify --layer tanh --box -1,1 --samples 4", "--samples"},
        {"certify --layer tanh --box -1,1 --box-file a.npy,b.npy", "exclude each other"},
        {"certify --layer tanh --budget 5", "--budget applies to --box"},
        {"certify --layer tanh --box -1,1 --budget 0s", "Ts seconds"},
        /* a bound file missing is bad input (2), not a refuted box (1) */
        {"certify --layer tanh --width 2 --box-file /nonexistent/lo.npy,/nonexistent/hi.npy", "/nonexistent/lo.npy"},
        {"certify --net dense:2,tanh --box-file /nonexistent/lo.npy,/nonexistent/hi.npy", "/nonexistent/lo.npy"},
        {NULL, "want (2,)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        r = run_vijp(bad[k][0] ? bad[k][0] : cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k][1]) && !r.out[0], "%s: exit %d: %s", bad[k][0] ? bad[k][0] : cmd,
                      r.rc, r.err);
        run_free(&r);
    }
    /* a net over a box: ReLU first, its exact zero at −1 proves the net
     * not submersive; SiLU second, a zero in the enclosure of its inputs
     * proves nothing by itself (the enclosure holds more than reaches it),
     * but two points of the box whose images give f′ opposite signs do
     * (net_counterexample_deeper checks such a proof against the oracle):
     * both inside the box */
    r = run_vijp("certify --net relu,dense:4,tanh --width 4 --box -1,1 --json");
    o = json_loads(r.out, 0, &je);
    ck_assert_msg(r.rc == CLI_FAILED && o, "exit %d: %s", r.rc, r.err);
    ck_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "not-submersive");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "layers_certified")), 2);
    json_decref(o), run_free(&r);
    r = run_vijp("certify --net dense:4,silu --box -3,3 --json");
    o = json_loads(r.out, 0, &je);
    ck_assert_msg(r.rc == CLI_FAILED && o, "exit %d: %s", r.rc, r.err);
    ck_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "not-submersive");
    json_t *second = json_array_get(json_object_get(o, "layers"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(second, "verdict")), "not-submersive");
    for (int b = 0; b < 2; b++) {
        json_t *x = json_object_get(second, b ? "counterexample_x_b" : "counterexample_x");
        ck_assert_msg(json_array_size(x) == 4, "%s", r.out);
        for (size_t j = 0; j < 4; j++)
            ck_assert(fabs(json_number_value(json_array_get(x, j))) <= 3);
    }
    json_decref(o), run_free(&r);
    r = run_vijp("certify --net dense:4,tanh,dense:3 --box -1,1");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "verdict: certified-submersive: 3 of 3 layers"), "exit %d: %s", r.rc,
                  r.out);
    run_free(&r);
    /* layernorm, softmax and the couplings pass the box on: every layer
     * gets a verdict over an enclosure (none stops the chain), and the
     * layer after softmax sees inputs within [0, 1] */
    static const char *const through = "dense:8,layernorm,dense:8,tanh,additive,affine,softmax,dense:4";
    snprintf(cmd, sizeof cmd, "certify --net %s --box -1,1 --json", through);
    r = run_vijp(cmd);
    o = json_loads(r.out, 0, &je);
    ck_assert_msg(r.rc == CLI_FAILED && o, "exit %d: %s", r.rc, r.err);
    json_t *layers = json_object_get(o, "layers");
    ck_assert_uint_eq(json_array_size(layers), 8);
    static const char *const expected[] = {"certified-submersive", "not-submersive", "certified-submersive",
                                           "certified-submersive", "certified-submersive", "certified-submersive",
                                           "not-submersive", "certified-submersive"};
    for (size_t k = 0; k < 8; k++) {
        json_t *entry = json_array_get(layers, k);
        ck_assert_msg(!strcmp(json_string_value(json_object_get(entry, "verdict")), expected[k]) &&
                      strcmp(json_string_value(json_object_get(entry, "method")), "none"),
                      "layer %zu: %s (%s): %s", k + 1, json_string_value(json_object_get(entry, "verdict")),
                      json_string_value(json_object_get(entry, "method")), json_string_value(json_object_get(entry, "reason")));
    }
    json_decref(o), run_free(&r);
    snprintf(cmd, sizeof cmd, "certify --net %s --box -1,1", through);
    r = run_vijp(cmd);
    const char *eighth = strstr(r.out, "\n    8  dense:4x8");
    double lo8 = -1, hi8 = 2;
    ck_assert_msg(!strstr(r.out, "its values over the box") && eighth &&
                  sscanf(strchr(eighth, '['), "[%lf, %lf]", &lo8, &hi8) == 2 && lo8 >= 0 && hi8 <= 1,
                  "exit %d: %s", r.rc, r.out);
    run_free(&r);
    /* a plugin's type with neither an f′ enclosure nor a declaration */
    char so[1024];
    test_plugin_path("correct", so, sizeof so);
    snprintf(cmd, sizeof cmd, "certify --layer correct_linear --width 3 --box -1,1 --plugin '%s'", so);
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "no enclosure of its Jacobian over a box"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    remove_tree(dir);
}
END_TEST

/* ---- types certified by bisection of the box: the test plugin csquare
 * (tests/plugins/csquare.c), y = a·z² on each pair of units, a = 3/4.  Its
 * J is block diagonal with scaled rotations 2a·[[x, −y], [y, x]], so
 * σ_min(J) = 2|a|·min_k |z_k| (derived there): over a box, 2|a| times the
 * least distance from the origin of a pair's rectangle; singular exactly
 * where some pair is 0; ‖J(x) − J(w)‖₂ <= 2|a|·‖x − w‖₂. ---- */

/* The command's verdict on a type of the csquare plugin over [lo, hi]
 * (per coordinate), from its JSON. */
typedef struct {
    int rc;
    char verdict[32], method[32], reason[256];
    double s, fraction;
    long boxes;
} box_run;

static box_run csquare_box(const char *type, size_t n, const double *lo, const double *hi, size_t budget)
{
    char what[64], extra[64] = "";
    snprintf(what, sizeof what, "--layer %s", type);
    if (budget) snprintf(extra, sizeof extra, " --budget %zu", budget);
    run_result r;
    json_t *o = csquare_command(what, n, lo, hi, extra, &r);
    box_run b = {.rc = r.rc, .s = json_number_value(json_object_get(o, "sigma_min_lower_bound")),
                 .fraction = json_number_value(json_object_get(o, "certified_fraction")),
                 .boxes = (long)json_integer_value(json_object_get(o, "intervals"))};
    if (json_is_null(json_object_get(o, "sigma_min_lower_bound"))) b.s = NAN;
    snprintf(b.verdict, sizeof b.verdict, "%s", json_string_value(json_object_get(o, "verdict")));
    snprintf(b.method, sizeof b.method, "%s", json_string_value(json_object_get(o, "method")));
    snprintf(b.reason, sizeof b.reason, "%s", json_string_value(json_object_get(o, "reason")));
    json_decref(o), run_free(&r);
    return b;
}

/* The least |z| over the rectangle [lo0, hi0] × [lo1, hi1]: each coordinate's
 * distance from 0 to its interval, hand-derived (0 when it holds 0). */
static double least_modulus(double lo0, double hi0, double lo1, double hi1)
{
    double a = lo0 > 0 ? lo0 : hi0 < 0 ? -hi0 : 0, b = lo1 > 0 ? lo1 : hi1 < 0 ? -hi1 : 0;
    return hypot(a, b);
}

/* The true least σ_min over the box, 1.5·min_k |z_k|, rounded up past its
 * rounding (hypot within 1 ulp, the product by 1.5 within 1/2: 2^-51
 * relative covers both): s may not exceed it. */
static double csquare_sigma_min(const double *lo, const double *hi, size_t n)
{
    double least = INFINITY;
    for (size_t k = 0; k < n; k += 2) least = fmin(least, least_modulus(lo[k], hi[k], lo[k + 1], hi[k + 1]));
    return 1.5 * least * (1 + 0x1p-51);
}

START_TEST(plugin_interval_jacobian)
{
    /* pairs [0.5, 1] × [0.25, 1] and [−1, −0.5] × [0.5, 1]: least |z| = |(0.5, 0.25)| */
    double lo[4] = {0.5, 0.25, -1, 0.5}, hi[4] = {1, 1, -0.5, 1};
    box_run c = csquare_box("csquare", 4, lo, hi, 0);
    double truth = csquare_sigma_min(lo, hi, 4);
    ck_assert_msg(c.rc == CLI_OK && !strcmp(c.verdict, "certified-submersive") && !strcmp(c.method, "interval-jacobian") &&
                  c.s > 0 && c.s <= truth, "%s (%s): s = %.17g, true least σ_min %.17g: %s", c.verdict, c.method, c.s,
                  truth, c.reason);
    /* the second pair's rectangle holds 0 at the box's centre: J is exactly singular there */
    double lo2[4] = {0.5, 0.5, -1, -1}, hi2[4] = {1, 1, 1, 1};
    c = csquare_box("csquare", 4, lo2, hi2, 0);
    ck_assert_msg(!strcmp(c.verdict, "not-submersive") && strstr(c.reason, "(0.75, 0.75, 0, 0)"), "%s: %s", c.verdict,
                  c.reason);
    /* 0 inside but never a centre of the bisection (−0.5 + 1.5·k/2^j = 0 has no solution): undecided
     * within the budget, never certified, most of the volume proven */
    double lo3[4] = {-0.5, -0.5, 0.5, 0.5}, hi3[4] = {1, 1, 1, 1};
    c = csquare_box("csquare", 4, lo3, hi3, 400);
    ck_assert_msg(!strcmp(c.verdict, "undecided") && c.fraction > 0.5 && c.fraction < 1 && c.boxes == 400,
                  "%s: fraction %g after %ld boxes: %s", c.verdict, c.fraction, c.boxes, c.reason);
}
END_TEST

/* The Lipschitz fallback: J(c) ± 2|a|·r.  Over [0.5, 1]² the bound
 * σ_min(J(c)) − 2|a|·r = 1.5·(0.75 − 0.25)·√2 is the true least σ_min (the
 * ball reaches the corner nearest 0), so one box certifies with s at most
 * the truth; a box whose ball about its centre reaches past 0 needs
 * bisection; one holding 0 never
 * certifies and proves nothing (an MPFR Jacobian proves no singular point). */
START_TEST(plugin_lipschitz)
{
    double lo[2] = {0.5, 0.5}, hi[2] = {1, 1};
    box_run c = csquare_box("csquarelip", 2, lo, hi, 0);
    double truth = csquare_sigma_min(lo, hi, 2);
    ck_assert_msg(!strcmp(c.verdict, "certified-submersive") && !strcmp(c.method, "lipschitz") && c.s > 0 &&
                  c.s <= truth && c.boxes == 1, "%s (%s): s = %.17g, true %.17g, %ld boxes: %s", c.verdict, c.method,
                  c.s, truth, c.boxes, c.reason);
    double lo2[2] = {0.1, -1}; /* |c| = 0.55 < r = |(0.45, 1)|: the whole box's ball holds J = 0 */
    c = csquare_box("csquarelip", 2, lo2, hi, 0);
    truth = csquare_sigma_min(lo2, hi, 2);
    ck_assert_msg(!strcmp(c.verdict, "certified-submersive") && c.s > 0 && c.s <= truth && c.boxes > 1,
                  "%s: s = %.17g, true %.17g, %ld boxes: %s", c.verdict, c.s, truth, c.boxes, c.reason);
    double lo3[2] = {-1, -1};
    c = csquare_box("csquarelip", 2, lo3, hi, 300);
    ck_assert_msg(!strcmp(c.verdict, "undecided") && !strcmp(c.method, "lipschitz"), "%s: %s", c.verdict, c.reason);
}
END_TEST

static vijp_box_certificate box_of_vec(const one_layer *o, const double *lo, const double *hi, size_t intervals)
{
    vijp_box_certificate c;
    vijp_error err = {0};
    vijp_box_budget b = {intervals, 0};
    ck_assert_msg(!vijp_certify_box(o->L, o->theta, lo, hi, &b, NULL, &c, &err), "%s", err.msg);
    return c;
}

/* inv1x1 and avgpool: J the same at every x but not exact in double (exp,
 * 1/P), now enclosed.  The enclosure holds the 256-bit MPFR Jacobian (the
 * oracle, oracles/), and the box certificate's s is at most σ_min: for
 * avgpool:P, J Jᵀ = I/P, σ_min = 1/√P (avgpool.c); for inv1x1, σ_min(W ⊗ I)
 * = σ_min(W), LAPACK's on the oracle's J, within n·u·σ_max of the truth
 * (Higham, backward stable SVD; 1e-12 relative covers n = 6). */
static void check_constant_enclosure(const char *spec, size_t width, double sigma_min_bound)
{
    one_layer o;
    one_layer_init(&o, spec, width, 3);
    size_t m = o.L->out, n = o.L->in, P0 = o.L->type->param_count(o.L);
    vijp_rng rng; /* inv1x1's orthogonal init is W = P, a permutation: seeded N(0, 1/4) parameters instead */
    vijp_rng_seed(&rng, 3);
    for (size_t p = 0; p < P0; p++) o.net.theta[0][p] = 0.5 * vijp_rng_normal(&rng);
    double *x = calloc(n, sizeof *x), *mid = malloc(m * n * sizeof *mid), *rad = malloc(m * n * sizeof *rad);
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_jacobian_enclosure(o.L, o.theta, x, mid, rad, &err), "%s: %s", spec, err.msg);
    vijp_format f;
    ck_assert(!vijp_format_mpfr(&f, 256, &err));
    size_t P = o.L->type->param_count(o.L);
    mpfr_t *th = vo_vec_new(P + 1, &f), *xm = vo_vec_new(n, &f), *J = vo_vec_new(m * n, &f), t;
    mpfr_init2(t, 256);
    for (size_t p = 0; p < P; p++) mpfr_set_d(th[p], o.theta[p], MPFR_RNDN);
    for (size_t j = 0; j < n; j++) mpfr_set_zero(xm[j], 1);
    o.L->type->mp->jacobian(o.L, th, xm, J, &f);
    double *Jd = malloc(m * n * sizeof *Jd);
    for (size_t k = 0; k < m * n; k++) {
        mpfr_sub_d(t, J[k], mid[k], MPFR_RNDN), mpfr_abs(t, t, MPFR_RNDN);
        ck_assert_msg(mpfr_cmp_d(t, rad[k]) <= 0, "%s: entry %zu: the oracle's %.17g is outside %.17g ± %.3g", spec, k,
                      mpfr_get_d(J[k], MPFR_RNDN), mid[k], rad[k]);
        ck_assert_msg(rad[k] <= 0x1p-100 + 0x1p-50 * fabs(mid[k]), "%s: entry %zu: radius %g", spec, k, rad[k]);
        Jd[k] = mpfr_get_d(J[k], MPFR_RNDN);
    }
    if (!(sigma_min_bound > 0)) { /* from LAPACK on the oracle's J */
        vijp_numeric a;
        ck_assert(!vijp_numeric_analysis(Jd, m, n, &a, &err));
        sigma_min_bound = a.sigma_min + 1e-12 * a.sigma_max;
        vijp_numeric_clear(&a);
    }
    double lo[64], hi[64];
    for (size_t j = 0; j < n; j++) lo[j] = -1, hi[j] = 1;
    vijp_box_certificate c = box_of_vec(&o, lo, hi, 0);
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c.method, "constant-jacobian") && c.s > 0 &&
                  c.s <= sigma_min_bound, "%s: %s (%s), s = %.17g, σ_min <= %.17g: %s", spec,
                  vijp_box_verdict_name(c.verdict), c.method, c.s, sigma_min_bound, c.reason);
    mpfr_clear(t);
    vo_vec_free(th, P + 1), vo_vec_free(xm, n), vo_vec_free(J, m * n);
    free(x), free(mid), free(rad), free(Jd);
    vijp_net_free(&o.net);
}

START_TEST(inv1x1_avgpool_boxes)
{
    check_constant_enclosure("avgpool:3", 6, 1 / sqrt(3) * (1 + 0x1p-51)); /* sqrt and division: 1 ulp each */
    check_constant_enclosure("avgpool:2", 4, 1 / sqrt(2) * (1 + 0x1p-51));
    check_constant_enclosure("inv1x1:3", 6, 0);
}
END_TEST

Suite *suite_certify_box(void)
{
    Suite *s = suite_create("certify_box");
    TCase *tc = tcase_create("certify_box");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, silu_zero_found_and_bound);
    tcase_add_test(tc, sound_against_brute_force);
    tcase_add_test(tc, relu_and_tanh);
    tcase_add_test(tc, dense_boxes);
    tcase_add_test(tc, image_box_encloses);
    tcase_add_test(tc, image_box_new_types);
    tcase_add_test(tc, image_box_layernorm_degenerate);
    tcase_add_test(tc, bad_boxes);
    tcase_add_test(tc, inv1x1_avgpool_boxes);
    tcase_add_test(tc, image_box_every_type);
    tcase_add_test(tc, image_box_softplus_jump);
    tcase_add_test(tc, radius_spectral_bound);
    tcase_add_test(tc, net_counterexample_deeper);
    if (getenv("VIJP_BIN")) {
        tcase_add_test(tc, certify_box_command);
        tcase_add_test(tc, net_box_widened_until_it_fails);
        tcase_add_test(tc, plugin_interval_jacobian);
        tcase_add_test(tc, plugin_lipschitz);
        tcase_add_test(tc, plugin_image_mean_value);
    }
    suite_add_tcase(s, tc);
    return s;
}

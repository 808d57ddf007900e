/* linear and attention beyond the layer battery (t-layers.c runs that on
 * both): their θ layout and semantics against values worked by hand and
 * against formulas written out here, their cokernel where out_proj.weight
 * loses rank by zero rows, and their specs printing back as written.
 * torch parity itself: scripts/check-torch-attention.py. */
#include "fixtures/testutil.h"
#include "vijp/layer.h"
#include "vijp/check_layer.h"
#include "vijp/catalogue.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operator's result at (θ, X[, A]) in format fmt, as doubles. */
enum { FWD, VJP, VJP_PARAM };
static void run_op(const vijp_layer *L, int op, const char *fmt, const double *th, const double *X, const double *A,
                   double *out)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert(!vijp_format_parse(fmt, &f, &err));
    size_t P = L->type->param_count(L), rows = op == FWD ? L->out : op == VJP ? L->in : P;
    vijp_mat t, x, a, o;
    vijp_mat_init(&t, P, 1, &f), vijp_mat_init(&x, L->in, 1, &f), vijp_mat_init(&a, L->out, 1, &f);
    vijp_mat_init(&o, rows, 1, &f);
    vijp_mat_set_d(&t, th), vijp_mat_set_d(&x, X);
    if (A) vijp_mat_set_d(&a, A);
    int rc = op == FWD ? vijp_layer_forward(L, &t, &x, &o, &err)
           : op == VJP ? vijp_layer_vjp(L, &t, &x, &a, &o, &err) : vijp_layer_vjp_param(L, &t, &x, &a, &o, &err);
    ck_assert_msg(!rc, "%s", err.msg);
    for (size_t i = 0; i < rows; i++) out[i] = vijp_mat_get_d(&o, i);
    vijp_mat_clear(&t), vijp_mat_clear(&x), vijp_mat_clear(&a), vijp_mat_clear(&o);
}

/* linear:2x3 on 2 tokens, θ = weight [[1,2,3],[4,5,6]] (C order), bias
 * [7,8]: small integers, so every format holds every result exactly, and the
 * expected values are worked by hand from y_l = W x_l + b. */
START_TEST(linear_by_hand)
{
    static const char *const fmts[] = {"double", "mpfr:64", "binary32", "bfloat16+binary32"};
    const double th[] = {1, 2, 3, 4, 5, 6, 7, 8}, x[] = {1, 0, -1, 2, 1, 0}, g[] = {1, 1, 0, 1};
    const double y[] = {5, 6, 11, 21};                       /* [1−3+7, 4−6+8], [2+2+7, 8+5+8] */
    const double gx[] = {5, 7, 9, 4, 5, 6};                  /* Wᵀ g_l */
    const double gt[] = {1, 0, -1, 3, 1, -1, 1, 2};          /* Σ_l g_l x_lᵀ, Σ_l g_l */
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "linear:2x3", 6, NULL));
    ck_assert_uint_eq(L.out, 4);
    double out[8];
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        run_op(&L, FWD, fmts[k], th, x, NULL, out);
        for (size_t i = 0; i < 4; i++) ck_assert_msg(out[i] == y[i], "%s y[%zu] = %g", fmts[k], i, out[i]);
        run_op(&L, VJP, fmts[k], th, x, g, out);
        for (size_t i = 0; i < 6; i++) ck_assert_msg(out[i] == gx[i], "%s gx[%zu] = %g", fmts[k], i, out[i]);
        run_op(&L, VJP_PARAM, fmts[k], th, x, g, out);
        for (size_t i = 0; i < 8; i++) ck_assert_msg(out[i] == gt[i], "%s dθ[%zu] = %g", fmts[k], i, out[i]);
    }
    vijp_layer_clear(&L);
}
END_TEST

/* One token attends to itself alone: P = 1 and y = W_o(W_v x + b_v) + b_o,
 * the q and k halves of θ left out (torch's formula with softmax over one
 * key).  Written out here in double.  Each side forms two stages of dot
 * products of D terms and a bias, so errs by at most 1.01·2(D + 1)·u·mag,
 * mag = |b_o| + |W_o|(|W_v||x| + |b_v|) (Higham eq. 3.5 per stage, the
 * first's error carried through |W_o|): the two differ by at most twice
 * that, in double and in the MPFR oracle at 53 bits. */
START_TEST(attention_one_token)
{
    static const char *const specs[] = {"attention:4x2", "attention:4x2:causal", "attention:4x1"};
    static const char *const fmts[] = {"double", "mpfr:53"};
    size_t D = 4;
    double th[4 * 16 + 16], x[4];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < sizeof th / sizeof *th; i++) th[i] = vijp_rng_normal(&rng);
    for (size_t i = 0; i < D; i++) x[i] = vijp_rng_normal(&rng);
    const double *Wv = th + 2 * D * D, *bv = th + 3 * D * D + 2 * D, *Wo = th + 3 * D * D + 3 * D, *bo = Wo + D * D;
    double v[4], va[4], want[4], mag[4];
    for (size_t i = 0; i < D; i++) {
        v[i] = bv[i], va[i] = fabs(bv[i]);
        for (size_t j = 0; j < D; j++) v[i] += Wv[i * D + j] * x[j], va[i] += fabs(Wv[i * D + j] * x[j]);
    }
    for (size_t i = 0; i < D; i++) {
        want[i] = bo[i], mag[i] = fabs(bo[i]);
        for (size_t j = 0; j < D; j++) want[i] += Wo[i * D + j] * v[j], mag[i] += fabs(Wo[i * D + j]) * va[j];
    }
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (size_t k = 0; k < 2; k++) {
            vijp_layer L;
            ck_assert(!vijp_layer_parse(&L, specs[s], D, NULL));
            double y[4];
            run_op(&L, FWD, fmts[k], th, x, NULL, y);
            for (size_t i = 0; i < D; i++) {
                double bound = 2 * 1.01 * 2 * (double)(D + 1) * 0x1p-53 * mag[i];
                ck_assert_msg(fabs(y[i] - want[i]) <= bound, "%s %s y[%zu] = %.17g, want %.17g within %g", specs[s],
                              fmts[k], i, y[i], want[i], bound);
            }
            vijp_layer_clear(&L);
        }
}
END_TEST

static const char *check_status(const char *spec, const char *check, const double *th, size_t P, vijp_check_result *r)
{
    vijp_check_opts o = {.width = 12, .seed = test_seed(), .params = th, .n_params = P};
    vijp_error err = {0};
    ck_assert_msg(!vijp_check_layer_run((size_t)vijp_check_find(check), spec, &o, r, &err), "%s", err.msg);
    return r->status == VIJP_CHECK_PASSED ? "passed" : r->status == VIJP_CHECK_FAILED ? "failed" : "skipped";
}

/* Zero rows 1 and 3 of out_proj.weight: outputs 1 and 3 of every token are
 * the constants b_o[1], b_o[3], so e_(l·D+1), e_(l·D+3) span (part of) the
 * cokernel, exactly.  The fragment holds 2 entries per token, the battery's
 * fragment, round-trip and oracle checks pass on it, and the vijp solves on
 * the other outputs' rows. */
START_TEST(attention_zero_rows_cokernel)
{
    const char *spec = _i ? "attention:4x2:causal" : "attention:4x2";
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, spec, 12, NULL));
    size_t P = L.type->param_count(&L), D = 4, wo = 3 * D * D + 3 * D;
    double *th = malloc(P * sizeof *th), x[24] = {0}; /* two samples */
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    ck_assert(!L.type->init(&L, (vijp_init){.kind = VIJP_INIT_GAUSSIAN}, &rng, th));
    for (size_t j = 0; j < D; j++) th[wo + 1 * D + j] = th[wo + 3 * D + j] = 0;
    vijp_format f;
    vijp_format_fixed(&f, VIJP_DOUBLE);
    vijp_mat t, X;
    vijp_mat_init(&t, P, 1, &f), vijp_mat_init(&X, 12, 2, &f);
    vijp_mat_set_d(&t, th), vijp_mat_set_d(&X, x);
    ck_assert_uint_eq(vijp_layer_fragment_count(&L, &t, &X), 2 * 3 * 2); /* 2 rows, 3 tokens, 2 samples */
    vijp_mat_clear(&t), vijp_mat_clear(&X);
    static const char *const checks[] = {"fragment-vs-cokernel", "vijp-round-trip", "format-vs-mpfr", "adjoint"};
    for (size_t k = 0; k < sizeof checks / sizeof *checks; k++) {
        vijp_check_result r;
        ck_assert_msg(!strcmp(check_status(spec, checks[k], th, P, &r), "passed"), "%s %s: %s", spec, checks[k],
                      r.detail);
    }
    free(th);
    vijp_layer_clear(&L);
}
END_TEST

/* Every new spec prints back as written, and bad ones are refused. */
START_TEST(specs_print_back)
{
    static const struct {
        const char *spec;
        size_t width;
    } ok[] = {{"linear:6x4", 12}, {"linear:1x1", 3}, {"attention:4x2", 12}, {"attention:4x4:causal", 8},
              {"attention:6x3", 6}};
    for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
        vijp_layer L;
        char buf[64];
        ck_assert(!vijp_layer_parse(&L, ok[k].spec, ok[k].width, NULL));
        vijp_layer_spec(&L, buf, sizeof buf);
        ck_assert_str_eq(buf, ok[k].spec);
        vijp_layer_clear(&L);
    }
    static const char *const bad[] = {"attention:4x2:causalx", "attention:4x0", "attention:x2", "attention",
                                      "linear", "linear:4x", "linear:4x4:causal", "linear:-4x4"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        ck_assert_msg(vijp_layer_parse(&L, bad[k], 12, &err) && err.msg[0], "'%s' accepted", bad[k]);
    }
}
END_TEST

Suite *suite_attention(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_add_test(tc, linear_by_hand);
    tcase_add_test(tc, attention_one_token);
    tcase_add_loop_test(tc, attention_zero_rows_cokernel, 0, 2);
    tcase_add_test(tc, specs_print_back);
    suite_add_tcase(s, tc);
    return s;
}

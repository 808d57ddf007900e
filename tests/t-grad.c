/* One gradient comparison (src/grad/grad.c): several engines against one
 * reference computed once give, bit for bit, what a comparison of each
 * engine alone gives; the progress callback sees every run's layer steps;
 * a failing engine stops the runs where a comparison of it alone fails. */
#include "fixtures/testutil.h"
#include "vijp/study.h"
#include "vijp/metrics.h"
#include "grad/problem.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seed 1: the failing case below needs one that fails, the others one
 * where every engine succeeds. */
static void setup(vijp_grad_setup *s, const char *spec, size_t depth, size_t width, const char *fmt)
{
    *s = (vijp_grad_setup){.spec = spec, .depth = depth, .width = width, .batch = 2, .seed = 1,
                           .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(fmt, &s->fmt, &err), "%s", err.msg);
}

#define SAME(field) !memcmp(&a->field, &b->field, sizeof a->field)

/* Every field, exactly (doubles by their bits: NaN equal to itself). */
static void assert_same_result(const vijp_grad_result *a, const vijp_grad_result *b, size_t depth, const char *what)
{
    ck_assert_msg(SAME(engine) && SAME(loss) && SAME(grad_x_norm) && SAME(grad_theta_norm) && SAME(stored_bytes) &&
                      SAME(input_grad_rel_err) && SAME(param_grad_rel_err_max) && SAME(ref_prec),
                  "%s: a field differs", what);
    ck_assert_msg(a->rel_err_per_layer && b->rel_err_per_layer &&
                      !memcmp(a->rel_err_per_layer, b->rel_err_per_layer, depth * sizeof *a->rel_err_per_layer),
                  "%s: rel_err_per_layer differs", what);
}

static int same_mat(const vijp_mat *a, const vijp_mat *b)
{
    if (a->rows != b->rows || a->cols != b->cols || a->fmt != b->fmt) return 0;
    for (size_t k = 0; k < vijp_mat_len(a); k++) {
        /* MPFR values: equal both ways in the total order (signed zeros, NaN) */
        int same = a->d ? !memcmp(&a->d[k], &b->d[k], sizeof a->d[k])
                        : mpfr_total_order_p(a->m[k], b->m[k]) && mpfr_total_order_p(b->m[k], a->m[k]);
        if (!same) return 0;
    }
    return 1;
}

static void assert_same_grads(const vijp_grads *a, const vijp_grads *b, const char *what)
{
    ck_assert_msg(a->depth == b->depth && SAME(loss) && SAME(stored_bytes) && SAME(rebuilt) &&
                      same_mat(&a->grad_x, &b->grad_x),
                  "%s: kept gradients differ", what);
    for (size_t i = 0; i < a->depth; i++)
        ck_assert_msg(same_mat(&a->g[i], &b->g[i]) && same_mat(&a->grad_theta[i], &b->grad_theta[i]) &&
                          a->stored_by_depth[i] == b->stored_by_depth[i],
                      "%s: kept gradients of layer %zu differ", what, i + 1);
}

/* A comparison as vijp_grad_compare_keep made it before the engines shared
 * their reference, kept here as the fixed point the library is held to:
 * the problem in the format, the engine, the reference at max(256, 2P) bits
 * from the same values, then the metrics. */
static int compare_alone(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r, vijp_grads *keep)
{
    memset(r, 0, sizeof *r);
    if (keep) memset(keep, 0, sizeof *keep);
    r->engine = e;
    vijp_net net;
    vijp_problem pf, pr = {0};
    int rc = vijp_problem_setup(s, &net, &pf, NULL);
    if (rc) return rc;
    vijp_format ref;
    r->ref_prec = 2 * (long)s->fmt.prec > 256 ? 2 * (long)s->fmt.prec : 256;
    vijp_grads gf = {0}, gr = {0};
    if ((rc = vijp_format_mpfr(&ref, r->ref_prec, NULL))) goto out;
    vijp_problem_convert(&pr, &net, &pf, &ref);
    if ((rc = vijp_engine_run_opts(e, &net, pf.theta, &pf.X, &pf.T, &s->opts, &gf, NULL)) ||
        (rc = vijp_grads_check_finite(&gf, NULL)) ||
        (rc = vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, pr.theta, &pr.X, &pr.T, &gr, NULL)))
        goto out;
    r->loss = gf.loss;
    r->stored_bytes = gf.stored_bytes;
    r->grad_x_norm = vijp_norm(&gf.grad_x);
    r->input_grad_rel_err = vijp_rel_err(&gf.grad_x, &gr.grad_x);
    r->rel_err_per_layer = calloc(net.depth, sizeof *r->rel_err_per_layer);
    double norm = 0;
    for (size_t i = 0; i < net.depth; i++) {
        r->rel_err_per_layer[i] = vijp_rel_err(&gf.g[i], &gr.g[i]);
        if (gf.grad_theta[i].rows == 0) continue;
        vijp_xnum ei = vijp_rel_err(&gf.grad_theta[i], &gr.grad_theta[i]);
        norm = hypot(norm, vijp_norm(&gf.grad_theta[i]));
        r->param_grad_rel_err_max = vijp_xnum_max_nan(r->param_grad_rel_err_max, ei);
    }
    r->grad_theta_norm = norm;
    if (keep) *keep = gf, gf = (vijp_grads){0};
out:
    vijp_grads_clear(&gf);
    vijp_grads_clear(&gr);
    vijp_problem_clear(&pf, &net);
    vijp_problem_clear(&pr, &net);
    vijp_net_free(&net);
    return rc;
}

/* What the progress callback saw: the runs in the order they came, and
 * whether each run's steps went 1, 2, … with one total. */
#define MAX_RUNS 16
typedef struct {
    size_t order[MAX_RUNS], n_order;
    size_t last[MAX_RUNS], total[MAX_RUNS];
    int bad;
} seen;

static void on_step(void *ctx, size_t run, size_t done, size_t total)
{
    seen *w = ctx;
    if (run >= MAX_RUNS) {
        w->bad = 1;
        return;
    }
    if (done == 1) w->order[w->n_order++] = run; /* a run begins */
    if (done != w->last[run] + 1 || (w->last[run] && total != w->total[run]) || w->order[w->n_order - 1] != run)
        w->bad = 1;
    w->last[run] = done, w->total[run] = total;
}

/* Every engine, in a mixed order with one twice, in four formats: the
 * results of one call against separate vijp_grad_compare calls and against
 * compare_alone, every field exactly, and the first engine's kept gradients
 * against theirs.  The callback: engines[0], the reference (run
 * n), then the others, each from step 1 to its vijp_engine_layer_steps. */
START_TEST(engines_share_one_reference)
{
    static const char *const fmts[] = {"double", "binary32", "bfloat16", "mpfr:113"};
    static const vijp_engine_kind engines[] = {VIJP_ENGINE_CHECKPOINT, VIJP_ENGINE_BACKPROP, VIJP_ENGINE_MOONWALK,
                                               VIJP_ENGINE_REVERSIBLE, VIJP_ENGINE_PURE_FORWARD,
                                               VIJP_ENGINE_MOONWALK};
    enum { N = sizeof engines / sizeof *engines, D = 6 };
    vijp_grad_setup s;
    setup(&s, "dense:8,tanh,dense:8,leaky:0.5", D, 8, fmts[_i]);
    s.opts.checkpoint_segment = 4;
    vijp_grad_result got[N], want;
    vijp_grads kept, kept_want;
    seen w = {0};
    vijp_grad_progress progress = {on_step, &w};
    size_t compared = 99;
    vijp_error err = {0};
    ck_assert_msg(!vijp_grad_compare_engines(&s, engines, N, got, &compared, &kept, &progress, &err), "%s: %s",
                  fmts[_i], err.msg);
    ck_assert_uint_eq(compared, N);
    for (size_t k = 0; k < N; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s, engines[%zu] = %s", fmts[_i], k, vijp_engine_name(engines[k]));
        if (k == 0) {
            ck_assert_msg(!vijp_grad_compare_keep(&s, engines[k], &want, &kept_want, &err), "%s: %s", what, err.msg);
            assert_same_grads(&kept, &kept_want, what);
            vijp_grads_clear(&kept_want);
        } else {
            ck_assert_msg(!vijp_grad_compare(&s, engines[k], &want, &err), "%s: %s", what, err.msg);
        }
        assert_same_result(&got[k], &want, D, what);
        vijp_grad_result_clear(&want);
        ck_assert_msg(!compare_alone(&s, engines[k], &want, k == 0 ? &kept_want : NULL), "%s: alone", what);
        assert_same_result(&got[k], &want, D, what);
        if (k == 0) assert_same_grads(&kept, &kept_want, what), vijp_grads_clear(&kept_want);
        vijp_grad_result_clear(&want);
        vijp_grad_result_clear(&got[k]);
    }
    vijp_grads_clear(&kept);
    ck_assert_msg(!w.bad, "%s: steps out of order", fmts[_i]);
    ck_assert_uint_eq(w.n_order, N + 1);
    for (size_t r = 0; r <= N; r++) {
        size_t run = w.order[r], want_run = r == 0 ? 0 : r == 1 ? N : r - 1;
        ck_assert_msg(run == want_run, "%s: run %zu came %zu-th", fmts[_i], run, r + 1);
        size_t total = vijp_engine_layer_steps(run == N ? VIJP_ENGINE_BACKPROP : engines[run], D, s.batch, &s.opts);
        ck_assert_msg(w.last[run] == total && w.total[run] == total, "%s: run %zu ended at %zu of %zu (want %zu)",
                      fmts[_i], run, w.last[run], w.total[run], total);
    }
}
END_TEST

/* bfloat16 tanh layers saturate at ±1, where the reversible engine cannot
 * invert them: it fails as it does alone, after the engines before it, whose
 * results stay; those after it never run; nothing is kept.  First in the
 * list, it fails before the reference is computed. */
START_TEST(failing_engine_stops_the_runs)
{
    enum { D = 8 };
    vijp_grad_setup s;
    setup(&s, "dense:16,tanh", D, 16, "bfloat16");
    vijp_grad_result alone, got[3];
    vijp_error err_alone = {0}, err = {0};
    int rc_alone = vijp_grad_compare(&s, VIJP_ENGINE_REVERSIBLE, &alone, &err_alone);
    ck_assert_msg(rc_alone != 0, "the reversible engine no longer fails here: choose another net");
    vijp_grad_result_clear(&alone);

    const vijp_engine_kind middle[] = {VIJP_ENGINE_BACKPROP, VIJP_ENGINE_REVERSIBLE, VIJP_ENGINE_MOONWALK};
    vijp_grads kept;
    seen w = {0};
    vijp_grad_progress progress = {on_step, &w};
    size_t compared = 99;
    ck_assert_int_eq(vijp_grad_compare_engines(&s, middle, 3, got, &compared, &kept, &progress, &err), rc_alone);
    ck_assert_str_eq(err.msg, err_alone.msg);
    ck_assert_uint_eq(compared, 1);
    ck_assert(kept.g == NULL && kept.grad_theta == NULL);
    ck_assert(got[1].rel_err_per_layer == NULL && got[2].rel_err_per_layer == NULL);
    ck_assert_msg(!vijp_grad_compare(&s, VIJP_ENGINE_BACKPROP, &alone, &err), "%s", err.msg);
    assert_same_result(&got[0], &alone, D, "backprop before the failure");
    vijp_grad_result_clear(&alone);
    for (size_t k = 0; k < 3; k++) vijp_grad_result_clear(&got[k]);
    ck_assert(!w.bad && w.n_order == 3 && w.order[0] == 0 && w.order[1] == 3 && w.order[2] == 1); /* moonwalk: never */

    const vijp_engine_kind first[] = {VIJP_ENGINE_REVERSIBLE, VIJP_ENGINE_BACKPROP};
    seen w2 = {0};
    progress.ctx = &w2;
    ck_assert_int_eq(vijp_grad_compare_engines(&s, first, 2, got, &compared, NULL, &progress, &err), rc_alone);
    ck_assert_uint_eq(compared, 0);
    ck_assert(!w2.bad && w2.n_order == 1 && w2.order[0] == 0); /* no reference */
    for (size_t k = 0; k < 2; k++) vijp_grad_result_clear(&got[k]);

    ck_assert_int_eq(vijp_grad_compare_engines(&s, first, 0, got, &compared, NULL, NULL, &err), VIJP_EINVAL);
}
END_TEST

Suite *suite_grad(void)
{
    Suite *s = suite_create("grad");
    TCase *tc = tcase_create("grad");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, engines_share_one_reference, 0, 4);
    tcase_add_test(tc, failing_engine_stops_the_runs);
    suite_add_tcase(s, tc);
    return s;
}

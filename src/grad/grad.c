#include "vijp/study.h"
#include "vijp/error.h"
#include "vijp/metrics.h"
#include "vijp/vijp.h"
#include "problem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vijp_grad_result_clear(vijp_grad_result *r)
{
    free(r->rel_err_per_layer);
    r->rel_err_per_layer = NULL;
}

int vijp_grad_check_format(const vijp_format *f, vijp_error *err)
{
    if (f->prec <= VIJP_GRAD_PREC_MAX) return 0;
    return vijp_fail(err, VIJP_EINVAL, "format %s: the reference runs at twice its precision, %ld bits, past the %d-bit "
                     "limit of MPFR formats: the largest format measured against a reference is mpfr:%d", f->name,
                     2 * (long)f->prec, VIJP_PREC_MAX, VIJP_GRAD_PREC_MAX);
}

int vijp_grad_compare(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r, vijp_error *err)
{
    return vijp_grad_compare_engines(s, &e, 1, r, NULL, NULL, NULL, err);
}

int vijp_grad_compare_keep(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r, vijp_grads *keep,
                           vijp_error *err)
{
    return vijp_grad_compare_engines(s, &e, 1, r, NULL, keep, NULL, err);
}

/* One run's layer steps, passed on to the caller's progress as run `run`. */
typedef struct {
    const vijp_grad_progress *progress;
    size_t run;
} run_watch;

static void on_layer(void *ctx, size_t done, size_t total)
{
    const run_watch *w = ctx;
    w->progress->step(w->progress->ctx, w->run, done, total);
}

/* The engine's gradients gf against the reference's gr, into r. */
static void measure(const vijp_net *net, const vijp_grads *gf, const vijp_grads *gr, vijp_grad_result *r)
{
    r->loss = gf->loss;
    r->stored_bytes = gf->stored_bytes;
    r->grad_x_norm = vijp_norm(&gf->grad_x);
    r->input_grad_rel_err = vijp_rel_err(&gf->grad_x, &gr->grad_x);
    r->rel_err_per_layer = vijp_alloc_array(net->depth, sizeof *r->rel_err_per_layer);
    double norm = 0; /* ‖(∇θ_1, …, ∇θ_D)‖ by hypot: squares of finite norms past 1e154 would overflow */
    for (size_t i = 0; i < net->depth; i++) {
        r->rel_err_per_layer[i] = vijp_rel_err(&gf->g[i], &gr->g[i]);
        if (gf->grad_theta[i].rows == 0) continue;
        vijp_xnum ei = vijp_rel_err(&gf->grad_theta[i], &gr->grad_theta[i]);
        norm = hypot(norm, vijp_norm(&gf->grad_theta[i]));
        r->param_grad_rel_err_max = vijp_xnum_max_nan(r->param_grad_rel_err_max, ei);
    }
    r->grad_theta_norm = norm;
}

int vijp_grad_compare_engines(const vijp_grad_setup *s, const vijp_engine_kind *engines, size_t n,
                              vijp_grad_result *results, size_t *compared, vijp_grads *keep_first,
                              const vijp_grad_progress *progress, vijp_error *err)
{
    for (size_t k = 0; k < n; k++) memset(&results[k], 0, sizeof results[k]), results[k].engine = engines[k];
    if (keep_first) memset(keep_first, 0, sizeof *keep_first);
    if (compared) *compared = 0;
    if (n == 0) return vijp_fail(err, VIJP_EINVAL, "no engine given");
    vijp_net net;
    vijp_problem pf, pr = {0};
    int rc = vijp_grad_check_format(&s->fmt, err);
    if (rc) return rc;
    rc = vijp_problem_setup(s, &net, &pf, err);
    if (rc) return rc;
    vijp_format ref;
    long ref_prec = 2 * (long)s->fmt.prec > 256 ? 2 * (long)s->fmt.prec : 256;
    for (size_t k = 0; k < n; k++) results[k].ref_prec = ref_prec;
    vijp_grads gf = {0}, gr = {0};
    size_t done = 0;
    run_watch watch = {progress, 0};
    vijp_engine_opts o = s->opts, ro = {0}; /* the reference: backprop with no options but the meter's */
    if (progress && progress->step) {
        o.layer_done = ro.layer_done = on_layer;
        o.layer_ctx = ro.layer_ctx = &watch;
    }
    if ((rc = vijp_format_mpfr(&ref, ref_prec, err))) goto out;
    vijp_problem_convert(&pr, &net, &pf, &ref);
    /* The reference is the same for every engine: computed once, after the
     * first engine (which then fails, if it does, without the cost of one). */
    for (; done < n; done++) {
        watch.run = done;
        if ((rc = vijp_engine_run_opts(engines[done], &net, pf.theta, &pf.X, &pf.T, &o, &gf, err)) ||
            (rc = vijp_grads_check_finite(&gf, err)))
            goto out;
        if (done == 0) {
            watch.run = n;
            rc = vijp_engine_run_opts(VIJP_ENGINE_BACKPROP, &net, pr.theta, &pr.X, &pr.T, &ro, &gr, err);
            if (rc) goto out;
        }
        measure(&net, &gf, &gr, &results[done]);
        if (done == 0 && keep_first) *keep_first = gf, gf = (vijp_grads){0};
        vijp_grads_clear(&gf);
    }
out:
    if (compared) *compared = done;
    if (rc && keep_first) vijp_grads_clear(keep_first);
    vijp_grads_clear(&gf);
    vijp_grads_clear(&gr);
    vijp_problem_clear(&pf, &net);
    vijp_problem_clear(&pr, &net);
    vijp_net_free(&net);
    return rc;
}

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
    return vijp_grad_compare_keep(s, e, r, NULL, err);
}

int vijp_grad_compare_keep(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r, vijp_grads *keep,
                           vijp_error *err)
{
    memset(r, 0, sizeof *r);
    if (keep) memset(keep, 0, sizeof *keep);
    r->engine = e;
    vijp_net net;
    vijp_problem pf, pr = {0};
    int rc = vijp_grad_check_format(&s->fmt, err);
    if (rc) return rc;
    rc = vijp_problem_setup(s, &net, &pf, err);
    if (rc) return rc;
    vijp_format ref;
    r->ref_prec = 2 * (long)s->fmt.prec > 256 ? 2 * (long)s->fmt.prec : 256;
    vijp_grads gf = {0}, gr = {0};
    if ((rc = vijp_format_mpfr(&ref, r->ref_prec, err))) goto out;
    vijp_problem_convert(&pr, &net, &pf, &ref);
    if ((rc = vijp_engine_run_opts(e, &net, pf.theta, &pf.X, &pf.T, &s->opts, &gf, err)) ||
        (rc = vijp_grads_check_finite(&gf, err)) ||
        (rc = vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, pr.theta, &pr.X, &pr.T, &gr, err)))
        goto out;
    r->loss = gf.loss;
    r->stored_bytes = gf.stored_bytes;
    r->grad_x_norm = vijp_norm(&gf.grad_x);
    r->input_grad_rel_err = vijp_rel_err(&gf.grad_x, &gr.grad_x);
    r->rel_err_per_layer = vijp_alloc_array(net.depth, sizeof *r->rel_err_per_layer);
    double norm = 0; /* ‖(∇θ_1, …, ∇θ_D)‖ by hypot: squares of finite norms past 1e154 would overflow */
    for (size_t i = 0; i < net.depth; i++) {
        r->rel_err_per_layer[i] = vijp_rel_err(&gf.g[i], &gr.g[i]);
        if (gf.grad_theta[i].rows == 0) continue;
        double ei = vijp_rel_err(&gf.grad_theta[i], &gr.grad_theta[i]);
        norm = hypot(norm, vijp_norm(&gf.grad_theta[i]));
        r->param_grad_rel_err_max = vijp_max_nan(r->param_grad_rel_err_max, ei);
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

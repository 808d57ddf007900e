#include "vijp/study.h"
#include "vijp/metrics.h"
#include "vijp/vijp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vijp_grad_result_clear(vijp_grad_result *r)
{
    free(r->rel_err_per_layer);
    r->rel_err_per_layer = NULL;
}

/* Inputs, loss data and parameters in format f (rounded from the double master
 * copies), or, when from is given, converted exactly from from's values. */
typedef struct {
    vijp_mat X, T, *theta;
} problem;

static int problem_init(problem *p, const vijp_net *net, const vijp_grad_setup *s, const vijp_format *f,
                        const problem *from, vijp_error *err)
{
    size_t B = s->batch;
    p->theta = calloc(net->depth, sizeof *p->theta);
    vijp_mat_init(&p->X, net->width, B, f);
    vijp_mat_init(&p->T, vijp_net_out_width(net), B, f);
    if (!from) {
        double *X = malloc(net->width * B * sizeof *X), *T = malloc(vijp_net_out_width(net) * B * sizeof *T);
        vijp_net_sample(net, B, s->seed, X, T);
        vijp_mat_set_d(&p->X, X);
        vijp_mat_set_d(&p->T, T);
        free(X), free(T);
        return vijp_net_params(net, f, p->theta, err);
    }
    vijp_mat_convert(&p->X, &from->X);
    vijp_mat_convert(&p->T, &from->T);
    for (size_t i = 0; i < net->depth; i++) {
        vijp_mat_init(&p->theta[i], from->theta[i].rows, 1, f);
        vijp_mat_convert(&p->theta[i], &from->theta[i]);
    }
    return 0;
}

static void problem_clear(problem *p, const vijp_net *net)
{
    vijp_mat_clear(&p->X);
    vijp_mat_clear(&p->T);
    if (p->theta) vijp_net_params_clear(net, p->theta);
    free(p->theta);
}

int vijp_grad_compare(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r, vijp_error *err)
{
    memset(r, 0, sizeof *r);
    r->engine = e;
    if (s->batch == 0 || s->batch > 1000000)
        return vijp_fail(err, VIJP_EINVAL, "batch %zu out of range [1, 1000000]", s->batch);
    vijp_net net;
    int rc = vijp_net_build(&net, s->spec, s->depth, s->width, err);
    if (rc) return rc;
    net.loss = s->loss;
    vijp_format ref;
    r->ref_prec = 2 * (long)s->fmt.prec > 256 ? 2 * (long)s->fmt.prec : 256;
    problem pf = {0}, pr = {0};
    vijp_grads gf = {0}, gr = {0};
    if ((rc = vijp_format_mpfr(&ref, r->ref_prec, err)) || (rc = vijp_net_init(&net, s->init, s->seed, err)))
        goto out;
    if ((rc = problem_init(&pf, &net, s, &s->fmt, NULL, err)) || (rc = problem_init(&pr, &net, s, &ref, &pf, err)))
        goto out;
    if ((rc = vijp_engine_run(e, &net, pf.theta, &pf.X, &pf.T, &gf, err)) ||
        (rc = vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, pr.theta, &pr.X, &pr.T, &gr, err)))
        goto out;
    r->loss = gf.loss;
    r->stored_bytes = gf.stored_bytes;
    r->grad_x_norm = vijp_norm(&gf.grad_x);
    r->input_grad_rel_err = vijp_rel_err(&gf.grad_x, &gr.grad_x);
    r->rel_err_per_layer = calloc(net.depth, sizeof *r->rel_err_per_layer);
    double sq = 0;
    for (size_t i = 0; i < net.depth; i++) {
        r->rel_err_per_layer[i] = vijp_rel_err(&gf.g[i], &gr.g[i]);
        if (gf.grad_theta[i].rows == 0) continue;
        double nt = vijp_norm(&gf.grad_theta[i]), ei = vijp_rel_err(&gf.grad_theta[i], &gr.grad_theta[i]);
        sq += nt * nt;
        if (!(ei <= r->param_grad_rel_err_max)) r->param_grad_rel_err_max = ei; /* NaN propagates */
    }
    r->grad_theta_norm = sqrt(sq);
out:
    vijp_grads_clear(&gf);
    vijp_grads_clear(&gr);
    problem_clear(&pf, &net);
    problem_clear(&pr, &net);
    vijp_net_free(&net);
    return rc;
}

#include "problem.h"
#include "vijp/error.h"
#include "vijp/array_io.h"
#include <stdlib.h>

/* --input (--target): the inputs (loss data), a row per sample, which is X
 * (n_0 × B) (T: m_D × B, column-major) without transposition. */
static int read_rows(const char *path, size_t width, size_t B, vijp_mat *X, vijp_error *err)
{
    vijp_array a;
    int rc = vijp_npy_read_rows(path, width, B, &a, err);
    if (!rc) vijp_mat_set_d(X, a.data);
    vijp_array_clear(&a);
    return rc;
}

int vijp_problem_round(vijp_problem *p, const vijp_net *net, size_t B, uint64_t seed, const vijp_format *f,
                       vijp_error *err)
{
    size_t n0 = net->width, mD = vijp_net_out_width(net);
    p->theta = vijp_alloc_array(net->depth, sizeof *p->theta);
    double *X = vijp_alloc_array(n0 * B, sizeof *X), *T = vijp_alloc_array(mD * B, sizeof *T);
    vijp_mat_init(&p->X, n0, B, f);
    vijp_mat_init(&p->T, mD, B, f);
    /* h_0 names the run's stochastic-rounding stream (mat.h), which the
     * engines key every tensor they store from; its own values, the loss
     * data and the parameters are rounded to nearest, the same in every run
     * and in the reference */
    p->X.sr = vijp_sr_key_of(seed, VIJP_SR_OUTPUT, 0, 0);
    vijp_net_sample(net, B, seed, X, T);
    vijp_mat_set_d(&p->X, X);
    vijp_mat_set_d(&p->T, T);
    int rc = vijp_net_params(net, f, p->theta, err);
    free(X), free(T);
    return rc;
}

void vijp_problem_convert(vijp_problem *p, const vijp_net *net, const vijp_problem *from, const vijp_format *f)
{
    p->theta = vijp_alloc_array(net->depth, sizeof *p->theta);
    vijp_mat_init(&p->X, from->X.rows, from->X.cols, f);
    vijp_mat_init(&p->T, from->T.rows, from->T.cols, f);
    vijp_mat_convert(&p->X, &from->X);
    vijp_mat_convert(&p->T, &from->T);
    for (size_t i = 0; i < net->depth; i++) {
        vijp_mat_init(&p->theta[i], from->theta[i].rows, 1, f);
        vijp_mat_convert(&p->theta[i], &from->theta[i]);
    }
}

void vijp_problem_clear(vijp_problem *p, const vijp_net *net)
{
    vijp_mat_clear(&p->X);
    vijp_mat_clear(&p->T);
    if (p->theta) vijp_net_params_clear(net, p->theta);
    free(p->theta);
    p->theta = NULL;
}

int vijp_problem_draw(const vijp_grad_setup *s, vijp_net *net, vijp_error *err)
{
    if (s->batch == 0 || s->batch > 1000000)
        return vijp_fail(err, VIJP_EINVAL, "batch %zu out of range [1, 1000000]", s->batch);
    int rc = 0;
    if (s->net) vijp_net_copy(net, s->net); /* parsed once for the run */
    else if ((rc = vijp_net_build(net, s->spec, s->depth, s->width, err))) return rc;
    net->loss = s->loss;
    if ((s->weights && (rc = vijp_net_load_weights(net, s->weights, err))) ||
        (rc = vijp_net_init(net, s->init, s->seed, err)))
        vijp_net_free(net);
    return rc;
}

int vijp_problem_setup_drawn(const vijp_grad_setup *s, const vijp_net *net, vijp_problem *p, vijp_error *err)
{
    *p = (vijp_problem){0};
    if (s->batch == 0 || s->batch > 1000000)
        return vijp_fail(err, VIJP_EINVAL, "batch %zu out of range [1, 1000000]", s->batch);
    int rc = 0;
    if ((rc = vijp_problem_round(p, net, s->batch, s->seed, &s->fmt, err)) ||
        (s->input && (rc = read_rows(s->input, net->width, s->batch, &p->X, err))) ||
        (s->target && (rc = read_rows(s->target, vijp_net_out_width(net), s->batch, &p->T, err))))
        vijp_problem_clear(p, net);
    return rc;
}

int vijp_problem_setup(const vijp_grad_setup *s, vijp_net *net, vijp_problem *p, vijp_error *err)
{
    *p = (vijp_problem){0};
    int rc = vijp_problem_draw(s, net, err);
    if (!rc && (rc = vijp_problem_setup_drawn(s, net, p, err))) vijp_net_free(net);
    return rc;
}

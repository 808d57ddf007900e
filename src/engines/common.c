/* What every engine shares (declared in engine_internal.h): result
 * allocation and release, the loss and its gradient, and f′ by nested forward
 * AD.  The dispatcher (engine.c) and the engines call these; nothing here
 * calls back into them. */
#include "engine_internal.h"
#include "format/packed.h"
#include "vijp/error.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vijp_grads_clear(vijp_grads *g)
{
    vijp_mat_clear(&g->grad_x);
    for (size_t i = 0; i < g->depth; i++) {
        if (g->grad_theta) vijp_mat_clear(&g->grad_theta[i]);
        if (g->g) vijp_mat_clear(&g->g[i]);
    }
    free(g->grad_theta);
    free(g->g);
    free(g->stored_by_depth);
    memset(g, 0, sizeof *g);
}

int vijp_grads_check_finite(const vijp_grads *g, vijp_error *err)
{
    vijp_error e = {0};
    const char *fmt = g->grad_x.fmt ? g->grad_x.fmt->name : "its format";
    char what[64];
    int bad = !isfinite(g->loss);
    if (bad) snprintf(e.msg, sizeof e.msg, "the loss is %s as a double", isnan(g->loss) ? "NaN" : "infinite");
    else if (g->rebuilt) bad = vijp_mat_check_finite(&g->grad_x, "∇x", &e);
    for (size_t i = 0; !bad && i < g->rebuilt; i++) {
        snprintf(what, sizeof what, "g_%zu", i + 1);
        if (!(bad = vijp_mat_check_finite(&g->g[i], what, &e))) {
            snprintf(what, sizeof what, "∇θ of layer %zu", i + 1);
            bad = vijp_mat_check_finite(&g->grad_theta[i], what, &e);
        }
    }
    if (!bad) return 0;
    return vijp_fail(err, VIJP_ERANGE, "%s although every input and parameter is finite: the computation left the "
                     "range of %s", e.msg, fmt);
}

void engine_param_grad_init(vijp_grads *out, const vijp_net *net, const vijp_mat *X, size_t i, int packing)
{
    const vijp_layer *L = &net->layers[i];
    /* written whole by the engine; what an ESINGULAR run leaves unwritten
     * is zeroed by vijp_engine_run_opts */
    const vijp_format *f = X->fmt;
    if (packing && f->kind == VIJP_MPFR && !f->emulated && !f->mixed)
        vijp_mat_init_packing(&out->grad_theta[i], L->type->param_count(L), 1, f);
    else vijp_mat_init_unset(&out->grad_theta[i], L->type->param_count(L), 1, f);
    engine_key(&out->grad_theta[i], X, VIJP_SR_PARAM_GRAD, i + 1, 0);
}

int engine_param_grad(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, size_t i, const vijp_mat *h,
                      engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    engine_param_grad_init(out, net, X, i, 0);
    int rc = vijp_layer_vjp_param(&net->layers[i], &theta[i], h, &out->g[i], &out->grad_theta[i], err);
    if (!rc) engine_param_ready(steps, i, out);
    return rc;
}

int engine_grads_init(vijp_grads *out, const vijp_net *net, const vijp_mat *X)
{
    size_t B = X->cols;
    const vijp_format *f = X->fmt;
    memset(out, 0, sizeof *out);
    out->depth = net->depth;
    out->grad_theta = vijp_alloc_array(net->depth, sizeof *out->grad_theta);
    out->g = vijp_alloc_array(net->depth, sizeof *out->g);
    out->stored_by_depth = vijp_alloc_array(net->depth, sizeof *out->stored_by_depth);
    vijp_mat_init(&out->grad_x, net->width, B, f);
    engine_key(&out->grad_x, X, VIJP_SR_COTANGENT, 0, 0);
    for (size_t i = 0; i < net->depth; i++) {
        vijp_mat_init_unset(&out->g[i], net->layers[i].out, B, f); /* written whole, as ∇θ_i */
        engine_key(&out->g[i], X, VIJP_SR_COTANGENT, i + 1, 0);
    }
    return 0;
}

double engine_loss(const vijp_net *net, const vijp_mat *h, const vijp_mat *T, vijp_mat *g)
{
    double loss = 0;
    size_t n = vijp_mat_len(h);
    if (net->loss == VIJP_LOSS_SQUARE) {
        vijp_mat_sub(g, h, T);
        for (size_t i = 0; i < n; i++) {
            double r = vijp_mat_get_d(g, i);
            loss += 0.5 * r * r;
        }
    } else {
        vijp_mat_copy(g, T);
        for (size_t i = 0; i < n; i++) loss += vijp_mat_get_d(T, i) * vijp_mat_get_d(h, i);
    }
    return loss;
}

int engine_derivative(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *D, vijp_error *err)
{
    vijp_mat ones;
    vijp_mat_init(&ones, X->rows, X->cols, X->fmt);
    for (size_t i = 0; i < vijp_mat_len(&ones); i++) vijp_mat_set_entry_d(&ones, i, 1.0);
    int rc = vijp_layer_jvp(L, theta, X, &ones, D, err);
    vijp_mat_clear(&ones);
    return rc;
}

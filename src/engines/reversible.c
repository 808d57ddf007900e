/* Reversible backprop (RevNet style): the forward pass keeps only
 * the inputs of layers that have no inverse; the reverse pass rebuilds every
 * other layer input from the layer's output with the layer's inverse, from
 * h_D down, and backpropagates through it.  The rebuilt inputs carry the
 * inverses' rounding errors into the gradients: that is what this engine is
 * measured for. */
#include "engine_internal.h"
#include "vijp/error.h"
#include "vijp/metrics.h"
#include "vijp/catalogue.h"
#include <math.h>
#include <stdlib.h>

/* A layer the engine inverts: square, with an inverse operator in both
 * arithmetics (dense square, leaky ReLU, tanh, a residual block without a
 * projection; not ReLU or rectangular dense: vijp_layer_has_inverse). */
static int invertible(const vijp_layer *L) { return vijp_layer_has_inverse(L); }

int engine_reversible(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                      const vijp_engine_opts *o, engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t D = net->depth, B = X->cols;
    const vijp_format *f = X->fmt;
    vijp_ledger ledger = {0, 0};
    vijp_mat *keep = vijp_alloc_array(D, sizeof *keep), h, hn;
    int rc = 0;
    vijp_mat_init(&h, net->width, B, f);
    vijp_mat_copy(&h, X);
    for (size_t i = 0; i < D && !rc; i++) { /* forward: keep the inputs nothing can rebuild */
        const vijp_layer *L = &net->layers[i];
        if (!invertible(L)) {
            vijp_mat_init(&keep[i], h.rows, B, f);
            vijp_mat_copy(&keep[i], &h);
            ledger_keep(&ledger, mat_bytes(&keep[i]));
        }
        out->stored_by_depth[i] = ledger.current; /* the cut network keeps the same inputs */
        vijp_mat_init(&hn, L->out, B, f);
        engine_key(&hn, X, VIJP_SR_OUTPUT, i + 1, 0);
        rc = vijp_layer_forward(L, &theta[i], &h, &hn, err);
        vijp_mat_clear(&h);
        h = hn;
        if (!rc) engine_step(steps);
    }
    if (!rc) out->loss = engine_loss(net, &h, T, &out->g[D - 1]);
    for (size_t i = D; i-- > 0 && !rc;) { /* reverse: h is h_{i+1}, rebuild h_i */
        const vijp_layer *L = &net->layers[i];
        vijp_mat x;
        if (keep[i].rows || keep[i].cols) {
            x = keep[i];
            keep[i] = (vijp_mat){0};
            ledger_release(&ledger, mat_bytes(&x));
        } else {
            vijp_mat_init(&x, L->in, B, f);
            engine_key(&x, X, VIJP_SR_REBUILT, i, 0);
            rc = vijp_layer_inverse(L, &theta[i], &h, &x, err);
            if (!rc && o && o->rebuilt_input) o->rebuilt_input(o->rebuilt_ctx, i, &x);
        }
        vijp_mat *gin = i ? &out->g[i - 1] : &out->grad_x;
        if (!rc) rc = engine_param_grad(net, theta, X, i, &x, steps, out, err);
        if (!rc) rc = vijp_layer_vjp(L, &theta[i], &x, &out->g[i], gin, err);
        vijp_mat_clear(&h);
        h = x;
        if (!rc) engine_step(steps);
    }
    vijp_mat_clear(&h);
    for (size_t i = 0; keep && i < D; i++) vijp_mat_clear(&keep[i]);
    free(keep);
    out->stored_bytes = ledger.peak;
    return rc;
}

int vijp_reversible_reconstruction(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, vijp_xnum *recon,
                                   vijp_error *err)
{
    size_t D = net->depth, B = X->cols;
    const vijp_format *f = X->fmt;
    vijp_mat *H = vijp_alloc_array(D + 1, sizeof *H), cur = {0}, x;
    int rc = 0;
    for (size_t i = 0; i <= D && !rc; i++) { /* forward, keeping every h_i (the diagnostic's own copy) */
        vijp_mat_init(&H[i], i ? net->layers[i - 1].out : net->width, B, f);
        engine_key(&H[i], X, VIJP_SR_OUTPUT, i, 0);
        if (i == 0) vijp_mat_copy(&H[0], X);
        else rc = vijp_layer_forward(&net->layers[i - 1], &theta[i - 1], &H[i - 1], &H[i], err);
    }
    if (!rc) {
        vijp_mat_init(&cur, H[D].rows, B, f);
        vijp_mat_copy(&cur, &H[D]);
    }
    for (size_t i = D; i-- > 0 && !rc;) { /* what the engine would rebuild */
        const vijp_layer *L = &net->layers[i];
        vijp_mat_init(&x, L->in, B, f);
        engine_key(&x, X, VIJP_SR_REBUILT, i, 0);
        if (invertible(L)) {
            rc = vijp_layer_inverse(L, &theta[i], &cur, &x, err);
            recon[i] = rc ? vijp_xnum_of(NAN) : vijp_rel_err(&x, &H[i]);
        } else {
            vijp_mat_copy(&x, &H[i]);
            recon[i] = vijp_xnum_of(0);
        }
        vijp_mat_clear(&cur);
        cur = x;
    }
    vijp_mat_clear(&cur);
    for (size_t i = 0; H && i <= D; i++) vijp_mat_clear(&H[i]);
    free(H);
    return rc;
}

/* Backprop: store every layer input h_0 … h_{D−1}, then one reverse pass.
 * A smooth activation's input is replaced, once the next activation is
 * computed, by f′ (nested forward AD: the same bytes, no f′ evaluation going
 * back). */
#include "engine_internal.h"
#include "layer/route.h"
#include "vijp/error.h"
#include <stdlib.h>

/* Y = f(X) of an elementwise layer, and X replaced by f′(X) in the
 * accumulator's format acc: in one evaluation where the layer offers it
 * (layer/route.h: the MPFR route, the reference), else forward, then f′. */
static int forward_keeping_derivative(const vijp_layer *L, const vijp_mat *theta, vijp_mat *X, vijp_mat *Y,
                                      const vijp_format *acc, vijp_error *err)
{
    vijp_mat d;
    vijp_mat_init_unset(&d, X->rows, X->cols, acc);
    int rc = vijp_layer_forward_deriv(L, theta, X, Y, &d, err);
    if (rc == VIJP_EUNSUPPORTED) {
        rc = vijp_layer_forward(L, theta, X, Y, err);
        if (!rc) rc = engine_derivative(L, theta, X, &d, err);
    }
    vijp_mat_clear(X);
    *X = d;
    return rc;
}

int engine_backprop(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                    engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t D = net->depth, B = X->cols;
    const vijp_format *f = X->fmt;
    vijp_format acc; /* f′ kept unrounded to storage: g·f′ rounds once, as the layer's vjp */
    vijp_format_accumulator(f, &acc);
    vijp_ledger ledger = {0, 0};
    vijp_mat *H = vijp_alloc_array(D + 1, sizeof *H); /* H[i] = h_i; H[D] is a work buffer */
    int rc = 0;
    for (size_t i = 0; i <= D && !rc; i++) {
        vijp_mat_init_unset(&H[i], i ? net->layers[i - 1].out : net->width, B, f); /* copied or computed whole */
        engine_key(&H[i], X, VIJP_SR_OUTPUT, i, 0);
        if (i == 0) vijp_mat_copy(&H[0], X);
        else if (net->layers[i - 1].type->residual == VIJP_RESIDUAL_DERIV) /* H[i−1] := f′(h_(i−1)) */
            rc = forward_keeping_derivative(&net->layers[i - 1], &theta[i - 1], &H[i - 1], &H[i], &acc, err);
        else rc = vijp_layer_forward(&net->layers[i - 1], &theta[i - 1], &H[i - 1], &H[i], err);
        if (i < D) { /* a smooth activation's input is kept as its f′ (below, once h_(i+1) is computed), at f′'s size */
            int deriv = net->layers[i].type->residual == VIJP_RESIDUAL_DERIV;
            ledger_keep(&ledger, deriv ? vijp_mat_len(&H[i]) * acc.value_bytes : mat_bytes(&H[i]));
            out->stored_by_depth[i] = ledger.current; /* a depth-(i+1) network keeps h_0 … h_i */
        }
        if (!rc && i) engine_step(steps);
    }
    if (!rc) out->loss = engine_loss(net, &H[D], T, &out->g[D - 1]);
    for (size_t i = D; i-- > 0 && !rc;) { /* layer i+1: g_i = g_{i+1} J_{i+1} */
        const vijp_layer *L = &net->layers[i];
        vijp_mat *gin = i ? &out->g[i - 1] : &out->grad_x;
        /* now, not before: a watched run has freed what it compared; its ∇θ_i in
         * MPFR with the limbs in their packed slots, which its packing keeps (watch.h) */
        int formed = L->type->residual != VIJP_RESIDUAL_DERIV && steps->param_grad &&
                     steps->param_grad(steps->ready_ctx, i, L, &H[i], &out->g[i], &out->grad_theta[i]);
        if (!formed) engine_param_grad_init(out, net, X, i, steps->grads_ready != NULL);
        if (L->type->residual == VIJP_RESIDUAL_DERIV) { /* no parameters; H[i] holds f′ */
            vijp_mat_mul_elem(gin, &out->g[i], &H[i]);
        } else {
            if (!formed) rc = vijp_layer_vjp_param(L, &theta[i], &H[i], &out->g[i], &out->grad_theta[i], err);
            if (!rc) rc = vijp_layer_vjp(L, &theta[i], &H[i], &out->g[i], gin, err);
        }
        if (!rc) engine_param_ready(steps, i, out);
        ledger_release(&ledger, mat_bytes(&H[i]));
        if (!rc) engine_step(steps);
        if (!rc && steps->grads_ready) steps->grads_ready(steps->ready_ctx, i, out);
    }
    for (size_t i = 0; H && i <= D; i++) vijp_mat_clear(&H[i]);
    free(H);
    out->stored_bytes = ledger.peak;
    return rc;
}

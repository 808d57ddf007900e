/* Broken on purpose: the parameter gradient ∂ℓ/∂a = Σ_b Σ_i G_ib·min(x_ib, 0)
 * drops the terms of every sample but the first (its loop runs over the
 * n units of one sample where n·B terms were meant), so it is right for a
 * batch of one and wrong for any other.  No MPFR operators: nothing checks
 * ∇θ against a twin.  Caught by check-layer's `vijp-param-vs-differences`:
 * the differences of forward in a see every sample's terms. */
#include "prelu.h"

static void vjp_param_first_sample(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X,
                                   size_t B, const double *G, double *Gt)
{
    (void)cx, (void)th, (void)B;
    Gt[0] = 0;
    for (size_t i = 0; i < L->in; i++) /* L->in * B meant */
        if (X[i] <= 0) Gt[0] += G[i] * X[i];
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = prelu_ops, ops.vjp_param = vjp_param_first_sample;
    type = prelu_type("prelu_drops_term", &ops, NULL);
    return vijp_layer_register(&type, err);
}

/* Broken on purpose: the vjp multiplies by W where it should multiply by Wᵀ
 * (a transposed index, the commonest slip in a hand-written vjp).
 * Caught by check-layer's `adjoint`: <G, jvp(U)> = <G, WU> but
 * <vjp(G), U> = <WG, U> = <G, WᵀU>. */
#include "linear.h"

static void vjp_transposed(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                           const double *G, double *Gx)
{
    (void)cx, (void)X;
    linear_apply(L->in, th, 0 /* should be 1: Wᵀ */, G, B, Gx);
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.vjp = vjp_transposed;
    type = linear_type("transposed_vjp", &ops, NULL);
    return vijp_layer_register(&type, err);
}

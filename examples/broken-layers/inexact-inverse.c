/* Broken on purpose: the inverse is off by a relative 2^-30 (9.3e-10), as
 * an iterative inverse stopped too early would be.
 * Caught by check-layer's `inverse-round-trip`: the contract's linear model
 * holds inverse(forward(x)) to ‖W⁻¹‖(n+2)u‖|W||x| + 2|b|‖ + κ·C_solve·u‖x‖,
 * about 1e-12 here. */
#include "linear.h"

static int inverse_inexact(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                           double *X, vijp_error *err)
{
    int rc = linear_inverse(L, cx, th, Y, B, X, err);
    for (size_t i = 0; i < L->in * B; i++) X[i] *= 1 + 0x1p-30;
    return rc;
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.inverse = inverse_inexact;
    type = linear_type("inexact_inverse", &ops, NULL);
    return vijp_layer_register(&type, err);
}

/* Broken on purpose: the vijp is right but for a factor 1 + 2^-30 (say, a
 * normalisation applied twice in single precision): off by 9.3e-10
 * relative, invisible in any plot, far above rounding.
 * Caught by check-layer's `vijp-round-trip`: vjp(vijp(g)) = g is held to
 * C_solve·u·‖J‖‖y‖, about 1e-12 here. */
#include "linear.h"

static int vijp_scaled(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    int rc = linear_vijp(L, cx, th, X, B, Gx, frag, Gy, err);
    for (size_t i = 0; i < L->out * B; i++) Gy[i] *= 1 + 0x1p-30;
    return rc;
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.vijp = vijp_scaled;
    type = linear_type("scaled_vijp", &ops, NULL);
    return vijp_layer_register(&type, err);
}

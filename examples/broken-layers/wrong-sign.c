/* Broken on purpose: the jvp subtracts the diagonal term W_ii·u_i instead
 * of adding it (a sign slip in one term of a derivative).
 * Caught by check-layer's `jvp-vs-differences`: the finite differences of
 * forward see the true J u. */
#include "linear.h"

static void jvp_wrong_sign(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                           const double *U, double *V)
{
    (void)cx, (void)X;
    size_t n = L->in;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < n; j++) s += (j == i ? -1 : 1) * th[i + j * n] * U[j + b * n];
            V[i + b * n] = s;
        }
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.jvp = jvp_wrong_sign;
    type = linear_type("wrong_sign", &ops, NULL);
    return vijp_layer_register(&type, err);
}

/* Broken on purpose: the parameter gradient is added to whatever its output
 * buffer held, where it should overwrite it (a `+=` without the zeroing
 * first, the commonest slip in a hand-written gradient).  Right whenever the
 * buffer happens to be zero, as a fresh one is; wrong in an engine, which
 * hands operators buffers it has used before.  Caught by check-layer's
 * `overwrites-outputs`: a NaN-filled output stays NaN. */
#include "linear.h"

static void vjp_param_accumulating(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X,
                                   size_t B, const double *G, double *Gt)
{
    (void)cx, (void)th;
    size_t n = L->in;
    for (size_t b = 0; b < B; b++) /* no memset(Gt, 0, …) first */
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < n; j++) Gt[i + j * n] += G[i + b * n] * X[j + b * n];
            Gt[n * n + i] += G[i + b * n];
        }
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.vjp_param = vjp_param_accumulating;
    type = linear_type("accumulating_grad", &ops, NULL);
    return vijp_layer_register(&type, err);
}

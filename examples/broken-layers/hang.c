/* Broken on purpose: the inverse never returns (a fixed-point iteration that
 * does not converge, say).  check-layer stops the check after --timeout
 * seconds (SIGALRM) and fails it; the other checks still report. */
#include "linear.h"

static int inverse_hangs(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                         double *X, vijp_error *err)
{
    for (volatile int forever = 1; forever;) {
    }
    return linear_inverse(L, cx, th, Y, B, X, err);
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.inverse = inverse_hangs;
    type = linear_type("hang", &ops, NULL);
    return vijp_layer_register(&type, err);
}

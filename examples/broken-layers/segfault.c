/* Broken on purpose: the vjp writes through a null pointer (a scratch
 * buffer that was never allocated) and dies of SIGSEGV.
 * check-layer runs each check in its own process, so the checks that call
 * the vjp (adjoint, vijp-round-trip) fail, naming the signal, and the others
 * still run and report. */
#include "linear.h"

static double *volatile scratch; /* never allocated: NULL */

static void vjp_crashes(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                        const double *G, double *Gx)
{
    linear_vjp(L, cx, th, X, B, G, Gx);
    scratch[0] = Gx[0]; /* SIGSEGV */
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    ops = linear_ops, ops.vjp = vjp_crashes;
    type = linear_type("segfault", &ops, NULL);
    return vijp_layer_register(&type, err);
}

/* Broken on purpose: the type declares itself submersive (J of full row
 * rank at every point), but its initialiser zeroes the last row of W, so J =
 * W has rank n − 1 everywhere: the output's last unit is the bias alone.
 * Caught by check-layer's `declarations` (σ_n(J) is 0, below the noise
 * floor) and `certification` (the zero row proves a cokernel). */
#include "linear.h"

static unsigned declare_submersive(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE; }

static int init_rank_deficient(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    int rc = linear_init(L, in, rng, th);
    for (size_t j = 0; j < L->in; j++) th[L->in - 1 + j * L->in] = 0;
    return rc;
}

static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    type = linear_type("false_submersive", &linear_ops, declare_submersive);
    type.init = init_rank_deficient;
    return vijp_layer_register(&type, err);
}

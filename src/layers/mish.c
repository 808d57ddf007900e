/* Mish x·tanh(softplus(x)).  J = diag(tanh(sp) + x·sech²(sp)·σ(x)), which
 * vanishes at x0 ≈ −1.19224 (DESIGN §6): nothing declared, no inverse.
 *
 * f and f′: vijp_kact_eval_mish (src/kernels/ref/dual.c, u = 2^-53),
 * |f̂ − f| <= 10u|f| and
 * |f̂′ − f′| <= 10u·tanh(sp) + (18 + 20sp)u·|x|sech²(sp)σ(x), sp = softplus(x). */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_mish(x, f, df);
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_EMU_DEFINE(VIJP_KACT_MISH, vo_mish_forward_deriv)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(mish, NULL);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(NULL);

const vijp_layer_type vijp_layer_mish = {
    .name = "mish", .syntax = "mish (x·tanh(softplus(x)); keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* the bound of f′ above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 80.8 at x = −1.69
     * (mpmath, step 5e-4) */
    .bounds = {.ulps = 81, .n_deriv_zeros = 1, .deriv_zeros = {-1.192431214515495}},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_mish_deriv_enclose}, .dual_eval = eval,
};

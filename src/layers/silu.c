/* SiLU (swish) x·σ(x): J = diag(σ(x)(1 + xσ(−x))), which vanishes at
 * x0 ≈ −1.27846 (DESIGN §6: not submersive at isolated zeros of f′), so
 * nothing is declared; not injective (no inverse).
 *
 * f and f′: vijp_kact_eval_silu (src/kernels/ref/dual.c, u = 2^-53),
 * |f̂ − f| <= 8u|f| and |f̂′ − f′| <= 8u·σ(x) + 14u·|x|σ′(x): relative to
 * the terms of f′ = σ + x·σ′, not to f′, which cancels near x0. */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_silu(x, f, df);
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_EMU_DEFINE(VIJP_KACT_SILU, vo_silu_forward_deriv)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(silu, NULL);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(NULL);

const vijp_layer_type vijp_layer_silu = {
    .name = "silu", .syntax = "silu (x·sigmoid(x); keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* the bound of f′ above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 56.2 at x = −1.78
     * (mpmath, step 5e-4) */
    .bounds = {.ulps = 57, .n_deriv_zeros = 1, .deriv_zeros = {-1.278464542761074}},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_silu_deriv_enclose}, .dual_eval = eval,
};

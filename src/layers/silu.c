/* SiLU (swish) x·σ(x): J = diag(σ(x)(1 + xσ(−x))), which vanishes at
 * x0 ≈ −1.27846 (DESIGN §6: not submersive at isolated zeros of f′), so
 * nothing is declared; not injective (no inverse).
 *
 * Error (dual.h, u = 2^-53): σ within 7u and σ′ within 12u (sigmoid.c), so
 * |f̂ − f| <= 8u|f| and f′ = σ + x·σ′ (dual product) satisfies
 * |f̂′ − f′| <= 8u·σ(x) + 14u·|x|σ′(x) (the two terms, then the sum):
 * relative to the terms, not to f′, which cancels near x0.
 *
 * Deep tail, x < −700: e^x and σ(x) are subnormal (below 2^-1022 from
 * x ≈ −708.4) while x·σ(x) is not down to x ≈ −714.9, so σ would lose up to
 * ~280 ulps before the product.  There e^x is carried as h² with h = e^{x/2}
 * (x/2 exact, h ~ 1e-152 normal): σ(x) = h²·r, r = 1/(1 + h²) = 1 exactly,
 * f = ((x·h)·h)·r within 2u (h) + u + 2u + u = 6u, and
 * f′ = σ(x)(1 + x·σ(−x)) = ((h·(1 + x·r))·h)·r within 7u of |f′|, and
 * |f′| <= σ + |x|σ′: both inside the bounds above. */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    if (x < -700) {
        double h = exp(0.5 * x), r = 1 / (1 + h * h);
        *f = ((x * h) * h) * r;
        *df = ((h * (1 + x * r)) * h) * r;
        return;
    }
    vijp_dual v = dual_var(x), y = dual_mul(v, dual_sigmoid(v));
    *f = y.v, *df = y.d;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_MP_DEFINE(silu, VIJP_KACT_SILU)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(NULL);

const vijp_layer_type vijp_layer_silu = {
    .name = "silu", .syntax = "silu (x·sigmoid(x); keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .f = &vijp_act_ops_f,
    /* the bound above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 56.2 at x = −1.78
     * (mpmath, step 5e-4) */
    .bounds = {.ulps = 57, .n_deriv_zeros = 1, .deriv_zeros = {-1.278464542761074}},
    .deriv_enclose = vo_silu_deriv_enclose, .dual_eval = eval,
};

/* GELU, erf form: x·Φ(x), Φ the standard normal CDF.  J = diag(Φ + xφ),
 * which vanishes at x0 ≈ −0.751791 (DESIGN §6: not submersive at isolated
 * zeros of f′): nothing declared, no inverse.
 *
 * Error (dual.h, u = 2^-53, t = −x/√2): t within 2u; erfc within 5 ulps
 * (10u) plus its condition |t·erfc′(t)/erfc(t)| <= 2t² + 2 times 2u, so
 * Φ̂ is within (14 + 2x²)u and f̂ = x·Φ̂ within (15 + 2x²)u of f.
 * φ̂ = c·exp(−s/2)·(1 − e/2) with x² = s + e split exactly (dual.h): exp
 * within 2u of its exact argument, the constant u, three products 3u and
 * 1 − e/2 u: 7u; x·φ̂ within 8u.  Hence, with the final sum,
 * |f̂′ − f′| <= (16 + 2x²)u·Φ(x) + 10u·|x|φ(x).  For x → −∞ the Φ term is
 * ~1/x² of the other, so f′ stays within a few ulps of its terms. */
#include "activation.h"
#include "../../oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_dual v = dual_var(x), y = dual_mul(v, dual_normal_cdf(v));
    *f = y.v, *df = y.d;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
static const vijp_ops_mp ops_mp = VO_ACT_OPS_MP(gelu, NULL);

const vijp_layer_type vijp_layer_gelu = {
    .name = "gelu", .syntax = "gelu (x·Phi(x), erf form; keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp,
    /* the bound above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 48.0 at x = 4
     * (f itself 47; mpmath, step 5e-4) */
    .bounds = {.ulps = 48, .n_deriv_zeros = 1, .deriv_zeros = {-0.751791524693564}},
    .deriv_enclose = vo_gelu_deriv_enclose, .dual_eval = eval,
};

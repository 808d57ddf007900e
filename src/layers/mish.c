/* Mish x·tanh(softplus(x)).  J = diag(tanh(sp) + x·sech²(sp)·σ(x)), which
 * vanishes at x0 ≈ −1.19224 (DESIGN §6): nothing declared, no inverse.
 *
 * Error (dual.h, u = 2^-53): sp within 5u and sp′ = σ within 7u (softplus.c);
 * tanh within 4u plus sp's 5u (condition <= 1): 9u.  sech²(sp) = 4e/(1+e)²,
 * e = exp(−2sp): the argument carries 10u·sp absolute, so e is within
 * (2 + 10sp)u, 1 + e within (2 + 5sp)u (e/(1+e) <= ½), its square within
 * (5 + 10sp)u and sech² within (8 + 20sp)u; times σ and x: (17 + 20sp)u.
 * Hence |f̂ − f| <= 10u|f| and, with the final sum,
 * |f̂′ − f′| <= 10u·tanh(sp) + (18 + 20sp)u·|x|sech²(sp)σ(x).
 *
 * Deep tail, x < −700: sp = log1p(e^x) = e^x(1 − e^x/2 + …) and
 * tanh(sp) = sp(1 − sp²/3 + …) are e^x to a relative 2^-1000, but e^x is
 * subnormal from x ≈ −708.4 while f is not down to x ≈ −714.9 (~150 ulps
 * lost before the product).  With h = e^{x/2} (x/2 exact): f = (x·h)·h
 * within 2u + u + 2u + u = 6u, and f′ = tanh(sp) + x·sech²(sp)·σ(x) =
 * e^x(1 + x) to 2^-1000, computed (h·(1 + x))·h within 7u of |f′| <=
 * tanh(sp) + |x|sech²σ: inside the bounds above. */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    if (x < -700) {
        double h = exp(0.5 * x);
        *f = (x * h) * h;
        *df = (h * (1 + x)) * h;
        return;
    }
    vijp_dual v = dual_var(x), y = dual_mul(v, dual_tanh(dual_softplus(v)));
    *f = y.v, *df = y.d;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_MP_DEFINE(mish, VIJP_KACT_MISH)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(NULL);

const vijp_layer_type vijp_layer_mish = {
    .name = "mish", .syntax = "mish (x·tanh(softplus(x)); keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .f = &vijp_act_ops_f,
    /* the bound above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 80.8 at x = −1.69
     * (mpmath, step 5e-4) */
    .bounds = {.ulps = 81, .n_deriv_zeros = 1, .deriv_zeros = {-1.192431214515495}},
    .deriv_enclose = vo_mish_deriv_enclose, .dual_eval = eval,
};

/* GELU, erf form: x·Φ(x), Φ the standard normal CDF.  J = diag(Φ + xφ),
 * which vanishes at x0 ≈ −0.751791 (DESIGN §6: not submersive at isolated
 * zeros of f′): nothing declared, no inverse.
 *
 * Φ(x) = erfc(t)/2 at t = −x/√2, which double cannot hold: rounding t costs
 * a relative u·2t² in erfc (1600 ulps of f near x = −37).  So t is carried
 * as t_hi + t_lo, exact to ~u² (1/√2 as c_hi + c_lo, t_lo from an fma), and
 * erfc(t_hi + t_lo) = erfc(t_hi)·(1 − t_lo·R) + O(t⁴u²), R = erfc′/erfc at
 * t_hi = (2/√π)e^{−t_hi²}/erfc(t_hi) <= 2t + 1: the correction, ~2t²u,
 * needs only a few digits (its own error is below u²·t⁴).
 *
 * Error (u = 2^-53; glibc: erfc 5 ulps = 10u, exp 1 ulp = 2u):
 *  - t >= −∞, t <= 25.5 (x >= −36.06): Φ̂ = ½ erfc(t_hi)(1 − t_lo R) within
 *    10u + u (1 − ·) + u (product) = 12u, f̂ = x·Φ̂ within 13u.
 *  - t > 25.5: erfc(t) underflows near t = 26.6 while x·Φ(x) stays normal
 *    down to x ≈ −37.6, so Φ = ½ e^{−t²} erfcx(t) with erfcx from its
 *    asymptotic series (1/(t√π))·Σ_k (−1)^k (2k−1)!!/(2t²)^k, 8 terms: the
 *    first omitted, 17!!/(2t²)^9 < 10^-19 at t = 25.5, is below u/400;
 *    1/(t_hi√π) and the sum within 4u, the series' rounding 2u.
 *    e^{−t²} = h²·(1 − d): t_hi² = s + e split exactly (fma), h = e^{−s/2}
 *    (s/2 exact; h ~ e^{−325} normal where f is), d = e + 2 t_hi t_lo
 *    (|d| ~ 1e-13, d²/2 dropped, below u²); h² kept as two factors so
 *    nothing is subnormal before the last product: 2·2u (h) + u (1 − d).
 *    With ½, the products and x: f̂ within 16u.
 *  - f′ = Φ + xφ, φ = e^{−x²/2}/√(2π) with x² = s_x + e_x split exactly:
 *    φ̂ = c·g·g·(1 − e_x/2), g = e^{−s_x/4} (two factors, as above), within
 *    2·2u + u (c) + 3u (products) + u (1 − ·) = 9u, x·φ̂ within 10u; Φ̂
 *    within 16u.  With the final sum,
 *    |f̂′ − f′| <= 17u·Φ(x) + 10u·|x|φ(x).
 *    For x → −∞ the Φ term is ~1/x² of the other: no cancellation. */
#include "activation.h"
#include "oracles/oracles.h"

/* Φ(x) (above): t = −x/√2 as t_hi + t_lo, then erfc with its first-order
 * correction or, in the far tail, e^{−t²}·erfcx(t) as (g1·g2)·rest, returned
 * in two factors so that the caller multiplies x in before the last one. */
static void normal_cdf(double x, double *a, double *b)
{
    const double c_hi = 0.70710678118654757, c_lo = -4.8336466567264565e-17; /* 1/√2 = c_hi + c_lo to 2^-106 */
    const double two_over_sqrt_pi = 1.1283791670955126, inv_sqrt_pi = 0.56418958354775628;
    double t_hi = -x * c_hi, t_lo = isfinite(x) ? fma(-x, c_hi, -t_hi) + -x * c_lo : 0;
    if (t_hi <= 25.5) {
        double E = erfc(t_hi), R = two_over_sqrt_pi * exp(-t_hi * t_hi) / E; /* 0 once e^{−t²} underflows */
        *a = 0.5 * E * (1 - t_lo * R), *b = 1;
        return;
    }
    double q = 1 / (2 * t_hi * t_hi), term = 1, sum = 1;
    for (int k = 1; k <= 8; k++) term *= -(double)(2 * k - 1) * q, sum += term;
    double s = t_hi * t_hi, e = isfinite(s) ? fma(t_hi, t_hi, -s) : 0, d = isfinite(s) ? e + 2 * t_hi * t_lo : 0,
           h = exp(-0.5 * s); /* s = ∞ (|x| > 1.9e154): h = 0 exactly, and e, d 0 rather than ∞ − ∞ or 0·∞ = NaN */
    *a = h, *b = h * (0.5 * (1 - d) * (inv_sqrt_pi / t_hi) * sum);
}

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    const double inv_sqrt_2pi = 0.398942280401432677939946059934; /* rounded once */
    double a, b;
    normal_cdf(x, &a, &b);
    double s = x * x, e = isfinite(s) ? fma(x, x, -s) : 0, g = exp(-0.25 * s); /* as above: x² = ∞, g = 0 */
    *f = (x * a) * b;
    *df = a * b + (((x * inv_sqrt_2pi) * g) * g) * (1 - 0.5 * e);
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_MP_DEFINE(gelu, VIJP_KACT_GELU)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(NULL);

const vijp_layer_type vijp_layer_gelu = {
    .name = "gelu", .syntax = "gelu (x·Phi(x), erf form; keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .f = &vijp_act_ops_f,
    /* the bound above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 33.2 at
     * x = −1.252 (f itself 16; step 5e-4) */
    .bounds = {.ulps = 34, .n_deriv_zeros = 1, .deriv_zeros = {-0.751791524693564}},
    .deriv_enclose = vo_gelu_deriv_enclose, .dual_eval = eval,
};

/* f and f′ of the catalogue's smooth activations at one point, in double
 * (dual.h): the formulas of the layer types' dual_eval (src/layers/<name>.c)
 * and of the ref kernels (activations.c), each with its error bound.  The
 * other kernel sets (simd/activations.h, cuda/act_math.h) follow these
 * operations and keep these bounds.  Each bound is data in the kernel
 * table, the ref set's act_bound (activations.c; its meaning:
 * vijp_kact_bound, kernels.h), which tests/t-activations.c and
 * tests/t-kernels.c check against the MPFR oracles: a derivation changed
 * here changes its number there.  u = 2^-53 throughout. */
#include "kernels/dual.h"
#include <math.h>

/* sigmoid σ(x) = 1/(1 + e^−x), σ′ = σ(x)σ(−x).
 *
 * Error (dual.h primitives): e = exp(−|x|) within 2u, 1 + e within 3u,
 * r = σ(|x|) = 1/(1+e) within 4u, q = σ(−|x|) = e·r within 7u, so
 * |f̂ − f| <= 7u|f| and |f̂′ − f′| <= 12u|f′| (r·q, one more rounding).
 * These are act_bound's f_u, d1_u. */
void vijp_kact_eval_sigmoid(double x, double *f, double *df)
{
    vijp_dual y = dual_sigmoid(dual_var(x));
    *f = y.v, *df = y.d;
}

/* softplus(x) = log(1 + e^x), softplus′ = σ(x).
 *
 * Error (dual.h): e = exp(−|x|) within 2u; log1p(e) within 2u + 2u (its
 * condition a/((1+a)log1p a) <= 1); adding max(x, 0) >= 0 keeps the signs,
 * so |f̂ − f| <= 5u|f|.  f′ = σ(x) as in sigmoid (above): within 7u|f′|.
 * These are act_bound's f_u, d1_u. */
void vijp_kact_eval_softplus(double x, double *f, double *df)
{
    vijp_dual y = dual_softplus(dual_var(x));
    *f = y.v, *df = y.d;
}

/* tanh, f′ = sech²(x), from dual_tanh (dual.h).
 *
 * f′ is computed as 4e/(1+e)² with e = exp(−2|x|), not as 1 − tanh²(x): the
 * latter cancels catastrophically (relative error ~u/f′) and is exactly 0
 * for |x| > 19.1, where tanh(x) rounds to ±1.  Error of this formula: exp is
 * within 1 ulp (glibc), then three correctly rounded operations; the
 * relative error of f′ is below 6u (f: glibc's tanh, 2 ulps = 4u).
 * These are act_bound's f_u, d1_u. */
void vijp_kact_eval_tanh(double x, double *f, double *df)
{
    vijp_dual y = dual_tanh(dual_var(x));
    *f = y.v, *df = y.d;
}

/* SiLU (swish) x·σ(x), f′ = σ(x)(1 + xσ(−x)), which vanishes at
 * x0 ≈ −1.27846.
 *
 * Error (dual.h): σ within 7u and σ′ within 12u (sigmoid, above), so
 * |f̂ − f| <= 8u|f| and f′ = σ + x·σ′ (dual product) satisfies
 * |f̂′ − f′| <= 8u·σ(x) + 14u·|x|σ′(x) (the two terms, then the sum):
 * relative to the terms, not to f′, which cancels near x0.  These are
 * act_bound's f_u, d1_u, d2_u.
 *
 * Deep tail, x < −700: e^x and σ(x) are subnormal (below 2^-1022 from
 * x ≈ −708.4) while x·σ(x) is not down to x ≈ −714.9, so σ would lose up to
 * ~280 ulps before the product.  There e^x is carried as h² with h = e^{x/2}
 * (x/2 exact, h ~ 1e-152 normal): σ(x) = h²·r, r = 1/(1 + h²) = 1 exactly,
 * f = ((x·h)·h)·r within 2u (h) + u + 2u + u = 6u, and
 * f′ = σ(x)(1 + x·σ(−x)) = ((h·(1 + x·r))·h)·r within 7u of |f′|, and
 * |f′| <= σ + |x|σ′: both inside the bounds above. */
void vijp_kact_eval_silu(double x, double *f, double *df)
{
    if (x < -700) {
        double h = exp(0.5 * x), r = 1 / (1 + h * h);
        *f = ((x * h) * h) * r;
        *df = ((h * (1 + x * r)) * h) * r;
        return;
    }
    vijp_dual v = dual_var(x), y = dual_mul(v, dual_sigmoid(v));
    *f = y.v, *df = y.d;
}

/* GELU, erf form: x·Φ(x), Φ the standard normal CDF; f′ = Φ + xφ, which
 * vanishes at x0 ≈ −0.751791.
 *
 * Φ(x) = erfc(t)/2 at t = −x/√2, which double cannot hold: rounding t costs
 * a relative u·2t² in erfc (1600 ulps of f near x = −37).  So t is carried
 * as t_hi + t_lo, exact to ~u² (1/√2 as c_hi + c_lo, t_lo from an fma), and
 * erfc(t_hi + t_lo) = erfc(t_hi)·(1 − t_lo·R) + O(t⁴u²), R = erfc′/erfc at
 * t_hi = (2/√π)e^{−t_hi²}/erfc(t_hi) <= 2t + 1: the correction, ~2t²u,
 * needs only a few digits (its own error is below u²·t⁴).
 *
 * Error (glibc: erfc 5 ulps = 10u, exp 1 ulp = 2u):
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
 *    For x → −∞ the Φ term is ~1/x² of the other: no cancellation.
 * act_bound's f_u is the larger of the two f bounds (16u), d1_u and d2_u
 * the terms' of f′. */

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

void vijp_kact_eval_gelu(double x, double *f, double *df)
{
    const double inv_sqrt_2pi = 0.398942280401432677939946059934; /* rounded once */
    double a, b;
    normal_cdf(x, &a, &b);
    double s = x * x, e = isfinite(s) ? fma(x, x, -s) : 0, g = exp(-0.25 * s); /* as above: x² = ∞, g = 0 */
    *f = (x * a) * b;
    *df = a * b + (((x * inv_sqrt_2pi) * g) * g) * (1 - 0.5 * e);
}

/* Mish x·tanh(softplus(x)), f′ = tanh(sp) + x·sech²(sp)·σ(x), which
 * vanishes at x0 ≈ −1.19224.
 *
 * Error (dual.h): sp within 5u and sp′ = σ within 7u (softplus, above);
 * tanh within 4u plus sp's 5u (condition <= 1): 9u.  sech²(sp) = 4e/(1+e)²,
 * e = exp(−2sp): the argument carries 10u·sp absolute, so e is within
 * (2 + 10sp)u, 1 + e within (2 + 5sp)u (e/(1+e) <= ½), its square within
 * (5 + 10sp)u and sech² within (8 + 20sp)u; times σ and x: (17 + 20sp)u.
 * Hence |f̂ − f| <= 10u|f| and, with the final sum,
 * |f̂′ − f′| <= 10u·tanh(sp) + (18 + 20sp)u·|x|sech²(sp)σ(x): act_bound's
 * f_u, d1_u, and d2_u + d2_u_per_softplus·sp.
 *
 * Deep tail, x < −700: sp = log1p(e^x) = e^x(1 − e^x/2 + …) and
 * tanh(sp) = sp(1 − sp²/3 + …) are e^x to a relative 2^-1000, but e^x is
 * subnormal from x ≈ −708.4 while f is not down to x ≈ −714.9 (~150 ulps
 * lost before the product).  With h = e^{x/2} (x/2 exact): f = (x·h)·h
 * within 2u + u + 2u + u = 6u, and f′ = tanh(sp) + x·sech²(sp)·σ(x) =
 * e^x(1 + x) to 2^-1000, computed (h·(1 + x))·h within 7u of |f′| <=
 * tanh(sp) + |x|sech²σ: inside the bounds above. */
void vijp_kact_eval_mish(double x, double *f, double *df)
{
    if (x < -700) {
        double h = exp(0.5 * x);
        *f = (x * h) * h;
        *df = (h * (1 + x)) * h;
        return;
    }
    vijp_dual v = dual_var(x), y = dual_mul(v, dual_tanh(dual_softplus(v)));
    *f = y.v, *df = y.d;
}

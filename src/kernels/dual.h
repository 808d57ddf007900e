/* Dual numbers a + a′ε (ε² = 0): nested forward-mode AD for elementwise
 * activations (DESIGN §6).  Evaluating f on (x, 1) gives f(x) and f′(x) in one
 * sweep, so the reverse pass needs only f′ (one value per unit) instead of
 * every intermediate a composite activation keeps for its backward pass.
 *
 * Each primitive is evaluated in a form that neither overflows nor cancels:
 * exp of a non-positive argument only, σ(x) and σ(−x) both from e = exp(−|x|).
 * Error of each primitive (glibc on x86_64, "Known Maximum Errors in Math
 * Functions"; 1 ulp <= 2u relative): exp, log1p 1 ulp; erfc 5 ulps; tanh 2
 * ulps; +, −, ×, / correctly rounded.  The per-activation bounds in
 * src/kernels/ref/dual.c are built from these (their numbers: the ref
 * kernel set's act_bound, ref/activations.c).
 *
 * Here, below the layer catalogue, so that the ref kernels (ref/
 * activations.c) and the layer types (src/layers/<name>.c, their dual_eval)
 * evaluate the catalogue's smooth activations with the same code. */
#ifndef VIJP_KERNELS_DUAL_H
#define VIJP_KERNELS_DUAL_H

#include <math.h>

typedef struct {
    double v, d; /* value and derivative */
} vijp_dual;

static inline vijp_dual dual_var(double x) { return (vijp_dual){x, 1.0}; }
static inline vijp_dual dual_add(vijp_dual a, vijp_dual b) { return (vijp_dual){a.v + b.v, a.d + b.d}; }
static inline vijp_dual dual_mul(vijp_dual a, vijp_dual b) { return (vijp_dual){a.v * b.v, a.d * b.v + a.v * b.d}; }
static inline vijp_dual dual_scale(vijp_dual a, double c) { return (vijp_dual){c * a.v, c * a.d}; }

/* σ(a) = 1/(1 + e^−a) with σ′ = σ(a)σ(−a); both from e = exp(−|a|) <= 1. */
static inline vijp_dual dual_sigmoid(vijp_dual a)
{
    double e = exp(-fabs(a.v)), r = 1 / (1 + e), q = e * r; /* r = σ(|a|), q = σ(−|a|) */
    double s = a.v >= 0 ? r : q;
    return (vijp_dual){s, a.d * (r * q)};
}

/* softplus(a) = log(1 + e^a) = max(a, 0) + log1p(e^−|a|), softplus′ = σ(a). */
static inline vijp_dual dual_softplus(vijp_dual a)
{
    double e = exp(-fabs(a.v)), r = 1 / (1 + e), q = e * r;
    double v = (a.v > 0 ? a.v : 0) + log1p(e);
    return (vijp_dual){v, a.d * (a.v >= 0 ? r : q)};
}

/* tanh(a), tanh′ = sech² = 4e/(1+e)² with e = exp(−2|a|): no cancellation,
 * unlike 1 − tanh², which is 0 from |a| ≈ 19.1 on. */
static inline vijp_dual dual_tanh(vijp_dual a)
{
    double e = exp(-2 * fabs(a.v)), s = 1 + e;
    return (vijp_dual){tanh(a.v), a.d * (4 * e / (s * s))};
}

/* Φ(a) = erfc(−a/√2)/2, Φ′ = φ(a) = exp(−a²/2)/√(2π).  erfc, not 1 + erf:
 * for a < 0 the latter cancels.  a² is split exactly, a² = s + e with
 * e = fma(a, a, −s), and exp(−a²/2) = exp(−s/2)·(1 − e/2) (|e/2| <= u·s/2,
 * so the dropped (e/2)²/2 is below u² s²): the argument of exp carries no
 * rounding error, which would otherwise cost a relative u·a² in φ (1800 ulps
 * at a = −23). */
static inline vijp_dual dual_normal_cdf(vijp_dual a)
{
    const double inv_sqrt_2pi = 0.398942280401432677939946059934; /* rounded once */
    double t = -a.v * M_SQRT1_2, s = a.v * a.v, e = fma(a.v, a.v, -s);
    return (vijp_dual){0.5 * erfc(t), a.d * (inv_sqrt_2pi * (exp(-0.5 * s) * (1 - 0.5 * e)))};
}

/* f(x) and f′(x) of the catalogue's six smooth activations, in double
 * (ref/dual.c, each with its error bound): the layer types' dual_eval and
 * the ref kernels' act_d, act_f (kernels.h). */
void vijp_kact_eval_sigmoid(double x, double *f, double *df);
void vijp_kact_eval_softplus(double x, double *f, double *df);
void vijp_kact_eval_tanh(double x, double *f, double *df);
void vijp_kact_eval_silu(double x, double *f, double *df);
void vijp_kact_eval_gelu(double x, double *f, double *df);
void vijp_kact_eval_mish(double x, double *f, double *df);

#endif

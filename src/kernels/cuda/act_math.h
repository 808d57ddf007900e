/* f and f′ of the smooth activations, one source for the GPU kernels
 * (src/kernels/cuda/elementwise.cu, compiled by nvcc as __device__ code) and
 * their host instantiation (plain C, compiled by the test suite: t-cuda's
 * host_* tests check these very formulas against the MPFR oracles on
 * machines without a GPU).
 *
 * The formulas are the CPU layers' (src/kernels/dual.h and the functions
 * vijp_kact_eval_NAME of src/kernels/ref/dual.c), operation for
 * operation; nvcc compiles them with --fmad=false, the CPU build with
 * -ffp-contract=off, so both perform exactly the operations written (the
 * explicit fma calls are the formulas' own).  The host instantiation is
 * therefore bit-identical to the CPU layers (test host_matches_cpu_layers),
 * and the GPU result differs from it only through the math library:
 *
 *   primitive     glibc (x86_64, the CPU bounds)   CUDA (Programming Guide,
 *                                                   double precision table)
 *   exp           1 ulp                            1 ulp
 *   log1p         1 ulp                            1 ulp
 *   erfc          5 ulps                           5 ulps
 *   tanh          2 ulps                           1 ulp
 *
 * CUDA's errors are at most glibc's, so every bound derived in
 * src/kernels/ref/dual.c for glibc (the ref set's act_bound, which the cuda
 * kernel set keeps: kernel_set.c) holds for the GPU kernel as well.  In the
 * form t-cuda.c checks, they are collected below as vijp_cuda_act_bound
 * (u = 2^-53):
 *   |f̂ − f| <= kf·u·|f| + 2^-1022,   |f̂′ − f′| <= kd·u·|f′| + 2^-1022
 * for every double x at least 0.5 away from the zero x0 of f′ (SiLU, GELU,
 * Mish).  kd is the layer's bound relative to the terms of f′ (K1·u·|t1| +
 * K2·u·|t2|) converted to a bound relative to |f′|: over |x| <= 4 that is
 * the layers' .bounds.ulps (measured on a 5e-4 grid), and beyond it
 * (|t1| + |t2|)/|f′| <= 1.7 (SiLU, x < −4: (1 + |x|σ(−x))/(|x|σ(−x) − 1)),
 * 1.2 (GELU) and 5/3 (Mish) times max(K1, K2) is smaller.  The absolute
 * 2^-1022 covers results in the subnormal range, as in t-activations.
 * Within 0.5 of x0, f′ cancels and only the term-wise bound holds; there
 * |t1| + |t2| < 1 (SiLU: σ <= 0.32, |x|σ′ <= 1.78/4; GELU: Φ <= 0.45,
 * |x|φ <= 0.5; Mish: tanh(sp) <= 0.38, |x|sech²(sp)σ <= 0.56), so
 *   |f̂′ − f′| <= kd0·u,  kd0 = max(K1, K2) there: SiLU 14, GELU 17,
 *   Mish 18 + 20·sp <= 26 (sp <= softplus(−0.69) = 0.40),
 * an absolute bound valid at the zero itself.
 *
 * One deliberate difference from the CPU layers: GELU at |x| > 40 returns
 * the limits (f = x, f′ = 1 above; f = f′ = −0 below, x·0 so that −∞ gives
 * NaN as the oracle does).  There Φ(x) is 1 or below 2^-1075 and φ(x) below
 * 2^-1075, so these are the correctly rounded values; the CPU formula squares
 * x and returns NaN from |x| ≈ 1.34e154 on (x·x overflows), which the GPU
 * kernel must not copy.
 *
 * binary32: the float kernels evaluate the double formula on the (exact)
 * promotion of x and round the result once to float: with the double result
 * within kd·u_53 of f′ (kd <= 81), |f̂ − f| <= u_24·|f|·(1 + 2^-20) +
 * 2^-149, i.e. correctly rounded but for a relative 2^-20 of an ulp (and
 * 2^-149 absolute, half a float subnormal ulp plus the double error, where
 * the result is subnormal in float); within 0.5 of x0, f′ is within
 * u_24·|f′|·(1 + 2^-20) + kd0·2^-53 + 2^-149.  The price is speed: on an
 * H200 (bench-gpu, 2026-12-04, 8M units) each float kernel takes as long as
 * its double one (GELU 111 µs against 115, Mish 124 against 127), so they
 * are bound by double arithmetic, not memory: 0.62-0.71 of the copy
 * bandwidth for sigmoid and SiLU (one exp), 0.21-0.41 for tanh, softplus,
 * GELU and Mish.  On a consumer GPU (double at 1/64 of float) far less.
 * Float formulas with their own bound would be the way to the copy rate. */
#ifndef VIJP_KERNELS_CUDA_ACT_MATH_H
#define VIJP_KERNELS_CUDA_ACT_MATH_H

#ifdef __CUDACC__
#define VIJP_HD __host__ __device__ __forceinline__
#else
#include <math.h>
#define VIJP_HD static inline
#endif

/* The activations, in the order of vijp_cuda_act (cuda.h). */
#define VIJP_CUDA_ACT_LIST(X) X(tanh) X(sigmoid) X(softplus) X(silu) X(gelu) X(mish)

/* kd above (u = 2^-53), and the zero of f′ (NaN: none), per activation:
 * sigmoid 12u, softplus 7u (.ulps 8), tanh 6u, silu .ulps 57, gelu .ulps
 * 34, mish .ulps 81 (the .ulps are in src/layers/<name>.c).  kf is not
 * repeated here: it is the ref set's act_bound[].f_u (ref/activations.c,
 * derived in ref/dual.c), which t-cuda.c reads. */
typedef struct {
    const char *name; /* the layer and oracle name */
    double kd, x0, kd0; /* kd0: the absolute bound within 0.5 of x0, in u */
} vijp_cuda_act_bound;
#ifndef __CUDACC__
static const vijp_cuda_act_bound vijp_cuda_act_bounds[] = {
    {"tanh", 6, NAN, 0}, {"sigmoid", 12, NAN, 0}, {"softplus", 7, NAN, 0},
    {"silu", 57, -1.278464542761074, 14}, {"gelu", 34, -0.751791524693564, 17},
    {"mish", 81, -1.192431214515495, 26},
};
#endif

/* σ(|a|) and σ(−|a|) from e = exp(−|a|) (dual.h) */
VIJP_HD void vijp_am_sig2(double a, double *r, double *q)
{
    double e = exp(-fabs(a));
    *r = 1 / (1 + e), *q = e * *r;
}

/* dual.h: dual_tanh on (x, 1) */
VIJP_HD void vijp_am_tanh(double x, double *f, double *df)
{
    double e = exp(-2 * fabs(x)), s = 1 + e;
    *f = tanh(x), *df = 1.0 * (4 * e / (s * s));
}

/* ref/dual.c, sigmoid: dual_sigmoid on (x, 1) */
VIJP_HD void vijp_am_sigmoid(double x, double *f, double *df)
{
    double r, q;
    vijp_am_sig2(x, &r, &q);
    *f = x >= 0 ? r : q, *df = 1.0 * (r * q);
}

/* ref/dual.c, softplus: dual_softplus on (x, 1) */
VIJP_HD void vijp_am_softplus(double x, double *f, double *df)
{
    double e = exp(-fabs(x)), r = 1 / (1 + e), q = e * r;
    *f = (x > 0 ? x : 0) + log1p(e), *df = 1.0 * (x >= 0 ? r : q);
}

/* ref/dual.c, silu: x·σ(x) as dual_mul(v, dual_sigmoid(v)), h² form below −700 */
VIJP_HD void vijp_am_silu(double x, double *f, double *df)
{
    if (x < -700) {
        double h = exp(0.5 * x), r = 1 / (1 + h * h);
        *f = ((x * h) * h) * r;
        *df = ((h * (1 + x * r)) * h) * r;
        return;
    }
    double r, q;
    vijp_am_sig2(x, &r, &q);
    double s = x >= 0 ? r : q, ds = 1.0 * (r * q); /* σ and σ′ as dual (s, ds) */
    *f = x * s, *df = 1.0 * s + x * ds;
}

/* ref/dual.c, gelu: x·Φ(x), Φ from erfc with t = −x/√2 carried as t_hi + t_lo, and the
 * asymptotic erfcx series beyond t = 25.5; limits beyond |x| = 40 (above). */
VIJP_HD void vijp_am_gelu(double x, double *f, double *df)
{
    if (fabs(x) > 40) {
        double z = x * 0.0;
        *f = x > 0 ? x : z, *df = x > 0 ? 1 + z : z;
        return;
    }
    const double c_hi = 0.70710678118654757, c_lo = -4.8336466567264565e-17; /* 1/√2 = c_hi + c_lo to 2^-106 */
    const double two_over_sqrt_pi = 1.1283791670955126, inv_sqrt_pi = 0.56418958354775628;
    const double inv_sqrt_2pi = 0.398942280401432677939946059934;
    double t_hi = -x * c_hi, t_lo = isfinite(x) ? fma(-x, c_hi, -t_hi) + -x * c_lo : 0, a, b;
    if (t_hi <= 25.5) {
        double E = erfc(t_hi), R = two_over_sqrt_pi * exp(-t_hi * t_hi) / E;
        a = 0.5 * E * (1 - t_lo * R), b = 1;
    } else {
        double q = 1 / (2 * t_hi * t_hi), term = 1, sum = 1;
        for (int k = 1; k <= 8; k++) term *= -(double)(2 * k - 1) * q, sum += term;
        double s = t_hi * t_hi, e = fma(t_hi, t_hi, -s), d = e + 2 * t_hi * t_lo, h = exp(-0.5 * s);
        a = h, b = h * (0.5 * (1 - d) * (inv_sqrt_pi / t_hi) * sum);
    }
    double s = x * x, e = fma(x, x, -s), g = exp(-0.25 * s);
    *f = (x * a) * b;
    *df = a * b + (((x * inv_sqrt_2pi) * g) * g) * (1 - 0.5 * e);
}

/* ref/dual.c, mish: x·tanh(softplus(x)) as dual numbers, e^{x/2}² form below −700 */
VIJP_HD void vijp_am_mish(double x, double *f, double *df)
{
    if (x < -700) {
        double h = exp(0.5 * x);
        *f = (x * h) * h;
        *df = (h * (1 + x)) * h;
        return;
    }
    double sp, dsp, th, dth;
    vijp_am_softplus(x, &sp, &dsp);
    double e = exp(-2 * fabs(sp)), s = 1 + e;
    th = tanh(sp), dth = dsp * (4 * e / (s * s)); /* dual_tanh(sp, dsp) */
    *f = x * th, *df = 1.0 * th + x * dth;        /* dual_mul((x, 1), (th, dth)) */
}

/* Dispatch by vijp_cuda_act number (0 = tanh, …, 5 = mish). */
VIJP_HD void vijp_am_eval(int act, double x, double *f, double *df)
{
    switch (act) {
    case 0: vijp_am_tanh(x, f, df); break;
    case 1: vijp_am_sigmoid(x, f, df); break;
    case 2: vijp_am_softplus(x, f, df); break;
    case 3: vijp_am_silu(x, f, df); break;
    case 4: vijp_am_gelu(x, f, df); break;
    default: vijp_am_mish(x, f, df); break;
    }
}

/* The float kernels: the double formula, rounded once (above). */
VIJP_HD void vijp_am_eval_f(int act, float x, float *f, float *df)
{
    double fd, dd;
    vijp_am_eval(act, (double)x, &fd, &dd);
    *f = (float)fd, *df = (float)dd;
}

#endif

/* SIMD activation kernels, f and f′ together: lane by lane the operations of
 * the layers' dual evaluation (src/layers/dual.h, gelu.c, silu.c, mish.c),
 * branches as selects of both sides, with SLEEF's vector exp, log1p, tanh
 * (within 1.0 ulp) and erfc (1.5 ulps) in place of glibc's scalar ones.
 *
 * Bound (the contract tests/t-kernels.c asserts): the per-activation bounds
 * of src/layers/<name>.c, which assume glibc's exp and log1p within 1 ulp,
 * tanh within 2 and erfc within 5: SLEEF's are no larger (erfc is glibc's
 * own, see gelu_v), and every other
 * operation is the same correctly rounded one (the fma()s are the scalar
 * code's own, as FMA instructions), so the same Kf, K1, K2 hold.  Not bit-
 * identical to ref (SLEEF and glibc round differently), hence bounded, not
 * exact (kernels.h).  binary32: evaluated in double and rounded once, as
 * ref/activations.c.  Tails: the last n mod VW units go through the same
 * vector code in a padded vector, so every unit gets the same evaluation. */
#include "vec.h"

static inline void sigmoid_v(vd x, vd *f, vd *df)
{
    vd e = V_EXP(-abs_d(x)), r = 1 / (1 + e), q = e * r;
    *f = sel_d(x >= 0, r, q), *df = r * q;
}

static inline void softplus_v(vd x, vd *f, vd *df)
{
    vd e = V_EXP(-abs_d(x)), r = 1 / (1 + e), q = e * r;
    *f = sel_d(x > 0, x, splat_d(0)) + V_LOG1P(e), *df = sel_d(x >= 0, r, q);
}

/* dual_tanh at (a, ad) */
static inline void tanh_dual_v(vd a, vd ad, vd *f, vd *df)
{
    vd e = V_EXP(-2 * abs_d(a)), s = 1 + e;
    *f = V_TANH(a), *df = ad * (4 * e / (s * s));
}

static inline void tanh_v(vd x, vd *f, vd *df) { tanh_dual_v(x, splat_d(1), f, df); }

static inline void silu_v(vd x, vd *f, vd *df)
{
    vd e = V_EXP(-abs_d(x)), r = 1 / (1 + e), q = e * r, s = sel_d(x >= 0, r, q);
    vm deep = x < -700; /* silu.c's deep tail, computed only when a lane is there */
    *f = x * s, *df = s + x * (r * q);
    if (movemask_d(deep)) {
        vd h = V_EXP(0.5 * x), rt = 1 / (1 + h * h);
        *f = sel_d(deep, ((x * h) * h) * rt, *f);
        *df = sel_d(deep, ((h * (1 + x * rt)) * h) * rt, *df);
    }
}

static inline void mish_v(vd x, vd *f, vd *df)
{
    vd e = V_EXP(-abs_d(x)), r = 1 / (1 + e), q = e * r;
    vd sp = sel_d(x > 0, x, splat_d(0)) + V_LOG1P(e), spd = sel_d(x >= 0, r, q), tv, td;
    tanh_dual_v(sp, spd, &tv, &td);
    vm deep = x < -700; /* mish.c's deep tail, computed only when a lane is there */
    *f = x * tv, *df = tv + x * td;
    if (movemask_d(deep)) {
        vd h = V_EXP(0.5 * x);
        *f = sel_d(deep, (x * h) * h, *f);
        *df = sel_d(deep, (h * (1 + x)) * h, *df);
    }
}

/* gelu.c's normal_cdf and eval, the far tail evaluated only for vectors
 * with a lane in it, then selected.  GELU_ERFC: erfc is glibc's scalar one
 * per lane (the very function ref calls, within 5 ulps), because SLEEF's
 * Sleef_erfcd4_u15avx2 measured slower than it here (22 against 17 ns per
 * unit, /tmp microbenchmark on this machine; issue 12 report). */
static inline void gelu_v(vd x, vd *f, vd *df)
{
    const double c_hi = 0.70710678118654757, c_lo = -4.8336466567264565e-17;
    const double two_over_sqrt_pi = 1.1283791670955126, inv_sqrt_pi = 0.56418958354775628;
    const double inv_sqrt_2pi = 0.398942280401432677939946059934;
    vd t_hi = -x * c_hi;
    vm finite = abs_d(x) < __builtin_inf();
    vd t_lo = sel_d(finite, vfma(-x, splat_d(c_hi), -t_hi) + -x * c_lo, splat_d(0));
    vd E;
    for (int j = 0; j < VW; j++) E[j] = erfc(t_hi[j]); /* glibc's, lane by lane: see GELU_ERFC below */
    vd R = two_over_sqrt_pi * V_EXP(-t_hi * t_hi) / E;
    vd a = 0.5 * E * (1 - t_lo * R), b = splat_d(1);
    vm near = t_hi <= 25.5;
    if (movemask_d(~near)) { /* the far tail, x < −36.06 (or NaN): only when a lane is there */
        vd qq = 1 / (2 * t_hi * t_hi), term = splat_d(1), sum = splat_d(1);
        for (int k = 1; k <= 8; k++) term *= -(double)(2 * k - 1) * qq, sum += term;
        vd s2 = t_hi * t_hi, h = V_EXP(-0.5 * s2);
        vm fin2 = abs_d(s2) < __builtin_inf();
        vd e2 = sel_d(fin2, vfma(t_hi, t_hi, -s2), splat_d(0)), d = sel_d(fin2, e2 + 2 * t_hi * t_lo, splat_d(0));
        vd b2 = h * (0.5 * (1 - d) * (inv_sqrt_pi / t_hi) * sum);
        a = sel_d(near, a, h), b = sel_d(near, b, b2);
    }
    vd s = x * x, e = sel_d(abs_d(s) < __builtin_inf(), vfma(x, x, -s), splat_d(0)), g = V_EXP(-0.25 * s);
    *f = (x * a) * b;
    *df = a * b + (((x * inv_sqrt_2pi) * g) * g) * (1 - 0.5 * e);
}

/* The array kernels: whole vectors, then the tail padded with zeros. */
#define SIMD_ACT(NAME)                                                                          \
    static void NAME##_d(size_t n, const double *x, double *f, double *df)                      \
    {                                                                                           \
        size_t i = 0;                                                                           \
        vd fv, dv;                                                                              \
        for (; i + VW <= n; i += VW) NAME##_v(load_d(x + i), &fv, &dv), store_d(f + i, fv), store_d(df + i, dv); \
        if (i < n) {                                                                            \
            double buf[VW] = {0}, fb[VW], db[VW];                                               \
            memcpy(buf, x + i, (n - i) * sizeof *x);                                            \
            NAME##_v(load_d(buf), &fv, &dv), store_d(fb, fv), store_d(db, dv);                  \
            memcpy(f + i, fb, (n - i) * sizeof *f), memcpy(df + i, db, (n - i) * sizeof *df);   \
        }                                                                                       \
    }                                                                                           \
    static void NAME##_f(size_t n, const float *x, float *f, float *df)                         \
    {                                                                                           \
        for (size_t i = 0; i < n; i += VW) {                                                    \
            size_t m = n - i < VW ? n - i : VW;                                                 \
            float xb[VW] = {0}, fb[VW], db[VW];                                                 \
            vfh xh, fh, dh;                                                                     \
            vd fv, dv;                                                                          \
            memcpy(xb, x + i, m * sizeof *x), memcpy(&xh, xb, sizeof xh);                       \
            NAME##_v(__builtin_convertvector(xh, vd), &fv, &dv);                                \
            fh = __builtin_convertvector(fv, vfh), dh = __builtin_convertvector(dv, vfh);       \
            memcpy(fb, &fh, sizeof fh), memcpy(db, &dh, sizeof dh);                             \
            memcpy(f + i, fb, m * sizeof *f), memcpy(df + i, db, m * sizeof *df);               \
        }                                                                                       \
    }
SIMD_ACT(sigmoid)
SIMD_ACT(softplus)
SIMD_ACT(tanh)
SIMD_ACT(silu)
SIMD_ACT(gelu)
SIMD_ACT(mish)

#define SIMD_ACT_ENTRIES                                                                      \
    .act_d = {sigmoid_d, softplus_d, tanh_d, silu_d, gelu_d, mish_d},                         \
    .act_f = {sigmoid_f, softplus_f, tanh_f, silu_f, gelu_f, mish_f}

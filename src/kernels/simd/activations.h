/* SIMD activation kernels, f and f′ together: lane by lane the operations of
 * the layers' dual evaluation (src/kernels/dual.h, ref/dual.c), branches
 * as selects of both sides, with SLEEF's vector exp, log1p and tanh (within
 * 1.0 ulp) in place of glibc's scalar ones, and two evaluations of their
 * own: GELU's erfc (erfc_v) and Mish from one exponential (mish_v).
 *
 * Bound (the contract tests/t-kernels.c asserts): ref's act_bound (its
 * numbers in ref/activations.c, derived in ref/dual.c), which assumes
 * glibc's exp and log1p within 1 ulp, tanh within 2 and erfc within 5 (10u
 * relative): SLEEF's are no larger, nor is erfc_v's (7.1u relative, below);
 * mish_v derives its own, inside the scalar Mish's; every other operation
 * is the same correctly rounded one (the fma()s are the scalar code's own,
 * as FMA instructions), so the same Kf, K1, K2 hold: SIMD_ACT_ENTRIES
 * leaves act_bound unset, which kernels.c's complete() fills with ref's.
 * Not bit-identical to ref (SLEEF and glibc round differently), hence
 * bounded, not exact (kernels.h).  binary32: evaluated in double and
 * rounded once, as ref/activations.c.  Tails: the last n mod VW units go
 * through the same vector code in a padded vector, so every unit gets the
 * same evaluation. */
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
    vm deep = x < -700; /* the scalar SiLU's deep tail, computed only when a lane is there */
    *f = x * s, *df = s + x * (r * q);
    if (movemask_d(deep)) {
        vd h = V_EXP(0.5 * x), rt = 1 / (1 + h * h);
        *f = sel_d(deep, ((x * h) * h) * rt, *f);
        *df = sel_d(deep, ((h * (1 + x * rt)) * h) * rt, *df);
    }
}

/* Mish from one exponential, E = e^{−|x|} (SLEEF's log1p and tanh cost two
 * more): with e^{sp} = 1 + e^x, tanh(sp) = N/D and x·sech²(sp)·σ(x) = 4x·q·(1
 * + E)/D², where for x >= 0 N = 1 + 2E, D = 2E² + N, q = E², and for x < 0
 * N = E² + 2E, D = N + 2, q = E: sums of positive terms, nothing cancels.
 * Error (u = 2^-53; E within 2u, SLEEF's 1 ulp):
 *  - x < 0: N = fma(E, E, 2E) within (4/3)·2u + u = 3.7u (d ln N/d ln E =
 *    (2E + 2)/(E + 2) <= 4/3), D within 3·3.7u/5 + u = 3.2u (N <= 3), t =
 *    N/D within 7.9u, f = x·t within 8.9u; x·E·4 within 3u, ·(1 + E) 6u
 *    (1 + E within 2u), /D² (7.4u) 14.4u.
 *  - x >= 0: N within (2/3)·2u + u = 2.4u, D = fma(2E, E, N) within
 *    (2/5)·4u + (3/5)·2.4u + u = 4.04u, t within 7.5u, f within 8.5u; x·E²·4
 *    (E² within 5u) 6u, ·(1 + E) 9u, /D² (9.1u) 19.1u.
 * So |f̂ − f| <= 8.9u|f| and, with the final sum's u, |f̂′ − f′| <= 8.9u·t +
 * 20.1u·|x|sech²σ: inside the scalar's 10u|f| and 10u·t + (18 + 20sp)u·|x|sech²σ
 * (sp >= ln 2 where x >= 0, so 20.1u <= 18u + 20sp·u there; 15.4u < 18u
 * below).  x > 2^26 gives E = 0, t = 1, f = x, f′ = 1 exactly, as ref. */
static inline void mish_v(vd x, vd *f, vd *df)
{
    vd E = V_EXP(-abs_d(x)), twoE = 2 * E;
    vm pos = x >= 0;
    vd Np = 1 + twoE, Dp = vfma(twoE, E, Np), Nn = vfma(E, E, twoE), Dn = Nn + 2;
    vd D = sel_d(pos, Dp, Dn), t = sel_d(pos, Np, Nn) / D, q = sel_d(pos, E * E, E);
    vd xs = (((x * q) * 4) * (1 + E)) / (D * D); /* x·q first: 4x overflows near DBL_MAX, where q = 0 */
    vm deep = x < -700; /* the scalar Mish's deep tail, computed only when a lane is there */
    *f = x * t, *df = t + xs;
    if (movemask_d(deep)) {
        vd h = V_EXP(0.5 * x);
        *f = sel_d(deep, (x * h) * h, *f);
        *df = sel_d(deep, (h * (1 + x)) * h, *df);
    }
}

/* erfc(t), lane by lane, within 7.1u relative for t <= 26; 0 for
 * t > 26 (erfc(26) = 5.7e-296: within that, absolutely); NaN gives NaN, −∞
 * gives 2.  Glibc's scalar erfc
 * per lane cost GELU three quarters of its time (24 of 34 ns per unit here)
 * and SLEEF's vector erfc (u15) was no faster (18 ns per unit), so the
 * kernel has its own:
 *  - |t| <= 1/2: 1 − t·P(t²), P the Taylor series of erf(t)/t to t^22
 *    (erfcx_table.h: truncation below u/20).  P by Horner (fma) within
 *    2.5u + 0.6u (its coefficients' roundings) + 0.1u (t²'s), relative to
 *    P >= 1.03; t·P within 4.5u, and |t·P| <= 0.5205 then costs the result
 *    (>= 0.4795, one fma's rounding u) 0.5205·4.5u/0.4795 + u < 6u.
 *  - a = |t| > 1/2: erfcx(a)·e^{−a²}, erfcx(a) = e^{a²} erfc(a) from
 *    scripts/gen-erfcx.py's degree-9 polynomials on 91 cells picked by a's
 *    top 16 bits (within 0.97u; Horner's roundings 1.03u; z exact: 2.0u in
 *    all, sampled at 801 points a cell at 60 digits, not proven), e^{−a²}
 *    as e^{−s}(1 − e) with a² = s + e split exactly (fma; |e| <= 676u, e²/2
 *    <= 2.3e5·u², negligible), e^{−s} SLEEF's within 1 ulp (2u), 1 − e and
 *    the two products one rounding each: 2.0u + 2u + 3u, 7.1u with margin.  a is
 *    clamped at 26 (e^{−676}·erfcx still normal) before the table.
 *  - t < −1/2: 2 − erfc(a), erfc(a) <= 0.4795 within 7.1u: 0.48·7.1u/1.52
 *    + u < 3.3u.
 * tests/t-kernels.c holds every SIMD set's erfc_d to 7.1u against MPFR's
 * erfc. */
#include "erfcx_table.h"
_Static_assert(0x403A - ERFCX_BASE < ERFCX_CELLS, "a = 26 must have its cell");
/* erfcx(a)·e^{−a²} for a > 1/2 (clamped to [1/2, 26]), h = e^{−s}, s = a·a
 * rounded.  The cell and z come from a's bits (erfcx_table.h): no division,
 * and z exact. */
static inline __attribute__((always_inline)) vd erfc_big(vd a, vd h)
{
    vd ac = sel_d(a < 26, a, splat_d(26));
    ac = sel_d(ac > 0.5, ac, splat_d(0.5)); /* the lanes below take cell 0 and are not used */
    vu b = (vu)ac, hb = b >> 48; /* ac > 0: logical shifts */
    vd lo = (vd)(hb << 48), two_over_w = (vd)((2051 - (b >> 52)) << 52); /* 2^(5 − E) */
    vd z = (ac - lo) * two_over_w - 1;
    const double *row[VW];
    for (int j = 0; j < VW; j++) row[j] = erfcx_table[hb[j] - ERFCX_BASE];
    vd C = lane_entries(row, ERFCX_DEG);
    for (int i = ERFCX_DEG - 1; i >= 0; i--) C = vfma(C, z, lane_entries(row, i));
    vd s = ac * ac, e = vfma(ac, ac, -s);
    return (C * h) * (1 - e);
}

/* h = e^{−s}, s = t·t rounded, as the caller has it (GELU needs it too);
 * lanes with t > 26 may pass anything, those with t < −26 any h in [0, 1]. */
static inline __attribute__((always_inline)) vd erfc_core(vd t, vd h)
{
    vd a = abs_d(t), small = splat_d(1), big = splat_d(0);
    uint64_t in_small = movemask_d(a <= 0.5), all = (1ull << VW) - 1;
    if (in_small) { /* only when a lane is there: a vector of far lanes skips the series */
        vd t2 = t * t, P = splat_d(erf_taylor[ERF_TAYLOR_N - 1]);
        for (int k = ERF_TAYLOR_N - 2; k >= 0; k--) P = vfma(P, t2, splat_d(erf_taylor[k]));
        small = vfma(-t, P, splat_d(1));
    }
    if (in_small != all) big = erfc_big(a, h);
    vd out = sel_d(a <= 0.5, small, sel_d(t > 0, big, 2 - big));
    out = sel_d(t > 26, splat_d(0), out); /* erfc(26) = 5.7e-296: 0 is that close */
    return sel_d(t == t, out, t); /* NaN in, NaN out */
}

static inline vd erfc_v(vd t)
{
    vd a = abs_d(t), ac = sel_d(a < 26, a, splat_d(26));
    return erfc_core(t, V_EXP(-(ac * ac)));
}

/* ref/dual.c's normal_cdf and GELU, the far tail evaluated only for vectors
 * with a lane in it, then selected; erfc is erfc_v above (within 7u, where
 * the scalar bound assumes glibc's 5 ulps = 10u).  Where x >= −36.06, one
 * exponential, h = e^{−t_hi²}, serves erfc, R and φ: x·φ̂ = ((x·c)·h)·(1 + D)
 * within 2u (x·c, c rounded) + 3u (h's 2u, its product) + 2u (1 + D, its
 * product) = 7u of |x|φ, inside the scalar 10u. */
static inline void gelu_v(vd x, vd *f, vd *df)
{
    const double c_hi = 0.70710678118654757, c_lo = -4.8336466567264565e-17;
    const double two_over_sqrt_pi = 1.1283791670955126, inv_sqrt_pi = 0.56418958354775628;
    const double inv_sqrt_2pi = 0.398942280401432677939946059934;
    vd t_hi = -x * c_hi;
    vm finite = abs_d(x) < __builtin_inf();
    vd t_lo = sel_d(finite, vfma(-x, splat_d(c_hi), -t_hi) + -x * c_lo, splat_d(0));
    vd h = V_EXP(-t_hi * t_hi), E = erfc_core(t_hi, h); /* e^{−t²}: erfc's and R's, one exp */
    vd R = two_over_sqrt_pi * h / E;
    vd a = 0.5 * E * (1 - t_lo * R), b = splat_d(1);
    vm near = t_hi <= 25.5;
    if (movemask_d(~near)) { /* the far tail, x < −36.06 (or NaN): only when a lane is there */
        vd qq = 1 / (2 * t_hi * t_hi), term = splat_d(1), sum = splat_d(1);
        for (int k = 1; k <= 8; k++) term *= -(double)(2 * k - 1) * qq, sum += term;
        vd s2 = t_hi * t_hi, h2 = V_EXP(-0.5 * s2);
        vm fin2 = abs_d(s2) < __builtin_inf();
        vd e2 = sel_d(fin2, vfma(t_hi, t_hi, -s2), splat_d(0)), d = sel_d(fin2, e2 + 2 * t_hi * t_lo, splat_d(0));
        vd b2 = h2 * (0.5 * (1 - d) * (inv_sqrt_pi / t_hi) * sum);
        a = sel_d(near, a, h2), b = sel_d(near, b, b2);
    }
    vm fin = abs_d(x * x) < __builtin_inf();
    vd s = x * x, e = sel_d(fin, vfma(x, x, -s), splat_d(0));
    /* φ's exponential from h: e^{−x²/2} = h·e^D, D = (t_hi² − x²/2) rounded once: t_hi²'s rounding
     * (the exp's argument) and s/2 agree to 6u, so their difference is exact (Sterbenz), and
     * |D| <= 3.8e-13 leaves D²/2 (< 0.001u) negligible.  The far lanes keep the scalar g·g (below).
     * Exact only as written: -ffp-contract=off (Makefile) keeps the compiler from fusing it. */
    vd D = sel_d(fin, (t_hi * t_hi - 0.5 * s) - 0.5 * e, splat_d(0));
    vd phi = ((x * inv_sqrt_2pi) * h) * (1 + D);
    if (movemask_d(~near)) { /* x < −36.06: e^{−x²/2} below the normal range, the scalar g·g */
        vd g = V_EXP(-0.25 * s);
        phi = sel_d(near, phi, (((x * inv_sqrt_2pi) * g) * g) * (1 - 0.5 * e));
    }
    *f = (x * a) * b;
    *df = a * b + phi;
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
    /* binary32: VW floats at x widened to double, evaluated, each result    \
     * rounded once to f and df (fixed-size memcpy: one unaligned move). */    \
    static inline void NAME##_fv(const float *x, float *f, float *df)                           \
    {                                                                                           \
        vfh xh, fh, dh;                                                                         \
        vd fv, dv;                                                                              \
        memcpy(&xh, x, sizeof xh);                                                              \
        NAME##_v(__builtin_convertvector(xh, vd), &fv, &dv);                                    \
        fh = __builtin_convertvector(fv, vfh), dh = __builtin_convertvector(dv, vfh);           \
        memcpy(f, &fh, sizeof fh), memcpy(df, &dh, sizeof dh);                                  \
    }                                                                                           \
    /* whole vectors in place, the tail through a zero-padded buffer */                         \
    static void NAME##_f(size_t n, const float *x, float *f, float *df)                         \
    {                                                                                           \
        size_t i = 0;                                                                           \
        for (; i + VW <= n; i += VW) NAME##_fv(x + i, f + i, df + i);                           \
        if (i < n) {                                                                            \
            float xb[VW] = {0}, fb[VW], db[VW];                                                 \
            memcpy(xb, x + i, (n - i) * sizeof *x);                                             \
            NAME##_fv(xb, fb, db);                                                              \
            memcpy(f + i, fb, (n - i) * sizeof *f), memcpy(df + i, db, (n - i) * sizeof *df);   \
        }                                                                                       \
    }
SIMD_ACT(sigmoid)
SIMD_ACT(softplus)
SIMD_ACT(tanh)
SIMD_ACT(silu)
SIMD_ACT(gelu)
SIMD_ACT(mish)

static void erfc_d(size_t n, const double *t, double *y)
{
    size_t i = 0;
    for (; i + VW <= n; i += VW) store_d(y + i, erfc_v(load_d(t + i)));
    if (i < n) {
        double buf[VW] = {0}, out[VW];
        memcpy(buf, t + i, (n - i) * sizeof *t);
        store_d(out, erfc_v(load_d(buf)));
        memcpy(y + i, out, (n - i) * sizeof *y);
    }
}

/* A set's activation and erfc entries: act_bound unset (ref's, above),
 * erfc_bound_u and erfc_zero_above erfc_v's own. */
#define SIMD_ACT_ENTRIES                                                                      \
    .act_d = {sigmoid_d, softplus_d, tanh_d, silu_d, gelu_d, mish_d},                         \
    .act_f = {sigmoid_f, softplus_f, tanh_f, silu_f, gelu_f, mish_f}, .erfc_d = erfc_d, .erfc_bound_u = 7.1, .erfc_zero_above = 26

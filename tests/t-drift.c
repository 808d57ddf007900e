/* Drift comparator (DESIGN §5): the metrics on hand-made vectors with known
 * answers, the statistics of error curves on synthetic curves, and
 * vijp_drift_run on small networks (reference validation, growth against the
 * Lyapunov prediction, the first-order bound, engine failure, stored bytes). */
#include "fixtures/testutil.h"
#include "vijp/drift.h"
#include "vijp/arith.h"
#include "compare/cache.h"
#include "drift/memo.h"
#include "drift/outer.h"
#include "drift/half.h"
#include "drift/drawn.h"
#include "format/packed.h"
#include "grad/problem.h"
#include "study/draws.h"
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a measured error as a double: these tests run where errors are doubles (mpfr:P for small P) */
#define XD(x) vijp_xnum_double(x)

/* ---- vijp_compare ------------------------------------------------------ */

static void vec(vijp_mat *a, const vijp_format *F, size_t n, const double *x)
{
    vijp_mat_init(a, n, 1, F);
    vijp_mat_set_d(a, x);
}

/* Metric of a against ref, both n-vectors in format F. */
static vijp_metric cmp(const vijp_format *F, size_t n, const double *a, const double *ref)
{
    vijp_mat A, R;
    vijp_metric m;
    vec(&A, F, n, a), vec(&R, F, n, ref);
    vijp_compare(&A, &R, F, &m);
    vijp_mat_clear(&A), vijp_mat_clear(&R);
    return m;
}

/* Angle between (1, 0) and (1, y), in degrees, of the exact double values:
 * atan(y) at 256 bits, rounded once to double. */
static double exact_angle_deg(double y)
{
    mpfr_t t, pi;
    mpfr_inits2(256, t, pi, (mpfr_ptr)0);
    mpfr_set_d(t, y, MPFR_RNDN); /* exact */
    mpfr_atan(t, t, MPFR_RNDN);
    mpfr_mul_ui(t, t, 180, MPFR_RNDN);
    mpfr_const_pi(pi, MPFR_RNDN);
    mpfr_div(t, t, pi, MPFR_RNDN);
    double r = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clears(t, pi, (mpfr_ptr)0);
    return r;
}

/* vijp_compare works at p = max(2P + 64, 128) bits (170 for double, 128 for
 * binary32).  a = (1, 0), ref = (1, 1): ‖a − ref‖/‖ref‖ = 1/√2, with num and
 * den exact small integers, one division and one square root each within
 * 2^-p relative, rounded once to double: within u = 2^-53 (plus 2^-126) of
 * 1/√2; M_SQRT1_2 is the compiler's rounding of 1/√2, also within u:
 * together 2^-52 relative. */
START_TEST(compare_rel)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_metric m = cmp(&F, 2, (double[]){1, 0}, (double[]){1, 1});
    ck_assert_msg(fabs(XD(m.rel) / M_SQRT1_2 - 1) <= 0x1p-52, "rel %.17g", XD(m.rel));
    /* the angle is 45°: at p >= 128 bits within ~2^-124 relative, far under
     * half an ulp of 45, so it rounds to exactly 45 */
    ck_assert_double_eq(XD(m.angle_deg), 45);
    /* identical vectors: every metric exactly zero */
    m = cmp(&F, 2, (double[]){0.3, -7}, (double[]){0.3, -7});
    ck_assert(XD(m.rel) == 0 && XD(m.ulps) == 0 && XD(m.angle_deg) == 0);
    /* ref zero, a not: rel is +Inf (vijp_rel_err's contract) */
    m = cmp(&F, 2, (double[]){1, 0}, (double[]){0, 0});
    ck_assert(isinf(XD(m.rel)) && XD(m.rel) > 0);
}
END_TEST

/* Ulps are exact here: |a − ref| and ulp_f(ref) are powers of two times small
 * integers, the scaling by ulp_f is exact, so each count is an exact integer
 * (or half-integer) and compared with ==. */
START_TEST(compare_ulps)
{
    vijp_format D, S, M;
    vijp_format_fixed(&D, VIJP_DOUBLE);
    vijp_format_fixed(&S, VIJP_BINARY32);
    ck_assert(!vijp_format_parse("mpfr:64", &M, NULL));
    /* double: ulp(1) = 2^-52, so 1 + 3·2^-52 is 3 ulps from 1 */
    ck_assert_double_eq(XD(cmp(&D, 1, (double[]){1 + 3 * 0x1p-52}, (double[]){1}).ulps), 3);
    /* the ulp is taken at the reference: 1 − 2^-53 is half an ulp of 1 below it */
    ck_assert_double_eq(XD(cmp(&D, 1, (double[]){1 - 0x1p-53}, (double[]){1}).ulps), 0.5);
    /* the worst entry counts, each in its own ulp: 2^-52·2^10 is 1 ulp of 2^10 */
    ck_assert_double_eq(XD(cmp(&D, 2, (double[]){1 + 0x1p-52, 1024 + 0x1p-42}, (double[]){1, 1024}).ulps), 1);
    /* subnormals: the spacing is 2^-1074 all the way down, so 7·2^-1074 is two
     * ulps from 5·2^-1074 (2^(E−p) = 2^-1124 there would count 2^51) */
    ck_assert_double_eq(XD(cmp(&D, 1, (double[]){7 * 0x1p-1074}, (double[]){5 * 0x1p-1074}).ulps), 2);
    /* binary32 (24 bits): ulp(1) = 2^-23 */
    ck_assert_double_eq(XD(cmp(&S, 1, (double[]){1 + 0x1p-23}, (double[]){1}).ulps), 1);
    /* binary32 zero against zero: 0 ulps; a nonzero against zero counts in the
     * smallest subnormal 2^-149 */
    ck_assert_double_eq(XD(cmp(&S, 2, (double[]){0, 1}, (double[]){0, 1}).ulps), 0);
    ck_assert_double_eq(XD(cmp(&S, 1, (double[]){3 * 0x1p-149}, (double[]){0}).ulps), 3);
    /* binary32 subnormal reference: 2^-140 = 2^9 subnormal steps */
    ck_assert_double_eq(XD(cmp(&S, 1, (double[]){0x1p-140 + 0x1p-148}, (double[]){0x1p-140}).ulps), 2);
    /* mpfr:P has no subnormals: a nonzero error against a zero reference is infinite */
    ck_assert(isinf(XD(cmp(&M, 1, (double[]){0x1p-300}, (double[]){0}).ulps)));
}
END_TEST

/* The ulps metric is |a − r| / ulp(r) rounded up to a double, computed
 * here the simple way (MPFR at the comparison's precision, scaled, rounded
 * up) for references off the double grid (random, at 256 bits, within a
 * few ulps of a), and at the ends of the double range: a quotient past
 * 2^1024 is infinite, one below 2^-1022 a subnormal rounded up. */
static double simple_ulps(double a, mpfr_srcptr r, mpfr_prec_t p, mpfr_exp_t e)
{
    mpfr_t d;
    mpfr_init2(d, p);
    mpfr_set_d(d, a, MPFR_RNDN);
    mpfr_sub(d, d, r, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_mul_2si(d, d, -e, MPFR_RNDN);
    double u = mpfr_get_d(d, MPFR_RNDU);
    mpfr_clear(d);
    return u;
}

START_TEST(compare_ulps_rounded_up)
{
    vijp_format D, R, M;
    vijp_format_fixed(&D, VIJP_DOUBLE);
    ck_assert(!vijp_format_mpfr(&R, 256, NULL));
    ck_assert(!vijp_format_parse("mpfr:64", &M, NULL));
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    vijp_mat a, r;
    vijp_mat_init(&r, 1, 1, &R);
    for (int k = 0; k < 2000; k++) {
        double x = ldexp(vijp_rng_normal(&rng), (int)(vijp_rng_uniform(&rng) * 40) - 20);
        vijp_mat_init(&a, 1, 1, &D);
        a.d[0] = x;
        /* a few ulps of x away, off the grid: 3N + N'·2^-40 ulps, ~93 significant bits */
        mpfr_set_d(r.m[0], vijp_rng_normal(&rng) * 0x1p-40, MPFR_RNDN);
        mpfr_add_d(r.m[0], r.m[0], vijp_rng_normal(&rng) * 3, MPFR_RNDN);
        mpfr_mul_2si(r.m[0], r.m[0], ilogb(x) - 52, MPFR_RNDN);
        mpfr_add_d(r.m[0], r.m[0], x, MPFR_RNDN);
        vijp_metric m;
        vijp_compare(&a, &r, &D, &m);
        double want = simple_ulps(x, r.m[0], vijp_compare_prec(&D), mpfr_get_exp(r.m[0]) - 53);
        ck_assert_msg(XD(m.ulps) == want, "x = %a: %a ulps, want %a", x, XD(m.ulps), want);
        vijp_mat_clear(&a);
    }
    vijp_mat_clear(&r);
    /* mpfr:64 has no subnormals: 1 against 2^-1000 is 2^1063 ulps, past double's range */
    ck_assert(isinf(XD(cmp(&M, 1, (double[]){1}, (double[]){0x1p-1000}).ulps)));
    /* 2^-1074 against 2^-1000 in mpfr:64: 2^-1000·2^1063 = 2^63 ulps (d = 2^-1000 − 2^-1074, exact) */
    ck_assert_double_eq(XD(cmp(&M, 1, (double[]){0x1p-1074}, (double[]){0x1p-1000}).ulps), 0x1p63);
}
END_TEST

/* Angles of exactly representable configurations.  At p >= 128 bits the
 * whole evaluation is within ~2^-120 relative of the exact angle, far under
 * half an ulp of 90 or 180, so the double result is exact. */
START_TEST(compare_angle)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    ck_assert_double_eq(XD(cmp(&F, 2, (double[]){1, 0}, (double[]){0, 1}).angle_deg), 90);
    ck_assert_double_eq(XD(cmp(&F, 2, (double[]){3, 0}, (double[]){0, 0.5}).angle_deg), 90); /* norms differ */
    ck_assert_double_eq(XD(cmp(&F, 2, (double[]){1, 0}, (double[]){-1, 0}).angle_deg), 180);
    ck_assert_double_eq(XD(cmp(&F, 3, (double[]){1, 2, 3}, (double[]){2, 4, 6}).angle_deg), 0);
    /* 60°: (1, fl(√3)) against (1, 0).  The exact angle of these doubles is
     * atan(fl(√3)) (256 bits, rounded once); vijp_compare's (p >= 128 bits) is
     * within 2^-120 relative of it, so the two doubles differ by at most one
     * rounding each: 2u = 2^-52 relative. */
    double y = sqrt(3.0), want = exact_angle_deg(y), got = XD(cmp(&F, 2, (double[]){1, y}, (double[]){1, 0}).angle_deg);
    ck_assert_msg(fabs(got - want) <= 0x1p-52 * want, "60°: %.17g, exact %.17g", got, want);
    /* and it is 60° up to the rounding of √3: Δθ = Δy/(1 + y²) <= √3·2^-53/4 rad ≈ 2.8e-15° */
    ck_assert(fabs(got - 60) <= 3e-15);
}
END_TEST

/* Tiny angles: t = 1e-12° in radians, a = (1, fl(tan t)), ref = (1, 0).  The
 * exact angle of these doubles is atan(fl(tan t)) (256 bits).  In the atan2
 * form at p >= 128 bits the only cancellation is in the first component of
 * â − r̂: d = 1/‖a‖ − 1 ≈ −y²/2 ≈ −1.5e-28, formed with absolute error ~2^-p;
 * it enters ‖â − r̂‖² ≈ y² as d², so its error moves that sum by ~|d|·2^-p,
 * 2^-p·y²/2 relative.  The result is thus within ~2^-120 of exact before
 * its one rounding, and within 2u = 2^-52 relative of the 256-bit value
 * (rounded too); a 1e-10 tolerance would be needlessly loose. */
START_TEST(compare_tiny_angle)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    double t = 1e-12 * M_PI / 180, y = tan(t);
    double want = exact_angle_deg(y), got = XD(cmp(&F, 2, (double[]){1, y}, (double[]){1, 0}).angle_deg);
    ck_assert(want > 0.99e-12 && want < 1.01e-12); /* fl(tan t) ≈ t to 1e-15 */
    ck_assert_msg(fabs(got - want) <= 0x1p-52 * want, "tiny angle: %.17g, exact %.17g", got, want);
    /* Why the atan2 form: the naive acos(⟨a, b⟩/(‖a‖‖b‖)) in double sees
     * ‖a‖ = fl(√(1 + y²)) = 1 (y² ≈ 3e-28 ≪ u), so its argument is exactly 1
     * and it returns 0. */
    double dot = 1 * 1 + y * 0, na = sqrt(1 + y * y), nb = sqrt(1 + 0 * 0.0);
    ck_assert_double_eq(acos(dot / (na * nb)), 0);
}
END_TEST

START_TEST(compare_zero_vectors)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_metric m = cmp(&F, 2, (double[]){0, 0}, (double[]){1, 2});
    ck_assert(isnan(XD(m.angle_deg)));
    ck_assert_double_eq(XD(m.rel), 1); /* ‖0 − r‖/‖r‖ */
    m = cmp(&F, 2, (double[]){1, 2}, (double[]){0, 0});
    ck_assert(isnan(XD(m.angle_deg)));
    m = cmp(&F, 2, (double[]){0, 0}, (double[]){0, 0});
    ck_assert(XD(m.angle_deg) == 0 && XD(m.rel) == 0 && XD(m.ulps) == 0);
}
END_TEST

/* A NaN entry makes the ulps metric NaN wherever it sits (vijp_compare's "NaN
 * propagates"), like rel and the angle: a later exact entry must not hide it. */
START_TEST(compare_nan_propagates)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_metric m = cmp(&F, 2, (double[]){NAN, 1}, (double[]){1, 1});
    ck_assert(isnan(XD(m.rel)) && isnan(XD(m.angle_deg)));
    ck_assert_msg(isnan(XD(m.ulps)), "ulps %g", XD(m.ulps));
    m = cmp(&F, 2, (double[]){1, NAN}, (double[]){1, 1});
    ck_assert(isnan(XD(m.ulps)));
}
END_TEST

/* ---- statistics of error curves --------------------------------------- */

/* e_i = 10^(0.1 i − 16), i = 1..n, saturating at sat (the value where the line
 * would exceed it).  pow(10, 0.1 i) is within a few u relative of 10^(0.1 i)
 * (0.1·i is off by at most 10u absolute), so log10 e_i is within ~1e-14 of
 * the line. */
static void line_curve(vijp_xnum *e, size_t n, double sat)
{
    for (size_t i = 1; i <= n; i++) e[i - 1] = vijp_xnum_of(fmin(sat, 1e-16 * pow(10, 0.1 * (double)i)));
}

/* Slope of the exact line is 0.1, intercept −16.  Perturbations δ_i <= 1e-14
 * of y_i = log10 e_i move the slope by at most δ Σ|x_i − x̄| / Σ(x_i − x̄)²
 * = δ·2500/83325 ≈ 3e-16 for n = 100 (Welford adds rounding of the same
 * order), and the intercept ȳ − b x̄ by about δ + 50·3e-16 ≈ 3e-14: 1e-12
 * (relative on the slope, absolute on the intercept) bounds both with margin. */
START_TEST(growth_fit_line)
{
    vijp_xnum e[100];
    double b;
    line_curve(e, 100, INFINITY);
    double r = vijp_growth_fit(e, 100, VIJP_FIT_CEILING, &b);
    ck_assert_msg(fabs(r / 0.1 - 1) <= 1e-12, "slope %.17g", r);
    ck_assert_msg(fabs(b + 16) <= 1e-12, "intercept %.17g", b);
    ck_assert(fabs(vijp_growth_fit(e, 100, VIJP_FIT_CEILING, NULL) - r) == 0); /* intercept optional */
    /* zeros and NaN are not on the log scale, Inf is above the ceiling: ignored */
    e[4] = vijp_xnum_of(0), e[20] = vijp_xnum_of(NAN), e[50] = vijp_xnum_of(INFINITY);
    r = vijp_growth_fit(e, 100, VIJP_FIT_CEILING, &b);
    ck_assert_msg(fabs(r / 0.1 - 1) <= 1e-12 && fabs(b + 16) <= 1e-12, "slope %.17g intercept %.17g", r, b);
}
END_TEST

/* A curve that saturates at 1 from layer 160 on (layers 151..159 are on the
 * line but above the ceiling 0.1): only the first-order part is fitted, so
 * the slope is still 0.1 and the intercept −16 (same bounds as above, n = 150:
 * δ·5625/281237 ≈ 2e-16).  Without the ceiling the 41 saturated points
 * drag the slope far below 0.1. */
START_TEST(growth_fit_ceiling)
{
    vijp_xnum e[200];
    double b;
    line_curve(e, 200, 1);
    double r = vijp_growth_fit(e, 200, VIJP_FIT_CEILING, &b);
    ck_assert_msg(fabs(r / 0.1 - 1) <= 1e-12, "slope %.17g", r);
    ck_assert_msg(fabs(b + 16) <= 1e-12, "intercept %.17g", b);
    ck_assert(vijp_growth_fit(e, 200, INFINITY, NULL) < 0.09);
    /* fewer than 4 points under the ceiling: NaN (and a NaN intercept) */
    vijp_xnum f[6] = {{1e-12, 0}, {1e-11, 0}, {0.5, 0}, {1e-10, 0}, {1, 0}, {NAN, 0}};
    b = 0;
    ck_assert(isnan(vijp_growth_fit(f, 6, VIJP_FIT_CEILING, &b)) && isnan(b));
    /* four points are enough: 1e-12, 1e-11, 1e-10, 1e-9 at i = 1, 2, 4, 6 is
     * not a line, but the fit exists */
    f[5] = vijp_xnum_of(1e-9);
    ck_assert(isfinite(vijp_growth_fit(f, 6, VIJP_FIT_CEILING, NULL)));
}
END_TEST

/* e_60 = 1e-16·10^6 may round to either side of 1e-10, so the tolerances sit
 * strictly between neighbours: e_59 ≈ 7.9e-11 < 0.9e-10 < e_60 ≈ 1.0e-10 <
 * 1.1e-10 < e_61 ≈ 1.26e-10. */
START_TEST(safe_depth)
{
    vijp_xnum g[100], th[100];
    int has[100];
    line_curve(g, 100, INFINITY);
    memcpy(th, g, sizeof th);
    for (size_t i = 0; i < 100; i++) has[i] = 1;
    ck_assert_uint_eq(vijp_safe_depth(g, NULL, NULL, 100, vijp_xnum_of(1.1e-10)), 60);
    ck_assert_uint_eq(vijp_safe_depth(g, NULL, NULL, 100, vijp_xnum_of(0.9e-10)), 59);
    ck_assert_uint_eq(vijp_safe_depth(g, th, has, 100, vijp_xnum_of(1.1e-10)), 60);
    ck_assert_uint_eq(vijp_safe_depth(g, NULL, NULL, 100, vijp_xnum_of(1)), 100);
    ck_assert_uint_eq(vijp_safe_depth(g, NULL, NULL, 100, vijp_xnum_of(1e-17)), 0);
    /* a θ error above tol stops it where the layer has parameters */
    th[29] = vijp_xnum_of(1);
    ck_assert_uint_eq(vijp_safe_depth(g, th, has, 100, vijp_xnum_of(1.1e-10)), 29);
    ck_assert_uint_eq(vijp_safe_depth(g, th, NULL, 100, vijp_xnum_of(1.1e-10)), 29); /* NULL: all have */
    /* NaN θ: "no parameters" only where has_param is 0; elsewhere it counts as above tol */
    th[29] = vijp_xnum_of(NAN);
    ck_assert_uint_eq(vijp_safe_depth(g, th, NULL, 100, vijp_xnum_of(1.1e-10)), 29);
    ck_assert_uint_eq(vijp_safe_depth(g, th, has, 100, vijp_xnum_of(1.1e-10)), 29);
    has[29] = 0;
    ck_assert_uint_eq(vijp_safe_depth(g, th, has, 100, vijp_xnum_of(1.1e-10)), 60);
    /* NaN in g stops it */
    g[9] = vijp_xnum_of(NAN);
    ck_assert_uint_eq(vijp_safe_depth(g, th, has, 100, vijp_xnum_of(1.1e-10)), 9);
}
END_TEST

/* bits = prec + log2(max e / tol) rounded up; powers of two make every
 * logarithm exact, so the counts are exact integers. */
START_TEST(bits_needed)
{
    vijp_xnum e[100];
    int ext = -1;
    /* first order: max e = 2^-40 at 53 bits.  The error scales with 2^-prec,
     * so 2^-30 is met with 10 bits fewer, 2^-50 needs 10 more. */
    for (size_t i = 0; i < 100; i++) e[i] = vijp_xnum_of(0x1p-40 * (double)(i + 1) / 100);
    ck_assert_double_eq(vijp_bits_needed(e, 100, 53, vijp_xnum_of(0x1p-30), &ext), 43);
    ck_assert_int_eq(ext, 0);
    ck_assert_double_eq(vijp_bits_needed(e, 100, 53, vijp_xnum_of(0x1p-50), &ext), 63);
    ck_assert_int_eq(ext, 0);
    /* never under 2 bits */
    ck_assert_double_eq(vijp_bits_needed(e, 100, 10, vijp_xnum_of(0x1p-2), &ext), 2);
    /* an exact curve needs 2 bits */
    memset(e, 0, sizeof e);
    ext = -1;
    ck_assert_double_eq(vijp_bits_needed(e, 100, 53, vijp_xnum_of(1e-10), &ext), 2);
    ck_assert_int_eq(ext, 0);
    /* saturated: the line 10^(0.1 i − 16) capped at 1 from i = 160, n = 200.
     * The fitted line's largest value is at i = 200: log10 = −16 + 20 = 4
     * (fit within ~1e-12, see growth_fit_ceiling), so bits = 53 + (4 + 10)
     * log2 10 = 99.507 rounded up: 100 (0.49 from either integer). */
    vijp_xnum s[200];
    line_curve(s, 200, 1);
    ck_assert_double_eq(vijp_bits_needed(s, 200, 53, vijp_xnum_of(1e-10), &ext), ceil(53 + 14 * log2(10.0)));
    ck_assert_double_eq(ceil(53 + 14 * log2(10.0)), 100);
    ck_assert_int_eq(ext, 1);
    /* non-finite anywhere also leaves first order: a NaN in the middle must
     * not be forgotten by the finite values after it */
    line_curve(s, 100, INFINITY);
    s[10] = vijp_xnum_of(NAN);
    ext = 0;
    ck_assert_double_eq(vijp_bits_needed(s, 100, 53, vijp_xnum_of(1e-10), &ext), ceil(53 + 4 * log2(10.0)));
    ck_assert_int_eq(ext, 1);
    /* no fit: NaN */
    vijp_xnum z[3] = {{NAN, 0}, {1, 0}, {2, 0}};
    ck_assert(isnan(vijp_bits_needed(z, 3, 53, vijp_xnum_of(1e-10), &ext)));
}
END_TEST

START_TEST(default_tol)
{
    static const struct {
        const char *fmt;
        double tol;
    } cases[] = {{"double", 1e-10}, {"binary32", 1e-4}, {"binary16", 1e-2}, {"bfloat16", 1e-2},
                 {"mpfr:256", 0x1p-128}, {"mpfr:100", 0x1p-50}, {"mpfr:2", 0x1p-1},
                 {"e4m3", 2e-1},         {"e5m2:sat", 3e-1},    {"e4m3+binary32", 2e-1}, {"e5m2+binary32", 3e-1},
                 {"bfloat16+binary32", 1e-2}, {"tf32+binary32", 1e-2}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        vijp_format F;
        ck_assert(!vijp_format_parse(cases[k].fmt, &F, NULL));
        vijp_xnum t = vijp_drift_default_tol(&F);
        ck_assert_msg(vijp_xnum_cmp(t, vijp_xnum_of(cases[k].tol)) == 0 && vijp_xnum_is_double(t), "%s: %g", cases[k].fmt,
                      vijp_xnum_double(t));
    }
}
END_TEST

/* ---- vijp_drift_run --------------------------------------------------- */

static const vijp_engine_kind moonwalk[] = {VIJP_ENGINE_MOONWALK};

static vijp_drift_setup setup(const char *spec, size_t depth, size_t width, vijp_init_kind init, const char *fmt,
                              uint64_t seed)
{
    vijp_drift_setup s = {0};
    s.problem = (vijp_grad_setup){.spec = spec, .depth = depth, .width = width, .batch = 1, .seed = seed,
                                  .init = {.kind = init, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
    ck_assert(!vijp_format_parse(fmt, &s.problem.fmt, NULL));
    s.engines = moonwalk, s.n_engines = 1;
    return s;
}

static void drift(const vijp_drift_setup *s, vijp_drift_curve *c)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_drift_run(s, c, &err), "%s depth %zu %s: %s", s->problem.spec, s->problem.depth, s->problem.fmt.name, err.msg);
    ck_assert_uint_eq(c->n_runs, 2);
    ck_assert(c->runs[0].engine == VIJP_ENGINE_BACKPROP && c->runs[1].engine == VIJP_ENGINE_MOONWALK);
}

/* Started at 16 bits (far too low for a double-format curve), validation
 * must climb: 16 vs 32 vs 64 … until two precisions agree to u·2^-10.
 * Each validated reference then has a relative error τ <= u·2^-10 on every
 * g_i (assuming, as the validation does, that the higher of the two
 * precisions is the more accurate one), and a
 * relative metric e against a reference off by τ moves by at most τ(1 + e)
 * (triangle inequality, and ‖ref‖ moves by τ).  Two references: the Moonwalk
 * g errors of the two runs agree within 2τ(1 + e), second-order terms (τ e,
 * ~1e-34) covered by a factor 1.01.  For these errors (~1e-15 ≈ 9u) that is
 * 2^-9 u ≈ 2e-4 relative. */
START_TEST(reference_validation)
{
    vijp_drift_setup s = setup("dense:16,leaky:0.5", 32, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed());
    vijp_drift_curve lo, def;
    s.ref_prec_start = 16;
    drift(&s, &lo);
    s.ref_prec_start = 0;
    drift(&s, &def);
    ck_assert_int_eq(lo.ref_prec_start, 16);
    ck_assert_msg(lo.ref_prec > 32 && XD(lo.ref_agreement) <= XD(lo.ref_target), "settled at %ld bits, agreement %g",
                  lo.ref_prec, XD(lo.ref_agreement));
    ck_assert(XD(lo.ref_target) == ldexp(0x1p-53, -10) && XD(def.ref_target) == XD(lo.ref_target));
    ck_assert_int_eq(def.ref_prec_start, 106); /* max(64, min(2·53, 53 + 64)) */
    ck_assert(def.ref_prec >= 212 && XD(def.ref_agreement) <= XD(def.ref_target));
    double tau = XD(lo.ref_target);
    for (size_t i = 0; i < s.problem.depth; i++) {
        double a = XD(lo.runs[1].g[i].rel), b = XD(def.runs[1].g[i].rel);
        ck_assert(a >= 0x1p-53); /* the regime the argument covers */
        ck_assert_msg(fabs(a - b) <= 1.01 * 2 * tau * (1 + b), "g_%zu: %.17g vs %.17g", i + 1, a, b);
    }
    vijp_drift_curve_clear(&lo), vijp_drift_curve_clear(&def);
}
END_TEST

/* The curve's progress (vijp_drift_setup.on_progress): shares in [0, 1],
 * the last one 1, and at most a report a layer step (of each reference
 * level, engine run and conditioning layer), one more a level past the
 * two planned and one a phase's end and the curve's (a share that did not
 * move is not reported); with validation started
 * at 16 bits, so that levels past the two planned add to the plan, the
 * share goes back where they start.  The curve itself is the one run
 * without a meter, bit for bit. */
static int same_curve(const vijp_drift_curve *a, const vijp_drift_curve *b);

typedef struct {
    size_t calls, back;
    double last;
    int out_of_range;
} progress_log;

static void on_progress(void *ctx, double done)
{
    progress_log *l = ctx;
    l->out_of_range |= !(done >= 0 && done <= 1);
    l->back += done < l->last;
    l->last = done, l->calls++;
}

START_TEST(progress_reaches_one)
{
    for (int low = 0; low < 2; low++) {
        vijp_drift_setup s = setup("dense:16,gelu", 16, 16, VIJP_INIT_ORTHOGONAL, low ? "double" : "binary32",
                                   test_seed());
        s.ref_prec_start = low ? 16 : 0;
        vijp_drift_curve plain, metered;
        drift(&s, &plain);
        progress_log l = {0};
        s.on_progress = on_progress, s.progress_ctx = &l;
        drift(&s, &metered);
        ck_assert(same_curve(&plain, &metered));
        size_t D = s.problem.depth, levels = 0;
        for (long p = low ? 16 : 64; p <= metered.ref_prec; p *= 2) levels++;
        size_t most = levels * 2 * D + vijp_engine_layer_steps(VIJP_ENGINE_BACKPROP, D, 1, NULL) +
                      vijp_engine_layer_steps(VIJP_ENGINE_MOONWALK, D, 1, NULL) + D + levels + 4;
        ck_assert_msg(!l.out_of_range && l.last == 1 && l.calls > D && l.calls <= most,
                      "%s: %zu reports (at most %zu), the last %g", s.problem.fmt.name, l.calls, most, l.last);
        /* 16 bits settle past 64: two levels unplanned, each a step back */
        ck_assert_msg(low ? levels > 3 && l.back == levels - 2 : l.back == 0, "%s: %zu levels, %zu steps back",
                      s.problem.fmt.name, levels, l.back);
        vijp_drift_curve_clear(&plain), vijp_drift_curve_clear(&metered);
    }
    /* a second curve on a shared memo: its reference and conditioning
     * taken from the memo, no steps of theirs, still ends at 1 */
    vijp_drift_setup s = setup("dense:16,gelu", 16, 16, VIJP_INIT_ORTHOGONAL, "binary32", test_seed());
    s.memo = vijp_drift_memo_new();
    vijp_drift_curve first, second;
    drift(&s, &first);
    progress_log l = {0};
    s.on_progress = on_progress, s.progress_ctx = &l;
    drift(&s, &second);
    ck_assert(vijp_drift_memo_computed(s.memo) == 2 && same_curve(&first, &second));
    ck_assert_msg(!l.out_of_range && l.last == 1 && l.back == 0, "shared memo: the last share %g", l.last);
    vijp_drift_curve_clear(&first), vijp_drift_curve_clear(&second);
    vijp_drift_memo_free(s.memo);
}
END_TEST

/* Bit for bit (doubles by their bytes, so NaN equals NaN): every field of
 * two curves, metrics, bounds, conditioning and reference figures. */
static int same_doubles(const double *a, const double *b, size_t n) { return !n || (a && b && !memcmp(a, b, n * sizeof *a)) || (!a && !b); }
static int same_xnums(const vijp_xnum *a, const vijp_xnum *b, size_t n) { return !n || (a && b && !memcmp(a, b, n * sizeof *a)) || (!a && !b); }

static int same_curve(const vijp_drift_curve *a, const vijp_drift_curve *b)
{
    size_t D = a->depth;
    if (D != b->depth || a->n_runs != b->n_runs || a->ref_prec != b->ref_prec || a->ref_prec_start != b->ref_prec_start ||
        memcmp(&a->ref_agreement, &b->ref_agreement, sizeof a->ref_agreement) || memcmp(&a->lyap_rate, &b->lyap_rate, sizeof(double)) ||
        memcmp(&a->predicted_rate, &b->predicted_rate, sizeof(double)) || !same_doubles(a->kappa, b->kappa, D) ||
        !same_doubles(a->lyap_cum, b->lyap_cum, D) || !same_xnums(a->predicted, b->predicted, D))
        return 0;
    for (size_t k = 0; k < a->n_runs; k++) {
        const vijp_drift_run_result *x = &a->runs[k], *y = &b->runs[k];
        if (x->engine != y->engine || x->rebuilt != y->rebuilt || memcmp(&x->x, &y->x, sizeof x->x) ||
            memcmp(x->g, y->g, D * sizeof *x->g) || memcmp(x->theta, y->theta, D * sizeof *x->theta) ||
            !same_xnums(x->bound, y->bound, D) || strcmp(x->failure, y->failure) || strcmp(x->nonfinite, y->nonfinite))
            return 0;
    }
    return 1;
}

/* vijp_drift_memo: curves run with one memo in turn are those run alone, bit
 * for bit, and the memo computes a reference only where the rounded problem
 * changes.  bfloat16 and bfloat16+binary32 store in bfloat16 (one problem:
 * shared); binary32 rounds to other values (recomputed); bfloat16 again
 * after it (recomputed: one problem is kept).  A memo that ignored the
 * values (broken on purpose: same_problem returning 1 once keyed) gives
 * binary32 bfloat16's reference and fails the comparison. */
START_TEST(memo_shares_only_equal_problems)
{
    static const char *const order[] = {"bfloat16", "bfloat16+binary32", "binary32", "bfloat16"};
    static const size_t computed[] = {2, 2, 4, 6}; /* each problem validates at 64 and 128 bits */
    vijp_drift_memo *memo = vijp_drift_memo_new();
    for (size_t k = 0; k < 4; k++) {
        vijp_drift_setup s = setup("dense:8,gelu", 12, 8, VIJP_INIT_ORTHOGONAL, order[k], test_seed());
        vijp_drift_curve alone, shared;
        drift(&s, &alone);
        s.memo = memo;
        drift(&s, &shared);
        ck_assert_msg(same_curve(&alone, &shared), "%s: the curve run with the memo differs", order[k]);
        ck_assert_msg(vijp_drift_memo_computed(memo) == computed[k], "%s: %zu references computed, want %zu", order[k],
                      vijp_drift_memo_computed(memo), computed[k]);
        vijp_drift_curve_clear(&alone), vijp_drift_curve_clear(&shared);
    }
    /* another seed: another problem */
    vijp_drift_setup s = setup("dense:8,gelu", 12, 8, VIJP_INIT_ORTHOGONAL, "bfloat16+binary32", test_seed() + 1);
    vijp_drift_curve alone, shared;
    drift(&s, &alone);
    s.memo = memo;
    drift(&s, &shared);
    ck_assert(same_curve(&alone, &shared) && vijp_drift_memo_computed(memo) == 8);
    vijp_drift_curve_clear(&alone), vijp_drift_curve_clear(&shared);
    vijp_drift_memo_free(memo);
}
END_TEST

/* Whether two gradient sets agree entry by entry, number and sign: mpfr:P
 * matrices, MPFR-held or packed (the memo packs its levels), read exactly
 * at P bits. */
static int same_values(const vijp_mat *a, const vijp_mat *b)
{
    size_t n = vijp_mat_len(a);
    if (n != vijp_mat_len(b) || a->fmt->prec != b->fmt->prec || (!a->m && !a->packed) || (!b->m && !b->packed))
        return 0;
    mpfr_t *x = vo_vec_new(n, a->fmt), *y = vo_vec_new(n, a->fmt);
    vijp_mat_get_mpfr(a, x), vijp_mat_get_mpfr(b, y);
    int same = 1;
    for (size_t k = 0; k < n && same; k++)
        same = (mpfr_equal_p(x[k], y[k]) || (mpfr_nan_p(x[k]) && mpfr_nan_p(y[k]))) && mpfr_signbit(x[k]) == mpfr_signbit(y[k]);
    vo_vec_free(x, n), vo_vec_free(y, n);
    return same;
}

static int same_grads(const vijp_grads *a, const vijp_grads *b)
{
    int same = a->depth == b->depth && same_values(&a->grad_x, &b->grad_x);
    for (size_t i = 0; same && i < a->depth; i++)
        same = same_values(&a->g[i], &b->g[i]) && same_values(&a->grad_theta[i], &b->grad_theta[i]);
    return same;
}

/* The memo's copy of a problem whose values are doubles is held in double
 * (memo.c): each reference level it computes equals, bit for bit, backprop
 * on the copy it held before, θ in MPFR at 53 bits (every layer then reads
 * an MPFR θ: dense's products through vijp_ref_dense_op, the others
 * directly), X and T in the level's format.  Dense layers of 32 (the
 * double path of their products: 32 terms, batch 8), a linear layer and
 * a layernorm (θ through the layer interface's MPFR twin) and gelu; in
 * binary32 and bfloat16+binary32 (levels 64, 128) and double (106, and
 * 212 past the double path: vo_dot line by line).  A keyed memo still
 * knows the problem again from a fresh draw, and not with one weight
 * moved by 1/16 of itself.  Each level is computed as the validation's
 * lower one (its dense gradients deferred) and then asked for whole: the
 * deferred ones formed afterwards from its kept inputs are the reverse
 * pass's.  Broken on purpose (the copy's θ rounded to binary32,
 * or dense's double path reading W transposed), the levels differ. */
START_TEST(memo_copy_in_double)
{
    static const char *const fmts[] = {"binary32", "bfloat16+binary32", "double"};
    for (size_t k = 0; k < 3; k++) {
        vijp_grad_setup gs = {.spec = "dense:32,gelu,linear:16x16,layernorm", .depth = 8, .width = 32, .batch = 8,
                              .seed = test_seed(), .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
        ck_assert(!vijp_format_parse(fmts[k], &gs.fmt, NULL));
        ck_assert(vijp_drift_memo_copy_double(&gs.fmt));
        vijp_error err = {0};
        vijp_net net;
        vijp_problem pf, again;
        ck_assert_msg(!vijp_problem_draw(&gs, &net, &err) && !vijp_problem_setup_drawn(&gs, &net, &pf, &err), "%s", err.msg);
        vijp_drift_memo *memo = vijp_drift_memo_new();
        vijp_drift_memo_bind(memo, &gs, &net, &pf, 1);
        vijp_format F53, lf;
        ck_assert(!vijp_format_mpfr(&F53, 53, NULL));
        vijp_mat *th53 = calloc(net.depth, sizeof *th53);
        ck_assert_ptr_nonnull(th53);
        for (size_t i = 0; i < net.depth; i++)
            vijp_mat_init(&th53[i], pf.theta[i].rows, 1, &F53), vijp_mat_convert(&th53[i], &pf.theta[i]); /* exact */
        long first = vijp_drift_ref_prec_first(&gs.fmt, 0);
        for (long prec = first; prec <= 2 * first; prec *= 2) {
            const vijp_grads *level; /* computed with its dense gradients deferred, then asked for whole */
            ck_assert_msg(!vijp_drift_memo_backprop(memo, &net, &pf, prec, 1, &level, &err), "%s", err.msg);
            ck_assert_msg(!vijp_drift_memo_backprop(memo, &net, &pf, prec, 0, &level, &err), "%s", err.msg);
            ck_assert(!vijp_format_mpfr(&lf, prec, NULL));
            lf.exact_dots = 1;
            vijp_mat X, T;
            vijp_mat_init(&X, pf.X.rows, pf.X.cols, &lf), vijp_mat_convert(&X, &pf.X);
            vijp_mat_init(&T, pf.T.rows, pf.T.cols, &lf), vijp_mat_convert(&T, &pf.T);
            vijp_grads want;
            ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th53, &X, &T, &want, &err), "%s", err.msg);
            ck_assert_msg(same_grads(level, &want), "%s, level %ld: the double copy's level differs", fmts[k], prec);
            vijp_grads_clear(&want), vijp_mat_clear(&X), vijp_mat_clear(&T);
        }
        size_t computed = vijp_drift_memo_computed(memo);
        ck_assert_uint_eq(computed, 2);
        const vijp_grads *level;
        ck_assert(!vijp_problem_setup_drawn(&gs, &net, &again, &err));
        vijp_drift_memo_bind(memo, &gs, &net, &again, 1); /* the same values: kept */
        ck_assert(!vijp_drift_memo_backprop(memo, &net, &again, first, 0, &level, &err));
        ck_assert_uint_eq(vijp_drift_memo_computed(memo), computed);
        double w = vijp_mat_get_d(&again.theta[0], 0);
        vijp_mat_set_entry_d(&again.theta[0], 0, w * 1.0625); /* 17/16: a value of every format here (5 bits) */
        ck_assert(vijp_mat_get_d(&again.theta[0], 0) != w);
        vijp_drift_memo_bind(memo, &gs, &net, &again, 1);
        ck_assert(!vijp_drift_memo_backprop(memo, &net, &again, first, 0, &level, &err));
        ck_assert_uint_eq(vijp_drift_memo_computed(memo), computed + 1);
        vijp_drift_memo_free(memo);
        for (size_t i = 0; i < net.depth; i++) vijp_mat_clear(&th53[i]);
        free(th53);
        vijp_problem_clear(&pf, &net), vijp_problem_clear(&again, &net);
        vijp_net_free(&net);
    }
}
END_TEST

/* whether every matrix of g is packed at prec bits and equal to want's
 * rounded to them (fmt: mpfr:prec) */
static int held_at(const vijp_grads *g, const vijp_grads *want, const vijp_format *fmt, int cotangents_only)
{
    int same = 1;
    for (size_t k = 0; k < 2 * g->depth + 1 && same; k++) {
        if (cotangents_only && k % 2 && k != 2 * g->depth) continue; /* a ∇θ */
        const vijp_mat *a = k == 2 * g->depth ? &g->grad_x : k % 2 ? &g->grad_theta[k / 2] : &g->g[k / 2];
        const vijp_mat *b = k == 2 * g->depth ? &want->grad_x : k % 2 ? &want->grad_theta[k / 2] : &want->g[k / 2];
        vijp_mat r;
        vijp_mat_pack_copy(&r, b, fmt);
        same = a->packed && !a->m && a->packed->prec == (mpfr_prec_t)fmt->prec && same_values(a, &r);
        vijp_mat_clear(&r);
    }
    return same;
}

/* The memo's batch-1 dense parameter gradient formed straight into its
 * packed, held block (drift/outer.c) against what the reverse pass gives
 * there: the layer's vjp_param in mpfr:P (exact dots), packed, rounded to
 * Q.  Bit for bit, at the levels the memo holds (106 held at 106 and 212
 * held at 170 for double, 64 and 128 for binary32; the upper level's
 * gradients formed at half its precision and held wider, 106 at 170 and
 * 64 at 128, and 256 at 576, past the eight limbs formed here: MPFR's
 * way) and at 192 and 256
 * bits (a rounding bit a whole limb below), on random factors with zeros
 * and both signs, products on a tie of P bits (the kept part even and
 * odd), products whose P-bit rounding is a tie at Q (the double
 * rounding), and all-ones products carrying into the next binade. */
START_TEST(outer_param_is_the_reverse_pass_s)
{
    static const long levels[][2] = {{106, 106}, {212, 170}, {64, 64},   {128, 128}, {192, 128},
                                     {256, 170}, {212, 212}, {106, 170}, {64, 128},  {256, 576}};
    vijp_rng g;
    vijp_rng_seed(&g, 31);
    for (size_t c = 0; c < sizeof levels / sizeof *levels; c++) {
        long P = levels[c][0], Q = levels[c][1];
        enum { M = 9, N = 11 };
        vijp_layer L;
        char spec[32];
        snprintf(spec, sizeof spec, "dense:%dx%d", M, N);
        ck_assert_int_eq(vijp_layer_parse(&L, spec, N, NULL), 0);
        vijp_format fP, fQ, fd;
        ck_assert(!vijp_format_mpfr(&fP, P, NULL) && !vijp_format_mpfr(&fQ, Q, NULL));
        fP.exact_dots = 1;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        vijp_mat h, gy, th, want, got;
        vijp_mat_init(&h, N, 1, &fP), vijp_mat_init(&gy, M, 1, &fP), vijp_mat_init(&th, M * N + M, 1, &fd);
        for (size_t e = 0; e < M * N + M; e++) th.d[e] = vijp_rng_normal(&g); /* unread by vjp_param */
        mpfr_t t, u;
        mpfr_inits2(P + 2, t, u, (mpfr_ptr)0);
        for (int k = 0; k < N; k++) {
            mpfr_set_d(t, vijp_rng_normal(&g), MPFR_RNDN);
            for (int b = 1; 53 * b < P + 53; b++) { /* every bit random */
                mpfr_set_d(u, vijp_rng_uniform(&g) - 0.5, MPFR_RNDN);
                mpfr_mul_2si(u, u, mpfr_get_exp(t) - 53 * b, MPFR_RNDN);
                mpfr_add(t, t, u, MPFR_RNDN);
            }
            mpfr_set(h.m[k], t, MPFR_RNDN);
        }
        for (int i = 0; i < M; i++) {
            mpfr_set_d(t, vijp_rng_normal(&g), MPFR_RNDN);
            mpfr_mul_d(t, t, 1 + ldexp(vijp_rng_uniform(&g), -30), MPFR_RNDN);
            mpfr_set(gy.m[i], t, MPFR_RNDN);
        }
        /* (1 + 2^-1)(1 + 2^-(P−1)): a tie at P, the kept part odd (up);
         * (1 + 2^-5)(1 + 2^-(P−5)): a tie, even (down); −(1 + 2^-Q): a tie
         * at Q once rounded to P; (1 − 2^(1−P))(1 + 2^(1−P)) = 1 − 2^(2−2P),
         * which rounds up into the next binade; zeros of both signs */
        mpfr_set_ui_2exp(t, 1, -(P - 1), MPFR_RNDN), mpfr_add_ui(h.m[0], t, 1, MPFR_RNDN);
        mpfr_set_d(gy.m[0], 1.5, MPFR_RNDN);                                              /* a tie at P, up to even */
        mpfr_set_ui_2exp(t, 1, -(P - 5), MPFR_RNDN), mpfr_add_ui(h.m[1], t, 1, MPFR_RNDN);
        mpfr_set_d(gy.m[1], 1 + 0x1p-5, MPFR_RNDN);                                       /* a tie at P, down */
        mpfr_set_ui_2exp(t, 1, -Q, MPFR_RNDN), mpfr_add_ui(h.m[2], t, 1, MPFR_RNDN);      /* 1 + 2^-Q: its product */
        mpfr_set_d(gy.m[2], -1.0, MPFR_RNDN);                                             /* with 1 a tie at Q */
        mpfr_set_ui_2exp(t, 1, -(P - 1), MPFR_RNDN), mpfr_ui_sub(h.m[3], 1, t, MPFR_RNDN); /* 1 − 2^(1−P) */
        mpfr_add_ui(gy.m[3], t, 1, MPFR_RNDN); /* times 1 + 2^(1−P): 1 − 2^(2−2P), up to 1 */
        mpfr_set_zero(h.m[4], 1), mpfr_set_zero(gy.m[4], -1), mpfr_set_zero(h.m[5], -1);
        mpfr_neg(gy.m[5], gy.m[5], MPFR_RNDN);
        mpfr_clears(t, u, (mpfr_ptr)0);
        /* the reverse pass's way: vjp_param in mpfr:P, packed, held at Q */
        vijp_mat_init(&want, M * N + M, 1, &fP);
        ck_assert(!vijp_layer_vjp_param(&L, &th, &h, &gy, &want, NULL));
        vijp_mat_pack(&want);
        vijp_mat_pack_rounded(&want, &fQ);
        ck_assert_msg(drift_outer_param(&L, &h, &gy, &fP, &fQ, &got), "%ld -> %ld: not formed", P, Q);
        ck_assert(got.packed && !got.m && got.packed->prec == Q && got.fmt == &fQ);
        mpfr_t one;
        vijp_packed_view(got.packed, 3 + 3 * M, one);
        ck_assert_msg(mpfr_cmp_ui(one, 1) == 0, "%ld -> %ld: the carry's product is not 1", P, Q);
        for (size_t e = 0; e < M * N + M; e++) {
            mpfr_t a, b;
            vijp_packed_view(want.packed, e, a), vijp_packed_view(got.packed, e, b);
            int same = (mpfr_nan_p(a) && mpfr_nan_p(b)) || (mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b));
            ck_assert_msg(same && vijp_packed_kind(want.packed, e) == vijp_packed_kind(got.packed, e),
                          "%ld -> %ld, entry %zu: differs from the reverse pass's", P, Q, e);
        }
        vijp_mat_clear(&h), vijp_mat_clear(&gy), vijp_mat_clear(&th), vijp_mat_clear(&want), vijp_mat_clear(&got);
        vijp_layer_clear(&L);
    }
    /* not its case: another type */
    vijp_layer L;
    ck_assert_int_eq(vijp_layer_parse(&L, "tanh", 4, NULL), 0);
    vijp_format fP;
    ck_assert(!vijp_format_mpfr(&fP, 106, NULL));
    fP.exact_dots = 1;
    vijp_mat h, gy, got;
    vijp_mat_init(&h, 4, 1, &fP), vijp_mat_init(&gy, 4, 1, &fP);
    ck_assert(!drift_outer_param(&L, &h, &gy, &fP, &fP, &got));
    vijp_layer_clear(&L);
    vijp_mat_clear(&h), vijp_mat_clear(&gy);
}
END_TEST

/* A random value of P bits, every bit random, near N(0, 1). */
static void random_bits(mpfr_ptr x, long P, vijp_rng *g)
{
    mpfr_t t, u;
    mpfr_inits2(P + 2, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, vijp_rng_normal(g), MPFR_RNDN);
    for (int b = 1; 53 * b < P + 53; b++) {
        mpfr_set_d(u, vijp_rng_uniform(g) - 0.5, MPFR_RNDN);
        mpfr_mul_2si(u, u, mpfr_get_exp(t) - 53 * b, MPFR_RNDN);
        mpfr_add(t, t, u, MPFR_RNDN);
    }
    mpfr_set(x, t, MPFR_RNDN);
    mpfr_clears(t, u, (mpfr_ptr)0);
}

/* The same at batch 2 and more (∂W formed a block of columns at a time by
 * the reference's fast products, drift/outer.c), against the reverse
 * pass's vjp_param in mpfr:P, packed, rounded to Q: bit for bit, at the
 * levels the memo holds (and held wider, as the upper level's gradients
 * formed at half its precision), at batch 2 (vo_dot alone), 9 and 16 (the fast
 * products, from VIJP_DDREF_MIN_BATCH), in blocks of 1, 3 (a block of 2
 * left over) and all 11 columns; with sums that cancel exactly to zero
 * (the fast test refuses them: vo_dot's +0), that cancel to one part in
 * 2^P (a wide dynamic range), a zero input row and a zero cotangent row. */
START_TEST(outer_param_batch_is_the_reverse_pass)
{
    static const long levels[][2] = {{106, 106}, {212, 170}, {64, 64}, {128, 128}, {106, 170}, {64, 128}};
    static const size_t batches[] = {2, 9, 16}, blocks[] = {1, 3, 11};
    vijp_rng g;
    vijp_rng_seed(&g, 37);
    for (size_t c = 0; c < sizeof levels / sizeof *levels; c++)
        for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
            long P = levels[c][0], Q = levels[c][1];
            size_t B = batches[bi];
            enum { M = 9, N = 11 };
            vijp_layer L;
            ck_assert_int_eq(vijp_layer_parse(&L, "dense:9x11", N, NULL), 0);
            vijp_format fP, fQ, fd;
            ck_assert(!vijp_format_mpfr(&fP, P, NULL) && !vijp_format_mpfr(&fQ, Q, NULL));
            fP.exact_dots = 1;
            vijp_format_fixed(&fd, VIJP_DOUBLE);
            vijp_mat h, gy, th, want;
            vijp_mat_init(&h, N, B, &fP), vijp_mat_init(&gy, M, B, &fP), vijp_mat_init(&th, M * N + M, 1, &fd);
            for (size_t e = 0; e < M * N + M; e++) th.d[e] = vijp_rng_normal(&g); /* unread by vjp_param */
            for (size_t e = 0; e < N * B; e++) random_bits(h.m[e], P, &g);
            for (size_t e = 0; e < M * B; e++) random_bits(gy.m[e], P, &g);
            /* row 0 of g: samples 0 and 1 opposite, the rest zero: ∂W(0, k) = 0 exactly where
             * x(k, 0) = x(k, 1) (k even); row 1: nearly opposite, the sums cancelling all but
             * about 2^-P of their terms */
            for (size_t b = 2; b < B; b++) mpfr_set_zero(gy.m[0 + b * M], 1), mpfr_set_zero(gy.m[1 + b * M], 1);
            mpfr_neg(gy.m[0 + M], gy.m[0], MPFR_RNDN);
            mpfr_t t;
            mpfr_init2(t, P);
            mpfr_mul_2si(t, gy.m[1], -P, MPFR_RNDN);
            mpfr_sub(gy.m[1 + M], t, gy.m[1], MPFR_RNDN); /* RN_P(2^-P·a − a): its sum with a cancels to ~2^-P·a */
            mpfr_clear(t);
            for (size_t k = 0; k < N; k += 2) mpfr_set(h.m[k + N], h.m[k], MPFR_RNDN);
            for (size_t b = 0; b < B; b++) mpfr_set_zero(h.m[3 + b * N], 1), mpfr_set_zero(gy.m[4 + b * M], -1);
            vijp_mat_init(&want, M * N + M, 1, &fP);
            ck_assert(!vijp_layer_vjp_param(&L, &th, &h, &gy, &want, NULL));
            vijp_mat_pack(&want);
            vijp_mat_pack_rounded(&want, &fQ);
            mpfr_t zero;
            vijp_packed_view(want.packed, 0, zero);
            ck_assert_msg(mpfr_zero_p(zero), "the cancelling sum is not zero"); /* the case is there */
            for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
                vijp_mat got;
                ck_assert_msg(drift_outer_param_blocks(&L, &h, &gy, &fP, &fQ, blocks[k], &got), "not formed");
                ck_assert(got.packed && !got.m && got.packed->prec == Q && got.fmt == &fQ);
                for (size_t e = 0; e < M * N + M; e++) {
                    mpfr_t a, b;
                    vijp_packed_view(want.packed, e, a), vijp_packed_view(got.packed, e, b);
                    int same = (mpfr_nan_p(a) && mpfr_nan_p(b)) || (mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b));
                    ck_assert_msg(same && vijp_packed_kind(want.packed, e) == vijp_packed_kind(got.packed, e),
                                  "%ld -> %ld, batch %zu, blocks of %zu, entry %zu: differs from the reverse pass's", P,
                                  Q, B, blocks[k], e);
                }
                vijp_mat_clear(&got);
            }
            vijp_mat got;
            ck_assert(drift_outer_param(&L, &h, &gy, &fP, &fQ, &got)); /* one block of all */
            vijp_mat_clear(&got);
            vijp_mat_clear(&h), vijp_mat_clear(&gy), vijp_mat_clear(&th), vijp_mat_clear(&want);
            vijp_layer_clear(&L);
        }
}
END_TEST

/* A dense layer's parameter gradient entry's scale (memo.h) against the
 * sums written out entry by entry: m = 3 outputs, n = 5 inputs, B = 4
 * samples, |g| and |h| small integers (exact sums), every W entry by its
 * row and column, every bias entry. */
START_TEST(dense_term_scale_by_entry)
{
    enum { M = 3, N = 5, B = 4 };
    double g[M * B], h[N * B];
    for (size_t b = 0; b < B; b++) {
        for (size_t r = 0; r < M; r++) g[r + b * M] = (double)(1 + r + 3 * b);
        for (size_t k = 0; k < N; k++) h[k + b * N] = (double)(2 + 5 * k + b * b);
    }
    const drift_term_scale t = {g, h, M, N, B};
    for (size_t r = 0; r < M; r++) {
        double bias = 0;
        for (size_t b = 0; b < B; b++) bias += (double)(1 + r + 3 * b);
        ck_assert_msg(drift_dense_term_scale(&t, M * N + r) == bias, "bias %zu", r);
        for (size_t k = 0; k < N; k++) {
            double want = 0;
            for (size_t b = 0; b < B; b++) want += (double)(1 + r + 3 * b) * (double)(2 + 5 * k + b * b);
            ck_assert_msg(drift_dense_term_scale(&t, r + k * M) == want, "dW(%zu, %zu): %g, want %g", r,
                          k, drift_dense_term_scale(&t, r + k * M), want);
        }
    }
}
END_TEST

/* A hand-built problem in binary32: spec at depth, width and batch,
 * drawn, then given the values θ_i (thetas[i], NULL: kept), X and T
 * (column-major) the test derives its expectations from. */
typedef struct {
    vijp_grad_setup gs;
    vijp_net net;
    vijp_problem pf;
} built_problem;

static void build_problem(built_problem *b, const char *spec, size_t depth, size_t width, size_t batch,
                          vijp_loss_kind loss, const double *const *thetas, const double *x, const double *t)
{
    b->gs = (vijp_grad_setup){.spec = spec, .depth = depth, .width = width, .batch = batch, .seed = test_seed(),
                              .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = loss};
    ck_assert(!vijp_format_parse("binary32", &b->gs.fmt, NULL));
    vijp_error err = {0};
    ck_assert_msg(!vijp_problem_draw(&b->gs, &b->net, &err) && !vijp_problem_setup_drawn(&b->gs, &b->net, &b->pf, &err),
                  "%s", err.msg);
    for (size_t i = 0; i < depth; i++)
        for (size_t e = 0; thetas[i] && e < vijp_mat_len(&b->pf.theta[i]); e++)
            vijp_mat_set_entry_d(&b->pf.theta[i], e, thetas[i][e]);
    for (size_t e = 0; e < vijp_mat_len(&b->pf.X); e++) vijp_mat_set_entry_d(&b->pf.X, e, x[e]);
    for (size_t e = 0; e < vijp_mat_len(&b->pf.T); e++) vijp_mat_set_entry_d(&b->pf.T, e, t[e]);
}

static void built_problem_clear(built_problem *b)
{
    vijp_problem_clear(&b->pf, &b->net);
    vijp_net_free(&b->net);
}

/* The validation's comparison of the levels at lo and 2·lo bits on b's
 * problem in a memo of its own or a keyed one (dropped after). */
static void validate_levels(built_problem *b, int keyed, long lo, vijp_xnum *rel, vijp_xnum *ulps)
{
    vijp_error err = {0};
    vijp_drift_memo *memo = vijp_drift_memo_new();
    vijp_drift_memo_bind(memo, &b->gs, &b->net, &b->pf, keyed);
    const vijp_grads *level;
    ck_assert_msg(!vijp_drift_memo_backprop(memo, &b->net, &b->pf, lo, 1, &level, &err), "%s", err.msg);
    size_t n = 1 + 2 * b->net.depth;
    vijp_compare_cache *cache = calloc(n, sizeof *cache);
    ck_assert_ptr_nonnull(cache);
    ck_assert_msg(!vijp_drift_memo_next_level(memo, &b->net, &b->pf, lo, &b->gs.fmt, cache, rel, ulps, &err), "%s",
                  err.msg);
    for (size_t i = 0; i < n; i++) vijp_compare_cache_clear(&cache[i]);
    free(cache);
    vijp_drift_memo_free(memo);
}

/* A dense layer's parameter gradient at batch 2 whose entry cancels far
 * below its terms does not stop the validation: the upper level forms it
 * at half its precision, within 4·2^-p of its terms' scale (memo.c,
 * form_half), and compares the layer's input instead.
 * One dense:3 layer in binary32, square loss (g = y at T = 0), W's first
 * row (1, 1, 0) and the rest 0, no bias, x_1 = (1, 2^-80, 1) and x_2 =
 * (1, 0, −1): y_1 = 1 + 2^-80 (64 bits round it to 1), y_2 = 1, and
 * ∂W(0, 2) = y_1 − y_2 = 2^-80 exactly, 0 at 64 bits: 2^23 of its ulps
 * (2^-80 · 2^-23) apart, but 2^-58 of the ulp at its terms' scale
 * |y_1| + |y_2| = 2 (2^-22).  The upper level's, from RN_64(y_1) = 1, is
 * 0 as well: 2^-80 from the exact, within 4·2^-64·2.  The validation
 * takes the gradient at its a-priori bounds: 2^(2 + 24 − 64) = 2^-38 of
 * binary32's ulp at the terms' scale (and k's second-order terms: the sum
 * in double-double, half.h), and in norm 4·2^-64·‖T‖/‖∂θ‖ with
 * T = (2, 2^-80, 2 | 2) and ∂θ = (2, 2^-80, 0 | 2): 2^-62·√12/√8, about
 * 2^-61.7.  g and ∇x hold y_1 itself: 2^-80 off 1 at 64 bits, 2^-57 of
 * binary32's ulp; the input x is exact in both levels.  A keyed memo, so that the levels stay to be
 * compared plainly, and again with the upper level found rather than
 * computed; then a run's own memo (the upper level held at the
 * comparisons' precision, its |h| freed layer by layer). */
/* 2^-38 and the second-order terms of the bound's constant k (4 plus
 * Dot2's 2^(p+1)·γ_8·γ_5, about 2^-37.7 of 4, and the holding's
 * 2^(1−Q+p) at p = 64, B = 2, Q = 128), below 2^-30 of it. */
static int about_2_38(vijp_xnum ulps)
{
    return vijp_xnum_le(vijp_xnum_of(0x1p-38), ulps) && vijp_xnum_le(ulps, vijp_xnum_of(0x1p-38 * (1 + 0x1p-30)));
}

START_TEST(param_gradient_validated_at_terms_scale)
{
    static const double theta[12] = {1, 0, 0, 1}, x[6] = {1, 0x1p-80, 1, 1, 0, -1}, t[6] = {0};
    const double *const thetas[1] = {theta};
    built_problem b;
    build_problem(&b, "dense:3", 1, 3, 2, VIJP_LOSS_SQUARE, thetas, x, t);
    vijp_error err = {0};
    vijp_drift_memo *memo = vijp_drift_memo_new();
    vijp_drift_memo_bind(memo, &b.gs, &b.net, &b.pf, 1);
    const vijp_grads *lo, *hi;
    ck_assert_msg(!vijp_drift_memo_backprop(memo, &b.net, &b.pf, 64, 0, &lo, &err), "%s", err.msg);
    vijp_compare_cache cache[3] = {0};
    for (int pass = 0; pass < 2; pass++) { /* computed, then found */
        vijp_xnum rel, ulps;
        ck_assert_msg(!vijp_drift_memo_next_level(memo, &b.net, &b.pf, 64, &b.gs.fmt, cache, &rel, &ulps, &err), "%s",
                      err.msg);
        ck_assert_msg(about_2_38(ulps), "pass %d: ulps %g, want 2^-38", pass, vijp_xnum_double(ulps));
        ck_assert_msg(vijp_xnum_le(vijp_xnum_of(0x1p-62), rel) && vijp_xnum_le(rel, vijp_xnum_of(0x1p-61)),
                      "pass %d: rel %g, want about 2^-61.7", pass, vijp_xnum_double(rel));
        for (size_t i = 0; i < 3; i++) vijp_compare_cache_clear(&cache[i]);
    }
    ck_assert_uint_eq(vijp_drift_memo_computed(memo), 2);
    ck_assert(!vijp_drift_memo_backprop(memo, &b.net, &b.pf, 128, 0, &hi, &err));
    vijp_metric plain; /* the 2^-80 entry: 0 in both levels (above) */
    vijp_compare_rel_ulps(&lo->grad_theta[0], &hi->grad_theta[0], &b.gs.fmt, &plain, NULL);
    ck_assert_msg(vijp_xnum_cmp(plain.ulps, vijp_xnum_of(0)) == 0, "plain ulps %g, want 0",
                  vijp_xnum_double(plain.ulps));
    vijp_compare_rel_ulps(&lo->g[0], &hi->g[0], &b.gs.fmt, &plain, NULL);
    ck_assert_msg(vijp_xnum_cmp(plain.ulps, vijp_xnum_of(0x1p-57)) == 0, "g: ulps %g, want 2^-57",
                  vijp_xnum_double(plain.ulps));
    vijp_drift_memo_free(memo);
    vijp_xnum rel, ulps; /* a run's own memo */
    validate_levels(&b, 0, 64, &rel, &ulps);
    ck_assert_msg(about_2_38(ulps), "own memo: ulps %g, want 2^-38", vijp_xnum_double(ulps));
    built_problem_clear(&b);
}
END_TEST

/* A parameter gradient that cancels to an exact zero over the batch has
 * no useful a-priori bound (form_half's is relative to its terms): the
 * upper level forms it at its own precision and the two levels' are
 * compared, which settles at once.  One dense:2 layer in binary32, W = I,
 * b = 0, square loss (g = y − T), x = (a, −a, 0) with a = (1, 1/2) and
 * T = (0, −2a, 2a): g = (a, a, −2a), so ∂W = a·aᵀ − a·aᵀ = 0 and ∂b =
 * a + a − 2a = 0 exactly, as is every value at every precision: the
 * validation's rel and ulps are both 0, where the bound alone would give
 * +inf and never settle.  A keyed memo and a run's own. */
START_TEST(cancelled_param_gradient_compared)
{
    static const double theta[6] = {1, 0, 0, 1, 0, 0}, x[6] = {1, 0.5, -1, -0.5, 0, 0}, t[6] = {0, 0, -2, -1, 2, 1};
    const double *const thetas[1] = {theta};
    built_problem b;
    build_problem(&b, "dense:2", 1, 2, 3, VIJP_LOSS_SQUARE, thetas, x, t);
    for (int keyed = 0; keyed < 2; keyed++) {
        vijp_xnum rel, ulps;
        validate_levels(&b, keyed, 64, &rel, &ulps);
        ck_assert_msg(vijp_xnum_cmp(rel, vijp_xnum_of(0)) == 0 && vijp_xnum_cmp(ulps, vijp_xnum_of(0)) == 0,
                      "keyed %d: rel %g, ulps %g, want 0 and 0", keyed, vijp_xnum_double(rel), vijp_xnum_double(ulps));
    }
    built_problem_clear(&b);
}
END_TEST

/* Where the upper level forms a dense gradient at half its precision, the
 * validation compares the two levels' inputs of the layer instead of the
 * gradients, and that comparison is what sees a forward pass that loses
 * the lower level's bits.  tanh, dense:2, tanh, dense:2 in binary32 with a
 * linear loss of c = (1, 1) at batch 1: the last layer's W = 0, so every
 * cotangent below it and ∇x are exact zeros and agree at any precision;
 * the second layer's W = 2^23·[1 −1; 0 0] takes the difference of tanh at
 * x = (2^-1, 2^-1 + 2^-24), 2^-24.3 or so, whose 40-bit roundings carry
 * 2^-41 each: about 2^-17 of the difference, which tanh passes on to the
 * last layer's input h_3 (levels of 40 and 80 bits: half of 80 is 12
 * past binary32's 24, the least form_half takes).  The last layer's
 * gradient c·h_3ᵀ at batch 1 has its bound 4·2^-40 = 2^-38 in norm; the
 * validation's rel must come out near 2^-17 from the inputs, above 2^-25. */
START_TEST(inputs_compared_where_gradients_are_not)
{
    static const double wide[6] = {0x1p23, 0, -0x1p23, 0, 0, 0}, zero[6] = {0}, x[2] = {0.5, 0.5 + 0x1p-24},
                        c[2] = {1, 1};
    const double *const thetas[4] = {NULL, wide, NULL, zero}; /* W column-major, then b */
    built_problem b;
    build_problem(&b, "tanh,dense:2", 4, 2, 1, VIJP_LOSS_LINEAR, thetas, x, c);
    vijp_xnum rel, ulps;
    validate_levels(&b, 0, 40, &rel, &ulps);
    ck_assert_msg(vijp_xnum_le(vijp_xnum_of(0x1p-25), rel) && vijp_xnum_le(rel, vijp_xnum_of(0x1p-10)),
                  "rel %g, want about 2^-17", vijp_xnum_double(rel));
    built_problem_clear(&b);
}
END_TEST

/* Every dense layer's ∇θ in the upper level g (formed from its g and h
 * rounded to half its precision p: memo.c's form_half) within its a-priori
 * bound of the same level's exact gradient, of which want holds RN_2p:
 * |a − want| <= k·2^-p·T + 2^(1−2p)·|want|, T = Σ_b |g(r, b)|·|h(k, b)|
 * (Σ_b |g(r, b)| for ∂b), with want's g and the activations H computed
 * apart at 2p, and k = 4 + 2^(p+1)·γ_4B·γ_(2B+1) + 2^(1−Q+p) (u = 2^-53,
 * γ_n = nu/(1 − nu)): rounding g and h to p bits, summing the 2B terms
 * of the double-double products by Dot2 (Ogita, Rump and Oishi 2005,
 * with a double-double x), rounding the sum at the held precision Q.
 * The bound's own arithmetic in MPFR at 4p bits. */
static int params_within_half_bound(const vijp_grads *g, const vijp_grads *want, const vijp_mat *H,
                                    const vijp_net *net, long p, long Q)
{
    int ok = 1;
    mpfr_t d, t, b;
    mpfr_inits2(4 * p, d, t, b, (mpfr_ptr)0);
    for (size_t i = 0; i < net->depth && ok; i++) {
        if (strcmp(net->layers[i].type->name, "dense")) continue;
        const vijp_mat *a = &g->grad_theta[i], *w = &want->grad_theta[i], *gi = &want->g[i], *h = &H[i];
        size_t n = vijp_mat_len(w), m = gi->rows, in = h->rows, B = gi->cols;
        mpfr_t *av = calloc(n, sizeof *av), *wv = calloc(n, sizeof *wv);
        mpfr_t *gv = calloc(m * B, sizeof *gv), *hv = calloc(in * B, sizeof *hv);
        ck_assert(av && wv && gv && hv && vijp_mat_len(a) == n && n == m * in + m);
        for (size_t e = 0; e < n; e++) mpfr_inits2(4 * p, av[e], wv[e], (mpfr_ptr)0);
        for (size_t e = 0; e < m * B; e++) mpfr_init2(gv[e], 4 * p);
        for (size_t e = 0; e < in * B; e++) mpfr_init2(hv[e], 4 * p);
        vijp_mat_get_mpfr(a, av), vijp_mat_get_mpfr(w, wv), vijp_mat_get_mpfr(gi, gv), vijp_mat_get_mpfr(h, hv);
        const double u = 0x1p-53, N = 2.0 * (double)B;
        double k2 = 4 + ldexp(2 * (2 * N * u / (1 - 2 * N * u)) * ((N + 1) * u / (1 - (N + 1) * u)), (int)p) +
                    ldexp(2, (int)(1 - Q + p));
        for (size_t e = 0; e < n && ok; e++) {
            int bias = e >= m * in;
            size_t r = bias ? e - m * in : e % m, k = bias ? 0 : e / m;
            mpfr_set_ui(b, 0, MPFR_RNDN);
            for (size_t c = 0; c < B; c++) {
                mpfr_abs(t, gv[r + c * m], MPFR_RNDU);
                if (!bias) mpfr_mul(t, t, hv[k + c * in], MPFR_RNDU), mpfr_abs(t, t, MPFR_RNDU);
                mpfr_add(b, b, t, MPFR_RNDU);
            }
            mpfr_mul_d(b, b, k2 * (1 + 0x1p-50), MPFR_RNDU), mpfr_mul_2si(b, b, -p, MPFR_RNDU); /* k·2^-p·T */
            mpfr_abs(t, wv[e], MPFR_RNDU);
            mpfr_mul_2si(t, t, 1 - 2 * p, MPFR_RNDU);
            mpfr_add(b, b, t, MPFR_RNDU);
            mpfr_sub(d, av[e], wv[e], MPFR_RNDN); /* exact: 4p bits hold both */
            mpfr_abs(d, d, MPFR_RNDN);
            ok = mpfr_cmp(d, b) <= 0;
        }
        for (size_t e = 0; e < n; e++) mpfr_clears(av[e], wv[e], (mpfr_ptr)0);
        for (size_t e = 0; e < m * B; e++) mpfr_clear(gv[e]);
        for (size_t e = 0; e < in * B; e++) mpfr_clear(hv[e]);
        free(av), free(wv), free(gv), free(hv);
    }
    mpfr_clears(d, t, b, (mpfr_ptr)0);
    return ok;
}

/* A curve's own memo holds its upper level at the comparisons' precision
 * once compared with the lower one (memo.c: what the engines are measured
 * against and the next level is compared with): double's 212-bit level at
 * 170 bits, each value RN_170 of backprop at 212; binary32's 128-bit level
 * stays at 128 (its comparisons' precision).  Computed once: asking for
 * the level again finds it. */
START_TEST(own_memo_holds_upper_level_rounded)
{
    static const char *const fmts[] = {"double", "binary32"};
    static const long held[] = {170, 128};
    for (size_t k = 0; k < 2; k++) {
        vijp_grad_setup gs = {.spec = "dense:32,gelu", .depth = 4, .width = 32, .batch = 8, .seed = test_seed(),
                              .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
        ck_assert(!vijp_format_parse(fmts[k], &gs.fmt, NULL));
        vijp_error err = {0};
        vijp_net net;
        vijp_problem pf;
        ck_assert_msg(!vijp_problem_draw(&gs, &net, &err) && !vijp_problem_setup_drawn(&gs, &net, &pf, &err), "%s", err.msg);
        vijp_drift_memo *memo = vijp_drift_memo_new();
        vijp_drift_memo_bind(memo, &gs, &net, &pf, 0);
        long first = vijp_drift_ref_prec_first(&gs.fmt, 0);
        ck_assert_int_eq((long)vijp_compare_prec(&gs.fmt), held[k]);
        const vijp_grads *level;
        ck_assert_msg(!vijp_drift_memo_backprop(memo, &net, &pf, first, 0, &level, &err), "%s", err.msg);
        vijp_compare_cache *cache = calloc(2 * net.depth + 1, sizeof *cache);
        ck_assert_ptr_nonnull(cache);
        vijp_xnum rel, ulps;
        ck_assert_msg(!vijp_drift_memo_next_level(memo, &net, &pf, first, &gs.fmt, cache, &rel, &ulps, &err), "%s",
                      err.msg);
        ck_assert(!vijp_drift_memo_backprop(memo, &net, &pf, 2 * first, 0, &level, &err));
        ck_assert_uint_eq(vijp_drift_memo_computed(memo), 2);
        /* the level computed apart, at its own precision, on θ in MPFR at 53 bits */
        vijp_format F53, lf, hf;
        ck_assert(!vijp_format_mpfr(&F53, 53, NULL) && !vijp_format_mpfr(&lf, 2 * first, NULL) &&
                  !vijp_format_mpfr(&hf, held[k], NULL));
        lf.exact_dots = 1;
        vijp_mat *th53 = calloc(net.depth, sizeof *th53), X, T;
        ck_assert_ptr_nonnull(th53);
        for (size_t i = 0; i < net.depth; i++)
            vijp_mat_init(&th53[i], pf.theta[i].rows, 1, &F53), vijp_mat_convert(&th53[i], &pf.theta[i]);
        vijp_mat_init(&X, pf.X.rows, pf.X.cols, &lf), vijp_mat_convert(&X, &pf.X);
        vijp_mat_init(&T, pf.T.rows, pf.T.cols, &lf), vijp_mat_convert(&T, &pf.T);
        vijp_grads want;
        ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th53, &X, &T, &want, &err), "%s", err.msg);
        ck_assert_msg(held_at(level, &want, &hf, 1), "%s: the %ld-bit level is not held at %ld bits", fmts[k],
                      2 * first, held[k]);
        /* its dense ∇θ formed at half its precision: within that bound */
        vijp_mat *H = calloc(net.depth + 1, sizeof *H);
        ck_assert_ptr_nonnull(H);
        vijp_mat_init(&H[0], X.rows, X.cols, &lf), vijp_mat_copy(&H[0], &X);
        for (size_t i = 0; i < net.depth; i++) {
            vijp_mat_init(&H[i + 1], net.layers[i].out, X.cols, &lf);
            ck_assert_msg(!vijp_layer_forward(&net.layers[i], &th53[i], &H[i], &H[i + 1], &err), "%s", err.msg);
        }
        ck_assert_msg(params_within_half_bound(level, &want, H, &net, first, held[k]),
                      "%s: a dense gradient past its bound at %ld bits", fmts[k], first);
        for (size_t i = 0; i <= net.depth; i++) vijp_mat_clear(&H[i]);
        free(H);
        vijp_grads_clear(&want), vijp_mat_clear(&X), vijp_mat_clear(&T);
        for (size_t i = 0; i < net.depth; i++) vijp_mat_clear(&th53[i]);
        for (size_t i = 0; i < 2 * net.depth + 1; i++) vijp_compare_cache_clear(&cache[i]);
        free(th53), free(cache);
        vijp_drift_memo_free(memo);
        vijp_problem_clear(&pf, &net);
        vijp_net_free(&net);
    }
}
END_TEST

/* A cap too low to validate fails with VIJP_EDOMAIN and leaves the curve
 * empty (the sanitized run checks that nothing leaks). */
START_TEST(reference_cap)
{
    vijp_drift_setup s = setup("dense:16,leaky:0.5", 32, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed());
    s.ref_prec_start = 16, s.ref_prec_max = 32;
    vijp_drift_curve c;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_drift_run(&s, &c, &err), VIJP_EDOMAIN);
    ck_assert(err.msg[0] != 0);
    ck_assert(c.runs == NULL && c.n_runs == 0 && c.kappa == NULL && c.lyap_cum == NULL && c.predicted == NULL);
    vijp_drift_curve_clear(&c); /* harmless on an empty curve */
}
END_TEST

/* The precision limits, at their edges: the first reference
 * (max(64, min(2P, P + 64)), or --ref-prec) must double at least once within
 * the cap, so mpfr:P up to cap/2 − 64 (cap/4 under 256) and caps from twice
 * the first precision.  Refused before anything runs, in the user's terms
 * (--ref-prec-max 5 once ran, failed and left an empty folder). */
START_TEST(reference_prec_limits)
{
    static const struct {
        const char *format;
        long first;
    } starts[] = {{"bfloat16", 64}, {"binary32", 64}, {"bfloat16+binary32", 64}, {"double", 106},
                  {"mpfr:64", 128}, {"mpfr:65", 129}, {"mpfr:113", 177}};
    vijp_format f;
    vijp_error err = {0};
    for (size_t k = 0; k < sizeof starts / sizeof *starts; k++) {
        ck_assert(!vijp_format_parse(starts[k].format, &f, NULL));
        ck_assert_msg(vijp_drift_ref_prec_first(&f, 0) == starts[k].first, "%s starts at %ld, want %ld",
                      starts[k].format, vijp_drift_ref_prec_first(&f, 0), starts[k].first);
        ck_assert_int_eq(vijp_drift_ref_prec_first(&f, 300), 300); /* --ref-prec */
    }
    ck_assert(!vijp_format_parse("mpfr:4032", &f, NULL));
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 0, &err), 0); /* 4096 → 8192 = the default cap */
    ck_assert(!vijp_format_parse("mpfr:4033", &f, NULL));
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 0, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "mpfr:4032"), "should name the largest format: %s", err.msg);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 8194, &err), 0);
    ck_assert(!vijp_format_parse("mpfr:40", &f, NULL)); /* under 256 the 2P rule decides: 80 → 160 */
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 160, &err), 0);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 159, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "mpfr:39"), "should name the largest format: %s", err.msg);
    ck_assert(!vijp_format_parse("double", &f, NULL));
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 212, &err), 0);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 211, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 0, 5, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "212"), "should say the smallest cap: %s", err.msg);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 16, 32, &err), 0);
    ck_assert_int_eq(vijp_drift_check_ref_prec(&f, 17, 32, &err), VIJP_EINVAL);
    /* and vijp_drift_run refuses before running */
    vijp_drift_setup s = setup("dense:4,leaky:0.5", 2, 4, VIJP_INIT_ORTHOGONAL, "double", test_seed());
    s.ref_prec_max = 211;
    vijp_drift_curve c;
    ck_assert_int_eq(vijp_drift_run(&s, &c, &err), VIJP_EINVAL);
    ck_assert(c.runs == NULL);
    /* grad's reference runs at 2P <= 65536 bits */
    ck_assert(!vijp_format_parse("mpfr:32768", &f, NULL));
    ck_assert_int_eq(vijp_grad_check_format(&f, &err), 0);
    ck_assert(!vijp_format_parse("mpfr:32769", &f, NULL));
    ck_assert_int_eq(vijp_grad_check_format(&f, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "mpfr:32768"), "should name the largest format: %s", err.msg);
}
END_TEST

/* Growth against the Lyapunov prediction: dense:16,leaky:A, orthogonal init,
 * depth 64, double, three seeds.  The measured growth of Moonwalk's g errors
 * and predicted_rate agree within a factor 2.  The raw asymptotic spread
 * lyap_rate agrees with the fit within a factor 2 only for A <= 0.7: at
 * A = 0.9 the exponential growth is so weak (~0.003 decades/layer) that the
 * √i accumulation of the local rounding errors dominates the fitted slope at
 * depth 64 (fit ≈ 0.005–0.011 against a spread ≈ 0.0024–0.0035), which is
 * exactly why predicted_rate models the accumulation.
 *
 * Measured with the default seeds 20261202 + {0, 1, 2}, fit/predicted_rate
 * (fit/lyap_rate):
 *   A 0.1: 1.01 0.96 0.96 (1.01 0.96 0.94)   0.3: 0.97 0.99 0.98 (0.94 1.01 0.99)
 *   A 0.5: 0.98 1.00 1.25 (0.94 0.99 1.13)   0.7: 0.68 1.04 0.87 (0.86 1.31 1.01)
 *   A 0.9: 0.45 0.44 0.78 (1.40 1.94 2.90)
 * Over 150 other seeds the ratio to predicted_rate stays in [0.60, 1.32] at
 * A <= 0.5, but leaves [1/2, 2] for 6/150 seeds at A = 0.7 (0.35–1.57) and
 * 21/150 at A = 0.9 (0.01–1.38).  The slope of one realisation of a weakly
 * amplified random walk varies that much: before the initialisers changed
 * in their last bits (Gram-Schmidt instead of LAPACK QR), the same seeds gave
 * 0.48 at A = 0.7.  So a per-seed factor 2 is not a property of these
 * depth-64 curves at A >= 0.7: A = 0.7 and 0.9 are held out of this
 * per-seed test (see suite_drift) and checked over seeds below instead. */
static const double lyap_slopes[] = {0.1, 0.3, 0.5, 0.7, 0.9};

START_TEST(growth_vs_lyapunov)
{
    double A = lyap_slopes[_i];
    char spec[64];
    snprintf(spec, sizeof spec, "dense:16,leaky:%g", A);
    for (uint64_t k = 0; k < 3; k++) {
        vijp_drift_setup s = setup(spec, 64, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed() + k);
        vijp_drift_curve c;
        drift(&s, &c);
        vijp_xnum e[64];
        for (size_t i = 0; i < 64; i++) e[i] = c.runs[1].g[i].rel;
        double fit = vijp_growth_fit(e, 64, VIJP_FIT_CEILING, NULL), r = fit / c.predicted_rate;
        ck_assert_msg(r >= 0.5 && r <= 2, "A = %g, seed %llu: fit %.4f, predicted %.4f (ratio %.2f)", A,
                      (unsigned long long)s.problem.seed, fit, c.predicted_rate, r);
        if (A <= 0.7) {
            double l = fit / c.lyap_rate;
            ck_assert_msg(l >= 0.5 && l <= 2, "A = %g, seed %llu: fit %.4f, spread %.4f (ratio %.2f)", A,
                          (unsigned long long)s.problem.seed, fit, c.lyap_rate, l);
        }
        vijp_drift_curve_clear(&c);
    }
}
END_TEST

/* Where one seed is too noisy (A >= 0.7 above), the mean over seeds is
 * not: over eight seeds, Σ fit / Σ predicted_rate lies in [1/2, 2] for
 * A = 0.7 at depth 64 and for A = 0.9 at depth 256 (deeper, so the weak
 * exponential growth shows over the √i accumulation and over the start
 * offset below).  A ratio of sums, not a geometric mean of per-seed ratios:
 * at A = 0.9 a seed's fitted slope is 0.001–0.004 decades per layer and can
 * come out negative (its log NaN, seen once in 160 curves).
 *
 * The fit sits below the prediction because the model starts every curve at
 * u while Moonwalk's g_0 already carries ~8u from the reverse pass, which
 * flattens the measured slope; how far below depends on the BLAS kernel,
 * whose dot products make the per-layer errors: measured on 20 disjoint
 * seed octuples (5000 + 100 s + {0..7}), OpenBLAS's Haswell kernel (also
 * the Zen one) gives A = 0.7: 0.72–0.95, A = 0.9: 0.60–0.84; its SkylakeX
 * kernel (AVX-512 machines) A = 0.7: 0.62–0.89, A = 0.9: 0.51–0.78.  The
 * earlier form (geometric mean of three seeds, A = 0.9 at depth 128) gave
 * 0.54–0.90 on Haswell but 0.44–0.81 on SkylakeX and failed there. */
#define GROWTH_SEEDS 8
START_TEST(growth_vs_lyapunov_over_seeds)
{
    static const struct {
        double A;
        size_t depth;
    } cases[] = {{0.7, 64}, {0.9, 256}};
    double A = cases[_i].A, fit_sum = 0, predicted_sum = 0;
    vijp_xnum e[256];
    size_t D = cases[_i].depth;
    char spec[64];
    snprintf(spec, sizeof spec, "dense:16,leaky:%g", A);
    for (uint64_t k = 0; k < GROWTH_SEEDS; k++) {
        vijp_drift_setup s = setup(spec, D, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed() + k);
        vijp_drift_curve c;
        drift(&s, &c);
        for (size_t i = 0; i < D; i++) e[i] = c.runs[1].g[i].rel;
        fit_sum += vijp_growth_fit(e, D, VIJP_FIT_CEILING, NULL);
        predicted_sum += c.predicted_rate;
        vijp_drift_curve_clear(&c);
    }
    double r = fit_sum / predicted_sum;
    ck_assert_msg(r >= 0.5 && r <= 2, "A = %g, depth %zu: fit/predicted over %d seeds %.3f", A, D, GROWTH_SEEDS, r);
}
END_TEST

/* predicted and predicted_rate are what drift.h says they are, recomputed
 * from lyap_cum: predicted_i = u (Σ_{j<=i} 10^(2 (cum_i − cum_{j−1})))^½.
 * Each exponent (|cum| <= 21 here) is off by a few ulps, ~1e-14 absolute,
 * so each power by ln 10 · 1e-14 ≈ 2.3e-14 relative; the sum of <= 64
 * positive terms adds 64u ≈ 7e-15, the square root halves, and any log-space
 * evaluation costs another ~2.3e-14: 1e-12 relative bounds the difference
 * with margin.  The rate is the fit of those values: within 1e-12 relative
 * their log10 differ by at most δ = 1e-12/ln 10 ≈ 4.4e-13 (beyond any common
 * shift, which the slope ignores), which moves a 64-point slope by at most
 * 2δ Σ|x − x̄| / Σ(x − x̄)² = 2δ·1024/21840 ≈ 4e-14 decades per layer: 1e-13.  Breaking the √i accumulation (keeping only the
 * j = 1 term) fails here at every slope; growth_vs_lyapunov at A <= 0.5
 * would not notice it. */
START_TEST(predicted_formula)
{
    char spec[64];
    for (size_t a = 0; a < 5; a++) {
        snprintf(spec, sizeof spec, "dense:16,leaky:%g", lyap_slopes[a]);
        vijp_drift_setup s = setup(spec, 64, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed());
        vijp_drift_curve c;
        drift(&s, &c);
        ck_assert(XD(c.u) == 0x1p-53);
        double want[64];
        for (size_t i = 0; i < 64; i++) {
            double sum = 0;
            for (size_t j = 0; j <= i; j++) sum += pow(10, 2 * (c.lyap_cum[i] - (j ? c.lyap_cum[j - 1] : 0)));
            want[i] = XD(c.u) * sqrt(sum);
            ck_assert_msg(fabs(XD(c.predicted[i]) / want[i] - 1) <= 1e-12, "%s: predicted_%zu %.17g, formula %.17g", spec,
                          i + 1, XD(c.predicted[i]), want[i]);
        }
        vijp_xnum wx[64];
        for (size_t i = 0; i < 64; i++) wx[i] = vijp_xnum_of(want[i]);
        double rate = vijp_growth_fit(wx, 64, INFINITY, NULL);
        ck_assert_msg(fabs(c.predicted_rate - rate) <= 1e-13, "%s: predicted_rate %.17g, fit of the formula %.17g",
                      spec, c.predicted_rate, rate);
        ck_assert(fabs(c.lyap_rate - c.lyap_cum[63] / 64) == 0);
        vijp_drift_curve_clear(&c);
    }
}
END_TEST

/* A net with a non-submersive layer makes the Jacobian product singular:
 * softmax's exact kernel (J·1 = 0) shows up as a stretch ~1e-17 (not 0),
 * ReLU's as an exact 0.  Either way the spread is infinite from that layer on
 * and no prediction is made (the fit is NaN), rather than a finite number
 * that means nothing; a leaky net of the same shape keeps a finite one. */
START_TEST(singular_product_has_no_prediction)
{
    static const char *const specs[] = {"dense:16,softmax", "dense:16,relu", "dense:16,leaky:0.5"};
    for (size_t k = 0; k < 3; k++) {
        vijp_drift_setup s = setup(specs[k], 16, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed());
        vijp_drift_curve c;
        drift(&s, &c);
        if (k < 2) {
            ck_assert_msg(isinf(c.lyap_cum[1]) && isinf(c.lyap_cum[15]), "%s: spread %g", specs[k], c.lyap_cum[15]);
            ck_assert_msg(isnan(c.predicted_rate) || isinf(c.predicted_rate), "%s: predicted rate %g", specs[k], c.predicted_rate);
        } else {
            ck_assert_msg(isfinite(c.lyap_cum[15]) && isfinite(c.predicted_rate), "%s: %g", specs[k], c.lyap_cum[15]);
        }
        vijp_drift_curve_clear(&c);
    }
}
END_TEST

/* The first-order bound e_i <= κ_i (e_{i−1} + n_i u) holds on every layer;
 * it neglects second-order terms (O(e²) against e, e <= 1e-12 here), so a
 * factor 1.1 covers them.  The orthogonal nets of growth_vs_lyapunov (all five
 * slopes, measured max e/bound 0.14–0.42 per run) and two depth-8 Gaussian
 * nets, whose κ_i reach hundreds (e <= 8e-13, e/bound <= 0.03). */
START_TEST(first_order_bound)
{
    char spec[64];
    for (size_t a = 0; a < 5; a++)
        for (uint64_t k = 0; k < 3; k++) {
            snprintf(spec, sizeof spec, "dense:16,leaky:%g", lyap_slopes[a]);
            vijp_drift_setup s = setup(spec, 64, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed() + k);
            vijp_drift_curve c;
            drift(&s, &c);
            ck_assert(c.runs[0].bound == NULL && c.runs[1].bound != NULL);
            for (size_t i = 0; i < 64; i++)
                ck_assert_msg(XD(c.runs[1].g[i].rel) <= 1.1 * XD(c.runs[1].bound[i]), "%s seed %llu: g_%zu error %g > bound %g",
                              spec, (unsigned long long)s.problem.seed, i + 1, XD(c.runs[1].g[i].rel), XD(c.runs[1].bound[i]));
            vijp_drift_curve_clear(&c);
        }
    static const char *gauss[] = {"dense:16,tanh", "dense:16,leaky:0.5"};
    for (size_t k = 0; k < 2; k++) {
        vijp_drift_setup s = setup(gauss[k], 8, 16, VIJP_INIT_GAUSSIAN, "double", test_seed());
        vijp_drift_curve c;
        drift(&s, &c);
        for (size_t i = 0; i < s.problem.depth; i++)
            ck_assert_msg(XD(c.runs[1].g[i].rel) <= 1.1 * XD(c.runs[1].bound[i]), "%s: g_%zu error %g > bound %g", gauss[k],
                          i + 1, XD(c.runs[1].g[i].rel), XD(c.runs[1].bound[i]));
        vijp_drift_curve_clear(&c);
    }
}
END_TEST

/* In a mixed format the stored values are rounded to the storage format
 * (u = 2^-8 for bfloat16, 2^-4 for e4m3), not to the accumulation's 2^-24:
 * the curve's u is the storage's, and the bound adds it to each layer's
 * n_i·2^-24, so it holds where the errors are the storage's (the bound was
 * once built from 2^-24 alone: measured 4.8e-3 against a bound of 4.2e-3
 * at layer 1 in bfloat16+binary32).  The bound is first order: it drops
 * terms of order e² against e, and here e <= 0.14 (e4m3's largest, three
 * seeds), so they add at most 14% of it: the factor 1.2.  Measured, the
 * largest e/bound is 0.57 (bfloat16), 0.51 (binary16), 0.61 (e4m3). */
START_TEST(first_order_bound_mixed)
{
    static const char *const fmts[] = {"bfloat16+binary32", "binary16+binary32", "e4m3+binary32"};
    static const int store_bits[] = {8, 11, 4};
    for (size_t f = 0; f < 3; f++)
        for (uint64_t k = 0; k < 3; k++) {
            vijp_drift_setup s = setup("dense:8,leaky:0.5", 8, 8, VIJP_INIT_ORTHOGONAL, fmts[f], test_seed() + k);
            vijp_drift_curve c;
            drift(&s, &c);
            ck_assert_msg(XD(c.u) == ldexp(1, -store_bits[f]), "%s: u = %g", fmts[f], XD(c.u));
            for (size_t i = 0; i < s.problem.depth; i++)
                ck_assert_msg(XD(c.runs[1].g[i].rel) <= 1.2 * XD(c.runs[1].bound[i]), "%s seed %llu: g_%zu error %g > bound %g",
                              fmts[f], (unsigned long long)s.problem.seed, i + 1, XD(c.runs[1].g[i].rel),
                              XD(c.runs[1].bound[i]));
            vijp_drift_curve_clear(&c);
        }
}
END_TEST

/* Engine failure is a measurement: bfloat16 dense:32,leaky:0.1 with Gaussian
 * weights at depth 256 loses rank in Moonwalk's sweep at layer 33 for seed 1
 * (a property of that draw, hence a fixed seed; seeds 2, 3, 20261202 and
 * 20261203 do not fail).  bfloat16 is emulated in MPFR and the initialisers
 * give the same bits everywhere, so layer 33 is exact, not "or so".  The run
 * succeeds, keeps layers 1..32, and reports NaN beyond them. */
START_TEST(singular_vijp_measured)
{
    vijp_drift_setup s = setup("dense:32,leaky:0.1", 256, 32, VIJP_INIT_GAUSSIAN, "bfloat16", 1);
    vijp_drift_curve c;
    drift(&s, &c);
    const vijp_drift_run_result *r = &c.runs[1];
    ck_assert_uint_eq(c.runs[0].rebuilt, 256); /* backprop has no vijp */
    ck_assert_uint_eq(r->rebuilt, 32);
    ck_assert_msg(strstr(r->failure, "singular") != NULL, "failure '%s'", r->failure);
    ck_assert(c.runs[0].failure[0] == 0);
    for (size_t i = 0; i < 256; i++) {
        const vijp_metric *g = &r->g[i], *t = &r->theta[i];
        if (i < r->rebuilt)
            ck_assert_msg(isfinite(XD(g->rel)) && isfinite(XD(g->ulps)) && isfinite(XD(g->angle_deg)), "g_%zu", i + 1);
        else
            ck_assert_msg(isnan(XD(g->rel)) && isnan(XD(g->ulps)) && isnan(XD(g->angle_deg)) && isnan(XD(t->rel)), "g_%zu", i + 1);
    }
    vijp_drift_curve_clear(&c);
    /* the progress meter past the run that stopped early, with an engine
     * after it: its planned steps counted, the share does not go back */
    static const vijp_engine_kind two[] = {VIJP_ENGINE_MOONWALK, VIJP_ENGINE_CHECKPOINT};
    progress_log l = {0};
    s.engines = two, s.n_engines = 2, s.on_progress = on_progress, s.progress_ctx = &l;
    vijp_error err = {0};
    ck_assert_msg(!vijp_drift_run(&s, &c, &err), "%s", err.msg);
    ck_assert_uint_eq(c.runs[1].rebuilt, 32);
    ck_assert_msg(!l.out_of_range && l.back == 0 && l.last == 1, "%zu steps back, the last share %g", l.back, l.last);
    vijp_drift_curve_clear(&c);
}
END_TEST

/* Backprop in a square double net, batch 1, keeps h_0 … h_{d−1}: d·16
 * doubles, d·128 bytes, on the first d layers.  Moonwalk keeps h_0 (128
 * bytes) and one sign bit per unit of each leaky layer (16 bits = 2 bytes):
 * 128 + 2·⌊d/2⌋. */
START_TEST(stored_by_depth)
{
    vijp_drift_setup s = setup("dense:16,leaky:0.5", 32, 16, VIJP_INIT_ORTHOGONAL, "double", test_seed());
    vijp_drift_curve c;
    drift(&s, &c);
    for (size_t d = 1; d <= 32; d++) {
        ck_assert_uint_eq(c.runs[0].stored_by_depth[d - 1], d * 16 * 8);
        ck_assert_uint_eq(c.runs[1].stored_by_depth[d - 1], 128 + 2 * (d / 2));
    }
    vijp_drift_curve_clear(&c);
}
END_TEST

/* The drift study's shortcuts in comparing (compare_cache.h): a reference
 * rounded beforehand to the working precision and read in place, and Σref²
 * kept from the first comparison for the next ones, give vijp_compare's
 * metrics bit for bit, in every kind of format; a cache filled from another
 * reference does not (so the test sees the cache being used). */
static int same_metric(vijp_metric a, vijp_metric b)
{
    return !memcmp(&a, &b, sizeof a);
}

START_TEST(compare_cached_is_compare)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed());
    const char *fmts[] = {"double", "bfloat16", "bfloat16+binary32", "mpfr:113"};
    size_t n = 2500; /* three chunks, the last one partial */
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        vijp_format f, fr, fp;
        ck_assert(!vijp_format_parse(fmts[fi], &f, NULL));
        ck_assert(!vijp_format_mpfr(&fr, 256, NULL));
        ck_assert(!vijp_format_mpfr(&fp, vijp_compare_prec(&f), NULL));
        vijp_mat ref, narrow, got[3];
        vijp_mat_init(&ref, n, 1, &fr), vijp_mat_init(&narrow, n, 1, &fp);
        for (size_t i = 0; i < n; i++) {
            double v = vijp_rng_normal(&r);
            vijp_mat_set_entry_d(&ref, i, v);
            mpfr_nextabove(ref.m[i]); /* a reference off the format's grid */
            mpfr_set(narrow.m[i], ref.m[i], MPFR_RNDN);
        }
        for (int k = 0; k < 3; k++) {
            vijp_mat_init(&got[k], n, 1, &f);
            for (size_t i = 0; i < n; i++) vijp_mat_set_entry_d(&got[k], i, mpfr_get_d(ref.m[i], MPFR_RNDN) * (1 + 0x1p-9 * k));
        }
        vijp_compare_cache cache = {0}, other = {0};
        for (int k = 0; k < 3; k++) {
            vijp_metric plain, cached, rounded;
            vijp_compare(&got[k], &ref, &f, &plain);
            vijp_compare_cached(&got[k], &ref, &f, &cached, &cache);
            vijp_compare_cached(&got[k], &narrow, &f, &rounded, NULL);
            ck_assert_msg(same_metric(plain, cached) && same_metric(plain, rounded), "%s, matrix %d", fmts[fi], k);
            vijp_metric ru, ru_cached, after;
            vijp_compare_rel_ulps(&got[k], &ref, &f, &ru, NULL);
            ck_assert_msg(!memcmp(&ru, &plain, 2 * sizeof(double)) && isnan(XD(ru.angle_deg)), "%s, matrix %d: rel/ulps",
                          fmts[fi], k);
            /* the validation's cache (filled against the wide reference)
             * serves the comparison with it rounded: drift.c's disagreement */
            vijp_compare_cache filled = {0};
            vijp_compare_rel_ulps(&got[(k + 1) % 3], &ref, &f, &ru_cached, &filled);
            vijp_compare_cached(&got[k], &narrow, &f, &after, &filled);
            ck_assert_msg((filled.ready || filled.fast_ready) && same_metric(after, plain),
                          "%s, matrix %d: the validation's cache", fmts[fi], k);
            vijp_compare_cache_clear(&filled);
        }
        /* a cache of another reference (2·ref) changes the result */
        vijp_mat twice;
        vijp_mat_init(&twice, n, 1, &fr);
        for (size_t i = 0; i < n; i++) mpfr_mul_2ui(twice.m[i], ref.m[i], 1, MPFR_RNDN);
        vijp_metric a, b;
        vijp_compare_cached(&got[1], &twice, &f, &a, &other);
        vijp_compare_cached(&got[1], &ref, &f, &b, &other);
        vijp_compare(&got[1], &ref, &f, &a);
        ck_assert_msg(!same_metric(a, b), "%s: a foreign cache went unnoticed", fmts[fi]);
        vijp_compare_cache_clear(&cache), vijp_compare_cache_clear(&other);
        vijp_mat_clear(&ref), vijp_mat_clear(&narrow), vijp_mat_clear(&twice);
        for (int k = 0; k < 3; k++) vijp_mat_clear(&got[k]);
    }
}
END_TEST

/* ---- a net drawn once (drift/drawn.h, study/draws.h) ------------------- */

/* The parameters of spec at depth and width from the public calls alone
 * (vijp_net_build, vijp_net_init): the oracle a shared draw must equal. */
static vijp_net fresh_draw(const char *spec, size_t depth, size_t width, vijp_init init, uint64_t seed)
{
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, spec, depth, width, &err) && !vijp_net_init(&net, init, seed, &err), "%s", err.msg);
    return net;
}

static int same_params(const vijp_net *a, const vijp_net *b)
{
    if (a->depth != b->depth) return 0;
    for (size_t i = 0; i < a->depth; i++) {
        size_t P = a->layers[i].type->param_count(&a->layers[i]);
        if (P && memcmp(a->theta[i], b->theta[i], P * sizeof(double))) return 0;
    }
    return 1;
}

/* A release that spoils what it releases, as a freed block reused would:
 * θ all NaN from the call on, which a run still reading it would show. */
typedef struct {
    vijp_net *net;
    int calls;
} spoiler;

static void spoil(void *ctx)
{
    spoiler *sp = ctx;
    sp->calls++;
    for (size_t i = 0; i < sp->net->depth; i++)
        for (size_t k = 0, P = sp->net->layers[i].type->param_count(&sp->net->layers[i]); k < P; k++)
            sp->net->theta[i][k] = NAN;
}

/* One net drawn for several formats (whose reference is not shared: they
 * round θ differently; an MX format blocks it, mpfr:80's exact copy is in
 * MPFR, the others' in double) gives each curve bit for bit what a curve
 * drawing its own net gives, equals a fresh draw, and is left as it was
 * (only read).  And the run reads the draw only until it releases it:
 * a copy spoiled at the release gives the same curve, the release called
 * once. */
START_TEST(drawn_net_same_curves)
{
    static const char *const formats[] = {"bfloat16+binary32", "binary32", "mxfp8+binary32", "mpfr:80"};
    vijp_drift_setup s = setup("dense:8,gelu", 12, 8, VIJP_INIT_ORTHOGONAL, formats[0], test_seed());
    vijp_net drawn, before = fresh_draw("dense:8,gelu", 12, 8, s.problem.init, test_seed());
    vijp_error err = {0};
    ck_assert(!vijp_problem_draw(&s.problem, &drawn, &err));
    ck_assert_msg(same_params(&drawn, &before), "the draw differs from a fresh vijp_net_init");
    for (size_t k = 0; k < sizeof formats / sizeof *formats; k++) {
        s = setup("dense:8,gelu", 12, 8, VIJP_INIT_ORTHOGONAL, formats[k], test_seed());
        vijp_drift_curve own, shared, released;
        drift(&s, &own);
        ck_assert_msg(!vijp_drift_run_drawn(&s, &drawn, NULL, NULL, &shared, &err), "%s", err.msg);
        ck_assert_msg(same_curve(&own, &shared), "%s: the curve on the shared net differs", formats[k]);
        vijp_net doomed;
        vijp_net_copy(&doomed, &drawn);
        spoiler sp = {&doomed, 0};
        ck_assert_msg(!vijp_drift_run_drawn(&s, &doomed, spoil, &sp, &released, &err), "%s", err.msg);
        ck_assert_msg(sp.calls == 1, "%s: released %d times", formats[k], sp.calls);
        ck_assert_msg(same_curve(&own, &released), "%s: the run read its draw after releasing it", formats[k]);
        vijp_drift_curve_clear(&own), vijp_drift_curve_clear(&shared), vijp_drift_curve_clear(&released);
        vijp_net_free(&doomed);
    }
    ck_assert_msg(same_params(&drawn, &before), "running curves changed the shared net");
    vijp_net_free(&drawn), vijp_net_free(&before);
}
END_TEST

typedef struct {
    study_draws *d;
    study_draw_key key;
    const vijp_net *net;
    int rc;
} draw_request;

static void *request(void *arg)
{
    draw_request *r = arg;
    vijp_error err = {0};
    r->rc = study_draws_get(r->d, r->key, 1, &r->net, &err);
    return NULL;
}

/* The study's table: two threads asking at once get one net, drawn once,
 * the fresh draw's; another seed gets its own; a net is freed after its
 * last expected use and drawn again (the same values) if asked for after;
 * a failed draw fails every request with the same message, drawn once. */
START_TEST(draws_table)
{
    vijp_net tmpl;
    vijp_error err = {0}, again = {0};
    ck_assert(!vijp_net_template(&tmpl, "dense:8,gelu", 6, 8, &err));
    study_draws_source src = {&tmpl, 6, 8, 1, "/nonexistent/w.safetensors"};
    study_draws *d = study_draws_new(&src);
    vijp_init orth = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1};
    study_draw_key k = {0, orth, test_seed(), 0}, other = {0, orth, test_seed() + 1, 0};
    study_draws_expect(d, k, 2);
    draw_request r[2] = {{d, k, NULL, -1}, {d, k, NULL, -1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) ck_assert(!pthread_create(&t[i], NULL, request, &r[i]));
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ck_assert(!r[0].rc && !r[1].rc && r[0].net == r[1].net && study_draws_made(d) == 1);
    vijp_net want = fresh_draw("dense:8,gelu", 6, 8, orth, test_seed()), want2 = fresh_draw("dense:8,gelu", 6, 8, orth, test_seed() + 1);
    ck_assert_msg(same_params(r[0].net, &want), "the shared draw differs from a fresh one");
    const vijp_net *n2;
    ck_assert(!study_draws_get(d, other, 1, &n2, &err) && n2 != r[0].net && study_draws_made(d) == 2);
    ck_assert_msg(same_params(n2, &want2) && !same_params(n2, &want), "seed %llu's draw is not its own",
                  (unsigned long long)test_seed() + 1);
    study_draws_put(d, other, 0);
    study_draws_put(d, k, 1), study_draws_put(d, k, 1); /* the last expected use: freed */
    const vijp_net *n3;
    ck_assert(!study_draws_get(d, k, 1, &n3, &err) && study_draws_made(d) == 3 && same_params(n3, &want));
    study_draws_put(d, k, 0);
    study_draw_key bad = {0, orth, test_seed(), 1}; /* with the missing weights file */
    const vijp_net *n4 = NULL;
    int rc = study_draws_get(d, bad, 1, &n4, &err), rc2 = study_draws_get(d, bad, 1, &n4, &again);
    ck_assert_msg(rc && rc == rc2 && !n4 && !strcmp(err.msg, again.msg) && strstr(err.msg, "/nonexistent/w.safetensors"),
                  "%d %d: %s / %s", rc, rc2, err.msg, again.msg);
    ck_assert_uint_eq(study_draws_made(d), 4);
    study_draws_free(d);
    vijp_net_free(&want), vijp_net_free(&want2), vijp_net_free(&tmpl);
}
END_TEST

/* One double-double hi + lo written at Q bits (drift_half_put_dd) against
 * MPFR's one rounding of the same sum (mpfr_add_d at Q): value and sign. */
static int put_dd_is_mpfr(long Q, double hi, double lo)
{
    vijp_format f;
    ck_assert(!vijp_format_mpfr(&f, Q, NULL));
    vijp_mat a;
    vijp_mat_init_packed(&a, 1, 1, &f);
    drift_half_put_dd(a.packed, 0, hi, lo);
    mpfr_t want, got;
    mpfr_init2(want, (mpfr_prec_t)Q), mpfr_init2(got, (mpfr_prec_t)Q);
    mpfr_set_d(want, hi, MPFR_RNDN), mpfr_add_d(want, want, lo, MPFR_RNDN);
    vijp_mat_get_mpfr(&a, &got);
    int ok = mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want);
    if (!ok) {
        mpfr_sub(got, got, want, MPFR_RNDN);
        fprintf(stderr, "Q = %ld, hi = %a, lo = %a: off by %a\n", Q, hi, lo, mpfr_get_d(got, MPFR_RNDN));
    }
    mpfr_clears(want, got, (mpfr_ptr)0);
    vijp_mat_clear(&a);
    return ok;
}

/* The double-double a sum ends as in the gradient's packed block, rounded
 * at the held precision by its limbs, as MPFR rounds: random pairs with
 * lo 53 to 200 bits below hi (past 128 the MPFR path), either sign; exact
 * ties at Q bits (lo half an ulp of Q below hi's leading bit, hi's last
 * bit even and odd) and just off them; hi a power of two with lo
 * negative (the sum one binade down); lo zero; an exact zero. */
START_TEST(half_put_dd_rounds_as_mpfr)
{
    static const long Qs[] = {128, 170, 192, 256};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t q = 0; q < 4; q++) {
        long Q = Qs[q];
        ck_assert(put_dd_is_mpfr(Q, 0.0, 0.0));
        ck_assert(put_dd_is_mpfr(Q, -0x1.5p-3, 0.0));
        for (int k = 0; k < 4000; k++) {
            double hi = ldexp((double)(vijp_rng_u64(&g) >> 11 | (uint64_t)1 << 52), (int)(vijp_rng_u64(&g) % 200) - 150);
            int d = 53 + (int)(vijp_rng_u64(&g) % 148);
            double lo = ldexp((double)(vijp_rng_u64(&g) >> 11 | (uint64_t)1 << 52), ilogb(hi) - 52 - d);
            if (k & 1) hi = -hi;
            if (k & 2) lo = -lo;
            ck_assert(put_dd_is_mpfr(Q, hi, lo));
            /* ties: half an ulp at Q of hi's binade, and 2^-52 of it more or less */
            double half = ldexp(1.0, ilogb(hi) - (int)Q);
            double odd = hi, even = ldexp(ldexp(hi, -ilogb(hi) + 52) - fmod(ldexp(hi, -ilogb(hi) + 52), 2.0), ilogb(hi) - 52);
            for (int s = -1; s <= 1; s += 2) {
                ck_assert(put_dd_is_mpfr(Q, odd, s * half));
                ck_assert(put_dd_is_mpfr(Q, even, s * half));
                ck_assert(put_dd_is_mpfr(Q, odd, s * half * (1 + 0x1p-52)));
                ck_assert(put_dd_is_mpfr(Q, odd, s * half * (1 - 0x1p-53)));
            }
        }
        for (int e = -8; e <= 8; e += 8) { /* a power of two, lo negative: the binade below */
            ck_assert(put_dd_is_mpfr(Q, ldexp(1.0, e), -ldexp(1.0, e - 60)));
            ck_assert(put_dd_is_mpfr(Q, ldexp(1.0, e), -ldexp(1.0, e - (int)Q - 1)));
            ck_assert(put_dd_is_mpfr(Q, -ldexp(1.0, e), ldexp(1.0, e - (int)Q - 1) * (1 + 0x1p-52)));
        }
    }
}
END_TEST

/* The double-double gradient against its oracle: ∂W and ∂b of random g
 * and h at p = 64 and 106 bits (held at 128 and 170; batch 3 and 16, and
 * a row that cancels exactly over the batch) within k·2^-p·T of the exact
 * Σ g·h, summed in MPFR at 512 bits; refused (0, out untouched) where a
 * value leaves [2^-450, 2^450] or p is past 106 bits. */
START_TEST(half_param_dd_within_its_bound)
{
    static const long ps[] = {64, 106}, Qs[] = {128, 170};
    static const size_t batches[] = {3, 16};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed());
    for (size_t c = 0; c < 4; c++) {
        long p = ps[c / 2], Q = Qs[c / 2];
        size_t m = 5, n = 7, B = batches[c % 2];
        vijp_format fp, held, f200;
        ck_assert(!vijp_format_mpfr(&fp, p, NULL) && !vijp_format_mpfr(&held, Q, NULL) &&
                  !vijp_format_mpfr(&f200, 200, NULL));
        vijp_layer L;
        ck_assert_int_eq(vijp_layer_parse(&L, "dense:5x7", n, NULL), 0);
        vijp_mat gp, hp, out = {0};
        vijp_mat_init(&gp, m, B, &fp), vijp_mat_init(&hp, n, B, &fp);
        for (size_t e = 0; e < m * B; e++) /* p bits each: a seventh rounded */
            mpfr_set_d(gp.m[e], ldexp(vijp_rng_normal(&r), (int)(vijp_rng_u64(&r) % 40) - 20), MPFR_RNDN),
                mpfr_div_ui(gp.m[e], gp.m[e], 7, MPFR_RNDN);
        for (size_t e = 0; e < n * B; e++)
            mpfr_set_d(hp.m[e], vijp_rng_normal(&r), MPFR_RNDN), mpfr_div_ui(hp.m[e], hp.m[e], 3, MPFR_RNDN);
        /* ∂W(0, 0) cancels exactly (g(0, 1) = −g(0, 0), h(0, 1) = h(0, 0),
         * h(0, b) = 0 past): Dot2 need not give 0 there, only its bound */
        mpfr_neg(gp.m[m], gp.m[0], MPFR_RNDN), mpfr_set(hp.m[n], hp.m[0], MPFR_RNDN);
        for (size_t b = 2; b < B; b++) mpfr_set_zero(hp.m[0 + b * n], 1);
        ck_assert(drift_half_param_dd(&L, &hp, &gp, &held, 2, &out));
        double k = drift_half_kappa(p, B, Q);
        mpfr_t S, T, x, d, *ov = calloc(m * n + m, sizeof *ov);
        ck_assert_ptr_nonnull(ov);
        mpfr_inits2(512, S, T, x, d, (mpfr_ptr)0);
        for (size_t e = 0; e < m * n + m; e++) mpfr_init2(ov[e], 512);
        vijp_mat_get_mpfr(&out, ov); /* exact: Q bits into 512 */
        for (size_t e = 0; e < m * n + m; e++) {
            int bias = e >= m * n;
            size_t i = bias ? e - m * n : e % m, col = bias ? 0 : e / m;
            mpfr_set_zero(S, 1), mpfr_set_zero(T, 1);
            for (size_t b = 0; b < B; b++) {
                if (bias) mpfr_set(x, gp.m[i + b * m], MPFR_RNDN);
                else mpfr_mul(x, gp.m[i + b * m], hp.m[col + b * n], MPFR_RNDN); /* exact at 512 bits */
                mpfr_add(S, S, x, MPFR_RNDN);
                mpfr_abs(x, x, MPFR_RNDN), mpfr_add(T, T, x, MPFR_RNDU);
            }
            mpfr_mul_d(T, T, k, MPFR_RNDU), mpfr_mul_2si(T, T, -p, MPFR_RNDU);
            mpfr_sub(d, ov[e], S, MPFR_RNDN), mpfr_abs(d, d, MPFR_RNDN);
            ck_assert_msg(mpfr_lessequal_p(d, T), "p %ld, batch %zu, entry %zu: off by %g, bound %g", p, B, e,
                          mpfr_get_d(d, MPFR_RNDN), mpfr_get_d(T, MPFR_RNDN));
        }
        for (size_t e = 0; e < m * n + m; e++) mpfr_clear(ov[e]);
        free(ov);
        mpfr_clears(S, T, x, d, (mpfr_ptr)0);
        vijp_mat_clear(&out);
        /* refused: a value past 2^450, and g and h held at 200 bits */
        vijp_mat out2 = {0};
        mpfr_set_d(gp.m[1], 0x1p460, MPFR_RNDN);
        ck_assert(!drift_half_param_dd(&L, &hp, &gp, &held, 1, &out2) && !out2.rows);
        vijp_mat g200, h200;
        vijp_mat_init(&g200, m, B, &f200), vijp_mat_init(&h200, n, B, &f200);
        ck_assert(!drift_half_param_dd(&L, &h200, &g200, &held, 1, &out2) && !out2.rows);
        vijp_mat_clear(&g200), vijp_mat_clear(&h200), vijp_mat_clear(&gp), vijp_mat_clear(&hp);
        vijp_layer_clear(&L);
    }
}
END_TEST

Suite *suite_drift(void)
{
    Suite *s = suite_create("drift");
    TCase *tc = tcase_create("drift");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, compare_rel);
    tcase_add_test(tc, compare_ulps);
    tcase_add_test(tc, compare_ulps_rounded_up);
    tcase_add_test(tc, compare_angle);
    tcase_add_test(tc, compare_tiny_angle);
    tcase_add_test(tc, compare_cached_is_compare);
    tcase_add_test(tc, compare_zero_vectors);
    tcase_add_test(tc, compare_nan_propagates);
    tcase_add_test(tc, growth_fit_line);
    tcase_add_test(tc, growth_fit_ceiling);
    tcase_add_test(tc, safe_depth);
    tcase_add_test(tc, bits_needed);
    tcase_add_test(tc, default_tol);
    tcase_add_test(tc, reference_validation);
    tcase_add_test(tc, reference_cap);
    tcase_add_test(tc, reference_prec_limits);
    tcase_add_test(tc, memo_shares_only_equal_problems);
    tcase_add_test(tc, memo_copy_in_double);
    tcase_add_test(tc, own_memo_holds_upper_level_rounded);
    tcase_add_test(tc, param_gradient_validated_at_terms_scale);
    tcase_add_test(tc, cancelled_param_gradient_compared);
    tcase_add_test(tc, inputs_compared_where_gradients_are_not);
    tcase_add_test(tc, dense_term_scale_by_entry);
    tcase_add_test(tc, outer_param_is_the_reverse_pass_s);
    tcase_add_test(tc, outer_param_batch_is_the_reverse_pass);
    tcase_add_test(tc, half_put_dd_rounds_as_mpfr);
    tcase_add_test(tc, half_param_dd_within_its_bound);
    tcase_add_test(tc, progress_reaches_one);
    /* Per seed: A = 0.1, 0.3, 0.5 (0.7 and 0.9 miss the factor 2 for some
     * seeds, see growth_vs_lyapunov); over seeds: A = 0.7 and 0.9. */
    tcase_add_loop_test(tc, growth_vs_lyapunov, 0, 3);
    tcase_add_loop_test(tc, growth_vs_lyapunov_over_seeds, 0, 2);
    tcase_add_test(tc, predicted_formula);
    tcase_add_test(tc, singular_product_has_no_prediction);
    tcase_add_test(tc, first_order_bound);
    tcase_add_test(tc, first_order_bound_mixed);
    tcase_add_test(tc, singular_vijp_measured);
    tcase_add_test(tc, stored_by_depth);
    suite_add_tcase(s, tc);
    TCase *drawn = tcase_create("drawn");
    tcase_add_test(drawn, drawn_net_same_curves);
    tcase_add_test(drawn, draws_table);
    suite_add_tcase(s, drawn);
    return s;
}

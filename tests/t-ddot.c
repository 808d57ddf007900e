/* The double-double and triple-double products (src/ddot/ddot.h) against
 * the exact dot product in MPFR.  Products of doubles are exact in 106 bits; the oracle
 * adds them (and the double-double x's low parts, and c) with mpfr_sum into
 * EXACT_PREC bits, which hold every bit of any such sum (every product lies
 * in [2^-2148, 2^2048), and fewer than 2^20 terms carry 20 bits more), so the
 * oracle is the exact value (asserted: mpfr_sum's ternary is 0), and so is
 * the error hi + lo − exact formed from it.  For every output:
 *   - the error is within the returned bound (the rigorous a-posteriori one);
 *   - the error is within the a-priori bound derived in src/ddot/bound.c:
 *       doubles  γ_N²·T + Nη,   double-double x  γ_2N·γ_(N+1)·T + 3Nη,
 *       (triple-double: γ_(N+1)·γ_2N·γ_N·T + Nη and γ_(N+2)²·γ_3N·T + 3Nη;
 *        triple-double x in four levels: γ_(N+3)²·γ_5N·γ_3N·T + 2Nη),
 *     T = |c| + Σ|a_j·xh_j| (computed here in MPFR, rounded up), and hi alone
 *     within Ogita-Rump-Oishi's u|exact| + γ_N²·T (+ Nη);
 *   - the returned bound is not vacuous: at most (1 + 2^-10) times the
 *     a-priori one plus (4N + 8)η (it is Ĉ·Σ|h_j|, Ĉ within 2^-19 of the
 *     γ factors and Σ|h_j| within γ_N of T: bound.c, 6–7);
 *   - overflow, Inf and NaN give bound = +inf and are counted.
 * Inputs: random, Ogita-Rump-Oishi's GenDot with condition 1e10 … 1e40,
 * exponents spread over ±500, products in the subnormal range, overflow.
 * Every kernel set must give ref's bits (simd.h: one lane per row, the same
 * operations in the same order). */
#include "fixtures/testutil.h"
#include "ddot/ddot.h"
#include "vijp/rng.h"
#include <stdio.h> /* before mpfr.h: mpfr_fprintf */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

enum { EXACT_PREC = 4400 };
static const double eta = 0x1p-1074;

/* Σ_j a[j·inca]·(x[0][j·incx] + ... + x[parts − 1][j·incx]) + *c exactly
 * into S (EXACT_PREC bits), and T = |c| + Σ|a_j·x[0]_j| rounded up.  c may
 * be NULL. */
static void exact_dot_parts(mpfr_t S, mpfr_t T, size_t n, const double *a, size_t inca, const double *const *x,
                            int parts, size_t incx, const double *c)
{
    size_t nt = (size_t)parts * n + 1, k = 0;
    mpfr_t *t = malloc(nt * sizeof *t);
    mpfr_ptr *pt = malloc(nt * sizeof *pt);
    ck_assert(t && pt);
    mpfr_set_zero(T, 1);
    for (size_t j = 0; j < n; j++)
        for (int part = 0; part < parts; part++) {
            mpfr_init2(t[k], 106);
            mpfr_set_d(t[k], a[j * inca], MPFR_RNDN);
            ck_assert_int_eq(mpfr_mul_d(t[k], t[k], x[part][j * incx], MPFR_RNDN), 0);
            if (!part) {
                mpfr_t m;
                mpfr_init2(m, 106);
                mpfr_abs(m, t[k], MPFR_RNDN);
                mpfr_add(T, T, m, MPFR_RNDU);
                mpfr_clear(m);
            }
            pt[k] = t[k], k++;
        }
    if (c) {
        mpfr_init2(t[k], 53);
        mpfr_set_d(t[k], *c, MPFR_RNDN);
        mpfr_add_d(T, T, fabs(*c), MPFR_RNDU);
        pt[k] = t[k], k++;
    }
    mpfr_set_prec(S, EXACT_PREC);
    ck_assert_int_eq(mpfr_sum(S, pt, k, MPFR_RNDN), 0); /* exact: see the top */
    for (size_t i = 0; i < k; i++) mpfr_clear(t[i]);
    free(t), free(pt);
}

/* The same with x = xh (+ xl, when not NULL). */
static void exact_dot(mpfr_t S, mpfr_t T, size_t n, const double *a, size_t inca, const double *xh, const double *xl,
                      size_t incx, const double *c)
{
    exact_dot_parts(S, T, n, a, inca, (const double *const[]){xh, xl}, xl ? 2 : 1, incx, c);
}

/* γ_k rounded up. */
static void gamma_up(mpfr_t g, double k)
{
    mpfr_t d;
    mpfr_init2(d, mpfr_get_prec(g));
    mpfr_set_d(g, k * 0x1p-53, MPFR_RNDU);
    mpfr_ui_sub(d, 1, g, MPFR_RNDD);
    mpfr_div(g, g, d, MPFR_RNDU);
    mpfr_clear(d);
}

/* The checks of the top on one output (hi, lo, bound) of N terms against
 * its exact value S and T; what names the case in a failure. */
static void check_output(const double *y, int parts, double bound, mpfr_t S, mpfr_t T, size_t N, int dd_input,
                         const char *what)
{
    double hi = y[0], lo = y[parts - 1];
    mpfr_t err, apr, g, ho;
    mpfr_inits2(256, apr, g, ho, (mpfr_ptr)0);
    mpfr_init2(err, EXACT_PREC + 64);
    ck_assert_msg(isfinite(hi) && isfinite(lo) && isfinite(bound), "%s: not finite (hi %g lo %g bound %g)", what, hi, lo,
                  bound);
    mpfr_set_d(err, hi, MPFR_RNDN);
    for (int k = 1; k < parts; k++) ck_assert_int_eq(mpfr_add_d(err, err, y[k], MPFR_RNDN), 0);
    ck_assert_int_eq(mpfr_sub(err, err, S, MPFR_RNDN), 0);
    mpfr_abs(err, err, MPFR_RNDN);
    /* a-priori (bound.c 4, 5, 9): double-double γ_N²·T + Nη, or
     * γ_2N·γ_(N+1)·T + 3Nη; triple-double γ_(N+1)·γ_2N·γ_N·T + Nη, or
     * γ_(N+2)²·γ_3N·T + 3Nη */
    double Nd = (double)N;
    if (parts == 4) { /* bound.c 10: γ_(N+3)²·γ_5N·γ_3N·T + 2Nη */
        gamma_up(apr, Nd + 3);
        mpfr_sqr(apr, apr, MPFR_RNDU);
        gamma_up(g, 5 * Nd);
        mpfr_mul(apr, apr, g, MPFR_RNDU);
        gamma_up(g, 3 * Nd);
        mpfr_mul(apr, apr, g, MPFR_RNDU);
    } else if (parts == 2) {
        gamma_up(apr, dd_input ? 2 * Nd : Nd);
        gamma_up(g, dd_input ? Nd + 1 : Nd);
        mpfr_mul(apr, apr, g, MPFR_RNDU);
    } else {
        gamma_up(apr, dd_input ? Nd + 2 : Nd + 1);
        gamma_up(g, dd_input ? 3 * Nd : 2 * Nd);
        mpfr_mul(apr, apr, g, MPFR_RNDU);
        gamma_up(g, dd_input ? Nd + 2 : Nd);
        mpfr_mul(apr, apr, g, MPFR_RNDU);
    }
    mpfr_mul(apr, apr, T, MPFR_RNDU);
    mpfr_add_d(apr, apr, (parts == 4 ? 2.0 : dd_input ? 3.0 : 1.0) * N * eta, MPFR_RNDU);
    ck_assert_msg(mpfr_cmp_d(err, bound) <= 0, "%s: error %.3e above the returned bound %.3e", what,
                  mpfr_get_d(err, MPFR_RNDN), bound);
    ck_assert_msg(mpfr_cmp(err, apr) <= 0, "%s: error %.3e above the a-priori bound %.3e", what,
                  mpfr_get_d(err, MPFR_RNDN), mpfr_get_d(apr, MPFR_RNDN));
    /* and not below the a-priori bound, which it is derived to cover (bound.c
     * 6–7, 10: bound >= C·absum + (4N + 2)η >= a-priori): apr is rounded up
     * from T (itself rounded up, at 256 bits), so apr·(1 − 2^-200) is below
     * the true a-priori bound.  A bound shrunk by 2^-20, or without the
     * factor 1 + 2^-20 in Ĉ, fails here. */
    mpfr_div_2ui(g, apr, 200, MPFR_RNDD);
    mpfr_sub(g, apr, g, MPFR_RNDD);
    ck_assert_msg(mpfr_cmp_d(g, bound) <= 0, "%s: returned bound %.6e below the a-priori %.6e", what, bound,
                  mpfr_get_d(apr, MPFR_RNDN));
    /* not vacuous: bound <= (1 + 2^-10)·a-priori + (4N + 8)η */
    mpfr_mul_d(g, apr, 1 + 0x1p-10, MPFR_RNDU);
    mpfr_add_d(g, g, (4.0 * N + 8) * eta, MPFR_RNDU);
    ck_assert_msg(mpfr_cmp_d(g, bound) >= 0, "%s: returned bound %.3e far above the a-priori %.3e", what, bound,
                  mpfr_get_d(apr, MPFR_RNDN));
    if (parts == 2 && !dd_input) { /* Ogita-Rump-Oishi, Theorem 5.3, on hi alone: u|S| + γ_N²T (+ Nη) */
        mpfr_set_d(ho, hi, MPFR_RNDN);
        mpfr_sub(ho, ho, S, MPFR_RNDU);
        mpfr_abs(ho, ho, MPFR_RNDU);
        mpfr_abs(g, S, MPFR_RNDU);
        mpfr_mul_2si(g, g, -53, MPFR_RNDU);
        mpfr_add(g, g, apr, MPFR_RNDU);
        ck_assert_msg(mpfr_cmp(ho, g) <= 0, "%s: hi's error %.3e above Dot2's bound %.3e", what,
                      mpfr_get_d(ho, MPFR_RNDN), mpfr_get_d(g, MPFR_RNDN));
    }
    mpfr_clears(err, apr, g, ho, (mpfr_ptr)0);
}

/* One dot product through vijp_dd_dot (xl NULL) or vijp_dd_dot_ddx, and
 * through every set's row with c, checked against the oracle. */
static void check_dot(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                      const double *c, const char *what)
{
    mpfr_t S, T;
    mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
    double bound;
    char msg[160];
    if (!c) {
        vijp_dd r = xl ? vijp_dd_dot_ddx(n, a, inca, xh, xl, incx, &bound) : vijp_dd_dot(n, a, inca, xh, incx, &bound);
        exact_dot(S, T, n, a, inca, xh, xl, incx, NULL);
        snprintf(msg, sizeof msg, "%s (n %zu, %s, seed %llu)", what, n, xl ? "dd x" : "double x",
                 (unsigned long long)test_seed());
        check_output((double[]){r.hi, r.lo}, 2, bound, S, T, n, xl != NULL, msg);
        vijp_td t = xl ? vijp_td_dot_ddx(n, a, inca, xh, xl, incx, &bound) : vijp_td_dot(n, a, inca, xh, incx, &bound);
        snprintf(msg, sizeof msg, "%s (n %zu, %s, triple-double, seed %llu)", what, n, xl ? "dd x" : "double x",
                 (unsigned long long)test_seed());
        check_output((double[]){t.hi, t.mid, t.lo}, 3, bound, S, T, n, xl != NULL, msg);
    } else {
        exact_dot(S, T, n, a, inca, xh, xl, incx, c);
        for (int s = 0; s < VIJP_DD_SET_COUNT; s++) {
            const vijp_dd_kernels *k = vijp_dd_set(s);
            if (!k) continue;
            double y[3];
            ck_assert_int_eq(k->row(n, a, inca, xh, xl, incx, c, &y[0], &y[1], &bound), 0);
            snprintf(msg, sizeof msg, "%s (n %zu + c, %s, set %s, seed %llu)", what, n, xl ? "dd x" : "double x",
                     k->name, (unsigned long long)test_seed());
            check_output(y, 2, bound, S, T, n + 1, xl != NULL, msg);
            ck_assert_int_eq(k->td_row(n, a, inca, xh, xl, incx, c, &y[0], &y[1], &y[2], &bound), 0);
            snprintf(msg, sizeof msg, "%s (n %zu + c, %s, triple-double, set %s, seed %llu)", what, n,
                     xl ? "dd x" : "double x", k->name, (unsigned long long)test_seed());
            check_output(y, 3, bound, S, T, n + 1, xl != NULL, msg);
        }
    }
    mpfr_clears(S, T, (mpfr_ptr)0);
}

/* One dot product with x in triple-double through vijp_qd_dot, and through
 * every set's qd_row with c, checked against the oracle (4 parts). */
static void check_qd(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx, const double *c,
                     const char *what)
{
    mpfr_t S, T;
    mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
    double bound, y[4];
    char msg[160];
    exact_dot_parts(S, T, n, a, inca, x, 3, incx, c);
    if (!c) {
        vijp_qd_dot(n, a, inca, x, incx, y, &bound);
        snprintf(msg, sizeof msg, "%s (n %zu, td x, seed %llu)", what, n, (unsigned long long)test_seed());
        check_output(y, 4, bound, S, T, n, 1, msg);
    } else
        for (int s = 0; s < VIJP_DD_SET_COUNT; s++) {
            const vijp_dd_kernels *k = vijp_dd_set(s);
            if (!k) continue;
            ck_assert_int_eq(k->qd_row(n, a, inca, x, incx, c, y, &bound), 0);
            snprintf(msg, sizeof msg, "%s (n %zu + c, td x, set %s, seed %llu)", what, n, k->name,
                     (unsigned long long)test_seed());
            check_output(y, 4, bound, S, T, n + 1, 1, msg);
        }
    mpfr_clears(S, T, (mpfr_ptr)0);
}

/* A normalised double-double low part of x: |xl| <= u|x|. */
static double low_part(vijp_rng *g, double x) { return x * 0x1p-53 * (2 * vijp_rng_uniform(g) - 1); }

/* x[1], x[2] := normalised low parts below x[0] (a triple-double), n of them. */
static void low_parts(vijp_rng *g, size_t n, double *const x[3])
{
    for (size_t j = 0; j < n; j++) x[1][j] = low_part(g, x[0][j]), x[2][j] = low_part(g, x[1][j]);
}

START_TEST(random_inputs)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    static const size_t sizes[] = {0, 1, 2, 3, 5, 17, 64, 256, 1000};
    double *a = malloc(3 * 1000 * sizeof *a), *x = malloc(2 * 1000 * sizeof *x), *xl = malloc(2 * 1000 * sizeof *xl),
           *xm = malloc(2 * 1000 * sizeof *xm), *xll = malloc(2 * 1000 * sizeof *xll);
    ck_assert(a && x && xl && xm && xll);
    double *const x3[3] = {x, xm, xll};
    for (long it = 0; it < test_iters(2); it++)
        for (size_t is = 0; is < sizeof sizes / sizeof *sizes; is++) {
            size_t n = sizes[is], inca = 1 + it % 3, incx = 1 + (it + 1) % 2;
            for (size_t j = 0; j < 3 * n; j++) a[j] = vijp_rng_normal(&g);
            for (size_t j = 0; j < 2 * n; j++) x[j] = vijp_rng_normal(&g) / 3, xl[j] = low_part(&g, x[j]);
            double c = vijp_rng_normal(&g);
            check_dot(n, a, inca, x, NULL, incx, NULL, "random");
            check_dot(n, a, inca, x, xl, incx, NULL, "random");
            check_dot(n, a, inca, x, NULL, incx, &c, "random");
            check_dot(n, a, inca, x, xl, incx, &c, "random");
            low_parts(&g, 2 * n, x3);
            check_qd(n, a, inca, (const double *const *)x3, incx, NULL, "random");
            check_qd(n, a, inca, (const double *const *)x3, incx, &c, "random");
        }
    free(a), free(x), free(xl), free(xm), free(xll);
}
END_TEST

/* Ogita, Rump and Oishi's GenDot (Algorithm 6.1 of their paper): x, y of
 * length n with xᵀy's condition 2|x|ᵀ|y|/|xᵀy| near cond; the second half's
 * y_i cancels the exact partial dot product so far. */
static void gen_dot(vijp_rng *g, size_t n, double cond, double *x, double *y)
{
    size_t n2 = n / 2;
    double b = log2(cond);
    for (size_t i = 0; i < n2; i++) {
        double e = i == 0 ? round(b / 2) + 1 : i == n2 - 1 ? 0 : round(vijp_rng_uniform(g) * b / 2);
        x[i] = ldexp(2 * vijp_rng_uniform(g) - 1, (int)e);
        y[i] = ldexp(2 * vijp_rng_uniform(g) - 1, (int)e);
    }
    mpfr_t S, T;
    mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
    for (size_t i = n2; i < n; i++) {
        double e = n - n2 > 1 ? round(b / 2 - (b / 2) * (double)(i - n2) / (double)(n - n2 - 1)) : 0;
        x[i] = ldexp(2 * vijp_rng_uniform(g) - 1, (int)e);
        exact_dot(S, T, i, x, 1, y, NULL, 1, NULL);
        y[i] = (ldexp(2 * vijp_rng_uniform(g) - 1, (int)e) - mpfr_get_d(S, MPFR_RNDN)) / x[i];
    }
    mpfr_clears(S, T, (mpfr_ptr)0);
    for (size_t i = n - 1; i > 0; i--) { /* shuffle the pairs */
        size_t k = (size_t)(vijp_rng_u64(g) % (i + 1));
        double t = x[i];
        x[i] = x[k], x[k] = t, t = y[i], y[i] = y[k], y[k] = t;
    }
}

START_TEST(ill_conditioned)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 1);
    enum { n = 100 };
    double x[n], y[n], yl[n], ym[n], yll[n];
    double *const y3[3] = {y, ym, yll};
    static const double conds[] = {1e10, 1e20, 1e30, 1e40};
    for (long it = 0; it < test_iters(3); it++)
        for (size_t ic = 0; ic < sizeof conds / sizeof *conds; ic++) {
            gen_dot(&g, n, conds[ic], x, y);
            for (size_t j = 0; j < n; j++) yl[j] = low_part(&g, y[j]);
            char what[64];
            snprintf(what, sizeof what, "GenDot cond %.0e", conds[ic]);
            check_dot(n, x, 1, y, NULL, 1, NULL, what);
            check_dot(n, x, 1, y, yl, 1, NULL, what);
            low_parts(&g, n, y3);
            check_qd(n, x, 1, (const double *const *)y3, 1, NULL, what);
        }
}
END_TEST

START_TEST(dynamic_range)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 2);
    enum { n = 256 };
    double x[n], y[n], yl[n], ym[n], yll[n];
    double *const y3[3] = {y, ym, yll};
    for (long it = 0; it < test_iters(4); it++) {
        /* |x|, |y| < 2^501: products up to 2^1002, no overflow */
        for (size_t j = 0; j < n; j++) {
            x[j] = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 1001) - 500);
            y[j] = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 1001) - 500);
            yl[j] = low_part(&g, y[j]);
        }
        check_dot(n, x, 1, y, NULL, 1, NULL, "dynamic range");
        check_dot(n, x, 1, y, yl, 1, NULL, "dynamic range");
        double c = ldexp(1, 900);
        check_dot(n, x, 1, y, yl, 1, &c, "dynamic range");
        low_parts(&g, n, y3);
        check_qd(n, x, 1, (const double *const *)y3, 1, NULL, "dynamic range");
        check_qd(n, x, 1, (const double *const *)y3, 1, &c, "dynamic range");
    }
}
END_TEST

/* Products in and below the subnormal range, where TwoProd's low part is
 * rounded (bound.c, 1) and the η terms of the bound carry it; subnormal
 * inputs; a mix with normal terms. */
START_TEST(subnormal)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 3);
    enum { n = 64 };
    double x[n], y[n], yl[n], ym[n], yll[n];
    double *const y3[3] = {y, ym, yll};
    for (long it = 0; it < test_iters(4); it++)
        for (int kind = 0; kind < 3; kind++) {
            for (size_t j = 0; j < n; j++) {
                double u1 = 1 + vijp_rng_uniform(&g), u2 = 1 + vijp_rng_uniform(&g);
                if (kind == 0) /* products near 2^-1080: partly subnormal, partly below η */
                    x[j] = ldexp(u1, -540 + (int)(vijp_rng_u64(&g) % 20)), y[j] = ldexp(u2, -540 - (int)(vijp_rng_u64(&g) % 20));
                else if (kind == 1) /* subnormal x */
                    x[j] = ldexp(u1, -1030 - (int)(vijp_rng_u64(&g) % 40)), y[j] = ldexp(u2, (int)(vijp_rng_u64(&g) % 60));
                else /* tiny products among ordinary ones */
                    x[j] = ldexp(u1, j % 2 ? -1000 : 0), y[j] = ldexp(u2, j % 2 ? -60 : -30);
                if (vijp_rng_u64(&g) & 1) x[j] = -x[j];
                yl[j] = low_part(&g, y[j]);
            }
            check_dot(n, x, 1, y, NULL, 1, NULL, "subnormal");
            check_dot(n, x, 1, y, yl, 1, NULL, "subnormal");
            low_parts(&g, n, y3); /* their products with x down to 2^-1190: below η, rounded (bound.c 1) */
            check_qd(n, x, 1, (const double *const *)y3, 1, NULL, "subnormal");
        }
}
END_TEST

/* Overflow, Inf and NaN are reported (bound +inf, counted), never silently
 * wrong; large terms that cancel without overflow are bounded as usual. */
START_TEST(overflow_and_nan)
{
    double big = ldexp(1, 600), hm = 0.75 * DBL_MAX, one = 1, bound;
    double x2[2] = {big, 1}, y2[2] = {big, 1};
    vijp_dd r = vijp_dd_dot(2, x2, 1, y2, 1, &bound); /* a product overflows */
    ck_assert(bound == INFINITY && !isfinite(r.hi));
    double x3[3] = {hm, hm, -hm}, y3[3] = {1, 1, 1};
    r = vijp_dd_dot(3, x3, 1, y3, 1, &bound); /* the running sum overflows (the exact one does not) */
    ck_assert(bound == INFINITY);
    vijp_td t = vijp_td_dot(2, x2, 1, y2, 1, &bound);
    ck_assert(bound == INFINITY && !isfinite(t.hi));
    t = vijp_td_dot(3, x3, 1, y3, 1, &bound);
    ck_assert(bound == INFINITY);
    double xn[3] = {1, NAN, 2};
    r = vijp_dd_dot(3, xn, 1, y3, 1, &bound);
    ck_assert(bound == INFINITY && isnan(r.hi));
    t = vijp_td_dot(3, xn, 1, y3, 1, &bound);
    ck_assert(bound == INFINITY && isnan(t.hi));
    double xz[2] = {0, 1}, yi[2] = {INFINITY, 1};
    r = vijp_dd_dot(2, xz, 1, yi, 1, &bound); /* 0·Inf */
    ck_assert(bound == INFINITY);
    double xc[4] = {ldexp(1, 1000), -ldexp(1, 1000), ldexp(1, 1000), 3}, yc[4] = {ldexp(1, 20), ldexp(1, 20), -ldexp(1, 20), 1};
    check_dot(4, xc, 1, yc, NULL, 1, NULL, "cancelling large terms");
    check_dot(4, xc, 1, yc, NULL, 1, &one, "cancelling large terms");
    /* gemv: exactly the overflowing row is unbounded, in every set */
    enum { m = 21, n = 5 };
    double A[m * n], xv[n] = {1, 2, 3, 4, 5}, xl[n] = {0}, yh[m], ym[m], yl[m], yb[m];
    for (size_t i = 0; i < m * n; i++) A[i] = (double)(i % 7) - 3;
    A[13 + 2 * m] = DBL_MAX; /* row 13: DBL_MAX·3 overflows */
    for (int s = 0; s < VIJP_DD_SET_COUNT; s++) {
        const vijp_dd_kernels *k = vijp_dd_set(s);
        if (!k) continue;
        ck_assert_uint_eq(vijp_dd_gemv_in(k, m, n, A, m, xv, NULL, NULL, yh, yl, yb), 1);
        for (size_t i = 0; i < m; i++) ck_assert(i == 13 ? yb[i] == INFINITY : isfinite(yb[i]));
        ck_assert_uint_eq(vijp_dd_gemv_in(k, m, n, A, m, xv, xl, NULL, yh, yl, yb), 1);
        ck_assert_uint_eq(vijp_td_gemv_in(k, m, n, A, m, xv, xl, NULL, yh, ym, yl, yb), 1);
        for (size_t i = 0; i < m; i++) ck_assert(i == 13 ? yb[i] == INFINITY : isfinite(yb[i]));
        xl[3] = ldexp(xv[3], -52); /* not normalised: no bound at all */
        ck_assert_uint_eq(vijp_dd_gemv_in(k, m, n, A, m, xv, xl, NULL, yh, yl, yb), m);
        for (size_t i = 0; i < m; i++) ck_assert(yb[i] == INFINITY);
        ck_assert_uint_eq(vijp_td_gemv_in(k, m, n, A, m, xv, xl, NULL, yh, ym, yl, yb), m);
        for (size_t i = 0; i < m; i++) ck_assert(yb[i] == INFINITY);
        xl[3] = 0;
    }
    double lo3[3] = {0, ldexp(1, -50), 0};
    r = vijp_dd_dot_ddx(3, y3, 1, y3, lo3, 1, &bound);
    ck_assert(bound == INFINITY);
    t = vijp_td_dot_ddx(3, y3, 1, y3, lo3, 1, &bound);
    ck_assert(bound == INFINITY);
    /* triple-double x: overflow, NaN, a middle or a low part not normalised */
    double zero3[3] = {0}, q[4], mid_big[3] = {0, ldexp(1, -50), 0}, low_alone[3] = {0, 0, ldexp(1, -110)};
    vijp_qd_dot(2, x2, 1, (const double *const[]){y2, zero3, zero3}, 1, q, &bound);
    ck_assert(bound == INFINITY && !isfinite(q[0]));
    vijp_qd_dot(3, x3, 1, (const double *const[]){y3, zero3, zero3}, 1, q, &bound);
    ck_assert(bound == INFINITY);
    vijp_qd_dot(3, xn, 1, (const double *const[]){y3, zero3, zero3}, 1, q, &bound);
    ck_assert(bound == INFINITY && isnan(q[0]));
    vijp_qd_dot(3, y3, 1, (const double *const[]){y3, mid_big, zero3}, 1, q, &bound); /* |xm| = 2^-50 > u|xh| */
    ck_assert(bound == INFINITY);
    vijp_qd_dot(3, y3, 1, (const double *const[]){y3, zero3, low_alone}, 1, q, &bound); /* xl under xm = 0 */
    ck_assert(bound == INFINITY);
    double mid_edge[3] = {0, ldexp(1, -53), 0}, low_edge[3] = {0, ldexp(1, -106), 0};
    vijp_qd_dot(3, y3, 1, (const double *const[]){y3, mid_edge, low_edge}, 1, q, &bound);
    ck_assert(isfinite(bound)); /* the edge: |xm| = u|xh|, |xl| = u|xm| */
    double qy[4][m], *const yq[4] = {qy[0], qy[1], qy[2], qy[3]}, x0[n] = {0}, xw[n] = {0};
    xw[3] = ldexp(1, -60); /* an xl of 2^-60 under xm = 0 */
    for (int s = 0; s < VIJP_DD_SET_COUNT; s++) { /* gemv: exactly the overflowing row, or every row */
        const vijp_dd_kernels *k = vijp_dd_set(s);
        if (!k) continue;
        ck_assert_uint_eq(vijp_qd_gemv_in(k, m, n, A, m, (const double *const[]){xv, x0, x0}, NULL, yq, yb), 1);
        for (size_t i = 0; i < m; i++) ck_assert(i == 13 ? yb[i] == INFINITY : isfinite(yb[i]));
        ck_assert_uint_eq(vijp_qd_gemv_in(k, m, n, A, m, (const double *const[]){xv, x0, xw}, NULL, yq, yb), m);
        for (size_t i = 0; i < m; i++) ck_assert(yb[i] == INFINITY);
    }
}
END_TEST

static int same_bits(const double *a, const double *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

/* Every set gives ref's bits at every row count (full blocks, one-vector
 * blocks, scalar tails), with and without c, double and double-double x;
 * gemm is gemv column by column; ref's rows are its strided row. */
START_TEST(sets_agree)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 4);
    enum { M = 37, N = 33, LDA = M + 3, COLS = 3 };
    static double A[LDA * N], B[N * COLS], Bl[N * COLS], c[M];
    static double want[3][M * COLS], got[3][M * COLS], twant[4][M], tgot[4][M], qwant[5][M], qgot[5][M], Bm[N], Bll[N];
    double *const qw[4] = {qwant[0], qwant[1], qwant[2], qwant[3]}, *const qg[4] = {qgot[0], qgot[1], qgot[2], qgot[3]};
    const double *const x3[3] = {B, Bm, Bll};
    for (size_t i = 0; i < LDA * N; i++) A[i] = vijp_rng_normal(&g);
    for (size_t i = 0; i < N * COLS; i++) B[i] = vijp_rng_normal(&g), Bl[i] = low_part(&g, B[i]);
    low_parts(&g, N, (double *const[]){B, Bm, Bll});
    for (size_t i = 0; i < M; i++) c[i] = vijp_rng_normal(&g);
    const vijp_dd_kernels *ref = vijp_dd_set(0);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(vijp_dd_active());
    static const size_t ns[] = {0, 1, 7, N};
    for (size_t m = 1; m <= M; m++)
        for (size_t in = 0; in < 4; in++)
            for (int variant = 0; variant < 4; variant++) {
                size_t n = ns[in];
                const double *cc = variant & 1 ? c : NULL, *bl = variant & 2 ? Bl : NULL;
                vijp_dd_gemm_in(ref, m, COLS, n, A, LDA, B, bl, N, cc, want[0], want[1], want[2], M);
                for (size_t j = 0; j < COLS; j++)
                    for (size_t i = 0; i < m; i++) {
                        double hi, lo, b;
                        ref->row(n, A + i, LDA, B + j * N, bl ? bl + j * N : NULL, 1, cc ? cc + i : NULL, &hi, &lo, &b);
                        ck_assert(hi == want[0][i + j * M] && lo == want[1][i + j * M] && b == want[2][i + j * M]);
                    }
                vijp_td_gemv_in(ref, m, n, A, LDA, B, bl, cc, twant[0], twant[1], twant[2], twant[3]);
                for (size_t i = 0; i < m; i++) {
                    double y[4];
                    ref->td_row(n, A + i, LDA, B, bl, 1, cc ? cc + i : NULL, &y[0], &y[1], &y[2], &y[3]);
                    for (int o = 0; o < 4; o++) ck_assert(y[o] == twant[o][i]);
                }
                vijp_qd_gemv_in(ref, m, n, A, LDA, x3, cc, qw, qwant[4]);
                for (size_t i = 0; i < m; i++) {
                    double y[4], b;
                    ref->qd_row(n, A + i, LDA, x3, 1, cc ? cc + i : NULL, y, &b);
                    for (int o = 0; o < 4; o++) ck_assert(y[o] == qwant[o][i]);
                    ck_assert(b == qwant[4][i]);
                }
                for (int s = 1; s < VIJP_DD_SET_COUNT; s++) {
                    const vijp_dd_kernels *k = vijp_dd_set(s);
                    if (!k) continue;
                    vijp_dd_gemm_in(k, m, COLS, n, A, LDA, B, bl, N, cc, got[0], got[1], got[2], M);
                    for (size_t j = 0; j < COLS; j++)
                        for (int o = 0; o < 3; o++)
                            ck_assert_msg(same_bits(got[o] + j * M, want[o] + j * M, m),
                                          "set %s differs from ref: m %zu n %zu variant %d column %zu", k->name, m, n,
                                          variant, j);
                    vijp_td_gemv_in(k, m, n, A, LDA, B, bl, cc, tgot[0], tgot[1], tgot[2], tgot[3]);
                    for (int o = 0; o < 4; o++)
                        ck_assert_msg(same_bits(tgot[o], twant[o], m),
                                      "set %s's triple-double differs from ref: m %zu n %zu variant %d", k->name, m, n,
                                      variant);
                    vijp_qd_gemv_in(k, m, n, A, LDA, x3, cc, qg, qgot[4]);
                    for (int o = 0; o < 5; o++)
                        ck_assert_msg(same_bits(qgot[o], qwant[o], m),
                                      "set %s's triple-double x differs from ref: m %zu n %zu variant %d", k->name, m,
                                      n, variant);
                }
            }
}
END_TEST

/* A 256 × 256 matrix-vector product on the active set, as the benchmark's,
 * with some rows ill-conditioned: every output against the oracle. */
START_TEST(gemv_against_oracle)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 5);
    enum { m = 256, n = 256 };
    double *A = malloc(m * n * sizeof *A), x[n], xl[n], c[m], yh[m], yl[m], yb[m], th[m], tm[m], tl[m], tb[m], row[n];
    double xm[n], xll[n], qy[4][m], qb[m], *const qp[4] = {qy[0], qy[1], qy[2], qy[3]};
    const double *const x3[3] = {x, xm, xll};
    ck_assert_ptr_nonnull(A);
    for (size_t i = 0; i < m * n; i++) A[i] = vijp_rng_normal(&g) / 16;
    for (size_t j = 0; j < n; j++) x[j] = vijp_rng_normal(&g) / 3, xl[j] = low_part(&g, x[j]);
    low_parts(&g, n, (double *const[]){x, xm, xll});
    for (size_t i = 0; i < m; i++) c[i] = vijp_rng_normal(&g);
    for (size_t i = 0; i < m; i += 16) { /* row i cancels: its last entry makes Σ a_ij x_j + c_i tiny */
        mpfr_t S, T;
        mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
        exact_dot(S, T, n - 1, A + i, m, x, NULL, 1, c + i);
        A[i + (n - 1) * m] = -mpfr_get_d(S, MPFR_RNDN) / x[n - 1];
        mpfr_clears(S, T, (mpfr_ptr)0);
    }
    mpfr_t S, T;
    mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
    for (int dd = 0; dd < 2; dd++) {
        ck_assert_uint_eq(vijp_dd_gemv(m, n, A, m, x, dd ? xl : NULL, c, yh, yl, yb), 0);
        ck_assert_uint_eq(vijp_td_gemv(m, n, A, m, x, dd ? xl : NULL, c, th, tm, tl, tb), 0);
        for (size_t i = 0; i < m; i++) {
            for (size_t j = 0; j < n; j++) row[j] = A[i + j * m];
            exact_dot(S, T, n, row, 1, x, dd ? xl : NULL, 1, c + i);
            char what[80];
            snprintf(what, sizeof what, "gemv row %zu, set %s, seed %llu", i, vijp_dd_active()->name,
                     (unsigned long long)test_seed());
            check_output((double[]){yh[i], yl[i]}, 2, yb[i], S, T, n + 1, dd, what);
            snprintf(what, sizeof what, "triple-double gemv row %zu, set %s, seed %llu", i, vijp_dd_active()->name,
                     (unsigned long long)test_seed());
            check_output((double[]){th[i], tm[i], tl[i]}, 3, tb[i], S, T, n + 1, dd, what);
        }
    }
    ck_assert_uint_eq(vijp_qd_gemv(m, n, A, m, x3, c, qp, qb), 0);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) row[j] = A[i + j * m];
        exact_dot_parts(S, T, n, row, 1, x3, 3, 1, c + i);
        char what[80];
        snprintf(what, sizeof what, "triple-double x gemv row %zu, set %s, seed %llu", i, vijp_dd_active()->name,
                 (unsigned long long)test_seed());
        check_output((double[]){qy[0][i], qy[1][i], qy[2][i], qy[3][i]}, 4, qb[i], S, T, n + 1, 1, what);
    }
    mpfr_clears(S, T, (mpfr_ptr)0);
    free(A);
}
END_TEST

/* ---- four-part x, five levels (bound.c, 11) ---- */

/* One output y[0..4] with its bound against the exact sum S: finite, the
 * error within the bound, and, where the parts are normalised (|x_(k+1)|
 * <= u|x_k|), the bound not vacuous: at most twice the DotK-style estimate
 * of the last level's size, (n + 2)u·γ_7N·γ_5N·γ_3N·γ_(N+5)·T, plus
 * (4N + 8)η (T = |c| + Σ|a_j·x0_j|, N = n + 1).  Returns the bound over T. */
static double check_d5_output(const double y[5], double bound, mpfr_t S, mpfr_t T, size_t n, int normalised,
                              const char *what)
{
    mpfr_t err, apr, g;
    mpfr_inits2(256, apr, g, (mpfr_ptr)0);
    mpfr_init2(err, EXACT_PREC + 64);
    for (int k = 0; k < 5; k++) ck_assert_msg(isfinite(y[k]), "%s: part %d not finite", what, k);
    ck_assert_msg(isfinite(bound), "%s: bound not finite", what);
    mpfr_set_d(err, y[0], MPFR_RNDN);
    for (int k = 1; k < 5; k++) ck_assert_int_eq(mpfr_add_d(err, err, y[k], MPFR_RNDN), 0);
    ck_assert_int_eq(mpfr_sub(err, err, S, MPFR_RNDN), 0);
    mpfr_abs(err, err, MPFR_RNDN);
    ck_assert_msg(mpfr_cmp_d(err, bound) <= 0, "%s: error %.3e above the returned bound %.3e", what,
                  mpfr_get_d(err, MPFR_RNDN), bound);
    double N = (double)n + 1;
    if (normalised) {
        gamma_up(apr, 7 * N), gamma_up(g, 5 * N), mpfr_mul(apr, apr, g, MPFR_RNDU);
        gamma_up(g, 3 * N), mpfr_mul(apr, apr, g, MPFR_RNDU);
        gamma_up(g, N + 5), mpfr_mul(apr, apr, g, MPFR_RNDU);
        mpfr_mul_d(apr, apr, 2 * ((double)n + 2) * 0x1p-53, MPFR_RNDU);
        mpfr_mul(apr, apr, T, MPFR_RNDU);
        mpfr_add_d(apr, apr, (4 * N + 8) * eta, MPFR_RNDU);
        ck_assert_msg(mpfr_cmp_d(apr, bound) >= 0, "%s: returned bound %.3e above the estimate %.3e", what, bound,
                      mpfr_get_d(apr, MPFR_RNDN));
    }
    double rel = mpfr_zero_p(T) ? 0 : bound / mpfr_get_d(T, MPFR_RNDU);
    mpfr_clears(err, apr, g, (mpfr_ptr)0);
    return rel;
}

/* Σ a_j·(x0 + x1 + x2 + x3)_j (+ c) through every set's d5_row, and its
 * gemv of one row; returns the largest bound over T. */
static double check_d5(size_t n, const double *a, size_t inca, const double *const x[4], size_t incx,
                       const double *c, int normalised, const char *what)
{
    mpfr_t S, T;
    mpfr_init2(S, EXACT_PREC), mpfr_init2(T, 256);
    exact_dot_parts(S, T, n, a, inca, x, 4, incx, c);
    double worst = 0;
    char msg[200];
    for (int s = 0; s < VIJP_DD_SET_COUNT; s++) {
        const vijp_dd_kernels *k = vijp_dd_set(s);
        if (!k) continue;
        double y[5], bound;
        ck_assert_int_eq(k->d5_row(n, a, inca, x, incx, c, y, &bound), 0);
        snprintf(msg, sizeof msg, "%s (n %zu%s, four-part x, set %s, seed %llu)", what, n, c ? " + c" : "", k->name,
                 (unsigned long long)test_seed());
        double rel = check_d5_output(y, bound, S, T, n, normalised, msg);
        worst = rel > worst ? rel : worst;
    }
    mpfr_clears(S, T, (mpfr_ptr)0);
    return worst;
}

/* x[1..3] := normalised low parts below x[0], n of them. */
static void low_parts4(vijp_rng *g, size_t n, double *const x[4])
{
    for (size_t j = 0; j < n; j++)
        for (int k = 1; k < 4; k++) x[k][j] = low_part(g, x[k - 1][j]);
}

/* Random sums of 0 to 1000 terms, strided, with and without c; on the 256
 * terms of a width-256 layer the bound is below 2^-225 of Σ|terms|, what
 * rounding to 212 bits needs with room (the reference's level there). */
START_TEST(four_parts_random)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 6);
    static const size_t sizes[] = {0, 1, 2, 3, 5, 17, 64, 256, 1000};
    double *a = malloc(3 * 1000 * sizeof *a), *xs[4];
    for (int k = 0; k < 4; k++) {
        xs[k] = malloc(2 * 1000 * sizeof *xs[k]);
        ck_assert_ptr_nonnull(xs[k]);
    }
    ck_assert_ptr_nonnull(a);
    double worst256 = 0;
    for (long it = 0; it < test_iters(2); it++)
        for (size_t is = 0; is < sizeof sizes / sizeof *sizes; is++) {
            size_t n = sizes[is], inca = 1 + it % 3, incx = 1 + (it + 1) % 2;
            for (size_t j = 0; j < 3 * n; j++) a[j] = vijp_rng_normal(&g);
            for (size_t j = 0; j < 2 * n; j++) xs[0][j] = vijp_rng_normal(&g) / 3;
            low_parts4(&g, 2 * n, xs);
            double c = vijp_rng_normal(&g);
            double r1 = check_d5(n, a, inca, (const double *const *)xs, incx, NULL, 1, "random");
            double r2 = check_d5(n, a, inca, (const double *const *)xs, incx, &c, 1, "random");
            if (n == 256) worst256 = fmax(worst256, fmax(r1, r2));
        }
    ck_assert_msg(worst256 > 0 && worst256 < 0x1p-225, "bound / T at n = 256: %a", worst256);
    free(a);
    for (int k = 0; k < 4; k++) free(xs[k]);
}
END_TEST

/* GenDot up to condition 1e40, a dynamic range of ±500 in the exponents,
 * products in and below the subnormal range, and parts of any sizes (the
 * bound assumes nothing of them): each error within its bound. */
START_TEST(four_parts_hard)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 7);
    enum { n = 100 };
    double x[n], y[n], y1[n], y2[n], y3[n];
    double *const ys[4] = {y, y1, y2, y3};
    static const double conds[] = {1e10, 1e20, 1e30, 1e40};
    for (long it = 0; it < test_iters(3); it++) {
        for (size_t ic = 0; ic < sizeof conds / sizeof *conds; ic++) {
            gen_dot(&g, n, conds[ic], x, y);
            low_parts4(&g, n, ys);
            check_d5(n, x, 1, (const double *const *)ys, 1, NULL, 1, "GenDot");
        }
        for (size_t j = 0; j < n; j++) { /* a dynamic range of ±500, a large c */
            x[j] = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 1001) - 500);
            y[j] = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 1001) - 500);
        }
        low_parts4(&g, n, ys);
        double c = ldexp(1, 900);
        check_d5(n, x, 1, (const double *const *)ys, 1, NULL, 1, "dynamic range");
        check_d5(n, x, 1, (const double *const *)ys, 1, &c, 1, "dynamic range");
        for (size_t j = 0; j < n; j++) /* products near 2^-1080, their low parts' products far below η */
            x[j] = ldexp(1 + vijp_rng_uniform(&g), -540 + (int)(vijp_rng_u64(&g) % 20)),
            y[j] = ldexp(vijp_rng_uniform(&g) - 0.5, -540 - (int)(vijp_rng_u64(&g) % 20));
        low_parts4(&g, n, ys);
        check_d5(n, x, 1, (const double *const *)ys, 1, NULL, 1, "subnormal");
        for (size_t j = 0; j < n; j++) /* parts of any sizes and signs */
            for (int k = 0; k < 4; k++) ys[k][j] = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 200) - 100);
        check_d5(n, x, 1, (const double *const *)ys, 1, NULL, 0, "parts of any sizes");
    }
}
END_TEST

/* Overflow and NaN give bound +inf (the row alone in a gemv); every set
 * gives ref's bits at every row count, with and without c. */
START_TEST(four_parts_sets_and_overflow)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 8);
    enum { M = 37, N = 33, LDA = M + 3 };
    static double A[LDA * N], x[4][N], c[M], want[6][M], got[6][M];
    double *const xp[4] = {x[0], x[1], x[2], x[3]};
    double *const yw[5] = {want[0], want[1], want[2], want[3], want[4]};
    double *const yg[5] = {got[0], got[1], got[2], got[3], got[4]};
    for (size_t i = 0; i < LDA * N; i++) A[i] = vijp_rng_normal(&g);
    for (size_t j = 0; j < N; j++) x[0][j] = vijp_rng_normal(&g);
    low_parts4(&g, N, xp);
    for (size_t i = 0; i < M; i++) c[i] = vijp_rng_normal(&g);
    const vijp_dd_kernels *ref = vijp_dd_set(0);
    static const size_t ns[] = {0, 1, 7, N};
    for (size_t m = 1; m <= M; m++)
        for (size_t in = 0; in < 4; in++)
            for (int withc = 0; withc < 2; withc++) {
                size_t n = ns[in];
                const double *cc = withc ? c : NULL;
                ck_assert_uint_eq(vijp_d5_gemv_in(ref, m, n, A, LDA, (const double *const *)xp, cc, yw, want[5]), 0);
                for (size_t i = 0; i < m; i++) {
                    double y[5], b;
                    ref->d5_row(n, A + i, LDA, (const double *const *)xp, 1, cc ? cc + i : NULL, y, &b);
                    for (int o = 0; o < 5; o++) ck_assert(y[o] == want[o][i]);
                    ck_assert(b == want[5][i]);
                }
                for (int s = 1; s < VIJP_DD_SET_COUNT; s++) {
                    const vijp_dd_kernels *k = vijp_dd_set(s);
                    if (!k) continue;
                    vijp_d5_gemv_in(k, m, n, A, LDA, (const double *const *)xp, cc, yg, got[5]);
                    for (int o = 0; o < 6; o++)
                        ck_assert_msg(same_bits(got[o], want[o], m), "set %s's four-part x differs from ref: m %zu n %zu",
                                      k->name, m, n);
                }
            }
    A[13 + 2 * LDA] = DBL_MAX, x[0][2] = 3; /* row 13 overflows */
    double nan_row = A[20 + 5 * LDA];
    A[20 + 5 * LDA] = NAN; /* row 20 is NaN */
    for (int s = 0; s < VIJP_DD_SET_COUNT; s++) {
        const vijp_dd_kernels *k = vijp_dd_set(s);
        if (!k) continue;
        ck_assert_uint_eq(vijp_d5_gemv_in(k, M, N, A, LDA, (const double *const *)xp, c, yg, got[5]), 2);
        for (size_t i = 0; i < M; i++) ck_assert(i == 13 || i == 20 ? got[5][i] == INFINITY : isfinite(got[5][i]));
    }
    A[20 + 5 * LDA] = nan_row;
    ck_assert(vijp_d5_bound(1, VIJP_D5_MAX_TERMS + 1, VIJP_D5_MAX_TERMS + 1) == INFINITY);
}
END_TEST

Suite *suite_ddot(void)
{
    Suite *s = suite_create("ddot");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, random_inputs);
    tcase_add_test(tc, ill_conditioned);
    tcase_add_test(tc, dynamic_range);
    tcase_add_test(tc, subnormal);
    tcase_add_test(tc, overflow_and_nan);
    tcase_add_test(tc, sets_agree);
    tcase_add_test(tc, gemv_against_oracle);
    tcase_add_test(tc, four_parts_random);
    tcase_add_test(tc, four_parts_hard);
    tcase_add_test(tc, four_parts_sets_and_overflow);
    suite_add_tcase(s, tc);
    return s;
}

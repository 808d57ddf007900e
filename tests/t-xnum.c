/* vijp_xnum (vijp/xnum.h): numbers m·2^e that keep their exponent where a
 * double cannot, against MPFR as the oracle (its exponent range holds
 * everything below exactly), and their text and JSON forms. */
#include "fixtures/testutil.h"
#include "vijp/xnum.h"
#include "vijp/rng.h"
#include "base/xnum_json.h"
#include <float.h>
#include <math.h>
#include <string.h>

/* m in ±[1/2, 1) with 53 random bits, e in [−span, span]: any sign and size */
static vijp_xnum random_xnum(vijp_rng *g, long span)
{
    double m = ldexp((double)(vijp_rng_u64(g) >> 11 | 1ull << 52), -53);
    if (vijp_rng_u64(g) & 1) m = -m;
    return vijp_xnum_2exp(m, (long)(vijp_rng_u64(g) % (uint64_t)(2 * span + 1)) - span);
}

/* x is exactly y (y at 53 bits or fewer) */
static int equals_mpfr(vijp_xnum x, mpfr_srcptr y)
{
    mpfr_t t;
    mpfr_init2(t, 53);
    vijp_xnum_get_mpfr(t, x);
    int same = mpfr_nan_p(y) ? mpfr_nan_p(t) : mpfr_equal_p(t, y) && mpfr_signbit(t) == mpfr_signbit(y);
    mpfr_clear(t);
    return same;
}

/* Canonical: e = 0 exactly where the value is a normal double (or 0, ±Inf,
 * NaN), else 1/2 <= |m| < 1. */
static int canonical(vijp_xnum x)
{
    if (x.e == 0) return x.m == 0 || !isfinite(x.m) || fabs(x.m) >= DBL_MIN;
    double a = fabs(x.m);
    if (!(a >= 0.5 && a < 1)) return 0;
    return x.e > DBL_MAX_EXP || x.e < DBL_MIN_EXP;
}

START_TEST(doubles_stay_doubles)
{
    /* every normal double, 0, ±Inf: e = 0 and m the double itself, so the
     * report of ordinary precisions is what it was bit for bit */
    const double d[] = {1, -0.1, DBL_MIN, DBL_MAX, 0x1.fffffffffffffp-1, 1e-300, 0, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof d / sizeof *d; k++) {
        vijp_xnum x = vijp_xnum_of(d[k]);
        ck_assert_msg(x.e == 0 && !memcmp(&x.m, &d[k], sizeof x.m), "%a", d[k]);
        ck_assert(vijp_xnum_double(x) == d[k] && canonical(x));
    }
    ck_assert(isnan(vijp_xnum_of(NAN).m) && vijp_xnum_of(NAN).e == 0);
    /* a subnormal keeps its value, normalised; back to the same subnormal */
    vijp_xnum s = vijp_xnum_of(3 * 0x1p-1074);
    ck_assert(s.m == 0.75 && s.e == -1072 && vijp_xnum_double(s) == 3 * 0x1p-1074);
    /* 2^-1100 and 2^3000: past double's range both ways, exact here */
    vijp_xnum lo = vijp_xnum_2exp(1, -1100), hi = vijp_xnum_2exp(1, 3000);
    ck_assert(lo.m == 0.5 && lo.e == -1099 && vijp_xnum_double(lo) == 0);
    ck_assert(hi.m == 0.5 && hi.e == 3001 && isinf(vijp_xnum_double(hi)));
    /* an out-of-range value brought back into range is a double again */
    ck_assert(vijp_xnum_2exp(0.75, -1000).e == 0 && vijp_xnum_2exp(0.75, -1000).m == 0x1.8p-1001);
}
END_TEST

/* Through MPFR and back, exactly, at any exponent (MPFR's own range holds
 * ±60000 without any setting). */
START_TEST(mpfr_round_trip)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    mpfr_t y;
    mpfr_init2(y, 53);
    for (int k = 0; k < 2000; k++) {
        vijp_xnum x = random_xnum(&g, 60000);
        ck_assert(canonical(x));
        vijp_xnum_get_mpfr(y, x);
        vijp_xnum z = vijp_xnum_of_mpfr(y, MPFR_RNDN);
        ck_assert_msg(z.m == x.m && z.e == x.e, "%a·2^%ld became %a·2^%ld", x.m, x.e, z.m, z.e);
    }
    /* rounding to 53 bits in the direction asked, carry into the next binade included */
    mpfr_t w;
    mpfr_init2(w, 200);
    mpfr_set_ui_2exp(w, 1, -5000, MPFR_RNDN);
    mpfr_nextbelow(w); /* 2^-5000 − 2^-5200: rounds up to 2^-5000, down to below it */
    vijp_xnum up = vijp_xnum_of_mpfr(w, MPFR_RNDU), dn = vijp_xnum_of_mpfr(w, MPFR_RNDD);
    ck_assert(up.m == 0.5 && up.e == -4999);
    ck_assert(dn.m == 0x1.fffffffffffffp-1 && dn.e == -5000);
    mpfr_clears(y, w, (mpfr_ptr)0);
}
END_TEST

/* a·b, a/b and a + b are each rounded once to nearest: MPFR's at 53 bits
 * (products of 53-bit significands are exact at 106 bits; a sum of two whose
 * exponents lie more than 1022 apart rounds to the larger, as here). */
START_TEST(arithmetic_rounds_once)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 1);
    mpfr_t a, b, r;
    mpfr_inits2(53, a, b, r, (mpfr_ptr)0);
    for (int k = 0; k < 3000; k++) {
        /* exponents near each other (cancellation, carries) and far apart */
        long span = k % 3 == 0 ? 60 : k % 3 == 1 ? 2000 : 40000;
        vijp_xnum x = random_xnum(&g, span), y = random_xnum(&g, span);
        if (k % 3 == 2) { /* past double's range, within 60 binades of each other: the sum aligns */
            y = random_xnum(&g, 0);
            y = vijp_xnum_2exp(y.m, x.e + (long)(vijp_rng_u64(&g) % 121) - 60);
        }
        if (k % 7 == 0) y = (vijp_xnum){-x.m, x.e}; /* x + (−x) = 0 exactly */
        vijp_xnum_get_mpfr(a, x), vijp_xnum_get_mpfr(b, y);
        mpfr_mul(r, a, b, MPFR_RNDN);
        ck_assert_msg(equals_mpfr(vijp_xnum_mul(x, y), r), "mul %a·2^%ld, %a·2^%ld", x.m, x.e, y.m, y.e);
        mpfr_div(r, a, b, MPFR_RNDN);
        ck_assert_msg(equals_mpfr(vijp_xnum_div(x, y), r), "div %a·2^%ld, %a·2^%ld", x.m, x.e, y.m, y.e);
        mpfr_add(r, a, b, MPFR_RNDN);
        vijp_xnum s = vijp_xnum_add(x, y);
        ck_assert_msg(equals_mpfr(s, r) && canonical(s), "add %a·2^%ld, %a·2^%ld", x.m, x.e, y.m, y.e);
        /* the order, as MPFR's */
        int c = mpfr_cmp(a, b), want = (c > 0) - (c < 0);
        ck_assert_int_eq(vijp_xnum_cmp(x, y), want);
        ck_assert_int_eq(vijp_xnum_cmp(y, x), -want);
        /* log2 |x| = log2 |m| + e within 2 ulps of the result (|log2| <= 6e4 < 2^16) */
        mpfr_abs(r, a, MPFR_RNDN), mpfr_log2(r, r, MPFR_RNDN);
        double l = vijp_xnum_log2(x), lw = mpfr_get_d(r, MPFR_RNDN);
        ck_assert_msg(fabs(l - lw) <= 2 * 0x1p-52 * fabs(lw) + 0x1p-60, "log2: %.17g, MPFR %.17g", l, lw);
    }
    mpfr_clears(a, b, r, (mpfr_ptr)0);
    /* just under DBL_MIN: (1 − 2^-53)·2^-1022 is a 53-bit number, which a
     * double product rounds on the subnormal grid, a tie to even, up to
     * DBL_MIN; rounded once it is itself */
    vijp_xnum under = vijp_xnum_mul(vijp_xnum_of(0x1.fffffffffffffp-1), vijp_xnum_of(0x1p-1022));
    ck_assert_msg(under.m == 0x1.fffffffffffffp-1 && under.e == -1022, "%a·2^%ld", under.m, under.e);
    under = vijp_xnum_div(vijp_xnum_of(0x1.fffffffffffffp-1), vijp_xnum_of(0x1p+1022));
    ck_assert_msg(under.m == 0x1.fffffffffffffp-1 && under.e == -1022, "%a·2^%ld", under.m, under.e);
    /* the special values as double's */
    vijp_xnum nan = vijp_xnum_of(NAN), inf = vijp_xnum_of(INFINITY), zero = vijp_xnum_of(0), tiny = vijp_xnum_2exp(1, -3000);
    ck_assert_int_eq(vijp_xnum_cmp(nan, zero), 2);
    ck_assert(isnan(vijp_xnum_max_nan(tiny, nan).m) && isnan(vijp_xnum_max_nan(nan, tiny).m));
    ck_assert(vijp_xnum_cmp(vijp_xnum_max_nan(tiny, inf), inf) == 0 && vijp_xnum_cmp(vijp_xnum_max_nan(zero, tiny), tiny) == 0);
    ck_assert(vijp_xnum_le(zero, tiny) && !vijp_xnum_le(tiny, zero) && !vijp_xnum_le(nan, inf));
    ck_assert(isinf(vijp_xnum_div(tiny, zero).m) && isnan(vijp_xnum_div(zero, zero).m));
    ck_assert(vijp_xnum_log2(zero) == -INFINITY && vijp_xnum_log2(tiny) == -3000);
    ck_assert(fabs(vijp_xnum_log10(tiny) + 3000 * log10(2.0)) <= 1e-12);
}
END_TEST

/* Text at any exponent: printf's own where the value is a double; MPFR's
 * decimal elsewhere, checked against values worked out by hand (Python's
 * decimal module: 2^-1100 = 7.3621518…e-332, 2^-4032 = 1.7662715…e-1214);
 * 17 digits read back to the same value; a decimal is read at any exponent. */
START_TEST(text_round_trips)
{
    char buf[64], want[64];
    vijp_xnum_snprintf(buf, sizeof buf, "%.3e", vijp_xnum_2exp(1, -1100));
    ck_assert_str_eq(buf, "7.362e-332");
    vijp_xnum_snprintf(buf, sizeof buf, "%12.3e", vijp_xnum_2exp(1, -4032));
    ck_assert_str_eq(buf, " 1.766e-1214");
    vijp_xnum_snprintf(buf, sizeof buf, "x=%.5g!", vijp_xnum_2exp(1, 3000));
    ck_assert_str_eq(buf, "x=1.2302e+903!");
    const double d[] = {0.1, 1.0 / 3, 6.02e23, DBL_MIN, -2.5};
    const char *const fmts[] = {"%.17g", "%12.3e", "%g", "%8.0e", "%.3g"};
    for (size_t k = 0; k < 5; k++)
        for (size_t f = 0; f < 5; f++) {
            vijp_xnum_snprintf(buf, sizeof buf, fmts[f], vijp_xnum_of(d[k]));
            snprintf(want, sizeof want, fmts[f], d[k]);
            ck_assert_str_eq(buf, want);
        }
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 2);
    for (int k = 0; k < 2000; k++) {
        vijp_xnum x = random_xnum(&g, 60000), y;
        char *end;
        vijp_xnum_snprintf(buf, sizeof buf, VIJP_XNUM_ROUND_TRIP, x);
        ck_assert_msg(!vijp_xnum_parse(buf, &y, &end) && !*end && y.m == x.m && y.e == x.e, "%s", buf);
    }
    vijp_xnum y;
    char *end;
    ck_assert(!vijp_xnum_parse("1.61e-1214", &y, &end) && !*end && y.e != 0 && fabs(vijp_xnum_log10(y) + 1213.793) < 1e-3);
    ck_assert(!vijp_xnum_parse("1e-700,next", &y, &end) && !strcmp(end, ",next") && y.m > 0);
    ck_assert(!vijp_xnum_parse("0.25", &y, NULL) && y.m == 0.25 && y.e == 0);
    ck_assert(vijp_xnum_parse("abc", &y, &end) == -1 && vijp_xnum_parse("", &y, &end) == -1);
}
END_TEST

/* JSON: a number where the value is a double, its 17-digit string past
 * that, null where it is not finite; read back from either. */
START_TEST(json_forms)
{
    json_t *j = vijp_xnum_to_json(vijp_xnum_of(0.5));
    ck_assert(json_is_real(j) && json_real_value(j) == 0.5);
    json_decref(j);
    j = vijp_xnum_to_json(vijp_xnum_of(INFINITY));
    ck_assert(json_is_null(j));
    json_decref(j);
    vijp_xnum x = vijp_xnum_2exp(0x1.5555555555555p-1, -4000), y;
    j = vijp_xnum_to_json(x);
    ck_assert(json_is_string(j) && strstr(json_string_value(j), "e-1205"));
    ck_assert(!vijp_xnum_from_json(j, &y) && y.m == x.m && y.e == x.e);
    json_decref(j);
    j = json_integer(3);
    ck_assert(!vijp_xnum_from_json(j, &y) && y.m == 3 && y.e == 0);
    json_decref(j);
    const char *bad[] = {"1e-5 ", "nan", "inf", "x"};
    for (size_t k = 0; k < 4; k++) {
        j = json_string(bad[k]);
        ck_assert_msg(vijp_xnum_from_json(j, &y) == -1, "'%s' read", bad[k]);
        json_decref(j);
    }
    ck_assert(vijp_xnum_from_json(json_null(), &y) == -1);
}
END_TEST

Suite *suite_xnum(void)
{
    Suite *s = suite_create("xnum");
    TCase *tc = tcase_create("xnum");
    tcase_add_test(tc, doubles_stay_doubles);
    tcase_add_test(tc, mpfr_round_trip);
    tcase_add_test(tc, arithmetic_rounds_once);
    tcase_add_test(tc, text_round_trips);
    tcase_add_test(tc, json_forms);
    suite_add_tcase(s, tc);
    return s;
}

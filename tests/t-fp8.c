/* FP8 (format.h: e4m3, e5m2, OCP OFP8 1.0), against the specification
 * itself: every expected value comes from this file's own table, built
 * from the bit fields by OFP8's formula (ocp_value), and from rounding to
 * nearest even by brute force over that table (ocp_round), never from
 * src/format/.  The code under test is reached three ways: the arithmetic
 * (vo_set_d, vo_add, …) of e4m3 and e5m2, the storage rounding of their
 * mixed formats (vijp_mat_set_entry_d, vo_store), and the bit patterns
 * (vijp_fp8_encode, vijp_fp8_decode).  No tolerance: every claim is
 * equality (the sign of zero included, NaN as a class). */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int ebits, mbits, bias;
    int nan_top;    /* e4m3: S.1111.111 is the NaN, the rest of the top exponent values */
    double max;     /* OFP8 Table 1's largest finite value */
    double past;    /* the first value past max at the same precision, unbounded exponent */
} layout;

/* OFP8 Table 1: e4m3 max 1.75·2^8 = 448 (S.1111.110), and past it 1.875·2^8 =
 * 480, which would be S.1111.111 (odd); e5m2 max 1.75·2^15 = 57344
 * (S.11110.11), and past it 2^16 = 65536, which would be S.11111.00 (even). */
static const layout E4M3 = {"e4m3", 4, 3, 7, 1, 448, 480}, E5M2 = {"e5m2", 5, 2, 15, 0, 57344, 65536};

/* The value of pattern b by OFP8's formula: (−1)^S · 2^(E−bias) · 1.M for
 * E > 0, (−1)^S · 2^(1−bias) · 0.M for E = 0; e5m2's E = 31 is ±Inf (M = 0)
 * or NaN, e4m3's S.1111.111 NaN. */
static double ocp_value(const layout *l, unsigned b)
{
    unsigned s = b >> 7, e = (b >> l->mbits) & ((1u << l->ebits) - 1), m = b & ((1u << l->mbits) - 1);
    unsigned etop = (1u << l->ebits) - 1, mtop = (1u << l->mbits) - 1;
    double v;
    if (l->nan_top && e == etop && m == mtop) return NAN;
    if (!l->nan_top && e == etop) {
        if (m) return NAN;
        v = INFINITY;
    } else if (e == 0) v = ldexp(m, 1 - l->bias - l->mbits);
    else v = ldexp((1u << l->mbits) + m, (int)e - l->bias - l->mbits);
    return s ? -v : v;
}

/* What overflowing gives: saturating ±max; else e4m3 NaN, e5m2 ±Inf. */
static double ocp_overflow(const layout *l, int sat, int neg)
{
    double v = sat ? l->max : l->nan_top ? NAN : INFINITY;
    return neg ? -v : v;
}

/* x rounded to nearest, ties to the even pattern, over the finite values
 * and `past` (patterns 0 … top, consecutive values consecutive patterns);
 * landing on past, or x infinite, overflows. */
static double ocp_round(const layout *l, double x, int sat)
{
    if (isnan(x)) return NAN;
    if (isinf(x)) return ocp_overflow(l, sat, x < 0);
    double a = fabs(x), best = 0, bestd = INFINITY;
    for (unsigned b = 0; b < 0x80; b++) {
        double v = ocp_value(l, b);
        if (!isfinite(v)) v = b == (l->nan_top ? 0x7fu : 0x7cu) ? l->past : NAN; /* past: the next pattern's place */
        if (isnan(v)) continue;
        double d = fabs(a - v);
        if (d < bestd || (d == bestd && !(b & 1))) best = v, bestd = d;
    }
    if (best == l->past) return ocp_overflow(l, sat, x < 0);
    return x < 0 ? -best : best;
}

static int same(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

static vijp_format parse(const char *name)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(name, &f, &err), "%s: %s", name, err.msg);
    return f;
}

/* x rounded by the code under test: the format's own arithmetic (vo_set_d)
 * and its mixed format's storage (one rounding, vijp_mat_set_entry_d), both
 * checked against want, and the encoder against want's pattern. */
static void check_round(const layout *l, int sat, double x, double want)
{
    char plain[16], mixed[32];
    snprintf(plain, sizeof plain, "%s%s", l->name, sat ? ":sat" : "");
    snprintf(mixed, sizeof mixed, "%s+binary32", plain);
    vijp_format f = parse(plain), m = parse(mixed);
    mpfr_t r;
    mpfr_init2(r, f.prec);
    vo_set_d(r, x, &f);
    double got = mpfr_get_d(r, MPFR_RNDN);
    ck_assert_msg(same(got, want), "%s(%a) = %a, want %a", plain, x, got, want);
    vijp_mat a;
    vijp_mat_init(&a, 1, 1, &m);
    vijp_mat_set_entry_d(&a, 0, x);
    got = vijp_mat_get_d(&a, 0);
    ck_assert_msg(same(got, want), "%s stores %a as %a, want %a", mixed, x, got, want);
    vijp_mat_clear(&a);
    unsigned char bits;
    mpfr_t xd; /* x itself: r's 3 or 4 bits would round it first */
    mpfr_init2(xd, 53);
    mpfr_set_d(xd, x, MPFR_RNDN);
    ck_assert(!vijp_fp8_encode(&f, xd, &bits, NULL));
    ck_assert_msg(isnan(want) ? bits == 0x7f : same(ocp_value(l, bits), want), "%s: encode(%a) = 0x%02x, want %a",
                  plain, x, bits, want);
    mpfr_clears(r, xd, (mpfr_ptr)0);
}

/* Every one of the 256 patterns: decode gives ocp_value exactly, and
 * encode(decode(b)) = b but for NaN, which encodes as 0x7F (format.h), and
 * e5m2:sat's ±Inf, which saturates to ±57344 (S.11110.11). */
START_TEST(every_pattern)
{
    const layout *l = _i ? &E5M2 : &E4M3;
    const char *names[3] = {l->name, _i ? "e5m2:sat" : "e4m3:sat", _i ? "e5m2+binary32" : "e4m3+binary32"};
    for (int k = 0; k < 3; k++) {
        vijp_format f = parse(names[k]);
        mpfr_t v;
        mpfr_init2(v, 4);
        int nans = 0;
        for (unsigned b = 0; b < 256; b++) {
            double want = ocp_value(l, b);
            nans += isnan(want);
            ck_assert(!vijp_fp8_decode(&f, b, v, NULL));
            ck_assert_msg(same(mpfr_get_d(v, MPFR_RNDN), want), "%s: decode(0x%02x) = %a, want %a", names[k], b,
                          mpfr_get_d(v, MPFR_RNDN), want);
            unsigned char back;
            ck_assert(!vijp_fp8_encode(&f, v, &back, NULL));
            unsigned expect = isnan(want) ? 0x7f : isinf(want) && k == 1 ? (b & 0x80) | 0x7b : b;
            ck_assert_msg(back == expect, "%s: encode(decode(0x%02x)) = 0x%02x", names[k], b, back);
        }
        /* OFP8 Table 1: e4m3 has the two NaNs S.1111.111, e5m2 six (E = 31, M ≠ 0) */
        ck_assert_int_eq(nans, _i ? 6 : 2);
        ck_assert(f.store_max == l->max && f.value_bytes == 1);
        ck_assert_int_eq(vijp_fp8_decode(&f, 256, v, NULL), VIJP_EINVAL);
        mpfr_clear(v);
    }
    /* the table's anchors, as OFP8 Table 1 states them */
    ck_assert(ocp_value(&E4M3, 0x7e) == 448 && ocp_value(&E4M3, 0x01) == 0x1p-9 && ocp_value(&E4M3, 0x08) == 0x1p-6);
    ck_assert(ocp_value(&E5M2, 0x7b) == 57344 && ocp_value(&E5M2, 0x01) == 0x1p-16 && ocp_value(&E5M2, 0x04) == 0x1p-14);
    ck_assert(isinf(ocp_value(&E5M2, 0xfc)) && ocp_value(&E5M2, 0xfc) < 0 && isnan(ocp_value(&E4M3, 0xff)));
}
END_TEST

/* Between every two consecutive finite values a < b of the same sign: the
 * midpoint goes to the one of even pattern, the doubles just below and
 * above it to a and b; and each value to itself. */
START_TEST(ties_to_even)
{
    const layout *l = _i / 2 ? &E5M2 : &E4M3;
    int sat = _i % 2;
    for (unsigned b = 0; b < 0x80; b++) {
        double lo = ocp_value(l, b), hi = ocp_value(l, b + 1);
        if (!isfinite(hi)) break; /* past the largest finite value: overflow's test */
        for (int s = 1; s >= -1; s -= 2) {
            double mid = s * (lo + hi) / 2; /* exact: both have 4 bits at most */
            check_round(l, sat, s * lo, s * lo);
            check_round(l, sat, mid, s * (b & 1 ? hi : lo));
            check_round(l, sat, nextafter(mid, 0), s * lo);
            check_round(l, sat, nextafter(mid, s * INFINITY), s * hi);
            ck_assert(same(ocp_round(l, mid, sat), s * (b & 1 ? hi : lo))); /* the brute force agrees */
        }
    }
}
END_TEST

/* From the largest finite value M to 2M, and ±Inf, NaN.  The threshold is
 * (M + past)/2: e4m3's 464 is a tie between 448 (even, S.1111.110) and 480
 * (odd), so it stays 448 and overflows just above; e5m2's 61440 is a tie
 * between 57344 (odd) and 65536 (even), so it overflows itself.  Overflow:
 * e4m3 NaN, e5m2 ±Inf, either :sat ±M. */
START_TEST(overflow)
{
    const layout *l = _i / 2 ? &E5M2 : &E4M3;
    int sat = _i % 2;
    double t = (l->max + l->past) / 2;
    for (int s = 1; s >= -1; s -= 2) {
        for (int k = 0; k <= 256; k++) {
            double x = s * l->max * (1 + k / 256.0);
            check_round(l, sat, x, ocp_round(l, x, sat));
        }
        check_round(l, sat, s * nextafter(t, 0), s * l->max);
        check_round(l, sat, s * t, l->nan_top ? s * l->max : ocp_overflow(l, sat, s < 0));
        check_round(l, sat, s * nextafter(t, INFINITY), ocp_overflow(l, sat, s < 0));
        check_round(l, sat, s * INFINITY, ocp_overflow(l, sat, s < 0));
        check_round(l, sat, s * 0x1p1000, ocp_overflow(l, sat, s < 0));
    }
    check_round(l, sat, NAN, NAN);
}
END_TEST

/* Below the smallest subnormal d (e4m3 2^-9, e5m2 2^-16): d/2 is a tie
 * between 0 (even) and d, so it gives 0; anything under it 0; just above it
 * d; every zero keeps x's sign. */
START_TEST(underflow)
{
    const layout *l = _i ? &E5M2 : &E4M3;
    double d = ocp_value(l, 0x01);
    for (int sat = 0; sat <= 1; sat++)
        for (int s = 1; s >= -1; s -= 2) {
            check_round(l, sat, s * d / 2, s * 0.0);
            check_round(l, sat, s * nextafter(d / 2, 0), s * 0.0);
            check_round(l, sat, s * nextafter(d / 2, 1), s * d);
            check_round(l, sat, s * 0x1p-1000, s * 0.0);
            check_round(l, sat, s * 0.0, s * 0.0);
            for (int k = 1; k <= 24; k++) { /* a spread below d, brute force as the oracle */
                double x = s * d * ldexp(1 + (k % 5) / 5.0, -1 - k / 3);
                check_round(l, sat, x, ocp_round(l, x, sat));
            }
        }
}
END_TEST

/* One arithmetic result each, derived from OFP8 Table 1 in its comment. */
static double op(const char *fmt, char o, double a, double b)
{
    vijp_format f = parse(fmt);
    mpfr_t x, y, r;
    mpfr_inits2(f.prec, x, y, r, (mpfr_ptr)0);
    vo_set_d(x, a, &f), vo_set_d(y, b, &f);
    if (o == '+') vo_add(r, x, y, &f);
    else if (o == '*') vo_mul(r, x, y, &f);
    else vo_div(r, x, y, &f);
    double v = mpfr_get_d(r, MPFR_RNDN);
    mpfr_clears(x, y, r, (mpfr_ptr)0);
    return v;
}

START_TEST(arithmetic_overflow_and_underflow)
{
    ck_assert(isnan(op("e4m3", '+', 448, 32)));        /* 480 is S.1111.111: NaN */
    ck_assert(op("e4m3:sat", '+', 448, 32) == 448);
    ck_assert(op("e4m3", '+', 448, 16) == 448);        /* 464: the tie goes to the even 448 */
    ck_assert(isnan(op("e4m3", '*', -256, 2)));         /* −512: past −448 */
    ck_assert(op("e4m3:sat", '*', -256, 2) == -448);
    ck_assert(isnan(op("e4m3", '/', 1, 0)));            /* ∞ has no pattern in e4m3 */
    ck_assert(op("e4m3:sat", '/', -1, 0) == -448);
    ck_assert(isinf(op("e5m2", '+', 57344, 4096)));    /* 61440: the tie goes to the even 2^16, past the range */
    ck_assert(op("e5m2:sat", '+', 57344, 4096) == 57344);
    ck_assert(isinf(op("e5m2", '/', 1, 0)) && op("e5m2:sat", '/', 1, 0) == 57344);
    ck_assert(same(op("e4m3", '*', 0x1p-5, 0x1p-5), 0.0));     /* 2^-10: half of 2^-9, the tie to 0 */
    ck_assert(same(op("e4m3", '*', -0x1p-5, 0x1p-5), -0.0));
    ck_assert(op("e4m3", '*', 0x1.8p-5, 0x1p-5) == 0x1p-9);    /* 1.5·2^-10: past the tie */
    ck_assert(same(op("e5m2", '*', -0x1p-9, 0x1p-8), -0.0));   /* 2^-17: half of 2^-16 */
    ck_assert(op("e4m3", '+', 1, 0x1p-4) == 1);                 /* 1 + 2^-4: half of e4m3's ulp(1) = 2^-3, to the even 1 */
    ck_assert(op("e5m2", '+', 1, 0x1p-3) == 1 && op("e5m2", '+', 1, 0x1.8p-3) == 1.25);
}
END_TEST

START_TEST(parse_fp8)
{
    static const struct {
        const char *name;
        vijp_format_kind kind;
        long prec, emin, emax;
        vijp_overflow rule;
    } ok[] = {
        /* MPFR's convention (format.c): smallest subnormal 2^(emin−1), 2^emax past the largest binade */
        {"e4m3", VIJP_E4M3, 4, -8, 9, VIJP_OVERFLOW_NAN},
        {"e4m3:sat", VIJP_E4M3, 4, -8, 9, VIJP_OVERFLOW_SATURATE},
        {"e5m2", VIJP_E5M2, 3, -15, 16, VIJP_OVERFLOW_INF},
        {"e5m2:sat", VIJP_E5M2, 3, -15, 16, VIJP_OVERFLOW_SATURATE},
        {"e4m3+binary32", VIJP_MIXED, 4, -8, 9, VIJP_OVERFLOW_NAN},
        {"e4m3:sat+binary32", VIJP_MIXED, 4, -8, 9, VIJP_OVERFLOW_SATURATE},
        {"e5m2+binary32", VIJP_MIXED, 3, -15, 16, VIJP_OVERFLOW_INF},
        {"e5m2:sat+binary32", VIJP_MIXED, 3, -15, 16, VIJP_OVERFLOW_SATURATE},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        vijp_format f = parse(ok[i].name), acc;
        ck_assert_str_eq(f.name, ok[i].name);
        ck_assert_msg(f.kind == ok[i].kind && f.emulated && f.store_prec == ok[i].prec && f.store_emin == ok[i].emin &&
                          f.store_emax == ok[i].emax && f.store_overflow == ok[i].rule && f.value_bytes == 1,
                      "%s", ok[i].name);
        ck_assert(vijp_format_unit_roundoff(&f) == ldexp(1, -(int)ok[i].prec));
        vijp_format_accumulator(&f, &acc); /* mixed: binary32, where f′ between two passes is kept */
        ck_assert_str_eq(acc.name, f.mixed ? "binary32" : ok[i].name);
    }
    static const char *const bad[] = {"e4m3:", "e4m3:nosat", "e4m3:sat:sat", "e5m2sat+", "e4m3+binary16",
                                      "e4m3@avx2", "binary32+e4m3", "e3m4", "fp8"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_format f;
        ck_assert_msg(vijp_format_parse(bad[i], &f, NULL) == VIJP_EINVAL, "%s parsed", bad[i]);
    }
    static const struct {
        const char *in, *meant;
    } hint[] = {{"E4M3", "e4m3"}, {"float8_e4m3fn", "e4m3"}, {"float8_e5m2", "e5m2"}, {"e5m2sat", "e5m2:sat"},
                {"fp8_e4m3+fp32", "e4m3+binary32"}};
    for (size_t i = 0; i < sizeof hint / sizeof *hint; i++) {
        vijp_format f;
        vijp_error err = {0};
        char want[64];
        snprintf(want, sizeof want, "did you mean %s?", hint[i].meant);
        ck_assert_int_eq(vijp_format_parse(hint[i].in, &f, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, want), "%s: %s", hint[i].in, err.msg);
    }
    vijp_format b16 = parse("binary16");
    mpfr_t v;
    mpfr_init2(v, 8);
    unsigned char bits;
    ck_assert_int_eq(vijp_fp8_decode(&b16, 0, v, NULL), VIJP_EINVAL); /* not an FP8 */
    ck_assert_int_eq(vijp_fp8_encode(&b16, v, &bits, NULL), VIJP_EINVAL);
    /* scaled FP8 values carry a scale a byte does not hold: 57344 in
     * mxfp8 (a block of one, scaled) once packed as 0xB6, which reads -0.875 */
    static const char *const scaled[] = {"mxfp8+binary32", "mxfp8e5m2+binary32", "fp8+binary32"};
    mpfr_set_d(v, 57344, MPFR_RNDN);
    for (size_t i = 0; i < sizeof scaled / sizeof *scaled; i++) {
        vijp_format f = parse(scaled[i]);
        vijp_error err = {0};
        ck_assert_msg(vijp_fp8_encode(&f, v, &bits, &err) == VIJP_EINVAL && strstr(err.msg, "not FP8"), "%s: %s",
                      scaled[i], err.msg);
        ck_assert_int_eq(vijp_fp8_decode(&f, 0x40, v, NULL), VIJP_EINVAL);
    }
    mpfr_clear(v);
}
END_TEST

Suite *suite_fp8(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, parse_fp8);
    tcase_add_loop_test(tc, every_pattern, 0, 2);     /* e4m3, e5m2 */
    tcase_add_loop_test(tc, ties_to_even, 0, 4);      /* × saturating or not */
    tcase_add_loop_test(tc, overflow, 0, 4);
    tcase_add_loop_test(tc, underflow, 0, 2);
    tcase_add_test(tc, arithmetic_overflow_and_underflow);
    suite_add_tcase(s, tc);
    return s;
}

/* src/format/narrow.c, the native rounding onto FP8 and MX grids, against
 * the MPFR route it replaces: vo_set / vo_store (arith.c) for one value,
 * vijp_mx_line (mx.c) for MX blocks, each on a 64-bit MPFR copy of the
 * same double.  No tolerance: the claim is equality (the sign of zero
 * included, NaN as a class), and the portable, AVX2 and AVX-512 loops
 * must give the very same bits as the scalar function.  The points: every
 * one of the 256 codes, the midpoints between neighbouring codes and the
 * doubles on either side of them, the overflow thresholds, ±0, ±Inf, NaN,
 * doubles far below the subnormals, and random doubles.  One MX case is
 * also checked against the specification itself, on both routes
 * (ceil_scale_of_a_negative_amax). */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "format/mx.h"
#include "format/narrow.h"
#include <float.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const vijp_narrow_isa ISAS[] = {VIJP_NARROW_PORTABLE, VIJP_NARROW_AVX2, VIJP_NARROW_AVX512};
#define N_ISAS (sizeof ISAS / sizeof *ISAS)

static vijp_format parse(const char *name)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse(name, &f, NULL), 0);
    return f;
}

/* What the MPFR route stores for x: vo_store (a mixed format's storage
 * rounding) or vo_set (a plain one's, at its own precision). */
static double oracle(const vijp_format *f, double x)
{
    mpfr_t r;
    mpfr_init2(r, f->mixed ? 64 : f->prec);
    if (f->mixed) mpfr_set_d(r, x, MPFR_RNDN), vo_store(r, r, f);
    else vo_set_d(r, x, f);
    double d = mpfr_get_d(r, MPFR_RNDN);
    mpfr_clear(r);
    return d;
}

static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Every point of xs against the oracle, and every ISA's array against the
 * scalar function, bit for bit. */
static void check_points(const char *name, const double *xs, size_t n)
{
    vijp_format f = parse(name);
    vijp_narrow g = vijp_narrow_of(&f);
    double *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        double want = oracle(&f, xs[i]), r = vijp_narrow_round(xs[i], &g);
        ck_assert_msg(same(r, want), "%s: %a rounds to %a, the MPFR route to %a", name, xs[i], r, want);
    }
    for (size_t k = 0; k < N_ISAS; k++) {
        vijp_narrow_round_array(got, xs, n, &g, 1, 1, ISAS[k]);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(same_bits(got[i], vijp_narrow_round(xs[i], &g)), "%s, isa %d: %a gives %a, the scalar %a",
                          name, (int)ISAS[k], xs[i], got[i], vijp_narrow_round(xs[i], &g));
    }
    free(got);
}

/* The points around the grid of f, from its codes (decoded by fp8.c). */
static size_t code_points(const vijp_format *f, double *xs)
{
    double v[256];
    size_t nv = 0, n = 0;
    for (unsigned c = 0; c < 128; c++) {
        mpfr_t r;
        mpfr_init2(r, 64);
        ck_assert_int_eq(vijp_fp8_decode(f, c, r, NULL), 0);
        double d = mpfr_get_d(r, MPFR_RNDN);
        mpfr_clear(r);
        if (isfinite(d)) v[nv++] = d; /* ascending: the codes are ordered */
    }
    double top = ldexp(1, (int)f->store_emax);
    for (size_t i = 0; i < nv; i++) {
        double next = i + 1 < nv ? v[i + 1] : 2 * v[i] - v[i - 1]; /* past the largest: the next value of the grid */
        double mid = (v[i] + next) / 2;                            /* exact: few bits */
        double pts[] = {v[i], mid, nextafter(mid, 0), nextafter(mid, INFINITY), nextafter(v[i], INFINITY)};
        for (size_t k = 0; k < sizeof pts / sizeof *pts; k++) xs[n++] = pts[k], xs[n++] = -pts[k];
    }
    double extra[] = {INFINITY, NAN, top, nextafter(top, 0), 2 * top, 1e300, DBL_MAX, v[1] / 2, nextafter(v[1] / 2, 1),
                      v[1] / 4, 1e-300, 4.9e-324, ldexp(1, -1022)};
    for (size_t k = 0; k < sizeof extra / sizeof *extra; k++) xs[n++] = extra[k], xs[n++] = -extra[k];
    return n;
}

static const char *const FP8_FORMATS[] = {"e4m3", "e5m2", "e4m3:sat", "e5m2:sat", "e4m3+binary32", "e5m2+binary32",
                                          "e4m3:sat+binary32", "e5m2:sat+binary32"};

START_TEST(every_code_and_midpoint)
{
    double xs[256 * 10 + 64];
    for (size_t k = 0; k < sizeof FP8_FORMATS / sizeof *FP8_FORMATS; k++) {
        vijp_format f = parse(FP8_FORMATS[k]);
        check_points(FP8_FORMATS[k], xs, code_points(&f, xs));
    }
}
END_TEST

/* The 16-bit storage grids the stores also round natively: every positive
 * finite code of bfloat16 (binary32's top half) and binary16 (sign, 5
 * exponent bits biased by 15, 10 trailing bits), decoded here by their
 * definitions, with the points code_points takes around FP8's. */
static size_t code_points16(int bf16, double *xs)
{
    size_t n = 0;
    double prev = 0;
    for (unsigned c = 1; c < 0x7c00u + (bf16 ? 0x380u : 0); c++) { /* up to +Inf's code */
        double v;
        if (bf16) {
            uint32_t u = (uint32_t)c << 16;
            float fl;
            memcpy(&fl, &u, sizeof fl);
            v = fl;
        } else {
            unsigned e = c >> 10, m = c & 0x3ffu;
            v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
        }
        if (c > 1) {
            double mid = (prev + v) / 2; /* exact: few bits */
            double pts[] = {v, mid, nextafter(mid, 0), nextafter(mid, INFINITY), nextafter(v, INFINITY)};
            for (size_t k = 0; k < sizeof pts / sizeof *pts; k++) xs[n++] = pts[k], xs[n++] = -pts[k];
        }
        prev = v;
    }
    double top = bf16 ? 0x1.fep127 : 65504, ulp = bf16 ? 0x1p120 : 32; /* the largest finite, its spacing */
    double extra[] = {INFINITY, NAN, top + ulp / 2, nextafter(top + ulp / 2, 0), 2 * top, DBL_MAX, 1e-300, 4.9e-324, 0.0};
    for (size_t k = 0; k < sizeof extra / sizeof *extra; k++) xs[n++] = extra[k], xs[n++] = -extra[k];
    return n;
}

START_TEST(every_16_bit_code_and_midpoint)
{
    static const char *const formats[] = {"bfloat16+binary32", "binary16+binary32"};
    double *xs = malloc((0x7f80u * 10 + 32) * sizeof *xs);
    for (int k = 0; k < 2; k++) {
        size_t n = code_points16(k == 0, xs);
        ck_assert_uint_gt(n, 300000); /* some 31,000 codes, ten points each */
        check_points(formats[k], xs, n);
    }
    free(xs);
}
END_TEST

/* Random doubles: half of them anywhere (random bit patterns: every
 * exponent, NaNs and infinities now and then), half within a few binades
 * of the grid (subnormals to past the overflow). */
START_TEST(random_doubles)
{
    enum { N = 2000 };
    double *xs = malloc(N * sizeof *xs);
    vijp_rng r;
    for (size_t k = 0; k < sizeof FP8_FORMATS / sizeof *FP8_FORMATS; k++) {
        vijp_format f = parse(FP8_FORMATS[k]);
        test_case_rng(&r, 0x6e6172726f77, (long)k);
        for (size_t i = 0; i < N; i++) {
            uint64_t u = vijp_rng_u64(&r);
            if (i % 2) memcpy(&xs[i], &u, sizeof u);
            else xs[i] = ldexp(vijp_rng_uniform(&r) - 0.5, (int)(u % (uint64_t)(f.store_emax - f.store_emin + 8)) + (int)f.store_emin - 4);
        }
        check_points(FP8_FORMATS[k], xs, N);
    }
    free(xs);
}
END_TEST

static const char *const MX_FORMATS[] = {"mxfp8+binary32",    "mxfp8e5m2+binary32", "mxfp6+binary32",
                                         "mxfp6e3m2+binary32", "mxfp4+binary32",     "mxfp8:ceil+binary32",
                                         "mxfp4:ceil+binary32"};

/* One line of n values (stride apart in a buffer) through the MPFR route's
 * vijp_mx_line and the native one in every ISA. */
static void check_line(const vijp_format *f, const double *vals, size_t n, size_t stride, const char *what)
{
    size_t len = n ? (n - 1) * stride + 1 : 0;
    mpfr_t *m = malloc((len + 1) * sizeof *m);
    double *d = malloc((len + 1) * sizeof *d);
    for (size_t i = 0; i < len; i++) mpfr_init2(m[i], 64), mpfr_set_d(m[i], vals[i / stride], MPFR_RNDN);
    vijp_mx_line(f, m, n, stride);
    for (size_t k = 0; k < N_ISAS; k++) {
        for (size_t i = 0; i < len; i++) d[i] = vals[i / stride];
        vijp_narrow_mx_line(f, d, n, stride, ISAS[k]);
        for (size_t i = 0; i < n; i++) {
            double want = mpfr_get_d(m[i * stride], MPFR_RNDN);
            ck_assert_msg(same(d[i * stride], want), "%s, %s, n %zu, stride %zu, isa %d, entry %zu: %a gives %a, the MPFR route %a",
                          f->name, what, n, stride, (int)ISAS[k], i, vals[i], d[i * stride], want);
        }
    }
    for (size_t i = 0; i < len; i++) mpfr_clear(m[i]);
    free(m), free(d);
}

/* The adversarial blocks: zeros of both signs, NaN or Inf inside, amax at
 * the top of the element range (the specification's scale saturates it)
 * and just under a power of two, amax so small that the scale clamps at
 * 2^-127, so large that it passes 2^127, one huge value among tiny ones,
 * ties of the element grid; widths no multiple of 32, strided lines. */
START_TEST(adversarial_blocks)
{
    enum { W = 100 };
    double v[W];
    vijp_rng r;
    static const size_t widths[] = {1, 7, 31, 32, 33, 40, 64, 100};
    for (size_t fi = 0; fi < sizeof MX_FORMATS / sizeof *MX_FORMATS; fi++) {
        vijp_format f = parse(MX_FORMATS[fi]);
        test_case_rng(&r, 0x6d78, (long)fi);
        for (int kind = 0; kind < 10; kind++) {
            for (size_t i = 0; i < W; i++) {
                double u = vijp_rng_normal(&r), m = f.store_max;
                switch (kind) {
                case 0: v[i] = (i % 3) ? 0.0 : -0.0; break;
                case 1: v[i] = i % 37 == 5 ? NAN : u; break;
                case 2: v[i] = i % 41 == 9 ? (i % 2 ? INFINITY : -INFINITY) : u; break;
                case 3: v[i] = i % 32 == 3 ? 511.9 / 448 * m : u * m / 4; break; /* amax/X just under 2^(emax+1) */
                case 4: v[i] = ldexp(u, -140); break;                            /* scale clamps to 2^-127 */
                case 5: v[i] = i % 32 == 0 ? 3e38 * ldexp(1, 20) : u; break;     /* scale past 2^127: NaN */
                case 6: v[i] = i % 32 == 0 ? 1e30 : ldexp(u, -100); break;       /* tiny ones vanish */
                case 7: v[i] = ldexp(round(u * 64) / 2 + 0.25, (int)(i % 5)); break; /* grid ties */
                case 8: v[i] = i % 32 == 1 ? m : u * 1e-3; break;               /* amax the largest element */
                default: v[i] = u * ldexp(1, (int)(vijp_rng_u64(&r) % 60) - 30); break;
                }
            }
            for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
                char what[32];
                snprintf(what, sizeof what, "kind %d", kind);
                check_line(&f, v, widths[w], 1, what);
                check_line(&f, v, widths[w], 3, what);
            }
        }
    }
}
END_TEST

/* The ":ceil" scale of a block whose largest magnitude is negative and
 * exactly max·2^k: the specification's X = 2^ceil(log2(|amax|/max)) is
 * 2^k; here the block {-6·2^-7, -2^-8} of mxfp4:ceil: X = 2^-7, and
 * -2^-8/X = -1/2 (E2M1's smallest subnormal) is kept.  Expected values by
 * that definition, on both routes: the MPFR route once rounded amax/max
 * upwards with amax's sign (a negative quotient rounded toward zero,
 * compared with a positive power of two), took 2^-6 and flushed -2^-8 to
 * -0. */
START_TEST(ceil_scale_of_a_negative_amax)
{
    vijp_format f = parse("mxfp4:ceil+binary32");
    double v[2] = {-6 * 0x1p-7, -0x1p-8}, x = 0x1p-7; /* x: the smallest power of two with |amax| <= 6x */
    ck_assert(fabs(v[0]) <= 6 * x && fabs(v[0]) > 6 * x / 2);
    for (size_t k = 0; k < N_ISAS; k++) {
        double d[2] = {v[0], v[1]};
        vijp_narrow_mx_line(&f, d, 2, 1, ISAS[k]);
        ck_assert_msg(d[0] == -6 * x && d[1] == -0.5 * x, "isa %d: %a %a", (int)ISAS[k], d[0], d[1]);
    }
    mpfr_t m[2];
    for (int i = 0; i < 2; i++) mpfr_init2(m[i], 64), mpfr_set_d(m[i], v[i], MPFR_RNDN);
    vijp_mx_line(&f, m, 2, 1);
    ck_assert_msg(mpfr_cmp_d(m[0], -6 * x) == 0 && mpfr_cmp_d(m[1], -0.5 * x) == 0, "MPFR route: %a %a",
                  mpfr_get_d(m[0], MPFR_RNDN), mpfr_get_d(m[1], MPFR_RNDN));
    for (int i = 0; i < 2; i++) mpfr_clear(m[i]);
}
END_TEST

/* vijp_mat_store_as and vijp_mat_store_line on a matrix holding its
 * values as doubles (vijp/mat.h), which round FP8 grids and MX blocks
 * natively, against the MPFR route on a copy: vo_store entry by entry,
 * vijp_mx_line down each column (a row, for the strided line).  37 × 5
 * binary32 values of all magnitudes, ±0, ±Inf and NaN among them; the
 * 16-bit storage grids too. */
START_TEST(matrix_stores_match_the_mpfr_route)
{
    static const char *const formats[] = {"e4m3+binary32",  "e5m2+binary32",     "e4m3:sat+binary32", "e4m3+tc:h100",
                                          "mxfp8+binary32", "mxfp4:ceil+binary32", "mxfp6e3m2+binary32",
                                          "bfloat16+binary32", "binary16+binary32"};
    enum { R = 37, C = 5 };
    vijp_rng r;
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f = parse(formats[fi]);
        test_case_rng(&r, 0x6d6174, (long)fi);
        for (int line = 0; line < 2; line++) {
            vijp_mat a;
            vijp_mat_init(&a, R, C, &f);
            ck_assert(a.d != NULL); /* the stores under test are the double-held matrices' */
            mpfr_t *m = malloc(R * C * sizeof *m);
            for (size_t i = 0; i < R * C; i++) {
                double x = ldexp(vijp_rng_normal(&r), (int)(vijp_rng_u64(&r) % 40) - 20);
                /* ±Inf and NaN only from column 3 on (an MX block holding one is all NaN, which would
                 * hide every other value of it), ±0 everywhere */
                if (i % 29 == 3 && i >= 3 * R) x = (i % 2 ? -1 : 1) * INFINITY;
                if (i % 31 == 7 && i >= 3 * R) x = NAN;
                if (i % 23 == 5) x = i % 2 ? -0.0 : 0.0;
                mpfr_init2(m[i], f.prec);
                mpfr_set_d(m[i], x, MPFR_RNDN); /* to the format's 24 bits */
                a.d[i] = mpfr_get_d(m[i], MPFR_RNDN); /* exact */
            }
            if (!line) {
                vijp_mat_store_as(&a, VIJP_STORE_FORWARD);
                for (size_t j = 0; j < C; j++) {
                    if (f.mx_block) vijp_mx_line(&f, m + j * R, R, 1);
                    else
                        for (size_t i = 0; i < R; i++) vo_store(m[j * R + i], m[j * R + i], &f);
                }
            } else { /* row 3 as a strided line */
                vijp_mat_store_line(&a, 3, C, R);
                if (f.mx_block) vijp_mx_line(&f, m + 3, C, R);
                else
                    for (size_t j = 0; j < C; j++) vo_store(m[3 + j * R], m[3 + j * R], &f);
            }
            for (size_t i = 0; i < R * C; i++) {
                double got = a.d[i], want = mpfr_get_d(m[i], MPFR_RNDN);
                ck_assert_msg(same(got, want), "%s, %s, entry %zu: %a, the MPFR route %a", formats[fi],
                              line ? "row line" : "whole matrix", i, got, want);
                mpfr_clear(m[i]);
            }
            free(m);
            vijp_mat_clear(&a);
        }
    }
}
END_TEST

Suite *suite_narrow(void)
{
    Suite *s = suite_create("narrow");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_code_and_midpoint);
    tcase_add_test(tc, every_16_bit_code_and_midpoint);
    tcase_add_test(tc, random_doubles);
    tcase_add_test(tc, adversarial_blocks);
    tcase_add_test(tc, ceil_scale_of_a_negative_amax);
    tcase_add_test(tc, matrix_stores_match_the_mpfr_route);
    suite_add_tcase(s, tc);
    return s;
}

/* Tensor-core accumulation (STORE+tc:ARCH; src/format/tc.c).
 *
 * The model, as the sources state it (Fasi, Higham, Mikaitis and Pranesh,
 * PeerJ CS 2021; Khattak and Mikaitis 2025, their V100TC.m, A100TC.m,
 * H100TC.m, B200TC.m): a block of g exact products and the accumulator c
 * are aligned to the largest alignment exponent E (a product's e(a)+e(b),
 * c's e(c)), each truncated toward zero to a multiple of 2^Q,
 * Q = E − (p − 1) − x (p the accumulator's bits, x the extra alignment
 * bits), summed exactly and rounded toward zero to p bits.  The
 * parameters (g, x, p) the sources give: v100 binary16 (4, 0, 24); a100
 * binary16/bfloat16 (8, 1, 24), tf32 (4, 1, 24); h100 and b200
 * binary16/bfloat16 (16, 2, 24), tf32 (8, 2, 24); h100 FP8 (32, 0, 14)
 * with its accumulator added into binary32 every 128 products; b200 FP8
 * (32, 2, 24).  Every expected value below is derived by hand from these,
 * in the comment beside it; oracle_dot at the end is a second, separate
 * implementation (rationals, MPFR's own rounding) compared on random dot
 * products. */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "vijp/arith.h"
#include "vijp/drift.h"
#include <gmp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vijp_format parse(const char *name)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(name, &f, &err), "%s: %s", name, err.msg);
    return f;
}

START_TEST(parse_tc)
{
    static const struct {
        const char *name;
        int group, align, acc, promote;
        double u; /* the stored values' (tf32: the operands') unit roundoff, as STORE+binary32's */
    } ok[] = {
        {"binary16+tc:v100", 4, 0, 24, 0, 0x1p-11},   {"binary16+tc:a100", 8, 1, 24, 0, 0x1p-11},
        {"bfloat16+tc:a100", 8, 1, 24, 0, 0x1p-8},    {"tf32+tc:a100", 4, 1, 24, 0, 0x1p-11},
        {"bfloat16+tc:h100", 16, 2, 24, 0, 0x1p-8},   {"tf32+tc:h100", 8, 2, 24, 0, 0x1p-11},
        {"e4m3+tc:h100", 32, 0, 14, 128, 0x1p-4},     {"e5m2:sat+tc:h100", 32, 0, 14, 128, 0x1p-3},
        {"binary16+tc:b200", 16, 2, 24, 0, 0x1p-11},  {"e4m3+tc:b200", 32, 2, 24, 0, 0x1p-4},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        vijp_format f = parse(ok[i].name);
        ck_assert_str_eq(f.name, ok[i].name); /* printed back as given */
        ck_assert(f.mixed && f.kind == VIJP_MIXED && f.prec == 24);
        ck_assert_int_eq(f.tc_group, ok[i].group);
        ck_assert_int_eq(f.tc_align_bits, ok[i].align);
        ck_assert_int_eq(f.tc_acc_prec, ok[i].acc);
        ck_assert_int_eq(f.tc_promote, ok[i].promote);
        ck_assert(!f.tc_round_nearest);
        ck_assert(vijp_format_unit_roundoff(&f) == ok[i].u);
        /* the drift study's tolerance: its storage's, as STORE+binary32 */
        char base[32];
        snprintf(base, sizeof base, "%.*s+binary32", (int)(strstr(ok[i].name, "+tc:") - ok[i].name), ok[i].name);
        vijp_format b = parse(base);
        ck_assert(vijp_xnum_cmp(vijp_drift_default_tol(&f), vijp_drift_default_tol(&b)) == 0);
        ck_assert(f.store_prec == b.store_prec && f.operand_prec == b.operand_prec && f.value_bytes == b.value_bytes);
    }
    /* STORE+binary32 keeps index-order FMAs */
    ck_assert_int_eq(parse("bfloat16+binary32").tc_group, 0);

    static const struct {
        const char *name, *why;
    } bad[] = {
        {"bfloat16+tc:v100", "v100's tensor cores take no bfloat16"}, /* Volta has binary16 only */
        {"tf32+tc:v100", "take no tf32"},
        {"e4m3+tc:a100", "take no e4m3"},                              /* FP8 from Hopper on */
        {"binary16+tc:a200", "unknown tensor core 'a200'"},
        {"binary16+tc:", "unknown tensor core ''"},
        {"binary32+tc:h100", "tensor cores take binary16, bfloat16"},
        {"+tc:h100", "tensor cores take binary16, bfloat16"},
        {"bfloat16+tc:h100@cuda", "FORMAT@SET"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_format f;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_format_parse(bad[i].name, &f, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i].why), "%s: %s", bad[i].name, err.msg);
    }
}
END_TEST

/* acc0 + Σ a_k b_k through vo_dot_acc in format name, the operands given
 * as doubles (values of the format's operands). */
static double dot_in(const vijp_format *f, double acc0, const double *a, const double *b, size_t n)
{
    mpfr_t *va = vo_vec_new(n, f), *vb = vo_vec_new(n, f), acc;
    for (size_t k = 0; k < n; k++) mpfr_set_d(va[k], a[k], MPFR_RNDN), mpfr_set_d(vb[k], b[k], MPFR_RNDN);
    mpfr_init2(acc, f->prec);
    mpfr_set_d(acc, acc0, MPFR_RNDN);
    vo_dot_acc(acc, va, 1, vb, 1, n, NULL, f);
    double r = mpfr_get_d(acc, MPFR_RNDN);
    mpfr_clear(acc);
    vo_vec_free(va, n), vo_vec_free(vb, n);
    return r;
}

static double dot(const char *name, double acc0, const double *a, const double *b, size_t n)
{
    vijp_format f = parse(name);
    return dot_in(&f, acc0, a, b, n);
}

/* Extra alignment bits: c = −(1/2 − 2^-25) (binary32, in [1/4, 1/2): e = −2)
 * and one product 1·1 (e = 0), so E = 0.  Exact: 1/2 + 2^-25.
 *   v100, x = 0: Q = −23; c/2^Q = −(2^22 − 1/4) truncates to −(2^22 − 1);
 *     1·1 is 2^23: sum 2^22 + 1, i.e. 1/2 + 2^-23 (a binary32 number).
 *   a100, x = 1: Q = −24; c → −(2^23 − 1), sum 2^23 + 1: 1/2 + 2^-24.
 *   h100, b200, x = 2: Q = −25; c exact, sum 2^24 + 1: 1/2 + 2^-25, which
 *     needs 25 bits; toward zero (and to nearest, a tie, to even): 1/2.
 * Fasi et al.'s probe D.1 is this with c = −(1 − 2^-24): V100 2^-23. */
START_TEST(probe_alignment_bits)
{
    const double one[1] = {1}, c = -(0.5 - 0x1p-25);
    ck_assert(dot("binary16+tc:v100", c, one, one, 1) == 0.5 + 0x1p-23);
    ck_assert(dot("binary16+tc:a100", c, one, one, 1) == 0.5 + 0x1p-24);
    ck_assert(dot("bfloat16+tc:a100", c, one, one, 1) == 0.5 + 0x1p-24);
    ck_assert(dot("tf32+tc:a100", c, one, one, 1) == 0.5 + 0x1p-24);
    ck_assert(dot("bfloat16+tc:h100", c, one, one, 1) == 0.5);
    ck_assert(dot("binary16+tc:b200", c, one, one, 1) == 0.5);
    ck_assert(dot("binary16+tc:v100", -(1 - 0x1p-24), one, one, 1) == 0x1p-23); /* Fasi et al. D.1 */
    ck_assert(dot("binary16+tc:a100", -(1 - 0x1p-24), one, one, 1) == 0x1p-24);
}
END_TEST

/* The rounding of the accumulator: 1·2 + 1·(3·2^-24), c = 0 (3·2^-24 is a
 * binary16 subnormal, its alignment exponent −14: E = 1 from the 2).
 *   h100, x = 2: Q = 1 − 23 − 2 = −24: both exact, sum 2^25 + 3, i.e.
 *     2 + 3·2^-24 = 2 + 0.75 ulp (binary32's ulp at 2 is 2^-22): toward
 *     zero 2, to nearest 2 + 2^-22; negated, toward zero −2 (not −2 − 2^-22).
 *   binary16+binary32 (one FMA per term, to nearest): 2 + 2^-22.
 *   v100, Q = −22: 3·2^-24/2^-22 = 0.75 truncates to 0: 2.
 *   a100, Q = −23: 1.5 → 1, 2 + 2^-23 = 2 + half an ulp: toward zero 2,
 *     to nearest a tie, to the even 2. */
START_TEST(probe_rounding)
{
    const double a[2] = {1, 1}, b[2] = {2, 3 * 0x1p-24}, nb[2] = {-2, -3 * 0x1p-24};
    ck_assert(dot("binary16+tc:h100", 0, a, b, 2) == 2);
    ck_assert(dot("binary16+tc:h100", 0, a, nb, 2) == -2);
    ck_assert(dot("binary16+binary32", 0, a, b, 2) == 2 + 0x1p-22);
    ck_assert(dot("binary16+tc:v100", 0, a, b, 2) == 2);
    ck_assert(dot("binary16+tc:a100", 0, a, b, 2) == 2);
    vijp_format f = parse("binary16+tc:h100");
    f.tc_round_nearest = 1; /* the same block rounded to nearest */
    ck_assert(dot_in(&f, 0, a, b, 2) == 2 + 0x1p-22);
    ck_assert(dot_in(&f, 0, a, nb, 2) == -2 - 0x1p-22);
    vijp_format g = parse("binary16+tc:a100");
    g.tc_round_nearest = 1;
    ck_assert(dot_in(&g, 0, a, b, 2) == 2); /* the tie, to even */
}
END_TEST

/* Block size: k products s = 2^-(24+x) each, then 1·1 (all binary16 and
 * bfloat16 normals: s = 2^-12·2^-12, 2^-12·2^-13, 2^-13·2^-13), c = 0.
 *   k = g − 1: one block; E = 0, Q = −23 − x: s/2^Q = 1/2 truncates to 0,
 *     every s is lost: 1.
 *   k = g: the first block holds only the g smalls, E = −24 − x: their
 *     sum g·s = 2^-22 (g = 2^(2+x): 4, 8, 16) exact; the next block has
 *     c = 2^-22 = 2^(Q+1+x) units exactly: 1 + 2^-22.
 * One FMA per term (STORE+binary32) keeps every s: 1 + k·s. */
START_TEST(probe_block_size)
{
    static const struct {
        const char *name;
        int g, e1, e2; /* s = 2^e1 · 2^e2 */
    } cases[] = {{"binary16+tc:v100", 4, -12, -12}, {"binary16+tc:a100", 8, -12, -13},
                 {"bfloat16+tc:a100", 8, -12, -13}, {"bfloat16+tc:h100", 16, -13, -13},
                 {"binary16+tc:b200", 16, -13, -13}};
    double a[17], b[17];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int g = cases[i].g;
        for (int k = g - 1; k <= g; k++) {
            for (int j = 0; j < k; j++) a[j] = ldexp(1, cases[i].e1), b[j] = ldexp(1, cases[i].e2);
            a[k] = b[k] = 1;
            double got = dot(cases[i].name, 0, a, b, (size_t)k + 1);
            ck_assert_msg(got == (k < g ? 1 : 1 + 0x1p-22), "%s k=%d: %a", cases[i].name, k, got);
        }
        /* the 1 first: its block's E is 0 whatever follows, and c = 1 keeps it 0: every s lost */
        a[0] = b[0] = 1;
        for (int j = 1; j <= g; j++) a[j] = ldexp(1, cases[i].e1), b[j] = ldexp(1, cases[i].e2);
        ck_assert(dot(cases[i].name, 0, a, b, (size_t)g + 1) == 1);
    }
}
END_TEST

/* Hopper FP8: 1·1 + 2^-7·2^-7 (e5m2 normals; the product 2^-14).
 *   h100 (p = 14, x = 0): Q = 0 − 13 = −13; 2^-14/2^-13 = 1/2 → 0: 1.
 *     With 2^-6·2^-7 = 2^-13, one unit: kept, 1 + 2^-13 (14 bits).
 *   b200 (p = 24, x = 2): Q = −25, kept: 1 + 2^-14.
 * Promotion every 128 products: 1·1, 126 zero products, then at index 127
 * the 2^-14 is still in the first window (block 4, c = 1): lost, 1; at
 * index 128 it opens the second window: the tensor core's accumulator
 * restarts at 0 and holds 2^-14, which the binary32 addition to the
 * first window's 1 keeps: 1 + 2^-14.  Without promotion (tc_promote 0)
 * block 5 has c = 1 and loses it: 1. */
START_TEST(probe_hopper_fp8)
{
    const double a[2] = {1, 0x1p-7}, b[2] = {1, 0x1p-7}, b13[2] = {1, 0x1p-6};
    ck_assert(dot("e5m2+tc:h100", 0, a, b, 2) == 1);
    ck_assert(dot("e5m2+tc:h100", 0, a, b13, 2) == 1 + 0x1p-13);
    ck_assert(dot("e5m2+tc:b200", 0, a, b, 2) == 1 + 0x1p-14);
    ck_assert(dot("e5m2+binary32", 0, a, b, 2) == 1 + 0x1p-14);
    double x[129] = {0}, y[129] = {0};
    x[0] = y[0] = 1;
    x[127] = y[127] = 0x1p-7;
    ck_assert(dot("e5m2+tc:h100", 0, x, y, 128) == 1);
    x[127] = y[127] = 0;
    x[128] = y[128] = 0x1p-7;
    ck_assert(dot("e5m2+tc:h100", 0, x, y, 129) == 1 + 0x1p-14);
    vijp_format f = parse("e5m2+tc:h100");
    f.tc_promote = 0;
    ck_assert(dot_in(&f, 0, x, y, 129) == 1);
}
END_TEST

/* Fasi et al.'s test suite (github.com/north-numerical-computing/
 * tensor-cores-numerical-behavior, tc_test_numerics-V100.cu and
 * -A100-bf16.cu): the values the hardware gave, which their checks assert,
 * each derived here from the model.
 *   V100 D.4, carries: c = 1 + 2^-22 + 2^-23, products 1, 1, 1, 2^-23:
 *     E = 0, Q = −23: c = 2^23 + 3 units, the products 3·2^23 + 1: sum
 *     2^25 + 4, 4 + 2^-21, a binary32 number.
 *   V100 D.4, rounding in the normalisation: c = 1 + 2^-22 + 2^-23 and four
 *     products 1: 5·2^23 + 3 units, 5 + 0.75 ulp (ulp 2^-21 at 4): 5, and
 *     −5 for the negated terms (toward zero).
 *   V100 D.3, subtraction: products 1·1 and 1·(−2^-24), c = −1 + 2^-24;
 *     Q = −23: 2^23, −1/2 → 0, −(2^23 − 1/2) → −(2^23 − 1): 2^-23.
 *   V100 D.5, not monotonic: four products 1·2^-24 (2^-24 a binary16
 *     subnormal: alignment exponent −14, so the products' is −14).  With
 *     c = 1 − 2^-24 (e = −1): E = −1, Q = −24, c = 2^24 − 1 units, each
 *     product 1: 2^24 + 3, 1 + 1.5 ulp, toward zero 1 + 2^-23.  With the
 *     larger c = 1: Q = −23, each product 1/2 → 0: 1, the smaller result.
 *   A100 (bfloat16) D.3: the same subtraction with one extra bit, Q = −24:
 *     2^24 − 1 − (2^24 − 1) = 0.
 *   A100 D.5: products 0.5·2^-24 (three, alignment exponent −25) and
 *     0.5·(2^-23 + 2^-24) (−24); c = 1 − 2^-24: E = −1, Q = −25, c =
 *     2^25 − 2, products 1, 1, 1, 3: 2^25 + 4, 1 + 2^-23.  c = 1: Q = −24,
 *     the products 1/2, 1/2, 1/2, 3/2 → 0, 0, 0, 1: 1 + 2^-24 → 1. */
START_TEST(probe_published)
{
    const double one4[4] = {1, 1, 1, 1}, m1[4] = {-1, -1, -1, -1}, c = 1 + 0x1p-22 + 0x1p-23;
    for (int i = 0; i < 4; i++) { /* the small product in each position */
        double b[4] = {1, 1, 1, 1};
        b[i] = 0x1p-23;
        ck_assert(dot("binary16+tc:v100", c, one4, b, 4) == 4 + 0x1p-21);
    }
    ck_assert(dot("binary16+tc:v100", c, one4, one4, 4) == 5);
    ck_assert(dot("binary16+tc:v100", -c, one4, m1, 4) == -5);
    const double sa[2] = {1, 1}, sb[2] = {1, -0x1p-24};
    ck_assert(dot("binary16+tc:v100", -1 + 0x1p-24, sa, sb, 2) == 0x1p-23);
    ck_assert(dot("bfloat16+tc:a100", -1 + 0x1p-24, sa, sb, 2) == 0);
    const double tiny[4] = {0x1p-24, 0x1p-24, 0x1p-24, 0x1p-24};
    ck_assert(dot("binary16+tc:v100", 1 - 0x1p-24, one4, tiny, 4) == 1 + 0x1p-23);
    ck_assert(dot("binary16+tc:v100", 1, one4, tiny, 4) == 1);
    const double half[4] = {0.5, 0.5, 0.5, 0.5}, mb[4] = {0x1p-24, 0x1p-24, 0x1p-24, 0x1p-23 + 0x1p-24};
    ck_assert(dot("bfloat16+tc:a100", 1 - 0x1p-24, half, mb, 4) == 1 + 0x1p-23);
    ck_assert(dot("bfloat16+tc:a100", 1, half, mb, 4) == 1);
}
END_TEST

/* Special values, as GEMM.m: NaN wins, Inf·0 and +Inf − Inf are NaN, an Inf
 * alone stays; a sum from 2^128 on is Inf (2^127·2 is bfloat16's 2^127
 * times 2); a sum that cancels exactly is +0. */
START_TEST(probe_specials)
{
    const double one[2] = {1, 1}, inf0[2] = {INFINITY, 0}, infs[2] = {INFINITY, -INFINITY};
    ck_assert(isnan(dot("bfloat16+tc:h100", 0, inf0, inf0 + 1, 1)));
    ck_assert(isnan(dot("bfloat16+tc:h100", 0, infs, one, 2)));
    ck_assert(dot("bfloat16+tc:h100", 1, infs, one, 1) == INFINITY);
    ck_assert(isnan(dot("bfloat16+tc:h100", NAN, one, one, 1)));
    const double big[1] = {0x1p127}, two[1] = {2};
    ck_assert(dot("bfloat16+tc:a100", 0, big, two, 1) == INFINITY);
    ck_assert(dot("bfloat16+tc:a100", 0x1p127, big, one, 1) == INFINITY);
    const double pm[2] = {1, -1};
    double z = dot("bfloat16+tc:a100", 0, pm, one, 2);
    ck_assert(z == 0 && !signbit(z));
    /* subnormal results, truncated: 2^-126·2^-1 = 2^-127 (bfloat16 operands) stays */
    const double t[1] = {0x1p-126}, h[1] = {0.5};
    ck_assert(dot("bfloat16+tc:h100", 0, t, h, 1) == 0x1p-127);
}
END_TEST

/* ---- an independent oracle: rationals, and MPFR's own rounding ---- */

typedef struct {
    int g, x, p, promote, in_emin; /* in_emin: the operands' smallest normal exponent */
} params;

/* floor(log2 |v|), at least lo: the alignment exponent. */
static long aexp(double v, int lo)
{
    int e = ilogb(v);
    return e < lo ? lo : e;
}

/* c := round-toward-zero to p bits, binary32's exponent range (subnormals
 * from 2^(−126−(p−1))), of the rational s, by MPFR. */
static double rz(const mpq_t s, int p)
{
    if (!mpq_sgn(s)) return 0;
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t r;
    mpfr_init2(r, p);
    mpfr_set_emin(-126 - (p - 1) + 1); /* MPFR's: the smallest subnormal is 2^(emin−1) */
    mpfr_set_emax(128);
    int t = mpfr_set_q(r, s, MPFR_RNDZ);
    t = mpfr_check_range(r, t, MPFR_RNDZ);
    mpfr_subnormalize(r, t, MPFR_RNDZ);
    double d = mpfr_get_d(r, MPFR_RNDN);
    mpfr_set_emin(emin), mpfr_set_emax(emax);
    mpfr_clear(r);
    return d;
}

/* One block FMA: c + Σ_{k<n} a_k b_k as the header says. */
static double oracle_block(double c, const double *a, const double *b, int n, const params *P)
{
    long E = c != 0 ? aexp(c, -126) : -100000;
    for (int k = 0; k < n; k++)
        if (a[k] * b[k] != 0 && aexp(a[k], P->in_emin) + aexp(b[k], P->in_emin) > E)
            E = aexp(a[k], P->in_emin) + aexp(b[k], P->in_emin);
    long Q = E - (P->p - 1) - P->x;
    mpq_t term, sum, unit;
    mpz_t z;
    mpq_inits(term, sum, unit, (mpq_ptr)0);
    mpz_init(z);
    mpq_set_ui(unit, 1, 1);
    if (Q > 0) mpq_mul_2exp(unit, unit, (mp_bitcnt_t)Q);
    else mpq_div_2exp(unit, unit, (mp_bitcnt_t)-Q);
    for (int k = 0; k <= n; k++) {
        if (k < n) {
            mpq_t bq;
            mpq_init(bq);
            mpq_set_d(term, a[k]), mpq_set_d(bq, b[k]);
            mpq_mul(term, term, bq); /* exact */
            mpq_clear(bq);
        } else {
            mpq_set_d(term, c);
        }
        mpq_div(term, term, unit);
        mpz_tdiv_q(z, mpq_numref(term), mpq_denref(term)); /* toward zero */
        mpq_set_z(term, z);
        mpq_add(sum, sum, term);
    }
    mpq_mul(sum, sum, unit);
    double d = rz(sum, P->p);
    mpq_clears(term, sum, unit, (mpq_ptr)0);
    mpz_clear(z);
    return d;
}

static double oracle_dot(double acc, const double *a, const double *b, int n, const params *P)
{
    double tc = 0;
    for (int k0 = 0; k0 < n; k0 += P->g) {
        int k = n - k0 < P->g ? n - k0 : P->g;
        if (!P->promote) {
            acc = oracle_block(acc, a + k0, b + k0, k, P);
            continue;
        }
        tc = oracle_block(tc, a + k0, b + k0, k, P);
        if ((k0 + k) % P->promote == 0 || k0 + k == n) { /* a binary32 addition, to nearest, by MPFR */
            mpfr_t s; /* the test's sums stay far inside binary32's normal range: no subnormal, no overflow */
            mpfr_init2(s, 24);
            mpfr_set_d(s, acc, MPFR_RNDN); /* exact */
            mpfr_add_d(s, s, tc, MPFR_RNDN);
            acc = mpfr_get_d(s, MPFR_RNDN);
            mpfr_clear(s);
            tc = 0;
        }
    }
    return acc;
}

/* A random value of the storage format: a random significand and exponent
 * in [lo, hi], a random sign, rounded to the format by the library (the
 * rounding is not what is tested here). */
static double random_value(vijp_rng *r, const vijp_format *f, int lo, int hi)
{
    mpfr_t v;
    mpfr_init2(v, 64);
    double m = 1 + vijp_rng_uniform(r), e = lo + (int)(vijp_rng_uniform(r) * (hi - lo + 1));
    mpfr_set_d(v, ldexp(vijp_rng_uniform(r) < 0.5 ? -m : m, (int)e), MPFR_RNDN);
    vo_store(v, v, f);
    if (f->operand_prec) { /* tf32: draw operands that are TF32 numbers already */
        mpfr_prec_round(v, f->operand_prec, MPFR_RNDN);
    }
    double d = mpfr_get_d(v, MPFR_RNDN);
    mpfr_clear(v);
    return d;
}

START_TEST(random_vs_oracle)
{
    static const struct {
        const char *name;
        params P;
        int lo, hi; /* operand exponents */
    } cases[] = {
        {"binary16+tc:v100", {4, 0, 24, 0, -14}, -12, 8},    {"binary16+tc:a100", {8, 1, 24, 0, -14}, -12, 8},
        {"bfloat16+tc:a100", {8, 1, 24, 0, -126}, -20, 20},  {"tf32+tc:a100", {4, 1, 24, 0, -126}, -20, 20},
        {"bfloat16+tc:h100", {16, 2, 24, 0, -126}, -20, 20}, {"tf32+tc:h100", {8, 2, 24, 0, -126}, -20, 20},
        {"e4m3+tc:h100", {32, 0, 14, 128, -6}, -6, 7},       {"e5m2+tc:h100", {32, 0, 14, 128, -14}, -10, 10},
        {"binary16+tc:b200", {16, 2, 24, 0, -14}, -12, 8},   {"e4m3+tc:b200", {32, 2, 24, 0, -6}, -6, 7},
    };
    vijp_rng r;
    vijp_rng_seed(&r, 20251207);
    double a[300], b[300];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vijp_format f = parse(cases[i].name);
        for (long t = 0; t < test_iters(40); t++) {
            int n = 1 + (int)(vijp_rng_uniform(&r) * (t % 4 ? 70 : 299)); /* now and then past 128: promotion */
            for (int k = 0; k < n; k++) {
                a[k] = random_value(&r, &f, cases[i].lo, cases[i].hi);
                b[k] = random_value(&r, &f, cases[i].lo, cases[i].hi);
            }
            double acc0 = t % 3 ? 0 : (double)(float)ldexp(vijp_rng_uniform(&r) - 0.5, 6);
            double want = oracle_dot(acc0, a, b, n, &cases[i].P), got = dot_in(&f, acc0, a, b, (size_t)n);
            ck_assert_msg(got == want || (got == 0 && want == 0), "%s n=%d t=%ld: %a, oracle %a", cases[i].name, n, t,
                          got, want);
        }
    }
}
END_TEST

/* The dense layer's forward, vjp and ∇θ are dot products through the
 * model.  tf32+tc:a100 stores binary32, so the sums show: g = 4, x = 1,
 * s = 2^-12·2^-13 = 2^-25 (TF32 numbers): Σ of (s, s, s, 1) is one block,
 * E = 0, Q = −24, each s half a unit, lost: 1; one FMA per term
 * (tf32+binary32) has 3s + 1 = 1 + 0.75·2^-23, to nearest 1 + 2^-23. */
START_TEST(dense_through_model)
{
    static const char *const names[] = {"tf32+tc:a100", "tf32+binary32"};
    for (int which = 0; which < 2; which++) {
        vijp_format f = parse(names[which]);
        double want = which ? 1 + 0x1p-23 : 1;
        vijp_error err = {0};
        const double s[4] = {0x1p-12, 0x1p-12, 0x1p-12, 1}, t[4] = {0x1p-13, 0x1p-13, 0x1p-13, 1};
        /* forward: dense:1 on 4 inputs, W = s-row, x = t */
        vijp_layer L;
        ck_assert(!vijp_layer_parse(&L, "dense:1", 4, &err));
        vijp_mat th, X, Y;
        vijp_mat_init(&th, 5, 1, &f), vijp_mat_init(&X, 4, 1, &f), vijp_mat_init(&Y, 1, 1, &f);
        for (size_t k = 0; k < 4; k++) vijp_mat_set_entry_d(&th, k, s[k]);
        vijp_mat_set_entry_d(&th, 4, 0);
        vijp_mat_set_d(&X, t);
        ck_assert_msg(!vijp_layer_forward(&L, &th, &X, &Y, &err), "%s", err.msg);
        ck_assert_msg(vijp_mat_get_d(&Y, 0) == want, "%s forward %a", names[which], vijp_mat_get_d(&Y, 0));
        /* ∇θ over a batch of 4: ∂W(0, k) = Σ_j g_j x(k, j); with x(k, j) = t_j for every k and g = s */
        vijp_mat X4, G4, Gt;
        vijp_mat_init(&X4, 4, 4, &f), vijp_mat_init(&G4, 1, 4, &f), vijp_mat_init(&Gt, 5, 1, &f);
        for (size_t j = 0; j < 4; j++) {
            for (size_t k = 0; k < 4; k++) vijp_mat_set_entry_d(&X4, k + 4 * j, t[j]);
            vijp_mat_set_entry_d(&G4, j, s[j]);
        }
        ck_assert_msg(!vijp_layer_vjp_param(&L, &th, &X4, &G4, &Gt, &err), "%s", err.msg);
        ck_assert_msg(vijp_mat_get_d(&Gt, 2) == want, "%s grad θ %a", names[which], vijp_mat_get_d(&Gt, 2));
        vijp_mat_clear(&X4), vijp_mat_clear(&G4), vijp_mat_clear(&Gt);
        vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y);
        vijp_layer_clear(&L);
        /* vjp: dense:4 on 1 input, column W(:, 0) = s, g = t: gx = Σ_i W(i, 0) g_i */
        ck_assert(!vijp_layer_parse(&L, "dense:4", 1, &err));
        vijp_mat G, Gx;
        vijp_mat_init(&th, 8, 1, &f), vijp_mat_init(&X, 1, 1, &f), vijp_mat_init(&G, 4, 1, &f);
        vijp_mat_init(&Gx, 1, 1, &f);
        for (size_t i = 0; i < 4; i++) vijp_mat_set_entry_d(&th, i, s[i]), vijp_mat_set_entry_d(&th, 4 + i, 0);
        vijp_mat_set_entry_d(&X, 0, 1);
        vijp_mat_set_d(&G, t);
        ck_assert_msg(!vijp_layer_vjp(&L, &th, &X, &G, &Gx, &err), "%s", err.msg);
        ck_assert_msg(vijp_mat_get_d(&Gx, 0) == want, "%s vjp %a", names[which], vijp_mat_get_d(&Gx, 0));
        vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Gx);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* The command: a tensor-core format where a format goes, run twice, the
 * same bytes; its name printed back. */
START_TEST(cli_deterministic)
{
    static const char *const runs[] = {
        "grad --net dense:8,leaky:0.5 --depth 3 --engine backprop,moonwalk --format bfloat16+tc:h100",
        "grad --net dense:8,tanh --depth 2 --format e4m3+tc:h100",
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        run_result r1 = run_vijp(runs[i]), r2 = run_vijp(runs[i]);
        ck_assert_msg(r1.rc == CLI_OK, "%s: %s", runs[i], r1.err);
        ck_assert_str_eq(r1.out, r2.out);
        ck_assert_msg(strstr(r1.out, "+tc:h100"), "%s", r1.out);
        run_free(&r1), run_free(&r2);
    }
    run_result bad = run_vijp("grad --net dense:8 --depth 2 --format bfloat16+tc:v100");
    ck_assert_int_eq(bad.rc, CLI_USAGE);
    ck_assert_msg(strstr(bad.err, "take no bfloat16"), "%s", bad.err);
    run_free(&bad);
}
END_TEST

/* scripts/tc-gemm.cu's cuBLAS GEMMs against the model: with
 * VIJP_TC_GEMM_DIR (its output folder) and VIJP_TC_ARCH (v100, a100, h100,
 * b200: the GPU it ran on) set, as scripts/gpu-check.sh sets them, every
 * output of DIR/TYPE.bin recomputed in TYPE+tc:ARCH must equal the GPU's
 * bit for bit (a type ARCH has no tensor cores for is left out: e4m3 on
 * v100 and a100, which tc-gemm skips there too, FP8 needing sm_89+);
 * unset, there is nothing to compare and the case says so. */
START_TEST(gpu_gemm)
{
    const char *dir = getenv("VIJP_TC_GEMM_DIR"), *arch = getenv("VIJP_TC_ARCH");
    if (!dir || !arch) {
        printf("# t-tc gpu_gemm: skipped: VIJP_TC_GEMM_DIR and VIJP_TC_ARCH unset (scripts/gpu-check.sh sets them)\n");
        return;
    }
    static const char *const types[] = {"bfloat16", "binary16", "tf32", "e4m3"};
    int compared = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        char path[4096], name[32];
        snprintf(name, sizeof name, "%s+tc:%s", types[t], arch);
        vijp_format f;
        if (vijp_format_parse(name, &f, NULL)) continue; /* no such tensor cores on ARCH */
        snprintf(path, sizeof path, "%s/%s.bin", dir, types[t]);
        FILE *in = fopen(path, "rb");
        ck_assert_msg(in, "%s: cannot open", path);
        int32_t dims[3];
        ck_assert_msg(fread(dims, sizeof dims, 1, in) == 1 && dims[0] > 0 && dims[1] > 0 && dims[2] > 0 &&
                          dims[0] <= 4096 && dims[1] <= 4096 && dims[2] <= 4096, "%s: bad header", path);
        size_t m = (size_t)dims[0], k = (size_t)dims[1], n = (size_t)dims[2];
        float *A = malloc(sizeof *A * m * k), *B = malloc(sizeof *B * k * n), *D = malloc(sizeof *D * m * n);
        ck_assert(A && B && D);
        ck_assert_msg(fread(A, sizeof *A, m * k, in) == m * k && fread(B, sizeof *B, k * n, in) == k * n &&
                          fread(D, sizeof *D, m * n, in) == m * n, "%s: short file", path);
        fclose(in);
        double a[4096], b[4096];
        size_t wrong = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                for (size_t q = 0; q < k; q++) a[q] = A[i + q * m], b[q] = B[q + j * k];
                double got = dot_in(&f, 0, a, b, k);
                if (got != (double)D[i + j * m] && wrong++ < 5)
                    printf("# t-tc gpu_gemm: %s D[%zu,%zu]: GPU %a, model %a\n", name, i, j, (double)D[i + j * m], got);
            }
        printf("# t-tc gpu_gemm: %s: %zu of %zu outputs differ from the GPU's\n", name, wrong, m * n);
        fflush(stdout); /* before a failure ends the forked test */
        ck_assert_msg(!wrong, "%s: %zu outputs differ", name, wrong);
        free(A), free(B), free(D);
        compared++;
    }
    ck_assert_msg(compared, "no type to compare for ARCH %s", arch);
}
END_TEST

Suite *suite_tc(void)
{
    Suite *s = suite_create("tc");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, parse_tc);
    tcase_add_test(tc, probe_alignment_bits);
    tcase_add_test(tc, probe_rounding);
    tcase_add_test(tc, probe_block_size);
    tcase_add_test(tc, probe_hopper_fp8);
    tcase_add_test(tc, probe_published);
    tcase_add_test(tc, probe_specials);
    tcase_add_test(tc, random_vs_oracle);
    tcase_add_test(tc, dense_through_model);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 60);
    tcase_add_test(cli, cli_deterministic);
    suite_add_tcase(s, cli);
    TCase *gpu = tcase_create("gpu");
    tcase_set_timeout(gpu, 120);
    tcase_add_test(gpu, gpu_gemm);
    suite_add_tcase(s, gpu);
    return s;
}

/* vijp_compare's fast path (src/compare/fast.c) against its exact
 * evaluation: wherever the fast path answers, its rel, ulps and angle are
 * the exact evaluation's bit for bit; it answers in the ordinary cases (or
 * it would be no faster), and declines where it cannot certify (an angle
 * lost to cancellation).  The cases reach every branch it has: differences
 * formed in limbs and by MPFR, references rounded to the comparison's
 * precision with ties both ways and a carry into the next binade, zeros on
 * either side, the ulp metric at the ends of the double range. */
#include "fixtures/testutil.h"
#include "base/fork.h"
#include "vijp/rng.h"
#include "compare/fast.h"
#include "compare/cache.h"
#include "compare/lanes.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CLOSE, ZEROS, EQUAL, FAR, TIES, EXTREME, N_FAMILIES } family;
static const char *family_name[] = {"close", "zeros", "equal", "far", "ties", "extreme"};

/* A random value with many significant bits, times 2^[−spread, spread]. */
static void random_wide(mpfr_t y, vijp_rng *g, int spread)
{
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_set_d(y, vijp_rng_normal(g), MPFR_RNDN);
    for (int k = 1; k <= 6; k++) { /* 6 more doubles of bits below */
        mpfr_set_d(t, vijp_rng_normal(g), MPFR_RNDN);
        mpfr_mul_2si(t, t, -53 * k, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
    }
    mpfr_mul_2si(y, y, (long)(vijp_rng_u64(g) % (uint64_t)(2 * spread + 1)) - spread, MPFR_RNDN);
    mpfr_clear(t);
}

/* Entry i of a (in a's format) := v, rounded to nearest. */
static void set_entry(vijp_mat *a, size_t i, mpfr_srcptr v)
{
    if (a->d) a->d[i] = mpfr_get_d(v, MPFR_RNDN);
    else mpfr_set(a->m[i], v, MPFR_RNDN);
}

/* A reference on or next to a tie of RN_p, with a's entry on the p-bit
 * grid beside it, so that the rounding direction decides the difference
 * (0 or one unit of p bits): v (a's value) plus 1/2 or 3/2 units (ties from
 * an even and from an odd neighbour), or the all-ones p-bit value below
 * v's binade plus 1/2 (rounding up carries into the next binade); each at,
 * one q-bit unit below or one above the tie. */
static void tie_case(vijp_mat *A, vijp_mat *R, size_t i, vijp_rng *g, mpfr_prec_t p)
{
    mpfr_prec_t q = mpfr_get_prec(R->m[i]);
    mpfr_t v, r, h;
    mpfr_inits2(600, v, r, h, (mpfr_ptr)0);
    random_wide(v, g, 8);
    set_entry(A, i, v);
    if (A->d) mpfr_set_d(v, A->d[i], MPFR_RNDN);
    else mpfr_set(v, A->m[i], MPFR_RNDN); /* v: a's value exactly */
    long E = mpfr_get_exp(v), k = (long)(vijp_rng_u64(g) % 4);
    if (k == 3) { /* 2^E − 2^(E−p), with v's sign */
        mpfr_set_ui_2exp(r, 1, E, MPFR_RNDN);
        mpfr_set_ui_2exp(h, 1, E - p, MPFR_RNDN);
        mpfr_sub(r, r, h, MPFR_RNDN);
        if (mpfr_signbit(v)) mpfr_neg(r, r, MPFR_RNDN);
    } else {
        mpfr_set(r, v, MPFR_RNDN);
    }
    mpfr_set_ui_2exp(h, k == 1 ? 3 : 1, E - p - 1, MPFR_RNDN); /* 1/2 or 3/2 units of p bits */
    if (mpfr_signbit(v) != (k == 2)) mpfr_neg(h, h, MPFR_RNDN); /* k = 2: towards zero */
    mpfr_add(r, r, h, MPFR_RNDN);
    long side = (long)(vijp_rng_u64(g) % 3);
    if (side) {
        mpfr_set_ui_2exp(h, 1, E - q, MPFR_RNDN);
        if (side == 2) mpfr_neg(h, h, MPFR_RNDN);
        mpfr_add(r, r, h, MPFR_RNDN);
    }
    ck_assert(mpfr_set(R->m[i], r, MPFR_RNDN) == 0); /* exact: q >= p + 1 bits hold it */
    mpfr_clears(v, r, h, (mpfr_ptr)0);
}

/* One case: ref R at its precision, a in format f near it as the family says. */
static void fill(family fam, vijp_rng *g, vijp_mat *A, vijp_mat *R, mpfr_prec_t p)
{
    size_t n = vijp_mat_len(R);
    double eps = ldexp(1, -(int)(5 + vijp_rng_u64(g) % 50)); /* relative errors 2^-5 .. 2^-54 */
    mpfr_t y, x;
    mpfr_inits2(500, y, x, (mpfr_ptr)0);
    for (size_t i = 0; i < n; i++) {
        if (fam == TIES && mpfr_get_prec(R->m[i]) > p) {
            tie_case(A, R, i, g, p);
            continue;
        }
        random_wide(y, g, fam == EXTREME ? 0 : 20);
        if (fam == EXTREME) { /* tiny references (ulps of subnormals), huge or tiny errors */
            mpfr_mul_2si(y, y, -900 - (long)(vijp_rng_u64(g) % 170), MPFR_RNDN);
        }
        mpfr_set(R->m[i], y, MPFR_RNDN);
        mpfr_mul_d(x, y, 1 + eps * vijp_rng_normal(g), MPFR_RNDN);
        switch (fam) {
        case ZEROS:
            switch (vijp_rng_u64(g) % 4) {
            case 0: mpfr_set_zero(x, vijp_rng_u64(g) % 2 ? 1 : -1); break;
            case 1: mpfr_set_zero(R->m[i], 1); break;
            case 2: mpfr_set_zero(x, 1), mpfr_set_zero(R->m[i], -1); break;
            default: break;
            }
            break;
        case EQUAL: mpfr_set(x, R->m[i], MPFR_RNDN); break; /* a is R rounded to a's format */
        case FAR: /* exponents beyond the limb window, and differences wider than p */
            if (vijp_rng_u64(g) % 3 == 0) mpfr_mul_2si(x, x, vijp_rng_u64(g) % 2 ? 120 : -120, MPFR_RNDN);
            else if (vijp_rng_u64(g) % 2) mpfr_mul_2si(x, x, 70, MPFR_RNDN);
            break;
        case EXTREME:
            if (vijp_rng_u64(g) % 2) mpfr_mul_2si(x, x, 1000 + (long)(vijp_rng_u64(g) % 60), MPFR_RNDN);
            break;
        default: break;
        }
        set_entry(A, i, x);
    }
    mpfr_clears(y, x, (mpfr_ptr)0);
}

/* bit for bit, exponent included (NaN matches NaN) */
static int same(vijp_xnum a, vijp_xnum b) { return (a.m != a.m && b.m != b.m) || (!memcmp(&a.m, &b.m, sizeof a.m) && a.e == b.e); }

/* Fast against exact for one case: counts answers, and fails on a
 * difference.  Returns whether the fast path answered. */
static int check_case(const vijp_mat *A, const vijp_mat *R, const vijp_format *f, int angle, const char *what,
                      vijp_compare_counts *total)
{
    vijp_metric want, got;
    vijp_compare_counts counts;
    vijp_compare_exact(A, R, f, &want, angle);
    int answered = vijp_compare_fast(A, R, f, &got, angle, NULL, &counts);
    total->slow += counts.slow, total->doubles += counts.doubles;
    if (answered)
        ck_assert_msg(same(got.rel, want.rel) && same(got.ulps, want.ulps) && same(got.angle_deg, want.angle_deg),
                      "%s: fast rel %.17g ulps %.17g angle %.17g, exact %.17g %.17g %.17g", what, got.rel.m, got.ulps.m,
                      got.angle_deg.m, want.rel.m, want.ulps.m, want.angle_deg.m);
    /* every lanes set (compare/lanes.h), and none: the same bits wherever
     * it answers */
    for (int set = 0; set < CMP_LANES_SETS; set++) {
        if (set && !vijp_cmp_lanes_set(set)) continue;
        if (vijp_compare_fast_lanes(set, A, R, f, &got, angle, NULL))
            ck_assert_msg(same(got.rel, want.rel) && same(got.ulps, want.ulps) && same(got.angle_deg, want.angle_deg),
                          "%s, lanes %s: fast rel %.17g ulps %.17g angle %.17g, exact %.17g %.17g %.17g", what,
                          set ? vijp_cmp_lanes_set(set)->name : "none", got.rel.m, got.ulps.m, got.angle_deg.m,
                          want.rel.m, want.ulps.m, want.angle_deg.m);
    }
    /* the public entry gives the exact evaluation's metrics either way */
    vijp_metric pub;
    if (angle) vijp_compare(A, R, f, &pub);
    else vijp_compare_rel_ulps(A, R, f, &pub, NULL);
    ck_assert_msg(same(pub.rel, want.rel) && same(pub.ulps, want.ulps) && same(pub.angle_deg, want.angle_deg),
                  "%s: vijp_compare differs from the exact evaluation", what);
    return answered;
}

/* check_case at both angles, their counts into *counts (from zero):
 * whether the fast path answered both. */
static int check_angles(const vijp_mat *A, const vijp_mat *R, const vijp_format *f, const char *what,
                        vijp_compare_counts *counts)
{
    *counts = (vijp_compare_counts){0, 0};
    int answered = 1;
    char both[200];
    for (int angle = 0; angle < 2; angle++) {
        snprintf(both, sizeof both, "%s, angle %d", what, angle);
        answered &= check_case(A, R, f, angle, both, counts);
    }
    return answered;
}

START_TEST(fast_is_exact_bit_for_bit)
{
    static const char *formats[] = {"double", "binary32", "bfloat16", "bfloat16+binary32", "mpfr:53"};
    vijp_rng g;
    vijp_rng_seed(&g, 20261203);
    size_t answered[N_FAMILIES] = {0}, asked[N_FAMILIES] = {0};
    vijp_compare_counts counts[N_FAMILIES] = {{0, 0}}, packed_counts[N_FAMILIES] = {{0, 0}};
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        ck_assert(vijp_format_parse(formats[fi], &f, NULL) == 0);
        mpfr_prec_t p = vijp_compare_prec(&f);
        /* references at the comparison's precision (read in place), wider
         * (rounded to it: the validation's finer level) and narrower */
        mpfr_prec_t ref_precs[] = {p, 2 * p - 10, p + 1, 64};
        for (size_t ri = 0; ri < 4; ri++) {
            vijp_format fr;
            ck_assert(vijp_format_mpfr(&fr, ref_precs[ri], NULL) == 0);
            for (int fam = 0; fam < N_FAMILIES; fam++)
                for (int rep = 0; rep < 3; rep++) {
                    size_t n = rep == 0 ? 1 : rep == 1 ? 7 : 300;
                    vijp_mat A, R;
                    vijp_mat_init(&A, n, 1, &f);
                    vijp_mat_init(&R, n, 1, &fr);
                    fill((family)fam, &g, &A, &R, p);
                    char what[160];
                    /* the reference MPFR-held, then packed (the drift
                     * study's references: read in place, and against a
                     * double also in double arithmetic) */
                    for (int packed = 0; packed < 2; packed++) {
                        if (packed) vijp_mat_pack(&R);
                        if (packed && !A.d) vijp_mat_pack(&A); /* mpfr:53: x packed too */
                        for (int angle = 0; angle < 2; angle++) {
                            snprintf(what, sizeof what, "%s, reference at %ld bits%s, %s, n %zu, angle %d",
                                     formats[fi], (long)ref_precs[ri], packed ? " packed" : "", family_name[fam], n,
                                     angle);
                            int ans = check_case(&A, &R, &f, angle, what, packed ? &packed_counts[fam] : &counts[fam]);
                            if (angle && n == 1) continue; /* one entry: δ ∥ y, the angle is all cancellation */
                            answered[fam] += (size_t)ans, asked[fam]++;
                        }
                    }
                    vijp_mat_clear(&A), vijp_mat_clear(&R);
                }
        }
    }
    /* The fast path must answer the ordinary cases: else it would be the
     * exact evaluation plus a pass for nothing.  (Far and extreme cases it
     * may decline: a 2^1000 error leaves no digit of the sums to certify.) */
    for (int fam = 0; fam < N_FAMILIES; fam++)
        if (fam != FAR && fam != EXTREME)
        ck_assert_msg(answered[fam] * 10 >= asked[fam] * 9, "%s: answered %zu of %zu", family_name[fam], answered[fam],
                      asked[fam]);
    ck_assert_msg(counts[FAR].slow > 0 && counts[EXTREME].slow > 0, "the MPFR path per entry was not reached (%zu, %zu)",
                  counts[FAR].slow, counts[EXTREME].slow);
    /* Doubles against a packed reference take most close entries in double
     * arithmetic (the first of a range, and those that may raise the
     * largest ulps, go by limbs); nothing else does. */
    for (int fam = 0; fam < N_FAMILIES; fam++)
        ck_assert_msg(!counts[fam].doubles, "%s: %zu entries in doubles against an MPFR-held reference", family_name[fam],
                      counts[fam].doubles);
    ck_assert_msg(packed_counts[CLOSE].doubles > 1000 && packed_counts[TIES].doubles > 0,
                  "the double path took %zu close and %zu tie entries", packed_counts[CLOSE].doubles,
                  packed_counts[TIES].doubles);
}
END_TEST

/* The validation's comparison: a level of P bits (mpfr:106 for double,
 * mpfr:64 for binary32), packed, against the next one at 2P bits held at
 * the comparison's precision q (170, 128), differing by 2^-k of it (k from
 * 95 to 110: what the rounding at P bits leaves after a few layers), and
 * by 2^-20 to 2^-60 (a level that is far off), signs and binades mixed.
 * Bit for bit the exact evaluation's, most entries in double arithmetic. */
START_TEST(fast_levels_in_doubles)
{
    static const struct {
        const char *format;
        long lo, hi;
    } cases[] = {{"double", 106, 212}, {"binary32", 64, 128}};
    vijp_rng g;
    vijp_rng_seed(&g, 7);
    for (size_t c = 0; c < 2; c++)
        for (int far = 0; far < 2; far++) {
            vijp_format f, flo, fhi, fq;
            ck_assert(vijp_format_parse(cases[c].format, &f, NULL) == 0);
            ck_assert(!vijp_format_mpfr(&flo, cases[c].lo, NULL) && !vijp_format_mpfr(&fhi, cases[c].hi, NULL) &&
                      !vijp_format_mpfr(&fq, vijp_compare_prec(&f), NULL));
            size_t n = 5000;
            vijp_mat A, R;
            vijp_mat_init(&A, n, 1, &flo), vijp_mat_init(&R, n, 1, &fhi);
            mpfr_t y;
            mpfr_init2(y, 500);
            for (size_t i = 0; i < n; i++) {
                random_wide(y, &g, 20);
                if (vijp_rng_u64(&g) % 2) mpfr_neg(y, y, MPFR_RNDN);
                mpfr_set(R.m[i], y, MPFR_RNDN);
                long k = far ? 20 + (long)(vijp_rng_u64(&g) % 41) : 95 + (long)(vijp_rng_u64(&g) % 16);
                mpfr_mul_d(y, y, 1 + ldexp(vijp_rng_normal(&g), -(int)k), MPFR_RNDN);
                mpfr_set(A.m[i], y, MPFR_RNDN);
            }
            mpfr_clear(y);
            vijp_mat_pack(&A), vijp_mat_pack(&R), vijp_mat_pack_rounded(&R, &fq);
            vijp_compare_counts counts;
            char what[96];
            snprintf(what, sizeof what, "%s: level %ld against %ld%s", cases[c].format, cases[c].lo, cases[c].hi,
                     far ? ", far" : "");
            ck_assert_msg(check_angles(&A, &R, &f, what, &counts), "%s: declined", what);
            ck_assert_msg(counts.doubles > 3 * n / 2, "%s: %zu of 2 × %zu entries in doubles", what, counts.doubles, n);
            /* and in every lanes set: nearly all (the first 16, and the
             * entries that may raise the largest ulps, by limbs) */
            for (int set = 1; set < CMP_LANES_SETS; set++) {
                vijp_metric m;
                if (!vijp_cmp_lanes_set(set)) continue;
                ck_assert(vijp_compare_fast_lanes(set, &A, &R, &f, &m, 1, &counts));
                ck_assert_msg(counts.doubles > n * 9 / 10, "%s, lanes %s: %zu of %zu entries in doubles", what,
                              vijp_cmp_lanes_set(set)->name, counts.doubles, n);
            }
            vijp_mat_clear(&A), vijp_mat_clear(&R);
        }
}
END_TEST

/* n doubles against an mpfr:ref_prec reference: the formats (theirs to keep
 * while the matrices live) and the matrices, zero. */
static void double_pair(vijp_format *f, vijp_format *fr, long ref_prec, size_t n, vijp_mat *A, vijp_mat *R)
{
    vijp_format_fixed(f, VIJP_DOUBLE);
    ck_assert(vijp_format_mpfr(fr, ref_prec, NULL) == 0);
    vijp_mat_init(A, n, 1, f);
    vijp_mat_init(R, n, 1, fr);
}

/* Past one chunk (4096 entries) the scales grow chunk by chunk: what was
 * summed at a smaller one is rescaled (beyond 2^900 dropped, its size kept
 * in the bound), and the metrics stay the exact evaluation's. */
START_TEST(fast_rescales_across_chunks)
{
    static const long binade[] = {-1000, 0, 40, -20}; /* per chunk; the last one partial */
    vijp_format f, fr;
    vijp_rng g;
    vijp_rng_seed(&g, 11);
    size_t n = 3 * 4096 + 5;
    vijp_mat A, R;
    double_pair(&f, &fr, 170, n, &A, &R);
    mpfr_t y;
    mpfr_init2(y, 500);
    for (size_t i = 0; i < n; i++) {
        random_wide(y, &g, 3);
        mpfr_mul_2si(y, y, binade[i / 4096], MPFR_RNDN);
        mpfr_set(R.m[i], y, MPFR_RNDN);
        mpfr_mul_d(y, y, 1 + 0x1p-30 * vijp_rng_normal(&g), MPFR_RNDN);
        A.d[i] = mpfr_get_d(y, MPFR_RNDN);
    }
    mpfr_clear(y);
    vijp_compare_counts counts;
    ck_assert_msg(check_angles(&A, &R, &f, "growing scales", &counts), "declined");
    /* and packed, where most entries go through double arithmetic, each
     * chunk's at its own scales */
    vijp_mat_pack(&R);
    ck_assert_msg(check_angles(&A, &R, &f, "growing scales, packed", &counts), "declined, packed");
    ck_assert_msg(counts.doubles > n, "%zu of 2 × %zu entries in doubles", counts.doubles, n);
    vijp_mat_clear(&A), vijp_mat_clear(&R);
}
END_TEST

/* a = 2·ref exactly: the difference is parallel to ref, the Gram
 * determinant is exactly 0 and the angle cancels completely: the fast path
 * must decline it (the exact evaluation decides), while rel (= 1) it answers. */
START_TEST(fast_declines_a_cancelled_angle)
{
    vijp_format f, fr;
    vijp_mat A, R;
    double_pair(&f, &fr, 53, 100, &A, &R);
    vijp_rng g;
    vijp_rng_seed(&g, 7);
    for (size_t i = 0; i < 100; i++) {
        A.d[i] = 2 * vijp_rng_normal(&g);
        mpfr_set_d(R.m[i], A.d[i] / 2, MPFR_RNDN);
    }
    vijp_metric got, want;
    vijp_compare_counts counts;
    ck_assert(!vijp_compare_fast(&A, &R, &f, &got, 1, NULL, &counts));
    ck_assert(vijp_compare_fast(&A, &R, &f, &got, 0, NULL, &counts));
    ck_assert(vijp_xnum_double(got.rel) == 1);
    vijp_compare(&A, &R, &f, &got);
    vijp_compare_exact(&A, &R, &f, &want, 1);
    ck_assert(same(got.angle_deg, want.angle_deg) && same(got.rel, want.rel));
    vijp_mat_clear(&A), vijp_mat_clear(&R);
}
END_TEST

/* NaN and Inf in either matrix (the exact evaluation's NaN propagation),
 * and values at the bottom of MPFR's exponent range: declined. */
START_TEST(fast_declines_nonfinite_and_range_floor)
{
    vijp_format f, fr;
    vijp_mat A, R;
    double_pair(&f, &fr, 170, 3, &A, &R);
    for (size_t i = 0; i < 3; i++) A.d[i] = 1.0 + (double)i, mpfr_set_d(R.m[i], 1.5, MPFR_RNDN);
    vijp_metric m;
    A.d[1] = NAN;
    ck_assert(!vijp_compare_fast(&A, &R, &f, &m, 1, NULL, NULL));
    A.d[1] = 2, mpfr_set_inf(R.m[2], 1);
    ck_assert(!vijp_compare_fast(&A, &R, &f, &m, 1, NULL, NULL));
    vijp_mat_clear(&A), vijp_mat_clear(&R);
    /* An entry near MPFR's smallest exponent, where the exact evaluation's
     * p-bit difference underflows, beside an ordinary one: mpfr:53, one entry
     * 0.75 + 2^-60 (0.75 in the format: 2^-7 ulps), the other 3/7·2^-1990
     * with emin at -2000 (this test's process only) and its error below
     * 2^-2000 (about half an ulp, the larger).  Declined, where answering
     * would give the true ulps and the exact evaluation gives the first's. */
    vijp_format fm, fr2;
    ck_assert(vijp_format_mpfr(&fm, 53, NULL) == 0);
    ck_assert(vijp_format_mpfr(&fr2, 200, NULL) == 0);
    mpfr_exp_t emin = mpfr_get_emin();
    ck_assert(mpfr_set_emin(-2000) == 0);
    vijp_mat_init(&A, 2, 1, &fm);
    vijp_mat_init(&R, 2, 1, &fr2);
    mpfr_set_ui_2exp(R.m[0], 1, -60, MPFR_RNDN);
    mpfr_add_d(R.m[0], R.m[0], 0.75, MPFR_RNDN);
    mpfr_set_ui_2exp(R.m[1], 3, -1990, MPFR_RNDN);
    mpfr_div_ui(R.m[1], R.m[1], 7, MPFR_RNDN);
    for (size_t i = 0; i < 2; i++) mpfr_set(A.m[i], R.m[i], MPFR_RNDN);
    vijp_metric want, got;
    for (int packed = 0; packed < 2; packed++) {
        if (packed) vijp_mat_pack(&A), vijp_mat_pack(&R); /* the lanes' exponent scan sees the floor too */
        ck_assert(!vijp_compare_fast(&A, &R, &fm, &m, 0, NULL, NULL));
        for (int set = 0; set < CMP_LANES_SETS; set++) ck_assert(!vijp_compare_fast_lanes(set, &A, &R, &fm, &m, 0, NULL));
        vijp_compare_rel_ulps(&A, &R, &fm, &got, NULL);
        vijp_compare_exact(&A, &R, &fm, &want, 0);
        ck_assert(same(got.rel, want.rel) && same(got.ulps, want.ulps));
    }
    ck_assert(mpfr_set_emin(emin) == 0);
    vijp_mat_clear(&A), vijp_mat_clear(&R);
}
END_TEST

/* A 106-bit level just past twice the reference's top 53 bits: x = 4 −
 * 2^-104 against y = 2 − 2^-52 + 2^-169 (170 bits), whose x's top part
 * is exactly 2·Y1.  x − y needs 171 bits, so the exact evaluation rounds
 * it to 170: the double arithmetic (which forms d exactly) must step
 * aside, and does where it asks for X1 < 2·Y1.  An entry with a sign
 * change comes first, so that its ulps (2^62) would let the double path
 * take the second (2^53) without forming it exactly. */
START_TEST(fast_level_past_twice_steps_aside)
{
    vijp_format f, flo, fq;
    vijp_format_fixed(&f, VIJP_DOUBLE);
    ck_assert(!vijp_format_mpfr(&flo, 106, NULL) && !vijp_format_mpfr(&fq, 170, NULL));
    vijp_mat A, R;
    vijp_mat_init(&A, 2, 1, &flo), vijp_mat_init(&R, 2, 1, &fq);
    mpfr_set_si(A.m[0], -1, MPFR_RNDN), mpfr_set_ui_2exp(R.m[0], 1, -10, MPFR_RNDN);
    mpfr_set_ui(A.m[1], 4, MPFR_RNDN), mpfr_sub_d(A.m[1], A.m[1], 0x1p-104, MPFR_RNDN);
    mpfr_set_d(R.m[1], 2 - 0x1p-52, MPFR_RNDN), mpfr_add_d(R.m[1], R.m[1], 0x1p-169, MPFR_RNDN);
    ck_assert(mpfr_cmp_d(A.m[1], 4) < 0 && mpfr_min_prec(R.m[1]) == 170);
    vijp_mat_pack(&A), vijp_mat_pack(&R);
    vijp_compare_counts counts;
    check_angles(&A, &R, &f, "a level past twice the reference's top", &counts);
    ck_assert_msg(counts.doubles == 0 && counts.slow == 2, "%zu in doubles, %zu by MPFR (both angles)", counts.doubles,
                  counts.slow);
    vijp_mat_clear(&A), vijp_mat_clear(&R);
}
END_TEST

/* A packed reference past the double range (2^3000) beside ordinary
 * entries, against doubles: the scale 2^-Kd leaves the doubles' range, the
 * double arithmetic steps aside, and whatever answers is the exact
 * evaluation's. */
START_TEST(fast_reference_past_double_range)
{
    vijp_format f, fr;
    vijp_mat A, R;
    double_pair(&f, &fr, 170, 10, &A, &R);
    for (size_t i = 0; i < 10; i++) {
        A.d[i] = 1 + 0.1 * (double)i;
        mpfr_set_d(R.m[i], A.d[i], MPFR_RNDN);
        mpfr_nextabove(R.m[i]);
    }
    mpfr_set_ui_2exp(R.m[4], 13, 3000, MPFR_RNDN), A.d[4] = 1e300;
    vijp_mat_pack(&R);
    vijp_compare_counts counts;
    check_angles(&A, &R, &f, "a reference at 2^3000", &counts);
    ck_assert_uint_eq(counts.doubles, 0);
    vijp_mat_clear(&A), vijp_mat_clear(&R);
}
END_TEST

/* On threads (the format's threads, base/fork.h), the reference MPFR-held
 * (by limbs) and packed (in doubles): the entries in ranges, each summed
 * at its own scales and added at the largest.  Ranges whose
 * values lie 2^1000 apart make the addition rescale (beyond 2^900 a range's
 * sums drop out, their size into the bound); the metrics must stay the
 * exact evaluation's, answered on every count, and the same as on one
 * thread.  5 · 8192 entries and more split five ways (64 units an entry,
 * fast.c, against VIJP_FORK_MIN_WORK). */
START_TEST(fast_on_threads_is_exact)
{
    static const long binade[] = {0, -1000, 40, -20, 3};
    static const int counts[] = {1, 2, 3, 5};
    size_t n = 5 * 8192 + 13;
    vijp_rng g;
    vijp_rng_seed(&g, 29);
    for (int scaled = 0; scaled < 2; scaled++) {
        vijp_format f, fr;
        vijp_mat A, R;
        double_pair(&f, &fr, 170, n, &A, &R);
        if (!scaled) fill(CLOSE, &g, &A, &R, vijp_compare_prec(&f));
        else {
            mpfr_t y;
            mpfr_init2(y, 500);
            for (size_t i = 0; i < n; i++) {
                random_wide(y, &g, 3);
                mpfr_mul_2si(y, y, binade[i * 5 / n], MPFR_RNDN);
                mpfr_set(R.m[i], y, MPFR_RNDN);
                mpfr_mul_d(y, y, 1 + 0x1p-30 * vijp_rng_normal(&g), MPFR_RNDN);
                A.d[i] = mpfr_get_d(y, MPFR_RNDN);
            }
            mpfr_clear(y);
        }
        /* the reference MPFR-held (by limbs), then packed (in doubles) */
        for (int packed = 0; packed < 2; packed++) {
            if (packed) vijp_mat_pack(&R);
            for (int angle = 0; angle < 2; angle++) {
                vijp_metric one = {{0, 0}, {0, 0}, {0, 0}};
                for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                    f.threads = counts[c];
                    ck_assert_uint_eq(vijp_fork_parts(f.threads, n, 64.0 * (double)n, VIJP_FORK_MIN_WORK),
                                      (size_t)counts[c]);
                    char what[96];
                    snprintf(what, sizeof what, "%s, %s, %d threads, angle %d",
                             scaled ? "ranges 2^1000 apart" : "close", packed ? "packed" : "MPFR-held", counts[c],
                             angle);
                    vijp_compare_counts taken = {0, 0};
                    ck_assert_msg(check_case(&A, &R, &f, angle, what, &taken), "%s: declined", what);
                    ck_assert_msg(packed ? taken.doubles > n / 2 : taken.doubles == 0, "%s: %zu entries in doubles",
                                  what, taken.doubles);
                    vijp_metric got;
                    ck_assert(vijp_compare_fast(&A, &R, &f, &got, angle, NULL, NULL));
                    if (c == 0) one = got;
                    ck_assert_msg(same(got.rel, one.rel) && same(got.ulps, one.ulps) &&
                                      same(got.angle_deg, one.angle_deg),
                                  "%s: differs from one thread", what);
                }
            }
        }
        vijp_mat_clear(&A), vijp_mat_clear(&R);
    }
}
END_TEST

/* The exponent an entry has as MPFR sees it (LONG_MIN for zeros, and for
 * packed NaN and Inf), from MPFR's own reading of the value. */
static long mpfr_exp_of(const double *xd, const vijp_packed *p, size_t i)
{
    mpfr_t v;
    if (p) vijp_packed_view(p, i, v);
    else mpfr_init2(v, 53), mpfr_set_d(v, xd[i], MPFR_RNDN);
    long e = mpfr_regular_p(v) ? (long)mpfr_get_exp(v) : mpfr_inf_p(v) || mpfr_nan_p(v) ? 1025 : LONG_MIN;
    if (!p) mpfr_clear(v);
    return e;
}

/* Each lanes set's scan of a chunk for its largest and smallest exponents
 * (what fast.c's scales and its range floor are made of) against MPFR's
 * reading of every entry: doubles with zeros, subnormals, Inf and NaN
 * (the largest exponent of a double Inf or NaN may be anything: such a
 * chunk is declined later), packed values with zeros, NaN and Inf among
 * them; every length from 1 to 40 and every start in a block, so that
 * whole blocks and tails both run. */
START_TEST(lanes_scan_exponents)
{
    vijp_rng g;
    vijp_rng_seed(&g, 5);
    size_t n = 64;
    double *xd = malloc(n * sizeof *xd);
    vijp_format fr;
    ck_assert(vijp_format_mpfr(&fr, 170, NULL) == 0);
    vijp_mat R;
    vijp_mat_init(&R, n, 1, &fr);
    for (int trial = 0; trial < 40; trial++) {
        for (size_t i = 0; i < n; i++) {
            double x = ldexp(vijp_rng_normal(&g), (int)(vijp_rng_u64(&g) % 2000) - 1000);
            switch (vijp_rng_u64(&g) % 12) {
            case 0: x = 0; break;
            case 1: x = -ldexp(vijp_rng_uniform(&g), -1030 - (int)(vijp_rng_u64(&g) % 40)); break; /* subnormal */
            case 2: x = trial % 4 ? x : INFINITY; break;
            default: break;
            }
            xd[i] = x;
            mpfr_set_d(R.m[i], x, MPFR_RNDN);
            if (vijp_rng_u64(&g) % 10 == 0) mpfr_set_nan(R.m[i]);
            mpfr_mul_2si(R.m[i], R.m[i], (long)(vijp_rng_u64(&g) % 64), MPFR_RNDN);
        }
        vijp_mat Rp; /* a packed copy (R stays MPFR-held for the next trial) */
        vijp_mat_init(&Rp, n, 1, &fr);
        vijp_mat_copy(&Rp, &R);
        vijp_mat_pack(&Rp);
        for (size_t i0 = 0; i0 < 8; i0++)
            for (size_t len = 1; len <= 40; len++) {
                long want_hi[2] = {LONG_MIN, LONG_MIN}, want_lo[2] = {LONG_MAX, LONG_MAX};
                int inf_or_nan = 0;
                for (size_t i = i0; i < i0 + len; i++)
                    for (int k = 0; k < 2; k++) {
                        long e = mpfr_exp_of(xd, k ? Rp.packed : NULL, i);
                        if (k && (vijp_packed_kind(Rp.packed, i) == MPFR_NAN_KIND ||
                                  vijp_packed_kind(Rp.packed, i) == MPFR_INF_KIND))
                            e = LONG_MIN;
                        if (!k && !isfinite(xd[i])) inf_or_nan = 1;
                        if (e > want_hi[k]) want_hi[k] = e;
                        if (e != LONG_MIN && e < want_lo[k]) want_lo[k] = e;
                    }
                for (int set = 1; set < CMP_LANES_SETS; set++) {
                    const cmp_lanes_set *L = vijp_cmp_lanes_set(set);
                    if (!L) continue;
                    for (int k = 0; k < 2; k++) {
                        long hi, lo;
                        L->exps(k ? NULL : xd, k ? Rp.packed : NULL, i0, i0 + len, &hi, &lo);
                        ck_assert_msg(lo == want_lo[k] && (hi == want_hi[k] || (!k && inf_or_nan)),
                                      "%s, %s, [%zu, %zu): hi %ld lo %ld, MPFR's %ld %ld", L->name,
                                      k ? "packed" : "doubles", i0, i0 + len, hi, lo, want_hi[k], want_lo[k]);
                    }
                }
            }
        vijp_mat_clear(&Rp);
    }
    vijp_mat_clear(&R);
    free(xd);
}
END_TEST

/* vijp_compare_ulps_at_scale against hand-derived values in binary32
 * (24 bits: ulp(v) = 2^(e − 24) for v in [2^(e−1), 2^e)), a at 64 bits
 * and ref at 128: each entry alone, at scale 0 (vijp_compare's own
 * ulps), at a scale below |ref| (the same) and above it (its ulp), and
 * the largest over all; a NaN difference gives NaN. */
static double scale_at(const void *ctx, size_t i) { return ((const double *)ctx)[i]; }

START_TEST(ulps_at_scale_hand_values)
{
    enum { N = 5 };
    /* ref, a − ref, a scale above |ref|, the ulps at 0 and at that scale */
    static const double ref[N] = {1, 0x1p-40, -0x3p-50, 0, 5};
    static const double dif[N] = {0x1p-30, 0x1p-60, 0x1p-75, 0, 0};
    static const double big[N] = {4, 2, 0x1p-40, 1, 8};
    static const double plain[N] = {0x1p-7, 0x1p3, 0x1p-3, 0, 0};
    static const double scaled[N] = {0x1p-9, 0x1p-38, 0x1p-12, 0, 0};
    vijp_format f, f64, f128;
    ck_assert(!vijp_format_parse("binary32", &f, NULL));
    ck_assert(!vijp_format_mpfr(&f64, 64, NULL) && !vijp_format_mpfr(&f128, 128, NULL));
    vijp_mat A, R, a1, r1;
    vijp_mat_init(&A, N, 1, &f64), vijp_mat_init(&R, N, 1, &f128);
    vijp_mat_init(&a1, 1, 1, &f64), vijp_mat_init(&r1, 1, 1, &f128);
    double zeros[N] = {0}, small[N];
    for (size_t i = 0; i < N; i++) {
        mpfr_set_d(R.m[i], ref[i], MPFR_RNDN);
        mpfr_add_d(A.m[i], R.m[i], dif[i], MPFR_RNDN); /* exact at 64 bits */
        small[i] = fabs(ref[i]) / 2;
        mpfr_set(r1.m[0], R.m[i], MPFR_RNDN), mpfr_set(a1.m[0], A.m[i], MPFR_RNDN);
        vijp_xnum u0 = vijp_compare_ulps_at_scale(&a1, &r1, &f, scale_at, &zeros[i]);
        vijp_xnum us = vijp_compare_ulps_at_scale(&a1, &r1, &f, scale_at, &small[i]);
        vijp_xnum ub = vijp_compare_ulps_at_scale(&a1, &r1, &f, scale_at, &big[i]);
        ck_assert_msg(vijp_xnum_double(u0) == plain[i] && vijp_xnum_double(us) == plain[i],
                      "entry %zu: %g and %g at scales 0 and |ref|/2, want %g", i, vijp_xnum_double(u0),
                      vijp_xnum_double(us), plain[i]);
        ck_assert_msg(vijp_xnum_double(ub) == scaled[i], "entry %zu: %g at scale %g, want %g", i,
                      vijp_xnum_double(ub), big[i], scaled[i]);
    }
    ck_assert(vijp_xnum_double(vijp_compare_ulps_at_scale(&A, &R, &f, scale_at, zeros)) == 0x1p3);
    ck_assert(vijp_xnum_double(vijp_compare_ulps_at_scale(&A, &R, &f, scale_at, big)) == 0x1p-9);
    double inf[N], nan_[N]; /* terms past double's range: no scale, the plain measure */
    for (size_t i = 0; i < N; i++) inf[i] = INFINITY, nan_[i] = NAN;
    ck_assert(vijp_xnum_double(vijp_compare_ulps_at_scale(&A, &R, &f, scale_at, inf)) == 0x1p3);
    ck_assert(vijp_xnum_double(vijp_compare_ulps_at_scale(&A, &R, &f, scale_at, nan_)) == 0x1p3);
    mpfr_set_nan(A.m[3]);
    ck_assert(vijp_xnum_isnan(vijp_compare_ulps_at_scale(&A, &R, &f, scale_at, big)));
    vijp_mat_clear(&A), vijp_mat_clear(&R), vijp_mat_clear(&a1), vijp_mat_clear(&r1);
}
END_TEST

Suite *suite_compare_fast(void)
{
    Suite *s = suite_create("compare_fast");
    TCase *tc = tcase_create("compare_fast");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fast_is_exact_bit_for_bit);
    tcase_add_test(tc, fast_rescales_across_chunks);
    tcase_add_test(tc, fast_levels_in_doubles);
    tcase_add_test(tc, fast_reference_past_double_range);
    tcase_add_test(tc, fast_level_past_twice_steps_aside);
    tcase_add_test(tc, fast_on_threads_is_exact);
    tcase_add_test(tc, fast_declines_a_cancelled_angle);
    tcase_add_test(tc, fast_declines_nonfinite_and_range_floor);
    tcase_add_test(tc, lanes_scan_exponents);
    tcase_add_test(tc, ulps_at_scale_hand_values);
    suite_add_tcase(s, tc);
    return s;
}

/* Stochastic rounding (":sr", format.h's store_sr; mat.h's streams;
 * docs/formats.md).  The generator against Random123's published known
 * answers; the rounding against its definition, with the two neighbours of
 * x computed here by MPFR's directed roundings (toward zero and away from
 * it, a mechanism sr.c does not use) and the probability of going up,
 * (|x| − |down|)/(|up| − |down|), exact for these binary32 inputs (at most
 * 24 bits: the 32 random bits see every discarded bit).  Statistical claims
 * are z-tests at |z| < 6.1, a false failure rate of 1.1e-9 each (two-sided
 * normal tail; the counts are binomial with N >= 4000 and N·p(1 − p) >= 250,
 * where the normal approximation's error is far below that rate's scale). */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "format/sr.h"
#include "vijp/arith.h"
#include "vijp/mat.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define Z_MAX 6.1 /* two-sided normal tail 1.06e-9 */

/* Random123's kat_vectors, "philox4x32 10": counter, key, the block. */
START_TEST(philox_gives_random123s_known_answers)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
         0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
         0x24126ea1},
    };
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        vijp_philox4x32_10(kat[k], kat[k] + 4, out);
        for (int w = 0; w < 4; w++)
            ck_assert_msg(out[w] == kat[k][6 + w], "vector %d word %d: %08x, want %08x", k, w, out[w], kat[k][6 + w]);
    }
}
END_TEST

static vijp_format parsed(const char *name)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(name, &f, &err), "%s: %s", name, err.msg);
    return f;
}

/* n copies of x stored as elements 0 … n−1 of tensor `key` (vijp_mat_store). */
static void store_copies(vijp_mat *a, const vijp_format *f, double x, size_t n, vijp_sr_key key)
{
    test_mat_init_mp(a, n, 1, f);
    for (size_t i = 0; i < n; i++) mpfr_set_d(a->m[i], x, MPFR_RNDN); /* exact: x is a binary32 value */
    a->sr = key;
    vijp_mat_store(a);
}

/* x's neighbours in f's storage, |down| <= |x| <= |up|, by MPFR's directed
 * roundings at store_prec under the storage's exponent range. */
static void neighbours(const vijp_format *f, double x, double *down, double *up)
{
    mpfr_t t;
    mpfr_init2(t, 53);
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    for (int k = 0; k < 2; k++) {
        mpfr_rnd_t rnd = k ? MPFR_RNDA : MPFR_RNDZ;
        mpfr_set_prec(t, 53);        /* prec_round below narrowed it */
        mpfr_set_d(t, x, MPFR_RNDN); /* exact, in MPFR's wide range (not the storage's: it would underflow) */
        int tern = mpfr_prec_round(t, f->store_prec, rnd);
        mpfr_set_emin(f->store_emin), mpfr_set_emax(f->store_emax);
        tern = mpfr_check_range(t, tern, rnd);
        mpfr_subnormalize(t, tern, rnd);
        mpfr_set_emin(emin), mpfr_set_emax(emax);
        *(k ? up : down) = mpfr_get_d(t, MPFR_RNDN);
    }
    mpfr_clear(t);
}

typedef struct {
    const char *fmt;
    double x;
} sr_case;

/* Values off the storage grid at various positions between neighbours,
 * subnormal ones and negative ones included; each a binary32 value. */
static const sr_case CASES[] = {
    {"bfloat16:sr+binary32", 1 + 0x1p-9},          /* a quarter of the way up (bf16's spacing at 1: 2^-7) */
    {"bfloat16:sr+binary32", -(1 + 0x3p-9)},       /* three quarters, negative */
    {"bfloat16:sr+binary32", 3.0 + 0x1p-22},       /* just above 3: up with probability 2^-16 ... */
    {"bfloat16:sr+binary32", 0x1.0101p-130},       /* bfloat16's subnormals (spacing 2^-133) */
    {"binary16:sr+binary32", 1 + 0x1.8p-11},       /* 0.75 of binary16's spacing 2^-10 */
    {"binary16:sr+binary32", 0x1.4p-25},           /* under binary16's smallest subnormal 2^-24: 0 or 2^-24 */
    {"e4m3:sr+binary32", 0.3},                      /* e4m3's spacing at 0.3: 2^-5 */
    {"e5m2:sr+binary32", -1000.25},
};

START_TEST(the_mean_of_many_roundings_is_the_value)
{
    const sr_case *c = &CASES[_i];
    vijp_format f = parsed(c->fmt);
    double x = (float)c->x, down, up; /* a binary32 value, as the accumulation holds */
    neighbours(&f, x, &down, &up);
    ck_assert_msg(down != up && fabs(down) < fabs(x) && fabs(x) < fabs(up), "%s: %a in (%a, %a)?", c->fmt, x, down, up);
    double p = (fabs(x) - fabs(down)) / (fabs(up) - fabs(down)); /* exact: differences of nearby doubles */
    size_t n = 4000;
    while (n * p * (1 - p) < 250 && n < 256000) n *= 2; /* the z-test's normal approximation (header) */
    if (n * p * (1 - p) < 250) n = 4000; /* p near 0: the count of ups must be small instead (below) */
    vijp_mat a;
    store_copies(&a, &f, x, n, vijp_sr_key_of(7, VIJP_SR_OUTPUT, 3, 0));
    size_t ups = 0;
    for (size_t i = 0; i < n; i++) {
        double y = mpfr_get_d(a.m[i], MPFR_RNDN);
        ck_assert_msg(y == down || y == up, "%s: %a rounded to %a, neither %a nor %a", c->fmt, x, y, down, up);
        ups += y == up;
    }
    vijp_mat_clear(&a);
    double mean = p * (double)n, sd = sqrt((double)n * p * (1 - p)), z = ((double)ups - mean) / sd;
    if (n * p * (1 - p) >= 250)
        ck_assert_msg(fabs(z) < Z_MAX, "%s: %a went up %zu of %zu times, expected %.1f (z = %.2f)", c->fmt, x, ups, n, mean,
                      z);
    else { /* Chernoff: P(ups >= t) <= (e·mean/t)^t; the smallest t making that < 1e-9 */
        ck_assert_msg(p < 0.01, "%s: p = %g needs a larger sample", c->fmt, p);
        size_t t = 1;
        while (pow(M_E * mean / (double)t, (double)t) >= 1e-9) t++;
        ck_assert_msg(ups < t, "%s: %a went up %zu of %zu times, p = %g (bound %zu)", c->fmt, x, ups, n, p, t);
    }
}
END_TEST

/* Values on the grid stay; ±0, ±Inf and NaN as rounding to nearest. */
START_TEST(exact_values_never_change)
{
    static const char *const fmts[] = {"bfloat16:sr+binary32", "binary16:sr+binary32", "e4m3:sr+binary32"};
    static const double xs[] = {1.0, -1.5, 0x1p-133, 0x1p-9, 0.0, -0.0, 448};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        vijp_format f = parsed(fmts[k]);
        for (size_t j = 0; j < sizeof xs / sizeof *xs; j++) {
            double down, up;
            neighbours(&f, xs[j], &down, &up);
            if (down != xs[j]) continue; /* not a value of this storage */
            vijp_mat a;
            store_copies(&a, &f, xs[j], 256, vijp_sr_key_of(1, VIJP_SR_COTANGENT, 2, 0));
            for (size_t i = 0; i < 256; i++)
                ck_assert_msg(mpfr_get_d(a.m[i], MPFR_RNDN) == xs[j] && !mpfr_signbit(a.m[i]) == !signbit(xs[j]),
                              "%s: %a changed", fmts[k], xs[j]);
            vijp_mat_clear(&a);
        }
    }
}
END_TEST

/* Past the largest finite value the neighbour above is the overflow: e4m3's
 * 460 lies between 448 and 480 (NaN in e4m3, 448 saturated). */
START_TEST(rounding_up_past_the_largest_value_overflows_by_the_formats_rule)
{
    vijp_format f = parsed("e4m3:sr+binary32"), s = parsed("e4m3:sat:sr+binary32");
    vijp_mat a, b;
    store_copies(&a, &f, 460, 512, vijp_sr_key_of(3, VIJP_SR_OUTPUT, 1, 0));
    store_copies(&b, &s, 460, 512, vijp_sr_key_of(3, VIJP_SR_OUTPUT, 1, 0));
    size_t nan = 0;
    for (size_t i = 0; i < 512; i++) {
        ck_assert(mpfr_nan_p(a.m[i]) || mpfr_get_d(a.m[i], MPFR_RNDN) == 448);
        ck_assert(mpfr_get_d(b.m[i], MPFR_RNDN) == 448);
        nan += mpfr_nan_p(a.m[i]) != 0;
    }
    /* p = 12/32: 512 draws, mean 192, sd 11 */
    ck_assert_msg(fabs((double)nan - 192) < Z_MAX * sqrt(512 * 0.375 * 0.625), "%zu of 512 overflowed", nan);
    vijp_mat_clear(&a), vijp_mat_clear(&b);
}
END_TEST

/* The up/down decisions of x = 1 + 2^-8 (p = 1/2) in two streams agree on
 * about half the elements: independent bits give Binomial(n, 1/2)
 * agreements.  Pairs: another tensor (role, layer, sample), another seed,
 * and the same tensor shifted by one element. */
static double agreement_z(const vijp_sr_key *k1, const vijp_sr_key *k2, size_t shift)
{
    vijp_format f = parsed("bfloat16:sr+binary32");
    size_t n = 4096;
    vijp_mat a, b;
    store_copies(&a, &f, 1 + 0x1p-8, n + shift, *k1);
    store_copies(&b, &f, 1 + 0x1p-8, n + shift, *k2);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += mpfr_equal_p(a.m[i], b.m[i + shift]) != 0;
    vijp_mat_clear(&a), vijp_mat_clear(&b);
    return ((double)same - n / 2.0) / sqrt(n / 4.0);
}

START_TEST(streams_are_reproducible_and_independent)
{
    vijp_sr_key k = vijp_sr_key_of(11, VIJP_SR_OUTPUT, 4, 0);
    vijp_sr_key others[] = {vijp_sr_key_of(11, VIJP_SR_COTANGENT, 4, 0), vijp_sr_key_of(11, VIJP_SR_OUTPUT, 5, 0),
                            vijp_sr_key_of(11, VIJP_SR_OUTPUT, 4, 1), vijp_sr_key_of(12, VIJP_SR_OUTPUT, 4, 0)};
    ck_assert_msg(agreement_z(&k, &k, 0) > 60, "the same stream must give the same bits"); /* all 4096 agree: z = 64 */
    for (size_t j = 0; j < sizeof others / sizeof *others; j++) {
        double z = agreement_z(&k, &others[j], 0);
        ck_assert_msg(fabs(z) < Z_MAX, "stream %zu agrees with another too often or too rarely: z = %.2f", j, z);
    }
    double z = agreement_z(&k, &k, 1); /* element i against element i + 1 */
    ck_assert_msg(fabs(z) < Z_MAX, "neighbouring elements agree: z = %.2f", z);
}
END_TEST

/* One value alone (vo_store), and a matrix without a stream, round to nearest. */
START_TEST(unkeyed_stores_round_to_nearest)
{
    vijp_format f = parsed("bfloat16:sr+binary32");
    vijp_mat a;
    store_copies(&a, &f, 1 + 0x3p-9, 64, (vijp_sr_key){0});
    for (size_t i = 0; i < 64; i++) ck_assert(mpfr_get_d(a.m[i], MPFR_RNDN) == 1 + 0x1p-7);
    vijp_mat_clear(&a);
}
END_TEST

START_TEST(names_that_take_no_sr_are_refused)
{
    static const char *const bad[] = {"bfloat16:sr",       "binary32:sr",          "mxfp8:sr+binary32",
                                      "tf32:sr+binary32",  "bfloat16:sr+binary32@ref", "bfloat16:sr:ftz+binary32",
                                      "bfloat16:ftz:sr+binary32", "bfloat16+binary32:sr", "double:sr"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_error err = {0};
        vijp_format f;
        ck_assert_msg(vijp_format_parse(bad[k], &f, &err) == VIJP_EINVAL && err.msg[0], "%s accepted", bad[k]);
    }
    vijp_format f = parsed("e4m3:sat:sr+binary32");
    ck_assert(f.store_sr && f.store_overflow == VIJP_OVERFLOW_SATURATE && !strcmp(f.name, "e4m3:sat:sr+binary32"));
}
END_TEST

/* A drift study in an SR format: the same seeds give the same curves
 * (curves.csv, every error of every layer) whatever --jobs, the bits being
 * keyed by seed, tensor and element, not by the worker; other seeds others. */
static char *drift_curves(const char *opts)
{
    char args[512], path[128];
    snprintf(path, sizeof path, "/tmp/vijp-t-sr-%d", (int)getpid());
    snprintf(args, sizeof args,
             "drift --net dense:8,leaky:0.5 --depth 3 --formats bfloat16:sr+binary32 --engines moonwalk,checkpoint "
             "--no-plots -q --out %s %s", path, opts);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %.400s", args, r.rc, r.err);
    run_free(&r);
    char csv[160];
    snprintf(csv, sizeof csv, "%s/curves.csv", path);
    FILE *fp = fopen(csv, "r");
    ck_assert_msg(fp != NULL, "%s missing", csv);
    char *text = calloc(1, 1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 1, fp);
    fclose(fp);
    ck_assert(n > 0);
    return text;
}

START_TEST(a_runs_bits_do_not_depend_on_its_workers)
{
    char *one = drift_curves("--jobs 1 --seeds 5,6"), *two = drift_curves("--jobs 2 --seeds 5,6");
    char *other = drift_curves("--jobs 1 --seeds 7,8");
    ck_assert_msg(!strcmp(one, two), "--jobs 1 and --jobs 2 differ:\n%.600s\n%.600s", one, two);
    ck_assert_msg(strcmp(one, other), "seeds 5,6 and 7,8 give the same curves");
    free(one), free(two), free(other);
}
END_TEST

Suite *suite_sr(void)
{
    Suite *s = suite_create("sr");
    TCase *tc = tcase_create("sr");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, philox_gives_random123s_known_answers);
    tcase_add_loop_test(tc, the_mean_of_many_roundings_is_the_value, 0, sizeof CASES / sizeof *CASES);
    tcase_add_test(tc, exact_values_never_change);
    tcase_add_test(tc, rounding_up_past_the_largest_value_overflows_by_the_formats_rule);
    tcase_add_test(tc, streams_are_reproducible_and_independent);
    tcase_add_test(tc, unkeyed_stores_round_to_nearest);
    tcase_add_test(tc, names_that_take_no_sr_are_refused);
    tcase_add_test(tc, a_runs_bits_do_not_depend_on_its_workers);
    suite_add_tcase(s, tc);
    return s;
}

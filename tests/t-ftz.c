/* Flush to zero (":ftz", format.h's store_ftz and ftz; docs/formats.md),
 * against a rule written here from the definition: x rounded to nearest
 * even at p bits with an unbounded exponent (frexp, nearbyint, ldexp: exact
 * in doubles for p <= 24 and these exponents), and zero of x's sign when
 * that lies below the smallest normal 2^nmin.  Every case is hand-picked at
 * a boundary (the smallest and largest subnormal, the smallest normal and
 * the tie just below it, DBL_MIN and FLT_MIN, products that land on the
 * subnormal grid) and every claim an equality, the sign of zero included;
 * the same cases without ":ftz" keep their subnormals. */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "vijp/arith.h"
#include <float.h>
#include <math.h>
#include <string.h>

/* The rule: RN-even at p bits, unbounded exponent, then the flush. */
static double ftz_rule(double x, int p, int nmin)
{
    if (x == 0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e); /* x = m·2^e, 1/2 <= |m| < 1: exact */
    double r = ldexp(nearbyint(ldexp(m, p)), e - p); /* default rounding mode: ties to even */
    return fabs(r) < ldexp(1, nmin) ? copysign(0.0, x) : r;
}

typedef struct {
    const char *plain, *flushed; /* the format without and with :ftz (plain or storage) */
    int p, nmin, smin;           /* significand bits; smallest normal 2^nmin, smallest subnormal 2^smin */
} fmt_case;

static const fmt_case FORMATS[] = {
    {"binary32", "binary32:ftz", 24, -126, -149},
    {"bfloat16", "bfloat16:ftz", 8, -126, -133},
    {"binary16", "binary16:ftz", 11, -14, -24},
    {"e4m3", "e4m3:ftz", 4, -6, -9},
    {"e5m2:sat", "e5m2:sat:ftz", 3, -14, -16},
    {"bfloat16+binary32", "bfloat16:ftz+binary32", 8, -126, -133},
    {"binary16+binary32", "binary16:ftz+binary32", 11, -14, -24},
    {"e4m3+binary32", "e4m3:ftz+binary32", 4, -6, -9},
};

/* x stored (vo_store: the storage of a mixed format, a plain format itself). */
static double stored(const vijp_format *f, double x)
{
    mpfr_t a, r;
    mpfr_init2(a, 53), mpfr_init2(r, f->prec);
    mpfr_set_d(a, x, MPFR_RNDN);
    vo_store(r, a, f);
    double y = mpfr_get_d(r, MPFR_RNDN); /* exact: at most 24 bits, inside double's range */
    mpfr_clear(a), mpfr_clear(r);
    return y;
}

static void expect_same(double got, double want, const char *fmt, double x)
{
    ck_assert_msg(got == want && signbit(got) == signbit(want), "%s: %a stored as %a, want %a", fmt, x, got, want);
}

START_TEST(stored_values_flush_below_the_smallest_normal)
{
    const fmt_case *c = &FORMATS[_i];
    vijp_error err = {0};
    vijp_format plain, ftz;
    ck_assert_int_eq(vijp_format_parse(c->plain, &plain, &err), 0);
    ck_assert_msg(!vijp_format_parse(c->flushed, &ftz, &err), "%s: %s", c->flushed, err.msg);
    ck_assert_str_eq(ftz.name, c->flushed);
    double nrm = ldexp(1, c->nmin), below = nrm * (1 - ldexp(1, -c->p)); /* the largest p-bit value under it */
    const double xs[] = {
        ldexp(1, c->smin),                  /* smallest subnormal */
        nrm - ldexp(1, c->smin),            /* largest subnormal */
        nrm,                                /* smallest normal: kept */
        nrm * (1 - ldexp(1, -c->p - 1)),    /* the tie between `below` (odd) and nrm: rounds to nrm, kept */
        nextafter(nrm * (1 - ldexp(1, -c->p - 1)), 0), /* just under the tie: rounds to `below`, flushed */
        below,
        ldexp(1, c->smin - 1),              /* half the smallest subnormal */
        1.5 * nrm, 3.0,                     /* normal: as without :ftz */
        FLT_MIN, nextafter(FLT_MIN, 0),     /* binary32's (and bfloat16's) boundary */
        DBL_MIN, DBL_TRUE_MIN,              /* double's: far under every format's normals */
    };
    for (size_t k = 0; k < sizeof xs / sizeof *xs; k++)
        for (int s = 1; s >= -1; s -= 2) {
            double x = s * xs[k], want = ftz_rule(x, c->p, c->nmin);
            expect_same(stored(&ftz, x), want, c->flushed, x);
            /* without :ftz the subnormals stay: the smallest and largest one */
            if (k < 2) expect_same(stored(&plain, x), x, c->plain, x);
        }
}
END_TEST

/* One operation's result in a flushing arithmetic format. */
static double op(const vijp_format *f, char which, double a, double b)
{
    mpfr_t x, y, r;
    mpfr_init2(x, f->prec), mpfr_init2(y, f->prec), mpfr_init2(r, f->prec);
    mpfr_set_d(x, a, MPFR_RNDN), mpfr_set_d(y, b, MPFR_RNDN); /* exact: values of the format */
    if (which == '*') vo_mul(r, x, y, f);
    else vo_add(r, x, y, f);
    double v = mpfr_get_d(r, MPFR_RNDN);
    mpfr_clear(x), mpfr_clear(y), mpfr_clear(r);
    return v;
}

START_TEST(results_whose_rounding_is_subnormal_flush)
{
    vijp_error err = {0};
    vijp_format b32, ftz, acc_ftz, mixed;
    ck_assert(!vijp_format_parse("binary32", &b32, &err) && !vijp_format_parse("binary32:ftz", &ftz, &err));
    ck_assert(!vijp_format_parse("bfloat16+binary32:ftz", &acc_ftz, &err));
    ck_assert(!vijp_format_parse("bfloat16+binary32", &mixed, &err));
    ck_assert(acc_ftz.ftz && !acc_ftz.store_ftz && ftz.ftz && ftz.store_ftz);
    /* products of binary32 values; the exact product is a double (48 bits) */
    const double pairs[][2] = {
        {0x1p-70, 0x1p-60},               /* 2^-130: subnormal */
        {0x1p-63, 0x1p-63},               /* 2^-126: the smallest normal, kept */
        {1 - 0x1p-24, 0x1p-126},          /* 2^-126 − 2^-150: 24 bits, tiny (flushed); with subnormals a tie to 2^-126 */
        {1 + 0x1p-23, 0x1p-127},          /* 2^-127 + 2^-150: tiny */
        {-0x1p-75, 0x1p-75},              /* −2^-150: −0 */
        {0x1.8p-64, 0x1.8p-63},           /* 1.125·2^-126: normal */
    };
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        double a = pairs[k][0], b = pairs[k][1], want = ftz_rule(a * b, 24, -126);
        expect_same(op(&ftz, '*', a, b), want, "binary32:ftz ×", a * b);
        expect_same(op(&acc_ftz, '*', a, b), want, "bfloat16+binary32:ftz ×", a * b);
    }
    /* the tie case shows tininess after rounding: without :ftz it is 2^-126 */
    expect_same(op(&b32, '*', 1 - 0x1p-24, 0x1p-126), 0x1p-126, "binary32 ×", 0);
    expect_same(op(&mixed, '*', 0x1p-70, 0x1p-60), 0x1p-130, "bfloat16+binary32 ×", 0);
    /* a sum that cancels into the subnormals: 1.5·2^-126 − 2^-126·1.25 = 2^-128 */
    expect_same(op(&ftz, '+', 0x1.8p-126, -0x1.4p-126), ftz_rule(0x1p-128, 24, -126), "binary32:ftz +", 0);
    expect_same(op(&b32, '+', 0x1.8p-126, -0x1.4p-126), 0x1p-128, "binary32 +", 0);
    /* the accumulation format of a flushing mixed format flushes too */
    vijp_format acc;
    vijp_format_accumulator(&acc_ftz, &acc);
    ck_assert(acc.ftz && acc.store_ftz);
}
END_TEST

/* acc += a·b in bfloat16+binary32:ftz: a bfloat16 subnormal operand (a
 * binary32 subnormal too) counts as zero (DAZ), where without :ftz its
 * product is exact and lands in a normal sum: 1.5·2^-126 + 2^-130 =
 * 1.5625·2^-126, 24 bits. */
START_TEST(product_operands_subnormal_in_the_accumulation_count_as_zero)
{
    vijp_error err = {0};
    vijp_format fl, pl;
    ck_assert(!vijp_format_parse("bfloat16+binary32:ftz", &fl, &err) && !vijp_format_parse("bfloat16+binary32", &pl, &err));
    const vijp_format *fs[] = {&fl, &pl};
    const double want[] = {0x1.8p-126, 0x1.9p-126};
    for (int k = 0; k < 2; k++) {
        mpfr_t acc, a, b, p;
        mpfr_inits2(24, acc, a, b, p, (mpfr_ptr)0);
        mpfr_set_d(acc, 0x1.8p-126, MPFR_RNDN), mpfr_set_d(a, 0x1p-130, MPFR_RNDN), mpfr_set_d(b, 1, MPFR_RNDN);
        vo_madd(acc, a, b, p, fs[k]);
        ck_assert_msg(mpfr_get_d(acc, MPFR_RNDN) == want[k], "%s: %a, want %a", fs[k]->name, mpfr_get_d(acc, MPFR_RNDN),
                      want[k]);
        /* −0 + (−2^-130)·1: the flushed product is −0, and −0 + −0 = −0 */
        mpfr_set_zero(acc, -1), mpfr_set_d(a, -0x1p-130, MPFR_RNDN);
        vo_madd(acc, a, b, p, fs[k]);
        ck_assert_msg(k == 1 || (mpfr_zero_p(acc) && mpfr_signbit(acc)), "%s: −0 + −0", fs[k]->name);
        mpfr_clears(acc, a, b, p, (mpfr_ptr)0);
    }
}
END_TEST

START_TEST(names_that_take_no_ftz_are_refused)
{
    static const char *const bad[] = {"double:ftz",        "mpfr:53:ftz",           "mxfp8:ftz+binary32",
                                      "tf32:ftz+binary32", "bfloat16:ftz+binary32@ref", "binary32:ftzz",
                                      "bfloat16:ftz:ftz+binary32", "binary32@ref:ftz"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_error err = {0};
        vijp_format f;
        ck_assert_msg(vijp_format_parse(bad[k], &f, &err) == VIJP_EINVAL && err.msg[0], "%s accepted", bad[k]);
    }
    static const char *const good[] = {"bfloat16:ftz+binary32:ftz", "e4m3:sat:ftz+binary32", "bfloat16+binary32:ftz"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        vijp_error err = {0};
        vijp_format f;
        ck_assert_msg(!vijp_format_parse(good[k], &f, &err) && !strcmp(f.name, good[k]), "%s: %s", good[k], err.msg);
    }
}
END_TEST

/* The commands take them: a gradient in a flushing format, compared with
 * its reference (the run's exit status and a finite error). */
START_TEST(grad_runs_in_a_flushing_format)
{
    run_result r = run_vijp("grad --net dense:8,leaky:0.5 --depth 3 --width 8 --batch 2 --format bfloat16:ftz+binary32:ftz "
                            "--engine backprop,moonwalk");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "bfloat16:ftz+binary32:ftz"), "exit %d: %.400s%.400s", r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

Suite *suite_ftz(void)
{
    Suite *s = suite_create("ftz");
    TCase *tc = tcase_create("ftz");
    tcase_set_timeout(tc, 60); /* one grad run: a loaded machine */
    tcase_add_loop_test(tc, stored_values_flush_below_the_smallest_normal, 0, sizeof FORMATS / sizeof *FORMATS);
    tcase_add_test(tc, results_whose_rounding_is_subnormal_flush);
    tcase_add_test(tc, product_operands_subnormal_in_the_accumulation_count_as_zero);
    tcase_add_test(tc, names_that_take_no_ftz_are_refused);
    tcase_add_test(tc, grad_runs_in_a_flushing_format);
    suite_add_tcase(s, tc);
    return s;
}

/* src/emu/emu.h, the native emulation of the narrow formats, against the
 * MPFR oracle's operations (src/format/arith.c) bit for bit: every result must
 * be the same number, with the same sign of zero, and NaN where the oracle
 * gives NaN.  No tolerance: the claim is equality (emu.h cites the theorem
 * that makes it hold for formats of at most 24 bits). */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "emu/emu.h"
#include <math.h>
#include <string.h>

static const char *const formats[] = {"binary32", "binary16", "bfloat16", "bfloat16+binary32",
                                      "binary16+binary32", "tf32+binary32"};

/* A random value of the arithmetic grid of f, drawn to cover its classes:
 * ordinary values, subnormals, values near overflow, powers of two, ±0,
 * ±Inf and NaN (the last three rarely, so that most tests compute). */
static double draw(vijp_rng *r, vijp_emu_grid g)
{
    uint64_t u = vijp_rng_u64(r);
    double s = (u & 1) ? -1 : 1, m = 0.5 + 0.5 * vijp_rng_uniform(r);
    switch ((u >> 1) % 16) {
    case 0: return s * 0.0;
    case 1: return (u >> 8) % 4 ? s * ldexp(1.0, (int)((u >> 12) % 40) - 20) : s * INFINITY;
    case 2: return (u >> 8) % 8 ? vijp_emu_round(s * ldexp(m, g.emin - 1 - (int)((u >> 12) % 4)), g) : NAN;
    case 3: /* subnormal */
    case 4: return vijp_emu_round(s * ldexp(m, g.emin - (int)((u >> 12) % (unsigned)g.p)), g);
    case 5: return vijp_emu_round(s * ldexp(m, g.emax - (int)((u >> 12) % 3)), g); /* near overflow */
    case 6: return vijp_emu_round(s * ldexp(m, g.emin + g.p - 1 + (int)((u >> 12) % 8)), g); /* just normal */
    default: return vijp_emu_round(s * ldexp(m, (int)((u >> 12) % 24) - 12), g);
    }
}

/* The oracle's result and emu's agree as numbers, signs of zero included. */
static void same(double oracle, double emu, const char *what, const char *fmt, double a, double b)
{
    int ok = (isnan(oracle) && isnan(emu)) || (oracle == emu && signbit(oracle) == signbit(emu));
    ck_assert_msg(ok, "%s in %s of %a, %a: oracle %a, emu %a", what, fmt, a, b, oracle, emu);
}

START_TEST(round_matches_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed());
    long n = test_iters(40000);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        ck_assert(vijp_emu_applies(&f));
        vijp_emu_grid g = vijp_emu_arith(&f), st = vijp_emu_store(&f);
        mpfr_t x, y;
        mpfr_init2(x, 64), mpfr_init2(y, f.prec);
        for (long i = 0; i < n; i++) {
            /* any double with up to 53 bits, in and around the format's
             * range, and exact midpoints of its grid (the ties) */
            uint64_t u = vijp_rng_u64(&r);
            int e = g.emin - g.p - 3 + (int)(u % (unsigned)(g.emax - g.emin + g.p + 6));
            double v = ldexp(0.5 + 0.5 * vijp_rng_uniform(&r), e);
            if (u & 2) v = vijp_emu_round(v, g) + ldexp(1.0, (e - g.p > g.emin - 1 ? e - g.p : g.emin - 1) - 1);
            if (u & 1) v = -v;
            vo_set_d(y, v, &f);
            same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_round(v, g), "round", formats[fi], v, 0);
            /* the storage rounding (vo_store) of an arithmetic-grid value */
            double a = mpfr_get_d(y, MPFR_RNDN);
            mpfr_set_d(x, a, MPFR_RNDN);
            vo_store(y, y, &f);
            same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_round(a, st), "store", formats[fi], a, 0);
        }
        mpfr_clears(x, y, (mpfr_ptr)0);
    }
}
END_TEST

START_TEST(ops_match_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 1);
    long n = test_iters(20000);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        vijp_emu_grid g = vijp_emu_arith(&f);
        mpfr_t a, b, c, y, t;
        mpfr_inits2(f.prec, a, b, c, y, t, (mpfr_ptr)0);
        for (long i = 0; i < n; i++) {
            double da = draw(&r, g), db = draw(&r, g), dc = draw(&r, g);
            if (i % 4 == 0) db = vijp_emu_round(da * ldexp(1.0 + vijp_rng_uniform(&r), -30), g); /* cancellation-free tiny b */
            mpfr_set_d(a, da, MPFR_RNDN), mpfr_set_d(b, db, MPFR_RNDN), mpfr_set_d(c, dc, MPFR_RNDN); /* exact */
            vo_add(y, a, b, &f), same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_add(da, db, g), "add", formats[fi], da, db);
            vo_sub(y, a, b, &f), same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_sub(da, db, g), "sub", formats[fi], da, db);
            vo_mul(y, a, b, &f), same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_mul(da, db, g), "mul", formats[fi], da, db);
            vo_div(y, a, b, &f), same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_div(da, db, g), "div", formats[fi], da, db);
            vo_sqrt(y, a, &f), same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_sqrt(da, g), "sqrt", formats[fi], da, 0);
            mpfr_set(y, c, MPFR_RNDN);
            vo_madd(y, a, b, t, &f);
            same(mpfr_get_d(y, MPFR_RNDN), vijp_emu_madd(dc, da, db, &f), "madd", formats[fi], da, db);
        }
        mpfr_clears(a, b, c, y, t, (mpfr_ptr)0);
    }
}
END_TEST

/* vijp_emu_fma (emu.h: round to odd at 53 bits, then to the grid) against
 * vo_fma, in every format's arithmetic grid.  Operands of every class
 * (draw), and the sums where a double-rounded fma goes wrong:
 *   - c far below a·b (a sticky bit), c cancelling a·b, subnormal c;
 *   - a·b exactly a midpoint of the grid (3·m2 with m2 odd, 2^p/3 <= m2 <
 *     2^p: p + 1 bits ending in 1) plus a c far below it, whose sign alone
 *     decides the rounding;
 *   - c with an odd last bit and a·b = ±h(1 − 2^(2−2p)), h half c's
 *     quantum: c + a·b lies 2^(2−2p)·h inside a midpoint, which a binary64
 *     fma rounds onto the midpoint itself and then, to even, to the wrong
 *     neighbour. */
START_TEST(fma_matches_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 16);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        vijp_emu_grid g = vijp_emu_arith(&f);
        mpfr_t a, b, c;
        mpfr_inits2(f.prec, a, b, c, (mpfr_ptr)0);
        long midpoints = 0;
        for (long i = 0; i < test_iters(40000); i++) {
            uint64_t u = vijp_rng_u64(&r);
            double x = draw(&r, g), y = draw(&r, g), z = draw(&r, g);
            if (u % 6) { /* ordinary a, b */
                x = vijp_emu_round(ldexp(vijp_rng_uniform(&r) + 0.5, (int)((u >> 3) % 20) - 10), g);
                y = vijp_emu_round(ldexp(vijp_rng_uniform(&r) + 0.5, (int)((u >> 8) % 20) - 10), g);
            }
            double ab = x * y, q = ab != 0 && isfinite(ab) ? ldexp(1.0, ilogb(ab) - g.p) : 0;
            switch (u % 6) {
            case 1: z = vijp_emu_round(-ab + q * (double)((u >> 24) % 5), g); break;                      /* cancellation */
            case 2: z = vijp_emu_round(ab * ldexp(1.0, -(g.p + 3 + (int)((u >> 24) % 30))), g); break; /* a sticky bit */
            case 3: z = vijp_emu_round(ldexp(vijp_rng_uniform(&r), -140 - (int)((u >> 24) % 10)), g); break; /* subnormal */
            case 4: { /* a·b a midpoint, c far below */
                uint64_t m2 = (((uint64_t)1 << g.p) / 3 + vijp_rng_u64(&r) % (((uint64_t)1 << g.p) / 3)) | 1;
                int e = (int)((u >> 24) % 40) - 20;
                x = ldexp(3.0, e), y = ldexp((double)m2, -g.p), z = ldexp(1.0, g.emin - 1) * ((u >> 30) & 1 ? -1 : 1);
                if ((u >> 31) & 1) z = ldexp(z, e + g.p - g.emin - 3 - (int)((u >> 32) % 30)); /* nearer, still below the grid */
                z = vijp_emu_round(z, g);
                midpoints += vijp_emu_round(x * y, g) != x * y;
                break;
            }
            case 5: { /* c + a·b just inside a midpoint */
                z = vijp_emu_round(ldexp(1 + vijp_rng_uniform(&r), (int)((u >> 24) % 40) - 20), g);
                double h = ldexp(1.0, ilogb(z) - g.p);
                if (!((uint64_t)(z / (2 * h)) & 1)) z += 2 * h;
                x = h * (1 + ldexp(1.0, 1 - g.p)) * ((u >> 30) & 1 ? -1 : 1), y = 1 - ldexp(1.0, 1 - g.p);
                break;
            }
            default: break; /* 0: every class */
            }
            if ((u >> 33) & 1) z = -z;
            mpfr_set_d(a, x, MPFR_RNDN), mpfr_set_d(b, y, MPFR_RNDN), mpfr_set_d(c, z, MPFR_RNDN);
            vo_fma(c, a, b, c, &f);
            same(mpfr_get_d(c, MPFR_RNDN), vijp_emu_fma(x, y, z, g), "fma", formats[fi], x, y);
        }
        ck_assert_msg(midpoints > 0, "%s: no product fell between grid points", formats[fi]);
        mpfr_clears(a, b, c, (mpfr_ptr)0);
    }
}
END_TEST

/* Hand-derived cases, so that a wrong oracle and a wrong emu agreeing by
 * accident would still fail: bfloat16 keeps 8 bits (ulp(1) = 2^-7). */
START_TEST(hand_cases)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16", &f, NULL), 0);
    vijp_emu_grid g = vijp_emu_arith(&f);
    ck_assert(vijp_emu_add(1, 0x1p-8, g) == 1);                  /* a tie: to the even 1 */
    ck_assert(vijp_emu_add(1 + 0x1p-7, 0x1p-8, g) == 1 + 0x1p-6); /* a tie: to the even 1 + 2^-6 */
    ck_assert(vijp_emu_round(0x1p-134, g) == 0);                /* half the smallest subnormal 2^-133: to 0 */
    ck_assert(vijp_emu_round(0x1.8p-134, g) == 0x1p-133);
    ck_assert(signbit(vijp_emu_round(-0x1p-140, g)));           /* underflow keeps the sign */
    ck_assert(isinf(vijp_emu_mul(0x1p127, 2, g)));               /* 2^128 overflows */
    ck_assert(vijp_emu_round(0x1.fep127, g) == 0x1.fep127);      /* the largest bfloat16 */
    ck_assert(isinf(vijp_emu_round(0x1.ffp127, g)));             /* the tie above it overflows */
    ck_assert(isinf(vijp_emu_round(0x1.8p979, g))); /* bf16's shift constant would be 1.5·2^1024: NaN */
    ck_assert(isinf(vijp_emu_round(0x1p1000, g)) && isinf(vijp_emu_round(-0x1.fffffffffffffp1023, g)) &&
              signbit(vijp_emu_round(-0x1p1023, g))); /* the largest doubles: Inf, signed */
    ck_assert_int_eq(vijp_format_parse("bfloat16+binary32", &f, NULL), 0);
    ck_assert(vijp_emu_madd(1, 0x1p-9, 1, &f) == 1 + 0x1p-9);    /* binary32 accumulation keeps it */
    ck_assert(vijp_emu_round(1 + 0x1p-9, vijp_emu_store(&f)) == 1); /* the store drops it */
    /* fma in bfloat16 (c any double here: the proof needs only a, b on the
     * grid).  1·(1 + 2^-7) + 2^-8 is a tie... */
    ck_assert(vijp_emu_fma(1, 1 + 0x1p-7, 0x1p-8, g) == 1 + 0x1p-6);   /* to even */
    ck_assert(vijp_emu_fma(1, 1, 0x1p-8 + 0x1p-60, g) == 1 + 0x1p-7);  /* ...broken by a far sticky bit */
    ck_assert(vijp_emu_fma(1, 1, -0x1p-9 - 0x1p-60, g) == 1 - 0x1p-8); /* below 1 (spacing 2^-8): not up to the even 1 */
}
END_TEST

Suite *suite_emu(void)
{
    Suite *s = suite_create("emu");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_matches_oracle);
    tcase_add_test(tc, ops_match_oracle);
    tcase_add_test(tc, fma_matches_oracle);
    tcase_add_test(tc, hand_cases);
    suite_add_tcase(s, tc);
    return s;
}

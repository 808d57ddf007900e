/* Mixed-precision formats (format.h): storage in one format, arithmetic in
 * binary32, matrix products with exact products and one rounding per sum.
 * Every expected value below is derived by hand in the comment next to it,
 * from the definitions of the formats, not from the code under test:
 *   bfloat16 keeps 8 significand bits: ulp(1) = 2^-7, so 1 + 2^-9 (a quarter
 *   ulp) rounds to 1, and 1 + 2^-8 is a tie, which goes to the even 1;
 *   binary16 keeps 11: ulp(1) = 2^-10; binary32 24: ulp(1) = 2^-23;
 *   TF32 operands keep 11: 1 + 2^-12 rounds to 1. */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include <math.h>
#include <string.h>

START_TEST(parse_mixed)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16+binary32", &f, NULL), 0);
    ck_assert_int_eq(f.kind, VIJP_MIXED);
    ck_assert(f.mixed && f.emulated);
    ck_assert_int_eq(f.prec, 24); ck_assert_int_eq(f.emin, -148); ck_assert_int_eq(f.emax, 128);
    ck_assert_int_eq(f.store_prec, 8); ck_assert_int_eq(f.store_emin, -132); ck_assert_int_eq(f.store_emax, 128);
    ck_assert_uint_eq(f.value_bytes, 2);
    ck_assert(vijp_format_unit_roundoff(&f) == 0x1p-8); /* the stored values' u */
    ck_assert_str_eq(f.name, "bfloat16+binary32");

    ck_assert_int_eq(vijp_format_parse("binary16+binary32", &f, NULL), 0);
    ck_assert_int_eq(f.store_prec, 11); ck_assert_int_eq(f.store_emin, -23); ck_assert_int_eq(f.store_emax, 16);
    ck_assert(vijp_format_unit_roundoff(&f) == 0x1p-11);

    ck_assert_int_eq(vijp_format_parse("tf32+binary32", &f, NULL), 0);
    ck_assert_int_eq(f.store_prec, 24); ck_assert_int_eq(f.operand_prec, 11);
    ck_assert_uint_eq(f.value_bytes, 4);
    ck_assert(vijp_format_unit_roundoff(&f) == 0x1p-11); /* what a product's operand keeps */

    /* the plain formats are not mixed, and store what they compute */
    ck_assert_int_eq(vijp_format_parse("bfloat16", &f, NULL), 0);
    ck_assert(!f.mixed && f.store_prec == f.prec && f.store_emin == f.emin && f.operand_prec == 0);

    const char *bad[] = {"bfloat16+", "+binary32", "bfloat16+binary16", "binary32+binary32", "tf32", "bfloat16+mpfr:64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_error err = {0};
        ck_assert_int_eq(vijp_format_parse(bad[i], &f, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, "bfloat16+binary32"), "%s: %s", bad[i], err.msg); /* the message lists them */
    }
}
END_TEST

/* y = W x + b of a dense:1 layer with W = (1, …, 1), in format name. */
static double dense_sum(const char *name, const double *x, size_t n, double b)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse(name, &f, NULL), 0);
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_parse(&L, "dense:1", n, &err), "%s", err.msg);
    vijp_mat th, X, Y;
    vijp_mat_init(&th, n + 1, 1, &f), vijp_mat_init(&X, n, 1, &f), vijp_mat_init(&Y, 1, 1, &f);
    for (size_t k = 0; k < n; k++) vijp_mat_set_entry_d(&th, k, 1.0);
    vijp_mat_set_entry_d(&th, n, b);
    vijp_mat_set_d(&X, x);
    ck_assert_msg(!vijp_layer_forward(&L, &th, &X, &Y, &err), "%s", err.msg);
    double y = vijp_mat_get_d(&Y, 0);
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y);
    vijp_layer_clear(&L);
    return y;
}

START_TEST(accumulation_differs)
{
    /* 1 + four quarter-ulps of bfloat16: each bf16 sum rounds back to 1;
     * binary32 holds 1 + 2^-7 exactly, which bf16 stores exactly. */
    const double four[5] = {1, 0x1p-9, 0x1p-9, 0x1p-9, 0x1p-9};
    ck_assert(dense_sum("bfloat16", four, 5, 0) == 1.0);
    ck_assert(dense_sum("bfloat16+binary32", four, 5, 0) == 1 + 0x1p-7);
    /* three quarter-ulps: binary32 holds 1 + 3·2^-9, three quarters of the
     * way to 1 + 2^-7, where the one rounding to bf16 goes */
    ck_assert(dense_sum("bfloat16+binary32", four, 4, 0) == 1 + 0x1p-7);
    /* two: 1 + 2^-8 is a tie, to the even significand, 1 */
    ck_assert(dense_sum("bfloat16+binary32", four, 3, 0) == 1.0);
    /* the bias is added in binary32 before the rounding: 1 + 2^-8 + 2^-8 */
    ck_assert(dense_sum("bfloat16+binary32", four, 3, 0x1p-8) == 1 + 0x1p-7);
    ck_assert(dense_sum("bfloat16", four, 3, 0x1p-8) == 1.0); /* bf16: b is a quarter-ulp of 1, lost too */

    /* binary16: ulp(1) = 2^-10, quarter-ulps 2^-12 */
    const double h[5] = {1, 0x1p-12, 0x1p-12, 0x1p-12, 0x1p-12};
    ck_assert(dense_sum("binary16", h, 5, 0) == 1.0);
    ck_assert(dense_sum("binary16+binary32", h, 5, 0) == 1 + 0x1p-10);

    /* TF32: the operand 1 + 2^-12 keeps 11 bits, so it is 1 in the product;
     * binary32 keeps it.  1 + 2^-10 is a TF32 number and is kept. */
    const double t[1] = {1 + 0x1p-12}, t2[1] = {1 + 0x1p-10};
    ck_assert(dense_sum("binary32", t, 1, 0) == 1 + 0x1p-12);
    ck_assert(dense_sum("tf32+binary32", t, 1, 0) == 1.0);
    ck_assert(dense_sum("tf32+binary32", t2, 1, 0) == 1 + 0x1p-10);
    /* but the bias is not an operand of the product: stored in binary32 */
    ck_assert(dense_sum("tf32+binary32", t, 1, 0x1p-12) == 1 + 0x1p-12);

    /* exact products: (1 + 2^-7)² = 1 + 2^-6 + 2^-14 needs 15 bits; summed
     * with −1 − 2^-6 in binary32 it leaves 2^-14 exactly; a bf16 product
     * would have rounded the 2^-14 away first (then 0). */
    const double sq[2] = {1 + 0x1p-7, 0};
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16+binary32", &f, NULL), 0);
    mpfr_t acc, a;
    mpfr_inits2(f.prec, acc, a, (mpfr_ptr)0);
    mpfr_set_d(a, sq[0], MPFR_RNDN);
    mpfr_set_d(acc, -1 - 0x1p-6, MPFR_RNDN);
    vo_madd(acc, a, a, NULL, &f);
    ck_assert(mpfr_get_d(acc, MPFR_RNDN) == 0x1p-14);
    vijp_format g;
    ck_assert_int_eq(vijp_format_parse("bfloat16", &g, NULL), 0);
    mpfr_t p;
    mpfr_init2(p, g.prec);
    mpfr_set_d(acc, -1 - 0x1p-6, MPFR_RNDN);
    vo_madd(acc, a, a, p, &g);
    ck_assert(mpfr_zero_p(acc));
    mpfr_clears(acc, a, p, (mpfr_ptr)0);
}
END_TEST

/* Values are stored with one rounding from what they are given in, not via
 * binary32: 1 + 2^-8 + 2^-30 is just above the bf16 tie, so it rounds up to
 * 1 + 2^-7; through binary32 it would first lose the 2^-30 (below binary32's
 * half-ulp 2^-24), become the tie, and go to 1. */
START_TEST(stored_once)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16+binary32", &f, NULL), 0);
    vijp_mat a;
    vijp_mat_init(&a, 3, 1, &f);
    vijp_mat_set_entry_d(&a, 0, 1 + 0x1p-8 + 0x1p-30);
    ck_assert(vijp_mat_get_d(&a, 0) == 1 + 0x1p-7);
    /* bf16's range: 2^128 overflows storage though binary32 would too;
     * 2^-133 is bf16's smallest subnormal, 2^-135 rounds to 0 */
    vijp_mat_set_entry_d(&a, 1, 0x1p-133);
    vijp_mat_set_entry_d(&a, 2, 0x1p-135);
    ck_assert(vijp_mat_get_d(&a, 1) == 0x1p-133 && vijp_mat_get_d(&a, 2) == 0);
    vijp_mat_clear(&a);

    /* binary16 storage: 65520 is the overflow threshold (65504 + half an ulp
     * of 32), though binary32 arithmetic holds it: a layer output stores Inf */
    ck_assert_int_eq(vijp_format_parse("binary16+binary32", &f, NULL), 0);
    const double big[2] = {65504, 16};
    ck_assert(isinf(dense_sum("binary16+binary32", big, 2, 0)));
    /* the partial sum 65520 lives in binary32; the bias brings it back to
     * 65504, which binary16 stores.  binary16 itself overflows the partial
     * sum to Inf (65520 is its overflow threshold), and Inf − 16 stays Inf. */
    ck_assert(dense_sum("binary16+binary32", big, 2, -16) == 65504);
    ck_assert(isinf(dense_sum("binary16", big, 2, -16)));
}
END_TEST

/* FP8 storage (format.h), binary32 accumulation.  e4m3: ulp(1) = 2^-3, so
 * 1 + 2^-5 (a quarter ulp) rounds back to 1 at every e4m3 sum, while
 * binary32 adds four of them to the 1.125 e4m3 stores exactly; 448 + 32 =
 * 480, e4m3's NaN pattern, lives in binary32 until the bias −32 brings it
 * back to 448, where e4m3 itself has made it NaN for good.  e5m2: 57344 +
 * 8192 = 2^16, past its range (±Inf), held the same way.  Without the bias
 * the stored output overflows: NaN or ±Inf, or the largest finite value
 * with :sat. */
START_TEST(fp8_storage)
{
    const double four[5] = {1, 0x1p-5, 0x1p-5, 0x1p-5, 0x1p-5};
    ck_assert(dense_sum("e4m3", four, 5, 0) == 1.0);
    ck_assert(dense_sum("e4m3+binary32", four, 5, 0) == 1.125);
    const double b4[2] = {448, 32}, b5[2] = {57344, 8192};
    ck_assert(dense_sum("e4m3+binary32", b4, 2, -32) == 448);
    ck_assert(isnan(dense_sum("e4m3", b4, 2, -32)));
    ck_assert(isnan(dense_sum("e4m3+binary32", b4, 2, 0)));
    ck_assert(dense_sum("e4m3:sat+binary32", b4, 2, 0) == 448);
    ck_assert(dense_sum("e5m2+binary32", b5, 2, -8192) == 57344);
    ck_assert(isinf(dense_sum("e5m2", b5, 2, -8192)));
    ck_assert(isinf(dense_sum("e5m2+binary32", b5, 2, 0)));
    ck_assert(dense_sum("e5m2:sat+binary32", b5, 2, 0) == 57344);
}
END_TEST

/* An elementwise layer computes in binary32 and stores bf16: the result is
 * RN_bf16(RN_32(tanh x)), checked here against MPFR directly at 24 then 8
 * bits, on a grid of bf16 inputs. */
START_TEST(elementwise_two_roundings)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16+binary32", &f, NULL), 0);
    enum { N = 256 };
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_parse(&L, "tanh", N, &err), "%s", err.msg);
    vijp_mat X, Y;
    vijp_mat_init(&X, N, 1, &f), vijp_mat_init(&Y, N, 1, &f);
    double x[N];
    for (int i = 0; i < N; i++) x[i] = ldexp(1 + (i % 128) / 128.0, i / 128 ? -3 : -1) * (i % 2 ? -1 : 1); /* bf16 values */
    vijp_mat_set_d(&X, x);
    ck_assert(!vijp_layer_forward(&L, NULL, &X, &Y, &err));
    mpfr_t t32, t8;
    mpfr_init2(t32, 24), mpfr_init2(t8, 8);
    for (int i = 0; i < N; i++) {
        mpfr_set_d(t32, x[i], MPFR_RNDN);
        mpfr_tanh(t32, t32, MPFR_RNDN); /* normal range throughout: no subnormal step needed */
        mpfr_set(t8, t32, MPFR_RNDN);
        ck_assert_msg(vijp_mat_get_d(&Y, i) == mpfr_get_d(t8, MPFR_RNDN), "x = %a", x[i]);
    }
    mpfr_clears(t32, t8, (mpfr_ptr)0);
    vijp_mat_clear(&X), vijp_mat_clear(&Y);
    vijp_layer_clear(&L);
}
END_TEST

Suite *suite_mixed(void)
{
    Suite *s = suite_create("mixed");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, parse_mixed);
    tcase_add_test(tc, accumulation_differs);
    tcase_add_test(tc, stored_once);
    tcase_add_test(tc, fp8_storage);
    tcase_add_test(tc, elementwise_two_roundings);
    suite_add_tcase(s, tc);
    return s;
}

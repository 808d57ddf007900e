/* Number formats (DESIGN §3): parsing, and the MPFR emulation of the IEEE
 * formats.  binary32 is checked bit for bit against the machine's float
 * (correctly rounded by IEEE 754, built with -ffp-contract=off); binary16 and
 * bfloat16, which have no native type here, against exact facts derived by
 * hand below. */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "vijp/rng.h"
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ parsing */

static void parse_ok(const char *s, vijp_format_kind kind, long prec, int emulated, long emin,
                     long emax, size_t bytes)
{
    vijp_format f;
    vijp_error err = {0};
    int rc = vijp_format_parse(s, &f, &err);
    ck_assert_msg(rc == 0, "parse '%s' failed: %d %s", s, rc, err.msg);
    ck_assert_msg(f.kind == kind, "'%s': kind %d, want %d", s, (int)f.kind, (int)kind);
    ck_assert_msg(f.prec == prec, "'%s': prec %ld, want %ld", s, (long)f.prec, prec);
    ck_assert_msg(!!f.emulated == emulated, "'%s': emulated %d, want %d", s, f.emulated, emulated);
    ck_assert_str_eq(f.name, s);
    if (emulated) {
        ck_assert_msg(f.emin == emin && f.emax == emax, "'%s': exponent range [%ld, %ld], want [%ld, %ld]",
                      s, (long)f.emin, (long)f.emax, emin, emax);
        ck_assert_msg(f.value_bytes == bytes, "'%s': %zu bytes, want %zu", s, f.value_bytes, bytes);
    }
}

START_TEST(test_parse_known)
{
    /* MPFR convention x = m·2^e with 1/2 <= |m| < 1.  The smallest subnormal is
     * 2^(emin-1) and 2^emax is the first power of two that overflows:
     *   binary32: 2^-149 and 2^128  -> emin -148, emax 128, p 24, 4 bytes
     *   binary16: 2^-24  and 2^16   -> emin -23,  emax 16,  p 11, 2 bytes
     *   bfloat16: 2^-133 and 2^128  -> emin -132, emax 128, p 8,  2 bytes */
    parse_ok("double", VIJP_DOUBLE, 53, 0, 0, 0, 0);
    parse_ok("binary32", VIJP_BINARY32, 24, 1, -148, 128, 4);
    parse_ok("binary16", VIJP_BINARY16, 11, 1, -23, 16, 2);
    parse_ok("bfloat16", VIJP_BFLOAT16, 8, 1, -132, 128, 2);
    parse_ok("mpfr:53", VIJP_MPFR, 53, 0, 0, 0, 0);
    parse_ok("mpfr:256", VIJP_MPFR, 256, 0, 0, 0, 0);
    /* The documented limits are inclusive. */
    parse_ok("mpfr:2", VIJP_MPFR, VIJP_PREC_MIN, 0, 0, 0, 0);
    parse_ok("mpfr:65536", VIJP_MPFR, VIJP_PREC_MAX, 0, 0, 0, 0);

    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("double", &f, NULL), 0);
    ck_assert(vijp_format_unit_roundoff(&f) == 0x1p-53); /* u = 2^-p */
    ck_assert_int_eq(vijp_format_parse("binary16", &f, NULL), 0);
    ck_assert(vijp_format_unit_roundoff(&f) == 0x1p-11);
}
END_TEST

START_TEST(test_parse_errors)
{
    static const char *bad[] = {
        "float8",  "float",     "Double",     "binary64", "", "mpfr", "mpfr:", "mpfr:abc",
        "mpfr:53x", "mpfr:1",   "mpfr:0",     "mpfr:-53", "mpfr:65537", "mpfr:100000",
        "mpfr:99999999999999999999999", /* strtol overflow (ERANGE) */
        "binary32 ", "mpfr:53 ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_format f;
        vijp_error err = {0};
        int rc = vijp_format_parse(bad[i], &f, &err);
        ck_assert_msg(rc == VIJP_EINVAL, "'%s': got %d, want VIJP_EINVAL", bad[i], rc);
        ck_assert_msg(err.code == VIJP_EINVAL && err.msg[0], "'%s': error not recorded", bad[i]);
        /* A NULL error pointer is allowed and gives the same code. */
        ck_assert_int_eq(vijp_format_parse(bad[i], &f, NULL), VIJP_EINVAL);
    }
    vijp_error err = {0};
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse(NULL, &f, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_mpfr(&f, 1, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_format_mpfr(&f, VIJP_PREC_MAX + 1L, &err), VIJP_EINVAL);
}
END_TEST

/* An unknown name that another library, language or standard gives a
 * format vijp has (PyTorch's bf16, fp16, fp32; C's float, double; IEEE's
 * binary64, binary128; any case; in a mixed format or before a kernel
 * set) is refused with vijp's name for it; other unknown names get the list
 * alone, and no suggestion that would be refused in turn. */
START_TEST(test_parse_suggests)
{
    static const struct {
        const char *in, *meant;
    } cases[] = {
        {"bf16", "bfloat16"},        {"BF16", "bfloat16"},       {"bfloat", "bfloat16"},     {"fp16", "binary16"},
        {"f16", "binary16"},         {"half", "binary16"},       {"float16", "binary16"},    {"fp32", "binary32"},
        {"f32", "binary32"},         {"float", "binary32"},      {"single", "binary32"},     {"float32", "binary32"},
        {"fp64", "double"},          {"f64", "double"},          {"float64", "double"},      {"binary64", "double"},
        {"Double", "double"},        {"DOUBLE", "double"},       {"Binary32", "binary32"},   {"fp128", "mpfr:113"},
        {"binary128", "mpfr:113"},   {"quad", "mpfr:113"},       {"mpfr113", "mpfr:113"},    {"MPFR:113", "mpfr:113"},
        {"tf32", "tf32+binary32"},   {"tf32+fp32", "tf32+binary32"}, {"bf16+fp32", "bfloat16+binary32"},
        {"half+float", "binary16+binary32"}, {"fp32@avx2", "binary32@avx2"}, {"bf16+f32@ref", "bfloat16+binary32@ref"},
        {"fp64@cuda", "double@cuda"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vijp_format f;
        vijp_error err = {0};
        char want[64];
        snprintf(want, sizeof want, "did you mean %s?", cases[i].meant);
        ck_assert_int_eq(vijp_format_parse(cases[i].in, &f, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, want) && err.msg[strlen(err.msg) - 1] == ')', "'%s': want '%s' in a whole message: %s",
                      cases[i].in, want, err.msg);
        if (!strchr(cases[i].meant, '@')) /* a kernel set may be missing here (no GPU, no AVX-512) */
            ck_assert_msg(!vijp_format_parse(cases[i].meant, &f, NULL), "'%s' suggested, not a format", cases[i].meant);
    }
    /* no format by another name, or one whose suggestion would be refused */
    static const char *const none[] = {"float8", "foo", "mpfr", "", "bf16+", "+fp32", "bf16@avx2", "fp32@nope",
                                       "binary32+binary32", "bfloat16+double", "binary32 "};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        vijp_format f;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_format_parse(none[i], &f, &err), VIJP_EINVAL);
        ck_assert_msg(err.msg[0] && !strstr(err.msg, "did you mean"), "'%s': %s", none[i], err.msg);
    }
}
END_TEST

/* ------------------------------------------- binary32 against native float */

static float f_of_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t bits_of_f(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* sign, biased exponent field (0..255), 23-bit fraction */
static float mkf(uint32_t sign, uint32_t bexp, uint32_t frac)
{
    return f_of_bits((sign & 1u) << 31 | (bexp & 0xffu) << 23 | (frac & 0x7fffffu));
}

static uint32_t rbits(vijp_rng *r, int n) { return (uint32_t)(vijp_rng_u64(r) >> (64 - n)); }
static uint32_t rint_in(vijp_rng *r, uint32_t lo, uint32_t hi) /* [lo, hi] */
{
    return lo + (uint32_t)(vijp_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -1.0f, 2.0f, 0.5f, 3.0f, 1.5f,
    FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, /* largest subnormal */
    0x1p-75f, 0x1p64f, 0x1.000002p0f, 0x1.fffffep0f,
};

/* One operand, from a mix of classes. */
static float gen(vijp_rng *r)
{
    uint32_t s = rbits(r, 1);
    switch (rint_in(r, 0, 7)) {
    case 0: case 1: return f_of_bits(rbits(r, 32));                         /* any bit pattern, NaN included */
    case 2: return mkf(s, 0, rbits(r, 23));                                 /* subnormal (or zero) */
    case 3: return mkf(s, rint_in(r, 250, 254), rbits(r, 23));              /* near FLT_MAX */
    case 4: return specials[rint_in(r, 0, sizeof specials / sizeof *specials - 1)];
    case 5: return mkf(s, rint_in(r, 1, 12), rbits(r, 23));                 /* just above FLT_MIN */
    case 6: return mkf(s, rint_in(r, 127 - 3, 127 + 3), rbits(r, 23));      /* near 1 */
    default: return mkf(s, rint_in(r, 127 - 40, 127 + 40), rbits(r, 23));   /* moderate */
    }
}

/* a = ±m·2^E (m in [1, 2)), b = ±k·2^(E-24) with k odd: a ± b is halfway between
 * two neighbours of a (half an ulp of a is 2^(E-24)) whenever it stays in a's
 * binade; when not, it is an ordinary rounding case.  E may make b subnormal. */
static void gen_tie(vijp_rng *r, float *a, float *b)
{
    int E = (int)rint_in(r, 0, 9) == 0 ? (int)rint_in(r, -126, -100) : (int)rint_in(r, -60, 127);
    if (rint_in(r, 0, 3) == 0) E = (int)rint_in(r, 120, 127); /* tie that can overflow */
    uint32_t frac = rint_in(r, 0, 2) == 0 ? (rint_in(r, 0, 1) ? 0x7fffffu : 0) : rbits(r, 23);
    *a = mkf(rbits(r, 1), (uint32_t)(E + 127), frac);
    static const int ks[] = {1, 3, 5, 7, 1, 1, 3, 0xffff}; /* 0xffff: a longer odd k */
    int k = ks[rint_in(r, 0, 7)];
    *b = ldexpf((float)k, E - 24) * (rbits(r, 1) ? -1.0f : 1.0f);
    if (rbits(r, 1)) { float t = *a; *a = *b; *b = t; }
}

/* Factors whose exact product lies around the subnormal range [2^-150, 2^-120]:
 * that is where the result must be rounded at the subnormal granularity 2^-149. */
static void gen_tiny_product(vijp_rng *r, float *a, float *b)
{
    int ea = (int)rint_in(r, -126, 0);
    int target = (int)rint_in(r, -152, -122);
    int eb = target - ea; /* may fall below -126: then b is made subnormal below */
    if (eb < -149) eb = -149;
    if (eb > 127) eb = 127;
    *a = ldexpf(1.0f + (float)rbits(r, 23) * 0x1p-23f, ea) * (rbits(r, 1) ? -1.0f : 1.0f);
    /* Short significands sometimes, so that products are exact ties (see below). */
    float mb = rint_in(r, 0, 1) ? 1.0f + (float)rbits(r, 23) * 0x1p-23f : 1.0f + (float)rbits(r, 3) * 0.125f;
    *b = ldexpf(mb, eb) * (rbits(r, 1) ? -1.0f : 1.0f);
    if (rbits(r, 1)) { float t = *a; *a = *b; *b = t; }
}

/* Exact ties at the subnormal granularity: (k1·2^-1)·(k2·2^-149) = k1·k2·2^-150
 * with k1, k2 odd is an odd multiple of half the smallest subnormal 2^-149, so
 * round-to-nearest-even must decide; k1·k2 <= 2^23 keeps it in/near the
 * subnormal range. */
static void gen_subnormal_tie(vijp_rng *r, float *a, float *b)
{
    uint32_t k1 = 2 * rint_in(r, 0, 63) + 1, k2 = 2 * rint_in(r, 0, 32767) + 1;
    *a = (float)k1 * 0.5f * (rbits(r, 1) ? -1.0f : 1.0f);
    *b = ldexpf((float)k2, -149) * (rbits(r, 1) ? -1.0f : 1.0f);
}

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_SQRT, OP_FMA, N_OPS };
static const char *op_name[] = {"add", "sub", "mul", "div", "sqrt", "fma"};

typedef struct {
    vijp_format f;
    mpfr_t a, b, c, r;
    long n[N_OPS], fails;
    uint64_t seed;
} b32_ctx;

/* Compare the emulation with the native result; report the first few failures. */
static void check_one(b32_ctx *X, int op, float a, float b, float c)
{
    float native;
    mpfr_set_flt(X->a, a, MPFR_RNDN); /* exact: every float fits 24 bits */
    mpfr_set_flt(X->b, b, MPFR_RNDN);
    mpfr_set_flt(X->c, c, MPFR_RNDN);
    switch (op) {
    case OP_ADD: native = a + b; vo_add(X->r, X->a, X->b, &X->f); break;
    case OP_SUB: native = a - b; vo_sub(X->r, X->a, X->b, &X->f); break;
    case OP_MUL: native = a * b; vo_mul(X->r, X->a, X->b, &X->f); break;
    case OP_DIV: native = a / b; vo_div(X->r, X->a, X->b, &X->f); break;
    case OP_SQRT: native = sqrtf(a); vo_sqrt(X->r, X->a, &X->f); break;
    default: native = fmaf(a, b, c); vo_fma(X->r, X->a, X->b, X->c, &X->f); break;
    }
    /* The emulated value must already be a binary32 value, so this conversion
     * is exact; if it is not (say, subnormalize was skipped), mpfr_get_flt would
     * round a second time and could hide the error, hence the check below. */
    float emu = mpfr_get_flt(X->r, MPFR_RNDN);
    mpfr_set_flt(X->c, emu, MPFR_RNDN);
    int exact = mpfr_nan_p(X->r) ? isnan(emu) : mpfr_equal_p(X->c, X->r);
    X->n[op]++;
    /* NaN payloads and signs are not specified by IEEE 754 for most operations:
     * only "both NaN" is compared.  Everything else, the sign of zero included,
     * must match bit for bit. */
    int same = exact && ((isnan(native) && isnan(emu)) ||
                         (!isnan(native) && !isnan(emu) && bits_of_f(native) == bits_of_f(emu)));
    if (!same) {
        if (X->fails < 10) {
            if (op == OP_SQRT)
                fprintf(stderr, "binary32 %s(%a): native %a (0x%08x), emulated %a (0x%08x) [seed %llu]\n",
                        op_name[op], (double)a, (double)native, (unsigned)bits_of_f(native), (double)emu,
                        (unsigned)bits_of_f(emu), (unsigned long long)X->seed);
            else if (op == OP_FMA)
                fprintf(stderr, "binary32 %s(%a, %a, %a): native %a (0x%08x), emulated %a (0x%08x) [seed %llu]\n",
                        op_name[op], (double)a, (double)b, (double)c, (double)native, (unsigned)bits_of_f(native),
                        (double)emu, (unsigned)bits_of_f(emu), (unsigned long long)X->seed);
            else
                fprintf(stderr, "binary32 %s(%a, %a): native %a (0x%08x), emulated %a (0x%08x) [seed %llu]\n",
                        op_name[op], (double)a, (double)b, (double)native, (unsigned)bits_of_f(native),
                        (double)emu, (unsigned)bits_of_f(emu), (unsigned long long)X->seed);
        }
        if (X->fails < 10 && !exact)
            fprintf(stderr, "  (the emulated value %a is not a binary32 value)\n", mpfr_get_d(X->r, MPFR_RNDN));
        X->fails++;
    }
}

START_TEST(test_binary32_bitexact)
{
    b32_ctx X = {0};
    ck_assert_int_eq(vijp_format_parse("binary32", &X.f, NULL), 0);
    mpfr_inits2(24, X.a, X.b, X.c, X.r, (mpfr_ptr)0);
    X.seed = test_seed();
    vijp_rng rng;
    vijp_rng_seed(&rng, X.seed);
    mpfr_exp_t emin0 = mpfr_get_emin(), emax0 = mpfr_get_emax();

    /* Fixed cases first: the examples named in the design, each a classic trap. */
    static const float fixed2[][2] = {
        {1.0f, 0x1p-24f},  {1.0f, 0x3p-24f}, {1.0f, -0x1p-25f}, {-1.0f, -0x1p-24f}, /* ties at 1 */
        {0.0f, -0.0f},     {-0.0f, 0.0f},    {-0.0f, -0.0f},    {0.0f, 0.0f},       /* signed zeros */
        {FLT_MAX, 0x1p103f}, {FLT_MAX, 0x1p104f}, {FLT_MAX, FLT_MAX}, {-FLT_MAX, -0x1p104f}, /* overflow */
        {0x1p-149f, 0.5f}, {0x1p-149f, 1.5f}, {0x3p-149f, 0.5f}, {0x1p-149f, 0.75f},  /* subnormal ties */
        {0x1p-149f, -0.5f}, {FLT_MIN, 0x1p-23f}, {FLT_MIN, 0.999999940395f},
        {INFINITY, -INFINITY}, {INFINITY, 0.0f}, {-INFINITY, -0.0f}, {INFINITY, INFINITY},
        {1.0f, 3.0f}, {2.0f, 3.0f}, {0x1.fffffep0f, 0x1.fffffep0f}, {-0.0f, 1.0f}, {0.0f, -1.0f},
        {-2.0f, 0.0f}, {1e-45f, 1e38f}, {NAN, 1.0f},
    };
    for (size_t i = 0; i < sizeof fixed2 / sizeof *fixed2; i++)
        for (int op = OP_ADD; op <= OP_DIV; op++) {
            check_one(&X, op, fixed2[i][0], fixed2[i][1], 0.0f);
            check_one(&X, op, fixed2[i][1], fixed2[i][0], 0.0f);
        }
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) check_one(&X, OP_SQRT, specials[i], 0, 0);
    /* fma sign-of-zero rules: (+0·x) + (−0), x·y − x·y when x·y is exact, (−0)·(+x) + (+0). */
    check_one(&X, OP_FMA, 0.0f, 1.0f, -0.0f);
    check_one(&X, OP_FMA, -0.0f, 1.0f, -0.0f);
    check_one(&X, OP_FMA, -0.0f, 1.0f, 0.0f);
    check_one(&X, OP_FMA, 3.0f, 5.0f, -15.0f);
    check_one(&X, OP_FMA, -3.0f, 5.0f, 15.0f);
    check_one(&X, OP_FMA, INFINITY, 0.0f, 1.0f);
    check_one(&X, OP_FMA, FLT_MAX, 2.0f, -FLT_MAX);   /* intermediate product beyond FLT_MAX: exact fma is FLT_MAX */
    check_one(&X, OP_FMA, 0x1p-100f, 0x1p-60f, 0.0f); /* product 2^-160 rounds to 0 */
    check_one(&X, OP_FMA, 0x1p-100f, 0x1p-50f, -0.0f); /* 2^-150: tie, rounds to +0 */

    /* Random cases.  Per operation: 1/3 generic operands, the rest targeted.
     * base 30000 for the binary ops and fma, 15000 for sqrt: 165000 in all. */
    long n_bin = test_iters(30000), n_sqrt = test_iters(15000);
    for (long i = 0; i < n_bin; i++) {
        float a, b, c;
        int kind = (int)rint_in(&rng, 0, 5);
        /* add / sub */
        if (kind <= 1) a = gen(&rng), b = gen(&rng);
        else if (kind <= 3) gen_tie(&rng, &a, &b);
        else if (kind == 4) a = gen(&rng), b = rbits(&rng, 1) ? a : -a; /* x − x = +0, x + (−x) = +0 */
        else a = gen(&rng), b = mkf(rbits(&rng, 1), 0, rbits(&rng, 23)); /* with a subnormal */
        check_one(&X, OP_ADD, a, b, 0);
        check_one(&X, OP_SUB, a, b, 0);
        check_one(&X, OP_SUB, b, a, 0);

        /* mul */
        kind = (int)rint_in(&rng, 0, 5);
        if (kind <= 1) a = gen(&rng), b = gen(&rng);
        else if (kind <= 3) gen_tiny_product(&rng, &a, &b);
        else if (kind == 4) gen_subnormal_tie(&rng, &a, &b);
        else a = mkf(rbits(&rng, 1), rint_in(&rng, 190, 254), rbits(&rng, 23)),
             b = mkf(rbits(&rng, 1), rint_in(&rng, 64, 140), rbits(&rng, 23)); /* overflow or near it */
        check_one(&X, OP_MUL, a, b, 0);

        /* div: generic, quotients into the subnormal range, and overflow */
        kind = (int)rint_in(&rng, 0, 3);
        if (kind <= 1) a = gen(&rng), b = gen(&rng);
        else if (kind == 2) a = mkf(rbits(&rng, 1), rint_in(&rng, 1, 40), rbits(&rng, 23)),
                            b = mkf(rbits(&rng, 1), rint_in(&rng, 127, 160), rbits(&rng, 23));
        else a = mkf(rbits(&rng, 1), rint_in(&rng, 200, 254), rbits(&rng, 23)),
             b = mkf(rbits(&rng, 1), rint_in(&rng, 0, 127), rbits(&rng, 23));
        check_one(&X, OP_DIV, a, b, 0);

        /* fma */
        kind = (int)rint_in(&rng, 0, 4);
        if (kind <= 1) a = gen(&rng), b = gen(&rng), c = gen(&rng);
        else if (kind == 2) a = gen(&rng), b = gen(&rng), c = -(a * b); /* c cancels the rounded product:
                                                                           the result is its rounding error */
        else if (kind == 3) gen_tiny_product(&rng, &a, &b), c = mkf(rbits(&rng, 1), 0, rbits(&rng, 23));
        else {
            /* a·b + c with c half an ulp of a·b's neighbourhood away: near-ties the
             * separate rounding of a·b would get wrong (double rounding). */
            gen_tie(&rng, &a, &c);
            b = 1.0f + (float)rbits(&rng, 2) * 0x1p-23f;
        }
        check_one(&X, OP_FMA, a, b, c);
    }
    for (long i = 0; i < n_sqrt; i++) {
        float a;
        switch (rint_in(&rng, 0, 3)) {
        case 0: a = gen(&rng); break;                                          /* negatives give NaN */
        case 1: a = mkf(0, 0, rbits(&rng, 23)); break;                         /* subnormal */
        case 2: a = mkf(0, rint_in(&rng, 1, 254), rbits(&rng, 23)); break;     /* any positive normal */
        default: { float q = mkf(0, rint_in(&rng, 64, 190), rbits(&rng, 12)); a = q * q; } /* exact squares */
        }
        check_one(&X, OP_SQRT, a, 0, 0);
    }

    /* The emulation must leave MPFR's (per-thread) exponent range as it found it. */
    ck_assert(mpfr_get_emin() == emin0 && mpfr_get_emax() == emax0);
    long total = 0;
    for (int op = 0; op < N_OPS; op++) total += X.n[op];
    mpfr_clears(X.a, X.b, X.c, X.r, (mpfr_ptr)0);
    ck_assert_msg(X.fails == 0, "binary32 emulation differs from native float in %ld of %ld operations "
                                "(seed %llu; first cases on stderr)", X.fails, total, (unsigned long long)X.seed);
    /* 5·30000 + 15000 random operations at scale 1, plus the fixed ones. */
    ck_assert_msg(total >= test_iters(100000), "only %ld operations", total);
}
END_TEST

/* ----------------------------------------- binary16 and bfloat16: exact facts */

typedef struct {
    vijp_format f;
    mpfr_t a, b, r;
} small_ctx;

static void small_init(small_ctx *X, const char *name)
{
    ck_assert_int_eq(vijp_format_parse(name, &X->f, NULL), 0);
    /* Operands at 64 bits so the inputs below are exact before the format rounds. */
    mpfr_inits2(64, X->a, X->b, (mpfr_ptr)0);
    mpfr_init2(X->r, X->f.prec);
}

static void small_clear(small_ctx *X) { mpfr_clears(X->a, X->b, X->r, (mpfr_ptr)0); }

/* r = fmt(x) via vo_set_d; must equal want (a double; ±INFINITY allowed). */
static void expect_set(small_ctx *X, double x, double want, const char *why)
{
    vo_set_d(X->r, x, &X->f);
    double got = mpfr_get_d(X->r, MPFR_RNDN); /* exact: prec <= 11 and in double range */
    ck_assert_msg(got == want && signbit(got) == signbit(want), "%s: round(%a) = %a, want %a (%s)", X->f.name, x,
                  got, want, why);
}

/* r = fmt(x op y) for op in "+*" with exact double inputs. */
static void expect_op(small_ctx *X, char op, double x, double y, double want, const char *why)
{
    mpfr_set_d(X->a, x, MPFR_RNDN);
    mpfr_set_d(X->b, y, MPFR_RNDN);
    if (op == '+') vo_add(X->r, X->a, X->b, &X->f);
    else vo_mul(X->r, X->a, X->b, &X->f);
    double got = mpfr_get_d(X->r, MPFR_RNDN);
    ck_assert_msg(got == want && signbit(got) == signbit(want), "%s: %a %c %a = %a, want %a (%s)", X->f.name, x, op,
                  y, got, want, why);
}

START_TEST(test_binary16_facts)
{
    small_ctx X;
    small_init(&X, "binary16");
    /* binary16: p = 11, normal exponents -14..15, so
     *   max finite (2 − 2^-10)·2^15 = 65504, ulp in [2^15, 2^16) = 2^(15-10) = 32;
     *   smallest normal 2^-14, subnormals k·2^-24 (k = 1..1023). */
    expect_set(&X, 65504, 65504, "max finite is exact");
    /* 65504 + 8 = 65512 lies 8 above 65504 and 24 below 65536: down to 65504. */
    expect_op(&X, '+', 65504, 8, 65504, "below the midpoint");
    /* 65504 + 15 = 65519 < 65520 (the midpoint): still 65504. */
    expect_op(&X, '+', 65504, 15, 65504, "just below the midpoint");
    /* 65504 + 16 = 65520 is halfway between 65504 = 2047·32 (odd) and
     * 65536 = 2^16 (even significand 1.000…): ties-to-even picks 2^16, which
     * exceeds the format, so the IEEE result is +inf (not 65504). */
    expect_op(&X, '+', 65504, 16, INFINITY, "tie to even overflows");
    expect_op(&X, '+', -65504, -16, -INFINITY, "tie to even overflows, negative");
    expect_op(&X, '*', 256, 256, INFINITY, "2^16 overflows");
    expect_set(&X, 65536, INFINITY, "2^16 overflows");
    expect_set(&X, 0x1p-14, 0x1p-14, "smallest normal");
    expect_set(&X, 0x1p-24, 0x1p-24, "smallest subnormal 2^-24 is exact");
    /* 2^-25 is halfway between 0 (even) and 2^-24 (odd, k = 1): 0, sign kept. */
    expect_set(&X, 0x1p-25, 0.0, "tie to even at the bottom");
    expect_set(&X, -0x1p-25, -0.0, "tie to even at the bottom keeps the sign");
    /* 3·2^-26 = 0.75·2^-24: nearer to 2^-24 than to 0. */
    expect_set(&X, 0x3p-26, 0x1p-24, "above the bottom midpoint");
    /* Inside the subnormal range the granularity is 2^-24, although an 11-bit
     * MPFR number with an exponent in range could hold more: these catch a
     * missing mpfr_subnormalize (without it each would come back unchanged).
     *   3·2^-25 = 1.5·2^-24: tie between k = 1 (odd) and k = 2 (even) -> 2^-23.
     *   5·2^-25 = 2.5·2^-24: tie between k = 2 (even) and k = 3 -> 2^-23.
     *   (1 + 2^-10)·2^-20 = (16 + 2^-6)·2^-24 -> k = 16 -> 2^-20.
     *   1023.5·2^-24 (just under 2^-14): tie between 1023 (odd) and 1024 (even) -> 2^-14. */
    expect_set(&X, 0x3p-25, 0x1p-23, "subnormal tie, up to even");
    expect_set(&X, 0x5p-25, 0x1p-23, "subnormal tie, down to even");
    expect_set(&X, 0x1.004p-20, 0x1p-20, "subnormal granularity 2^-24");
    expect_set(&X, 1023.5 * 0x1p-24, 0x1p-14, "largest subnormal tie rounds to the smallest normal");
    expect_op(&X, '*', 0x1p-24, 2.5, 0x1p-23, "subnormal product tie to even");
    expect_op(&X, '*', 0x1p-24, 3.5, 0x1p-22, "subnormal product tie to even (k = 4)");
    expect_op(&X, '+', 0x1p-14, -0x1.004p-20, 0x1.f8p-15, "2^-14 − (16 + 2^-6)·2^-24 = 1007.984375·2^-24 -> 1008·2^-24");
    /* No double rounding: (2.5 + 2^-12)·2^-24 is first rounded to 11 bits as
     * 2.5·2^-24 (a tie), but it lies above the midpoint, so the answer is
     * 3·2^-24; rounding the rounded value again would give 2·2^-24. */
    expect_set(&X, (2.5 + 0x1p-12) * 0x1p-24, 0x3p-24, "no double rounding");
    /* Normal range: 1 + 2^-11 is a tie (ulp 2^-10), 1 is even -> 1;
     * 1 + 3·2^-11 = 1 + 1.5·2^-10: tie between 1 + 2^-10 (odd) and 1 + 2^-9 -> 1 + 2^-9. */
    expect_op(&X, '+', 1, 0x1p-11, 1, "tie at 1");
    expect_op(&X, '+', 1, 0x3p-11, 1 + 0x1p-9, "tie at 1 + ulp");
    small_clear(&X);
}
END_TEST

START_TEST(test_bfloat16_facts)
{
    small_ctx X;
    small_init(&X, "bfloat16");
    /* bfloat16: p = 8, binary32's exponents (-126..127), so ulp(1) = 2^-7,
     * max finite (2 − 2^-7)·2^127, smallest normal 2^-126, subnormals
     * k·2^-133 (k = 1..127). */
    /* 1 + 2^-8: halfway between 1 (even) and 1 + 2^-7 (odd) -> 1. */
    expect_op(&X, '+', 1, 0x1p-8, 1, "tie to even at 1");
    /* 1 + 3·2^-9 = 1 + 0.75·2^-7: nearer to 1 + 2^-7. */
    expect_op(&X, '+', 1, 0x3p-9, 1 + 0x1p-7, "above the midpoint");
    /* 1 + 3·2^-8 = 1 + 1.5·2^-7: tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even). */
    expect_op(&X, '+', 1, 0x3p-8, 1 + 0x1p-6, "tie to even, up");
    double maxf = (2 - 0x1p-7) * 0x1p127;
    expect_set(&X, maxf, maxf, "max finite is exact");
    /* ulp at the top is 2^(127-7) = 2^120; + 2^119 is a tie with an odd
     * significand below, so it goes up to 2^128: overflow. + 2^118 stays. */
    expect_op(&X, '+', maxf, 0x1p119, INFINITY, "tie to even overflows");
    expect_op(&X, '+', maxf, 0x1p118, maxf, "below the midpoint");
    /* FLT_MAX = (2 − 2^-23)·2^127 is above that midpoint: inf in bfloat16. */
    expect_set(&X, FLT_MAX, INFINITY, "binary32's max overflows bfloat16");
    expect_set(&X, 0x1p-126, 0x1p-126, "smallest normal, as binary32");
    expect_set(&X, 0x1p-133, 0x1p-133, "smallest subnormal is exact");
    expect_set(&X, 0x1p-134, 0.0, "half the smallest subnormal: tie to 0");
    expect_set(&X, 0x3p-135, 0x1p-133, "0.75·2^-133 -> 2^-133");
    /* Inside the subnormal range (granularity 2^-133) — a missing subnormalize
     * would leave these unchanged:
     *   1.5·2^-133: tie between k = 1 and k = 2 (even) -> 2^-132;
     *   (1 + 2^-7)·2^-130 = (8 + 2^-4)·2^-133 -> 8·2^-133 = 2^-130;
     *   binary32's smallest subnormal 2^-149 -> 0 (far below 2^-134). */
    expect_set(&X, 0x3p-134, 0x1p-132, "subnormal tie to even");
    expect_set(&X, 0x1.02p-130, 0x1p-130, "subnormal granularity 2^-133");
    expect_set(&X, 0x1p-149, 0.0, "binary32's smallest subnormal underflows");
    expect_op(&X, '*', 0x1p-70, 0x1.02p-60, 0x1p-130, "product rounded at the subnormal granularity");
    small_clear(&X);
}
END_TEST

/* vijp_mat_convert from doubles into plain mpfr:P (vijp_emu_set1: the
 * significand written directly where it fits): mpfr_set_d's value and sign,
 * zeros' signs, subnormals, extremes, NaN and Inf included, at one limb and
 * at several, and rounded where P < 53. */
START_TEST(test_convert_double_exact)
{
    const double special[] = {0.0, -0.0, 1.0, -1.5, 0x1p-1074, -0x1.8p-1070, 0x1.fffffffffffffp-1023, DBL_MIN,
                              DBL_MAX, -DBL_MAX, 0x1.123456789abcdp+700, INFINITY, -INFINITY, NAN};
    const long precs[] = {24, 53, 64, 65, 106, 170, 300}; /* 24: rounded, through mpfr_set_d */
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_rng g;
    vijp_rng_seed(&g, 5);
    size_t n = sizeof special / sizeof *special + 200;
    vijp_mat D;
    vijp_mat_init(&D, n, 1, &fd);
    for (size_t i = 0; i < n; i++) {
        if (i < sizeof special / sizeof *special) D.d[i] = special[i];
        else { /* random bits: every binade, subnormals, NaN payloads and all */
            uint64_t b = vijp_rng_u64(&g);
            memcpy(&D.d[i], &b, sizeof b);
        }
    }
    for (size_t k = 0; k < sizeof precs / sizeof *precs; k++) {
        vijp_format f;
        ck_assert(vijp_format_mpfr(&f, precs[k], NULL) == 0);
        vijp_mat M;
        vijp_mat_init(&M, n, 1, &f);
        vijp_mat_convert(&M, &D);
        mpfr_t want;
        mpfr_init2(want, precs[k]);
        for (size_t i = 0; i < n; i++) {
            mpfr_set_d(want, D.d[i], MPFR_RNDN);
            int same = mpfr_nan_p(want) ? mpfr_nan_p(M.m[i])
                                        : mpfr_equal_p(want, M.m[i]) && mpfr_signbit(want) == mpfr_signbit(M.m[i]);
            ck_assert_msg(same, "mpfr:%ld, entry %zu (%a)", precs[k], i, D.d[i]);
            if (mpfr_regular_p(M.m[i])) /* a valid MPFR value: bits below the precision clear */
                ck_assert(mpfr_prec_round(M.m[i], precs[k], MPFR_RNDN) == 0 && mpfr_equal_p(want, M.m[i]));
        }
        mpfr_clear(want);
        vijp_mat_clear(&M);
    }
    /* outside MPFR's current exponent range (emin −100, this test's
     * process only): mpfr_set_d's underflow, not an out-of-range value */
    mpfr_exp_t emin = mpfr_get_emin();
    ck_assert(mpfr_set_emin(-100) == 0);
    vijp_format f53;
    ck_assert(vijp_format_mpfr(&f53, 53, NULL) == 0);
    vijp_mat M;
    vijp_mat_init(&M, 2, 1, &f53);
    D.d[0] = 0x1.8p-200, D.d[1] = -0x1p-101;
    D.rows = 2;
    vijp_mat_convert(&M, &D);
    mpfr_t want;
    mpfr_init2(want, 53);
    for (size_t i = 0; i < 2; i++) {
        mpfr_set_d(want, D.d[i], MPFR_RNDN);
        ck_assert_msg(mpfr_equal_p(want, M.m[i]) || (mpfr_zero_p(want) && mpfr_zero_p(M.m[i])), "entry %zu", i);
    }
    mpfr_clear(want);
    vijp_mat_clear(&M);
    ck_assert(mpfr_set_emin(emin) == 0);
    D.rows = n;
    vijp_mat_clear(&D);
}
END_TEST

Suite *suite_format(void)
{
    Suite *s = suite_create("format");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_parse_known);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_parse_suggests);
    suite_add_tcase(s, tc);
    tc = tcase_create("emulation");
    tcase_set_timeout(tc, 60); /* ~0.1 s at scale 1; room for VIJP_TEST_SCALE and sanitizers */
    tcase_add_test(tc, test_binary32_bitexact);
    tcase_add_test(tc, test_binary16_facts);
    tcase_add_test(tc, test_bfloat16_facts);
    tcase_add_test(tc, test_convert_double_exact);
    suite_add_tcase(s, tc);
    return s;
}

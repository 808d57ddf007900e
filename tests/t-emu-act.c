/* src/emu/elementary.h and src/emu/activations.h against the MPFR oracles
 * (src/format/arith.c, oracles/activations.c), bit for bit: the same number,
 * the same sign of zero, NaN where the oracle gives NaN.  No tolerance: the
 * claim is equality (Ziv's rounding test certifies each elementary result,
 * elementary.c; the activations repeat the oracles' operation sequences).
 * bfloat16 and binary16 are checked exhaustively (every bit pattern),
 * binary32 and the mixed formats on random values of their grids plus
 * special and hard-to-round inputs. */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "oracles/oracles.h"
#include "emu/elementary.h"
#include "emu/activations.h"
#include "kernels/kernels.h"
#include <float.h>
#include <stdio.h>
#include <string.h>

/* The 16-bit sweeps take every input in the plain build (make check) and
 * every 7th under AddressSanitizer, which slows the MPFR oracle tenfold
 * (make check SANITIZE=1 checks memory, the plain run the numbers). */
#if defined(__SANITIZE_ADDRESS__)
#define SWEEP_STEP 7
#else
#define SWEEP_STEP 1
#endif

static void (*const oracle_fn[VIJP_EMU_FN_COUNT])(mpfr_t, const mpfr_t, const vijp_format *) = {
    [VIJP_EMU_EXP] = vo_exp,     [VIJP_EMU_EXPM1] = vo_expm1, [VIJP_EMU_LOG] = vo_log,
    [VIJP_EMU_LOG1P] = vo_log1p, [VIJP_EMU_TANH] = vo_tanh,   [VIJP_EMU_SECH] = vo_sech,
    [VIJP_EMU_ERFC] = vo_erfc,   [VIJP_EMU_ATANH] = vo_atanh,
};
static const char *const fn_name[VIJP_EMU_FN_COUNT] = {"exp", "expm1", "log", "log1p", "tanh", "sech", "erfc", "atanh"};

static int same(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

static vijp_format format(const char *name)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse(name, &f, NULL), 0);
    ck_assert(vijp_emu_applies(&f));
    return f;
}

/* Value of a 16-bit pattern: bfloat16 is binary32's upper half; binary16
 * 1 + 5 + 10 bits, bias 15. */
static double decode16(const char *fmt, unsigned b)
{
    if (!strcmp(fmt, "bfloat16")) {
        uint32_t u = (uint32_t)b << 16;
        float x;
        memcpy(&x, &u, sizeof x);
        return x;
    }
    int e = (int)(b >> 10) & 31, m = (int)(b & 1023);
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (b & 0x8000) ? -v : v;
}

/* One elementary function at x: emu against vo_fn; counts fallbacks. */
static void check_elem(vijp_emu_fn fn, double x, const vijp_format *f, mpfr_t a, mpfr_t r, long *fallbacks)
{
    int fell;
    double got = vijp_emu_elem(fn, x, f, VIJP_EMU_ZIV_MARGIN, &fell);
    mpfr_set_d(a, x, MPFR_RNDN); /* exact: x on f's grid */
    oracle_fn[fn](r, a, f);
    double want = mpfr_get_d(r, MPFR_RNDN);
    ck_assert_msg(same(got, want), "%s(%a) in %s: oracle %a, emu %a", fn_name[fn], x, f->name, want, got);
    *fallbacks += fell;
}

START_TEST(elementary_exhaustive_16bit)
{
    static const char *const fmts[] = {"bfloat16", "binary16"};
    for (size_t k = 0; k < 2; k++) {
        vijp_format f = format(fmts[k]);
        mpfr_t a, r;
        mpfr_inits2(f.prec, a, r, (mpfr_ptr)0);
        long fallbacks = 0;
        for (unsigned b = 0; b < 65536; b += SWEEP_STEP)
            for (int fn = 0; fn < VIJP_EMU_FN_COUNT; fn++) check_elem(fn, decode16(fmts[k], b), &f, a, r, &fallbacks);
        printf("emu_act: %s, %u inputs x %d functions: %ld MPFR fallbacks\n", fmts[k], (65536 + SWEEP_STEP - 1) / SWEEP_STEP, VIJP_EMU_FN_COUNT, fallbacks);
        mpfr_clears(a, r, (mpfr_ptr)0);
    }
}
END_TEST

/* Inputs where binary32's results come within the margin of a midpoint of
 * its grid, found by scanning every binary32 input against the oracle
 * (glibc 2.36: exp 55 such inputs, expm1 45, log 191, log1p 132, tanh 20,
 * sech 26, erfc 41, atanh 14):
 * the rounding test must fall back there.  All but the first are inputs
 * where rounding glibc's value directly (margin 0) is wrong: a test that
 * fails when the margin is broken. */
static const struct {
    vijp_emu_fn fn;
    double x;
} hard32[] = {
    {VIJP_EMU_LOG1P, 0x1p-24},          /* 2^-24 − 2^-49 + 2^-72/3: 10.7 double ulps above a midpoint */
    {VIJP_EMU_ERFC, -0x1.d93ec4p-17},   /* glibc's value rounds to 0x1.00010cp0, the exact one to …0ap0 */
    {VIJP_EMU_LOG1P, 0x1.800006p-21},   /* likewise 0x1.7ffffcp-21, not …fep-21 */
    {VIJP_EMU_LOG1P, 0x1.fb035ap-2},    /* 0x1.9bddc4p-2, not …c2p-2 */
    {VIJP_EMU_LOG1P, 0x1.0f1fd6p+3},    /* 0x1.1fcbdp+1, not 0x1.1fcbcep+1 */
    {VIJP_EMU_LOG1P, 0x1.6351d8p+95},   /* 0x1.08b51p+6, not 0x1.08b512p+6 */
    {VIJP_EMU_LOG, 0x1.827a74p-7},      /* -0x1.1c2b2p+2, not -0x1.1c2b1ep+2 */
    {VIJP_EMU_LOG, 0x1.bacb4ap+25},     /* 0x1.1e0694p+4, not …96p+4 */
};

static const double specials[] = {
    0.0, -0.0, 0x1p-149, -0x1p-149, 0x1.fffffcp-127, 0x1p-126, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN,
    1, -1, 0x1.fffffep-1, -0x1.fffffep-1, 0x1.000002p0, 0x1p-24, 0x1p-25, -0x1p-24,
    0x1.62e42ep6, 0x1.62e430p6, 0x1.62e432p6,    /* exp's overflow threshold, log(2^128) = 88.7228… */
    -0x1.9fe368p6, -0x1.9fe36ap6, -0x1.9d1da0p6, /* exp below binary32's half smallest subnormal (−103.97…) */
    -0x1.5d589ep6, -0x1.5d58a0p6,                /* exp at the smallest normal, log(2^-126) = −87.336… */
    0x1.41bbcep3, 0x1.41bbd0p3, 0x1.3e3e86p3,    /* erfc near its underflow (x ≈ 10.05) */
    0x1.0a2b24p3, 0x1.205966p3,                  /* tanh rounding to 1 (x ≈ 8.3, 9.0) */
};

START_TEST(elementary_binary32)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 31);
    vijp_format f = format("binary32");
    mpfr_t a, r;
    mpfr_inits2(f.prec, a, r, (mpfr_ptr)0);
    long fallbacks = 0, n = test_iters(30000);
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
        for (int fn = 0; fn < VIJP_EMU_FN_COUNT; fn++) check_elem(fn, (float)specials[i], &f, a, r, &fallbacks);
    long hard_fallbacks = 0;
    for (size_t i = 0; i < sizeof hard32 / sizeof *hard32; i++) check_elem(hard32[i].fn, hard32[i].x, &f, a, r, &hard_fallbacks);
    ck_assert_msg(hard_fallbacks == (long)(sizeof hard32 / sizeof *hard32), "the hard cases must fall back to MPFR");
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)vijp_rng_u64(&rng);
        float x;
        memcpy(&x, &u, sizeof x); /* uniform over bit patterns: every binade, subnormals, Inf, NaN */
        if (i % 2) x = (float)ldexp(vijp_rng_uniform(&rng) - 0.5, (int)(u % 16) - 8); /* where the functions vary */
        for (int fn = 0; fn < VIJP_EMU_FN_COUNT; fn++) check_elem(fn, x, &f, a, r, &fallbacks);
    }
    printf("emu_act: binary32, %ld random + %zu special inputs x %d functions: %ld MPFR fallbacks; %zu hard cases\n",
           n, sizeof specials / sizeof *specials, VIJP_EMU_FN_COUNT, fallbacks, sizeof hard32 / sizeof *hard32);
    mpfr_clears(a, r, (mpfr_ptr)0);
}
END_TEST

/* The fallback itself: with a margin of 2^-10 (far too wide: most results
 * fall back) every result must still be the oracle's. */
START_TEST(elementary_fallback_path)
{
    static const char *const fmts[] = {"binary32", "bfloat16", "binary16"};
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 32);
    long n = test_iters(3000), fallbacks = 0;
    for (size_t k = 0; k < 3; k++) {
        vijp_format f = format(fmts[k]);
        vijp_emu_grid g = vijp_emu_arith(&f);
        mpfr_t a, r;
        mpfr_inits2(f.prec, a, r, (mpfr_ptr)0);
        for (long i = 0; i < n; i++) {
            double x = vijp_emu_round(ldexp(vijp_rng_uniform(&rng) - 0.5, (int)(vijp_rng_u64(&rng) % 12) - 6), g);
            for (int fn = 0; fn < VIJP_EMU_FN_COUNT; fn++) {
                int fell;
                double got = vijp_emu_elem(fn, x, &f, -10, &fell);
                mpfr_set_d(a, x, MPFR_RNDN), oracle_fn[fn](r, a, &f);
                ck_assert_msg(same(got, mpfr_get_d(r, MPFR_RNDN)), "fallback %s(%a) in %s", fn_name[fn], x, fmts[k]);
                fallbacks += fell;
            }
        }
        mpfr_clears(a, r, (mpfr_ptr)0);
    }
    ck_assert_msg(fallbacks > n, "a 2^-10 margin should send many results to MPFR (%ld)", fallbacks);
}
END_TEST

/* ---- the activations: f and f′ against vo_activation_pair, and the layer operators ---- */

static void check_pair(int kind, double x, const vijp_format *f, mpfr_t a, mpfr_t fx, mpfr_t dfx)
{
    double gf, gd;
    vijp_emu_act_pair(kind, x, f, &gf, &gd);
    mpfr_set_d(a, x, MPFR_RNDN);
    vo_activation_pair(vijp_kact_names[kind], fx, dfx, a, f);
    double wf = mpfr_get_d(fx, MPFR_RNDN), wd = mpfr_get_d(dfx, MPFR_RNDN);
    ck_assert_msg(same(gf, wf) && same(gd, wd), "%s(%a) in %s: oracle f %a f' %a, emu f %a f' %a",
                  vijp_kact_names[kind], x, f->name, wf, wd, gf, gd);
}

START_TEST(activations_exhaustive_16bit)
{
    static const char *const fmts[] = {"bfloat16", "binary16"};
    for (size_t k = 0; k < 2; k++) {
        vijp_format f = format(fmts[k]);
        mpfr_t a, fx, dfx;
        mpfr_inits2(f.prec, a, fx, dfx, (mpfr_ptr)0);
        for (unsigned b = 0; b < 65536; b += SWEEP_STEP)
            for (int kind = 0; kind < VIJP_KACT_COUNT; kind++) check_pair(kind, decode16(fmts[k], b), &f, a, fx, dfx);
        mpfr_clears(a, fx, dfx, (mpfr_ptr)0);
    }
}
END_TEST

/* binary32 and the mixed formats: inputs are values of the storage grid
 * (what a mixed format's layer receives), random over the activations'
 * interesting range and all binades, plus the specials. */
START_TEST(activations_random)
{
    static const char *const fmts[] = {"binary32", "bfloat16+binary32", "binary16+binary32", "tf32+binary32"};
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 34);
    long n = test_iters(5000);
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        vijp_format f = format(fmts[k]);
        vijp_emu_grid st = vijp_emu_store(&f);
        mpfr_t a, fx, dfx;
        mpfr_inits2(f.prec, a, fx, dfx, (mpfr_ptr)0);
        for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
            for (int kind = 0; kind < VIJP_KACT_COUNT; kind++)
                check_pair(kind, vijp_emu_round(specials[i], st), &f, a, fx, dfx);
        for (long i = 0; i < n; i++) {
            uint64_t u = vijp_rng_u64(&rng);
            double x = i % 4 ? ldexp(vijp_rng_uniform(&rng) - 0.5, (int)(u % 12) - 4)
                             : ldexp(vijp_rng_uniform(&rng) + 0.5, (int)(u % 280) - 150) * ((u >> 20) & 1 ? -1 : 1);
            x = vijp_emu_round(x, st);
            for (int kind = 0; kind < VIJP_KACT_COUNT; kind++) check_pair(kind, x, &f, a, fx, dfx);
        }
        mpfr_clears(a, fx, dfx, (mpfr_ptr)0);
    }
}
END_TEST

/* The layer operators (forward, jvp, vijp, jacobian, inverse) through the
 * layer types' MPFR tables against the oracles' own operators, on a batch
 * that includes the inverses' and vijp's refusals. */
START_TEST(layer_operators_match_oracle)
{
    static const char *const fmts[] = {"bfloat16", "binary32", "bfloat16+binary32", "e4m3+binary32", "mxfp8+binary32"};
    static const vijp_ops_mp oracle_ops[VIJP_KACT_COUNT] = { /* the VIJP_KACT_* order */
        VO_ACT_OPS_MP(sigmoid, vo_sigmoid_inverse), VO_ACT_OPS_MP(softplus, vo_softplus_inverse),
        {.forward = vo_tanh_forward, .jvp = vo_tanh_jvp, .vjp = vo_tanh_jvp, .vijp = vo_tanh_vijp,
         .jacobian = vo_tanh_jacobian, .inverse = vo_tanh_inverse},
        VO_ACT_OPS_MP(silu, NULL), VO_ACT_OPS_MP(gelu, NULL), VO_ACT_OPS_MP(mish, NULL)};
    const char *const *acts = vijp_kact_names;
    enum { W = 8, B = 3, N = W * B };
    const double xs[N] = {-3, -1.5, -0.75, -0.25, 0, 0.125, 0.5, 1, 2, 5, 9, -9, 0.99, -0.99, 1.5, 30, -120,
                          0x1p-130, -0x1p-126, 0.3, -0.6, 7, -7, 0.01};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        vijp_format f = format(fmts[k]);
        vijp_emu_grid st = vijp_emu_store(&f);
        for (int ai = 0; ai < VIJP_KACT_COUNT; ai++) {
            vijp_layer L;
            ck_assert_int_eq(vijp_layer_parse(&L, acts[ai], W, NULL), 0);
            const vijp_ops_mp *ops = L.type->mp, *vo = &oracle_ops[ai];
            mpfr_t *X = vo_vec_new(N, &f), *U = vo_vec_new(N, &f), *e = vo_vec_new(N, &f), *o = vo_vec_new(N, &f);
            mpfr_t *Je = vo_vec_new(W * W, &f), *Jo = vo_vec_new(W * W, &f);
            for (int i = 0; i < N; i++) mpfr_set_d(X[i], vijp_emu_round(xs[i], st), MPFR_RNDN);
            for (int i = 0; i < N; i++) mpfr_set_d(U[i], vijp_emu_round(1.25 - 0.1 * i, st), MPFR_RNDN);
#define SAME_VEC(n, what)                                                                                     \
    for (int i = 0; i < (n); i++)                                                                             \
        ck_assert_msg(same(mpfr_get_d(e[i], MPFR_RNDN), mpfr_get_d(o[i], MPFR_RNDN)), "%s %s in %s, unit %d", \
                      acts[ai], what, fmts[k], i);
            ops->forward(&L, NULL, X, B, e, &f), vo->forward(&L, NULL, X, B, o, &f);
            SAME_VEC(N, "forward")
            ops->jvp(&L, NULL, X, B, U, e, &f), vo->jvp(&L, NULL, X, B, U, o, &f);
            SAME_VEC(N, "jvp")
            int re = ops->vijp(&L, NULL, X, B, U, NULL, e, &f), ro = vo->vijp(&L, NULL, X, B, U, NULL, o, &f);
            ck_assert_int_eq(re, ro);
            SAME_VEC(N, "vijp")
            ops->jacobian(&L, NULL, X, Je, &f), vo->jacobian(&L, NULL, X, Jo, &f);
            for (int i = 0; i < W * W; i++)
                ck_assert(same(mpfr_get_d(Je[i], MPFR_RNDN), mpfr_get_d(Jo[i], MPFR_RNDN)));
            if (ops->inverse) {
                ops->forward(&L, NULL, X, B, U, &f); /* outputs, including 0 and 1 where refused */
                re = ops->inverse(&L, NULL, U, B, e, &f), ro = vo->inverse(&L, NULL, U, B, o, &f);
                ck_assert_int_eq(re, ro);
                SAME_VEC(N, "inverse")
                re = ops->inverse(&L, NULL, X, B, e, &f), ro = vo->inverse(&L, NULL, X, B, o, &f);
                ck_assert_int_eq(re, ro);
                SAME_VEC(N, "inverse of the inputs")
            }
#undef SAME_VEC
            vo_vec_free(X, N), vo_vec_free(U, N), vo_vec_free(e, N), vo_vec_free(o, N);
            vo_vec_free(Je, W * W), vo_vec_free(Jo, W * W);
            vijp_layer_clear(&L);
        }
    }
}
END_TEST

/* vo_const_pi in every format is M_PI rounded once (activations.c). */
START_TEST(pi_rounded_once)
{
    static const char *const fmts[] = {"binary32", "binary16", "bfloat16", "bfloat16+binary32", "tf32+binary32"};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        vijp_format f = format(fmts[k]);
        mpfr_t p;
        mpfr_init2(p, f.prec);
        vo_const_pi(p, &f);
        ck_assert(mpfr_get_d(p, MPFR_RNDN) == vijp_emu_round(M_PI, vijp_emu_arith(&f)));
        mpfr_clear(p);
    }
}
END_TEST

Suite *suite_emu_act(void)
{
    Suite *s = suite_create("emu_act");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, elementary_exhaustive_16bit);
    tcase_add_test(tc, elementary_binary32);
    tcase_add_test(tc, elementary_fallback_path);
    tcase_add_test(tc, activations_exhaustive_16bit);
    tcase_add_test(tc, activations_random);
    tcase_add_test(tc, layer_operators_match_oracle);
    tcase_add_test(tc, pi_rounded_once);
    suite_add_tcase(s, tc);
    return s;
}

/* vo_dot (oracles/dot.h): dot products rounded once, for the drift study's
 * reference.  The oracle is independent of vo_dot's algorithm and of
 * mpfr_sum: exact products (mpfr_mul at p + q bits) added one by one at a
 * precision wide enough to hold every bit of every term (so each addition is
 * exact), then one mpfr_set to the target precision.  The contract is correct
 * rounding, so the bound asserted is 0 ulps: the two must be equal (NaN with
 * NaN, an exact zero +0). */
#include <stdio.h> /* before mpfr.h: mpfr_fprintf */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "oracles/dot.h"
#include "vijp/rng.h"
#include <gmp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ±(a random prec-bit significand) · 2^e, e uniform in [-spread, spread]. */
static void random_mp(mpfr_t x, vijp_rng *g, long spread)
{
    mpfr_prec_t p = mpfr_get_prec(x);
    size_t nl = (size_t)(p + 63) / 64;
    mp_limb_t limbs[nl];
    for (size_t i = 0; i < nl; i++) limbs[i] = (mp_limb_t)vijp_rng_u64(g);
    mpz_t z;
    mpz_init(z);
    mpz_import(z, nl, -1, sizeof(mp_limb_t), 0, 0, limbs);
    mpz_setbit(z, (mp_bitcnt_t)(64 * nl - 1)); /* full width: the rounding to p below really rounds */
    long e = spread ? (long)(vijp_rng_u64(g) % (uint64_t)(2 * spread + 1)) - spread : 0;
    mpfr_set_z_2exp(x, z, e - (long)(64 * nl), MPFR_RNDN);
    if (vijp_rng_u64(g) & 1) mpfr_neg(x, x, MPFR_RNDN);
    mpz_clear(z);
}

/* The oracle: exact sum, then one rounding to r's precision. */
static void exact_oracle(mpfr_t r, mpfr_srcptr c, mpfr_t *a, mpfr_t *b, size_t n)
{
    long emax = LONG_MIN / 4, emin = LONG_MAX / 4;
    mpfr_prec_t wide = 2;
    mpfr_t *t = calloc(n + 1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (size_t k = 0; k <= n; k++) {
        if (k == n && !c) break;
        mpfr_prec_t p = k < n ? mpfr_get_prec(a[k]) + (b ? mpfr_get_prec(b[k]) : 0) : mpfr_get_prec(c);
        mpfr_init2(t[k], p);
        if (k == n) mpfr_set(t[k], c, MPFR_RNDN);
        else if (b) ck_assert_int_eq(mpfr_mul(t[k], a[k], b[k], MPFR_RNDN), 0); /* exact */
        else mpfr_set(t[k], a[k], MPFR_RNDN);
        if (!mpfr_regular_p(t[k])) continue;
        if (mpfr_get_exp(t[k]) > emax) emax = mpfr_get_exp(t[k]);
        if (mpfr_get_exp(t[k]) - p < emin) emin = mpfr_get_exp(t[k]) - p;
        if (p > wide) wide = p;
    }
    /* every bit lies in [2^emin, 2^(emax + log2(n+1))): 64 more bits than the span hold the sum exactly */
    mpfr_t s;
    mpfr_init2(s, emax > emin ? emax - emin + 64 : wide + 64);
    mpfr_set_zero(s, 1);
    for (size_t k = 0; k < n + (c != NULL); k++) ck_assert_int_eq(mpfr_add(s, s, t[k], MPFR_RNDN), 0); /* exact */
    mpfr_set(r, s, MPFR_RNDN);
    if (mpfr_zero_p(r)) mpfr_set_zero(r, 1); /* the contract: an exact zero is +0 */
    mpfr_clear(s);
    for (size_t k = 0; k < n + (c != NULL); k++) mpfr_clear(t[k]);
    free(t);
}

/* vo_dot against the oracle on a[0..n), b[0..n) (b may be NULL), c. */
static void check_one(mpfr_prec_t P, mpfr_srcptr c, mpfr_t *a, mpfr_t *b, size_t n, const char *what)
{
    mpfr_t got, want;
    mpfr_inits2(P, got, want, (mpfr_ptr)0);
    mpfr_srcptr *ptrs = calloc(2 * n + 1, sizeof *ptrs);
    ck_assert_ptr_nonnull(ptrs);
    for (size_t k = 0; k < n; k++) ptrs[k] = a[k], ptrs[n + k] = b ? b[k] : NULL;
    vo_dot(got, c, ptrs, b ? ptrs + n : NULL, n);
    exact_oracle(want, c, a, b, n);
    int same = (mpfr_nan_p(got) && mpfr_nan_p(want)) ||
               (mpfr_equal_p(got, want) && mpfr_signbit(got) == mpfr_signbit(want));
    if (!same)
        mpfr_fprintf(stderr, "t-dot %s (P=%ld, n=%zu, seed %llu): got %.20Re want %.20Re\n", what, (long)P, n,
                     (unsigned long long)test_seed(), got, want);
    ck_assert_msg(same, "vo_dot is not the correctly rounded sum (%s); seed %llu", what, (unsigned long long)test_seed());
    free(ptrs);
    mpfr_clears(got, want, (mpfr_ptr)0);
}

static mpfr_t *vec(size_t n, mpfr_prec_t p)
{
    mpfr_t *v = calloc(n ? n : 1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++) mpfr_init2(v[i], p), mpfr_set_zero(v[i], 1);
    return v;
}

static void vec_free(mpfr_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) mpfr_clear(v[i]);
    free(v);
}

/* Random terms, narrow and wide exponent spreads (wide ones cut bits below
 * the accumulator and exercise the interval test and the exact path), with
 * and without an addend, and plain sums (b NULL), at several precisions. */
START_TEST(test_dot_random)
{
    static const mpfr_prec_t precs[] = {2, 53, 113, 256, 512, 1000};
    static const size_t lens[] = {1, 2, 3, 17, 256};
    static const long spreads[] = {0, 8, 300, 5000};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (long it = 0; it < test_iters(3); it++)
        for (size_t ip = 0; ip < sizeof precs / sizeof *precs; ip++)
            for (size_t il = 0; il < sizeof lens / sizeof *lens; il++)
                for (size_t is = 0; is < sizeof spreads / sizeof *spreads; is++) {
                    mpfr_prec_t P = precs[ip];
                    size_t n = lens[il];
                    mpfr_t *a = vec(n, P), *b = vec(n, P + 64 * (it % 2)), c; /* mixed precisions on odd rounds */
                    mpfr_init2(c, P);
                    for (size_t k = 0; k < n; k++) random_mp(a[k], &g, spreads[is]), random_mp(b[k], &g, spreads[is]);
                    for (size_t k = 0; it % 3 == 2 && k < n; k += 2) /* short significands (zero low limbs), as W in the reference */
                        mpfr_mul_2si(a[k], a[k], 0, MPFR_RNDN), mpfr_prec_round(a[k], 53, MPFR_RNDN), mpfr_prec_round(a[k], P, MPFR_RNDN);
                    random_mp(c, &g, spreads[is]);
                    check_one(P, NULL, a, b, n, "random");
                    check_one(P, c, a, b, n, "random + c");
                    check_one(P, NULL, a, NULL, n, "plain sum");
                    vec_free(a, n), vec_free(b, n), mpfr_clear(c);
                }
}
END_TEST

/* Cancellation: the last term is minus the rounded sum of the others, so the
 * sum is the small rounding residue (about 2^-P of the terms), or exactly
 * zero; and a tie, 1 + 2^-P, which rounds to even (1). */
START_TEST(test_dot_cancel)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 1);
    for (long it = 0; it < test_iters(20); it++) {
        mpfr_prec_t P = it % 2 ? 256 : 512;
        size_t n = 2 + (size_t)it % 40;
        mpfr_t *a = vec(n, P), *b = vec(n, P), s;
        mpfr_init2(s, P);
        for (size_t k = 0; k + 1 < n; k++) random_mp(a[k], &g, it % 3 ? 4 : 200), random_mp(b[k], &g, 4);
        mpfr_set_zero(a[n - 1], 1); /* s = the others' sum rounded to P; then a[n−1]·b[n−1] = −s */
        check_one(P, NULL, a, b, n - 1, "partial");
        mpfr_srcptr *ptrs = calloc(2 * n, sizeof *ptrs);
        ck_assert_ptr_nonnull(ptrs);
        for (size_t k = 0; k + 1 < n; k++) ptrs[k] = a[k], ptrs[n - 1 + k] = b[k];
        vo_dot(s, NULL, ptrs, ptrs + n - 1, n - 1);
        mpfr_neg(a[n - 1], s, MPFR_RNDN), mpfr_set_ui(b[n - 1], 1, MPFR_RNDN);
        check_one(P, NULL, a, b, n, "cancelling");
        /* exactly zero: x·y + (−x)·y */
        mpfr_set(a[1], a[0], MPFR_RNDN), mpfr_neg(b[1], b[0], MPFR_RNDN);
        check_one(P, NULL, a, b, 2, "exact zero");
        free(ptrs);
        vec_free(a, n), vec_free(b, n), mpfr_clear(s);
    }
    mpfr_t *a = vec(2, 256), *b = vec(2, 256);
    mpfr_set_ui(a[0], 1, MPFR_RNDN), mpfr_set_ui(b[0], 1, MPFR_RNDN);
    mpfr_set_ui_2exp(a[1], 1, -256, MPFR_RNDN), mpfr_set_ui(b[1], 1, MPFR_RNDN);
    check_one(256, NULL, a, b, 2, "tie to even (down)");
    mpfr_set_ui_2exp(a[1], 3, -256, MPFR_RNDN);
    check_one(256, NULL, a, b, 2, "tie to even (up)");
    vec_free(a, 2), vec_free(b, 2);
}
END_TEST

/* Zeros (±0 factors, all-zero sums: +0), NaN and Inf (Inf·0 and Inf − Inf
 * are NaN, Inf + finite is Inf), n = 0. */
START_TEST(test_dot_special)
{
    mpfr_t *a = vec(3, 256), *b = vec(3, 256);
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 2);
    check_one(256, NULL, a, b, 0, "empty");
    check_one(256, NULL, a, b, 3, "all zero");
    mpfr_set_zero(a[0], -1), mpfr_set_ui(b[0], 3, MPFR_RNDN);
    check_one(256, NULL, a, b, 3, "-0 products");
    random_mp(a[1], &g, 0), random_mp(b[1], &g, 0);
    check_one(256, NULL, a, b, 3, "one live term among zeros");
    mpfr_set_inf(a[2], 1), mpfr_set_ui(b[2], 2, MPFR_RNDN);
    check_one(256, NULL, a, b, 3, "+Inf");
    mpfr_set_zero(b[2], 1);
    check_one(256, NULL, a, b, 3, "Inf times 0");
    mpfr_set_inf(a[0], -1), mpfr_set_ui(b[0], 1, MPFR_RNDN), mpfr_set_ui(b[2], 1, MPFR_RNDN);
    check_one(256, NULL, a, b, 3, "Inf - Inf");
    mpfr_set_nan(a[1]);
    check_one(256, NULL, a, b, 3, "NaN");
    vec_free(a, 3), vec_free(b, 3);
}
END_TEST

/* The dense and conv oracles with rounded-once dot products (the
 * reference's) against the same oracles rounding every operation, on forward,
 * jvp, vjp and the parameter gradient.  The sequential loop over T terms errs
 * by at most about T·u·Σ|terms| (T multiplies and T additions, fma or not,
 * first order, u = 2^-P) and the fused result by u·|y| <= u·Σ|terms|, so they
 * differ by at most 2(T + 1)·u·Σ|terms|; Σ|terms| is the same operator on
 * |θ|, |x| and |g| at 1024 bits (all terms positive: nearly exact), and T is
 * bounded by in + out + B·out for every operator here. */
typedef enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM, OPS } fused_op;

static void apply(const vijp_layer *L, fused_op op, mpfr_t *th, mpfr_t *X, mpfr_t *G, size_t B, mpfr_t *out,
                  const vijp_format *f)
{
    const vijp_ops_mp *mp = L->type->mp;
    if (op == OP_FORWARD) mp->forward(L, th, X, B, out, f);
    else if (op == OP_JVP) mp->jvp(L, th, X, B, G, out, f); /* u = G (in × B) */
    else if (op == OP_VJP) mp->vjp(L, th, X, B, G, out, f);
    else mp->vjp_param(L, th, X, B, G, out, f);
}

START_TEST(test_dot_fused_layers)
{
    static const struct { const char *spec; size_t width; } nets[] = {
        {"dense:24", 16}, {"dense:5", 16}, {"conv1d:2x3", 8}, {"conv1d:2x3s2", 8}, {"conv2d:1x3x4", 16}};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 3);
    size_t n_nets = sizeof nets / sizeof *nets;
    for (size_t run = 0; run < 2 * n_nets; run++) { /* batch 3, then 1 (one product per ∂W entry) */
        vijp_net net;
        vijp_error err = {0};
        size_t t = run % n_nets, B = run < n_nets ? 3 : 1;
        ck_assert_int_eq(vijp_net_build(&net, nets[t].spec, 1, nets[t].width, &err), 0);
        const vijp_layer *L = &net.layers[0];
        size_t in = L->in, out = L->out, P = L->type->param_count(L), T = in + out + B * out;
        vijp_format seq, fused, big;
        ck_assert_int_eq(vijp_format_mpfr(&seq, 256, &err), 0);
        ck_assert_int_eq(vijp_format_mpfr(&big, 1024, &err), 0);
        fused = seq, fused.exact_dots = 1;
        size_t nth = P, nx = in * B, ng = (in > out ? in : out) * B, nout = P > ng ? P : ng;
        mpfr_t *th = vec(nth, 256), *X = vec(nx, 256), *G = vec(ng, 256), *o1 = vec(nout, 256), *o2 = vec(nout, 256);
        mpfr_t *ath = vec(nth, 256), *aX = vec(nx, 256), *aG = vec(ng, 256), *mag = vec(nout, 1024), d, bound;
        mpfr_inits2(1100, d, bound, (mpfr_ptr)0);
        for (size_t i = 0; i < nth; i++) random_mp(th[i], &g, 3), mpfr_abs(ath[i], th[i], MPFR_RNDN);
        for (size_t i = 0; i < nx; i++) random_mp(X[i], &g, 3), mpfr_abs(aX[i], X[i], MPFR_RNDN);
        for (size_t i = 0; i < ng; i++) random_mp(G[i], &g, 3), mpfr_abs(aG[i], G[i], MPFR_RNDN);
        for (int op = 0; op < OPS; op++) {
            size_t len = op == OP_VJP_PARAM ? P : op == OP_VJP ? in * B : out * B;
            apply(L, op, th, X, G, B, o1, &seq);
            apply(L, op, th, X, G, B, o2, &fused);
            apply(L, op, ath, aX, aG, B, mag, &big);
            for (size_t i = 0; i < len; i++) {
                mpfr_sub(d, o1[i], o2[i], MPFR_RNDN); /* exact at 1100 bits */
                mpfr_mul_ui(bound, mag[i], 2 * (T + 1), MPFR_RNDU);
                mpfr_mul_2si(bound, bound, -256, MPFR_RNDU);
                ck_assert_msg(mpfr_cmpabs(d, bound) <= 0, "%s op %d entry %zu: fused and sequential differ beyond "
                              "2(T+1)u·Σ|terms|", nets[t].spec, op, i);
                if (B == 1 && op == OP_VJP_PARAM && !strncmp(nets[t].spec, "dense", 5)) /* one product, rounded once either way */
                    ck_assert_msg(mpfr_equal_p(o1[i], o2[i]), "%s batch 1, ∂θ entry %zu", nets[t].spec, i);
            }
        }
        vec_free(th, nth), vec_free(X, nx), vec_free(G, ng), vec_free(o1, nout), vec_free(o2, nout);
        vec_free(ath, nth), vec_free(aX, nx), vec_free(aG, ng), vec_free(mag, nout);
        mpfr_clears(d, bound, (mpfr_ptr)0);
        vijp_net_free(&net);
    }
    vijp_format b32; /* emulated formats keep their per-operation rounding whatever the flag says */
    vijp_format_fixed(&b32, VIJP_BINARY32);
    b32.exact_dots = 1;
    ck_assert(!vo_dot_fused(&b32));
}
END_TEST

/* The reference's accuracy claim is checked by doubling its precision
 * (src/drift/drift.c): with vo_dot broken on purpose (VIJP_BREAK_REFDOT keeps P/4
 * bits, an error near 2^-(P/4)), double's mpfr:106 and mpfr:212 disagree by
 * ~2^-26, far above double's target u·2^-10 = 2^-63, so a study capped at
 * 256 bits (room for the first doubling only) must fail ("did not settle");
 * unbroken, the same study passes. */
START_TEST(test_dot_broken_reference_caught)
{
    char dir[512], args[1024];
    make_temp_dir(dir, sizeof dir, "dot");
    snprintf(args, sizeof args, "drift --net dense:8,leaky:0.5 --depth 4 --formats double --seeds 1 --ref-prec-max 256 "
             "--no-plots -q --out %s/ok", dir);
    run_result ok = run_vijp(args);
    ck_assert_msg(ok.rc == CLI_OK, "unbroken reference: exit %d, %s", ok.rc, ok.err);
    setenv("VIJP_BREAK_REFDOT", "1", 1);
    snprintf(args, sizeof args, "drift --net dense:8,leaky:0.5 --depth 4 --formats double --seeds 1 --ref-prec-max 256 "
             "--no-plots -q --out %s/broken", dir);
    run_result bad = run_vijp(args);
    unsetenv("VIJP_BREAK_REFDOT");
    ck_assert_msg(bad.rc == CLI_FAILED && strstr(bad.err, "did not settle"),
                  "a broken reference passed its validation: exit %d, %s", bad.rc, bad.err);
    run_free(&ok), run_free(&bad);
    remove_tree(dir);
}
END_TEST

Suite *suite_dot(void)
{
    Suite *s = suite_create("dot");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dot_random);
    tcase_add_test(tc, test_dot_cancel);
    tcase_add_test(tc, test_dot_special);
    tcase_add_test(tc, test_dot_fused_layers);
    tcase_add_test(tc, test_dot_broken_reference_caught);
    suite_add_tcase(s, tc);
    return s;
}

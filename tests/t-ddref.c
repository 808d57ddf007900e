/* src/emu/dense_ref.c, the drift reference's dense products in double- and
 * triple-double (and, for triple-double inputs above 106 bits, four
 * levels; for four-part inputs above 159 bits, five) with a rounding test, against an oracle written apart from
 * it and from vo_dot: every product exact (mpfr_mul at p + q bits), the sum
 * exact (added one by one at a precision spanning every bit), then one
 * mpfr_set to P bits, an exact zero +0 (vo_dot's contract, oracles/dot.h).
 * The claim is equality, so no tolerance: the same number and sign.  The
 * inputs are what could make a wrong acceptance show: ordinary sums, a huge
 * dynamic range, subnormal products and inputs whose low part falls below
 * double's range (the second part, or only the third at 128 and 159 bits),
 * products that overflow double, sums cancelled by the bias, and sums that
 * are exactly (or within 2^-40 ulp of) a tie at P bits, at 8 to 212 bits.
 * Fallbacks are counted: none on ordinary sums (from 16 bits), every output
 * when forced. */
#include <stdio.h> /* before mpfr.h: mpfr_fprintf */
#include "fixtures/testutil.h"
#include "emu/dense_ref.h"
#include "oracles/dot.h"
#include "vijp/arith.h"
#include "vijp/rng.h"
#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM, N_OPS };
enum { ORDINARY, RANGE, SUBNORMAL, TINY_LOW, TINY_THIRD, OVERFLOW, CANCEL, N_KINDS };
static const char *const kind_names[N_KINDS] = {"ordinary", "range",    "subnormal", "tiny-low",
                                                "tiny-third", "overflow", "cancel"};

/* The oracle: r := RN(Σ a[k·sa]·b[k·sb] + c) at r's precision (b NULL: Σ a). */
static void exact_sum(mpfr_ptr r, mpfr_srcptr c, mpfr_t *a, size_t sa, mpfr_t *b, size_t sb, size_t n)
{
    long emax = LONG_MIN / 4, emin = LONG_MAX / 4;
    mpfr_t *t = calloc(n + 1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    size_t count = n + (c != NULL);
    for (size_t k = 0; k < count; k++) {
        mpfr_prec_t p = k < n ? mpfr_get_prec(a[k * sa]) + (b ? mpfr_get_prec(b[k * sb]) : 0) : mpfr_get_prec(c);
        mpfr_init2(t[k], p);
        if (k == n) mpfr_set(t[k], c, MPFR_RNDN);
        else if (b) ck_assert_int_eq(mpfr_mul(t[k], a[k * sa], b[k * sb], MPFR_RNDN), 0); /* exact */
        else mpfr_set(t[k], a[k * sa], MPFR_RNDN);
        if (!mpfr_regular_p(t[k])) continue;
        if (mpfr_get_exp(t[k]) > emax) emax = mpfr_get_exp(t[k]);
        if (mpfr_get_exp(t[k]) - p < emin) emin = mpfr_get_exp(t[k]) - p;
    }
    /* every bit lies in [2^emin, 2^(emax + log2(n + 1))): 64 more bits than the span hold the sum exactly */
    mpfr_t s;
    mpfr_init2(s, emax > emin ? emax - emin + 64 : 64);
    mpfr_set_zero(s, 1);
    for (size_t k = 0; k < count; k++) ck_assert_int_eq(mpfr_add(s, s, t[k], MPFR_RNDN), 0);
    mpfr_set(r, s, MPFR_RNDN);
    if (mpfr_zero_p(r)) mpfr_set_zero(r, 1);
    mpfr_clear(s);
    for (size_t k = 0; k < count; k++) mpfr_clear(t[k]);
    free(t);
}

/* ±(random full-width significand) · 2^e at x's precision, e in [lo, hi]. */
static void random_at(mpfr_t x, vijp_rng *g, long lo, long hi)
{
    mpfr_prec_t p = mpfr_get_prec(x);
    size_t nl = (size_t)(p + 63) / 64;
    mp_limb_t limbs[4];
    for (size_t i = 0; i < nl; i++) limbs[i] = (mp_limb_t)vijp_rng_u64(g);
    mpz_t z;
    mpz_init(z);
    mpz_import(z, nl, -1, sizeof(mp_limb_t), 0, 0, limbs);
    mpz_setbit(z, (mp_bitcnt_t)(64 * nl - 1));
    long e = lo + (long)(vijp_rng_u64(g) % (uint64_t)(hi - lo + 1));
    mpfr_set_z_2exp(x, z, e - (long)(64 * nl), MPFR_RNDN);
    if (vijp_rng_u64(g) & 1) mpfr_neg(x, x, MPFR_RNDN);
    mpz_clear(z);
}

/* One problem: a dense:m×n layer's θ (53-bit values: doubles, as the drift
 * memo holds them), X (n × B) and Gy (m × B) at P bits. */
typedef struct {
    vijp_layer L;
    vijp_format f;
    size_t m, n, B;
    mpfr_t *th, *X, *Gy;
} problem;

static void exps_of(int kind, int weights, long *lo, long *hi)
{
    static const long span[N_KINDS][2][2] = {
        {{-3, 1}, {-3, 3}},         /* ORDINARY: weights, then data */
        {{-400, 400}, {-300, 300}}, /* RANGE */
        {{-545, -535}, {-545, -535}}, /* SUBNORMAL: products near 2^-1080 */
        {{-3, 1}, {-1030, -1015}},  /* TINY_LOW: the data's low parts below 2^-1074 */
        {{-3, 1}, {-965, -950}},    /* TINY_THIRD: bits down to 2^(e−P), e <= -950: at 107 bits >= 2^-1072,
                                     * at 128 the third part below 2^-1074 (the second above 2^-1070) */
        {{1010, 1015}, {20, 30}},   /* OVERFLOW: W·x beyond double (>= 2^1028) */
        {{-3, 1}, {-3, 3}},         /* CANCEL: the bias is set below */
    };
    *lo = span[kind][!weights][0], *hi = span[kind][!weights][1];
}

static void problem_make(problem *pb, vijp_rng *g, long P, size_t m, size_t n, size_t B, int kind)
{
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
    ck_assert_int_eq(vijp_layer_parse(&pb->L, spec, n, NULL), 0);
    ck_assert_int_eq(vijp_format_mpfr(&pb->f, P, NULL), 0);
    pb->f.exact_dots = 1;
    pb->m = m, pb->n = n, pb->B = B;
    pb->th = calloc(m * n + m, sizeof *pb->th), pb->X = calloc(n * B, sizeof *pb->X), pb->Gy = calloc(m * B, sizeof *pb->Gy);
    ck_assert(pb->th && pb->X && pb->Gy);
    long lo, hi;
    exps_of(kind, 1, &lo, &hi);
    for (size_t k = 0; k < m * n + m; k++) mpfr_init2(pb->th[k], 53), random_at(pb->th[k], g, lo, hi);
    exps_of(kind, 0, &lo, &hi);
    for (size_t k = 0; k < n * B; k++) mpfr_init2(pb->X[k], P), random_at(pb->X[k], g, lo, hi);
    for (size_t k = 0; k < m * B; k++) mpfr_init2(pb->Gy[k], P), random_at(pb->Gy[k], g, lo, hi);
    if (kind == CANCEL) { /* b_i := −RN53(Σ_k W(i, k) x_k of sample 0): the forward sum cancels to ~2^-53 of itself */
        mpfr_t s;
        mpfr_init2(s, 53);
        for (size_t i = 0; i < m; i++) {
            exact_sum(s, NULL, &pb->th[i], m, pb->X, 1, n);
            mpfr_neg(pb->th[m * n + i], s, MPFR_RNDN);
        }
        mpfr_clear(s);
    }
}

static void problem_free(problem *pb)
{
    size_t m = pb->m, n = pb->n, B = pb->B;
    for (size_t k = 0; k < m * n + m; k++) mpfr_clear(pb->th[k]);
    for (size_t k = 0; k < n * B; k++) mpfr_clear(pb->X[k]);
    for (size_t k = 0; k < m * B; k++) mpfr_clear(pb->Gy[k]);
    free(pb->th), free(pb->X), free(pb->Gy);
}

/* How many outputs op writes (vjp_param: the bias gradient too). */
static size_t outputs_of(const problem *pb, int op)
{
    return op == OP_VJP ? pb->n * pb->B : op == OP_VJP_PARAM ? pb->m * pb->n + pb->m : pb->m * pb->B;
}

/* The oracle's value of output e of op. */
static void expected(const problem *pb, int op, size_t e, mpfr_ptr r)
{
    size_t m = pb->m, n = pb->n, B = pb->B;
    if (op == OP_FORWARD || op == OP_JVP) {
        size_t i = e % m, j = e / m;
        exact_sum(r, op == OP_FORWARD ? pb->th[m * n + i] : NULL, &pb->th[i], m, &pb->X[j * n], 1, n);
    } else if (op == OP_VJP) {
        size_t k = e % n, j = e / n;
        exact_sum(r, NULL, &pb->th[k * m], 1, &pb->Gy[j * m], 1, m);
    } else if (e < m * n) {
        size_t i = e % m, k = e / m;
        exact_sum(r, NULL, &pb->Gy[i], m, &pb->X[k], n, B);
    } else {
        exact_sum(r, NULL, &pb->Gy[e - m * n], m, NULL, 0, B);
    }
}

/* Run op through the fast path (bound scaled by scale) and compare every
 * output with the oracle; returns the call's stats. */
static vijp_ddref_stats check_op(const problem *pb, int op, double scale, const char *what)
{
    size_t count = outputs_of(pb, op);
    mpfr_t *out = vo_vec_new(count, &pb->f), want;
    mpfr_init2(want, pb->f.prec);
    vijp_ddref_stats st = {.bound_scale = scale, .any_size = 1}; /* the sizes here are small */
    mpfr_t *in = op == OP_FORWARD || op == OP_JVP ? pb->X : pb->Gy;
    vijp_ref_dense_op(op, &pb->L, pb->th, pb->X, pb->B, in, out, &pb->f, &st);
    for (size_t e = 0; e < count; e++) {
        expected(pb, op, e, want);
        if (!mpfr_equal_p(out[e], want) || mpfr_signbit(out[e]) != mpfr_signbit(want))
            mpfr_fprintf(stderr, "t-ddref %s op %d P=%ld output %zu (seed %llu): got %.40Re want %.40Re\n", what,
                         op, (long)pb->f.prec, e, (unsigned long long)test_seed(), out[e], want);
        ck_assert(mpfr_equal_p(out[e], want) && mpfr_signbit(out[e]) == mpfr_signbit(want));
    }
    mpfr_clear(want);
    vo_vec_free(out, count);
    return st;
}

static const long precs[] = {8, 16, 24, 53, 64, 80, 106, 107, 128, 159, 160, 200, 212};
#define N_PRECS (sizeof precs / sizeof *precs)

/* Every op, kind and precision against the oracle; ordinary sums take the
 * fast path with no fallback, overflow takes none of it and data with
 * subnormal low parts run the whole call in the oracle. */
START_TEST(matches_exact_sums)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    size_t fast = 0, fallbacks = 0;
    for (size_t pi = 0; pi < N_PRECS; pi++)
        for (int kind = 0; kind < N_KINDS; kind++) {
            problem pb;
            problem_make(&pb, &g, precs[pi], 12, 9, 3, kind);
            for (int op = 0; op < N_OPS; op++) {
                vijp_ddref_stats st = check_op(&pb, op, 1, kind_names[kind]);
                fast += st.outputs, fallbacks += st.fallbacks;
                /* not at 8 bits: there the batch-3 parameter gradient, three 16-bit products, lands on (or
                 * within the bound of) an 8-bit tie about once in 2^8 outputs, which the test must refuse
                 * (VIJP_TEST_SEED 1-100: a fallback in half of them) */
                if ((kind == ORDINARY || kind == RANGE) && precs[pi] > 8)
                    ck_assert_msg(!st.whole_oracle && st.fallbacks == 0, "%s P=%ld op %d: whole %d, %zu fallbacks",
                                  kind_names[kind], precs[pi], op, st.whole_oracle, st.fallbacks);
                if (kind == OVERFLOW && op != OP_VJP_PARAM) ck_assert(st.outputs == 0); /* products beyond double: bound +inf */
                /* from 64 bits, data below 2^-1015 have bits below 2^-1074 */
                if (kind == TINY_LOW && precs[pi] >= 64) ck_assert(st.whole_oracle);
                if (kind == TINY_THIRD) ck_assert_int_eq(st.whole_oracle, precs[pi] >= 128);
                /* five levels' a-posteriori bound, about 2^-245 of Σ|terms| on these 10 terms, needs
                 * 2^-265 at 212 bits */
                /* cancelled to ~2^-53 of Σ|terms|: beyond the bound's reach at 64 bits (2^-100 of it, need
                 * 2^-117), at 106 (triple-double's 2^-148, need 2^-159) and at 159 (four levels' 15N⁴u⁴ =
                 * 2^-195 at N = 10, need 2^-212); 24, 53, 80, 107 and 128 bits may decide */
                if (kind == CANCEL && op == OP_FORWARD &&
                    (precs[pi] == 64 || precs[pi] == 106 || precs[pi] == 159 || precs[pi] == 212))
                    ck_assert(!st.whole_oracle && st.fallbacks > 0);
            }
            problem_free(&pb);
        }
    ck_assert(fast > 0 && fallbacks > 0);
}
END_TEST

/* At 128 bits, sums cancelled to ~2^-78 of Σ|terms|: sample j's last input
 * is −RN_77 of row j's other terms (its weight 1), so output (j, j) needs
 * a bound below ~2^-206 of Σ|terms| to round at 128 bits, and the four
 * levels' 15N²(N + 3)²u⁴ is 2^-194 at N = 10: exactly those B outputs fall
 * back (a bound shrunk by 2^-20 would accept them), and all match. */
START_TEST(cancelled_at_128)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 5);
    problem pb;
    problem_make(&pb, &g, 128, 12, 9, 3, ORDINARY);
    size_t m = pb.m, n = pb.n;
    mpfr_t s;
    mpfr_init2(s, 77);
    for (size_t j = 0; j < pb.B; j++) {
        mpfr_set_ui(pb.th[j + (n - 1) * m], 1, MPFR_RNDN);
        exact_sum(s, pb.th[m * n + j], &pb.th[j], m, &pb.X[j * n], 1, n - 1);
        mpfr_neg(pb.X[n - 1 + j * n], s, MPFR_RNDN);
    }
    mpfr_clear(s);
    vijp_ddref_stats st = check_op(&pb, OP_FORWARD, 1, "cancelled at 128 bits");
    ck_assert(!st.whole_oracle);
    ck_assert_uint_eq(st.fallbacks, pb.B);
    problem_free(&pb);
}
END_TEST

/* Batch 1: the parameter gradient is vo_dot1's one product (whole call in
 * the oracle); the other ops take the fast path. */
START_TEST(batch_one)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 1);
    for (size_t pi = 0; pi < N_PRECS; pi++) {
        problem pb;
        problem_make(&pb, &g, precs[pi], 7, 10, 1, ORDINARY);
        for (int op = 0; op < N_OPS; op++) {
            vijp_ddref_stats st = check_op(&pb, op, 1, "batch 1");
            ck_assert_int_eq(st.whole_oracle, op == OP_VJP_PARAM);
        }
        problem_free(&pb);
    }
}
END_TEST

/* Forced: with the bound +inf every output falls back, and still matches. */
START_TEST(forced_fallback)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 2);
    static const int Ps[] = {64, 128, 212};
    for (size_t pi = 0; pi < 3; pi++) {
        problem pb;
        problem_make(&pb, &g, Ps[pi], 6, 5, 2, ORDINARY);
        for (int op = 0; op < N_OPS; op++) {
            vijp_ddref_stats st = check_op(&pb, op, INFINITY, "forced");
            size_t products = op == OP_VJP_PARAM ? pb.m * pb.n : outputs_of(&pb, op);
            ck_assert(!st.whole_oracle && st.outputs == 0 && st.fallbacks == products);
        }
        problem_free(&pb);
    }
}
END_TEST

/* y = w0·x0 + x1 on a dense:1x2 layer at P bits (b = 0), x1 = step·2^shift:
 * compared with the oracle; returns how many outputs fell back (0 or 1). */
static size_t two_terms(vijp_rng *g, long P, long w0, mpfr_srcptr x0, double step, long shift, const char *what)
{
    problem pb;
    problem_make(&pb, g, P, 1, 2, 1, ORDINARY);
    mpfr_set_si(pb.th[0], w0, MPFR_RNDN), mpfr_set_ui(pb.th[1], 1, MPFR_RNDN);
    mpfr_set_zero(pb.th[2], 1);
    mpfr_set(pb.X[0], x0, MPFR_RNDN);
    mpfr_set_d(pb.X[1], step, MPFR_RNDN);
    mpfr_mul_2si(pb.X[1], pb.X[1], shift, MPFR_RNDN);
    vijp_ddref_stats st = check_op(&pb, OP_FORWARD, 1, what);
    problem_free(&pb);
    return st.fallbacks;
}

/* Ties at P bits: y = x0 + 2^-P·s with W = [1, 1], x0 in [1, 2) (ulp
 * 2^(1−P)), b = 0: s = 1 is exactly the midpoint (ties to even), s = 1 ±
 * 2^-40 just off it.  Both must match the oracle; the exact tie must fall
 * back (the interval holds it, so its ends round apart), at every P. */
START_TEST(ties_at_p_bits)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 3);
    static const double offsets[] = {0, 0x1p-40, -0x1p-40};
    for (size_t pi = 0; pi < N_PRECS; pi++) {
        long P = precs[pi];
        mpfr_t x0;
        mpfr_init2(x0, P);
        for (size_t oi = 0; oi < sizeof offsets / sizeof *offsets; oi++)
            for (int odd = 0; odd < 2; odd++) {
                /* x0 = 1 + (odd ? 1 : 2)·2^(1−P) (P >= 24: distinct); x1 = 2^-P (1 + offset) */
                mpfr_set_ui_2exp(x0, odd ? 1 : 2, 1 - P, MPFR_RNDN);
                mpfr_add_ui(x0, x0, 1, MPFR_RNDN);
                size_t fallbacks = two_terms(&g, P, 1, x0, 1 + offsets[oi], -P, "tie");
                if (offsets[oi] == 0) ck_assert_uint_eq(fallbacks, 1);
            }
        mpfr_clear(x0);
    }
}
END_TEST

/* Sums next to a power of two, where the P-bit spacing halves below it
 * (the doubles' test declines there; MPFR's decides): y = 1 + s·2^-(P+1)
 * with s = −1 (the tie below 1: to even, 1), −1 ± 2^-40, +1 ± 2^-40 (above
 * 1: the spacing is 2^(1−P), so well inside), and the same for −y. */
START_TEST(binade_edges)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 4);
    static const double steps[] = {-1, -1 - 0x1p-40, -1 + 0x1p-40, 1 - 0x1p-40, 1 + 0x1p-40};
    for (size_t pi = 0; pi < N_PRECS; pi++) {
        long P = precs[pi];
        mpfr_t one;
        mpfr_init2(one, P);
        mpfr_set_ui(one, 1, MPFR_RNDN);
        for (size_t si = 0; si < sizeof steps / sizeof *steps; si++)
            for (int neg = 0; neg < 2; neg++) {
                size_t fallbacks = two_terms(&g, P, neg ? -1 : 1, one, neg ? -steps[si] : steps[si], -(P + 1), "binade");
                if (steps[si] == -1 && P >= 53) ck_assert_uint_eq(fallbacks, 1); /* the exact tie */
            }
        mpfr_clear(one);
    }
}
END_TEST

/* θ as doubles (vijp_ref_dense_op_d: the drift memo's copy in double)
 * against θ in MPFR (vijp_ref_dense_op) on the same values: every output
 * the same number and sign, the same outputs accepted and fallen back,
 * and both the exact sums' (the oracle above).  At 64, 106, 128, 159, 200
 * and 212 bits (double-double, triple-double, four and five levels) and
 * 256 (past VIJP_DDREF_MAX_PREC: every call by vo_dot, line by line from
 * the doubles), batch 1 and 16; ordinary data, data whose low parts fall below
 * double's range (the whole call by vo_dot from 64 bits: parts_of fails),
 * a bound forced to +inf (every output by vo_dot) and sums cancelled by
 * the bias (some outputs by vo_dot). */
/* θ's doubles (W, then b), exactly: its 53-bit values, in double's range here. */
static double *theta_doubles(const problem *pb)
{
    size_t count = pb->m * pb->n + pb->m;
    double *th = malloc(count * sizeof *th);
    ck_assert_ptr_nonnull(th);
    for (size_t k = 0; k < count; k++) th[k] = mpfr_get_d(pb->th[k], MPFR_RNDN);
    return th;
}

static void same_both_ways(const problem *pb, int op, double scale, const char *what)
{
    size_t count = outputs_of(pb, op);
    mpfr_t *a = vo_vec_new(count, &pb->f), *b = vo_vec_new(count, &pb->f), want;
    mpfr_init2(want, pb->f.prec);
    double *th = theta_doubles(pb);
    mpfr_t *in = op == OP_FORWARD || op == OP_JVP ? pb->X : pb->Gy;
    vijp_ddref_stats sa = {.bound_scale = scale, .any_size = 1}, sb = sa;
    vijp_ref_dense_op(op, &pb->L, pb->th, pb->X, pb->B, in, a, &pb->f, &sa);
    ck_assert_int_eq(vijp_ref_dense_op_d(op, &pb->L, th, pb->X, pb->B, in, b, &pb->f, &sb), 0);
    for (size_t e = 0; e < count; e++) {
        expected(pb, op, e, want);
        int same = mpfr_equal_p(a[e], b[e]) && mpfr_signbit(a[e]) == mpfr_signbit(b[e]);
        if (!same || !mpfr_equal_p(b[e], want) || mpfr_signbit(b[e]) != mpfr_signbit(want))
            mpfr_fprintf(stderr, "t-ddref θ as doubles, %s op %d P=%ld B=%zu output %zu (seed %llu): MPFR θ %.40Re, "
                         "double θ %.40Re, want %.40Re\n", what, op, (long)pb->f.prec, pb->B, e,
                         (unsigned long long)test_seed(), a[e], b[e], want);
        ck_assert(same && mpfr_equal_p(b[e], want) && mpfr_signbit(b[e]) == mpfr_signbit(want));
    }
    ck_assert(sa.outputs == sb.outputs && sa.fallbacks == sb.fallbacks && sa.whole_oracle == sb.whole_oracle);
    free(th);
    mpfr_clear(want);
    vo_vec_free(a, count), vo_vec_free(b, count);
}

START_TEST(theta_as_doubles)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 6);
    static const long P[] = {64, 106, 128, 159, 200, 212, 256};
    static const size_t batches[] = {1, 16};
    size_t forced = 0, cancelled = 0, mixed = 0, whole = 0;
    for (size_t pi = 0; pi < sizeof P / sizeof *P; pi++)
        for (size_t bi = 0; bi < 2; bi++) {
            static const int kinds[] = {ORDINARY, TINY_LOW, CANCEL};
            for (size_t ki = 0; ki < 3; ki++) {
                problem pb;
                problem_make(&pb, &g, P[pi], 12, 9, batches[bi], kinds[ki]);
                for (int op = 0; op < N_OPS; op++) {
                    same_both_ways(&pb, op, 1, kind_names[kinds[ki]]);
                    if (kinds[ki] == ORDINARY) same_both_ways(&pb, op, INFINITY, "forced");
                }
                /* what each case is there for, on the forward product */
                vijp_ddref_stats st = {.any_size = 1};
                size_t count = outputs_of(&pb, OP_FORWARD);
                mpfr_t *out = vo_vec_new(count, &pb.f);
                double *th = theta_doubles(&pb);
                st.bound_scale = kinds[ki] == ORDINARY ? INFINITY : 1;
                ck_assert(!vijp_ref_dense_op_d(OP_FORWARD, &pb.L, th, pb.X, pb.B, pb.X, out, &pb.f, &st));
                if (P[pi] > VIJP_DDREF_MAX_PREC) ck_assert(st.whole_oracle);
                else if (kinds[ki] == ORDINARY) forced += !st.whole_oracle && st.fallbacks == count;
                else if (kinds[ki] == TINY_LOW) whole += st.whole_oracle;
                else cancelled += !st.whole_oracle && st.fallbacks > 0, mixed += st.fallbacks > 0 && st.outputs > 0;
                free(th);
                vo_vec_free(out, count);
                problem_free(&pb);
            }
        }
    /* every precision on the fast path, both batches: forced and tiny-low always; the bias
     * cancels sample 0's sums beyond the bound at 64, 106 and 159 bits (matches_exact_sums): at
     * batch 1 every output falls back, at 16 those of sample 0 and not the others */
    ck_assert_uint_eq(forced, 12);
    ck_assert_uint_eq(whole, 12);
    ck_assert_uint_ge(cancelled, 6);
    ck_assert_uint_ge(mixed, 3);
}
END_TEST

/* A format whose dot products round per operation (mpfr:P without exact
 * dots) is not the double path's: it declines, writing nothing, and the
 * layer interface gives θ an MPFR twin instead. */
START_TEST(theta_as_doubles_declines)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 7);
    problem pb;
    problem_make(&pb, &g, 64, 12, 9, 2, ORDINARY);
    pb.f.exact_dots = 0;
    double *th = theta_doubles(&pb);
    mpfr_t *out = vo_vec_new(12 * 2, &pb.f);
    for (size_t e = 0; e < 12 * 2; e++) mpfr_set_ui(out[e], 7, MPFR_RNDN);
    for (int op = 0; op < OP_VJP; op++)
        ck_assert_int_eq(vijp_ref_dense_op_d(op, &pb.L, th, pb.X, pb.B, pb.X, out, &pb.f, NULL), VIJP_EUNSUPPORTED);
    for (size_t e = 0; e < 12 * 2; e++) ck_assert(mpfr_cmp_ui(out[e], 7) == 0);
    free(th);
    vo_vec_free(out, 12 * 2);
    problem_free(&pb);
}
END_TEST

/* The rounding test alone: a tie with bound 0 is decided (RN's ties to
 * even), with any bound refused; an interval reaching zero is refused;
 * +inf and NaN bounds are refused. */
START_TEST(rounding_test_alone)
{
    mpfr_t r;
    mpfr_init2(r, 64);
    ck_assert(vijp_ddref_round(r, (double[]){1, 0, 0x1p-64, 0}, 0)); /* the tie 1 + 2^-64 itself */
    ck_assert(mpfr_cmp_ui(r, 1) == 0);                         /* to even: 1 */
    ck_assert(!vijp_ddref_round(r, (double[]){1, 0, 0x1p-64, 0}, 0x1p-120)); /* around the tie */
    ck_assert(vijp_ddref_round(r, (double[]){1, 0, 0x1p-63, 0}, 0x1p-120));  /* 1 + 2^-63 itself, within 2^-120 */
    ck_assert(!vijp_ddref_round(r, (double[]){0x1p-100, 0, 0, 0}, 0x1p-99)); /* zero inside */
    ck_assert(!vijp_ddref_round(r, (double[]){1, 0, 0, 0}, INFINITY));
    ck_assert(!vijp_ddref_round(r, (double[]){1, 0, 0, 0}, NAN));
    ck_assert(!vijp_ddref_round(r, (double[]){1, 0, 0, NAN}, 0));
    /* hi = 1 + 2^-52 (not a power of two: the doubles' test), y = hi + 3·2^-65: rounds to hi + 2^-63 */
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0, 3 * 0x1p-65, 0}, 0x1p-100));
    mpfr_t want;
    mpfr_init2(want, 64);
    mpfr_set_d(want, 1 + 0x1p-52, MPFR_RNDN), mpfr_add_d(want, want, 0x1p-63, MPFR_RNDN);
    ck_assert(mpfr_equal_p(r, want));
    /* the same with the remainder split over mid and lo (triple-double) */
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 3 * 0x1p-65, 0x1p-120, 0}, 0x1p-118));
    ck_assert(mpfr_equal_p(r, want));
    /* 128 bits, four parts: hi = 1 + 2^-52, q = 2^-127.  mid = 2^-60 (2^67 q,
     * beyond 2^53 units: the scratch's sum), lo = 0.75q rounds to one more
     * q; lo = q/2 is a tie, decided only with bound 0 (to even: hi + mid, an
     * even multiple of q); the fourth part ∓2^-150 puts it just below or
     * above the tie. */
    mpfr_set_prec(r, 128), mpfr_set_prec(want, 128);
    mpfr_set_d(want, 1 + 0x1p-52, MPFR_RNDN), mpfr_add_d(want, want, 0x1p-60, MPFR_RNDN);
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-127 * 0.75, 0}, 0x1p-140));
    mpfr_add_d(want, want, 0x1p-127, MPFR_RNDN);
    ck_assert(mpfr_equal_p(r, want));
    mpfr_sub_d(want, want, 0x1p-127, MPFR_RNDN); /* hi + mid */
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-128, 0}, 0));
    ck_assert(mpfr_equal_p(r, want));
    ck_assert(!vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-128, 0}, 0x1p-200));
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-128, -0x1p-150}, 0x1p-200));
    ck_assert(mpfr_equal_p(r, want));
    ck_assert(vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-128, 0x1p-150}, 0x1p-200));
    mpfr_add_d(want, want, 0x1p-127, MPFR_RNDN);
    ck_assert(mpfr_equal_p(r, want));
    /* the bound reaching the tie from below: refused */
    ck_assert(!vijp_ddref_round(r, (double[]){1 + 0x1p-52, 0x1p-60, 0x1p-128, -0x1p-150}, 0x1p-149));
    mpfr_clear(want);
    /* P = 8, hi = M − 2^-40 − 2^-52 with M = 1 + 2^-8 a midpoint of the 8-bit
     * grid, bound 2^-39: M lies strictly inside [hi − bound, hi + bound],
     * so nothing is decided (hi rounded to P + 32 = 40 bits would have put
     * the upper end on M itself, a tie to 1, and accepted 1). */
    mpfr_set_prec(r, 8);
    ck_assert(!vijp_ddref_round(r, (double[]){1 + 0x1p-8 - 0x1p-40 - 0x1p-52, 0, 0, 0}, 0x1p-39));
    mpfr_clear(r);
}
END_TEST

/* The decided roundings against MPFR: y = y[0] + ... + y[3] a normalised
 * expansion (each part at most half an ulp of the one above, any signs,
 * hi anywhere in the exponent range the products reach), P from 53 to
 * 159 (the doubles' test and its assembly of hi + kq in limbs), bound 0
 * or a few units of 2^-(P+8) of |y|: wherever the test decides, r is
 * RN_P(y) as mpfr_set of the exact sum gives it, sign and exponent
 * included.  An assembly that drops a carry between limbs, or adds the
 * remainder to |hi| with the wrong sign for a negative hi, fails here. */
START_TEST(decided_roundings_are_mpfr_s)
{
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    mpfr_t r, sum, want;
    mpfr_inits2(1200, sum, (mpfr_ptr)0);
    mpfr_inits2(53, r, want, (mpfr_ptr)0);
    size_t limbs[4] = {0, 0, 0, 0};
    for (int k = 0; k < 30000; k++) {
        mpfr_prec_t P = 53 + (mpfr_prec_t)(vijp_rng_u64(&g) % 160);
        int parts = P > 159 || vijp_rng_u64(&g) % 4 == 0 ? 5 : 4;
        double y[5];
        y[0] = ldexp(1 + vijp_rng_uniform(&g), (int)(vijp_rng_u64(&g) % 400) - 200);
        if (vijp_rng_u64(&g) & 1) y[0] = -y[0];
        for (int i = 1; i < parts; i++) {
            if (y[i - 1] == 0) { /* a part snapped to zero: nothing below it */
                y[i] = 0;
                continue;
            }
            double ulp = ldexp(1, ilogb(y[i - 1]) - 52);
            y[i] = ulp * (vijp_rng_uniform(&g) - 0.5); /* |y_i| <= ulp(y_(i−1))/2 */
            if (y[i] == 0) y[i] = ulp / 4;
            if (vijp_rng_u64(&g) % 5 == 0) y[i] = rint(y[i] * ldexp(1, (int)P - ilogb(y[0]) - 1)) *
                                                  ldexp(1, ilogb(y[0]) - (int)P + 1); /* on the P-bit grid */
        }
        double bound = vijp_rng_u64(&g) & 1 ? 0 : fabs(y[0]) * ldexp(1 + vijp_rng_uniform(&g), -(int)P - 8);
        mpfr_set_prec(r, P), mpfr_set_prec(want, P);
        if (!vijp_ddref_round_parts(r, y, parts, bound)) continue;
        limbs[(P - 1) / 64]++;
        mpfr_set_d(sum, y[0], MPFR_RNDN);
        for (int i = 1; i < parts; i++) ck_assert(mpfr_add_d(sum, sum, y[i], MPFR_RNDN) == 0); /* exact at 1200 bits */
        mpfr_set(want, sum, MPFR_RNDN);
        if (!mpfr_equal_p(r, want) || !mpfr_signbit(r) != !mpfr_signbit(want)) {
            char got[128], rn[128];
            mpfr_snprintf(got, sizeof got, "%Ra", r), mpfr_snprintf(rn, sizeof rn, "%Ra", want);
            ck_abort_msg("P = %ld, y = %a %a %a %a %a, bound %a: decided %s, RN_P is %s", (long)P, y[0], y[1], y[2],
                         y[3], parts == 5 ? y[4] : 0.0, bound, got, rn);
        }
    }
    ck_assert_msg(limbs[0] > 1000 && limbs[1] > 5000 && limbs[2] > 5000 && limbs[3] > 1000,
                  "decided %zu, %zu, %zu, %zu in 1, 2, 3, 4 limbs", limbs[0], limbs[1], limbs[2], limbs[3]);
    mpfr_clears(r, sum, want, (mpfr_ptr)0);
}
END_TEST

/* The fast path's split of its inputs by their limbs against the split
 * it replaces, done here in MPFR: each part the remainder so far rounded
 * to nearest (mpfr_get_d), taken off exactly.  Random values at every
 * precision the reference uses, and ties at 53 bits with the kept part
 * even and odd, all-ones significands (the first part rounds up to a
 * power of two), remainders that change sign, values whose low parts
 * fall below the normal doubles (the limbs decline, MPFR decides) and
 * beyond them.  Wherever the MPFR split gives normal doubles that sum to
 * x, the limbs give the same bits; where not, they decline. */
START_TEST(split_by_limbs_is_mpfr_s)
{
    static const long split_precs[] = {24, 53, 64, 100, 106, 107, 128, 159, 160, 200, 212, 256};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 21);
    size_t agreed = 0, declined = 0;
    for (size_t pi = 0; pi < sizeof split_precs / sizeof *split_precs; pi++) {
        long P = split_precs[pi];
        int parts = P <= 53 ? 1 : P <= 106 ? 2 : P <= 159 ? 3 : 4;
        mpfr_t x, r, t;
        mpfr_inits2(P, x, r, (mpfr_ptr)0);
        mpfr_init2(t, 64);
        for (int c = 0; c < 400; c++) {
            int kind = c % 8;
            mpfr_set_d(x, vijp_rng_normal(&g), MPFR_RNDN);
            for (int k = 1; 53 * k < P + 53; k++) { /* every bit of x random */
                mpfr_set_d(t, vijp_rng_uniform(&g) - 0.5, MPFR_RNDN);
                mpfr_mul_2si(t, t, mpfr_get_exp(x) - 53 * k, MPFR_RNDN);
                mpfr_add(x, x, t, MPFR_RNDN);
            }
            if (kind == 1 && P > 54) { /* a tie at 53 bits: the top 53 bits, then one half unit */
                mpfr_prec_round(x, 53, MPFR_RNDN), mpfr_prec_round(x, P, MPFR_RNDN);
                mpfr_set_ui_2exp(t, 1, mpfr_get_exp(x) - 54, MPFR_RNDN);
                if (mpfr_signbit(x)) mpfr_neg(t, t, MPFR_RNDN);
                mpfr_add(x, x, t, MPFR_RNDN);
            } else if (kind == 2) { /* all ones: 1 − 2^-P, scaled */
                mpfr_set_ui_2exp(t, 1, -P, MPFR_RNDN);
                mpfr_ui_sub(x, 1, t, MPFR_RNDN);
                mpfr_mul_2si(x, x, (long)(vijp_rng_u64(&g) % 200) - 100, MPFR_RNDN);
            } else if (kind == 3) { /* tiny: low parts below 2^-1022 */
                mpfr_mul_2si(x, x, -900 - (long)(vijp_rng_u64(&g) % 160), MPFR_RNDN);
            } else if (kind == 4) { /* huge, and past double's range */
                mpfr_mul_2si(x, x, 1000 + (long)(vijp_rng_u64(&g) % 30), MPFR_RNDN);
            } else if (kind == 5) { /* few bits: the last parts zero, or a short remainder */
                mpfr_prec_round(x, 1 + (long)(vijp_rng_u64(&g) % (unsigned long)P), MPFR_RNDN);
                mpfr_prec_round(x, P, MPFR_RNDN);
            }
            double want[4] = {0}, got[4] = {0};
            int normal = 1;
            mpfr_set(r, x, MPFR_RNDN);
            for (int k = 0; k < parts; k++) {
                want[k] = mpfr_get_d(r, MPFR_RNDN);
                normal &= isfinite(want[k]) && (want[k] == 0 || fabs(want[k]) >= 0x1p-1022);
                if (isfinite(want[k])) mpfr_sub_d(r, r, want[k], MPFR_RNDN); /* exact: P bits hold it */
            }
            int exact = normal && mpfr_zero_p(r);
            int ok = vijp_ddref_split_limbs(x, got, parts);
            if (exact) {
                ck_assert_msg(ok, "P=%ld case %d: declined a split MPFR makes", P, c);
                ck_assert_msg(!memcmp(got, want, (size_t)parts * sizeof *got),
                              "P=%ld case %d: parts %a %a %a %a, MPFR's %a %a %a %a", P, c, got[0], got[1], got[2],
                              got[3], want[0], want[1], want[2], want[3]);
                agreed++;
            } else {
                ck_assert_msg(!ok, "P=%ld case %d: took a split MPFR does not make", P, c);
                declined++;
            }
        }
        mpfr_clears(x, r, t, (mpfr_ptr)0);
    }
    ck_assert(agreed > 3000 && declined > 100);
}
END_TEST

Suite *suite_ddref(void)
{
    Suite *s = suite_create("ddref");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, matches_exact_sums);
    tcase_add_test(tc, cancelled_at_128);
    tcase_add_test(tc, batch_one);
    tcase_add_test(tc, split_by_limbs_is_mpfr_s);
    tcase_add_test(tc, forced_fallback);
    tcase_add_test(tc, ties_at_p_bits);
    tcase_add_test(tc, binade_edges);
    tcase_add_test(tc, rounding_test_alone);
    tcase_add_test(tc, decided_roundings_are_mpfr_s);
    tcase_add_test(tc, theta_as_doubles);
    tcase_add_test(tc, theta_as_doubles_declines);
    suite_add_tcase(s, tc);
    return s;
}

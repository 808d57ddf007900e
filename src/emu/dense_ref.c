/* The dense layer's reference products in double-double, bit for bit
 * vo_dot's (dense_ref.h; docs/internals.md, "The reference's fast
 * products").
 *
 * Why the results are vo_dot's: vo_dot returns RN_P(S), S the exact sum.
 * The operands here are exactly the MPFR values (W, b: doubles; a p-bit
 * activation or cotangent with p <= 106: hi + lo, each conversion checked
 * exact), so Dot2 (vijp_dd_gemm; its triple-double twin above 64 bits)
 * computes y = hi + lo (+ mid) with |y − S| <= bound, bound rigorous
 * (src/ddot/bound.c, +inf where none holds).  The interval is widened
 * outward to [lower, upper] in MPFR with directed rounding, and RN_P is
 * monotone: RN_P(lower) = RN_P(upper) forces RN_P(S) to that number, ties included (a tie inside the interval makes the two
 * ends round apart).  MPFR's exponent range is the reference's (the
 * default, far wider than double's), so no P-bit rounding is subnormal;
 * double underflow in the products is in Dot2's bound (its Nη term).  An
 * interval that reaches zero is refused (vo_dot's exact zero is +0).  Every
 * refused output, and every call the doubles cannot hold, runs vo_dot.
 *
 * Cost: the weights are read into doubles once per call (one-limb values
 * by their bits, double_of), the inputs split once, then m·n·B double-
 * (or triple-) double multiply-adds and one MPFR rounding test per output. */
#include "dense_ref.h"
#include "ddot/ddot.h"
#include "oracles/oracles.h"
#include "oracles/dot.h"
#include "vijp/memory.h"
#include "vijp/error.h"
#include <gmp.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bits the rounding test's interval ends carry beyond P: their own
 * rounding (outward) then widens the interval by 2^-(P+32) relative. */
#define TEST_GUARD 32

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM };

/* The MPFR scratch of one call: the interval's ends (max(P + TEST_GUARD, 53) bits)
 * and the upper end rounded to P bits. */
typedef struct {
    mpfr_t lower, upper, upper_p;
} round_scratch;

static void scratch_init(round_scratch *s, mpfr_prec_t P)
{
    /* At least 53 bits: the ends start from hi, which must be exact there
     * (below P = 21, P + TEST_GUARD bits would round it inward). */
    mpfr_prec_t q = P + TEST_GUARD > 53 ? P + TEST_GUARD : 53;
    mpfr_inits2(q, s->lower, s->upper, (mpfr_ptr)0);
    mpfr_init2(s->upper_p, P);
}

static void scratch_clear(round_scratch *s) { mpfr_clears(s->lower, s->upper, s->upper_p, (mpfr_ptr)0); }

/* 2^k as a double, -1022 <= k <= 1023. */
static double pow2(int k)
{
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* The test in doubles, for P >= 53 and hi normal, not a power of two, with
 * exponent e (|hi| in (2^e, 2^(e+1))): the P-bit numbers there are the
 * multiples of q = 2^(e−P+1), hi among them (a multiple of ulp(hi) =
 * 2^(e−52)).  In units of q (exact scalings by s = 1/q): y − hi = mid_s +
 * lo_s, k = rint(mid_s), d = mid_s − k exact (|d| <= 1/2, a multiple of
 * mid_s's unit).  When |d + lo_s| + b/q < 1/2, the interval lies strictly
 * between the midpoints (k ∓ 1/2)q, so every point of it rounds to hi + kq;
 * when |mid_s| + |lo_s| + b/q < 2^(P−54) (ulp(hi)/2 in units of q) it
 * lies in hi's binade, where the multiples of q are the P-bit numbers.  Each
 * sum is evaluated in round to nearest, at most two roundings (relative u
 * each), and compared with a margin 2^-40 that covers them.  0: undecided
 * here (the MPFR test then decides). */
static int round_fast(mpfr_ptr r, double hi, double mid, double lo, double bound, mpfr_prec_t P)
{
    uint64_t bits;
    memcpy(&bits, &hi, sizeof bits);
    int field = (int)(bits >> 52 & 0x7ff);
    if (P < 53 || P > VIJP_DDREF_MAX_PREC || field == 0 || field == 0x7ff || !(bits & (((uint64_t)1 << 52) - 1)))
        return 0;
    if (mid == 0) mid = lo, lo = 0; /* a double-double: its low part is the remainder to round */
    int e = field - 1023;
    if (e < -900 || e > 1000) return 0; /* s = 2^(P−1−e) and q = 2^(e−P+1) both normal */
    double s = pow2((int)P - 1 - e), mid_s = mid * s, lo_s = lo * s, bq = bound * s;
    if (!(bq < 0.25) || !isfinite(mid_s) || !isfinite(lo_s)) return 0;
    if (!(fabs(mid_s) + fabs(lo_s) + bq < pow2((int)P - 54) * (1 - 0x1p-40))) return 0;
    double k = rint(mid_s), d = mid_s - k;
    if (!(fabs(d + lo_s) + bq < 0.5 - 0x1p-40)) return 0;
    mpfr_set_d(r, hi, MPFR_RNDN);                         /* exact: P >= 53 */
    mpfr_add_d(r, r, k * pow2(e - (int)P + 1), MPFR_RNDN); /* exact: hi + kq is a P-bit number, kq a double */
    return 1;
}

/* The test on y = hi + mid + lo (mid = 0 for a double-double): in doubles
 * where it decides (round_fast), else in MPFR. */
static int round_in(mpfr_ptr r, double hi, double mid, double lo, double bound, round_scratch *s)
{
    if (round_fast(r, hi, mid, lo, bound, mpfr_get_prec(r))) return 1;
    if (!isfinite(hi) || !isfinite(mid) || !isfinite(lo) || !(bound >= 0 && bound < INFINITY)) return 0;
    /* lower <= y − bound and upper >= y + bound: each step rounded outward */
    mpfr_set_d(s->lower, hi, MPFR_RNDN); /* exact: the scratch has 53 bits or more */
    mpfr_set(s->upper, s->lower, MPFR_RNDN);
    mpfr_add_d(s->lower, s->lower, mid, MPFR_RNDD), mpfr_add_d(s->upper, s->upper, mid, MPFR_RNDU);
    mpfr_add_d(s->lower, s->lower, lo, MPFR_RNDD), mpfr_add_d(s->upper, s->upper, lo, MPFR_RNDU);
    mpfr_sub_d(s->lower, s->lower, bound, MPFR_RNDD), mpfr_add_d(s->upper, s->upper, bound, MPFR_RNDU);
    if (!(mpfr_sgn(s->lower) > 0 || mpfr_sgn(s->upper) < 0)) return 0; /* zero possible: its sign is vo_dot's */
    mpfr_set(r, s->lower, MPFR_RNDN);
    mpfr_set(s->upper_p, s->upper, MPFR_RNDN);
    return mpfr_equal_p(r, s->upper_p);
}

int vijp_ddref_round(mpfr_ptr r, double hi, double mid, double lo, double bound)
{
    round_scratch s;
    scratch_init(&s, mpfr_get_prec(r));
    int ok = round_in(r, hi, mid, lo, bound, &s);
    scratch_clear(&s);
    return ok;
}

/* x as a double when it is one exactly (finite, in double's range, at most
 * 53 significant bits).  A one-limb regular x is read by its bits (the
 * weights: m·n of them per call, where mpfr_get_d would cost more than the
 * products); anything else through mpfr_get_d and a comparison. */
static int double_of(mpfr_srcptr x, double *d)
{
    if (mpfr_zero_p(x)) {
        *d = mpfr_signbit(x) ? -0.0 : 0.0;
        return 1;
    }
    if (!mpfr_regular_p(x)) return 0;
    mpfr_exp_t E = mpfr_get_exp(x); /* |x| in [2^(E−1), 2^E) */
    if (GMP_NUMB_BITS == 64 && mpfr_get_prec(x) <= 64 && E - 1 >= -1022 && E <= 1024) {
        uint64_t limb = (uint64_t)*(const mp_limb_t *)mpfr_custom_get_significand(x);
        if (limb & 0x7ff) return 0; /* more than 53 bits */
        uint64_t bits = (uint64_t)(mpfr_signbit(x) != 0) << 63 | (uint64_t)(E - 1 + 1023) << 52 |
                        (limb >> 11 & (((uint64_t)1 << 52) - 1));
        memcpy(d, &bits, sizeof bits);
        return 1;
    }
    *d = mpfr_get_d(x, MPFR_RNDN);
    return isfinite(*d) && mpfr_cmp_d(x, *d) == 0;
}

/* x = hi + lo exactly with hi = RN(x) (so |lo| <= ulp(hi)/2), or 0.  tmp:
 * at least x's precision (x − hi is then exact: a multiple of x's last
 * unit no larger than x). */
static int dd_of(mpfr_srcptr x, double *hi, double *lo, mpfr_ptr tmp)
{
    if (mpfr_zero_p(x)) {
        *hi = mpfr_signbit(x) ? -0.0 : 0.0, *lo = 0.0;
        return 1;
    }
    if (!mpfr_regular_p(x)) return 0;
    *hi = mpfr_get_d(x, MPFR_RNDN);
    if (!isfinite(*hi) || mpfr_sub_d(tmp, x, *hi, MPFR_RNDN)) return 0;
    *lo = mpfr_get_d(tmp, MPFR_RNDN);
    return mpfr_cmp_d(tmp, *lo) == 0; /* the low part representable (not below double's range) */
}

static int applies(const vijp_format *f)
{
    return vo_dot_fused(f) && f->prec <= VIJP_DDREF_MAX_PREC && !vo_dot_hook_broken();
}

/* The oracle's operator for op (the whole call when the fast path cannot run). */
static void oracle(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                   const vijp_format *f)
{
    if (op == OP_FORWARD) vo_dense_forward(L, th, in, B, out, f);
    else if (op == OP_JVP) vo_dense_jvp(L, th, X, B, in, out, f);
    else if (op == OP_VJP) vo_dense_vjp(L, th, X, B, in, out, f);
    else vo_dense_vjp_param(L, th, X, B, in, out, f);
}

/* One call's doubles: the matrix A (rows × k, column-major), the right
 * side Bh + Bl (k × cols), the bias c, and the results Ch + Cm + Cl (Cm 0
 * in double-double) with their bounds. */
typedef struct {
    size_t rows, cols, k;
    double *A, *Bh, *Bl, *c, *Ch, *Cm, *Cl, *bound;
} dd_problem;

/* count doubles, left unset: every one is written before it is read (load,
 * then the kernels), and zeroing megabytes per call would cost as much as
 * the products. */
static double *doubles(size_t count, size_t times)
{
    if (count > SIZE_MAX / sizeof(double) / times) vijp_out_of_memory(SIZE_MAX);
    return vijp_alloc_unset(count * times * sizeof(double));
}

static void problem_alloc(dd_problem *p, size_t rows, size_t cols, size_t k, int bias)
{
    /* every size is positive: the caller runs the oracle on an empty shape */
    p->rows = rows, p->cols = cols, p->k = k;
    p->A = doubles(rows, k);
    p->Bh = doubles(2 * k, cols);
    p->Bl = p->Bh + k * cols;
    p->c = bias ? doubles(rows, 1) : NULL;
    p->Ch = doubles(4 * rows, cols);
    p->Cm = p->Ch + rows * cols, p->Cl = p->Cm + rows * cols, p->bound = p->Cl + rows * cols;
}

static void problem_free(dd_problem *p) { free(p->A), free(p->Bh), free(p->c), free(p->Ch); }

/* The doubles of op's operands; 0 when one of them is not exactly there. */
static int load(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, dd_problem *p,
                mpfr_ptr tmp)
{
    size_t m = L->out, n = L->in;
    int ok = 1;
    if (op == OP_VJP_PARAM) { /* ∂W = [Gh Gl] · [Xhᵀ; Xhᵀ] + [Gh Gl] · [Xlᵀ; Xlᵀ]: 2B terms of a·(xh + xl) */
        for (size_t j = 0; j < B && ok; j++)
            for (size_t i = 0; i < m && ok; i++)
                ok = dd_of(in[i + j * m], &p->A[i + j * m], &p->A[i + (B + j) * m], tmp);
        for (size_t k = 0; k < n && ok; k++)
            for (size_t j = 0; j < B && ok; j++) {
                double *h = &p->Bh[k * 2 * B], *l = &p->Bl[k * 2 * B];
                ok = dd_of(X[k + j * n], &h[j], &l[j], tmp);
                h[B + j] = h[j], l[B + j] = l[j];
            }
        return ok;
    }
    if (op == OP_VJP) { /* Wᵀ (n × m), by tiles: one of them in cache read and written */
        enum { TILE = 32 };
        for (size_t k0 = 0; k0 < n && ok; k0 += TILE)
            for (size_t i0 = 0; i0 < m && ok; i0 += TILE)
                for (size_t k = k0; k < k0 + TILE && k < n && ok; k++)
                    for (size_t i = i0; i < i0 + TILE && i < m && ok; i++) ok = double_of(th[i + k * m], &p->A[k + i * n]);
    } else { /* W (m × n) as it is */
        for (size_t e = 0; e < m * n && ok; e++) ok = double_of(th[e], &p->A[e]);
    }
    for (size_t i = 0; p->c && i < m && ok; i++) ok = double_of(th[m * n + i], &p->c[i]);
    for (size_t e = 0; e < p->k * B && ok; e++) ok = dd_of(in[e], &p->Bh[e], &p->Bl[e], tmp);
    return ok;
}

/* C = A·(Bh + Bl) + c: in double-double for P <= 64 bits (Dot2's bound,
 * about N²u²·Σ|terms| = 2^-90 of it at N = 256, leaves ~26 bits to the
 * rounding test), in triple-double above (double-double's 2^-90 could not
 * decide a 106-bit rounding; triple-double's about 2N³u³ = 2^-134 leaves
 * ~28 bits, for twice the work). */
static void products(dd_problem *p, mpfr_prec_t P)
{
    if (P <= 64) {
        vijp_dd_gemm(p->rows, p->cols, p->k, p->A, p->rows, p->Bh, p->Bl, p->k, p->c, p->Ch, p->Cl, p->bound,
                     p->rows);
        memset(p->Cm, 0, p->rows * p->cols * sizeof *p->Cm);
        return;
    }
    for (size_t j = 0; j < p->cols; j++) {
        size_t o = j * p->rows;
        vijp_td_gemv(p->rows, p->k, p->A, p->rows, p->Bh + j * p->k, p->Bl + j * p->k, p->c, p->Ch + o, p->Cm + o,
                     p->Cl + o, p->bound + o);
    }
}

/* Output (i, j) of op by vo_dot, as the oracle computes it. */
static void by_vo_dot(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                      size_t i, size_t j, mpfr_srcptr *ptrs)
{
    size_t m = L->out, n = L->in;
    if (op == OP_FORWARD) vo_dot_strided(out[i + j * m], th[m * n + i], &th[i], m, &in[j * n], 1, n, ptrs);
    else if (op == OP_JVP) vo_dot_strided(out[i + j * m], NULL, &th[i], m, &in[j * n], 1, n, ptrs);
    else if (op == OP_VJP) vo_dot_strided(out[i + j * n], NULL, &th[i * m], 1, &in[j * m], 1, m, ptrs);
    else vo_dot_strided(out[i + j * m], NULL, &in[i], m, &X[j], n, B, ptrs); /* ∂W(i, j): j is W's column */
}

void vijp_ref_dense_op(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                       const vijp_format *f, vijp_ddref_stats *st)
{
    double scale = st && st->bound_scale > 0 ? st->bound_scale : 1;
    if (st) st->outputs = st->fallbacks = 0, st->whole_oracle = 1;
    size_t m = L->out, n = L->in;
    /* the batch-1 parameter gradient is one product per output: vo_dot1's mpfr_mul already */
    size_t terms = op == OP_VJP_PARAM ? 2 * B : op == OP_VJP ? m : n;
    int pays = op == OP_VJP_PARAM ? B >= VIJP_DDREF_MIN_BATCH : terms >= VIJP_DDREF_MIN_TERMS;
    if (!applies(f) || (op == OP_VJP_PARAM && B < 2) || !B || !m || !n || !(pays || (st && st->any_size)) ||
        mpfr_get_prec(out[0]) > VIJP_DDREF_MAX_PREC) {
        oracle(op, L, th, X, B, in, out, f);
        return;
    }
    dd_problem p;
    if (op == OP_VJP_PARAM) problem_alloc(&p, m, n, 2 * B, 0);
    else if (op == OP_VJP) problem_alloc(&p, n, B, m, 0);
    else problem_alloc(&p, m, B, n, op == OP_FORWARD);
    mpfr_prec_t P = mpfr_get_prec(out[0]); /* the results' precision, which vo_dot rounds to */
    mpfr_t tmp;
    mpfr_init2(tmp, f->prec > P ? f->prec : P); /* dd_of checks its subtraction exact all the same */
    int ok = load(op, L, th, X, B, in, &p, tmp);
    mpfr_clear(tmp);
    if (!ok) {
        problem_free(&p);
        oracle(op, L, th, X, B, in, out, f);
        return;
    }
    products(&p, P);
    round_scratch s;
    scratch_init(&s, P);
    size_t longest = m > n ? m : n, fallbacks = 0;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * (longest > B ? longest : B) + 1, sizeof *ptrs);
    for (size_t j = 0; j < p.cols; j++)
        for (size_t i = 0; i < p.rows; i++) {
            size_t e = i + j * p.rows; /* out's layout: rows × cols, column-major, for every op */
            if (round_in(out[e], p.Ch[e], p.Cm[e], p.Cl[e], p.bound[e] * scale, &s)) continue;
            by_vo_dot(op, L, th, X, B, in, out, i, j, ptrs);
            fallbacks++;
        }
    if (op == OP_VJP_PARAM) /* ∂b_i = Σ_j g(i, j): B terms, by vo_dot as the oracle */
        for (size_t i = 0; i < m; i++) vo_dot_strided(out[m * n + i], NULL, &in[i], m, NULL, 0, B, ptrs);
    free(ptrs);
    scratch_clear(&s);
    problem_free(&p);
    if (st) st->outputs = p.rows * p.cols - fallbacks, st->fallbacks = fallbacks, st->whole_oracle = 0;
}

void vijp_ref_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vijp_ref_dense_op(OP_FORWARD, L, th, NULL, B, X, Y, f, NULL);
}

void vijp_ref_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f)
{
    vijp_ref_dense_op(OP_JVP, L, th, X, B, U, V, f, NULL);
}

void vijp_ref_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f)
{
    vijp_ref_dense_op(OP_VJP, L, th, X, B, Gy, Gx, f, NULL);
}

void vijp_ref_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f)
{
    vijp_ref_dense_op(OP_VJP_PARAM, L, th, X, B, Gy, Gt, f, NULL);
}

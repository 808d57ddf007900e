/* The upper reference level's dense parameter gradient in double-double
 * (half.h).
 *
 * The validation's upper level (2p bits) forms a dense layer's ∂W and ∂b
 * from its g and h rounded to p bits, and the comparison bounds that
 * gradient instead of comparing it (memo.c's form_half).  Rounding each
 * entry once at p bits (Ziv's test on a triple-double sum: outer.c)
 * cost more than the rest of the level at batch 16, most of it per
 * entry: a W² of short sums, each finished, tested and rounded.  The
 * bound needs no such rounding, only a sum far more accurate than 2^-p of
 * its terms: Dot2 gives γ_4B·γ_(2B+1) of them, about 2^-95 at batch 16.
 *
 * The bound, per entry (u = 2^-53, u_p = 2^-p, g̃ = RN_p(g), h̃ = RN_p(h),
 * S = Σ_b g·h, S̃ = Σ_b g̃·h̃, T = Σ_b |g||h|, s = hi + lo the kernel's
 * result, Q the held precision):
 *   |S̃ − S| <= Σ_b |g̃h̃ − gh| <= (2u_p + u_p²)·T;
 *   |s − S̃| <= γ_4B·γ_(2B+1)·T_k (ddot.h: N = 2B terms g0·h̃ and g1·h̃ of
 *     a double-double h̃, no underflow: every nonzero double here lies in
 *     [2^-450, 2^450], so each product's error term is a normal double and
 *     exact), T_k = Σ_b (|g0| + |g1|)·|h0| <= (1 + 4u)(1 + u_p)²·T;
 *   |RN_Q(s) − s| <= 2^-Q·|s| <= 2^-Q·(1 + 2^-40)·T.
 * With p <= 106 and Q > p the second-order parts (u_p², the (1 + …)
 * factors) fit in doubling the last two terms:
 *   |RN_Q(s) − S| <= (4·u_p + 2·γ_4B·γ_(2B+1) + 2^(1−Q))·T,
 * drift_half_kappa's k times 2^-p.  The one rounding at p bits this
 * replaces gave 4·u_p·T: at p = 106 and batch 16 the bound grows from
 * 2^-104·T to about 2^-94·T, 2^-41 of a double's ulp at the terms' scale
 * where the validation asks 2^-10. */
#include "half.h"
#include "base/fork.h"
#include "ddot/ddot.h"
#include "emu/dense_ref.h"
#include "vijp/error.h"
#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

double drift_half_kappa(long p, size_t B, long Q)
{
    const double u = 0x1p-53;
    double N = 2 * (double)B, g2N = 2 * N * u / (1 - 2 * N * u), gN1 = (N + 1) * u / (1 - (N + 1) * u);
    /* ldexp's exact scalings; the products' roundings inside 2^-40 */
    return (4 + ldexp(2 * g2N * gN1, (int)p) + ldexp(2, (int)(p + 1 - Q))) * (1 + 0x1p-40);
}

/* x's two doubles (x = d[0] + d[1] exactly, each the remainder rounded to
 * nearest), where both are zero or within [2^-450, 2^450]: 1; else 0. */
static int split2(mpfr_srcptr x, double *d)
{
    if (mpfr_zero_p(x)) {
        d[0] = d[1] = 0;
        return 1;
    }
    if (!vijp_ddref_split_limbs(x, d, 2)) return 0;
    for (int k = 0; k < 2; k++) {
        double a = fabs(d[k]);
        if (a != 0 && !(a >= 0x1p-450 && a <= 0x1p450)) return 0;
    }
    return 1;
}

#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
/* a[0..4) := its value shifted left until a[3]'s top bit is set
 * (a nonzero); returns the shift. */
static long normalise4(mp_limb_t a[4])
{
    int top = 3;
    while (!a[top]) top--;
    long bits = 64L * top + 64 - __builtin_clzll(a[top]), sh = 256 - bits;
    int w = (int)(sh / 64), b = (int)(sh % 64);
    if (b) mpn_lshift(a, a, 4, (unsigned)b);
    if (w) {
        memmove(a + w, a, (size_t)(4 - w) * sizeof *a);
        memset(a, 0, (size_t)w * sizeof *a);
    }
    return sh;
}

/* The fast case: hi + lo exactly in 256 bits (lo within 2^-128 of hi's
 * last bit, or zero), rounded at pk's precision by its limbs.  0 where it
 * is not that case. */
static int put_limbs(vijp_packed *pk, size_t idx, double hi, double lo)
{
    int eh, el;
    double fh = frexp(fabs(hi), &eh); /* |hi| = fh·2^eh, fh in [1/2, 1): Mh = fh·2^53 */
    mp_limb_t a[4] = {0, 0, 0, 0};
    uint64_t Mh = (uint64_t)ldexp(fh, 53);
    long e = eh; /* MPFR's exponent: |value| = 0.a × 2^e */
    if (lo == 0) a[3] = Mh << 11;
    else {
        double fl = frexp(fabs(lo), &el);
        uint64_t Ml = (uint64_t)ldexp(fl, 53);
        long d = (long)eh - el; /* |hi| + ±|lo| = (Mh·2^d ± Ml)·2^(el − 53) */
        if (d < 1 || d > 128) return 0;
        int w = (int)(d / 64), b = (int)(d % 64);
        a[w] = Mh << b;
        if (b) a[w + 1] = Mh >> (64 - b); /* Mh < 2^53: bits d … d + 52, within a[0..3) */
        if ((lo < 0) == (hi < 0)) mpn_add_1(a, a, 4, Ml);
        else mpn_sub_1(a, a, 4, Ml); /* Ml < 2^53 <= Mh·2^d: stays positive */
        e = 256 - normalise4(a) + el - 53;
    }
    long nQ = (long)pk->limbs;
    if (nQ > 4) return 0;
    vijp_limbs_round(a, 4, (long)pk->prec, &e);
    if (e < mpfr_get_emin() || e > mpfr_get_emax()) return 0;
    memcpy(pk->sig + idx * pk->limbs, a + 4 - nQ, (size_t)nQ * sizeof *a);
    vijp_packed_put_regular(pk, idx, e, hi < 0);
    return 1;
}
#else
static int put_limbs(vijp_packed *pk, size_t idx, double hi, double lo)
{
    (void)pk, (void)idx, (void)hi, (void)lo;
    return 0;
}
#endif

void drift_half_put_dd(vijp_packed *pk, size_t idx, double hi, double lo)
{
    if (hi == 0) { /* then lo is zero too: an exact zero, +0 as vo_dot gives */
        memset(pk->sig + idx * pk->limbs, 0, pk->limbs * sizeof *pk->sig);
        vijp_packed_put_special(pk, idx, MPFR_ZERO_KIND, 0);
        return;
    }
    if (put_limbs(pk, idx, hi, lo)) return;
    mpfr_t t; /* a lo far below hi, limbs not 64 bits: MPFR's one rounding */
    mpfr_init2(t, pk->prec);
    mpfr_set_d(t, hi, MPFR_RNDN); /* exact: pk->prec >= 53 */
    mpfr_add_d(t, t, lo, MPFR_RNDN);
    vijp_packed_set(pk, idx, t);
    mpfr_clear(t);
}

/* Columns of ∂W (then ∂b as column n) a gemm call forms at a time: its
 * three m-row scratch blocks stay within a few hundred kB at width 1024. */
#define HALF_COLUMNS 32

typedef struct {
    size_t m, K;
    const double *A, *Bh, *Bl; /* A: m × K; Bh, Bl: K × (n + 1), the last column ones */
    double *scratch;           /* per part: Ch, Cl, bound, m × HALF_COLUMNS each */
    vijp_packed *pk;
    int unbounded[VIJP_FORK_MAX_THREADS];
} half_job;

static void columns(void *ctx, size_t part, size_t begin, size_t end)
{
    half_job *J = ctx;
    size_t m = J->m, block = m * HALF_COLUMNS;
    double *Ch = J->scratch + part * 3 * block, *Cl = Ch + block, *bound = Cl + block;
    for (size_t k0 = begin; k0 < end; k0 += HALF_COLUMNS) {
        size_t c = end - k0 < HALF_COLUMNS ? end - k0 : HALF_COLUMNS;
        if (vijp_dd_gemm(m, c, J->K, J->A, m, J->Bh + k0 * J->K, J->Bl + k0 * J->K, J->K, NULL, Ch, Cl, bound, m)) {
            J->unbounded[part] = 1;
            return;
        }
        for (size_t e = 0; e < m * c; e++) drift_half_put_dd(J->pk, m * k0 + e, Ch[e], Cl[e]);
    }
}

/* A (m × 2B): g's first doubles, then its second; Bh, Bl (2B × (n + 1)):
 * h's two doubles, twice over, then a column of ones.  0 where a value
 * does not split (split2). */
static int load(const vijp_mat *hp, const vijp_mat *gp, double *A, double *Bh, double *Bl)
{
    size_t m = gp->rows, n = hp->rows, B = gp->cols, K = 2 * B;
    double d[2];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < m; i++) {
            if (!split2(gp->m[i + b * m], d)) return 0;
            A[i + b * m] = d[0], A[i + (B + b) * m] = d[1];
        }
    for (size_t k = 0; k < n; k++)
        for (size_t b = 0; b < B; b++) {
            if (!split2(hp->m[k + b * n], d)) return 0;
            Bh[b + k * K] = Bh[B + b + k * K] = d[0];
            Bl[b + k * K] = Bl[B + b + k * K] = d[1];
        }
    for (size_t j = 0; j < K; j++) Bh[j + n * K] = 1, Bl[j + n * K] = 0;
    return 1;
}

int drift_half_param_dd(const vijp_layer *L, const vijp_mat *hp, const vijp_mat *gp, const vijp_format *held,
                        int threads, vijp_mat *out)
{
    size_t m = L->out, n = L->in, B = gp->cols, K = 2 * B;
    if (strcmp(L->type->name, "dense") || !m || !n || B < 2 || hp->cols != B || hp->rows != n || gp->rows != m ||
        !hp->m || !gp->m || hp->fmt->kind != VIJP_MPFR || gp->fmt->kind != VIJP_MPFR ||
        hp->fmt->prec > VIJP_DD_PREC || gp->fmt->prec > VIJP_DD_PREC || held->kind != VIJP_MPFR || held->prec > 256 ||
        held->prec <= gp->fmt->prec || K > VIJP_DD_MAX_TERMS)
        return 0;
    double *A = vijp_alloc_array(m * K, sizeof *A), *Bh = vijp_alloc_array(K * (n + 1), sizeof *Bh);
    double *Bl = vijp_alloc_array(K * (n + 1), sizeof *Bl);
    int done = load(hp, gp, A, Bh, Bl);
    if (done) {
        size_t parts = vijp_fork_parts(threads, n + 1, (double)(m * (n + 1) * K), VIJP_FORK_MIN_WORK);
        half_job *J = vijp_alloc(sizeof *J);
        *J = (half_job){m, K, A, Bh, Bl, vijp_alloc_array(parts * 3 * m * HALF_COLUMNS, sizeof(double)), NULL, {0}};
        vijp_mat grad;
        vijp_mat_init_packed(&grad, m * n + m, 1, held);
        J->pk = grad.packed;
        vijp_fork((int)parts, n + 1, (double)(m * (n + 1) * K), columns, J);
        done = !vijp_fork_any(J->unbounded);
        if (done) *out = grad;
        else vijp_mat_clear(&grad);
        free(J->scratch), free(J);
    }
    free(A), free(Bh), free(Bl);
    return done;
}

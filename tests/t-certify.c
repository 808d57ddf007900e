/* Certification (DESIGN §4): vijp_certify_matrix against matrices whose
 * smallest singular value is known or bounded independently, exactly
 * rank-deficient matrices, Kahan matrices, well-conditioned large ones; the
 * verdicts of real layers (vijp_certify_layer), cokernel bases, bad input,
 * declarations checked, and the activation analysis.
 *
 * The oracle of every adversarial case: for the double matrix J (m × n,
 * m <= n) and ANY nonzero y ∈ R^m,
 *     σ_m(J) = min_{‖y‖=1} ‖Jᵀy‖ <= ‖Jᵀy‖ / ‖y‖
 * (Courant–Fischer).  It is evaluated in MPFI at MP_PREC bits, for y given
 * exactly (MPFR numbers or doubles), so its upper end is a rigorous upper
 * bound on the exact quotient: no slack is needed (a relative slack such as
 * 2^-200 on a round-to-nearest evaluation would not be justified where Jᵀy
 * cancels to nearly 0, which is exactly the near-null case that matters).
 * A certificate claims σ_m(J) > s, so s < bound must hold for every y.
 * A false "certified-submersive" is the worst bug this project can have. */
#include "testutil.h"
#include "vijp/certify.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MP_PREC 256

/* ---- helpers ----------------------------------------------------------- */

static long rand_int(vijp_rng *r, long lo, long hi) { return lo + (long)(vijp_rng_u64(r) % (uint64_t)(hi - lo + 1)); }

/* 10^e for e uniform in [lo, hi], at MP_PREC bits. */
static void log_uniform(mpfr_t x, vijp_rng *r, double lo, double hi)
{
    mpfr_set_d(x, lo + (hi - lo) * vijp_rng_uniform(r), MPFR_RNDN);
    mpfr_exp10(x, x, MPFR_RNDN);
}

static mpfr_t *mp_vec(size_t len)
{
    mpfr_t *v = malloc((len ? len : 1) * sizeof *v);
    ck_assert(v != NULL);
    for (size_t i = 0; i < len; i++) mpfr_init2(v[i], MP_PREC);
    return v;
}

static void mp_vec_free(mpfr_t *v, size_t len)
{
    for (size_t i = 0; i < len; i++) mpfr_clear(v[i]);
    free(v);
}

/* Q (k × k, column-major) := H_1 ⋯ H_k, H = I − 2 v vᵀ / vᵀv with v seeded
 * Gaussian: orthogonal up to ~k·2^-256 at MP_PREC bits.  (The oracle does
 * not rely on Q's orthogonality: it bounds σ_min for any y.) */
static void mp_orthogonal(mpfr_t *Q, size_t k, vijp_rng *r)
{
    mpfr_t *v = mp_vec(k), t, w, beta;
    mpfr_inits2(MP_PREC, t, w, beta, (mpfr_ptr)0);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k; j++) mpfr_set_ui(Q[i + j * k], i == j, MPFR_RNDN);
    for (size_t h = 0; h < k; h++) {
        mpfr_set_zero(t, 1);
        for (size_t i = 0; i < k; i++) {
            mpfr_set_d(v[i], vijp_rng_normal(r), MPFR_RNDN);
            mpfr_fma(t, v[i], v[i], t, MPFR_RNDN);
        }
        mpfr_ui_div(beta, 2, t, MPFR_RNDN);
        for (size_t j = 0; j < k; j++) { /* column j := column j − β v (vᵀ column j) */
            mpfr_set_zero(w, 1);
            for (size_t i = 0; i < k; i++) mpfr_fma(w, v[i], Q[i + j * k], w, MPFR_RNDN);
            mpfr_mul(w, w, beta, MPFR_RNDN);
            for (size_t i = 0; i < k; i++) {
                mpfr_mul(t, w, v[i], MPFR_RNDN);
                mpfr_sub(Q[i + j * k], Q[i + j * k], t, MPFR_RNDN);
            }
        }
    }
    mpfr_clears(t, w, beta, (mpfr_ptr)0);
    mp_vec_free(v, k);
}

/* J = U diag(σ) Vᵀ (U m × m, V n × n, σ of length min(m, n)) at MP_PREC
 * bits, each entry rounded once to double. */
static void mp_svd_compose(double *J, size_t m, size_t n, mpfr_t *U, mpfr_t *V, mpfr_t *sig)
{
    size_t r = m < n ? m : n;
    mpfr_t acc, t;
    mpfr_inits2(MP_PREC, acc, t, (mpfr_ptr)0);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            mpfr_set_zero(acc, 1);
            for (size_t l = 0; l < r; l++) {
                mpfr_mul(t, U[i + l * m], sig[l], MPFR_RNDN);
                mpfr_fma(acc, t, V[j + l * n], acc, MPFR_RNDN);
            }
            J[i + j * m] = mpfr_get_d(acc, MPFR_RNDN);
        }
    mpfr_clears(acc, t, (mpfr_ptr)0);
}

/* Rigorous upper bound on ‖Jᵀy‖/‖y‖ for the double m × n J and y given
 * exactly as MPFR numbers: MPFI at MP_PREC bits (outward rounding), the
 * upper end rounded up to double.  +Inf when y is 0. */
static double oracle_bound_mp(const double *J, size_t m, size_t n, mpfr_t *y)
{
    mpfi_t z, t, num, den;
    mpfi_init2(z, MP_PREC), mpfi_init2(t, MP_PREC), mpfi_init2(num, MP_PREC), mpfi_init2(den, MP_PREC);
    mpfi_set_ui(num, 0), mpfi_set_ui(den, 0);
    for (size_t k = 0; k < n; k++) {
        mpfi_set_ui(z, 0);
        for (size_t i = 0; i < m; i++) {
            mpfi_set_fr(t, y[i]);
            mpfi_mul_d(t, t, J[i + k * m]);
            mpfi_add(z, z, t);
        }
        mpfi_sqr(z, z);
        mpfi_add(num, num, z);
    }
    for (size_t i = 0; i < m; i++) {
        mpfi_set_fr(t, y[i]);
        mpfi_sqr(t, t);
        mpfi_add(den, den, t);
    }
    double b = INFINITY;
    if (!mpfi_has_zero(den)) {
        mpfr_t hi;
        mpfr_init2(hi, MP_PREC);
        mpfi_div(num, num, den);
        mpfi_sqrt(num, num);
        mpfi_get_right(hi, num);
        b = mpfr_get_d(hi, MPFR_RNDU);
        mpfr_clear(hi);
    }
    mpfi_clear(z), mpfi_clear(t), mpfi_clear(num), mpfi_clear(den);
    return b;
}

static double oracle_bound_d(const double *J, size_t m, size_t n, const double *y)
{
    mpfr_t *v = mp_vec(m);
    for (size_t i = 0; i < m; i++) mpfr_set_d(v[i], y[i], MPFR_RNDN); /* exact */
    double b = oracle_bound_mp(J, m, n, v);
    mp_vec_free(v, m);
    return b;
}

/* LAPACK's (dgesvd) left singular vector for the m-th singular value of J
 * (for m > n: the last column of the full U, in the numerical cokernel). */
static void lapack_last_left(const double *J, size_t m, size_t n, double *y)
{
    size_t r = m < n ? m : n;
    double *A = malloc(m * n * sizeof *A), *S = malloc(r * sizeof *S), *U = malloc(m * m * sizeof *U),
           *sup = malloc(r * sizeof *sup), vt;
    ck_assert(A && S && U && sup);
    memcpy(A, J, m * n * sizeof *A);
    lapack_int info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'A', 'N', (int)m, (int)n, A, (int)m, S, U, (int)m, &vt, 1, sup);
    ck_assert_msg(info == 0, "dgesvd info %d", (int)info);
    memcpy(y, U + (m - 1) * m, m * sizeof *y);
    free(A), free(S), free(U), free(sup);
}

/* ---- verdict bookkeeping ----------------------------------------------- */

#define N_PRECS 8 /* certified-mpfr:106 · 2^k, k < N_PRECS */
typedef struct {
    const char *name;
    long cases, cert_double, cert_mpfr, by_prec[N_PRECS], not_sub, not_sub_proven, inconclusive, bounded;
    double worst; /* largest s / bound seen */
    /* full-rank cases (m <= n, σ_m proven > 0) by the prescribed κ = σ_max/σ_min:
     * [1, 1e5), [1e5, 1e12), [1e12, 1e16), [1e16, ∞); and how many certified */
    long band_cases[4], band_cert[4];
} tally;

static int kappa_band(double kappa) { return kappa < 1e5 ? 0 : kappa < 1e12 ? 1 : kappa < 1e16 ? 2 : 3; }

static void tally_print(const tally *t)
{
    fprintf(stderr,
            "certify: %s: %ld cases: certified in double %ld, in MPFR %ld (106:%ld 212:%ld 424:%ld 848:%ld 1696:%ld "
            "3392:%ld), not-submersive %ld (%ld proven), inconclusive %ld; largest s/oracle bound %.6g over %ld "
            "bounded certificates\n",
            t->name, t->cases, t->cert_double, t->cert_mpfr, t->by_prec[0], t->by_prec[1], t->by_prec[2],
            t->by_prec[3], t->by_prec[4], t->by_prec[5], t->not_sub, t->not_sub_proven, t->inconclusive, t->worst,
            t->bounded);
    if (t->band_cases[0] + t->band_cases[1] + t->band_cases[2] + t->band_cases[3])
        fprintf(stderr, "certify: %s: certified by κ band: [1,1e5) %ld/%ld, [1e5,1e12) %ld/%ld, [1e12,1e16) %ld/%ld, "
                "[1e16,∞) %ld/%ld\n", t->name, t->band_cert[0], t->band_cases[0], t->band_cert[1], t->band_cases[1],
                t->band_cert[2], t->band_cases[2], t->band_cert[3], t->band_cases[3]);
}

/* Whether Jᵀy = 0 exactly (J m × n and y doubles): each product is exact
 * in 106 bits and lies in [2^-2148, 2^2048), so sums of up to 16 of them
 * are exact at 4400 bits. */
static int exact_null(const double *J, size_t m, size_t n, const double *y)
{
    mpfr_t acc, t;
    mpfr_init2(acc, 4400), mpfr_init2(t, 106);
    int zero = 1;
    for (size_t k = 0; k < n && zero; k++) {
        mpfr_set_zero(acc, 1);
        for (size_t i = 0; i < m; i++) {
            mpfr_set_d(t, J[i + k * m], MPFR_RNDN);
            mpfr_mul_d(t, t, y[i], MPFR_RNDN);
            mpfr_add(acc, acc, t, MPFR_RNDN);
        }
        zero = mpfr_zero_p(acc);
    }
    mpfr_clear(acc), mpfr_clear(t);
    return zero;
}

/* The exact rank of a double matrix, independently of src/certify_exact.c
 * (FLINT, integer elimination, modular ranks): Gaussian elimination over the
 * rationals with GMP, every double converted exactly (mpq_set_d), pivots any
 * nonzero entry.  Fine for the suites' 16 × 16. */
static size_t rank_rational(const double *J, size_t m, size_t n)
{
    mpq_t *a = malloc(m * n * sizeof *a), f, t;
    mpq_inits(f, t, NULL);
    for (size_t i = 0; i < m * n; i++) mpq_init(a[i]), mpq_set_d(a[i], J[i]);
    size_t rank = 0;
    for (size_t col = 0; col < n && rank < m; col++) {
        size_t piv = rank;
        while (piv < m && !mpq_sgn(a[piv + col * m])) piv++;
        if (piv == m) continue;
        for (size_t k = 0; k < n; k++) mpq_swap(a[piv + k * m], a[rank + k * m]);
        for (size_t i = rank + 1; i < m; i++) {
            if (!mpq_sgn(a[i + col * m])) continue;
            mpq_div(f, a[i + col * m], a[rank + col * m]);
            for (size_t k = col; k < n; k++) mpq_mul(t, f, a[rank + k * m]), mpq_sub(a[i + k * m], a[i + k * m], t);
        }
        rank++;
    }
    for (size_t i = 0; i < m * n; i++) mpq_clear(a[i]);
    mpq_clears(f, t, NULL);
    free(a);
    return rank;
}

/* A proven cokernel dimension, checked independently (m <= n): never above
 * the true one, m − rank over the rationals (rank_rational), and equal to it
 * when the certificate says the exact rank proved it; exact zero rows and
 * columns and a single exact null vector remain checked as before. */
static void check_proven_cokernel(const double *J, size_t m, size_t n, const vijp_certificate *c, const char *what,
                                  long cs)
{
    size_t truth = m - rank_rational(J, m, n);
    ck_assert_msg(c->cokernel_dim <= truth, "FALSE PROOF: %s case %ld (%zu × %zu): cokernel_dim %zu claimed proven, "
                  "exactly %zu (%s)", what, cs, m, n, c->cokernel_dim, truth, c->reason);
    if (!strcmp(c->method, "exact-rank")) {
        ck_assert_msg(c->cokernel_dim == truth, "%s case %ld: exact-rank cokernel %zu, exactly %zu", what, cs,
                      c->cokernel_dim, truth);
        return;
    }

    size_t zr = 0, zc = 0;
    for (size_t i = 0; i < m; i++) {
        size_t k = 0;
        while (k < n && J[i + k * m] == 0) k++;
        zr += k == n;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        while (i < m && J[i + k * m] == 0) i++;
        zc += i == m;
    }
    size_t rk = m - zr < n - zc ? m - zr : n - zc, by_zeros = m - (rk < m ? rk : m);
    if (m > n && by_zeros < m - n) by_zeros = m - n;
    ck_assert_msg(c->cokernel_dim > 0, "%s case %ld: proven cokernel of dimension 0", what, cs);
    if (c->cokernel_dim <= by_zeros) return;
    ck_assert_msg(c->cokernel_dim == 1 && c->num.cokernel_dim >= 1 && exact_null(J, m, n, c->num.cokernel),
                  "FALSE PROOF: %s case %ld (%zu × %zu): cokernel_dim %zu claimed proven; zeros prove %zu (%s)", what,
                  cs, m, n, c->cokernel_dim, by_zeros, c->reason);
}

/* Certify J (exact: no radius) and check the verdict against the oracle
 * bounds (s < bound for each; +Inf: no information) and the structure:
 * m > n is never certified and is proven rank-deficient; a J known to have
 * full row rank (full_rank) is never proven rank-deficient.  what/case/seed
 * name the case in a failure. */
static void check_cert(const double *J, size_t m, size_t n, const double *bounds, int nb, int full_rank, tally *t,
                       const char *what, long cs, uint64_t seed, vijp_certificate *keep)
{
    vijp_certificate c;
    vijp_error err;
    int rc = vijp_certify_matrix(J, NULL, m, n, NULL, &c, &err);
    ck_assert_msg(rc == 0, "%s case %ld (seed %llu, %zu × %zu): error %d %s", what, cs, (unsigned long long)seed, m,
                  n, rc, err.msg);
    t->cases++;
    if (c.verdict == VIJP_CERTIFIED_SUBMERSIVE) {
        ck_assert_msg(m <= n, "%s case %ld (seed %llu): a %zu × %zu matrix certified", what, cs,
                      (unsigned long long)seed, m, n);
        ck_assert_msg(c.s > 0 && isfinite(c.s), "%s case %ld: certified with s = %g", what, cs, c.s);
        double minb = INFINITY;
        for (int k = 0; k < nb; k++) {
            ck_assert_msg(c.s < bounds[k],
                          "FALSE CERTIFICATE: %s case %ld (seed %llu, %zu × %zu): %s proves σ_min > %.17g, but oracle "
                          "%d bounds σ_min <= %.17g",
                          what, cs, (unsigned long long)seed, m, n, c.method, c.s, k, bounds[k]);
            if (bounds[k] < minb) minb = bounds[k];
        }
        if (isfinite(minb)) {
            t->bounded++;
            if (c.s / minb > t->worst) t->worst = c.s / minb;
        }
        ck_assert_uint_eq(c.cokernel_dim, 0);
        if (!strcmp(c.method, "certified-double")) {
            ck_assert_int_eq(c.prec, 53);
            t->cert_double++;
        } else {
            long p = 0;
            ck_assert_msg(sscanf(c.method, "certified-mpfr:%ld", &p) == 1 && p == c.prec && p > 53, "method '%s' prec %ld",
                          c.method, c.prec);
            t->cert_mpfr++;
            for (int k = 0; k < N_PRECS; k++)
                if (p == 106L << k) t->by_prec[k]++;
        }
    } else {
        ck_assert_msg(isnan(c.s), "%s case %ld: verdict %s with s = %g", what, cs, vijp_verdict_name(c.verdict), c.s);
        ck_assert_msg(c.reason[0] != 0, "%s case %ld: %s without a reason", what, cs, vijp_verdict_name(c.verdict));
        if (c.verdict == VIJP_NOT_SUBMERSIVE) t->not_sub++, t->not_sub_proven += c.cokernel_proven;
        else t->inconclusive++;
        if (c.cokernel_proven) check_proven_cokernel(J, m, n, &c, what, cs);
    }
    if (full_rank)
        ck_assert_msg(!(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven),
                      "FALSE PROOF OF RANK DEFICIENCY: %s case %ld (seed %llu, %zu × %zu): %s", what, cs,
                      (unsigned long long)seed, m, n, c.reason);
    if (m > n)
        ck_assert_msg(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven && c.cokernel_dim >= m - n,
                      "%s case %ld: %zu × %zu gives %s (proven %d, cokernel %zu)", what, cs, m, n,
                      vijp_verdict_name(c.verdict), c.cokernel_proven, c.cokernel_dim);
    if (keep) *keep = c;
    else vijp_certificate_clear(&c);
}

/* ---- 1. prescribed singular values ------------------------------------- */

/* J = U diag(σ) Vᵀ at 256 bits with Householder-product U, V, rounded to
 * double.  Shapes cycle square / wide / tall / any, dims 1..16.  σ_max is 1
 * (half the cases), 10^U(−30, 30) or 10^U(−300, 300) (the latter reaches
 * subnormal Gram entries and overflowing ones); σ_min/σ_max = 10^U(−20, 0)
 * (70%: where double, its preconditioned route and MPFR at 106 and 212 bits
 * take over from each other: J's rounding caps κ(J) near 1/u anyway) or
 * 10^U(−300, 0);
 * the σ between are log-uniform; in 15% of the cases the smallest few σ are
 * exactly 0 (J in MPFR is then rank-deficient, its rounding J usually is
 * not: σ_min(J) ~ u·σ_max, and the oracle with y = U's last column, an exact
 * cokernel vector of the 256-bit J, bounds it by ‖(J − J_256)ᵀ y‖). */
static void prescribed_case(vijp_rng *r, long cs, uint64_t seed, tally *t, long dmin, long dmax, double rlo,
                            double rhi, int tall)
{
    size_t m, n;
    switch (cs % (tall ? 4 : 2)) {
    case 0: m = n = (size_t)rand_int(r, dmin, dmax); break;
    case 1: m = (size_t)rand_int(r, dmin, dmax - 1), n = (size_t)rand_int(r, (long)m + 1, dmax); break;
    case 2: n = (size_t)rand_int(r, dmin, dmax - 1), m = (size_t)rand_int(r, (long)n + 1, dmax); break;
    default: m = (size_t)rand_int(r, dmin, dmax), n = (size_t)rand_int(r, dmin, dmax); break;
    }
    size_t rk = m < n ? m : n;
    mpfr_t *U = mp_vec(m * m), *V = mp_vec(n * n), *sig = mp_vec(rk), smax, smin;
    mpfr_inits2(MP_PREC, smax, smin, (mpfr_ptr)0);
    mp_orthogonal(U, m, r);
    mp_orthogonal(V, n, r);
    double u = vijp_rng_uniform(r);
    if (u < 0.5) mpfr_set_ui(smax, 1, MPFR_RNDN);
    else if (u < 0.85) log_uniform(smax, r, -30, 30);
    else log_uniform(smax, r, -300, 300);
    log_uniform(smin, r, rlo, rhi); /* the ratio σ_min/σ_max */
    mpfr_mul(smin, smin, smax, MPFR_RNDN);
    /* log-uniform between σ_min and σ_max, σ_max first, σ_min last */
    mpfr_t lo, hi;
    mpfr_inits2(MP_PREC, lo, hi, (mpfr_ptr)0);
    mpfr_log10(lo, smin, MPFR_RNDN), mpfr_log10(hi, smax, MPFR_RNDN);
    for (size_t l = 0; l < rk; l++) {
        if (l == 0 && rk > 1) mpfr_set(sig[l], smax, MPFR_RNDN);
        else if (l == rk - 1) mpfr_set(sig[l], smin, MPFR_RNDN);
        else log_uniform(sig[l], r, mpfr_get_d(lo, MPFR_RNDN), mpfr_get_d(hi, MPFR_RNDN));
    }
    if (vijp_rng_uniform(r) < 0.15) /* exact zeros at the end */
        for (size_t z = (size_t)rand_int(r, 1, (long)rk), l = rk - z; l < rk; l++) mpfr_set_zero(sig[l], 1);
    double *J = malloc(m * n * sizeof *J), *y = malloc(m * sizeof *y);
    ck_assert(J && y);
    mp_svd_compose(J, m, n, U, V, sig);
    int finite = 1;
    for (size_t i = 0; i < m * n; i++) finite &= isfinite(J[i]) != 0;
    if (finite) {
        /* Full row rank known (m <= n): σ_m(J) >= σ_m(J_256) − ‖J − J_256‖₂
         * (Weyl); σ_m(J_256) is the prescribed σ_min up to the 256-bit
         * construction (orthogonality of U, V and the products, each within
         * ~2^-240 relative: 2^-200·σ_max bounds it); J − J_256 is one
         * rounding per entry, |δ| <= u|J_ij| + 2^-1075, so ‖J − J_256‖_F <=
         * u‖J‖_F(1 + u) + √(mn)·2^-1075 <= 2u‖J‖_F + mn·2^-1075. */
        int full_rank = 0;
        if (m <= n) {
            mpfr_t lb, e;
            mpfr_inits2(MP_PREC, lb, e, (mpfr_ptr)0);
            mpfr_set_zero(e, 1); /* ‖J‖_F² exactly (J's squares fit in 256 bits) */
            for (size_t i = 0; i < m * n; i++) {
                mpfr_set_d(lb, J[i], MPFR_RNDN);
                mpfr_fma(e, lb, lb, e, MPFR_RNDU);
            }
            mpfr_sqrt(e, e, MPFR_RNDU);
            mpfr_mul_2si(e, e, -52, MPFR_RNDU); /* 2u‖J‖_F >= u‖J‖_F(1 + u) */
            mpfr_sub(lb, sig[rk - 1], e, MPFR_RNDD);
            mpfr_mul_2si(e, smax, -200, MPFR_RNDU);
            mpfr_sub(lb, lb, e, MPFR_RNDD);
            mpfr_set_ui_2exp(e, (unsigned long)(m * n), -1075, MPFR_RNDU); /* >= √(mn)·2^-1075 */
            mpfr_sub(lb, lb, e, MPFR_RNDD);
            full_rank = mpfr_sgn(lb) > 0;
            mpfr_clears(lb, e, (mpfr_ptr)0);
        }
        double b[2];
        b[0] = oracle_bound_mp(J, m, n, U + (m - 1) * m); /* y = U's last column (exact, MPFR) */
        lapack_last_left(J, m, n, y);
        b[1] = oracle_bound_d(J, m, n, y); /* y = LAPACK's left vector for σ_m */
        vijp_certificate c;
        check_cert(J, m, n, b, 2, full_rank, t, "prescribed-σ", cs, seed, &c);
        if (full_rank) {
            mpfr_div(lo, smax, sig[rk - 1], MPFR_RNDN);
            int k = kappa_band(mpfr_get_d(lo, MPFR_RNDN));
            t->band_cases[k]++, t->band_cert[k] += c.verdict == VIJP_CERTIFIED_SUBMERSIVE;
        }
        vijp_certificate_clear(&c);
    }
    free(J), free(y);
    mpfr_clears(smax, smin, lo, hi, (mpfr_ptr)0);
    mp_vec_free(U, m * m), mp_vec_free(V, n * n), mp_vec_free(sig, rk);
}

START_TEST(prescribed_singular_values)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0001u);
    tally t = {.name = "prescribed σ"};
    long N = test_iters(1000);
    for (long cs = 0; cs < N; cs++) prescribed_case(&r, cs, seed, &t, 1, 16, vijp_rng_uniform(&r) < 0.7 ? -20 : -300, 0, 1);
    tally_print(&t);
    ck_assert(t.cases >= N * 9 / 10); /* only σ_max ~ 1e300 overflow cases are skipped */
    /* Not only "no false certificate": every case whose full rank the
     * oracle proves (σ_m(J) > 0 by Weyl, above) is certified, in every band
     * of κ: J is exact, so MPFR up to 4096 bits has the digits for any
     * σ_min/σ_max above ~2^-2000, far past κ = 1e300. */
    for (int k = 0; k < 4; k++)
        ck_assert_msg(t.band_cert[k] == t.band_cases[k], "full rank, κ band %d: certified %ld of %ld", k,
                      t.band_cert[k], t.band_cases[k]);
}
END_TEST

/* Item 1 around κ = 1/u, small: 2..5 rows, κ = 10^U(12, 17).  There
 * LAPACK's σ̂ (double route) and the MPFR estimate λ̂ of λ_min(fl_106(JJᵀ))
 * may exceed σ_min² by far more than the margins of the tries (0.98, 0.81,
 * ...), so the proof alone (e_G, c, the rounding directions) stands between
 * the certificate and a false claim: with e_G and c both dropped, or the
 * shifted Cholesky trusted, these cases produce false certificates. */
START_TEST(near_unit_roundoff)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0007u);
    tally t = {.name = "κ near 1/u, small"};
    long N = test_iters(600);
    for (long cs = 0; cs < N; cs++) prescribed_case(&r, cs, seed, &t, 2, 5, -17, -12, 0);
    tally_print(&t);
    ck_assert_msg(t.band_cert[2] + t.band_cert[3] == t.band_cases[2] + t.band_cases[3] && t.band_cases[2] > N / 4,
                  "full rank near κ = 1/u: certified %ld of %ld", t.band_cert[2] + t.band_cert[3],
                  t.band_cases[2] + t.band_cases[3]);
}
END_TEST

/* Orthonormal columns: Q of the QR of a seeded Gaussian k × k matrix. */
static void d_orthogonal(double *Q, size_t k, vijp_rng *r)
{
    double *tau = malloc(k * sizeof *tau);
    for (size_t i = 0; i < k * k; i++) Q[i] = vijp_rng_normal(r);
    ck_assert(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (int)k, (int)k, Q, (int)k, tau) == 0);
    ck_assert(LAPACKE_dorgqr(LAPACK_COL_MAJOR, (int)k, (int)k, (int)k, Q, (int)k, tau) == 0);
    free(tau);
}

/* J = U diag(σ) Vᵀ (m <= n) in double: U, V orthogonal from QR, σ_1 =
 * scale, σ_m = scale/κ, the rest log-uniform between (or all = scale when
 * flat). */
static void d_prescribed(double *J, size_t m, size_t n, double kappa, int flat, double scale, vijp_rng *r)
{
    double *U = malloc(m * m * sizeof *U), *V = malloc(n * n * sizeof *V), *US = malloc(m * m * sizeof *US);
    ck_assert(U && V && US);
    d_orthogonal(U, m, r), d_orthogonal(V, n, r);
    for (size_t l = 0; l < m; l++) { /* US = U diag(σ) */
        double sg = l == 0 ? 1 : l == m - 1 ? 1 / kappa : flat ? 1 : pow(kappa, -vijp_rng_uniform(r));
        for (size_t i = 0; i < m; i++) US[i + l * m] = U[i + l * m] * sg * scale;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)m, 1.0, US, (int)m, V, (int)n, 0.0, J,
                (int)m);
    free(U), free(V), free(US);
}

/* Item 1 where the double routes hand over to each other and to MPFR: m in
 * 8..48, n in m..48, κ = 10^U(4, 10) (direct route, preconditioned route,
 * their failures), spectra log-uniform or flat, scaled by 2^U(−30, 30).
 * Built in double; the oracle is LAPACK's left vector. */
START_TEST(double_routes)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0006u);
    tally t = {.name = "double routes' edges"};
    long N = test_iters(100);
    double *J = malloc(48 * 48 * sizeof *J), y[48];
    for (long cs = 0; cs < N; cs++) {
        size_t m = (size_t)rand_int(&r, 8, 48), n = (size_t)rand_int(&r, (long)m, 48);
        double kappa = pow(10, 4 + 6 * vijp_rng_uniform(&r));
        d_prescribed(J, m, n, kappa, cs % 3 == 2, ldexp(1, (int)rand_int(&r, -30, 30)), &r);
        lapack_last_left(J, m, n, y);
        double b = oracle_bound_d(J, m, n, y);
        check_cert(J, m, n, &b, 1, 0, &t, "double routes", cs, seed, NULL);
    }
    free(J);
    tally_print(&t);
    /* κ in [1e4, 1e10], J exact and far from 1/u: every one is certified,
     * by one double route or by MPFR (a certifier turning inconclusive in
     * this band would pass "no false certificate" but not this). */
    ck_assert_msg(t.cert_double + t.cert_mpfr == t.cases, "κ in [1e4, 1e10]: certified %ld of %ld",
                  t.cert_double + t.cert_mpfr, t.cases);
}
END_TEST

/* Enclosures: the certificate covers every J in [mid − rad, mid + rad]
 * (Weyl: σ_min(J) >= σ_min(mid) − ‖rad‖_F).  The worst member is near
 * J_adv = mid − rad ∘ sign(u vᵀ) (u, v: LAPACK's singular vectors of mid for
 * σ_min), which lowers σ_min by up to ~(2/π)‖rad‖_F: the oracle bounds
 * σ_min(J_adv) with y = u, J_adv's entries enclosed in MPFI, so s <
 * bound(J_adv) must hold.  Radii from 10^-3 to 2 times σ̂_min/√(mn), constant
 * or uniformly random per entry. */
static double oracle_bound_box(const double *mid, const double *rad, const double *u, const double *v, size_t m,
                               size_t n)
{
    mpfi_t z, t, e, num, den;
    mpfi_init2(z, MP_PREC), mpfi_init2(t, MP_PREC), mpfi_init2(e, MP_PREC), mpfi_init2(num, MP_PREC),
        mpfi_init2(den, MP_PREC);
    mpfi_set_ui(num, 0), mpfi_set_ui(den, 0);
    for (size_t k = 0; k < n; k++) {
        mpfi_set_ui(z, 0);
        for (size_t i = 0; i < m; i++) {
            mpfi_set_d(e, rad[i + k * m]); /* J_adv entry: mid − rad·sign(u_i v_k), enclosed */
            if ((u[i] >= 0) == (v[k] >= 0)) mpfi_neg(e, e);
            mpfi_add_d(e, e, mid[i + k * m]);
            mpfi_mul_d(t, e, u[i]);
            mpfi_add(z, z, t);
        }
        mpfi_sqr(z, z);
        mpfi_add(num, num, z);
    }
    for (size_t i = 0; i < m; i++) {
        mpfi_set_d(t, u[i]);
        mpfi_sqr(t, t);
        mpfi_add(den, den, t);
    }
    mpfr_t hi;
    mpfr_init2(hi, MP_PREC);
    mpfi_div(num, num, den);
    mpfi_sqrt(num, num);
    mpfi_get_right(hi, num);
    double b = mpfr_get_d(hi, MPFR_RNDU);
    mpfr_clear(hi);
    mpfi_clear(z), mpfi_clear(t), mpfi_clear(e), mpfi_clear(num), mpfi_clear(den);
    return b;
}

START_TEST(enclosure_radius)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0008u);
    tally t = {.name = "enclosures (Weyl)"};
    long N = test_iters(200);
    double J[8 * 12], rad[8 * 12], S[8], U[8 * 8], VT[12 * 12], A[8 * 12], sup[8], v[12];
    for (long cs = 0; cs < N; cs++) {
        size_t m = (size_t)rand_int(&r, 1, 8), n = (size_t)rand_int(&r, (long)m, 12);
        d_prescribed(J, m, n, pow(10, 6 * vijp_rng_uniform(&r)), 0, ldexp(1, (int)rand_int(&r, -30, 30)), &r);
        memcpy(A, J, m * n * sizeof *A);
        ck_assert(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'A', 'A', (int)m, (int)n, A, (int)m, S, U, (int)m, VT, (int)n, sup) == 0);
        for (size_t k = 0; k < n; k++) v[k] = VT[(m - 1) + k * n]; /* right vector for σ_m */
        double rho = pow(10, -3 + 3.3 * vijp_rng_uniform(&r)) * S[m - 1] / sqrt((double)(m * n));
        int flat = cs % 2;
        for (size_t i = 0; i < m * n; i++) rad[i] = flat ? rho : rho * vijp_rng_uniform(&r);
        double b = oracle_bound_box(J, rad, U + (m - 1) * m, v, m, n);
        vijp_certificate c;
        vijp_error err;
        ck_assert_msg(!vijp_certify_matrix(J, rad, m, n, NULL, &c, &err), "%s", err.msg);
        t.cases++;
        /* ‖rad‖_F rounded down, and s + ‖rad‖_F rounded down, in MPFR */
        mpfr_t fr, sum;
        mpfr_inits2(MP_PREC, fr, sum, (mpfr_ptr)0);
        mpfr_set_zero(fr, 1);
        for (size_t i = 0; i < m * n; i++) {
            mpfr_set_d(sum, rad[i], MPFR_RNDN);
            mpfr_fma(fr, sum, sum, fr, MPFR_RNDD);
        }
        mpfr_sqrt(fr, fr, MPFR_RNDD);
        ck_assert_msg(mpfr_cmp_d(fr, c.enclosure_radius) <= 0, "reported radius %.17g < ‖rad‖_F %.17g",
                      c.enclosure_radius, mpfr_get_d(fr, MPFR_RNDN));
        if (c.verdict == VIJP_CERTIFIED_SUBMERSIVE) {
            ck_assert_msg(c.s < b, "FALSE CERTIFICATE: enclosure case %ld (seed %llu, %zu × %zu): s = %.17g, a member has "
                                   "σ_min <= %.17g",
                          cs, (unsigned long long)seed, m, n, c.s, b);
            /* Weyl applied in full: the proof on mid gives s_mid < σ_min(mid)
             * <= bound(mid, y = u), and s <= s_mid − ‖rad‖_F */
            double bmid = oracle_bound_d(J, m, n, U + (m - 1) * m);
            mpfr_add_d(sum, fr, c.s, MPFR_RNDD);
            ck_assert_msg(mpfr_cmp_d(sum, bmid) < 0, "s %.17g + ‖rad‖_F %.17g is not below σ_min(mid) <= %.17g", c.s,
                          mpfr_get_d(fr, MPFR_RNDN), bmid);
            if (!strcmp(c.method, "certified-double")) t.cert_double++;
            else t.cert_mpfr++;
            t.bounded++;
            if (c.s / b > t.worst) t.worst = c.s / b;
        } else if (c.verdict == VIJP_NOT_SUBMERSIVE) t.not_sub++, t.not_sub_proven += c.cokernel_proven;
        else t.inconclusive++;
        ck_assert(!c.cokernel_proven); /* a box is never proven rank-deficient from its midpoint */
        mpfr_clears(fr, sum, (mpfr_ptr)0);
        vijp_certificate_clear(&c);
    }
    tally_print(&t);
    ck_assert_msg(t.bounded > N / 4, "only %ld certified", t.bounded);
}
END_TEST

/* ---- 2. exactly rank-deficient and near rank-deficient ----------------- */

/* Builds an exactly rank-deficient m × n double J (kind 0: A·B with small
 * integers, inner dimension k < m, optionally rows and columns scaled by
 * powers of two, all exact; 1: a row copied exactly as ±2^e times another;
 * 2: zero rows; 3: more than n − m zero columns; 4: m > n) and, for kinds
 * 0–2, an exact null vector y of Jᵀ (doubles, Jᵀy = 0 exactly); returns the
 * row on which y is nonzero (the one to perturb), or −1. */
static long rank_deficient(vijp_rng *r, int kind, double *J, size_t *pm, size_t *pn, double *y)
{
    size_t m, n;
    long row = -1;
    if (kind == 3) m = (size_t)rand_int(r, 1, 16), n = (size_t)rand_int(r, (long)m, 16);
    else if (kind == 4) n = (size_t)rand_int(r, 1, 15), m = (size_t)rand_int(r, (long)n + 1, 16);
    else m = (size_t)rand_int(r, 2, 16), n = (size_t)rand_int(r, 1, 16);
    *pm = m, *pn = n;
    memset(y, 0, m * sizeof *y);
    if (kind == 0) {
        size_t k = (size_t)rand_int(r, 1, (long)m - 1);
        double A[16 * 15], B[15 * 16];
        size_t p = (size_t)rand_int(r, 0, (long)m - 1);
        for (size_t i = 0; i < m; i++) y[i] = i == p ? 1 : (double)rand_int(r, -3, 3);
        for (size_t l = 0; l < k; l++) {
            double s = 0;
            for (size_t i = 0; i < m; i++)
                if (i != p) A[i + l * m] = (double)rand_int(r, -8, 8), s += y[i] * A[i + l * m];
            A[p + l * m] = -s; /* Σ_i y_i A_il = 0: |A_pl| <= 15·3·8 = 360 */
        }
        for (size_t i = 0; i < k * n; i++) B[i] = (double)rand_int(r, -8, 8);
        /* |J_ij| <= k·360·8 < 2^16: every product and partial sum is an
         * integer below 2^53, so the double product is exact */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t l = 0; l < k; l++) s += A[i + l * m] * B[l + j * k];
                J[i + j * m] = s;
            }
        if (vijp_rng_uniform(r) < 0.5) { /* D1 J D2 with powers of two: exact; null vector D1^-1 y */
            for (size_t i = 0; i < m; i++) {
                int e = (int)rand_int(r, -40, 40);
                for (size_t j = 0; j < n; j++) J[i + j * m] = ldexp(J[i + j * m], e);
                y[i] = ldexp(y[i], -e);
            }
            for (size_t j = 0; j < n; j++) {
                int e = (int)rand_int(r, -40, 40);
                for (size_t i = 0; i < m; i++) J[i + j * m] = ldexp(J[i + j * m], e);
            }
        }
        row = (long)p;
    } else if (kind == 4) {
        for (size_t i = 0; i < m * n; i++) J[i] = vijp_rng_uniform(r) < 0.5 ? (double)rand_int(r, -8, 8) : vijp_rng_normal(r);
    } else {
        for (size_t i = 0; i < m * n; i++) J[i] = vijp_rng_normal(r);
        if (kind == 1) {
            size_t a = (size_t)rand_int(r, 0, (long)m - 1), b = (size_t)rand_int(r, 0, (long)m - 2);
            b += b >= a;
            double tt = ldexp(vijp_rng_uniform(r) < 0.5 ? 1 : -1, (int)rand_int(r, -20, 20));
            for (size_t j = 0; j < n; j++) J[b + j * m] = tt * J[a + j * m]; /* exact */
            y[a] = tt, y[b] = -1;
            row = (long)b;
        } else if (kind == 2) {
            size_t z = (size_t)rand_int(r, 1, m < 3 ? (long)m : 3);
            for (size_t q = 0; q < z; q++) {
                size_t a = (size_t)rand_int(r, 0, (long)m - 1);
                for (size_t j = 0; j < n; j++) J[a + j * m] = 0;
                row = (long)a;
            }
            y[row] = 1;
        } else { /* kind 3: zc > n − m zero columns, so rank <= n − zc < m */
            size_t zc = (size_t)rand_int(r, (long)(n - m + 1), (long)n), idx[16];
            for (size_t j = 0; j < n; j++) idx[j] = j;
            for (size_t q = 0; q < zc; q++) { /* a random zc-subset (partial Fisher–Yates) */
                size_t w = (size_t)rand_int(r, (long)q, (long)n - 1), tmp = idx[q];
                idx[q] = idx[w], idx[w] = tmp;
                for (size_t i = 0; i < m; i++) J[i + idx[q] * m] = 0;
            }
        }
    }
    return row;
}

/* Never certified, whatever the shape or scaling.  The bound with the
 * exact null vector is exactly 0 (a check of the construction). */
START_TEST(exact_rank_deficient)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0002u);
    tally t = {.name = "exactly rank-deficient"};
    long N = test_iters(500);
    double J[16 * 16], y[16];
    for (long cs = 0; cs < N; cs++) {
        size_t m, n;
        long row = rank_deficient(&r, (int)(cs % 5), J, &m, &n, y);
        double b = row >= 0 ? oracle_bound_d(J, m, n, y) : INFINITY;
        if (row >= 0) ck_assert_msg(b == 0, "case %ld: the null vector is not exact (%g)", cs, b);
        vijp_certificate c;
        check_cert(J, m, n, &b, 1, 0, &t, "rank-deficient", cs, seed, &c);
        ck_assert_int_eq(t.cert_double + t.cert_mpfr, 0);
        /* every exactly singular matrix is proven so, with its exact cokernel dimension (issue 14) */
        size_t truth = m - rank_rational(J, m, n);
        ck_assert_msg(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven && c.cokernel_dim == truth,
                      "rank-deficient case %ld (%zu × %zu, kind %ld): %s, cokernel %zu (proven %d), exactly %zu: %s", cs, m,
                      n, cs % 5, vijp_verdict_name(c.verdict), c.cokernel_dim, c.cokernel_proven, truth, c.reason);
        vijp_certificate_clear(&c);
    }
    tally_print(&t);
}
END_TEST

/* The same with one entry of the row where y is nonzero moved by 2^-60
 * times its row and column scale (or, where that is absorbed in rounding,
 * by one ulp): the truth is unknown, but ‖J'ᵀy‖/‖y‖ with the old exact null
 * vector y still bounds σ_min(J') (= |δ|·|y_row|/‖y‖), and so does LAPACK's
 * vector. */
START_TEST(near_rank_deficient)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0003u);
    tally t = {.name = "near rank-deficient"};
    long N = test_iters(500);
    double J[16 * 16], y[16], yl[16];
    for (long cs = 0; cs < N; cs++) {
        size_t m, n;
        long row = rank_deficient(&r, (int)(cs % 3), J, &m, &n, y);
        size_t col = (size_t)rand_int(&r, 0, (long)n - 1);
        double *e = &J[row + col * m];
        /* the scale of the entry's row and column: the largest entry of either */
        double sc = 0;
        for (size_t j = 0; j < n; j++) sc = fmax(sc, fabs(J[row + j * m]));
        for (size_t i = 0; i < m; i++) sc = fmax(sc, fabs(J[i + col * m]));
        double old = *e;
        *e = old + ldexp(sc > 0 ? sc : 1, -60);
        if (*e == old) *e = nextafter(old, INFINITY);
        double b[2];
        b[0] = oracle_bound_d(J, m, n, y);
        lapack_last_left(J, m, n, yl);
        b[1] = oracle_bound_d(J, m, n, yl);
        check_cert(J, m, n, b, 2, 0, &t, "near-rank-deficient", cs, seed, NULL);
    }
    tally_print(&t);
}
END_TEST

/* Issue 14's cases.  [[1,2,3],[4,5,6],[1,2,3]]: rank exactly 2, which the
 * null-vector test could not prove (LAPACK's vector is not exactly in the
 * kernel).  1e155·I₃ (‖J‖_F² overflows double) and diag(1e300, 1e-300)
 * (σ_min = 1e-300 below the largest row's rounding): full rank, σ_min 1e155
 * and 1e-300 exactly, so a certificate must have s in (0.9σ_min, σ_min]. */
START_TEST(exact_rank_and_scales)
{
    vijp_certificate c;
    vijp_error err = {0};
    double A[9] = {1, 4, 1, 2, 5, 2, 3, 6, 3}; /* column-major */
    ck_assert(!vijp_certify_matrix(A, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven && c.cokernel_dim == 1, "%s %zu: %s",
                  vijp_verdict_name(c.verdict), c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
    double B[9] = {1e155, 0, 0, 0, 1e155, 0, 0, 0, 1e155};
    ck_assert(!vijp_certify_matrix(B, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e155 && c.s <= 1e155, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
    double C[4] = {1e300, 0, 0, 1e-300};
    ck_assert(!vijp_certify_matrix(C, NULL, 2, 2, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e-300 && c.s <= 1e-300, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
    /* tiny scale too: 1e-155·I₃, whose Gram entries underflow */
    for (int k = 0; k < 9; k++) B[k] *= 1e-310;
    ck_assert(!vijp_certify_matrix(B, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e-155 && c.s <= 1.0000001e-155, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
}
END_TEST

/* A proven cokernel dimension must be proven: J (3 × 4) with one exactly
 * zero row, one row (2^-60, 0, 0, 0) and one ordinary row has rank exactly 2,
 * cokernel dimension exactly 1; numerically (tolerance 4u·σ_max) it looks
 * like 2.  Proven not-submersive, yes; but a cokernel_dim reported as
 * proven (certify.h: "the proven one when cokernel_proven") must not exceed
 * the true 1.  Tall: m > n alone proves m − n, whatever else is found. */
START_TEST(proven_cokernel_dim)
{
    double J[3 * 4] = {0}, Jt[6 * 3];
    J[1] = 0x1p-60;
    for (size_t j = 0; j < 4; j++) J[2 + j * 3] = 1 + (double)j;
    vijp_certificate c;
    vijp_error err;
    ck_assert(!vijp_certify_matrix(J, NULL, 3, 4, NULL, &c, &err));
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.num.cokernel_dim, 2);
    ck_assert_msg(c.cokernel_dim == 1, "cokernel_dim %zu reported as proven; exactly 1 (%s)", c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
    /* 6 × 3 with independent integer columns: proven >= 3 by shape */
    for (size_t i = 0; i < 18; i++) Jt[i] = (double)((i * 7 + 3) % 11) - 5;
    ck_assert(!vijp_certify_matrix(Jt, NULL, 6, 3, NULL, &c, &err));
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 3);
    vijp_certificate_clear(&c);
    /* 3 × 1 (2, 1, −1)ᵀ: LAPACK's first cokernel vector happens to be an
     * exact null vector (a proof of dimension >= 1), and the shape proves 2 */
    double Jc[3] = {2, 1, -1};
    ck_assert(!vijp_certify_matrix(Jc, NULL, 3, 1, NULL, &c, &err));
    ck_assert(c.cokernel_proven);
    ck_assert_msg(c.cokernel_dim == 2, "cokernel_dim %zu (%s)", c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
}
END_TEST

/* ---- 3. Kahan matrices ------------------------------------------------- */

/* K = diag(1, s, …, s^{n−1})·(I − c·strict upper ones), c² + s² = 1: σ_min
 * tiny and far from what the diagonal suggests.  Bounded with LAPACK's left
 * vector (and, for Kᵀ, too). */
START_TEST(kahan)
{
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0004u);
    tally t = {.name = "Kahan"};
    long N = test_iters(30);
    double *K = malloc(40 * 40 * sizeof *K), *Kt = malloc(40 * 40 * sizeof *Kt), y[40];
    for (long cs = 0; cs < N; cs++) {
        size_t n = (size_t)rand_int(&r, 10, cs % 4 == 3 ? 40 : 24);
        double c = 0.2 + 0.7 * vijp_rng_uniform(&r), s = sqrt(1 - c * c), d = 1;
        for (size_t i = 0; i < n; i++, d *= s)
            for (size_t j = 0; j < n; j++) K[i + j * n] = j < i ? 0 : j == i ? d : -c * d;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) Kt[j + i * n] = K[i + j * n];
        for (int tr = 0; tr < 2; tr++) {
            const double *A = tr ? Kt : K;
            lapack_last_left(A, n, n, y);
            double b = oracle_bound_d(A, n, n, y);
            check_cert(A, n, n, &b, 1, 0, &t, tr ? "Kahan transposed" : "Kahan", cs, seed, NULL);
        }
    }
    free(K), free(Kt);
    tally_print(&t);
}
END_TEST

/* ---- 4. well-conditioned, larger --------------------------------------- */

/* Reach of the double certificate.  The direct route proves σ_min > s by
 * Cholesky of fl(JJᵀ) − (s² + e_G + c)I, e_G + c ≈ (n + m + 1)·u·‖J‖_F², at
 * s² = 0.98σ̂² and 0.81σ̂²; if both fail, the preconditioned route
 * (Z ≈ R^-T) gives s ≈ 0.9σ/1.025 = 0.88σ, before the direct route's last
 * tries at 0.5σ̂ and 0.1σ̂.  Within a factor 2 therefore holds wherever either
 * route succeeds.  With σ log-uniform on [σ_max/κ, σ_max],
 * ‖J‖_F² ≈ mσ_max²/(2 ln κ): 64² at κ 1e6 passes the 0.9 try, 512² and
 * 100–200 at 1e6 go preconditioned.  (Before the preconditioned route came
 * ahead of the 0.5σ̂ try, 100×150 at κ 1e6 got s = σ̂/2 rounded down, just
 * outside the factor 2: this test found it.)
 * Flat spectra (all σ = σ_max but one) have ‖J‖_F² ≈ m. */
START_TEST(well_conditioned)
{
    static const struct {
        size_t m, n;
        double kappa;
        int flat;
    } C[] = {{512, 512, 1e6, 0}, {512, 512, 1e6, 1}, {200, 200, 1e6, 0}, {64, 64, 1e6, 0}, {100, 150, 1e6, 0},
             {150, 200, 1e6, 0}, {128, 128, 1e6, 1}, {64, 100, 1, 0},    {1, 200, 1, 0}};
    uint64_t seed = test_seed();
    vijp_rng r;
    vijp_rng_seed(&r, seed ^ 0x5eed0005u);
    tally t = {.name = "well-conditioned"};
    char line[1024] = "certify: well-conditioned, all certified-double:";
    for (size_t k = 0; k < sizeof C / sizeof *C; k++) {
        size_t m = C[k].m, n = C[k].n;
        double *J = malloc(m * n * sizeof *J), *y = malloc(m * sizeof *y);
        ck_assert(J && y);
        d_prescribed(J, m, n, C[k].kappa, C[k].flat, ldexp(1, (int)rand_int(&r, -20, 20)), &r);
        lapack_last_left(J, m, n, y);
        double b = oracle_bound_d(J, m, n, y);
        vijp_certificate c;
        check_cert(J, m, n, &b, 1, 1, &t, "well-conditioned", (long)k, seed, &c); /* κ <= 1e6: full rank */
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s %zu×%zu κ %.0e%s s/σ %.3f", k ? ";" : "", m, n,
                 C[k].kappa, C[k].flat ? " flat" : "", c.s / b);
        ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c.method, "certified-double"),
                      "%zu × %zu, κ %g: %s %s (%s)", m, n, C[k].kappa, vijp_verdict_name(c.verdict), c.method, c.reason);
        /* s < σ_min(J) <= b, and within a factor 2: s >= b/2 >= σ_min/2 */
        ck_assert_msg(c.s >= 0.5 * b, "%zu × %zu, κ %g: s = %g, σ_min <= %g", m, n, C[k].kappa, c.s, b);
        /* LAPACK's view agrees: κ within p(m,n)·u·κ² of the truth; 1% is loose */
        ck_assert_msg(fabs(c.num.condition / C[k].kappa - 1) < 0.01, "condition %g", c.num.condition);
        vijp_certificate_clear(&c);
        free(J), free(y);
    }
    fprintf(stderr, "%s\n", line);
    tally_print(&t);
}
END_TEST

/* ---- 5. known verdicts of real layers ---------------------------------- */

typedef struct {
    vijp_net net;
    const vijp_layer *L;
    const double *theta;
} one_layer;

static void one_layer_init(one_layer *o, const char *spec, size_t width, uint64_t seed)
{
    vijp_error err;
    ck_assert_msg(!vijp_net_build(&o->net, spec, 1, width, &err), "%s: %s", spec, err.msg);
    ck_assert_msg(!vijp_net_init(&o->net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, seed, &err), "%s: %s", spec, err.msg);
    o->L = &o->net.layers[0];
    o->theta = o->net.theta[0];
}

static void certify_at(const one_layer *o, const double *x, vijp_certificate *c)
{
    vijp_error err;
    int rc = vijp_certify_layer(o->L, o->theta, x, NULL, c, &err);
    ck_assert_msg(rc == 0, "%s: error %d %s", o->L->type->name, rc, err.msg);
}

/* leaky:0.1 is submersive by declaration; J = diag(1 or α) exactly, so
 * σ_min = α = fl(0.1) exactly when some input is <= 0 (the enclosure of f′
 * there is the point α), and 1 when all are positive. */
START_TEST(layer_leaky)
{
    one_layer o;
    one_layer_init(&o, "leaky:0.1", 8, 1);
    double x[8] = {0.5, -1, 2, -0.25, 3, 1e-300, 7, 0};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_double_eq(c.s, 0.1);
    ck_assert_uint_eq(c.cokernel_dim, 0);
    ck_assert_uint_eq(c.num.rank, 8);
    vijp_certificate_clear(&c);
    double xp[8] = {0.5, 1, 2, 0.25, 3, 1e-300, 7, 4};
    certify_at(&o, xp, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_double_eq(c.s, 1);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* relu: J = diag([x > 0]) exactly; the inactive units (x <= 0, 0 included)
 * are exact zero rows, a proven cokernel of that dimension.  All active: J =
 * I, certified with s = 1 (no declaration: the enclosure's own proof). */
START_TEST(layer_relu)
{
    one_layer o;
    one_layer_init(&o, "relu", 8, 1);
    double x[8] = {0.5, -1, 2, -0.25, 3, 0, 7, -1e-300};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 4);
    ck_assert(isnan(c.s));
    vijp_certificate_clear(&c);
    double xp[8] = {0.5, 1, 2, 0.25, 3, 1e-300, 7, 4};
    certify_at(&o, xp, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_double_eq(c.s, 1);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* dense 12x8 (m > n): never submersive, by declaration and by structure,
 * cokernel dimension exactly 4 (orthogonal W has rank 8).  dense 8x8
 * orthogonal: σ = 1 up to the initialiser's O(u) orthogonality error; the
 * certificate's first try is s = √0.98·σ̂ = 0.98995, so s >= 0.98; and s < 1
 * + 8u (σ_max of W is at most 1 + O(u)). */
START_TEST(layer_dense)
{
    one_layer o;
    one_layer_init(&o, "dense:12x8", 8, 3);
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 4);
    ck_assert_uint_eq(c.num.rank, 8);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);

    one_layer_init(&o, "dense:8x8", 8, 3);
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "certified-double");
    ck_assert_msg(c.s >= 0.98 && c.s < 1 + 8 * 0x1p-53, "s = %.17g", c.s);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* Upper bound on f′(x) = sech²(x): correctly rounded upward at 256 bits. */
static double sech2_up(double x)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_sech(t, t, MPFR_RNDU);
    mpfr_sqr(t, t, MPFR_RNDU);
    double r = mpfr_get_d(t, MPFR_RNDU);
    mpfr_clear(t);
    return r;
}

/* tanh: submersive by declaration.  At |x| = 30·O(1) some f′ = sech² are
 * far below the rank tolerance 8u·max f′ (f′(30) ≈ 4e^-60 ≈ 3.5e-26), so the
 * double numerical rank is < 8 ("numerically degenerate in double") while
 * the MPFI enclosures still prove σ_min = min f′ > s > 0, with s the lower
 * end of a 128-bit enclosure rounded down: s <= f′min <= fmin = RU(f′min),
 * and s >= f′min(1 − 2^-120)(1 − 2^-52) >= fmin(1 − 2^-52)²(1 − 2^-120) >
 * fmin(1 − 2^-50) (enclosure width, the rounding of s, that of fmin).  At
 * |x| = 500, f′ ≈ 4e^-1000 is below double's range: no numerical proof at
 * all, the declaration alone makes it certified. */
START_TEST(layer_tanh)
{
    one_layer o;
    one_layer_init(&o, "tanh", 8, 1);
    double x[8] = {0.5 * 30, -1 * 30, 2 * 30, -0.25 * 30, 0.01 * 30, -0.7 * 30, 1.3 * 30, 0.1 * 30};
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_msg(c.num.rank < 8, "rank %zu", c.num.rank);
    double fmin = sech2_up(60); /* the largest |x| */
    ck_assert_msg(c.s > 0 && c.s <= fmin && c.s >= fmin * (1 - 0x1p-50), "s = %.17g, f′min <= %.17g", c.s, fmin);
    vijp_certificate_clear(&c);
    double xb[8] = {500, -500, 0.5, 1, -2, 500, 3, -0.1};
    certify_at(&o, xb, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_str_eq(c.method, "analytic");
    ck_assert_uint_eq(c.num.rank, 5);
    ck_assert_msg(strstr(c.reason, "declared submersive") != NULL, "reason '%s'", c.reason);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* ---- 6. cokernel bases ------------------------------------------------- */

/* ‖Q1 Q1ᵀ − Q2 Q2ᵀ‖_F for m × k Q1, Q2, in double. */
static double projector_diff(const double *Q1, const double *Q2, size_t m, size_t k)
{
    double *P = malloc(m * m * sizeof *P);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, (int)k, 1.0, Q1, (int)m, Q1, (int)m, 0.0, P,
                (int)m);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, (int)k, -1.0, Q2, (int)m, Q2, (int)m, 1.0, P,
                (int)m);
    double s = 0;
    for (size_t i = 0; i < m * m; i++) s += P[i] * P[i];
    free(P);
    return sqrt(s);
}

/* Both bases span the exact cokernel of J up to backward error: dgesdd's
 * left vectors are those of J + E with ‖E‖₂ <= p·u·‖J‖₂ (and the layer's
 * Householder QR, dgeqrf/dorgqr, those of W + E' with the same form of
 * bound, Higham Thm 19.4: ‖E'‖_F <= γ̃_{mn}‖W‖_F), so by Wedin's sin-θ
 * theorem each projector is within p·u·‖J‖/δ of the exact one in 2-norm, δ
 * = the smallest nonzero singular value (the gap to the zero ones); both
 * computed bases are orthonormal to p·u, which moves QQᵀ by as much again.
 * With rank-k projectors ‖·‖_F <= √(2k)‖·‖₂, and p = 16·m·n (γ̃ with a
 * generous constant): ‖P1 − P2‖_F <= 4√(2k)·16·m·n·u·‖J‖_F/δ. */
static double cokernel_bound(size_t m, size_t n, size_t k, double normF, double gap)
{
    return 4 * sqrt(2.0 * (double)k) * 16 * (double)(m * n) * 0x1p-53 * normF / gap;
}

START_TEST(cokernel_basis)
{
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_error err;
    for (int which = 0; which < 2; which++) {
        one_layer o;
        one_layer_init(&o, which ? "dense:12x8" : "relu", which ? 8 : 12, 7);
        size_t m = o.L->out, n = o.L->in;
        double x[12] = {0.5, -1, 2, -0.25, 3, 0, 7, -1e-300, 1, 2, -3, 4};
        vijp_certificate c;
        certify_at(&o, x, &c);
        size_t P = o.L->type->param_count(o.L);
        vijp_mat th = {.rows = P, .cols = 1, .fmt = &fd, .d = (double *)o.theta};
        vijp_mat xm = {.rows = n, .cols = 1, .fmt = &fd, .d = x};
        size_t k = vijp_layer_fragment_count(o.L, P ? &th : NULL, &xm);
        ck_assert_uint_eq(k, which ? 4 : 5);
        ck_assert_uint_eq(c.num.cokernel_dim, k);
        ck_assert_uint_eq(c.cokernel_dim, k);
        vijp_mat Q;
        vijp_mat_init(&Q, m, k, &fd);
        ck_assert_msg(!vijp_layer_cokernel(o.L, P ? &th : NULL, &xm, &Q, &err), "%s", err.msg);
        /* ‖J‖_F and the gap: relu J = diag(0/1): √7 and 1; orthogonal W:
         * √8 and 1 (σ = 1 up to O(u)) */
        double d = projector_diff(c.num.cokernel, Q.d, m, k), bound = cokernel_bound(m, n, k, sqrt(8.0), 1);
        ck_assert_msg(d <= bound, "%s: ‖P1 − P2‖_F = %g > %g", o.L->type->name, d, bound);
        fprintf(stderr, "certify: cokernel of %s: ‖P1 − P2‖_F = %.3g (bound %.3g)\n", o.L->type->name, d, bound);
        vijp_mat_clear(&Q);
        vijp_certificate_clear(&c);
        vijp_net_free(&o.net);
    }
}
END_TEST

/* ---- 7. bad input ------------------------------------------------------ */

START_TEST(bad_input)
{
    vijp_certificate c;
    vijp_error err;
    double J[6] = {1, 2, 3, 4, 5, 6}, rad[6] = {0};
    J[4] = NAN;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = -INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = 5;
    rad[2] = -1e-300;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    rad[2] = NAN;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    rad[2] = INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 0, 3, NULL, &c, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 0, NULL, &c, &err), VIJP_EDIM);
    /* a radius wider than the proof: σ_min([1 2 3; 4 5 6]) ≈ 0.77, and
     * ‖rad‖_F = 1 takes it all (Weyl): not certified */
    rad[2] = 1;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), 0);
    ck_assert_int_ne(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    vijp_certificate_clear(&c);
    /* a small radius costs exactly ‖rad‖_F (rounded down) */
    vijp_certificate c0;
    rad[2] = 0x1p-30;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c0, &err), 0);
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), 0);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert(c.enclosure_radius >= 0x1p-30);
    ck_assert_msg(c.s <= c0.s - 0x1p-30, "s %.17g vs %.17g", c.s, c0.s);
    vijp_certificate_clear(&c), vijp_certificate_clear(&c0);

    one_layer o;
    one_layer_init(&o, "dense:4x4", 4, 1);
    double x[4] = {1, 2, 3, 4};
    double *th = o.net.theta[0], keep = th[5];
    th[5] = NAN;
    ck_assert_int_eq(vijp_certify_layer(o.L, th, x, NULL, &c, &err), VIJP_EDOMAIN);
    th[5] = keep;
    x[2] = NAN;
    ck_assert_int_eq(vijp_certify_layer(o.L, th, x, NULL, &c, &err), VIJP_EDOMAIN);
    vijp_net_free(&o.net);
    one_layer_init(&o, "tanh", 4, 1);
    ck_assert_int_eq(vijp_certify_layer(o.L, NULL, x, NULL, &c, &err), VIJP_EDOMAIN);
    x[2] = INFINITY;
    ck_assert_int_eq(vijp_certify_layer(o.L, NULL, x, NULL, &c, &err), VIJP_EDOMAIN);

    vijp_activation_report a;
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 0, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, -5, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 10, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 20, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 0, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, INFINITY, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, NAN, 1e-9, &a, &err), VIJP_EINVAL);
    vijp_net_free(&o.net);
    one_layer_init(&o, "dense:4x4", 4, 1);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 1e-9, &a, &err), VIJP_EUNSUPPORTED);
    vijp_net_free(&o.net);
}
END_TEST

/* ---- 8. declarations checked ------------------------------------------- */

extern const vijp_layer_type vijp_layer_relu, vijp_layer_dense;

static unsigned claims_submersive(const vijp_layer *L)
{
    (void)L;
    return VIJP_DECL_SUBMERSIVE;
}

static unsigned claims_never(const vijp_layer *L)
{
    (void)L;
    return VIJP_DECL_NEVER_SUBMERSIVE;
}

/* A relu that claims to be submersive, at a point with inactive units (a
 * proven cokernel), and a square dense layer that claims never to be, at an
 * orthogonal W (certified): both contradictions are VIJP_EDECLARATION naming the
 * layer.  At a point where relu is submersive the claim stands. */
START_TEST(declarations_checked)
{
    vijp_layer_type liar = vijp_layer_relu;
    liar.name = "relu-claiming-submersive";
    liar.declare = claims_submersive;
    vijp_layer L = {.type = &liar, .in = 6, .out = 6};
    double x[6] = {1, -2, 3, 0, 5, 6};
    vijp_certificate c;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_certify_layer(&L, NULL, x, NULL, &c, &err), VIJP_EDECLARATION);
    ck_assert_msg(strstr(err.msg, "relu-claiming-submersive") != NULL, "message '%s'", err.msg);
    vijp_certificate_clear(&c);
    double xp[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(vijp_certify_layer(&L, NULL, xp, NULL, &c, &err), 0);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    vijp_certificate_clear(&c);

    one_layer o;
    one_layer_init(&o, "dense:6x6", 6, 2);
    vijp_layer_type never = vijp_layer_dense;
    never.name = "dense-claiming-never";
    never.declare = claims_never;
    vijp_layer D = *o.L;
    D.type = &never;
    ck_assert_int_eq(vijp_certify_layer(&D, o.theta, xp, NULL, &c, &err), VIJP_EDECLARATION);
    ck_assert_msg(strstr(err.msg, "dense-claiming-never") != NULL, "message '%s'", err.msg);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* ---- 9. activation analysis -------------------------------------------- */

/* Over R = 1000 (tol 1e-9): leaky and tanh have f′ > 0 everywhere (no bad
 * span); relu's f′ is 0 on x <= 0, one merged span covering [−1000, 0].
 *
 * tanh in double computes f′ = 4e/(1+e)², e = exp(−2|x|).
 *  negligible: f′ < u·max f′.  max is at the scan's smallest |x| = 2^-8,
 *  f′ = 1 − O(2^-16); for x ~ 19, (1+e)² = 1 + O(1e-16), so the threshold
 *  is 4e^{−2x} = 2^-53 to a few u: x = (ln 4 + 53 ln 2)/2 = 19.0616;
 *  within 1% (and the bisection refines to far below that).
 *  underflow: 4e/(1+e)² is 0 exactly when e is (4e is an exact scaling,
 *  (1+e)² = 1).  glibc's exp returns 0 for arguments below ln 2^-1075 (its
 *  underflow cutoff: below half the smallest subnormal) and, being within 1
 *  ulp, a nonzero value for true results >= 2^-1074; with −2x exact the
 *  threshold is in [1074 ln 2 / 2, 1075 ln 2 / 2] = [372.2200, 372.5666],
 *  and the bisection refines it to far below 1e-9. */
START_TEST(activation_analysis)
{
    vijp_error err;
    const char *specs[] = {"leaky:0.1", "relu", "tanh"};
    for (int k = 0; k < 3; k++) {
        vijp_layer L;
        vijp_activation_report a;
        ck_assert(!vijp_layer_parse(&L, specs[k], 4, &err));
        ck_assert_msg(!vijp_activation_analyze(&L, NULL, 1000, 1e-9, &a, &err), "%s: %s", specs[k], err.msg);
        ck_assert(a.complete);
        if (k == 1) {
            ck_assert_uint_eq(a.n_bad, 1);
            ck_assert_msg(a.bad[0].lo <= -1000 && a.bad[0].hi >= 0 && a.bad[0].hi <= 1e-9, "[%g, %g]", a.bad[0].lo,
                          a.bad[0].hi);
        } else {
            ck_assert_msg(a.n_bad == 0, "%s: %zu bad spans", specs[k], a.n_bad);
        }
        ck_assert_str_eq(a.fmt[0].format, "double");
        if (k == 2) {
            double neg = (log(4.0) + 53 * log(2.0)) / 2;
            ck_assert_msg(fabs(a.fmt[0].negligible_at / neg - 1) < 0.01 && fabs(a.fmt[0].negligible_at / 19.06 - 1) < 0.01,
                          "negligible at %.17g", a.fmt[0].negligible_at);
            ck_assert_msg(a.fmt[0].underflow_at >= 1074 * log(2.0) / 2 && a.fmt[0].underflow_at <= 1075 * log(2.0) / 2 + 1e-9,
                          "underflow at %.17g", a.fmt[0].underflow_at);
            for (int f = 1; f < VIJP_ACT_FORMATS; f++) /* narrower formats give out sooner */
                ck_assert_msg(a.fmt[f].underflow_at < a.fmt[0].underflow_at &&
                                  a.fmt[f].negligible_at < a.fmt[0].negligible_at,
                              "%s: underflow %g negligible %g", a.fmt[f].format, a.fmt[f].underflow_at,
                              a.fmt[f].negligible_at);
        } else {
            /* piecewise constant f′ never underflows or becomes negligible */
            for (int f = 0; f < VIJP_ACT_FORMATS; f++)
                ck_assert(isinf(a.fmt[f].underflow_at) && isinf(a.fmt[f].negligible_at));
        }
        vijp_activation_report_clear(&a);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* Every registered type: elementwise layers (no parameters, a diagonal
 * Jacobian) must provide deriv_enclose, so no future activation can skip the
 * analysis; and each type with deriv_enclose completes it over R = 1000. */
/* A strided convolution is submersive or not depending on its weights:
 * conv1d:1x3s2 on 4 positions (zero padding) computes y0 = w0·0 + w1·x0 +
 * w2·x1 and y1 = w0·x1 + w1·x2 + w2·x3.  With w = (1, 0, 0) the row of y0
 * is exactly zero: not submersive, cokernel 1, proven by structure; with
 * w = (0, 1, 0) the rows are e_0 and e_2: σ_min = 1, certified. */
START_TEST(strided_conv_certification)
{
    one_layer o;
    one_layer_init(&o, "conv1d:1x3s2", 4, 1);
    double th[4] = {1, 0, 0, 0.25}, x[4] = {0.5, -1, 2, 0.3};
    o.theta = th;
    vijp_certificate c;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert_uint_eq(c.cokernel_dim, 1);
    ck_assert(c.cokernel_proven);
    vijp_certificate_clear(&c);
    th[0] = 0, th[1] = 1;
    certify_at(&o, x, &c);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert_msg(c.s > 0.98 && c.s <= 1, "proven s = %g (the first trial is 0.99 of the estimate)", c.s);
    vijp_certificate_clear(&c);
    vijp_net_free(&o.net);
}
END_TEST

/* The MPFI enclosures of LayerNorm's and softmax's Jacobians contain the
 * 1024-bit oracle Jacobian (independent code, error ~2^-1000) at 20 points
 * each; the radius is the midpoint's rounding to double (<= u|mid|) plus
 * the 128-bit intervals' width (< 1e-25). */
START_TEST(jacobian_enclosures_contain_oracle)
{
    static const char *const specs[] = {"layernorm", "softmax"};
    for (size_t s = 0; s < 2; s++) {
        vijp_net net;
        ck_assert(!vijp_net_build(&net, specs[s], 1, 7, NULL));
        const vijp_layer *L = &net.layers[0];
        vijp_format R;
        ck_assert(!vijp_format_mpfr(&R, 1024, NULL));
        vijp_rng rng;
        vijp_rng_seed(&rng, test_seed() + 40 + s);
        for (int k = 0; k < 20; k++) {
            double x[7], mid[49], rad[49];
            for (size_t i = 0; i < 7; i++) x[i] = 3 * vijp_rng_normal(&rng);
            ck_assert(!vijp_layer_jacobian_enclosure(L, NULL, x, mid, rad, NULL));
            vijp_mat xm, J;
            vijp_mat_init(&xm, 7, 1, &R), vijp_mat_init(&J, 7, 7, &R);
            for (size_t i = 0; i < 7; i++) vijp_mat_set_entry_d(&xm, i, x[i]);
            ck_assert(!vijp_layer_jacobian(L, NULL, &xm, &J, NULL));
            mpfr_t d;
            mpfr_init2(d, 1100);
            for (size_t i = 0; i < 49; i++) {
                mpfr_sub_d(d, J.m[i], mid[i], MPFR_RNDN); /* exact at 1100 bits */
                mpfr_abs(d, d, MPFR_RNDN);
                ck_assert_msg(mpfr_cmp_d(d, rad[i]) <= 0 && rad[i] <= 0x1p-53 * fabs(mid[i]) + 1e-25,
                              "%s: entry %zu: |J − mid| %g, rad %g", specs[s], i, mpfr_get_d(d, MPFR_RNDU), rad[i]);
            }
            mpfr_clear(d);
            vijp_mat_clear(&xm), vijp_mat_clear(&J);
        }
        vijp_net_free(&net);
    }
}
END_TEST

/* vijp_certify_rank_at_least on matrices of known rank: diag(1, 1, 0) with
 * P = I has rank 2 (proven for r = 2 with the first two columns of I, not for
 * r = 3); LayerNorm's enclosed Jacobian (rank n − 2 exactly) is proven of
 * rank >= n − 2 and not of rank >= n − 1. */
START_TEST(rank_at_least)
{
    double mid[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0}, I3[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, s;
    int proven;
    ck_assert(!vijp_certify_rank_at_least(mid, NULL, 3, 3, I3, 2, NULL, &proven, &s, NULL));
    ck_assert_msg(proven && s > 0.9 && s <= 1, "rank 2 of diag(1,1,0): proven %d, s %g", proven, s);
    ck_assert(!vijp_certify_rank_at_least(mid, NULL, 3, 3, I3, 3, NULL, &proven, &s, NULL));
    ck_assert(!proven);
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "layernorm", 1, 6, NULL));
    double x[6] = {0.3, -1.2, 2.0, 0.7, -0.1, 1.4}, J[36], rad[36], U[36], A[36], sv[6], sup[6];
    ck_assert(!vijp_layer_jacobian_enclosure(&net.layers[0], NULL, x, J, rad, NULL));
    memcpy(A, J, sizeof A);
    ck_assert(!LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'A', 'N', 6, 6, A, 6, sv, U, 6, NULL, 1, sup));
    ck_assert(!vijp_certify_rank_at_least(J, rad, 6, 6, U, 4, NULL, &proven, &s, NULL));
    ck_assert_msg(proven, "LayerNorm rank >= 4 not proven");
    ck_assert(!vijp_certify_rank_at_least(J, rad, 6, 6, U, 5, NULL, &proven, &s, NULL));
    ck_assert_msg(!proven, "LayerNorm rank >= 5 'proven': its rank is 4");
    vijp_net_free(&net);
}
END_TEST

/* Moonwalk stores, per layer, a fragment as long as the layer's cokernel:
 * the vijp rebuilds everything else.  At 20 random points per layer the
 * fragment length equals the cokernel dimension from certification, proven:
 * by structure for ReLU and the tall dense layer; for LayerNorm and softmax
 * by their exact null directions (1, ŷ) plus a certificate that the rest of
 * J has full rank.  So the fragment is no longer than it must be: minimal. */
START_TEST(fragment_is_cokernel)
{
    static const struct {
        const char *spec;
        size_t width;
    } specs[] = {{"relu", 8}, {"layernorm", 6}, {"softmax", 6}, {"dense:9", 5}, {"dense:6", 6}, {"gelu", 6}};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        one_layer o;
        one_layer_init(&o, specs[s].spec, specs[s].width, 3 + s);
        vijp_rng rng;
        vijp_rng_seed(&rng, test_seed() + s);
        vijp_format fd;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        for (int k = 0; k < 20; k++) {
            double x[16];
            for (size_t i = 0; i < o.L->in; i++) x[i] = vijp_rng_normal(&rng);
            vijp_certificate c;
            certify_at(&o, x, &c);
            vijp_mat th = {.rows = o.L->type->param_count(o.L), .cols = 1, .fmt = &fd, .d = (double *)o.theta};
            vijp_mat xm = {.rows = o.L->in, .cols = 1, .fmt = &fd, .d = x};
            size_t frag = vijp_layer_fragment_count(o.L, &th, &xm);
            ck_assert_msg(frag == c.cokernel_dim, "%s at sample %d: fragment %zu, cokernel dimension %zu (%s)",
                          specs[s].spec, k, frag, c.cokernel_dim, c.method);
            if (s == 1 || s == 2) /* LayerNorm, softmax: known null directions + certified rank */
                ck_assert_msg(c.cokernel_proven, "%s at sample %d: cokernel not proven (%s)", specs[s].spec, k, c.reason);
            vijp_certificate_clear(&c);
        }
        vijp_net_free(&o.net);
    }
}
END_TEST

START_TEST(activation_registry)
{
    size_t nt;
    const vijp_layer_type *const *all = vijp_layer_types(&nt);
    static const char *const args[] = {NULL, "0.5", "4", "4x4", "2x1", "2", "2x2", "1x1x2"};
    for (size_t i = 0; i < nt; i++) {
        vijp_layer L;
        int parsed = 0;
        for (size_t a = 0; a < sizeof args / sizeof *args && !parsed; a++) {
            char item[64];
            snprintf(item, sizeof item, "%s%s%s", all[i]->name, args[a] ? ":" : "", args[a] ? args[a] : "");
            parsed = !vijp_layer_parse(&L, item, 8, NULL);
        }
        ck_assert_msg(parsed, "%s: none of the sample arguments parses; extend this test", all[i]->name);
        if (all[i]->param_count(&L) == 0 && L.in == L.out) { /* elementwise iff its Jacobian is diagonal */
            double x[64], J[64 * 64];
            for (size_t k = 0; k < L.in; k++) x[k] = 0.3 + 0.1 * (double)k;
            vijp_format fd;
            vijp_format_fixed(&fd, VIJP_DOUBLE);
            vijp_mat xm = {.rows = L.in, .cols = 1, .fmt = &fd, .d = x}, Jm = {.rows = L.in, .cols = L.in, .fmt = &fd, .d = J};
            ck_assert(L.in <= 64 && !vijp_layer_jacobian(&L, NULL, &xm, &Jm, NULL));
            int diagonal = 1;
            for (size_t r = 0; r < L.in; r++)
                for (size_t c = 0; c < L.in; c++) diagonal &= r == c || J[r + c * L.in] == 0;
            if (diagonal)
                ck_assert_msg(all[i]->deriv_enclose != NULL, "%s is elementwise but has no deriv_enclose", all[i]->name);
        }
        if (all[i]->deriv_enclose) {
            vijp_activation_report a;
            vijp_error err;
            ck_assert_msg(!vijp_activation_analyze(&L, NULL, 1000, 1e-9, &a, &err), "%s: %s", all[i]->name, err.msg);
            ck_assert_msg(a.complete, "%s: bisection incomplete", all[i]->name);
            vijp_activation_report_clear(&a);
        }
        vijp_layer_clear(&L);
    }
}
END_TEST

Suite *suite_certify(void)
{
    Suite *s = suite_create("certify");
    TCase *adv = tcase_create("adversarial");
    tcase_set_timeout(adv, (double)test_iters(120));
    tcase_add_test(adv, prescribed_singular_values);
    tcase_add_test(adv, near_unit_roundoff);
    tcase_add_test(adv, double_routes);
    tcase_add_test(adv, enclosure_radius);
    tcase_add_test(adv, exact_rank_deficient);
    tcase_add_test(adv, near_rank_deficient);
    tcase_add_test(adv, kahan);
    suite_add_tcase(s, adv);
    TCase *tc = tcase_create("certify");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, well_conditioned);
    tcase_add_test(tc, layer_leaky);
    tcase_add_test(tc, layer_relu);
    tcase_add_test(tc, layer_dense);
    tcase_add_test(tc, layer_tanh);
    tcase_add_test(tc, fragment_is_cokernel);
    tcase_add_test(tc, strided_conv_certification);
    tcase_add_test(tc, jacobian_enclosures_contain_oracle);
    tcase_add_test(tc, rank_at_least);
    tcase_add_test(tc, cokernel_basis);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, proven_cokernel_dim);
    tcase_add_test(tc, exact_rank_and_scales);
    tcase_add_test(tc, declarations_checked);
    tcase_add_test(tc, activation_analysis);
    tcase_add_test(tc, activation_registry);
    suite_add_tcase(s, tc);
    return s;
}

/* Shared helpers of the certification suites (certfix.h). */
#include "certfix.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <mpfi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------- */

long rand_int(vijp_rng *r, long lo, long hi) { return lo + (long)(vijp_rng_u64(r) % (uint64_t)(hi - lo + 1)); }

/* 10^e for e uniform in [lo, hi], at MP_PREC bits. */
void log_uniform(mpfr_t x, vijp_rng *r, double lo, double hi)
{
    mpfr_set_d(x, lo + (hi - lo) * vijp_rng_uniform(r), MPFR_RNDN);
    mpfr_exp10(x, x, MPFR_RNDN);
}

mpfr_t *mp_vec(size_t len)
{
    mpfr_t *v = malloc((len ? len : 1) * sizeof *v);
    ck_assert(v != NULL);
    for (size_t i = 0; i < len; i++) mpfr_init2(v[i], MP_PREC);
    return v;
}

void mp_vec_free(mpfr_t *v, size_t len)
{
    for (size_t i = 0; i < len; i++) mpfr_clear(v[i]);
    free(v);
}

/* Q (k × k, column-major) := H_1 ⋯ H_k, H = I − 2 v vᵀ / vᵀv with v seeded
 * Gaussian: orthogonal up to ~k·2^-256 at MP_PREC bits.  (The oracle does
 * not rely on Q's orthogonality: it bounds σ_min for any y.) */
void mp_orthogonal(mpfr_t *Q, size_t k, vijp_rng *r)
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
void mp_svd_compose(double *J, size_t m, size_t n, mpfr_t *U, mpfr_t *V, mpfr_t *sig)
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
double oracle_bound_mp(const double *J, size_t m, size_t n, mpfr_t *y)
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

double oracle_bound_d(const double *J, size_t m, size_t n, const double *y)
{
    mpfr_t *v = mp_vec(m);
    for (size_t i = 0; i < m; i++) mpfr_set_d(v[i], y[i], MPFR_RNDN); /* exact */
    double b = oracle_bound_mp(J, m, n, v);
    mp_vec_free(v, m);
    return b;
}

/* LAPACK's (dgesvd) left singular vector for the m-th singular value of J
 * (for m > n: the last column of the full U, in the numerical cokernel). */
void lapack_last_left(const double *J, size_t m, size_t n, double *y)
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


int kappa_band(double kappa) { return kappa < 1e5 ? 0 : kappa < 1e12 ? 1 : kappa < 1e16 ? 2 : 3; }

void tally_print(const tally *t)
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
int exact_null(const double *J, size_t m, size_t n, const double *y)
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

/* The exact rank of a double matrix, independently of src/certify/exact.c
 * (FLINT, integer elimination, modular ranks): Gaussian elimination over the
 * rationals with GMP, every double converted exactly (mpq_set_d), pivots any
 * nonzero entry.  Fine for the suites' 16 × 16. */
size_t rank_rational(const double *J, size_t m, size_t n)
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
void check_proven_cokernel(const double *J, size_t m, size_t n, const vijp_certificate *c, const char *what,
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
void check_cert(const double *J, size_t m, size_t n, const double *bounds, int nb, int full_rank, tally *t,
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


void one_layer_init(one_layer *o, const char *spec, size_t width, uint64_t seed)
{
    vijp_error err;
    ck_assert_msg(!vijp_net_build(&o->net, spec, 1, width, &err), "%s: %s", spec, err.msg);
    ck_assert_msg(!vijp_net_init(&o->net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, seed, &err), "%s: %s", spec, err.msg);
    o->L = &o->net.layers[0];
    o->theta = o->net.theta[0];
}

void certify_at(const one_layer *o, const double *x, vijp_certificate *c)
{
    vijp_error err;
    int rc = vijp_certify_layer(o->L, o->theta, x, NULL, c, &err);
    ck_assert_msg(rc == 0, "%s: error %d %s", o->L->type->name, rc, err.msg);
}

/* Rigorous certificates of full row rank (DESIGN §4, "certified").
 *
 * To prove σ_min(M) >= s for an m × n floating-point matrix M (m <= n):
 *  1. G = fl(M Mᵀ).  Every entry is a dot product of n terms, so
 *     |G − M Mᵀ| <= γ_n |M||M|ᵀ + n η (γ_n = n u / (1 − n u); η the
 *     underflow unit), in any summation order, with or without FMA (Higham,
 *     ASNA §3.1); in 2-norm ‖G − M Mᵀ‖₂ <= e_G := γ_n ‖M‖_F² + m n η, since
 *     ‖ |M||M|ᵀ ‖_F <= ‖M‖_F².
 *  2. A = G with its diagonal lowered to RD(G_ii − RU(s² + e_G)), so that
 *     M Mᵀ − s² I ⪰ A (Weyl; only the diagonal moved, downward).
 *  3. c = ((N+1)u / (1 − 2(N+1)u)) (tr A + 2N²η) + 4ηN(2(N+1)+max A_ii),
 *     at least the constant of Rump (2006) / Rump & Jeannerod (2014) as
 *     machine-checked in ValidSDP and the one DESIGN §4 writes (see
 *     vijp_cert_rump_constant in proof_double.c): if floating-point
 *     Cholesky of B runs to completion, then B + c_B I ⪰ 0.  We take B = A
 *     with its diagonal lowered again by c (computed from A, which
 *     dominates B, rounded up and enlarged by 2^-20), so A = B + D with
 *     D ⪰ c I > c_B I, hence A ≻ 0, hence σ_min(M)² > s².
 *  4. In MPFR at precision p the same holds with u = 2^-p and η = 0, provided
 *     no operation underflowed (MPFR's underflow flag is checked).
 * Scalars (e_G, shifts, c) are computed in MPFR with directed rounding; the
 * Cholesky is the plain dot-product algorithm of Rump's paper, in C with
 * -ffp-contract=off.  An enclosure radius R of the exact J = M + Δ,
 * |Δ| <= R, costs σ_min(J) >= σ_min(M) − ‖R‖₂ (Weyl), ‖R‖₂ bounded above
 * by the least of ‖R‖_F, √(‖R‖_1‖R‖_∞) and a Collatz–Wielandt bound
 * (radius.c).
 * The double routes (direct, and preconditioned past κ ≈ 1e5) are in
 * proof_double.c; this file holds the MPFR retry, the structure checks, the
 * scalings and the verdict. */
#include "vijp/certify.h"
#include "vijp/error.h"
#include "exact.h"
#include "proof.h"
#include "radius.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CERT_PREC_MAX_DEFAULT 4096
/* The MPFR retry costs m²n/2 + m³/6 operations per precision: beyond this
 * many it is refused (inconclusive, with the reason) rather than run for hours. */
#define CERT_MPFR_WORK_MAX (1ull << 25)
/* The exact rank (certify_exact.c) is tried up to this many rows: 0.5 s at
 * 512 × 512 (FLINT's multimodular nullspace), the size the proofs target. */
#define CERT_EXACT_ROWS_MAX 512

/* ---- the MPFR certificate ---- */

typedef struct {
    size_t N;
    mpfr_t *G; /* N × N, upper triangle */
    mpfr_t eG; /* e_G, rounded up */
} gram_mp;

static void gram_mp_clear(gram_mp *g)
{
    for (size_t i = 0; g->G && i < g->N * g->N; i++) mpfr_clear(g->G[i]);
    free(g->G);
    mpfr_clear(g->eG);
}

/* G = M Mᵀ at p bits (fma chains), and e_G = γ_n ‖M‖_F².  0 if an operation
 * underflowed (then η would not be 0). */
static int gram_mp_init(gram_mp *g, const double *M, size_t m, size_t n, long p, double frob2)
{
    g->N = m;
    g->G = vijp_alloc_array(m * m, sizeof *g->G);
    mpfr_init2(g->eG, 128);
    if (!g->G) return 0;
    mpfr_t a, b;
    mpfr_inits2(p, a, b, (mpfr_ptr)0);
    mpfr_clear_underflow();
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++) {
            mpfr_init2(g->G[i + j * m], p);
            mpfr_set_zero(g->G[i + j * m], 1);
            for (size_t k = 0; i <= j && k < n; k++) {
                mpfr_set_d(a, M[i + k * m], MPFR_RNDN);
                mpfr_set_d(b, M[j + k * m], MPFR_RNDN);
                mpfr_fma(g->G[i + j * m], a, b, g->G[i + j * m], MPFR_RNDN);
            }
        }
    vijp_cert_gamma_up(g->eG, n, p);
    mpfr_mul_d(g->eG, g->eG, frob2, MPFR_RNDU);
    mpfr_clears(a, b, (mpfr_ptr)0);
    return !mpfr_underflow_p();
}

/* Plain Cholesky (as cholesky_d) of R (N × N upper, overwritten). */
static int cholesky_mp(mpfr_t *R, size_t N, mpfr_t t)
{
    for (size_t j = 0; j < N; j++)
        for (size_t i = 0; i <= j; i++) {
            mpfr_set(t, R[i + j * N], MPFR_RNDN);
            for (size_t k = 0; k < i; k++) {
                mpfr_neg(t, t, MPFR_RNDN); /* t − r_ki r_kj as −(−t + r_ki r_kj): one rounding */
                mpfr_fma(t, R[k + i * N], R[k + j * N], t, MPFR_RNDN);
                mpfr_neg(t, t, MPFR_RNDN);
            }
            if (i < j) mpfr_div(R[i + j * N], t, R[i + i * N], MPFR_RNDN);
            else if (mpfr_sgn(t) <= 0 || !mpfr_number_p(t)) return 0;
            else mpfr_sqrt(R[j + j * N], t, MPFR_RNDN);
        }
    return 1;
}

/* Steps 2–3 at p bits for s² (given as an MPFR value). */
static int shifted_cholesky_mp(const gram_mp *g, long p, const mpfr_t s2)
{
    size_t N = g->N;
    mpfr_t *R = vijp_alloc_array(N * N, sizeof *R), t, shift, tr, dmax, c, eta;
    if (!R) return 0;
    mpfr_inits2(p, t, (mpfr_ptr)0);
    mpfr_inits2(128, shift, tr, dmax, c, eta, (mpfr_ptr)0);
    mpfr_add(shift, s2, g->eG, MPFR_RNDU);
    mpfr_set_zero(tr, 1), mpfr_set_zero(dmax, 1), mpfr_set_zero(eta, 1);
    for (size_t i = 0; i < N * N; i++) mpfr_init2(R[i], p), mpfr_set(R[i], g->G[i], MPFR_RNDN);
    int ok = 1;
    mpfr_clear_underflow();
    for (size_t i = 0; i < N && ok; i++) {
        mpfr_sub(R[i + i * N], R[i + i * N], shift, MPFR_RNDD);
        ok = mpfr_sgn(R[i + i * N]) > 0;
        mpfr_add(tr, tr, R[i + i * N], MPFR_RNDU);
        if (mpfr_cmp(dmax, R[i + i * N]) < 0) mpfr_set(dmax, R[i + i * N], MPFR_RNDU);
    }
    if (ok && (ok = vijp_cert_rump_constant(c, tr, dmax, N, p, eta))) {
        for (size_t i = 0; i < N && ok; i++) {
            mpfr_sub(R[i + i * N], R[i + i * N], c, MPFR_RNDD);
            ok = mpfr_sgn(R[i + i * N]) > 0;
        }
    }
    ok = ok && cholesky_mp(R, N, t) && !mpfr_underflow_p();
    for (size_t i = 0; i < N * N; i++) mpfr_clear(R[i]);
    free(R);
    mpfr_clears(t, shift, tr, dmax, c, eta, (mpfr_ptr)0);
    return ok;
}

/* An estimate (no proof) of λ_min(G) at p bits: Cholesky of G, then inverse
 * iteration.  NaN when G is not numerically positive definite. */
static void lambda_min_estimate(const gram_mp *g, long p, mpfr_t lam)
{
    size_t N = g->N;
    mpfr_t *R = vijp_alloc_array(N * N, sizeof *R), *x = vijp_alloc_array(N, sizeof *x), t, nrm;
    mpfr_set_nan(lam);
    if (!R || !x) {
        free(R), free(x);
        return;
    }
    mpfr_inits2(p, t, nrm, (mpfr_ptr)0);
    for (size_t i = 0; i < N * N; i++) mpfr_init2(R[i], p), mpfr_set(R[i], g->G[i], MPFR_RNDN);
    for (size_t i = 0; i < N; i++) mpfr_init2(x[i], p), mpfr_set_ui(x[i], 1 + i % 3, MPFR_RNDN);
    mpfr_set_nan(lam);
    if (cholesky_mp(R, N, t)) {
        for (int it = 0; it < 8; it++) { /* x := (RᵀR)^-1 x / ‖·‖ */
            for (size_t i = 0; i < N; i++) { /* Rᵀ y = x */
                for (size_t k = 0; k < i; k++) mpfr_fms(x[i], R[k + i * N], x[k], x[i], MPFR_RNDN), mpfr_neg(x[i], x[i], MPFR_RNDN);
                mpfr_div(x[i], x[i], R[i + i * N], MPFR_RNDN);
            }
            for (size_t i = N; i-- > 0;) { /* R z = y */
                for (size_t k = i + 1; k < N; k++) mpfr_fms(x[i], R[i + k * N], x[k], x[i], MPFR_RNDN), mpfr_neg(x[i], x[i], MPFR_RNDN);
                mpfr_div(x[i], x[i], R[i + i * N], MPFR_RNDN);
            }
            mpfr_set_zero(nrm, 1);
            for (size_t i = 0; i < N; i++) mpfr_fma(nrm, x[i], x[i], nrm, MPFR_RNDN);
            mpfr_sqrt(nrm, nrm, MPFR_RNDN);
            for (size_t i = 0; i < N; i++) mpfr_div(x[i], x[i], nrm, MPFR_RNDN);
        }
        mpfr_ui_div(lam, 1, nrm, MPFR_RNDN); /* ‖(RᵀR)^-1 x‖ → 1/λ_min */
    }
    for (size_t i = 0; i < N * N; i++) mpfr_clear(R[i]);
    for (size_t i = 0; i < N; i++) mpfr_clear(x[i]);
    free(R), free(x);
    mpfr_clears(t, nrm, (mpfr_ptr)0);
}

/* ---- structure ---- */

/* Proven lower bound on the cokernel dimension of the exact M (rad all zero):
 * rank <= min(m − zero rows, n − zero columns), and one more if a numerical
 * cokernel vector y satisfies Mᵀ y = 0 exactly (products exact at 106 bits,
 * mpfr_sum correctly rounded, so a zero result means an exactly zero sum). */
static size_t proven_cokernel(const double *M, size_t m, size_t n, const vijp_numeric *num, char *why, size_t whysz)
{
    size_t zr = 0, zc = 0;
    for (size_t i = 0; i < m; i++) {
        size_t k = 0;
        while (k < n && M[i + k * m] == 0) k++;
        zr += k == n;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        while (i < m && M[i + k * m] == 0) i++;
        zc += i == m;
    }
    size_t rank_up = m - zr < n - zc ? m - zr : n - zc, proven = m - (rank_up < m ? rank_up : m);
    if (proven && !zr && !zc) snprintf(why, whysz, "structure: %zu outputs from %zu inputs", m, n);
    else if (proven) {
        snprintf(why, whysz, "structure: %zu exactly zero rows, %zu exactly zero columns, %zu × %zu, so rank <= %zu", zr,
                 zc, m, n, rank_up);
        return proven;
    }
    if (num->cokernel_dim == 0) return 0;
    const double *y = num->cokernel;
    mpfr_t *terms = vijp_alloc_array(m, sizeof *terms), s;
    mpfr_ptr *ptrs = vijp_alloc_array(m, sizeof *ptrs);
    int exact_null = terms && ptrs;
    mpfr_init2(s, 64);
    for (size_t i = 0; terms && i < m; i++) mpfr_init2(terms[i], 106), ptrs[i] = terms[i];
    for (size_t k = 0; exact_null && k < n; k++) {
        for (size_t i = 0; i < m; i++) {
            mpfr_set_d(terms[i], M[i + k * m], MPFR_RNDN);
            mpfr_mul_d(terms[i], terms[i], y[i], MPFR_RNDN); /* exact: 53 + 53 <= 106 bits */
        }
        mpfr_sum(s, ptrs, m, MPFR_RNDN);
        exact_null = mpfr_zero_p(s);
    }
    for (size_t i = 0; terms && i < m; i++) mpfr_clear(terms[i]);
    free(terms), free(ptrs);
    mpfr_clear(s);
    if (exact_null) snprintf(why, whysz, "structure: an exact null vector of Jᵀ (checked in exact arithmetic)");
    return exact_null ? 1 : 0;
}

/* ---- the verdict ---- */

void vijp_certificate_clear(vijp_certificate *c)
{
    vijp_numeric_clear(&c->num);
    memset(c, 0, sizeof *c);
}

/* s·2^k rounded down: exact unless it leaves double's range. */
static double times_pow2_down(double s, int k)
{
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_set_d(t, s, MPFR_RNDD);
    mpfr_mul_2si(t, t, k, MPFR_RNDD);
    s = mpfr_get_d(t, MPFR_RNDD);
    mpfr_clear(t);
    return s;
}

/* 2^k with max |M_ij|·2^k in [1/2, 1): *SM = 2^k·M, exactly, so that the
 * proof sees the same matrix at every power-of-two scale (σ_min(2^k M) =
 * 2^k σ_min(M)): at 1e300 ‖M‖_F² no longer overflows, at 1e-300 fl(M Mᵀ)
 * no longer underflows into the η terms of e_G and c, which swamped
 * σ_min² there.  Within [2^-128, 2^128] nothing overflows or underflows
 * that matters (the η terms are below e_G's last bit): *SM = M, k = 0, no
 * copy.  Also k = 0 where scaling down would round an entry below 2^-1022
 * (a range of more than ~2^1000 within M).  *SM is to be freed when it is
 * not M. */
static int power_of_two_scale(const double *M, size_t len, const double **SM)
{
    int hi = INT_MIN;
    double big = 0;
    for (size_t i = 0; i < len; i++) big = fmax(big, fabs(M[i]));
    if (big != 0) hi = ilogb(big);
    *SM = M;
    if (hi == INT_MIN || (hi >= -128 && hi < 128)) return 0;
    int k = -1 - hi, exact = 1; /* |k| <= 1075 */
    double *S = vijp_alloc_unset(len * sizeof *S), up = ldexp(1, k / 2), up2 = ldexp(1, k - k / 2);
    for (size_t i = 0; i < len; i++) {
        S[i] = M[i] * up * up2; /* two exact powers of two: 2^k may not be a double */
        exact &= S[i] / up2 / up == M[i]; /* scaling up is exact (max below 1); down, checked */
    }
    if (!exact) {
        free(S);
        return 0;
    }
    *SM = S;
    return k;
}

/* The MPFR retry on M (m × n, ‖M‖_F² <= frob2) at doubling precision. */
static int prove_mpfr(const double *M, size_t m, size_t n, const vijp_numeric *num, double frob2, long prec_max,
                      double *s, long *prec, char *why, size_t whysz)
{
    unsigned long long work = (unsigned long long)m * m * n / 2 + (unsigned long long)m * m * m / 6;
    if (work > CERT_MPFR_WORK_MAX) {
        snprintf(why, whysz, "no proof in double (κ ≈ %.3g); MPFR refused at %zu × %zu", num->condition, m, n);
        return 0;
    }
    for (long p = 106; p <= prec_max; p *= 2) {
        gram_mp g;
        int ok = gram_mp_init(&g, M, m, n, p, frob2);
        mpfr_t lam, s2;
        mpfr_inits2(p, lam, s2, (mpfr_ptr)0);
        if (ok) lambda_min_estimate(&g, p, lam);
        static const double f[] = {0.98, 0.81, 0.25, 0.01};
        int proven = 0;
        for (int k = 0; ok && k < 4 && !proven && mpfr_number_p(lam) && mpfr_sgn(lam) > 0; k++) {
            mpfr_mul_d(s2, lam, f[k], MPFR_RNDD);
            if ((proven = shifted_cholesky_mp(&g, p, s2))) {
                mpfr_sqrt(s2, s2, MPFR_RNDD);
                *s = mpfr_get_d(s2, MPFR_RNDD);
                *prec = p;
            }
        }
        mpfr_clears(lam, s2, (mpfr_ptr)0);
        gram_mp_clear(&g);
        if (proven) return *s > 0 || (snprintf(why, whysz, "the proven bound is below double's range"), 0);
    }
    snprintf(why, whysz, "no certificate up to mpfr:%ld (κ ≈ %.3g)", prec_max, num->condition);
    return 0;
}

enum { PROVE_DOUBLE = 1, PROVE_MPFR = 2 };

/* Try to prove σ_min(M) > s on 2^k·M (power_of_two_scale): in double
 * (stages & PROVE_DOUBLE), then in MPFR at doubling precision (& PROVE_MPFR).
 * Returns 1 and sets *s (rounded down) and *prec on success. */
static int prove(const double *M0, size_t m, size_t n, const vijp_numeric *num, long prec_max, int stages,
                 double *work, double *s, long *prec, char *why, size_t whysz)
{
    const double *M;
    int k = power_of_two_scale(M0, m * n, &M), ok = 0;
    double frob2 = vijp_cert_sum_squares_up(M, m * n, 1);
    if (!isfinite(frob2)) snprintf(why, whysz, "‖J‖_F² overflows double");
    else {
        /* LAPACK's σ̂_min of M0 scales with M0 (it only steers) */
        if (stages & PROVE_DOUBLE)
            ok = vijp_cert_prove_double(M, m, n, ldexp(num->sigma_min, k), num->condition, frob2, s, work) &&
                 (*prec = 53);
        if (!ok && (stages & PROVE_MPFR)) ok = prove_mpfr(M, m, n, num, frob2, prec_max, s, prec, why, whysz);
    }
    if (M != M0) free((double *)M);
    if (!ok) return 0;
    *s = times_pow2_down(*s, -k);
    return *s > 0 || (snprintf(why, whysz, "the proven bound is below double's range"), 0);
}

/* DM = D·M, D = diag(2^k_i) putting each row's largest |entry| in [1/2, 1)
 * where the row's smallest nonzero entry stays normal (otherwise as far as
 * it can go): every entry scaled exactly.  Returns K = max k_i, so that
 * σ_min(M) = σ_min(D⁻¹·DM) >= σ_min(DM)·2^-K.  Far-apart row scales (1e155·I,
 * diag(1e300, 1e-300)) then neither overflow ‖·‖_F² nor hide σ_min below
 * the largest row's rounding. */
static int equilibrate_rows(const double *M, size_t m, size_t n, double *DM)
{
    int K = INT_MIN;
    for (size_t i = 0; i < m; i++) {
        int hi = INT_MIN, lo = INT_MAX;
        for (size_t k = 0; k < n; k++) {
            double x = fabs(M[i + k * m]);
            if (x == 0) continue;
            int e = ilogb(x);
            if (e > hi) hi = e;
            if (e < lo) lo = e;
        }
        int ki = hi == INT_MIN ? 0 : -1 - hi;   /* largest entry to [1/2, 1) */
        if (hi != INT_MIN && lo + ki < -1022) ki = -1022 - lo; /* but keep the smallest normal */
        if (ki > K) K = ki;
        for (size_t k = 0; k < n; k++) DM[i + k * m] = ldexp(M[i + k * m], ki);
    }
    return K;
}

/* prove() on D·M (equilibrate_rows), the bound carried back to M. */
static int prove_equilibrated(const double *M, size_t m, size_t n, long prec_max, double *s, long *prec, char *why,
                              size_t whysz)
{
    double *DM = vijp_alloc_array(m * n, sizeof *DM);
    int K = equilibrate_rows(M, m, n, DM), ok = 0;
    vijp_numeric num;
    if (!vijp_numeric_analysis(DM, m, n, &num, NULL)) {
        ok = prove(DM, m, n, &num, prec_max, PROVE_DOUBLE | PROVE_MPFR, NULL, s, prec, why, whysz);
        vijp_numeric_clear(&num);
    }
    free(DM);
    if (!ok) return 0;
    *s = times_pow2_down(*s, -K);
    return *s > 0;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int certify_matrix(const double *mid, const double *rad, size_t m, size_t n, const vijp_certify_opts *o,
                          vijp_certificate *out, double t0, vijp_error *err);

/* The verdict, with the two parts timed (vijp_certificate.seconds_*). */
int vijp_certify_matrix(const double *mid, const double *rad, size_t m, size_t n, const vijp_certify_opts *o,
                        vijp_certificate *out, vijp_error *err)
{
    double t0 = seconds_now();
    int rc = certify_matrix(mid, rad, m, n, o, out, t0, err);
    out->seconds_proof = seconds_now() - t0 - out->seconds_numeric;
    return rc;
}

static int certify_matrix(const double *mid, const double *rad, size_t m, size_t n, const vijp_certify_opts *o,
                          vijp_certificate *out, double t0, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    out->s = NAN;
    if (m == 0 || n == 0) return vijp_fail(err, VIJP_EDIM, "a %zu × %zu Jacobian has nothing to certify", m, n);
    for (size_t i = 0; i < m * n; i++)
        if (!isfinite(mid[i]) || (rad && !(rad[i] >= 0 && isfinite(rad[i]))))
            return vijp_fail(err, VIJP_EDOMAIN, "Jacobian entry %zu is %s (%g ± %g)", i,
                             isfinite(mid[i]) && !isnan(rad[i]) && rad[i] < 0 ? "given a negative radius" : "not finite",
                             mid[i], rad ? rad[i] : 0.0);
    /* LAPACK's copy of mid, then the double routes' scratch: pages touched once */
    double *work = vijp_alloc_unset(m * n * sizeof *work);
    int rc = vijp_numeric_analysis_in(mid, m, n, &out->num, work, err);
    out->seconds_numeric = seconds_now() - t0;
    if (rc) return free(work), rc;
    out->enclosure_radius = rad ? vijp_radius_norm2_up(rad, m, n) : 0; /* radius.c: >= ‖rad‖₂, <= ‖rad‖_F */
    out->cokernel_dim = out->num.cokernel_dim;
    long prec_max = o && o->prec_max ? o->prec_max : CERT_PREC_MAX_DEFAULT;

    size_t proven = out->enclosure_radius == 0 ? proven_cokernel(mid, m, n, &out->num, out->reason, sizeof out->reason) : 0;
    if (m > n && proven < m - n) proven = m - n;
    double s;
    long prec;
    /* Reasons are never cut: why holds one of prove()'s messages (at most
     * 100 bytes, with 20-digit sizes) and " (and with rows equilibrated)"
     * (29), and the longest reason around it adds at most 117 (exact rank's
     * and the numerical verdict's, with 20-digit sizes): 246 < sizeof
     * out->reason. */
    char why[256] = "";
    /* The double routes first, whatever LAPACK's rank: a few m²n operations,
     * and a bound on σ_min says more than an exact rank (they reach κ ≈
     * 1e15 at n = 512, past LAPACK's rank tolerance n·u·σ_max). */
    int proved = !proven && prove(mid, m, n, &out->num, prec_max, PROVE_DOUBLE, work, &s, &prec, why, sizeof why);
    free(work);
    /* An exact matrix that LAPACK sees as rank-deficient beyond what its
     * structure proves: its exact rank settles it, before any climb. */
    int exactly_full = 0;
    size_t exact_dim;
    if (!proved && out->enclosure_radius == 0 && out->num.rank < m && proven < out->num.cokernel_dim &&
        m <= CERT_EXACT_ROWS_MAX && vijp_exact_cokernel(mid, m, n, &exact_dim)) {
        if (exact_dim > 0) {
            out->verdict = VIJP_NOT_SUBMERSIVE;
            snprintf(out->method, sizeof out->method, "exact-rank");
            out->cokernel_proven = 1;
            out->cokernel_dim = exact_dim;
            snprintf(out->reason, sizeof out->reason,
                     "exact rank %zu < %zu over the rationals (integer elimination; an exact null basis of Jᵀ "
                     "and a modular rank, both checked)", m - exact_dim, m);
            return 0;
        }
        exactly_full = 1;
    }
    if (proven) {
        out->verdict = VIJP_NOT_SUBMERSIVE;
        snprintf(out->method, sizeof out->method, "structure");
        out->cokernel_proven = 1;
        out->cokernel_dim = proven > out->num.cokernel_dim ? proven : out->num.cokernel_dim;
        if (proven < out->cokernel_dim)
            snprintf(out->reason + strlen(out->reason), sizeof out->reason - strlen(out->reason),
                     "; proven >= %zu, numerically %zu", proven, out->cokernel_dim);
        out->cokernel_dim = proven;
        if (!out->reason[0]) snprintf(out->reason, sizeof out->reason, "structure: %zu outputs from %zu inputs", m, n);
        return 0;
    }
    if (!proved) proved = prove(mid, m, n, &out->num, prec_max, PROVE_MPFR, NULL, &s, &prec, why, sizeof why);
    if (!proved && (exactly_full || !isfinite(vijp_cert_sum_squares_up(mid, m * n, 1)))) {
        char why2[256] = "";
        if ((proved = prove_equilibrated(mid, m, n, prec_max, &s, &prec, why2, sizeof why2)))
            why[0] = 0;
        else snprintf(why + strlen(why), sizeof why - strlen(why), " (and with rows equilibrated)");
    }
    if (exactly_full && !proved) {
        /* Full row rank over the rationals is submersivity itself: a
         * certificate, though without a positive bound on σ_min. */
        out->verdict = VIJP_CERTIFIED_SUBMERSIVE;
        snprintf(out->method, sizeof out->method, "exact-rank");
        out->cokernel_dim = 0, out->cokernel_proven = 1;
        snprintf(out->reason, sizeof out->reason,
                 "exact rank %zu over the rationals (integer elimination, modular rank, both checked); "
                 "no bound on σ_min: %s", m, why);
        return 0;
    }
    if (proved) {
        mpfr_t t;
        mpfr_init2(t, 64);
        mpfr_set_d(t, s, MPFR_RNDD);
        mpfr_sub_d(t, t, out->enclosure_radius, MPFR_RNDD); /* Weyl */
        s = mpfr_get_d(t, MPFR_RNDD);
        mpfr_clear(t);
        if (s > 0) {
            out->verdict = VIJP_CERTIFIED_SUBMERSIVE;
            out->s = s;
            out->prec = prec;
            out->cokernel_dim = 0;
            if (prec == 53) snprintf(out->method, sizeof out->method, "certified-double");
            else snprintf(out->method, sizeof out->method, "certified-mpfr:%ld", prec);
            return 0;
        }
        snprintf(why, sizeof why, "the enclosure radius %.3g exceeds the proven bound on the midpoint",
                 out->enclosure_radius);
    }
    if (out->num.rank < m && !exactly_full) {
        out->verdict = VIJP_NOT_SUBMERSIVE;
        snprintf(out->method, sizeof out->method, "numerical");
        snprintf(out->reason, sizeof out->reason, "numerical rank %zu < %zu (σ_min %.3g <= tolerance %.3g); not proven: %s",
                 out->num.rank, m, out->num.sigma_min, out->num.rank_tol, why);
        return 0;
    }
    out->verdict = VIJP_INCONCLUSIVE;
    snprintf(out->method, sizeof out->method, "numerical");
    snprintf(out->reason, sizeof out->reason, "%s", why);
    return 0;
}

int vijp_certify_rank_at_least(const double *mid, const double *rad, size_t m, size_t n, const double *P, size_t r,
                               const vijp_certify_opts *o, int *proven, double *s, vijp_error *err)
{
    *proven = 0, *s = NAN;
    if (r == 0) {
        *proven = 1;
        return 0;
    }
    double *bm = vijp_alloc_array(r * n, sizeof *bm), *br = vijp_alloc_array(r * n, sizeof *br);
    mpfr_t *terms = vijp_alloc_array(m, sizeof *terms), lo, hi, t;
    mpfr_ptr *ptrs = vijp_alloc_array(m, sizeof *ptrs);
    for (size_t k = 0; k < m; k++) mpfr_init2(terms[k], 106), ptrs[k] = terms[k]; /* a product of doubles is exact */
    mpfr_inits2(53, lo, hi, (mpfr_ptr)0);
    mpfr_init2(t, 53);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < r; i++) {
            for (size_t k = 0; k < m; k++) mpfr_set_d(terms[k], P[k + i * m], MPFR_RNDN), mpfr_mul_d(terms[k], terms[k], mid[k + j * m], MPFR_RNDN);
            mpfr_sum(lo, ptrs, m, MPFR_RNDD), mpfr_sum(hi, ptrs, m, MPFR_RNDU);
            double c = mpfr_get_d(lo, MPFR_RNDN) / 2 + mpfr_get_d(hi, MPFR_RNDN) / 2;
            if (!(c >= mpfr_get_d(lo, MPFR_RNDD) && c <= mpfr_get_d(hi, MPFR_RNDU))) c = mpfr_get_d(lo, MPFR_RNDN);
            mpfr_d_sub(lo, c, lo, MPFR_RNDU), mpfr_sub_d(hi, hi, c, MPFR_RNDU); /* distances to both ends, up */
            double d = fmax(mpfr_get_d(lo, MPFR_RNDU), mpfr_get_d(hi, MPFR_RNDU));
            if (rad) { /* + Σ_k |P_ki| rad_kj, rounded up */
                for (size_t k = 0; k < m; k++) mpfr_set_d(terms[k], fabs(P[k + i * m]), MPFR_RNDN), mpfr_mul_d(terms[k], terms[k], rad[k + j * m], MPFR_RNDN);
                mpfr_sum(t, ptrs, m, MPFR_RNDU);
                mpfr_add_d(t, t, d, MPFR_RNDU);
                d = mpfr_get_d(t, MPFR_RNDU);
            }
            bm[i + j * r] = c, br[i + j * r] = d;
        }
    mpfr_clears(lo, hi, t, (mpfr_ptr)0);
    for (size_t k = 0; k < m; k++) mpfr_clear(terms[k]);
    free(terms), free(ptrs);
    vijp_certificate c;
    int rc = r <= n ? vijp_certify_matrix(bm, br, r, n, o, &c, err) : 0;
    if (!rc && r <= n) {
        *proven = c.verdict == VIJP_CERTIFIED_SUBMERSIVE;
        if (*proven) *s = c.s;
        vijp_certificate_clear(&c);
    }
    free(bm), free(br);
    return rc;
}

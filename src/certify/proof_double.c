/* The double certificate (DESIGN §4, "certified"; steps 1–3 and Rump's
 * constant at the top of certify.c): σ_min(M) > s proven in double
 * arithmetic, for an m × n M (m <= n), by
 *   the direct route: a shifted Cholesky of fl(M Mᵀ), which reaches as far
 *     as σ_min² clears e_G + c ≈ (n + m + 1)·u·‖M‖_F² (κ ≈ 1e5 at n = 512);
 *   the preconditioned route, past that: Z ≈ L⁻¹ from M = LQ (Householder
 *     QR of Mᵀ, which does not square κ as a Cholesky of M Mᵀ would), so
 *     that ZM ≈ Q has nearly orthonormal rows, and
 *       σ_min(M) >= σ_min(ZM) / ‖Z‖₂        (M = Z⁻¹(ZM): Z is invertible
 *                                             once σ_min(ZM) > 0)
 *       σ_min(ZM) >= σ_min(Ŷ) − ‖Ŷ − ZM‖₂   (Weyl),
 *     σ_min(Ŷ) proven by the direct route (Ŷ is well conditioned) and
 *     ‖Z‖₂² < t by the same shifted Cholesky on tI − fl(ZᵀZ), whose
 *     condition is ~ t/(t − λ_max) ≈ 20.  Ŷ's rows come from a double
 *     product (dtrmm, error γ_m‖z_i‖‖M‖_F per row in 2-norm, Higham ASNA
 *     §3.1, any order, with or without FMA), except the rows of largest
 *     ‖z_i‖: those come from double-double products (src/ddot: Ogita–Rump–
 *     Oishi's Dot2 with a rigorous bound per entry), as many as it takes to
 *     bring the double rows' error below 1/32.  That reaches κ ≈ 1e15 at
 *     n = 512, where the QR's own backward error (~u·κ relative) stops
 *     ZM being near-orthonormal.
 * No step trusts an unproven number: Z, the QR, LAPACK's estimates and the
 * power iteration only steer. */
#include "proof.h"
#include "base/lapack.h"
#include "ddot/ddot.h"
#include "vijp/error.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalars with directed rounding ---- */

/* Σ x_i² in double, any order: each square is x_i²(1 + δ) + ε with |δ| <= u,
 * and ε = 0 unless |x_i| < 2^-511, where the square may fall below the
 * normal range: then |ε| <= η/2 (η = 2^-1074).  The len − 1 additions of
 * non-negative terms lose at most γ_(len−1) relative (Higham, ASNA §3.1;
 * additions are exact in the subnormal range), so with ŝ the computed sum
 * and t the number of such tiny nonzero x_i
 *   Σ x_i² <= ŝ / ((1 − γ_len)(1 − u)) + t·η,
 * evaluated in MPFR rounding up: 0 for a zero vector (a radius of zeros
 * must stay an exact matrix).  A fast stand-in for summing in MPFR, which
 * took half of the proof's time at n = 512. */
double vijp_cert_sum_squares_up(const double *x, size_t len, size_t inc)
{
    double acc[4] = {0, 0, 0, 0};
    size_t tiny = 0, i = 0;
    for (; i + 4 <= len; i += 4)
        for (size_t l = 0; l < 4; l++) {
            double v = x[(i + l) * inc];
            acc[l] += v * v;
            tiny += v != 0 && fabs(v) < 0x1p-511;
        }
    for (; i < len; i++) acc[0] += x[i * inc] * x[i * inc], tiny += x[i * inc] != 0 && fabs(x[i * inc]) < 0x1p-511;
    double s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    if (!isfinite(s)) return INFINITY;
    mpfr_t g, den, r;
    mpfr_inits2(64, g, den, r, (mpfr_ptr)0);
    vijp_cert_gamma_up(g, len ? len : 1, 53);
    mpfr_ui_sub(den, 1, g, MPFR_RNDD);
    mpfr_mul_d(den, den, 1 - 0x1p-53, MPFR_RNDD);
    mpfr_set_d(r, s, MPFR_RNDN); /* exact */
    mpfr_div(r, r, den, MPFR_RNDU);
    mpfr_set_ui_2exp(g, tiny, -1074, MPFR_RNDU);
    mpfr_add(r, r, g, MPFR_RNDU);
    double b = mpfr_get_d(r, MPFR_RNDU);
    mpfr_clears(g, den, r, (mpfr_ptr)0);
    return b;
}

void vijp_cert_gamma_up(mpfr_t g, unsigned long k, long p)
{
    mpfr_t num, den;
    mpfr_inits2(mpfr_get_prec(g), num, den, (mpfr_ptr)0);
    mpfr_set_ui_2exp(num, k, -p, MPFR_RNDU);
    mpfr_ui_sub(den, 1, num, MPFR_RNDD);
    mpfr_div(g, num, den, MPFR_RNDU);
    mpfr_clears(num, den, (mpfr_ptr)0);
}

/* c of step 3 for an N × N matrix with trace tr and largest diagonal dmax
 * (both upper bounds), unit roundoff u = 2^-p and underflow unit eta (0 in
 * MPFR).  ValidSDP's corollary (theories/cholesky_infnan.v,
 * corollary_2_4_with_c_upper_bound_infnan) asks for
 *   c >= ½γ_{2(N+1)} tr A + 4η'N(2(N+1) + max A_ii),  η' = 2^-1075,
 * and DESIGN §4 writes ((N+1)u/(1−(N+1)u))(tr A + 2N²η) + 4ηN(N+1+max A_ii);
 * we take a constant above both:
 *   c = ((N+1)u/(1 − 2(N+1)u)) (tr A + 2N²η) + 4ηN(2(N+1) + max A_ii),  η = 2^-1074,
 * (½γ_{2(N+1)} = (N+1)u/(1 − 2(N+1)u)), then enlarge it by 2^-20 so that the
 * inequality with the constant of the matrix actually factored is strict.
 * Requires 2(N+1)u < 1: 0 (no certificate) otherwise. */
int vijp_cert_rump_constant(mpfr_t c, const mpfr_t tr, const mpfr_t dmax, size_t N, long p, const mpfr_t eta)
{
    mpfr_t a, b, den;
    mpfr_inits2(mpfr_get_prec(c), a, b, den, (mpfr_ptr)0);
    mpfr_set_ui_2exp(a, N + 1, -p, MPFR_RNDU);    /* (N+1)u */
    mpfr_mul_2ui(den, a, 1, MPFR_RNDU);           /* 2(N+1)u */
    int ok = mpfr_cmp_d(den, 0.5) < 0;
    mpfr_ui_sub(den, 1, den, MPFR_RNDD);
    mpfr_div(a, a, den, MPFR_RNDU);               /* (N+1)u / (1 − 2(N+1)u) */
    mpfr_mul_ui(b, eta, 2 * N, MPFR_RNDU);
    mpfr_mul_ui(b, b, N, MPFR_RNDU);              /* 2N²η, without forming N² in size_t */
    mpfr_add(b, b, tr, MPFR_RNDU);
    mpfr_mul(c, a, b, MPFR_RNDU);
    mpfr_add_ui(a, dmax, 2 * (N + 1), MPFR_RNDU);
    mpfr_mul(a, a, eta, MPFR_RNDU);
    mpfr_mul_ui(a, a, 4 * N, MPFR_RNDU);
    mpfr_add(c, c, a, MPFR_RNDU);
    mpfr_mul_d(c, c, 1 + 0x1p-20, MPFR_RNDU);
    mpfr_clears(a, b, den, (mpfr_ptr)0);
    return ok;
}

/* ---- the shifted Cholesky ---- */

/* Cholesky in the dot-product form of Rump (2006), eq. (2.1), on the upper
 * triangle of the column-major N × N A (overwritten by R).  1 if it runs to
 * completion with every pivot positive and finite. */
static int cholesky_d(double *A, size_t N)
{
    for (size_t j = 0; j < N; j++) {
        double *cj = A + j * N;
        for (size_t i = 0; i <= j; i++) {
            const double *ci = A + i * N;
            double acc[4] = {0, 0, 0, 0};
            size_t k = 0;
            for (; k + 4 <= i; k += 4)
                for (int l = 0; l < 4; l++) acc[l] += ci[k + l] * cj[k + l];
            for (; k < i; k++) acc[0] += ci[k] * cj[k];
            double t = cj[i] - ((acc[0] + acc[1]) + (acc[2] + acc[3]));
            if (i < j) cj[i] = t / ci[i];
            else if (!(t > 0) || !isfinite(t)) return 0;
            else cj[j] = sqrt(t);
        }
    }
    return 1;
}

/* Steps 2–3 on A (N × N, upper triangle; overwritten by the factor) for s²
 * and e_G: 1 if proven.  In place: a fresh 2 MB buffer costs ~25 ms in page
 * faults on the machines measured (more than the Cholesky of 512 × 512), so
 * a retry forms A again rather than keeping a copy. */
static int shifted_cholesky_d(double *A, size_t N, double s2, double eG)
{
    mpfr_t t, shift, tr, dmax, c, eta;
    mpfr_inits2(64, t, shift, tr, dmax, c, eta, (mpfr_ptr)0);
    mpfr_set_d(shift, s2, MPFR_RNDU);
    mpfr_add_d(shift, shift, eG, MPFR_RNDU);
    mpfr_set_zero(tr, 1), mpfr_set_zero(dmax, 1);
    mpfr_set_ui_2exp(eta, 1, -1074, MPFR_RNDN);
    int ok = 1;
    for (size_t i = 0; i < N && ok; i++) {
        mpfr_set_d(t, A[i + i * N], MPFR_RNDN);
        mpfr_sub(t, t, shift, MPFR_RNDD);
        A[i + i * N] = mpfr_get_d(t, MPFR_RNDD);
        ok = A[i + i * N] > 0; /* a non-positive diagonal is not positive definite */
        mpfr_add_d(tr, tr, A[i + i * N], MPFR_RNDU);
        if (mpfr_cmp_d(dmax, A[i + i * N]) < 0) mpfr_set_d(dmax, A[i + i * N], MPFR_RNDU);
    }
    if (ok && (ok = vijp_cert_rump_constant(c, tr, dmax, N, 53, eta))) {
        for (size_t i = 0; i < N && ok; i++) {
            mpfr_set_d(t, A[i + i * N], MPFR_RNDN);
            mpfr_sub(t, t, c, MPFR_RNDD);
            A[i + i * N] = mpfr_get_d(t, MPFR_RNDD);
            ok = A[i + i * N] > 0;
        }
    }
    mpfr_clears(t, shift, tr, dmax, c, eta, (mpfr_ptr)0);
    return ok && cholesky_d(A, N);
}

/* e_G = γ_n·frob2 + m·n·η, rounded up: fl(A Aᵀ)'s error in 2-norm (step 1)
 * for an m × n A with ‖A‖_F² <= frob2. */
static double gram_error_up(size_t m, size_t n, double frob2)
{
    mpfr_t g, e;
    mpfr_inits2(64, g, e, (mpfr_ptr)0);
    vijp_cert_gamma_up(g, n, 53);
    mpfr_mul_d(g, g, frob2, MPFR_RNDU);
    mpfr_set_ui_2exp(e, m, -1074, MPFR_RNDU);
    mpfr_mul_ui(e, e, n, MPFR_RNDU);
    mpfr_add(g, g, e, MPFR_RNDU);
    double r = mpfr_get_d(g, MPFR_RNDU);
    mpfr_clears(g, e, (mpfr_ptr)0);
    return r;
}

static double sqrt_down(double x)
{
    mpfr_t r;
    mpfr_init2(r, 64);
    mpfr_set_d(r, x, MPFR_RNDD);
    mpfr_sqrt(r, r, MPFR_RNDD);
    double s = mpfr_get_d(r, MPFR_RNDD);
    mpfr_clear(r);
    return s;
}

/* The routes' two large buffers, allocated once and never read before
 * written (fresh pages are what costs: see shifted_cholesky_d). */
typedef struct {
    size_t m, n;
    double *B; /* m × n: fl(MMᵀ); the LQ's scratch; fl(ZᵀZ); Ŷ = fl(ZM) */
    double *Z; /* m × m: Z; then fl(ŶŶᵀ) */
} route_ws;

/* The direct route at s² = f·σ̂², for each f in turn, skipping those whose
 * margin (1 − f)σ̂² does not even clear e_G, which the shift subtracts
 * whatever c is (the Cholesky would run to its end and fail). */
static int direct_route(const double *M, route_ws *w, double sigma_hat, double frob2, const double *f, int nf,
                        double *s)
{
    size_t m = w->m, n = w->n;
    double eG = gram_error_up(m, n, frob2);
    for (int k = 0; k < nf; k++) {
        double s2 = f[k] * sigma_hat * sigma_hat;
        if (!(s2 > 0) || (1 - f[k]) * sigma_hat * sigma_hat <= eG) continue;
        cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, (int)m, (int)n, 1.0, M, (int)m, 0.0, w->B, (int)m);
        if (shifted_cholesky_d(w->B, m, s2, eG)) return *s = sqrt_down(s2), 1;
    }
    return 0;
}

/* Z = L⁻¹, lower triangular, from M = LQ (LAPACK's Householder dgelqf). */
static int preconditioner(const double *M, route_ws *w)
{
    size_t m = w->m, n = w->n;
    double *tau = vijp_alloc_unset(m * sizeof *tau);
    memcpy(w->B, M, m * n * sizeof *w->B); /* scratch: L is its lower triangle */
    int ok = vijp_lapack_dgelqf(m, n, w->B, m, tau) == 0;
    free(tau);
    for (size_t j = 0; ok && j < m; j++) {
        memset(w->Z + j * m, 0, j * sizeof *w->Z);
        memcpy(w->Z + j * m + j, w->B + j * m + j, (m - j) * sizeof *w->Z);
    }
    return ok && LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (int)m, w->Z, (int)m) == 0;
}

typedef struct {
    double norm2;
    size_t row;
} row_norm;

static int larger_first(const void *a, const void *b)
{
    double x = ((const row_norm *)a)->norm2, y = ((const row_norm *)b)->norm2;
    return (x < y) - (x > y);
}

/* rows[i] = (an upper bound on ‖z_i‖², i) for the rows of the lower
 * triangular m × m Z, summed column by column (Z's own order in memory):
 * vijp_cert_sum_squares_up's bound with γ_m for every row, and its
 * rounding taken up by enlarging F = 1/((1 − γ_m)(1 − u)) to F(1 + 2^-49)
 * before the product and adding 2mη after it:
 *   fl(fl(ŝF(1 + 2^-49)) + 2mη) >= (ŝF(1 + 3u) + 2mη)(1 − u) >= ŝF + mη,
 * which covers the squares that fell below the normal range (m of them
 * at most, η/2 each) and a product that did. */
static void row_norms_up(const double *Z, size_t m, row_norm *rows)
{
    for (size_t i = 0; i < m; i++) rows[i] = (row_norm){0, i};
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++) rows[i].norm2 += Z[i + j * m] * Z[i + j * m];
    mpfr_t g, f;
    mpfr_inits2(64, g, f, (mpfr_ptr)0);
    vijp_cert_gamma_up(g, m, 53);
    mpfr_ui_sub(f, 1, g, MPFR_RNDD);
    mpfr_mul_d(f, f, 1 - 0x1p-53, MPFR_RNDD);
    mpfr_ui_div(f, 1, f, MPFR_RNDU);
    mpfr_mul_d(f, f, 1 + 0x1p-49, MPFR_RNDU);
    double F = mpfr_get_d(f, MPFR_RNDU), slack = 2 * (double)m * 0x1p-1074;
    mpfr_clears(g, f, (mpfr_ptr)0);
    for (size_t i = 0; i < m; i++) rows[i].norm2 = rows[i].norm2 * F + slack; /* Inf stays Inf */
}

/* Which rows of ŶZM go to double-double: rows sorted by ‖z_i‖², largest
 * first, and *ndd of them taken until the rest have γ_m‖M‖_F(Σ ‖z_i‖²)^½
 * <= 1/32 (steering only; e_Y is computed from the split afterwards).
 * *frobZ2 >= ‖Z‖_F², *gM >= γ_m‖M‖_F.  0 when Z is not finite. */
static int split_rows(const route_ws *w, double frob2, row_norm *rows, size_t *ndd, double *frobZ2, double *gM)
{
    size_t m = w->m;
    mpfr_t a, b;
    mpfr_inits2(64, a, b, (mpfr_ptr)0);
    row_norms_up(w->Z, m, rows);
    mpfr_set_zero(a, 1);
    int ok = 1;
    for (size_t i = 0; i < m; i++) ok &= isfinite(rows[i].norm2) != 0, mpfr_add_d(a, a, rows[i].norm2, MPFR_RNDU);
    *frobZ2 = mpfr_get_d(a, MPFR_RNDU);
    vijp_cert_gamma_up(a, m, 53);
    mpfr_set_d(b, frob2, MPFR_RNDU);
    mpfr_sqrt(b, b, MPFR_RNDU);
    mpfr_mul(a, a, b, MPFR_RNDU);
    *gM = mpfr_get_d(a, MPFR_RNDU);
    mpfr_clears(a, b, (mpfr_ptr)0);
    double cap = 1 / (32 * *gM), rest = *frobZ2;
    *ndd = 0;
    if (!ok || !isfinite(*frobZ2)) return 0;
    qsort(rows, m, sizeof *rows, larger_first);
    while (*ndd < m && rest > cap * cap) rest -= rows[(*ndd)++].norm2;
    return 1;
}

/* Ŷ = fl(ZM) in B and e_Y >= ‖Ŷ − ZM‖_F (rounded up): a double product
 * (dtrmm) for every row, then the first ndd rows of rows[] again in
 * double-double: their rows of Z gathered (ZD, ndd × m), one gemv per
 * column of M.  0 when a double-double bound is not finite. */
static int precondition_product(const double *M, route_ws *w, const row_norm *rows, size_t ndd, double gM,
                                double *eY)
{
    size_t m = w->m, n = w->n;
    memcpy(w->B, M, m * n * sizeof *w->B);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, (int)n, 1.0, w->Z, (int)m,
                w->B, (int)m);
    size_t nd = ndd ? ndd : 1;
    double *ZD = vijp_alloc_unset(nd * m * sizeof *ZD), *E = vijp_alloc_unset(nd * n * sizeof *E),
           *yh = vijp_alloc_unset(3 * nd * sizeof *yh), *yl = yh + nd, *bd = yl + nd;
    for (size_t k = 0; k < m; k++)
        for (size_t r = 0; r < ndd; r++) ZD[r + k * ndd] = w->Z[rows[r].row + k * m];
    int ok = 1;
    for (size_t j = 0; ok && ndd && j < n; j++) {
        ok = vijp_dd_gemv(ndd, m, ZD, ndd, M + j * m, NULL, NULL, yh, yl, bd) == 0;
        for (size_t r = 0; ok && r < ndd; r++) {
            w->B[rows[r].row + j * m] = yh[r];
            E[r + j * ndd] = (fabs(yl[r]) + bd[r]) * (1 + 0x1p-50); /* >= |yl| + bd despite two roundings */
        }
    }
    /* e_Y = γ_m‖M‖_F(Σ_double rows ‖z_i‖²)^½ + m²nη + ‖E‖_F: the double
     * rows' error, row by row γ_m‖z_i‖₂‖m_j‖₂ per entry (Cauchy–Schwarz)
     * and mη of underflow; the double-double rows' bounds */
    mpfr_t a, b;
    mpfr_inits2(64, a, b, (mpfr_ptr)0);
    mpfr_set_zero(b, 1);
    for (size_t r = ndd; r < m; r++) mpfr_add_d(b, b, rows[r].norm2, MPFR_RNDU);
    mpfr_sqrt(b, b, MPFR_RNDU);
    mpfr_mul_d(a, b, gM, MPFR_RNDU);
    mpfr_set_ui_2exp(b, m, -1074, MPFR_RNDU);
    mpfr_mul_ui(b, b, m * n, MPFR_RNDU);
    mpfr_add(a, a, b, MPFR_RNDU);
    mpfr_set_d(b, ok ? vijp_cert_sum_squares_up(E, ndd * n, 1) : INFINITY, MPFR_RNDU);
    mpfr_sqrt(b, b, MPFR_RNDU);
    mpfr_add(a, a, b, MPFR_RNDU);
    *eY = mpfr_get_d(a, MPFR_RNDU);
    mpfr_clears(a, b, (mpfr_ptr)0);
    free(ZD), free(E), free(yh);
    return ok && isfinite(*eY);
}

/* ‖Z‖₂² < t, proven: an estimate λ of λ_max(H), H = fl(ZᵀZ) (in B), from
 * 1/σ̂² (Z ≈ L⁻¹ and ‖L⁻¹‖₂ = 1/σ_min(M)) and ten steps of power
 * iteration, the larger; then the shifted Cholesky on tI − H (formed in
 * place, H formed again for a retry) with e_H = γ_m‖Z‖_F² + m²η, for t a
 * little above λ.  0 if no try succeeds. */
static int norm_bound(route_ws *w, double sigma_hat, double frobZ2, double *t)
{
    size_t m = w->m;
    double *H = w->B, *v = vijp_alloc_unset(2 * m * sizeof *v);
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)m, (int)m, 1.0, w->Z, (int)m, 0.0, H, (int)m);
    for (size_t i = 0; i < m; i++) v[i] = 1;
    double lam = 0;
    for (int it = 0; it < 10; it++) {
        cblas_dsymv(CblasColMajor, CblasUpper, (int)m, 1.0, H, (int)m, v, 1, 0.0, v + m, 1);
        lam = cblas_dnrm2((int)m, v + m, 1);
        if (!(lam > 0) || !isfinite(lam)) break;
        for (size_t i = 0; i < m; i++) v[i] = v[m + i] / lam;
    }
    free(v);
    double hint = 1 / (sigma_hat * sigma_hat);
    if (isfinite(hint) && hint > lam) lam = hint;
    double eH = gram_error_up(m, m, frobZ2); /* fl(ZᵀZ): dot products of m terms, as fl(ZZᵀ)'s */
    mpfr_t a;
    mpfr_init2(a, 64);
    int ok = 0;
    for (int k = 0; k < 4 && !ok && lam > 0 && isfinite(lam); k++) {
        if (k) cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)m, (int)m, 1.0, w->Z, (int)m, 0.0, H, (int)m);
        *t = lam * (1.05 + 0.5 * k) + 2 * eH;
        for (size_t j = 0; j < m; j++) { /* tI − H: off-diagonal negated exactly, diagonal rounded down */
            for (size_t i = 0; i < j; i++) H[i + j * m] = -H[i + j * m];
            mpfr_set_d(a, *t, MPFR_RNDN);
            mpfr_sub_d(a, a, H[j + j * m], MPFR_RNDD);
            H[j + j * m] = mpfr_get_d(a, MPFR_RNDD);
        }
        ok = shifted_cholesky_d(H, m, 0, eH);
    }
    mpfr_clear(a);
    return ok;
}

/* An upper bound on Σ_{i<j} G_ij² over the strict upper triangle of the
 * m × m G, summed column by column: vijp_cert_sum_squares_up's bound for
 * m(m − 1)/2 terms, taken from each column's own. */
static double upper_squares_up(const double *G, size_t m)
{
    mpfr_t a;
    mpfr_init2(a, 64);
    mpfr_set_zero(a, 1);
    for (size_t j = 1; j < m; j++) mpfr_add_d(a, a, vijp_cert_sum_squares_up(G + j * m, j, 1), MPFR_RNDU);
    double r = mpfr_get_d(a, MPFR_RNDU);
    mpfr_clear(a);
    return r;
}

/* σ_min(Ŷ)² > s2 for the nearly row-orthonormal Ŷ (in B), G = fl(ŶŶᵀ)
 * (in Z's buffer, Z being done with): first σ_min(Ŷ)² >= 1 − ‖G − I‖_F −
 * e_GY (Weyl), O(m²) once G is formed (the diagonal's G_ii − 1 is exact by
 * Sterbenz for G_ii in [1/2, 2], else enlarged by 2^-51); where that is
 * below 0.81, the shifted Cholesky at 0.81, 0.49, 0.25.  0 if neither
 * proves anything. */
static int near_orthonormal(route_ws *w, double *s2)
{
    size_t m = w->m, n = w->n;
    double *G = w->Z, frobY2 = vijp_cert_sum_squares_up(w->B, m * n, 1);
    if (!isfinite(frobY2)) return 0;
    double eGY = gram_error_up(m, n, frobY2), *diag = vijp_alloc_unset(m * sizeof *diag);
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, (int)m, (int)n, 1.0, w->B, (int)m, 0.0, G, (int)m);
    for (size_t j = 0; j < m; j++) {
        double g = G[j + j * m], d = fabs(g - 1);
        diag[j] = g >= 0.5 && g <= 2 ? d : d * (1 + 0x1p-51);
    }
    mpfr_t a, b;
    mpfr_inits2(64, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, upper_squares_up(G, m), MPFR_RNDU);
    mpfr_mul_2ui(a, a, 1, MPFR_RNDU); /* both triangles */
    mpfr_add_d(a, a, vijp_cert_sum_squares_up(diag, m, 1), MPFR_RNDU);
    mpfr_sqrt(a, a, MPFR_RNDU);
    mpfr_add_d(a, a, eGY, MPFR_RNDU);
    mpfr_ui_sub(b, 1, a, MPFR_RNDD);
    *s2 = mpfr_get_d(b, MPFR_RNDD);
    mpfr_clears(a, b, (mpfr_ptr)0);
    free(diag);
    static const double f[] = {0.81, 0.49, 0.25};
    int formed = 1;
    for (int t = 0; t < 3; t++) {
        if (!(f[t] > *s2)) continue;
        if (!formed) cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, (int)m, (int)n, 1.0, w->B, (int)m, 0.0, G, (int)m);
        formed = 0;
        if (shifted_cholesky_d(G, m, f[t], eGY)) *s2 = f[t];
    }
    return *s2 > 0;
}

/* Z, the split of its rows, ‖Z‖₂ (while Z is whole), Ŷ = ZM and its error,
 * then σ_min(Ŷ) (over Z's buffer): s = (sY − e_Y)/√t, rounded down. */
static int preconditioned_route(const double *M, route_ws *w, double sigma_hat, double frob2, double *s)
{
    double frobZ2, gM, eY, s2Y = 0, t = 0;
    size_t ndd;
    row_norm *rows = vijp_alloc_unset(w->m * sizeof *rows);
    int ok = preconditioner(M, w) && split_rows(w, frob2, rows, &ndd, &frobZ2, &gM) &&
             norm_bound(w, sigma_hat, frobZ2, &t) && precondition_product(M, w, rows, ndd, gM, &eY) &&
             near_orthonormal(w, &s2Y);
    free(rows);
    double sY = ok ? sqrt_down(s2Y) : 0;
    if (!ok || !(sY > eY)) return 0;
    mpfr_t a, b;
    mpfr_inits2(64, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, sY, MPFR_RNDD);
    mpfr_sub_d(a, a, eY, MPFR_RNDD);
    mpfr_set_d(b, t, MPFR_RNDU);
    mpfr_sqrt(b, b, MPFR_RNDU);
    mpfr_div(a, a, b, MPFR_RNDD);
    *s = mpfr_get_d(a, MPFR_RNDD);
    mpfr_clears(a, b, (mpfr_ptr)0);
    return *s > 0;
}

int vijp_cert_prove_double(const double *M, size_t m, size_t n, double sigma_hat, double kappa_hat, double frob2,
                           double *s, double *work)
{
    route_ws w = {.m = m, .n = n};
    w.B = work ? work : vijp_alloc_unset(m * n * sizeof *w.B);
    /* s = 0.98σ̂ first (margins for e_G, c and LAPACK's error), then 0.9σ̂;
     * then the preconditioned route, which keeps ~0.9σ far past where the
     * direct one must drop to 0.5σ̂ or 0.1σ̂; then those. */
    static const double first[] = {0.98, 0.81}, last[] = {0.25, 0.01};
    int ok = direct_route(M, &w, sigma_hat, frob2, first, 2, s);
    /* Past κ ≈ 2^50 the LQ's backward error swamps σ_min: not tried. */
    if (!ok && kappa_hat < 0x1p50) {
        w.Z = vijp_alloc_unset(m * m * sizeof *w.Z);
        ok = preconditioned_route(M, &w, sigma_hat, frob2, s);
    }
    if (!ok) ok = direct_route(M, &w, sigma_hat, frob2, last, 2, s);
    if (w.B != work) free(w.B);
    free(w.Z);
    return ok;
}

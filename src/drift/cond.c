/* The drift study's per-layer conditioning (cond.h): κ of a Jacobian exactly
 * or by Lanczos on JᵀJ and its inverse, and the Lyapunov spread's two tracked
 * directions.
 *
 * The estimate's bound.  For A symmetric positive definite (n × n) and b
 * uniformly distributed on the unit sphere of R^n, Kuczyński and
 * Woźniakowski (SIAM J. Matrix Anal. Appl. 13(4), 1992, "Estimating the
 * largest eigenvalue by the power and Lanczos algorithms with a random
 * start", Theorem 4.2): the largest Ritz value ξ_k of A on the Krylov space
 * of k products, span{b, Ab, …, A^(k−1) b}, satisfies
 *   P{ ξ_k <= (1 − ε) λ_max(A) } <= 1.648 √n e^(−√ε (2k − 1)),
 * and ξ_k <= λ_max always (a Rayleigh quotient).  A larger space only raises
 * ξ, so the bound holds for every k' >= k products: the steps taken are one
 * more than the bound asks, which covers either reading of how the paper
 * counts them.  With A = JᵀJ, √ξ estimates σ_max; with A = (JᵀJ)⁻¹ (J⁻ᵀ then
 * J⁻¹ through the LU), 1/σ_min.  ε = 1 − 1/θ puts each squared estimate
 * within θ, so each σ within √θ and their product, κ_est, within θ:
 *   κ/θ <= κ_est <= κ   with probability >= 1 − COND_DELTA,
 * each of the two allowed COND_DELTA/2 (cond_lanczos_steps).  Against the
 * power method's bound (Dixon 1983, 1 − 0.8 θ^(−k/2) √n, which this file
 * used before) the same guarantee takes about a sixth of the products at
 * width 256: 14 steps of two single-vector products each, 28, against 41
 * products of a block of four starts, 164 (per σ).
 * Rounding: each product is backward stable (a dot product per entry, LU
 * solves with partial pivoting's growth factor ρ), which moves the Ritz
 * values by a relative O(n·u) and the inverse's by O(n·u·ρ·κ); the Lanczos
 * vectors are kept orthogonal by full reorthogonalisation (twice, Gram–
 * Schmidt: "twice is enough"), so the computed T is QᵀAQ for a Q orthogonal
 * to working accuracy and its eigenvalues lie in A's range up to rounding.
 * Negligible while θ·κ_est < 1/(n·u), the range where the estimate is used
 * at all. */
#include "cond.h"
#include "base/lapack.h"
#include "base/fork.h"
#include "vijp/error.h"
#include "vijp/rng.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double unit_roundoff = 0x1p-53;

/* Whether the entries of x[0, len) are all zeros (of either sign): a
 * column at a time, without a branch an entry, so that the loop runs in
 * vector lanes (an elementwise layer's n × n Jacobian is scanned whole at
 * every sample of the drift's conditioning). */
static int all_zero(const double *x, size_t len)
{
    int nonzero = 0;
    for (size_t k = 0; k < len; k++) nonzero |= x[k] != 0;
    return !nonzero;
}

int cond_is_diagonal(const double *J, size_t m, size_t n)
{
    if (m != n) return 0;
    for (size_t j = 0; j < n; j++)
        if (!all_zero(J + j * m, j) || !all_zero(J + j * m + j + 1, m - j - 1)) return 0;
    return 1;
}

static int descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

double cond_kappa_exact(double *J, size_t m, size_t n, double *s, int *deficient)
{
    return cond_kappa_exact_known(J, m, n, cond_is_diagonal(J, m, n), s, deficient);
}

/* κ from the r singular values in s, descending, of an m × n matrix. */
static double kappa_of_values(const double *s, size_t r, size_t m, size_t n, int *deficient)
{
    double tol = (double)(m > n ? m : n) * unit_roundoff * s[0], smin = s[0];
    for (size_t k = 0; k < r; k++) {
        if (s[k] > tol) smin = s[k];
        else if (deficient) *deficient = 1;
    }
    return s[0] > 0 ? s[0] / smin : 1;
}

double cond_kappa_exact_known(double *J, size_t m, size_t n, int diagonal, double *s, int *deficient)
{
    size_t r = m < n ? m : n;
    if (diagonal) { /* elementwise layers (square): σ = |J_kk|, no SVD */
        for (size_t k = 0; k < r; k++) s[k] = J[k + k * m];
        return cond_kappa_diagonal(s, r, s, deficient);
    }
    if (deficient) *deficient = 0;
    if (vijp_lapack_dgesdd('N', m, n, J, s, NULL, 1, NULL, 1)) return NAN;
    return kappa_of_values(s, r, m, n, deficient);
}

double cond_kappa_diagonal(const double *d, size_t n, double *s, int *deficient)
{
    if (deficient) *deficient = 0;
    for (size_t k = 0; k < n; k++) s[k] = fabs(d[k]);
    qsort(s, n, sizeof *s, descending); /* dgesdd's order */
    return kappa_of_values(s, n, n, n, deficient);
}

void cond_work_init(cond_work *w, size_t n, int threads)
{
    w->n = n, w->threads = threads;
    w->lu = vijp_alloc_array(n * n, sizeof *w->lu);
    w->piv = vijp_alloc_array(n, sizeof *w->piv);
    w->basis = vijp_alloc_array(n * (cond_lanczos_steps(n) + 1), sizeof *w->basis);
    w->factored = 0;
}

void cond_work_clear(cond_work *w)
{
    free(w->lu), free(w->piv), free(w->basis);
    memset(w, 0, sizeof *w);
}

/* One panel's update of the columns past it (cond_factor). */
typedef struct {
    size_t n, j, jb; /* the panel: columns [j, j + jb), factored */
    double *A;
    const lapack_int *piv;
} panel_update;

/* Chunks [begin, end) of the columns past the panel, each: the panel's row
 * swaps, then U's rows there (L11⁻¹ A12), then the Schur complement
 * (A22 −= L21 U12).  Each column is written by its chunk's calls alone,
 * whose shapes depend on the chunk and the panel only. */
static void update_chunks(void *ctx, size_t part, size_t begin, size_t end)
{
    (void)part;
    const panel_update *u = ctx;
    size_t n = u->n, j = u->j, jb = u->jb, first = j + jb;
    const double *L11 = u->A + j + j * n, *L21 = u->A + first + j * n;
    for (size_t c = begin; c < end; c++) {
        size_t c0 = first + c * COND_LU_CHUNK, cols = n - c0 < COND_LU_CHUNK ? n - c0 : COND_LU_CHUNK;
        double *B = u->A + c0 * n;
        LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, (lapack_int)cols, B, (lapack_int)n, (lapack_int)j + 1,
                            (lapack_int)first, u->piv, 1);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, (int)jb, (int)cols, 1.0, L11,
                    (int)n, B + j, (int)n);
        if (n > first)
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)(n - first), (int)cols, (int)jb, -1.0, L21,
                        (int)n, B + j, (int)n, 1.0, B + first, (int)n);
    }
}

int cond_factor(cond_work *w, const double *J)
{
    size_t n = w->n;
    double *A = w->lu;
    vijp_team *team = NULL;
    int rc = 0;
    memcpy(A, J, n * n * sizeof *A);
    for (size_t j = 0; j < n; j += COND_LU_PANEL) {
        size_t jb = n - j < COND_LU_PANEL ? n - j : COND_LU_PANEL, first = j + jb;
        /* INFO > 0: an exact zero pivot (LAPACK goes on; the estimate cannot) */
        if (LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)(n - j), (lapack_int)jb, A + j + j * n, (lapack_int)n,
                                w->piv + j)) {
            rc = 1;
            break;
        }
        for (size_t k = j; k < first; k++) w->piv[k] += (lapack_int)j;
        if (j) /* the swaps on L's earlier columns */
            LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, (lapack_int)j, A, (lapack_int)n, (lapack_int)j + 1,
                                (lapack_int)first, w->piv, 1);
        size_t chunks = (n - first + COND_LU_CHUNK - 1) / COND_LU_CHUNK;
        /* work: the Schur complement's multiply-adds, (n − first)·(n − first)·jb, and U's rows' */
        size_t parts = vijp_fork_parts(w->threads, chunks, (double)(n - j) * (double)(n - first) * (double)jb,
                                       VIJP_TEAM_MIN_WORK);
        if (parts > 1 && !team) team = vijp_team_new(w->threads);
        panel_update u = {n, j, jb, A, w->piv};
        if (parts > 1) vijp_team_run(team, chunks, parts, update_chunks, &u);
        else update_chunks(&u, 0, 0, chunks);
    }
    vijp_team_free(team);
    w->factored = !rc;
    return rc;
}

/* x (n doubles, one column) through P's swaps (LAPACK's dlaswp): in order
 * (forward 1: P x) or last first (−1: Pᵀ x). */
static void swap_rows(const cond_work *w, double *x, int forward)
{
    lapack_int n = (lapack_int)w->n;
    LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, 1, x, n, 1, n, w->piv, forward ? 1 : -1);
}

/* Jᵀ = Uᵀ·Lᵀ·P: x := Pᵀ L⁻ᵀ U⁻ᵀ x (BLAS's triangular solves, then the
 * swaps undone). */
void cond_solve_t(const cond_work *w, double *x)
{
    int n = (int)w->n;
    cblas_dtrsv(CblasColMajor, CblasUpper, CblasTrans, CblasNonUnit, n, w->lu, n, x, 1);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasUnit, n, w->lu, n, x, 1);
    swap_rows(w, x, 0);
}

/* J = Pᵀ·L·U: x := U⁻¹ L⁻¹ P x (the swaps, then BLAS's triangular
 * solves). */
void cond_solve(const cond_work *w, double *x)
{
    int n = (int)w->n;
    swap_rows(w, x, 1);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasUnit, n, w->lu, n, x, 1);
    cblas_dtrsv(CblasColMajor, CblasUpper, CblasNoTrans, CblasNonUnit, n, w->lu, n, x, 1);
}

/* One more than the smallest k with 1.648 √n e^(−√ε (2k − 1)) <= COND_DELTA/2,
 * ε = 1 − 1/θ (see above), and at most n (the Krylov space is then all of
 * R^n: exact up to rounding). */
size_t cond_lanczos_steps(size_t n)
{
    if (n == 0) return 0; /* nothing to estimate (and no log of 0 below) */
    double root_eps = sqrt(1 - 1 / COND_THETA);
    double k = ceil((log(1.648 * sqrt((double)n) / (COND_DELTA / 2)) / root_eps + 1) / 2) + 1;
    return k < (double)n ? (size_t)k : n;
}

/* z := A z, A = JᵀJ (inverse 0) or (JᵀJ)⁻¹ = J⁻¹J⁻ᵀ (inverse 1, through
 * w's factors: cond_factor found every pivot nonzero); tmp n doubles.
 * Neither can fail: a product that overflows shows as a non-finite α. */
static void apply(const double *J, const cond_work *w, int inverse, double *z, double *tmp)
{
    int n = (int)w->n;
    if (inverse) {
        cond_solve_t(w, z), cond_solve(w, z);
        return;
    }
    cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, J, n, z, 1, 0.0, tmp, 1);
    cblas_dgemv(CblasColMajor, CblasTrans, n, n, 1.0, J, n, tmp, 1, 0.0, z, 1);
}

/* λ_max(A) estimated by Lanczos with full reorthogonalisation from a random
 * start (A as in apply): σ_max² or 1/σ_min²; 0 where an iterate was not
 * finite. */
static double lanczos(const double *J, cond_work *w, int inverse, uint64_t seed)
{
    size_t n = w->n, steps = cond_lanczos_steps(n), m = 0;
    double *Q = w->basis, *z = vijp_alloc_array(n, sizeof *z), *tmp = vijp_alloc_array(n, sizeof *tmp);
    double *h = vijp_alloc_array(steps + 1, sizeof *h), *alpha = vijp_alloc_array(steps, sizeof *alpha);
    double *beta = vijp_alloc_array(steps, sizeof *beta), top = 0;
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    for (size_t k = 0; k < n; k++) Q[k] = vijp_rng_normal(&rng); /* uniform on the sphere once normalized */
    double g = cblas_dnrm2((int)n, Q, 1);
    int ok = g > 0 && isfinite(g);
    if (ok) cblas_dscal((int)n, 1 / g, Q, 1);
    double scale = 0; /* the largest |α| so far: A's scale as the iteration has seen it */
    while (ok && m < steps) {
        double *q = Q + m * n;
        memcpy(z, q, n * sizeof *z);
        apply(J, w, inverse, z, tmp);
        alpha[m] = cblas_ddot((int)n, q, 1, z, 1);
        scale = fmax(scale, fabs(alpha[m]));
        ok = isfinite(alpha[m++]);
        if (!ok || m == steps) break;
        /* z ⟂ q_0 … q_(m−1), twice: the three-term recurrence, in full */
        for (int pass = 0; pass < 2; pass++) {
            cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)m, 1.0, Q, (int)n, z, 1, 0.0, h, 1);
            cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)m, -1.0, Q, (int)n, h, 1, 1.0, z, 1);
        }
        double b = cblas_dnrm2((int)n, z, 1);
        ok = isfinite(b);
        /* b ~ 0 beside A's scale: the space is invariant, T's eigenvalues are A's there */
        if (!ok || !(b > 4 * (double)n * unit_roundoff * scale)) break;
        beta[m - 1] = b;
        memcpy(Q + m * n, z, n * sizeof *z);
        cblas_dscal((int)n, 1 / b, Q + m * n, 1);
    }
    /* the eigenvalues of the tridiagonal T (alpha on the diagonal, beta beside it), ascending */
    if (ok && m && !LAPACKE_dsterf_work((lapack_int)m, alpha, beta)) top = alpha[m - 1];
    free(z), free(tmp), free(h), free(alpha), free(beta);
    return ok && top > 0 && isfinite(top) ? top : 0;
}

int cond_kappa_estimate(const double *J, cond_work *w, uint64_t seed, double *kappa)
{
    if (!w->factored) return 1;
    double smax2 = lanczos(J, w, 0, seed), inv_smin2 = lanczos(J, w, 1, seed ^ 0x5bd1e9955bd1e995u);
    if (!(smax2 > 0) || !(inv_smin2 > 0)) return 1;
    *kappa = sqrt(smax2) * sqrt(inv_smin2);
    return !(COND_THETA * *kappa < 1 / ((double)w->n * unit_roundoff));
}

void cond_spread_init(cond_spread *sp, size_t n)
{
    sp->n = n;
    sp->first = vijp_alloc_array(n, sizeof *sp->first);
    sp->last = vijp_alloc_array(n, sizeof *sp->last);
    sp->first[0] = 1, sp->last[n - 1] = 1; /* Q_0 = I: e_1 and e_n */
    sp->sum_first = sp->sum_last = 0;
}

void cond_spread_clear(cond_spread *sp)
{
    free(sp->first), free(sp->last);
    memset(sp, 0, sizeof *sp);
}

int cond_spread_step(cond_spread *sp, const double *J, const double *dg, const cond_work *w)
{
    size_t n = sp->n;
    double *y = vijp_alloc_array(n, sizeof *y);
    int failed = 0;
    if (dg) {
        for (size_t k = 0; k < n; k++) {
            double d = dg[k];
            if (d == 0) failed = 1;
            y[k] = d * sp->first[k];
            sp->last[k] /= d; /* J⁻ᵀ = J⁻¹ */
        }
    } else {
        cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)n, 1.0, J, (int)n, sp->first, 1, 0.0, y, 1);
        failed = !w->factored;
        if (!failed) cond_solve_t(w, sp->last);
    }
    memcpy(sp->first, y, n * sizeof *y);
    free(y);
    double grow = cblas_dnrm2((int)n, sp->first, 1), shrink = cblas_dnrm2((int)n, sp->last, 1);
    if (failed || !(grow > 0) || !isfinite(grow) || !(shrink > 0) || !isfinite(shrink)) return 1;
    cblas_dscal((int)n, 1 / grow, sp->first, 1);
    cblas_dscal((int)n, 1 / shrink, sp->last, 1);
    sp->sum_first += log10(grow);  /* |R_11| of this layer's step */
    sp->sum_last -= log10(shrink); /* |R_nn| = 1/‖J⁻ᵀ q_n‖ */
    return 0;
}

double cond_spread_value(const cond_spread *sp)
{
    return fabs(sp->sum_first - sp->sum_last);
}

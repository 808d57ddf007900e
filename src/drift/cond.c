/* The drift study's per-layer conditioning (cond.h): κ of a Jacobian exactly
 * or by power and inverse iteration, and the Lyapunov spread's two tracked
 * directions.
 *
 * The estimate's bound.  For A symmetric positive semidefinite and x
 * uniformly distributed on the unit sphere of R^n, Dixon (SIAM J. Numer.
 * Anal. 20(4), 1983, Theorem 1): for θ > 1 and k >= 1,
 *   P{ λ_max(A) <= θ (xᵀA^k x)^(1/k) } >= 1 − 0.8 θ^(−k/2) √n.
 * With m_j = xᵀA^j x, log m_j is convex in j (Cauchy–Schwarz) and m_0 = 1, so
 * m_{k+1}/m_k >= m_k^(1/k): the ratio of the last two moments is at least
 * Dixon's estimate, and never above λ_max (a Rayleigh quotient).  For
 * A = JᵀJ, alternate products z ← J z, z ← Jᵀ z from z_0 = x have
 * ‖z_j‖² = m_j, so after k + 1 products the last growth ‖z_{k+1}‖/‖z_k‖
 * lies in [σ_max/√θ, σ_max] with that probability; for A = (JᵀJ)⁻¹ the
 * products J⁻ᵀ, J⁻¹ through the LU give 1/σ_min the same way.  With
 * COND_BLOCK independent starts taken together (one pass over J reads it
 * once for all of them) and the largest growth kept, each fails only if every
 * start does: probability at most (0.8 θ^(−k/2) √n)^COND_BLOCK, which
 * cond_power_steps makes at most COND_DELTA/2 for each of the two, so
 *   κ/θ <= κ_est <= κ   with probability >= 1 − COND_DELTA.
 * Rounding: each product is backward stable (a dot product per entry, LU
 * solves with partial pivoting's growth factor ρ), which moves the growth by
 * a relative O(n·u) and the inverse's by O(n·u·ρ·κ): negligible while
 * θ·κ_est < 1/(n·u), the range where the estimate is used at all. */
#include "cond.h"
#include "base/lapack.h"
#include "vijp/error.h"
#include "vijp/rng.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double unit_roundoff = 0x1p-53;

int cond_is_diagonal(const double *J, size_t m, size_t n)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++)
            if (i != j && J[i + j * m] != 0) return 0;
    return m == n;
}

static int descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

double cond_kappa_exact(double *J, size_t m, size_t n, double *s, int *deficient)
{
    size_t r = m < n ? m : n;
    if (deficient) *deficient = 0;
    if (cond_is_diagonal(J, m, n)) { /* elementwise layers: σ = |J_kk|, no SVD */
        for (size_t k = 0; k < r; k++) s[k] = fabs(J[k + k * m]);
        qsort(s, r, sizeof *s, descending);
    } else if (vijp_lapack_dgesdd('N', m, n, J, s, NULL, 1, NULL, 1)) {
        return NAN;
    }
    double tol = (double)(m > n ? m : n) * unit_roundoff * s[0], smin = s[0];
    for (size_t k = 0; k < r; k++) {
        if (s[k] > tol) smin = s[k];
        else if (deficient) *deficient = 1;
    }
    return s[0] > 0 ? s[0] / smin : 1;
}

void cond_work_init(cond_work *w, size_t n)
{
    w->n = n;
    w->lu = vijp_alloc_array(n * n, sizeof *w->lu);
    w->piv = vijp_alloc_array(n, sizeof *w->piv);
    w->block = vijp_alloc_array(n * COND_BLOCK, sizeof *w->block);
    w->factored = 0;
}

void cond_work_clear(cond_work *w)
{
    free(w->lu), free(w->piv), free(w->block);
    memset(w, 0, sizeof *w);
}

int cond_factor(cond_work *w, const double *J)
{
    size_t n = w->n;
    memcpy(w->lu, J, n * n * sizeof *w->lu);
    lapack_int info = LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, w->lu, (lapack_int)n, w->piv);
    w->factored = info == 0;
    return !w->factored;
}

/* The smallest even k with (0.8 θ^(−k/2) √n)^COND_BLOCK <= COND_DELTA/2. */
size_t cond_power_steps(size_t n)
{
    double per_start = pow(COND_DELTA / 2, 1.0 / COND_BLOCK);
    double half = ceil(log(0.8 * sqrt((double)n) / per_start) / log(COND_THETA));
    return 2 * (size_t)(half > 1 ? half : 1);
}

/* Normalizes each column of the n × COND_BLOCK block z; the largest norm it
 * had, or 0 where a column vanished (or was not finite). */
static double normalize(double *z, size_t n)
{
    double top = 0;
    for (size_t c = 0; c < COND_BLOCK; c++) {
        double g = cblas_dnrm2((int)n, z + c * n, 1);
        if (!(g > 0) || !isfinite(g)) return 0;
        cblas_dscal((int)n, 1 / g, z + c * n, 1);
        if (g > top) top = g;
    }
    return top;
}

/* Uniform on the unit sphere, column by column: normalized Gaussians. */
static void random_start(double *z, size_t n, uint64_t seed)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    for (size_t k = 0; k < n * COND_BLOCK; k++) z[k] = vijp_rng_normal(&rng);
    (void)normalize(z, n);
}

/* The last growth of k + 1 alternating products from a random start:
 * σ_max of J (inverse 0) or 1/σ_min (inverse 1); 0 where an iterate vanished. */
static double power(const double *J, cond_work *w, int inverse, uint64_t seed)
{
    size_t n = w->n, steps = cond_power_steps(n) + 1;
    double *z = w->block, growth = 0;
    double *tmp = vijp_alloc_array(n * COND_BLOCK, sizeof *tmp);
    random_start(z, n, seed);
    for (size_t j = 0; j < steps; j++) {
        int transposed = inverse ? j % 2 == 0 : j % 2 == 1; /* J⁻ᵀ first, then J⁻¹; J first, then Jᵀ */
        if (inverse) {
            if (LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, transposed ? 'T' : 'N', (lapack_int)n, COND_BLOCK, w->lu,
                                    (lapack_int)n, w->piv, z, (lapack_int)n)) {
                growth = 0;
                break;
            }
        } else {
            cblas_dgemm(CblasColMajor, transposed ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)n, COND_BLOCK,
                        (int)n, 1.0, J, (int)n, z, (int)n, 0.0, tmp, (int)n);
            memcpy(z, tmp, n * COND_BLOCK * sizeof *z);
        }
        if (!(growth = normalize(z, n))) break;
    }
    free(tmp);
    return growth;
}

int cond_kappa_estimate(const double *J, cond_work *w, uint64_t seed, double *kappa)
{
    if (!w->factored) return 1;
    double smax = power(J, w, 0, seed), inv_smin = power(J, w, 1, seed ^ 0x5bd1e9955bd1e995u);
    if (!(smax > 0) || !(inv_smin > 0)) return 1;
    *kappa = smax * inv_smin;
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

int cond_spread_step(cond_spread *sp, const double *J, int diagonal, const cond_work *w)
{
    size_t n = sp->n;
    double *y = vijp_alloc_array(n, sizeof *y);
    int failed = 0;
    if (diagonal) {
        for (size_t k = 0; k < n; k++) {
            double d = J[k + k * n];
            if (d == 0) failed = 1;
            y[k] = d * sp->first[k];
            sp->last[k] /= d; /* J⁻ᵀ = J⁻¹ */
        }
    } else {
        cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)n, 1.0, J, (int)n, sp->first, 1, 0.0, y, 1);
        failed = !w->factored || LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, 'T', (lapack_int)n, 1, w->lu, (lapack_int)n,
                                                     w->piv, sp->last, (lapack_int)n);
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

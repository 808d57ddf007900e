/* The radius test's price: σ_min(J) >= σ_min(M) − ‖Δ‖₂ for every J = M + Δ
 * with |Δ| <= R entrywise (Weyl), and ‖Δ‖₂ <= ‖|Δ|‖₂ <= ‖R‖₂ (the spectral
 * norm is monotone on non-negative matrices: |Δx| <= |Δ||x| <= R|x|).  Any
 * upper bound on ‖R‖₂ will do; the least of three, each rounded up:
 *   ‖R‖_F                    (what the test paid before; tight for rank 1);
 *   √(‖R‖_1·‖R‖_∞)           (Hölder; the max column and row sums);
 *   √ρ(RᵀR) <= √max_i (RᵀR v)_i / v_i  for any v > 0 (Collatz–Wielandt:
 *                            RᵀR is non-negative), v from a few power
 *                            iterations in double, which need not be
 *                            accurate: only the bound's evaluation is
 *                            rigorous (MPFR at 53 bits, every operation
 *                            rounded up on non-negative terms).
 * An n × n radius of equal entries r costs n·r by all three; a diagonal
 * one max r_ii where ‖R‖_F pays √Σ r_ii². */
#include "radius.h"
#include "vijp/vijp.h"
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#define POWER_STEPS 8 /* iterations towards R's leading right singular vector */

/* w = RᵀR v in double (the direction only: no rounding claim). */
static void gram_apply(const double *R, size_t m, size_t n, const double *v, double *t, double *w)
{
    for (size_t i = 0; i < m; i++) t[i] = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) t[i] += R[i + j * m] * v[j];
    for (size_t j = 0; j < n; j++) {
        double s = 0;
        for (size_t i = 0; i < m; i++) s += R[i + j * m] * t[i];
        w[j] = s;
    }
}

/* max_j (RᵀR v)_j / v_j, every operation rounded up (all terms >= 0, v > 0). */
static double collatz_wielandt_up(const double *R, size_t m, size_t n, const double *v)
{
    mpfr_t *t = vijp_alloc_array(m ? m : 1, sizeof *t), s, p, best;
    mpfr_inits2(53, s, p, best, (mpfr_ptr)0);
    for (size_t i = 0; i < m; i++) {
        mpfr_init2(t[i], 53), mpfr_set_zero(t[i], 1);
        for (size_t j = 0; j < n; j++) mpfr_set_d(p, R[i + j * m], MPFR_RNDU), mpfr_mul_d(p, p, v[j], MPFR_RNDU),
                                       mpfr_add(t[i], t[i], p, MPFR_RNDU);
    }
    mpfr_set_zero(best, 1);
    for (size_t j = 0; j < n; j++) {
        mpfr_set_zero(s, 1);
        for (size_t i = 0; i < m; i++) mpfr_mul_d(p, t[i], R[i + j * m], MPFR_RNDU), mpfr_add(s, s, p, MPFR_RNDU);
        mpfr_div_d(s, s, v[j], MPFR_RNDU);
        mpfr_max(best, best, s, MPFR_RNDU);
    }
    double r = mpfr_get_d(best, MPFR_RNDU);
    for (size_t i = 0; i < m; i++) mpfr_clear(t[i]);
    mpfr_clears(s, p, best, (mpfr_ptr)0);
    free(t);
    return r;
}

/* √x rounded up. */
static double sqrt_up(double x)
{
    mpfr_t a;
    mpfr_init2(a, 53);
    mpfr_set_d(a, x, MPFR_RNDU), mpfr_sqrt(a, a, MPFR_RNDU);
    double r = mpfr_get_d(a, MPFR_RNDU);
    mpfr_clear(a);
    return r;
}

double vijp_radius_norm2_up(const double *R, size_t m, size_t n)
{
    mpfr_t acc, t, col;
    mpfr_inits2(128, acc, t, (mpfr_ptr)0), mpfr_init2(col, 53);
    mpfr_set_zero(acc, 1);
    double *rows = vijp_alloc_array(m ? m : 1, sizeof *rows), col_max = 0;
    for (size_t i = 0; i < m; i++) rows[i] = 0;
    for (size_t j = 0; j < n; j++) {
        mpfr_set_zero(col, 1);
        for (size_t i = 0; i < m; i++) {
            double r = R[i + j * m];
            mpfr_set_d(t, r, MPFR_RNDN), mpfr_sqr(t, t, MPFR_RNDU), mpfr_add(acc, acc, t, MPFR_RNDU); /* exact square */
            mpfr_add_d(col, col, r, MPFR_RNDU);
            mpfr_set_d(t, rows[i], MPFR_RNDN), mpfr_add_d(t, t, r, MPFR_RNDU), rows[i] = mpfr_get_d(t, MPFR_RNDU);
        }
        col_max = fmax(col_max, mpfr_get_d(col, MPFR_RNDU));
    }
    double row_sum_max = 0;
    for (size_t i = 0; i < m; i++) row_sum_max = fmax(row_sum_max, rows[i]);
    double frob = sqrt_up(mpfr_get_d(acc, MPFR_RNDU));
    mpfr_set_d(t, col_max, MPFR_RNDU), mpfr_mul_d(t, t, row_sum_max, MPFR_RNDU);
    double best = fmin(frob, sqrt_up(mpfr_get_d(t, MPFR_RNDU)));
    mpfr_clears(acc, t, col, (mpfr_ptr)0);
    free(rows);
    if (best == 0 || !isfinite(best) || !m || !n) return best;

    double *v = vijp_alloc_array(n, sizeof *v), *w = vijp_alloc_array(n, sizeof *w), *tm = vijp_alloc_array(m, sizeof *tm);
    for (size_t j = 0; j < n; j++) v[j] = 1;
    for (int k = 0; k < POWER_STEPS; k++) {
        gram_apply(R, m, n, v, tm, w);
        double top = 0;
        for (size_t j = 0; j < n; j++) top = fmax(top, w[j]);
        if (!(top > 0) || !isfinite(top)) break;
        for (size_t j = 0; j < n; j++) v[j] = w[j] / top;
    }
    double vmax = 0;
    for (size_t j = 0; j < n; j++) vmax = fmax(vmax, v[j]);
    for (size_t j = 0; j < n; j++) v[j] = fmax(v[j], 0x1p-30 * vmax); /* strictly positive: any v > 0 gives a bound */
    if (vmax > 0 && isfinite(vmax)) best = fmin(best, sqrt_up(collatz_wielandt_up(R, m, n, v)));
    free(v), free(w), free(tm);
    return best;
}

/* The drift study's per-layer conditioning, internal to drift/: κ of one
 * layer Jacobian and one step of the Lyapunov spread, exact (full SVD,
 * Householder QR of J·Q) up to a width, estimated above it from an LU
 * factorization at O(n²) per iteration (cond.c says how, and how well). */
#ifndef VIJP_DRIFT_COND_H
#define VIJP_DRIFT_COND_H

#include <lapacke.h>
#include <stddef.h>
#include <stdint.h>

/* The estimate's accuracy: κ/COND_THETA <= κ_est <= κ (up to rounding) with
 * probability at least 1 − COND_DELTA over its seeded random starts
 * (Kuczyński and Woźniakowski's bound for Lanczos, cond.c). */
#define COND_THETA 1.25
#define COND_DELTA 1e-3

/* κ = σ_max/σ_min over the σ > max(m,n)·u·σ_max of an m × n Jacobian
 * (destroyed), u = 2^-53; 1 for J = 0.  A square diagonal J (elementwise
 * layers) by |J_kk| in O(n), any other by LAPACK's dgesdd; NaN where dgesdd
 * fails.  s: min(m, n) doubles of scratch.  *deficient (may be NULL): some σ
 * was left out (J is numerically rank deficient). */
double cond_kappa_exact(double *J, size_t m, size_t n, double *s, int *deficient);
/* The same, diagonal saying what cond_is_diagonal(J, m, n) says (the
 * caller has asked it already: the question reads all of J). */
double cond_kappa_exact_known(double *J, size_t m, size_t n, int diagonal, double *s, int *deficient);
/* The same of the n × n diagonal matrix diag(d), from d alone (s: n
 * doubles of scratch, which may be d itself). */
double cond_kappa_diagonal(const double *d, size_t n, double *s, int *deficient);
/* Whether an m × n J is square and diagonal. */
int cond_is_diagonal(const double *J, size_t m, size_t n);

/* The blocked LU's shape (cond_factor): panels of COND_LU_PANEL columns,
 * and the columns past each panel updated in chunks of COND_LU_CHUNK, the
 * unit of work the curve's threads share.  Neither depends on the thread
 * count, so neither do the factors. */
#define COND_LU_PANEL 64
#define COND_LU_CHUNK 128

/* What the estimates of one n × n Jacobian share: its LU factors. */
typedef struct {
    size_t n;
    int threads;     /* cond_factor runs on up to this many: the same bits on any */
    double *lu;      /* P·J = L·U, column-major: U on and above the diagonal, L's multipliers below */
    lapack_int *piv; /* P: row c swapped with row piv[c] − 1, c ascending (LAPACK's ipiv) */
    double *basis;   /* n × (cond_lanczos_steps(n) + 1): the Lanczos vectors */
    int factored;    /* lu holds the factors of the J last given to cond_factor, every pivot nonzero */
} cond_work;

void cond_work_init(cond_work *w, size_t n, int threads);
void cond_work_clear(cond_work *w);
/* LU with partial pivoting of J (n × n, column-major, kept), 2n³/3 flops,
 * right-looking by panels as LAPACK's dgetrf: each panel by LAPACK, then
 * the columns past it (their row swaps, U's rows, the Schur complement:
 * dlaswp, dtrsm, dgemm) a chunk at a time on w->threads threads, each chunk
 * by the same calls whatever the count, so the same bits on any count (for
 * one BLAS build, run on one thread as every vijp command runs it: which
 * products it forms, and how, are the BLAS's).  0, or
 * 1 where a pivot is exactly zero (J singular: w->factored is 0). */
int cond_factor(cond_work *w, const double *J);
/* x := J⁻ᵀ x and x := J⁻¹ x (n doubles) through w's factors, by BLAS's
 * triangular solves (dtrsv): backward stable, as LAPACK's dgetrs, with the
 * growth factor of partial pivoting. */
void cond_solve_t(const cond_work *w, double *x);
void cond_solve(const cond_work *w, double *x);
/* Lanczos steps (products with JᵀJ or its inverse) per estimate at width n
 * (cond.c). */
size_t cond_lanczos_steps(size_t n);
/* κ_est of J (n × n, factored in w): σ_max² by Lanczos on JᵀJ, 1/σ_min² by
 * Lanczos on (JᵀJ)⁻¹ = J⁻¹J⁻ᵀ through the LU, each from one random start:
 * at most 4·cond_lanczos_steps(n) products with J, Jᵀ, J⁻ᵀ or J⁻¹ in all,
 * at 2n² flops each.  0 with *kappa set, or 1 where the caller must take
 * cond_kappa_exact: J was not factored, an iterate was not finite, or θ·κ_est
 * >= 1/(n·u), where J may be numerically singular and the exact κ leaves
 * singular values out. */
int cond_kappa_estimate(const double *J, cond_work *w, uint64_t seed, double *kappa);

/* The Lyapunov spread from Benettin's first and last directions only.
 * Benettin's iteration J_i Q_{i−1} = Q_i R_i from Q_0 = I gives
 * J_i ⋯ J_1 = Q_i R_i ⋯ R_1, so its sums Σ log10|R_kk| are log10 of the
 * diagonal of that product's R factor.  The first is log10 ‖P_i e_1‖, P_i the
 * product: q_1 ← J q_1.  The last is −log10 ‖P_i⁻ᵀ e_n‖ (the last row of
 * R⁻¹ is e_nᵀ/R_nn): q_n ← J⁻ᵀ q_n through the LU.  The same two directions as
 * the full iteration's, at O(n²) per layer; |first − last| is a lower bound on
 * its max_k − min_k, equal once the first direction is the most stretched
 * and the last the least (the order the iteration converges to). */
typedef struct {
    size_t n;
    double *first, *last;
    double sum_first, sum_last; /* log10 |R_11|, log10 |R_nn| of the product */
} cond_spread;

void cond_spread_init(cond_spread *sp, size_t n);
void cond_spread_clear(cond_spread *sp);
/* One layer: J (n × n) factored in w, or diagonal, its diagonal dg (J and
 * w are then not read and may be NULL; dg NULL: J is not diagonal).  0, or 1 where the step
 * cannot be taken (a zero pivot or diagonal entry, a vanished iterate): the
 * product is singular from here on. */
int cond_spread_step(cond_spread *sp, const double *J, const double *dg, const cond_work *w);
/* |sum_first − sum_last|, decades. */
double cond_spread_value(const cond_spread *sp);

#endif

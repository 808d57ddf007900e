/* The floating-point certificate's pieces shared by the double routes
 * (proof_double.c) and the verdict and MPFR certificate (certify.c);
 * internal.  The derivation is at the top of certify.c. */
#ifndef VIJP_CERTIFY_PROOF_H
#define VIJP_CERTIFY_PROOF_H

#include "vijp/certify.h"
#include <mpfr.h>
#include <stddef.h>

/* A rigorous upper bound on Σ x[i·inc]² over len terms; +Inf when the
 * double sum overflows. */
double vijp_cert_sum_squares_up(const double *x, size_t len, size_t inc);

/* γ_k = k u / (1 − k u), rounded up, in g (u = 2^-p). */
void vijp_cert_gamma_up(mpfr_t g, unsigned long k, long p);

/* Rump's constant c (certify.c, step 3) for an N × N matrix with trace tr
 * and largest diagonal dmax (upper bounds), u = 2^-p, underflow unit eta;
 * 0 when 2(N+1)u >= 1/2 (no certificate). */
int vijp_cert_rump_constant(mpfr_t c, const mpfr_t tr, const mpfr_t dmax, size_t N, long p, const mpfr_t eta);

/* vijp_numeric_analysis with A (m·n doubles, overwritten) as LAPACK's copy
 * of J: the proof then reuses those pages (a fresh 2 MB buffer costs ~25 ms
 * in page faults on the machines measured). */
int vijp_numeric_analysis_in(const double *J, size_t m, size_t n, vijp_numeric *out, double *A, vijp_error *err);

/* The double certificate of σ_min(M) > *s for the m × n M (m <= n), with
 * LAPACK's estimates sigma_hat (σ_min) and kappa_hat (σ_max/σ_min) of M
 * itself and frob2 >= ‖M‖_F² (finite): the direct route where it can reach,
 * else the preconditioned one.  1 with *s (rounded down) on success.  Cost:
 * a few m²n operations; the routes that cannot reach, judged from
 * sigma_hat, kappa_hat and frob2, are skipped rather than run to fail.
 * work: m·n doubles of scratch, or NULL (then allocated). */
int vijp_cert_prove_double(const double *M, size_t m, size_t n, double sigma_hat, double kappa_hat, double frob2,
                           double *s, double *work);

#endif

/* Shared by the certification suites (t-certify.c: matrices; t-certify-layer.c:
 * layers; t-certify-act.c: activations): matrices with known singular values
 * built in MPFR, the Courant–Fischer oracle of t-certify.c's header, an exact
 * rational rank, the verdict bookkeeping and checks every certificate
 * passes, and the one-layer fixtures. */
#ifndef VIJP_TESTS_CERTFIX_H
#define VIJP_TESTS_CERTFIX_H

#include "testutil.h"
#include "vijp/certify.h"
#include <mpfr.h>

#define MP_PREC 256
#define N_PRECS 8 /* certified-mpfr:106 · 2^k, k < N_PRECS */

typedef struct {
    const char *name;
    long cases, cert_double, cert_mpfr, by_prec[N_PRECS], not_sub, not_sub_proven, inconclusive, bounded;
    double worst; /* largest s / bound seen */
    /* full-rank cases (m <= n, σ_m proven > 0) by the prescribed κ = σ_max/σ_min:
     * [1, 1e5), [1e5, 1e12), [1e12, 1e16), [1e16, ∞); and how many certified */
    long band_cases[4], band_cert[4];
} tally;

typedef struct {
    vijp_net net;
    const vijp_layer *L;
    const double *theta;
} one_layer;

long rand_int(vijp_rng *r, long lo, long hi);
void log_uniform(mpfr_t x, vijp_rng *r, double lo, double hi);
mpfr_t *mp_vec(size_t len);
void mp_vec_free(mpfr_t *v, size_t len);
void mp_orthogonal(mpfr_t *Q, size_t k, vijp_rng *r);
void mp_svd_compose(double *J, size_t m, size_t n, mpfr_t *U, mpfr_t *V, mpfr_t *sig);
double oracle_bound_mp(const double *J, size_t m, size_t n, mpfr_t *y);
double oracle_bound_d(const double *J, size_t m, size_t n, const double *y);
void lapack_last_left(const double *J, size_t m, size_t n, double *y);
int kappa_band(double kappa);
void tally_print(const tally *t);
int exact_null(const double *J, size_t m, size_t n, const double *y);
size_t rank_rational(const double *J, size_t m, size_t n);
void check_proven_cokernel(const double *J, size_t m, size_t n, const vijp_certificate *c, const char *what, long cs);
void check_cert(const double *J, size_t m, size_t n, const double *bounds, int nb, int full_rank, tally *t, const char *what, long cs, uint64_t seed, vijp_certificate *keep);
void one_layer_init(one_layer *o, const char *spec, size_t width, uint64_t seed);
void certify_at(const one_layer *o, const double *x, vijp_certificate *c);

#endif

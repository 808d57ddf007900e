/* make bench (certification part), three tables, each ratio measured in
 * this run (OpenBLAS on one thread, as vijp certify runs it):
 *  1. Gaussian dense n × n Jacobians, n = 512, 1024, 2048: the time of the
 *     whole certification (LAPACK's singular values, then the proof), each
 *     part timed directly by vijp_certify_matrix, against LAPACK's dgesdd
 *     with singular vectors ('S', what an SVD-based certificate would call)
 *     on the same matrix.  Target: total <= 1 × dgesdd.
 *  2. n = 512, J = Q1·diag(logspace(0, −log10 κ, n))·Q2ᵀ (Q1, Q2 the Q
 *     factors of seeded Gaussian matrices) for κ = 1e3 .. 1e14: the same
 *     ratio, and s/σ_min (σ_min = 1/κ up to J's rounding, ~n·u relative).
 *     Target: total <= 1 × dgesdd for κ <= 1e12; κ = 1e14 decided in <= 10 s.
 *  3. That J at κ = 1e3 and 1e12 scaled by 1e±150, 1e±300: the proven s
 *     relative to the unscaled one's times the scale (1 when the bound is
 *     scale-invariant). */
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "bench.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double svd, analysis, proof, total; /* wall seconds (the parts timed by vijp_certify_matrix) */
    double svd_cpu, total_cpu;           /* process CPU seconds: steadier on a loaded machine */
} times;

/* The best of reps of dgesdd('S') and of the certification of J (n × n). */
static times time_certify(const double *J, size_t n, int reps, vijp_certificate *c)
{
    double *A = malloc(n * n * sizeof *A), *sv = malloc(n * sizeof *sv), *U = malloc(n * n * sizeof *U),
           *VT = malloc(n * n * sizeof *VT);
    times best = {1e300, 1e300, 1e300, 1e300, 1e300, 1e300};
    memset(c, 0, sizeof *c);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now(), c0 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
        memcpy(A, J, n * n * sizeof *A);
        LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (int)n, (int)n, A, (int)n, sv, U, (int)n, VT, (int)n);
        double t1 = bench_now(), c1 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
        vijp_certificate_clear(c);
        BENCH_MUST(vijp_certify_matrix(J, NULL, n, n, NULL, c, NULL));
        double c2 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
        best.svd_cpu = fmin(best.svd_cpu, c1 - c0);
        best.total_cpu = fmin(best.total_cpu, c2 - c1);
        best.svd = fmin(best.svd, t1 - t0);
        best.analysis = fmin(best.analysis, c->seconds_numeric);
        best.proof = fmin(best.proof, c->seconds_proof);
        best.total = fmin(best.total, c->seconds_numeric + c->seconds_proof);
    }
    free(A), free(sv), free(U), free(VT);
    return best;
}

/* Orthogonal Q (k × k): the Q factor of a seeded Gaussian matrix. */
static void orthogonal(double *Q, size_t k, vijp_rng *rng)
{
    double *tau = malloc(k * sizeof *tau);
    for (size_t i = 0; i < k * k; i++) Q[i] = vijp_rng_normal(rng);
    BENCH_MUST(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (int)k, (int)k, Q, (int)k, tau));
    BENCH_MUST(LAPACKE_dorgqr(LAPACK_COL_MAJOR, (int)k, (int)k, (int)k, Q, (int)k, tau));
    free(tau);
}

/* J = Q1·diag(logspace(0, −log10 κ, n))·Q2ᵀ. */
static void logspace_matrix(double *J, size_t n, double kappa, uint64_t seed)
{
    double *Q1 = malloc(n * n * sizeof *Q1), *Q2 = malloc(n * n * sizeof *Q2);
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    orthogonal(Q1, n, &rng), orthogonal(Q2, n, &rng);
    for (size_t l = 0; l < n; l++) {
        double s = pow(kappa, -(double)l / (double)(n - 1));
        for (size_t i = 0; i < n; i++) Q1[i + l * n] *= s;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0, Q1, (int)n, Q2, (int)n, 0.0, J,
                (int)n);
    free(Q1), free(Q2);
}

static void row(const char *label, const times *t, const vijp_certificate *c, double sigma_min)
{
    printf("%12s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f  %-21s %-17s", label, t->svd, t->analysis, t->proof,
           t->analysis / t->svd, t->proof / t->svd, t->total / t->svd, t->total_cpu / t->svd_cpu,
           vijp_verdict_name(c->verdict), c->method);
    if (sigma_min > 0) printf(" s/σ_min %.3f", c->s / sigma_min);
    else printf(" s %.3g", c->s);
    printf("\n");
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    int reps = (int)bench_count(argc, argv, smoke ? 1 : 2, 1, 1000,
                                "Usage: bench-certify [--smoke] [REPS]\n  certification of n x n Jacobians (Gaussian; prescribed "
                                "condition; scaled) against LAPACK's dgesdd, best of REPS (default 2).\n");
    const char *head = "%12s %9s %9s %9s %9s %9s %9s %9s  %s\n";
    /* one thread, as vijp certify runs (cli/certify.c): the same numbers on every run */
    openblas_set_num_threads(1);
    printf("1. Gaussian dense n × n Jacobians (best of %d; seconds, then ratios to dgesdd)\n", reps);
    printf(head, "n", "dgesdd", "analysis", "proof", "anal/svd", "proof/svd", "total/svd", "cpu ratio", "verdict");
    size_t sizes[] = {512, 1024, 2048}, n_sizes = smoke ? 1 : sizeof sizes / sizeof *sizes;
    if (smoke) sizes[0] = 64;
    for (size_t t = 0; t < n_sizes; t++) {
        size_t n = sizes[t];
        double *J = malloc(n * n * sizeof *J);
        vijp_rng rng;
        vijp_rng_seed(&rng, n);
        for (size_t i = 0; i < n * n; i++) J[i] = vijp_rng_normal(&rng) / 32;
        vijp_certificate c;
        times tm = time_certify(J, n, reps, &c);
        char label[16];
        snprintf(label, sizeof label, "%zu", n);
        row(label, &tm, &c, 0);
        vijp_certificate_clear(&c);
        free(J);
    }
    printf("target: total/svd <= 1 (wall, parts timed directly, not by difference; cpu ratio: the same in process CPU\n"
           "time, steadier under load); OpenBLAS on one thread, as vijp certify runs it\n\n");

    const size_t n = smoke ? 64 : 512;
    double *J = malloc(n * n * sizeof *J), *S = malloc(n * n * sizeof *S);
    printf("2. n = %zu, J = Q1·diag(logspace(0, -log10 κ))·Q2ᵀ (best of %d)\n", n, reps);
    printf(head, "κ", "dgesdd", "analysis", "proof", "anal/svd", "proof/svd", "total/svd", "cpu ratio", "verdict");
    static const double kappas[] = {1e3, 1e6, 1e8, 1e10, 1e11, 1e12, 1e14};
    for (size_t k = 0; k < sizeof kappas / sizeof *kappas; k++) {
        logspace_matrix(J, n, kappas[k], 7 + k);
        vijp_certificate c;
        times tm = time_certify(J, n, kappas[k] > 1e12 ? 1 : reps, &c);
        char label[16];
        snprintf(label, sizeof label, "%.0e", kappas[k]);
        row(label, &tm, &c, 1 / kappas[k]);
        vijp_certificate_clear(&c);
    }
    printf("target: total/svd <= 1 for κ <= 1e12; κ = 1e14 decided (not inconclusive) in <= 10 s\n\n");

    printf("3. scale invariance: n = %zu, s(scale·J) / (scale·s(J))\n", n);
    printf("%12s %12s %12s %12s %12s %12s\n", "κ", "1e-300", "1e-150", "1e150", "1e300", "s(J)/σ_min");
    static const double scales[] = {1e-300, 1e-150, 1e150, 1e300};
    static const double kappa2[] = {1e3, 1e12};
    for (size_t k = 0; k < 2; k++) {
        logspace_matrix(J, n, kappa2[k], 7);
        vijp_certificate c;
        BENCH_MUST(vijp_certify_matrix(J, NULL, n, n, NULL, &c, NULL));
        double s0 = c.s;
        vijp_certificate_clear(&c);
        printf("%12.0e", kappa2[k]);
        for (size_t j = 0; j < 4; j++) {
            for (size_t i = 0; i < n * n; i++) S[i] = J[i] * scales[j];
            BENCH_MUST(vijp_certify_matrix(S, NULL, n, n, NULL, &c, NULL));
            printf(" %12.6f", c.s / scales[j] / s0);
            vijp_certificate_clear(&c);
        }
        printf(" %12.4f\n", s0 * kappa2[k]);
    }
    printf("target: 1 (NaN: not certified)\n");
    free(J), free(S);
    return 0;
}

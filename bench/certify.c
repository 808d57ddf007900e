/* make bench (certification part): for Gaussian dense n × n Jacobians,
 * n = 512, 1024, 2048, the time of the whole certification (LAPACK's
 * singular values, then the proof: G = JJᵀ, its bound, the shifted
 * Cholesky, the structure checks), each part timed directly by
 * vijp_certify_matrix, against LAPACK's dgesdd with singular vectors ('S',
 * what an SVD-based certificate would call) on the same matrix, measured in
 * this run.  Target: whole certification <= 1 × dgesdd at n = 1024, 2048. */
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "bench.h"
#include <lapacke.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    int reps = (int)bench_count(argc, argv, 2, 1, 1000,
                                "Usage: bench-certify [REPS]\n  certification of n x n Gaussian Jacobians against LAPACK's dgesdd, best of REPS (default 2).\n");
    size_t sizes[] = {512, 1024, 2048};
    printf("certification of Gaussian dense n × n Jacobians (best of %d)\n", reps);
    printf("%6s %11s %11s %11s %9s %9s %9s  %s\n", "n", "dgesdd s", "analysis s", "proof s", "anal/svd", "proof/svd",
           "total/svd", "verdict");
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t];
        double *J = malloc(n * n * sizeof *J), *A = malloc(n * n * sizeof *A), *sv = malloc(n * sizeof *sv),
               *U = malloc(n * n * sizeof *U), *VT = malloc(n * n * sizeof *VT);
        vijp_rng rng;
        vijp_rng_seed(&rng, n);
        for (size_t i = 0; i < n * n; i++) J[i] = vijp_rng_normal(&rng) / 32;
        double best[4] = {1e300, 1e300, 1e300, 1e300};
        vijp_certificate c = {0};
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            memcpy(A, J, n * n * sizeof *A);
            LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (int)n, (int)n, A, (int)n, sv, U, (int)n, VT, (int)n);
            double t1 = bench_now();
            vijp_certificate_clear(&c);
            BENCH_MUST(vijp_certify_matrix(J, NULL, n, n, NULL, &c, NULL));
            if (t1 - t0 < best[0]) best[0] = t1 - t0;
            if (c.seconds_numeric < best[1]) best[1] = c.seconds_numeric;
            if (c.seconds_proof < best[2]) best[2] = c.seconds_proof;
            if (c.seconds_numeric + c.seconds_proof < best[3]) best[3] = c.seconds_numeric + c.seconds_proof;
        }
        printf("%6zu %11.3f %11.3f %11.3f %9.3f %9.3f %9.3f  %s %s s=%.3g\n", n, best[0], best[1], best[2],
               best[1] / best[0], best[2] / best[0], best[3] / best[0], vijp_verdict_name(c.verdict), c.method, c.s);
        vijp_certificate_clear(&c);
        free(J), free(A), free(sv), free(U), free(VT);
    }
    printf("target: total/svd <= 1 at n = 1024 and 2048 (parts timed directly, not by difference)\n");
    return 0;
}

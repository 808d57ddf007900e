/* make bench (conditioning part): what the drift study's per-layer
 * conditioning costs for one dense layer (J = W, Gaussian, κ ~ n) at batch
 * 16, exact against estimated, each as a ratio to one double backprop of the
 * same layer (and to Moonwalk's, which factors W) measured in this run, in
 * thread CPU time with OpenBLAS on one thread as the study runs it.
 *   before: κ by full SVD at each of the 16 samples (16 × one dgesdd,
 *           measured once: the 16 were identical) + Benettin's step
 *           (dgemm J·Q, dgeqrf, dorgqr);
 *   exact:  κ once per linear layer (one dgesdd) + Benettin's step: what
 *           widths up to VIJP_DRIFT_COND_EXACT_MAX_WIDTH (128) cost, here
 *           at the wider widths the estimate takes over, for comparison;
 *   estimate: LU (cond.h's cond_factor: LAPACK's panels, BLAS's
 *           updates, on one thread here as every cost in this table), Lanczos on JᵀJ and its
 *           inverse for κ, and the spread's two tracked directions: what
 *           wider layers cost.
 * Beside them the LU alone, LAPACK's dgetrf against cond_factor, the same
 * factorisation of the same matrix (cond_factor's chunks exist for the
 * curve's threads: at one thread the ratio says what they cost).
 * Usage: bench-cond [--smoke] [MAX_WIDTH] (default 2048; 4096 adds a run of about a
 * minute, most of it the exact SVD the estimate replaces). */
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "bench.h"
#include "drift/cond.h"
#include "base/lapack.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 16 };

static double cpu_now(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

/* One engine run of dense:n at depth 1, batch 16, in double: seconds. */
static double engine_time(size_t n, vijp_engine_kind e)
{
    vijp_net net;
    vijp_error err = {0};
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    char spec[32];
    snprintf(spec, sizeof spec, "dense:%zu", n);
    BENCH_MUST(vijp_net_build(&net, spec, 1, n, &err));
    BENCH_MUST(vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 1, &err));
    vijp_mat th, X, T;
    BENCH_MUST(vijp_net_params(&net, &F, &th, NULL));
    double *x = malloc(n * BATCH * sizeof *x), *t = malloc(n * BATCH * sizeof *t);
    vijp_net_sample(&net, BATCH, 1, x, t);
    vijp_mat_init(&X, n, BATCH, &F), vijp_mat_set_d(&X, x);
    vijp_mat_init(&T, n, BATCH, &F), vijp_mat_set_d(&T, t);
    double best = 1e300;
    for (int r = 0; r < 3; r++) {
        vijp_grads g;
        vijp_engine_opts o = {0};
        double t0 = cpu_now();
        BENCH_MUST(vijp_engine_run_opts(e, &net, &th, &X, &T, &o, &g, &err));
        double dt = cpu_now() - t0;
        best = dt < best ? dt : best;
        vijp_grads_clear(&g);
    }
    vijp_mat_clear(&X), vijp_mat_clear(&T);
    vijp_net_params_clear(&net, &th);
    vijp_net_free(&net);
    free(x), free(t);
    return best;
}

/* Benettin's exact step as drift.c takes it: Z = J Q, its QR, Q ← Q'. */
static double benettin_time(const double *J, size_t n)
{
    double *Q = calloc(n * n, sizeof *Q), *Z = malloc(n * n * sizeof *Z), *tau = malloc(n * sizeof *tau);
    for (size_t k = 0; k < n; k++) Q[k + k * n] = 1;
    double t0 = cpu_now();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, J, (int)n, Q, (int)n, 0.0, Z, (int)n);
    BENCH_MUST(vijp_lapack_dgeqrf(n, n, Z, n, tau));
    BENCH_MUST(vijp_lapack_dorgqr(n, n, n, Z, n, tau));
    double dt = cpu_now() - t0;
    free(Q), free(Z), free(tau);
    return dt;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    long max_width = bench_count(argc, argv, smoke ? 256 : 2048, 256, 8192,
                                 "Usage: bench-cond [--smoke] [MAX_WIDTH]\n  the drift study's conditioning per dense layer, batch 16, "
                                 "exact against estimated, widths 256 up to MAX_WIDTH (default 2048).\n");
    openblas_set_num_threads(1);
    /* Freed memory kept for the next run, as the vijp command keeps it for a
     * study's next curve (vijp/memory.h): steady-state costs, not first-touch
     * page faults of the engines' fresh n × n gradients. */
    vijp_memory_keep_freed();
    printf("bench-cond: conditioning of one dense layer (J = W Gaussian), batch %d, double, thread CPU seconds, "
           "OpenBLAS on 1 thread;\nratios to one double backprop of dense:n at batch %d (best of 3), Moonwalk's beside it\n",
           BATCH, BATCH);
    printf("%6s %10s %10s | %10s %10s %10s | %9s %9s %9s | %10s %8s | %9s %9s %7s\n", "width", "backprop", "moonwalk",
           "before", "exact", "estimate", "before/bp", "exact/bp", "est/bp", "est/before", "κ est/κ", "dgetrf", "LU", "ratio");
    (void)engine_time(256, VIJP_ENGINE_BACKPROP); /* uncounted: the process's first touch of the memory */
    double last_est = NAN, last_mw = NAN;
    for (size_t n = 256; n <= (size_t)max_width; n *= 2) {
        double t_bp = engine_time(n, VIJP_ENGINE_BACKPROP), t_mw = engine_time(n, VIJP_ENGINE_MOONWALK);
        vijp_rng rng;
        vijp_rng_seed(&rng, 7);
        double *J = malloc(n * n * sizeof *J), *A = malloc(n * n * sizeof *A), *s = malloc(n * sizeof *s);
        for (size_t k = 0; k < n * n; k++) J[k] = vijp_rng_normal(&rng) / sqrt((double)n);
        memcpy(A, J, n * n * sizeof *A);
        double t0 = cpu_now(), kappa = cond_kappa_exact(A, n, n, s, NULL), t_svd = cpu_now() - t0;
        double t_ben = benettin_time(J, n);
        cond_work w;
        cond_spread sp;
        cond_work_init(&w, n, 1), cond_spread_init(&sp, n);
        double est = NAN;
        t0 = cpu_now();
        BENCH_MUST(cond_factor(&w, J));
        BENCH_MUST(cond_spread_step(&sp, J, NULL, &w));
        BENCH_MUST(cond_kappa_estimate(J, &w, 1, &est));
        double t_est = cpu_now() - t0;
        memcpy(A, J, n * n * sizeof *A);
        lapack_int *ipiv = malloc(n * sizeof *ipiv);
        t0 = cpu_now();
        BENCH_MUST(LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, A, (lapack_int)n, ipiv) != 0);
        double t_getrf = cpu_now() - t0;
        t0 = cpu_now();
        BENCH_MUST(cond_factor(&w, J));
        double t_lu = cpu_now() - t0;
        free(ipiv);
        cond_work_clear(&w), cond_spread_clear(&sp);
        double before = BATCH * t_svd + t_ben, exact = t_svd + t_ben;
        last_est = t_est, last_mw = t_mw;
        printf("%6zu %10.4f %10.4f | %10.3f %10.3f %10.4f | %9.1f %9.1f %9.2f | %10.4f %8.4f | %9.4f %9.4f %7.2f\n", n,
               t_bp, t_mw, before, exact, t_est, before / t_bp, exact / t_bp, t_est / t_bp, t_est / before, est / kappa,
               t_getrf, t_lu, t_getrf / t_lu);
        fflush(stdout);
        free(J), free(A), free(s);
    }
    printf("estimate: %zu Lanczos steps at the widest (κ/%.2f <= estimate <= κ with probability >= %g)\n",
           cond_lanczos_steps((size_t)max_width), COND_THETA, 1 - COND_DELTA);
    /* The target: conditioning at the cost of the engines, the estimate
     * within 3x Moonwalk's time on the same layer at the widest width
     * (from 2048 up the LU dominates, as the engines' own factorisation). */
    printf("target: estimate <= 3x moonwalk at width %ld: %s (%.2fx)\n", max_width,
           last_est <= 3 * last_mw ? "met" : "NOT met", last_est / last_mw);
    return 0;
}

/* The reference's product kernels alone (src/ddot/ddot.h), timed one way
 * for bench-ddref (every set) and bench-drift (the floor under the
 * reference's ratio, on the active set). */
#ifndef VIJP_BENCH_DDKERNELS_H
#define VIJP_BENCH_DDKERNELS_H

#include "ddot/ddot.h"
#include "vijp/rng.h"
#include "bench.h"
#include <stdlib.h>

/* The kernels, by the parts of their x: Dot2 (double-double x), the
 * triple-double one (double-double x), four levels (triple-double x),
 * five levels (four-part x). */
enum { BENCH_DD, BENCH_TD, BENCH_QD, BENCH_D5, BENCH_DD_KINDS };

/* ns per term of set K's kernels on one width × width product of doubles
 * drawn from g, x with every part used (each 2^-54 of the one before, as a
 * level's activations use them), best of five in CPU time of this thread. */
static inline void bench_dd_kernel_ns(const vijp_dd_kernels *K, size_t width, vijp_rng *g, double ns[BENCH_DD_KINDS])
{
    size_t n = width;
    double *A = malloc(n * n * sizeof *A), *x = malloc(4 * n * sizeof *x), *y = malloc(6 * n * sizeof *y);
    if (!A || !x || !y) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n * n; i++) A[i] = vijp_rng_normal(g) / 16;
    for (size_t j = 0; j < n; j++)
        x[j] = vijp_rng_normal(g), x[n + j] = x[j] * 0x1p-54, x[2 * n + j] = x[j] * 0x1p-108, x[3 * n + j] = x[j] * 0x1p-162;
    const double *const x3[3] = {x, x + n, x + 2 * n}, *const x4[4] = {x, x + n, x + 2 * n, x + 3 * n};
    double *const y4[4] = {y, y + n, y + 2 * n, y + 3 * n}, *const y5[5] = {y, y + n, y + 2 * n, y + 3 * n, y + 4 * n};
    double best[BENCH_DD_KINDS] = {1e300, 1e300, 1e300, 1e300};
    for (int r = 0; r < 5; r++) {
        double t[BENCH_DD_KINDS + 1];
        t[0] = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        BENCH_MUST(vijp_dd_gemv_in(K, n, n, A, n, x, x + n, NULL, y, y + n, y + 4 * n) != 0);
        t[1] = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        BENCH_MUST(vijp_td_gemv_in(K, n, n, A, n, x, x + n, NULL, y, y + n, y + 2 * n, y + 4 * n) != 0);
        t[2] = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        BENCH_MUST(vijp_qd_gemv_in(K, n, n, A, n, x3, NULL, y4, y + 4 * n) != 0);
        t[3] = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        BENCH_MUST(vijp_d5_gemv_in(K, n, n, A, n, x4, NULL, y5, y + 5 * n) != 0);
        t[4] = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < BENCH_DD_KINDS; i++)
            if (t[i + 1] - t[i] < best[i]) best[i] = t[i + 1] - t[i];
    }
    for (int i = 0; i < BENCH_DD_KINDS; i++) ns[i] = 1e9 * best[i] / (double)(n * n);
    free(A), free(x), free(y);
}

#endif

/* make bench (initialisation part): what one dense layer's orthogonal
 * initialisation costs (src/layers/orthogonal.c), n × n, in thread CPU
 * seconds:
 *   mgs2:      modified Gram–Schmidt twice, the algorithm up to width
 *              VIJP_ORTHO_MGS_MAX_WIDTH (and at every width before), two
 *              columns at a time (AVX2 loops where the CPU has them);
 *   mgs2 port: the same in the portable loops (the same bits);
 *   blocked:   Stewart's Householder product, blocked, as the layers run it
 *              above that width (AVX2 loops where the CPU has them);
 *   portable:  the same in the portable loops (the same bits).
 * Each beside its flop count's rate, and mgs2/blocked.  Target: blocked
 * faster than mgs2 at every width measured, all above the threshold but
 * the first, so that the switch there pays.  (It was 10x at the widest
 * against MGS's loops one column at a time, which ran at about a third of
 * today's rate; its flop count alone gives blocked 3x.)
 * Usage: bench-orthogonal [--smoke] [MAX_WIDTH] (default 2048; 4096 adds about a
 * minute, most of it mgs2). */
#include "vijp/rng.h"
#include "bench.h"
#include "layers/init.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double cpu_now(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

enum { MGS2, MGS2_PORTABLE, BLOCKED, PORTABLE };

static double init_time(size_t n, int which)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    double *W = malloc(n * n * sizeof *W);
    if (!W) exit(1);
    double t0 = cpu_now();
    int portable = which == MGS2_PORTABLE || which == PORTABLE;
    BENCH_MUST(which == MGS2 || which == MGS2_PORTABLE ? vijp_orthogonal_mgs2(n, n, &rng, portable, W)
                                                       : vijp_orthogonal_householder(n, n, &rng, portable, 1, W));
    double dt = cpu_now() - t0;
    free(W);
    return dt;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    long max_width = bench_count(argc, argv, smoke ? 512 : 2048, 512, 8192,
                                 "Usage: bench-orthogonal [--smoke] [MAX_WIDTH]\n  one dense layer's orthogonal initialisation, "
                                 "n x n, widths 512 up to MAX_WIDTH (default 2048).\n");
    printf("bench-orthogonal: orthogonal init of one n x n layer, thread CPU seconds (GFLOP/s of each algorithm's "
           "flop count: mgs2 4n^3, blocked 4n^3/3)\n");
    printf("%6s %16s %16s %16s %16s %12s\n", "width", "mgs2", "mgs2 port", "blocked", "portable", "mgs2/blocked");
    int faster = 1;
    for (size_t n = 512; n <= (size_t)max_width; n *= 2) {
        double t_m = init_time(n, MGS2), t_mp = init_time(n, MGS2_PORTABLE);
        double t_b = init_time(n, BLOCKED), t_p = init_time(n, PORTABLE);
        double n3 = (double)n * (double)n * (double)n;
        printf("%6zu %8.3f (%5.2f) %8.3f (%5.2f) %8.3f (%5.2f) %8.3f (%5.2f) %12.1f\n", n, t_m, 4 * n3 / t_m * 1e-9, t_mp,
               4 * n3 / t_mp * 1e-9, t_b, 4 * n3 / 3 / t_b * 1e-9, t_p, 4 * n3 / 3 / t_p * 1e-9, t_m / t_b);
        faster &= t_b < t_m;
    }
    printf("target: blocked faster than mgs2 at every width from %d: %s\n", VIJP_ORTHO_MGS_MAX_WIDTH,
           faster ? "PASS" : "MISS");
    return 0;
}

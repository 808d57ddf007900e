/* make bench (drift part): one drift curve in double of dense:256,leaky:0.5
 * at depth 256, with and without the validated MPFR reference, measured in
 * this run, in CPU seconds of the process (the machine is shared: its wall
 * time swings with the load, and page faults are counted either way).  Prints the time per layer of each and the share of the time the
 * reference takes (the price of measuring against an oracle: computing it,
 * validating it at twice the precision and comparing every gradient with it). */
#include "vijp/drift.h"
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "bench.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 3;
    /* One BLAS thread, as the study runs its curves (study_pool_start): more
     * only spin (sched_yield) on these matrices, a tenth of this run's time. */
    openblas_set_num_threads(1);
    /* Freed memory kept for the next repetition, as the vijp command keeps it
     * for a study's next curve (vijp/memory.h): the best of the repetitions
     * is a curve's steady-state cost, not the kernel's first-touch faults. */
    vijp_memory_keep_freed();
    vijp_engine_kind mw = VIJP_ENGINE_MOONWALK;
    vijp_drift_setup s = {.problem = {.spec = "dense:256,leaky:0.5", .depth = 256, .batch = 1, .seed = 1,
                                      .init = {VIJP_INIT_ORTHOGONAL, 1}, .loss = VIJP_LOSS_SQUARE},
                          .engines = &mw, .n_engines = 1};
    vijp_error err = {0};
    vijp_format_fixed(&s.problem.fmt, VIJP_DOUBLE);
    double best[2] = {1e300, 1e300};
    long ref_prec = 0;
    for (int r = 0; r < reps; r++)
        for (int with_ref = 0; with_ref < 2; with_ref++) {
            vijp_drift_curve c;
            s.skip_reference = !with_ref;
            double t0 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
            if (vijp_drift_run(&s, &c, &err)) {
                fprintf(stderr, "bench-drift: %s\n", err.msg);
                return 1;
            }
            double t = bench_cpu(CLOCK_PROCESS_CPUTIME_ID) - t0;
            if (t < best[with_ref]) best[with_ref] = t;
            if (with_ref) ref_prec = c.ref_prec;
            vijp_drift_curve_clear(&c);
        }
    printf("drift sweep, double, %s, depth %zu, batch 1 (best of %d, CPU seconds)\n", s.problem.spec, s.problem.depth, reps);
    printf("  without reference: %8.3f s  %8.3f ms/layer  (backprop + moonwalk + kappa + Lyapunov)\n", best[0],
           1e3 * best[0] / (double)s.problem.depth);
    printf("  with reference:    %8.3f s  %8.3f ms/layer  (validated at %ld bits)\n", best[1],
           1e3 * best[1] / (double)s.problem.depth, ref_prec);
    double share = 100 * (best[1] - best[0]) / best[1];
    printf("  reference share:   %8.1f %%  of the sweep's time (target <= 50 %%, issue 13: %s)\n", share,
           share <= 50 ? "met" : "NOT met");
    return 0;
}

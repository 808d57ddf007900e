/* make bench (drift part): one drift curve in double of dense:256,leaky:0.5
 * at depth 256, with and without the validated MPFR reference, measured in
 * this run, in CPU seconds of the process (the machine is shared: its wall
 * time swings with the load, and page faults are counted either way).
 * Prints the time per layer of each and the share of the time the reference
 * takes (the price of measuring against an oracle: computing it, validating
 * it at twice the precision and comparing every gradient with it), then both
 * over the double backprop of the same net: the reference's cost and the
 * whole curve's, as multiples of the computation they check; the ratios
 * again at batch 16, and the floor under the reference's: its two levels'
 * dense products alone on the fastest kernels. */
#include "vijp/drift.h"
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "bench.h"
#include "ddkernels.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

/* CPU seconds of the double backprop the curve checks: the same net, depth,
 * batch, initialisation and format, best of reps runs (the denominator of
 * the ratios below); *init_s the seconds the net's initialisation took,
 * which every curve pays once before it measures anything. */
static double backprop_seconds(const vijp_grad_setup *pr, int reps, double *init_s)
{
    vijp_error err = {0};
    vijp_net net;
    double t_init = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
    if (vijp_net_build(&net, pr->spec, pr->depth, 0, &err) || vijp_net_init(&net, pr->init, pr->seed, &err)) {
        fprintf(stderr, "bench-drift: %s\n", err.msg);
        exit(1);
    }
    *init_s = bench_cpu(CLOCK_PROCESS_CPUTIME_ID) - t_init;
    net.loss = pr->loss;
    vijp_mat *th = calloc(pr->depth, sizeof *th), X, T;
    BENCH_MUST(vijp_net_params(&net, &pr->fmt, th, NULL));
    size_t n = net.width, m = vijp_net_out_width(&net);
    double *x = malloc(n * pr->batch * sizeof *x), *t = malloc(m * pr->batch * sizeof *t), best = 1e300;
    vijp_net_sample(&net, pr->batch, pr->seed, x, t);
    vijp_mat_init(&X, n, pr->batch, &pr->fmt), vijp_mat_set_d(&X, x);
    vijp_mat_init(&T, m, pr->batch, &pr->fmt), vijp_mat_set_d(&T, t);
    for (int r = -1; r < reps; r++) { /* the first run only touches the memory */
        vijp_grads g;
        double t0 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
        if (vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &X, &T, &g, &err)) {
            fprintf(stderr, "bench-drift: backprop: %s\n", err.msg);
            exit(1);
        }
        double dt = bench_cpu(CLOCK_PROCESS_CPUTIME_ID) - t0;
        if (r >= 0 && dt < best) best = dt;
        vijp_grads_clear(&g);
    }
    vijp_mat_clear(&X), vijp_mat_clear(&T);
    vijp_net_params_clear(&net, th);
    free(th), free(x), free(t);
    vijp_net_free(&net);
    return best;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A curve's CPU seconds without and with the reference (best of reps
 * after one uncounted curve) at batch B; shares[r] the reference's share
 * in pair r (reps of them); *ref_prec where it was validated. */
typedef struct {
    double best[2];
    long ref_prec;
} curve_times;

static curve_times curve_seconds(vijp_drift_setup *s, size_t B, int reps, double *shares)
{
    /* One curve with its reference first, not counted: the process's first
     * touch of the memory every later curve reuses.  Then pairs, without and
     * with the reference back to back: this shared machine's speed drifts by
     * a third over minutes, so each pair's share is taken within the pair
     * and the target judged on their median; the best times are printed too. */
    curve_times ct = {{1e300, 1e300}, 0};
    vijp_error err = {0};
    s->problem.batch = B;
    for (int r = -1; r < reps; r++) {
        double t[2] = {0, 0};
        for (int with_ref = r < 0; with_ref < 2; with_ref++) {
            vijp_drift_curve c;
            s->skip_reference = !with_ref;
            double t0 = bench_cpu(CLOCK_PROCESS_CPUTIME_ID);
            if (vijp_drift_run(s, &c, &err)) {
                fprintf(stderr, "bench-drift: %s\n", err.msg);
                exit(1);
            }
            t[with_ref] = bench_cpu(CLOCK_PROCESS_CPUTIME_ID) - t0;
            if (r >= 0 && t[with_ref] < ct.best[with_ref]) ct.best[with_ref] = t[with_ref];
            if (with_ref) ct.ref_prec = c.ref_prec;
            vijp_drift_curve_clear(&c);
        }
        if (r >= 0 && shares) shares[r] = 100 * (t[1] - t[0]) / t[1];
    }
    return ct;
}

/* The reference and the whole curve as multiples of the double backprop
 * they check (bp), against the targets. */
static void print_ratios(const curve_times *ct, double bp, double init)
{
    double ref = (ct->best[1] - ct->best[0]) / bp, whole = ct->best[1] / bp;
    printf("  reference / backprop: %7.1f x (target <= 10: %s); whole curve / backprop: %7.1f x (target <= 30: %s), "
           "%.1f x without the initialisation\n", ref, ref <= 10 ? "met" : "NOT met", whole,
           whole <= 30 ? "met" : "NOT met", (ct->best[1] - init) / bp);
}

/* The floor under a reference validated by a second level, measured in
 * this run: double's two levels' dense products alone on the active kernel
 * set (ddkernels.h: the 106-bit level's triple-double of a double-double
 * x, the 212-bit level's five levels of a four-part x), without the
 * rounding test, the storage or the comparisons.  At batch B >= 8 each
 * level forms W·X and Wᵀ·G with a term a multiply-add (triple-double at
 * 106 bits, five levels at 212), and the 212-bit level ∂W with 2B terms
 * an entry in double-double, from its g and h rounded to 106 bits (g's
 * parts times h: src/drift/half.c), where the 106-bit level forms none
 * (deferred): 2 triple-double, 2 double-double and 2 five-level terms for
 * each multiply-add of the backprop's three products.  Seconds for
 * dense_layers width × width layers at batch B. */
static double products_floor_seconds(size_t width, size_t dense_layers, size_t B)
{
    vijp_rng g;
    vijp_rng_seed(&g, 7);
    double ns[BENCH_DD_KINDS];
    bench_dd_kernel_ns(vijp_dd_active(), width, &g, ns);
    printf("  the levels' kernels alone (%s set): double-double %.2f ns, triple-double %.2f ns, five levels %.2f ns "
           "per term\n", vijp_dd_active()->name, ns[BENCH_DD], ns[BENCH_TD], ns[BENCH_D5]);
    return 1e-9 * (double)dense_layers * (double)(width * width) * (double)B *
           (2 * ns[BENCH_TD] + 2 * ns[BENCH_DD] + 2 * ns[BENCH_D5]);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    int reps = (int)bench_count(argc, argv, smoke ? 1 : 3, 1, 1000,
                                "Usage: bench-drift [--smoke] [REPS]\n  one drift curve with and without the MPFR reference, best of REPS (default 3;\n"
                                "  the double backprop they are set against, best of 10 x REPS),\n"
                                "  at batch 1 and at batch 16.\n");
    /* One BLAS thread, as the study runs its curves (study_pool_start): more
     * only spin (sched_yield) on these matrices, a tenth of this run's time. */
    openblas_set_num_threads(1);
    /* Freed memory kept for the next repetition, as the vijp command keeps it
     * for a study's next curve (vijp/memory.h): the best of the repetitions
     * is a curve's steady-state cost, not the kernel's first-touch faults. */
    vijp_memory_keep_freed();
    vijp_engine_kind mw = VIJP_ENGINE_MOONWALK;
    size_t width = smoke ? 32 : 256;
    vijp_drift_setup s = {.problem = {.spec = smoke ? "dense:32,leaky:0.5" : "dense:256,leaky:0.5", .depth = smoke ? 16 : 256, .batch = 1, .seed = 1,
                                      .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE},
                          .engines = &mw, .n_engines = 1};
    vijp_format_fixed(&s.problem.fmt, VIJP_DOUBLE);
    double *shares = calloc((size_t)(reps > 0 ? reps : 1), sizeof *shares);
    curve_times ct = curve_seconds(&s, 1, reps, shares);
    qsort(shares, (size_t)reps, sizeof *shares, by_value);
    double median = reps % 2 ? shares[reps / 2] : (shares[reps / 2 - 1] + shares[reps / 2]) / 2;
    printf("drift sweep, double, %s, depth %zu, batch 1 (best of %d after one uncounted curve, CPU seconds)\n",
           s.problem.spec, s.problem.depth, reps);
    printf("  without reference: %8.3f s  %8.3f ms/layer  (backprop + moonwalk + kappa + Lyapunov)\n", ct.best[0],
           1e3 * ct.best[0] / (double)s.problem.depth);
    printf("  with reference:    %8.3f s  %8.3f ms/layer  (validated at %ld bits)\n", ct.best[1],
           1e3 * ct.best[1] / (double)s.problem.depth, ct.ref_prec);
    printf("  reference share:   %8.1f %%  of the sweep's time, median of %d back-to-back pairs (%.1f-%.1f %%; "
           "target <= 50 %%: %s)\n", median, reps, shares[0], shares[reps - 1], median <= 50 ? "met" : "NOT met");
    /* What the curve costs against the computation it measures: the
     * reference alone (with minus without) and the whole curve. */
    /* The denominator is a few hundredths of a second: best of many, else
     * one slow run moves every ratio by a fifth (measured: 0.022 to 0.027 s
     * at best of 3 on one machine within the hour). */
    int bp_reps = 10 * reps;
    double init, bp = backprop_seconds(&s.problem, bp_reps, &init);
    printf("  double backprop:   %8.3f s  (the same net, batch and depth, best of %d; its orthogonal "
           "initialisation %.3f s, in every curve above)\n", bp, bp_reps, init);
    print_ratios(&ct, bp, init);
    /* The same at batch 16, the batch of the wide studies (bench-drift-width):
     * the backprop's products become matrix products, and the reference's
     * parameter gradients sums of 16 products each. */
    ct = curve_seconds(&s, 16, reps, NULL);
    bp = backprop_seconds(&s.problem, bp_reps, &init);
    printf("  at batch 16: without reference %.3f s, with %.3f s, double backprop %.3f s\n", ct.best[0], ct.best[1],
           bp);
    print_ratios(&ct, bp, init);
    /* What no reference validated by a second level at 2p bits on these
     * kernels can go below: its products alone (dense:256, so half the
     * layers are dense). */
    double floor = products_floor_seconds(width, s.problem.depth / 2, 16);
    printf("  the two levels' dense products alone at batch 16: %.3f s = %.1f x the double backprop (no rounding "
           "test, storage or comparison: the floor under the reference's ratio on these kernels)\n", floor,
           floor / bp);
    free(shares);
    return 0;
}

/* make bench (MPI part): how a drift study scales over MPI ranks.
 *
 * 1. Measured: one study under `mpirun -n 1` and `mpirun -n 2` (the command
 *    given as argv[1], built with MPI), wall-clock time and speedup.
 * 2. Measured, then simulated: every curve of the default study (`vijp
 *    report`: 7 nets × 2 initialisations × 4 formats × 3 seeds, depth 256,
 *    Moonwalk and reversible) timed here (CPU time) at depth 32 and scaled by 8 (the
 *    work is per layer; initialisations and seeds cost alike, so one of each
 *    is timed); and a wide study (dense:1024,leaky:0.5, depth 1024, 5
 *    formats, 10 seeds, Moonwalk), each format's curve timed at widths 64
 *    and 128 (depth 4) and extrapolated as depth × (a w² + b w³) (matrix
 *    products and the per-layer SVDs of κ).  Rank 0's own cost per curve
 *    (reading a curve's text, keeping it on disk with fsync) is measured
 *    too and scaled by depth.  An event simulation of mpi_study.c's
 *    scheduler (largest first, each rank given its next curve once rank 0
 *    has handled its last; rank 0 computing on one thread as well) gives
 *    the parallel efficiency Σ cost / (P × makespan) at 16 to 1024 ranks.
 * What limits it is printed beside: the largest curve's share of the whole,
 * and the number of curves against P. */
#include "vijp/drift.h"
#include "vijp/vijp.h"
#include "bench.h"
#include "study/unit_io.h"
#include <cblas.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* This thread's CPU seconds: curve costs that a loaded machine does not
 * inflate (the ranks of a real run each have a core). */
static double cpu_now(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

/* CPU seconds of one curve (one seed, orthogonal), kept in *keep if not NULL. */
static double run_curve(const char *spec, size_t width, size_t depth, const char *fmt, const vijp_engine_kind *eng,
                        size_t n_eng, vijp_drift_curve *keep)
{
    vijp_drift_setup s = {.problem = {.spec = spec, .depth = depth, .width = width, .batch = 1, .seed = 1,
                                      .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE},
                          .engines = eng, .n_engines = n_eng};
    vijp_error err = {0};
    BENCH_MUST(vijp_format_parse(fmt, &s.problem.fmt, &err));
    vijp_drift_curve c;
    double t0 = cpu_now();
    if (vijp_drift_run(&s, &c, &err)) {
        fprintf(stderr, "bench-mpi: %s %s: %s\n", spec, fmt, err.msg);
        exit(1);
    }
    double t = cpu_now() - t0;
    if (keep) *keep = c;
    else vijp_drift_curve_clear(&c);
    return t;
}

/* Rank 0's work for one curve: decoding its text (per layer, measured on
 * curve c) and keeping it on disk, flushed, as --resume does (per curve). */
static void rank0_costs(const vijp_drift_curve *c, const vijp_engine_kind *eng, size_t n_eng, double *decode_per_layer,
                        double *bytes_per_layer, double *keep)
{
    static study s;
    s.depth = c->depth, s.n_engines = n_eng;
    memcpy(s.engines, eng, n_eng * sizeof *eng);
    char dir[] = "/tmp/vijp-bench-mpi-XXXXXX", path[64];
    BENCH_MUST(mkdtemp(dir) == NULL);
    snprintf(path, sizeof path, "%s/unit", dir);
    size_t n;
    char *text = unit_encode(1, 0, c, &n), why[200];
    int reps = 20;
    double t0 = cpu_now();
    for (int r = 0; r < reps; r++) {
        vijp_drift_curve d;
        BENCH_MUST(unit_decode(&s, 1, 0, text, n, &d, why, sizeof why));
        vijp_drift_curve_clear(&d);
    }
    *decode_per_layer = (cpu_now() - t0) / reps / (double)c->depth;
    t0 = bench_now(); /* the flush waits on the disk, not the CPU: wall clock */
    for (int r = 0; r < reps; r++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        BENCH_MUST(fd < 0 || write(fd, text, n) != (ssize_t)n || fsync(fd) || close(fd));
    }
    *keep = (bench_now() - t0) / reps;
    free(text);
    unlink(path), rmdir(dir);
    *bytes_per_layer = (double)n / (double)c->depth;
}

typedef struct {
    double *cost, *overhead; /* seconds per curve: computing it, and rank 0 handling it */
    size_t n;
} workload;

static void add(workload *w, double cost, double overhead, size_t times)
{
    w->cost = realloc(w->cost, (w->n + times) * sizeof *w->cost);
    w->overhead = realloc(w->overhead, (w->n + times) * sizeof *w->overhead);
    for (size_t k = 0; k < times; k++) w->cost[w->n] = cost, w->overhead[w->n++] = overhead;
}

static int largest_first(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

/* mpi_study.c's schedule on P ranks: curves largest first; rank 0 computes
 * too (its own curves cost it their overhead on its thread); a curve of rank
 * r ≥ 1 waits for rank 0's handler, and r gets its next curve only then. */
static double efficiency(workload *w, int P)
{
    qsort(w->cost, w->n, sizeof *w->cost, largest_first); /* overheads scale alike: sorted the same way */
    qsort(w->overhead, w->n, sizeof *w->overhead, largest_first);
    double *free_at = calloc((size_t)P, sizeof *free_at), handler = 0, total = 0, end = 0;
    for (size_t j = 0; j < w->n; j++) {
        int r = 0;
        for (int q = 1; q < P; q++)
            if (free_at[q] < free_at[r]) r = q;
        double done = free_at[r] + w->cost[j];
        total += w->cost[j];
        if (r == 0) free_at[0] = done + w->overhead[j];
        else {
            handler = (handler > done ? handler : done) + w->overhead[j];
            free_at[r] = handler;
        }
        if (free_at[r] > end) end = free_at[r];
    }
    free(free_at);
    return total / ((double)P * end);
}

/* What bounds the efficiency: the largest curve (no run is shorter), the
 * number of curves (a rank without one idles), rank 0's handling (it serves
 * one curve at a time: past mean cost / handling ranks, they queue). */
static void limits(const char *name, workload *w)
{
    double total = 0, top = 0, handling = 0;
    for (size_t j = 0; j < w->n; j++)
        total += w->cost[j], top = w->cost[j] > top ? w->cost[j] : top, handling += w->overhead[j];
    printf("  %-8s %4zu curves, %10.1f CPU-s in all; the largest %.1f s: efficiency <= %.0f/P; rank 0 handles a curve "
           "in %.1f ms: it saturates past %.0f ranks\n", name, w->n, total, top, total / top, 1e3 * handling / (double)w->n,
           total / handling);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 1, "Usage: bench-mpi [--smoke] [VIJP]\n  a drift study over MPI ranks, measured and simulated; VIJP is the command (default build/vijp).\n");
    const char *vijp = argc > 1 ? argv[1] : "build/vijp";
    /* ---- 1. measured speedup ---- */
    char cmd[1024];
    double wall[2] = {NAN, NAN};
    int have_mpirun = system("command -v mpirun >/dev/null 2>&1") == 0;
    snprintf(cmd, sizeof cmd, "%s drift --help 2>/dev/null | grep -q 'Under mpirun'", vijp);
    const char *study_args = smoke ? "--net dense:8,leaky:0.5 --depth 8 --formats binary32,double --seeds 1,2 --no-plots -q"
                                   : "--net dense:32,leaky:0.5 --net dense:32,tanh --depth 64 --formats "
                                     "bfloat16,binary32,double,mpfr:113 --seeds 1,2 --no-plots -q";
    printf("drift study over MPI ranks: %s\n", study_args);
    if (!have_mpirun || system(cmd) != 0)
        printf("  speedup: SKIPPED (%s)\n", have_mpirun ? "this vijp is built without MPI" : "no mpirun");
    else {
        for (int p = 1; p <= 2; p++) {
            snprintf(cmd, sizeof cmd,
                     "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -n %d %s drift %s "
                     "--out /tmp/vijp-bench-mpi-out-%d",
                     p, vijp, study_args, (int)getpid());
            double t0 = bench_now();
            BENCH_MUST(system(cmd) != 0);
            wall[p - 1] = bench_now() - t0;
        }
        snprintf(cmd, sizeof cmd, "rm -rf /tmp/vijp-bench-mpi-out-%d", (int)getpid());
        BENCH_MUST(system(cmd) != 0);
        double load[1] = {NAN};
        BENCH_MUST(getloadavg(load, 1) < 0);
        printf("  P = 1: %6.2f s   P = 2: %6.2f s   speedup %.2f (ideal 2; mpirun's start-up included; load average "
               "%.1f on %ld cores)\n", wall[0], wall[1], wall[0] / wall[1], load[0], sysconf(_SC_NPROCESSORS_ONLN));
    }

    /* ---- 2. per-curve costs ---- */
    static const char *const report_specs[] = {"dense:32,leaky:0.1", "dense:32,leaky:0.5", "dense:32,leaky:0.9", "additive",
                                               "dense:32,gelu", "dense:32,mish", "dense:32,relu,dense:32,layernorm"};
    static const char *const report_formats[] = {"bfloat16", "binary32", "double", "mpfr:113"};
    static const char *const wide_formats[] = {"bfloat16", "binary16", "binary32", "double", "mpfr:113"};
    const vijp_engine_kind two[] = {VIJP_ENGINE_MOONWALK, VIJP_ENGINE_REVERSIBLE}, one[] = {VIJP_ENGINE_MOONWALK};
    openblas_set_num_threads(1); /* as every rank computes */
    vijp_drift_curve sample;
    run_curve("dense:32,leaky:0.5", 32, 32, "binary32", two, 2, &sample);
    double decode, bytes, keep;
    rank0_costs(&sample, two, 2, &decode, &bytes, &keep);
    vijp_drift_curve_clear(&sample);
    /* Rank 0 reads a curve's bytes off the network too: 1 GB/s assumed.
     * Two engines per curve in the default study, one in the wide: half the bytes. */
    double per_layer = decode + bytes / 1e9;
    printf("rank 0 per curve: %.2f ms to keep it (fsync), %.1f µs and %.0f bytes per layer (2 engines; 1 GB/s network "
           "assumed)\n", 1e3 * keep, 1e6 * decode, bytes);
    workload def = {0}, wide = {0};
    double t0 = cpu_now();
    for (size_t c = 0; c < sizeof report_specs / sizeof *report_specs; c++)
        for (size_t f = 0; f < 4; f++) /* 2 initialisations × 3 seeds alike */
            add(&def, 8 * run_curve(report_specs[c], 32, 32, report_formats[f], two, 2, NULL), keep + 256 * per_layer, 6);
    printf("default study: timed at depth 32 (%.1f CPU-s), scaled to depth 256\n", cpu_now() - t0);
    for (size_t f = 0; f < 5; f++) {
        /* cost(w) = d (a w² + b w³) through widths 64 and 128 at depth 4 */
        double c64 = run_curve("dense:64,leaky:0.5", 64, 4, wide_formats[f], one, 1, NULL) / 4;
        double c128 = run_curve("dense:128,leaky:0.5", 128, 4, wide_formats[f], one, 1, NULL) / 4;
        double b = (c128 - 4 * c64) / (128.0 * 128 * 128 - 4 * 64.0 * 64 * 64), a = (c64 - b * 64.0 * 64 * 64) / (64.0 * 64);
        if (b < 0) b = 0, a = c128 / (128.0 * 128); /* noise: no cubic term visible */
        double cost = 1024 * (a * 1024 * 1024 + b * 1024.0 * 1024 * 1024);
        add(&wide, cost, keep + 1024 * per_layer / 2, 10);
        printf("wide study, %-8s: %8.0f s per curve extrapolated (%.2e s/layer at width 128)\n", wide_formats[f], cost, c128);
    }
    printf("simulated parallel efficiency (mpi_study.c's schedule, largest first, rank 0 computing too):\n");
    limits("default", &def);
    limits("wide", &wide);
    printf("  %6s %10s %10s\n", "ranks", "default", "wide");
    for (int P = 16; P <= 1024; P *= 2) printf("  %6d %9.1f%% %9.1f%%\n", P, 100 * efficiency(&def, P), 100 * efficiency(&wide, P));
    free(def.cost), free(def.overhead), free(wide.cost), free(wide.overhead);
    return 0;
}

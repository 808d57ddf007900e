/* make bench (reference part): what a multiply-add of the drift study's MPFR
 * reference costs, at 256 and 512 bits, measured in this run on one
 * 256 × 256 matrix-vector product (the dense oracle's forward):
 *   - the sequential oracle (vo_mul then vo_add, two roundings per term: the
 *     reference before oracles/dot.c, and still every mpfr:P under test),
 *   - a plain mpfr_fma loop (one rounding per term),
 *   - the reference today: vo_dot, each output rounded once (oracles/dot.h),
 *   - Arb's arb_dot at the same precision, when the build found arb.h
 *     (Debian libflint-arb-dev; VIJP_HAVE_ARB).
 * Times are CPU seconds of this thread (the machine is shared: wall time
 * swings with the load, CPU time much less), best of several interleaved
 * rounds.  Then, with a path to the vijp command as argument, the wall and
 * CPU time of the default study (`vijp report`), against its 60 s target. */
#include "vijp/vijp.h"
#include "vijp/arith.h"
#include "oracles/dot.h"
#include "bench.h"
#include <gmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#ifdef VIJP_HAVE_ARB
#include <arb.h>
#endif

static double thread_cpu(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

enum { N = 256, METHODS = 4 };
static const char *const names[METHODS] = {"sequential oracle (vo_mul + vo_add)", "mpfr_fma loop",
                                           "vo_dot (the reference)", "arb_dot"};

/* One y = W x in method k at precision P; returns CPU seconds. */
static double run(int k, mpfr_t *W, mpfr_t *x, mpfr_t *y, const vijp_layer *L, const vijp_format *seq,
                  const vijp_format *fused, void *arb)
{
    double t0 = thread_cpu();
    if (k == 0) L->type->mp->forward(L, W, x, 1, y, seq);
    else if (k == 1) {
        for (size_t i = 0; i < N; i++) {
            mpfr_set(y[i], W[N * N + i], MPFR_RNDN);
            for (size_t j = 0; j < N; j++) mpfr_fma(y[i], W[i + j * N], x[j], y[i], MPFR_RNDN);
        }
    } else if (k == 2) L->type->mp->forward(L, W, x, 1, y, fused);
#ifdef VIJP_HAVE_ARB
    else { /* arb[0..N²) = Wᵀ row-major (rows of W contiguous, as arb_dot wants), then x, b, out */
        arb_ptr A = arb, ax = A + N * N, ab = ax + N, out = ab + N;
        for (size_t i = 0; i < N; i++) arb_dot(out + i, ab + i, 0, A + i * N, 1, ax, 1, N, mpfr_get_prec(y[0]));
    }
#else
    (void)arb;
#endif
    return thread_cpu() - t0;
}

static void per_madd(mpfr_prec_t P, int reps, double best[METHODS])
{
    vijp_net net;
    vijp_error err = {0};
    BENCH_MUST(vijp_net_build(&net, "dense:256", 1, N, &err));
    vijp_format seq, fused;
    BENCH_MUST(vijp_format_mpfr(&seq, P, &err));
    fused = seq, fused.exact_dots = 1;
    mpfr_t *W = vo_vec_new(N * N + N, &seq), *x = vo_vec_new(N, &seq), *y = vo_vec_new(N, &seq);
    vijp_rng g;
    vijp_rng_seed(&g, 1);
    for (size_t i = 0; i < N * N + N; i++) mpfr_set_d(W[i], vijp_rng_normal(&g) / 16, MPFR_RNDN);
    /* As in the reference: W holds the format's (double) weights, x the
     * layer's input, P bits wide. */
    for (size_t i = 0; i < N; i++) mpfr_set_d(x[i], vijp_rng_normal(&g), MPFR_RNDN), mpfr_div_ui(x[i], x[i], 3, MPFR_RNDN);
    void *arb = NULL;
#ifdef VIJP_HAVE_ARB
    arb_ptr A = _arb_vec_init(N * N + 3 * N);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) arf_set_mpfr(arb_midref(A + i * N + j), W[i + j * N]);
    for (size_t i = 0; i < N; i++) arf_set_mpfr(arb_midref(A + N * N + i), x[i]), arf_set_mpfr(arb_midref(A + N * N + N + i), W[N * N + i]);
    arb = A;
#endif
    for (int k = 0; k < METHODS; k++) best[k] = 1e300;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < METHODS; k++) {
#ifndef VIJP_HAVE_ARB
            if (k == 3) continue;
#endif
            double t = run(k, W, x, y, &net.layers[0], &seq, &fused, arb);
            if (t < best[k]) best[k] = t;
        }
#ifdef VIJP_HAVE_ARB
    _arb_vec_clear(A, N * N + 3 * N);
#endif
    vo_vec_free(W, N * N + N), vo_vec_free(x, N), vo_vec_free(y, N);
    vijp_net_free(&net);
}

/* Wall and CPU seconds (children's user + system) of `bin report` into a
 * temporary folder. */
static int time_report(const char *bin, double *wall, double *cpu)
{
    char dir[] = "/tmp/vijp-bench-report-XXXXXX", cmd[1024];
    if (!mkdtemp(dir)) return 1;
    snprintf(cmd, sizeof cmd, "'%s' report --out '%s/r' --no-plots -q", bin, dir);
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    double t0 = bench_now();
    int st = system(cmd);
    *wall = bench_now() - t0;
    getrusage(RUSAGE_CHILDREN, &after);
    *cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) + 1e-6 * (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
           (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) + 1e-6 * (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return !WIFEXITED(st) || WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    bench_args(argc, argv, 1, "Usage: bench-reference [VIJP]\n  an MPFR multiply-add of the drift reference; with VIJP (the command), also the default report's time.\n");
    int reps = 5;
    printf("bench-reference: ns per multiply-add, one %d x %d matrix-vector product, thread CPU time, best of %d\n", N,
           N, reps);
    double madds = (double)N * N, at256[METHODS] = {0};
    static const mpfr_prec_t precs[] = {256, 512};
    for (size_t ip = 0; ip < 2; ip++) {
        double best[METHODS];
        per_madd(precs[ip], reps, best);
        printf("  %ld bits:\n", (long)precs[ip]);
        for (int k = 0; k < METHODS; k++) {
#ifndef VIJP_HAVE_ARB
            if (k == 3) {
                printf("    %-38s  (not built: no arb.h; Debian libflint-arb-dev)\n", names[k]);
                continue;
            }
#endif
            printf("    %-38s %8.1f ns\n", names[k], 1e9 * best[k] / madds);
            if (ip == 0) at256[k] = best[k];
        }
    }
    printf("  at 256 bits: vo_dot is %.2fx faster than the sequential oracle, %.2fx the mpfr_fma loop's time",
           at256[0] / at256[2], at256[2] / at256[1]);
#ifdef VIJP_HAVE_ARB
    printf(", %.2fx arb_dot's (target <= 1.5: %s)\n", at256[2] / at256[3], at256[2] <= 1.5 * at256[3] ? "met" : "NOT met");
#else
    printf("; arb_dot not measured\n");
#endif
    if (argc > 1) {
        double wall, cpu;
        if (time_report(argv[1], &wall, &cpu)) {
            fprintf(stderr, "bench-reference: %s report failed\n", argv[1]);
            return 1;
        }
        printf("default study (%s report): %.1f s wall, %.1f s CPU (target <= 60 s wall: %s; the machine's load "
               "inflates wall time)\n", argv[1], wall, cpu, wall <= 60 ? "met" : "NOT met");
    }
    return 0;
}

/* make bench (threads inside a curve): what src/base/fork.h's fork-join
 * costs, and what it buys at the call sites that split work over a
 * format's threads (the same bits on any: tests/t-fork.c).  First the
 * overhead: µs per vijp_fork of an empty body on 2 threads (a thread started,
 * the cost VIJP_FORK_MIN_WORK is set against) and the caller's µs per
 * vijp_team_run on a team of 2 (the helper kept, and left behind when it
 * wakes later than the caller claims both parts).  Then, at width W (default 1024,
 * batch 16, one layer), wall ms per call on 1 thread and on 2, and their
 * ratio, measured in this run, best of 3: the emulated products in
 * bfloat16+binary32 (forward, vjp, parameter gradient), the elimination
 * solve Moonwalk's vijp runs (vijp_emu_dense_vijp), the emulated GELU's
 * forward and jvp on the layer's W × batch units (src/emu/activations.c),
 * and the reference's products in mpfr:64 with exact dots
 * (src/emu/dense_ref.c), and the blocked LU behind the drift study's
 * condition estimates (src/drift/cond.c, in double).  Wall time:
 * a ratio near 1 on a loaded machine means no core was free. */
#include "bench.h"
#include "vijp/vijp.h"
#include "vijp/arith.h"
#include "base/fork.h"
#include "emu/activations.h"
#include "emu/dense.h"
#include "kernels/kernels.h"
#include "emu/dense_ref.h"
#include "drift/cond.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>

#define REPS 3

static void empty(void *ctx, size_t part, size_t begin, size_t end) { (void)ctx, (void)part, (void)begin, (void)end; }

/* µs per fork (team NULL) or team run of an empty body in two parts. */
static double overhead_us(vijp_team *team, int calls)
{
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int c = 0; c < calls; c++) {
            if (team) vijp_team_run(team, 2, 2, empty, NULL);
            else vijp_fork(2, 2, INFINITY, empty, NULL);
        }
        best = fmin(best, (bench_now() - t0) / calls);
    }
    return 1e6 * best;
}

typedef enum { FORWARD, VJP, PARAM, SOLVE, GELU, GELU_JVP, REF_FORWARD, REF_VJP, REF_PARAM, COND_LU, N_CASES } bench_case;
static const char *const names[] = {"emu forward W x + b", "emu vjp Wt g", "emu param g xT", "emu vijp (LU solve)",
                                    "emu gelu forward", "emu gelu jvp",
                                    "ref forward (mpfr:64)", "ref vjp (mpfr:64)", "ref param (mpfr:64)", "cond LU (double)"};

typedef struct {
    vijp_layer L, act;
    size_t B;
    double *dx, *du, *dout; /* the GELU's units, doubles on the format's grid */
    mpfr_t *th, *x, *g, *out, *rth, *rx, *rg, *rout;
    vijp_format f, r;
    double *J; /* W in double, column-major, for the condition estimate's LU */
    cond_work cw;
} problem;

static mpfr_t *random_vec(size_t n, const vijp_format *f, vijp_rng *rng, double scale)
{
    mpfr_t *v = vo_vec_new(n, f);
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(v[i], scale * vijp_rng_normal(rng), MPFR_RNDN);
        vo_store(v[i], v[i], f);
    }
    return v;
}

/* One call of case c with the formats' threads set to threads. */
static void run_case(problem *p, bench_case c, int threads)
{
    p->f.threads = p->r.threads = threads;
    size_t B = p->B;
    if (c == FORWARD) vijp_emu_dense_forward(&p->L, p->th, p->x, B, p->out, &p->f);
    else if (c == VJP) vijp_emu_dense_vjp(&p->L, p->th, NULL, B, p->g, p->out, &p->f);
    else if (c == PARAM) vijp_emu_dense_vjp_param(&p->L, NULL, p->x, B, p->g, p->out, &p->f);
    else if (c == SOLVE) BENCH_MUST(vijp_emu_dense_vijp(&p->L, p->th, NULL, B, p->g, NULL, p->out, &p->f));
    else if (c == GELU) vijp_emu_act_forward_d(VIJP_KACT_GELU, &p->act, p->dx, B, p->dout, &p->f);
    else if (c == GELU_JVP) vijp_emu_act_jvp_d(VIJP_KACT_GELU, &p->act, p->dx, B, p->du, p->dout, &p->f);
    else if (c == REF_FORWARD) vijp_ref_dense_forward(&p->L, p->rth, p->rx, B, p->rout, &p->r);
    else if (c == REF_VJP) vijp_ref_dense_vjp(&p->L, p->rth, NULL, B, p->rg, p->rout, &p->r);
    else if (c == COND_LU) {
        p->cw.threads = threads;
        BENCH_MUST(cond_factor(&p->cw, p->J));
    }
    else vijp_ref_dense_vjp_param(&p->L, NULL, p->rx, B, p->rg, p->rout, &p->r);
}

static double case_ms(problem *p, bench_case c, int threads)
{
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        run_case(p, c, threads);
        best = fmin(best, bench_now() - t0);
    }
    return 1e3 * best;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    long W = bench_count(argc, argv, smoke ? 32 : 1024, 32, 4096,
                         "Usage: bench-fork [--smoke] [WIDTH]\n  fork-join overhead, then the emulated and reference dense "
                         "products, the LU solve, the GELU and the condition estimate's LU of one WIDTH x WIDTH layer (default 1024, batch 16) on 1 and 2 "
                         "threads, wall ms and their ratio (make bench).\n");
    openblas_set_num_threads(1); /* as a drift study runs it: the threads are the curve's */
    double fork_us = overhead_us(NULL, 200);
    vijp_team *team = vijp_team_new(2);
    double run_us = overhead_us(team, 2000);
    vijp_team_free(team);
    printf("fork-join (src/base/fork.h), an empty body in 2 parts: %.1f us a fork (a thread started), %.1f us the "
           "caller's part of a team run (helper kept)\n", fork_us, run_us);
    problem p = {.B = 16};
    size_t n = (size_t)W, B = p.B;
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zu", n);
    BENCH_MUST(vijp_layer_parse(&p.L, spec, n, NULL));
    BENCH_MUST(vijp_layer_parse(&p.act, "gelu", n, NULL));
    BENCH_MUST(vijp_format_parse("bfloat16+binary32", &p.f, NULL));
    BENCH_MUST(vijp_format_mpfr(&p.r, 64, NULL));
    p.r.exact_dots = 1;
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    /* W = I + small noise: well conditioned, so the solve never meets a zero pivot */
    p.th = random_vec(n * n + n, &p.f, &rng, 0.5 / sqrt((double)n));
    for (size_t i = 0; i < n; i++) mpfr_add_ui(p.th[i + i * n], p.th[i + i * n], 1, MPFR_RNDN), vo_store(p.th[i + i * n], p.th[i + i * n], &p.f);
    p.x = random_vec(n * B, &p.f, &rng, 1), p.g = random_vec(n * B, &p.f, &rng, 1);
    p.out = vo_vec_new(n * n + n, &p.f);
    p.dx = vijp_alloc_array(n * B, sizeof *p.dx), p.du = vijp_alloc_array(n * B, sizeof *p.du);
    p.dout = vijp_alloc_array(n * B, sizeof *p.dout);
    for (size_t i = 0; i < n * B; i++) p.dx[i] = mpfr_get_d(p.x[i], MPFR_RNDN), p.du[i] = mpfr_get_d(p.g[i], MPFR_RNDN);
    p.J = vijp_alloc_array(n * n, sizeof *p.J);
    for (size_t i = 0; i < n * n; i++) p.J[i] = mpfr_get_d(p.th[i], MPFR_RNDN);
    cond_work_init(&p.cw, n, 1);
    p.rth = vo_vec_new(n * n + n, &p.r), p.rx = vo_vec_new(n * B, &p.r), p.rg = vo_vec_new(n * B, &p.r);
    p.rout = vo_vec_new(n * n + n, &p.r);
    for (size_t i = 0; i < n * n + n; i++) mpfr_set(p.rth[i], p.th[i], MPFR_RNDN);
    for (size_t i = 0; i < n * B; i++) { /* 64-bit activations: a double and a low part */
        mpfr_set(p.rx[i], p.x[i], MPFR_RNDN), mpfr_set(p.rg[i], p.g[i], MPFR_RNDN);
        mpfr_add_d(p.rx[i], p.rx[i], ldexp(vijp_rng_uniform(&rng), -30), MPFR_RNDN);
        mpfr_add_d(p.rg[i], p.rg[i], ldexp(vijp_rng_uniform(&rng), -30), MPFR_RNDN);
    }
    printf("one dense:%zu layer, batch %zu, wall ms best of %d (1 thread, 2 threads, ratio):\n", n, B, REPS);
    for (int c = 0; c < N_CASES; c++) {
        double one = case_ms(&p, (bench_case)c, 1), two = case_ms(&p, (bench_case)c, 2);
        printf("  %-24s %9.2f %9.2f   x%.2f\n", names[c], one, two, one / two);
    }
    vo_vec_free(p.th, n * n + n), vo_vec_free(p.x, n * B), vo_vec_free(p.g, n * B), vo_vec_free(p.out, n * n + n);
    vo_vec_free(p.rth, n * n + n), vo_vec_free(p.rx, n * B), vo_vec_free(p.rg, n * B), vo_vec_free(p.rout, n * n + n);
    free(p.dx), free(p.du), free(p.dout), free(p.J);
    cond_work_clear(&p.cw);
    vijp_layer_clear(&p.L), vijp_layer_clear(&p.act);
    return 0;
}

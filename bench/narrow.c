/* make bench (FP8 and MX part): the native rounding onto the narrow grids
 * (src/format/narrow.c, bit for bit the MPFR route: tests/t-narrow.c) and
 * the dense layer in the FP8 and MX mixed formats on the native route.
 *
 * 1. Rounding 16M doubles to e4m3, e5m2 and each MX element format
 *    (blocks of 32 along the array), each instruction set, against a
 *    memcpy of the same array timed just before it: GB/s counting the
 *    bytes read and written (16 a value) and the fraction of the copy.
 *    Target: >= 50% of the copy.  The tensor-scaled formats (nvfp4, fp8)
 *    have no native rounding: their scales are not powers of two.
 * 2. A dense layer (width 256) through vijp_layer_forward and backward
 *    (vijp_layer_vjp then vijp_layer_vjp_param), batch 1 and 64, in
 *    e4m3+binary32 and mxfp8+binary32 against bfloat16+binary32 (the
 *    same native route; FP8 and MX stores round natively, bfloat16's
 *    through MPFR), and at batch 1 the MPFR operators (the type's oracle
 *    operators, then the same stores).
 *    Target: FP8 and MX <= 3x bfloat16+binary32.
 * Best of REPS, in CPU time of this thread (bench.h: on a shared machine
 * wall time swings with the load, CPU time much less). */
#include "bench.h"
#include "format/mat_mp.h"
#include "format/narrow.h"
#include "vijp/vijp.h"
#include "vijp/arith.h"
#include <cblas.h>
#include <math.h>

#define REPS 5
#define N ((size_t)1 << 24) /* values rounded (4096 under --smoke) */

static double best_of(void (*run)(void *), void *arg, int calls)
{
    double best = INFINITY;
    run(arg); /* warm */
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_cpu(CLOCK_THREAD_CPUTIME_ID);
        for (int c = 0; c < calls; c++) run(arg);
        best = fmin(best, (bench_cpu(CLOCK_THREAD_CPUTIME_ID) - t0) / calls);
    }
    return best;
}

typedef struct {
    const double *src;
    double *dst;
    const vijp_format *f; /* NULL: the copy */
    vijp_narrow_isa isa;
    size_t n;
} rounding;

static void run_rounding(void *arg)
{
    rounding *a = arg;
    if (!a->f) memcpy(a->dst, a->src, a->n * sizeof *a->dst);
    else if (a->f->mx_block) {
        for (size_t k = 0; k < a->n; k += 32)
            vijp_narrow_mx_block(a->f, a->dst + k, 1, a->src + k, 1, 32, a->isa);
    } else {
        vijp_narrow g = vijp_narrow_of(a->f);
        vijp_narrow_round_array(a->dst, a->src, a->n, &g, 1, 1, a->isa);
    }
}

static void rounding_table(size_t n)
{
    double *src = vijp_alloc_array(n, sizeof *src), *dst = vijp_alloc_array(n, sizeof *dst);
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    for (size_t i = 0; i < n; i++) src[i] = 30 * vijp_rng_normal(&rng);
    static const char *const formats[] = {"e4m3+binary32", "e5m2+binary32",      "mxfp8+binary32",
                                          "mxfp8e5m2+binary32", "mxfp6+binary32", "mxfp6e3m2+binary32",
                                          "mxfp4+binary32"};
    static const vijp_narrow_isa isas[] = {VIJP_NARROW_PORTABLE, VIJP_NARROW_AVX2, VIJP_NARROW_AVX512};
    static const char *const isa_names[] = {"portable", "avx2", "avx512"};
    printf("rounding %zu doubles (16 bytes a value read and written), best of %d:\n", n, REPS);
    printf("%-19s %-9s %9s %9s %8s\n", "storage", "isa", "GB/s", "copy GB/s", "% copy");
    double worst_best = INFINITY;
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        BENCH_MUST(vijp_format_parse(formats[fi], &f, NULL));
        double best_pct = 0;
        for (size_t k = 0; k < sizeof isas / sizeof *isas; k++) {
            if (!vijp_narrow_isa_ok(isas[k])) {
                printf("%-19s %-9s not on this CPU\n", formats[fi], isa_names[k]);
                continue;
            }
            rounding copy = {src, dst, NULL, isas[k], n}, r = {src, dst, &f, isas[k], n};
            double t_copy = best_of(run_rounding, &copy, 1), t = best_of(run_rounding, &r, 1);
            double bw = 16.0 * (double)n / t * 1e-9, cbw = 16.0 * (double)n / t_copy * 1e-9;
            printf("%-19s %-9s %9.2f %9.2f %7.0f%%\n", formats[fi], isa_names[k], bw, cbw, 100 * t_copy / t);
            best_pct = fmax(best_pct, 100 * t_copy / t);
        }
        worst_best = fmin(worst_best, best_pct);
    }
    printf("target: >= 50%% of the copy (fastest set, worst format): %.0f%% %s\n\n", worst_best,
           worst_best >= 50 ? "PASS" : "MISS");
    free(src), free(dst);
}

typedef struct {
    const vijp_layer *L;
    vijp_mat *th, *X, *Y, *G, *Gx, *Gt;
    int backward, oracle;
} layer_call;

static void run_layer(void *arg)
{
    layer_call *c = arg;
    const vijp_layer *L = c->L;
    const vijp_format *f = c->X->fmt;
    size_t B = c->X->cols;
    if (c->oracle) { /* the MPFR route: the oracle operators and the stores layer.c adds */
        if (!c->backward) L->type->mp->forward(L, c->th->m, c->X->m, B, c->Y->m, f), vijp_mat_store(c->Y);
        else {
            L->type->mp->vjp(L, c->th->m, c->X->m, B, c->G->m, c->Gx->m, f), vijp_mat_store_as(c->Gx, VIJP_STORE_GRADIENT);
            L->type->mp->vjp_param(L, c->th->m, c->X->m, B, c->G->m, c->Gt->m, f);
            vijp_mat_store_as(c->Gt, VIJP_STORE_GRADIENT);
        }
        return;
    }
    if (!c->backward) BENCH_MUST(vijp_layer_forward(L, c->th, c->X, c->Y, NULL));
    else {
        BENCH_MUST(vijp_layer_vjp(L, c->th, c->X, c->G, c->Gx, NULL));
        BENCH_MUST(vijp_layer_vjp_param(L, c->th, c->X, c->G, c->Gt, NULL));
    }
}

/* The MPFR route's time for c: the type's mp operators on MPFR twins of
 * c's matrices (these formats hold doubles, vijp/mat.h), made before the
 * clock starts as the layer interface makes them before each call. */
static double oracle_ms(const layer_call *c)
{
    vijp_mat th, X, Y, G, Gx, Gt;
    vijp_mat_init_mp(&th, c->th, 1), vijp_mat_init_mp(&X, c->X, 1), vijp_mat_init_mp(&G, c->G, 1);
    vijp_mat_init_mp(&Y, c->Y, 0), vijp_mat_init_mp(&Gx, c->Gx, 0), vijp_mat_init_mp(&Gt, c->Gt, 0); /* outputs */
    layer_call mp = {c->L, &th, &X, &Y, &G, &Gx, &Gt, c->backward, 1};
    double t = best_of(run_layer, &mp, 1);
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y);
    vijp_mat_clear(&G), vijp_mat_clear(&Gx), vijp_mat_clear(&Gt);
    return t;
}

static void dense_table(size_t W)
{
    static const char *const formats[] = {"bfloat16+binary32", "e4m3+binary32", "mxfp8+binary32"};
    static const size_t batches[] = {1, 64};
    printf("dense:%d through the layer interface (native route; MPFR route at batch 1), ms per call, best of %d:\n", (int)W,
           REPS);
    printf("%-18s %5s %-8s %10s %10s %9s\n", "format", "batch", "pass", "native ms", "MPFR ms", "x bf16");
    vijp_net net;
    char spec[32];
    snprintf(spec, sizeof spec, "dense:%zu", W);
    BENCH_MUST(vijp_net_build(&net, spec, 1, W, NULL));
    BENCH_MUST(vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 1, NULL));
    double worst = 0, base[2][2] = {{0}};
    for (size_t bi = 0; bi < 2; bi++)
        for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
            vijp_format f;
            BENCH_MUST(vijp_format_parse(formats[fi], &f, NULL));
            size_t B = batches[bi];
            vijp_mat th, X, Y, G, Gx, Gt;
            BENCH_MUST(vijp_net_params(&net, &f, &th, NULL));
            double *d = vijp_alloc_array(W * B, sizeof *d);
            vijp_rng rng;
            vijp_rng_seed(&rng, 2);
            vijp_mat_init(&X, W, B, &f), vijp_mat_init(&Y, W, B, &f), vijp_mat_init(&G, W, B, &f);
            vijp_mat_init(&Gx, W, B, &f), vijp_mat_init(&Gt, th.rows, 1, &f);
            for (size_t i = 0; i < W * B; i++) d[i] = vijp_rng_normal(&rng);
            vijp_mat_set_d(&X, d);
            for (size_t i = 0; i < W * B; i++) d[i] = vijp_rng_normal(&rng);
            vijp_mat_set_d_as(&G, d, VIJP_STORE_GRADIENT);
            for (int back = 0; back < 2; back++) {
                layer_call c = {&net.layers[0], &th, &X, &Y, &G, &Gx, &Gt, back, 0};
                int calls = B > 1 ? 1 : 10;
                double t = best_of(run_layer, &c, calls), slow = NAN;
                if (B == 1) slow = oracle_ms(&c);
                if (fi == 0) base[bi][back] = t;
                double ratio = t / base[bi][back];
                if (fi > 0) worst = fmax(worst, ratio);
                printf("%-18s %5zu %-8s %10.3f %10.3f %8.2fx\n", formats[fi], B, back ? "backward" : "forward", 1e3 * t,
                       1e3 * slow, ratio);
            }
            vijp_mat_clear(&X), vijp_mat_clear(&Y), vijp_mat_clear(&G), vijp_mat_clear(&Gx), vijp_mat_clear(&Gt);
            vijp_net_params_clear(&net, &th);
            free(d);
        }
    printf("target: FP8 and MX <= 3x bfloat16+binary32 (worst row): %.2fx %s\n", worst, worst <= 3 ? "PASS" : "MISS");
    vijp_net_free(&net);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 0, "Usage: bench-narrow [--smoke]\n  FP8 and MX rounding against the copy bandwidth, and the dense layer in FP8 and MX against bfloat16+binary32 (make bench; takes no arguments).\n");
    openblas_set_num_threads(1); /* as every vijp command runs it */
    rounding_table(smoke ? 4096 : N);
    dense_table(smoke ? 32 : 256);
    return 0;
}

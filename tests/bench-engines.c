/* make bench: backprop against Moonwalk mixed mode in double on
 * dense:256,leaky:0.5 at depth 256, batch 1 and 64.  Prints the time ratio
 * moonwalk/backprop (best of several runs each, interleaved, measured in this
 * run) and the stored-bytes ratio, with the targets. */
#include "vijp/vijp.h"
#include "bench.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *spec = "dense:256,leaky:0.5";
    size_t depth = 256, batches[] = {1, 64};
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_net net;
    vijp_error err = {0};
    if (vijp_net_build(&net, spec, depth, 0, &err) || vijp_net_init(&net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, 1, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    vijp_mat *th = calloc(depth, sizeof *th);
    BENCH_MUST(vijp_net_params(&net, &F, th, NULL));
    printf("bench-engines: %s, depth %zu, double, best of %d runs (OpenBLAS threads: default)\n", spec, depth, reps);
    printf("%6s %14s %14s %10s %16s %16s %12s\n", "batch", "backprop s", "moonwalk s", "time ratio", "backprop bytes",
           "moonwalk bytes", "bytes ratio");
    int ok = 1;
    for (size_t k = 0; k < 2; k++) {
        size_t B = batches[k];
        double *x = malloc(256 * B * sizeof *x), *t = malloc(256 * B * sizeof *t);
        vijp_net_sample(&net, B, 1, x, t);
        vijp_mat X, T;
        vijp_mat_init(&X, 256, B, &F), vijp_mat_set_d(&X, x), vijp_mat_init(&T, 256, B, &F), vijp_mat_set_d(&T, t);
        double best[2] = {1e30, 1e30};
        size_t bytes[2] = {0, 0};
        for (int r = 0; r < reps; r++)
            for (int e = 0; e < 2; e++) {
                vijp_grads g;
                double t0 = bench_now();
                if (vijp_engine_run(e ? VIJP_ENGINE_MOONWALK : VIJP_ENGINE_BACKPROP, &net, th, &X, &T, &g, &err)) {
                    fprintf(stderr, "bench: %s\n", err.msg);
                    return 1;
                }
                double dt = bench_now() - t0;
                if (dt < best[e]) best[e] = dt;
                bytes[e] = g.stored_bytes;
                vijp_grads_clear(&g);
            }
        double tr = best[1] / best[0], br = (double)bytes[1] / (double)bytes[0];
        printf("%6zu %14.4f %14.4f %10.3f %16zu %16zu %12.5f\n", B, best[0], best[1], tr, bytes[0], bytes[1], br);
        if (B == 64) ok &= tr <= 1.5;
        ok &= br <= 1.0 / 32;
        vijp_mat_clear(&X), vijp_mat_clear(&T), free(x), free(t);
    }
    /* Mixed mode does 5 products of 2n²B flops per square dense layer (forward,
     * reverse vjp, recompute, getrs, parameter gradient) plus an LU (2n³/3)
     * against backprop's 3: a flop ratio of 5/3 + n/(9B).  When every kernel is
     * compute-bound (large B) the time ratio follows it; at B = 1 the products
     * are memory-bound GEMVs and the LU is comparatively cheap. */
    printf("flop ratio moonwalk/backprop on square dense layers, 5/3 + n/(9B): %.3f at B = 1, %.3f at B = 64\n",
           5.0 / 3 + 256.0 / 9, 5.0 / 3 + 256.0 / (9 * 64));
    printf("targets: bytes ratio <= 1/32 (0.03125) at both batches; time ratio <= 1.5 at batch 64: %s\n",
           ok ? "met" : "NOT met");
    vijp_net_params_clear(&net, th);
    free(th);
    vijp_net_free(&net);
    return 0;
}

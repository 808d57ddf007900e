/* make bench (native narrow formats, dense part): the dense layer's MPFR
 * operators in the oracle (oracles/dense.c, one MPFR operation per
 * rounding) against the native path (src/emu/dense.c, the same operations
 * in double, bit for bit the same results: tests/t-emu-dense.c), timed in
 * this run, best of 5: forward (y = W x + b), vjp (Wᵀ g), and the vijp by
 * elimination (Wᵀ g_y = g_x), batch 1, for square W as in the drift study.
 * Prints µs per call and the speedup. */
#include "bench.h"
#include "vijp/vijp.h"
#include "vijp/arith.h"
#include "oracles/oracles.h"
#include "emu/dense.h"
#include <math.h>

#define REPS 5

typedef enum { FORWARD, VJP, VIJP, N_OPS } op;
static const char *const op_names[] = {"forward", "vjp", "vijp (LU)"};

/* Seconds per call of op, best of REPS runs of calls calls. */
static double per_call(op o, int native, const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *y, const vijp_format *f,
                       int calls)
{
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (int c = 0; c < calls; c++) {
            if (o == FORWARD) (native ? vijp_emu_dense_forward : vo_dense_forward)(L, th, x, 1, y, f);
            else if (o == VJP) (native ? vijp_emu_dense_vjp : vo_dense_vjp)(L, th, NULL, 1, x, y, f);
            else BENCH_MUST((native ? vijp_emu_dense_vijp : vo_dense_vijp)(L, th, NULL, 1, x, NULL, y, f));
        }
        best = fmin(best, (bench_now() - t0) / calls);
    }
    return best;
}

int main(int argc, char **argv)
{
    bench_args(argc, argv, 0, "Usage: bench-emu-dense\n  the dense layer's narrow formats: MPFR oracle against the native path (make bench; takes no arguments).\n");
    static const char *const formats[] = {"binary32", "bfloat16", "bfloat16+binary32"};
    static const size_t widths[] = {32, 128};
    printf("dense operators, MPFR oracle against the native path (same bits), batch 1, best of %d:\n", REPS);
    printf("%-18s %5s %-10s %12s %12s %8s\n", "format", "width", "operator", "oracle µs", "native µs", "speedup");
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        BENCH_MUST(vijp_format_parse(formats[fi], &f, NULL));
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            size_t n = widths[wi];
            char spec[32];
            snprintf(spec, sizeof spec, "dense:%zu", n);
            vijp_layer L;
            BENCH_MUST(vijp_layer_parse(&L, spec, n, NULL));
            mpfr_t *th = vo_vec_new(n * n + n, &f), *x = vo_vec_new(n, &f), *y = vo_vec_new(n, &f);
            for (size_t i = 0; i < n * n + n; i++) vo_set_d(th[i], vijp_rng_normal(&rng) / sqrt((double)n), &f);
            for (size_t i = 0; i < n; i++) vo_set_d(x[i], vijp_rng_normal(&rng), &f);
            int calls = n > 64 ? 3 : 30;
            for (op o = 0; o < N_OPS; o++) {
                double slow = per_call(o, 0, &L, th, x, y, &f, calls), fast = per_call(o, 1, &L, th, x, y, &f, calls);
                printf("%-18s %5zu %-10s %12.1f %12.1f %7.1fx\n", formats[fi], n, op_names[o], 1e6 * slow, 1e6 * fast,
                       slow / fast);
            }
            vo_vec_free(th, n * n + n), vo_vec_free(x, n), vo_vec_free(y, n);
            vijp_layer_clear(&L);
        }
    }
    return 0;
}

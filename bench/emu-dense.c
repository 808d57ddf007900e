/* make bench (native narrow formats, dense part): the dense layer's MPFR
 * operators in the oracle (oracles/dense.c, one MPFR operation per
 * rounding) against the native path (src/emu/dense.c, the same operations
 * in double, bit for bit the same results: tests/t-emu-dense.c), timed in
 * this run, best of 5: forward (y = W x + b), vjp (Wᵀ g), and the vijp by
 * elimination (Wᵀ g_y = g_x), batch 1, for square W as in the drift study.
 * Prints µs per call and the speedup.
 *
 * Then the products (forward, vjp, the parameters' gradient) at width 256,
 * batch 1 and 64, on each set of src/emu/lanes.h this machine has (the
 * portable loops, avx2, avx512: the same bits), and the active set's
 * forward + backward in bfloat16+binary32 against PyTorch's bfloat16 dense
 * layer, forward and backward, timed in the same run by
 * scripts/bench-torch-dense.py under $PYTHON_TORCH (make bench's python3
 * that imports torch; /usr/bin/python3 when unset), where torch imports.
 * Last, the products through the layer interface (vijp_layer_*) on
 * matrices that hold doubles, bfloat16+binary32, width 256, batch 1 and 64. */
#include "bench.h"
#include "vijp/vijp.h"
#include "vijp/arith.h"
#include "oracles/oracles.h"
#include "emu/dense.h"
#include "emu/lanes.h"
#include <cblas.h>
#include <stdio.h>
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

/* ---- the products per set, and torch ---- */

typedef enum { P_FORWARD, P_VJP, P_PARAM, N_PRODUCTS } product;

/* Seconds per call of product p on set s, best of reps runs of calls calls. */
static double product_time(product p, const vijp_emu_lanes *s, const vijp_layer *L, mpfr_t *th, mpfr_t *x,
                           mpfr_t *g, mpfr_t *out, size_t B, const vijp_format *f, int calls, int reps)
{
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int c = 0; c < calls; c++) {
            if (p == P_FORWARD) vijp_emu_dense_forward_on(s, L, th, x, B, out, 1, f);
            else if (p == P_VJP) vijp_emu_dense_vjp_on(s, L, th, B, g, out, f);
            else vijp_emu_dense_vjp_param_on(s, L, x, B, g, out, f);
        }
        best = fmin(best, (bench_now() - t0) / calls);
    }
    return best;
}

/* PyTorch's bfloat16 dense forward + backward at n, B in seconds (the
 * script's line), or 0 where torch is not there (*why says so). */
static double torch_time(size_t n, size_t B, char *why, size_t why_size)
{
    const char *python = getenv("PYTHON_TORCH"); /* make bench's: the python3 that imports torch */
    if (!python || !*python) python = "/usr/bin/python3";
    char cmd[512], line[256];
    snprintf(cmd, sizeof cmd, "%s scripts/bench-torch-dense.py %zu %zu 2>&1", python, n, B);
    snprintf(why, why_size, "%s or scripts/bench-torch-dense.py not run (run from the source tree)", python);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    double t = 0;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "torch_bf16_dense_fwd_bwd_s %lf", &t) != 1) snprintf(why, why_size, "%.*s", (int)strcspn(line, "\n"), line);
    pclose(p);
    return t > 0 ? t : 0;
}

static void products_per_set(vijp_rng *rng, size_t n)
{
    static const char *const formats[] = {"bfloat16+binary32", "binary32", "bfloat16"};
    static const size_t batches[] = {1, 64};
    double ours = 0; /* the active set's bfloat16+binary32 forward + backward at batch 64 */
    printf("\nemulated dense products at width %zu, per set (same bits), best of %d: µs per call (ns per multiply-add)\n", n, REPS);
    printf("%-18s %5s %-7s %18s %18s %18s %12s\n", "format", "batch", "set", "forward", "vjp", "vjp_param", "fwd+bwd µs");
    vijp_layer L;
    char spec[32];
    snprintf(spec, sizeof spec, "dense:%zu", n);
    BENCH_MUST(vijp_layer_parse(&L, spec, n, NULL));
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        BENCH_MUST(vijp_format_parse(formats[fi], &f, NULL));
        for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
            size_t B = batches[bi], P = n * n + n, outs = P > n * B ? P : n * B; /* ∇θ, or a batch's outputs */
            mpfr_t *th = vo_vec_new(P, &f), *x = vo_vec_new(n * B, &f), *g = vo_vec_new(n * B, &f), *out = vo_vec_new(outs, &f);
            for (size_t i = 0; i < P; i++) vo_set_d(th[i], vijp_rng_normal(rng) / sqrt((double)n), &f);
            for (size_t i = 0; i < n * B; i++) vo_set_d(x[i], vijp_rng_normal(rng), &f), vo_set_d(g[i], vijp_rng_normal(rng), &f);
            for (int si = 0; si < VIJP_EMU_LANES_COUNT; si++) {
                const vijp_emu_lanes *s = vijp_emu_lanes_set(si);
                if (!s) continue;
                int slow = si == 0 && B > 1, calls = slow ? 1 : B > 1 ? 3 : 20, reps = slow ? 2 : REPS;
                double t[N_PRODUCTS], sum = 0, madds = (double)(n * n * B);
                printf("%-18s %5zu %-7s", formats[fi], B, s->name);
                for (product p = 0; p < N_PRODUCTS; p++) {
                    t[p] = product_time(p, s, &L, th, x, g, out, B, &f, calls, reps), sum += t[p];
                    printf(" %9.1f (%5.2f)", 1e6 * t[p], 1e9 * t[p] / madds);
                }
                printf(" %12.1f\n", 1e6 * sum);
                if (s == vijp_emu_lanes_active() && B == 64 && fi == 0) ours = sum;
            }
            vo_vec_free(th, P), vo_vec_free(x, n * B), vo_vec_free(g, n * B), vo_vec_free(out, outs);
        }
    }
    vijp_layer_clear(&L);
    char why[200];
    double torch = torch_time(n, 64, why, sizeof why);
    if (torch > 0)
        printf("bfloat16+binary32 forward + backward, width %zu, batch 64: emulated (%s) %.1f µs, PyTorch bfloat16 "
               "(1 thread) %.1f µs: %.1fx torch's time\n",
               n, vijp_emu_lanes_active()->name, 1e6 * ours, 1e6 * torch, ours / torch);
    else
        printf("PyTorch: not timed (%s)\n", why);
}

/* The same three products through the layer interface, on matrices that
 * hold doubles (vijp/mat.h): what an engine's step costs, the operands'
 * reading and the results' storing included (before the emulated formats'
 * values were held as doubles, an MPFR round trip each way). */
static void through_layers(vijp_rng *rng, size_t n)
{
    const size_t batches[] = {1, 64};
    vijp_format f;
    BENCH_MUST(vijp_format_parse("bfloat16+binary32", &f, NULL));
    vijp_layer L;
    char spec[32];
    snprintf(spec, sizeof spec, "dense:%zu", n);
    BENCH_MUST(vijp_layer_parse(&L, spec, n, NULL));
    printf("\ndense:%zu in bfloat16+binary32 through vijp_layer_*, best of %d: µs per call\n", n, REPS);
    printf("%5s %10s %10s %10s\n", "batch", "forward", "vjp", "vjp_param");
    for (size_t bi = 0; bi < 2; bi++) {
        size_t B = batches[bi], P = n * n + n;
        double *v = vijp_alloc_array(P + 2 * n * B, sizeof *v);
        for (size_t i = 0; i < P + 2 * n * B; i++) v[i] = vijp_rng_normal(rng) / (i < P ? sqrt((double)n) : 1);
        vijp_mat th, x, g, y, gx, gt;
        vijp_mat_init(&th, P, 1, &f), vijp_mat_init(&x, n, B, &f), vijp_mat_init(&g, n, B, &f);
        vijp_mat_init(&y, n, B, &f), vijp_mat_init(&gx, n, B, &f), vijp_mat_init(&gt, P, 1, &f);
        vijp_mat_set_d(&th, v), vijp_mat_set_d(&x, v + P), vijp_mat_set_d_as(&g, v + P + n * B, VIJP_STORE_GRADIENT);
        double best[3] = {INFINITY, INFINITY, INFINITY};
        int calls = B > 1 ? 5 : 50;
        for (int r = 0; r < REPS; r++)
            for (int o = 0; o < 3; o++) {
                double t0 = bench_now();
                for (int c = 0; c < calls; c++) {
                    if (o == 0) BENCH_MUST(vijp_layer_forward(&L, &th, &x, &y, NULL));
                    else if (o == 1) BENCH_MUST(vijp_layer_vjp(&L, &th, &x, &g, &gx, NULL));
                    else BENCH_MUST(vijp_layer_vjp_param(&L, &th, &x, &g, &gt, NULL));
                }
                best[o] = fmin(best[o], (bench_now() - t0) / calls);
            }
        printf("%5zu %10.1f %10.1f %10.1f\n", B, 1e6 * best[0], 1e6 * best[1], 1e6 * best[2]);
        vijp_mat *all[] = {&th, &x, &g, &y, &gx, &gt};
        for (size_t k = 0; k < 6; k++) vijp_mat_clear(all[k]);
        free(v);
    }
    vijp_layer_clear(&L);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 0, "Usage: bench-emu-dense [--smoke]\n  the dense layer's narrow formats: MPFR oracle against the native path (make bench; takes no arguments).\n");
    openblas_set_num_threads(1); /* as every vijp command runs it */
    static const char *const formats[] = {"binary32", "bfloat16", "bfloat16+binary32"};
    static const size_t widths[] = {32, 128};
    size_t n_widths = smoke ? 1 : sizeof widths / sizeof *widths, wide = smoke ? 32 : 256;
    printf("dense operators, MPFR oracle against the native path (same bits), batch 1, best of %d:\n", REPS);
    printf("%-18s %5s %-10s %12s %12s %8s\n", "format", "width", "operator", "oracle µs", "native µs", "speedup");
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        BENCH_MUST(vijp_format_parse(formats[fi], &f, NULL));
        for (size_t wi = 0; wi < n_widths; wi++) {
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
    products_per_set(&rng, wide);
    through_layers(&rng, wide);
    return 0;
}

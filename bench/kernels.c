/* make bench (kernels part): every kernel set this machine runs
 * (src/kernels/kernels.h) at sizes from L1 to 8M units, against a STREAM-like
 * copy measured in the same run.
 *
 * Per kernel and size: GB/s (bytes the kernel must read and write: its
 * arrays, no write-allocate traffic counted, as STREAM counts), GFLOP/s
 * (the IEEE operations written in the kernel per unit, a libm/SLEEF call
 * counted as one: a nominal rate, comparable between sets, not a hardware
 * FLOP count), the speedup over ref at the same size, and the fraction of the
 * copy bandwidth at that size, the copy timed again just before each kernel
 * (printed last: on a shared machine it drifts during the run).  Best of REPS timed passes, each at least
 * MIN_SECONDS long.  Targets: memory-bound kernels >= 80% of the
 * copy bandwidth at 8M; GELU and Mish with f′ >= 4x ref with AVX-512. */
#include "bench.h"
#include "kernels/kernels.h"
#include "vijp/vijp.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#define REPS 5
#define MIN_SECONDS 0.02
#define MAXN ((size_t)1 << 23)

static const size_t sizes[] = {(size_t)1 << 10, (size_t)1 << 14, (size_t)1 << 18, MAXN};
#define NSIZES (sizeof sizes / sizeof *sizes)

static double *X, *U, *S, *T, *Y, *Y2;
static float *Xf, *Uf, *Yf, *Y2f;
static uint8_t *Bits;

typedef struct {
    const char *name;
    double bytes, flops; /* per unit */
    void (*run)(const vijp_kernels *K, size_t n);
} bench_kernel;

static void b_copy(const vijp_kernels *K, size_t n) { (void)K, memcpy(Y, X, n * sizeof *Y); }
static void b_leaky_fwd(const vijp_kernels *K, size_t n) { K->leaky_forward_d(n, 0.1, X, Y); }
static void b_leaky_vjp(const vijp_kernels *K, size_t n) { K->leaky_apply_d(n, 0.1, X, U, Y); }
static void b_leaky_vijp(const vijp_kernels *K, size_t n) { K->leaky_vijp_d(n, 0.1, X, U, Y); }
static void b_leaky_fwd_f(const vijp_kernels *K, size_t n) { K->leaky_forward_f(n, 0.1f, Xf, Yf); }
static void b_pack(const vijp_kernels *K, size_t n) { K->sign_pack_d(n, X, Bits); }
static void b_unpack(const vijp_kernels *K, size_t n) { K->sign_unpack_d(n, Bits, Y); }
static void b_relu_fwd(const vijp_kernels *K, size_t n) { K->relu_forward_d(n, X, Y); }
static void b_relu_gather(const vijp_kernels *K, size_t n) { K->relu_gather_d(n, X, U, Y); }
static void b_relu_scatter(const vijp_kernels *K, size_t n) { K->relu_scatter_d(n, X, U, S, Y); }
static void b_add(const vijp_kernels *K, size_t n) { K->add_d(n, X, U, Y); }
static void b_affine(const vijp_kernels *K, size_t n) { K->affine_d(n, X, S, T, Y); }
static void b_affine_inv(const vijp_kernels *K, size_t n) { K->affine_inverse_d(n, X, S, T, Y); }
static void b_drift(const vijp_kernels *K, size_t n)
{
    vijp_kdrift p;
    K->drift_d(n, X, U, 53, -1073, &p);
    Y[0] = p.aa; /* kept */
}
#define ACT(NAME, IDX) \
    static void b_##NAME(const vijp_kernels *K, size_t n) { K->act_d[IDX](n, X, Y, Y2); }
ACT(sigmoid, VIJP_KACT_SIGMOID)
ACT(softplus, VIJP_KACT_SOFTPLUS)
ACT(tanh, VIJP_KACT_TANH)
ACT(silu, VIJP_KACT_SILU)
ACT(gelu, VIJP_KACT_GELU)
ACT(mish, VIJP_KACT_MISH)
static void b_gelu_f(const vijp_kernels *K, size_t n) { K->act_f[VIJP_KACT_GELU](n, Xf, Yf, Y2f); }
static void b_mish_f(const vijp_kernels *K, size_t n) { K->act_f[VIJP_KACT_MISH](n, Xf, Yf, Y2f); }

/* bytes: arrays read + written per unit; flops: operations per unit as
 * written (activations: the dual-number formulas of src/layers/, each
 * exp/log1p/tanh/erfc one, both branches where the SIMD code evaluates
 * both counted once). */
static const bench_kernel kernels[] = {
    {"leaky fwd", 16, 1, b_leaky_fwd},       {"leaky vjp", 24, 1, b_leaky_vjp},
    {"leaky vijp", 24, 1, b_leaky_vijp},     {"leaky fwd f32", 8, 1, b_leaky_fwd_f},
    {"sign pack", 8.125, 0, b_pack},         {"sign unpack", 8.125, 0, b_unpack},
    {"relu fwd", 16, 0, b_relu_fwd},         {"relu gather", 20, 0, b_relu_gather},
    {"relu scatter", 28, 0, b_relu_scatter}, {"additive", 24, 1, b_add},
    {"affine", 32, 2, b_affine},             {"affine inv", 32, 2, b_affine_inv},
    {"drift", 16, 9, b_drift},               {"sigmoid f,f'", 24, 6, b_sigmoid},
    {"softplus f,f'", 24, 8, b_softplus},    {"tanh f,f'", 24, 9, b_tanh},
    {"silu f,f'", 24, 21, b_silu},            {"gelu f,f'", 24, 70, b_gelu},
    {"mish f,f'", 24, 25, b_mish},           {"gelu f,f' f32", 12, 70, b_gelu_f},
    {"mish f,f' f32", 12, 25, b_mish_f},
};
#define NKERNELS (sizeof kernels / sizeof *kernels)

/* Timed passes per measurement (REPS; one under --smoke). */
static int reps = REPS;

/* Seconds per pass: best of reps, each repeating the pass for MIN_SECONDS
 * (under --smoke, once). */
static double time_pass(void (*run)(const vijp_kernels *, size_t), const vijp_kernels *K, size_t n)
{
    double best = INFINITY;
    run(K, n); /* warm: pages touched, caches filled */
    for (int r = 0; r < reps; r++) {
        long passes = 0;
        double t0 = bench_now(), t;
        do run(K, n), passes++;
        while ((t = bench_now() - t0) < MIN_SECONDS && reps > 1);
        best = fmin(best, t / (double)passes);
    }
    return best;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    size_t nsizes = smoke ? 1 : NSIZES, maxn = sizes[nsizes - 1];
    if (smoke) reps = 1;
    bench_args(argc, argv, 0, "Usage: bench-kernels [--smoke]\n  every kernel set this machine runs, from L1 sizes to 8M units, against the copy bandwidth (make bench; takes no arguments).\n");
    X = vijp_alloc_array(maxn, sizeof *X), U = vijp_alloc_array(maxn, sizeof *U), S = vijp_alloc_array(maxn, sizeof *S);
    T = vijp_alloc_array(maxn, sizeof *T), Y = vijp_alloc_array(maxn, sizeof *Y), Y2 = vijp_alloc_array(maxn, sizeof *Y2);
    Xf = vijp_alloc_array(maxn, sizeof *Xf), Uf = vijp_alloc_array(maxn, sizeof *Uf);
    Yf = vijp_alloc_array(maxn, sizeof *Yf), Y2f = vijp_alloc_array(maxn, sizeof *Y2f);
    Bits = vijp_alloc(maxn / 8);
    vijp_rng rng;
    vijp_rng_seed(&rng, 1);
    for (size_t i = 0; i < maxn; i++) {
        X[i] = 3 * vijp_rng_normal(&rng), U[i] = vijp_rng_normal(&rng), S[i] = 0.5 + vijp_rng_uniform(&rng);
        T[i] = vijp_rng_normal(&rng), Xf[i] = (float)X[i], Uf[i] = (float)U[i];
    }
    const vijp_kernels *R = vijp_kernels_set(0, NULL), *sets[VIJP_KSET_COUNT];
    int nsets = 0;
    for (int i = 0; i < VIJP_KSET_COUNT; i++) {
        const char *why = NULL;
        if (i == 3) { /* its table entries copy host arrays to the GPU and back: PCIe, not the kernels */
            printf("kernels: cuda not measured here: build/bench-gpu measures it on device arrays\n");
            continue;
        }
        if ((sets[nsets] = vijp_kernels_set(i, &why))) nsets++;
        else printf("kernels: %s not measured: %s\n", vijp_kset_names[i], why);
    }
    double copy_bw[NSIZES];
    printf("kernels: copy bandwidth (memcpy, read + write), best of %d\n", reps);
    for (size_t z = 0; z < nsizes; z++) {
        copy_bw[z] = 16.0 * (double)sizes[z] / time_pass(b_copy, R, sizes[z]) * 1e-9;
        printf("  n = %8zu  %7.2f GB/s\n", sizes[z], copy_bw[z]);
    }
    /* for the verdicts: each set's fraction of the copy at 8M, and its lowest speedup over all sizes */
    double pct8m[NKERNELS][VIJP_KSET_COUNT], low_x[NKERNELS][VIJP_KSET_COUNT];
    printf("%-14s %8s %-6s %8s %8s %7s %7s %8s\n", "kernel", "n", "set", "GB/s", "GFLOP/s", "x ref", "% copy", "copy GB/s");
    for (size_t k = 0; k < NKERNELS; k++)
        for (size_t z = 0; z < nsizes; z++) {
            /* the copy again, just before: on a shared machine the bandwidth
             * available drifts during the run */
            double t_ref = 0, copy_now = 16.0 * (double)sizes[z] / time_pass(b_copy, R, sizes[z]) * 1e-9;
            for (int s = 0; s < nsets; s++) {
                double t = time_pass(kernels[k].run, sets[s], sizes[z]), units = (double)sizes[z] / t;
                if (s == 0) t_ref = t;
                double gbs = kernels[k].bytes * units * 1e-9;
                printf("%-14s %8zu %-6s %8.2f %8.2f %7.2f %6.0f%% %8.2f\n", kernels[k].name, sizes[z], sets[s]->name, gbs,
                       kernels[k].flops * units * 1e-9, t_ref / t, 100 * gbs / copy_now, copy_now);
                if (z == nsizes - 1) pct8m[k][s] = 100 * gbs / copy_now;
                low_x[k][s] = z == 0 || t_ref / t < low_x[k][s] ? t_ref / t : low_x[k][s];
            }
        }
    /* Verdicts, from the rows above.  Memory-bound: the kernels up to and
     * including drift (elementwise passes with a few operations per unit),
     * judged on the fastest set's row at 8M; the percentages move by about
     * ±15 points between runs on a shared machine (the copy's own swing). */
    size_t last_mem = 0;
    while (last_mem + 1 < NKERNELS && strcmp(kernels[last_mem].name, "drift")) last_mem++;
    printf("\nkernel targets (this run):\n  memory-bound at %zu units, >= 80%% of the copy (fastest set):", maxn);
    int mem_ok = 1;
    for (size_t k = 0; k <= last_mem; k++) {
        double best = pct8m[k][0];
        for (int s = 1; s < nsets; s++) best = fmax(best, pct8m[k][s]);
        mem_ok &= best >= 80;
        if (best < 80) printf(" %s %.0f%%;", kernels[k].name, best);
    }
    printf(" %s\n", mem_ok ? "all PASS" : "the rest PASS; MISS");
    int s512 = -1;
    for (int s = 0; s < nsets; s++)
        if (!strcmp(sets[s]->name, "avx512")) s512 = s;
    for (size_t k = 0; k < NKERNELS; k++) {
        if (strcmp(kernels[k].name, "gelu f,f'") && strcmp(kernels[k].name, "mish f,f'")) continue;
        printf("  %s >= 4x ref with AVX-512 (lowest over the sizes):", kernels[k].name);
        for (int s = 1; s < nsets; s++) printf(" %s %.2fx;", sets[s]->name, low_x[k][s]);
        if (nsets == 1) printf(" no SIMD set in this build;");
        if (s512 < 0) printf(" AVX-512 not measured here\n");
        else printf(" %s\n", low_x[k][s512] >= 4 ? "PASS" : "MISS");
    }
    free(X), free(U), free(S), free(T), free(Y), free(Y2), free(Xf), free(Uf), free(Yf), free(Y2f), free(Bits);
    return 0;
}

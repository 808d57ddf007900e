/* GPU benchmark of the CUDA kernels (src/kernels/cuda/), every figure
 * against a limit measured in the same run:
 *   - memory-bound kernels: GB/s (bytes each must read and write) and the
 *     fraction of the device-to-device copy bandwidth (cudaMemcpy, HBM:
 *     read + write), measured at each size just before;
 *   - dense: GFLOP/s (2mnB per forward and vjp, 2n³/3 + 2n²B per square
 *     vijp) and the fraction of cublasDgemm's rate on the same shape.
 * Without a GPU (or a build without CUDA) it prints "SKIPPED: no GPU" and
 * exits 0.  Run: make build/bench-gpu && build/bench-gpu [max elements]. */
#include "kernels/cuda/cuda.h"
#include "vijp/vijp.h"
#include "bench.h"
#include <stdio.h>
#include <stdlib.h>

static void die(const vijp_error *err)
{
    fprintf(stderr, "bench-gpu: %s\n", err->msg);
    exit(1);
}
#define TRY(call)                                                                                            \
    do {                                                                                                     \
        if ((call) != 0) die(&err);                                                                          \
    } while (0)

typedef enum { K_COPY, K_LEAKY_FWD_D, K_LEAKY_VJP_D, K_LEAKY_FWD_F, K_ACT_D, K_ACT_F } kernel;

typedef struct {
    void *x, *y, *z; /* n doubles each */
    void *xf;        /* the float kernels' input: x's values as n floats */
    uint32_t *bits;
    size_t n;
} bufs;

static void run(kernel k, int act, const bufs *b)
{
    vijp_error err = {0};
    size_t n = b->n;
    switch (k) {
    case K_COPY: TRY(vijp_cuda_copy(b->y, b->x, n * sizeof(double), &err)); break;
    case K_LEAKY_FWD_D: TRY(vijp_cuda_leaky_forward_d(n, 0.1, b->x, b->y, b->bits, &err)); break;
    case K_LEAKY_VJP_D: TRY(vijp_cuda_leaky_vjp_d(n, 0.1, b->bits, b->x, b->y, &err)); break;
    case K_LEAKY_FWD_F: TRY(vijp_cuda_leaky_forward_f(n, 0.1f, b->xf, b->y, b->bits, &err)); break;
    case K_ACT_D: TRY(vijp_cuda_act_d((vijp_cuda_act)act, n, b->x, b->y, b->z, &err)); break;
    case K_ACT_F: TRY(vijp_cuda_act_f((vijp_cuda_act)act, n, b->xf, b->y, b->z, &err)); break;
    }
}

/* Seconds per call: one warm-up, then enough calls for ~50 ms. */
static double time_kernel(kernel k, int act, const bufs *b)
{
    vijp_error err = {0};
    run(k, act, b);
    TRY(vijp_cuda_sync(&err));
    int reps = 1;
    for (;;) {
        double t0 = bench_now();
        for (int r = 0; r < reps; r++) run(k, act, b);
        TRY(vijp_cuda_sync(&err));
        double t = bench_now() - t0;
        if (t > 0.05 || reps >= 1 << 16) return t / reps;
        reps *= 4;
    }
}

static const char *const act_names[] = {"tanh", "sigmoid", "softplus", "silu", "gelu", "mish"};

static void bandwidth(size_t max_n)
{
    vijp_error err = {0};
    bufs b = {.n = max_n};
    TRY(vijp_cuda_alloc(&b.x, max_n * 8, &err));
    TRY(vijp_cuda_alloc(&b.y, max_n * 8, &err));
    TRY(vijp_cuda_alloc(&b.z, max_n * 8, &err));
    TRY(vijp_cuda_alloc(&b.xf, max_n * 4, &err));
    TRY(vijp_cuda_alloc((void **)&b.bits, vijp_cuda_sign_words(max_n) * 4, &err));
    /* inputs: a spread of values in [-10, 10] (ones would make every unit
     * active), the same in both formats: the activations' cost depends on
     * the branch each value takes */
    double *h = vijp_alloc_array(max_n, sizeof *h);
    float *hf = vijp_alloc_array(max_n, sizeof *hf);
    for (size_t i = 0; i < max_n; i++) h[i] = ((double)(i * 2654435761u % 2001) - 1000) / 100, hf[i] = (float)h[i];
    TRY(vijp_cuda_upload(b.x, h, max_n * 8, &err));
    TRY(vijp_cuda_upload(b.xf, hf, max_n * 4, &err));
    vijp_free(h), vijp_free(hf);
    printf("%-22s %10s %10s %9s %9s\n", "kernel", "elements", "us", "GB/s", "of copy");
    /* from L1-sized to 8M elements, and max_n (default 16M) */
    const size_t sizes[] = {1 << 12, 1 << 16, 1 << 20, 1 << 23, max_n};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        if (n > max_n || (si == 4 && n <= sizes[3])) continue;
        b.n = n;
        double copy = 16.0 * n / time_kernel(K_COPY, 0, &b) / 1e9; /* read n doubles, write n */
        printf("%-22s %10zu %10.2f %9.1f %9s\n", "copy (cudaMemcpy d2d)", n, 16.0 * n / copy / 1e3, copy, "1.00");
        struct {
            const char *name;
            kernel k;
            int act;
            double bytes; /* per element */
        } rows[] = {
            {"leaky forward double", K_LEAKY_FWD_D, 0, 16.125}, {"leaky vjp double", K_LEAKY_VJP_D, 0, 16.125},
            {"leaky forward float", K_LEAKY_FWD_F, 0, 8.125},
        };
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
            double t = time_kernel(rows[r].k, rows[r].act, &b), gbs = rows[r].bytes * n / t / 1e9;
            printf("%-22s %10zu %10.2f %9.1f %9.2f\n", rows[r].name, n, t * 1e6, gbs, gbs / copy);
        }
        for (int a = 0; a < 6; a++)
            for (int fl = 0; fl < 2; fl++) {
                char name[32];
                snprintf(name, sizeof name, "%s f,f' %s", act_names[a], fl ? "float" : "double");
                double t = time_kernel(fl ? K_ACT_F : K_ACT_D, a, &b), gbs = (fl ? 12.0 : 24.0) * n / t / 1e9;
                printf("%-22s %10zu %10.2f %9.1f %9.2f\n", name, n, t * 1e6, gbs, gbs / copy);
            }
    }
    vijp_cuda_free(b.x), vijp_cuda_free(b.y), vijp_cuda_free(b.z), vijp_cuda_free(b.xf), vijp_cuda_free(b.bits);
}

/* Seconds per call of f over ~0.2 s. */
#define TIME_CALLS(seconds, call)                                                                            \
    do {                                                                                                     \
        TRY(call);                                                                                           \
        TRY(vijp_cuda_sync(&err));                                                                           \
        int reps_ = 0;                                                                                       \
        double t0_ = bench_now(), t_;                                                                        \
        do {                                                                                                 \
            TRY(call);                                                                                       \
            TRY(vijp_cuda_sync(&err));                                                                       \
            reps_++;                                                                                         \
        } while ((t_ = bench_now() - t0_) < 0.2);                                                            \
        (seconds) = t_ / reps_;                                                                              \
    } while (0)

static void dense(size_t n, size_t B)
{
    vijp_error err = {0};
    vijp_cuda_blas *h;
    TRY(vijp_cuda_blas_open(&h, &err));
    double *W, *b, *X, *Y, *C;
    TRY(vijp_cuda_alloc((void **)&W, n * n * 8, &err));
    TRY(vijp_cuda_alloc((void **)&b, n * 8, &err));
    TRY(vijp_cuda_alloc((void **)&X, n * B * 8, &err));
    TRY(vijp_cuda_alloc((void **)&Y, n * B * 8, &err));
    TRY(vijp_cuda_alloc((void **)&C, n * B * 8, &err));
    double *hw = vijp_alloc_array(n * n, sizeof *hw);
    for (size_t i = 0; i < n * n; i++) hw[i] = (i % (n + 1) == 0 ? 4 : 0) + ((double)(i * 2654435761u % 1001) - 500) / (500.0 * n);
    TRY(vijp_cuda_upload(W, hw, n * n * 8, &err));
    TRY(vijp_cuda_upload(X, hw, n * B * 8, &err)); /* any finite data */
    TRY(vijp_cuda_upload(b, hw, n * 8, &err));
    vijp_free(hw);
    double tg, tf, tv, ts, fl = 2.0 * n * n * B;
    TIME_CALLS(tg, vijp_cuda_gemm_d(h, n, B, n, W, X, C, &err));
    TIME_CALLS(tf, vijp_cuda_dense_forward_d(h, n, n, B, W, b, X, Y, &err));
    TIME_CALLS(tv, vijp_cuda_dense_vjp_d(h, n, n, B, W, X, Y, &err));
    TIME_CALLS(ts, vijp_cuda_dense_vijp_d(h, n, n, B, W, X, NULL, Y, &err));
    double rate = fl / tg / 1e9, flv = 2.0 * n * n * n / 3 + 2.0 * n * n * B;
    printf("dense %zu x %zu, batch %zu:\n", n, n, B);
    printf("%-34s %9.1f GFLOP/s %6s\n", "cublasDgemm (reference)", rate, "1.00");
    printf("%-34s %9.1f GFLOP/s %6.2f\n", "dense forward double (gemm + b)", fl / tf / 1e9, fl / tf / 1e9 / rate);
    printf("%-34s %9.1f GFLOP/s %6.2f\n", "dense vjp double", fl / tv / 1e9, fl / tv / 1e9 / rate);
    printf("%-34s %9.1f GFLOP/s %6.2f   (LU + solve, 2n^3/3 + 2n^2 B)\n", "dense vijp double (square)", flv / ts / 1e9,
           flv / ts / 1e9 / rate);
    uint16_t *Wb, *bb, *Xb, *Yb;
    TRY(vijp_cuda_alloc((void **)&Wb, n * n * 2, &err));
    TRY(vijp_cuda_alloc((void **)&bb, n * 2, &err));
    TRY(vijp_cuda_alloc((void **)&Xb, n * B * 2, &err));
    TRY(vijp_cuda_alloc((void **)&Yb, n * B * 2, &err));
    uint16_t *hb = vijp_alloc_array(n * n, sizeof *hb);
    for (size_t i = 0; i < n * n; i++) hb[i] = 0x3c00 + (uint16_t)(i % 128); /* bf16 in [2^-7, 2^-6) */
    TRY(vijp_cuda_upload(Wb, hb, n * n * 2, &err));
    TRY(vijp_cuda_upload(Xb, hb, n * B * 2, &err));
    TRY(vijp_cuda_upload(bb, hb, n * 2, &err));
    vijp_free(hb);
    double tb;
    TIME_CALLS(tb, vijp_cuda_dense_forward_bf16(h, n, n, B, Wb, bb, Xb, Yb, &err));
    printf("%-34s %9.1f GFLOP/s %6.2f   (x the dgemm rate: tensor cores)\n", "dense forward bf16+binary32",
           fl / tb / 1e9, fl / tb / 1e9 / rate);
    vijp_cuda_free(W), vijp_cuda_free(b), vijp_cuda_free(X), vijp_cuda_free(Y), vijp_cuda_free(C);
    vijp_cuda_free(Wb), vijp_cuda_free(bb), vijp_cuda_free(Xb), vijp_cuda_free(Yb);
    vijp_cuda_blas_close(h);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    size_t max_n = (size_t)bench_count(argc, argv, smoke ? 4096 : 1L << 24, 4096, 1L << 30,
                                       "Usage: bench-gpu [--smoke] [MAX_ELEMENTS]\n  the CUDA kernels against the device's copy "
                                       "bandwidth and cuBLAS, up to MAX_ELEMENTS (default 2^24).\n");
    char why[256], name[256];
    if (!vijp_cuda_available(why, sizeof why)) {
        printf("SKIPPED: no GPU (%s)\n", why);
        return 0;
    }
    double gib;
    vijp_error err = {0};
    TRY(vijp_cuda_device_info(name, sizeof name, &gib, &err));
    printf("bench-gpu: %s, %.0f GiB; vijp %s\n\n", name, gib, VIJP_VERSION);
    bandwidth(max_n);
    printf("\n");
    dense(smoke ? 256 : 4096, smoke ? 256 : 4096);
    printf("\n");
    dense(smoke ? 64 : 1024, smoke ? 16 : 64);
    return 0;
}

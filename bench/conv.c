/* make bench (convolutions): one vijp of a circular convolution by FFT
 * (src/layers/conv_circular.c) against the plain DFT it replaced (kept here,
 * in the benchmark only, as the reference kernel: O(C·P²) transforms with
 * the phase computed per term, a complex LU per frequency), on the same
 * weights and cotangent, in this run.  Target: >= 100× at conv2d:16x3x32. */
#include "vijp/vijp.h"
#include "vijp/catalogue.h"
#include "bench.h"
#include "vijp/memory.h"
#include <cblas.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double complex phase(size_t w, size_t d, size_t R, size_t Q)
{
    size_t wy = w / Q, wx = w % Q, dy = d / Q, dx = d % Q;
    double t = (double)((wy * dy) % R) / (double)R + (double)((wx * dx) % Q) / (double)Q;
    return cexp(-2 * M_PI * I * t);
}

static int csolve(size_t C, double complex *A, double complex *r)
{
    for (size_t c = 0; c < C; c++) {
        size_t piv = c;
        for (size_t i = c + 1; i < C; i++)
            if (cabs(A[i * C + c]) > cabs(A[piv * C + c])) piv = i;
        if (A[piv * C + c] == 0) return -1;
        for (size_t j = 0; piv != c && j < C; j++) {
            double complex t = A[c * C + j];
            A[c * C + j] = A[piv * C + j], A[piv * C + j] = t;
        }
        double complex t = r[c];
        r[c] = r[piv], r[piv] = t;
        for (size_t i = c + 1; i < C; i++) {
            double complex l = A[i * C + c] / A[c * C + c];
            for (size_t j = c + 1; j < C; j++) A[i * C + j] -= l * A[c * C + j];
            r[i] -= l * r[c];
        }
    }
    for (size_t i = C; i-- > 0;) {
        for (size_t j = i + 1; j < C; j++) r[i] -= A[i * C + j] * r[j];
        r[i] /= A[i * C + i];
    }
    return 0;
}

/* The replaced vijp: Ŵ(ω)ᵀ ẑ = ĝ per frequency, every DFT a plain sum. */
static int plain_dft_vijp(const vijp_layer *L, const double *th, const double *in, double *out)
{
    const vijp_conv_args *a = vijp_conv_get(L);
    size_t C = a->channels, K = a->kernel, R = a->rows ? a->rows : 1, KH = a->rows ? K : 1;
    size_t n = L->in / C, Q = n / R, T = KH * K, hy = (KH - 1) / 2, hx = (K - 1) / 2;
    double complex *F = malloc(C * n * sizeof *F), *A = malloc(C * C * sizeof *A), *z = malloc(C * sizeof *z);
    int rc = 0;
    for (size_t c = 0; c < C; c++)
        for (size_t w = 0; w < n; w++) {
            double complex s = 0;
            for (size_t p = 0; p < n; p++) s += in[c * n + p] * phase(w, p, R, Q);
            F[c * n + w] = s;
        }
    for (size_t w = 0; !rc && w < n; w++) {
        for (size_t o = 0; o < C; o++)
            for (size_t c = 0; c < C; c++) {
                double complex s = 0;
                for (size_t k = 0; k < T; k++) {
                    size_t dy = (k / K + R - hy) % R, dx = (k % K + Q - hx) % Q;
                    s += th[(o * C + c) * T + k] * phase(w, dy * Q + dx, R, Q);
                }
                A[c * C + o] = s;
            }
        for (size_t c = 0; c < C; c++) z[c] = F[c * n + w];
        rc = csolve(C, A, z);
        for (size_t c = 0; c < C; c++) F[c * n + w] = z[c];
    }
    for (size_t c = 0; !rc && c < C; c++)
        for (size_t p = 0; p < n; p++) {
            double complex s = 0;
            for (size_t w = 0; w < n; w++) s += F[c * n + w] * conj(phase(w, p, R, Q));
            out[c * n + p] = creal(s) / (double)n;
        }
    free(F), free(A), free(z);
    return rc;
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 0, "Usage: bench-conv [--smoke]\n  one vijp of a circular convolution by FFT against the plain DFT it replaced (make bench; takes no arguments).\n");
    /* As every vijp command runs: one OpenBLAS thread, and freed memory
     * kept for the next call (vijp/memory.h).  Without the second each
     * vijp faulted its FFT buffers in again: 0.027 s against 0.0023 s at
     * conv2d:16x3x32, 2026-12-07 (the target then missed). */
    openblas_set_num_threads(1);
    vijp_memory_keep_freed();
    vijp_memory_policy_install();
    static const struct conv_case {
        const char *spec;
        size_t width;
    } all_cases[] = {{"conv2d:16x3x32:circular", 16 * 32 * 32}, {"conv2d:2x3x64:circular", 2 * 64 * 64},
                 {"conv1d:16x3:circular", 4096}, {"conv1d:128x3:circular", 128 * 64}},
      smoke_cases[] = {{"conv2d:2x3x8:circular", 2 * 8 * 8}, {"conv1d:4x3:circular", 4 * 16}};
    printf("circular convolutions, one vijp (batch 1, double), best of 3 (FFT) and 1 (plain DFT)\n");
    printf("%-26s %7s %12s %12s %9s %12s\n", "layer", "width", "FFT s", "plain DFT s", "speedup", "max |diff|");
    int ok = 1;
    const struct conv_case *cases = smoke ? smoke_cases : all_cases;
    size_t n_cases = smoke ? sizeof smoke_cases / sizeof *smoke_cases : sizeof all_cases / sizeof *all_cases;
    for (size_t k = 0; k < n_cases; k++) {
        vijp_net net;
        vijp_error err = {0};
        BENCH_MUST(vijp_net_build(&net, cases[k].spec, 1, cases[k].width, &err));
        BENCH_MUST(vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 1, &err));
        vijp_format fd;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        vijp_mat th, X, G, Y;
        BENCH_MUST(vijp_net_params(&net, &fd, &th, &err));
        size_t n = net.layers[0].in;
        vijp_mat_init(&X, n, 1, &fd), vijp_mat_init(&G, n, 1, &fd), vijp_mat_init(&Y, n, 1, &fd);
        for (size_t i = 0; i < n; i++) X.d[i] = sin(0.37 * (double)i), G.d[i] = cos(0.11 * (double)i);
        double best = 1e300;
        for (int r = 0; r < 3; r++) {
            double t0 = bench_now();
            BENCH_MUST(vijp_layer_vijp(&net.layers[0], &th, &X, &G, NULL, &Y, &err));
            double t = bench_now() - t0;
            if (t < best) best = t;
        }
        double *ref = malloc(n * sizeof *ref), t0 = bench_now();
        BENCH_MUST(plain_dft_vijp(&net.layers[0], th.d, G.d, ref));
        double plain = bench_now() - t0, diff = 0;
        for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs(ref[i] - Y.d[i]));
        printf("%-26s %7zu %12.5f %12.4f %8.0fx %12.3g\n", cases[k].spec, n, best, plain, plain / best, diff);
        if (k == 0) ok = plain / best >= 100;
        free(ref);
        vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y);
        vijp_net_free(&net);
    }
    printf("target: >= 100x at conv2d:16x3x32:circular: %s\n", ok ? "met" : "NOT met");
    return 0;
}

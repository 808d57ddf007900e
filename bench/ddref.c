/* make bench (the reference's fast products): what the drift reference's
 * dense products cost at 64 and 106 bits, measured in this run on one
 * WIDTH × WIDTH layer (default 256), through vo_dot (oracles/dense_fused.c:
 * the reference before src/emu/dense_ref.c) and through the double-/triple-
 * double path with its rounding test (src/emu/dense_ref.h), bit for bit the
 * same: ns per multiply-add of W x + b, Wᵀ g and the batch-4 and -8
 * parameter gradient, and how many outputs fell back to vo_dot.  Then whole reference
 * levels: backprop of dense:WIDTH,leaky:0.5 at depth 16, batch 1, in
 * mpfr:P with exact dots (θ at 53 bits, as the drift memo holds it) at the
 * levels the study uses (64 and 128 for the binary32 family, 106 and 212
 * for double), each over the double backprop of the same net.  CPU seconds
 * of this thread, best of three. */
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "vijp/arith.h"
#include "oracles/dot.h"
#include "emu/dense_ref.h"
#include "bench.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double thread_cpu(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM };

/* n values x of precision P: a normal double plus a random low part, so
 * that every P bits are used (the reference's activations are). */
static mpfr_t *random_vec(size_t n, long P, vijp_rng *g)
{
    mpfr_t *v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        mpfr_init2(v[i], P);
        mpfr_set_d(v[i], vijp_rng_normal(g), MPFR_RNDN);
        mpfr_t lo;
        mpfr_init2(lo, 53);
        mpfr_set_d(lo, vijp_rng_uniform(g), MPFR_RNDN);
        mpfr_mul_2si(lo, lo, mpfr_get_exp(v[i]) - 53, MPFR_RNDN);
        mpfr_add(v[i], v[i], lo, MPFR_RNDN);
        mpfr_clear(lo);
    }
    return v;
}

static void free_vec(mpfr_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) mpfr_clear(v[i]);
    free(v);
}

/* One op on a width × width layer at P bits and batch B, both ways. */
static void products(size_t width, long P, int op, size_t B, vijp_rng *g)
{
    static const char *const names[] = {"W x + b", "W u", "Wt g", "g xT (param)"};
    vijp_layer L;
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", width, width);
    vijp_error err = {0};
    if (vijp_layer_parse(&L, spec, width, &err)) {
        fprintf(stderr, "bench-ddref: %s\n", err.msg);
        exit(1);
    }
    vijp_format f;
    BENCH_MUST(vijp_format_mpfr(&f, P, NULL));
    f.exact_dots = 1;
    size_t n = width, m = width, P_count = m * n + m;
    mpfr_t *th = calloc(P_count, sizeof *th);
    for (size_t k = 0; k < P_count; k++) /* weights of norm ~1 rows, doubles: the memo's copy */
        mpfr_init2(th[k], 53), mpfr_set_d(th[k], vijp_rng_normal(g) / 16, MPFR_RNDN);
    mpfr_t *X = random_vec(n * B, P, g), *Gy = random_vec(m * B, P, g);
    size_t outs = op == OP_VJP_PARAM ? P_count : m * B;
    mpfr_t *a = random_vec(outs, P, g), *b = random_vec(outs, P, g);
    mpfr_t *in = op == OP_VJP || op == OP_VJP_PARAM ? Gy : X;
    double best[2] = {1e300, 1e300};
    vijp_ddref_stats st = {.any_size = 1}; /* both ways, whatever the size */
    for (int r = -1; r < 3; r++) { /* r = -1: untimed, the first touch of the scratch memory */
        double t0 = thread_cpu();
        if (op == OP_FORWARD) vo_dense_forward_fused(&L, th, X, B, a);
        else if (op == OP_VJP) vo_dense_vjp_fused(&L, th, Gy, B, a);
        else vo_dense_vjp_param_fused(&L, X, B, Gy, a);
        double t1 = thread_cpu();
        vijp_ref_dense_op(op, &L, th, X, B, in, b, &f, &st);
        double t2 = thread_cpu();
        if (r >= 0 && t1 - t0 < best[0]) best[0] = t1 - t0;
        if (r >= 0 && t2 - t1 < best[1]) best[1] = t2 - t1;
    }
    size_t same = 0;
    for (size_t k = 0; k < outs; k++) same += mpfr_equal_p(a[k], b[k]) != 0;
    double macs = (double)(m * n * B);
    printf("  %3ld bits  %-13s batch %zu: vo_dot %6.2f ns  fast %6.2f ns per multiply-add (%5.1fx); %zu of %zu "
           "fell back; %s\n", P, names[op], B, 1e9 * best[0] / macs, 1e9 * best[1] / macs, best[0] / best[1],
           st.fallbacks, st.fallbacks + st.outputs, same == outs ? "same bits" : "BITS DIFFER");
    free_vec(th, P_count), free_vec(X, n * B), free_vec(Gy, m * B), free_vec(a, outs), free_vec(b, outs);
    if (same != outs) exit(1);
}

/* Whole levels: backprop in mpfr:P with exact dots over double's. */
static void levels(size_t width)
{
    enum { D = 16 };
    vijp_error err = {0};
    vijp_format F, F53;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    BENCH_MUST(vijp_format_mpfr(&F53, 53, NULL));
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zu,leaky:0.5", width);
    vijp_net net;
    if (vijp_net_build(&net, spec, D, width, &err) || vijp_net_init(&net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, 1, &err)) {
        fprintf(stderr, "bench-ddref: %s\n", err.msg);
        exit(1);
    }
    vijp_mat *th = calloc(D, sizeof *th), *th53 = calloc(D, sizeof *th53);
    BENCH_MUST(vijp_net_params(&net, &F, th, NULL));
    for (size_t i = 0; i < D; i++)
        vijp_mat_init(&th53[i], th[i].rows, th[i].cols, &F53), vijp_mat_convert(&th53[i], &th[i]);
    size_t n = net.width, m = vijp_net_out_width(&net);
    double *x = malloc(n * sizeof *x), *t = malloc(m * sizeof *t);
    vijp_net_sample(&net, 1, 1, x, t);
    vijp_mat Xd, Td;
    vijp_mat_init(&Xd, n, 1, &F), vijp_mat_set_d(&Xd, x);
    vijp_mat_init(&Td, m, 1, &F), vijp_mat_set_d(&Td, t);
    static const long precs[] = {0, 64, 106, 128, 212};
    double base = 0;
    for (size_t k = 0; k < sizeof precs / sizeof *precs; k++) {
        vijp_format f = F;
        vijp_mat X = Xd, T = Td;
        if (precs[k]) {
            BENCH_MUST(vijp_format_mpfr(&f, precs[k], NULL));
            f.exact_dots = 1;
            vijp_mat_init(&X, n, 1, &f), vijp_mat_convert(&X, &Xd);
            vijp_mat_init(&T, m, 1, &f), vijp_mat_convert(&T, &Td);
        }
        double best = 1e300;
        for (int r = 0; r < 3; r++) {
            vijp_grads gr;
            double t0 = thread_cpu();
            if (vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, precs[k] ? th53 : th, &X, &T, &gr, &err)) {
                fprintf(stderr, "bench-ddref: %s\n", err.msg);
                exit(1);
            }
            double dt = thread_cpu() - t0;
            if (dt < best) best = dt;
            vijp_grads_clear(&gr);
        }
        if (!precs[k]) {
            base = best;
            printf("  double backprop: %.4f s\n", best);
        } else {
            printf("  mpfr:%-3ld exact dots: %.4f s = %5.1fx double%s\n", precs[k], best, best / base,
                   precs[k] <= VIJP_DDREF_MAX_PREC ? " (dense products on the fast path)" : " (vo_dot)");
            vijp_mat_clear(&X), vijp_mat_clear(&T);
        }
    }
    for (size_t i = 0; i < D; i++) vijp_mat_clear(&th[i]), vijp_mat_clear(&th53[i]);
    free(th), free(th53), free(x), free(t);
    vijp_mat_clear(&Xd), vijp_mat_clear(&Td);
    vijp_net_free(&net);
}

int main(int argc, char **argv)
{
    size_t width = (size_t)bench_count(argc, argv, 256, 16, 1024,
                                       "Usage: bench-ddref [WIDTH]\n  the drift reference's dense products at 64 and "
                                       "106 bits through vo_dot and the double-double path, then whole reference "
                                       "levels, on WIDTH x WIDTH layers (default 256).\n");
    openblas_set_num_threads(1);
    vijp_memory_keep_freed(); /* as the study keeps freed memory for its next curve */
    vijp_rng g;
    vijp_rng_seed(&g, 1);
    printf("the reference's dense products, %zu x %zu (CPU time of this thread, best of 3)\n", width, width);
    static const long precs[] = {64, 106};
    for (size_t p = 0; p < 2; p++) {
        products(width, precs[p], OP_FORWARD, 1, &g);
        products(width, precs[p], OP_VJP, 1, &g);
        products(width, precs[p], OP_VJP_PARAM, 4, &g);
        products(width, precs[p], OP_VJP_PARAM, 8, &g);
    }
    printf("reference levels, dense:%zu,leaky:0.5, depth 16, batch 1:\n", width);
    levels(width);
    return 0;
}

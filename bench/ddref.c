/* make bench (the reference's fast products): what the drift reference's
 * dense products cost at 64, 106, 128 and 212 bits, measured in this run on
 * one WIDTH × WIDTH layer (default 256; at 128 bits also 4·WIDTH up to
 * 1024), through vo_dot (oracles/dense_fused.c: the reference before
 * src/emu/dense_ref.c) and through the double-/triple-double, four- or
 * five-level path with its rounding test (src/emu/dense_ref.h), bit for bit
 * the same: ns per multiply-add of W x + b, Wᵀ g (batch 1, and 16 at 128
 * and 212 bits) and the parameter gradient (batch 4 and 8; 8 and 16 at 128
 * bits, 16 at 212), and how many outputs fell back to vo_dot.  Then the
 * kernels alone (src/ddot, each set), and whole reference levels: backprop
 * of dense:WIDTH,leaky:0.5 at depth 64, batch 1, in mpfr:P with exact dots
 * (θ at 53 bits, and θ in double as the drift memo holds it, the same bits)
 * at the levels the study uses (64 and 128 for the binary32 family, 106 and
 * 212 for double), each over the double backprop of the same net; each
 * level also with the dense layers' oracle operators (what it ran before
 * its fast path), every gradient entry compared bit for bit, and a binary32
 * and a double curve's whole reference (levels 64 + 128, 106 + 212) both
 * ways.  CPU seconds of this thread, best of three. */
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "vijp/arith.h"
#include "oracles/dot.h"
#include "oracles/oracles.h"
#include "emu/dense_ref.h"
#include "ddot/ddot.h"
#include "bench.h"
#include "ddkernels.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double thread_cpu(void) { return bench_cpu(CLOCK_THREAD_CPUTIME_ID); }

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM };

/* n values x of precision P: a normal double plus random low parts 53
 * bits apart, so that every P bits are used (the reference's activations
 * are). */
static mpfr_t *random_vec(size_t n, long P, vijp_rng *g)
{
    mpfr_t *v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        mpfr_init2(v[i], P);
        mpfr_set_d(v[i], vijp_rng_normal(g), MPFR_RNDN);
        mpfr_exp_t E = mpfr_get_exp(v[i]);
        for (long k = 1; 53 * k < P; k++) {
            mpfr_t lo;
            mpfr_init2(lo, 53);
            mpfr_set_d(lo, vijp_rng_uniform(g), MPFR_RNDN);
            mpfr_mul_2si(lo, lo, E - 53 * k, MPFR_RNDN);
            mpfr_add(v[i], v[i], lo, MPFR_RNDN);
            mpfr_clear(lo);
        }
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
    printf("  %3ld bits %4zu %-13s batch %2zu: vo_dot %6.2f ns  fast %6.2f ns per multiply-add (%5.1fx); %zu of %zu "
           "fell back; %s\n", P, width, names[op], B, 1e9 * best[0] / macs, 1e9 * best[1] / macs, best[0] / best[1],
           st.fallbacks, st.fallbacks + st.outputs, same == outs ? "same bits" : "BITS DIFFER");
    free_vec(th, P_count), free_vec(X, n * B), free_vec(Gy, m * B), free_vec(a, outs), free_vec(b, outs);
    if (same != outs) exit(1);
}

/* The kernels alone on one width × width product of doubles, per set
 * (ddkernels.h). */
static void kernels(size_t width, vijp_rng *g)
{
    for (int k = 0; k < VIJP_DD_SET_COUNT; k++) {
        const vijp_dd_kernels *K = vijp_dd_set(k);
        if (!K) continue;
        double ns[BENCH_DD_KINDS];
        bench_dd_kernel_ns(K, width, g, ns);
        printf("  %-6s double-double %5.2f ns, triple-double %5.2f ns, four levels (triple-double x) %5.2f ns, five "
               "levels (four-part x) %5.2f ns per term\n", K->name, ns[BENCH_DD], ns[BENCH_TD], ns[BENCH_QD],
               ns[BENCH_D5]);
    }
}

/* Whether two gradients agree entry by entry, sign included. */
static int same_mat(const vijp_mat *a, const vijp_mat *b)
{
    size_t n = vijp_mat_len(a);
    if (n != vijp_mat_len(b)) return 0;
    for (size_t k = 0; k < n; k++)
        if (!mpfr_equal_p(a->m[k], b->m[k]) || mpfr_signbit(a->m[k]) != mpfr_signbit(b->m[k])) return 0;
    return 1;
}

static int same_grads(const vijp_grads *a, const vijp_grads *b)
{
    int same = a->depth == b->depth && same_mat(&a->grad_x, &b->grad_x);
    for (size_t i = 0; same && i < a->depth; i++) same = same_mat(&a->g[i], &b->g[i]) && same_mat(&a->grad_theta[i], &b->grad_theta[i]);
    return same;
}

/* CPU seconds of one backprop of net at format f (best of three), or with
 * keep, one untimed run whose gradients are left there. */
static double backprop_time(const vijp_net *net, vijp_mat *th, const vijp_mat *Xd, const vijp_mat *Td,
                            const vijp_format *f, vijp_grads *keep)
{
    vijp_error err = {0};
    vijp_mat X = *Xd, T = *Td;
    if (f->kind == VIJP_MPFR) {
        vijp_mat_init(&X, Xd->rows, Xd->cols, f), vijp_mat_convert(&X, Xd);
        vijp_mat_init(&T, Td->rows, Td->cols, f), vijp_mat_convert(&T, Td);
    }
    double best = 1e300;
    for (int r = 0; r < (keep ? 1 : 3); r++) {
        vijp_grads gr;
        double t0 = thread_cpu();
        if (vijp_engine_run(VIJP_ENGINE_BACKPROP, net, th, &X, &T, &gr, &err)) {
            fprintf(stderr, "bench-ddref: %s\n", err.msg);
            exit(1);
        }
        double dt = thread_cpu() - t0;
        if (dt < best) best = dt;
        if (keep) *keep = gr;
        else vijp_grads_clear(&gr);
    }
    if (f->kind == VIJP_MPFR) vijp_mat_clear(&X), vijp_mat_clear(&T);
    return best;
}

/* Whole levels: backprop in mpfr:P with exact dots over double's; the
 * levels the fast path takes also with the dense layers' mp operators
 * replaced by the oracle's (vo_dense_*: what dense_ref.c ran above 106 bits
 * before its four-level path), the gradients compared bit for bit, and the
 * binary32 family's reference (64 + 128) both ways. */
static void levels(size_t width)
{
    enum { D = 64 };
    vijp_error err = {0};
    vijp_format F, F53;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    BENCH_MUST(vijp_format_mpfr(&F53, 53, NULL));
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zu,leaky:0.5", width);
    vijp_net net, before;
    if (vijp_net_build(&net, spec, D, width, &err) || vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 1, &err)) {
        fprintf(stderr, "bench-ddref: %s\n", err.msg);
        exit(1);
    }
    /* before: the same layers, the dense type's mp operators the oracle's */
    before = net;
    before.layers = calloc(D, sizeof *before.layers);
    vijp_layer_type dense_oracle = *vijp_layer_type_find("dense");
    vijp_ops_mp ops = *dense_oracle.mp;
    ops.forward = vo_dense_forward, ops.jvp = vo_dense_jvp, ops.vjp = vo_dense_vjp, ops.vjp_param = vo_dense_vjp_param;
    dense_oracle.mp = &ops;
    for (size_t i = 0; i < D; i++) {
        before.layers[i] = net.layers[i];
        if (net.layers[i].type == vijp_layer_type_find("dense")) before.layers[i].type = &dense_oracle;
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
    double base = backprop_time(&net, th, &Xd, &Td, &F, NULL), at[4] = {0}, old[4] = {0};
    printf("  double backprop: %.4f s\n", base);
    static const long precs[] = {64, 106, 128, 212};
    for (size_t k = 0; k < 4; k++) {
        vijp_format f;
        BENCH_MUST(vijp_format_mpfr(&f, precs[k], NULL));
        f.exact_dots = 1;
        at[k] = backprop_time(&net, th53, &Xd, &Td, &f, NULL);
        printf("  mpfr:%-3ld exact dots: %.4f s = %5.1fx double%s\n", precs[k], at[k], at[k] / base,
               precs[k] <= VIJP_DDREF_MAX_PREC ? " (dense products on the fast path)" : " (vo_dot)");
        { /* θ as the drift memo now holds it, in double: dense's products read it without an MPFR twin */
            double atd = backprop_time(&net, th, &Xd, &Td, &f, NULL);
            vijp_grads a53, ad;
            backprop_time(&net, th53, &Xd, &Td, &f, &a53), backprop_time(&net, th, &Xd, &Td, &f, &ad);
            int same = same_grads(&a53, &ad);
            printf("  mpfr:%-3ld exact dots, θ in double: %.4f s = %5.1fx double; %.2fx the 53-bit θ's time; %s\n",
                   precs[k], atd, atd / base, atd / at[k], same ? "same bits" : "BITS DIFFER");
            vijp_grads_clear(&a53), vijp_grads_clear(&ad);
            if (!same) exit(1);
        }
        if (precs[k] <= VIJP_DDREF_MAX_PREC) {
            old[k] = backprop_time(&before, th53, &Xd, &Td, &f, NULL);
            vijp_grads fast, slow; /* then one more run each, untimed, compared */
            backprop_time(&net, th53, &Xd, &Td, &f, &fast), backprop_time(&before, th53, &Xd, &Td, &f, &slow);
            int same = same_grads(&fast, &slow);
            printf("  mpfr:%-3ld exact dots, dense by vo_dot: %.4f s = %5.1fx double; fast path %.2fx faster; %s\n",
                   precs[k], old[k], old[k] / base, old[k] / at[k], same ? "same bits" : "BITS DIFFER");
            vijp_grads_clear(&fast), vijp_grads_clear(&slow);
            if (!same) exit(1);
        }
    }
    printf("  binary32's reference (levels 64 + 128): %5.1fx double, with the 128-bit level by vo_dot (before) "
           "%5.1fx: %.2fx faster\n", (at[0] + at[2]) / base, (at[0] + old[2]) / base, (at[0] + old[2]) / (at[0] + at[2]));
    printf("  double's reference (levels 106 + 212): %5.1fx double, with the 212-bit level by vo_dot (before) "
           "%5.1fx: %.2fx faster\n", (at[1] + at[3]) / base, (at[1] + old[3]) / base, (at[1] + old[3]) / (at[1] + at[3]));
    for (size_t i = 0; i < D; i++) vijp_mat_clear(&th[i]), vijp_mat_clear(&th53[i]);
    free(th), free(th53), free(x), free(t), free(before.layers);
    vijp_mat_clear(&Xd), vijp_mat_clear(&Td);
    vijp_net_free(&net);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv); /* the smallest size */
    size_t width = (size_t)bench_count(argc, argv, smoke ? 16 : 256, 16, 1024,
                                       "Usage: bench-ddref [--smoke] [WIDTH]\n  the drift reference's dense products at 64, "
                                       "106, 128 and 212 bits through vo_dot and the fast path, then whole reference "
                                       "levels, on WIDTH x WIDTH layers (default 256; at 128 bits also 4 WIDTH, up to 1024).\n");
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
    for (size_t w = width; w <= 4 * width && w <= 1024; w *= 4) /* 128 bits: triple-double inputs, four levels */
        for (size_t B = 1; B <= 16; B += 15) {
            products(w, 128, OP_FORWARD, B, &g);
            products(w, 128, OP_VJP, B, &g);
        }
    products(width, 128, OP_VJP_PARAM, 8, &g);
    products(width, 128, OP_VJP_PARAM, 16, &g);
    for (size_t B = 1; B <= 16; B += 15) { /* 212 bits, double's validating level: four-part inputs, five levels */
        products(width, 212, OP_FORWARD, B, &g);
        products(width, 212, OP_VJP, B, &g);
    }
    products(width, 212, OP_VJP_PARAM, 16, &g);
    printf("the kernels alone, %zu x %zu doubles, x in two to four parts:\n", width, width);
    kernels(width, &g);
    printf("reference levels, dense:%zu,leaky:0.5, depth 64, batch 1:\n", width);
    levels(width);
    return 0;
}

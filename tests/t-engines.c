/* Engines: Moonwalk mixed mode and pure forward against backprop,
 * at 256 bits (>= 60 digits) and in double (within a derived bound), and
 * stored-bytes accounting against hand counts. */
#include "fixtures/layerfix.h"
#include "engines/watch.h"
#include "engines/stored.h"
#include "memory/profile.h"
#include "base/fork.h"
#include "vijp/drift.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *spec;
    size_t width;
    vijp_init_kind init;
} nets[] = {
    {"dense:6", 6, VIJP_INIT_ORTHOGONAL},
    {"dense:6", 6, VIJP_INIT_GAUSSIAN},
    {"leaky:0.5", 6, VIJP_INIT_GAUSSIAN},
    {"relu", 6, VIJP_INIT_GAUSSIAN},
    {"tanh", 6, VIJP_INIT_GAUSSIAN},
    {"dense:6,leaky:0.3", 6, VIJP_INIT_ORTHOGONAL},
    {"dense:8,relu,dense:6,tanh", 6, VIJP_INIT_ORTHOGONAL}, /* tall (6→8), wide (8→6) */
    {"dense:5,leaky:0.7,dense:5,relu", 5, VIJP_INIT_GAUSSIAN},
    /* fragmental Moonwalk: non-submersive layers with 2 and 1 fragment values per sample */
    {"dense:6,layernorm,dense:6,gelu", 6, VIJP_INIT_ORTHOGONAL},
    {"dense:6,softmax,dense:6,silu", 6, VIJP_INIT_ORTHOGONAL},
    {"dense:8,relu,layernorm,dense:6,mish,softplus,sigmoid,softmax", 6, VIJP_INIT_GAUSSIAN},
    /* RevNet blocks: Moonwalk rebuilds their inputs by inversion, except below a
     * layer that keeps no input values (relu, leaky), where it stores them */
    {"additive", 6, VIJP_INIT_ORTHOGONAL},
    {"additive,relu,additive:dense:3+leaky:0.5,layernorm", 6, VIJP_INIT_GAUSSIAN},
    {"dense:6,additive:dense:3+tanh+dense:3,leaky:0.5,additive", 6, VIJP_INIT_ORTHOGONAL},
    /* convolutions: per-frequency vijp (circular), dense LU (zero padding) */
    {"conv1d:2x3:circular,leaky:0.5", 8, VIJP_INIT_ORTHOGONAL},
    {"conv1d:2x3,tanh,conv1d:2x3:circular,softplus", 8, VIJP_INIT_GAUSSIAN},
    /* pooling (wide, submersive) then a tall dense (fragment), space-to-depth */
    {"dense:8,avgpool:2,dense:8,squeeze:1x4", 8, VIJP_INIT_ORTHOGONAL},
    {"conv1d:2x3s2:circular,dense:8", 8, VIJP_INIT_ORTHOGONAL}, /* strided (wide) then tall */
    {"conv2d:1x3x4:circular,tanh,conv2d:1x3x4,leaky:0.5", 16, VIJP_INIT_ORTHOGONAL}, /* 4 x 4 grid */
    /* affine coupling (Glow): scales sigmoid(S + 2) and exp(S) */
    {"affine", 6, VIJP_INIT_ORTHOGONAL},
    /* residual blocks: f contracting (orthogonal W, tanh, avgpool's 1/√2: Lip(f) <= 0.71), so the
     * reversible engine rebuilds inputs by fixed-point iteration; projections on the skip path, square,
     * wide (6 → 4) and tall (6 → 8, a fragment), whose inputs it keeps */
    {"residual:dense:6+tanh+avgpool:2+dense:6,leaky:0.5", 6, VIJP_INIT_ORTHOGONAL},
    {"residual:dense:8+tanh+dense:6:skip=dense:6,tanh", 6, VIJP_INIT_GAUSSIAN},
    {"residual:dense:4+tanh:skip=dense:4,dense:6,residual:dense:8+tanh+dense:8:skip=dense:8", 6, VIJP_INIT_ORTHOGONAL},
    {"affine:exp+dense:3+tanh,leaky:0.5,affine", 6, VIJP_INIT_GAUSSIAN},
    /* a Glow step: invertible 1x1 convolution, affine coupling, squeeze */
    {"inv1x1:2,affine,squeeze:2x2", 8, VIJP_INIT_GAUSSIAN},
    /* coupling blocks whose residual functions hold convolutions (any layer type may) */
    {"additive:conv1d:2x3:circular+tanh,affine:exp+conv1d:1x3,leaky:0.5", 16, VIJP_INIT_GAUSSIAN},
    /* normalisation and shape types: fragments 1 per run (ε > 0, logsoftmax),
     * and an invertible stack whose inputs Moonwalk rebuilds by inversion */
    {"dense:8,dropout:0.1,layernorm:4:eps=0.1:affine,dense:8,logsoftmax:4", 8, VIJP_INIT_GAUSSIAN},
    {"actnorm:2,batchnorm:4:eps=0.1:affine,transpose:2x4,dense:8,groupnorm:2x4:affine", 8, VIJP_INIT_GAUSSIAN},
};
#define NNETS (sizeof nets / sizeof *nets)
#define DEPTH 8
#define BATCH 2

typedef struct {
    vijp_net net;
    vijp_format F;
    vijp_mat *theta, X, T;
} problem;

static void problem_init(problem *p, size_t i, const char *fmt)
{
    vijp_error err = {0};
    ck_assert(!vijp_format_parse(fmt, &p->F, &err));
    ck_assert_msg(!vijp_net_build(&p->net, nets[i].spec, DEPTH, nets[i].width, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&p->net, (vijp_init){.kind = nets[i].init, .gain = 1}, test_seed() + i, &err));
    p->net.loss = i % 2 ? VIJP_LOSS_LINEAR : VIJP_LOSS_SQUARE; /* both losses */
    p->theta = calloc(DEPTH, sizeof *p->theta);
    ck_assert(!vijp_net_params(&p->net, &p->F, p->theta, &err));
    size_t n0 = p->net.width, mD = vijp_net_out_width(&p->net);
    double *X = malloc(n0 * BATCH * sizeof *X), *T = malloc(mD * BATCH * sizeof *T);
    vijp_net_sample(&p->net, BATCH, test_seed() + 100 + i, X, T);
    vijp_mat_init(&p->X, n0, BATCH, &p->F), vijp_mat_set_d(&p->X, X);
    vijp_mat_init(&p->T, mD, BATCH, &p->F), vijp_mat_set_d(&p->T, T);
    free(X), free(T);
}

static void problem_clear(problem *p)
{
    vijp_net_params_clear(&p->net, p->theta);
    free(p->theta);
    vijp_mat_clear(&p->X), vijp_mat_clear(&p->T);
    vijp_net_free(&p->net);
}

static void run(problem *p, vijp_engine_kind e, vijp_grads *g)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_engine_run(e, &p->net, p->theta, &p->X, &p->T, g, &err), "%s: %s", vijp_engine_name(e), err.msg);
}

/* At 256 bits every engine is exact to ~2^-256 times the conditioning of
 * these depth-8 networks (κ <= ~1e3 per layer at worst here), so 60 correct
 * digits is a bound with margin, and a wrong formula misses it by 60 decades. */
START_TEST(agree_at_256_bits)
{
    problem p;
    problem_init(&p, (size_t)_i, "mpfr:256");
    vijp_grads bp, mw;
    run(&p, VIJP_ENGINE_BACKPROP, &bp);
    /* Reversible too: its inverses (GE at 256 bits, atanh, 1/α) lose at most
     * κ-fold per layer, so the rebuilt inputs, and the gradients from them,
     * also stay within 2^-256 times the conditioning. */
    for (int e = VIJP_ENGINE_MOONWALK; e <= VIJP_ENGINE_REVERSIBLE; e++) {
        run(&p, (vijp_engine_kind)e, &mw);
        double worst = vijp_xnum_double(vijp_rel_err(&mw.grad_x, &bp.grad_x));
        for (size_t i = 0; i < DEPTH; i++) {
            double a = vijp_xnum_double(vijp_rel_err(&mw.g[i], &bp.g[i])), b = mw.grad_theta[i].rows ? vijp_xnum_double(vijp_rel_err(&mw.grad_theta[i], &bp.grad_theta[i])) : 0;
            worst = fmax(worst, fmax(a, b));
        }
        ck_assert_msg(worst <= 1e-60, "%s on %s: only %.1f digits", vijp_engine_name((vijp_engine_kind)e), nets[_i].spec, -log10(worst));
        ck_assert(fabs(mw.loss - bp.loss) <= 1e-12 * fabs(bp.loss));
        vijp_grads_clear(&mw);
    }
    vijp_grads_clear(&bp);
    problem_clear(&p);
}
END_TEST

/* κ of layer i's Jacobian (nonzero singular values) at the points the
 * network actually visits, largest over the batch, and the C_solve constant of
 * t-layers.c. */
static void layer_conditions(problem *p, double *kap, double *csolve)
{
    vijp_mat h, hn;
    vijp_mat_init(&h, p->net.width, BATCH, &p->F);
    vijp_mat_copy(&h, &p->X);
    for (size_t i = 0; i < DEPTH; i++) {
        const vijp_layer *L = &p->net.layers[i];
        kap[i] = 1;
        csolve[i] = c_solve(L->out, L->in);
        for (size_t b = 0; b < BATCH; b++) kap[i] = fmax(kap[i], kappa_at(L, &p->theta[i], &h, b));
        vijp_mat_init(&hn, L->out, BATCH, &p->F);
        ck_assert(!vijp_layer_forward(L, &p->theta[i], &h, &hn, NULL));
        vijp_mat_clear(&h);
        h = hn;
    }
    vijp_mat_clear(&h);
}

/* Double: to first order the reverse pass gives g_0 with relative error
 * e_0 <= Σ_j (m_j + 6)u Π_{k<=j} κ_k, and the sweep's vijp at layer i
 * multiplies the incoming relative error by at most κ_i and adds its own
 * backward error C_solve,i·u, amplified by κ_i:
 *   e_i <= κ_i (e_{i−1} + C_solve,i u).
 * Backprop's g_i is within e_0-like bounds of the truth too, so the two
 * engines agree within 2 e_i (factor 1.1 for second-order terms). */
START_TEST(agree_in_double)
{
    problem p;
    problem_init(&p, (size_t)_i, "double");
    double kap[DEPTH], cs[DEPTH], u = ldexp(1, -53);
    layer_conditions(&p, kap, cs);
    double e0 = 0, amp = 1;
    for (size_t j = DEPTH; j-- > 0;) amp *= kap[j], e0 += (p.net.layers[j].out + 6) * u * amp;
    vijp_grads bp, mw;
    run(&p, VIJP_ENGINE_BACKPROP, &bp);
    for (int e = VIJP_ENGINE_MOONWALK; e <= VIJP_ENGINE_PURE_FORWARD; e++) {
        run(&p, (vijp_engine_kind)e, &mw);
        /* pure forward forms g_0 as Tᵀ g_D: the same products, in the other order */
        double ei = e0;
        ck_assert_msg(vijp_xnum_double(vijp_rel_err(&mw.grad_x, &bp.grad_x)) <= 2.2 * e0, "%s: g_0 off", nets[_i].spec);
        for (size_t i = 0; i < DEPTH; i++) {
            ei = kap[i] * (ei + cs[i] * u);
            double r = vijp_xnum_double(vijp_rel_err(&mw.g[i], &bp.g[i]));
            ck_assert_msg(r <= 2.2 * ei, "%s %s: g_%zu differs from backprop by %g > bound %g",
                          vijp_engine_name((vijp_engine_kind)e), nets[_i].spec, i + 1, r, 2.2 * ei);
        }
        vijp_grads_clear(&mw);
    }
    vijp_grads_clear(&bp);
    problem_clear(&p);
}
END_TEST

/* Stored bytes against hand counts (double, 8 bytes a value). */
START_TEST(stored_bytes_hand_counts)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_net net;
    vijp_mat th[4], X, T;
    vijp_grads g;
    ck_assert(!vijp_net_build(&net, "dense:8,leaky:0.5", 4, 8, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 3, NULL));
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    double x[16], t[16];
    vijp_net_sample(&net, 2, 3, x, t);
    vijp_mat_init(&X, 8, 2, &F), vijp_mat_set_d(&X, x), vijp_mat_init(&T, 8, 2, &F), vijp_mat_set_d(&T, t);
    /* backprop: h_0..h_3, each 8 × 2 doubles = 128 bytes → 512 */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 512);
    vijp_grads_clear(&g);
    /* moonwalk: h_0 (128) + two leaky layers' sign bits, 16 bits = 2 bytes each → 132 */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, th, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 132);
    vijp_grads_clear(&g);
    /* pure forward: h_0 only (no fragments in a submersive net) */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_PURE_FORWARD, &net, th, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 128);
    vijp_grads_clear(&g);
    /* checkpoint, k = ⌈√4⌉ = 2: checkpoints h_0, h_2 (256), then segment 2
     * recomputes h_3 (128) while both are kept → 384 */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_CHECKPOINT, &net, th, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 384);
    vijp_grads_clear(&g);
    /* reversible: nothing (square dense and leaky are inverted) */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_REVERSIBLE, &net, th, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 0);
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);

    /* dense 8 → 10 (tall) then relu, batch 2: fragments 2·2 (dense) + k (relu inactive) */
    ck_assert(!vijp_net_build(&net, "dense:10,relu", 2, 8, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 5, NULL));
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    vijp_mat T2, H;
    vijp_mat_init(&T2, 10, 2, &F), vijp_mat_init(&H, 10, 2, &F);
    ck_assert(!vijp_layer_forward(&net.layers[0], &th[0], &X, &H, NULL));
    size_t k = 0;
    for (size_t i = 0; i < 20; i++) k += !(H.d[i] > 0);
    ck_assert(k > 0 && k < 20);
    /* moonwalk peak: at the dense layer of the reverse pass: h_0 128 + relu bits 3 bytes
     * (released after their fragment is taken) ... peak is h_0 + bits + relu fragment,
     * then h_0 + relu fragment + dense fragment: 128 + max(3 + 8k, 8k + 32) */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, th, &X, &T2, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 128 + 8 * k + 32);
    vijp_grads_clear(&g);
    ck_assert(!vijp_engine_run(VIJP_ENGINE_PURE_FORWARD, &net, th, &X, &T2, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 128 + 8 * k + 32);
    vijp_grads_clear(&g);
    /* reversible: neither tall dense nor relu has an inverse: h_0 (8 × 2) and
     * h_1 (10 × 2) kept, 128 + 160 */
    ck_assert(!vijp_engine_run(VIJP_ENGINE_REVERSIBLE, &net, th, &X, &T2, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 288);
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);

    /* dense:8,gelu, batch 2: a smooth activation keeps one value per unit
     * (its input, from which the dual evaluation gives f′ again; nested
     * forward AD would keep f′, the same count).  backprop h_0 + h_1 = 256;
     * moonwalk h_0 + the GELU input = 256; the GELU has no inverse, so the
     * reversible engine keeps its input, 128. */
    ck_assert(!vijp_net_build(&net, "dense:8,gelu", 2, 8, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 3, NULL));
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    vijp_engine_kind kinds[] = {VIJP_ENGINE_BACKPROP, VIJP_ENGINE_MOONWALK, VIJP_ENGINE_REVERSIBLE};
    size_t want[] = {256, 256, 128};
    for (size_t e = 0; e < 3; e++) {
        ck_assert(!vijp_engine_run(kinds[e], &net, th, &X, &T, &g, NULL));
        ck_assert_uint_eq(g.stored_bytes, want[e]);
        vijp_grads_clear(&g);
    }
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);

    /* A Glow stack inv1x1:2, affine, squeeze:2x2 to depth 6, batch 2: every
     * layer's inverse rebuilds its input going back, so Moonwalk keeps h_0
     * alone (128 bytes) where backprop keeps h_0 … h_5 (768). */
    vijp_mat th6[6];
    ck_assert(!vijp_net_build(&net, "inv1x1:2,affine,squeeze:2x2", 6, 8, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 3, NULL));
    ck_assert(!vijp_net_params(&net, &F, th6, NULL));
    ck_assert(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, th6, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 128);
    vijp_grads_clear(&g);
    ck_assert(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th6, &X, &T, &g, NULL));
    ck_assert_uint_eq(g.stored_bytes, 768);
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, th6);
    vijp_net_free(&net);
    vijp_mat_clear(&X), vijp_mat_clear(&T), vijp_mat_clear(&T2), vijp_mat_clear(&H);
}
END_TEST

/* stored_by_depth is the ledger replayed per layer: it must equal what each
 * engine's own ledger reports on the network cut after layer d (the cut shares
 * the first d layers, parameters and inputs; loss data does not move bytes). */
START_TEST(stored_by_depth_matches_cut_networks)
{
    problem p;
    problem_init(&p, (size_t)_i, "double");
    for (int e = VIJP_ENGINE_BACKPROP; e <= VIJP_ENGINE_CHECKPOINT; e++) {
        vijp_grads full, cut;
        run(&p, (vijp_engine_kind)e, &full);
        ck_assert_uint_eq(full.rebuilt, DEPTH);
        ck_assert_uint_eq(full.stored_by_depth[DEPTH - 1], full.stored_bytes);
        for (size_t d = 1; d < DEPTH; d++) {
            vijp_net net = p.net;
            net.depth = d;
            vijp_mat T;
            vijp_mat_init(&T, net.layers[d - 1].out, BATCH, &p.F);
            for (size_t k = 0; k < vijp_mat_len(&T); k++) vijp_mat_set_entry_d(&T, k, 0.5 + (double)k);
            ck_assert(!vijp_engine_run((vijp_engine_kind)e, &net, p.theta, &p.X, &T, &cut, NULL));
            ck_assert_msg(cut.stored_bytes == full.stored_by_depth[d - 1], "%s on %s cut at %zu: ledger %zu, profile %zu",
                          vijp_engine_name((vijp_engine_kind)e), nets[_i].spec, d, cut.stored_bytes,
                          full.stored_by_depth[d - 1]);
            vijp_grads_clear(&cut);
            vijp_mat_clear(&T);
        }
        vijp_grads_clear(&full);
    }
    problem_clear(&p);
}
END_TEST

/* The memory profile's pure-forward counts (engines/stored.h), from the
 * forward passes alone, are a pure-forward run's stored_by_depth entry for
 * entry: on every net (relu's and layernorm's fragments depend on the
 * values, tall layers take a cokernel), in double, binary32, a stochastic
 * rounding format (the forward values' keys) and mpfr:80. */
START_TEST(pure_forward_counts_without_tangents)
{
    static const char *const fmts[] = {"double", "binary32", "bfloat16:sr+binary32", "mpfr:80"};
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        problem p;
        problem_init(&p, (size_t)_i, fmts[fi]);
        vijp_grads g;
        run(&p, VIJP_ENGINE_PURE_FORWARD, &g);
        size_t counted[DEPTH];
        vijp_error err = {0};
        ck_assert_msg(!vijp_engine_pure_forward_stored(&p.net, p.theta, &p.X, counted, &err), "%s", err.msg);
        for (size_t d = 0; d < DEPTH; d++)
            ck_assert_msg(counted[d] == g.stored_by_depth[d], "%s in %s at depth %zu: counted %zu, the run %zu",
                          nets[_i].spec, fmts[fi], d + 1, counted[d], g.stored_by_depth[d]);
        vijp_grads_clear(&g);
        problem_clear(&p);
    }
}
END_TEST

/* Checkpointing recomputes each segment with exactly the forward pass's
 * operations, so its gradients are backprop's bit for bit, in every format. */
START_TEST(checkpoint_is_backprop_exactly)
{
    static const char *const fmts[] = {"double", "binary32", "mpfr:96"};
    for (int k = 0; k < 3; k++) {
        problem p;
        problem_init(&p, (size_t)_i, fmts[k]);
        vijp_grads bp, ck;
        run(&p, VIJP_ENGINE_BACKPROP, &bp);
        run(&p, VIJP_ENGINE_CHECKPOINT, &ck);
        ck_assert(vijp_xnum_double(vijp_rel_err(&ck.grad_x, &bp.grad_x)) == 0);
        for (size_t i = 0; i < DEPTH; i++) {
            ck_assert_msg(vijp_xnum_double(vijp_rel_err(&ck.g[i], &bp.g[i])) == 0, "%s %s: g_%zu differs", nets[_i].spec, fmts[k], i + 1);
            if (bp.grad_theta[i].rows) ck_assert(vijp_xnum_double(vijp_rel_err(&ck.grad_theta[i], &bp.grad_theta[i])) == 0);
        }
        ck_assert(ck.stored_bytes < bp.stored_bytes); /* 3 checkpoints + 2 recomputed < 8 inputs */
        vijp_grads_clear(&bp), vijp_grads_clear(&ck);
        problem_clear(&p);
    }
}
END_TEST

static int same_values(const vijp_mat *a, const vijp_mat *b);

/* A packed a (vijp/mat.h) as an MPFR-held copy t (exact: its precision). */
static const vijp_mat *held(const vijp_mat *a, vijp_mat *t)
{
    if (!a->packed) return a;
    vijp_mat_init(t, a->rows, a->cols, a->fmt);
    vijp_mat_convert(t, a);
    return t;
}

/* Entry for entry the same values, zeros' signs included (packed ones read
 * through an MPFR-held copy). */
static int same_values(const vijp_mat *a, const vijp_mat *b)
{
    if (a->packed || b->packed) {
        vijp_mat ta = {0}, tb = {0};
        int same = same_values(held(a, &ta), held(b, &tb));
        vijp_mat_clear(&ta), vijp_mat_clear(&tb);
        return same;
    }
    if (a->rows != b->rows || a->cols != b->cols || !!a->d != !!b->d) return 0;
    for (size_t k = 0, n = vijp_mat_len(a); k < n; k++)
        if (a->d ? memcmp(&a->d[k], &b->d[k], sizeof *a->d)
                 : !mpfr_equal_p(a->m[k], b->m[k]) || mpfr_signbit(a->m[k]) != mpfr_signbit(b->m[k]))
            return 0;
    return 1;
}

/* What a watched backprop shows its watcher (engines/watch.h, for the drift
 * reference's level-by-level comparison): layers D−1 down to 0, each once;
 * at layer i, g_i and ∇θ_i already equal to the unwatched run's final
 * values (∇x too at i = 0), and no ∇θ_j of j < i allocated yet (the
 * reference frees the level below before the next is made).  A watcher
 * that packs what it is shown (watch.h allows it; the drift reference's
 * levels are packed so, drift/memo.c) leaves the run's results unchanged:
 * backprop reads none of it again (were it to, the packed matrix would
 * stop it, vijp/mat.h).  Broken on purpose (the watcher called before the
 * layer's vjp_param, or every ∇θ
 * allocated up front), it fails. */
typedef struct {
    const vijp_grads *want;
    size_t next, calls;
    int ok;
    char why[160];
    int pack; /* pack g_i, ∇θ_i (and ∇x) once checked */
} watch_log;

static void watcher(void *ctx, size_t i, vijp_grads *got)
{
    watch_log *w = ctx;
    if (!w->ok) return;
    w->calls++;
    if (i != w->next) snprintf(w->why, sizeof w->why, "layer %zu reported, expected %zu", i, w->next), w->ok = 0;
    else if (!same_values(&got->g[i], &w->want->g[i]) || !same_values(&got->grad_theta[i], &w->want->grad_theta[i]))
        snprintf(w->why, sizeof w->why, "layer %zu: g or ∇θ not final when reported", i), w->ok = 0;
    else if (i == 0 && !same_values(&got->grad_x, &w->want->grad_x))
        snprintf(w->why, sizeof w->why, "∇x not final at layer 0"), w->ok = 0;
    for (size_t j = 0; w->ok && j < i; j++)
        if (got->grad_theta[j].m || got->grad_theta[j].d)
            snprintf(w->why, sizeof w->why, "at layer %zu, ∇θ of layer %zu already allocated", i, j), w->ok = 0;
    w->next = i - 1;
    if (w->pack) {
        vijp_mat_pack(&got->g[i]), vijp_mat_pack(&got->grad_theta[i]);
        if (i == 0) vijp_mat_pack(&got->grad_x);
    }
}

START_TEST(backprop_watch_sees_final_layers)
{
    static const char *const fmts[] = {"double", "mpfr:96", "mpfr:96"};
    for (int k = 0; k < 3; k++) {
        problem p;
        problem_init(&p, (size_t)_i, fmts[k]);
        vijp_grads bp, watched;
        run(&p, VIJP_ENGINE_BACKPROP, &bp);
        watch_log w = {&bp, DEPTH - 1, 0, 1, "", k == 2};
        vijp_error err = {0};
        ck_assert_msg(!vijp_engine_backprop_watched(&p.net, p.theta, &p.X, &p.T, NULL, watcher, NULL, &w, &watched, &err), "%s",
                      err.msg);
        ck_assert_msg(w.ok && w.calls == DEPTH, "%s %s: %s (%zu calls)", nets[_i].spec, fmts[k], w.why, w.calls);
        ck_assert(same_values(&watched.grad_x, &bp.grad_x) && watched.loss == bp.loss);
        for (size_t i = 0; i < DEPTH; i++)
            ck_assert(same_values(&watched.g[i], &bp.g[i]) && same_values(&watched.grad_theta[i], &bp.grad_theta[i]));
        vijp_grads_clear(&bp), vijp_grads_clear(&watched);
        problem_clear(&p);
    }
}
END_TEST

/* A watched backprop refuses a param_ready (it would free ∇θ_i before the
 * watch sees it), with a message and its result left empty. */
static void no_param(void *ctx, size_t i, vijp_grads *out) { (void)ctx, (void)i, (void)out; }

START_TEST(backprop_watch_refuses_param_ready)
{
    problem p;
    problem_init(&p, 0, "double");
    vijp_engine_opts o = {.param_ready = no_param};
    vijp_grads g;
    memset(&g, 0xff, sizeof g);
    vijp_error err = {0};
    ck_assert_int_eq(vijp_engine_backprop_watched(&p.net, p.theta, &p.X, &p.T, &o, watcher, NULL, NULL, &g, &err),
                     VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "param_ready") != NULL, "message '%s'", err.msg);
    ck_assert(g.depth == 0 && g.grad_theta == NULL && g.g == NULL);
    vijp_grads_clear(&g);
    problem_clear(&p);
}
END_TEST

/* Given segment lengths, on dense:8,leaky:0.5 at depth 8, batch 2 (every
 * layer input 8 × 2 doubles = 128 bytes).  Going back, segment s (0-based)
 * holds checkpoints 0..s and its own len_s − 1 recomputed inputs, so the
 * peak is max_s (s + len_s) inputs:
 *   k = 1: 8 segments of 1: 8;  k = 2: segments 2,2,2,2: 3 + 2 = 5;
 *   k = 3: segments 3,3,2: max(3, 4, 4) = 4;  k = 8 (or more, clamped): 8. */
START_TEST(checkpoint_segments)
{
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    vijp_net net;
    vijp_mat th[8], X, T;
    ck_assert(!vijp_net_build(&net, "dense:8,leaky:0.5", 8, 8, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 4, NULL));
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    double x[16], t[16];
    vijp_net_sample(&net, 2, 4, x, t);
    vijp_mat_init(&X, 8, 2, &F), vijp_mat_set_d(&X, x), vijp_mat_init(&T, 8, 2, &F), vijp_mat_set_d(&T, t);
    static const struct {
        size_t k, inputs;
    } C[] = {{1, 8}, {2, 5}, {3, 4}, {8, 8}, {100, 8}};
    vijp_grads bp, g, cut;
    ck_assert(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &X, &T, &bp, NULL));
    for (size_t c = 0; c < sizeof C / sizeof *C; c++) {
        vijp_engine_opts o = {.checkpoint_segment = C[c].k};
        ck_assert(!vijp_engine_run_opts(VIJP_ENGINE_CHECKPOINT, &net, th, &X, &T, &o, &g, NULL));
        ck_assert_msg(g.stored_bytes == 128 * C[c].inputs, "k = %zu: %zu bytes", C[c].k, g.stored_bytes);
        ck_assert(vijp_xnum_double(vijp_rel_err(&g.grad_theta[0], &bp.grad_theta[0])) == 0);
        for (size_t d = 1; d < 8; d++) { /* the profile uses the same k on the cut networks */
            vijp_net cn = net;
            cn.depth = d;
            vijp_mat Tc;
            vijp_mat_init(&Tc, 8, 2, &F);
            ck_assert(!vijp_engine_run_opts(VIJP_ENGINE_CHECKPOINT, &cn, th, &X, &Tc, &o, &cut, NULL));
            ck_assert_uint_eq(cut.stored_bytes, g.stored_by_depth[d - 1]);
            vijp_grads_clear(&cut);
            vijp_mat_clear(&Tc);
        }
        vijp_grads_clear(&g);
    }
    vijp_grads_clear(&bp);
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);
    vijp_mat_clear(&X), vijp_mat_clear(&T);
}
END_TEST

/* The reversible engine's reconstruction, measured by the diagnostic.  At 256
 * bits it is exact to 2^-256 times the conditioning (<= 1e-60 here).  In
 * double, going back from h_D (e_D = 0), rebuilding h_{k−1} = f_k^-1(h_k)
 * turns a relative error e_k of h_k into at most
 *   e_{k−1} <= a_k (e_k + C_k u),  a_k = max_b ‖J_k^-1‖₂ · ‖h_k‖_F / ‖h_{k−1}‖_F,
 * to first order (the inverse of an affine map, or of a diagonal scaling per
 * sample, amplifies absolute errors by ‖J^-1‖₂), with C_k u the inverse's own
 * backward error: C_solve for dense (LU, see t-layers.c), 1 for leaky (a
 * division by α or by 1).  Factor 1.1 for second-order terms.  Nets with
 * only square dense and leaky layers (the others keep inputs or invert tanh,
 * whose relative condition near ±1 this simple bound does not cover). */
START_TEST(reversible_reconstruction)
{
    static const size_t invertible_nets[] = {0, 1, 2, 5};
    for (size_t t = 0; t < 4; t++) {
        size_t ni = invertible_nets[t];
        for (int hi = 0; hi < 2; hi++) {
            problem p;
            problem_init(&p, ni, hi ? "mpfr:256" : "double");
            double recon[DEPTH], hn[DEPTH + 1], a[DEPTH];
            vijp_xnum reconx[DEPTH];
            vijp_error err = {0};
            ck_assert_msg(!vijp_reversible_reconstruction(&p.net, p.theta, &p.X, reconx, &err), "%s", err.msg);
            for (size_t i = 0; i < DEPTH; i++) recon[i] = vijp_xnum_double(reconx[i]); /* mpfr:256's near 2^-256: doubles */
            if (hi) {
                for (size_t i = 0; i < DEPTH; i++) ck_assert_msg(recon[i] <= 1e-60, "%s: h_%zu rebuilt to %g", nets[ni].spec, i, recon[i]);
                problem_clear(&p);
                continue;
            }
            vijp_mat h, hnext;
            vijp_mat_init(&h, p.net.width, BATCH, &p.F);
            vijp_mat_copy(&h, &p.X);
            hn[0] = vijp_norm(&h);
            for (size_t k = 0; k < DEPTH; k++) {
                const vijp_layer *L = &p.net.layers[k];
                double inv = 0;
                for (size_t b = 0; b < BATCH; b++) {
                    double *J = jacobian_at(L, &p.theta[k], &h, b), smax, smin;
                    sv_range(J, L->out, L->in, &smax, &smin);
                    inv = fmax(inv, 1 / smin);
                    free(J);
                }
                vijp_mat_init(&hnext, L->out, BATCH, &p.F);
                ck_assert(!vijp_layer_forward(L, &p.theta[k], &h, &hnext, NULL));
                vijp_mat_clear(&h);
                h = hnext;
                hn[k + 1] = vijp_norm(&h);
                a[k] = inv * hn[k + 1] / hn[k];
            }
            vijp_mat_clear(&h);
            double e = 0, u = ldexp(1, -53);
            for (size_t k = DEPTH; k-- > 0;) {
                const vijp_layer *L = &p.net.layers[k];
                e = a[k] * (e + (L->type->param_count(L) ? c_solve(L->out, L->in) : 1) * u);
                ck_assert_msg(recon[k] <= 1.1 * e, "%s: h_%zu rebuilt with error %g > bound %g", nets[ni].spec, k,
                              recon[k], 1.1 * e);
            }
            problem_clear(&p);
        }
    }
}
END_TEST

/* The engine's rebuilt_input hook sees every input it rebuilds by an inverse,
 * and only those: compared with the true inputs (a forward pass) it gives
 * the diagnostic's numbers exactly, with 0 left where the engine keeps the
 * input (relu, rectangular dense).  The drift study
 * measures reconstruction this way (drift.c, recon_watch). */
typedef struct {
    vijp_mat *H;
    vijp_xnum *recon;
    int calls;
} hook_ctx;

static void hook(void *ctx, size_t i, const vijp_mat *x)
{
    hook_ctx *h = ctx;
    h->recon[i] = vijp_rel_err(x, &h->H[i]);
    h->calls++;
}

START_TEST(reversible_hook_is_the_diagnostic)
{
    for (size_t ni = 0; ni < 8; ni++)
        for (int hi = 0; hi < 2; hi++) {
            problem p;
            problem_init(&p, ni, hi ? "binary32" : "double");
            vijp_xnum want[DEPTH], got[DEPTH] = {{0, 0}};
            vijp_mat H[DEPTH + 1];
            vijp_mat_init(&H[0], p.net.width, BATCH, &p.F);
            vijp_mat_copy(&H[0], &p.X);
            for (size_t k = 0; k < DEPTH; k++) {
                vijp_mat_init(&H[k + 1], p.net.layers[k].out, BATCH, &p.F);
                ck_assert(!vijp_layer_forward(&p.net.layers[k], &p.theta[k], &H[k], &H[k + 1], NULL));
            }
            hook_ctx h = {H, got, 0};
            vijp_engine_opts o = {.rebuilt_input = hook, .rebuilt_ctx = &h};
            vijp_grads g;
            vijp_error err = {0};
            ck_assert_msg(!vijp_engine_run_opts(VIJP_ENGINE_REVERSIBLE, &p.net, p.theta, &p.X, &p.T, &o, &g, &err), "%s",
                          err.msg);
            ck_assert_msg(!vijp_reversible_reconstruction(&p.net, p.theta, &p.X, want, &err), "%s", err.msg);
            int rebuilt = 0;
            for (size_t k = 0; k < DEPTH; k++) {
                const vijp_layer *L = &p.net.layers[k];
                rebuilt += L->in == L->out && L->type->d->inverse && L->type->mp && L->type->mp->inverse;
                ck_assert_msg(!memcmp(&got[k], &want[k], sizeof got[k]), "%s %s: h_%zu %g vs %g", nets[ni].spec,
                              hi ? "binary32" : "double", k, got[k].m, want[k].m);
            }
            ck_assert_int_eq(h.calls, rebuilt);
            vijp_grads_clear(&g);
            for (size_t k = 0; k <= DEPTH; k++) vijp_mat_clear(&H[k]);
            problem_clear(&p);
        }
}
END_TEST

/* The layer_done hook (progress meters) counts every engine's layer steps
 * one by one, 1, 2, … up to the total vijp_engine_layer_steps announces,
 * the same total at every call, and changes nothing in the results: every
 * gradient, the loss and the stored bytes are those of a run without it. */
typedef struct {
    size_t calls, last, total;
    int bad; /* a call out of order or with another total */
} steps_ctx;

static void on_step(void *ctx, size_t done, size_t total)
{
    steps_ctx *c = ctx;
    if (done != c->last + 1 || (c->calls && total != c->total)) c->bad = 1;
    c->calls++, c->last = done, c->total = total;
}

static int same_mat(const vijp_mat *a, const vijp_mat *b)
{
    if (a->rows != b->rows || a->cols != b->cols) return 0;
    for (size_t k = 0; k < vijp_mat_len(a); k++) {
        double x = vijp_mat_get_d(a, k), y = vijp_mat_get_d(b, k);
        if (memcmp(&x, &y, sizeof x)) return 0;
    }
    return 1;
}

START_TEST(layer_done_counts_steps)
{
    static const char *const fmts[] = {"double", "binary32"};
    static const size_t segments[] = {0, 3};
    for (int f = 0; f < 2; f++) {
        problem p;
        problem_init(&p, (size_t)_i, fmts[f]);
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++)
            for (int sg = 0; sg < (e == VIJP_ENGINE_CHECKPOINT ? 2 : 1); sg++) {
                vijp_engine_kind ek = (vijp_engine_kind)e;
                steps_ctx c = {0};
                vijp_engine_opts plain = {.checkpoint_segment = segments[sg]}, o = plain;
                o.layer_done = on_step, o.layer_ctx = &c;
                vijp_grads g, want;
                vijp_error err = {0};
                int rc = vijp_engine_run_opts(ek, &p.net, p.theta, &p.X, &p.T, &o, &g, &err);
                int rw = vijp_engine_run_opts(ek, &p.net, p.theta, &p.X, &p.T, &plain, &want, NULL);
                ck_assert_int_eq(rc, rw);
                size_t total = vijp_engine_layer_steps(ek, DEPTH, BATCH, &plain);
                ck_assert_msg(!c.bad && c.calls <= total && (!c.calls || c.total == total),
                              "%s on %s (%s): steps out of order, or a total other than %zu", vijp_engine_name(ek),
                              nets[_i].spec, fmts[f], total);
                if (rc) continue; /* a format's range or an inverse's rank: nothing more to compare */
                ck_assert_msg(c.calls == total && c.last == total, "%s on %s (%s): %zu steps of %zu",
                              vijp_engine_name(ek), nets[_i].spec, fmts[f], c.calls, total);
                ck_assert(same_mat(&g.grad_x, &want.grad_x));
                for (size_t i = 0; i < DEPTH; i++)
                    ck_assert(same_mat(&g.g[i], &want.g[i]) && same_mat(&g.grad_theta[i], &want.grad_theta[i]));
                ck_assert(!memcmp(&g.loss, &want.loss, sizeof g.loss) && g.stored_bytes == want.stored_bytes);
                vijp_grads_clear(&g), vijp_grads_clear(&want);
            }
        problem_clear(&p);
    }
    /* the totals by hand: depth 10, batch 3; checkpoint every 4 layers: 3 segments */
    vijp_engine_opts four = {.checkpoint_segment = 4};
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_BACKPROP, 10, 3, NULL), 20);
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_REVERSIBLE, 10, 3, NULL), 20);
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_MOONWALK, 10, 3, NULL), 30);
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_PURE_FORWARD, 10, 3, NULL), 40);
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_CHECKPOINT, 10, 3, &four), 27);
    ck_assert_uint_eq(vijp_engine_layer_steps(VIJP_ENGINE_CHECKPOINT, 10, 3, NULL), 27); /* ⌈√10⌉ = 4 */
}
END_TEST

/* param_ready (the drift study compares each ∇θ_i there and frees it) is
 * called once per layer, in the engine's order (backward for backprop,
 * reversible and checkpoint, forward for Moonwalk and pure forward), with
 * ∇θ_i final (the values of a run without the hook) while no other layer's
 * ∇θ is held: the earlier ones freed by the hook, the later ones not yet
 * allocated.  The rest of the result is unchanged, and the freed layers
 * stay empty.  Broken on purpose (the hook called before the layer's
 * vjp_param, or every ∇θ allocated up front), it fails. */
typedef struct {
    const vijp_grads *want;
    size_t calls, next;
    int backward, ok;
    char why[160];
} param_log;

static int holds_values(const vijp_mat *a) { return a->d || a->m || a->packed; }

static void on_param_ready(void *ctx, size_t i, vijp_grads *got)
{
    param_log *w = ctx;
    if (!w->ok) return;
    w->calls++;
    if (i != w->next) snprintf(w->why, sizeof w->why, "layer %zu reported, expected %zu", i, w->next), w->ok = 0;
    else if (!same_values(&got->grad_theta[i], &w->want->grad_theta[i]))
        snprintf(w->why, sizeof w->why, "layer %zu: ∇θ not final when reported", i), w->ok = 0;
    for (size_t j = 0; w->ok && j < got->depth; j++)
        if (j != i && holds_values(&got->grad_theta[j]))
            snprintf(w->why, sizeof w->why, "at layer %zu, ∇θ of layer %zu is held", i, j), w->ok = 0;
    w->next = w->backward ? i - 1 : i + 1;
    vijp_mat_clear(&got->grad_theta[i]);
}

START_TEST(param_ready_sees_final_layers)
{
    static const char *const fmts[] = {"double", "binary32", "mpfr:96"};
    for (int f = 0; f < 3; f++) {
        problem p;
        problem_init(&p, (size_t)_i, fmts[f]);
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) {
            vijp_engine_kind ek = (vijp_engine_kind)e;
            vijp_grads g, want;
            int rw = vijp_engine_run(ek, &p.net, p.theta, &p.X, &p.T, &want, NULL);
            if (rw && rw != VIJP_ESINGULAR) continue; /* a format's range or an inverse's rank */
            int backward = ek != VIJP_ENGINE_MOONWALK && ek != VIJP_ENGINE_PURE_FORWARD;
            param_log w = {&want, 0, backward ? DEPTH - 1 : 0, backward, 1, ""};
            vijp_engine_opts o = {.param_ready = on_param_ready, .param_ctx = &w};
            vijp_error err = {0};
            int rc = vijp_engine_run_opts(ek, &p.net, p.theta, &p.X, &p.T, &o, &g, &err);
            ck_assert_int_eq(rc, rw);
            ck_assert_uint_eq(g.rebuilt, want.rebuilt);
            /* a backward run that fails (an inverse's rank) has reported the layers above the failure */
            size_t calls = !backward ? want.rebuilt : rw ? w.calls : DEPTH;
            ck_assert_msg(w.ok && w.calls == calls, "%s on %s (%s): %s (%zu calls)",
                          vijp_engine_name(ek), nets[_i].spec, fmts[f], w.why, w.calls);
            ck_assert(same_values(&g.grad_x, &want.grad_x) && g.loss == want.loss && g.stored_bytes == want.stored_bytes);
            for (size_t i = 0; i < DEPTH; i++) {
                ck_assert(same_values(&g.g[i], &want.g[i]));
                int freed = i < g.rebuilt || (backward && rw && i > DEPTH - 1 - w.calls);
                if (freed) ck_assert(g.grad_theta[i].rows == 0 && !holds_values(&g.grad_theta[i]));
                else ck_assert(same_values(&g.grad_theta[i], &want.grad_theta[i])); /* zeros past a lost rank */
            }
            ck_assert(!vijp_grads_check_finite(&g, NULL) || vijp_grads_check_finite(&want, NULL));
            vijp_grads_clear(&g), vijp_grads_clear(&want);
        }
        problem_clear(&p);
    }
}
END_TEST

/* The memory table's profiles (report/sections.c) of every engine on one
 * problem, split over 1, 2, 3 and 5 threads and in another order: each
 * engine's bytes those of its own profile (vijp_memory_profile_drawn).
 * Nets wide enough that the engines split (fork.h's least work a part):
 * dense and leaky (Moonwalk's sign bits), a tall dense and layernorm
 * (fragments) and an additive coupling (rebuilt by inversion).  Broken on
 * purpose (a range's engines written to the next one's bytes), it
 * fails. */
START_TEST(profile_engines_any_threads)
{
    static const char *const specs[] = {"dense:192,leaky:0.5", "dense:256,layernorm,dense:192,gelu", "additive,tanh"};
    vijp_net tmpl, drawn;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&tmpl, specs[_i], DEPTH, 192, &err), "%s", err.msg);
    ck_assert(!vijp_memory_profile_draw(&tmpl, BATCH, 7, &drawn, &err));
    ck_assert(VIJP_ENGINE_COUNT * (double)DEPTH * 192 * 192 * BATCH > 3 * VIJP_FORK_MIN_WORK); /* it splits */
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    size_t want[VIJP_ENGINE_COUNT][DEPTH], got[VIJP_ENGINE_COUNT][DEPTH];
    int rcs[VIJP_ENGINE_COUNT];
    for (int e = 0; e < VIJP_ENGINE_COUNT; e++)
        rcs[e] = vijp_memory_profile_drawn(&drawn, BATCH, 7, &fd, (vijp_engine_kind)e, NULL, want[e], NULL);
    static const vijp_engine_kind order[VIJP_ENGINE_COUNT] = {VIJP_ENGINE_CHECKPOINT, VIJP_ENGINE_MOONWALK,
                                                              VIJP_ENGINE_BACKPROP, VIJP_ENGINE_PURE_FORWARD,
                                                              VIJP_ENGINE_REVERSIBLE};
    static const int threads[] = {1, 2, 3, 5};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        size_t *bytes[VIJP_ENGINE_COUNT];
        for (int k = 0; k < VIJP_ENGINE_COUNT; k++) bytes[k] = got[order[k]];
        memset(got, 0, sizeof got);
        int rc = vijp_memory_profile_engines(&drawn, BATCH, 7, &fd, order, VIJP_ENGINE_COUNT, NULL, threads[t], bytes,
                                             NULL);
        int any = 0;
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) any |= rcs[e];
        ck_assert_int_eq(!rc, !any);
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++)
            if (!rcs[e])
                ck_assert_msg(!memcmp(got[e], want[e], sizeof want[e]), "%s on %s, %d threads: other bytes",
                              vijp_engine_name((vijp_engine_kind)e), specs[_i], threads[t]);
    }
    vijp_net_free(&drawn), vijp_net_free(&tmpl);
}
END_TEST

/* A vijp that loses rank keeps the layers rebuilt before it: a dense layer
 * whose weights are zero from layer 3 on cannot be inverted there. */
START_TEST(singular_vijp_keeps_earlier_layers)
{
    problem p;
    problem_init(&p, 0, "double"); /* dense:6 square layers */
    for (size_t k = 0; k < p.theta[2].rows; k++) p.theta[2].d[k] = 0;
    vijp_grads g;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_MOONWALK, &p.net, p.theta, &p.X, &p.T, &g, &err), VIJP_ESINGULAR);
    ck_assert_uint_eq(g.rebuilt, 2);
    ck_assert(g.g != NULL && g.depth == DEPTH);
    /* the layers never reached are zeros, not whatever their (unset) buffers held */
    for (size_t i = g.rebuilt; i < DEPTH; i++) {
        for (size_t k = 0; k < vijp_mat_len(&g.g[i]); k++) ck_assert_msg(g.g[i].d[k] == 0, "g_%zu[%zu]", i + 1, k);
        ck_assert_uint_eq(g.grad_theta[i].rows, p.theta[i].rows);
        for (size_t k = 0; k < vijp_mat_len(&g.grad_theta[i]); k++) ck_assert(g.grad_theta[i].d[k] == 0);
    }
    vijp_grads_clear(&g);
    problem_clear(&p);
}
END_TEST

/* A batch is the sum of its samples: ∇θ over a batch of 3 equals the sum of
 * three single-sample runs, at 256 bits up to 2^-250 relative. */
START_TEST(batch_is_sum_of_samples)
{
    vijp_format F;
    ck_assert(!vijp_format_parse("mpfr:256", &F, NULL));
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "dense:5,leaky:0.2", 4, 5, NULL));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 9, NULL));
    vijp_mat th[4], X, T, x, t, sum;
    ck_assert(!vijp_net_params(&net, &F, th, NULL));
    double xs[15], ts[15];
    vijp_net_sample(&net, 3, 9, xs, ts);
    vijp_mat_init(&X, 5, 3, &F), vijp_mat_set_d(&X, xs), vijp_mat_init(&T, 5, 3, &F), vijp_mat_set_d(&T, ts);
    vijp_grads g, gb;
    ck_assert(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, th, &X, &T, &g, NULL));
    vijp_mat_init(&sum, th[0].rows, 1, &F);
    vijp_mat_init(&x, 5, 1, &F), vijp_mat_init(&t, 5, 1, &F);
    for (size_t b = 0; b < 3; b++) {
        vijp_mat_copy_range(&x, 0, &X, 5 * b, 5), vijp_mat_copy_range(&t, 0, &T, 5 * b, 5);
        ck_assert(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, th, &x, &t, &gb, NULL));
        for (size_t i = 0; i < sum.rows; i++) mpfr_add(sum.m[i], sum.m[i], gb.grad_theta[0].m[i], MPFR_RNDN);
        vijp_grads_clear(&gb);
    }
    ck_assert(vijp_xnum_double(vijp_rel_err(&g.grad_theta[0], &sum)) < 1e-70);
    vijp_grads_clear(&g);
    vijp_mat_clear(&X), vijp_mat_clear(&T), vijp_mat_clear(&x), vijp_mat_clear(&t), vijp_mat_clear(&sum);
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);
}
END_TEST

/* A smooth activation's input cotangent in a mixed format is g·f′ computed
 * in binary32 and rounded once to storage, in the engines (which keep f′
 * from the forward pass, nested forward AD) bit for bit as in the layer's
 * own vjp, as PyTorch's autocast backward computes it: every activation of
 * the catalogue, both mixed formats, and bfloat16+binary32 through the
 * native float route (@ref).  Kept at storage precision, f′ would be
 * rounded twice (to bfloat16, then the product): most cotangents differ. */
START_TEST(mixed_cotangents_round_once)
{
    static const char *const acts[] = {"sigmoid", "softplus", "tanh", "silu", "gelu", "mish"};
    static const char *const fmts[] = {"bfloat16+binary32", "binary16+binary32", "bfloat16+binary32@ref"};
    enum { W = 64, B = 4 };
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 31);
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++)
        for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
            vijp_format F;
            vijp_net net;
            vijp_error err = {0};
            ck_assert(!vijp_format_parse(fmts[fi], &F, NULL));
            ck_assert(!vijp_net_build(&net, acts[a], 1, W, &err));
            vijp_mat th, X, T, V;
            ck_assert(!vijp_net_params(&net, &F, &th, &err));
            vijp_mat_init(&X, W, B, &F), vijp_mat_init(&T, W, B, &F), vijp_mat_init(&V, W, B, &F);
            for (size_t k = 0; k < W * B; k++)
                vijp_mat_set_entry_d(&X, k, 3 * vijp_rng_normal(&rng)), vijp_mat_set_entry_d(&T, k, vijp_rng_normal(&rng));
            vijp_mat_store(&X), vijp_mat_store(&T);
            vijp_grads ref;
            ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, &th, &X, &T, &ref, &err), "%s", err.msg);
            /* backprop keeps f′ alone, at binary32's 4 bytes a unit (not storage's 2) */
            ck_assert_msg(ref.stored_bytes == (size_t)W * B * 4, "%s: backprop keeps %zu bytes", fmts[fi], ref.stored_bytes);
            /* the loss gradient g (the same in every engine: one forward pass), through the layer's vjp */
            ck_assert(!vijp_layer_vjp(&net.layers[0], &th, &X, &ref.g[0], &V, &err));
            for (int e = 0; e < 2; e++) {
                vijp_grads g;
                if (e) ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, &th, &X, &T, &g, &err), "%s", err.msg);
                const vijp_grads *r = e ? &g : &ref;
                size_t differ = 0;
                for (size_t k = 0; k < W * B; k++) /* exact: values of the format */
                    differ += vijp_mat_get_d(&r->grad_x, k) != vijp_mat_get_d(&V, k);
                ck_assert_msg(!differ, "%s in %s, %s: %zu of %d input cotangents differ from the layer's vjp", acts[a],
                              fmts[fi], e ? "moonwalk" : "backprop", differ, W * B);
                if (e) vijp_grads_clear(&g);
            }
            vijp_grads_clear(&ref);
            vijp_mat_clear(&X), vijp_mat_clear(&T), vijp_mat_clear(&V), vijp_mat_clear(&th);
            vijp_net_free(&net);
        }
}
END_TEST

/* Engine lists as every command takes them: names in the order given,
 * "all" in vijp_engine_kind's order, and each malformed list refused with
 * what is wrong in it. */
START_TEST(engine_lists_parse)
{
    vijp_engine_kind e[VIJP_ENGINE_COUNT];
    size_t n = 99;
    vijp_error err = {0};
    ck_assert(!vijp_engine_parse_list("reversible,moonwalk", e, &n, &err));
    ck_assert(n == 2 && e[0] == VIJP_ENGINE_REVERSIBLE && e[1] == VIJP_ENGINE_MOONWALK);
    ck_assert(!vijp_engine_parse_list("all", e, &n, &err) && n == VIJP_ENGINE_COUNT);
    for (size_t k = 0; k < n; k++) ck_assert(e[k] == (vijp_engine_kind)k);
    static const struct {
        const char *list, *msg;
    } bad[] = {{"", "empty item"}, {"moonwalk,", "empty item"}, {",moonwalk", "empty item"},
               {"moonwalk,,checkpoint", "empty item"}, {"moonwalk,moonwalk", "given twice"}, {"forward", "unknown engine"},
               {"all,moonwalk", "unknown engine"}, {"backprop,moonwalk,pure-forward,reversible,checkpoint,backprop", "given twice"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        err.msg[0] = 0;
        ck_assert_int_eq(vijp_engine_parse_list(bad[k].list, e, &n, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, bad[k].msg), "'%s': %s", bad[k].list, err.msg);
    }
}
END_TEST

/* θ in double, X and T in mpfr:P (the drift memo's copy of a problem
 * whose values are doubles, src/drift/memo.c): admitted at any P
 * (engine.c), and every engine's gradients equal, bit for bit, those with
 * θ in MPFR at 53 bits holding the same values, whatever the run fails
 * with (a vijp that lost rank, an engine the net does not suit) the same.
 * At 64 bits with exact dots (dense's products on θ's doubles: layer/
 * emu_native.h's mp_*) and at 16 without (θ through the MPFR twin). */
START_TEST(double_theta_in_mpfr)
{
    problem p;
    problem_init(&p, (size_t)_i, "double");
    vijp_format F53, F[2];
    ck_assert(!vijp_format_mpfr(&F53, 53, NULL) && !vijp_format_mpfr(&F[0], 64, NULL) &&
              !vijp_format_mpfr(&F[1], 16, NULL));
    F[0].exact_dots = 1;
    vijp_mat th53[DEPTH];
    for (size_t i = 0; i < DEPTH; i++)
        vijp_mat_init(&th53[i], p.theta[i].rows, 1, &F53), vijp_mat_convert(&th53[i], &p.theta[i]); /* exact */
    for (int k = 0; k < 2; k++) {
        vijp_mat X, T;
        vijp_mat_init(&X, p.X.rows, BATCH, &F[k]), vijp_mat_convert(&X, &p.X);
        vijp_mat_init(&T, p.T.rows, BATCH, &F[k]), vijp_mat_convert(&T, &p.T);
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) {
            vijp_grads a, b;
            vijp_error ea = {0}, eb = {0};
            int ra = vijp_engine_run((vijp_engine_kind)e, &p.net, p.theta, &X, &T, &a, &ea);
            int rb = vijp_engine_run((vijp_engine_kind)e, &p.net, th53, &X, &T, &b, &eb);
            ck_assert_msg(ra == rb && !strcmp(ea.msg, eb.msg), "%s %s %s: %d '%s' vs %d '%s'", nets[_i].spec,
                          F[k].name, vijp_engine_name((vijp_engine_kind)e), ra, ea.msg, rb, eb.msg);
            if (ra && ra != VIJP_ESINGULAR) continue; /* failed alike, out left empty */
            int same = a.rebuilt == b.rebuilt && same_values(&a.grad_x, &b.grad_x);
            for (size_t i = 0; same && i < DEPTH; i++)
                same = same_values(&a.g[i], &b.g[i]) && same_values(&a.grad_theta[i], &b.grad_theta[i]);
            ck_assert_msg(same, "%s %s %s: θ in double gives other gradients", nets[_i].spec, F[k].name,
                          vijp_engine_name((vijp_engine_kind)e));
            vijp_grads_clear(&a), vijp_grads_clear(&b);
        }
        vijp_mat_clear(&X), vijp_mat_clear(&T);
    }
    for (size_t i = 0; i < DEPTH; i++) vijp_mat_clear(&th53[i]);
    problem_clear(&p);
}
END_TEST

/* The mixes still refused: θ in double for an emulated run (its operators
 * take θ on its own grid), θ in MPFR for a double run. */
START_TEST(theta_format_refused)
{
    static const char *const fmts[] = {"binary32", "bfloat16+binary32"};
    problem d;
    problem_init(&d, 0, "double");
    for (int k = 0; k < 2; k++) {
        problem p;
        problem_init(&p, 0, fmts[k]);
        vijp_grads g;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &p.net, d.theta, &p.X, &p.T, &g, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, "parameters of layer 1 are in double, the input in"), "%s", err.msg);
        problem_clear(&p);
    }
    problem m;
    problem_init(&m, 0, "mpfr:53");
    vijp_grads g;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &d.net, m.theta, &d.X, &d.T, &g, &err), VIJP_EINVAL);
    ck_assert(strstr(err.msg, "are in mpfr:53, the input in double"));
    problem_clear(&m);
    /* three mixed formats of one kind and accumulation precision (24 bits):
     * told apart by their storage, for θ and for the loss data */
    problem b, h, e;
    problem_init(&b, 0, "bfloat16+binary32"), problem_init(&h, 0, "binary16+binary32"), problem_init(&e, 0, "e4m3+binary32");
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &b.net, e.theta, &b.X, &b.T, &g, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "are in e4m3+binary32, the input in bfloat16+binary32"), "%s", err.msg);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_MOONWALK, &b.net, b.theta, &b.X, &h.T, &g, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "different formats (bfloat16+binary32, binary16+binary32)"), "%s", err.msg);
    problem_clear(&b), problem_clear(&h), problem_clear(&e), problem_clear(&d);
}
END_TEST

/* Misuse of the API is refused, not run: vijp_net_init on a net without
 * parameter arrays (a template: it crashed in the dense layer's init), an
 * initialiser kind out of range (it ran as orthogonal), a scaled gain of
 * NaN (it filled θ with NaN); vijp_engine_name out of range (it read past
 * its table). */
START_TEST(api_misuse_refused)
{
    vijp_net tmpl, net;
    vijp_error err = {0};
    ck_assert(!vijp_net_template(&tmpl, "dense:4,tanh", 2, 4, &err));
    ck_assert_int_eq(vijp_net_init(&tmpl, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 1, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "no parameter array"), "%s", err.msg);
    vijp_net_copy(&net, &tmpl);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 1, &err));
    ck_assert_int_eq(vijp_net_init(&net, (vijp_init){.kind = (vijp_init_kind)77, .gain = 1}, 1, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_SCALED, .gain = NAN}, 1, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "gain"), "%s", err.msg);
    for (size_t k = 0; k < 4 * 4 + 4; k++) ck_assert(isfinite(net.theta[0][k])); /* the refused calls left θ alone */
    ck_assert_str_eq(vijp_engine_name(VIJP_ENGINE_COUNT), "unknown");
    ck_assert_str_eq(vijp_engine_name((vijp_engine_kind)-1), "unknown");
    ck_assert_str_eq(vijp_engine_name(VIJP_ENGINE_MOONWALK), "moonwalk");
    vijp_net_free(&net), vijp_net_free(&tmpl);
    /* NULL where a pointer is required: refused with a message */
    vijp_engine_kind e;
    vijp_layer L;
    ck_assert_int_eq(vijp_engine_parse(NULL, &e, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_layer_parse(&L, NULL, 4, &err), VIJP_EINVAL);
    problem p;
    problem_init(&p, 0, "double");
    vijp_grads g;
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &p.net, NULL, &p.X, &p.T, &g, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "theta NULL"), "%s", err.msg);
    /* an empty batch is said as such */
    vijp_mat X0, T0;
    vijp_mat_init(&X0, p.X.rows, 0, p.X.fmt), vijp_mat_init(&T0, p.T.rows, 0, p.T.fmt);
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &p.net, p.theta, &X0, &T0, &g, &err), VIJP_EDIM);
    ck_assert_msg(strstr(err.msg, "batch is empty"), "%s", err.msg);
    vijp_mat_clear(&X0), vijp_mat_clear(&T0);
    problem_clear(&p);
    /* bits needed without asking whether it was extrapolated */
    vijp_xnum curve[2] = {vijp_xnum_of(1e-6), vijp_xnum_of(2e-6)};
    ck_assert(vijp_bits_needed(curve, 2, 24, vijp_xnum_of(1e-3), NULL) > 0);
}
END_TEST

Suite *suite_engines(void)
{
    Suite *s = suite_create("engines");
    TCase *tc = tcase_create("engines");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, agree_at_256_bits, 0, (int)NNETS);
    tcase_add_loop_test(tc, agree_in_double, 0, (int)NNETS);
    tcase_add_test(tc, stored_bytes_hand_counts);
    tcase_add_test(tc, batch_is_sum_of_samples);
    tcase_add_loop_test(tc, stored_by_depth_matches_cut_networks, 0, (int)NNETS);
    tcase_add_loop_test(tc, pure_forward_counts_without_tangents, 0, (int)NNETS);
    tcase_add_test(tc, singular_vijp_keeps_earlier_layers);
    tcase_add_loop_test(tc, checkpoint_is_backprop_exactly, 0, (int)NNETS);
    tcase_add_loop_test(tc, backprop_watch_sees_final_layers, 0, (int)NNETS);
    tcase_add_test(tc, checkpoint_segments);
    tcase_add_test(tc, engine_lists_parse);
    tcase_add_test(tc, mixed_cotangents_round_once);
    tcase_add_test(tc, reversible_reconstruction);
    tcase_add_test(tc, reversible_hook_is_the_diagnostic);
    tcase_add_loop_test(tc, layer_done_counts_steps, 0, (int)NNETS);
    tcase_add_loop_test(tc, param_ready_sees_final_layers, 0, (int)NNETS);
    tcase_add_loop_test(tc, profile_engines_any_threads, 0, 3);
    tcase_add_test(tc, backprop_watch_refuses_param_ready);
    tcase_add_loop_test(tc, double_theta_in_mpfr, 0, (int)NNETS);
    tcase_add_test(tc, theta_format_refused);
    tcase_add_test(tc, api_misuse_refused);
    suite_add_tcase(s, tc);
    return s;
}

/* Threads inside a curve (a format's threads, src/base/fork.h): the claim is
 * that the number of threads changes time only, so every result on 2, 3 and
 * 5 threads must equal, bit for bit and sign of zero, the one on the calling
 * thread alone, which the other suites hold to the independent oracles
 * (t-emu-lanes, t-emu-dense: the emulated products and solve against
 * oracles/; t-ddref: the reference's products against exact sums).  No
 * tolerance.  Checked here:
 *   - the helper itself: every index in exactly one range, ranges in order;
 *   - the emulated dense products (forward, jvp, vjp, parameter gradient) in
 *     bfloat16+binary32, binary32 and e4m3+binary32, and the LU solve;
 *   - the reference's products in mpfr:64, mpfr:106 and mpfr:128 with exact
 *     dots, with the split of their inputs into double parts;
 *   - the packing of the reference's batch parameter gradient;
 *   - the elementwise activations' forward pass with f′ on the MPFR route
 *     (the reference's), a range of the batch's columns per thread;
 *   - the smooth activations' forward, jvp and vijp emulated on doubles,
 *     a range of the units per thread, and where the vijp stops;
 *   - a one-curve drift study: --jobs 1 and --jobs 2 write the same curves.
 * Splitting only happens above a work threshold (VIJP_FORK_MIN_WORK,
 * VIJP_TEAM_MIN_WORK), so the shapes are chosen above it (each case asserts
 * so with the call site's work formula) and around the split's edges: one
 * row, fewer row blocks or columns than threads, odd sizes.  Outputs start as
 * NaN, so a range that skips an output shows. */
#include "fixtures/testutil.h"
#include "fixtures/clirun.h"
#include "vijp/arith.h"
#include "base/fork.h"
#include "emu/activations.h"
#include "emu/dense.h"
#include "emu/dense_ref.h"
#include "emu/lanes.h"
#include "drift/outer.h"
#include "format/packed.h"
#include "kernels/kernels.h"
#include "layer/route.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int thread_counts[] = {2, 3, 5};
#define N_COUNTS (sizeof thread_counts / sizeof *thread_counts)

/* ---- the helper ---- */

typedef struct {
    size_t n, parts;
    int *seen;          /* how many ranges held each index */
    size_t *first_of;   /* begin of each part */
    int bad;            /* a range out of bounds (asserted on the test's thread) */
    pthread_mutex_t lock;
} coverage;

static void mark(void *ctx, size_t part, size_t begin, size_t end)
{
    coverage *c = ctx;
    pthread_mutex_lock(&c->lock);
    if (part >= c->parts || begin > end || end > c->n) c->bad = 1;
    else c->first_of[part] = begin;
    for (size_t i = begin; i < end && i < c->n; i++) c->seen[i]++;
    pthread_mutex_unlock(&c->lock);
}

/* vijp_team_run over [0, n) in parts parts (t NULL: vijp_fork on parts
 * threads, far above the work threshold): each index once, part k starting
 * at vijp_fork_begin. */
static void check_cover(vijp_team *t, size_t n, size_t parts)
{
    coverage c = {n, parts, calloc(n + 1, sizeof(int)), calloc(parts, sizeof(size_t)), 0, PTHREAD_MUTEX_INITIALIZER};
    ck_assert(c.seen && c.first_of);
    if (t) vijp_team_run(t, n, parts, mark, &c);
    else vijp_fork((int)parts, n, 1e15, mark, &c);
    ck_assert_msg(!c.bad, "n %zu, %zu parts: a range out of bounds", n, parts);
    for (size_t i = 0; i < n; i++) ck_assert_msg(c.seen[i] == 1, "n %zu, %zu parts: index %zu in %d ranges", n, parts, i, c.seen[i]);
    size_t used = parts < n ? parts : n;
    for (size_t k = 1; k < used; k++) ck_assert_int_eq(c.first_of[k], vijp_fork_begin(n, used, k));
    free(c.seen), free(c.first_of);
}

START_TEST(every_index_once)
{
    static const size_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 31, 1000, 1001};
    for (size_t t = 1; t <= 6; t++) {
        vijp_team *team = vijp_team_new((int)t);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            for (size_t parts = 1; parts <= t + 2; parts++) check_cover(team, sizes[s], parts); /* more parts than threads too */
            check_cover(NULL, sizes[s], t);
        }
        vijp_team_free(team);
    }
    /* the work threshold: one part below it, as many as threads far above, none past n */
    ck_assert_uint_eq(vijp_fork_parts(4, 100, VIJP_FORK_MIN_WORK / 2, VIJP_FORK_MIN_WORK), 1);
    ck_assert_uint_eq(vijp_fork_parts(4, 100, 2.5 * VIJP_FORK_MIN_WORK, VIJP_FORK_MIN_WORK), 2);
    ck_assert_uint_eq(vijp_fork_parts(4, 100, 1e12, VIJP_FORK_MIN_WORK), 4);
    ck_assert_uint_eq(vijp_fork_parts(4, 3, 1e12, VIJP_FORK_MIN_WORK), 3);
    ck_assert_uint_eq(vijp_fork_parts(0, 100, 1e12, VIJP_FORK_MIN_WORK), 1);
    ck_assert_uint_eq(vijp_fork_parts(100000, 1000, 1e12, VIJP_FORK_MIN_WORK), VIJP_FORK_MAX_THREADS);
}
END_TEST

/* ---- comparing results ---- */

static int same_bits(mpfr_srcptr a, mpfr_srcptr b)
{
    if (mpfr_nan_p(a) || mpfr_nan_p(b)) return mpfr_nan_p(a) && mpfr_nan_p(b);
    return mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b);
}

static void expect_same(mpfr_t *one, mpfr_t *many, size_t count, const char *what, const char *fmt, int threads)
{
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(same_bits(one[i], many[i]), "%s in %s: entry %zu differs on %d threads from 1 (%a vs %a)", what,
                      fmt, i, threads, mpfr_get_d(one[i], MPFR_RNDN), mpfr_get_d(many[i], MPFR_RNDN));
}

/* count values of f: a normal draw, stored (on f's storage grid) */
static mpfr_t *draw(vijp_rng *r, const vijp_format *f, size_t count, double scale)
{
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) {
        mpfr_set_d(v[i], scale * vijp_rng_normal(r), MPFR_RNDN);
        vo_store(v[i], v[i], f);
    }
    return v;
}

/* count values of f, NaN: an output no range writes shows */
static mpfr_t *unwritten(size_t count, const vijp_format *f)
{
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) mpfr_set_nan(v[i]);
    return v;
}

/* ---- the emulated products ---- */

enum { FORWARD, JVP, VJP, PARAM, N_PRODUCTS };
static const char *const product_names[] = {"forward", "jvp", "vjp", "vjp_param"};

/* products()'s work and row blocks in src/emu/dense.c, for rows × ncols
 * outputs of K terms: the test asserts its shapes split. */
static size_t product_parts(const vijp_format *f, int threads, size_t rows, size_t ncols, size_t K)
{
    vijp_emu_lanes_kind kind = vijp_emu_lanes_kind_of(f);
    size_t pad = kind == VIJP_EMU_FUSED_F || kind == VIJP_EMU_SPLIT_F ? VIJP_EMU_PAD_F : VIJP_EMU_PAD_D;
    size_t lda = (rows + pad - 1) / pad * pad;
    double work = (double)lda * (double)ncols * (double)K + 64.0 * (double)rows * (double)(K + ncols);
    return vijp_fork_parts(threads, lda / pad, work, VIJP_FORK_MIN_WORK);
}

static void run_product(int p, const vijp_layer *L, mpfr_t *th, mpfr_t *X, mpfr_t *Gy, size_t B, mpfr_t *out,
                        const vijp_format *f)
{
    if (p == FORWARD) vijp_emu_dense_forward(L, th, X, B, out, f);
    else if (p == JVP) vijp_emu_dense_jvp(L, th, NULL, B, X, out, f);
    else if (p == VJP) vijp_emu_dense_vjp(L, th, NULL, B, Gy, out, f);
    else vijp_emu_dense_vjp_param(L, th, X, B, Gy, out, f);
}

/* Every product of a dense:m×n layer at batch B, on 1 thread and on each
 * count; *split counts the products that ran in more than one part. */
static void emu_shape(vijp_rng *r, const char *fmt, size_t m, size_t n, size_t B, int *split)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse(fmt, &f, NULL), 0);
    ck_assert(vijp_emu_lanes_kind_of(&f) != VIJP_EMU_LANES_NONE);
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
    vijp_layer L;
    ck_assert_int_eq(vijp_layer_parse(&L, spec, 0, NULL), 0);
    size_t P = m * n + m;
    mpfr_t *th = draw(r, &f, P, 1 / sqrt((double)n)), *X = draw(r, &f, n * B, 1), *Gy = draw(r, &f, m * B, 1);
    for (int p = 0; p < N_PRODUCTS; p++) {
        size_t count = p == VJP ? n * B : p == PARAM ? P : m * B; /* vjp_param: the bias gradient too */
        size_t rows = p == VJP ? n : m, ncols = p == PARAM ? n : B, K = p == VJP ? m : p == PARAM ? B : n;
        f.threads = 1;
        mpfr_t *one = unwritten(count, &f);
        run_product(p, &L, th, X, Gy, B, one, &f);
        for (size_t c = 0; c < N_COUNTS; c++) {
            f.threads = thread_counts[c];
            *split += product_parts(&f, f.threads, rows, ncols, K) > 1;
            mpfr_t *many = unwritten(count, &f);
            run_product(p, &L, th, X, Gy, B, many, &f);
            char what[96];
            snprintf(what, sizeof what, "%s, dense %zux%zu, batch %zu", product_names[p], m, n, B);
            expect_same(one, many, count, what, fmt, f.threads);
            vo_vec_free(many, count);
        }
        vo_vec_free(one, count);
    }
    vo_vec_free(th, P), vo_vec_free(X, n * B), vo_vec_free(Gy, m * B);
    vijp_layer_clear(&L);
}

/* (m, n, B): one output row (forward and the parameter gradient of m = 1:
 * one row block, nothing to split); 33 rows, two float blocks and three
 * double ones, fewer than the threads; 161 × 97 × 65 and 1 × 1031 × 50:
 * odd sizes, enough blocks for every count. */
START_TEST(emu_products_same_bits)
{
    static const char *const formats[] = {"bfloat16+binary32", "binary32", "e4m3+binary32"};
    static const size_t shapes[][3] = {{33, 1201, 40}, {161, 97, 65}, {1, 1031, 50}};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 7);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        int split = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            emu_shape(&r, formats[fi], shapes[s][0], shapes[s][1], shapes[s][2], &split);
        /* 3 shapes × 4 products × 3 counts; unsplit: forward, jvp, vjp_param of m = 1 */
        ck_assert_msg(split >= 24, "%s: only %d products split: the shapes fell below the threshold", formats[fi], split);
    }
}
END_TEST

/* The elimination (vijp_emu_ge_solve_d) on doubles: a random system with a
 * dominant diagonal, n × n with B right-hand sides (many: the work per
 * column that clears VIJP_TEAM_MIN_WORK at a small cost): n = 3 (two rows
 * below the first pivot, fewer than the threads), n = 7 (5 parts, then 4,
 * then fewer as the rows below run out), on bfloat16's and binary32's
 * grids; n = 300 (panels of VIJP_EMU_GE_PANEL columns whose steps on the
 * columns past them split by rows too). */
START_TEST(lu_solve_same_bits)
{
    static const size_t shapes[][2] = {{3, 70001}, {7, 55001}, {300, 1}};
    static const vijp_emu_grid grids[] = {{8, -132, 128}, {24, -148, 128}, {24, -148, 128}};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 8);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t n = shapes[s][0], B = shapes[s][1], below = n - 1;
        vijp_emu_grid g = grids[s];
        if (n <= VIJP_EMU_GE_PANEL) /* one panel: its first step splits */
            ck_assert(vijp_fork_parts(5, below, (double)below * (double)(below + B), VIJP_TEAM_MIN_WORK) >= 2);
        else { /* the first panel's steps on the columns past it split */
            double rest = (double)(n - VIJP_EMU_GE_PANEL);
            ck_assert(vijp_fork_parts(5, n - VIJP_EMU_GE_PANEL, rest * VIJP_EMU_GE_PANEL * rest, VIJP_TEAM_MIN_WORK) >= 2);
        }
        double *A = malloc(n * n * sizeof *A), *rhs = malloc(n * B * sizeof *rhs);
        double *A1 = malloc(n * n * sizeof *A1), *x1 = malloc(n * B * sizeof *x1);
        double *Ak = malloc(n * n * sizeof *Ak), *xk = malloc(n * B * sizeof *xk);
        ck_assert(A && rhs && A1 && x1 && Ak && xk);
        for (size_t i = 0; i < n * n; i++) A[i] = vijp_emu_round(vijp_rng_normal(&r) + (i % (n + 1) == 0 ? 4.0 : 0), g);
        for (size_t i = 0; i < n * B; i++) rhs[i] = vijp_emu_round(vijp_rng_normal(&r), g);
        memcpy(A1, A, n * n * sizeof *A), memcpy(x1, rhs, n * B * sizeof *rhs);
        ck_assert_int_eq(vijp_emu_ge_solve_d(n, A1, x1, B, g, 1), 0);
        for (size_t c = 0; c < N_COUNTS; c++) {
            memcpy(Ak, A, n * n * sizeof *A), memcpy(xk, rhs, n * B * sizeof *rhs);
            ck_assert_int_eq(vijp_emu_ge_solve_d(n, Ak, xk, B, g, thread_counts[c]), 0);
            ck_assert_msg(!memcmp(A1, Ak, n * n * sizeof *A) && !memcmp(x1, xk, n * B * sizeof *xk),
                          "LU n %zu, B %zu, grid p %d: %d threads differ from 1", n, B, g.p, thread_counts[c]);
        }
        free(A), free(rhs), free(A1), free(x1), free(Ak), free(xk);
    }
}
END_TEST

/* ---- the reference's products ---- */

/* count P-bit values: a double and lower parts down to P bits, so that the
 * reference's double-double (P = 64), triple-double (106) and three-part
 * (128: the four-level products) inputs are full. */
static mpfr_t *draw_wide(vijp_rng *r, long P, size_t count)
{
    mpfr_t *v = malloc(count * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < count; i++) {
        mpfr_init2(v[i], P);
        mpfr_set_d(v[i], vijp_rng_normal(r), MPFR_RNDN);
        for (long e = 53; e < P; e += 53) mpfr_add_d(v[i], v[i], ldexp(vijp_rng_uniform(r), (int)-e), MPFR_RNDN);
    }
    return v;
}

static void free_wide(mpfr_t *v, size_t count)
{
    for (size_t i = 0; i < count; i++) mpfr_clear(v[i]);
    free(v);
}

/* dense_ref.c's columns and work for op: the test asserts its shapes split. */
static size_t ref_parts(int op, int threads, size_t m, size_t n, size_t B, long P)
{
    size_t parts = P > 106 ? 3 : 2; /* the parameter gradient's terms: each part of g times x */
    size_t rows = op == 2 ? n : m, cols = op == 3 ? n : B, k = op == 3 ? parts * B : op == 2 ? m : n;
    return vijp_fork_parts(threads, cols, (double)rows * (double)cols * (8 * (double)k + 256), VIJP_FORK_MIN_WORK);
}

/* dense_ref.c's load: the inputs it splits into double parts, over ranges
 * of their values. */
static size_t load_parts(int op, int threads, size_t m, size_t n, size_t B)
{
    size_t values = op == 3 ? (m + n) * B : op == 2 ? m * B : n * B;
    return vijp_fork_parts(threads, values, VIJP_DDREF_SPLIT_WORK * (double)values, VIJP_FORK_MIN_WORK);
}

/* The runs of reference_products_same_bits whose products, whose input
 * loading, whose copy of Wᵀ split. */
typedef struct {
    int products, loads, transposes;
} ref_splits;

/* Each op of a dense:m×n layer (θ 53-bit, as the drift memo holds it) at
 * P bits, batch B, on 1 thread and on each count, counted into *splits.
 * inexact: the last input the op loads (X's, or Gy's for the vjp) is
 * 2^-1020 + 2^-1080, whose second part lies below double's subnormals, so
 * that the whole call must fall back to the oracle whichever range meets
 * it. */
static void ref_shape(vijp_rng *r, long P, size_t m, size_t n, size_t B, int inexact, ref_splits *splits)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_mpfr(&f, P, NULL), 0);
    f.exact_dots = 1;
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
    vijp_layer L;
    ck_assert_int_eq(vijp_layer_parse(&L, spec, 0, NULL), 0);
    size_t Pn = m * n + m;
    mpfr_t *th = draw_wide(r, 53, Pn), *X = draw_wide(r, P, n * B), *Gy = draw_wide(r, P, m * B);
    double copy = VIJP_DDREF_TRANSPOSE_WORK * (double)(m * n); /* the vjp's Wᵀ, by ranges of W's rows */
    for (int op = 0; op < 4; op++) {
        size_t count = op == 2 ? n * B : op == 3 ? Pn : m * B;
        mpfr_t *in = op <= 1 ? X : Gy, *last = op == 2 ? &Gy[m * B - 1] : &X[n * B - 1], keep;
        mpfr_init2(keep, P);
        if (inexact) {
            mpfr_set(keep, *last, MPFR_RNDN);
            mpfr_set_ui_2exp(*last, (1UL << 60) + 1, -1080, MPFR_RNDN); /* exact at 61 bits and more */
        }
        vijp_ddref_stats st1 = {.any_size = 1}; /* the fast path at every size */
        f.threads = 1;
        mpfr_t *one = unwritten(count, &f);
        vijp_ref_dense_op(op, &L, th, X, B, in, one, &f, &st1);
        ck_assert_int_eq(st1.whole_oracle, inexact);
        for (size_t c = 0; c < N_COUNTS; c++) {
            f.threads = thread_counts[c];
            splits->products += ref_parts(op, f.threads, m, n, B, P) > 1;
            splits->loads += load_parts(op, f.threads, m, n, B) > 1;
            splits->transposes += op == 2 && vijp_fork_parts(f.threads, m, copy, VIJP_FORK_MIN_WORK) > 1;
            vijp_ddref_stats st = {.any_size = 1};
            mpfr_t *many = unwritten(count, &f);
            vijp_ref_dense_op(op, &L, th, X, B, in, many, &f, &st);
            char what[96];
            snprintf(what, sizeof what, "reference op %d, dense %zux%zu, batch %zu%s", op, m, n, B,
                     inexact ? ", an inexact input" : "");
            expect_same(one, many, count, what, f.name, f.threads);
            ck_assert_int_eq(st.whole_oracle, st1.whole_oracle);
            ck_assert_uint_eq(st.outputs, st1.outputs);
            ck_assert_uint_eq(st.fallbacks, st1.fallbacks);
            vo_vec_free(many, count);
        }
        vo_vec_free(one, count);
        if (inexact) mpfr_set(*last, keep, MPFR_RNDN);
        mpfr_clear(keep);
    }
    free_wide(th, Pn), free_wide(X, n * B), free_wide(Gy, m * B);
    vijp_layer_clear(&L);
}

/* (m, n, B), the columns being what splits (the batch, or W's columns for
 * the parameter gradient): 257 × 263 × 3, whose Wᵀ splits; 17, 3 (fewer
 * than the threads) and 9 (too little work for any but the gradient); odd
 * sizes, the inputs few.  Then
 * 29 × 1201 × 11 and 1201 × 29 × 11, whose X (for the vjp, Gy) of 13211
 * values splits in loading, with and without an inexact input. */
START_TEST(reference_products_same_bits)
{
    static const size_t shapes[][3] = {{257, 263, 3},  {203, 67, 17},  {137, 301, 3},
                                       {61, 103, 9}, {29, 1201, 11}, {1201, 29, 11}};
    static const long precs[] = {64, 106, 128};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 9);
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
        ref_splits n = {0, 0, 0};
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int inexact = 0; inexact <= (s >= 4); inexact++)
                ref_shape(&r, precs[pi], shapes[s][0], shapes[s][1], shapes[s][2], inexact, &n);
        ck_assert_msg(n.products >= 18, "mpfr:%ld: only %d products split: the shapes fell below the threshold",
                      precs[pi], n.products);
        /* the last two shapes, twice each: forward, jvp and the gradient in the first, vjp and gradient in the second */
        ck_assert_msg(n.loads == 2 * (3 + 2) * 3, "mpfr:%ld: %d loads split, not 30", precs[pi], n.loads);
        ck_assert_msg(n.transposes == 3, "mpfr:%ld: %d copies of Wᵀ split, not 3", precs[pi], n.transposes);
    }
}
END_TEST

/* The drift reference's batch parameter gradient packed at Q
 * (drift/outer.c: each block's values over ranges, DRIFT_OUTER_PACK_WORK
 * each): dense 97 × 131 at batch 16, one block of all 131 columns (12707
 * values, three parts) and blocks of 40 (3880: one), at two levels.  Row 0
 * of the cotangents at 2^-17000, so that row 0 of ∂W (values 97 apart:
 * many in every range) lies below the packed heads' exponents (down to
 * −16384) and needs the block's side array, which the first range to meet
 * such a value makes while the others may be meeting theirs; ∂W(0, 0) at
 * 2^-29000 too (row 0 of the inputs at 2^-12000). */
START_TEST(reference_packing_same_bits)
{
    static const long levels[][2] = {{106, 106}, {212, 170}};
    static const size_t blocks[] = {131, 40};
    enum { M = 97, N = 131, B = 16 };
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 17);
    vijp_layer L;
    ck_assert_int_eq(vijp_layer_parse(&L, "dense:97x131", N, NULL), 0);
    int split = 0;
    for (size_t li = 0; li < sizeof levels / sizeof *levels; li++) {
        long P = levels[li][0], Q = levels[li][1];
        vijp_format fP, fQ;
        ck_assert(!vijp_format_mpfr(&fP, P, NULL) && !vijp_format_mpfr(&fQ, Q, NULL));
        fP.exact_dots = 1;
        mpfr_t *hx = draw_wide(&r, P, N * B), *gx = draw_wide(&r, P, M * B);
        vijp_mat h, g;
        vijp_mat_init(&h, N, B, &fP), vijp_mat_init(&g, M, B, &fP);
        for (size_t e = 0; e < N * B; e++) mpfr_set(h.m[e], hx[e], MPFR_RNDN);
        for (size_t e = 0; e < M * B; e++) mpfr_set(g.m[e], gx[e], MPFR_RNDN);
        for (size_t b = 0; b < B; b++)
            mpfr_mul_2si(h.m[b * N], h.m[b * N], -12000, MPFR_RNDN), mpfr_mul_2si(g.m[b * M], g.m[b * M], -17000, MPFR_RNDN);
        for (size_t bk = 0; bk < sizeof blocks / sizeof *blocks; bk++) {
            vijp_mat one;
            fP.threads = 1;
            ck_assert(drift_outer_param_blocks(&L, &h, &g, &fP, &fQ, blocks[bk], &one));
            ck_assert_msg(one.packed->wide, "no exponent needed the side array: the case is not there");
            for (size_t c = 0; c < N_COUNTS; c++) {
                fP.threads = thread_counts[c];
                double values = (double)(M * blocks[bk]);
                split += vijp_fork_parts(fP.threads, M * blocks[bk], DRIFT_OUTER_PACK_WORK * values, VIJP_FORK_MIN_WORK) > 1;
                vijp_mat many;
                ck_assert(drift_outer_param_blocks(&L, &h, &g, &fP, &fQ, blocks[bk], &many));
                for (size_t e = 0; e < M * N + M; e++) {
                    mpfr_t a, b;
                    vijp_packed_view(one.packed, e, a), vijp_packed_view(many.packed, e, b);
                    ck_assert_msg(same_bits(a, b) && vijp_packed_kind(one.packed, e) == vijp_packed_kind(many.packed, e),
                                  "%ld -> %ld, blocks of %zu: value %zu differs on %d threads from 1", P, Q,
                                  blocks[bk], e, fP.threads);
                }
                vijp_mat_clear(&many);
            }
            vijp_mat_clear(&one);
        }
        vijp_mat_clear(&h), vijp_mat_clear(&g);
        free_wide(hx, N * B), free_wide(gx, M * B);
    }
    vijp_layer_clear(&L);
    ck_assert_msg(split == 2 * 3, "%d packings split, not 6: the shapes fell below the threshold", split);
}
END_TEST

/* ---- the activations on the MPFR route ---- */

/* Y = f(X) and D = f′(X) of elementwise activations in mpfr:P (the
 * reference's route, vijp_layer_forward_deriv): 160 units by 7 columns
 * clear the threshold for five parts (4096 units of work each, layer.c),
 * 2 columns for two; 1 column never splits. */
START_TEST(activations_same_bits)
{
    static const char *const specs[] = {"gelu", "elu:0.7", "softplus", "silu", "softsign"};
    static const size_t batches[] = {7, 2, 1};
    const size_t in = 160;
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 11);
    int split = 0;
    for (long P = 64; P <= 256; P *= 4)
        for (size_t si = 0; si < sizeof specs / sizeof *specs; si++)
            for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
                size_t B = batches[bi], n = in * B;
                vijp_format f;
                ck_assert_int_eq(vijp_format_mpfr(&f, P, NULL), 0);
                vijp_layer L;
                ck_assert_int_eq(vijp_layer_parse(&L, specs[si], in, NULL), 0);
                vijp_mat X, Y1, D1;
                vijp_mat_init(&X, in, B, &f), vijp_mat_init(&Y1, in, B, &f), vijp_mat_init(&D1, in, B, &f);
                for (size_t i = 0; i < n; i++) mpfr_set_d(X.m[i], 3 * vijp_rng_normal(&r), MPFR_RNDN);
                f.threads = 1;
                vijp_error err = {0};
                ck_assert_int_eq(vijp_layer_forward_deriv(&L, NULL, &X, &Y1, &D1, &err), 0);
                for (size_t c = 0; c < N_COUNTS; c++) {
                    f.threads = thread_counts[c];
                    split += B > 1 && vijp_fork_parts(f.threads, B, 4096.0 * (double)n, VIJP_FORK_MIN_WORK) > 1;
                    vijp_mat Y, D;
                    vijp_mat_init(&Y, in, B, &f), vijp_mat_init(&D, in, B, &f);
                    for (size_t i = 0; i < n; i++) mpfr_set_nan(Y.m[i]), mpfr_set_nan(D.m[i]);
                    ck_assert_int_eq(vijp_layer_forward_deriv(&L, NULL, &X, &Y, &D, &err), 0);
                    char what[64];
                    snprintf(what, sizeof what, "%s forward, batch %zu", specs[si], B);
                    expect_same(Y1.m, Y.m, n, what, f.name, f.threads);
                    snprintf(what, sizeof what, "%s derivative, batch %zu", specs[si], B);
                    expect_same(D1.m, D.m, n, what, f.name, f.threads);
                    vijp_mat_clear(&Y), vijp_mat_clear(&D);
                }
                vijp_mat_clear(&X), vijp_mat_clear(&Y1), vijp_mat_clear(&D1);
                vijp_layer_clear(&L);
            }
    ck_assert_msg(split == 60, "%d runs split, not 60: the shapes fell below the threshold", split);
}
END_TEST

/* ---- the emulated activations on doubles ---- */

/* Every smooth activation's forward, jvp and vijp on double-held operands
 * (src/emu/activations.c: ranges of the units, VIJP_EMU_ACT_UNIT_WORK each)
 * in three emulated formats: 160 × 160 units (five parts), 8195 × 1 (two:
 * a layer of that many units splits at batch 1 too) and 160 × 3 (none).
 * Inputs on the storage grid, with ±0: 3·N(0, 1) for f and the jvp;
 * |N(0, 1)| for the vijp, where every f′ is positive and far from rounding
 * to 0 even in binary16 (tanh′(4.5) is 5e-4; it must succeed, so that its
 * outputs are compared), and in its second run a unit where f′ rounds to 0 (x = −200;
 * +200 for tanh) first in the last range: the vijp must say singular on
 * every count exactly where the serial loop does. */
static double *act_inputs(vijp_rng *r, const vijp_format *f, size_t n, int magnitudes)
{
    double *x = vijp_alloc_array(n, sizeof *x);
    vijp_mat m;
    vijp_mat_init(&m, n, 1, f);
    for (size_t i = 0; i < n; i++) x[i] = magnitudes ? fabs(vijp_rng_normal(r)) : 3 * vijp_rng_normal(r);
    x[0] = 0, x[n / 2] = -0.0;
    vijp_mat_set_d(&m, x);
    for (size_t i = 0; i < n; i++) x[i] = vijp_mat_get_d(&m, i);
    vijp_mat_clear(&m);
    return x;
}

static int act_call(int op, int kind, const vijp_layer *L, const double *x, const double *u, size_t B, double *out,
                    const vijp_format *f)
{
    size_t n = L->in * B;
    for (size_t i = 0; i < n; i++) out[i] = NAN;
    if (op == 0) vijp_emu_act_forward_d(kind, L, x, B, out, f);
    else if (op == 1) vijp_emu_act_jvp_d(kind, L, x, B, u, out, f);
    else return vijp_emu_act_vijp_d(kind, L, x, B, u, out, f);
    return 0;
}

START_TEST(emulated_activations_same_bits)
{
    static const char *const formats[] = {"bfloat16+binary32", "binary16", "e4m3+binary32"};
    static const char *const ops[] = {"forward", "jvp", "vijp"};
    static const size_t shapes[][2] = {{160, 160}, {8195, 1}, {160, 3}};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 13);
    int split = 0;
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            vijp_format f;
            ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
            size_t in = shapes[s][0], B = shapes[s][1], n = in * B;
            double *xs = act_inputs(&r, &f, n, 0), *xa = act_inputs(&r, &f, n, 1), *u = act_inputs(&r, &f, n, 0);
            double *one = vijp_alloc_array(n, sizeof *one), *many = vijp_alloc_array(n, sizeof *many);
            for (int kind = 0; kind < VIJP_KACT_COUNT; kind++) {
                vijp_layer L;
                ck_assert_int_eq(vijp_layer_parse(&L, vijp_kact_names[kind], in, NULL), 0);
                for (int op = 0; op < 4; op++) {
                    int o = op < 3 ? op : 2; /* op 3: the vijp again, with a unit whose f′ is 0 */
                    double *x = o == 2 ? xa : xs, work = VIJP_EMU_ACT_UNIT_WORK * (double)n, keep = 0;
                    size_t parts = vijp_fork_parts(5, n, work, VIJP_FORK_MIN_WORK);
                    size_t at = vijp_fork_begin(n, parts, parts - 1); /* first in the last range */
                    if (op == 3) {
                        keep = x[at], x[at] = kind == VIJP_KACT_TANH ? 200 : -200;
                        double d;
                        vijp_emu_act_pair(kind, x[at], &f, NULL, &d);
                        ck_assert_msg(d == 0, "%s %s: f'(%g) = %g, not 0: the stop goes untested",
                                      vijp_kact_names[kind], f.name, x[at], d);
                    }
                    f.threads = 1;
                    int rc1 = act_call(o, kind, &L, x, u, B, one, &f);
                    ck_assert_msg(o != 2 || rc1 == (op == 3 ? VIJP_ESINGULAR : 0), "%s vijp %s %zu x %zu: rc %d",
                                  vijp_kact_names[kind], f.name, in, B, rc1);
                    for (size_t c = 0; c < N_COUNTS; c++) {
                        f.threads = thread_counts[c];
                        split += vijp_fork_parts(f.threads, n, work, VIJP_FORK_MIN_WORK) > 1;
                        int rc = act_call(o, kind, &L, x, u, B, many, &f);
                        ck_assert_msg(rc == rc1, "%s %s %s %zu x %zu: rc %d on %d threads, %d on 1",
                                      vijp_kact_names[kind], ops[o], f.name, in, B, rc, f.threads, rc1);
                        for (size_t i = 0; !rc && i < n; i++)
                            ck_assert_msg(!memcmp(&one[i], &many[i], sizeof one[i]),
                                          "%s %s %s %zu x %zu: unit %zu differs on %d threads (%a vs %a)",
                                          vijp_kact_names[kind], ops[o], f.name, in, B, i, f.threads, one[i], many[i]);
                    }
                    if (op == 3) x[at] = keep;
                }
                vijp_layer_clear(&L);
            }
            free(xs), free(xa), free(u), free(one), free(many);
        }
    /* 3 formats × 2 split shapes × 6 kinds × 4 runs × 3 counts */
    ck_assert_msg(split == 432, "%d runs split, not 432: the shapes fell below the threshold", split);
}
END_TEST

/* ---- a study ---- */

/* A file of the report folder dir, with drift.json's "command" line (which
 * names --jobs) taken out. */
static char *report_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "%s missing", path);
    char *text = slurp_fd(fileno(fp));
    fclose(fp);
    char *cmd = strstr(text, "\"command\":");
    if (cmd) {
        char *eol = strchr(cmd, '\n');
        memmove(cmd, eol ? eol + 1 : cmd + strlen(cmd), strlen(eol ? eol + 1 : cmd + strlen(cmd)) + 1);
    }
    return text;
}

/* One curve wide enough that its products split (dense:128 at batch 16:
 * the emulated forward and gradient products and the 64-bit reference's
 * clear the threshold), run with --jobs 1 and --jobs 2 (its second job
 * inside the curve): the same report files. */
START_TEST(one_curve_study_same_files)
{
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin != NULL, "VIJP_BIN unset");
    char dir[2][512];
    for (int j = 0; j < 2; j++) {
        make_temp_dir(dir[j], sizeof dir[j], "fork");
        char args[1024];
        snprintf(args, sizeof args,
                 "drift --net dense:128,leaky:0.5 --depth 3 --batch 16 --formats bfloat16+binary32 --seeds 1 "
                 "--jobs %d --no-plots -q --out '%s/r'",
                 j + 1, dir[j]);
        run_result res = run_bin(bin, args);
        ck_assert_msg(res.rc == CLI_OK, "drift --jobs %d exited %d: %s", j + 1, res.rc, res.err);
        run_free(&res);
    }
    static const char *const files[] = {"r/drift.csv", "r/curves.csv", "r/summary.csv", "r/memory.csv", "r/drift.json"};
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        char *a = report_file(dir[0], files[k]), *b = report_file(dir[1], files[k]);
        ck_assert_msg(!strcmp(a, b), "%s differs between --jobs 1 and --jobs 2", files[k]);
        free(a), free(b);
    }
    remove_tree(dir[0]), remove_tree(dir[1]);
}
END_TEST

static void add_case(Suite *s, const char *name, const TTest *test)
{
    TCase *t = tcase_create(name);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test);
    suite_add_tcase(s, t);
}

Suite *suite_fork(void)
{
    Suite *s = suite_create("fork");
    add_case(s, "helper", every_index_once);
    add_case(s, "emu", emu_products_same_bits);
    add_case(s, "lu", lu_solve_same_bits);
    add_case(s, "reference", reference_products_same_bits);
    add_case(s, "packing", reference_packing_same_bits);
    add_case(s, "activations", activations_same_bits);
    add_case(s, "emulated activations", emulated_activations_same_bits);
    add_case(s, "study", one_curve_study_same_files);
    return s;
}

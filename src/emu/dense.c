/* The dense layer's MPFR operators in the narrow formats, natively.
 *
 * For the formats vijp_emu_applies accepts, every operation the oracle
 * (oracles/dense.c) performs, rounded to the format by MPFR, has the same
 * result when computed in double and rounded by src/emu/emu.h (the theorem
 * cited there: 53 >= 2p + 2, Figueroa 1995).  So running the oracle's exact
 * sequence of operations — same index order, same pivots, same tests — with
 * emu.h's operations gives the oracle's numbers bit for bit, at a fraction
 * of the cost (one MPFR operation per rounding otherwise).  The operands go
 * in and out by mpfr_get_d and mpfr_set_d, both exact: every value of these
 * formats is a double.  Each function below mirrors the oracle function of
 * the same name; the per-element order of operations is the oracle's, loops
 * over independent outputs may be ordered differently (layouts chosen for
 * contiguous access).  Mixed formats: the oracle computes in the
 * accumulation format and vijp_mat_store (src/layer/layer.c) rounds the results
 * to storage afterwards, for both paths; no storage rounding here.
 *
 * Every other format (mpfr:P, the exact-dots reference) runs the oracle
 * itself.  tests/t-emu-dense.c checks both paths against each other. */
#include "dense.h"
#include "emu.h"
#include "emu/lanes.h"
#include "emu/dense_ref.h"
#include "layer/emu_native.h"
#include "format/mpfr_io.h"
#include "vijp/error.h"
#include "oracles/oracles.h"
#include "base/fork.h"
#include <stdlib.h>
#include <string.h>

/* ---- The products: forward, jvp, vjp, the parameters' gradient ----
 *
 * Each is C = A·B with every entry the oracle's dot product (vo_madd from
 * +0, terms in ascending order), run by a set of lanes.h (one SIMD lane per
 * output row, each doing its own scalar sequence).  A and B are views of the
 * caller's MPFR arrays, read once into the lanes' layout. */

/* Entry (r, c) of a matrix held in an MPFR array, v[r·rs + c·cs], or in
 * doubles (vijp/mat.h: the formats here hold their values so), d[…]. */
typedef struct {
    mpfr_t *v;
    const double *d;
    size_t rs, cs;
} view;

/* Where a product's results go: an MPFR array, or doubles (exactly: on f's grid). */
typedef struct {
    mpfr_t *m;
    double *d;
} sink;

/* The value an operand enters the products with: f's operand rounding
 * (tf32's, which vo_madd applies to each factor; a function of the element
 * alone, so applying it once here gives vo_madd's operands). */
static inline double operand_d(double d, const vijp_format *f)
{
    if (f->mixed && f->operand_prec) d = vijp_emu_round(d, (vijp_emu_grid){(int)f->operand_prec, (int)f->emin, (int)f->emax});
    return d;
}

static inline double operand(mpfr_srcptr v, const vijp_format *f) { return operand_d(vijp_emu_get1(v), f); }

/* Rows [r0, r1) of a rows × cols M into out (entry (r, c) at r + c·ld; rows
 * r >= rows zero: the lanes' padding), as floats or doubles.  The MPFR array is
 * read in its own order (a transposed read strides over MPFR's structs and
 * their limbs, which cost more than the products at batch 1), the copy
 * written in the lanes'; one loop per type. */
static void read_view(view M, size_t r0, size_t r1, size_t rows, size_t cols, size_t ld, int as_float, void *out,
                      const vijp_format *f)
{
    float *of = out;
    double *od = out;
    size_t top = r1 < rows ? r1 : rows; /* the range's rows that M has */
    for (size_t c = 0; c < cols && top < r1; c++) {
        if (as_float) memset(of + top + c * ld, 0, (r1 - top) * sizeof *of);
        else memset(od + top + c * ld, 0, (r1 - top) * sizeof *od);
    }
    /* rows strided: then columns are M's contiguous direction; floats are
     * exact: f's values are binary32 values */
#define READ_LOOPS(O, OUTER, FROM_OUTER, NOUTER, INNER, FROM_INNER, NINNER, GET)                                 \
    for (size_t OUTER = FROM_OUTER; OUTER < NOUTER; OUTER++)                                                        \
        for (size_t INNER = FROM_INNER; INNER < NINNER; INNER++) O[r + c * ld] = GET
#define READ_ALL(GET)                                                                                              \
    do {                                                                                                           \
        if (M.rs != 1 && as_float) READ_LOOPS(of, r, r0, top, c, 0, cols, GET);                                    \
        else if (M.rs != 1) READ_LOOPS(od, r, r0, top, c, 0, cols, GET);                                           \
        else if (as_float) READ_LOOPS(of, c, 0, cols, r, r0, top, GET);                                            \
        else READ_LOOPS(od, c, 0, cols, r, r0, top, GET);                                                          \
    } while (0)
    if (M.d && M.rs != 1) { /* a transposed read of doubles, in tiles: a row of the copy's writes a cache line
                              * per entry (and 4K-aliases the reads); the tile keeps both lines in cache */
        enum { T = 16 };
        for (size_t t0 = r0; t0 < top; t0 += T)
            for (size_t c0 = 0; c0 < cols; c0 += T) {
                size_t t1 = t0 + T < top ? t0 + T : top, c1 = c0 + T < cols ? c0 + T : cols;
                for (size_t r = t0; r < t1; r++)
                    for (size_t c = c0; c < c1; c++) {
                        double v = operand_d(M.d[r * M.rs + c * M.cs], f);
                        if (as_float) of[r + c * ld] = (float)v;
                        else od[r + c * ld] = v;
                    }
            }
    } else if (M.d) READ_ALL(operand_d(M.d[r * M.rs + c * M.cs], f));
    else READ_ALL(operand(M.v[r * M.rs + c * M.cs], f));
#undef READ_ALL
#undef READ_LOOPS
}

/* The kinds no set covers (lanes.h: none of vijp's formats today): the
 * scalar dot products, vo_madd itself. */
static void scalar_products(size_t m, size_t ncols, size_t K, const double *A, size_t lda, const double *B, double *C,
                            const vijp_format *f)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t i = 0; i < m; i++) {
            double acc = 0;
            for (size_t t = 0; t < K; t++) acc = vijp_emu_madd(acc, A[i + t * lda], B[t + c * K], f);
            C[i + c * lda] = acc;
        }
}

/* One call of products (below), shared by the threads that run ranges of
 * its blocks of pad rows (src/base/fork.h). */
typedef struct {
    const vijp_emu_lanes *set;
    vijp_emu_lanes_kind kind;
    int fl;
    size_t m, ncols, K, pad, lda, size;
    view A;
    void *a, *b, *c; /* the lanes' copies of A and B, and C */
    sink out;
    const double *bias; /* or NULL */
    const vijp_format *f;
    mpfr_exp_t emin, emax; /* the caller's MPFR exponent range, the outputs' */
} products_job;

/* Rows [begin·pad, end·pad) of C, with their rows of A read here: each output
 * is its own lane's dot product, the same operations wherever its row falls
 * (lanes.h), so any split of the rows gives the same bits. */
static void products_rows(void *ctx, size_t part, size_t begin, size_t end)
{
    (void)part;
    const products_job *j = ctx;
    size_t r0 = begin * j->pad, r1 = end * j->pad, top = r1 < j->m ? r1 : j->m;
    read_view(j->A, r0, r1, j->m, j->K, j->lda, j->fl, j->a, j->f);
    void *a = (char *)j->a + r0 * j->size, *c = (char *)j->c + r0 * j->size;
    if (j->kind == VIJP_EMU_FUSED_F) j->set->fused_f(r1 - r0, j->ncols, j->K, a, j->lda, j->b, 1, j->K, c, j->lda);
    else if (j->kind == VIJP_EMU_SPLIT_F) j->set->split_f(r1 - r0, j->ncols, j->K, a, j->lda, j->b, 1, j->K, c, j->lda);
    else if (j->kind == VIJP_EMU_SPLIT_D)
        j->set->split_d(r1 - r0, j->ncols, j->K, a, j->lda, j->b, 1, j->K, c, j->lda, vijp_emu_arith(j->f));
    else scalar_products(top - r0, j->ncols, j->K, a, j->lda, j->b, c, j->f);
    vijp_emu_grid g = vijp_emu_arith(j->f);
    for (size_t col = 0; col < j->ncols; col++)
        for (size_t i = r0; i < top; i++) {
            size_t e = i + col * j->lda;
            double y = j->fl ? ((float *)j->c)[e] : ((double *)j->c)[e];
            if (j->bias) y = vijp_emu_add(y, j->bias[i], g);
            if (j->out.d) j->out.d[i + col * j->m] = y;
            else vijp_emu_set1_range(j->out.m[i + col * j->m], y, j->emin, j->emax); /* exact: on the format's grid */
        }
}

/* out(i, c) = Σ_t A(i, t)·B(t, c) (+ bias_i, rounded to f, when bias), for
 * i < m, c < ncols, t < K ascending; out's entry (i, c) at out[i + c·m].
 * Split over f's threads by blocks of rows where the work pays for it. */
static void products(const vijp_emu_lanes *set, size_t m, size_t ncols, size_t K, view A, view B, sink out,
                     view bias, const vijp_format *f)
{
    vijp_emu_lanes_kind kind = vijp_emu_lanes_kind_of(f);
    int fl = kind == VIJP_EMU_FUSED_F || kind == VIJP_EMU_SPLIT_F;
    size_t pad = fl ? VIJP_EMU_PAD_F : VIJP_EMU_PAD_D, size = fl ? sizeof(float) : sizeof(double);
    size_t lda = (m + pad - 1) / pad * pad;
    products_job j = {set, kind, fl, m, ncols, K, pad, lda, size, A, vijp_alloc_array(lda * K + 1, size),
                      vijp_alloc_array(K * ncols + 1, size), vijp_alloc_array(lda * ncols + 1, size), out, NULL, f,
                      mpfr_get_emin(), mpfr_get_emax()};
    read_view(B, 0, K, K, ncols, K, fl, j.b, f);
    double *bm = bias.v && !bias.d ? vijp_emu_get(bias.v, m) : NULL;
    j.bias = bias.d ? bias.d : bm;
    /* work in lane multiply-adds (fork.h); an MPFR value read or written
     * costs about 64 of them */
    vijp_fork(f->threads, lda / pad, (double)lda * (double)ncols * (double)K + 64.0 * (double)m * (double)(K + ncols),
              products_rows, &j);
    free(bm);
    free(j.a), free(j.b), free(j.c);
}

/* y = W x + b (vo_dense_forward) or, bias 0, V = W U: W(i, k) = th[i + k·m];
 * operands and result in MPFR (th, X, Y) or doubles (thd, Xd, Yd). */
static void forward_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *th, const double *thd, mpfr_t *X,
                       const double *Xd, size_t B, sink Y, int bias, const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    view b = {bias && !thd ? &th[m * n] : NULL, bias && thd ? &thd[m * n] : NULL, 1, 0};
    products(set, m, B, n, (view){th, thd, 1, m}, (view){X, Xd, 1, n}, Y, b, f);
}

void vijp_emu_dense_forward_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B,
                               mpfr_t *Y, int bias, const vijp_format *f)
{
    forward_on(set, L, th, NULL, X, NULL, B, (sink){Y, NULL}, bias, f);
}

void vijp_emu_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vijp_emu_dense_forward_on(vijp_emu_lanes_active(), L, th, X, B, Y, 1, f);
}

void vijp_emu_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f)
{
    (void)X;
    vijp_emu_dense_forward_on(vijp_emu_lanes_active(), L, th, U, B, V, 0, f);
}

/* (Wᵀ g)_k = Σ_i W(i, k) g_i, i ascending: the rows of A are W's columns. */
void vijp_emu_dense_vjp_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *th, size_t B, mpfr_t *Gy,
                           mpfr_t *Gx, const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    products(set, n, B, m, (view){th, NULL, m, 1}, (view){Gy, NULL, 1, m}, (sink){Gx, NULL}, (view){0}, f);
}

void vijp_emu_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f)
{
    (void)X;
    vijp_emu_dense_vjp_on(vijp_emu_lanes_active(), L, th, B, Gy, Gx, f);
}

/* ∂W(i, k) = Σ_j g(i, j) x(k, j), j ascending; ∂b_i = Σ_j g(i, j). */
void vijp_emu_dense_vjp_param_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy,
                                 mpfr_t *Gt, const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    products(set, m, n, B, (view){Gy, NULL, 1, m}, (view){X, NULL, n, 1}, (sink){Gt, NULL}, (view){0}, f);
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t i = 0; i < m; i++) {
        double s = 0;
        for (size_t j = 0; j < B; j++) s = vijp_emu_add(s, vijp_emu_get1(Gy[i + j * m]), g);
        vijp_emu_set1(Gt[m * n + i], s);
    }
}

void vijp_emu_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f)
{
    (void)th;
    vijp_emu_dense_vjp_param_on(vijp_emu_lanes_active(), L, X, B, Gy, Gt, f);
}

/* One panel step of the elimination (vijp_emu_ge_solve_d): column c's
 * multipliers for the rows below it, the panel's later columns and the
 * right-hand sides updated now, shared by the threads that run ranges of
 * those rows. */
typedef struct {
    size_t n, c, c1, B;
    double *A, *R; /* R: the right-hand sides row-major (row i at R + i·B) */
    vijp_emu_grid g;
    const vijp_emu_lanes *lanes;
} elimination;

/* Rows c + 1 + [begin, end): each row's update reads the pivot row and
 * writes only itself, by the same operations whatever the range, so any
 * split of the rows gives the same bits.  The multiplier is kept where the
 * row's entry of column c was (L's entry, which no later step reads as A);
 * the columns past the panel take it later (update_trailing). */
static void eliminate_rows(void *ctx, size_t part, size_t begin, size_t end)
{
    (void)part;
    const elimination *e = ctx;
    size_t n = e->n, c = e->c;
    double *A = e->A, *R = e->R;
    vijp_emu_grid g = e->g;
#define A_(i, k) A[(i) * n + (k)] /* row-major here: the updates run along rows */
    for (size_t i = c + 1 + begin; i < c + 1 + end; i++) {
        double t = vijp_emu_div(A_(i, c), A_(c, c), g); /* multiplier l_ic */
        A_(i, c) = t;
        e->lanes->axpy_d(e->c1 - c - 1, t, &A_(c, c + 1), &A_(i, c + 1), g); /* A(i, k) −= t·A(c, k), c < k < c1 */
        e->lanes->axpy_d(e->B, t, R + c * e->B, R + i * e->B, g);           /* r(i, j) −= t·r(c, j), every j */
    }
#undef A_
}

/* The panel [c0, c1)'s steps on the columns past it, c1 <= k < n, rows
 * first + [begin, end): row i takes steps c0, c0 + 1, … below min(i, c1),
 * in that order, with the multipliers its panel columns hold, each an
 * A(i, k) −= l_ic·A(c, k) of the unblocked elimination.  Row c is a pivot
 * row only for rows below it, and the rows run in ascending order within a
 * range (the pivot rows, first = c0, in a range of their own before the
 * others), so it has taken its own steps before it is read. */
enum { TRAILING_TILE = 128 };

typedef struct {
    size_t n, c0, c1, first;
    double *A;
    vijp_emu_grid g;
    const vijp_emu_lanes *lanes;
} trailing;

static void update_trailing(void *ctx, size_t part, size_t begin, size_t end)
{
    (void)part;
    const trailing *t = ctx;
    size_t n = t->n, c1 = t->c1;
    double *A = t->A;
#define A_(i, k) A[(i) * n + (k)]
    /* By tiles of TRAILING_TILE columns, every row of the range in each: the
     * panel's pivot rows over a tile stay in L1 for all the rows that read
     * them (streaming them whole for every row was L2-bound).  Entry (i, k)
     * takes its steps in order either way, and a pivot row's tile is done
     * before the rows after it read it. */
    for (size_t k0 = c1; k0 < n; k0 += TRAILING_TILE) {
        size_t len = n - k0 < TRAILING_TILE ? n - k0 : TRAILING_TILE;
        for (size_t i = t->first + begin; i < t->first + end; i++) { /* the steps c0 … min(i, c1) − 1, in order */
            size_t steps = (i < c1 ? i : c1) - t->c0;
            if (steps) t->lanes->axpy_many_d(len, steps, &A_(i, t->c0), &A_(t->c0, k0), n, &A_(i, k0), t->g);
        }
    }
#undef A_
}

/* ---- The same products on double-held operands (layer/emu_native.h) ----
 *
 * The matrices of these formats hold their values as doubles (vijp/mat.h):
 * the products read and write them there, the same operations as above
 * (the views differ in where an entry is read, not in its value). */

static void native_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y,
                           const vijp_format *f)
{
    forward_on(vijp_emu_lanes_active(), L, NULL, th, NULL, X, B, (sink){NULL, Y}, 1, f);
}

static void native_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V,
                       const vijp_format *f)
{
    (void)X;
    forward_on(vijp_emu_lanes_active(), L, NULL, th, NULL, U, B, (sink){NULL, V}, 0, f);
}

static void native_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx,
                       const vijp_format *f)
{
    (void)X;
    size_t m = L->out, n = L->in;
    products(vijp_emu_lanes_active(), n, B, m, (view){NULL, th, m, 1}, (view){NULL, Gy, 1, m}, (sink){NULL, Gx},
             (view){0}, f);
}

static void native_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                             double *Gt, const vijp_format *f)
{
    (void)th;
    size_t m = L->out, n = L->in;
    products(vijp_emu_lanes_active(), m, n, B, (view){NULL, Gy, 1, m}, (view){NULL, X, n, 1}, (sink){NULL, Gt},
             (view){0}, f);
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t i = 0; i < m; i++) { /* ∂b_i = Σ_j g(i, j), j ascending, as vijp_emu_dense_vjp_param */
        double s = 0;
        for (size_t j = 0; j < B; j++) s = vijp_emu_add(s, Gy[i + j * m], g);
        Gt[m * n + i] = s;
    }
}

/* Square W: Wᵀ gy = gx by the solve on doubles (vijp_emu_dense_vijp's);
 * m ≠ n is the QR's, through MPFR (VIJP_EUNSUPPORTED). */
static int native_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                       const double *frag, double *Gy, const vijp_format *f)
{
    (void)X, (void)frag;
    size_t n = L->in;
    if (L->out != n) return VIJP_EUNSUPPORTED;
    double *A = vijp_alloc_array(n ? n * n : 1, sizeof *A); /* Wᵀ row-major: W column-major as it is */
    memcpy(A, th, n * n * sizeof *A);
    memcpy(Gy, Gx, n * B * sizeof *Gy); /* the oracle copies gx to gy, then solves in gy */
    int rc = vijp_emu_ge_solve_d(n, A, Gy, B, vijp_emu_arith(f), f->threads);
    free(A);
    return rc;
}

/* vo_dense_fragment_count's: the shape alone. */
static size_t native_fragment_count(const vijp_layer *L, const double *th, const double *X, size_t B)
{
    (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

/* vijp_emu_dense_inverse on doubles: W (row-major copy) x = y − b. */
static int native_inverse(const vijp_layer *L, const double *th, const double *Y, size_t B, double *X,
                          const vijp_format *f)
{
    size_t n = L->in;
    if (L->out != n) return VIJP_EUNSUPPORTED; /* the oracle's case: mp runs it */
    double *A = vijp_alloc_array(n ? n * n : 1, sizeof *A);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++) A[k + i * n] = th[i + k * n];
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < n; i++) X[i + j * n] = vijp_emu_sub(Y[i + j * n], th[n * n + i], g);
    int rc = vijp_emu_ge_solve_d(n, A, X, B, g, f->threads);
    free(A);
    return rc;
}

const struct vijp_emu_native vijp_emu_dense_native = {
    .forward = native_forward, .jvp = native_jvp, .vjp = native_vjp, .vjp_param = native_vjp_param,
    .vijp = native_vijp, .fragment_count = native_fragment_count, .inverse = native_inverse,
    /* the drift reference's products (dense_ref.h) on the memo's double θ */
    .mp_forward = vijp_ref_dense_forward_d, .mp_jvp = vijp_ref_dense_jvp_d, .mp_vjp = vijp_ref_dense_vjp_d,
    .mp_vjp_param = vijp_ref_dense_vjp_param_d,
};

/* vo_ge_solve on doubles: A (n × n, row-major, already transposed where
 * asked) is overwritten by its LU factors, r (n × B) by the solution.  The
 * pivot is the first entry of largest magnitude at or below the diagonal:
 * mpfr_cmpabs(a, b) > 0 is fabs(a) > fabs(b), false for NaN on either side
 * as mpfr_cmpabs's 0 is, so ties and NaNs keep the earlier row.
 *
 * By panels of columns (right-looking, as LAPACK's dgetrf, but every
 * operation the unblocked elimination's): within a panel each column's
 * step updates the panel and r at once; the columns past the panel take
 * the panel's steps afterwards, row by row, in the same order, on the same
 * operands, so every entry sees the same sequence of rounded operations
 * and the bits are the unblocked elimination's for any panel width (the
 * tests run widths 1 to 9 against the MPFR oracle).  A row swap moves a
 * row's pending steps with it: their multipliers sit in its panel
 * columns.  Each pass over the matrix then serves a panel rather than a
 * column.  Steps run over up to threads threads (a team kept for the
 * whole solve) while the rows left pay for it.
 *
 * eliminate: that elimination on A and the right-hand sides R (row-major,
 * B a row; at least one double even where B is 0), by panels of panel
 * columns.  0, or VIJP_ESINGULAR at a zero pivot (A and R as far as they got). */
static int eliminate(size_t n, double *A, double *R, size_t B, vijp_emu_grid g, int threads, size_t panel)
{
#define A_(i, k) A[(i) * n + (k)]
    const vijp_emu_lanes *lanes = vijp_emu_lanes_active();
    vijp_team *team = NULL;
    int rc = 0;
    if (!panel) panel = 1;
    for (size_t c0 = 0; c0 < n && !rc; c0 += panel) {
        size_t c1 = n - c0 < panel ? n : c0 + panel;
        elimination e = {n, 0, c1, B, A, R, g, lanes};
        for (size_t c = c0; c < c1; c++) {
            size_t p = c;
            for (size_t i = c + 1; i < n; i++)
                if (fabs(A_(i, c)) > fabs(A_(p, c))) p = i;
            if (A_(p, c) == 0) {
                rc = VIJP_ESINGULAR; /* r left as far as it got, as the oracle leaves it */
                break;
            }
            if (p != c) {
                for (size_t k = 0; k < n; k++) {
                    double t = A_(c, k);
                    A_(c, k) = A_(p, k), A_(p, k) = t;
                }
                for (size_t j = 0; j < B; j++) {
                    double t = R[c * B + j];
                    R[c * B + j] = R[p * B + j], R[p * B + j] = t;
                }
            }
            size_t below = n - c - 1; /* the rows this column eliminates, work below·(c1 − c + B) lane operations */
            size_t parts = vijp_fork_parts(threads, below, (double)below * (double)(c1 - c + B), VIJP_TEAM_MIN_WORK);
            if (parts > 1 && !team) team = vijp_team_new(threads);
            e.c = c;
            if (parts > 1) vijp_team_run(team, below, parts, eliminate_rows, &e);
            else eliminate_rows(&e, 0, 0, below);
        }
        if (rc || c1 == n) continue;
        trailing t = {n, c0, c1, c0, A, g, lanes};
        update_trailing(&t, 0, 0, c1 - c0); /* the pivot rows, in order, before the rows that read them */
        size_t below = n - c1;
        size_t parts = vijp_fork_parts(threads, below, (double)below * (double)(c1 - c0) * (double)(n - c1),
                                       VIJP_TEAM_MIN_WORK);
        if (parts > 1 && !team) team = vijp_team_new(threads);
        t.first = c1;
        if (parts > 1) vijp_team_run(team, below, parts, update_trailing, &t);
        else update_trailing(&t, 0, 0, below);
    }
    vijp_team_free(team);
    return rc;
#undef A_
}

int vijp_emu_ge_solve_panel(size_t n, double *A, double *r, size_t B, vijp_emu_grid g, int threads, size_t panel)
{
#define A_(i, k) A[(i) * n + (k)]
    const vijp_emu_lanes *lanes = vijp_emu_lanes_active();
    /* The right-hand sides row by row, so that a step updates a row of them
     * as one axpy over the B columns (each entry's operations as before: a
     * scalar loop over them was a tenth of a dense:1024 study) */
    double *R = vijp_alloc_array(n * B != 0 ? n * B : 1, sizeof *R);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < n; i++) R[i * B + j] = r[i + j * n];
    int rc = eliminate(n, A, R, B, g, threads, panel);
    /* Back substitution with U: row i's entries take k = i + 1, …, n − 1 in
     * order, then the division, each column j as it would alone. */
    for (size_t i = n; i-- > 0 && !rc;) {
        double *Ri = R + i * B;
        for (size_t k = i + 1; k < n; k++) lanes->axpy_d(B, A_(i, k), R + k * B, Ri, g);
        for (size_t j = 0; j < B; j++) Ri[j] = vijp_emu_div(Ri[j], A_(i, i), g);
    }
    for (size_t j = 0; j < B; j++) /* also where a zero pivot stopped it: as far as it got */
        for (size_t i = 0; i < n; i++) r[i + j * n] = R[i * B + j];
    free(R);
    return rc;
#undef A_
}

int vijp_emu_ge_solve_d(size_t n, double *A, double *r, size_t B, vijp_emu_grid g, int threads)
{
    return vijp_emu_ge_solve_panel(n, A, r, B, g, threads, VIJP_EMU_GE_PANEL);
}

/* Loads A0 (column-major; transposed when trans) row-major and the
 * right-hand sides rhs, solves in double, and writes the solution to r
 * whatever the outcome (the oracle's r, also when singular). */
static int solve_mp(size_t n, mpfr_t *A0, int trans, mpfr_t *rhs, mpfr_t *r, size_t B, const vijp_format *f)
{
    double *A = trans ? vijp_emu_get(A0, n * n) : vijp_emu_get_rows(A0, n, n), *x = vijp_emu_get(rhs, n * B);
    int rc = vijp_emu_ge_solve_d(n, A, x, B, vijp_emu_arith(f), f->threads);
    vijp_emu_put(r, x, n * B);
    free(A), free(x);
    return rc;
}

int vijp_emu_ge_solve(size_t n, mpfr_t *A0, int trans, mpfr_t *r, size_t B, const vijp_format *f)
{
    return solve_mp(n, A0, trans, r, r, B, f);
}

/* Square W: Wᵀ gy = gx by the solve (vo_dense_vijp); the QR cases of
 * m ≠ n are in dense_qr.c. */
int vijp_emu_dense_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                        mpfr_t *Gy, const vijp_format *f)
{
    size_t n = L->in;
    if (L->out != n) return vijp_emu_dense_vijp_qr(L, th, X, B, Gx, frag, Gy, f);
    return solve_mp(n, th, 1, Gx, Gy, B, f); /* the oracle copies gx to gy, then solves in gy */
}

int vijp_emu_dense_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    size_t n = L->in;
    if (L->out != n) return VIJP_EUNSUPPORTED; /* the oracle's case: mp runs it (src/layer/route.h) */
    double *A = vijp_emu_get_rows(th, n, n), *x = vijp_emu_get(Y, n * B), *b = vijp_emu_get(&th[n * n], n);
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < n; i++) x[i + j * n] = vijp_emu_sub(x[i + j * n], b[i], g);
    int rc = vijp_emu_ge_solve_d(n, A, x, B, g, f->threads);
    vijp_emu_put(X, x, n * B);
    free(A), free(x), free(b);
    return rc;
}

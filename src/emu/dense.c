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
#include "format/mpfr_io.h"
#include "vijp/error.h"
#include "oracles/oracles.h"
#include <stdlib.h>

/* Σ_k a[k·sa]·b[k·sb] formed into +0 by vo_madd, k ascending: the
 * oracle's dot product in f. */
static double dot(const double *a, size_t sa, const double *b, size_t sb, size_t n, const vijp_format *f)
{
    double acc = 0;
    for (size_t k = 0; k < n; k++) acc = vijp_emu_madd(acc, a[k * sa], b[k * sb], f);
    return acc;
}

/* out[l] = Σ_k a[k + l·lda]·x[k] for l < rows, each by dot's sequence.  Four
 * rows at a time: each sum is a chain of dependent roundings, so four
 * independent chains keep the core busy; every sum still sees its own terms
 * in its own order, so the bits are dot's. */
static void dot_rows(const double *a, size_t lda, const double *x, size_t n, size_t rows, double *out,
                     const vijp_format *f)
{
    size_t l = 0;
    for (; l + 4 <= rows; l += 4) {
        double acc[4] = {0, 0, 0, 0};
        for (size_t k = 0; k < n; k++)
            for (size_t q = 0; q < 4; q++) acc[q] = vijp_emu_madd(acc[q], a[k + (l + q) * lda], x[k], f);
        for (size_t q = 0; q < 4; q++) out[l + q] = acc[q];
    }
    for (; l < rows; l++) out[l] = dot(&a[l * lda], 1, x, 1, n, f);
}

/* y_i = (Σ_k W(i, k) x_k) + b_i (vo_dense_forward) or, bias 0, V = W U. */
static void products(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, int bias,
                     const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    double *w = vijp_emu_get_rows(th, m, n), *x = vijp_emu_get(X, n * B), *y = vijp_alloc_array(m * B, sizeof *y);
    double *b = bias ? vijp_emu_get(&th[m * n], m) : NULL;
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t j = 0; j < B; j++) {
        dot_rows(w, n, &x[j * n], n, m, &y[j * m], f);
        for (size_t i = 0; b && i < m; i++) y[i + j * m] = vijp_emu_add(y[i + j * m], b[i], g);
    }
    vijp_emu_put(Y, y, m * B);
    free(w), free(x), free(y), free(b);
}

void vijp_emu_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    products(L, th, X, B, Y, 1, f);
}

void vijp_emu_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f)
{
    (void)X;
    products(L, th, U, B, V, 0, f);
}

void vijp_emu_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f)
{
    (void)X;
    size_t m = L->out, n = L->in;
    double *w = vijp_emu_get(th, m * n), *gy = vijp_emu_get(Gy, m * B), *gx = vijp_alloc_array(n * B, sizeof *gx);
    for (size_t j = 0; j < B; j++) /* (Wᵀ g)_k = Σ_i W(i, k) g_i, i ascending: column k of W is contiguous */
        dot_rows(w, m, &gy[j * m], m, n, &gx[j * n], f);
    vijp_emu_put(Gx, gx, n * B);
    free(w), free(gy), free(gx);
}

void vijp_emu_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f)
{
    (void)th;
    size_t m = L->out, n = L->in;
    double *x = vijp_emu_get(X, n * B), *gy = vijp_emu_get(Gy, m * B), *gt = vijp_alloc_array(m * n + m, sizeof *gt);
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t i = 0; i < m; i++) { /* ∂W(i, k) = Σ_j g(i, j) x(k, j), j ascending; ∂b_i = Σ_j g(i, j) */
        for (size_t k = 0; k < n; k++) gt[i + k * m] = dot(&gy[i], m, &x[k], n, B, f);
        double s = 0;
        for (size_t j = 0; j < B; j++) s = vijp_emu_add(s, gy[i + j * m], g);
        gt[m * n + i] = s;
    }
    vijp_emu_put(Gt, gt, m * n + m);
    free(x), free(gy), free(gt);
}

/* vo_ge_solve on doubles: A (n × n, row-major, already transposed where
 * asked) is overwritten by its LU factors, r (n × B) by the solution.  The
 * pivot is the first entry of largest magnitude at or below the diagonal:
 * mpfr_cmpabs(a, b) > 0 is fabs(a) > fabs(b), false for NaN on either side
 * as mpfr_cmpabs's 0 is, so ties and NaNs keep the earlier row. */
int vijp_emu_ge_solve_d(size_t n, double *A, double *r, size_t B, vijp_emu_grid g)
{
#define A_(i, k) A[(i) * n + (k)] /* row-major here: the updates run along rows */
    for (size_t c = 0; c < n; c++) {
        size_t p = c;
        for (size_t i = c + 1; i < n; i++)
            if (fabs(A_(i, c)) > fabs(A_(p, c))) p = i;
        if (A_(p, c) == 0) return VIJP_ESINGULAR; /* r left as far as it got, as the oracle leaves it */
        if (p != c) {
            for (size_t k = 0; k < n; k++) {
                double t = A_(c, k);
                A_(c, k) = A_(p, k), A_(p, k) = t;
            }
            for (size_t j = 0; j < B; j++) {
                double t = r[c + j * n];
                r[c + j * n] = r[p + j * n], r[p + j * n] = t;
            }
        }
        for (size_t i = c + 1; i < n; i++) {
            double t = vijp_emu_div(A_(i, c), A_(c, c), g); /* multiplier l_ic */
            for (size_t k = c + 1; k < n; k++) A_(i, k) = vijp_emu_sub(A_(i, k), vijp_emu_mul(t, A_(c, k), g), g);
            for (size_t j = 0; j < B; j++) r[i + j * n] = vijp_emu_sub(r[i + j * n], vijp_emu_mul(t, r[c + j * n], g), g);
        }
    }
    for (size_t j = 0; j < B; j++) /* back substitution with U */
        for (size_t i = n; i-- > 0;) {
            double *ri = &r[i + j * n];
            for (size_t k = i + 1; k < n; k++) *ri = vijp_emu_sub(*ri, vijp_emu_mul(A_(i, k), r[k + j * n], g), g);
            *ri = vijp_emu_div(*ri, A_(i, i), g);
        }
    return 0;
#undef A_
}

/* Loads A0 (column-major; transposed when trans) row-major and the
 * right-hand sides rhs, solves in double, and writes the solution to r
 * whatever the outcome (the oracle's r, also when singular). */
static int solve_mp(size_t n, mpfr_t *A0, int trans, mpfr_t *rhs, mpfr_t *r, size_t B, const vijp_format *f)
{
    double *A = trans ? vijp_emu_get(A0, n * n) : vijp_emu_get_rows(A0, n, n), *x = vijp_emu_get(rhs, n * B);
    int rc = vijp_emu_ge_solve_d(n, A, x, B, vijp_emu_arith(f));
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
    int rc = vijp_emu_ge_solve_d(n, A, x, B, g);
    vijp_emu_put(X, x, n * B);
    free(A), free(x), free(b);
    return rc;
}

/* Oracles of the shape types (src/layers/reshape.c): identity, dropout and
 * flatten (the identity map on a row) and transpose:AxB (a permutation),
 * written again in MPFR.  Every value is moved, never computed: each
 * operator is exact in every format, and so is the Jacobian, built column by
 * column as the image of a unit vector. */
#include "norm.h"
#include "vijp/arith.h"

/* ---- the identity: J = I ---- */

static void copy_units(mpfr_t *in, size_t count, mpfr_t *out, const vijp_format *f)
{
    for (size_t k = 0; k < count; k++) vo_set(out[k], in[k], f);
}

void vo_identity_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    copy_units(X, L->in * B, Y, f);
}

void vo_identity_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th, (void)X;
    copy_units(U, L->in * B, V, f);
}

int vo_identity_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                     const vijp_format *f)
{
    (void)th, (void)X, (void)frag;
    copy_units(Gx, L->in * B, Gy, f);
    return 0;
}

int vo_identity_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    copy_units(Y, L->in * B, X, f);
    return 0;
}

void vo_identity_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    for (size_t j = 0; j < L->in; j++)
        for (size_t i = 0; i < L->in; i++) vo_set_si(J[i + j * L->in], i == j, f);
}

/* f′ = 1 everywhere. */
void vo_identity_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th, (void)x;
    mpfi_set_si(d, 1);
}

/* ---- transpose:AxB: out[j·A + i] = in[i·B + j] within each run ---- */

static void transpose_move(const vijp_layer *L, mpfr_t *in, size_t B, mpfr_t *out, int back, const vijp_format *f)
{
    const vo_transpose_args *a = L->state;
    size_t run = a->rows * a->cols, runs = L->in * B / run;
    for (size_t r = 0; r < runs; r++)
        for (size_t i = 0; i < a->rows; i++)
            for (size_t j = 0; j < a->cols; j++) {
                size_t from = r * run + i * a->cols + j, to = r * run + j * a->rows + i;
                if (back) vo_set(out[from], in[to], f);
                else vo_set(out[to], in[from], f);
            }
}

void vo_transpose_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    transpose_move(L, X, B, Y, 0, f);
}

void vo_transpose_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th, (void)X;
    transpose_move(L, U, B, V, 0, f);
}

void vo_transpose_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th, (void)X;
    transpose_move(L, Gy, B, Gx, 1, f);
}

int vo_transpose_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f)
{
    (void)th, (void)X, (void)frag;
    transpose_move(L, Gx, B, Gy, 0, f);
    return 0;
}

int vo_transpose_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    transpose_move(L, Y, B, X, 1, f);
    return 0;
}

void vo_transpose_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    size_t n = L->in;
    mpfr_t *e = vo_vec_new(n, f), *col = vo_vec_new(n, f);
    for (size_t j = 0; j < n; j++) { /* column j: the image of e_j */
        for (size_t k = 0; k < n; k++) vo_set_si(e[k], k == j, f);
        transpose_move(L, e, 1, col, 0, f);
        for (size_t k = 0; k < n; k++) vo_set(J[k + j * n], col[k], f);
    }
    vo_vec_free(e, n), vo_vec_free(col, n);
}

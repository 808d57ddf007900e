/* Oracles of avgpool and squeeze (src/layers/avgpool.c, squeeze.c): the
 * mean and the sum written out; space-to-depth by its index formula,
 * c·F + r ← (c, p'·F + r), as nested loops over (c, r, p'). */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"

/* ---- avgpool:P ---- */

void vo_avgpool_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    size_t P = vijp_avgpool_window(L);
    mpfr_t p;
    mpfr_init2(p, f->prec);
    vo_set_si(p, (long)P, f);
    for (size_t j = 0; j < L->out * B; j++) {
        mpfr_set_zero(Y[j], 1);
        for (size_t k = 0; k < P; k++) vo_add(Y[j], Y[j], X[j * P + k], f);
        vo_div(Y[j], Y[j], p, f);
    }
    mpfr_clear(p);
}

void vo_avgpool_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    vo_avgpool_forward(L, th, U, B, V, f);
}

void vo_avgpool_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th, (void)X;
    size_t P = vijp_avgpool_window(L);
    mpfr_t p;
    mpfr_init2(p, f->prec);
    vo_set_si(p, (long)P, f);
    for (size_t j = 0; j < L->out * B; j++)
        for (size_t k = 0; k < P; k++) vo_div(Gx[j * P + k], Gy[j], p, f);
    mpfr_clear(p);
}

/* g_y = P·(g_x Jᵀ): the sum over each window. */
int vo_avgpool_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                    const vijp_format *f)
{
    (void)th, (void)X, (void)frag;
    size_t P = vijp_avgpool_window(L);
    for (size_t j = 0; j < L->out * B; j++) {
        mpfr_set_zero(Gy[j], 1);
        for (size_t k = 0; k < P; k++) vo_add(Gy[j], Gy[j], Gx[j * P + k], f);
    }
    return 0;
}

void vo_avgpool_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    size_t P = vijp_avgpool_window(L), m = L->out, n = L->in;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    vo_set_si(p, (long)P, f);
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < n; i++) {
            if (i / P == j) vo_set_si(J[j + i * m], 1, f), vo_div(J[j + i * m], J[j + i * m], p, f);
            else mpfr_set_zero(J[j + i * m], 1);
        }
    mpfr_clear(p);
}

/* ---- squeeze:CxF ---- */

/* out[(c·F + r)·M + q] = in[c·Lc + q·F + r] (gather), or the reverse. */
static void squeeze_move(const vijp_layer *L, mpfr_t *in, size_t B, mpfr_t *out, int scatter, const vijp_format *f)
{
    size_t C = vijp_squeeze_get(L)->channels, F = vijp_squeeze_get(L)->factor, Lc = L->in / C, M = Lc / F, n = L->in;
    for (size_t b = 0; b < B; b++)
        for (size_t c = 0; c < C; c++)
            for (size_t r = 0; r < F; r++)
                for (size_t q = 0; q < M; q++) {
                    size_t to = b * n + (c * F + r) * M + q, from = b * n + c * Lc + q * F + r;
                    if (scatter) vo_set(out[from], in[to], f);
                    else vo_set(out[to], in[from], f);
                }
}

void vo_squeeze_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    squeeze_move(L, X, B, Y, 0, f);
}

void vo_squeeze_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th, (void)X;
    squeeze_move(L, U, B, V, 0, f);
}

void vo_squeeze_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th, (void)X;
    squeeze_move(L, Gy, B, Gx, 1, f);
}

int vo_squeeze_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                    const vijp_format *f)
{
    (void)th, (void)X, (void)frag;
    squeeze_move(L, Gx, B, Gy, 0, f);
    return 0;
}

int vo_squeeze_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    squeeze_move(L, Y, B, X, 1, f);
    return 0;
}

void vo_squeeze_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    size_t n = L->in;
    mpfr_t *e = vo_vec_new(n, f), *col = vo_vec_new(n, f);
    for (size_t i = 0; i < n; i++) { /* column i: the image of e_i */
        for (size_t k = 0; k < n; k++) vo_set_si(e[k], k == i, f);
        squeeze_move(L, e, 1, col, 0, f);
        for (size_t k = 0; k < n; k++) vo_set(J[k + i * n], col[k], f);
    }
    vo_vec_free(e, n), vo_vec_free(col, n);
}

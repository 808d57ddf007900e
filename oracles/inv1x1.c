/* Oracle of inv1x1 (src/layers/inv1x1.c): W = P·L·U′ formed as two explicit
 * matrices and their product, applied position by position; the vijp and the
 * inverse by Gaussian elimination on W (not the triangular factors); the
 * parameter gradient through dM = Pᵀ dW, dL = dM U′ᵀ, dU′ = Lᵀ dM written as
 * full matrix products. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"

/* Lm (unit lower), Um (U + diag exp(log_s)) and W = P Lm Um, all C × C column-major. */
static void factors(size_t C, mpfr_t *A, mpfr_t *Lm, mpfr_t *Um, mpfr_t *W, const vijp_format *f)
{
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            if (i > j) vo_set(Lm[i + j * C], A[i + j * C], f), mpfr_set_zero(Um[i + j * C], 1);
            else if (i < j) mpfr_set_zero(Lm[i + j * C], 1), vo_set(Um[i + j * C], A[i + j * C], f);
            else vo_set_si(Lm[i + j * C], 1, f), vo_exp(Um[i + j * C], A[i + j * C], f);
        }
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            mpfr_t *w = &W[(C - 1 - i) + j * C];
            mpfr_set_zero(*w, 1);
            for (size_t k = 0; k < C; k++) vo_fma(*w, Lm[i + k * C], Um[k + j * C], *w, f);
        }
}

typedef struct {
    size_t C;
    mpfr_t *Lm, *Um, *W;
} mats;

static mats mats_new(const vijp_layer *L, mpfr_t *A, const vijp_format *f)
{
    size_t C = vijp_inv1x1_channels(L);
    mats m = {C, vo_vec_new(C * C, f), vo_vec_new(C * C, f), vo_vec_new(C * C, f)};
    factors(C, A, m.Lm, m.Um, m.W, f);
    return m;
}

static void mats_free(mats *m) { vo_vec_free(m->Lm, m->C * m->C), vo_vec_free(m->Um, m->C * m->C), vo_vec_free(m->W, m->C * m->C); }

static void mix(const vijp_layer *L, mpfr_t *A, mpfr_t *U, size_t B, mpfr_t *V, int transpose, const vijp_format *f)
{
    mats m = mats_new(L, A, f);
    size_t C = m.C, n = L->in / C;
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p < n; p++)
            for (size_t i = 0; i < C; i++) {
                mpfr_t *v = &V[b * L->in + i * n + p];
                mpfr_set_zero(*v, 1);
                for (size_t k = 0; k < C; k++)
                    vo_fma(*v, transpose ? m.W[k + i * C] : m.W[i + k * C], U[b * L->in + k * n + p], *v, f);
            }
    mats_free(&m);
}

void vo_inv1x1_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f) { mix(L, th, X, B, Y, 0, f); }

void vo_inv1x1_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    mix(L, th, U, B, V, 0, f);
}

void vo_inv1x1_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)X;
    mix(L, th, Gy, B, Gx, 1, f);
}

void vo_inv1x1_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f)
{
    mats m = mats_new(L, th, f);
    size_t C = m.C, n = L->in / C;
    mpfr_t *dM = vo_vec_new(C * C, f), s;
    mpfr_init2(s, f->prec);
    for (size_t j = 0; j < C; j++) /* dM = Pᵀ dW, dW = Σ g xᵀ */
        for (size_t i = 0; i < C; i++)
            for (size_t b = 0; b < B; b++)
                for (size_t p = 0; p < n; p++)
                    vo_fma(dM[i + j * C], Gy[b * L->in + (C - 1 - i) * n + p], X[b * L->in + j * n + p], dM[i + j * C], f);
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            mpfr_set_zero(s, 1);
            if (i > j) /* (dM Umᵀ)_ij */
                for (size_t k = 0; k < C; k++) vo_fma(s, dM[i + k * C], m.Um[j + k * C], s, f);
            else /* (Lmᵀ dM)_ij */
                for (size_t k = 0; k < C; k++) vo_fma(s, m.Lm[k + i * C], dM[k + j * C], s, f);
            if (i == j) vo_mul(s, s, m.Um[i + i * C], f); /* d log_s = dU′_ii · exp(log_s) */
            vo_set(Gt[i + j * C], s, f);
        }
    mpfr_clear(s);
    vo_vec_free(dM, C * C);
    mats_free(&m);
}

void vo_inv1x1_factors(const vijp_layer *L, mpfr_t *th, mpfr_t *Lm, mpfr_t *Um, mpfr_t *W, const vijp_format *f)
{
    factors(vijp_inv1x1_channels(L), th, Lm, Um, W, f);
}

/* Per position, solve Wᵀ g = r (vijp) or W x = y (inverse) by elimination. */
static int solve(const vijp_layer *L, mpfr_t *th, mpfr_t *R, size_t B, mpfr_t *Z, int trans, const vijp_format *f)
{
    mats m = mats_new(L, th, f);
    size_t C = m.C, n = L->in / C;
    mpfr_t *r = vo_vec_new(C, f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++)
        for (size_t p = 0; p < n && !rc; p++) {
            for (size_t c = 0; c < C; c++) vo_set(r[c], R[b * L->in + c * n + p], f);
            rc = vo_ge_solve(C, m.W, trans, r, 1, f);
            for (size_t c = 0; c < C && !rc; c++) vo_set(Z[b * L->in + c * n + p], r[c], f);
        }
    vo_vec_free(r, C);
    mats_free(&m);
    return rc;
}

int vo_inv1x1_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)X, (void)frag;
    return solve(L, th, Gx, B, Gy, 1, f);
}

int vo_inv1x1_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    return solve(L, th, Y, B, X, 0, f);
}

void vo_inv1x1_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)x;
    mats m = mats_new(L, th, f);
    size_t C = m.C, n = L->in / C, N = L->in;
    for (size_t i = 0; i < N * N; i++) mpfr_set_zero(J[i], 1);
    for (size_t i = 0; i < C; i++)
        for (size_t k = 0; k < C; k++)
            for (size_t p = 0; p < n; p++) vo_set(J[(i * n + p) + (k * n + p) * N], m.W[i + k * C], f);
    mats_free(&m);
}

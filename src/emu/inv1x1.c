/* inv1x1's MPFR operators in the narrow formats, natively.  The factors
 * Lm, Um and W = P Lm Um are formed by the oracle (vo_inv1x1_factors:
 * O(C³), with exp, which emu.h has no double equivalent for); everything
 * done per position runs on doubles in the oracle's order (oracles/inv1x1.c):
 * the products with fused terms (vijp_emu_fma, emu.h; the oracle's vo_fma,
 * without tf32's operand rounding), and per position its elimination
 * (vijp_emu_ge_solve_d: vo_ge_solve, bit for bit by emu.h's theorem), all
 * positions in one elimination: W is the same at every one, so a singular W
 * leaves every output unwritten, as the oracle's first position does.
 * Other formats take the oracle's route (src/layer/route.h). */
#include "inv1x1.h"
#include "dense.h"
#include "emu.h"
#include "format/mpfr_io.h"
#include "vijp/arith.h"
#include "layer/emu_native.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include <stdlib.h>
#include <string.h>

/* The oracle's factors, as doubles (each C × C, column-major). */
typedef struct {
    size_t C;
    double *Lm, *Um, *W;
} mats;

static mats mats_new(const vijp_layer *L, mpfr_t *th, const vijp_format *f)
{
    size_t C = vijp_inv1x1_channels(L);
    mpfr_t *Lm = vo_vec_new(C * C, f), *Um = vo_vec_new(C * C, f), *W = vo_vec_new(C * C, f);
    vo_inv1x1_factors(L, th, Lm, Um, W, f);
    mats m = {C, vijp_emu_get(Lm, C * C), vijp_emu_get(Um, C * C), vijp_emu_get(W, C * C)};
    vo_vec_free(Lm, C * C), vo_vec_free(Um, C * C), vo_vec_free(W, C * C);
    return m;
}

static void mats_free(mats *m) { free(m->Lm), free(m->Um), free(m->W); }

/* The same from a double-held theta (its C·C + … values into MPFR, exactly:
 * the factors are the oracle's, vo_inv1x1_factors, on them). */
static mats mats_new_d(const vijp_layer *L, const double *th, const vijp_format *f)
{
    size_t P = L->type->param_count(L);
    mpfr_t *t = vo_vec_new(P, f);
    vijp_emu_put(t, th, P);
    mats m = mats_new(L, t, f);
    vo_vec_free(t, P);
    return m;
}

/* v = W u (or Wᵀ u) at every position: the oracle's mix, on doubles. */
static void mix_d(const vijp_layer *L, const mats m, const double *u, size_t B, double *v, int transpose,
                  const vijp_format *f)
{
    size_t C = m.C, n = L->in / C;
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p < n; p++)
            for (size_t i = 0; i < C; i++) {
                double acc = 0;
                for (size_t k = 0; k < C; k++)
                    acc = vijp_emu_fma(transpose ? m.W[k + i * C] : m.W[i + k * C], u[b * L->in + k * n + p], acc, g);
                v[b * L->in + i * n + p] = acc;
            }
}

static void mix(const vijp_layer *L, mpfr_t *th, mpfr_t *U, size_t B, mpfr_t *V, int transpose, const vijp_format *f)
{
    mats m = mats_new(L, th, f);
    double *u = vijp_emu_get(U, L->in * B), *v = vijp_alloc_array(L->in * B, sizeof *v);
    mix_d(L, m, u, B, v, transpose, f);
    vijp_emu_put(V, v, L->in * B);
    free(u), free(v);
    mats_free(&m);
}

void vijp_emu_inv1x1_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    mix(L, th, X, B, Y, 0, f);
}

void vijp_emu_inv1x1_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    mix(L, th, U, B, V, 0, f);
}

void vijp_emu_inv1x1_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)X;
    mix(L, th, Gy, B, Gx, 1, f);
}

/* dM = Pᵀ Σ g xᵀ, then dL = dM Umᵀ below the diagonal, dU′ = Lmᵀ dM on and
 * above it, d log_s = dU′_ii · Um_ii: the oracle's order throughout. */
static void vjp_param_d(const vijp_layer *L, const mats m, const double *x, size_t B, const double *gy, double *gt,
                        const vijp_format *f)
{
    size_t C = m.C, n = L->in / C;
    vijp_emu_grid g = vijp_emu_arith(f);
    double *dM = vijp_alloc_array(C * C, sizeof *dM);
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double acc = 0;
            for (size_t b = 0; b < B; b++)
                for (size_t p = 0; p < n; p++) acc = vijp_emu_fma(gy[b * L->in + (C - 1 - i) * n + p], x[b * L->in + j * n + p], acc, g);
            dM[i + j * C] = acc;
        }
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double s = 0;
            if (i > j)
                for (size_t k = 0; k < C; k++) s = vijp_emu_fma(dM[i + k * C], m.Um[j + k * C], s, g);
            else
                for (size_t k = 0; k < C; k++) s = vijp_emu_fma(m.Lm[k + i * C], dM[k + j * C], s, g);
            if (i == j) s = vijp_emu_mul(s, m.Um[i + i * C], g);
            gt[i + j * C] = s;
        }
    free(dM);
}

void vijp_emu_inv1x1_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                               const vijp_format *f)
{
    mats m = mats_new(L, th, f);
    size_t C = m.C;
    double *x = vijp_emu_get(X, L->in * B), *gy = vijp_emu_get(Gy, L->in * B), *gt = vijp_alloc_array(C * C, sizeof *gt);
    vjp_param_d(L, m, x, B, gy, gt, f);
    vijp_emu_put(Gt, gt, C * C);
    free(x), free(gy), free(gt);
    mats_free(&m);
}

/* ---- forward, jvp, vjp and the parameters' gradient on double-held
 * operands (emu_native, layer/emu_native.h) ---- */

static void native_mix(const vijp_layer *L, const double *th, const double *U, size_t B, double *V, int transpose,
                       const vijp_format *f)
{
    mats m = mats_new_d(L, th, f);
    mix_d(L, m, U, B, V, transpose, f);
    mats_free(&m);
}

static void native_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y,
                           const vijp_format *f)
{
    native_mix(L, th, X, B, Y, 0, f);
}

static void native_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V,
                       const vijp_format *f)
{
    (void)X;
    native_mix(L, th, U, B, V, 0, f);
}

static void native_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx,
                       const vijp_format *f)
{
    (void)X;
    native_mix(L, th, Gy, B, Gx, 1, f);
}

static void native_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                             double *Gt, const vijp_format *f)
{
    mats m = mats_new_d(L, th, f);
    vjp_param_d(L, m, X, B, Gy, Gt, f);
    mats_free(&m);
}

const struct vijp_emu_native vijp_emu_inv1x1_native = {
    .forward = native_forward, .jvp = native_jvp, .vjp = native_vjp, .vjp_param = native_vjp_param,
};

/* Wᵀ z = r (trans) or W z = r at every position of every sample, as one
 * elimination with every position a right-hand side: each sees the
 * operations it would see alone (pivots and multipliers come from W only),
 * and a singular W stops the oracle at its first position, before it
 * writes anything, as it stops this before anything is written. */
static int solve(const vijp_layer *L, mpfr_t *th, mpfr_t *R, size_t B, mpfr_t *Z, int trans, const vijp_format *f)
{
    mats m = mats_new(L, th, f);
    size_t C = m.C, n = L->in / C, cols = n * B;
    double *A = vijp_alloc_array(C * C, sizeof *A), *r = vijp_alloc_array(C * cols, sizeof *r);
    for (size_t i = 0; i < C; i++) /* row-major, as the solve takes it: W's rows, or Wᵀ's (W's columns) */
        for (size_t k = 0; k < C; k++) A[k + i * C] = trans ? m.W[k + i * C] : m.W[i + k * C];
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p < n; p++)
            for (size_t c = 0; c < C; c++) r[c + (b * n + p) * C] = vijp_emu_get1(R[b * L->in + c * n + p]);
    int rc = vijp_emu_ge_solve_d(C, A, r, cols, vijp_emu_arith(f), f->threads);
    for (size_t b = 0; b < B && !rc; b++)
        for (size_t p = 0; p < n; p++)
            for (size_t c = 0; c < C; c++) mpfr_set_d(Z[b * L->in + c * n + p], r[c + (b * n + p) * C], MPFR_RNDN); /* exact */
    free(A), free(r);
    mats_free(&m);
    return rc;
}

int vijp_emu_inv1x1_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                         const vijp_format *f)
{
    (void)frag, (void)X;
    return solve(L, th, Gx, B, Gy, 1, f);
}

int vijp_emu_inv1x1_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    return solve(L, th, Y, B, X, 0, f);
}

/* Oracles of avgpool2d, maxpool1d and maxpool2d (src/layers/pool_window.c
 * for the definitions): each window walked as nested loops over channel,
 * output row and column, then kernel row and column; maxpool's cokernel
 * basis written out as an explicit m × k matrix (the Helmert vectors of
 * each group of outputs selecting one input), its fragment and vijp as
 * products with that matrix. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "vijp/memory.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t C, K, S, R, Q, oR, oQ, T; /* channels, window, stride, grid, output grid, taps */
} pool_geom;

static pool_geom geom(const vijp_layer *L)
{
    const vijp_pool_args *a = vijp_pool_get(L);
    pool_geom g;
    g.C = a->channels, g.K = a->kernel, g.S = a->stride, g.R = a->rows ? a->rows : 1;
    g.Q = L->in / (g.C * g.R);
    g.oR = a->rows ? (g.R - g.K) / g.S + 1 : 1, g.oQ = (g.Q - g.K) / g.S + 1;
    g.T = a->rows ? g.K * g.K : g.K;
    return g;
}

/* The input units of output j's window, in row-major order, into w (T of them). */
static void window(const vijp_layer *L, size_t j, size_t *w)
{
    pool_geom g = geom(L);
    size_t c = j / (g.oR * g.oQ), r = j / g.oQ % g.oR, q = j % g.oQ, t = 0, KH = vijp_pool_get(L)->rows ? g.K : 1;
    for (size_t ky = 0; ky < KH; ky++)
        for (size_t kx = 0; kx < g.K; kx++) w[t++] = c * g.R * g.Q + (g.S * r + ky) * g.Q + g.S * q + kx;
}

/* ---- avgpool2d ---- */

static void avg(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    pool_geom g = geom(L);
    size_t *w = vijp_alloc_array(g.T, sizeof *w);
    mpfr_t taps;
    mpfr_init2(taps, f->prec);
    vo_set_si(taps, (long)g.T, f);
    for (size_t j = 0; j < L->out; j++) {
        window(L, j, w);
        for (size_t b = 0; b < B; b++) {
            mpfr_t *y = &Y[b * L->out + j];
            mpfr_set_zero(*y, 1);
            for (size_t t = 0; t < g.T; t++) vo_add(*y, *y, X[b * L->in + w[t]], f);
            vo_div(*y, *y, taps, f);
        }
    }
    mpfr_clear(taps);
    free(w);
}

void vo_avgpool2d_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    avg(L, X, B, Y, f);
}

void vo_avgpool2d_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th, (void)X;
    avg(L, U, B, V, f);
}

void vo_avgpool2d_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th, (void)x;
    pool_geom g = geom(L);
    size_t m = L->out, *w = vijp_alloc_array(g.T, sizeof *w);
    mpfr_t one, taps;
    mpfr_init2(one, f->prec), mpfr_init2(taps, f->prec);
    vo_set_si(one, 1, f), vo_set_si(taps, (long)g.T, f);
    for (size_t i = 0; i < m * L->in; i++) mpfr_set_zero(J[i], 1);
    for (size_t j = 0; j < m; j++) {
        window(L, j, w);
        for (size_t t = 0; t < g.T; t++) vo_div(J[j + w[t] * m], one, taps, f);
    }
    mpfr_clear(one), mpfr_clear(taps);
    free(w);
}

/* G_x = Jᵀ G_y: each output's share g/T added to its window, outputs in order. */
void vo_avgpool2d_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th, (void)X;
    pool_geom g = geom(L);
    size_t *w = vijp_alloc_array(g.T, sizeof *w);
    mpfr_t share, taps;
    mpfr_init2(share, f->prec), mpfr_init2(taps, f->prec);
    vo_set_si(taps, (long)g.T, f);
    for (size_t i = 0; i < L->in * B; i++) mpfr_set_zero(Gx[i], 1);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) {
            window(L, j, w);
            vo_div(share, Gy[b * L->out + j], taps, f);
            for (size_t t = 0; t < g.T; t++) vo_add(Gx[b * L->in + w[t]], Gx[b * L->in + w[t]], share, f);
        }
    mpfr_clear(share), mpfr_clear(taps);
    free(w);
}

/* Without overlap g_y[j] = Σ_(window j) g_x; with it, the dense oracle's
 * minimum-norm solve on the explicit J (full row rank). */
int vo_avgpool2d_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f)
{
    (void)frag;
    pool_geom g = geom(L);
    size_t M = L->out, N = L->in;
    if (g.S < g.K) {
        mpfr_t *J = vo_vec_new(M * N + M, f);
        vo_avgpool2d_jacobian(L, th, NULL, J, f);
        vijp_layer dl;
        memset(&dl, 0, sizeof dl);
        dl.in = N, dl.out = M;
        int rc = vo_dense_vijp(&dl, J, X, B, Gx, NULL, Gy, f);
        vo_vec_free(J, M * N + M);
        return rc;
    }
    size_t *w = vijp_alloc_array(g.T, sizeof *w);
    for (size_t j = 0; j < M; j++) {
        window(L, j, w);
        for (size_t b = 0; b < B; b++) {
            mpfr_set_zero(Gy[b * M + j], 1);
            for (size_t t = 0; t < g.T; t++) vo_add(Gy[b * M + j], Gy[b * M + j], Gx[b * N + w[t]], f);
        }
    }
    free(w);
    return 0;
}

/* J = (1/T) on each window: 1/T enclosed (exact when T is a power of two). */
int vo_avgpool2d_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)th, (void)x;
    pool_geom g = geom(L);
    size_t m = L->out, *w = vijp_alloc_array(g.T, sizeof *w);
    mpfi_t v;
    mpfi_init2(v, 128);
    mpfi_set_ui(v, 1), mpfi_div_ui(v, v, (unsigned long)g.T);
    double vm, vr;
    vo_interval_mid_rad(v, &vm, &vr);
    memset(mid, 0, m * L->in * sizeof *mid), memset(rad, 0, m * L->in * sizeof *rad);
    for (size_t j = 0; j < m; j++) {
        window(L, j, w);
        for (size_t t = 0; t < g.T; t++) mid[j + w[t] * m] = vm, rad[j + w[t] * m] = vr;
    }
    mpfi_clear(v);
    free(w);
    return 0;
}

/* ---- maxpool1d, maxpool2d ---- */

/* The input each output of sample x selects: the first largest of its
 * window (a NaN replaces the running maximum, as in torch). */
static size_t *argmax(const vijp_layer *L, mpfr_t *x)
{
    pool_geom g = geom(L);
    size_t *sel = vijp_alloc_array(L->out, sizeof *sel), *w = vijp_alloc_array(g.T, sizeof *w);
    for (size_t j = 0; j < L->out; j++) {
        window(L, j, w);
        sel[j] = w[0];
        for (size_t t = 1; t < g.T; t++)
            if (mpfr_greater_p(x[w[t]], x[sel[j]]) || mpfr_nan_p(x[w[t]])) sel[j] = w[t];
    }
    free(w);
    return sel;
}

void vo_maxpool_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in);
        for (size_t j = 0; j < L->out; j++) vo_set(Y[b * L->out + j], X[b * L->in + sel[j]], f);
        free(sel);
    }
}

void vo_maxpool_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in);
        for (size_t j = 0; j < L->out; j++) vo_set(V[b * L->out + j], U[b * L->in + sel[j]], f);
        free(sel);
    }
}

void vo_maxpool_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)th;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in);
        for (size_t i = 0; i < L->in; i++) mpfr_set_zero(Gx[b * L->in + i], 1);
        for (size_t j = 0; j < L->out; j++) vo_add(Gx[b * L->in + sel[j]], Gx[b * L->in + sel[j]], Gy[b * L->out + j], f);
        free(sel);
    }
}

void vo_maxpool_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    size_t m = L->out, *sel = argmax(L, x);
    for (size_t i = 0; i < m * L->in; i++) mpfr_set_zero(J[i], 1);
    for (size_t j = 0; j < m; j++) vo_set_si(J[j + sel[j] * m], 1, f);
    free(sel);
}

/* The cokernel's dimension at one sample: outputs less distinct selections. */
static size_t cokernel_dim(const vijp_layer *L, const size_t *sel)
{
    size_t distinct = 0;
    for (size_t j = 0; j < L->out; j++) {
        int seen = 0;
        for (size_t i = 0; i < j && !seen; i++) seen = sel[i] == sel[j];
        distinct += !seen;
    }
    return L->out - distinct;
}

size_t vo_maxpool_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th;
    size_t k = 0;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in);
        k += cokernel_dim(L, sel);
        free(sel);
    }
    return k;
}

/* Q (m × k): for each group (by its first output, in order), the members
 * m_1 < … < m_g, columns v_l = (e_m1 + … + e_ml − l·e_m(l+1))/√(l(l+1)). */
static void helmert_basis(const vijp_layer *L, const size_t *sel, mpfr_t *Q, const vijp_format *f)
{
    size_t m = L->out, col = 0, *mem = vijp_alloc_array(m, sizeof *mem);
    for (size_t i = 0; i < m * cokernel_dim(L, sel); i++) mpfr_set_zero(Q[i], 1);
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t j = 0; j < m; j++) {
        int first = 1;
        for (size_t i = 0; i < j && first; i++) first = sel[i] != sel[j];
        if (!first) continue;
        size_t g = 0;
        for (size_t i = j; i < m; i++)
            if (sel[i] == sel[j]) mem[g++] = i;
        for (size_t l = 1; l < g; l++, col++) {
            vo_set_si(s, (long)(l * (l + 1)), f), vo_sqrt(s, s, f);
            for (size_t i = 0; i < l; i++) vo_set_si(Q[mem[i] + col * m], 1, f), vo_div(Q[mem[i] + col * m], Q[mem[i] + col * m], s, f);
            vo_set_si(Q[mem[l] + col * m], -(long)l, f), vo_div(Q[mem[l] + col * m], Q[mem[l] + col * m], s, f);
        }
    }
    mpfr_clear(s);
    free(mem);
}

int vo_maxpool_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)th;
    size_t *sel = argmax(L, x);
    helmert_basis(L, sel, Q, f);
    free(sel);
    return 0;
}

/* c = Qᵀ g_y, sample by sample, each coordinate a sum over all m outputs. */
void vo_maxpool_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *f)
{
    (void)th;
    size_t m = L->out, off = 0;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in), k = cokernel_dim(L, sel);
        mpfr_t *Q = vo_vec_new(m * k + 1, f);
        helmert_basis(L, sel, Q, f);
        for (size_t c = 0; c < k; c++) {
            mpfr_set_zero(frag[off + c], 1);
            for (size_t i = 0; i < m; i++) vo_fma(frag[off + c], Q[i + c * m], Gy[b * m + i], frag[off + c], f);
        }
        off += k;
        vo_vec_free(Q, m * k + 1);
        free(sel);
    }
}

/* g_y = g_x J⁺ + frag Qᵀ: J's rows are e_(sel j), equal within a group of g,
 * so (g_x J⁺)_j = g_x[sel j]/g; then Q·c added entry by entry. */
int vo_maxpool_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                    const vijp_format *f)
{
    (void)th;
    size_t m = L->out, off = 0;
    for (size_t b = 0; b < B; b++) {
        size_t *sel = argmax(L, X + b * L->in), k = cokernel_dim(L, sel);
        mpfr_t *Q = vo_vec_new(m * k + 1, f), g;
        mpfr_init2(g, f->prec);
        helmert_basis(L, sel, Q, f);
        for (size_t j = 0; j < m; j++) {
            long members = 0;
            for (size_t i = 0; i < m; i++) members += sel[i] == sel[j];
            vo_set_si(g, members, f);
            vo_div(Gy[b * m + j], Gx[b * L->in + sel[j]], g, f);
            for (size_t c = 0; c < k; c++)
                if (!mpfr_zero_p(Q[j + c * m])) vo_fma(Gy[b * m + j], Q[j + c * m], frag[off + c], Gy[b * m + j], f);
        }
        off += k;
        mpfr_clear(g);
        vo_vec_free(Q, m * k + 1);
        free(sel);
    }
    return 0;
}

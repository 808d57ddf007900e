/* Oracle of attention:DxH[:causal], multi-head self-attention (torch
 * nn.MultiheadAttention, batch_first, eval mode; theta = in_proj_weight[3D,
 * D] C order, in_proj_bias[3D], out_proj.weight[D, D], out_proj.bias[D]).
 * Written from the formulas, one rounded operation at a time in the
 * textbook order: projections as dot products (vo_madd) with the bias added
 * last, scores ⟨q, k⟩·(1/√d), the softmax as exp(s − max s)/Σ, o = Σ P v.
 * The jvp and vjp are the chain rule through those steps (the softmax's
 * Jacobian applied as P ⊙ (t − ⟨P, t⟩)); the Jacobian is L·D jvps of unit
 * vectors; the vijp solves on the rows of J whose out_proj.weight row is
 * not zero (the dense oracle's Gaussian elimination or QR), the other
 * outputs taking the fragment, as src/layers/attention.c states. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t D, H, d, T;
    int causal;
    mpfr_t *q, *k, *v, *o, *P; /* T × D (token-major) four times, then H × T × T */
    mpfr_t scale, t, p;        /* 1/√d; scratch */
} vo_attn;

static size_t n_cache(const vo_attn *a) { return 4 * a->T * a->D + a->H * a->T * a->T; }

static void attn_init(const vijp_layer *L, vo_attn *a, const vijp_format *f)
{
    const vijp_attention_args *g = vijp_attention_get(L);
    a->D = g->dim, a->H = g->heads, a->d = a->D / a->H, a->T = L->in / a->D, a->causal = g->causal;
    a->q = vo_vec_new(n_cache(a), f);
    a->k = a->q + a->T * a->D, a->v = a->k + a->T * a->D, a->o = a->v + a->T * a->D, a->P = a->o + a->T * a->D;
    mpfr_inits2(f->prec, a->scale, a->t, a->p, (mpfr_ptr)0);
    vo_set_si(a->t, (long)a->d, f);
    vo_sqrt(a->t, a->t, f);
    vo_set_si(a->scale, 1, f);
    vo_div(a->scale, a->scale, a->t, f);
}

static void attn_clear(vo_attn *a)
{
    vo_vec_free(a->q, n_cache(a));
    mpfr_clears(a->scale, a->t, a->p, (mpfr_ptr)0);
}

static size_t nkeys(const vo_attn *a, size_t l) { return a->causal ? l + 1 : a->T; }

/* y[l·D + i] = Σ_j W[i·n + j] x[l·n + j] (+ b[i]) for i < rows, every token. */
static void proj(vo_attn *a, size_t rows, size_t n, mpfr_t *W, mpfr_t *b, mpfr_t *x, mpfr_t *y, size_t ys,
                 const vijp_format *f)
{
    for (size_t l = 0; l < a->T; l++)
        for (size_t i = 0; i < rows; i++) {
            mpfr_set_zero(y[l * ys + i], 1);
            for (size_t j = 0; j < n; j++) vo_madd(y[l * ys + i], W[i * n + j], x[l * n + j], a->p, f);
            if (b) vo_add(y[l * ys + i], y[l * ys + i], b[i], f);
        }
}

/* ⟨x_l, y_k⟩ over head h's features into r. */
static void head_dot(vo_attn *a, mpfr_t r, mpfr_t *x, size_t l, mpfr_t *y, size_t k, size_t h, const vijp_format *f)
{
    mpfr_set_zero(r, 1);
    for (size_t t = 0; t < a->d; t++) vo_madd(r, x[l * a->D + h * a->d + t], y[k * a->D + h * a->d + t], a->p, f);
}

static void attend(const vijp_layer *L, vo_attn *a, mpfr_t *th, mpfr_t *x, const vijp_format *f)
{
    size_t D = a->D, T = a->T;
    (void)L;
    proj(a, D, D, th, th + 3 * D * D, x, a->q, D, f);
    proj(a, D, D, th + D * D, th + 3 * D * D + D, x, a->k, D, f);
    proj(a, D, D, th + 2 * D * D, th + 3 * D * D + 2 * D, x, a->v, D, f);
    mpfr_t mx, sum;
    mpfr_inits2(f->prec, mx, sum, (mpfr_ptr)0);
    for (size_t h = 0; h < a->H; h++)
        for (size_t l = 0; l < T; l++) {
            mpfr_t *P = a->P + (h * T + l) * T;
            for (size_t k = 0; k < T; k++) {
                mpfr_set_zero(P[k], 1);
                if (k >= nkeys(a, l)) continue;
                head_dot(a, P[k], a->q, l, a->k, k, h, f);
                vo_mul(P[k], P[k], a->scale, f);
                if (k == 0 || mpfr_greater_p(P[k], mx)) mpfr_set(mx, P[k], MPFR_RNDN);
            }
            mpfr_set_zero(sum, 1);
            for (size_t k = 0; k < nkeys(a, l); k++) {
                vo_sub(P[k], P[k], mx, f);
                vo_exp(P[k], P[k], f);
                vo_add(sum, sum, P[k], f);
            }
            for (size_t k = 0; k < nkeys(a, l); k++) vo_div(P[k], P[k], sum, f);
            for (size_t t = 0; t < a->d; t++) {
                mpfr_t *o = &a->o[l * D + h * a->d + t];
                mpfr_set_zero(*o, 1);
                for (size_t k = 0; k < nkeys(a, l); k++) vo_madd(*o, P[k], a->v[k * D + h * a->d + t], a->p, f);
            }
        }
    mpfr_clears(mx, sum, (mpfr_ptr)0);
}

void vo_attention_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vo_attn a;
    attn_init(L, &a, f);
    size_t D = a.D;
    for (size_t b = 0; b < B; b++) {
        attend(L, &a, th, X + b * L->in, f);
        proj(&a, D, D, th + 3 * D * D + 3 * D, th + 4 * D * D + 3 * D, a.o, Y + b * L->in, D, f);
    }
    attn_clear(&a);
}

/* v = J u at the sample attend() last saw. */
static void jvp1(vo_attn *a, mpfr_t *th, mpfr_t *u, mpfr_t *v, const vijp_format *f)
{
    size_t D = a->D, T = a->T, d = a->d;
    mpfr_t *dq = vo_vec_new(4 * T * D + T, f), *dk = dq + T * D, *dv = dk + T * D, *dout = dv + T * D,
           *ds = dout + T * D, mean, r;
    mpfr_inits2(f->prec, mean, r, (mpfr_ptr)0);
    proj(a, D, D, th, NULL, u, dq, D, f);
    proj(a, D, D, th + D * D, NULL, u, dk, D, f);
    proj(a, D, D, th + 2 * D * D, NULL, u, dv, D, f);
    for (size_t h = 0; h < a->H; h++)
        for (size_t l = 0; l < T; l++) {
            mpfr_t *P = a->P + (h * T + l) * T;
            mpfr_set_zero(mean, 1);
            for (size_t k = 0; k < nkeys(a, l); k++) { /* ds_k = (⟨dq_l, k_k⟩ + ⟨q_l, dk_k⟩)/√d */
                head_dot(a, ds[k], dq, l, a->k, k, h, f);
                head_dot(a, r, a->q, l, dk, k, h, f);
                vo_add(ds[k], ds[k], r, f);
                vo_mul(ds[k], ds[k], a->scale, f);
                vo_madd(mean, P[k], ds[k], a->p, f);
            }
            for (size_t k = 0; k < nkeys(a, l); k++) vo_sub(ds[k], ds[k], mean, f), vo_mul(ds[k], ds[k], P[k], f);
            for (size_t t = 0; t < d; t++) { /* do = Σ_k dP_k v_k + P_k dv_k */
                mpfr_t *o = &dout[l * D + h * d + t];
                mpfr_set_zero(*o, 1);
                for (size_t k = 0; k < nkeys(a, l); k++) {
                    vo_madd(*o, ds[k], a->v[k * D + h * d + t], a->p, f);
                    vo_madd(*o, P[k], dv[k * D + h * d + t], a->p, f);
                }
            }
        }
    proj(a, D, D, th + 3 * D * D + 3 * D, NULL, dout, v, D, f);
    mpfr_clears(mean, r, (mpfr_ptr)0);
    vo_vec_free(dq, 4 * T * D + T);
}

void vo_attention_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    vo_attn a;
    attn_init(L, &a, f);
    for (size_t b = 0; b < B; b++) {
        attend(L, &a, th, X + b * L->in, f);
        jvp1(&a, th, U + b * L->in, V + b * L->in, f);
    }
    attn_clear(&a);
}

/* ga (T × 3D: the cotangents of q, k, v per token) from g (T × D). */
static void back1(vo_attn *a, mpfr_t *th, mpfr_t *g, mpfr_t *ga, const vijp_format *f)
{
    size_t D = a->D, T = a->T, d = a->d, A = 3 * D;
    mpfr_t *Wo = th + 3 * D * D + 3 * D, *go = vo_vec_new(T * D + T, f), *gP = go + T * D, mean, gs, r;
    mpfr_inits2(f->prec, mean, gs, r, (mpfr_ptr)0);
    for (size_t l = 0; l < T; l++) /* go_l = W_oᵀ g_l */
        for (size_t j = 0; j < D; j++) {
            mpfr_set_zero(go[l * D + j], 1);
            for (size_t i = 0; i < D; i++) vo_madd(go[l * D + j], Wo[i * D + j], g[l * D + i], a->p, f);
        }
    for (size_t i = 0; i < T * A; i++) mpfr_set_zero(ga[i], 1);
    for (size_t h = 0; h < a->H; h++)
        for (size_t l = 0; l < T; l++) {
            mpfr_t *P = a->P + (h * T + l) * T;
            mpfr_set_zero(mean, 1);
            for (size_t k = 0; k < nkeys(a, l); k++) {
                head_dot(a, gP[k], go, l, a->v, k, h, f);
                vo_madd(mean, P[k], gP[k], a->p, f);
            }
            for (size_t k = 0; k < nkeys(a, l); k++) {
                vo_sub(gs, gP[k], mean, f); /* gs = P (gP − ⟨P, gP⟩)/√d */
                vo_mul(gs, gs, P[k], f);
                vo_mul(gs, gs, a->scale, f);
                for (size_t t = 0; t < d; t++) {
                    vo_madd(ga[l * A + h * d + t], gs, a->k[k * D + h * d + t], a->p, f);
                    vo_madd(ga[k * A + D + h * d + t], gs, a->q[l * D + h * d + t], a->p, f);
                    vo_madd(ga[k * A + 2 * D + h * d + t], P[k], go[l * D + h * d + t], a->p, f);
                }
            }
        }
    mpfr_clears(mean, gs, r, (mpfr_ptr)0);
    vo_vec_free(go, T * D + T);
}

void vo_attention_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    vo_attn a;
    attn_init(L, &a, f);
    size_t D = a.D, T = a.T, A = 3 * D;
    mpfr_t *ga = vo_vec_new(T * A, f);
    for (size_t b = 0; b < B; b++) {
        attend(L, &a, th, X + b * L->in, f);
        back1(&a, th, Gy + b * L->in, ga, f);
        for (size_t l = 0; l < T; l++) /* gx_l = W_inᵀ ga_l */
            for (size_t j = 0; j < D; j++) {
                mpfr_t *gx = &Gx[b * L->in + l * D + j];
                mpfr_set_zero(*gx, 1);
                for (size_t i = 0; i < A; i++) vo_madd(*gx, th[i * D + j], ga[l * A + i], a.p, f);
            }
    }
    vo_vec_free(ga, T * A);
    attn_clear(&a);
}

void vo_attention_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                            const vijp_format *f)
{
    vo_attn a;
    attn_init(L, &a, f);
    size_t D = a.D, T = a.T, A = 3 * D, bi = 3 * D * D, wo = bi + 3 * D, bo = wo + D * D;
    mpfr_t *ga = vo_vec_new(T * A, f);
    for (size_t i = 0; i < 4 * D * D + 4 * D; i++) mpfr_set_zero(Gt[i], 1);
    for (size_t b = 0; b < B; b++) {
        mpfr_t *x = X + b * L->in, *g = Gy + b * L->in;
        attend(L, &a, th, x, f);
        back1(&a, th, g, ga, f);
        for (size_t l = 0; l < T; l++) {
            for (size_t i = 0; i < A; i++) {
                for (size_t j = 0; j < D; j++) vo_madd(Gt[i * D + j], ga[l * A + i], x[l * D + j], a.p, f);
                vo_add(Gt[bi + i], Gt[bi + i], ga[l * A + i], f);
            }
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j < D; j++) vo_madd(Gt[wo + i * D + j], g[l * D + i], a.o[l * D + j], a.p, f);
                vo_add(Gt[bo + i], Gt[bo + i], g[l * D + i], f);
            }
        }
    }
    vo_vec_free(ga, T * A);
    attn_clear(&a);
}

void vo_attention_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    vo_attn a;
    attn_init(L, &a, f);
    size_t N = L->in;
    mpfr_t *e = vo_vec_new(N, f);
    attend(L, &a, th, x, f);
    for (size_t j = 0; j < N; j++) {
        for (size_t i = 0; i < N; i++) mpfr_set_si(e[i], i == j, MPFR_RNDN);
        jvp1(&a, th, e, J + j * N, f);
    }
    vo_vec_free(e, N);
    attn_clear(&a);
}

/* Row i of out_proj.weight is exactly zero. */
static int dead_row(const vijp_layer *L, mpfr_t *th, size_t i)
{
    size_t D = vijp_attention_get(L)->dim;
    for (size_t j = 0; j < D; j++)
        if (!mpfr_zero_p(th[3 * D * D + 3 * D + i * D + j])) return 0;
    return 1;
}

size_t vo_attention_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)X;
    size_t D = vijp_attention_get(L)->dim, z = 0;
    for (size_t i = 0; i < D; i++) z += (size_t)dead_row(L, th, i);
    return z * (L->in / D) * B;
}

void vo_attention_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                           const vijp_format *f)
{
    (void)X;
    size_t D = vijp_attention_get(L)->dim, c = 0;
    for (size_t o = 0; o < B * L->in; o++)
        if (dead_row(L, th, o % D)) vo_set(frag[c++], Gy[o], f);
}

int vo_attention_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)x, (void)f;
    size_t D = vijp_attention_get(L)->dim, N = L->out, k = vo_attention_fragment_count(L, th, x, 1), c = 0;
    for (size_t i = 0; i < N * k; i++) mpfr_set_zero(Q[i], 1);
    for (size_t o = 0; o < N; o++)
        if (dead_row(L, th, o % D)) mpfr_set_si(Q[o + (c++) * N], 1, MPFR_RNDN);
    return 0;
}

int vo_attention_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f)
{
    size_t N = L->in, D = vijp_attention_get(L)->dim, M = 0, c = 0;
    for (size_t o = 0; o < N; o++) M += !dead_row(L, th, o % D);
    mpfr_t *J = vo_vec_new(N * N, f), *Jr = vo_vec_new(M * N + M, f), *g = vo_vec_new(M + 1, f);
    vijp_layer dl = {.type = L->type, .in = N, .out = M}; /* the dense oracle reads only its widths */
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        vo_attention_jacobian(L, th, X + b * N, J, f);
        for (size_t j = 0; j < N; j++)
            for (size_t o = 0, r = 0; o < N; o++)
                if (!dead_row(L, th, o % D)) mpfr_set(Jr[r++ + j * M], J[o + j * N], MPFR_RNDN);
        if (M) rc = vo_dense_vijp(&dl, Jr, NULL, 1, Gx + b * N, NULL, g, f);
        for (size_t o = 0, r = 0; o < N && !rc; o++)
            mpfr_set(Gy[b * N + o], dead_row(L, th, o % D) ? frag[c++] : g[r++], MPFR_RNDN);
    }
    vo_vec_free(J, N * N), vo_vec_free(Jr, M * N + M), vo_vec_free(g, M + 1);
    return rc;
}

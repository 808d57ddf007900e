/* Oracle of the additive coupling block (src/layers/additive.c for the
 * mathematics): y1 = x1 + F(x2), y2 = x2 + G(y1), with F and G chains of the
 * sub-layers' own MPFR operators, every step rounded in the format.  Written
 * plainly: one sample at a time, every intermediate its own vector. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include <string.h>

/* Sub-layer k of residual function c (0: F or S, 1: G or T), a view. */
static vijp_layer sub(const vijp_layer *L, int c, size_t k) { return *vijp_coupling_sub(L, c, k); }

/* Offset of function c's sub-layer k's parameters within the block's θ (F's
 * first, then G's). */
static size_t offset(const vijp_layer *L, int c, size_t k)
{
    size_t P = 0;
    for (int d = 0; d <= c; d++)
        for (size_t j = 0; j < (d < c ? vijp_coupling_count(L, d) : k); j++) {
            vijp_layer s = sub(L, d, j);
            P += s.type->param_count(&s);
        }
    return P;
}

/* acts[j + 1] = function c's layer j of acts[j], each a new vector of its width. */
static void chain_forward(const vijp_layer *L, int c, mpfr_t *th, mpfr_t **acts, const vijp_format *f)
{
    for (size_t j = 0; j < vijp_coupling_count(L, c); j++) {
        vijp_layer l = sub(L, c, j);
        acts[j + 1] = vo_vec_new(l.out, f);
        l.type->mp->forward(&l, th + offset(L, c, j), acts[j], 1, acts[j + 1], f);
    }
}

static void chain_free(const vijp_layer *L, int c, mpfr_t **acts)
{
    for (size_t j = 0; j < vijp_coupling_count(L, c); j++) vo_vec_free(acts[j + 1], sub(L, c, j).out);
}

/* One sample: its halves, the activations of F (from x2) and G (from y1). */
typedef struct {
    size_t h;
    mpfr_t *x1, *x2, *y1, *y2;
    mpfr_t *aF[VIJP_SUB_MAX + 1], *aG[VIJP_SUB_MAX + 1];
} sample;

static void sample_eval(const vijp_layer *L, mpfr_t *th, mpfr_t *x, sample *s, const vijp_format *f)
{
    size_t h = L->in / 2;
    s->h = h;
    s->x1 = vo_vec_new(h, f), s->x2 = vo_vec_new(h, f), s->y1 = vo_vec_new(h, f), s->y2 = vo_vec_new(h, f);
    for (size_t i = 0; i < h; i++) vo_set(s->x1[i], x[i], f), vo_set(s->x2[i], x[h + i], f);
    s->aF[0] = s->x2;
    chain_forward(L, 0, th, s->aF, f);
    for (size_t i = 0; i < h; i++) vo_add(s->y1[i], s->x1[i], s->aF[vijp_coupling_count(L, 0)][i], f);
    s->aG[0] = s->y1;
    chain_forward(L, 1, th, s->aG, f);
    for (size_t i = 0; i < h; i++) vo_add(s->y2[i], s->x2[i], s->aG[vijp_coupling_count(L, 1)][i], f);
}

static void sample_clear(const vijp_layer *L, sample *s)
{
    chain_free(L, 0, s->aF), chain_free(L, 1, s->aG);
    vo_vec_free(s->x1, s->h), vo_vec_free(s->x2, s->h), vo_vec_free(s->y1, s->h), vo_vec_free(s->y2, s->h);
}

/* out = J_c·u (transpose 0) or u·J_c (transpose 1) through function c from
 * acts; th: the block's parameters; u and out of width h. */
static void chain(const vijp_layer *L, int c, mpfr_t *th, mpfr_t **acts, mpfr_t *u, mpfr_t *out, int transpose,
                  const vijp_format *f)
{
    size_t h = L->in / 2, k = vijp_coupling_count(L, c), w = h;
    mpfr_t *cur = vo_vec_new(h, f);
    for (size_t i = 0; i < h; i++) vo_set(cur[i], u[i], f);
    for (size_t j = 0; j < k; j++) {
        size_t l = transpose ? k - 1 - j : j;
        vijp_layer sl = sub(L, c, l);
        size_t nw = transpose ? sl.in : sl.out;
        mpfr_t *t = vo_vec_new(nw, f);
        if (transpose) sl.type->mp->vjp(&sl, th + offset(L, c, l), acts[l], 1, cur, t, f);
        else sl.type->mp->jvp(&sl, th + offset(L, c, l), acts[l], 1, cur, t, f);
        vo_vec_free(cur, w);
        cur = t, w = nw;
    }
    for (size_t i = 0; i < h; i++) vo_set(out[i], cur[i], f);
    vo_vec_free(cur, w);
}

void vo_additive_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    for (size_t b = 0; b < B; b++) {
        sample s;
        sample_eval(L, th, X + b * n, &s, f);
        for (size_t i = 0; i < h; i++) vo_set(Y[b * n + i], s.y1[i], f), vo_set(Y[b * n + h + i], s.y2[i], f);
        sample_clear(L, &s);
    }
}

void vo_additive_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    mpfr_t *v1 = vo_vec_new(h, f), *v2 = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        sample s;
        sample_eval(L, th, X + b * n, &s, f);
        chain(L, 0, th, s.aF, U + b * n + h, v1, 0, f);
        for (size_t i = 0; i < h; i++) vo_add(v1[i], v1[i], U[b * n + i], f);    /* v1 = u1 + J_F u2 */
        chain(L, 1, th, s.aG, v1, v2, 0, f);
        for (size_t i = 0; i < h; i++) vo_add(v2[i], v2[i], U[b * n + h + i], f); /* v2 = u2 + J_G v1 */
        for (size_t i = 0; i < h; i++) vo_set(V[b * n + i], v1[i], f), vo_set(V[b * n + h + i], v2[i], f);
        sample_clear(L, &s);
    }
    vo_vec_free(v1, h), vo_vec_free(v2, h);
}

/* ḡ1 = g_y1 + g_y2 J_G for sample b (into gb). */
static void total_y1(const vijp_layer *L, mpfr_t *th, sample *s, mpfr_t *Gy, mpfr_t *gb, const vijp_format *f)
{
    size_t h = L->in / 2;
    chain(L, 1, th, s->aG, Gy + h, gb, 1, f);
    for (size_t i = 0; i < h; i++) vo_add(gb[i], gb[i], Gy[i], f);
}

void vo_additive_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    mpfr_t *gb = vo_vec_new(h, f), *t = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        sample s;
        sample_eval(L, th, X + b * n, &s, f);
        total_y1(L, th, &s, Gy + b * n, gb, f);
        chain(L, 0, th, s.aF, gb, t, 1, f);
        for (size_t i = 0; i < h; i++)
            vo_set(Gx[b * n + i], gb[i], f), vo_add(Gx[b * n + h + i], Gy[b * n + h + i], t[i], f);
        sample_clear(L, &s);
    }
    vo_vec_free(gb, h), vo_vec_free(t, h);
}

/* Each layer of function c's parameter gradient for output cotangent g,
 * added into the block's Gt (samples summed in order, as the dense oracle
 * does); th: the block's parameters. */
static void chain_param(const vijp_layer *L, int c, mpfr_t *th, mpfr_t **acts, mpfr_t *g, mpfr_t *Gt,
                        const vijp_format *f)
{
    size_t h = L->in / 2, w = h;
    mpfr_t *cur = vo_vec_new(h, f);
    for (size_t i = 0; i < h; i++) vo_set(cur[i], g[i], f);
    for (size_t l = vijp_coupling_count(L, c); l-- > 0;) {
        vijp_layer sl = sub(L, c, l);
        size_t P = sl.type->param_count(&sl), off = offset(L, c, l);
        if (P) {
            mpfr_t *p = vo_vec_new(P, f);
            sl.type->mp->vjp_param(&sl, th + off, acts[l], 1, cur, p, f);
            for (size_t i = 0; i < P; i++) vo_add(Gt[off + i], Gt[off + i], p[i], f);
            vo_vec_free(p, P);
        }
        mpfr_t *t = vo_vec_new(sl.in, f);
        sl.type->mp->vjp(&sl, th + off, acts[l], 1, cur, t, f);
        vo_vec_free(cur, w);
        cur = t, w = sl.in;
    }
    vo_vec_free(cur, w);
}

/* The block's parameter count: F's (S's) and G's (T's). */
static size_t block_params(const vijp_layer *L) { return offset(L, 1, vijp_coupling_count(L, 1)); }

void vo_additive_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                           const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    for (size_t i = 0; i < block_params(L); i++) mpfr_set_zero(Gt[i], 1);
    mpfr_t *gb = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) { /* samples summed in order, as the dense oracle does */
        sample s;
        sample_eval(L, th, X + b * n, &s, f);
        total_y1(L, th, &s, Gy + b * n, gb, f);
        chain_param(L, 0, th, s.aF, gb, Gt, f);
        chain_param(L, 1, th, s.aG, Gy + b * n + h, Gt, f);
        sample_clear(L, &s);
    }
    vo_vec_free(gb, h);
}

int vo_additive_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                     const vijp_format *f)
{
    (void)frag;
    size_t n = L->in, h = n / 2;
    mpfr_t *t = vo_vec_new(h, f), *gy2 = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        sample s;
        sample_eval(L, th, X + b * n, &s, f);
        chain(L, 0, th, s.aF, Gx + b * n, t, 1, f);
        for (size_t i = 0; i < h; i++) vo_sub(gy2[i], Gx[b * n + h + i], t[i], f); /* g_y2 = g_x2 − g_x1 J_F */
        chain(L, 1, th, s.aG, gy2, t, 1, f);
        for (size_t i = 0; i < h; i++)
            vo_sub(Gy[b * n + i], Gx[b * n + i], t[i], f), vo_set(Gy[b * n + h + i], gy2[i], f); /* g_y1 = g_x1 − g_y2 J_G */
        sample_clear(L, &s);
    }
    vo_vec_free(t, h), vo_vec_free(gy2, h);
    return 0;
}

/* Column j is jvp(e_j): exact 0s and 1s as the tangent. */
static void jacobian_by_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f,
                            void (*jvp)(const vijp_layer *, mpfr_t *, mpfr_t *, size_t, mpfr_t *, mpfr_t *, const vijp_format *))
{
    size_t n = L->in;
    mpfr_t *e = vo_vec_new(n, f);
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < n; i++) vo_set_si(e[i], i == j, f);
        jvp(L, th, x, 1, e, J + j * n, f);
    }
    vo_vec_free(e, n);
}

void vo_additive_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    jacobian_by_jvp(L, th, x, J, f, vo_additive_jvp);
}

int vo_additive_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    mpfr_t *a[VIJP_SUB_MAX + 1];
    a[0] = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < h; i++) vo_set(a[0][i], Y[b * n + i], f); /* y1 */
        chain_forward(L, 1, th, a, f);
        for (size_t i = 0; i < h; i++)
            vo_sub(X[b * n + h + i], Y[b * n + h + i], a[vijp_coupling_count(L, 1)][i], f); /* x2 = y2 − G(y1) */
        chain_free(L, 1, a);
        for (size_t i = 0; i < h; i++) vo_set(a[0][i], X[b * n + h + i], f);
        chain_forward(L, 0, th, a, f);
        for (size_t i = 0; i < h; i++) vo_sub(X[b * n + i], Y[b * n + i], a[vijp_coupling_count(L, 0)][i], f); /* x1 = y1 − F(x2) */
        chain_free(L, 0, a);
    }
    vo_vec_free(a[0], h);
    return 0;
}

/* ---- affine coupling: y1 = x1, y2 = x2 ⊙ s + t, s = scale(S(x1)), t = T(x1) ---- */

typedef struct {
    size_t h;
    mpfr_t *x1, *x2, *s, *ds;
    mpfr_t *aS[VIJP_SUB_MAX + 1], *aT[VIJP_SUB_MAX + 1];
} affine_sample;

/* σ(a + 2) and its derivative σ(z)σ(−z), or exp(a) twice, in the format. */
static void affine_scale(const vijp_layer *L, mpfr_t s, mpfr_t ds, mpfr_t a, const vijp_format *f)
{
    if (vijp_affine_exp_scale(L)) {
        vo_exp(s, a, f), vo_set(ds, s, f);
        return;
    }
    mpfr_t z, e, one, c;
    mpfr_inits2(f->prec, z, e, one, c, (mpfr_ptr)0);
    vo_set_si(one, 2, f), vo_add(z, a, one, f), vo_set_si(one, 1, f);
    mpfr_abs(e, z, MPFR_RNDN), vo_neg(e, e, f), vo_exp(e, e, f); /* e = exp(−|z|) */
    vo_add(c, one, e, f);
    if (mpfr_sgn(z) >= 0) vo_div(s, one, c, f), vo_div(c, e, c, f); /* s = 1/(1+e), c = σ(−z) = e/(1+e) */
    else vo_div(s, e, c, f), vo_div(c, one, c, f);
    vo_mul(ds, s, c, f);
    mpfr_clears(z, e, one, c, (mpfr_ptr)0);
}

static void affine_eval(const vijp_layer *L, mpfr_t *th, mpfr_t *x, affine_sample *s, const vijp_format *f)
{
    size_t h = L->in / 2;
    s->h = h;
    s->x1 = vo_vec_new(h, f), s->x2 = vo_vec_new(h, f), s->s = vo_vec_new(h, f), s->ds = vo_vec_new(h, f);
    for (size_t i = 0; i < h; i++) vo_set(s->x1[i], x[i], f), vo_set(s->x2[i], x[h + i], f);
    s->aS[0] = s->aT[0] = s->x1;
    chain_forward(L, 0, th, s->aS, f);
    chain_forward(L, 1, th, s->aT, f);
    for (size_t i = 0; i < h; i++) affine_scale(L, s->s[i], s->ds[i], s->aS[vijp_coupling_count(L, 0)][i], f);
}

static void affine_clear(const vijp_layer *L, affine_sample *s)
{
    chain_free(L, 0, s->aS), chain_free(L, 1, s->aT);
    vo_vec_free(s->x1, s->h), vo_vec_free(s->x2, s->h), vo_vec_free(s->s, s->h), vo_vec_free(s->ds, s->h);
}

/* out = J_Sᵀ(g ⊙ x2 ⊙ s′) + J_Tᵀ g. */
static void affine_cross(const vijp_layer *L, mpfr_t *th, affine_sample *s, mpfr_t *g, mpfr_t *out, const vijp_format *f)
{
    size_t h = s->h;
    mpfr_t *a = vo_vec_new(h, f), *b = vo_vec_new(h, f);
    for (size_t i = 0; i < h; i++) vo_mul(a[i], g[i], s->x2[i], f), vo_mul(a[i], a[i], s->ds[i], f);
    chain(L, 0, th, s->aS, a, b, 1, f);
    chain(L, 1, th, s->aT, g, out, 1, f);
    for (size_t i = 0; i < h; i++) vo_add(out[i], out[i], b[i], f);
    vo_vec_free(a, h), vo_vec_free(b, h);
}

void vo_affine_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    for (size_t b = 0; b < B; b++) {
        affine_sample s;
        affine_eval(L, th, X + b * n, &s, f);
        for (size_t i = 0; i < h; i++)
            vo_set(Y[b * n + i], s.x1[i], f), vo_fma(Y[b * n + h + i], s.x2[i], s.s[i], s.aT[vijp_coupling_count(L, 1)][i], f);
        affine_clear(L, &s);
    }
}

void vo_affine_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    mpfr_t *a = vo_vec_new(h, f), *c = vo_vec_new(h, f), t;
    mpfr_init2(t, f->prec);
    for (size_t b = 0; b < B; b++) {
        affine_sample s;
        affine_eval(L, th, X + b * n, &s, f);
        chain(L, 0, th, s.aS, U + b * n, a, 0, f);
        chain(L, 1, th, s.aT, U + b * n, c, 0, f);
        for (size_t i = 0; i < h; i++) {
            vo_set(V[b * n + i], U[b * n + i], f);
            vo_mul(t, s.x2[i], s.ds[i], f), vo_mul(t, t, a[i], f), vo_add(t, t, c[i], f);
            vo_fma(V[b * n + h + i], U[b * n + h + i], s.s[i], t, f);
        }
        affine_clear(L, &s);
    }
    mpfr_clear(t);
    vo_vec_free(a, h), vo_vec_free(c, h);
}

void vo_affine_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    mpfr_t *c = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        affine_sample s;
        affine_eval(L, th, X + b * n, &s, f);
        affine_cross(L, th, &s, Gy + b * n + h, c, f);
        for (size_t i = 0; i < h; i++)
            vo_add(Gx[b * n + i], Gy[b * n + i], c[i], f), vo_mul(Gx[b * n + h + i], Gy[b * n + h + i], s.s[i], f);
        affine_clear(L, &s);
    }
    vo_vec_free(c, h);
}

void vo_affine_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    for (size_t i = 0; i < block_params(L); i++) mpfr_set_zero(Gt[i], 1);
    mpfr_t *a = vo_vec_new(h, f);
    for (size_t b = 0; b < B; b++) {
        affine_sample s;
        affine_eval(L, th, X + b * n, &s, f);
        for (size_t i = 0; i < h; i++) vo_mul(a[i], Gy[b * n + h + i], s.x2[i], f), vo_mul(a[i], a[i], s.ds[i], f);
        chain_param(L, 0, th, s.aS, a, Gt, f);
        chain_param(L, 1, th, s.aT, Gy + b * n + h, Gt, f);
        affine_clear(L, &s);
    }
    vo_vec_free(a, h);
}

int vo_affine_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    (void)frag;
    size_t n = L->in, h = n / 2;
    mpfr_t *c = vo_vec_new(h, f), *g2 = vo_vec_new(h, f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        affine_sample s;
        affine_eval(L, th, X + b * n, &s, f);
        for (size_t i = 0; i < h && !rc; i++) {
            if (mpfr_zero_p(s.s[i]) || !mpfr_number_p(s.s[i])) rc = VIJP_ESINGULAR; /* the scale underflowed */
            else vo_div(g2[i], Gx[b * n + h + i], s.s[i], f);
        }
        if (!rc) {
            affine_cross(L, th, &s, g2, c, f);
            for (size_t i = 0; i < h; i++) vo_sub(Gy[b * n + i], Gx[b * n + i], c[i], f), vo_set(Gy[b * n + h + i], g2[i], f);
        }
        affine_clear(L, &s);
    }
    vo_vec_free(c, h), vo_vec_free(g2, h);
    return rc;
}

void vo_affine_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    jacobian_by_jvp(L, th, x, J, f, vo_affine_jvp);
}

int vo_affine_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    size_t n = L->in, h = n / 2;
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        affine_sample s; /* evaluated at y: x1 = y1, so S and T see the right input; s.x2 holds y2 */
        affine_eval(L, th, Y + b * n, &s, f);
        for (size_t i = 0; i < h && !rc; i++) {
            if (mpfr_zero_p(s.s[i]) || !mpfr_number_p(s.s[i])) {
                rc = VIJP_ESINGULAR;
                break;
            }
            vo_set(X[b * n + i], s.x1[i], f);
            vo_sub(X[b * n + h + i], s.x2[i], s.aT[vijp_coupling_count(L, 1)][i], f), vo_div(X[b * n + h + i], X[b * n + h + i], s.s[i], f);
        }
        affine_clear(L, &s);
    }
    return rc;
}

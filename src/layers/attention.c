/* Multi-head self-attention, torch nn.MultiheadAttention(D, H,
 * batch_first=True) called as mha(x, x, x) in eval mode (no dropout, no
 * bias_k, no add_zero_attn), optionally with the causal mask:
 *   attention:DxH[:causal]  over L = width/D tokens of D features (token-major),
 *   q_l = W_q x_l + b_q,  k_l = W_k x_l + b_k,  v_l = W_v x_l + b_v,
 *   per head h (features [h·d, (h+1)·d), d = D/H):
 *     s_lk = ⟨q_l, k_k⟩_h / √d,  P_lk = softmax over the keys k allowed
 *     (all, or k <= l with :causal),  o_l = Σ_k P_lk v_k (per head),
 *   y_l = W_o o_l + b_o.
 * theta = in_proj_weight[3D, D] (C order: rows q, then k, then v),
 * in_proj_bias[3D], out_proj.weight[D, D], out_proj.bias[D]: torch's
 * state_dict in order, 4D² + 4D numbers.
 *
 * Derivatives (per sample, per head; ⊙ the softmax's Jacobian
 * dP_l = P_l ⊙ (ds_l − ⟨P_l, ds_l⟩)):
 *   jvp  ds_lk = (⟨dq_l, k_k⟩ + ⟨q_l, dk_k⟩)/√d,  do_l = Σ_k dP_lk v_k + P_lk dv_k;
 *   vjp  go_l = W_oᵀ g_l, gP_lk = ⟨go_l, v_k⟩, gv_k = Σ_l P_lk go_l,
 *        gs_l = P_l ⊙ (gP_l − ⟨P_l, gP_l⟩), gq_l = Σ_k gs_lk k_k/√d,
 *        gk_k = Σ_l gs_lk q_l/√d, gx_l = W_qᵀ gq_l + W_kᵀ gk_l + W_vᵀ gv_l.
 *
 * The vijp falls back to the dense Jacobian J ((L·D) × (L·D), formed by L·D
 * jvps) and the dense layer's solves on it: LU of Jᵀ when J is square and
 * whole, the minimum-norm QR solve otherwise.  Attention is generically
 * submersive, not always: a row i of out_proj.weight that is exactly zero
 * makes output i of every token the constant b_o[i], so e_i of every token
 * spans part of the cokernel, exactly, and the fragment holds those
 * cotangent entries (token after token, rows ascending); the vijp solves
 * for the other outputs on their rows of J.  Other rank losses (W_o of rank
 * < D without a zero row, a W_v that loses rank, saturated softmaxes) are
 * not recognised: J's LU then reports a singular matrix, or the solve is as
 * ill-conditioned as J.  No inverse. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "vijp/catalogue.h"
#include "args.h"
#include "init.h"
#include "scratch.h"
#include "state.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_dense;

#define ARGS(L) ((const vijp_attention_args *)(L)->state) /* its own state: vijp_attention_get is for other files */
#define DIM(L) (ARGS(L)->dim)
#define TOK(L) ((L)->in / DIM(L))

static int print(const vijp_layer *L, char *buf, size_t size)
{
    return snprintf(buf, size, "attention:%zux%zu%s", DIM(L), ARGS(L)->heads, ARGS(L)->causal ? ":causal" : "");
}

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t D = 0, H = 0;
    int bad = p ? vijp_arg_count(&p, &D) : VIJP_ARG_NOT_A_COUNT;
    if (!bad && *p == 'x') p++, bad = vijp_arg_count(&p, &H);
    else if (!bad) bad = VIJP_ARG_NOT_A_COUNT;
    int causal = !bad && !strcmp(p, ":causal");
    if (bad || (*p && !causal) || D == 0 || H == 0)
        return vijp_fail(err, VIJP_EINVAL, "attention needs its sizes: attention:DxH[:causal] (embed dim D, H heads, "
                         "1 <= H <= D), got 'attention%s%s'%s", arg ? ":" : "", arg ? arg : "",
                         bad == VIJP_ARG_TOO_LARGE ? " (too large)" : "");
    if (D % H)
        return vijp_fail(err, VIJP_EINVAL, "attention:%zux%zu: the embed dim D = %zu is not divisible by the %zu heads",
                         D, H, D, H);
    if (in_width == 0 || in_width % D)
        return vijp_fail(err, VIJP_EDIM, "attention:%zux%zu: the input width %zu is not a multiple of D = %zu%s", D, H,
                         in_width, D, in_width ? "" : " (give --width)");
    if ((double)in_width * (double)in_width > 1e8)
        return vijp_fail(err, VIJP_EDIM, "attention:%zux%zu at width %zu: its vijp forms the %zu x %zu Jacobian; "
                         "widths up to 10000", D, H, in_width, in_width, in_width);
    vijp_state_new(L, sizeof(vijp_attention_args));
    *(vijp_attention_args *)L->state = (vijp_attention_args){.dim = D, .heads = H, .causal = causal};
    L->in = L->out = in_width;
    return 0;
}

static size_t param_count(const vijp_layer *L) { return 4 * DIM(L) * DIM(L) + 4 * DIM(L); }
static unsigned declare(const vijp_layer *L) { (void)L; return 0; } /* submersive generically, not always */

/* Offsets into theta. */
#define W_IN(L) 0
#define B_IN(L) (3 * DIM(L) * DIM(L))
#define W_OUT(L) (3 * DIM(L) * DIM(L) + 3 * DIM(L))
#define B_OUT(L) (4 * DIM(L) * DIM(L) + 3 * DIM(L))

/* torch's _reset_parameters: xavier_uniform_ on in_proj_weight (fan_in D,
 * fan_out 3D: U(±√(6/(4D)))), in_proj_bias 0, out_proj.weight as
 * nn.Linear's kaiming-uniform U(±1/√D), out_proj.bias 0.  That is the
 * default (kaiming-uniform); Gaussian draws N(0, 1/D) for every weight and
 * 0.1·N(0, 1) for the biases; orthogonal and scaled give each of the four
 * D × D weights orthonormal rows (times the gain) and zero biases. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    size_t D = DIM(L);
    memset(th, 0, param_count(L) * sizeof *th);
    if (in.kind == VIJP_INIT_KAIMING_UNIFORM) {
        double a = sqrt(6.0 / (double)(4 * D));
        for (size_t i = 0; i < 3 * D * D; i++) th[W_IN(L) + i] = a * (2 * vijp_rng_uniform(rng) - 1);
        vijp_kaiming_uniform(D * D, D, rng, th + W_OUT(L));
        return 0;
    }
    if (in.kind == VIJP_INIT_GAUSSIAN) {
        double s = 1 / sqrt((double)D);
        for (size_t i = 0; i < 3 * D * D; i++) th[W_IN(L) + i] = s * vijp_rng_normal(rng);
        for (size_t i = 0; i < D * D; i++) th[W_OUT(L) + i] = s * vijp_rng_normal(rng);
        for (size_t i = 0; i < 3 * D; i++) th[B_IN(L) + i] = 0.1 * vijp_rng_normal(rng);
        for (size_t i = 0; i < D; i++) th[B_OUT(L) + i] = 0.1 * vijp_rng_normal(rng);
        return 0;
    }
    double *W = vijp_scratch(D * D);
    int rc = 0;
    for (size_t w = 0; w < 4 && !rc; w++) {
        rc = vijp_orthogonal_init(D, D, rng, in.threads, W);
        double g = in.kind == VIJP_INIT_SCALED ? in.gain : 1;
        double *dst = th + (w < 3 ? W_IN(L) + w * D * D : W_OUT(L));
        for (size_t i = 0; i < D * D; i++) dst[i] = g * W[i];
    }
    free(W);
    return rc;
}

/* One sample's intermediate values, and the magnitudes of the terms each
 * is formed from (for the error bounds below): qa = |W_q||x| + |b_q| >= |q|,
 * ka, va likewise, oa = Σ_k P_lk va_k (per head). */
typedef struct {
    size_t D, H, d, T;
    int causal;
    double scale;          /* 1/√d */
    double *q, *k, *v, *o; /* T × D each, token-major */
    double *qa, *ka, *va, *oa;
    double *P; /* H × T × T: P[(h·T + l)·T + k], 0 where masked */
} attn_cache;

static void cache_init(const vijp_layer *L, attn_cache *c)
{
    c->D = DIM(L), c->H = ARGS(L)->heads, c->d = c->D / c->H, c->T = TOK(L), c->causal = ARGS(L)->causal;
    c->scale = 1 / sqrt((double)c->d);
    size_t n = c->T * c->D;
    c->q = vijp_scratch(8 * n + c->H * c->T * c->T);
    c->k = c->q + n, c->v = c->k + n, c->o = c->v + n, c->qa = c->o + n, c->ka = c->qa + n, c->va = c->ka + n;
    c->oa = c->va + n, c->P = c->oa + n;
}

static void cache_free(attn_cache *c) { free(c->q); }

static size_t keys(const attn_cache *c, size_t l) { return c->causal ? l + 1 : c->T; }

/* y_l[i] = b[i] + Σ_j W[i·n + j] x_l[j] for every token (W row-major rows × n);
 * with magnitudes, |b[i]| + Σ_j |W[i·n + j]| x_l[j] (x >= 0 then). */
static void project(size_t T, size_t rows, size_t n, const double *W, const double *b, const double *x, double *y,
                    int magnitudes)
{
    for (size_t l = 0; l < T; l++)
        for (size_t i = 0; i < rows; i++) {
            double s = b ? (magnitudes ? fabs(b[i]) : b[i]) : 0;
            for (size_t j = 0; j < n; j++) s += (magnitudes ? fabs(W[i * n + j]) : W[i * n + j]) * x[l * n + j];
            y[l * rows + i] = s;
        }
}

/* q, k, v, P and o at one sample x, and the magnitudes.  With only |x|
 * known (ones), P is replaced by its bound 1 on every allowed key, and only
 * the magnitudes mean anything. */
static void attend(const vijp_layer *L, const double *th, const double *x, attn_cache *c, int ones)
{
    size_t D = c->D, T = c->T, d = c->d;
    const double *W = th + W_IN(L), *b = th + B_IN(L);
    double *ax = vijp_scratch(T * D);
    for (size_t i = 0; i < T * D; i++) ax[i] = fabs(x[i]);
    double *dst[3] = {c->q, c->k, c->v}, *mag[3] = {c->qa, c->ka, c->va};
    for (int w = 0; w < 3; w++) {
        project(T, D, D, W + w * D * D, b + w * D, x, dst[w], 0);
        project(T, D, D, W + w * D * D, b + w * D, ax, mag[w], 1);
    }
    free(ax);
    for (size_t h = 0; h < c->H; h++)
        for (size_t l = 0; l < T; l++) {
            double *p = c->P + (h * T + l) * T, mx = -INFINITY, sum = 0;
            for (size_t k = 0; k < T; k++) {
                double s = 0;
                for (size_t t = 0; t < d; t++) s += c->q[l * D + h * d + t] * c->k[k * D + h * d + t];
                p[k] = k < keys(c, l) ? s * c->scale : 0;
                if (k < keys(c, l) && p[k] > mx) mx = p[k];
            }
            for (size_t k = 0; k < keys(c, l); k++) p[k] = ones ? 1 : exp(p[k] - mx), sum += p[k];
            for (size_t k = 0; k < keys(c, l) && !ones; k++) p[k] /= sum;
            for (size_t t = 0; t < d; t++) {
                double s = 0, sa = 0;
                for (size_t k = 0; k < keys(c, l); k++)
                    s += p[k] * c->v[k * D + h * d + t], sa += p[k] * c->va[k * D + h * d + t];
                c->o[l * D + h * d + t] = s, c->oa[l * D + h * d + t] = sa;
            }
        }
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    attn_cache c;
    cache_init(L, &c);
    for (size_t b = 0; b < B; b++) {
        attend(L, th, X + b * L->in, &c, 0);
        project(c.T, c.D, c.D, th + W_OUT(L), th + B_OUT(L), c.o, Y + b * L->in, 0);
    }
    cache_free(&c);
}

/* V = J U at one sample whose cache c is filled.  With magnitudes (U >= 0),
 * the same chain on the magnitudes of its terms: |W|, qa, ka, va, and the
 * softmax's P ⊙ (t − ⟨P, t⟩) as P ⊙ (t + ⟨P, t⟩); V is then a majorant of
 * the terms every entry of J U is formed from. */
static void jvp1(const vijp_layer *L, const double *th, const attn_cache *c, const double *u, double *v, double *work,
                 int mg)
{
    size_t D = c->D, T = c->T, d = c->d;
    double *dq = work, *dk = dq + T * D, *dv = dk + T * D, *dout = dv + T * D, *ds = dout + T * D;
    const double *W = th + W_IN(L), *q = mg ? c->qa : c->q, *k = mg ? c->ka : c->k, *vv = mg ? c->va : c->v;
    project(T, D, D, W, NULL, u, dq, mg);
    project(T, D, D, W + D * D, NULL, u, dk, mg);
    project(T, D, D, W + 2 * D * D, NULL, u, dv, mg);
    for (size_t h = 0; h < c->H; h++)
        for (size_t l = 0; l < T; l++) {
            const double *p = c->P + (h * T + l) * T;
            double mean = 0;
            for (size_t kk = 0; kk < keys(c, l); kk++) {
                double s = 0;
                for (size_t t = 0; t < d; t++)
                    s += dq[l * D + h * d + t] * k[kk * D + h * d + t] + q[l * D + h * d + t] * dk[kk * D + h * d + t];
                ds[kk] = s * c->scale, mean += p[kk] * ds[kk];
            }
            if (mg) mean = -mean;
            for (size_t t = 0; t < d; t++) {
                double s = 0;
                for (size_t kk = 0; kk < keys(c, l); kk++)
                    s += p[kk] * (ds[kk] - mean) * vv[kk * D + h * d + t] + p[kk] * dv[kk * D + h * d + t];
                dout[l * D + h * d + t] = s;
            }
        }
    project(T, D, D, th + W_OUT(L), NULL, dout, v, mg);
}

static size_t work_size(const attn_cache *c) { return 4 * c->T * c->D + c->T; }

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                double *V)
{
    (void)cx;
    attn_cache c;
    cache_init(L, &c);
    double *work = vijp_scratch(work_size(&c));
    for (size_t b = 0; b < B; b++) {
        attend(L, th, X + b * L->in, &c, 0);
        jvp1(L, th, &c, U + b * L->in, V + b * L->in, work, 0);
    }
    free(work), cache_free(&c);
}

/* At one sample with c filled: ga (T × 3D, the cotangent of [q k v] per
 * token) from g (T × D), and gx = Σ W_inᵀ ga per token when gx is given.
 * With magnitudes (g >= 0), the majorant of ga's terms, as jvp1's. */
static void backward1(const vijp_layer *L, const double *th, const attn_cache *c, const double *g, double *ga,
                      double *gx, double *work, int mg)
{
    size_t D = c->D, T = c->T, d = c->d, A = 3 * D;
    double *go = work, *gP = go + T * D;
    const double *Wo = th + W_OUT(L), *W = th + W_IN(L), *q = mg ? c->qa : c->q, *k = mg ? c->ka : c->k,
                 *v = mg ? c->va : c->v;
    for (size_t l = 0; l < T; l++) /* go_l = W_oᵀ g_l */
        for (size_t j = 0; j < D; j++) {
            double s = 0;
            for (size_t i = 0; i < D; i++) s += (mg ? fabs(Wo[i * D + j]) : Wo[i * D + j]) * g[l * D + i];
            go[l * D + j] = s;
        }
    memset(ga, 0, T * A * sizeof *ga);
    for (size_t h = 0; h < c->H; h++)
        for (size_t l = 0; l < T; l++) {
            const double *p = c->P + (h * T + l) * T;
            double mean = 0;
            for (size_t kk = 0; kk < keys(c, l); kk++) {
                double s = 0;
                for (size_t t = 0; t < d; t++) s += go[l * D + h * d + t] * v[kk * D + h * d + t];
                gP[kk] = s, mean += p[kk] * s;
            }
            if (mg) mean = -mean;
            for (size_t kk = 0; kk < keys(c, l); kk++) {
                double gs = p[kk] * (gP[kk] - mean) * c->scale;
                for (size_t t = 0; t < d; t++) {
                    ga[l * A + h * d + t] += gs * k[kk * D + h * d + t];              /* gq_l */
                    ga[kk * A + D + h * d + t] += gs * q[l * D + h * d + t];          /* gk_k */
                    ga[kk * A + 2 * D + h * d + t] += p[kk] * go[l * D + h * d + t];  /* gv_k */
                }
            }
        }
    if (gx)
        for (size_t l = 0; l < T; l++)
            for (size_t j = 0; j < D; j++) {
                double s = 0;
                for (size_t i = 0; i < A; i++) s += W[i * D + j] * ga[l * A + i];
                gx[l * D + j] = s;
            }
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gy,
                double *Gx)
{
    (void)cx;
    attn_cache c;
    cache_init(L, &c);
    double *ga = vijp_scratch(3 * c.T * c.D), *work = vijp_scratch(c.T * c.D + c.T);
    for (size_t b = 0; b < B; b++) {
        attend(L, th, X + b * L->in, &c, 0);
        backward1(L, th, &c, Gy + b * L->in, ga, Gx + b * L->in, work, 0);
    }
    free(ga), free(work), cache_free(&c);
}

/* dW_in = Σ ga_l x_lᵀ, db_in = Σ ga_l, dW_o = Σ g_l o_lᵀ, db_o = Σ g_l, over
 * the samples and tokens in that order. */
static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx;
    attn_cache c;
    cache_init(L, &c);
    size_t D = c.D, T = c.T, A = 3 * D;
    double *ga = vijp_scratch(A * T), *work = vijp_scratch(T * D + T);
    memset(Gt, 0, param_count(L) * sizeof *Gt);
    for (size_t b = 0; b < B; b++) {
        const double *x = X + b * L->in, *g = Gy + b * L->in;
        attend(L, th, x, &c, 0);
        backward1(L, th, &c, g, ga, NULL, work, 0);
        for (size_t l = 0; l < T; l++) {
            for (size_t i = 0; i < A; i++) {
                for (size_t j = 0; j < D; j++) Gt[W_IN(L) + i * D + j] += ga[l * A + i] * x[l * D + j];
                Gt[B_IN(L) + i] += ga[l * A + i];
            }
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j < D; j++) Gt[W_OUT(L) + i * D + j] += g[l * D + i] * c.o[l * D + j];
                Gt[B_OUT(L) + i] += g[l * D + i];
            }
        }
    }
    free(ga), free(work), cache_free(&c);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    size_t N = L->in;
    attn_cache c;
    cache_init(L, &c);
    double *work = vijp_scratch(work_size(&c)), *e = vijp_scratch(N);
    attend(L, th, x, &c, 0);
    for (size_t j = 0; j < N; j++) {
        e[j] = 1;
        jvp1(L, th, &c, e, J + j * N, work, 0);
        e[j] = 0;
    }
    free(work), free(e), cache_free(&c);
}

/* ---- the cokernel: rows of out_proj.weight that are exactly zero ---- */

/* How many rows of W_o are zero, and (when live is given) which outputs of
 * a token are not: live[0 … D − zeros). */
static size_t zero_rows(const vijp_layer *L, const double *th, size_t *live)
{
    size_t D = DIM(L), z = 0, nl = 0;
    for (size_t i = 0; i < D; i++) {
        int zero = 1;
        for (size_t j = 0; j < D; j++) zero &= th[W_OUT(L) + i * D + j] == 0;
        if (zero) z++;
        else if (live) live[nl++] = i;
    }
    return z;
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)X;
    return zero_rows(L, th, NULL) * TOK(L) * B;
}

/* c = g at the dead outputs, token after token, rows ascending. */
static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)X;
    size_t D = DIM(L), n = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < TOK(L); l++)
            for (size_t i = 0; i < D; i++) {
                int zero = 1;
                for (size_t j = 0; j < D; j++) zero &= th[W_OUT(L) + i * D + j] == 0;
                if (zero) frag[n++] = Gy[b * L->in + l * D + i];
            }
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)x, (void)err;
    size_t N = L->out, k = fragment_count(L, cx, th, x, 1);
    double *e = vijp_scratch(N), *c = vijp_scratch(k + 1);
    memset(Q, 0, N * k * sizeof *Q);
    for (size_t i = 0; i < N; i++) { /* column j of Q is e_i for the i the fragment reads j-th */
        e[i] = 1;
        fragment(L, cx, th, x, 1, e, c);
        for (size_t j = 0; j < k; j++) Q[i + j * N] = c[j];
        e[i] = 0;
    }
    free(e), free(c);
    return 0;
}

/* g_y = g_x J_r⁺ on the live outputs (J_r: their rows of J), the fragment
 * at the dead ones: the dense layer's vijp on J_r, one sample at a time. */
static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    size_t N = L->in, D = DIM(L), T = TOK(L), z = zero_rows(L, th, NULL), nl = D - z, M = nl * T;
    size_t *live = vijp_alloc_array(D, sizeof *live);
    zero_rows(L, th, live);
    double *J = vijp_scratch(N * N), *Jr = vijp_scratch(M * N + M), *g = vijp_scratch(M + 1);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        double *gy = Gy + b * N;
        jacobian(L, cx, th, X + b * N, J);
        for (size_t j = 0; j < N; j++)
            for (size_t l = 0; l < T; l++)
                for (size_t r = 0; r < nl; r++) Jr[l * nl + r + j * M] = J[l * D + live[r] + j * N];
        vijp_layer dl = {.type = &vijp_layer_dense, .in = N, .out = M};
        if (M) rc = vijp_layer_dense.d->vijp(&dl, cx, Jr, NULL, 1, Gx + b * N, NULL, g, err);
        if (rc) break;
        for (size_t l = 0, c = 0; l < T; l++)
            for (size_t i = 0, r = 0; i < D; i++)
                gy[l * D + i] = r < nl && live[r] == i ? g[l * nl + r++] : frag[b * z * T + c++];
    }
    free(live), free(J), free(Jr), free(g);
    return rc ? vijp_fail(err, rc, "attention vijp: its Jacobian has lost rank beyond the zero rows of "
                          "out_proj.weight") : 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_attention_forward, .jvp = vo_attention_jvp, .vjp = vo_attention_vjp,
    .vjp_param = vo_attention_vjp_param, .fragment_count = vo_attention_fragment_count,
    .fragment = vo_attention_fragment, .vijp = vo_attention_vijp, .jacobian = vo_attention_jacobian,
    .cokernel = vo_attention_cokernel,
};

/* ---- the error-bound contract (vijp_layer_bounds; tests/t-layers.c) ---- */

/* The contract's ulps K: the battery bounds an operator's entry by
 * (n + K)·u times M (below) applied to its input, n = L·D. */
#define ATTN_ULPS 6.0

/* S = max over heads, queries l and allowed keys k of ⟨qa_l, ka_k⟩_h/√d:
 * the size of a score's terms, which a score's rounding errors scale with. */
static double score_terms(const attn_cache *c)
{
    double S = 0;
    for (size_t h = 0; h < c->H; h++)
        for (size_t l = 0; l < c->T; l++)
            for (size_t k = 0; k < keys(c, l); k++) {
                double s = 0;
                for (size_t t = 0; t < c->d; t++) s += c->qa[l * c->D + h * c->d + t] * c->ka[k * c->D + h * c->d + t];
                S = fmax(S, s * c->scale);
            }
    return S;
}

/* The relative error, in units of u, of every operator's result against the
 * magnitudes of its terms (jvp1 and backward1 with magnitudes; the
 * standard model, Higham §3.1, one (1 + δ) per operation along the chain):
 *   q, k, v: a dot product of D terms and a bias: D + 1;
 *   a score s = ⟨q, k⟩_h/√d: d + 1 of its own, and its factors' 2(D + 1),
 *     all relative to S, so |Δs| <= (2D + d + 3)·u·S;
 *   e = exp(s − max s): |Δs| twice (s and the max), the subtraction's
 *     rounding u|s − max s| <= 2uS, and exp's own (glibc: under 1 ulp):
 *     rel(e) <= (4D + 2d + 8)·u·S + 2u;
 *   P = e/Σe: the sum of T positive terms (T), the division (1), and two
 *     rel(e): rel(P) <= (T + 5)u + (8D + 4d + 16)·u·S;
 *   forward o = Σ P v (T + 1, with v's D + 1 and rel(P)), y = W_o o + b_o
 *     (D + 1): 2D + 2T + 8 + (8D + 4d + 16)S;
 *   jvp and vjp add their own chain: the tangent's or cotangent's
 *     projection (D), the score's derivative (2d + 2), ⟨P, t⟩ (T), the
 *     subtraction and the product with P (2), the sum over keys (2T), the
 *     last projection (D), q's, k's or v's error (D + 1), and P twice:
 *     4D + 2d + 6T + 16 + (16D + 8d + 32)·S.
 * The larger, the jvp's and vjp's, covers the forward too. */
static double chain_ulps(const attn_cache *c, double S)
{
    double D = (double)c->D, d = (double)c->d, T = (double)c->T;
    return 4 * D + 2 * d + 6 * T + 16 + (16 * D + 8 * d + 32) * S;
}

/* M >= |J| at x: the magnitudes of the terms J's entries are formed from
 * (jvp1 on magnitudes, column by column), which the softmax's derivative
 * P ⊙ (t − ⟨P, t⟩) lets cancel while their errors do not; each row l·D + i
 * raised by r_i/‖x‖₁, r_i = max(0, (|W_o| oa)_i − (M|x|)_i), so that M|x|
 * also covers the forward's terms through the biases b_q, b_k, b_v; and the
 * whole scaled by ρ = max(1, 1.01·chain_ulps/(n + K)), so that the battery's
 * (n + K)·u·M holds the chain's error (chain_ulps, above) rather than a
 * single dot product's.  Computed in double: the 1.01 covers its own
 * rounding. */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    size_t N = L->in, D = DIM(L);
    attn_cache c;
    cache_init(L, &c);
    double *work = vijp_scratch(work_size(&c)), *e = vijp_scratch(N), *fwd = vijp_scratch(N), xn = 0;
    attend(L, th, x, &c, 0);
    for (size_t j = 0; j < N; j++) {
        e[j] = 1;
        jvp1(L, th, &c, e, M + j * N, work, 1);
        e[j] = 0;
        xn += fabs(x[j]);
    }
    project(c.T, D, D, th + W_OUT(L), NULL, c.oa, fwd, 1);
    double rho = fmax(1, 1.01 * chain_ulps(&c, score_terms(&c)) / ((double)N + ATTN_ULPS));
    for (size_t i = 0; i < N; i++) {
        double mx = 0;
        for (size_t j = 0; j < N; j++) mx += M[i + j * N] * fabs(x[j]);
        double r = xn > 0 && fwd[i] > mx ? (fwd[i] - mx) / xn : 0;
        for (size_t j = 0; j < N; j++) M[i + j * N] = rho * (M[i + j * N] + r);
    }
    free(work), free(e), free(fwd), cache_free(&c);
}

/* vjp_param's entries are sums over the T·B tokens of products, each sum
 * within γ_(TB+1) of its terms (Higham eq. 3.5), and their factors carry
 * errors of their own: o within chain_ulps of oa, ga within chain_ulps of
 * the majorant backward1 gives from |G|.  Only |X| is known here, so P is
 * bounded by 1 on every allowed key (attend with ones): the magnitudes
 * grow, never shrink.  Per entry:
 *   dW_o[i, j]: (TB + 1 + c)·u·Σ |g_li| oa_lj,   db_o[i]: (TB + 1)·u·Σ |g_li|;
 *   dW_in[i, j]: (TB + 1 + c)·u·Σ ga_li |x_lj|,  db_in[i]: (TB + 1 + c)·u·Σ ga_li. */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bound)
{
    attn_cache c;
    cache_init(L, &c);
    size_t D = c.D, T = c.T, A = 3 * D;
    double *ga = vijp_scratch(A * T), *work = vijp_scratch(T * D + T);
    for (size_t b = 0; b < B; b++) {
        const double *x = aX + b * L->in, *g = aG + b * L->in;
        attend(L, th, x, &c, 1);
        backward1(L, th, &c, g, ga, NULL, work, 1);
        double e = 1.01 * ((double)(T * B + 1) + chain_ulps(&c, score_terms(&c))) * u, e0 = 1.01 * (double)(T * B + 1) * u;
        for (size_t l = 0; l < T; l++) {
            for (size_t i = 0; i < A; i++) {
                for (size_t j = 0; j < D; j++) bound[W_IN(L) + i * D + j] += e * ga[l * A + i] * x[l * D + j];
                bound[B_IN(L) + i] += e * ga[l * A + i];
            }
            for (size_t i = 0; i < D; i++) {
                for (size_t j = 0; j < D; j++) bound[W_OUT(L) + i * D + j] += e * g[l * D + i] * c.oa[l * D + j];
                bound[B_OUT(L) + i] += e0 * g[l * D + i];
            }
        }
    }
    free(ga), free(work), cache_free(&c);
}

static size_t bias_index(const vijp_layer *L, size_t i) { return B_OUT(L) + i % DIM(L); }

const vijp_layer_type vijp_layer_attention = {
    .name = "attention",
    .syntax = "attention:DxH[:causal] (torch nn.MultiheadAttention, self-attention over width/D tokens of D "
              "features, H heads)",
    .parse = parse, .state_size = sizeof(vijp_attention_args), .print = print, .param_count = param_count,
    .init = init, .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .bias_index = bias_index, .jacobian_majorant = jacobian_majorant, .vjp_param_bound = vjp_param_bound,
    .bounds = {.ulps = ATTN_ULPS},
};

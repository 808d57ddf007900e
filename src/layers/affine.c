/* Affine coupling (RealNVP, Dinh et al. 2017; Glow, Kingma & Dhariwal 2018).
 * The input splits into halves x = (x1, x2) of width h = n/2 and
 *   y1 = x1,   y2 = x2 ⊙ s + t,   s = scale(S(x1)),  t = T(x1),
 * where S and T are chains of existing layers at half width with separate
 * parameters (default dense:h + tanh), and scale(a) = σ(a + 2) (Glow's
 * choice, the default, "affine" or "affine:sigmoid+ITEMS") or exp(a)
 * ("affine:exp+ITEMS").  Parameters: S's layers, then T's.
 *   J = [[I, 0], [diag(x2 ⊙ s′) J_S + J_T, diag(s)]],
 * block-triangular with diagonal (1, s): submersive and invertible while
 * s ≠ 0, which holds analytically; numerically s underflows to 0 for very
 * negative arguments (σ(a + 2) below a ≈ −747 in double), and the vijp then
 * refuses (DESIGN §6: "yes if scales ≠ 0").
 *   vijp:    g_y2 = g_x2 / s,  g_y1 = g_x1 − c(g_y2),
 *   vjp:     g_x2 = g_y2 ⊙ s,  g_x1 = g_y1 + c(g_y2),
 *   c(g) = J_Sᵀ(g ⊙ x2 ⊙ s′) + J_Tᵀ g   (vjps of S and T only, no solve);
 *   inverse: x1 = y1,  x2 = (y2 − t) / s.
 * vjp and vijp form c by the same code, so vjp(vijp(g)) repeats it bit for
 * bit (tests/t-coupling.c uses that). */
#include "chain.h"
#include "kernels/dual.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include "layer/route.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXP_SCALE(L) (((const vijp_chain_state *)(L)->state)->exp_scale) /* its own state, read per unit */

static size_t param_count(const vijp_layer *L) { return vijp_chain_param_count(L); }
static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (in_width < 2 || in_width % 2)
        return vijp_fail(err, VIJP_EDIM, "affine splits its input into two halves: the width must be even and >= 2 "
                         "(got %zu%s)", in_width, in_width ? "" : ": give --width");
    char def[32];
    snprintf(def, sizeof def, "dense:%zu+tanh", in_width / 2);
    const char *items = arg && *arg ? arg : def;
    int exp_scale = 0;
    if (!strncmp(items, "exp", 3) && (items[3] == '+' || !items[3])) exp_scale = 1, items += 3;
    else if (!strncmp(items, "sigmoid", 7) && (items[7] == '+' || !items[7])) items += 7;
    if (*items == '+') items++;
    if (!*items) items = def;
    int rc = vijp_chain_parse(L, items, in_width / 2, "affine", err);
    if (rc) return rc;
    L->in = L->out = in_width;
    ((vijp_chain_state *)L->state)->exp_scale = exp_scale;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    int k = snprintf(buf, size, "affine:%s+", EXP_SCALE(L) ? "exp" : "sigmoid");
    return k + vijp_chain_print(L, buf + ((size_t)k < size ? (size_t)k : size), (size_t)k < size ? size - (size_t)k : 0);
}

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta) { return vijp_chain_init(L, in, rng, theta); }

/* s = scale(a) and s′, as in a dual evaluation. */
static void scale(const vijp_layer *L, double a, double *s, double *ds)
{
    if (EXP_SCALE(L)) {
        *s = *ds = exp(a);
    } else {
        vijp_dual v = dual_sigmoid((vijp_dual){a + 2, 1});
        *s = v.v, *ds = v.d;
    }
}

typedef struct {
    size_t h, B;
    double *x1, *x2, *s, *ds, *t2, *t3; /* t2, t3: scratch, h × B each */
    double *aS[VIJP_SUB_MAX + 1], *aT[VIJP_SUB_MAX + 1]; /* both from x1 */
    double *block;
} state;

/* Chain c's activations after its layers, each its layer's output width × B, from p on. */
static double *acts_at(const vijp_layer *L, int c, double **acts, double *p, size_t B)
{
    for (size_t j = 1; j <= vijp_chain_n(L, c); j++) acts[j] = p, p += vijp_chain_sub(L, c, j - 1)->out * B;
    return p;
}

static void evaluate(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, state *st)
{
    size_t h = L->in / 2, len = h * B;
    st->h = h, st->B = B;
    st->block = vijp_scratch(6 * len + (vijp_chain_units(L, 0) + vijp_chain_units(L, 1)) * B);
    double *p = st->block;
    st->x1 = p, st->x2 = p + len, st->s = p + 2 * len, st->ds = p + 3 * len, st->t2 = p + 4 * len, st->t3 = p + 5 * len;
    st->aS[0] = st->aT[0] = st->x1;
    acts_at(L, 1, st->aT, acts_at(L, 0, st->aS, p + 6 * len, B), B);
    vijp_halves_split(h, B, X, st->x1, st->x2);
    vijp_chain_forward(L, 0, cx, th, st->aS, B);
    vijp_chain_forward(L, 1, cx, th, st->aT, B);
    for (size_t i = 0; i < len; i++) scale(L, st->aS[vijp_chain_n(L, 0)][i], &st->s[i], &st->ds[i]);
}

/* out = c(g) = J_Sᵀ(g ⊙ x2 ⊙ s′) + J_Tᵀ g. */
static void cross(const vijp_layer *L, const vijp_kctx *cx, const double *th, state *st, const double *g, double *out)
{
    size_t len = st->h * st->B;
    for (size_t i = 0; i < len; i++) st->t2[i] = g[i] * st->x2[i] * st->ds[i];
    vijp_chain_apply(L, 0, cx, th, st->aS, st->B, st->t2, st->t3, 1);
    vijp_chain_apply(L, 1, cx, th, st->aT, st->B, g, out, 1);
    for (size_t i = 0; i < len; i++) out[i] += st->t3[i];
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    state st;
    evaluate(L, cx, th, X, B, &st);
    size_t len = st.h * B;
    const double *t = st.aT[vijp_chain_n(L, 1)];
    double *y2 = vijp_scratch(len);
    cx->k->affine_d(len, st.x2, st.s, t, y2);
    vijp_halves_join(st.h, B, st.x1, y2, Y);
    free(y2), free(st.block);
}

/* v1 = u1,  v2 = u2 ⊙ s + x2 ⊙ s′ ⊙ (J_S u1) + J_T u1. */
static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    state st;
    evaluate(L, cx, th, X, B, &st);
    size_t len = st.h * B;
    double *u1 = vijp_scratch(3 * len), *u2 = u1 + len, *v2 = u1 + 2 * len;
    vijp_halves_split(st.h, B, U, u1, u2);
    vijp_chain_apply(L, 0, cx, th, st.aS, B, u1, st.t2, 0);
    vijp_chain_apply(L, 1, cx, th, st.aT, B, u1, st.t3, 0);
    for (size_t i = 0; i < len; i++) v2[i] = u2[i] * st.s[i] + st.x2[i] * st.ds[i] * st.t2[i] + st.t3[i];
    vijp_halves_join(st.h, B, u1, v2, V);
    free(u1), free(st.block);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    state st;
    evaluate(L, cx, th, X, B, &st);
    size_t len = st.h * B;
    double *g1 = vijp_scratch(4 * len), *g2 = g1 + len, *c = g1 + 2 * len, *gx2 = g1 + 3 * len;
    vijp_halves_split(st.h, B, Gy, g1, g2);
    cross(L, cx, th, &st, g2, c);
    for (size_t i = 0; i < len; i++) g1[i] += c[i], gx2[i] = g2[i] * st.s[i];
    vijp_halves_join(st.h, B, g1, gx2, Gx);
    free(g1), free(st.block);
}

/* θ_S: S's chain with output cotangent g_y2 ⊙ x2 ⊙ s′; θ_T: T's with g_y2. */
static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    state st;
    evaluate(L, cx, th, X, B, &st);
    size_t len = st.h * B;
    double *g1 = vijp_scratch(3 * len), *g2 = g1 + len, *gs = g1 + 2 * len;
    vijp_halves_split(st.h, B, Gy, g1, g2);
    for (size_t i = 0; i < len; i++) gs[i] = g2[i] * st.x2[i] * st.ds[i];
    vijp_chain_vjp_param(L, 0, cx, th, st.aS, B, gs, Gt);
    vijp_chain_vjp_param(L, 1, cx, th, st.aT, B, g2, Gt);
    free(g1), free(st.block);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    state st;
    evaluate(L, cx, th, X, B, &st);
    size_t len = st.h * B;
    double *g1 = vijp_scratch(4 * len), *g2 = g1 + len, *c = g1 + 2 * len, *gy2 = g1 + 3 * len;
    vijp_halves_split(st.h, B, Gx, g1, g2);
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++)
        if (st.s[i] == 0 || !isfinite(st.s[i]))
            rc = vijp_fail(err, VIJP_ESINGULAR, "affine vijp: the scale of unit %zu is %g: the block is numerically "
                           "singular there", i % st.h, st.s[i]);
    if (!rc) {
        cx->k->div_d(len, g2, st.s, gy2);
        cross(L, cx, th, &st, gy2, c);
        for (size_t i = 0; i < len; i++) g1[i] -= c[i];
        vijp_halves_join(st.h, B, g1, gy2, Gy);
    }
    free(g1), free(st.block);
    return rc;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x,
                     double *J) { vijp_jacobian_by_jvp(L, cx, th, x, J, jvp); }

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    state st;
    evaluate(L, cx, th, Y, B, &st); /* x1 = y1: S and T evaluate at the right point; st.x2 holds y2 */
    size_t len = st.h * B;
    const double *t = st.aT[vijp_chain_n(L, 1)];
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++)
        if (st.s[i] == 0 || !isfinite(st.s[i]))
            rc = vijp_fail(err, VIJP_ESINGULAR, "affine inverse: the scale of unit %zu is %g", i % st.h, st.s[i]);
    if (!rc) {
        cx->k->affine_inverse_d(len, st.x2, st.s, t, st.t2);
        vijp_halves_join(st.h, B, st.x1, st.t2, X);
    }
    free(st.block);
    return rc;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_affine_forward, .jvp = vo_affine_jvp, .vjp = vo_affine_vjp, .vjp_param = vo_affine_vjp_param,
    .vijp = vo_affine_vijp, .jacobian = vo_affine_jacobian, .inverse = vo_affine_inverse,
};

const vijp_layer_type vijp_layer_affine = {
    .name = "affine",
    .syntax = "affine[:sigmoid|:exp][+ITEM+ITEM...[;ITEM+ITEM...]] (Glow/RealNVP coupling y1 = x1, y2 = x2*s(x1) "
              "+ t(x1); s = sigmoid(S + 2) or exp(S); S, T: the items, or S's;T's, half width to half width, default "
              "dense:N/2+tanh)",
    .parse = parse, .state_copy = vijp_chain_state_copy, .state_free = vijp_chain_state_free,
    .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INVERSE, .d = &ops_d, .mp = &ops_mp,
};

/* Additive coupling (RevNet; Gomez et al. 2017).  The input splits into
 * halves x = (x1, x2) of width h = n/2 and
 *   y1 = x1 + F(x2),   y2 = x2 + G(y1),
 * where F and G are small sub-networks of existing layers with separate
 * parameters (default dense:h + tanh; "additive:dense:16+tanh" spells it out).
 *   J = [[I, J_F], [J_G, I + J_G J_F]]  (unit block-triangular, det 1),
 * so the block is submersive and invertible for any F and G (DESIGN §6):
 *   inverse  x2 = y2 − G(y1),  x1 = y1 − F(x2);
 *   vijp     g_y2 = g_x2 − g_x1·J_F(x2),  g_y1 = g_x1 − g_y2·J_G(y1),
 * only vjps of F and G, no linear solve.  The parameter gradients are
 * ḡ1·∂F/∂θ_F with ḡ1 = g_y1 + g_y2·J_G (the total cotangent of y1) and
 * g_y2·∂G/∂θ_G.  Parameters: θ_F's layers in order, then θ_G's. */
#include "chain.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include "layer/route.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t param_count(const vijp_layer *L) { return vijp_chain_param_count(L); }
static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (in_width < 2 || in_width % 2)
        return vijp_fail(err, VIJP_EDIM, "additive splits its input into two halves: the width must be even and "
                         ">= 2 (got %zu%s)", in_width, in_width ? "" : ": give --width");
    char def[32];
    snprintf(def, sizeof def, "dense:%zu+tanh", in_width / 2);
    int rc = vijp_chain_parse(L, arg && *arg ? arg : def, in_width / 2, "additive", err);
    if (!rc) L->in = L->out = in_width;
    return rc;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    int k = snprintf(buf, size, "additive:");
    return k + vijp_chain_print(L, buf + ((size_t)k < size ? (size_t)k : size), (size_t)k < size ? size - (size_t)k : 0);
}

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta) { return vijp_chain_init(L, in, rng, theta); }

/* ---- the state of one evaluation: halves and both chains' activations ---- */

typedef struct {
    size_t h, B;
    double *x1, *x2, *y1, *y2;
    double *aF[VIJP_SUB_MAX + 1], *aG[VIJP_SUB_MAX + 1]; /* aF[0] = x2 … aF[n] = F(x2); aG from y1 */
    double *block;
} state;

/* Chain c's activations after its layers, each its layer's output width × B, from p on. */
static double *acts_at(const vijp_layer *L, int c, double **acts, double *p, size_t B)
{
    for (size_t j = 1; j <= vijp_chain_n(L, c); j++) acts[j] = p, p += vijp_chain_sub(L, c, j - 1)->out * B;
    return p;
}

static void state_init(state *s, const vijp_layer *L, size_t B)
{
    size_t h = L->in / 2, len = h * B;
    s->h = h, s->B = B;
    s->block = vijp_scratch(4 * len + (vijp_chain_units(L, 0) + vijp_chain_units(L, 1)) * B);
    double *p = s->block;
    s->x1 = p, s->x2 = p + len, s->y1 = p + 2 * len, s->y2 = p + 3 * len;
    s->aF[0] = s->x2, s->aG[0] = s->y1;
    acts_at(L, 1, s->aG, acts_at(L, 0, s->aF, p + 4 * len, B), B);
}

static void split(const state *s, const double *X, double *a, double *b) { vijp_halves_split(s->h, s->B, X, a, b); }
static void join(const state *s, const double *a, const double *b, double *Y) { vijp_halves_join(s->h, s->B, a, b, Y); }

/* Forward from X: x1, x2, the F chain, y1, the G chain, y2. */
static void evaluate(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, state *s)
{
    size_t len = s->h * s->B;
    split(s, X, s->x1, s->x2);
    vijp_chain_forward(L, 0, cx, th, s->aF, s->B);
    const vijp_kernels *K = cx->k;
    K->add_d(len, s->x1, s->aF[vijp_chain_n(L, 0)], s->y1);
    vijp_chain_forward(L, 1, cx, th, s->aG, s->B);
    K->add_d(len, s->x2, s->aG[vijp_chain_n(L, 1)], s->y2);
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    state s;
    state_init(&s, L, B);
    evaluate(L, cx, th, X, &s);
    join(&s, s.y1, s.y2, Y);
    free(s.block);
}

/* v1 = u1 + J_F u2,  v2 = u2 + J_G v1. */
static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    state s;
    state_init(&s, L, B);
    evaluate(L, cx, th, X, &s);
    size_t len = s.h * B;
    double *u1 = s.x1, *u2 = s.y2, *v1 = vijp_scratch(2 * len), *v2 = v1 + len;
    split(&s, U, u1, u2); /* x1 and y2 are no longer needed */
    vijp_chain_apply(L, 0, cx, th, s.aF, B, u2, v1, 0);
    const vijp_kernels *K = cx->k;
    K->add_d(len, v1, u1, v1);
    vijp_chain_apply(L, 1, cx, th, s.aG, B, v1, v2, 0);
    K->add_d(len, v2, u2, v2);
    join(&s, v1, v2, V);
    free(v1), free(s.block);
}

/* ḡ1 = g_y1 + g_y2·J_G,  g_x1 = ḡ1,  g_x2 = g_y2 + ḡ1·J_F; with params, also the θ gradients. */
static void reverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *Gy, double *Gx, double *Gth)
{
    state s;
    state_init(&s, L, B);
    evaluate(L, cx, th, X, &s);
    size_t len = s.h * B;
    double *gy1 = s.x1, *gy2 = s.y2, *gb = vijp_scratch(2 * len), *gx2 = gb + len;
    split(&s, Gy, gy1, gy2);
    vijp_chain_apply(L, 1, cx, th, s.aG, B, gy2, gb, 1);
    cx->k->add_d(len, gb, gy1, gb);
    if (Gth) {
        vijp_chain_vjp_param(L, 0, cx, th, s.aF, B, gb, Gth);
        vijp_chain_vjp_param(L, 1, cx, th, s.aG, B, gy2, Gth);
    } else {
        vijp_chain_apply(L, 0, cx, th, s.aF, B, gb, gx2, 1);
        cx->k->add_d(len, gx2, gy2, gx2);
        join(&s, gb, gx2, Gx);
    }
    free(gb), free(s.block);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    reverse(L, cx, th, X, B, Gy, Gx, NULL);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gth)
{
    reverse(L, cx, th, X, B, Gy, NULL, Gth);
}

/* g_y2 = g_x2 − g_x1·J_F(x2),  g_y1 = g_x1 − g_y2·J_G(y1). */
static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)frag, (void)err;
    state s;
    state_init(&s, L, B);
    evaluate(L, cx, th, X, &s);
    size_t len = s.h * B;
    double *gx1 = s.x1, *gx2 = s.y2, *gy1 = vijp_scratch(2 * len), *gy2 = gy1 + len;
    split(&s, Gx, gx1, gx2);
    vijp_chain_apply(L, 0, cx, th, s.aF, B, gx1, gy2, 1);
    const vijp_kernels *K = cx->k;
    K->sub_d(len, gx2, gy2, gy2);
    vijp_chain_apply(L, 1, cx, th, s.aG, B, gy2, gy1, 1);
    K->sub_d(len, gx1, gy1, gy1);
    join(&s, gy1, gy2, Gy);
    free(gy1), free(s.block);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x,
                     double *J) { vijp_jacobian_by_jvp(L, cx, th, x, J, jvp); }

/* x2 = y2 − G(y1),  x1 = y1 − F(x2). */
static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)err;
    state s;
    state_init(&s, L, B);
    size_t len = s.h * B;
    split(&s, Y, s.y1, s.y2);
    vijp_chain_forward(L, 1, cx, th, s.aG, B);
    const vijp_kernels *K = cx->k;
    K->sub_d(len, s.y2, s.aG[vijp_chain_n(L, 1)], s.x2);
    vijp_chain_forward(L, 0, cx, th, s.aF, B);
    K->sub_d(len, s.y1, s.aF[vijp_chain_n(L, 0)], s.x1);
    join(&s, s.x1, s.x2, X);
    free(s.block);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_additive_forward, .jvp = vo_additive_jvp, .vjp = vo_additive_vjp,
    .vjp_param = vo_additive_vjp_param, .vijp = vo_additive_vijp, .jacobian = vo_additive_jacobian,
    .inverse = vo_additive_inverse,
};

const vijp_layer_type vijp_layer_additive = {
    .name = "additive",
    .syntax = "additive[:ITEM+ITEM...[;ITEM+ITEM...]] (RevNet coupling y1 = x1 + F(x2), y2 = x2 + G(y1); F, G: "
              "the items, or F's;G's, each mapping the half width back to itself, default dense:N/2+tanh)",
    .parse = parse, .state_copy = vijp_chain_state_copy, .state_free = vijp_chain_state_free,
    .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INVERSE, .d = &ops_d, .mp = &ops_mp,
};

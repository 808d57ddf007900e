/* Residual blocks (ResNet; He et al. 2016):
 *   y = f(x) + x,   or   y = f(x) + P(x)
 * with f and P chains of layers of any registered type (residual blocks
 * included), whose widths may change inside: f's output width is P's, or
 * x's where there is no P.  J = J_f + J_P (J_P = I without P), so
 *   jvp   u + J_f u (J_P u),       vjp  g + g J_f (g J_P), the sub-layers' own;
 *   vijp  g_y J = g_x, J formed densely from the sub-layers' jvps (one per
 *         input unit) and solved per sample as the dense layer solves W:
 *         LU (square; refused where LAPACK's rcond is below u), least
 *         squares (wide), QR with the fragment Q₂ᵀ g_y
 *         (tall, J has an m − n cokernel); a singular J is VIJP_ESINGULAR.
 *         C_solve is the generic one (LU, Higham Thm 9.4; QR, Thm 19.4): it
 *         also covers forming J, whose error (Σ over the layers of
 *         (width + K)u·M, Higham eq. 3.5) is far below it;
 *   inverse (no P only) by the fixed-point iteration x ← y − f(x) from
 *         x₀ = y (i-ResNet; Behrmann et al. 2019): a contraction when
 *         Lip(f) < 1, stopped once a step is within STOP_ULPS·u·(‖y‖∞ +
 *         ‖x‖∞) per sample; then x̂ + f(x̂) − y is within that step (times
 *         Lip(f)), so ‖x̂ − x‖ <= ‖J⁻¹‖ times it plus the forward's rounding
 *         (layer.h, VIJP_INVBOUND_FIXED_POINT).  A sample that does not get
 *         there within ITER_MAX steps (Lip(f) >= 1, or f's rounding above the
 *         stop), or where ‖J_f‖₂ >= 1 at the fixed point, is an error naming
 *         why (see inverse() for what no finite test can exclude).
 * Spec: residual:ITEM+ITEM...[:skip=ITEM+ITEM...] (default f = dense:N+tanh);
 * nested blocks only through vijp_layer_residual_new (JSON nets), since a
 * '+' list inside a '+' list would be ambiguous.
 * θ: f's layers' parameters in order, then P's. */
#include "vijp/layer.h"
#include "vijp/catalogue.h"
#include "vijp/error.h"
#include "layer/states.h"
#include "chain.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include "lu.h"
#include <lapacke.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_dense, vijp_layer_residual;

#define STOP_ULPS 64   /* inv_a: the stop, above the rounding of f for widths into the thousands */
/* Steps per bit of precision: 40·p steps reach the stop from ‖x − y‖ ~ ‖y‖
 * for Lip(f) up to 0.983 (ln 2 / −ln 0.983 ≈ 40); the MPFR twin scales it
 * with its precision (2120 steps in double). */
#define ITER_PER_BIT 40
#define ITER_MAX (ITER_PER_BIT * DBL_MANT_DIG)

static const vijp_residual_state *st(const vijp_layer *L) { return L->state; }

static size_t params_of(const vijp_layer *sub, size_t n)
{
    size_t P = 0;
    for (size_t k = 0; k < n; k++) P += sub[k].type->param_count(&sub[k]);
    return P;
}

static size_t param_count(const vijp_layer *L) { return params_of(st(L)->sub, st(L)->nf + st(L)->np); }

static unsigned declare(const vijp_layer *L) { return L->out > L->in ? VIJP_DECL_NEVER_SUBMERSIVE : 0u; }

/* ---- a chain of layers (f or P) at its parameters ---- */

typedef struct {
    size_t n;              /* layers (0: the identity) */
    const vijp_layer *sub; /* the first */
    const double *th;      /* their parameters, in order */
} path;

static path path_of(const vijp_layer *L, const double *th, int skip)
{
    const vijp_residual_state *s = st(L);
    path p = {skip ? s->np : s->nf, s->sub + (skip ? s->nf : 0), th};
    if (skip) p.th = th + params_of(s->sub, s->nf);
    return p;
}

static const double *layer_theta(const path *p, size_t k) { return p->th + params_of(p->sub, k); }

/* acts[0] = X (borrowed), acts[k + 1] = layer k's output (allocated). */
static double **path_forward(const path *p, const vijp_kctx *cx, const double *X, size_t B)
{
    double **acts = vijp_alloc_array(p->n + 1, sizeof *acts);
    acts[0] = (double *)X;
    for (size_t k = 0; k < p->n; k++) {
        const vijp_layer *s = &p->sub[k];
        acts[k + 1] = vijp_scratch(s->out * B);
        s->type->d->forward(s, cx, layer_theta(p, k), acts[k], B, acts[k + 1]);
    }
    return acts;
}

static void path_free(const path *p, double **acts)
{
    for (size_t k = 1; acts && k <= p->n; k++) free(acts[k]);
    free(acts);
}

/* V = J U through the chain (U: its input width, V: its output width). */
static void path_jvp(const path *p, const vijp_kctx *cx, double **acts, size_t B, size_t width, const double *U,
                     double *V)
{
    if (!p->n) {
        memcpy(V, U, width * B * sizeof *V);
        return;
    }
    const double *cur = U;
    double *owned = NULL; /* the intermediate cur points at, if any */
    for (size_t k = 0; k < p->n; k++) {
        const vijp_layer *s = &p->sub[k];
        double *next = k + 1 == p->n ? V : vijp_scratch(s->out * B);
        s->type->d->jvp(s, cx, layer_theta(p, k), acts[k], B, cur, next);
        free(owned);
        owned = next == V ? NULL : next;
        cur = next;
    }
}

/* Gx = G J through the chain, backwards; with Gth, each layer's θ gradient too. */
static void path_vjp(const path *p, const vijp_kctx *cx, double **acts, size_t B, size_t width, const double *G,
                     double *Gx, double *Gth)
{
    if (!p->n) {
        if (Gx) memcpy(Gx, G, width * B * sizeof *Gx);
        return;
    }
    const double *cur = G;
    double *owned = NULL;
    for (size_t k = p->n; k-- > 0;) {
        const vijp_layer *s = &p->sub[k];
        const double *tk = layer_theta(p, k);
        if (Gth && s->type->param_count(s)) s->type->d->vjp_param(s, cx, tk, acts[k], B, cur, Gth + (tk - p->th));
        if (!Gx && k == 0) break; /* the θ gradient alone needs no input cotangent */
        double *next = k == 0 ? Gx : vijp_scratch(s->in * B);
        s->type->d->vjp(s, cx, tk, acts[k], B, cur, next);
        free(owned);
        owned = k == 0 ? NULL : next;
        cur = next;
    }
    free(owned);
}

/* ---- the block's operators ---- */

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    path f = path_of(L, th, 0), P = path_of(L, th, 1);
    double **af = path_forward(&f, cx, X, B), **ap = path_forward(&P, cx, X, B);
    const double *fx = af[f.n], *px = ap[P.n];
    for (size_t i = 0; i < L->out * B; i++) Y[i] = px[i] + fx[i];
    path_free(&f, af), path_free(&P, ap);
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                double *V)
{
    path f = path_of(L, th, 0), P = path_of(L, th, 1);
    double **af = path_forward(&f, cx, X, B), **ap = path_forward(&P, cx, X, B), *vf = vijp_scratch(L->out * B);
    path_jvp(&f, cx, af, B, L->in, U, vf);
    path_jvp(&P, cx, ap, B, L->in, U, V);
    for (size_t i = 0; i < L->out * B; i++) V[i] += vf[i];
    free(vf), path_free(&f, af), path_free(&P, ap);
}

static void reverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *Gy, double *Gx, double *Gth)
{
    path f = path_of(L, th, 0), P = path_of(L, th, 1);
    double **af = path_forward(&f, cx, X, B), **ap = path_forward(&P, cx, X, B);
    double *gf = Gx ? vijp_scratch(L->in * B) : NULL;
    path_vjp(&f, cx, af, B, L->out, Gy, gf, Gth);
    path_vjp(&P, cx, ap, B, L->out, Gy, Gx, Gth ? Gth + params_of(st(L)->sub, f.n) : NULL);
    for (size_t i = 0; Gx && i < L->in * B; i++) Gx[i] += gf[i];
    free(gf), path_free(&f, af), path_free(&P, ap);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gy,
                double *Gx)
{
    reverse(L, cx, th, X, B, Gy, Gx, NULL);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gth)
{
    reverse(L, cx, th, X, B, Gy, NULL, Gth);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    vijp_jacobian_by_jvp(L, cx, th, x, J, jvp); /* columns jvp(e_j): m × n */
}

/* J at x as a dense layer's W (bias 0): its vijp, fragment and cokernel are
 * the block's at x. */
static double *as_dense(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, vijp_layer *D)
{
    *D = (vijp_layer){&vijp_layer_dense, L->in, L->out, NULL};
    double *W = vijp_scratch(L->out * L->in + L->out);
    jacobian(L, cx, th, x, W);
    return W;
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    size_t m = L->out, n = L->in, k = m - n;
    for (size_t b = 0; b < B; b++) {
        vijp_layer D;
        double *W = as_dense(L, cx, th, X + b * n, &D);
        vijp_layer_dense.d->fragment(&D, cx, W, X + b * n, 1, Gy + b * m, frag + b * k);
        free(W);
    }
}

/* The square case: LU of J (lu.h), refused where J is singular or
 * numerically so (LAPACK's 1-norm estimate rcond below u: then no digit of
 * g_y would be right, and structural zeros such as ReLU's inactive units
 * leave exactly such J, which a plain LU sees as tiny pivots). */
static int square_solve(const vijp_layer *L, double *W, const double *gx, double *gy, double *rcond)
{
    size_t n = L->in;
    lapack_int *piv = vijp_alloc_array(n, sizeof *piv);
    double anorm = LAPACKE_dlange(LAPACK_COL_MAJOR, '1', (int)n, (int)n, W, (int)n);
    int rc = 0;
    *rcond = 0;
    if (vijp_lu_factor_d(VIJP_LU_AUTO, n, W, piv) > 0 ||
        LAPACKE_dgecon(LAPACK_COL_MAJOR, '1', (int)n, W, (int)n, anorm, rcond) != 0 || !(*rcond >= DBL_EPSILON / 2))
        rc = VIJP_ESINGULAR;
    else {
        memcpy(gy, gx, n * sizeof *gy);
        vijp_lu_solve_d(VIJP_LU_AUTO, 'T', n, 1, W, piv, gy);
    }
    free(piv);
    return rc;
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    size_t m = L->out, n = L->in, k = m > n ? m - n : 0;
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        vijp_layer D;
        vijp_error e = {0};
        double *W = as_dense(L, cx, th, X + b * n, &D), rcond = 0;
        if (m == n) {
            if ((rc = square_solve(L, W, Gx + b * n, Gy + b * m, &rcond)))
                snprintf(e.msg, sizeof e.msg, "LU: reciprocal condition number %.3g, below u", rcond);
        } else
            rc = vijp_layer_dense.d->vijp(&D, cx, W, X + b * n, 1, Gx + b * n, k ? frag + b * k : NULL, Gy + b * m, &e);
        if (rc)
            vijp_fail(err, rc, "residual %zu -> %zu: at sample %zu the block's Jacobian %s is singular%s, so g_y J = "
                      "g_x has no solution to trust (%s)", n, m, b, st(L)->np ? "J_f + J_P" : "I + J_f",
                      m == n ? " or numerically so" : " beyond what the fragment covers", e.msg);
        free(W);
    }
    return rc;
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    if (L->out <= L->in) return 0;
    vijp_layer D;
    double *W = as_dense(L, cx, th, x, &D);
    int rc = vijp_layer_dense.d->cokernel(&D, cx, W, x, Q, err);
    free(W);
    return rc;
}

static double col_max(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

/* x ← y − f(x) from x = y, each sample until its step is within
 * STOP_ULPS·u·(‖y‖∞ + ‖x‖∞) (then it stays as it is).  Two steps in a row
 * are f's difference at the two previous iterates, so a ratio of their
 * 2-norms >= 1 proves Lip(f) >= 1: then the iteration may find another
 * preimage than the true x (or none), and the sample is refused.  Ratios
 * are read only while the step is above RATIO_FLOOR times the stop, where
 * rounding moves them by under 1 %.  At the fixed point, ‖J_f‖₂ >= 1
 * (a power-iteration lower bound) refuses it too: a contraction has
 * ‖J_f‖₂ < 1 everywhere.  Uniqueness needs Lip(f) < 1 everywhere, which
 * no finite test proves: a block that passes these but is not a
 * contraction can still yield another preimage of y (check-layer's
 * inverse-round-trip reports it). */
#define RATIO_FLOOR 16

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    if (st(L)->np)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "a residual block with a projection on its skip path has no inverse "
                         "(only y = x + f(x) is inverted, by fixed-point iteration)");
    size_t n = L->in, left = B, iter = 0;
    path f = path_of(L, th, 0);
    unsigned char *done = vijp_alloc_array(B, 1);
    double *next = vijp_scratch(n * B), *prev = vijp_scratch(B), step = 0, scale = 0, ratio = 0;
    const double u = DBL_EPSILON / 2;
    memcpy(X, Y, n * B * sizeof *X);
    for (; left && iter < ITER_MAX && ratio < 1; iter++) {
        double **af = path_forward(&f, cx, X, B);
        for (size_t i = 0; i < n * B; i++) next[i] = Y[i] - af[f.n][i];
        path_free(&f, af);
        for (size_t b = 0; b < B && ratio < 1; b++) {
            if (done[b]) continue;
            double s = 0, s2 = 0;
            for (size_t i = 0; i < n; i++) {
                double d = next[i + b * n] - X[i + b * n];
                s = fmax(s, fabs(d)), s2 += d * d;
            }
            s2 = sqrt(s2);
            double tol = STOP_ULPS * u * (col_max(Y + b * n, n) + col_max(next + b * n, n));
            if (!isfinite(s)) iter = ITER_MAX; /* diverged: stop now */
            if (iter && prev[b] > RATIO_FLOOR * tol) ratio = fmax(ratio, s2 / prev[b]);
            memcpy(X + b * n, next + b * n, n * sizeof *X);
            prev[b] = s2;
            if (s <= tol) done[b] = 1, left--;
            else step = s, scale = tol / (STOP_ULPS * u);
        }
    }
    free(next), free(prev), free(done);
    for (size_t b = 0; !left && ratio < 1 && b < B; b++) {
        double *J = vijp_scratch(n * n);
        jacobian(L, cx, th, X + b * n, J);
        for (size_t i = 0; i < n; i++) J[i + i * n] -= 1; /* J_f = J − I */
        ratio = fmax(ratio, vo_norm2_below(n, J));
        free(J);
    }
    if (ratio >= 1)
        return vijp_fail(err, VIJP_ESINGULAR, "residual inverse: two steps of x <- y - f(x) grew by %.3g, or J_f at "
                         "the fixed point has that 2-norm, so Lip(f) >= 1 and the fixed point need not be x: refused "
                         "(the iteration inverts contractions only)", ratio);
    if (left)
        return vijp_fail(err, VIJP_ESINGULAR, "residual inverse: the fixed-point iteration x <- y - f(x) did not "
                         "converge for %zu of %zu samples after %zu steps (last step %.3g at scale %.3g, stop at "
                         "%d ulps): Lip(f) >= 1, or f's rounding above the stop", left, B, iter, step, scale,
                         STOP_ULPS);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .fragment_count = fragment_count,
    .fragment = fragment, .vijp = vijp, .jacobian = jacobian, .cokernel = cokernel, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_residual_forward, .jvp = vo_residual_jvp, .vjp = vo_residual_vjp,
    .vjp_param = vo_residual_vjp_param, .fragment_count = vo_residual_fragment_count,
    .fragment = vo_residual_fragment, .vijp = vo_residual_vijp, .jacobian = vo_residual_jacobian,
    .cokernel = vo_residual_cokernel, .inverse = vo_residual_inverse,
};

/* ---- building a block: from spec items, or from parsed layers ---- */

static void state_free(void *state)
{
    vijp_residual_state *s = state;
    for (size_t k = 0; k < s->nf + s->np; k++) vijp_layer_clear(&s->sub[k]);
    free(s);
}

static void *state_copy(const void *state)
{
    const vijp_residual_state *s = state;
    vijp_residual_state *c = vijp_alloc_array(1, sizeof *c);
    c->nf = s->nf, c->np = s->np;
    for (size_t k = 0; k < s->nf + s->np; k++) vijp_layer_copy(&c->sub[k], &s->sub[k]);
    return c;
}

static const char *path_name(int skip) { return skip ? "the skip path P" : "f"; }

/* Widths chain and every layer has what the block's oracle and solve need. */
static int check_path(const vijp_layer *sub, size_t n, size_t in, int skip, vijp_error *err)
{
    for (size_t k = 0; k < n; k++) {
        char item[160];
        vijp_layer_spec(&sub[k], item, sizeof item);
        if (sub[k].in != in)
            return vijp_fail(err, VIJP_EDIM, "residual: layer %zu of %s (%s) takes %zu inputs but receives %zu", k,
                             path_name(skip), item, sub[k].in, in);
        if (!sub[k].type->mp)
            return vijp_fail(err, VIJP_EINVAL, "residual: layer %zu of %s (%s) has no MPFR operators, which the "
                             "block's oracle needs", k, path_name(skip), item);
        in = sub[k].out;
    }
    return 0;
}

int vijp_layer_residual_new(vijp_layer *L, vijp_layer *f_layers, size_t nf, vijp_layer *skip_layers, size_t nskip,
                            vijp_error *err)
{
    memset(L, 0, sizeof *L);
    int rc = 0;
    size_t n = nf ? f_layers[0].in : 0, m = nf ? f_layers[nf - 1].out : 0;
    size_t mp = nskip ? skip_layers[nskip - 1].out : n;
    if (!nf) rc = vijp_fail(err, VIJP_EINVAL, "residual: f has no layers");
    else if (nf + nskip > VIJP_RESIDUAL_SUB_MAX)
        rc = vijp_fail(err, VIJP_EINVAL, "residual: %zu layers in f and P, at most %d", nf + nskip,
                       VIJP_RESIDUAL_SUB_MAX);
    if (!rc) rc = check_path(f_layers, nf, n, 0, err);
    if (!rc) rc = check_path(skip_layers, nskip, n, 1, err);
    if (!rc && m != mp)
        rc = vijp_fail(err, VIJP_EDIM, "residual: f maps %zu -> %zu but %s gives %zu: the two sum, so their widths "
                       "must agree%s", n, m, nskip ? "the skip path P" : "the identity skip", mp,
                       nskip ? "" : " (give a projection P for a change of width)");
    if (!rc && (n > VIJP_WIDTH_MAX || m > VIJP_WIDTH_MAX))
        rc = vijp_fail(err, VIJP_EDIM, "residual maps %zu -> %zu units: widths must be in [1, %u]", n, m, VIJP_WIDTH_MAX);
    if (rc) {
        for (size_t k = 0; k < nf; k++) vijp_layer_clear(&f_layers[k]);
        for (size_t k = 0; k < nskip; k++) vijp_layer_clear(&skip_layers[k]);
        return rc;
    }
    vijp_residual_state *s = vijp_alloc_array(1, sizeof *s);
    s->nf = nf, s->np = nskip;
    memcpy(s->sub, f_layers, nf * sizeof *f_layers);
    memcpy(s->sub + nf, skip_layers, nskip * sizeof *skip_layers);
    *L = (vijp_layer){&vijp_layer_residual, n, m, s};
    return 0;
}

/* "ITEM+ITEM…" into layers from width `in`; n: how many. */
static int parse_items(const char *items, size_t in, vijp_layer *out, size_t max, size_t *n, int skip, vijp_error *err)
{
    char *copy = vijp_strdup(items);
    int rc = 0;
    *n = 0;
    if (!*items || items[strlen(items) - 1] == '+' || strstr(items, "++") || items[0] == '+')
        rc = vijp_fail(err, VIJP_EINVAL, "residual: empty layer in %s '%s'", path_name(skip), items);
    for (char *save = NULL, *item = rc ? NULL : strtok_r(copy, "+", &save); item && !rc;
         item = strtok_r(NULL, "+", &save)) {
        if (*n == max) {
            rc = vijp_fail(err, VIJP_EINVAL, "residual: at most %d layers in f and P together", VIJP_RESIDUAL_SUB_MAX);
            break;
        }
        if (!strncmp(item, "residual", 8) || !strncmp(item, "additive", 8) || !strncmp(item, "affine", 6)) {
            rc = vijp_fail(err, VIJP_EINVAL, "residual: '%s' in %s: a block inside a block cannot be spelled in a "
                           "spec item (its '+' list would be ambiguous); nest blocks in a JSON net", item,
                           path_name(skip));
            break;
        }
        vijp_error e = {0};
        if ((rc = vijp_layer_parse(&out[*n], item, in, &e))) {
            vijp_fail(err, rc, "residual: %s, layer %zu: %s", path_name(skip), *n, e.msg);
            break;
        }
        in = out[(*n)++].out;
    }
    free(copy);
    if (rc)
        for (size_t k = 0; k < *n; k++) vijp_layer_clear(&out[k]);
    return rc;
}

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (!in_width) return vijp_fail(err, VIJP_EDIM, "residual needs its input width: give --width");
    char def[48], *fpart;
    snprintf(def, sizeof def, "dense:%zu+tanh", in_width);
    fpart = vijp_strdup(arg && *arg ? arg : def);
    char *skip = strstr(fpart, ":skip=");
    if (skip) *skip = 0, skip += 6;
    vijp_layer f[VIJP_RESIDUAL_SUB_MAX], P[VIJP_RESIDUAL_SUB_MAX];
    size_t nf = 0, np = 0;
    int rc = parse_items(fpart, in_width, f, VIJP_RESIDUAL_SUB_MAX, &nf, 0, err);
    if (!rc && skip) {
        rc = parse_items(skip, in_width, P, VIJP_RESIDUAL_SUB_MAX - nf, &np, 1, err);
        if (rc)
            for (size_t k = 0; k < nf; k++) vijp_layer_clear(&f[k]);
    }
    free(fpart);
    if (rc) return rc;
    return vijp_layer_residual_new(L, f, nf, P, np, err);
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "residual:");
    for (size_t k = 0; k < st(L)->nf + st(L)->np; k++) {
        char item[160];
        vijp_layer_spec(&st(L)->sub[k], item, sizeof item);
        const char *sep = k == 0 ? "" : k == st(L)->nf ? ":skip=" : "+";
        at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0, "%s%s", sep, item);
    }
    return (int)at;
}

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    for (size_t k = 0, off = 0; k < st(L)->nf + st(L)->np; k++) {
        const vijp_layer *s = &st(L)->sub[k];
        size_t P = s->type->param_count(s);
        /* a block without parameters may have theta NULL: no pointer arithmetic on it */
        if (P && s->type->init && s->type->init(s, in, rng, theta + off)) return VIJP_EINVAL;
        off += P;
    }
    return 0;
}

const vijp_layer_type vijp_layer_residual = {
    .name = "residual",
    .syntax = "residual[:ITEM+ITEM...[:skip=ITEM+ITEM...]] (y = f(x) + x, or f(x) + P(x) with the skip items; "
              "default f = dense:N+tanh)",
    .parse = parse, .state_copy = state_copy, .state_free = state_free, .print = print,
    .param_count = param_count, .init = init, .declare = declare, .residual = VIJP_RESIDUAL_INPUT,
    .d = &ops_d, .mp = &ops_mp,
    .bounds = {.inverse = VIJP_INVBOUND_FIXED_POINT, .inv_a = STOP_ULPS},
};

/* LayerNorm without affine parameters and without ε: per sample (column)
 * y = (x − μ)/σ, μ = mean(x), σ² = mean((x − μ)²).  With ŷ = y,
 *   J = (I − 11ᵀ/n − ŷŷᵀ/n)/σ,
 * symmetric, and J·1 = J·ŷ = 0: the cokernel is span{1, ŷ}, dimension 2 per
 * sample (DESIGN §6; ε > 0 would leave only 1 in it).  The fragment is the
 * cotangent's coordinates in the orthonormal basis Q = [1, ŷ]/√n (‖ŷ‖² = n),
 * two numbers per sample, and the vijp is closed-form, O(n):
 *   g_y = σ·P g_x + Q c,  P = I − QQᵀ (the projection makes it J⁺g_x + Qc).
 * A constant sample (σ = 0) is outside the layer's domain: forward gives 0,
 * the vijp refuses.
 *
 * That is plain `layernorm`, an instance without state.  With arguments,
 * layernorm[:N][:eps=E][:affine] (runs, ε, PyTorch's affine weights), the
 * instance has a state and every hook below hands it to layernorm_runs.c,
 * so that plain layernorm's code and results stay exactly as they were. */
#include "vijp/layer.h"
#include "activation.h"
#include "layernorm_runs.h"
#include "oracles/norm.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg && *arg) return vijp_lnr_parse(L, arg, in_width, err);
    if (in_width < 2)
        return vijp_fail(err, VIJP_EDIM, "layernorm normalizes over its input width, which must be >= 2 (got %zu%s)",
                         in_width, in_width ? "" : ": give --width");
    L->in = L->out = in_width;
    return 0;
}

/* J·1 = 0 (and J·ŷ = 0 for LayerNorm) exactly, J symmetric. */
static size_t analytic_cokernel(const vijp_layer *L, const double *th, const double *x)
{
    (void)th, (void)x;
    return L->state ? vijp_lnr_cokernel_per_run(L) * (L->in / ((const vo_layernorm_args *)L->state)->run) : 2;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_NEVER_SUBMERSIVE; }

/* The terms J_ij = (δ_ij − 1/n − ŷ_iŷ_j/n)/σ is formed from:
 * M_ij = (δ_ij + 1/n + |ŷ_iŷ_j|/n)/σ >= |J_ij|.  J's entries can cancel to ~0
 * while the rounding errors of the terms do not.  Computed in double: 1%
 * covers its own rounding. */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    if (L->state) {
        vijp_lnr_jacobian_majorant(L, th, x, M);
        return;
    }
    size_t n = L->in;
    double mu = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) mu += x[i] / (double)n;
    for (size_t i = 0; i < n; i++) s2 += (x[i] - mu) * (x[i] - mu) / (double)n;
    double sd = sqrt(s2);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double yi = (x[i] - mu) / sd, yj = (x[j] - mu) / sd;
            M[i + j * n] = 1.01 * ((i == j) + (1 + fabs(yi * yj)) / (double)n) / sd;
        }
}

/* ŷ and σ of one sample. */
static double normalize(const double *x, size_t n, double *yh)
{
    double mu = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) mu += x[i];
    mu /= (double)n;
    for (size_t i = 0; i < n; i++) yh[i] = x[i] - mu, s2 += yh[i] * yh[i];
    double sigma = sqrt(s2 / (double)n);
    for (size_t i = 0; i < n; i++) yh[i] = sigma > 0 ? yh[i] / sigma : 0.0;
    return sigma;
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    if (L->state) {
        vijp_lnr_forward(L, th, X, B, Y);
        return;
    }
    for (size_t b = 0; b < B; b++) normalize(X + b * L->in, L->in, Y + b * L->in);
}

/* v = P u (P = I − 11ᵀ/n − ŷŷᵀ/n) for one sample. */
static void project(const double *yh, size_t n, const double *u, double *v)
{
    double m1 = 0, my = 0;
    for (size_t i = 0; i < n; i++) m1 += u[i], my += yh[i] * u[i];
    m1 /= (double)n, my /= (double)n;
    for (size_t i = 0; i < n; i++) v[i] = u[i] - m1 - yh[i] * my;
}

/* jvp and vjp coincide (J is symmetric): V = P U / σ. */
static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                  const double *U, double *V)
{
    (void)cx, (void)th;
    size_t n = L->in;
    double *yh = vijp_scratch(n);
    for (size_t b = 0; b < B; b++) {
        double sigma = normalize(X + b * n, n, yh);
        project(yh, n, U + b * n, V + b * n);
        for (size_t i = 0; i < n; i++) V[b * n + i] = sigma > 0 ? V[b * n + i] / sigma : 0.0;
    }
    free(yh);
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th, (void)X;
    return L->state ? vijp_lnr_cokernel_per_run(L) * (L->in * B / ((const vo_layernorm_args *)L->state)->run) : 2 * B;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx;
    if (L->state) {
        vijp_lnr_fragment(L, th, X, B, Gy, frag);
        return;
    }
    size_t n = L->in;
    double r = 1 / sqrt((double)n);
    double *yh = vijp_scratch(n);
    for (size_t b = 0; b < B; b++) {
        double c1 = 0, c2 = 0;
        normalize(X + b * n, n, yh);
        for (size_t i = 0; i < n; i++) c1 += Gy[b * n + i], c2 += yh[i] * Gy[b * n + i];
        frag[2 * b] = c1 * r, frag[2 * b + 1] = c2 * r;
    }
    free(yh);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx;
    if (L->state) return vijp_lnr_vijp(L, th, X, B, Gx, frag, Gy, err);
    size_t n = L->in;
    double r = 1 / sqrt((double)n);
    double *yh = vijp_scratch(n);
    for (size_t b = 0; b < B; b++) {
        double sigma = normalize(X + b * n, n, yh);
        if (!(sigma > 0)) {
            free(yh);
            return vijp_fail(err, VIJP_ESINGULAR, "layernorm vijp: sample %zu is constant (sigma = 0), outside the "
                             "layer's domain", b);
        }
        project(yh, n, Gx + b * n, Gy + b * n);
        for (size_t i = 0; i < n; i++)
            Gy[b * n + i] = sigma * Gy[b * n + i] + (frag[2 * b] + frag[2 * b + 1] * yh[i]) * r;
    }
    free(yh);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    if (L->state) {
        vijp_lnr_jacobian(L, th, x, J);
        return;
    }
    size_t n = L->in;
    double *yh = vijp_scratch(n), sigma = normalize(x, n, yh);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            J[i + j * n] = sigma > 0 ? ((i == j) - (1 + yh[i] * yh[j]) / (double)n) / sigma : 0.0;
    free(yh);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)cx;
    if (L->state) return vijp_lnr_cokernel(L, th, x, Q, err);
    size_t n = L->in;
    double *yh = vijp_scratch(n), r = 1 / sqrt((double)n);
    normalize(x, n, yh);
    for (size_t i = 0; i < n; i++) Q[i] = r, Q[i + n] = yh[i] * r;
    free(yh);
    return 0;
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    if (L->state) vijp_lnr_jvp(L, th, X, B, U, V);
    else apply(L, cx, th, X, B, U, V);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    if (L->state) vijp_lnr_vjp(L, th, X, B, Gy, Gx);
    else apply(L, cx, th, X, B, Gy, Gx);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx;
    vijp_lnr_vjp_param(L, th, X, B, Gy, Gt); /* only instances with parameters (affine) are asked */
}

static size_t param_count(const vijp_layer *L) { return L->state ? vijp_lnr_param_count(L) : 0; }

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    return L->state ? vijp_lnr_init(L, in, rng, th) : 0;
}

static size_t bias_index(const vijp_layer *L, size_t i) { return L->state ? vijp_lnr_bias_index(L, i) : SIZE_MAX; }

static int print(const vijp_layer *L, char *buf, size_t size)
{
    return L->state ? vijp_lnr_print(L, buf, size) : snprintf(buf, size, "layernorm");
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

/* The MPFR operators: plain layernorm's oracles (oracles/normalize.c), or
 * those of the instances with arguments (oracles/normlayers.c). */
#define MP_FORWARD(NAME, PARAMS, ARGS)                                                                             \
    static void mp_##NAME PARAMS                                                                                   \
    {                                                                                                              \
        if (L->state) vo_lnr_##NAME ARGS;                                                                          \
        else vo_layernorm_##NAME ARGS;                                                                             \
    }
MP_FORWARD(forward, (const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f),
           (L, th, X, B, Y, f))
MP_FORWARD(fragment, (const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *c, const vijp_format *f),
           (L, th, X, B, Gy, c, f))
MP_FORWARD(jacobian, (const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f), (L, th, x, J, f))
MP_FORWARD(jvp, (const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f),
           (L, th, X, B, U, V, f))
#undef MP_FORWARD

static void mp_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    if (L->state) vo_lnr_vjp(L, th, X, B, Gy, Gx, f);
    else vo_layernorm_jvp(L, th, X, B, Gy, Gx, f); /* symmetric J */
}

static size_t mp_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    return L->state ? vo_lnr_fragment_count(L, th, X, B) : vo_layernorm_fragment_count(L, th, X, B);
}

static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *c, mpfr_t *Gy,
                   const vijp_format *f)
{
    return L->state ? vo_lnr_vijp(L, th, X, B, Gx, c, Gy, f) : vo_layernorm_vijp(L, th, X, B, Gx, c, Gy, f);
}

static int mp_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    return L->state ? vo_lnr_cokernel(L, th, x, Q, f) : vo_layernorm_cokernel(L, th, x, Q, f);
}

static int jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    return L->state ? vo_lnr_jacobian_enclose(L, th, x, mid, rad) : vo_layernorm_jacobian_enclose(L, th, x, mid, rad);
}

static const vijp_ops_mp ops_mp = {
    .forward = mp_forward, .jvp = mp_jvp, .vjp = mp_vjp, .vjp_param = vo_lnr_vjp_param,
    .fragment_count = mp_fragment_count, .fragment = mp_fragment, .vijp = mp_vijp,
    .jacobian = mp_jacobian, .cokernel = mp_cokernel,
};

const vijp_layer_type vijp_layer_layernorm = {
    .name = "layernorm",
    .syntax = "layernorm[:N][:eps=E][:affine] (each run of N units, default the width, normalised; plain: no "
              "affine, no epsilon, fragment 2 per sample; eps > 0: fragment 1 per run)",
    .parse = parse, .state_size = sizeof(vo_layernorm_args), .print = print, .param_count = param_count,
    .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = jacobian_enclose, .analytic_cokernel = analytic_cokernel,
    .jacobian_majorant = jacobian_majorant, .bias_index = bias_index,
};

/* groupnorm:GxC[:eps=E][:affine]: a group of C/G channels is a run of
 * layernorm_runs.c, each unit's weight its channel's: every instance has a
 * state, and the hooks above hand it there. */
const vijp_layer_type vijp_layer_groupnorm = {
    .name = "groupnorm",
    .syntax = "groupnorm:GxC[:eps=E][:affine] (G groups of C channels, channel-major; eps default 1e-5; "
              "fragment 1 per group, 2 at eps=0)",
    .parse = vijp_gn_parse, .state_size = sizeof(vo_layernorm_args), .print = print, .param_count = param_count,
    .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = jacobian_enclose, .analytic_cokernel = analytic_cokernel,
    .jacobian_majorant = jacobian_majorant, .bias_index = bias_index,
};

/* LayerNorm without affine parameters and without ε: per sample (column)
 * y = (x − μ)/σ, μ = mean(x), σ² = mean((x − μ)²).  With ŷ = y,
 *   J = (I − 11ᵀ/n − ŷŷᵀ/n)/σ,
 * symmetric, and J·1 = J·ŷ = 0: the cokernel is span{1, ŷ}, dimension 2 per
 * sample (DESIGN §6; ε > 0 would leave only 1 in it).  The fragment is the
 * cotangent's coordinates in the orthonormal basis Q = [1, ŷ]/√n (‖ŷ‖² = n),
 * two numbers per sample, and the vijp is closed-form, O(n):
 *   g_y = σ·P g_x + Q c,  P = I − QQᵀ (the projection makes it J⁺g_x + Qc).
 * A constant sample (σ = 0) is outside the layer's domain: forward gives 0,
 * the vijp refuses. */
#include "vijp/layer.h"
#include "activation.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg && *arg) return vijp_fail(err, VIJP_EINVAL, "layernorm takes no argument, got 'layernorm:%s'", arg);
    if (in_width < 2)
        return vijp_fail(err, VIJP_EDIM, "layernorm normalizes over its input width, which must be >= 2 (got %zu%s)",
                         in_width, in_width ? "" : ": give --width");
    L->in = L->out = in_width;
    return 0;
}

/* J·1 = 0 (and J·ŷ = 0 for LayerNorm) exactly, J symmetric. */
static size_t analytic_cokernel(const vijp_layer *L, const double *th, const double *x)
{
    (void)L, (void)th, (void)x;
    return 2;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_NEVER_SUBMERSIVE; }

/* The terms J_ij = (δ_ij − 1/n − ŷ_iŷ_j/n)/σ is formed from:
 * M_ij = (δ_ij + 1/n + |ŷ_iŷ_j|/n)/σ >= |J_ij|.  J's entries can cancel to ~0
 * while the rounding errors of the terms do not.  Computed in double: 1%
 * covers its own rounding. */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    (void)th;
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
    (void)cx, (void)th;
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
    (void)cx, (void)L, (void)th, (void)X;
    return 2 * B;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)th;
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
    (void)cx, (void)th;
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
    (void)cx, (void)th;
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
    (void)cx, (void)th, (void)err;
    size_t n = L->in;
    double *yh = vijp_scratch(n), r = 1 / sqrt((double)n);
    normalize(x, n, yh);
    for (size_t i = 0; i < n; i++) Q[i] = r, Q[i + n] = yh[i] * r;
    free(yh);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = apply, .vjp = apply,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_layernorm_forward, .jvp = vo_layernorm_jvp, .vjp = vo_layernorm_jvp,
    .fragment_count = vo_layernorm_fragment_count, .fragment = vo_layernorm_fragment, .vijp = vo_layernorm_vijp,
    .jacobian = vo_layernorm_jacobian, .cokernel = vo_layernorm_cokernel,
};

const vijp_layer_type vijp_layer_layernorm = {
    .name = "layernorm", .syntax = "layernorm (no affine, no epsilon; keeps its width >= 2; fragment 2 per sample)",
    .parse = parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = vo_layernorm_jacobian_enclose, .analytic_cokernel = analytic_cokernel,
    .jacobian_majorant = jacobian_majorant,
};

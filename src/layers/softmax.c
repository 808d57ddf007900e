/* Softmax over each sample (column): y = exp(x − max x)/Σ exp(x − max x).
 *   J = diag(y) − yyᵀ,
 * symmetric with J·1 = 0: while every y_k > 0 the cokernel is span{1},
 * dimension 1 per sample (DESIGN §6).  The fragment is c = 1ᵀg/√n, and the
 * vijp is closed-form, O(n): z = g_x / y, then g_y = z + t·1 with t chosen so
 * that 1ᵀg_y/√n = c, i.e. g_y = J⁺g_x + c·1/√n.  Where some y_k underflows
 * to 0 the layer has lost more rank than the fragment covers and the vijp
 * refuses. */
#include "vijp/layer.h"
#include "activation.h"
#include "scratch.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* J·1 = 0 (and J·ŷ = 0 for LayerNorm) exactly, J symmetric. */
static size_t analytic_cokernel(const vijp_layer *L, const double *th, const double *x)
{
    (void)L, (void)th, (void)x;
    return 1;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_NEVER_SUBMERSIVE; }

static void softmax1(const double *x, size_t n, double *y)
{
    double mx = x[0], s = 0;
    for (size_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (size_t i = 0; i < n; i++) y[i] = exp(x[i] - mx), s += y[i];
    for (size_t i = 0; i < n; i++) y[i] /= s;
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    for (size_t b = 0; b < B; b++) softmax1(X + b * L->in, L->in, Y + b * L->in);
}

/* jvp and vjp coincide: V = y ⊙ (U − ⟨y, U⟩). */
static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                  const double *U, double *V)
{
    (void)cx, (void)th;
    size_t n = L->in;
    double *y = vijp_scratch(n);
    for (size_t b = 0; b < B; b++) {
        double d = 0;
        softmax1(X + b * n, n, y);
        for (size_t i = 0; i < n; i++) d += y[i] * U[b * n + i];
        for (size_t i = 0; i < n; i++) V[b * n + i] = y[i] * (U[b * n + i] - d);
    }
    free(y);
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)L, (void)th, (void)X;
    return B;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)th, (void)X;
    size_t n = L->in;
    for (size_t b = 0; b < B; b++) {
        double s = 0;
        for (size_t i = 0; i < n; i++) s += Gy[b * n + i];
        frag[b] = s / sqrt((double)n);
    }
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th;
    size_t n = L->in;
    double *y = vijp_scratch(n);
    for (size_t b = 0; b < B; b++) {
        double s = 0;
        softmax1(X + b * n, n, y);
        for (size_t i = 0; i < n; i++) {
            if (!(y[i] > 0)) {
                free(y);
                return vijp_fail(err, VIJP_ESINGULAR, "softmax vijp: output %zu of sample %zu underflows to 0 "
                                 "(x = %g): the cokernel is larger than the stored fragment", i, b, X[b * n + i]);
            }
            Gy[b * n + i] = Gx[b * n + i] / y[i];
            s += Gy[b * n + i];
        }
        double t = (frag[b] * sqrt((double)n) - s) / (double)n;
        for (size_t i = 0; i < n; i++) Gy[b * n + i] += t;
    }
    free(y);
    return 0;
}

/* scale·(diag(y) + sign·yyᵀ) at one sample (sign·p is an exact negation). */
static void diag_plus_outer(const vijp_layer *L, const double *x, double sign, double scale, double *J)
{
    size_t n = L->in;
    double *y = vijp_scratch(n);
    softmax1(x, n, y);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) J[i + j * n] = scale * ((i == j ? y[i] : 0.0) + sign * (y[i] * y[j]));
    free(y);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    diag_plus_outer(L, x, -1, 1, J);
}

/* The terms J = diag(y) − yyᵀ is formed from: M = diag(y) + yyᵀ >= |J|
 * (its entries can cancel to ~0 while their rounding errors do not).
 * Computed in double: 1% covers its own rounding. */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    (void)th;
    diag_plus_outer(L, x, 1, 1.01, M);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)cx, (void)th, (void)x, (void)err;
    for (size_t i = 0; i < L->in; i++) Q[i] = 1 / sqrt((double)L->in);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = apply, .vjp = apply,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_softmax_forward, .jvp = vo_softmax_jvp, .vjp = vo_softmax_jvp,
    .fragment_count = vo_softmax_fragment_count, .fragment = vo_softmax_fragment, .vijp = vo_softmax_vijp,
    .jacobian = vo_softmax_jacobian, .cokernel = vo_softmax_cokernel,
};

const vijp_layer_type vijp_layer_softmax = {
    .name = "softmax", .syntax = "softmax (over each sample; keeps its width; fragment 1 per sample)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = vo_softmax_jacobian_enclose, .analytic_cokernel = analytic_cokernel,
    .jacobian_majorant = jacobian_majorant,
};

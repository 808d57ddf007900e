/* ReLU, y = max(x, 0): J = diag([x > 0]).  Its cokernel is spanned by the
 * inactive units (x <= 0), so its fragment is the output cotangent on those
 * units, packed sample after sample (DESIGN §1, §6). */
#include "vijp/interval.h"
#include "vijp/layer.h"
#include "activation.h"
#include "oracles/oracles.h"
#include "layer/route.h"
#include <string.h>

/* Submersive exactly where every unit is active: no structural claim holds. */
static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)th;
    cx->k->relu_forward_d(L->in * B, X, Y);
}

static void mask_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)th;
    cx->k->relu_apply_d(L->in * B, X, U, V);
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th;
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++) k += !(X[i] > 0);
    return k;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)th;
    cx->k->relu_gather_d(L->in * B, X, Gy, frag);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)th, (void)err;
    cx->k->relu_scatter_d(L->in * B, X, Gx, frag, Gy);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = x[i] > 0 ? 1.0 : 0.0;
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)th, (void)err;
    size_t k = fragment_count(L, cx, th, x, 1);
    memset(Q, 0, L->in * k * sizeof *Q);
    for (size_t i = 0, j = 0; i < L->in; i++)
        if (!(x[i] > 0)) Q[i + L->in * j++] = 1.0;
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = mask_apply, .vjp = mask_apply,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

/* binary32@SET: the same kernels' float twins (exact: selections only). */
static void forward_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B, float *Y)
{
    (void)th;
    cx->k->relu_forward_f(L->in * B, X, Y);
}

static void mask_apply_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                         const float *U, float *V)
{
    (void)th;
    cx->k->relu_apply_f(L->in * B, X, U, V);
}

static void fragment_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                       const float *Gy, float *frag)
{
    (void)th;
    cx->k->relu_gather_f(L->in * B, X, Gy, frag);
}

static int vijp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                  const float *Gx, const float *frag, float *Gy, vijp_error *err)
{
    (void)th, (void)err;
    cx->k->relu_scatter_f(L->in * B, X, Gx, frag, Gy);
    return 0;
}

static const vijp_ops_f ops_f = {.forward = forward_f, .jvp = mask_apply_f, .vjp = mask_apply_f,
                                 .fragment = fragment_f, .vijp = vijp_f};

static const vijp_ops_mp ops_mp = {
    .forward = vo_relu_forward, .jvp = vo_relu_jvp, .vjp = vo_relu_jvp,
    .fragment_count = vo_relu_fragment_count, .fragment = vo_relu_fragment, .vijp = vo_relu_vijp,
    .jacobian = vo_relu_jacobian, .cokernel = vo_relu_cokernel,
};

const vijp_layer_type vijp_layer_relu = {
    .name = "relu", .syntax = "relu (keeps its width; fragment = cotangent on inactive units)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_SIGN, .d = &ops_d, .mp = &ops_mp, .f = &ops_f,
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_relu_deriv_enclose},
};

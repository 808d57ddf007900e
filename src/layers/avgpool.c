/* Average pooling avgpool:P: the mean of each run of P consecutive units,
 * y_j = (x_{jP} + … + x_{jP+P−1})/P, width n → n/P (per channel when the
 * channel length is a multiple of P, since channels are stored contiguously).
 *   J = (1/P)·[one row of P ones per output],  J Jᵀ = I/P:
 * full row rank, so submersive everywhere but not invertible (DESIGN §6).
 * The vijp is J⁺ = P·Jᵀ applied to the row vector, in structure, O(n):
 *   g_y[j] = Σ_{i in window j} g_x[i]  (no solve, no fragment). */
#include "vijp/layer.h"
#include "activation.h"
#include "args.h"
#include "state.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t w = 0;
    if (!p || vijp_arg_count(&p, &w) || *p || w < 2)
        return vijp_fail(err, VIJP_EINVAL, "avgpool needs a window in [2, %u]: avgpool:P (e.g. avgpool:2), got "
                         "'avgpool:%s'", VIJP_WIDTH_MAX, arg ? arg : "");
    if (in_width == 0 || in_width % w)
        return vijp_fail(err, VIJP_EDIM, "avgpool:%zu: the input width %zu is not a multiple of the window%s", w, in_width,
                         in_width ? "" : " (give --width)");
    vijp_state_new(L, sizeof(size_t));
    L->in = in_width, L->out = in_width / w, *(size_t *)L->state = w;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size) { return snprintf(buf, size, "avgpool:%zu", vijp_avgpool_window(L)); }

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_LINEAR; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    size_t P = vijp_avgpool_window(L);
    for (size_t j = 0; j < L->out * B; j++) {
        double s = 0;
        for (size_t k = 0; k < P; k++) s += X[j * P + k];
        Y[j] = s / (double)P;
    }
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)X;
    forward(L, cx, th, U, B, V);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    (void)cx, (void)th, (void)X;
    size_t P = vijp_avgpool_window(L);
    for (size_t j = 0; j < L->out * B; j++)
        for (size_t k = 0; k < P; k++) Gx[j * P + k] = Gy[j] / (double)P;
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)X, (void)frag, (void)err;
    size_t P = vijp_avgpool_window(L);
    for (size_t j = 0; j < L->out * B; j++) {
        double s = 0;
        for (size_t k = 0; k < P; k++) s += Gx[j * P + k];
        Gy[j] = s;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    size_t P = vijp_avgpool_window(L), m = L->out;
    memset(J, 0, m * L->in * sizeof *J);
    for (size_t j = 0; j < m; j++)
        for (size_t k = 0; k < P; k++) J[j + (j * P + k) * m] = 1 / (double)P;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vijp = vijp, .jacobian = jacobian,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_avgpool_forward, .jvp = vo_avgpool_jvp, .vjp = vo_avgpool_vjp, .vijp = vo_avgpool_vijp,
    .jacobian = vo_avgpool_jacobian,
};

const vijp_layer_type vijp_layer_avgpool = {
    .name = "avgpool", .syntax = "avgpool:P (mean of each run of P units; width n -> n/P)",
    .parse = parse, .state_size = sizeof(size_t), .print = print, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = vo_avgpool_jacobian_enclose, /* 1/P is exact in double only for P a power of two */
};

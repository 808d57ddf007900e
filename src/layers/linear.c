/* torch nn.Linear on the last axis of a token-major sequence:
 *   linear:OUTxIN  maps each run of IN units (one token) to OUT units,
 *   y_l = W x_l + b,  W = weight[OUT, IN],  l = 0 … L−1,  L = width/IN.
 * theta = [weight (OUT·IN, C order, i.e. W row-major), bias (OUT)]: what
 * torch's state_dict holds, so an exporter writes it unchanged.
 *
 * A sample's IN·L inputs, read column-major as an IN × L matrix, have token
 * l as column l: the layer is the dense layer y = W x + b applied to a batch
 * of L·B columns, and J = I_L ⊗ W is block diagonal.  So
 *   forward, jvp, vjp, vjp_param: one gemm each over the L·B tokens, with W
 *     read in place as the transpose of the column-major IN × OUT matrix;
 *   vijp, fragment, cokernel, inverse: the dense layer's solves with W
 *     (LU when square, QR otherwise) for all L·B tokens at once: submersive
 *     iff W has full row rank, fragment (OUT − IN) per token when tall,
 *     cokernel I_L ⊗ null(Wᵀ), inverse when OUT = IN and W is invertible;
 *   MPFR and the narrow formats: the dense oracle and its native emulation
 *     (src/emu/dense.c) on the same L·B columns, W transposed into the dense
 *     layer's column-major layout (exact copies), so the two agree bit for
 *     bit as the dense layer's do. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "vijp/catalogue.h"
#include "args.h"
#include "init.h"
#include "state.h"
#include "oracles/oracles.h"
#include "emu/dense.h"
#include "vijp/arith.h"
#include "layer/route.h"
#include "layer/emu_native.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_dense;

#define ARGS(L) ((const vijp_linear_args *)(L)->state) /* its own state: vijp_linear_get is for other files */
#define TOKENS(L) ((L)->in / ARGS(L)->in)

static int print(const vijp_layer *L, char *buf, size_t size)
{
    return snprintf(buf, size, "linear:%zux%zu", ARGS(L)->out, ARGS(L)->in);
}

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t m = 0, n = 0;
    int bad = p ? vijp_arg_count(&p, &m) : VIJP_ARG_NOT_A_COUNT;
    if (!bad && *p == 'x') p++, bad = vijp_arg_count(&p, &n);
    else if (!bad) bad = VIJP_ARG_NOT_A_COUNT;
    if (bad || *p || m == 0 || n == 0)
        return vijp_fail(err, VIJP_EINVAL, "linear needs its sizes: linear:OUTxIN with 1 <= OUT, IN <= %u, got "
                         "'linear%s%s'%s", VIJP_WIDTH_MAX, arg ? ":" : "", arg ? arg : "",
                         bad == VIJP_ARG_TOO_LARGE ? " (too large)" : "");
    if (in_width == 0 || in_width % n)
        return vijp_fail(err, VIJP_EDIM, "linear:%zux%zu: the input width %zu is not a multiple of IN = %zu%s", m, n,
                         in_width, n, in_width ? "" : " (give --width)");
    if (in_width / n * m > VIJP_WIDTH_MAX)
        return vijp_fail(err, VIJP_EDIM, "linear:%zux%zu: %zu tokens of %zu outputs exceed the widest layer (%u)", m,
                         n, in_width / n, m, VIJP_WIDTH_MAX);
    vijp_state_new(L, sizeof(vijp_linear_args));
    *(vijp_linear_args *)L->state = (vijp_linear_args){.out = m, .in = n};
    L->in = in_width, L->out = in_width / n * m;
    return 0;
}

static size_t param_count(const vijp_layer *L) { return ARGS(L)->out * ARGS(L)->in + ARGS(L)->out; }

static unsigned declare(const vijp_layer *L)
{
    return VIJP_DECL_LINEAR | (ARGS(L)->out > ARGS(L)->in ? VIJP_DECL_NEVER_SUBMERSIVE : 0u);
}

/* The one-token dense layer (OUT × IN) the operators below hand work to. */
static vijp_layer token_layer(const vijp_layer *L)
{
    return (vijp_layer){.type = &vijp_layer_dense, .in = ARGS(L)->in, .out = ARGS(L)->out};
}

/* kaiming-uniform is torch's default (weight and bias U(±1/√IN)); the
 * others are the dense layer's on the one-token W, then moved to C order. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    if (in.kind == VIJP_INIT_KAIMING_UNIFORM) {
        vijp_kaiming_uniform(m * n + m, n, rng, theta);
        return 0;
    }
    vijp_layer D = token_layer(L);
    double *dense = vijp_alloc_array(m * n + m, sizeof *dense);
    int rc = vijp_layer_dense.init(&D, in, rng, dense);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) theta[i * n + k] = dense[i + k * m];
    memcpy(theta + m * n, dense + m * n, m * sizeof *theta);
    free(dense);
    return rc;
}

/* ---- double: gemms over the L·B tokens ---- */

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in, T = TOKENS(L) * B;
    for (size_t t = 0; t < T; t++) memcpy(Y + t * m, th + m * n, m * sizeof *Y);
    cx->k->gemm_d(1, 0, m, T, n, 1.0, th, n, X, n, 1.0, Y, m);
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                double *V)
{
    (void)X;
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    cx->k->gemm_d(1, 0, m, TOKENS(L) * B, n, 1.0, th, n, U, n, 0.0, V, m);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gy,
                double *Gx)
{
    (void)X;
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    cx->k->gemm_d(0, 0, n, TOKENS(L) * B, m, 1.0, th, n, Gy, m, 0.0, Gx, n);
}

/* dW (C order: column-major IN × OUT) = X Gyᵀ over the tokens; db = Σ Gy. */
static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)th;
    size_t m = ARGS(L)->out, n = ARGS(L)->in, T = TOKENS(L) * B;
    cx->k->gemm_d(0, 1, n, m, T, 1.0, X, n, Gy, m, 0.0, Gt, n);
    double *db = Gt + m * n;
    for (size_t i = 0; i < m; i++) db[i] = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < m; i++) db[i] += Gy[i + t * m];
}

/* theta in the dense layer's layout: W column-major (OUT × IN), then b. */
static double *dense_theta(const vijp_layer *L, const double *th)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    double *d = vijp_alloc_array(m * n + m, sizeof *d);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) d[i + k * m] = th[i * n + k];
    memcpy(d + m * n, th + m * n, m * sizeof *d);
    return d;
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    vijp_layer D = token_layer(L);
    return vijp_layer_dense.d->fragment_count(&D, cx, th, X, TOKENS(L) * B);
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta(L, th);
    vijp_layer_dense.d->fragment(&D, cx, d, X, TOKENS(L) * B, Gy, frag);
    free(d);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta(L, th);
    int rc = vijp_layer_dense.d->vijp(&D, cx, d, X, TOKENS(L) * B, Gx, frag, Gy, err);
    free(d);
    return rc;
}

/* J = I_L ⊗ W (L·OUT × L·IN, column-major). */
static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    size_t m = ARGS(L)->out, n = ARGS(L)->in, M = L->out;
    memset(J, 0, L->out * L->in * sizeof *J);
    for (size_t l = 0; l < TOKENS(L); l++)
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < n; k++) J[(l * m + i) + (l * n + k) * M] = th[i * n + k];
}

/* Q = I_L ⊗ Q₁, Q₁ the dense layer's basis of null(Wᵀ) (OUT × (OUT − IN)):
 * column l·(OUT − IN) + c is token l's c-th, as the fragment packs them. */
static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in, M = L->out, T = TOKENS(L);
    if (m <= n) return 0;
    vijp_layer D = token_layer(L);
    double *d = dense_theta(L, th), *Q1 = vijp_alloc_array(m * (m - n), sizeof *Q1);
    int rc = vijp_layer_dense.d->cokernel(&D, cx, d, x, Q1, err);
    if (!rc) {
        memset(Q, 0, M * T * (m - n) * sizeof *Q);
        for (size_t l = 0; l < T; l++)
            for (size_t c = 0; c < m - n; c++)
                memcpy(Q + l * m + (l * (m - n) + c) * M, Q1 + c * m, m * sizeof *Q);
    }
    free(d), free(Q1);
    return rc;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta(L, th);
    int rc = vijp_layer_dense.d->inverse(&D, cx, d, Y, TOKENS(L) * B, X, err);
    free(d);
    return rc;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel, .inverse = inverse,
};

/* ---- the narrow formats: the dense layer's emulation on the L·B tokens ---- */

/* Each runs the dense emulation's operator on the one-token layer with the
 * dense layout's theta (vo_linear_dense_theta, exact copies), as
 * oracles/linear.c runs the dense oracle's: the two agree bit for bit. */
static void emu_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vijp_emu_dense_forward(&D, d, X, TOKENS(L) * B, Y, f);
    vo_vec_free(d, param_count(L));
}

static void emu_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vijp_emu_dense_jvp(&D, d, X, TOKENS(L) * B, U, V, f);
    vo_vec_free(d, param_count(L));
}

static void emu_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vijp_emu_dense_vjp(&D, d, X, TOKENS(L) * B, Gy, Gx, f);
    vo_vec_free(d, param_count(L));
}

static void emu_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                          const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f), *g = vo_vec_new(param_count(L), f);
    vijp_emu_dense_vjp_param(&D, d, X, TOKENS(L) * B, Gy, g, f);
    vo_linear_theta_from_dense(L, g, Gt);
    vo_vec_free(d, param_count(L)), vo_vec_free(g, param_count(L));
}

static void emu_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                         const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vijp_emu_dense_fragment(&D, d, X, TOKENS(L) * B, Gy, frag, f);
    vo_vec_free(d, param_count(L));
}

static int emu_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                    const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    int rc = vijp_emu_dense_vijp(&D, d, X, TOKENS(L) * B, Gx, frag, Gy, f);
    vo_vec_free(d, param_count(L));
    return rc;
}

static int emu_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    if (m <= n) return 0;
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f), *Q1 = vo_vec_new(m * (m - n), f);
    int rc = vijp_emu_dense_cokernel(&D, d, x, Q1, f);
    if (!rc) vo_linear_block_cokernel(L, Q1, Q);
    vo_vec_free(d, param_count(L)), vo_vec_free(Q1, m * (m - n));
    return rc;
}

static int emu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    int rc = vijp_emu_dense_inverse(&D, d, Y, TOKENS(L) * B, X, f);
    vo_vec_free(d, param_count(L));
    return rc;
}

static const vijp_ops_mp ops_mp = {
    .forward = vo_linear_forward, .jvp = vo_linear_jvp, .vjp = vo_linear_vjp, .vjp_param = vo_linear_vjp_param,
    .fragment_count = vo_linear_fragment_count, .fragment = vo_linear_fragment, .vijp = vo_linear_vijp,
    .jacobian = vo_linear_jacobian, .cokernel = vo_linear_cokernel, .inverse = vo_linear_inverse,
};
/* The same on the doubles the narrow formats' matrices hold (emu_native,
 * layer/emu_native.h): dense's, on the dense layout's theta (a copy). */
static double *dense_theta_d(const vijp_layer *L, const double *th)
{
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    double *d = vijp_alloc_array(m * n + m, sizeof *d);
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < n; k++) d[i + k * m] = th[i * n + k]; /* vo_linear_dense_theta's layout */
        d[m * n + i] = th[m * n + i];
    }
    return d;
}

static void native_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y,
                           const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta_d(L, th);
    vijp_emu_dense_native.forward(&D, d, X, TOKENS(L) * B, Y, f);
    free(d);
}

static void native_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V,
                       const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta_d(L, th);
    vijp_emu_dense_native.jvp(&D, d, X, TOKENS(L) * B, U, V, f);
    free(d);
}

static void native_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx,
                       const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    double *d = dense_theta_d(L, th);
    vijp_emu_dense_native.vjp(&D, d, X, TOKENS(L) * B, Gy, Gx, f);
    free(d);
}

static void native_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                             double *Gt, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    size_t m = ARGS(L)->out, n = ARGS(L)->in;
    double *d = dense_theta_d(L, th), *g = vijp_alloc_array(m * n + m, sizeof *g);
    vijp_emu_dense_native.vjp_param(&D, d, X, TOKENS(L) * B, Gy, g, f);
    for (size_t i = 0; i < m; i++) { /* vo_linear_theta_from_dense's layout */
        for (size_t k = 0; k < n; k++) Gt[i * n + k] = g[i + k * m];
        Gt[m * n + i] = g[m * n + i];
    }
    free(d), free(g);
}

static const struct vijp_emu_native ops_native = {
    .forward = native_forward, .jvp = native_jvp, .vjp = native_vjp, .vjp_param = native_vjp_param,
};

static const vijp_ops_mp ops_emu = {
    .forward = emu_forward, .jvp = emu_jvp, .vjp = emu_vjp, .vjp_param = emu_vjp_param,
    .fragment_count = vo_linear_fragment_count, .fragment = emu_fragment, .vijp = emu_vijp,
    .jacobian = vo_linear_jacobian, .cokernel = emu_cokernel, .inverse = emu_inverse,
};

/* ---- the error-bound contract (vijp_layer_bounds; tests/t-layers.c) ---- */

static size_t bias_index(const vijp_layer *L, size_t i) { return ARGS(L)->out * ARGS(L)->in + i % ARGS(L)->out; }

/* dW[i, k] = Σ_(b,l) G[l·OUT + i] X[l·IN + k] and db[i] = Σ_(b,l) G[l·OUT + i]:
 * sums of T = L·B terms formed into a zero, within γ_(T+1) Σ |G||X|
 * (Higham eq. 3.5). */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bound)
{
    (void)th;
    size_t m = ARGS(L)->out, n = ARGS(L)->in, T = TOKENS(L) * B;
    double c = (double)(T + 1) * u;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < m; i++) {
            for (size_t k = 0; k < n; k++) bound[i * n + k] += c * aG[i + t * m] * aX[k + t * n];
            bound[m * n + i] += c * aG[i + t * m];
        }
}

const vijp_layer_type vijp_layer_linear = {
    .name = "linear", .syntax = "linear:OUTxIN (torch nn.Linear on each token of IN units; width a multiple of IN)",
    .parse = parse, .state_size = sizeof(vijp_linear_args), .print = print, .param_count = param_count, .init = init,
    .declare = declare, .jacobian_exact = 1, .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp,
    .emu = &ops_emu, .emu_native = &ops_native, .bounds = {.inverse = VIJP_INVBOUND_LINEAR}, .bias_index = bias_index,
    .vjp_param_bound = vjp_param_bound,
};

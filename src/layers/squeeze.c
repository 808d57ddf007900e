/* Space-to-depth (squeeze) squeeze:CxF: C channels of length L (channel-
 * major) become C·F channels of length L/F, position p'·F + r of channel c
 * going to channel c·F + r, position p'.  J is a permutation matrix:
 * submersive and invertible, and every operator, the vijp and the inverse
 * included, is the same permutation or its inverse, exact in every format
 * (no rounding at all).  Like inv1x1 it declares VIJP_RESIDUAL_INVERSE so
 * that Moonwalk's rebuild-by-inversion chain runs through it. */
#include "vijp/layer.h"
#include "activation.h"
#include "args.h"
#include "state.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include <stdio.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t c = 0, f = 0; /* each <= 2^24 (args.h), so c·f cannot wrap */
    int bad = !p || vijp_arg_count(&p, &c) || *p != 'x';
    if (!bad) p++, bad = vijp_arg_count(&p, &f) || *p;
    if (bad || c == 0 || f < 2)
        return vijp_fail(err, VIJP_EINVAL, "squeeze needs squeeze:CHANNELSxFACTOR (1 <= channels, 2 <= factor, both <= %u, "
                         "e.g. squeeze:2x2), got 'squeeze:%s'", VIJP_WIDTH_MAX, arg ? arg : "");
    if (in_width == 0 || in_width % (c * f))
        return vijp_fail(err, VIJP_EDIM, "squeeze:%zux%zu: the input width %zu is not a multiple of %zu%s", c, f, in_width,
                         c * f, in_width ? "" : " (give --width)");
    vijp_state_new(L, sizeof(vijp_squeeze_args));
    L->in = L->out = in_width, *(vijp_squeeze_args *)L->state = (vijp_squeeze_args){c, f};
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    return snprintf(buf, size, "squeeze:%zux%zu", vijp_squeeze_get(L)->channels, vijp_squeeze_get(L)->factor);
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE | VIJP_DECL_LINEAR; }

/* The input index that output index j reads (within one sample). */
static size_t source(const vijp_layer *L, size_t j)
{
    size_t C = vijp_squeeze_get(L)->channels, F = vijp_squeeze_get(L)->factor, len = L->in / C, out_len = len / F;
    size_t ch = j / out_len, p = j % out_len; /* output channel ch = c·F + r */
    return (ch / F) * len + p * F + ch % F;
}

/* Y = P X (gather) or X = Pᵀ Y (scatter), sample by sample. */
static void permute(const vijp_layer *L, const double *in, size_t B, double *out, int scatter)
{
    size_t n = L->in;
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < n; j++)
            if (scatter) out[b * n + source(L, j)] = in[b * n + j];
            else out[b * n + j] = in[b * n + source(L, j)];
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    double *Y) { (void)cx; (void)th, permute(L, X, B, Y, 0); }
static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)cx, (void)th, (void)X;
    permute(L, U, B, V, 0);
}
static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    (void)cx, (void)th, (void)X;
    permute(L, Gy, B, Gx, 1);
}
static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)X, (void)frag, (void)err;
    permute(L, Gx, B, Gy, 0);
    return 0;
}
static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    permute(L, Y, B, X, 1);
    return 0;
}
static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t j = 0; j < L->in; j++) J[j + source(L, j) * L->in] = 1;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vijp = vijp, .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_squeeze_forward, .jvp = vo_squeeze_jvp, .vjp = vo_squeeze_vjp, .vijp = vo_squeeze_vijp,
    .jacobian = vo_squeeze_jacobian, .inverse = vo_squeeze_inverse,
};

const vijp_layer_type vijp_layer_squeeze = {
    .name = "squeeze", .syntax = "squeeze:CxF (space-to-depth: C channels of length L -> C*F channels of length L/F)",
    .parse = parse, .state_size = sizeof(vijp_squeeze_args), .print = print, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_INVERSE, .d = &ops_d, .mp = &ops_mp, .jacobian_exact = 1,
    .bounds = {.inverse = VIJP_INVBOUND_EXACT}, /* a permutation: no rounding at all */
};

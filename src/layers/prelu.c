/* PReLU (torch.nn.PReLU(num_parameters=C)), spec prelu[:C] (default 1):
 * y = x (x > 0), a_c·x (x <= 0), with a learned slope a_c per channel of a
 * channel-major row (C channels × S = width/C positions: channel c is units
 * [c·S, (c+1)·S)); θ = weight[C], torch's state_dict tensor, initialised to
 * 0.25 as torch does.  J = diag(1 or a_c): invertible wherever every slope
 * is nonzero (negative slopes included: f is then not injective, but J is),
 * so the vijp divides and has no fragment, and refuses (VIJP_ESINGULAR) a
 * zero slope on an inactive unit.  The inverse, a bijection only when every
 * a_c > 0, refuses any other θ.  What holds depends on θ, which
 * declarations cannot see: nothing is declared.
 * Error: a_c·x one rounding, x/a_c one; the parameter gradient
 * Σ x·g over the channel's inactive units is a sum of S·B products, within
 * γ_{S·B+1}·Σ|x||g| (Higham eq. 3.5; the bound below sums over all of the
 * channel's units, which covers the inactive ones).  The MPFR twin
 * (oracles/prelu.c) runs the narrow formats (no native emulation).
 * Inverse: y/a_c one rounding (u|x|) plus the forward's u|y| carried back
 * through 1/f′: u(2|x| + 2|y|/f′), as leaky's.
 * residual INPUT: the parameter gradient needs x itself. */
#include "vijp/interval.h"
#include "vijp/catalogue.h"
#include "activation.h"
#include "args.h"
#include "state.h"
#include "oracles/oracles.h"
#include <stdio.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    size_t C = 1;
    const char *p = arg;
    if (arg && (vijp_arg_count(&p, &C) != VIJP_ARG_OK || *p || C == 0))
        return vijp_fail(err, VIJP_EINVAL, "prelu takes a channel count: prelu or prelu:C (C from 1 to %u), got "
                         "'prelu:%s'", VIJP_WIDTH_MAX, arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "prelu keeps its input width, which is unknown here: give --width");
    if (in_width % C)
        return vijp_fail(err, VIJP_EDIM, "prelu: the input width %zu is not a multiple of %zu channels", in_width, C);
    vijp_state_new(L, sizeof C);
    *(size_t *)L->state = C;
    L->in = L->out = in_width;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    size_t C = vijp_prelu_channels(L);
    return C == 1 ? snprintf(buf, size, "prelu") : snprintf(buf, size, "prelu:%zu", C);
}

static size_t param_count(const vijp_layer *L) { return vijp_prelu_channels(L); }

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    (void)in, (void)rng;
    for (size_t c = 0; c < vijp_prelu_channels(L); c++) th[c] = 0.25; /* torch's default init */
    return 0;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

/* The slope of unit i of a batch (any sample). */
static double slope_of(const vijp_layer *L, const double *th, size_t i)
{
    size_t S = L->in / vijp_prelu_channels(L);
    return th[(i % L->in) / S];
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = X[i] > 0 ? X[i] : slope_of(L, th, i) * X[i];
}

static void diag_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)cx;
    for (size_t i = 0; i < L->in * B; i++) V[i] = X[i] > 0 ? U[i] : slope_of(L, th, i) * U[i];
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx, (void)th;
    size_t C = vijp_prelu_channels(L), S = L->in / C;
    memset(Gt, 0, C * sizeof *Gt);
    for (size_t i = 0; i < L->in * B; i++)
        if (!(X[i] > 0)) Gt[(i % L->in) / S] += X[i] * Gy[i];
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)frag;
    for (size_t i = 0; i < L->in * B; i++) {
        double a = X[i] > 0 ? 1.0 : slope_of(L, th, i);
        if (a == 0)
            return vijp_fail(err, VIJP_ESINGULAR, "prelu vijp: slope 0 at inactive unit %zu: J is singular there",
                             i % L->in);
        Gy[i] = Gx[i] / a;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = x[i] > 0 ? 1.0 : slope_of(L, th, i);
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx;
    for (size_t c = 0; c < vijp_prelu_channels(L); c++)
        if (!(th[c] > 0))
            return vijp_fail(err, VIJP_ESINGULAR, "prelu inverse: slope %g of channel %zu is not positive: f is not "
                             "a bijection", th[c], c);
    for (size_t i = 0; i < L->in * B; i++) X[i] = Y[i] > 0 ? Y[i] : Y[i] / slope_of(L, th, i);
    return 0;
}

/* γ_{S·B+1}·Σ|x||g| over channel c's units (see the top). */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bp)
{
    (void)th;
    size_t C = vijp_prelu_channels(L), S = L->in / C;
    double terms = (double)(S * B + 1), gamma = 1.01 * terms * u;
    for (size_t i = 0; i < L->in * B; i++) bp[(i % L->in) / S] += gamma * aX[i] * aG[i];
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = diag_apply, .vjp = diag_apply, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_prelu_forward, .jvp = vo_prelu_jvp, .vjp = vo_prelu_jvp, .vjp_param = vo_prelu_vjp_param,
    .vijp = vo_prelu_vijp, .jacobian = vo_prelu_jacobian, .inverse = vo_prelu_inverse,
};

const vijp_layer_type vijp_layer_prelu = {
    .name = "prelu", .syntax = "prelu[:C] (learned slope per channel, C channels (default 1), channel-major, "
    "theta = weight[C], init 0.25; width a multiple of C)",
    .parse = parse, .state_size = sizeof(size_t), .print = print, .param_count = param_count, .init = init,
    .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .bounds = {.ulps = 1, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 2, .inv_b = 2},
    .vjp_param_bound = vjp_param_bound,
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_prelu_deriv_enclose},
};

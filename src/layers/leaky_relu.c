/* Leaky ReLU, y = x (x > 0), αx (x <= 0), with 0 < α: J = diag(1 or α),
 * submersive and invertible everywhere (DESIGN §6).  α = 0 is ReLU and is
 * refused here: it has a cokernel, which the relu layer stores as a fragment. */
#include "vijp/interval.h"
#include "vijp/layer.h"
#include "activation.h"
#include "state.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include "layer/route.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The slope's range.  α must be finite and nonzero (α = 0 is ReLU: J is
 * singular, there is no vijp), and positive (α < 0 folds negative inputs onto
 * positive outputs: no inverse).  The operators multiply a unit by α (forward,
 * jvp, vjp) or divide it by α (vijp, inverse), in every format, with α itself
 * rounded to the format (oracles/elementwise.c).  α in [2^-12, 2^12] keeps all
 * of that finite and well defined even in the narrowest format, binary16
 * (normal numbers from 2^-14 to 65504 ≈ 2^16):
 *   - α rounds to a normal number, never to 0 or ∞, so 1/α exists and the
 *     vijp and inverse divide by what the forward multiplied by;
 *   - a unit of magnitude up to 2^3 (eight standard deviations of the N(0, 1)
 *     inputs the commands draw) times α or 1/α is at most 2^15 < 65504: one
 *     layer does not overflow.  binary32 and bfloat16 (max ≈ 2^128) then hold
 *     units up to 2^115, double up to 2^1011.
 * A stack of such layers can still overflow (α^depth): that is the run's
 * result, reported as not finite when it happens, not a bad argument. */
#define SLOPE_MIN 0x1p-12
#define SLOPE_MAX 0x1p12

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    char *end = NULL;
    double a = arg ? strtod(arg, &end) : NAN;
    if (!arg || end == arg || *end)
        return vijp_fail(err, VIJP_EINVAL, "leaky needs a slope: leaky:ALPHA (e.g. leaky:0.1)");
    if (a == 0)
        return vijp_fail(err, VIJP_EINVAL,
                         "leaky slope 0 is ReLU, which is not submersive: use 'relu' (its vijp "
                         "stores the inactive units' cotangents as a fragment)");
    if (!(a >= SLOPE_MIN && a <= SLOPE_MAX))
        return vijp_fail(err, VIJP_EINVAL, "leaky slope must be in [2^-12, 2^12] = [%.12g, %g] (so that the slope and "
                         "its inverse keep a unit of size 8 finite even in binary16), got '%s'", SLOPE_MIN, SLOPE_MAX, arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "leaky keeps its input width, which is unknown here: give --width");
    vijp_state_new(L, sizeof(double));
    L->in = L->out = in_width;
    *(double *)L->state = a;
    return 0;
}

/* The shortest decimal that reads back as the slope, without the '+' of a
 * positive exponent ("1.7e02", not "1.7e+02"): in a coupling block's list
 * '+' separates layers (found by the net-spec fuzzer). */
static int print(const vijp_layer *L, char *buf, size_t size)
{
    double a = vijp_leaky_slope(L);
    char num[32];
    for (int p = 1; p <= 17; p++) {
        snprintf(num, sizeof num, "%.*g", p, a);
        if (strtod(num, NULL) == a) break;
    }
    char *plus = strchr(num, '+');
    if (plus) memmove(plus, plus + 1, strlen(plus));
    return snprintf(buf, size, "leaky:%s", num);
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

/* The operators (exact kernels, src/kernels/kernels.h) read the slope once (the instance's own state, no type
 * check on the per-unit path). */
#define ALPHA(L) (*(const double *)(L)->state)
static double slope(double alpha, double x) { return x > 0 ? 1.0 : alpha; }
/* The per-unit loops are the kernel table's (src/kernels/): the SIMD sets
 * select the slope by mask, without a branch per unit (the signs of a
 * layer's inputs are a coin toss: a mispredicted branch per unit cost the
 * backprop benchmark 6% of its time); every set gives the same results. */

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)th;
    cx->k->leaky_forward_d(L->in * B, ALPHA(L), X, Y);
}

/* jvp and vjp coincide for a diagonal Jacobian. */
static void diag_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)th;
    cx->k->leaky_apply_d(L->in * B, ALPHA(L), X, U, V);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)th, (void)frag, (void)err;
    cx->k->leaky_vijp_d(L->in * B, ALPHA(L), X, Gx, Gy);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    double a = ALPHA(L);
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = slope(a, x[i]);
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)th, (void)err;
    cx->k->leaky_inverse_d(L->in * B, ALPHA(L), Y, X);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = diag_apply, .vjp = diag_apply, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

/* binary32@SET: the float kernels, with α rounded to binary32 once, as the
 * emulation rounds it (oracles/elementwise.c); each unit then takes the
 * same one binary32 operation. */
static void forward_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B, float *Y)
{
    (void)th;
    cx->k->leaky_forward_f(L->in * B, (float)ALPHA(L), X, Y);
}

static void diag_apply_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                         const float *U, float *V)
{
    (void)th;
    cx->k->leaky_apply_f(L->in * B, (float)ALPHA(L), X, U, V);
}

static int vijp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                  const float *Gx, const float *frag, float *Gy, vijp_error *err)
{
    (void)th, (void)frag, (void)err;
    cx->k->leaky_vijp_f(L->in * B, (float)ALPHA(L), X, Gx, Gy);
    return 0;
}

static const vijp_ops_f ops_f = {.forward = forward_f, .jvp = diag_apply_f, .vjp = diag_apply_f, .vijp = vijp_f};

static const vijp_ops_mp ops_mp = {
    .forward = vo_leaky_forward, .jvp = vo_leaky_jvp, .vjp = vo_leaky_jvp, .vijp = vo_leaky_vijp,
    .jacobian = vo_leaky_jacobian, .inverse = vo_leaky_inverse,
};

const vijp_layer_type vijp_layer_leaky_relu = {
    .name = "leaky", .syntax = "leaky:ALPHA (2^-12 <= ALPHA <= 2^12; keeps its width)",
    .parse = parse, .state_size = sizeof(double), .print = print, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_SIGN, .d = &ops_d, .mp = &ops_mp, .f = &ops_f,
    /* inverse: y/α rounded once (u|x|), plus the forward's rounding of αx (u|y|) divided by α = f′ */
    .bounds = {.inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 4, .inv_b = 4},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_leaky_deriv_enclose},
};

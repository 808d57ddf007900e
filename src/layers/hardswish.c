/* Hardswish (torch.nn.Hardswish): y = x·relu6(x + 3)/6, i.e. 0 for x <= −3,
 * x(x + 3)/6 between, x for x >= 3.  f′ as torch's backward takes it: 0
 * for x < −3, (2x + 3)/6 for −3 <= x <= 3 (torch writes x/3 + 1/2: the same
 * number; this form is 0 exactly at x = −1.5 alone, in every format, since
 * 2x is exact and a sum rounds to 0 only when it is 0), 1 above.
 * Non-submersive points: any unit with x < −3 (a flat region) and the
 * isolated zero x = −1.5 of f′: on those units J's column is 0, they span
 * the cokernel, and the fragment is the output cotangent on them (as relu's,
 * DESIGN §1, §6); elsewhere the vijp divides by f′, which is small near
 * −1.5 (the battery keeps 0.5 away, as from gelu's zero).  Not injective (f
 * falls on (−3, −1.5)): no inverse, nothing declared.
 * Error (u = 2^-53, each operation correctly rounded): f = x·(x + 3)/6
 * within 3u|f|, f′ = (2x + 3)/6 within 2u|f′|; the same operations in the
 * MPFR twin (oracles/piecewise_act.c), which runs the narrow formats (no
 * native emulation): the contract's ulps 3. */
#include "vijp/interval.h"
#include "activation.h"
#include "oracles/oracles.h"
#include <string.h>

static double value(double x) { return x <= -3 ? 0.0 : x >= 3 ? x : x * (x + 3) / 6; }
static double slope(double x) { return x < -3 ? 0.0 : x <= 3 ? (2 * x + 3) / 6 : 1.0; }

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = value(X[i]);
}

static void diag_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) V[i] = U[i] * slope(X[i]);
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th;
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++) k += slope(X[i]) == 0;
    return k;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)th;
    for (size_t i = 0, k = 0; i < L->in * B; i++)
        if (slope(X[i]) == 0) frag[k++] = Gy[i];
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    for (size_t i = 0, k = 0; i < L->in * B; i++) {
        double d = slope(X[i]);
        Gy[i] = d == 0 ? frag[k++] : Gx[i] / d;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = slope(x[i]);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)err;
    size_t k = fragment_count(L, cx, th, x, 1);
    memset(Q, 0, L->in * k * sizeof *Q);
    for (size_t i = 0, j = 0; i < L->in; i++)
        if (slope(x[i]) == 0) Q[i + L->in * j++] = 1.0;
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = diag_apply, .vjp = diag_apply,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_hardswish_forward, .jvp = vo_hardswish_jvp, .vjp = vo_hardswish_jvp,
    .fragment_count = vo_hardswish_fragment_count, .fragment = vo_hardswish_fragment, .vijp = vo_hardswish_vijp,
    .jacobian = vo_hardswish_jacobian, .cokernel = vo_hardswish_cokernel,
};

const vijp_layer_type vijp_layer_hardswish = {
    .name = "hardswish", .syntax = "hardswish (x·relu6(x + 3)/6; fragment = cotangent where f' = 0: x < -3, "
    "x = -1.5; keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .bounds = {.ulps = 3, .n_deriv_zeros = 1, .deriv_zeros = {-1.5}},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_hardswish_deriv_enclose},
};

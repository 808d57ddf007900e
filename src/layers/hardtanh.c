/* Hardtanh and ReLU6 (torch.nn.Hardtanh, torch.nn.ReLU6 = Hardtanh(0, 6)):
 *   hardtanh[:LO/HI]  y = min(max(x, lo), hi), default −1/1;
 *   relu6             the same with 0/6.
 * J = diag(1 on lo < x < hi, 0 elsewhere), as torch's backward, which
 * passes the gradient only strictly inside (at x = lo or hi it is 0).
 * Non-submersive at every point with a unit at or outside [lo, hi]: those
 * flat units span J's cokernel, and the fragment is the output cotangent on
 * them, packed sample after sample, as relu's (DESIGN §1, §6).  Not
 * injective: no inverse, nothing declared.  Every operator selects or
 * copies: exact in every format (the contract's ulps 1, the least it
 * states).  The MPFR twin (oracles/piecewise_act.c) rounds lo and hi to the
 * format and runs the narrow formats (no native emulation).  Kinks at lo and
 * hi: the battery's N(0, 1) points meet them with probability 0. */
#include "vijp/interval.h"
#include "vijp/catalogue.h"
#include "activation.h"
#include "numarg.h"
#include "state.h"
#include "oracles/oracles.h"
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vijp_hardtanh_args a = {-1.0, 1.0};
    const char *p = arg;
    if (arg && (vijp_numarg_read(&p, '/', &a.lo) || *p != '/' || (++p, vijp_numarg_read(&p, 0, &a.hi))))
        return vijp_fail(err, VIJP_EINVAL, "hardtanh takes two numbers: hardtanh or hardtanh:LO/HI (e.g. "
                         "hardtanh:-2/2), got 'hardtanh:%s'", arg);
    if (!(a.lo < a.hi))
        return vijp_fail(err, VIJP_EINVAL, "hardtanh:LO/HI needs LO < HI, got 'hardtanh:%s'", arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "hardtanh keeps its input width, which is unknown here: give --width");
    vijp_state_new(L, sizeof a);
    *(vijp_hardtanh_args *)L->state = a;
    L->in = L->out = in_width;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    if (a.lo == -1 && a.hi == 1) return snprintf(buf, size, "hardtanh");
    char lo[32], hi[32];
    vijp_numarg_print(a.lo, lo, sizeof lo), vijp_numarg_print(a.hi, hi, sizeof hi);
    return snprintf(buf, size, "hardtanh:%s/%s", lo, hi);
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static int active(vijp_hardtanh_args a, double x) { return x > a.lo && x < a.hi; }

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    for (size_t i = 0; i < L->in * B; i++) Y[i] = X[i] <= a.lo ? a.lo : X[i] >= a.hi ? a.hi : X[i];
}

static void mask_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)cx, (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    for (size_t i = 0; i < L->in * B; i++) V[i] = active(a, X[i]) ? U[i] : 0.0;
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++) k += !active(a, X[i]);
    return k;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    for (size_t i = 0, k = 0; i < L->in * B; i++)
        if (!active(a, X[i])) frag[k++] = Gy[i];
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    for (size_t i = 0, k = 0; i < L->in * B; i++) Gy[i] = active(a, X[i]) ? Gx[i] : frag[k++];
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = active(a, x[i]) ? 1.0 : 0.0;
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    vijp_hardtanh_args a = vijp_hardtanh_get(L);
    size_t k = fragment_count(L, cx, th, x, 1);
    memset(Q, 0, L->in * k * sizeof *Q);
    for (size_t i = 0, j = 0; i < L->in; i++)
        if (!active(a, x[i])) Q[i + L->in * j++] = 1.0;
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = mask_apply, .vjp = mask_apply,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_hardtanh_forward, .jvp = vo_hardtanh_jvp, .vjp = vo_hardtanh_jvp,
    .fragment_count = vo_hardtanh_fragment_count, .fragment = vo_hardtanh_fragment, .vijp = vo_hardtanh_vijp,
    .jacobian = vo_hardtanh_jacobian, .cokernel = vo_hardtanh_cokernel,
};

/* The input, not one bit: whether a unit is inside (lo, hi) is not its sign. */
const vijp_layer_type vijp_layer_hardtanh = {
    .name = "hardtanh", .syntax = "hardtanh[:LO/HI] (clamp to [LO, HI], default -1/1; fragment = cotangent on "
    "clamped units; keeps its width)",
    .parse = parse, .state_size = sizeof(vijp_hardtanh_args), .print = print, .param_count = vijp_act_no_params,
    .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp, .bounds = {.ulps = 1},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_hardtanh_deriv_enclose},
};

const vijp_layer_type vijp_layer_relu6 = {
    .name = "relu6", .syntax = "relu6 (clamp to [0, 6]; fragment = cotangent on clamped units; keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params,
    .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp, .bounds = {.ulps = 1},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_hardtanh_deriv_enclose},
};

/* tanh: J = diag(f'(x)), f' = sech²(x) > 0, so the layer is submersive and
 * invertible analytically (DESIGN §6).  In floating point f' underflows to 0
 * for large |x| (|x| > ~372 in double), where the vijp reports the layer as
 * numerically singular instead of dividing by zero.
 *
 * f' is computed as 4e/(1+e)² with e = exp(-2|x|), not as 1 - tanh²(x): the
 * latter cancels catastrophically (relative error ~u/f') and is exactly 0 for
 * |x| > 19.1, where tanh(x) rounds to ±1.  Error of this formula: exp is
 * within 1 ulp (glibc), then three correctly rounded operations; the
 * relative error of f' is below 6u. */
#include "vijp/layer.h"
#include "../../oracles/oracles.h"
#include <math.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg && *arg) return vijp_fail(err, VIJP_EINVAL, "tanh takes no argument, got 'tanh:%s'", arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "tanh keeps its input width, which is unknown here: give --width");
    L->in = L->out = in_width;
    return 0;
}

static size_t no_params(const vijp_layer *L) { (void)L; return 0; }
static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static double dtanh(double x)
{
    double e = exp(-2 * fabs(x)), s = 1 + e;
    return 4 * e / (s * s);
}

static void forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++) Y[i] = tanh(X[i]);
}

static void diag_apply(const vijp_layer *L, const double *th, const double *X, size_t B,
                       const double *U, double *V)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++) V[i] = U[i] * dtanh(X[i]);
}

static int vijp(const vijp_layer *L, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)th, (void)frag;
    for (size_t i = 0; i < L->in * B; i++) {
        double d = dtanh(X[i]);
        if (d == 0)
            return vijp_fail(err, VIJP_ESINGULAR,
                             "tanh vijp: f'(x) underflows to 0 at unit %zu (x = %g): the layer is "
                             "numerically non-submersive there", i % L->in, X[i]);
        Gy[i] = Gx[i] / d;
    }
    return 0;
}

static void jacobian(const vijp_layer *L, const double *th, const double *x, double *J)
{
    (void)th;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = dtanh(x[i]);
}

static int inverse(const vijp_layer *L, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        if (!(fabs(Y[i]) < 1))
            return vijp_fail(err, VIJP_ESINGULAR,
                             "tanh inverse: output %g at unit %zu is not in (-1, 1): its preimage "
                             "was lost to rounding", Y[i], i % L->in);
        X[i] = atanh(Y[i]);
    }
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = diag_apply, .vjp = diag_apply, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_tanh_forward, .jvp = vo_tanh_jvp, .vjp = vo_tanh_jvp, .vijp = vo_tanh_vijp,
    .jacobian = vo_tanh_jacobian, .inverse = vo_tanh_inverse,
};

const vijp_layer_type vijp_layer_tanh = {
    .name = "tanh", .syntax = "tanh (keeps its width)",
    .parse = parse, .param_count = no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .deriv_enclose = vo_tanh_deriv_enclose,
};

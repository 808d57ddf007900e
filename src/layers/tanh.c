/* tanh: J = diag(f'(x)), f' = sech²(x) > 0, so the layer is submersive and
 * invertible analytically (DESIGN §6).  In floating point f' underflows to 0
 * for large |x| (|x| > ~372 in double), where the vijp reports the layer as
 * numerically singular instead of dividing by zero.
 *
 * f and f′: vijp_kact_eval_tanh (src/kernels/ref/dual.c, u = 2^-53), f
 * within 4u and f′, as 4e/(1+e)² with e = exp(-2|x|), not as 1 - tanh²(x),
 * which cancels, within 6u (relative). */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_tanh(x, f, df);
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        if (!(fabs(Y[i]) < 1))
            return vijp_fail(err, VIJP_ESINGULAR,
                             "tanh inverse: output %g at unit %zu is not in (-1, 1): its preimage "
                             "was lost to rounding", Y[i], i % L->in);
        X[i] = atanh(Y[i]);
    }
    return 0;
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(inverse);

VIJP_ACT_EMU_DEFINE(VIJP_KACT_TANH, NULL)
VIJP_ACT_EMU_INVERSE_DEFINE(VIJP_KACT_TANH)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(tanh, vo_tanh_inverse);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(emu_inverse);

const vijp_layer_type vijp_layer_tanh = {
    .name = "tanh", .syntax = "tanh (keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* f′ within 6u (dual.c); inverse: glibc's atanh and tanh within 2 ulps (4u) each, the
     * forward's error amplified by 1/f′ */
    .bounds = {.inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 4, .inv_b = 4},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_tanh_deriv_enclose}, .dual_eval = eval,
};

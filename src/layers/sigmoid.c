/* sigmoid σ(x) = 1/(1 + e^−x): J = diag(σ(x)σ(−x)) > 0, submersive and
 * invertible analytically (DESIGN §6); σ′ underflows to 0 in double for
 * |x| > ~745, where the vijp refuses.
 *
 * f and f′: vijp_kact_eval_sigmoid (src/kernels/ref/dual.c, u = 2^-53),
 * |f̂ − f| <= 7u|f| and |f̂′ − f′| <= 12u|f′|.
 * Inverse: x = log y − log1p(−y) (the logit).  |log y| + |log(1−y)| =
 * softplus(x) + softplus(−x) <= |x| + 2 log 2, so its own error is at most
 * 2u(|x| + 1.39) + u|x|. */
#include "activation.h"
#include "oracles/oracles.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_sigmoid(x, f, df);
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        if (!(Y[i] > 0 && Y[i] < 1))
            return vijp_fail(err, VIJP_ESINGULAR,
                             "sigmoid inverse: output %g at unit %zu is not in (0, 1): its preimage was "
                             "lost to rounding", Y[i], i % L->in);
        X[i] = log(Y[i]) - log1p(-Y[i]);
    }
    return 0;
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(inverse);
VIJP_ACT_EMU_DEFINE(VIJP_KACT_SIGMOID, vo_sigmoid_forward_deriv)
VIJP_ACT_EMU_INVERSE_DEFINE(VIJP_KACT_SIGMOID)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(sigmoid, vo_sigmoid_inverse);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(emu_inverse);

const vijp_layer_type vijp_layer_sigmoid = {
    .name = "sigmoid", .syntax = "sigmoid (keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* f′ within 12u; inverse 3u|x| + 2.8u (log1p/exp chain above), forward 7u amplified by 1/f′ */
    .bounds = {.ulps = 12, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 4, .inv_c = 3, .inv_b = 8},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_sigmoid_deriv_enclose}, .dual_eval = eval,
};

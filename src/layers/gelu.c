/* GELU, erf form: x·Φ(x), Φ the standard normal CDF.  J = diag(Φ + xφ),
 * which vanishes at x0 ≈ −0.751791 (DESIGN §6: not submersive at isolated
 * zeros of f′): nothing declared, no inverse.
 *
 * f and f′: vijp_kact_eval_gelu (src/kernels/ref/dual.c, u = 2^-53),
 * |f̂ − f| <= 16u|f| and |f̂′ − f′| <= 17u·Φ(x) + 10u·|x|φ(x). */
#include "activation.h"
#include "oracles/oracles.h"
#include <string.h>

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_gelu(x, f, df);
}

/* `gelu:tanh` is the tanh approximation, its own descriptor (gelu_tanh.c). */
extern const vijp_layer_type vijp_layer_gelu_tanh;
static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg && !strcmp(arg, "tanh")) {
        L->type = &vijp_layer_gelu_tanh;
        return vijp_act_parse(L, NULL, in_width, err);
    }
    if (arg && *arg)
        return vijp_fail(err, VIJP_EINVAL, "gelu takes no argument but 'tanh' (gelu:tanh, the tanh approximation), "
                         "got 'gelu:%s'", arg);
    return vijp_act_parse(L, arg, in_width, err);
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
VIJP_ACT_EMU_DEFINE(VIJP_KACT_GELU, vo_gelu_forward_deriv)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(gelu, NULL);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(NULL);

const vijp_layer_type vijp_layer_gelu = {
    .name = "gelu", .syntax = "gelu[:tanh] (x·Phi(x), erf form; :tanh the tanh approximation; keeps its width)",
    .parse = parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* the bound of f′ above over |x| <= 4, 0.5 away from x0, relative to |f′|: max 33.2 at
     * x = −1.252 (f itself 16; step 5e-4) */
    .bounds = {.ulps = 34, .n_deriv_zeros = 1, .deriv_zeros = {-0.751791524693564}},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_gelu_deriv_enclose}, .dual_eval = eval,
};

/* ELU and SELU (torch.nn.ELU, torch.nn.SELU):
 *   elu[:ALPHA]   y = x (x > 0), α(e^x − 1) (x <= 0), α = 1 by default;
 *   selu          y = λx (x > 0), λα(e^x − 1) (x <= 0) with PyTorch's
 *                 α = 1.6732632423543772848170429916717,
 *                 λ = 1.0507009873554804934193349852946
 *                 (aten/src/ATen/native/Activation.cpp, SELU_ALPHA and
 *                 SELU_SCALE; the torch.nn.SELU documentation).
 * f′ = 1 (λ) for x > 0 and αe^x (λαe^x) for x <= 0, as torch's backward
 * takes the left branch at 0: positive everywhere, so J is submersive and f a
 * bijection onto (−α, ∞) (onto (−λα, ∞)) with an analytic inverse (DESIGN
 * §6); f′ jumps at 0 where α != 1 (a kink, as leaky's; the battery's points
 * keep off 0).  f′ underflows below x ≈ −745: the vijp then refuses.
 *
 * Error (u = 2^-53; glibc's expm1 and exp within 1 ulp <= 2u): x <= 0,
 * f = α·expm1(x) within 3u|f|, f′ = α·exp(x) within 3u|f′|; SELU's λα is
 * one rounded constant (u): 4u.  The MPFR twin, which runs the narrow
 * formats (these types have no native emulation, src/emu/, so binary32,
 * binary16 and bfloat16 run oracles/activations_elu.c at the format's
 * precision), rounds α (and λ) to the format and each operation once: 3u
 * (ELU), 5u (SELU: α, λ, expm1, two products).  The contract's ulps: 4 and
 * 6 (the first-order counts plus room for their products, (1 + u)^5 − 1 <
 * 5.01u even at binary16's u = 2^-11).
 * Inverse: y > 0: y (y/λ); y <= 0: log1p(y/α) (y/(λα)).  y/α rounded
 * (u|y|/f′ in x after log1p's condition 1/(1 + y/α) = α/f′·…), log1p
 * within 2u|x|, plus the forward's own 3u|y| (4u, 5u for SELU) carried back
 * through 1/f′: |x̂ − x| <= u(3|x| + 5|y|/f′) (ELU), u(3|x| + 8|y|/f′) (SELU). */
#include "vijp/interval.h"
#include "vijp/catalogue.h"
#include "activation.h"
#include "numarg.h"
#include "state.h"
#include "oracles/oracles.h"

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* α's range, as leaky's slope (leaky_relu.c): α > 0 (α = 0 is ReLU with a
 * cokernel, α < 0 folds the negative inputs back: no inverse), and
 * α in [2^-12, 2^12] rounds to a normal binary16 number, so α and 1/α exist
 * in every format and y = α(e^x − 1) of any x stays within ±2^12. */
#define ALPHA_MIN 0x1p-12
#define ALPHA_MAX 0x1p12

static int parse_elu(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    double a = 1.0;
    const char *p = arg;
    if (arg && vijp_numarg_read(&p, 0, &a))
        return vijp_fail(err, VIJP_EINVAL, "elu takes a number: elu or elu:ALPHA (e.g. elu:0.5), got 'elu:%s'", arg);
    if (!(a >= ALPHA_MIN && a <= ALPHA_MAX))
        return vijp_fail(err, VIJP_EINVAL, "elu's alpha must be in [2^-12, 2^12] = [%.12g, %g] (positive, so that f "
                         "is invertible; alpha and 1/alpha finite even in binary16), got '%s'", ALPHA_MIN, ALPHA_MAX, arg);
    if (in_width == 0)
        return vijp_fail(err, VIJP_EDIM, "elu keeps its input width, which is unknown here: give --width");
    vijp_state_new(L, sizeof(double));
    L->in = L->out = in_width;
    *(double *)L->state = a;
    return 0;
}

static int print_elu(const vijp_layer *L, char *buf, size_t size)
{
    double a = vijp_elu_alpha(L);
    if (a == 1.0) return snprintf(buf, size, "elu");
    char num[32];
    vijp_numarg_print(a, num, sizeof num);
    return snprintf(buf, size, "elu:%s", num);
}

/* scale·x above 0, scale·α·expm1(x) at and below it (scale·α one constant). */
static void eval_branches(double scale, double scale_alpha, double x, double *f, double *df)
{
    if (x > 0) *f = scale * x, *df = scale;
    else *f = scale_alpha * expm1(x), *df = scale_alpha * exp(x);
}

static void eval_elu(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)th;
    eval_branches(1.0, *(const double *)L->state, x, f, df);
}

static void eval_selu(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    eval_branches(SELU_SCALE, SELU_SCALE * SELU_ALPHA, x, f, df);
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int invert(const vijp_layer *L, double scale, double scale_alpha, const double *Y, size_t B, double *X,
                  vijp_error *err)
{
    for (size_t i = 0; i < L->in * B; i++) {
        double y = Y[i];
        if (!(y > -scale_alpha) || !isfinite(y))
            return vijp_fail(err, VIJP_ESINGULAR, "%s inverse: output %g at unit %zu is not in (%g, inf): its preimage "
                             "was lost to rounding", L->type->name, y, i % L->in, -scale_alpha);
        X[i] = y > 0 ? y / scale : log1p(y / scale_alpha);
    }
    return 0;
}

static int inverse_elu(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                       double *X, vijp_error *err)
{
    (void)cx, (void)th;
    return invert(L, 1.0, *(const double *)L->state, Y, B, X, err);
}

static int inverse_selu(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                        double *X, vijp_error *err)
{
    (void)cx, (void)th;
    return invert(L, SELU_SCALE, SELU_SCALE * SELU_ALPHA, Y, B, X, err);
}

static const vijp_ops_d ops_elu_d = VIJP_ACT_OPS_D(inverse_elu);
static const vijp_ops_d ops_selu_d = VIJP_ACT_OPS_D(inverse_selu);
static const vijp_ops_mp ops_elu_mp = VIJP_ACT_OPS_MP(elu, vo_elu_inverse);
static const vijp_ops_mp ops_selu_mp = VIJP_ACT_OPS_MP(selu, vo_selu_inverse);

const vijp_layer_type vijp_layer_elu = {
    .name = "elu", .syntax = "elu[:ALPHA] (alpha(e^x - 1) below 0, default 1, 2^-12 <= ALPHA <= 2^12; keeps its width)",
    .parse = parse_elu, .state_size = sizeof(double), .print = print_elu, .param_count = vijp_act_no_params,
    .declare = declare, .residual = VIJP_RESIDUAL_DERIV, .d = &ops_elu_d, .mp = &ops_elu_mp,
    .emu_native = &(const struct vijp_emu_native){.mp_forward_deriv = vo_elu_forward_deriv},
    .bounds = {.ulps = 4, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 3, .inv_b = 5},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_elu_deriv_enclose}, .dual_eval = eval_elu,
};

const vijp_layer_type vijp_layer_selu = {
    .name = "selu", .syntax = "selu (torch's SELU constants; keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_selu_d, .mp = &ops_selu_mp,
    .emu_native = &(const struct vijp_emu_native){.mp_forward_deriv = vo_selu_forward_deriv},
    .bounds = {.ulps = 6, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 3, .inv_b = 8},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_selu_deriv_enclose}, .dual_eval = eval_selu,
};

/* softplus(x) = log(1 + e^x): J = diag(σ(x)) > 0, submersive and invertible
 * analytically (DESIGN §6); σ(x) underflows for x < ~−745.
 *
 * f and f′: vijp_kact_eval_softplus (src/kernels/ref/dual.c, u = 2^-53),
 * |f̂ − f| <= 5u|f| and |f̂′ − f′| <= 7u|f′|.
 * Inverse: x = log(expm1(y)) for y <= 1, y + log(−expm1(−y)) above (no
 * overflow); expm1 and log within 1 ulp each: own error <= 2u|x| + 4u. */
#include "activation.h"
#include "oracles/oracles.h"
#include "vijp/catalogue.h"
#include "numarg.h"
#include "state.h"

/* The built-in activations have no parameters: L and th are unused. */
static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_kact_eval_softplus(x, f, df);
}

/* `softplus:BETA[/THRESHOLD]` is torch's Softplus(beta, threshold), its own
 * descriptor (softplus_beta.c); `softplus` and `softplus:1` are this one.
 * β in [2^-12, 2^12], as leaky's slope (leaky_relu.c): positive (f is then
 * increasing) and, with 1/β, a normal number in binary16; the threshold any
 * finite number. */
extern const vijp_layer_type vijp_layer_softplus_beta;
static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vijp_softplus_args a = {1.0, INFINITY};
    const char *p = arg;
    if (arg && (vijp_numarg_read(&p, '/', &a.beta) || (*p == '/' && (++p, vijp_numarg_read(&p, 0, &a.threshold)))))
        return vijp_fail(err, VIJP_EINVAL, "softplus takes numbers: softplus, softplus:BETA or "
                         "softplus:BETA/THRESHOLD (e.g. softplus:1/20), got 'softplus:%s'", arg);
    if (!(a.beta >= 0x1p-12 && a.beta <= 0x1p12))
        return vijp_fail(err, VIJP_EINVAL, "softplus's beta must be in [2^-12, 2^12] = [%.12g, %g] (positive; beta "
                         "and 1/beta finite even in binary16), got '%s'", 0x1p-12, 0x1p12, arg);
    int rc = vijp_act_parse(L, NULL, in_width, err);
    if (rc || (a.beta == 1 && isinf(a.threshold))) return rc;
    L->type = &vijp_layer_softplus_beta;
    vijp_state_new(L, sizeof a);
    *(vijp_softplus_args *)L->state = a;
    return 0;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        double y = Y[i];
        if (!(y > 0) || !isfinite(y))
            return vijp_fail(err, VIJP_ESINGULAR,
                             "softplus inverse: output %g at unit %zu is not in (0, inf): its preimage "
                             "was lost to rounding", y, i % L->in);
        X[i] = y <= 1 ? log(expm1(y)) : y + log(-expm1(-y));
    }
    return 0;
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(inverse);
VIJP_ACT_EMU_DEFINE(VIJP_KACT_SOFTPLUS, vo_softplus_forward_deriv)
VIJP_ACT_EMU_INVERSE_DEFINE(VIJP_KACT_SOFTPLUS)
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(softplus, vo_softplus_inverse);
static const vijp_ops_mp ops_emu = VIJP_ACT_OPS_EMU(emu_inverse);

const vijp_layer_type vijp_layer_softplus = {
    .name = "softplus", .syntax = "softplus[:BETA[/THRESHOLD]] (log(1 + e^(BETA x))/BETA, x where BETA x > THRESHOLD; default 1, none; "
    "keeps its width)",
    .parse = parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &ops_native, .f = &vijp_act_ops_f,
    /* f′ within 7u; inverse 2u|x| + 4u, forward 5u amplified by 1/f′ */
    .bounds = {.ulps = 8, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 3, .inv_c = 5, .inv_b = 6},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_softplus_deriv_enclose}, .dual_eval = eval,
};

/* Softsign (torch.nn.Softsign): y = x/(1 + |x|), f′ = 1/(1 + |x|)² (torch's
 * backward, grad/(1 + |x|)²): positive everywhere, so J is submersive and f
 * a bijection onto (−1, 1) with inverse x = y/(1 − |y|) (DESIGN §6).  f′
 * is continuous (f″ jumps at 0); it underflows only for |x| past 2^511 in
 * double (past ~2^12 in binary16), where the vijp refuses.
 * Error (u = 2^-53, each operation correctly rounded): a = 1 + |x| within
 * u, f = x/a within 2u|f|; r = 1/a within 2u, f′ = r·r within 5u|f′|: the
 * contract's ulps 5 (the MPFR twin, oracles/activations_elu.c, which runs
 * the narrow formats, takes the same steps).
 * Inverse: 1 − |y| exact for |y| >= 1/2 (Sterbenz) and within u below, the
 * division u: 2u|x|; plus the forward's 2u|y| carried back through 1/f′:
 * |x̂ − x| <= u(3|x| + 3|y|/f′). */
#include "vijp/interval.h"
#include "activation.h"
#include "oracles/oracles.h"

static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    double a = 1 + fabs(x), r = 1 / a;
    *f = x / a, *df = r * r;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE; }

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx, (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        double y = Y[i];
        if (!(fabs(y) < 1))
            return vijp_fail(err, VIJP_ESINGULAR, "softsign inverse: output %g at unit %zu is not in (-1, 1): its "
                             "preimage was lost to rounding", y, i % L->in);
        X[i] = y / (1 - fabs(y));
    }
    return 0;
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(inverse);
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(softsign, vo_softsign_inverse);

const vijp_layer_type vijp_layer_softsign = {
    .name = "softsign", .syntax = "softsign (x/(1 + |x|); keeps its width)",
    .parse = vijp_act_parse, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp,
    .emu_native = &(const struct vijp_emu_native){.mp_forward_deriv = vo_softsign_forward_deriv},
    .bounds = {.ulps = 5, .inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 3, .inv_b = 3},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_softsign_deriv_enclose}, .dual_eval = eval,
};

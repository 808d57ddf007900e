/* softplus with β and a threshold (torch.nn.Softplus(beta, threshold)),
 * spec `softplus:BETA[/THRESHOLD]`: y = log(1 + e^{βx})/β, and y = x where
 * βx, rounded as torch rounds it, exceeds the threshold (none when not
 * given).  Plain `softplus` (β = 1, no threshold; also what `softplus:1`
 * reads as) stays softplus.c's type; this is its own descriptor, reached
 * through softplus's parse and printed back as softplus:BETA[/THRESHOLD].
 *
 * f′ = σ(βx) (1 past the threshold, as torch's backward): positive, J is
 * submersive (up to σ's underflow below βx ≈ −745, where the vijp refuses).
 * At the threshold x_t = t/β, f jumps from softplus(t)/β to t/β, down by
 * log1p(e^{−t})/β (2.1e-9 at torch's default t = 20, β = 1), and f′ from
 * σ(t) to 1: f is not continuous, so not a bijection (the values in
 * (t/β, softplus(t)/β] are taken twice): no inverse, and only
 * VIJP_DECL_SUBMERSIVE.  The battery's points (N(0, 1)) meet the jump
 * only where |t/β| is of order 1: the tests keep it away.
 *
 * Evaluation: z = β·x rounded (the threshold test, as torch's
 * `(x * beta) > threshold`) with its rounding error e = fma(β, x, −z)
 * exactly; f = x + log1p(e^{−βx})/β above 0 (no overflow of βx's
 * softplus, x itself exact) and log1p(e^{βx})/β below, each log1p(e^{−|βx|})
 * = log1p(e^{−|z|}) ∓ σ(−|z|)e, and σ(βx) = σ(z) + σ′(z)e, to first order
 * (the rest, below u²(βx)², is negligible): without the correction σ(z)
 * would carry a relative u·|βx|σ(−βx), unbounded in βx.
 * Error (u = 2^-53; dual.h's primitives): e^{−|z|} within 2u, log1p 2u
 * more, the correction's own error second order, its sum, /β and + x one
 * rounding each (x and the log1p term have the same sign): |f̂ − f| <= 7u|f|;
 * σ(z) within 7u, the sum: |f̂′ − f′| <= 8u|f′|.  The MPFR twin
 * (oracles/activations_elu.c) forms βx exactly and rounds each operation
 * once (at most 4u on f and f′), with β rounded to the format: where β is
 * not representable there, that rounding changes f′ by a relative
 * |βx|σ(−βx)·u, outside this contract (β = 1, 2, 0.5, 10, 100 are exact in
 * every format).  The contract's ulps: 9.  No native emulation: the narrow
 * formats run the twin at their precision. */
#include "vijp/interval.h"
#include "vijp/catalogue.h"
#include "activation.h"
#include "numarg.h"
#include "state.h"
#include "oracles/oracles.h"

static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)th;
    const vijp_softplus_args *a = L->state;
    double z = a->beta * x;
    if (z > a->threshold) {
        *f = x, *df = 1;
        return;
    }
    double e = isfinite(z) ? fma(a->beta, x, -z) : 0;          /* βx = z + e exactly */
    double ez = exp(-fabs(z)), r = 1 / (1 + ez), q = ez * r; /* σ(|z|), σ(−|z|), as dual.h's */
    if (z > 0) *f = x + (log1p(ez) - q * e) / a->beta, *df = r + r * q * e;
    else *f = (log1p(ez) + q * e) / a->beta, *df = q + r * q * e;
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE; }

static int print(const vijp_layer *L, char *buf, size_t size)
{
    const vijp_softplus_args *a = L->state;
    char beta[32], thr[32];
    vijp_numarg_print(a->beta, beta, sizeof beta);
    if (isinf(a->threshold)) return snprintf(buf, size, "softplus:%s", beta);
    vijp_numarg_print(a->threshold, thr, sizeof thr);
    return snprintf(buf, size, "softplus:%s/%s", beta, thr);
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(softplus_beta, NULL);

const vijp_layer_type vijp_layer_softplus_beta = {
    .name = "softplus_beta", .syntax = "softplus:BETA[/THRESHOLD]",
    .parse = vijp_act_parse, .state_size = sizeof(vijp_softplus_args), .print = print,
    .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp,
    .emu_native = &(const struct vijp_emu_native){.mp_forward_deriv = vo_softplus_beta_forward_deriv},
    .bounds = {.ulps = 9},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_softplus_beta_deriv_enclose}, .dual_eval = eval,
};

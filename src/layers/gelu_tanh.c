/* GELU, tanh approximation (torch.nn.GELU(approximate='tanh')), spec
 * `gelu:tanh`: y = 0.5x(1 + tanh(k(x + c·x³))), k = √(2/π), c = 0.044715
 * (PyTorch's definition and constants, aten/src/ATen/native/cpu/
 * Activation.cpp: kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715),
 * evaluated as x·σ(v), v = 2k(x + c·x³): 0.5(1 + tanh(v/2)) = σ(v) without
 * 1 + tanh's cancellation for negative x.  Its own descriptor, reached
 * through gelu's parse (gelu.c: plain `gelu` stays the erf form); named
 * gelu_tanh in messages, printed back as gelu:tanh.
 * J = diag(σ(v) + x·σ′(v)·v′), v′ = 2k(1 + 3c·x²), which vanishes at
 * x0 ≈ −0.752461 (mpmath findroot, 40 digits): nothing declared, no inverse
 * (DESIGN §6: not submersive at isolated zeros of f′).
 *
 * Error (u = 2^-53; dual.h's σ within 7u, σ′ within 12u): v carries at
 * most 8u (x², x³, c·x³, the sum of same-signed terms, √(2/π) and the
 * product: 5.5u here; the MPFR twin forms √(2/π) from π in three roundings
 * and, in the narrow formats, rounds c too); σ(v) adds its condition
 * |v|σ(−v) times that, so |f̂ − f| <= (8 + 8|v|σ(−v))u|f|; f′'s terms
 * T1 = σ(v) and T2 = x·σ′(v)·v′ carry (8 + 8|v|σ(−v))u and (23 + 8|v|)u
 * (σ′'s 12u and condition |v||1 − 2σ| <= |v|, v′'s 7u, two products, the
 * sum).  Over the battery's points (|x| <= 4, 0.5 from x0; mpmath, step
 * 5e-4) this bound relative to |f′| peaks at 121.4 (x = −4), f's at 95.6:
 * the contract's
 * ulps 122.  It grows like |v| ~ 0.07|x|³ in the far left tail, where
 * tests/t-act-args.c checks it point by point.  No native emulation
 * (src/emu/ has the catalogue's six): binary32, binary16 and
 * bfloat16 run that twin at the format's precision. */
#include "vijp/interval.h"
#include "activation.h"
#include "oracles/oracles.h"
#include <stdio.h>

#define GELU_TANH_K 0.79788456080286535587989211986876 /* √(2/π), rounded once */
#define GELU_TANH_C 0.044715

static void eval(const vijp_layer *L, const double *th, double x, double *f, double *df)
{
    (void)L, (void)th;
    vijp_dual d = dual_var(x), cube = dual_mul(dual_mul(d, d), d);
    vijp_dual v = dual_scale(dual_add(d, dual_scale(cube, GELU_TANH_C)), 2 * GELU_TANH_K);
    vijp_dual y = dual_mul(d, dual_sigmoid(v));
    *f = y.v, *df = y.d;
}

static unsigned declare(const vijp_layer *L) { (void)L; return 0; }

static int print(const vijp_layer *L, char *buf, size_t size)
{
    (void)L;
    return snprintf(buf, size, "gelu:tanh");
}

static const vijp_ops_d ops_d = VIJP_ACT_OPS_D(NULL);
static const vijp_ops_mp ops_mp = VIJP_ACT_OPS_MP(gelu_tanh, NULL);

const vijp_layer_type vijp_layer_gelu_tanh = {
    .name = "gelu_tanh", .syntax = "gelu:tanh (0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); keeps its width)",
    .parse = vijp_act_parse, .print = print, .param_count = vijp_act_no_params, .declare = declare,
    .residual = VIJP_RESIDUAL_DERIV, .d = &ops_d, .mp = &ops_mp,
    .emu_native = &(const struct vijp_emu_native){.mp_forward_deriv = vo_gelu_tanh_forward_deriv},
    .bounds = {.ulps = 122, .n_deriv_zeros = 1, .deriv_zeros = {-0.752461422071016}},
    .interval = &(const vijp_interval_ops){.deriv_enclose = vo_gelu_tanh_deriv_enclose}, .dual_eval = eval,
};

/* Per-channel affine maps of a channel-major sample (C channels of S =
 * width/C positions), PyTorch's layouts:
 *   actnorm:C                    y = s_c·x + b_c, θ = s[C], b[C] (Glow's
 *                                ActNorm, stored as the scale itself);
 *   batchnorm:C[:eps=E][:affine] BatchNorm1d/2d in eval mode,
 *                                y = (x − rm_c)/√(rv_c + ε)·w_c + b_c,
 *                                θ = weight[C], bias[C] (affine only),
 *                                running_mean[C], running_var[C]; ε
 *                                defaults to PyTorch's 1e-5.
 * Both are y = k_c·x + h_c with k, h from θ (batchnorm: k = w/√(rv + ε),
 * h = b − rm·k, formed once per channel, so that the inverse divides by
 * the very k the forward multiplied by).  J = diag(k) is the same at every
 * x: linear, and a bijection while every k_c ≠ 0 (a zero actnorm scale or
 * batchnorm weight: the vijp and inverse refuse).  ∇θ is the gradient
 * with respect to every stored tensor, running statistics included:
 *   ∂/∂w = Σ g·(x − rm)/sd, ∂/∂b = Σ g, ∂/∂rm = −k·Σ g,
 *   ∂/∂rv = −w·Σ g·(x − rm)/(2 sd³),  sd = √(rv + ε),
 * sums over the channel's units of every sample.  The parameter gradient
 * needs x, which the inverse rebuilds from y: residual INVERSE. */
#include "vijp/layer.h"
#include "args.h"
#include "decimal.h"
#include "scratch.h"
#include "state.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS(L) ((const vo_channel_args *)(L)->state)
#define TORCH_BATCHNORM_EPS 1e-5

static int parse_channels(vijp_layer *L, const char *name, const char **p, size_t in_width, vo_channel_args *a,
                          vijp_error *err)
{
    if (!*p || vijp_arg_count(p, &a->channels) || a->channels == 0 || (**p && **p != ':'))
        return vijp_fail(err, VIJP_EINVAL, "%s needs its channel count: %s:C (1 <= C <= %u)%s", name, name,
                         VIJP_WIDTH_MAX, !strcmp(name, "batchnorm") ? "[:eps=E][:affine]" : "");
    if (in_width == 0 || in_width % a->channels)
        return vijp_fail(err, VIJP_EDIM, "%s:%zu: the input width %zu is not a multiple of %zu channels%s", name,
                         a->channels, in_width, a->channels, in_width ? "" : " (give --width)");
    L->in = L->out = in_width;
    return 0;
}

static int parse_actnorm(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vo_channel_args a = {0};
    const char *p = arg;
    int rc = parse_channels(L, "actnorm", &p, in_width, &a, err);
    if (!rc && *p) rc = vijp_fail(err, VIJP_EINVAL, "actnorm takes its channel count alone: actnorm:C, got 'actnorm:%s'", arg);
    if (rc) return rc;
    vijp_state_new(L, sizeof a);
    *(vo_channel_args *)L->state = a;
    return 0;
}

static int parse_batchnorm(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vo_channel_args a = {.batchnorm = 1, .eps = TORCH_BATCHNORM_EPS};
    const char *p = arg;
    int rc = parse_channels(L, "batchnorm", &p, in_width, &a, err);
    if (rc) return rc;
    if (!strncmp(p, ":eps=", 5)) {
        char *end = NULL;
        a.eps = strtod(p + 5, &end);
        if (end == p + 5 || (*end && *end != ':') || !isfinite(a.eps) || a.eps < 0)
            return vijp_fail(err, VIJP_EINVAL, "batchnorm:C[:eps=E][:affine]: eps must be a finite number >= 0, got "
                             "'batchnorm:%s'", arg);
        a.eps_given = 1, p = end;
    }
    if (!strcmp(p, ":affine")) a.affine = 1, p += 7;
    if (*p)
        return vijp_fail(err, VIJP_EINVAL, "batchnorm:C[:eps=E][:affine] (in this order): cannot read 'batchnorm:%s'", arg);
    vijp_state_new(L, sizeof a);
    *(vo_channel_args *)L->state = a;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    if (!ARGS(L)->batchnorm) return snprintf(buf, size, "actnorm:%zu", ARGS(L)->channels);
    char eps[48] = "", num[32];
    if (ARGS(L)->eps_given) vijp_shortest_decimal(ARGS(L)->eps, num, sizeof num), snprintf(eps, sizeof eps, ":eps=%s", num);
    return snprintf(buf, size, "batchnorm:%zu%s%s", ARGS(L)->channels, eps, ARGS(L)->affine ? ":affine" : "");
}

/* Where running_mean starts in θ (batchnorm). */
static size_t stats_at(const vijp_layer *L) { return ARGS(L)->affine ? 2 * ARGS(L)->channels : 0; }

static size_t param_count(const vijp_layer *L)
{
    return (ARGS(L)->batchnorm && ARGS(L)->affine ? 4 : 2) * ARGS(L)->channels;
}

/* kaiming-uniform (PyTorch's default) gives PyTorch's initial state: s, w
 * and rv 1, b and rm 0.  The others draw scales ±U(0.5, 1.5) (actnorm s,
 * batchnorm w), rv U(0.5, 1.5), b and rm 0.1·N(0, 1): every parameter's
 * gradient then matters, and no scale is near 0. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *th)
{
    size_t C = ARGS(L)->channels, at = stats_at(L);
    int torch = in.kind == VIJP_INIT_KAIMING_UNIFORM;
    for (size_t c = 0; c < C; c++) {
        double mag = 0.5 + vijp_rng_uniform(rng), scale = vijp_rng_uniform(rng) < 0.5 ? -mag : mag;
        double shift = 0.1 * vijp_rng_normal(rng), mean = 0.1 * vijp_rng_normal(rng), var = 0.5 + vijp_rng_uniform(rng);
        if (!ARGS(L)->batchnorm || ARGS(L)->affine) th[c] = torch ? 1 : scale, th[C + c] = torch ? 0 : shift;
        if (ARGS(L)->batchnorm) th[at + c] = torch ? 0 : mean, th[at + C + c] = torch ? 1 : var;
    }
    return 0;
}

static unsigned declare(const vijp_layer *L)
{
    /* without affine weights k = 1/√(rv + ε) is never 0: submersive too */
    return VIJP_DECL_LINEAR | VIJP_DECL_INVERTIBLE |
           (ARGS(L)->batchnorm && !ARGS(L)->affine ? VIJP_DECL_SUBMERSIVE : 0u);
}

/* √(rv_c + ε) (batchnorm). */
static double std_of(const vijp_layer *L, const double *th, size_t c)
{
    return sqrt(th[stats_at(L) + ARGS(L)->channels + c] + ARGS(L)->eps);
}

/* k_c and h_c. */
static void scale_shift(const vijp_layer *L, const double *th, size_t c, double *k, double *h)
{
    size_t C = ARGS(L)->channels;
    if (!ARGS(L)->batchnorm) {
        *k = th[c], *h = th[C + c];
        return;
    }
    double w = ARGS(L)->affine ? th[c] : 1, b = ARGS(L)->affine ? th[C + c] : 0;
    *k = w / std_of(L, th, c);
    *h = b - th[stats_at(L) + c] * *k;
}

enum { FORWARD, SCALE, UNSCALE, INVERT };

/* out = k·in + h, k·in, in/k or (in − h)/k, unit by unit; VIJP_ESINGULAR
 * where a division meets k = 0. */
static int per_unit(const vijp_layer *L, const double *th, const double *in, size_t B, double *out, int op)
{
    size_t C = ARGS(L)->channels, S = L->in / C;
    for (size_t c = 0; c < C; c++) {
        double k, h;
        scale_shift(L, th, c, &k, &h);
        if (op >= UNSCALE && !(k != 0)) return VIJP_ESINGULAR;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < S; p++) {
                size_t i = b * L->in + c * S + p;
                out[i] = op == FORWARD ? k * in[i] + h : op == SCALE ? k * in[i] : op == UNSCALE ? in[i] / k : (in[i] - h) / k;
            }
    }
    return 0;
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx;
    per_unit(L, th, X, B, Y, FORWARD);
}

/* jvp and vjp coincide: J = diag(k). */
static void apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                  const double *U, double *V)
{
    (void)cx, (void)X;
    per_unit(L, th, U, B, V, SCALE);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)X, (void)frag;
    if (per_unit(L, th, Gx, B, Gy, UNSCALE))
        return vijp_fail(err, VIJP_ESINGULAR, "%s vijp: a channel's scale is 0 (J is singular)", L->type->name);
    return 0;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx;
    if (per_unit(L, th, Y, B, X, INVERT))
        return vijp_fail(err, VIJP_ESINGULAR, "%s inverse: a channel's scale is 0 (not a bijection)", L->type->name);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    size_t n = L->in, S = n / ARGS(L)->channels;
    memset(J, 0, n * n * sizeof *J);
    for (size_t c = 0; c < ARGS(L)->channels; c++) {
        double k, h;
        scale_shift(L, th, c, &k, &h);
        for (size_t p = 0; p < S; p++) J[(c * S + p) * (n + 1)] = k;
    }
}

/* Per channel: A = Σ g and D = Σ g·x (actnorm) or Σ g·(x − rm) (batchnorm),
 * then the gradients from them (file comment). */
static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx;
    size_t C = ARGS(L)->channels, S = L->in / C, at = stats_at(L);
    for (size_t c = 0; c < C; c++) {
        double A = 0, D = 0, mean = ARGS(L)->batchnorm ? th[at + c] : 0;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < S; p++) {
                size_t i = b * L->in + c * S + p;
                A += Gy[i], D += Gy[i] * (X[i] - mean);
            }
        if (!ARGS(L)->batchnorm) {
            Gt[c] = D, Gt[C + c] = A;
            continue;
        }
        double sd = std_of(L, th, c), w = ARGS(L)->affine ? th[c] : 1, k, h;
        scale_shift(L, th, c, &k, &h);
        if (ARGS(L)->affine) Gt[c] = D / sd, Gt[C + c] = A;
        Gt[at + c] = -k * A;
        Gt[at + C + c] = -w * D / (2 * sd * sd * sd);
    }
}

/* Bounds on vjp_param's entries: the sums A and D over T = B·S units are
 * dot products, γ_(T+1)·Σ|g|(|x| + |rm|) for D, whose terms x − rm round
 * once more (Higham eq. 3.5); sd = √(rv + ε) is within 2u of itself, k
 * within 4u, the final products and quotients add at most 6 more
 * roundings: (T + 12)·u times the terms' magnitudes, for every entry.
 * Taken in double from |X|, |Gy| and θ: 1% covers their own rounding. */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bound)
{
    size_t C = ARGS(L)->channels, S = L->in / C, at = stats_at(L);
    double e = 1.01 * (double)(B * S + 12) * u;
    for (size_t c = 0; c < C; c++) {
        double SA = 0, SD = 0, mean = ARGS(L)->batchnorm ? fabs(th[at + c]) : 0;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < S; p++) {
                size_t i = b * L->in + c * S + p;
                SA += aG[i], SD += aG[i] * (aX[i] + mean);
            }
        if (!ARGS(L)->batchnorm) {
            bound[c] += e * SD, bound[C + c] += e * SA;
            continue;
        }
        double sd = std_of(L, th, c), w = ARGS(L)->affine ? fabs(th[c]) : 1;
        if (ARGS(L)->affine) bound[c] += e * SD / sd, bound[C + c] += e * SA;
        bound[at + c] += e * (w / sd) * SA;
        bound[at + C + c] += e * w * SD / (2 * sd * sd * sd);
    }
}

/* The shift h_c is not a θ entry; actnorm's b is. */
static size_t bias_index(const vijp_layer *L, size_t i)
{
    return ARGS(L)->batchnorm ? SIZE_MAX : ARGS(L)->channels + i / (L->in / ARGS(L)->channels);
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = apply, .vjp = apply, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_chan_forward, .jvp = vo_chan_jvp, .vjp = vo_chan_jvp, .vjp_param = vo_chan_vjp_param,
    .vijp = vo_chan_vijp, .jacobian = vo_chan_jacobian, .inverse = vo_chan_inverse,
};

/* inverse: y = k·x + h rounds twice (u|kx| + u|y|), (y − h)/k twice more
 * (u|kx| + u|x| after the division): u(3|x| + |y|/|k|), f′ = k. */
#define CHANNEL_TYPE(NAME, SYNTAX, PARSE)                                                                          \
    {                                                                                                              \
        .name = NAME, .syntax = SYNTAX, .parse = PARSE, .state_size = sizeof(vo_channel_args), .print = print,      \
        .param_count = param_count, .init = init, .declare = declare, .residual = VIJP_RESIDUAL_INVERSE,           \
        .d = &ops_d, .mp = &ops_mp, .jacobian_enclose = vo_chan_jacobian_enclose,                                  \
        .bounds = {.inverse = VIJP_INVBOUND_ELEMENTWISE, .inv_a = 4, .inv_b = 2}, .bias_index = bias_index,        \
        .vjp_param_bound = vjp_param_bound,                                                                        \
    }

const vijp_layer_type vijp_layer_actnorm =
    CHANNEL_TYPE("actnorm", "actnorm:C (y = s_c*x + b_c per channel, channel-major; theta = s[C], b[C])", parse_actnorm);
const vijp_layer_type vijp_layer_batchnorm = CHANNEL_TYPE(
    "batchnorm", "batchnorm:C[:eps=E][:affine] (eval mode, channel-major; eps default 1e-5; theta = [weight[C], "
    "bias[C],] running_mean[C], running_var[C])", parse_batchnorm);

/* The oracles' activation operators in double (activations.h).  Each
 * function below mirrors one of oracles/activations.c (tanh: oracles/
 * elementwise.c) operation for operation, in the same order: vo_add →
 * vijp_emu_add, vo_exp → vijp_emu_exp, …; vo_neg is exact in both; the
 * constants vo_set_si(2), vo_set_d(0.5) are exact and vo_const_pi is π
 * rounded once (M_PI, itself π to 53 bits, is not within 2^-53 relative of
 * a midpoint of any grid of at most 24 bits: t-emu-act checks the constant
 * against vo_const_pi in every format).  Branches test the sign as the
 * oracle's mpfr_sgn does (NaN counts as 0 there). */
#include "activations.h"
#include "base/fork.h"
#include "elementary.h"
#include "format/mpfr_io.h"
#include "kernels/kernels.h"
#include "vijp/error.h"

typedef struct {
    const vijp_format *f;
    vijp_emu_grid g;
} ctx;

/* σ(x): 1/(1 + e^−x) for x >= 0 (and NaN), e^x/(1 + e^x) below. */
static double sigma(double x, const ctx *c)
{
    if (!(x < 0)) {
        double e = vijp_emu_exp(-x, c->f);
        return vijp_emu_div(1, vijp_emu_add(1, e, c->g), c->g);
    }
    double e = vijp_emu_exp(x, c->f);
    return vijp_emu_div(e, vijp_emu_add(1, e, c->g), c->g);
}

static double softplus(double x, const ctx *c)
{
    if (x > 0) return vijp_emu_add(x, vijp_emu_log1p(vijp_emu_exp(-x, c->f), c->f), c->g);
    return vijp_emu_log1p(vijp_emu_exp(x, c->f), c->f);
}

/* f and f′ at x; either pointer may be NULL, and what only the other needs
 * is then not computed (each output's operations are unchanged), as in the
 * oracle's pairs (oracles/activations.c). */
static void sigmoid_pair(double x, const ctx *c, double *fx, double *dfx)
{
    double s = sigma(x, c);
    if (fx) *fx = s;
    if (dfx) *dfx = vijp_emu_mul(s, sigma(-x, c), c->g);
}

static void softplus_pair(double x, const ctx *c, double *fx, double *dfx)
{
    if (fx) *fx = softplus(x, c);
    if (dfx) *dfx = sigma(x, c);
}

static void silu_pair(double x, const ctx *c, double *fx, double *dfx)
{
    double s = sigma(x, c);
    if (fx) *fx = vijp_emu_mul(x, s, c->g);
    if (dfx) *dfx = vijp_emu_mul(s, vijp_emu_fma(x, sigma(-x, c), 1, c->g), c->g); /* 1 + xσ(−x), rounded once */
}

static void gelu_pair(double x, const ctx *c, double *fx, double *dfx)
{
    vijp_emu_grid g = c->g;
    double r2 = vijp_emu_sqrt(2, g);
    double cdf = vijp_emu_mul(vijp_emu_erfc(-vijp_emu_div(x, r2, g), c->f), 0.5, g); /* Φ(x) = erfc(−x/√2)/2 */
    if (fx) *fx = vijp_emu_mul(x, cdf, g);
    if (dfx) {
        double pi = vijp_emu_round(M_PI, g), t = -vijp_emu_mul(vijp_emu_mul(x, x, g), 0.5, g);
        double pdf = vijp_emu_div(vijp_emu_exp(t, c->f), vijp_emu_sqrt(vijp_emu_add(pi, pi, g), g), g); /* φ(x) */
        *dfx = vijp_emu_fma(x, pdf, cdf, g);
    }
}

static void mish_pair(double x, const ctx *c, double *fx, double *dfx)
{
    double sp = softplus(x, c), th = vijp_emu_tanh(sp, c->f);
    if (fx) *fx = vijp_emu_mul(x, th, c->g);
    if (dfx) {
        double se = vijp_emu_sech(sp, c->f);
        se = vijp_emu_mul(se, se, c->g);
        double s = vijp_emu_mul(sigma(x, c), x, c->g);
        *dfx = vijp_emu_fma(s, se, th, c->g);
    }
}

static void tanh_pair(double x, const ctx *c, double *fx, double *dfx)
{
    if (fx) *fx = vijp_emu_tanh(x, c->f);
    if (dfx) {
        double s = vijp_emu_sech(x, c->f);
        *dfx = vijp_emu_mul(s, s, c->g);
    }
}

typedef void (*pair_fn)(double x, const ctx *c, double *fx, double *dfx);

static const pair_fn pairs[VIJP_KACT_COUNT] = {
    [VIJP_KACT_SIGMOID] = sigmoid_pair, [VIJP_KACT_SOFTPLUS] = softplus_pair, [VIJP_KACT_TANH] = tanh_pair,
    [VIJP_KACT_SILU] = silu_pair,       [VIJP_KACT_GELU] = gelu_pair,         [VIJP_KACT_MISH] = mish_pair,
};

void vijp_emu_act_pair(int kind, double x, const vijp_format *f, double *fx, double *dfx)
{
    ctx c = {f, vijp_emu_arith(f)};
    pairs[kind](x, &c, fx, dfx);
}

/* f′ at an MPFR value (exactly a double: it lies on f's grid). */
static double deriv_at(int kind, mpfr_t x, const ctx *c)
{
    double d;
    pairs[kind](vijp_emu_get1(x), c, NULL, &d);
    return d;
}

void vijp_emu_act_forward(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    ctx c = {f, vijp_emu_arith(f)};
    for (size_t i = 0; i < L->in * B; i++) {
        double y;
        pairs[kind](vijp_emu_get1(X[i]), &c, &y, NULL);
        mpfr_set_d(Y[i], y, MPFR_RNDN); /* exact: y on f's grid, Y at f's precision */
    }
}

void vijp_emu_act_jvp(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    ctx c = {f, vijp_emu_arith(f)};
    for (size_t i = 0; i < L->in * B; i++)
        mpfr_set_d(V[i], vijp_emu_mul(vijp_emu_get1(U[i]), deriv_at(kind, X[i], &c), c.g), MPFR_RNDN);
}

int vijp_emu_act_vijp(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *Gy,
                      const vijp_format *f)
{
    ctx c = {f, vijp_emu_arith(f)};
    for (size_t i = 0; i < L->in * B; i++) {
        double d = deriv_at(kind, X[i], &c);
        /* the oracles: tanh refuses only f′ = 0, the others also a non-finite f′ */
        if (d == 0 || (kind != VIJP_KACT_TANH && !isfinite(d))) return VIJP_ESINGULAR;
        mpfr_set_d(Gy[i], vijp_emu_div(vijp_emu_get1(Gx[i]), d, c.g), MPFR_RNDN);
    }
    return 0;
}

void vijp_emu_act_jacobian(int kind, const vijp_layer *L, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    ctx c = {f, vijp_emu_arith(f)};
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i == j) mpfr_set_d(J[i + j * L->in], deriv_at(kind, x[i], &c), MPFR_RNDN);
            else mpfr_set_zero(J[i + j * L->in], 1);
}

/* ---- The same on double-held operands (layer/emu_native.h, vijp/mat.h):
 * the loops above, reading and writing the doubles the matrices hold, on
 * ranges of the units over the format's threads (base/fork.h).  Unit i's
 * results come from its own inputs by the same operations whichever
 * thread computes them (ctx is only read; an elementary function's MPFR
 * fallback runs in the thread's own MPFR caches), so the bits do not
 * depend on the count (tests/t-fork.c). ---- */

enum { ACT_FORWARD, ACT_JVP, ACT_VIJP };

typedef struct {
    int kind, op;
    ctx c;
    const double *X, *U; /* U: the tangents (jvp) or Gx (vijp) */
    double *Y;           /* Y, V or Gy */
    int singular[VIJP_FORK_MAX_THREADS];
} act_run;

static void act_units(void *arg, size_t part, size_t begin, size_t end)
{
    act_run *r = arg;
    const pair_fn pair = pairs[r->kind];
    for (size_t i = begin; i < end; i++) {
        double d;
        if (r->op == ACT_FORWARD) {
            pair(r->X[i], &r->c, &r->Y[i], NULL);
            continue;
        }
        pair(r->X[i], &r->c, NULL, &d);
        if (r->op == ACT_JVP) r->Y[i] = vijp_emu_mul(r->U[i], d, r->c.g);
        else if (d == 0 || (r->kind != VIJP_KACT_TANH && !isfinite(d))) { /* as vijp_emu_act_vijp */
            r->singular[part] = 1;
            return;
        } else r->Y[i] = vijp_emu_div(r->U[i], d, r->c.g);
    }
}

/* op over L's units at batch B (U: NULL, the tangents or Gx; Y: Y, V or
 * Gy); VIJP_ESINGULAR where a range met an f′ that a vijp cannot divide
 * by (the other ranges' units are then written or not: the caller
 * discards the result, as after the serial loop). */
static int act_d(int kind, int op, const vijp_layer *L, size_t B, const double *X, const double *U, double *Y,
                 const vijp_format *f)
{
    act_run r = {.kind = kind, .op = op, .c = {f, vijp_emu_arith(f)}, .X = X, .U = U, .Y = Y};
    size_t n = L->in * B;
    /* An elementary function on the grid costs 20-100 ns (a glibc call, the
     * rounding test, a few emulated operations): 40 to 1000 of fork.h's
     * units, VIJP_EMU_ACT_UNIT_WORK the low end */
    vijp_fork(f->threads, n, VIJP_EMU_ACT_UNIT_WORK * (double)n, act_units, &r);
    return vijp_fork_any(r.singular) ? VIJP_ESINGULAR : 0;
}

void vijp_emu_act_forward_d(int kind, const vijp_layer *L, const double *X, size_t B, double *Y, const vijp_format *f)
{
    (void)act_d(kind, ACT_FORWARD, L, B, X, NULL, Y, f);
}

void vijp_emu_act_jvp_d(int kind, const vijp_layer *L, const double *X, size_t B, const double *U, double *V,
                        const vijp_format *f)
{
    (void)act_d(kind, ACT_JVP, L, B, X, U, V, f);
}

int vijp_emu_act_vijp_d(int kind, const vijp_layer *L, const double *X, size_t B, const double *Gx, double *Gy,
                        const vijp_format *f)
{
    return act_d(kind, ACT_VIJP, L, B, X, Gx, Gy, f);
}

/* The oracles' inverses: logit log y − log1p(−y) on (0, 1); softplus⁻¹
 * log(expm1(y)) for y <= 1, y + log(−expm1(−y)) above; atanh on (−1, 1). */
static int inverse_one(int kind, double y, const ctx *c, double *x)
{
    const vijp_format *f = c->f;
    switch (kind) {
    case VIJP_KACT_SIGMOID:
        if (!(y > 0 && y < 1)) return VIJP_ESINGULAR;
        *x = vijp_emu_sub(vijp_emu_log(y, f), vijp_emu_log1p(-y, f), c->g);
        return 0;
    case VIJP_KACT_SOFTPLUS:
        if (!(y > 0) || isinf(y)) return VIJP_ESINGULAR;
        if (y <= 1) *x = vijp_emu_log(vijp_emu_expm1(y, f), f);
        else *x = vijp_emu_add(y, vijp_emu_log(-vijp_emu_expm1(-y, f), f), c->g);
        return 0;
    case VIJP_KACT_TANH:
        if (!(fabs(y) < 1)) return VIJP_ESINGULAR;
        *x = vijp_emu_atanh(y, f);
        return 0;
    default: return VIJP_EINVAL;
    }
}

int vijp_emu_act_inverse(int kind, const vijp_layer *L, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    ctx c = {f, vijp_emu_arith(f)};
    for (size_t i = 0; i < L->in * B; i++) {
        double x;
        int rc = inverse_one(kind, vijp_emu_get1(Y[i]), &c, &x);
        if (rc) return rc;
        mpfr_set_d(X[i], x, MPFR_RNDN);
    }
    return 0;
}

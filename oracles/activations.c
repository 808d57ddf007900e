/* Oracles of the smooth activations: f and f′ by their textbook formulas, each
 * operation correctly rounded in the format (arith.h).  Independent of the
 * dual-number code in src/layers/: here f′ is the derivative written out by
 * hand (SiLU′ = σ(1 + xσ(−x)), Mish′ = tanh(sp) + xσ·sech²(sp), …), and
 * MPFR's own exp, log1p, expm1, erfc, tanh and sech are used.  The forms avoid
 * overflow, because in the emulated formats these oracles are the layers'
 * operators: exp only of −|x|, σ(x) and σ(−x) separately. */
#include "oracles.h"
#include "act_loops.h"
#include "vijp/arith.h"
#include <string.h>

/* A pair sets fx = f(x) and dfx = f′(x); either may be NULL, and then the
 * operations that only it needs are skipped (the other's are the same ones,
 * in the same order, so its value does not change): a forward needs f alone,
 * jvp, vijp and the Jacobian f′ alone. */

/* σ(x): 1/(1 + e^−x) for x >= 0, e^x/(1 + e^x) below. */
static void sigma(mpfr_t s, mpfr_t x, const vijp_format *fm)
{
    mpfr_t e, d;
    mpfr_inits2(fm->prec, e, d, (mpfr_ptr)0);
    if (mpfr_sgn(x) >= 0) {
        vo_neg(e, x, fm), vo_exp(e, e, fm);
        vo_set_si(d, 1, fm), vo_add(s, d, e, fm), vo_div(s, d, s, fm);
    } else {
        vo_exp(e, x, fm);
        vo_set_si(d, 1, fm), vo_add(d, d, e, fm), vo_div(s, e, d, fm);
    }
    mpfr_clears(e, d, (mpfr_ptr)0);
}

static void softplus(mpfr_t r, mpfr_t x, const vijp_format *fm)
{
    mpfr_t e;
    mpfr_init2(e, fm->prec);
    if (mpfr_sgn(x) > 0) vo_neg(e, x, fm), vo_exp(e, e, fm), vo_log1p(e, e, fm), vo_add(r, x, e, fm);
    else vo_exp(e, x, fm), vo_log1p(r, e, fm);
    mpfr_clear(e);
}

static void sigmoid_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t nx, c, t;
    mpfr_inits2(fm->prec, nx, c, t, (mpfr_ptr)0);
    mpfr_ptr s = fx ? fx : t;
    sigma(s, x, fm);
    if (dfx) vo_neg(nx, x, fm), sigma(c, nx, fm), vo_mul(dfx, s, c, fm);
    mpfr_clears(nx, c, t, (mpfr_ptr)0);
}

static void softplus_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    if (fx) softplus(fx, x, fm);
    if (dfx) sigma(dfx, x, fm);
}

static void silu_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t s, c, one;
    mpfr_inits2(fm->prec, s, c, one, (mpfr_ptr)0);
    sigma(s, x, fm);
    if (fx) vo_mul(fx, x, s, fm);
    if (dfx) {
        vo_neg(c, x, fm), sigma(c, c, fm);
        vo_set_si(one, 1, fm), vo_fma(c, x, c, one, fm); /* 1 + xσ(−x), rounded once */
        vo_mul(dfx, s, c, fm);
    }
    mpfr_clears(s, c, one, (mpfr_ptr)0);
}

static void gelu_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t t, cdf, pdf, r;
    mpfr_inits2(fm->prec, t, cdf, pdf, r, (mpfr_ptr)0);
    vo_set_si(r, 2, fm), vo_sqrt(r, r, fm);
    vo_div(t, x, r, fm), vo_neg(t, t, fm);
    vo_erfc(cdf, t, fm), vo_set_d(r, 0.5, fm), vo_mul(cdf, cdf, r, fm); /* Φ(x) = erfc(−x/√2)/2 */
    if (fx) vo_mul(fx, x, cdf, fm);
    if (dfx) {
        vo_mul(t, x, x, fm), vo_mul(t, t, r, fm), vo_neg(t, t, fm), vo_exp(pdf, t, fm);
        vo_const_pi(r, fm), vo_add(r, r, r, fm), vo_sqrt(r, r, fm), vo_div(pdf, pdf, r, fm); /* φ(x) */
        vo_fma(dfx, x, pdf, cdf, fm);
    }
    mpfr_clears(t, cdf, pdf, r, (mpfr_ptr)0);
}

static void mish_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t sp, th, se, s;
    mpfr_inits2(fm->prec, sp, th, se, s, (mpfr_ptr)0);
    softplus(sp, x, fm);
    vo_tanh(th, sp, fm);
    if (fx) vo_mul(fx, x, th, fm);
    if (dfx) {
        vo_sech(se, sp, fm), vo_mul(se, se, se, fm);
        sigma(s, x, fm), vo_mul(s, s, x, fm);
        vo_fma(dfx, s, se, th, fm);
    }
    mpfr_clears(sp, th, se, s, (mpfr_ptr)0);
}

static void tanh_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    if (fx) vo_tanh(fx, x, fm);
    if (dfx) vo_sech(dfx, x, fm), vo_mul(dfx, dfx, dfx, fm);
}

static const struct {
    const char *name;
    vo_pair_fn pair;
} pairs[] = {
    {"sigmoid", sigmoid_pair}, {"softplus", softplus_pair}, {"silu", silu_pair},
    {"gelu", gelu_pair},       {"mish", mish_pair},         {"tanh", tanh_pair},
};

void vo_activation_pair(const char *name, mpfr_t fx, mpfr_t dfx, mpfr_t x, const vijp_format *fm)
{
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
        if (!strcmp(name, pairs[i].name)) {
            pairs[i].pair(NULL, fx, dfx, x, fm); /* these pairs take no arguments */
            return;
        }
    if (fx) mpfr_set_nan(fx);
    if (dfx) mpfr_set_nan(dfx);
}

/* ---- the layer operators, generic over the pair ---- */

void vo_act_forward(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *fm, vo_pair_fn p)
{
    for (size_t i = 0; i < L->in * B; i++) p(L, Y[i], NULL, X[i], fm);
}

void vo_act_forward_deriv(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, mpfr_t *D, const vijp_format *fm,
                          vo_pair_fn p)
{
    mpfr_t d, one;
    mpfr_inits2(fm->prec, d, one, (mpfr_ptr)0);
    vo_set_si(one, 1, fm);
    for (size_t i = 0; i < L->in * B; i++) p(L, Y[i], d, X[i], fm), vo_mul(D[i], one, d, fm); /* as vo_act_jvp's */
    mpfr_clears(d, one, (mpfr_ptr)0);
}

void vo_act_jvp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *fm, vo_pair_fn p)
{
    mpfr_t d;
    mpfr_init2(d, fm->prec);
    for (size_t i = 0; i < L->in * B; i++) p(L, NULL, d, X[i], fm), vo_mul(V[i], U[i], d, fm);
    mpfr_clear(d);
}

int vo_act_vijp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *Gy, const vijp_format *fm, vo_pair_fn p)
{
    mpfr_t d;
    mpfr_init2(d, fm->prec);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        p(L, NULL, d, X[i], fm);
        if (mpfr_zero_p(d) || !mpfr_number_p(d)) rc = VIJP_ESINGULAR; /* f′ is 0 or underflowed here */
        else vo_div(Gy[i], Gx[i], d, fm);
    }
    mpfr_clear(d);
    return rc;
}

void vo_act_jacobian(const vijp_layer *L, mpfr_t *x, mpfr_t *J, const vijp_format *fm, vo_pair_fn p)
{
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i == j) p(L, NULL, J[i + j * L->in], x[i], fm);
            else mpfr_set_zero(J[i + j * L->in], 1);
}

VO_ACT_DEFINE(sigmoid)
VO_ACT_DEFINE(softplus)
VO_ACT_DEFINE(silu)
VO_ACT_DEFINE(gelu)
VO_ACT_DEFINE(mish)

/* logit: log y − log1p(−y) on (0, 1). */
int vo_sigmoid_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    mpfr_t a, b;
    mpfr_inits2(f->prec, a, b, (mpfr_ptr)0);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        if (mpfr_sgn(Y[i]) <= 0 || mpfr_cmp_ui(Y[i], 1) >= 0 || !mpfr_number_p(Y[i])) {
            rc = VIJP_ESINGULAR;
            break;
        }
        vo_log(a, Y[i], f), vo_neg(b, Y[i], f), vo_log1p(b, b, f), vo_sub(X[i], a, b, f);
    }
    mpfr_clears(a, b, (mpfr_ptr)0);
    return rc;
}

/* log(expm1(y)) for y <= 1, y + log(−expm1(−y)) above. */
int vo_softplus_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    mpfr_t a;
    mpfr_init2(a, f->prec);
    int rc = 0;
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(Y[i]) <= 0 || !mpfr_number_p(Y[i])) {
            rc = VIJP_ESINGULAR;
            break;
        }
        if (mpfr_cmp_ui(Y[i], 1) <= 0) vo_expm1(a, Y[i], f), vo_log(X[i], a, f);
        else vo_neg(a, Y[i], f), vo_expm1(a, a, f), vo_neg(a, a, f), vo_log(a, a, f), vo_add(X[i], Y[i], a, f);
    }
    mpfr_clear(a);
    return rc;
}

/* Oracles of the activations after the catalogue's first six: ELU, SELU,
 * GELU's tanh form, softplus with β and a threshold, softsign.  Textbook formulas with
 * f′ written out by hand, each operation correctly rounded in the format
 * (arith.h), independent of src/layers/ (no dual numbers, MPFR's own exp,
 * expm1, log1p).  These types have no native emulation, so in the narrow
 * formats these are their operators: the forms neither overflow nor cancel
 * (σ from exp(−|v|), GELU's 0.5(1 + tanh(v/2)) as σ(v)).  Constants are
 * those of PyTorch (said in each layer's file), rounded to the format here. */
#include "oracles.h"
#include "act_loops.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include <math.h>
#include <string.h>

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* fx = f(x), dfx = f′(x) at layer L's arguments; either may be NULL. */

/* σ(v) = 1/(1 + e^−v) for v >= 0, e^v/(1 + e^v) below. */
static void sigma(mpfr_t s, mpfr_t v, const vijp_format *fm)
{
    mpfr_t e, one;
    mpfr_inits2(fm->prec, e, one, (mpfr_ptr)0);
    vo_set_si(one, 1, fm);
    if (mpfr_sgn(v) >= 0) vo_neg(e, v, fm), vo_exp(e, e, fm), vo_add(e, one, e, fm), vo_div(s, one, e, fm);
    else vo_exp(e, v, fm), vo_add(one, one, e, fm), vo_div(s, e, one, fm);
    mpfr_clears(e, one, (mpfr_ptr)0);
}

/* scale·x above 0; scale·(α·(e^x − 1)) at and below, f′ scale·(α·e^x). */
static void elu_like(mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, double scale_d, double alpha_d, const vijp_format *fm)
{
    mpfr_t scale, alpha, t;
    mpfr_inits2(fm->prec, scale, alpha, t, (mpfr_ptr)0);
    vo_set_d(scale, scale_d, fm), vo_set_d(alpha, alpha_d, fm);
    if (mpfr_sgn(x) > 0) {
        if (fx) {
            if (scale_d == 1) vo_set(fx, x, fm);
            else vo_mul(fx, scale, x, fm);
        }
        if (dfx) vo_set(dfx, scale, fm);
    } else {
        if (fx) {
            vo_expm1(t, x, fm), vo_mul(t, alpha, t, fm);
            if (scale_d == 1) vo_set(fx, t, fm);
            else vo_mul(fx, scale, t, fm);
        }
        if (dfx) {
            vo_exp(t, x, fm), vo_mul(t, alpha, t, fm);
            if (scale_d == 1) vo_set(dfx, t, fm);
            else vo_mul(dfx, scale, t, fm);
        }
    }
    mpfr_clears(scale, alpha, t, (mpfr_ptr)0);
}

static void elu_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    elu_like(fx, dfx, x, 1, vijp_elu_alpha(L), fm);
}

static void selu_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    elu_like(fx, dfx, x, SELU_SCALE, SELU_ALPHA, fm);
}

/* x·σ(v), v = 2k(x + c·x³), k = √(2/π); f′ = σ(v)·(1 + x·σ(−v)·v′),
 * v′ = 2k(1 + 3c·x²): σ(v) > 0 kept apart, as SiLU's. */
static void gelu_tanh_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t k, c, x2, v, s, t, one;
    mpfr_inits2(fm->prec, k, c, x2, v, s, t, one, (mpfr_ptr)0);
    vo_const_pi(k, fm), vo_set_si(t, 2, fm), vo_div(k, t, k, fm), vo_sqrt(k, k, fm); /* √(2/π) */
    vo_set_d(c, 0.044715, fm), vo_set_si(one, 1, fm);
    vo_mul(x2, x, x, fm);
    vo_mul(v, x2, x, fm), vo_mul(v, c, v, fm), vo_add(v, x, v, fm), vo_mul(v, k, v, fm), vo_add(v, v, v, fm);
    sigma(s, v, fm);
    if (fx) vo_mul(fx, x, s, fm);
    if (dfx) {
        vo_set_si(t, 3, fm), vo_mul(t, t, c, fm), vo_fma(t, t, x2, one, fm), vo_mul(t, k, t, fm), vo_add(t, t, t, fm);
        vo_neg(v, v, fm), sigma(v, v, fm), vo_mul(v, x, v, fm); /* x·σ(−v) */
        vo_fma(t, v, t, one, fm), vo_mul(dfx, s, t, fm);
    }
    mpfr_clears(k, c, x2, v, s, t, one, (mpfr_ptr)0);
}

/* z = β·x rounded decides the branch (torch's `(x * beta) > threshold`);
 * below it log(1 + e^{βx})/β with βx exact (a product of two format
 * numbers fits 2·prec bits): x + log1p(e^{−βx})/β for βx > 0 (βx itself
 * may overflow the format), log1p(e^{βx})/β below; f′ is σ(βx), from
 * e^{−|βx|} too. */
static void softplus_beta_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    vijp_softplus_args a = vijp_softplus_get(L);
    mpfr_t beta, thr, z, e, one, bx, neg_abs;
    mpfr_inits2(fm->prec, beta, thr, z, e, one, (mpfr_ptr)0);
    mpfr_inits2(2 * fm->prec + 2, bx, neg_abs, (mpfr_ptr)0);
    vo_set_d(beta, a.beta, fm), vo_set_si(one, 1, fm);
    vo_mul(z, beta, x, fm);
    if (isinf(a.threshold)) mpfr_set_inf(thr, 1);
    else vo_set_d(thr, a.threshold, fm);
    if (mpfr_cmp(z, thr) > 0) {
        if (fx) vo_set(fx, x, fm);
        if (dfx) vo_set_si(dfx, 1, fm);
    } else {
        mpfr_mul(bx, beta, x, MPFR_RNDN); /* exact */
        mpfr_abs(neg_abs, bx, MPFR_RNDN), mpfr_neg(neg_abs, neg_abs, MPFR_RNDN);
        vo_exp(e, neg_abs, fm); /* e^{−|βx|} <= 1 */
        if (fx) {
            mpfr_t l;
            mpfr_init2(l, fm->prec);
            vo_log1p(l, e, fm);
            if (mpfr_sgn(bx) > 0) vo_div(l, l, beta, fm), vo_add(fx, x, l, fm);
            else vo_div(fx, l, beta, fm);
            mpfr_clear(l);
        }
        if (dfx) {
            mpfr_t d;
            mpfr_init2(d, fm->prec);
            vo_add(d, one, e, fm); /* 1 + e^{−|βx|} */
            vo_div(dfx, mpfr_sgn(bx) >= 0 ? one : e, d, fm);
            mpfr_clear(d);
        }
    }
    mpfr_clears(beta, thr, z, e, one, bx, neg_abs, (mpfr_ptr)0);
}

/* x/(1 + |x|); f′ = r·r, r = 1/(1 + |x|). */
static void softsign_pair(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm)
{
    (void)L;
    mpfr_t a, one;
    mpfr_inits2(fm->prec, a, one, (mpfr_ptr)0);
    vo_set_si(one, 1, fm), mpfr_abs(a, x, MPFR_RNDN), vo_add(a, one, a, fm);
    if (fx) vo_div(fx, x, a, fm);
    if (dfx) vo_div(a, one, a, fm), vo_mul(dfx, a, a, fm);
    mpfr_clears(a, one, (mpfr_ptr)0);
}

/* ---- the layer operators: act_loops.h ---- */

VO_ACT_DEFINE(elu)
VO_ACT_DEFINE(selu)
VO_ACT_DEFINE(gelu_tanh)
VO_ACT_DEFINE(softplus_beta)
VO_ACT_DEFINE(softsign)

/* y/(1 − |y|) on (−1, 1). */
int vo_softsign_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    mpfr_t t, one;
    mpfr_inits2(f->prec, t, one, (mpfr_ptr)0);
    vo_set_si(one, 1, f);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        if (!mpfr_number_p(Y[i]) || mpfr_cmpabs(Y[i], one) >= 0) rc = VIJP_ESINGULAR;
        else mpfr_abs(t, Y[i], MPFR_RNDN), vo_sub(t, one, t, f), vo_div(X[i], Y[i], t, f);
    }
    mpfr_clears(t, one, (mpfr_ptr)0);
    return rc;
}

/* y > 0: y/scale; y <= 0: log1p(y/(scale·α)), on (−scale·α, ∞). */
static int elu_like_inverse(const vijp_layer *L, mpfr_t *Y, size_t B, mpfr_t *X, double scale_d, double alpha_d,
                            const vijp_format *f)
{
    mpfr_t scale, sa, t;
    mpfr_inits2(f->prec, scale, sa, t, (mpfr_ptr)0);
    vo_set_d(scale, scale_d, f), vo_set_d(sa, alpha_d, f);
    if (scale_d != 1) vo_mul(sa, scale, sa, f);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        vo_neg(t, sa, f);
        if (!mpfr_number_p(Y[i]) || mpfr_cmp(Y[i], t) <= 0) rc = VIJP_ESINGULAR;
        else if (mpfr_sgn(Y[i]) > 0) vo_div(X[i], Y[i], scale, f);
        else vo_div(t, Y[i], sa, f), vo_log1p(X[i], t, f);
    }
    mpfr_clears(scale, sa, t, (mpfr_ptr)0);
    return rc;
}

int vo_elu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    return elu_like_inverse(L, Y, B, X, 1, vijp_elu_alpha(L), f);
}

int vo_selu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    return elu_like_inverse(L, Y, B, X, SELU_SCALE, SELU_ALPHA, f);
}

/* f and f′ by name ("elu", "selu", "gelu_tanh", "softplus_beta", "softsign") for the
 * tests' point-by-point comparisons. */
void vo_activation2_pair(const vijp_layer *L, mpfr_t fx, mpfr_t dfx, mpfr_t x, const vijp_format *fm)
{
    const char *n = L->type->name;
    vo_pair_fn p = !strcmp(n, "elu") ? elu_pair : !strcmp(n, "selu") ? selu_pair : !strcmp(n, "gelu_tanh") ? gelu_tanh_pair
              : !strcmp(n, "softplus_beta") ? softplus_beta_pair : !strcmp(n, "softsign") ? softsign_pair : NULL;
    if (p) p(L, fx, dfx, x, fm);
    else {
        if (fx) mpfr_set_nan(fx);
        if (dfx) mpfr_set_nan(dfx);
    }
}

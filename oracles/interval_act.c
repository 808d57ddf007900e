/* Rigorous enclosures of f′ over an interval (MPFI, outward rounding) for
 * the activations of oracles/activations_elu.c: what vijp certify needs of
 * an elementwise layer.  Constants are enclosed, not rounded: SELU's α and λ
 * and softplus's β are the doubles the layers use (exact), √(2/π) MPFI's. */
#include "oracles.h"
#include "vijp/catalogue.h"
#include <math.h>

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* scale·(α·e^x) on x <= 0, scale on x > 0; the operators take the left
 * branch at 0.  Over an interval meeting both sides: the hull, which
 * contains α·e^0 = α and 1 (f′ jumps there). */
static void elu_like(mpfi_ptr d, mpfi_srcptr x, double scale, double alpha)
{
    mpfr_prec_t p = mpfi_get_prec(d);
    int has_left = mpfr_sgn(&x->left) <= 0, has_right = mpfr_sgn(&x->right) > 0;
    mpfi_t left;
    mpfi_init2(left, p);
    if (has_left) {
        mpfr_t hi;
        mpfr_init2(hi, p);
        mpfr_set_zero(hi, 1); /* min(right end, 0) */
        if (mpfr_sgn(&x->right) < 0) mpfr_set(hi, &x->right, MPFR_RNDU);
        mpfi_interv_fr(left, &x->left, hi);
        mpfi_exp(left, left);
        mpfi_mul_d(left, left, alpha);
        mpfi_mul_d(left, left, scale);
        mpfr_clear(hi);
    }
    if (has_left && has_right) {
        mpfi_t right;
        mpfi_init2(right, p);
        mpfi_set_d(right, scale);
        mpfi_union(d, left, right);
        mpfi_clear(right);
    } else if (has_left) mpfi_set(d, left);
    else mpfi_set_d(d, scale);
    mpfi_clear(left);
}

void vo_elu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)th;
    elu_like(d, x, 1.0, vijp_elu_alpha(L));
}

void vo_selu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    elu_like(d, x, SELU_SCALE, SELU_ALPHA);
}

/* σ over an interval, 1/(1 + e^−v): each step monotone, never contains 0. */
static void sigma_enclose(mpfi_ptr s, mpfi_srcptr v)
{
    mpfi_neg(s, v);
    mpfi_exp(s, s);
    mpfi_add_ui(s, s, 1);
    mpfi_ui_div(s, 1, s);
}

/* GELU (tanh form)′ = σ(v)·(1 + x·σ(−v)·v′), v = 2k(x + c·x³),
 * v′ = 2k(1 + 3c·x²), k = √(2/π), c = 0.044715 (the double): σ(v) > 0 kept
 * apart, so the sign comes from the second factor alone. */
void vo_gelu_tanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfr_prec_t p = mpfi_get_prec(d);
    mpfi_t k, v, w, s;
    mpfi_init2(k, p), mpfi_init2(v, p), mpfi_init2(w, p), mpfi_init2(s, p);
    mpfi_const_pi(k), mpfi_ui_div(k, 2, k), mpfi_sqrt(k, k), mpfi_mul_ui(k, k, 2); /* 2k */
    mpfi_sqr(w, x);                          /* x² */
    mpfi_mul(v, w, x), mpfi_mul_d(v, v, 0.044715), mpfi_add(v, v, x), mpfi_mul(v, v, k); /* v */
    mpfi_mul_d(w, w, 0.044715), mpfi_mul_ui(w, w, 3), mpfi_add_ui(w, w, 1), mpfi_mul(w, w, k); /* v′ */
    sigma_enclose(s, v);
    mpfi_neg(v, v), sigma_enclose(v, v);     /* σ(−v) */
    mpfi_mul(v, v, x), mpfi_mul(v, v, w), mpfi_add_ui(v, v, 1);
    mpfi_mul(d, s, v);
    mpfi_clear(k), mpfi_clear(v), mpfi_clear(w), mpfi_clear(s);
}

/* σ(βx) where βx (rounded in the format) stays at or below the threshold,
 * 1 past it.  Rounding is monotone and the threshold a format number, so
 * if βx <= t exactly over the whole interval every rounded βx is too: σ
 * alone; otherwise some point may take f′ = 1 and the enclosure is
 * [min σ(βx), 1] (σ <= 1). */
void vo_softplus_beta_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)th;
    vijp_softplus_args a = vijp_softplus_get(L);
    mpfi_t bx;
    mpfi_init2(bx, mpfi_get_prec(d));
    mpfi_mul_d(bx, x, a.beta);
    sigma_enclose(d, bx);
    if (!isinf(a.threshold) && mpfr_cmp_d(&bx->right, a.threshold) > 0) mpfr_set_ui(&d->right, 1, MPFR_RNDU);
    mpfi_clear(bx);
}

/* softsign′ = 1/(1 + |x|)²: MPFI's abs, then monotone steps. */
void vo_softsign_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L, (void)th;
    mpfi_abs(d, x);
    mpfi_add_ui(d, d, 1);
    mpfi_sqr(d, d);
    mpfi_ui_div(d, 1, d);
}

/* Rigorous enclosures of f′ over an interval, with MPFI (outward rounding):
 * the derivative sets that vijp certify needs for elementwise layers. */
#include "oracles.h"

/* A piecewise-constant derivative: lo_val for x < 0 (and at 0, where the
 * operators take the left branch), hi_val for x > 0; both over an interval
 * that meets both sides. */
static void piecewise(mpfi_ptr d, mpfi_srcptr x, double left, double right)
{
    int has_left = mpfr_sgn(&x->left) <= 0, has_right = mpfr_sgn(&x->right) > 0;
    if (has_left && has_right) mpfi_interv_d(d, left < right ? left : right, left < right ? right : left);
    else mpfi_set_d(d, has_right ? right : left);
}

void vo_leaky_deriv_enclose(const vijp_layer *L, mpfi_ptr d, mpfi_srcptr x) { piecewise(d, x, L->alpha, 1.0); }

void vo_relu_deriv_enclose(const vijp_layer *L, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L;
    piecewise(d, x, 0.0, 1.0);
}

/* tanh′ = sech²: MPFI's sech encloses sech over the interval, squaring keeps it. */
void vo_tanh_deriv_enclose(const vijp_layer *L, mpfi_ptr d, mpfi_srcptr x)
{
    (void)L;
    mpfi_sech(d, x);
    mpfi_sqr(d, d);
}

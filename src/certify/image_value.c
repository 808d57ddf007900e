/* The values a layer's image over a box starts from (image.h): vectors of
 * intervals, and the layer's value at a point enclosed from its MPFR
 * operators. */
#include "image.h"
#include "vijp/vijp.h"
#include <stdlib.h>

mpfi_t *vijp_image_vec_new(size_t n)
{
    mpfi_t *v = vijp_alloc_array(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++) mpfi_init2(v[i], IMAGE_PREC);
    return v;
}

void vijp_image_vec_free(mpfi_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) mpfi_clear(v[i]);
    free(v);
}

/* f(x) at 256 bits (the type's MPFR operators) into an enclosure [v ±
 * 2^-200·|v| + 2^-1074] per output: the operators' error, a few dozen
 * correctly rounded operations each within 2^-256 relative, is far inside
 * that widening (for the activations, which do not cancel, and at x = 0 for
 * a linear layer, where f(0) is its bias).  A type that may cancel (a
 * plugin's) passes scale: image_more.c says what it holds. */
int vijp_image_value_at(const vijp_layer *L, const double *theta, mpfr_t *x, const double *scale, mpfi_t *y,
                        vijp_error *err)
{
    vijp_format p256;
    if (vijp_format_mpfr(&p256, 256, err)) return err->code;
    size_t P = L->type->param_count(L);
    vijp_mat th, X, Y;
    vijp_mat_init(&th, P, 1, &p256), vijp_mat_init(&X, L->in, 1, &p256), vijp_mat_init(&Y, L->out, 1, &p256);
    if (P) vijp_mat_set_d(&th, theta);
    for (size_t i = 0; i < L->in; i++) mpfr_set(X.m[i], x[i], MPFR_RNDN); /* exact: IMAGE_PREC < 256 */
    int rc = vijp_layer_forward(L, &th, &X, &Y, err);
    mpfr_t w, a, b;
    mpfr_inits2(256, w, a, b, (mpfr_ptr)0);
    for (size_t i = 0; !rc && i < L->out; i++) {
        mpfr_abs(w, Y.m[i], MPFR_RNDU);
        mpfr_mul_2si(w, w, -200, MPFR_RNDU);
        mpfr_add_d(w, w, 0x1p-1074, MPFR_RNDU);
        if (scale) mpfr_set_d(a, scale[i], MPFR_RNDU), mpfr_mul_2si(a, a, -192, MPFR_RNDU), mpfr_add(w, w, a, MPFR_RNDU);
        mpfr_sub(a, Y.m[i], w, MPFR_RNDD), mpfr_add(b, Y.m[i], w, MPFR_RNDU);
        mpfi_interv_fr(y[i], a, b);
    }
    mpfr_clears(w, a, b, (mpfr_ptr)0);
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&Y);
    return rc;
}

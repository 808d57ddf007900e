/* Oracle of PReLU (src/layers/prelu.c): y = x (x > 0), a_c·x (x <= 0), the
 * slopes θ = weight[C] over a channel-major row, each operation correctly
 * rounded in the format (arith.h); in the narrow formats these are the
 * layer's operators (no native emulation).  Then its f′ enclosure. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"

/* The channel of unit i of a batch. */
static size_t channel(const vijp_layer *L, size_t i) { return (i % L->in) / (L->in / vijp_prelu_channels(L)); }

void vo_prelu_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) > 0) vo_set(Y[i], X[i], f);
        else vo_mul(Y[i], th[channel(L, i)], X[i], f);
}

void vo_prelu_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) > 0) vo_set(V[i], U[i], f);
        else vo_mul(V[i], th[channel(L, i)], U[i], f);
}

/* Σ x·g over each channel's inactive units, in unit order. */
void vo_prelu_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                        const vijp_format *f)
{
    (void)th;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    for (size_t c = 0; c < vijp_prelu_channels(L); c++) mpfr_set_zero(Gt[c], 1);
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) <= 0) vo_mul(p, X[i], Gy[i], f), vo_add(Gt[channel(L, i)], Gt[channel(L, i)], p, f);
    mpfr_clear(p);
}

int vo_prelu_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                  const vijp_format *f)
{
    (void)frag;
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(X[i]) > 0) vo_set(Gy[i], Gx[i], f);
        else if (mpfr_zero_p(th[channel(L, i)])) return VIJP_ESINGULAR; /* J singular at this unit */
        else vo_div(Gy[i], Gx[i], th[channel(L, i)], f);
    }
    return 0;
}

void vo_prelu_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i != j) mpfr_set_zero(J[i + j * L->in], 1);
            else if (mpfr_sgn(x[i]) > 0) vo_set_si(J[i + j * L->in], 1, f);
            else vo_set(J[i + j * L->in], th[channel(L, i)], f);
}

/* y/a_c below 0, refused unless every a_c > 0 (a bijection only then). */
int vo_prelu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    for (size_t c = 0; c < vijp_prelu_channels(L); c++)
        if (mpfr_sgn(th[c]) <= 0 || !mpfr_number_p(th[c])) return VIJP_ESINGULAR;
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(Y[i]) > 0) vo_set(X[i], Y[i], f);
        else vo_div(X[i], Y[i], th[channel(L, i)], f);
    return 0;
}

/* deriv_enclose sees one unit's interval but not which unit: the hull of 1
 * (where the interval meets x > 0) and every channel's slope (where it
 * meets x <= 0), an enclosure of f′ for any unit. */
void vo_prelu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x)
{
    int left = mpfr_sgn(&x->left) <= 0, right = mpfr_sgn(&x->right) > 0;
    double lo = right ? 1 : th[0], hi = lo;
    for (size_t c = 0; left && c < vijp_prelu_channels(L); c++) lo = th[c] < lo ? th[c] : lo, hi = th[c] > hi ? th[c] : hi;
    mpfi_interv_d(d, lo, hi);
}

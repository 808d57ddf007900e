/* Oracles of the elementwise layers: leaky ReLU, ReLU, tanh. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"

/* ---- leaky ReLU: f'(x) = 1 (x > 0) or α ---- */

static void leaky_slope(mpfr_t s, const vijp_layer *L, mpfr_t x, const vijp_format *f)
{
    if (mpfr_sgn(x) > 0) vo_set_si(s, 1, f);
    else vo_set_d(s, vijp_leaky_slope(L), f); /* α rounded to the format, as its weights are */
}

void vo_leaky_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t i = 0; i < L->in * B; i++) leaky_slope(s, L, X[i], f), vo_mul(Y[i], X[i], s, f);
    mpfr_clear(s);
}

void vo_leaky_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t i = 0; i < L->in * B; i++) leaky_slope(s, L, X[i], f), vo_mul(V[i], U[i], s, f);
    mpfr_clear(s);
}

int vo_leaky_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                  mpfr_t *Gy, const vijp_format *f)
{
    (void)th, (void)frag;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t i = 0; i < L->in * B; i++) leaky_slope(s, L, X[i], f), vo_div(Gy[i], Gx[i], s, f);
    mpfr_clear(s);
    return 0;
}

void vo_leaky_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i == j) leaky_slope(J[i + j * L->in], L, x[i], f);
            else mpfr_set_zero(J[i + j * L->in], 1);
}

int vo_leaky_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    mpfr_t s;
    mpfr_init2(s, f->prec);
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_sgn(Y[i]) > 0) vo_set(X[i], Y[i], f);
        else vo_set_d(s, vijp_leaky_slope(L), f), vo_div(X[i], Y[i], s, f);
    }
    mpfr_clear(s);
    return 0;
}

/* ---- ReLU: f'(x) = [x > 0]; fragment = Gy on inactive units ---- */

void vo_relu_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) > 0) vo_set(Y[i], X[i], f);
        else mpfr_set_zero(Y[i], 1);
}

void vo_relu_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) > 0) vo_set(V[i], U[i], f);
        else mpfr_set_zero(V[i], 1);
}

size_t vo_relu_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th;
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++) k += mpfr_sgn(X[i]) <= 0;
    return k;
}

void vo_relu_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                      const vijp_format *f)
{
    (void)th;
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) <= 0) vo_set(frag[k++], Gy[i], f);
}

int vo_relu_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                 mpfr_t *Gy, const vijp_format *f)
{
    (void)th;
    size_t k = 0;
    for (size_t i = 0; i < L->in * B; i++)
        if (mpfr_sgn(X[i]) > 0) vo_set(Gy[i], Gx[i], f);
        else vo_set(Gy[i], frag[k++], f);
    return 0;
}

void vo_relu_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            vo_set_si(J[i + j * L->in], i == j && mpfr_sgn(x[i]) > 0, f);
}

int vo_relu_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    size_t k = vo_relu_fragment_count(L, th, x, 1), col = 0;
    for (size_t i = 0; i < L->in * k; i++) mpfr_set_zero(Q[i], 1);
    for (size_t i = 0; i < L->in; i++)
        if (mpfr_sgn(x[i]) <= 0) vo_set_si(Q[i + L->in * col++], 1, f);
    return 0;
}

/* ---- tanh: f'(x) = sech²(x), each step correctly rounded in the format ---- */

static void dtanh(mpfr_t d, mpfr_t x, const vijp_format *f)
{
    mpfr_t s;
    mpfr_init2(s, f->prec);
    vo_sech(s, x, f);
    vo_mul(d, s, s, f);
    mpfr_clear(s);
}

void vo_tanh_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++) vo_tanh(Y[i], X[i], f);
}

void vo_tanh_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)th;
    mpfr_t d;
    mpfr_init2(d, f->prec);
    for (size_t i = 0; i < L->in * B; i++) dtanh(d, X[i], f), vo_mul(V[i], U[i], d, f);
    mpfr_clear(d);
}

int vo_tanh_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                 mpfr_t *Gy, const vijp_format *f)
{
    (void)th, (void)frag;
    mpfr_t d;
    mpfr_init2(d, f->prec);
    int rc = 0;
    for (size_t i = 0; i < L->in * B && !rc; i++) {
        dtanh(d, X[i], f);
        if (mpfr_zero_p(d)) rc = VIJP_ESINGULAR; /* f' underflowed in this format */
        else vo_div(Gy[i], Gx[i], d, f);
    }
    mpfr_clear(d);
    return rc;
}

void vo_tanh_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in; i++)
        for (size_t j = 0; j < L->in; j++)
            if (i == j) dtanh(J[i + j * L->in], x[i], f);
            else mpfr_set_zero(J[i + j * L->in], 1);
}

int vo_tanh_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    (void)th;
    for (size_t i = 0; i < L->in * B; i++) {
        if (mpfr_cmpabs_ui(Y[i], 1) >= 0) return VIJP_ESINGULAR;
        vo_atanh(X[i], Y[i], f);
    }
    return 0;
}

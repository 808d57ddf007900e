/* Oracle of linear:OUTxIN, torch nn.Linear on each token of a token-major
 * sequence (theta = [weight[OUT, IN] in C order, bias[OUT]]).  The L tokens
 * of a sample are L columns of the dense layer y = W x + b: each operator
 * here is the dense oracle's (oracles/dense.c) on the one-token layer over
 * L·B columns, with theta moved into the dense layout (exact copies).  The
 * cokernel is block diagonal, I_L ⊗ Q₁. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include <stdlib.h>

static vijp_layer token_layer(const vijp_layer *L)
{
    const vijp_linear_args *a = vijp_linear_get(L);
    return (vijp_layer){.type = L->type, .in = a->in, .out = a->out};
}

static size_t tokens(const vijp_layer *L) { return L->in / vijp_linear_get(L)->in; }
static size_t params(const vijp_layer *L) { return vijp_linear_get(L)->out * (vijp_linear_get(L)->in + 1); }

mpfr_t *vo_linear_dense_theta(const vijp_layer *L, mpfr_t *th, const vijp_format *f)
{
    size_t m = vijp_linear_get(L)->out, n = vijp_linear_get(L)->in;
    mpfr_t *d = vo_vec_new(m * n + m, f);
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < n; k++) mpfr_set(d[i + k * m], th[i * n + k], MPFR_RNDN);
        mpfr_set(d[m * n + i], th[m * n + i], MPFR_RNDN);
    }
    return d;
}

void vo_linear_theta_from_dense(const vijp_layer *L, mpfr_t *d, mpfr_t *th)
{
    size_t m = vijp_linear_get(L)->out, n = vijp_linear_get(L)->in;
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < n; k++) mpfr_set(th[i * n + k], d[i + k * m], MPFR_RNDN);
        mpfr_set(th[m * n + i], d[m * n + i], MPFR_RNDN);
    }
}

void vo_linear_block_cokernel(const vijp_layer *L, mpfr_t *Q1, mpfr_t *Q)
{
    size_t m = vijp_linear_get(L)->out, n = vijp_linear_get(L)->in, M = L->out, T = tokens(L), k = m - n;
    for (size_t i = 0; i < M * T * k; i++) mpfr_set_zero(Q[i], 1);
    for (size_t l = 0; l < T; l++)
        for (size_t c = 0; c < k; c++)
            for (size_t i = 0; i < m; i++) mpfr_set(Q[l * m + i + (l * k + c) * M], Q1[i + c * m], MPFR_RNDN);
}

void vo_linear_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vo_dense_forward(&D, d, X, tokens(L) * B, Y, f);
    vo_vec_free(d, params(L));
}

void vo_linear_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vo_dense_jvp(&D, d, X, tokens(L) * B, U, V, f);
    vo_vec_free(d, params(L));
}

void vo_linear_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vo_dense_vjp(&D, d, X, tokens(L) * B, Gy, Gx, f);
    vo_vec_free(d, params(L));
}

void vo_linear_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                         const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f), *g = vo_vec_new(params(L), f);
    vo_dense_vjp_param(&D, d, X, tokens(L) * B, Gy, g, f);
    vo_linear_theta_from_dense(L, g, Gt);
    vo_vec_free(d, params(L)), vo_vec_free(g, params(L));
}

size_t vo_linear_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    vijp_layer D = token_layer(L);
    return vo_dense_fragment_count(&D, th, X, tokens(L) * B);
}

void vo_linear_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                        const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    vo_dense_fragment(&D, d, X, tokens(L) * B, Gy, frag, f);
    vo_vec_free(d, params(L));
}

int vo_linear_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    int rc = vo_dense_vijp(&D, d, X, tokens(L) * B, Gx, frag, Gy, f);
    vo_vec_free(d, params(L));
    return rc;
}

/* J = I_L ⊗ W: W's entries, exactly. */
void vo_linear_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)x;
    size_t m = vijp_linear_get(L)->out, n = vijp_linear_get(L)->in, M = L->out;
    for (size_t i = 0; i < L->out * L->in; i++) mpfr_set_zero(J[i], 1);
    for (size_t l = 0; l < tokens(L); l++)
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < n; k++) vo_set(J[(l * m + i) + (l * n + k) * M], th[i * n + k], f);
}

int vo_linear_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    size_t m = vijp_linear_get(L)->out, n = vijp_linear_get(L)->in;
    if (m <= n) return 0;
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f), *Q1 = vo_vec_new(m * (m - n), f);
    int rc = vo_dense_cokernel(&D, d, x, Q1, f);
    if (!rc) vo_linear_block_cokernel(L, Q1, Q);
    vo_vec_free(d, params(L)), vo_vec_free(Q1, m * (m - n));
    return rc;
}

int vo_linear_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    vijp_layer D = token_layer(L);
    mpfr_t *d = vo_linear_dense_theta(L, th, f);
    int rc = vo_dense_inverse(&D, d, Y, tokens(L) * B, X, f);
    vo_vec_free(d, params(L));
    return rc;
}

/* The dense oracle's products for the drift study's reference
 * (vo_dot_fused formats): every output of y = W x + b, W u, Wᵀ g_y and
 * g_y xᵀ (with the bias gradient Σ_j g_y) rounded once by vo_dot, instead of
 * after every multiply and add.  Same layout and contracts as oracles/dense.c. */
#include "dot.h"
#include "vijp/memory.h"
#include <stdlib.h>

void vo_dense_forward_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y)
{
    size_t m = L->out, n = L->in;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * n + 1, sizeof *ptrs);
    for (size_t j = 0; j < B; j++) /* y_i = Σ_k W(i, k) x_k + b_i: row i of W has stride m */
        for (size_t i = 0; i < m; i++) vo_dot_strided(Y[i + j * m], th[m * n + i], &th[i], m, &X[j * n], 1, n, ptrs);
    free(ptrs);
}

void vo_dense_jvp_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *U, size_t B, mpfr_t *V)
{
    size_t m = L->out, n = L->in;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * n + 1, sizeof *ptrs);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < m; i++) vo_dot_strided(V[i + j * m], NULL, &th[i], m, &U[j * n], 1, n, ptrs);
    free(ptrs);
}

void vo_dense_vjp_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *Gy, size_t B, mpfr_t *Gx)
{
    size_t m = L->out, n = L->in;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * m + 1, sizeof *ptrs);
    for (size_t j = 0; j < B; j++) /* (Wᵀ g)_k: column k of W is contiguous */
        for (size_t k = 0; k < n; k++) vo_dot_strided(Gx[k + j * n], NULL, &th[k * m], 1, &Gy[j * m], 1, m, ptrs);
    free(ptrs);
}

void vo_dense_vjp_param_fused(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt)
{
    size_t m = L->out, n = L->in;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * B + 1, sizeof *ptrs);
    /* ∂W(i, k) = Σ_j g_y(i, j) x(k, j), in storage order; ∂b_i = Σ_j g_y(i, j) */
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < m; i++)
            if (B == 1) vo_dot1(Gt[i + k * m], Gy[i], X[k]); /* one product */
            else vo_dot_strided(Gt[i + k * m], NULL, &Gy[i], m, &X[k], n, B, ptrs);
    for (size_t i = 0; i < m; i++) vo_dot_strided(Gt[m * n + i], NULL, &Gy[i], m, NULL, 0, B, ptrs);
    free(ptrs);
}

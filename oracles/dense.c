/* Oracle of the dense layer y = W x + b (theta = [W column-major, b]).
 * Products W x, W u, Wᵀ g and g xᵀ: each output one vo_dot_acc, its terms
 * in index order, the bias added last (mixed formats: exact products,
 * binary32 sums, or a tensor core's blocks, one rounding to storage
 * afterwards in vijp_layer_*; format.h).
 * Solves by Gaussian elimination with partial pivoting (square) and
 * Householder QR with LAPACK's reflector convention (dlarfg: β = −sign(α)‖x‖),
 * so that the cokernel basis Q₂ is the one the double path builds. */
#include "oracles.h"
#include "vijp/arith.h"
#include "dot.h"
#include <stdlib.h>

#define W(i, k) th[(i) + (k) * m]

void vo_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    if (vo_dot_fused(f)) { vo_dense_forward_fused(L, th, X, B, Y); return; }
    size_t m = L->out, n = L->in;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < m; i++) {
            mpfr_t *y = &Y[i + j * m];
            mpfr_set_zero(*y, 1);
            vo_dot_acc(*y, &W(i, 0), m, &X[j * n], 1, n, p, f); /* Σ_k W(i, k) x_k: row i has stride m */
            vo_add(*y, *y, th[m * n + i], f);
        }
    mpfr_clear(p);
}

void vo_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    if (vo_dot_fused(f)) { vo_dense_jvp_fused(L, th, U, B, V); return; }
    (void)X;
    size_t m = L->out, n = L->in;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < m; i++) {
            mpfr_set_zero(V[i + j * m], 1);
            vo_dot_acc(V[i + j * m], &W(i, 0), m, &U[j * n], 1, n, p, f);
        }
    mpfr_clear(p);
}

void vo_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    if (vo_dot_fused(f)) { vo_dense_vjp_fused(L, th, Gy, B, Gx); return; }
    (void)X;
    size_t m = L->out, n = L->in;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    for (size_t j = 0; j < B; j++)
        for (size_t k = 0; k < n; k++) {
            mpfr_set_zero(Gx[k + j * n], 1);
            vo_dot_acc(Gx[k + j * n], &W(0, k), 1, &Gy[j * m], 1, m, p, f); /* column k of W */
        }
    mpfr_clear(p);
}

void vo_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                        const vijp_format *f)
{
    (void)th;
    if (vo_dot_fused(f)) { vo_dense_vjp_param_fused(L, X, B, Gy, Gt); return; }
    size_t m = L->out, n = L->in;
    mpfr_t p;
    mpfr_init2(p, f->prec);
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < n; k++) {
            mpfr_set_zero(Gt[i + k * m], 1);
            vo_dot_acc(Gt[i + k * m], &Gy[i], m, &X[k], n, B, p, f); /* Σ_j g(i, j) x(k, j) */
        }
        mpfr_set_zero(Gt[m * n + i], 1);
        for (size_t j = 0; j < B; j++) vo_add(Gt[m * n + i], Gt[m * n + i], Gy[i + j * m], f);
    }
    mpfr_clear(p);
}

void vo_dense_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)x;
    for (size_t i = 0; i < L->out * L->in; i++) vo_set(J[i], th[i], f);
}

/* Solve Aᵀ z = r (trans) or A z = r for an n × n column-major A, overwriting
 * r (n × B).  Gaussian elimination with partial pivoting on a copy. */
int vo_ge_solve(size_t n, mpfr_t *A0, int trans, mpfr_t *r, size_t B, const vijp_format *f)
{
    mpfr_t *A = vo_vec_new(n * n, f), t, u;
    mpfr_inits2(f->prec, t, u, (mpfr_ptr)0);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < n; k++) mpfr_set(A[i + k * n], trans ? A0[k + i * n] : A0[i + k * n], MPFR_RNDN);
    int rc = 0;
    for (size_t c = 0; c < n && !rc; c++) {
        size_t p = c;
        for (size_t i = c + 1; i < n; i++)
            if (mpfr_cmpabs(A[i + c * n], A[p + c * n]) > 0) p = i;
        if (mpfr_zero_p(A[p + c * n])) { rc = VIJP_ESINGULAR; break; }
        if (p != c) {
            for (size_t k = 0; k < n; k++) mpfr_swap(A[c + k * n], A[p + k * n]);
            for (size_t j = 0; j < B; j++) mpfr_swap(r[c + j * n], r[p + j * n]);
        }
        for (size_t i = c + 1; i < n; i++) {
            vo_div(t, A[i + c * n], A[c + c * n], f); /* multiplier l_ic */
            for (size_t k = c + 1; k < n; k++) vo_mul(u, t, A[c + k * n], f), vo_sub(A[i + k * n], A[i + k * n], u, f);
            for (size_t j = 0; j < B; j++) vo_mul(u, t, r[c + j * n], f), vo_sub(r[i + j * n], r[i + j * n], u, f);
        }
    }
    for (size_t j = 0; j < B && !rc; j++) /* back substitution with U */
        for (size_t i = n; i-- > 0;) {
            for (size_t k = i + 1; k < n; k++) vo_mul(t, A[i + k * n], r[k + j * n], f), vo_sub(r[i + j * n], r[i + j * n], t, f);
            vo_div(r[i + j * n], r[i + j * n], A[i + i * n], f);
        }
    mpfr_clears(t, u, (mpfr_ptr)0);
    vo_vec_free(A, n * n);
    return rc;
}

/* Householder QR of A (r × c, r >= c) in place: R on and above the diagonal,
 * reflector vectors v (v_k = 1 implicit) below, scalars in tau. */
static int hh_qr(size_t r, size_t c, mpfr_t *A, mpfr_t *tau, const vijp_format *f)
{
    mpfr_t nrm, beta, s, t;
    mpfr_inits2(f->prec, nrm, beta, s, t, (mpfr_ptr)0);
    int rc = 0;
    for (size_t k = 0; k < c; k++) {
        mpfr_set_zero(nrm, 1); /* ‖A[k+1:, k]‖² */
        for (size_t i = k + 1; i < r; i++) vo_mul(t, A[i + k * r], A[i + k * r], f), vo_add(nrm, nrm, t, f);
        if (mpfr_zero_p(nrm)) {
            mpfr_set_zero(tau[k], 1);
        } else {
            vo_mul(t, A[k + k * r], A[k + k * r], f);
            vo_add(t, t, nrm, f);
            vo_sqrt(beta, t, f);
            if (mpfr_sgn(A[k + k * r]) >= 0) mpfr_neg(beta, beta, MPFR_RNDN);
            vo_sub(t, beta, A[k + k * r], f); /* tau = (β − α)/β */
            vo_div(tau[k], t, beta, f);
            vo_sub(s, A[k + k * r], beta, f); /* v = x / (α − β) */
            for (size_t i = k + 1; i < r; i++) vo_div(A[i + k * r], A[i + k * r], s, f);
            mpfr_set(A[k + k * r], beta, MPFR_RNDN);
        }
        for (size_t j = k + 1; j < c; j++) { /* apply H_k to the remaining columns */
            vo_set(s, A[k + j * r], f);
            for (size_t i = k + 1; i < r; i++) vo_mul(t, A[i + k * r], A[i + j * r], f), vo_add(s, s, t, f);
            vo_mul(s, s, tau[k], f);
            vo_sub(A[k + j * r], A[k + j * r], s, f);
            for (size_t i = k + 1; i < r; i++) vo_mul(t, s, A[i + k * r], f), vo_sub(A[i + j * r], A[i + j * r], t, f);
        }
        if (mpfr_zero_p(A[k + k * r])) rc = VIJP_ESINGULAR;
    }
    mpfr_clears(nrm, beta, s, t, (mpfr_ptr)0);
    return rc;
}

/* z := Qᵀ z (trans) or Q z for z of length r, Q = H_0 H_1 … H_{c−1}. */
static void hh_apply(size_t r, size_t c, mpfr_t *A, mpfr_t *tau, mpfr_t *z, int trans, const vijp_format *f)
{
    mpfr_t s, t;
    mpfr_inits2(f->prec, s, t, (mpfr_ptr)0);
    for (size_t q = 0; q < c; q++) {
        size_t k = trans ? q : c - 1 - q;
        vo_set(s, z[k], f);
        for (size_t i = k + 1; i < r; i++) vo_mul(t, A[i + k * r], z[i], f), vo_add(s, s, t, f);
        vo_mul(s, s, tau[k], f);
        vo_sub(z[k], z[k], s, f);
        for (size_t i = k + 1; i < r; i++) vo_mul(t, s, A[i + k * r], f), vo_sub(z[i], z[i], t, f);
    }
    mpfr_clears(s, t, (mpfr_ptr)0);
}

/* QR of Wᵀ (wide) or W (tall): A is r × c with r = max(m, n), c = min(m, n). */
static int dense_qr(const vijp_layer *L, mpfr_t *th, mpfr_t **A, mpfr_t **tau, const vijp_format *f)
{
    size_t m = L->out, n = L->in, r = m > n ? m : n, c = m > n ? n : m;
    *A = vo_vec_new(r * c, f);
    *tau = vo_vec_new(c, f);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++)
            mpfr_set(m > n ? (*A)[i + k * r] : (*A)[k + i * r], W(i, k), MPFR_RNDN);
    return hh_qr(r, c, *A, *tau, f);
}

size_t vo_dense_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

void vo_dense_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                       const vijp_format *f)
{
    (void)X;
    size_t m = L->out, n = L->in;
    mpfr_t *A, *tau, *z = vo_vec_new(m, f);
    dense_qr(L, th, &A, &tau, f);
    for (size_t j = 0; j < B; j++) {
        for (size_t i = 0; i < m; i++) mpfr_set(z[i], Gy[i + j * m], MPFR_RNDN);
        hh_apply(m, n, A, tau, z, 1, f);
        for (size_t i = n; i < m; i++) mpfr_set(frag[(i - n) + j * (m - n)], z[i], MPFR_RNDN);
    }
    vo_vec_free(A, m * n), vo_vec_free(tau, n), vo_vec_free(z, m);
}

int vo_dense_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                  mpfr_t *Gy, const vijp_format *f)
{
    (void)X;
    size_t m = L->out, n = L->in, r = m > n ? m : n, c = m > n ? n : m;
    if (m == n) {
        for (size_t i = 0; i < n * B; i++) mpfr_set(Gy[i], Gx[i], MPFR_RNDN);
        return vo_ge_solve(n, th, 1, Gy, B, f); /* Wᵀ gy = gx */
    }
    mpfr_t *A, *tau, *z = vo_vec_new(r, f), t;
    mpfr_init2(t, f->prec);
    int rc = dense_qr(L, th, &A, &tau, f);
    for (size_t j = 0; j < B && !rc; j++) {
        for (size_t i = 0; i < n; i++) mpfr_set(z[i], Gx[i + j * n], MPFR_RNDN);
        if (m < n) { /* Wᵀ = QR: gy = R⁻¹ (Qᵀ gx)[0:m] */
            hh_apply(r, c, A, tau, z, 1, f);
            for (size_t i = m; i-- > 0;) {
                for (size_t k = i + 1; k < m; k++) vo_mul(t, A[i + k * r], z[k], f), vo_sub(z[i], z[i], t, f);
                vo_div(z[i], z[i], A[i + i * r], f);
            }
            for (size_t i = 0; i < m; i++) mpfr_set(Gy[i + j * m], z[i], MPFR_RNDN);
        } else { /* W = QR: gy = Q [R⁻ᵀ gx; c] */
            for (size_t i = 0; i < n; i++) {
                for (size_t k = 0; k < i; k++) vo_mul(t, A[k + i * r], z[k], f), vo_sub(z[i], z[i], t, f);
                vo_div(z[i], z[i], A[i + i * r], f);
            }
            for (size_t i = n; i < m; i++) mpfr_set(z[i], frag[(i - n) + j * (m - n)], MPFR_RNDN);
            hh_apply(r, c, A, tau, z, 0, f);
            for (size_t i = 0; i < m; i++) mpfr_set(Gy[i + j * m], z[i], MPFR_RNDN);
        }
    }
    mpfr_clear(t);
    vo_vec_free(A, r * c), vo_vec_free(tau, c), vo_vec_free(z, r);
    return rc;
}

int vo_dense_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)x;
    size_t m = L->out, n = L->in;
    if (m <= n) return 0;
    mpfr_t *A, *tau;
    int rc = dense_qr(L, th, &A, &tau, f);
    for (size_t j = n; j < m && !rc; j++) { /* column j of Q = Q e_j */
        mpfr_t *q = &Q[(j - n) * m];
        for (size_t i = 0; i < m; i++) mpfr_set_si(q[i], i == j, MPFR_RNDN);
        hh_apply(m, n, A, tau, q, 0, f);
    }
    vo_vec_free(A, m * n), vo_vec_free(tau, n);
    return rc;
}

int vo_dense_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    size_t n = L->in;
    if (L->out != n) return VIJP_EUNSUPPORTED;
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < n; i++) vo_sub(X[i + j * n], Y[i + j * n], th[n * n + i], f);
    return vo_ge_solve(n, th, 0, X, B, f);
}

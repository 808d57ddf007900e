/* Dense layer y = W x + b, W m × n (DESIGN §6).  J = W.
 *   m = n: vijp solves Wᵀ gy = gx by LU (one factorisation for the batch,
 *          lu.h);
 *   m < n: gy = gx W⁺ = R⁻¹ Q₁ᵀ gx from QR of Wᵀ (least squares, dgels);
 *   m > n: W = Q R, gy = Q₁ R⁻ᵀ gx + Q₂ c, where Q₂ is an orthonormal basis of
 *          null(Wᵀ) and the fragment c = Q₂ᵀ gy (m − n numbers per sample).
 * theta = [W column-major (m·n), b (m)]. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "args.h"
#include "init.h"
#include "oracles/oracles.h"
#include "emu/dense.h"
#include "emu/dense_ref.h"
#include "layer/route.h"
#include "base/lapack.h"
#include "lu.h"
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t m = 0, n = 0; /* n = 0: the incoming width */
    int bad = p ? vijp_arg_count(&p, &m) : VIJP_ARG_NOT_A_COUNT;
    if (!bad && *p == 'x') {
        p++;
        if (!(bad = vijp_arg_count(&p, &n)) && n == 0) bad = VIJP_ARG_NOT_A_COUNT;
    }
    if (bad || *p || m == 0)
        return vijp_fail(err, VIJP_EINVAL, "dense needs its size: dense:M or dense:MxN with 1 <= M, N <= %u, got 'dense%s%s'%s",
                         VIJP_WIDTH_MAX, arg ? ":" : "", arg ? arg : "", bad == VIJP_ARG_TOO_LARGE ? " (too large)" : "");
    if (n && in_width && in_width != n)
        return vijp_fail(err, VIJP_EDIM, "dense:%s expects %zu inputs but receives %zu", arg, n, in_width);
    L->out = m;
    L->in = n ? n : in_width ? in_width : m;
    return 0;
}

static size_t param_count(const vijp_layer *L) { return L->out * L->in + L->out; }

static unsigned declare(const vijp_layer *L)
{
    return VIJP_DECL_LINEAR | (L->out > L->in ? VIJP_DECL_NEVER_SUBMERSIVE : 0u); /* J = W at every x */
}

static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t m = L->out, n = L->in;
    double *W = theta, *b = theta + m * n;
    if (in.kind == VIJP_INIT_KAIMING_UNIFORM) {
        vijp_kaiming_uniform(m * n + m, n, rng, theta); /* W, then b */
        return 0;
    }
    if (in.kind == VIJP_INIT_GAUSSIAN) {
        double s = 1 / sqrt((double)n); /* variance 1/n keeps ‖Wx‖ ≈ ‖x‖ */
        for (size_t i = 0; i < m * n; i++) W[i] = s * vijp_rng_normal(rng);
    } else {
        int rc = vijp_orthogonal_init(m, n, rng, in.threads, W);
        if (rc) return rc;
        if (in.kind == VIJP_INIT_SCALED)
            for (size_t i = 0; i < m * n; i++) W[i] *= in.gain;
    }
    for (size_t i = 0; i < m; i++) b[i] = 0.1 * vijp_rng_normal(rng);
    return 0;
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    size_t m = L->out, n = L->in;
    for (size_t j = 0; j < B; j++) memcpy(Y + j * m, th + m * n, m * sizeof *Y);
    cx->k->gemm_d(0, 0, m, B, n, 1.0, th, m, X, n, 1.0, Y, m);
}

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *U,
                double *V)
{
    (void)X;
    cx->k->gemm_d(0, 0, L->out, B, L->in, 1.0, th, L->out, U, L->in, 0.0, V, L->out);
}

static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gy,
                double *Gx)
{
    (void)X;
    cx->k->gemm_d(1, 0, L->in, B, L->out, 1.0, th, L->out, Gy, L->out, 0.0, Gx, L->in);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)th;
    size_t m = L->out, n = L->in;
    cx->k->gemm_d(0, 1, m, n, B, 1.0, Gy, m, X, n, 0.0, Gt, m);
    /* db_i = Σ_j Gy[i, j], j ascending from 0, for all i at once: down the
     * columns, not across the rows (the same sums in the same order). */
    double *db = Gt + m * n;
    for (size_t i = 0; i < m; i++) db[i] = 0;
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < m; i++) db[i] += Gy[i + j * m];
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

/* QR of a copy of W (m > n); fails when R has a zero on its diagonal, i.e. W
 * has rank < n and the cokernel is larger than m − n. */
static int tall_qr(const vijp_layer *L, const double *W, double **A, double **tau, vijp_error *err)
{
    size_t m = L->out, n = L->in;
    *A = vijp_alloc_array(m * m, sizeof **A); /* zeroed: LAPACKE checks all of A for NaN */
    *tau = vijp_alloc_array(n, sizeof **tau);
    memcpy(*A, W, m * n * sizeof **A);
    vijp_lapack_dgeqrf(m, n, *A, m, *tau);
    for (size_t k = 0; k < n; k++)
        if ((*A)[k + k * m] == 0)
            return vijp_fail(err, VIJP_ESINGULAR,
                             "dense %zux%zu: W has rank < %zu (R[%zu,%zu] = 0), so its cokernel is "
                             "larger than the stored fragment", m, n, n, k, k);
    return 0;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)X;
    size_t m = L->out, n = L->in;
    double *A = NULL, *tau = NULL, *Z = vijp_alloc_array(m * B, sizeof *Z);
    tall_qr(L, th, &A, &tau, NULL); /* a rank-deficient W is reported by the vijp */
    memcpy(Z, Gy, m * B * sizeof *Z);
    vijp_lapack_dormqr('L', 'T', m, B, n, A, m, tau, Z, m);
    for (size_t j = 0; j < B; j++) memcpy(frag + j * (m - n), Z + j * m + n, (m - n) * sizeof *Z);
    free(A), free(tau), free(Z);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)X;
    size_t m = L->out, n = L->in;
    int rc = 0;
    if (m == n) {
        /* unset: A is W's copy, piv the LU's (calloc's zeroing was 1 % of a Moonwalk run) */
        double *A = vijp_alloc_unset(n * n * sizeof *A);
        lapack_int *piv = vijp_alloc_unset(n * sizeof *piv);
        if (!rc) {
            memcpy(A, th, n * n * sizeof *A);
            memcpy(Gy, Gx, n * B * sizeof *Gy);
            /* lu.h: getrf and getrs, by the route faster on this BLAS,
             * through LAPACKE's _work entry points: LAPACKE's NaN scan of A
             * and Gy cost 3% of a Moonwalk run, and on a NaN it returned
             * without solving, leaving Gy = Gx, a number; now the NaN
             * propagates. */
            lapack_int info = vijp_lu_factor_d(VIJP_LU_AUTO, n, A, piv);
            if (info > 0)
                rc = vijp_fail(err, VIJP_ESINGULAR, "dense %zux%zu vijp: W is singular (U[%d,%d] = 0 in LU)",
                               m, n, (int)info - 1, (int)info - 1);
            else
                vijp_lu_solve_d(VIJP_LU_AUTO, 'T', n, B, A, piv, Gy);
        }
        free(A), free(piv);
    } else if (m < n) {
        double *A = vijp_alloc_unset(n * m * sizeof *A), *Z = vijp_alloc_unset(n * B * sizeof *Z); /* both filled */
        if (!rc) {
            for (size_t i = 0; i < m; i++) /* A = Wᵀ, n × m */
                for (size_t k = 0; k < n; k++) A[k + i * n] = th[i + k * m];
            memcpy(Z, Gx, n * B * sizeof *Z);
            lapack_int info = vijp_lapack_dgels('N', n, m, B, A, n, Z, n);
            if (info > 0)
                rc = vijp_fail(err, VIJP_ESINGULAR, "dense %zux%zu vijp: W has rank < %zu, not submersive", m, n, m);
            for (size_t j = 0; !rc && j < B; j++) memcpy(Gy + j * m, Z + j * n, m * sizeof *Gy);
        }
        free(A), free(Z);
    } else {
        double *A = NULL, *tau = NULL;
        rc = tall_qr(L, th, &A, &tau, err);
        if (!rc) {
            for (size_t j = 0; j < B; j++) {
                memcpy(Gy + j * m, Gx + j * n, n * sizeof *Gy);
                memcpy(Gy + j * m + n, frag + j * (m - n), (m - n) * sizeof *Gy);
            }
            /* top n rows: R⁻ᵀ gx; then apply Q to [R⁻ᵀ gx; c] */
            LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'U', 'T', 'N', (int)n, (int)B, A, (int)m, Gy, (int)m);
            vijp_lapack_dormqr('L', 'N', m, B, n, A, m, tau, Gy, m);
        }
        free(A), free(tau);
    }
    return rc;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    memcpy(J, th, L->out * L->in * sizeof *J);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)cx, (void)x;
    size_t m = L->out, n = L->in;
    if (m <= n) return 0;
    double *A = NULL, *tau = NULL;
    int rc = tall_qr(L, th, &A, &tau, err);
    if (!rc) {
        vijp_lapack_dorgqr(m, m, n, A, m, tau);
        memcpy(Q, A + n * m, m * (m - n) * sizeof *Q);
    }
    free(A), free(tau);
    return rc;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx;
    size_t n = L->in;
    if (L->out != n)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "dense %zux%zu has no inverse (not square)", L->out, n);
    double *A = vijp_alloc_array(n * n, sizeof *A);
    lapack_int *piv = vijp_alloc_array(n, sizeof *piv);
    int rc = 0;
    if (!rc) {
        memcpy(A, th, n * n * sizeof *A);
        for (size_t j = 0; j < B; j++)
            for (size_t i = 0; i < n; i++) X[i + j * n] = Y[i + j * n] - th[n * n + i];
        if (vijp_lu_factor_d(VIJP_LU_AUTO, n, A, piv) > 0) /* as in vijp */
            rc = vijp_fail(err, VIJP_ESINGULAR, "dense %zux%zu inverse: W is singular", n, n);
        else
            vijp_lu_solve_d(VIJP_LU_AUTO, 'N', n, B, A, piv, X);
    }
    free(A), free(piv);
    return rc;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel, .inverse = inverse,
};

/* The oracle's operators (mp), and in the narrow formats the same run
 * natively, bit for bit (emu: src/emu/dense.c); the route chooses.  The
 * products of mp are the oracle's but for the drift study's reference at
 * most 106 bits, which runs them in double-double, bit for bit vo_dot's
 * (src/emu/dense_ref.h). */
static const vijp_ops_mp ops_mp = {
    .forward = vijp_ref_dense_forward, .jvp = vijp_ref_dense_jvp, .vjp = vijp_ref_dense_vjp,
    .vjp_param = vijp_ref_dense_vjp_param,
    .fragment_count = vo_dense_fragment_count, .fragment = vo_dense_fragment, .vijp = vo_dense_vijp,
    .jacobian = vo_dense_jacobian, .cokernel = vo_dense_cokernel, .inverse = vo_dense_inverse,
};
static const vijp_ops_mp ops_emu = {
    .forward = vijp_emu_dense_forward, .jvp = vijp_emu_dense_jvp, .vjp = vijp_emu_dense_vjp,
    .vjp_param = vijp_emu_dense_vjp_param, .fragment_count = vo_dense_fragment_count,
    .fragment = vijp_emu_dense_fragment, .vijp = vijp_emu_dense_vijp, .jacobian = vo_dense_jacobian,
    .cokernel = vijp_emu_dense_cokernel, .inverse = vijp_emu_dense_inverse,
};

/* ---- the error-bound contract (vijp_layer_bounds; tests/t-layers.c) ---- */

static size_t bias_index(const vijp_layer *L, size_t i) { return L->out * L->in + i; }

static int print(const vijp_layer *L, char *buf, size_t size) { return snprintf(buf, size, "dense:%zux%zu", L->out, L->in); }

/* dW_ij = Σ_b G_ib X_jb and db_i = Σ_b G_ib, each a sum of B terms formed
 * into a zero: within γ_(B+1) Σ_b |G_ib||X_jb| (Higham eq. 3.5). */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bound)
{
    (void)th;
    size_t m = L->out, n = L->in;
    for (size_t i = 0; i < m; i++)
        for (size_t b = 0; b < B; b++) {
            for (size_t j = 0; j < n; j++) bound[i + j * m] += (double)(B + 1) * u * aG[i + b * m] * aX[j + b * n];
            bound[m * n + i] += (double)(B + 1) * u * aG[i + b * m];
        }
}

extern const vijp_ops_f vijp_dense_ops_f; /* binary32@SET: dense_f32.c */

const vijp_layer_type vijp_layer_dense = {
    .name = "dense", .syntax = "dense:M (M outputs) or dense:MxN (N inputs)",
    .parse = parse, .print = print, .param_count = param_count, .init = init, .declare = declare, .jacobian_exact = 1,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &vijp_emu_dense_native, .f = &vijp_dense_ops_f,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR}, .bias_index = bias_index, .vjp_param_bound = vjp_param_bound,
};

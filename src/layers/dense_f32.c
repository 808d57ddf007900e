/* dense's binary32@SET operators (vijp_ops_f, vijp/layer.h): what a float32
 * run computes on a CPU, through BLAS's sgemm, LAPACK and lu.h's LU (what
 * sgetrf/sgetrs compute), in whatever order and with whatever FMAs the BLAS
 * build uses (so, like double, not bit-reproducible across machines).  The same calls as the
 * double operators in dense.c, in single precision.  Each entry of a
 * product is a dot product of n terms in binary32, within γ_n·(|W||x|)
 * (Higham eq. 3.5, any order), plus u·|b| for the bias; the square vijp is
 * LU with partial pivoting, backward stable (Higham Thm 9.4), the wide one
 * (m < n) least squares by sgels, Householder QR, backward stable (Higham
 * Thm 19.10, 20.3).  The tall vijp answers VIJP_EUNSUPPORTED, and the
 * binary32 emulation (its QR, which its fragments come from) runs it. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "layer/route.h"
#include "base/lapack.h"
#include "lu.h"
#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

/* A mixed format's values (bfloat16 or binary16 in float) go to the set's
 * gemm_mixed_f: on a GPU that is GemmEx on the narrow type, the tensor
 * cores; binary32's to gemm_f. */
static void gemm(const vijp_kctx *cx, int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A,
                 size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    const vijp_kernels *K = cx->k;
    if (cx->storage) K->gemm_mixed_f(cx->storage, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    else K->gemm_f(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void forward_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B, float *Y)
{
    size_t m = L->out, n = L->in;
    for (size_t j = 0; j < B; j++) memcpy(Y + j * m, th + m * n, m * sizeof *Y);
    gemm(cx, 0, 0, m, B, n, 1.0f, th, m, X, n, 1.0f, Y, m);
}

static void jvp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                  const float *U, float *V)
{
    (void)X;
    gemm(cx, 0, 0, L->out, B, L->in, 1.0f, th, L->out, U, L->in, 0.0f, V, L->out);
}

static void vjp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                  const float *Gy, float *Gx)
{
    (void)X;
    gemm(cx, 1, 0, L->in, B, L->out, 1.0f, th, L->out, Gy, L->out, 0.0f, Gx, L->in);
}

static void vjp_param_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                        const float *Gy, float *Gt)
{
    (void)th;
    size_t m = L->out, n = L->in;
    gemm(cx, 0, 1, m, n, B, 1.0f, Gy, m, X, n, 0.0f, Gt, m);
    float *db = Gt + m * n; /* Σ_j Gy[i, j], j ascending, as dense.c */
    for (size_t i = 0; i < m; i++) db[i] = 0;
    for (size_t j = 0; j < B; j++)
        for (size_t i = 0; i < m; i++) db[i] += Gy[i + j * m];
}

static int vijp_f(const vijp_layer *L, const vijp_kctx *cx, const float *th, const float *X, size_t B,
                  const float *Gx, const float *frag, float *Gy, vijp_error *err)
{
    (void)cx, (void)X, (void)frag;
    size_t m = L->out, n = L->in;
    int rc = 0;
    if (m > n) return VIJP_EUNSUPPORTED; /* the emulation's QR: its fragments come from that QR */
    if (m < n) { /* least squares Wᵀ y = g by sgels (QR of Wᵀ), as dense.c's dgels */
        float *A = vijp_alloc_unset(n * m * sizeof *A), *Z = vijp_alloc_unset(n * B * sizeof *Z);
        for (size_t i = 0; i < m; i++) /* A = Wᵀ, n × m */
            for (size_t k = 0; k < n; k++) A[k + i * n] = th[i + k * m];
        memcpy(Z, Gx, n * B * sizeof *Z);
        lapack_int info = vijp_lapack_sgels('N', n, m, B, A, n, Z, n);
        if (info > 0)
            rc = vijp_fail(err, VIJP_ESINGULAR, "dense %zux%zu vijp in binary32: W has rank < %zu, not submersive", m,
                           n, m);
        for (size_t j = 0; !rc && j < B; j++) memcpy(Gy + j * m, Z + j * n, m * sizeof *Gy);
        free(A), free(Z);
        return rc;
    }
    float *A = vijp_alloc_unset(n * n * sizeof *A);
    lapack_int *piv = vijp_alloc_unset(n * sizeof *piv);
    memcpy(A, th, n * n * sizeof *A);
    memcpy(Gy, Gx, n * B * sizeof *Gy);
    lapack_int info = vijp_lu_factor_f(VIJP_LU_AUTO, n, A, piv); /* lu.h, as dense.c */
    if (info > 0)
        rc = vijp_fail(err, VIJP_ESINGULAR, "dense %zux%zu vijp in binary32: W is singular (U[%d,%d] = 0 in LU)", n, n,
                       (int)info - 1, (int)info - 1);
    else
        vijp_lu_solve_f(VIJP_LU_AUTO, 'T', n, B, A, piv, Gy);
    free(A), free(piv);
    return rc;
}

const vijp_ops_f vijp_dense_ops_f = {.forward = forward_f, .jvp = jvp_f, .vjp = vjp_f, .vjp_param = vjp_param_f,
                                     .vijp = vijp_f};

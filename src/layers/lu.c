/* Recursive LU factorisation and triangular solves (lu.h says why, and
 * what error they keep). */
#include "lu.h"
#include <cblas.h>
#include <strings.h>

vijp_lu_route vijp_lu_route_for_blas(void)
{
    static const char *const slow_trsm[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof slow_trsm / sizeof *slow_trsm; i++)
        if (!strcasecmp(core, slow_trsm[i])) return VIJP_LU_RECURSIVE;
    return VIJP_LU_LAPACK;
}

/* Solves op(T) Y = X in place for the m × m triangle T (uplo, diag) and the
 * m × nrhs X, op(T) = T or Tᵀ.  Where op(T) is lower triangular the top
 * half of X is solved first and its contribution subtracted from the bottom
 * half by one gemm, then the bottom half is solved; where op(T) is upper,
 * the other way up.  op(T)'s off-diagonal block is T's block below the
 * diagonal (T[h:, :h]) when T is lower, above it (T[:h, h:]) when T is
 * upper; gemm transposes it when op does. */
#define DEFINE_LU(REAL, P, SUF)                                                                                       \
    static void P##trsm_rec(CBLAS_UPLO uplo, CBLAS_TRANSPOSE op, CBLAS_DIAG diag, size_t m, size_t nrhs,              \
                            const REAL *T, size_t ldt, REAL *X, size_t ldx)                                           \
    {                                                                                                                 \
        if (m <= LU_TRSM_LEAF) {                                                                                      \
            cblas_##P##trsm(CblasColMajor, CblasLeft, uplo, op, diag, (int)m, (int)nrhs, 1, T, (int)ldt, X,           \
                            (int)ldx);                                                                                \
            return;                                                                                                   \
        }                                                                                                             \
        size_t h = m / 2;                                                                                             \
        const REAL *T22 = T + h + h * ldt, *off = uplo == CblasLower ? T + h : T + h * ldt;                           \
        if ((uplo == CblasLower) == (op == CblasNoTrans)) { /* op(T) lower: top half first */                         \
            P##trsm_rec(uplo, op, diag, h, nrhs, T, ldt, X, ldx);                                                     \
            cblas_##P##gemm(CblasColMajor, op, CblasNoTrans, (int)(m - h), (int)nrhs, (int)h, -1, off, (int)ldt,      \
                            X, (int)ldx, 1, X + h, (int)ldx);                                                         \
            P##trsm_rec(uplo, op, diag, m - h, nrhs, T22, ldt, X + h, ldx);                                           \
        } else { /* op(T) upper: bottom half first */                                                                 \
            P##trsm_rec(uplo, op, diag, m - h, nrhs, T22, ldt, X + h, ldx);                                           \
            cblas_##P##gemm(CblasColMajor, op, CblasNoTrans, (int)h, (int)nrhs, (int)(m - h), -1, off, (int)ldt,      \
                            X + h, (int)ldx, 1, X, (int)ldx);                                                         \
            P##trsm_rec(uplo, op, diag, h, nrhs, T, ldt, X, ldx);                                                     \
        }                                                                                                             \
    }                                                                                                                 \
                                                                                                                      \
    /* The m × nc panel at A (leading dimension ld, m >= nc): the left half's                                         \
     * columns factored, its interchanges applied to the right half, U12 =                                            \
     * L11⁻¹ A12, the Schur complement A22 − L21 U12 by one gemm and factored,                                        \
     * its interchanges (offset to this panel's rows) applied to the left                                             \
     * half.  LAPACK's dgetrf2 splits the same way, down to single columns. */                                        \
    static lapack_int P##getrf_rec(size_t m, size_t nc, REAL *A, size_t ld, lapack_int *piv)                          \
    {                                                                                                                 \
        if (nc <= LU_PANEL_LEAF)                                                                                      \
            return LAPACKE_##P##getrf_work(LAPACK_COL_MAJOR, (int)m, (int)nc, A, (int)ld, piv);                       \
        size_t h = nc / 2;                                                                                            \
        REAL *A12 = A + h * ld, *A21 = A + h, *A22 = A + h + h * ld;                                                  \
        lapack_int info = P##getrf_rec(m, h, A, ld, piv);                                                             \
        LAPACKE_##P##laswp_work(LAPACK_COL_MAJOR, (int)(nc - h), A12, (int)ld, 1, (int)h, piv, 1);                    \
        P##trsm_rec(CblasLower, CblasNoTrans, CblasUnit, h, nc - h, A, ld, A12, ld);                                  \
        cblas_##P##gemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)(m - h), (int)(nc - h), (int)h, -1, A21,      \
                        (int)ld, A12, (int)ld, 1, A22, (int)ld);                                                      \
        lapack_int info2 = P##getrf_rec(m - h, nc - h, A22, ld, piv + h);                                             \
        if (!info && info2) info = info2 + (lapack_int)h;                                                             \
        for (size_t i = h; i < nc; i++) piv[i] += (lapack_int)h;                                                      \
        LAPACKE_##P##laswp_work(LAPACK_COL_MAJOR, (int)h, A, (int)ld, (int)h + 1, (int)nc, piv, 1);                   \
        return info;                                                                                                  \
    }                                                                                                                 \
                                                                                                                      \
    lapack_int vijp_lu_factor_##SUF(vijp_lu_route r, size_t n, REAL *A, lapack_int *piv)                              \
    {                                                                                                                 \
        if (n == 0) return 0;                                                                                         \
        if (r == VIJP_LU_AUTO) r = vijp_lu_route_for_blas();                                                          \
        if (r == VIJP_LU_LAPACK) return LAPACKE_##P##getrf_work(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv);    \
        return P##getrf_rec(n, n, A, n, piv);                                                                         \
    }                                                                                                                 \
                                                                                                                      \
    /* A = P L U.  'N': X = U⁻¹ L⁻¹ Pᵀ B (the interchanges first, in order).                                          \
     * 'T': Aᵀ = Uᵀ Lᵀ Pᵀ, X = P Lᵀ⁻¹ Uᵀ⁻¹ B (the interchanges last, in reverse). */                                  \
    void vijp_lu_solve_##SUF(vijp_lu_route r, char trans, size_t n, size_t nrhs, const REAL *LU,                      \
                             const lapack_int *piv, REAL *B)                                                          \
    {                                                                                                                 \
        if (n == 0 || nrhs == 0) return;                                                                              \
        if (r == VIJP_LU_AUTO) r = vijp_lu_route_for_blas();                                                          \
        if (r == VIJP_LU_LAPACK || nrhs < LU_SOLVE_MIN_COLUMNS) {                                                     \
            LAPACKE_##P##getrs_work(LAPACK_COL_MAJOR, trans, (int)n, (int)nrhs, LU, (int)n, piv, B, (int)n);          \
            return;                                                                                                   \
        }                                                                                                             \
        if (trans == 'N') {                                                                                           \
            LAPACKE_##P##laswp_work(LAPACK_COL_MAJOR, (int)nrhs, B, (int)n, 1, (int)n, piv, 1);                       \
            P##trsm_rec(CblasLower, CblasNoTrans, CblasUnit, n, nrhs, LU, n, B, n);                                   \
            P##trsm_rec(CblasUpper, CblasNoTrans, CblasNonUnit, n, nrhs, LU, n, B, n);                                \
        } else {                                                                                                      \
            P##trsm_rec(CblasUpper, CblasTrans, CblasNonUnit, n, nrhs, LU, n, B, n);                                  \
            P##trsm_rec(CblasLower, CblasTrans, CblasUnit, n, nrhs, LU, n, B, n);                                     \
            LAPACKE_##P##laswp_work(LAPACK_COL_MAJOR, (int)nrhs, B, (int)n, 1, (int)n, piv, -1);                      \
        }                                                                                                             \
    }

DEFINE_LU(double, d, d)
DEFINE_LU(float, s, f)

/* LU with partial pivoting, A = P L U, and solving op(A) X = B with its
 * factors for many right-hand sides at once: the dense layer's vijp
 * (Wᵀ Gy = Gx) and inverse (W X = Y − b), in double and binary32.  What
 * LAPACK's getrf and getrs compute, in the same storage (getrf's LU and
 * 1-based piv), by one of two routes: LAPACK's own, or recursive routines
 * that are faster where OpenBLAS's trsm kernel is slow.
 *
 * Why: OpenBLAS's AVX-512 kernels (its cores SkylakeX, Cooperlake and
 * SapphireRapids) have a slow trsm: on one Zen 4 core dgetrs reaches 18.8
 * GFLOP/s at n = 256 with 64 columns under them, 35 under its Haswell or
 * Zen kernels, while dgemm runs at 47–50 under either.  getrs hands trsm
 * each whole triangle, getrf the triangle of every panel.  The recursive
 * route splits every triangle in halves down to LU_TRSM_LEAF rows, so trsm
 * sees only the small diagonal blocks and the rest, almost all the work, is
 * one gemm per split; the factorisation splits the columns in halves
 * (Toledo's recursive LU) down to LU_PANEL_LEAF columns, which getrf itself
 * factors.  Measured on that core (interleaved, best of 300 or more,
 * OpenBLAS 0.3.21 on one thread), recursive over LAPACK:
 *                               Cooperlake kernels   Haswell/Zen kernels
 *   factor, n = 64 … 1024       1.15–1.3x            0.9–1.17x
 *   solve, n = 100 … 1024,      1.2–1.6x             0.77–0.98x
 *          16 to 256 columns
 * so vijp_lu_route_for_blas picks the recursive route under the AVX-512
 * cores only.  With fewer than LU_SOLVE_MIN_COLUMNS columns gemm's packing
 * does not pay (0.5–0.9x at one column) and the recursive solve calls getrs.
 *
 * Error: each entry of L, U and X is still computed as in the unblocked
 * algorithms, (a_ij − Σ_k l_ik u_kj)/u_jj and x_i = (b_i − Σ_j t_ij x_j)/t_ii,
 * with the sums split into partial sums (the gemms') in another order.
 * The componentwise bounds of Higham, Accuracy and Stability, 2nd ed., hold
 * for any order of those sums: the factorisation's L̂Û = Pᵀ(A + ΔA) with
 * |ΔA| <= γ_n|P||L̂||Û| (Thm 9.3), and each triangular solve's (T + ΔT) x̂ = b
 * with |ΔT| <= γ_n|T| (Thm 8.5); each is γ_{n+1} where a diagonal is applied
 * as a reciprocal (getf2 scales by 1/u_jj, OpenBLAS's trsm kernels store
 * 1/t_ii).  So the two solves together leave the residual of the factors
 * within γ_{2n+2}|L̂||Û||z|.  tests/t-lu.c asserts both bounds on both
 * routes, and exact results where every operation is exact.  Which route
 * runs depends on the BLAS's kernels, like every double result's last bits. */
#ifndef VIJP_LAYERS_LU_H
#define VIJP_LAYERS_LU_H

#include <lapacke.h>
#include <stddef.h>

enum { LU_TRSM_LEAF = 8, LU_PANEL_LEAF = 16, LU_SOLVE_MIN_COLUMNS = 16 };

/* VIJP_LU_AUTO: vijp_lu_route_for_blas()'s choice, what the layers pass;
 * the other two force a route (the tests take both). */
typedef enum { VIJP_LU_AUTO, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE } vijp_lu_route;

/* The faster route for the BLAS kernels this process runs: recursive where
 * openblas_get_corename() names an AVX-512 core (above), LAPACK's
 * elsewhere.  Asked on every call: OPENBLAS_CORETYPE decides at start-up. */
vijp_lu_route vijp_lu_route_for_blas(void);

/* getrf of the n × n matrix A (leading dimension n), in place: A becomes L
 * (below the diagonal, unit diagonal implied) and U, piv[i] the 1-based
 * row interchanged with row i + 1.  Returns getrf's info: 0, or k > 0 when
 * U[k−1, k−1] is exactly 0 (A singular; the factorisation still completes). */
lapack_int vijp_lu_factor_d(vijp_lu_route r, size_t n, double *A, lapack_int *piv);
lapack_int vijp_lu_factor_f(vijp_lu_route r, size_t n, float *A, lapack_int *piv);

/* trans 'N' solves A X = B, 'T' Aᵀ X = B, with LU and piv as either route's
 * factorisation (or getrf) leaves them; B: n × nrhs, leading dimension n,
 * overwritten by X.  The factorisation must have returned 0. */
void vijp_lu_solve_d(vijp_lu_route r, char trans, size_t n, size_t nrhs, const double *LU, const lapack_int *piv,
                     double *B);
void vijp_lu_solve_f(vijp_lu_route r, char trans, size_t n, size_t nrhs, const float *LU, const lapack_int *piv,
                     float *B);

#endif

/* LAPACK routines that need workspace, with it from vijp_alloc; internal.
 *
 * The LAPACKE high-level routines (LAPACKE_dgesdd, _dgeqrf, _dormqr, …)
 * allocate their workspace with malloc and, refused, print their own
 * message on stdout and return an error that callers took for a failure to
 * converge, or ignored (a dense vijp then went on with R never formed:
 * wrong gradients, exit 0).  These call the _work routines with workspace
 * from vijp_alloc instead: running out is then the memory policy's (fatal,
 * with a message on stderr: vijp/error.h), and the allocation-failure walk
 * (VIJP_FAIL_ALLOC) reaches it.  Column-major throughout; the arguments and
 * the return value are LAPACKE's (0, or LAPACK's INFO). */
#ifndef VIJP_BASE_LAPACK_H
#define VIJP_BASE_LAPACK_H

#include <lapacke.h>
#include <stddef.h>

/* LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, A, m, s, U, ldu, VT, ldvt). */
lapack_int vijp_lapack_dgesdd(char jobz, size_t m, size_t n, double *A, double *s, double *U, size_t ldu, double *VT,
                              size_t ldvt);
/* LAPACKE_dgesvd(LAPACK_COL_MAJOR, jobu, jobvt, m, n, A, m, s, U, ldu, VT, ldvt, superb), without superb. */
lapack_int vijp_lapack_dgesvd(char jobu, char jobvt, size_t m, size_t n, double *A, double *s, double *U, size_t ldu,
                              double *VT, size_t ldvt);
/* LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, A, lda, tau). */
lapack_int vijp_lapack_dgeqrf(size_t m, size_t n, double *A, size_t lda, double *tau);
/* LAPACKE_dgelqf(LAPACK_COL_MAJOR, m, n, A, lda, tau). */
lapack_int vijp_lapack_dgelqf(size_t m, size_t n, double *A, size_t lda, double *tau);
/* LAPACKE_dormqr(LAPACK_COL_MAJOR, side, trans, m, n, k, A, lda, tau, C, ldc). */
lapack_int vijp_lapack_dormqr(char side, char trans, size_t m, size_t n, size_t k, const double *A, size_t lda,
                              const double *tau, double *C, size_t ldc);
/* LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, k, A, lda, tau). */
lapack_int vijp_lapack_dorgqr(size_t m, size_t n, size_t k, double *A, size_t lda, const double *tau);
/* LAPACKE_dgels and _sgels(LAPACK_COL_MAJOR, trans, m, n, nrhs, A, lda, B, ldb),
 * except that an A of zeros returns 1 (rank deficient, R(1, 1) = 0), as
 * any other A without full rank does, instead of LAPACK's B := 0 and 0. */
lapack_int vijp_lapack_dgels(char trans, size_t m, size_t n, size_t nrhs, double *A, size_t lda, double *B, size_t ldb);
lapack_int vijp_lapack_sgels(char trans, size_t m, size_t n, size_t nrhs, float *A, size_t lda, float *B, size_t ldb);

#endif

/* LAPACK's SVDs with their workspace from vijp_alloc; internal.
 *
 * LAPACKE_dgesdd and LAPACKE_dgesvd allocate their workspace with malloc and,
 * refused, print their own message on stdout and return an error that the
 * callers took for a failure to converge (exit 2, a command's stdout no
 * longer its results).  These call the _work routines with workspace from
 * vijp_alloc instead: running out is then the memory policy's (fatal, with a
 * message on stderr: vijp/error.h), and the allocation-failure walk
 * (VIJP_FAIL_ALLOC) reaches it.  Column-major; the arguments and the return
 * value are LAPACKE's. */
#ifndef VIJP_CERTIFY_SVD_H
#define VIJP_CERTIFY_SVD_H

#include <lapacke.h>
#include <stddef.h>

/* LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, A, m, s, U, ldu, VT, ldvt). */
lapack_int vijp_certify_dgesdd(char jobz, size_t m, size_t n, double *A, double *s, double *U, size_t ldu, double *VT,
                               size_t ldvt);
/* LAPACKE_dgesvd(LAPACK_COL_MAJOR, jobu, jobvt, m, n, A, m, s, U, ldu, VT, ldvt, superb), without superb. */
lapack_int vijp_certify_dgesvd(char jobu, char jobvt, size_t m, size_t n, double *A, double *s, double *U, size_t ldu,
                               double *VT, size_t ldvt);

#endif

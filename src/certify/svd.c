/* LAPACK's SVDs with vijp_alloc'd workspace (svd.h). */
#include "svd.h"
#include "vijp/error.h"
#include <stdlib.h>

/* LAPACK's workspace query answers a size as a double: at least 1. */
static lapack_int work_size(double query) { return query >= 1 ? (lapack_int)query : 1; }

lapack_int vijp_certify_dgesdd(char jobz, size_t m, size_t n, double *A, double *s, double *U, size_t ldu, double *VT,
                               size_t ldvt)
{
    size_t mn = m < n ? m : n;
    lapack_int *iwork = vijp_alloc_array(8 * (mn ? mn : 1), sizeof *iwork); /* dgesdd's IWORK: 8·min(m, n) */
    double query = 0;
    lapack_int info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, jobz, (lapack_int)m, (lapack_int)n, A, (lapack_int)m, s, U,
                                          (lapack_int)ldu, VT, (lapack_int)ldvt, &query, -1, iwork);
    if (!info) {
        lapack_int lwork = work_size(query);
        double *work = vijp_alloc_array((size_t)lwork, sizeof *work);
        info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, jobz, (lapack_int)m, (lapack_int)n, A, (lapack_int)m, s, U,
                                   (lapack_int)ldu, VT, (lapack_int)ldvt, work, lwork, iwork);
        free(work);
    }
    free(iwork);
    return info;
}

lapack_int vijp_certify_dgesvd(char jobu, char jobvt, size_t m, size_t n, double *A, double *s, double *U, size_t ldu,
                               double *VT, size_t ldvt)
{
    double query = 0;
    lapack_int info = LAPACKE_dgesvd_work(LAPACK_COL_MAJOR, jobu, jobvt, (lapack_int)m, (lapack_int)n, A, (lapack_int)m, s,
                                          U, (lapack_int)ldu, VT, (lapack_int)ldvt, &query, -1);
    if (!info) {
        lapack_int lwork = work_size(query);
        double *work = vijp_alloc_array((size_t)lwork, sizeof *work);
        info = LAPACKE_dgesvd_work(LAPACK_COL_MAJOR, jobu, jobvt, (lapack_int)m, (lapack_int)n, A, (lapack_int)m, s, U,
                                   (lapack_int)ldu, VT, (lapack_int)ldvt, work, lwork);
        free(work);
    }
    return info;
}

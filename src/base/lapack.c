/* LAPACK with vijp_alloc'd workspace (lapack.h). */
#include "lapack.h"
#include <lapacke_utils.h>
#include "vijp/error.h"
#include <stdlib.h>

/* LAPACK's workspace query answers a size as a double: at least 1. */
static lapack_int work_size(double query) { return query >= 1 ? (lapack_int)query : 1; }
static lapack_int work_size_f(float query) { return query >= 1 ? (lapack_int)query : 1; }

/* The NaN checks the high-level LAPACKE routine makes before computing
 * (unless LAPACKE_NANCHECK=0), with its codes: callers that relied on them
 * (a NaN in the Lyapunov QR of a drift curve) see what they saw. */
#define NAN_GE(m, n, A, lda, code) \
    if (LAPACKE_dge_nancheck(LAPACK_COL_MAJOR, (lapack_int)(m), (lapack_int)(n), A, (lapack_int)(lda))) return code
#define NAN_V(n, x, code) \
    if (LAPACKE_d_nancheck((lapack_int)(n), x, 1)) return code

/* Most routines here share one shape: the call as a workspace query
 * (lwork = −1, the size comes back in work[0]), then again with that much
 * workspace. */
#define WITH_WORK(T, SIZE, call)                                                                             \
    do {                                                                                                       \
        T query = 0, *work = &query;                                                                           \
        lapack_int lwork = -1, info = call;                                                                    \
        if (info) return info;                                                                                 \
        lwork = SIZE(query);                                                                                   \
        work = vijp_alloc_array((size_t)lwork, sizeof *work);                                                  \
        info = call;                                                                                           \
        free(work);                                                                                            \
        return info;                                                                                           \
    } while (0)

lapack_int vijp_lapack_dgesdd(char jobz, size_t m, size_t n, double *A, double *s, double *U, size_t ldu, double *VT,
                              size_t ldvt)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, m, -5);
    }
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

lapack_int vijp_lapack_dgesvd(char jobu, char jobvt, size_t m, size_t n, double *A, double *s, double *U, size_t ldu,
                              double *VT, size_t ldvt)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, m, -6);
    }
#define CALL                                                                                                   \
    LAPACKE_dgesvd_work(LAPACK_COL_MAJOR, jobu, jobvt, (lapack_int)m, (lapack_int)n, A, (lapack_int)m, s, U,     \
                        (lapack_int)ldu, VT, (lapack_int)ldvt, work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

lapack_int vijp_lapack_dgeqrf(size_t m, size_t n, double *A, size_t lda, double *tau)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, lda, -4);
    }
#define CALL LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, A, (lapack_int)lda, tau, work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

lapack_int vijp_lapack_dgelqf(size_t m, size_t n, double *A, size_t lda, double *tau)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, lda, -4);
    }
#define CALL LAPACKE_dgelqf_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, A, (lapack_int)lda, tau, work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

lapack_int vijp_lapack_dormqr(char side, char trans, size_t m, size_t n, size_t k, const double *A, size_t lda,
                              const double *tau, double *C, size_t ldc)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(side == 'L' ? m : n, k, A, lda, -7);
        NAN_GE(m, n, C, ldc, -10);
        NAN_V(k, tau, -9);
    }
#define CALL                                                                                                   \
    LAPACKE_dormqr_work(LAPACK_COL_MAJOR, side, trans, (lapack_int)m, (lapack_int)n, (lapack_int)k, A,           \
                        (lapack_int)lda, tau, C, (lapack_int)ldc, work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

lapack_int vijp_lapack_dorgqr(size_t m, size_t n, size_t k, double *A, size_t lda, const double *tau)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, lda, -5);
        NAN_V(k, tau, -7);
    }
#define CALL                                                                                                   \
    LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, (lapack_int)k, A, (lapack_int)lda, tau, \
                        work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

/* xGELS answers an A of zeros (max |a_ij| = 0) with B := 0 and INFO = 0,
 * though such an A has rank 0: any other A without full rank it reports by
 * INFO = i > 0, R(i, i) exactly zero.  Here the zero A is reported so too,
 * as R(1, 1) = 0, before LAPACK is called. */
#define ZERO_GE(m, n, A, lda)                                                                                  \
    do {                                                                                                       \
        int zero_ = (m) > 0 && (n) > 0;                                                                        \
        for (size_t j_ = 0; zero_ && j_ < (n); j_++)                                                           \
            for (size_t i_ = 0; zero_ && i_ < (m); i_++) zero_ = (A)[i_ + j_ * (lda)] == 0;                    \
        if (zero_) return 1;                                                                                   \
    } while (0)

lapack_int vijp_lapack_dgels(char trans, size_t m, size_t n, size_t nrhs, double *A, size_t lda, double *B, size_t ldb)
{
    if (LAPACKE_get_nancheck()) {
        NAN_GE(m, n, A, lda, -6);
        NAN_GE(m > n ? m : n, nrhs, B, ldb, -8);
    }
    ZERO_GE(m, n, A, lda);
#define CALL                                                                                                   \
    LAPACKE_dgels_work(LAPACK_COL_MAJOR, trans, (lapack_int)m, (lapack_int)n, (lapack_int)nrhs, A,               \
                       (lapack_int)lda, B, (lapack_int)ldb, work, lwork)
    WITH_WORK(double, work_size, CALL);
#undef CALL
}

lapack_int vijp_lapack_sgels(char trans, size_t m, size_t n, size_t nrhs, float *A, size_t lda, float *B, size_t ldb)
{
    if (LAPACKE_get_nancheck()) {
        if (LAPACKE_sge_nancheck(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, A, (lapack_int)lda)) return -6;
        if (LAPACKE_sge_nancheck(LAPACK_COL_MAJOR, (lapack_int)(m > n ? m : n), (lapack_int)nrhs, B, (lapack_int)ldb))
            return -8;
    }
    ZERO_GE(m, n, A, lda);
#define CALL                                                                                                   \
    LAPACKE_sgels_work(LAPACK_COL_MAJOR, trans, (lapack_int)m, (lapack_int)n, (lapack_int)nrhs, A,               \
                       (lapack_int)lda, B, (lapack_int)ldb, work, lwork)
    WITH_WORK(float, work_size_f, CALL);
#undef CALL
}

/* Double-double dot products (ddot.h): the portable kernel set, the choice
 * of set, and the drivers (dot, gemv, gemm) that check their inputs and run
 * a set.  The error bound and its proof: bound.c. */
#include "ddot/ddot.h"
#include "ddot/eft.h"
#include "kernels/kernels.h"
#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- The portable set ---- */

static size_t ref_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                      const double *c, double *hi, double *lo, double *bound)
{
    return dd_row(n, a, inca, xh, xl, incx, c, hi, lo, bound);
}

/* Row by row, each a strided dd_row: the definition the SIMD sets match. */
static size_t ref_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                       const double *c, double *yh, double *yl, double *bound)
{
    size_t unbounded = 0;
    for (size_t i = 0; i < m; i++)
        unbounded += dd_row(n, A + i, lda, xh, xl, 1, c ? c + i : NULL, yh + i, yl + i, bound + i);
    return unbounded;
}

static size_t ref_td_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                         const double *c, double *hi, double *mid, double *lo, double *bound)
{
    return td_row(n, a, inca, xh, xl, incx, c, hi, mid, lo, bound);
}

static size_t ref_td_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                          const double *c, double *yh, double *ym, double *yl, double *bound)
{
    size_t unbounded = 0;
    for (size_t i = 0; i < m; i++)
        unbounded += td_row(n, A + i, lda, xh, xl, 1, c ? c + i : NULL, yh + i, ym + i, yl + i, bound + i);
    return unbounded;
}

static size_t ref_qd_row(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx,
                         const double *c, double y[4], double *bound)
{
    return qd_row(n, a, inca, x, incx, c, y, bound);
}

static size_t ref_qd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                          double *const y[4], double *bound)
{
    size_t unbounded = 0;
    for (size_t i = 0; i < m; i++) {
        double yi[4];
        unbounded += qd_row(n, A + i, lda, x, 1, c ? c + i : NULL, yi, bound + i);
        for (int k = 0; k < 4; k++) y[k][i] = yi[k];
    }
    return unbounded;
}

static size_t ref_d5_row(size_t n, const double *a, size_t inca, const double *const x[4], size_t incx,
                         const double *c, double y[5], double *bound)
{
    return d5_row(n, a, inca, x, incx, c, y, bound);
}

static size_t ref_d5_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                          double *const y[5], double *bound)
{
    size_t unbounded = 0;
    for (size_t i = 0; i < m; i++) {
        double yi[5];
        unbounded += d5_row(n, A + i, lda, x, 1, c ? c + i : NULL, yi, bound + i);
        for (int k = 0; k < 5; k++) y[k][i] = yi[k];
    }
    return unbounded;
}

static const vijp_dd_kernels ref_set = {"ref",      ref_row,     ref_gemv,   ref_td_row, ref_td_gemv,
                                        ref_qd_row, ref_qd_gemv, ref_d5_row, ref_d5_gemv};
#ifndef VIJP_GENERIC
extern const vijp_dd_kernels vijp_dd_avx2, vijp_dd_avx512;
#endif

/* ---- Which set ---- */

static const vijp_dd_kernels *sets[VIJP_DD_SET_COUNT], *active;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The sets the kernel table found on this CPU; the active one follows the
 * table's choice (vijp_kernels_follow). */
static void choose(void)
{
    sets[0] = &ref_set;
#ifndef VIJP_GENERIC
    if (vijp_kernels_set(1, NULL)) sets[1] = &vijp_dd_avx2;
    if (vijp_kernels_set(2, NULL)) sets[2] = &vijp_dd_avx512;
#endif
    int have[3] = {1, sets[1] != NULL, sets[2] != NULL};
    active = sets[vijp_kernels_follow(have)];
}

const vijp_dd_kernels *vijp_dd_set(int i)
{
    pthread_once(&once, choose);
    return i >= 0 && i < VIJP_DD_SET_COUNT ? sets[i] : NULL;
}

const vijp_dd_kernels *vijp_dd_active(void)
{
    pthread_once(&once, choose);
    return active;
}

/* ---- Drivers ---- */

/* Whether every xl_j is within u|xh_j| (exactly: |xl|·2^53 is exact or
 * overflows, and then |xl| > u|xh| indeed), which the bound of a double-double
 * x assumes (bound.c, 5); TwoSum's outputs satisfy it.  NaN passes: its
 * output is NaN and unbounded anyway. */
static int normalised(size_t n, const double *xh, const double *xl, size_t incx)
{
    for (size_t j = 0; j < n; j++)
        if (fabs(xl[j * incx]) * 0x1p53 > fabs(xh[j * incx])) return 0;
    return 1;
}

/* The same for a triple-double x: |x1| <= u|x0| and |x2| <= u|x1| (bound.c, 10). */
static int normalised3(size_t n, const double *const x[3], size_t incx)
{
    return normalised(n, x[0], x[1], incx) && normalised(n, x[1], x[2], incx);
}

vijp_dd vijp_dd_dot(size_t n, const double *x, size_t incx, const double *y, size_t incy, double *bound)
{
    vijp_dd r;
    vijp_dd_active()->row(n, x, incx, y, NULL, incy, NULL, &r.hi, &r.lo, bound);
    return r;
}

vijp_dd vijp_dd_dot_ddx(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                        double *bound)
{
    vijp_dd r;
    vijp_dd_active()->row(n, a, inca, xh, xl, incx, NULL, &r.hi, &r.lo, bound);
    if (!normalised(n, xh, xl, incx)) *bound = INFINITY;
    return r;
}

vijp_td vijp_td_dot(size_t n, const double *x, size_t incx, const double *y, size_t incy, double *bound)
{
    vijp_td r;
    vijp_dd_active()->td_row(n, x, incx, y, NULL, incy, NULL, &r.hi, &r.mid, &r.lo, bound);
    return r;
}

vijp_td vijp_td_dot_ddx(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                        double *bound)
{
    vijp_td r;
    vijp_dd_active()->td_row(n, a, inca, xh, xl, incx, NULL, &r.hi, &r.mid, &r.lo, bound);
    if (!normalised(n, xh, xl, incx)) *bound = INFINITY;
    return r;
}

void vijp_qd_dot(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx, double y[4],
                 double *bound)
{
    vijp_dd_active()->qd_row(n, a, inca, x, incx, NULL, y, bound);
    if (!normalised3(n, x, incx)) *bound = INFINITY;
}

size_t vijp_qd_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda,
                       const double *const x[3], const double *c, double *const y[4], double *bound)
{
    size_t unbounded = k->qd_gemv(m, n, A, lda, x, c, y, bound);
    if (!normalised3(n, x, 1)) {
        for (size_t i = 0; i < m; i++) bound[i] = INFINITY;
        unbounded = m;
    }
    return unbounded;
}

size_t vijp_qd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                    double *const y[4], double *bound)
{
    return vijp_qd_gemv_in(vijp_dd_active(), m, n, A, lda, x, c, y, bound);
}

/* Four-part x: no check of the parts (bound.c, 11 assumes nothing of them). */
size_t vijp_d5_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda,
                       const double *const x[4], const double *c, double *const y[5], double *bound)
{
    return k->d5_gemv(m, n, A, lda, x, c, y, bound);
}

size_t vijp_d5_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                    double *const y[5], double *bound)
{
    return vijp_d5_gemv_in(vijp_dd_active(), m, n, A, lda, x, c, y, bound);
}

size_t vijp_td_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda, const double *xh,
                       const double *xl, const double *c, double *yh, double *ym, double *yl, double *bound)
{
    size_t unbounded = k->td_gemv(m, n, A, lda, xh, xl, c, yh, ym, yl, bound);
    if (xl && !normalised(n, xh, xl, 1)) {
        for (size_t i = 0; i < m; i++) bound[i] = INFINITY;
        unbounded = m;
    }
    return unbounded;
}

size_t vijp_td_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                    const double *c, double *yh, double *ym, double *yl, double *bound)
{
    return vijp_td_gemv_in(vijp_dd_active(), m, n, A, lda, xh, xl, c, yh, ym, yl, bound);
}

size_t vijp_dd_gemv_in(const vijp_dd_kernels *k, size_t m, size_t n, const double *A, size_t lda, const double *xh,
                       const double *xl, const double *c, double *yh, double *yl, double *bound)
{
    size_t unbounded = k->gemv(m, n, A, lda, xh, xl, c, yh, yl, bound);
    if (xl && !normalised(n, xh, xl, 1)) {
        for (size_t i = 0; i < m; i++) bound[i] = INFINITY;
        unbounded = m;
    }
    return unbounded;
}

/* Column by column: each column of C is one gemv, which keeps the per-output
 * operation order (and so the bits) of vijp_dd_gemv. */
size_t vijp_dd_gemm_in(const vijp_dd_kernels *k, size_t m, size_t n, size_t kk, const double *A, size_t lda,
                       const double *Bh, const double *Bl, size_t ldb, const double *c, double *Ch, double *Cl,
                       double *bound, size_t ldc)
{
    size_t unbounded = 0;
    for (size_t j = 0; j < n; j++)
        unbounded += vijp_dd_gemv_in(k, m, kk, A, lda, Bh + j * ldb, Bl ? Bl + j * ldb : NULL, c, Ch + j * ldc,
                                     Cl + j * ldc, bound + j * ldc);
    return unbounded;
}

size_t vijp_dd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                    const double *c, double *yh, double *yl, double *bound)
{
    return vijp_dd_gemv_in(vijp_dd_active(), m, n, A, lda, xh, xl, c, yh, yl, bound);
}

size_t vijp_dd_gemm(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *Bh, const double *Bl,
                    size_t ldb, const double *c, double *Ch, double *Cl, double *bound, size_t ldc)
{
    return vijp_dd_gemm_in(vijp_dd_active(), m, n, k, A, lda, Bh, Bl, ldb, c, Ch, Cl, bound, ldc);
}

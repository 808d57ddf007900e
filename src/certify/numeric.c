/* The numerical side of certification: LAPACK's SVD of J (DESIGN §4,
 * "numerical"): singular values, rank, cokernel dimension and basis. */
#include "vijp/certify.h"
#include "vijp/error.h"
#include "base/lapack.h"
#include "proof.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *vijp_verdict_name(vijp_verdict v)
{
    static const char *const names[] = {"certified-submersive", "not-submersive", "inconclusive"};
    return names[v];
}

void vijp_numeric_clear(vijp_numeric *a)
{
    free(a->sv);
    free(a->cokernel);
    memset(a, 0, sizeof *a);
}

/* σ_max, σ_min, κ, the rank tolerance, rank and cokernel dimension from sv. */
static void summarize(vijp_numeric *out, size_t m, size_t n)
{
    size_t r = m < n ? m : n;
    out->m = m, out->n = n;
    out->sigma_max = out->sv[0];
    out->sigma_min = m <= n ? out->sv[m - 1] : 0;
    out->condition = out->sigma_min > 0 ? out->sigma_max / out->sigma_min : INFINITY;
    out->rank_tol = (double)(m > n ? m : n) * 0x1p-53 * out->sigma_max;
    out->rank = 0;
    while (out->rank < r && out->sv[out->rank] > out->rank_tol) out->rank++;
    out->cokernel_dim = m - out->rank;
}

int vijp_numeric_analysis(const double *J, size_t m, size_t n, vijp_numeric *out, vijp_error *err)
{
    double *A = m && n ? vijp_alloc_unset(m * n * sizeof *A) : NULL;
    int rc = vijp_numeric_analysis_in(J, m, n, out, A, err);
    free(A);
    return rc;
}

int vijp_numeric_analysis_in(const double *J, size_t m, size_t n, vijp_numeric *out, double *A, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    if (m == 0 || n == 0) return vijp_fail(err, VIJP_EDIM, "a %zu × %zu Jacobian has nothing to certify", m, n);
    for (size_t i = 0; i < m * n; i++)
        if (!isfinite(J[i])) return vijp_fail(err, VIJP_EDOMAIN, "Jacobian entry %zu is %g", i, J[i]);
    size_t r = m < n ? m : n;
    out->sv = vijp_alloc_array(r, sizeof *out->sv);
    /* The singular values alone first (a third of the work of the vectors):
     * the vectors are needed only for a cokernel basis. */
    memcpy(A, J, m * n * sizeof *A);
    lapack_int info = vijp_lapack_dgesdd('N', m, n, A, out->sv, NULL, 1, NULL, 1);
    int rc = info ? vijp_fail(err, VIJP_EINVAL, "dgesdd failed to converge (info %d)", (int)info) : 0;
    if (!rc) summarize(out, m, n);
    if (!rc && out->cokernel_dim) {
        /* Wide or square: the economy SVD already has all m left vectors;
         * tall: the full U, whose last m − n columns span part of the
         * cokernel.  Values computed with vectors may differ from those
         * without in the last bits: everything is taken from this call. */
        char jobz = m <= n ? 'S' : 'A';
        size_t vtrows = m <= n ? r : n;
        double *U = vijp_alloc_array(m * m, sizeof *U), *VT = vijp_alloc_array(vtrows * n, sizeof *VT);
        memcpy(A, J, m * n * sizeof *A);
        info = vijp_lapack_dgesdd(jobz, m, n, A, out->sv, U, m, VT, vtrows);
        if (info) rc = vijp_fail(err, VIJP_EINVAL, "dgesdd failed to converge (info %d)", (int)info);
        else summarize(out, m, n);
        out->cokernel = vijp_alloc_array((out->cokernel_dim ? out->cokernel_dim : 1) * m, sizeof *out->cokernel);
        if (!rc) memcpy(out->cokernel, U + out->rank * m, out->cokernel_dim * m * sizeof *U);
        free(U), free(VT);
    }
    if (!rc && !out->cokernel) out->cokernel = vijp_alloc_array(m, sizeof *out->cokernel); /* never NULL */
    if (rc) vijp_numeric_clear(out);
    return rc;
}

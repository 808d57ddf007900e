/* Certifying a layer at a point: its Jacobian's enclosure, the certificate,
 * and its structural declarations checked against both. */
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include "oracles/oracles.h"
#include "base/lapack.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vijp_layer_jacobian_enclosure(const vijp_layer *L, const double *theta, const double *x, double *mid,
                                  double *rad, vijp_error *err)
{
    size_t m = L->out, n = L->in;
    for (size_t k = 0; k < n; k++)
        if (!isfinite(x[k])) return vijp_fail(err, VIJP_EDOMAIN, "input %zu is %g", k, x[k]);
    if (vijp_deriv_enclose_of(L->type)) { /* elementwise: J = diag(f′(x_k)) */
        if (m != n) return vijp_fail(err, VIJP_EDIM, "%s layer: elementwise but %zu → %zu", L->type->name, n, m);
        memset(mid, 0, m * n * sizeof *mid);
        memset(rad, 0, m * n * sizeof *rad);
        mpfi_t xi, d;
        mpfi_init2(xi, 128), mpfi_init2(d, 128);
        int rc = 0;
        for (size_t k = 0; k < n && !rc; k++) {
            mpfi_set_d(xi, x[k]);
            vijp_deriv_enclose_of(L->type)(L, theta, d, xi);
            if (mpfi_nan_p(d) || mpfi_inf_p(d)) {
                rc = vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: f′(%g) cannot be enclosed", L->type->name, x[k]);
                break;
            }
            vo_interval_mid_rad(d, &mid[k + k * m], &rad[k + k * m]);
        }
        mpfi_clear(xi), mpfi_clear(d);
        return rc;
    }
    if (L->type->jacobian_enclose) {
        int rc = L->type->jacobian_enclose(L, theta, x, mid, rad);
        return rc ? vijp_fail(err, rc, "%s layer: its Jacobian cannot be enclosed at this point", L->type->name) : 0;
    }
    if (L->type->jacobian_exact) {
        vijp_format fd;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        vijp_mat th = {.rows = L->type->param_count(L), .cols = 1, .fmt = &fd, .d = (double *)theta};
        vijp_mat xm = {.rows = n, .cols = 1, .fmt = &fd, .d = (double *)x};
        vijp_mat J = {.rows = m, .cols = n, .fmt = &fd, .d = mid};
        int rc = vijp_layer_jacobian(L, &th, &xm, &J, err);
        if (!rc) memset(rad, 0, m * n * sizeof *rad);
        return rc;
    }
    return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: its Jacobian can be neither taken as exact nor enclosed",
                     L->type->name);
}

/* Elementwise layers: J = diag(f′(x_k)) exactly, so σ_min(J) = min_k |f′(x_k)|
 * >= min_k mig(enclosure_k), the smallest magnitude in each MPFI enclosure:
 * a direct proof, sharper than Weyl's ‖rad‖_F (which one unit with f′ ≈ 1
 * would make ~1e-16 for all).  An enclosure that is exactly {0} proves a zero
 * row.  The numerical analysis still runs, on the double midpoints. */
static int certify_diagonal(const vijp_layer *L, const double *theta, const double *x, const double *mid, const double *rad,
                            const vijp_certify_opts *o, vijp_certificate *out, vijp_error *err)
{
    size_t n = L->in;
    int rc = vijp_certify_matrix(mid, rad, n, n, o, out, err); /* for the numbers and the zero-row structure */
    if (rc || (out->verdict == VIJP_NOT_SUBMERSIVE && out->cokernel_proven)) return rc;
    mpfi_t xi, d;
    mpfr_t mg, lo;
    mpfi_init2(xi, 128), mpfi_init2(d, 128), mpfr_init2(mg, 128), mpfr_init2(lo, 128);
    mpfr_set_inf(lo, 1);
    size_t zeros = 0;
    for (size_t k = 0; k < n; k++) {
        mpfi_set_d(xi, x[k]);
        vijp_deriv_enclose_of(L->type)(L, theta, d, xi);
        if (mpfi_has_zero(d)) {
            zeros += mpfi_is_zero(d);
            mpfr_set_zero(lo, 1);
            continue;
        }
        mpfi_mig(mg, d);
        if (mpfr_cmp(mg, lo) < 0) mpfr_set(lo, mg, MPFR_RNDD);
    }
    double s = mpfr_get_d(lo, MPFR_RNDD);
    mpfi_clear(xi), mpfi_clear(d), mpfr_clear(mg), mpfr_clear(lo);
    if (s > 0) {
        out->verdict = VIJP_CERTIFIED_SUBMERSIVE;
        out->s = s;
        out->prec = 128;
        out->cokernel_dim = 0;
        out->reason[0] = 0;
        snprintf(out->method, sizeof out->method, "certified-mpfr:128");
    } else if (zeros) {
        out->verdict = VIJP_NOT_SUBMERSIVE;
        out->cokernel_dim = zeros, out->cokernel_proven = 1;
        snprintf(out->method, sizeof out->method, "structure");
        snprintf(out->reason, sizeof out->reason, "structure: f′ is exactly 0 at %zu units", zeros);
    }
    return 0;
}

/* A layer whose cokernel contains a known k-dimensional space at every point
 * (LayerNorm's span{1, ŷ}: J·1 = J·ŷ = 0 exactly): its cokernel is exactly
 * k-dimensional once rank J >= m − k is proven, which the certificate of
 * Pᵀ J does for P the first m − k left singular vectors of the midpoint. */
static int certify_known_cokernel(const vijp_layer *L, const double *theta, const double *x, const double *mid,
                                  const double *rad, const vijp_certify_opts *o, vijp_certificate *out, vijp_error *err)
{
    size_t m = L->out, n = L->in, k = L->type->analytic_cokernel(L, theta, x);
    if (k == 0 || k > m) return 0;
    double *A = vijp_alloc_array(m * n, sizeof *A), *U = vijp_alloc_array(m * m, sizeof *U), *sv = vijp_alloc_array((m < n ? m : n), sizeof *sv);
    int rc = 0;
    if (!rc) {
        memcpy(A, mid, m * n * sizeof *A);
        if (vijp_lapack_dgesvd('A', 'N', m, n, A, sv, U, m, NULL, 1))
            rc = vijp_fail(err, VIJP_EINVAL, "%s layer: SVD of the Jacobian failed", L->type->name);
    }
    int proven = 0;
    double s = NAN;
    if (!rc) rc = vijp_certify_rank_at_least(mid, rad, m, n, U, m - k, o, &proven, &s, err);
    if (!rc && proven) {
        out->verdict = VIJP_NOT_SUBMERSIVE;
        out->cokernel_dim = k, out->cokernel_proven = 1;
        snprintf(out->method, sizeof out->method, "structure");
        snprintf(out->reason, sizeof out->reason,
                 "cokernel of dimension %zu: %zu known exact null directions, and rank >= %zu proven (sigma_min > %.3g)", k, k,
                 m - k, s);
    }
    free(A), free(U), free(sv);
    return rc;
}

/* The point and the parameters are finite (checked first): a Jacobian that
 * is not (affine:exp's exp(S) past 709) is the layer's arithmetic leaving
 * double's range, a failed computation rather than bad input. */
static int finite_jacobian(const vijp_layer *L, const double *J, size_t len, vijp_error *err)
{
    for (size_t i = 0; i < len; i++)
        if (!isfinite(J[i]))
            return vijp_fail(err, VIJP_ERANGE, "%s layer: Jacobian entry %zu is %s in double although the point and the "
                             "parameters are finite (the layer's values left double's range)", L->type->name, i,
                             isnan(J[i]) ? "NaN" : "infinite");
    return 0;
}

int vijp_certify_layer(const vijp_layer *L, const double *theta, const double *x, const vijp_certify_opts *o,
                       vijp_certificate *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    out->s = NAN;
    size_t m = L->out, n = L->in, P = L->type->param_count(L);
    if (m == 0 || n == 0) return vijp_fail(err, VIJP_EDIM, "%s layer is %zu → %zu: nothing to certify", L->type->name, n, m);
    for (size_t k = 0; k < P; k++)
        if (!isfinite(theta[k])) return vijp_fail(err, VIJP_EDOMAIN, "%s layer: parameter %zu is %g", L->type->name, k, theta[k]);
    double *mid = vijp_alloc_array(m * n, sizeof *mid), *rad = vijp_alloc_array(m * n, sizeof *rad);
    int rc = vijp_layer_jacobian_enclosure(L, theta, x, mid, rad, err);
    if (!rc) rc = finite_jacobian(L, mid, m * n, err);
    if (rc == VIJP_EUNSUPPORTED) {
        /* Say so, and give LAPACK's view of the Jacobian computed with the
         * MPFR operator at 128 bits and rounded once to double: within u/2 of
         * J entrywise (plus ~n·2^-128), so singular values that are exactly 0
         * stay below the rank tolerance max(m,n)·u·σ_max (Weyl), which the
         * double operator's own O(n·u) errors need not. */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "no enclosure");
        vijp_format fd, fh;
        vijp_format_fixed(&fd, VIJP_DOUBLE);
        if ((rc = vijp_format_mpfr(&fh, 128, err))) goto out;
        vijp_mat th = {.rows = P, .cols = 1, .fmt = &fd, .d = (double *)theta};
        vijp_mat xm = {.rows = n, .cols = 1, .fmt = &fd, .d = (double *)x};
        vijp_mat thh, xh, Jh;
        vijp_mat_init(&thh, P, 1, &fh), vijp_mat_init(&xh, n, 1, &fh), vijp_mat_init(&Jh, m, n, &fh);
        vijp_mat_convert(&thh, &th), vijp_mat_convert(&xh, &xm);
        rc = vijp_layer_jacobian(L, &thh, &xh, &Jh, err);
        for (size_t i = 0; !rc && i < m * n; i++) mid[i] = vijp_mat_get_d(&Jh, i);
        vijp_mat_clear(&thh), vijp_mat_clear(&xh), vijp_mat_clear(&Jh);
        if (!rc) rc = finite_jacobian(L, mid, m * n, err);
        if (!rc) rc = vijp_numeric_analysis(mid, m, n, &out->num, err);
        if (!rc) {
            out->verdict = VIJP_INCONCLUSIVE;
            out->cokernel_dim = out->num.cokernel_dim; /* numerical, not proven */
            snprintf(out->method, sizeof out->method, "numerical");
            snprintf(out->reason, sizeof out->reason, "%s", why);
        }
    } else if (!rc && vijp_deriv_enclose_of(L->type)) {
        rc = certify_diagonal(L, theta, x, mid, rad, o, out, err);
    } else if (!rc) {
        rc = vijp_certify_matrix(mid, rad, m, n, o, out, err);
        if (!rc && L->type->analytic_cokernel) rc = certify_known_cokernel(L, theta, x, mid, rad, o, out, err);
    }
out:
    free(mid), free(rad);
    if (rc) {
        vijp_certificate_clear(out);
        return rc;
    }

    /* The declarations against the numbers. */
    unsigned d = L->type->declare(L);
    if ((d & VIJP_DECL_SUBMERSIVE) && out->verdict == VIJP_NOT_SUBMERSIVE && out->cokernel_proven) {
        rc = vijp_fail(err, VIJP_EDECLARATION, "%s layer (%zu → %zu) declares itself submersive, but %s", L->type->name,
                       n, m, out->reason);
        vijp_certificate_clear(out);
        return rc;
    }
    if ((d & VIJP_DECL_NEVER_SUBMERSIVE) && out->verdict == VIJP_CERTIFIED_SUBMERSIVE) {
        rc = vijp_fail(err, VIJP_EDECLARATION, "%s layer (%zu → %zu) declares itself never submersive, but %s proves σ_min > %g",
                       L->type->name, n, m, out->method, out->s);
        vijp_certificate_clear(out);
        return rc;
    }
    if (d & VIJP_DECL_SUBMERSIVE) {
        if (out->verdict != VIJP_CERTIFIED_SUBMERSIVE) /* keep what the numbers said, for the report */
            snprintf(out->reason, sizeof out->reason, "declared submersive; here %s (%s)",
                     out->verdict == VIJP_NOT_SUBMERSIVE ? "numerically degenerate" : "no certificate", out->method);
        out->verdict = VIJP_CERTIFIED_SUBMERSIVE;
        out->cokernel_dim = 0;
        out->cokernel_proven = 1;
        snprintf(out->method, sizeof out->method, "analytic");
    }
    if (d & VIJP_DECL_NEVER_SUBMERSIVE) {
        out->verdict = VIJP_NOT_SUBMERSIVE;
        snprintf(out->method, sizeof out->method, "analytic");
    }
    return 0;
}

/* Reference drift partials (kernels.h: vijp_kdrift and its bound), one
 * entry at a time, in order. */
#include "kernels/kernels.h"
#include "vijp/metrics.h"
#include <math.h>

/* |d| / ulp_f(r), ulp_f(r) = 2^max(E(r) − prec, emin − 1) with r = m·2^E,
 * 1/2 <= |m| < 1; ldexp scales exactly (the result is a normal number or
 * ±∞: |d| is a multiple of the double spacing at r, >= 2^(prec − 53) ulps). */
static double ulps_of(double d, double r, long prec, long emin)
{
    if (d == 0) return 0;
    long e = emin - 1;
    if (r != 0 && isfinite(r) && ilogb(r) + 1 - prec > e) e = ilogb(r) + 1 - prec;
    return ldexp(fabs(d), (int)-e);
}

void vijp_kernels_ref_drift_d(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out);
void vijp_kernels_ref_drift_d(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out)
{
    vijp_kdrift p = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - ref[i];
        p.aa += a[i] * a[i], p.rr += ref[i] * ref[i], p.dd += d * d, p.dr += d * ref[i];
        p.max_ulps = vijp_max_nan(p.max_ulps, ulps_of(d, ref[i], prec, emin));
    }
    *out = p;
}

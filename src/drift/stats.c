/* Statistics of error-versus-depth curves: growth fit, safe depth, bits needed. */
#include "vijp/drift.h"
#include <math.h>

double vijp_growth_fit(const vijp_xnum *e, size_t n, double ceiling, double *intercept)
{
    /* Ordinary least squares on (i, log10 e_i), i = 1..n, accumulated around
     * running means (Welford) so that long curves lose nothing to cancellation. */
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(e[i].m > 0 && vijp_xnum_isfinite(e[i]) && vijp_xnum_le(e[i], vijp_xnum_of(ceiling)))) continue;
        double x = (double)(i + 1), y = vijp_xnum_log10(e[i]), dx = x - mx;
        k++;
        mx += dx / (double)k;
        my += (y - my) / (double)k;
        sxx += dx * (x - mx);
        sxy += dx * (y - my);
    }
    if (k < 4 || sxx == 0) {
        if (intercept) *intercept = NAN;
        return NAN;
    }
    double slope = sxy / sxx;
    if (intercept) *intercept = my - slope * mx;
    return slope;
}

size_t vijp_safe_depth(const vijp_xnum *g, const vijp_xnum *theta, const int *has_param, size_t n, vijp_xnum tol)
{
    size_t d = 0;
    for (; d < n; d++) {
        if (!vijp_xnum_le(g[d], tol)) break;
        if (theta && (!has_param || has_param[d]) && !vijp_xnum_le(theta[d], tol)) break;
    }
    return d;
}

double vijp_bits_needed(const vijp_xnum *e, size_t n, long prec, vijp_xnum tol, int *extrapolated)
{
    int ignored;
    if (!extrapolated) extrapolated = &ignored; /* NULL: not asked for */
    vijp_xnum worst = vijp_xnum_of(0);
    *extrapolated = 0;
    for (size_t i = 0; i < n; i++)
        worst = vijp_xnum_max_nan(worst, e[i]); /* NaN and Inf stick */
    if (!vijp_xnum_le(worst, vijp_xnum_of(VIJP_FIT_CEILING))) {
        double a, r = vijp_growth_fit(e, n, VIJP_FIT_CEILING, &a);
        if (isnan(r)) return NAN;
        *extrapolated = 1;
        double at_n = a + r * (double)n, fitted_max = fmax(at_n, a + r); /* the fitted line's largest value */
        return fmax(2, ceil((double)prec + (fitted_max - vijp_xnum_log10(tol)) * log2(10.0)));
    }
    if (worst.m == 0) return 2;
    return fmax(2, ceil((double)prec + vijp_xnum_log2(vijp_xnum_div(worst, tol))));
}

/* FP8 storage: about 2.5 u, rounded up to one digit, as bfloat16's 1e-2 is
 * 2.56 u (u = 2^-8): e4m3 2.56·2^-4 = 0.16 gives 2e-1, e5m2 2.56·2^-3 =
 * 0.32 gives 3e-1.  Backprop's own error stays near them (measured on
 * dense:32 + leaky ReLU(0.9), depth 16: e4m3+binary32 0.06 to 0.11 per
 * layer, e5m2+binary32 0.13 to 0.31). */
static double fp8_tol(const vijp_format *f) { return vijp_format_value_prec(f) == 4 ? 2e-1 : 3e-1; }

/* MX storage (format.h): 2.56 u rounded up to one digit, u = 2^-p of the
 * element: E4M3 and E2M3 (p = 4) 0.16 gives 2e-1, E5M2 and E3M2 (p = 3)
 * 0.32 gives 4e-1 (FP8's e5m2 takes 3e-1, to nearest, which its measured
 * errors stay under; the MX ones reach 0.34), E2M1 (p = 2) 0.64 gives 7e-1.  A block adds
 * two errors FP8 lacks, each within a value's 2u: the specification's scale
 * clips a block's largest values to the largest element, by at most
 * 1 − max/2^(emax_elem+1) (E4M3 1 − 448/512 = 2u, E2M3 1 − 7.5/8, E5M2,
 * E3M2, E2M1 u), and values far below the block's largest fall into the
 * element's subnormals (absolute error within half the smallest subnormal
 * times the scale, below u of the largest: relative to the norm, not to
 * the value).  Measured (dense:32 + leaky ReLU(0.9), depth 16, backprop,
 * batch 4, seed 1): mxfp8 0.11 to 0.12, mxfp6 0.11 to 0.12, mxfp8e5m2 and
 * mxfp6e3m2 0.32 to 0.34, mxfp4 0.60 to 0.71; the ceil rule's larger
 * scales lose a bit of the largest values' (mxfp4:ceil 1.0 to 1.3). */
static double mx_tol(const vijp_format *f) { return f->store_prec >= 4 ? 2e-1 : f->store_prec == 3 ? 4e-1 : 7e-1; }

/* Tensor-scaled storage (format.h), derived as MX's: 2.56 u of the element
 * rounded up to one digit, u of the narrowest stored values: NVFP4's E2M1
 * (p = 2) 0.64 gives 7e-1; fp8+binary32's E5M2 gradients (p = 3, its
 * forward E4M3 values p = 4) 0.32 gives 4e-1.  The scales add no error of
 * their own to the largest values (amax maps to the element's largest
 * value, up to binary32 roundings, and no block clips: an E4M3 block scale
 * rounded down leaves bamax/T_b up to 6·(1 + 2^-4), which saturates to 6,
 * within 2u); values far below amax lose bits to the elements' subnormals,
 * relative to the norm as for MX.  Measured (dense:32 + leaky ReLU(0.9),
 * depth 16, backprop, medians over 3 seeds): fp8+binary32 0.06 to 0.21,
 * fp8:pow2+binary32 0.08 to 0.25, nvfp4+binary32 0.22 to 0.38. */
static double scaled_tol(const vijp_format *f) { return vijp_format_value_prec(f) >= 3 ? 4e-1 : 7e-1; }

static double fixed_tol(const vijp_format *f)
{
    switch (f->kind) {
    case VIJP_BFLOAT16:
    case VIJP_BINARY16: return 1e-2;
    case VIJP_BINARY32: return 1e-4;
    case VIJP_DOUBLE: return 1e-10;
    case VIJP_E4M3:
    case VIJP_E5M2: return fp8_tol(f);
    case VIJP_MIXED: /* as its storage (tf32: operands) */
        if (f->mx_block) return mx_tol(f);
        if (f->tensor_scaled) return scaled_tol(f);
        return vijp_format_value_prec(f) <= 4 ? fp8_tol(f) : vijp_format_value_prec(f) <= 11 ? 1e-2 : 1e-4;
    default: return 0;
    }
}

vijp_xnum vijp_drift_default_tol(const vijp_format *f)
{
    double t = fixed_tol(f);
    return t ? vijp_xnum_of(t) : vijp_xnum_2exp(1, -(long)(f->prec / 2));
}

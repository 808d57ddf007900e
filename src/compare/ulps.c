/* The two measures every comparison of the module rests on, below both of
 * its paths (metrics.c, the MPFR one, and fast.c): the distance of one
 * entry in units in the last place of a format, and the precision at
 * which differences are formed. */
#include "vijp/metrics.h"
#include <math.h>

/* |d| / ulp_f(r) for one entry (d = a − r already formed exactly enough),
 * at any size (vijp/xnum.h). */
vijp_xnum vijp_ulps_of(mpfr_srcptr d, mpfr_srcptr r, const vijp_format *f, mpfr_ptr t)
{
    if (mpfr_zero_p(d)) return vijp_xnum_of(0);
    if (mpfr_nan_p(d)) return vijp_xnum_of(NAN);
    if (mpfr_inf_p(d)) return vijp_xnum_of(INFINITY);
    mpfr_exp_t e;
    if (f->kind == VIJP_MPFR) {
        if (mpfr_zero_p(r)) return vijp_xnum_of(INFINITY);
        e = mpfr_get_exp(r) - f->prec;
    } else { /* ulps of the stored values (mixed formats: the storage format's) */
        e = mpfr_zero_p(r) ? f->store_emin - 1 : mpfr_get_exp(r) - f->store_prec;
        if (e < f->store_emin - 1) e = f->store_emin - 1;
    }
    /* |d|·2^-e rounded up to a double.  Rounding to 53 bits does not see a
     * power-of-two scale, so where the result is a normal double it is |d|'s
     * significand rounded away from zero, scaled: no MPFR copy of d (this
     * runs once per compared entry: 16.8M times per comparison at width 256). */
    long ex;
    double mant = fabs(mpfr_get_d_2exp(&ex, d, MPFR_RNDA)); /* in [1/2, 1] */
    long E = ex - (long)e;
    if (E > -1021 && E < 1024) return vijp_xnum_of(ldexp(mant, (int)E));
    mpfr_abs(t, d, MPFR_RNDN);
    mpfr_mul_2si(t, t, -e, MPFR_RNDN); /* exact: a power-of-two scaling */
    return vijp_xnum_of_mpfr(t, MPFR_RNDU);
}

/* 2P + 64 bits resolve any difference that matters in format f (P bits),
 * whatever the reference's own precision: rounding a and ref there moves
 * the metrics by 2^-(2P+64) relative, far below one unit roundoff 2^-P. */
mpfr_prec_t vijp_compare_prec(const vijp_format *f)
{
    return 2 * f->prec + 64 > 128 ? 2 * f->prec + 64 : 128;
}


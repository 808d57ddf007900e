#include "vijp/metrics.h"
#include <math.h>

static mpfr_prec_t metric_prec(const vijp_mat *a, const vijp_mat *ref)
{
    mpfr_prec_t p = ref->fmt->prec > 2 * a->fmt->prec ? ref->fmt->prec : 2 * a->fmt->prec;
    return p < 128 ? 128 : p;
}

static void entry(mpfr_t r, const vijp_mat *a, size_t i)
{
    if (a->d) mpfr_set_d(r, a->d[i], MPFR_RNDN);
    else mpfr_set(r, a->m[i], MPFR_RNDN);
}

double vijp_rel_err(const vijp_mat *a, const vijp_mat *ref)
{
    mpfr_t x, y, num, den;
    mpfr_inits2(metric_prec(a, ref), x, y, num, den, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (size_t i = 0, n = vijp_mat_len(ref); i < n; i++) {
        entry(x, a, i);
        entry(y, ref, i);
        mpfr_fma(den, y, y, den, MPFR_RNDN);
        mpfr_sub(x, x, y, MPFR_RNDN);
        mpfr_fma(num, x, x, num, MPFR_RNDN);
    }
    double r;
    if (mpfr_nan_p(num)) r = NAN;
    else if (mpfr_zero_p(num)) r = 0;
    else if (mpfr_zero_p(den)) r = INFINITY;
    else {
        mpfr_div(num, num, den, MPFR_RNDN);
        mpfr_sqrt(num, num, MPFR_RNDN);
        r = mpfr_get_d(num, MPFR_RNDN);
    }
    mpfr_clears(x, y, num, den, (mpfr_ptr)0);
    return r;
}

double vijp_norm(const vijp_mat *a)
{
    mpfr_t x, s;
    mpfr_inits2(a->fmt->prec < 128 ? 128 : a->fmt->prec, x, s, (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) entry(x, a, i), mpfr_fma(s, x, x, s, MPFR_RNDN);
    mpfr_sqrt(s, s, MPFR_RNDN);
    double r = mpfr_get_d(s, MPFR_RNDN);
    mpfr_clears(x, s, (mpfr_ptr)0);
    return r;
}

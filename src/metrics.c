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

/* |d| / ulp_f(r) for one entry (d = a − r already formed exactly enough). */
static double ulps_of(const mpfr_t d, const mpfr_t r, const vijp_format *f, mpfr_t t)
{
    if (mpfr_zero_p(d)) return 0;
    if (mpfr_nan_p(d)) return NAN;
    mpfr_exp_t e;
    if (f->kind == VIJP_MPFR) {
        if (mpfr_zero_p(r)) return INFINITY;
        e = mpfr_get_exp(r) - f->prec;
    } else { /* ulps of the stored values (mixed formats: the storage format's) */
        e = mpfr_zero_p(r) ? f->store_emin - 1 : mpfr_get_exp(r) - f->store_prec;
        if (e < f->store_emin - 1) e = f->store_emin - 1;
    }
    mpfr_abs(t, d, MPFR_RNDN);
    mpfr_mul_2si(t, t, -e, MPFR_RNDN); /* exact: a power-of-two scaling */
    return mpfr_get_d(t, MPFR_RNDU);
}

void vijp_compare(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m)
{
    /* 2P + 64 bits resolve any difference that matters in format f (P bits),
     * whatever the reference's own precision: rounding a and ref there moves
     * the metrics by 2^-(2P+64) relative, far below one unit roundoff 2^-P. */
    mpfr_prec_t p = 2 * f->prec + 64 > 128 ? 2 * f->prec + 64 : 128;
    mpfr_t x, y, d, t, na, nr, num, s, q;
    mpfr_inits2(p, x, y, d, t, na, nr, num, s, q, (mpfr_ptr)0);
    size_t n = vijp_mat_len(ref);
    m->ulps = 0;
    mpfr_set_zero(na, 1), mpfr_set_zero(nr, 1), mpfr_set_zero(num, 1);
    for (size_t i = 0; i < n; i++) {
        entry(x, a, i);
        entry(y, ref, i);
        mpfr_fma(na, x, x, na, MPFR_RNDN);
        mpfr_fma(nr, y, y, nr, MPFR_RNDN);
        mpfr_sub(d, x, y, MPFR_RNDN);
        mpfr_fma(num, d, d, num, MPFR_RNDN);
        double u = ulps_of(d, y, f, t);
        m->ulps = vijp_max_nan(m->ulps, u);
    }
    if (mpfr_nan_p(num)) m->rel = NAN;
    else if (mpfr_zero_p(num)) m->rel = 0;
    else if (mpfr_zero_p(nr)) m->rel = INFINITY;
    else {
        mpfr_div(t, num, nr, MPFR_RNDN);
        mpfr_sqrt(t, t, MPFR_RNDN);
        m->rel = mpfr_get_d(t, MPFR_RNDN);
    }
    if (mpfr_nan_p(na) || mpfr_inf_p(na)) m->angle_deg = NAN;
    else if (mpfr_zero_p(na) || mpfr_zero_p(nr)) m->angle_deg = mpfr_zero_p(na) && mpfr_zero_p(nr) ? 0 : NAN;
    else {
        mpfr_rec_sqrt(na, na, MPFR_RNDN); /* 1/‖a‖, 1/‖ref‖: multiply, do not divide, per entry */
        mpfr_rec_sqrt(nr, nr, MPFR_RNDN);
        mpfr_set_zero(s, 1), mpfr_set_zero(q, 1); /* ‖â − r̂‖², ‖â + r̂‖² */
        for (size_t i = 0; i < n; i++) {
            entry(x, a, i);
            entry(y, ref, i);
            mpfr_mul(x, x, na, MPFR_RNDN);
            mpfr_mul(y, y, nr, MPFR_RNDN);
            mpfr_sub(d, x, y, MPFR_RNDN);
            mpfr_fma(s, d, d, s, MPFR_RNDN);
            mpfr_add(d, x, y, MPFR_RNDN);
            mpfr_fma(q, d, d, q, MPFR_RNDN);
        }
        mpfr_sqrt(s, s, MPFR_RNDN);
        mpfr_sqrt(q, q, MPFR_RNDN);
        mpfr_atan2(t, s, q, MPFR_RNDN);
        mpfr_mul_ui(t, t, 360, MPFR_RNDN); /* 2·θ rad · 180/π */
        mpfr_const_pi(q, MPFR_RNDN);
        mpfr_div(t, t, q, MPFR_RNDN);
        m->angle_deg = mpfr_get_d(t, MPFR_RNDN);
    }
    mpfr_clears(x, y, d, t, na, nr, num, s, q, (mpfr_ptr)0);
}

/* Activation error terms and sample points (actterms.h). */
#include "actterms.h"
#include "layerfix.h"
#include "oracles/oracles.h"
#include <math.h>


static void sigma(mpfr_t s, const mpfr_t x) /* 1/(1 + e^−x) at the precision of s */
{
    mpfr_t e;
    mpfr_init2(e, mpfr_get_prec(s) + 16);
    mpfr_neg(e, x, MPFR_RNDN), mpfr_exp(e, e, MPFR_RNDN), mpfr_add_ui(e, e, 1, MPFR_RNDN);
    mpfr_ui_div(s, 1, e, MPFR_RNDN);
    mpfr_clear(e);
}

static void sigmoid_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_t a, b;
    mpfr_inits2(ORACLE_PREC, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN), sigma(t1, a);
    mpfr_neg(a, a, MPFR_RNDN), sigma(b, a);
    mpfr_mul(t1, t1, b, MPFR_RNDN), mpfr_set_zero(t2, 1);
    *kf = 7, *k1 = 12, *k2 = 0;
    mpfr_clears(a, b, (mpfr_ptr)0);
}

static void softplus_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_t a;
    mpfr_init2(a, ORACLE_PREC);
    mpfr_set_d(a, x, MPFR_RNDN), sigma(t1, a), mpfr_set_zero(t2, 1);
    *kf = 5, *k1 = 7, *k2 = 0;
    mpfr_clear(a);
}

static void tanh_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_set_d(t1, x, MPFR_RNDN), mpfr_sech(t1, t1, MPFR_RNDN), mpfr_sqr(t1, t1, MPFR_RNDN);
    mpfr_set_zero(t2, 1);
    *kf = 4, *k1 = 6, *k2 = 0; /* glibc tanh within 2 ulps; f′ within 6u (src/layers/tanh.c) */
}

static void silu_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_t a, b;
    mpfr_inits2(ORACLE_PREC, a, b, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN), sigma(t1, a);     /* σ(x) */
    mpfr_neg(a, a, MPFR_RNDN), sigma(b, a);         /* σ(−x) */
    mpfr_mul(t2, t1, b, MPFR_RNDN), mpfr_mul_d(t2, t2, x, MPFR_RNDN); /* x σ′(x) */
    *kf = 8, *k1 = 8, *k2 = 14;
    mpfr_clears(a, b, (mpfr_ptr)0);
}

static void gelu_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_t a, pi;
    mpfr_inits2(ORACLE_PREC, a, pi, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN), mpfr_neg(a, a, MPFR_RNDN);
    mpfr_set_ui(pi, 2, MPFR_RNDN), mpfr_sqrt(pi, pi, MPFR_RNDN), mpfr_div(a, a, pi, MPFR_RNDN);
    mpfr_erfc(t1, a, MPFR_RNDN), mpfr_div_2ui(t1, t1, 1, MPFR_RNDN);              /* Φ(x) */
    mpfr_sqr(a, a, MPFR_RNDN), mpfr_neg(a, a, MPFR_RNDN), mpfr_exp(t2, a, MPFR_RNDN);
    mpfr_const_pi(pi, MPFR_RNDN), mpfr_mul_2ui(pi, pi, 1, MPFR_RNDN), mpfr_sqrt(pi, pi, MPFR_RNDN);
    mpfr_div(t2, t2, pi, MPFR_RNDN), mpfr_mul_d(t2, t2, x, MPFR_RNDN);            /* x φ(x) */
    *kf = 16, *k1 = 17, *k2 = 10; /* src/layers/gelu.c */
    mpfr_clears(a, pi, (mpfr_ptr)0);
}

static void mish_terms(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x)
{
    mpfr_t a, sp;
    mpfr_inits2(ORACLE_PREC, a, sp, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN), mpfr_exp(sp, a, MPFR_RNDN), mpfr_log1p(sp, sp, MPFR_RNDN);
    mpfr_tanh(t1, sp, MPFR_RNDN);
    mpfr_sech(t2, sp, MPFR_RNDN), mpfr_sqr(t2, t2, MPFR_RNDN);
    sigma(a, a), mpfr_mul(t2, t2, a, MPFR_RNDN), mpfr_mul_d(t2, t2, x, MPFR_RNDN);
    double s = mpfr_get_d(sp, MPFR_RNDU);
    *kf = 10, *k1 = 10, *k2 = 18 + 20 * s;
    mpfr_clears(a, sp, (mpfr_ptr)0);
}

const act_terms acts[NACTS] = {
    {"sigmoid", sigmoid_terms, 0}, {"softplus", softplus_terms, 0}, {"tanh", tanh_terms, 0},
    {"silu", silu_terms, 1},       {"gelu", gelu_terms, 1},         {"mish", mish_terms, 1},
};

double oracle_deriv(const char *name, double x)
{
    vijp_format R;
    ck_assert(!vijp_format_mpfr(&R, ORACLE_PREC, NULL));
    mpfr_t xm, f, d;
    mpfr_inits2(ORACLE_PREC, xm, f, d, (mpfr_ptr)0);
    mpfr_set_d(xm, x, MPFR_RNDN);
    vo_activation_pair(name, f, d, xm, &R);
    double r = mpfr_get_d(d, MPFR_RNDN);
    mpfr_clears(xm, f, d, (mpfr_ptr)0);
    return r;
}

/* The zero of f′ near the one layerfix.c keeps away from, by bisection on
 * the sign of the 128-bit oracle, to adjacent doubles. */
double locate_zero(const char *name)
{
    double x0 = layerfix_deriv_zero(name), lo = x0 - 0.1, hi = x0 + 0.1;
    int slo = oracle_deriv(name, lo) > 0;
    ck_assert_msg(slo != (oracle_deriv(name, hi) > 0), "%s: f' does not change sign around %g", name, x0);
    while (nextafter(lo, hi) < hi) {
        double mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi) break;
        if ((oracle_deriv(name, mid) > 0) == slo) lo = mid;
        else hi = mid;
    }
    return lo;
}


/* The sample points of activation a, in sixths: N(0, 2²); U(−40, −30),
 * where GELU's Φ nears underflow and erfc's argument is large; U(−746,
 * −700), where e^x and σ(x) are subnormal while x·σ(x) and Mish are not;
 * ±2^U(−10, 10) (large and tiny |x|); and two next to the zero of f′
 * (x0 ± k ulps and x0 ± 2^U(−50, −1)) or, without one, more of ±2^U. */
double sample_point(vijp_rng *rng, long i, double x0)
{
    double u = vijp_rng_uniform(rng), s = vijp_rng_uniform(rng) < 0.5 ? -1 : 1;
    if (i % 6 == 3) return -40 + 10 * u;
    if (i % 6 == 1) return -746 + 46 * u;
    switch (i % 3) {
    case 0: return 2 * vijp_rng_normal(rng);
    case 2:
        if (!isnan(x0)) {
            if (i % 6 == 2) return x0 + (double)((i / 6) % 101 - 50) * ldexp(1, -53) * fabs(x0);
            return x0 + s * ldexp(1, -50 + (int)(49 * u));
        }
        /* fall through */
    default: return s * exp2(-10 + 20 * u);
    }
}


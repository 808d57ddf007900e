/* vijp_xnum: m·2^e with a long exponent (vijp/xnum.h).  The arithmetic is
 * on the 53-bit significands with frexp/ldexp, which are exact; only
 * products and quotients of significands round, once, to nearest. */
#include "vijp/xnum.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The canonical form of f·2^k, 1/2 <= |f| < 1 (or f zero, infinite, NaN). */
static vijp_xnum canonical(double f, long k)
{
    if (f == 0 || !isfinite(f)) return (vijp_xnum){f, 0};
    /* a normal double: f·2^k with DBL_MIN_EXP <= k <= DBL_MAX_EXP (frexp's
     * exponent of DBL_MIN is −1021, of DBL_MAX 1024) */
    if (k >= DBL_MIN_EXP && k <= DBL_MAX_EXP) return (vijp_xnum){ldexp(f, (int)k), 0};
    return (vijp_xnum){f, k};
}

/* x as f·2^k, 1/2 <= |f| < 1 (f = x.m for zero, infinities, NaN). */
static double split(vijp_xnum x, long *k)
{
    int kk = 0;
    double f = frexp(x.m, &kk);
    *k = (long)kk + x.e;
    return f;
}

vijp_xnum vijp_xnum_of(double x) { return vijp_xnum_2exp(x, 0); }

/* Whether double's own result of an operation on doubles a, b is the
 * answer although not a normal double: an input zero, infinite or NaN.
 * (A 0, subnormal or infinite product or quotient of finite nonzero inputs
 * is an underflow or overflow, which the exponent form avoids.) */
static int exact_special(vijp_xnum a, vijp_xnum b)
{
    return a.m == 0 || b.m == 0 || !isfinite(a.m) || !isfinite(b.m);
}

vijp_xnum vijp_xnum_2exp(double m, long e)
{
    vijp_xnum x = {m, e};
    long k;
    double f = split(x, &k);
    return canonical(f, k);
}

vijp_xnum vijp_xnum_of_mpfr(mpfr_srcptr x, mpfr_rnd_t rnd)
{
    if (mpfr_nan_p(x)) return (vijp_xnum){NAN, 0};
    if (mpfr_inf_p(x)) return (vijp_xnum){mpfr_sgn(x) > 0 ? INFINITY : -INFINITY, 0};
    if (mpfr_zero_p(x)) return (vijp_xnum){mpfr_signbit(x) ? -0.0 : 0.0, 0};
    long k;
    double f = mpfr_get_d_2exp(&k, x, rnd); /* 1/2 <= |f| <= 1: 1 where rounding carried */
    return vijp_xnum_2exp(f, k);
}

void vijp_xnum_get_mpfr(mpfr_ptr y, vijp_xnum x)
{
    mpfr_set_d(y, x.m, MPFR_RNDN);
    if (x.e && mpfr_number_p(y)) mpfr_mul_2si(y, y, x.e, MPFR_RNDN);
}

double vijp_xnum_double(vijp_xnum x)
{
    if (x.e == 0) return x.m;
    /* ldexp rounds correctly into the subnormals; clamp the exponent so the
     * int conversion stays defined (anything past ±4000 is 0 or Inf anyway). */
    long e = x.e < -4000 ? -4000 : x.e > 4000 ? 4000 : x.e;
    return ldexp(x.m, (int)e);
}

double vijp_xnum_log2(vijp_xnum x)
{
    if (x.e == 0) return log2(fabs(x.m)); /* as the double it is, to the last bit */
    long k;
    double f = split(x, &k);
    if (f == 0 || !isfinite(f)) return log2(fabs(f));
    return log2(fabs(f)) + (double)k;
}

double vijp_xnum_log10(vijp_xnum x)
{
    if (x.e == 0) return log10(fabs(x.m)); /* as the double it is, to the last bit */
    return vijp_xnum_log2(x) * 0.30102999566398119521; /* log10(2) */
}

vijp_xnum vijp_xnum_add(vijp_xnum a, vijp_xnum b)
{
    if (a.e == 0 && b.e == 0) {
        double t = a.m + b.m;
        /* a sum of doubles that is 0 or subnormal is exact (gradual
         * underflow): only an overflow needs the exponent form */
        if (isfinite(t) || exact_special(a, b)) return vijp_xnum_of(t); /* double's own sum */
    }
    long ka, kb;
    double fa = split(a, &ka), fb = split(b, &kb);
    if (fa == 0 || !isfinite(fa) || fb == 0 || !isfinite(fb)) return fa == 0 ? b : fb == 0 ? a : vijp_xnum_of(fa + fb);
    long k = ka > kb ? ka : kb; /* both scaled into [2^-1100, 1): exact unless far below the other's last bit */
    long da = ka - k < -1100 ? -1100 : ka - k, db = kb - k < -1100 ? -1100 : kb - k;
    return vijp_xnum_2exp(ldexp(fa, (int)da) + ldexp(fb, (int)db), k);
}

vijp_xnum vijp_xnum_mul(vijp_xnum a, vijp_xnum b)
{
    if (a.e == 0 && b.e == 0) {
        /* above DBL_MIN: a product that lands on DBL_MIN itself may have been
         * rounded on the subnormal grid (twice, in effect) */
        double p = a.m * b.m;
        if ((isfinite(p) && fabs(p) > DBL_MIN) || exact_special(a, b)) return vijp_xnum_of(p); /* double's own product */
    }
    long ka, kb;
    double fa = split(a, &ka), fb = split(b, &kb);
    return vijp_xnum_2exp(fa * fb, ka + kb);
}

vijp_xnum vijp_xnum_div(vijp_xnum a, vijp_xnum b)
{
    if (a.e == 0 && b.e == 0) {
        double q = a.m / b.m;
        if ((isfinite(q) && fabs(q) > DBL_MIN) || exact_special(a, b)) return vijp_xnum_of(q); /* a/0 as double's */
    }
    long ka, kb;
    double fa = split(a, &ka), fb = split(b, &kb);
    if (fb == 0 || !isfinite(fb) || !isfinite(fa)) return vijp_xnum_of(fa / fb);
    return vijp_xnum_2exp(fa / fb, ka - kb);
}

int vijp_xnum_cmp(vijp_xnum a, vijp_xnum b)
{
    if (isnan(a.m) || isnan(b.m)) return 2;
    if (a.e == 0 && b.e == 0) return (a.m > b.m) - (a.m < b.m);
    int sa = (a.m > 0) - (a.m < 0), sb = (b.m > 0) - (b.m < 0);
    if (sa != sb) return (sa > sb) - (sa < sb);
    if (sa == 0) return 0;
    if (isinf(a.m) || isinf(b.m)) return (a.m > b.m) - (a.m < b.m); /* same sign: the infinite one is larger */
    long ka, kb;
    double fa = split(a, &ka), fb = split(b, &kb);
    int mag = ka != kb ? (ka > kb) - (ka < kb) : (fabs(fa) > fabs(fb)) - (fabs(fa) < fabs(fb));
    return sa > 0 ? mag : -mag;
}

vijp_xnum vijp_xnum_max_nan(vijp_xnum a, vijp_xnum b)
{
    if (isnan(a.m)) return a;
    if (isnan(b.m)) return b;
    return vijp_xnum_cmp(b, a) > 0 ? b : a;
}

/* fmt's conversion as MPFR's: "%.3e" → "%.3Re" (flags, width and precision
 * kept; one conversion, which the callers' formats always have). */
static int mpfr_format(char *out, size_t size, const char *fmt)
{
    const char *p = strchr(fmt, '%');
    while (p && p[1] == '%') p = strchr(p + 2, '%');
    if (!p) return -1;
    size_t n = strspn(p + 1, "-+ #0123456789.") + 1;
    char conv = p[n];
    if (!strchr("eEfFgGaA", conv) || (size_t)(p - fmt) + n + strlen(p + n) + 2 > size) return -1;
    memcpy(out, fmt, (size_t)(p - fmt) + n);
    out[(p - fmt) + n] = 'R';
    strcpy(out + (p - fmt) + n + 1, p + n);
    return 0;
}

int vijp_xnum_snprintf(char *buf, size_t size, const char *fmt, vijp_xnum x)
{
    char mfmt[64];
    if (x.e == 0 || mpfr_format(mfmt, sizeof mfmt, fmt)) return snprintf(buf, size, fmt, vijp_xnum_double(x));
    mpfr_t y;
    mpfr_init2(y, 53);
    vijp_xnum_get_mpfr(y, x);
    int n = mpfr_snprintf(buf, size, mfmt, y);
    mpfr_clear(y);
    return n;
}

int vijp_xnum_parse(const char *s, vijp_xnum *x, char **end)
{
    mpfr_t y;
    mpfr_init2(y, 53);
    char *e = NULL;
    /* MPFR's exponent range is far wider than any decimal a file holds, and
     * mpfr_strtofr rounds correctly: 17 digits read back to the 53 bits written. */
    mpfr_strtofr(y, s, &e, 10, MPFR_RNDN);
    int bad = e == s;
    if (!bad) *x = vijp_xnum_of_mpfr(y, MPFR_RNDN);
    if (end) *end = e;
    mpfr_clear(y);
    return bad ? -1 : 0;
}

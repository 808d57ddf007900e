/* The result helpers every layer check uses (impl.h): a failure, a skip, a
 * note, the method and its source, and the worst element of a comparison,
 * its numbers kept as check_num and printed at any size.
 * Below the checks themselves, which check_layer.c's registry calls. */
#include "impl.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static void vset(char *dst, size_t size, const char *fmt, va_list ap) { vsnprintf(dst, size, fmt, ap); }

void check_fail(vijp_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (r->status != VIJP_CHECK_FAILED) vset(r->detail, sizeof r->detail, fmt, ap); /* the first failure stands */
    va_end(ap);
    r->status = VIJP_CHECK_FAILED;
}

void check_skip(vijp_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
    r->status = VIJP_CHECK_SKIPPED;
}

void check_note(vijp_check_result *r, const char *fmt, ...)
{
    if (r->status != VIJP_CHECK_PASSED) return;
    va_list ap;
    va_start(ap, fmt);
    vset(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

void check_method(vijp_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(r->method, sizeof r->method, fmt, ap);
    va_end(ap);
}

void check_source(vijp_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(r->bound_source, sizeof r->bound_source, fmt, ap);
    va_end(ap);
}

void check_refused(vijp_check_result *r, const char *op, int rc, const vijp_error *err)
{
    check_fail(r, "%s failed (code %d): %s", op, rc, err && err->msg[0] ? err->msg : "no message");
}

/* a as a double: 0, a subnormal or inf past double's range. */
static double num_d(check_num a)
{
    if (a.e == 0 || a.m == 0 || !isfinite(a.m)) return a.m;
    return ldexp(a.m, (int)(a.e < -100000 ? -100000 : a.e > 100000 ? 100000 : a.e));
}

void check_num_text(char *buf, size_t size, check_num a)
{
    if (a.e == 0 || a.m == 0 || !isfinite(a.m)) {
        snprintf(buf, size, "%.3g", a.m);
        return;
    }
    mpfr_t x;
    mpfr_init2(x, 53);
    mpfr_set_d(x, a.m, MPFR_RNDN), mpfr_mul_2si(x, x, a.e, MPFR_RNDN); /* exact: MPFR's exponent range is wide */
    mpfr_snprintf(buf, size, "%.3Rg", x);
    mpfr_clear(x);
}

/* a / b (b > 0 and finite, a finite): a.m / b.m where they share an
 * exponent (as before at ordinary precisions), else of the mantissas. */
static check_num num_div(check_num a, check_num b)
{
    if (a.e == b.e) {
        double q = a.m / b.m;
        if (a.e == 0 || isnormal(q)) return (check_num){q, 0};
    }
    int ka, kb;
    double fa = frexp(a.m, &ka), fb = frexp(b.m, &kb);
    return (check_num){fa / fb, (long)ka - kb + a.e - b.e};
}

void check_set_worst(vijp_check_result *r, check_num error, check_num bound, check_num ratio)
{
    r->error = num_d(error), r->bound = num_d(bound), r->ratio = num_d(ratio);
    check_num_text(r->error_text, sizeof r->error_text, error);
    check_num_text(r->bound_text, sizeof r->bound_text, bound);
    check_num_text(r->ratio_text, sizeof r->ratio_text, ratio);
}

void check_record(vijp_check_result *r, const char *what, size_t row, size_t col, check_num error, check_num bound)
{
    check_num q = {0, 0};
    if (error.m != 0 && !(bound.m > 0)) q.m = INFINITY;
    else if (error.m != 0 && isfinite(bound.m) && isfinite(error.m)) q = num_div(error, bound);
    else if (error.m != 0) q.m = error.m / bound.m; /* inf, NaN, or 0 against an infinite bound */
    if (isnan(q.m)) q = (check_num){INFINITY, 0}; /* NaN in a result is never within a bound */
    double ratio = num_d(q);
    if (!isnan(r->ratio) && ratio <= r->ratio) return;
    check_set_worst(r, error, bound, q);
    r->worst_row = row, r->worst_col = col;
    snprintf(r->worst_what, sizeof r->worst_what, "%s", what);
}

void check_compare(vijp_check_result *r, const char *what, const vijp_mat *a, const vijp_mat *b, const double *bound,
                   long ex)
{
    size_t rows = a->rows ? a->rows : 1;
    for (size_t i = 0; i < vijp_mat_len(a); i++)
        check_record(r, what, i % rows, i / rows, check_absdiff(a, i, b, i), (check_num){bound[i], ex});
}

/* The result helpers every layer check uses (impl.h): a failure, a skip, a
 * note, the method and its source, and the worst element of a comparison.
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

void check_record(vijp_check_result *r, const char *what, size_t row, size_t col, double error, double bound)
{
    double ratio = error == 0 ? 0 : bound > 0 ? error / bound : INFINITY;
    if (isnan(ratio)) ratio = INFINITY; /* NaN in a result is never within a bound */
    if (!isnan(r->ratio) && ratio <= r->ratio) return;
    r->ratio = ratio, r->error = error, r->bound = bound;
    r->worst_row = row, r->worst_col = col;
    snprintf(r->worst_what, sizeof r->worst_what, "%s", what);
}

void check_compare(vijp_check_result *r, const char *what, const vijp_mat *a, const vijp_mat *b, const double *bound)
{
    size_t rows = a->rows ? a->rows : 1;
    for (size_t i = 0; i < vijp_mat_len(a); i++) check_record(r, what, i % rows, i / rows, check_absdiff(a, i, b, i), bound[i]);
}

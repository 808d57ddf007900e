/* Zeros of f′ over [−R, R] by interval bisection, and where each format's
 * computed f′ underflows (see certify.h). */
#include "vijp/certify.h"
#include "fprime_bisect.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACT_BOX_BUDGET 200000

void vijp_activation_report_clear(vijp_activation_report *r)
{
    free(r->bad);
    memset(r, 0, sizeof *r);
}

static void push_bad(vijp_activation_report *r, double lo, double hi, size_t *cap)
{
    if (r->n_bad && lo <= r->bad[r->n_bad - 1].hi) { /* merge with the previous (boxes come left to right) */
        if (hi > r->bad[r->n_bad - 1].hi) r->bad[r->n_bad - 1].hi = hi;
        return;
    }
    if (r->n_bad == *cap) {
        r->bad = vijp_realloc(r->bad, (*cap = *cap ? 2 * *cap : 16) * sizeof *r->bad);
    }
    r->bad[r->n_bad++] = (vijp_span){lo, hi};
}

/* The layer's computed f′ at x in format f, through its own Jacobian operator
 * (one unit). */
static double computed_deriv(const vijp_layer *L1, const double *theta, const vijp_format *f, double x)
{
    vijp_mat xm, J, th;
    size_t P = L1->type->param_count(L1);
    vijp_mat_init(&xm, 1, 1, f), vijp_mat_init(&J, 1, 1, f), vijp_mat_init(&th, P, 1, f);
    vijp_mat_set_entry_d(&xm, 0, x); /* rounded to the format, as are the parameters */
    if (P) vijp_mat_set_d(&th, theta);
    double d = NAN;
    if (!vijp_layer_jacobian(L1, P ? &th : NULL, &xm, &J, NULL)) d = vijp_mat_get_d(&J, 0);
    vijp_mat_clear(&xm), vijp_mat_clear(&J), vijp_mat_clear(&th);
    return d;
}

/* Whether the exact f′(x) is nonzero (its enclosure at the point excludes 0):
 * a computed zero only counts as underflow where the truth is not zero. */
static int exact_nonzero(const vijp_layer *L, const double *theta, double x)
{
    mpfi_t xi, d;
    mpfi_init2(xi, 128), mpfi_init2(d, 128);
    mpfi_set_d(xi, x);
    vijp_deriv_enclose_of(L->type)(L, theta, d, xi);
    int nz = !mpfi_has_zero(d) && !mpfi_nan_p(d);
    mpfi_clear(xi), mpfi_clear(d);
    return nz;
}

/* Smallest |x| (either sign) on a geometric scan 2^-8 … 2^16 (8 points per
 * octave), refined by bisection, where pred(f′(x)) first holds while the
 * exact f′(x) is not zero. */
static double first_where(const vijp_layer *L1, const double *theta, const vijp_format *f, double big, int underflow)
{
    double best = INFINITY;
    for (int sign = -1; sign <= 1; sign += 2) {
        double prev = 0;
        for (int k = -64; k <= 128; k++) {
            double x = sign * ldexp(1.0 + (k & 7) / 8.0, k >> 3);
            double d = fabs(computed_deriv(L1, theta, f, x));
            int hit = (underflow ? d == 0 : d < ldexp(big, -(int)vijp_format_value_prec(f))) && exact_nonzero(L1, theta, x);
            if (!hit) {
                prev = x;
                continue;
            }
            double lo = prev, hi = x; /* refine between the last miss and this hit */
            for (int it = 0; it < 60; it++) {
                double midp = 0.5 * (lo + hi), dm = fabs(computed_deriv(L1, theta, f, midp));
                if ((underflow ? dm == 0 : dm < ldexp(big, -(int)vijp_format_value_prec(f))) && exact_nonzero(L1, theta, midp)) hi = midp;
                else lo = midp;
            }
            if (fabs(hi) < best) best = fabs(hi);
            break;
        }
    }
    return best;
}

/* Interval bisection of f′ over [−R, R] into out's bad pieces (certify.h):
 * every piece where f′ may vanish is kept, and so is every piece the budget
 * left unvisited (possibly bad; the search then is not complete). */
typedef struct {
    vijp_activation_report *out;
    size_t cap;
} zero_search;

static int search_spent(void *ctx)
{
    zero_search *z = ctx;
    return ++z->out->boxes > ACT_BOX_BUDGET;
}

static int search_visit(void *ctx, fprime_piece kind, double lo, double hi)
{
    zero_search *z = ctx;
    if (kind == FPRIME_UNVISITED) z->out->complete = 0;
    if (kind != FPRIME_NONZERO) push_bad(z->out, lo, hi, &z->cap);
    return 0; /* every piece of [−R, R] */
}

static void search_zeros(const vijp_layer *L, const double *theta, double R, double tol, vijp_activation_report *out)
{
    zero_search z = {out, 0};
    fprime_enclosure e;
    fprime_enclosure_init(&e, L, theta);
    fprime_bisect(&e, -R, R, tol, &(fprime_visitor){search_spent, search_visit, &z});
    fprime_enclosure_clear(&e);
}

/* The table: where each format's computed f′ underflows or becomes negligible. */
static void format_table(const vijp_layer *L, const double *theta, const vijp_format *formats, size_t n,
                         vijp_activation_report *out)
{
    vijp_layer L1 = *L; /* a one-unit view (parameters, if any, are per layer, not per unit) */
    L1.in = L1.out = 1;
    out->n_fmt = n;
    for (size_t k = 0; k < n; k++) {
        const vijp_format *f = &formats[k];
        snprintf(out->fmt[k].format, sizeof out->fmt[k].format, "%s", f->name);
        double big = 0; /* the largest computed f′ on the scan */
        for (int j = -64; j <= 128; j++)
            for (int sign = -1; sign <= 1; sign += 2) {
                double v = fabs(computed_deriv(&L1, theta, f, sign * ldexp(1.0 + (j & 7) / 8.0, j >> 3)));
                if (v > big) big = v;
            }
        out->fmt[k].underflow_at = first_where(&L1, theta, f, big, 1);
        out->fmt[k].negligible_at = first_where(&L1, theta, f, big, 0);
    }
}

int vijp_activation_analyze_in(const vijp_layer *L, const double *theta, double R, double tol, const vijp_format *formats,
                               size_t n, vijp_activation_report *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    if (!vijp_deriv_enclose_of(L->type))
        return vijp_fail(err, VIJP_EUNSUPPORTED, "%s is not an elementwise activation", L->type->name);
    if (!(R > 0 && isfinite(R)) || !(tol > 0 && tol < R))
        return vijp_fail(err, VIJP_EINVAL, "want 0 < tol < R < Inf, got R = %g, tol = %g", R, tol);
    if (n < 1 || n > VIJP_ACT_FORMATS_MAX)
        return vijp_fail(err, VIJP_EINVAL, "%zu formats for the f′ table: want 1 to %d", n, VIJP_ACT_FORMATS_MAX);
    out->R = R, out->tol = tol, out->complete = 1;
    search_zeros(L, theta, R, tol, out);
    format_table(L, theta, formats, n, out);
    return 0;
}

int vijp_activation_analyze(const vijp_layer *L, const double *theta, double R, double tol, vijp_activation_report *out,
                            vijp_error *err)
{
    static const char *const names[VIJP_ACT_FORMATS] = {"double",   "binary32",          "binary16",
                                                        "bfloat16", "bfloat16+binary32", "binary16+binary32"};
    vijp_format f[VIJP_ACT_FORMATS];
    for (int k = 0; k < VIJP_ACT_FORMATS; k++)
        if (vijp_format_parse(names[k], &f[k], NULL)) abort(); /* names[] are formats: a programming error otherwise */
    return vijp_activation_analyze_in(L, theta, R, tol, f, VIJP_ACT_FORMATS, out, err);
}

/* Certification over a box of inputs (vijp_certify_box, certify.h): every x
 * with lo_i <= x_i <= hi_i.  Elementwise activations by interval bisection
 * of f′ along each coordinate (J is diagonal, so the box is a product of
 * one-dimensional questions), layers whose Jacobian does not depend on x by
 * one point certificate, types declared submersive or never submersive by
 * their declaration. */
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BOX_PREC 128 /* bits of the enclosures of f′ (its operators' working precision) */

const char *vijp_box_verdict_name(vijp_verdict v)
{
    static const char *const names[] = {"certified-submersive", "not-submersive", "undecided"};
    return names[v];
}

/* The bisection of one coordinate's interval, and what it proved. */
typedef struct {
    const vijp_layer *L;
    const double *theta;
    mpfi_t x, d;
    mpfr_t mig;
    size_t budget;   /* intervals */
    double deadline; /* CLOCK_MONOTONIC seconds (0: none) */
    int out_of_time;
} bisection;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether the budget is spent: the intervals, or (looked at every 64) the time. */
static int spent(bisection *bi, size_t boxes)
{
    if (boxes >= bi->budget) return 1;
    if (bi->deadline > 0 && !bi->out_of_time && boxes % 64 == 0 && now_seconds() > bi->deadline) bi->out_of_time = 1;
    return bi->out_of_time;
}

/* f′ enclosed over [a, b] into bi->d. */
static void enclose(bisection *bi, double a, double b)
{
    mpfi_interv_d(bi->x, a, b);
    vijp_deriv_enclose_of(bi->L->type)(bi->L, bi->theta, bi->d, bi->x);
}

/* A proof that f′ vanishes in [a, b]: at a point exactly (the enclosure
 * there is {0}), or between the ends, for a continuous f′ (a smooth
 * activation: one with dual numbers), by the intermediate value theorem
 * when the ends' enclosures have strictly opposite signs.  1 and the point
 * or interval in *c, or 0. */
static int zero_proven(bisection *bi, size_t coordinate, double a, double b, vijp_box_certificate *c)
{
    int sign[2];
    double end[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        enclose(bi, end[k], end[k]);
        if (mpfi_is_zero(bi->d)) {
            c->exact = 1, c->coordinate = coordinate, c->lo = c->hi = end[k];
            snprintf(c->reason, sizeof c->reason, "f′(%.17g) = 0 exactly: J is singular where x_%zu = %.17g",
                     end[k], coordinate + 1, end[k]);
            return 1;
        }
        sign[k] = mpfi_nan_p(bi->d) ? 0 : mpfi_is_strictly_pos(bi->d) ? 1 : mpfi_is_strictly_neg(bi->d) ? -1 : 0;
    }
    if (!bi->L->type->dual_eval || !sign[0] || sign[0] != -sign[1]) return 0;
    c->exact = 0, c->coordinate = coordinate, c->lo = a, c->hi = b;
    snprintf(c->reason, sizeof c->reason, "f′ is %s at %.17g and %s at %.17g, and continuous: it vanishes in between, "
             "where J is singular (coordinate %zu)", sign[0] > 0 ? "> 0" : "< 0", a, sign[1] > 0 ? "> 0" : "< 0", b,
             coordinate + 1);
    return 1;
}

/* Record an undecided piece of coordinate i. */
static void keep_open(vijp_box_certificate *c, size_t i, double a, double b)
{
    if (c->n_open < sizeof c->open / sizeof *c->open) c->open[c->n_open] = (vijp_span){a, b}, c->open_at[c->n_open] = i;
    c->n_open++;
}

/* Coordinate i over [a, b]: the length proven (f′ ≠ 0 on it) into *proven,
 * the least |f′| there into *s; 1 when a zero of f′ was proven (c says
 * where), 0 otherwise (undecided pieces kept in c), or VIJP_ENOMEM. */
static int bisect(bisection *bi, size_t i, double a, double b, double *proven, double *s, vijp_box_certificate *c)
{
    double tol = (b - a) * 0x1p-40;
    size_t top = 0, cap = 64;
    vijp_span *stack = vijp_alloc_array(cap, sizeof *stack);
    stack[top++] = (vijp_span){a, b};
    int found = 0;
    while (top && !found) {
        vijp_span p = stack[--top];
        if (spent(bi, c->boxes)) {
            keep_open(c, i, p.lo, p.hi);
            continue;
        }
        c->boxes++;
        enclose(bi, p.lo, p.hi);
        if (!mpfi_nan_p(bi->d) && !mpfi_has_zero(bi->d)) { /* f′ ≠ 0 on all of p */
            mpfi_mig(bi->mig, bi->d);
            *s = fmin(*s, mpfr_get_d(bi->mig, MPFR_RNDD));
            *proven += p.hi - p.lo;
            continue;
        }
        if (mpfi_is_zero(bi->d) || p.hi - p.lo <= tol) {
            found = zero_proven(bi, i, p.lo, p.hi, c);
            if (!found) keep_open(c, i, p.lo, p.hi);
            continue;
        }
        double mid = 0.5 * (p.lo + p.hi);
        if (top + 2 > cap) stack = vijp_realloc(stack, (cap *= 2) * sizeof *stack);
        stack[top++] = (vijp_span){mid, p.hi};
        stack[top++] = (vijp_span){p.lo, mid};
    }
    free(stack);
    return found;
}

/* Elementwise: each coordinate's interval bisected (a run of equal
 * intervals once), the box's verdict from theirs. */
static int elementwise(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                       const vijp_box_budget *budget, vijp_box_certificate *c)
{
    bisection bi = {.L = L, .theta = theta, .budget = budget && budget->intervals ? budget->intervals : 200000,
                    .deadline = budget && budget->seconds > 0 ? now_seconds() + budget->seconds : 0};
    mpfi_init2(bi.x, BOX_PREC), mpfi_init2(bi.d, BOX_PREC), mpfr_init2(bi.mig, 53);
    double s = INFINITY, fraction = 1, proven = 0, frac_i = 1;
    int found = 0;
    snprintf(c->method, sizeof c->method, "interval-bisection");
    for (size_t i = 0; i < L->in && !found; i++) {
        if (!i || lo[i] != lo[i - 1] || hi[i] != hi[i - 1]) { /* else the same question, answered */
            size_t open_before = c->n_open;
            proven = 0;
            found = bisect(&bi, i, lo[i], hi[i], &proven, &s, c);
            frac_i = hi[i] > lo[i] ? fmin(1, proven / (hi[i] - lo[i])) : c->n_open == open_before;
        }
        fraction *= frac_i;
    }
    mpfi_clear(bi.x), mpfi_clear(bi.d), mpfr_clear(bi.mig);
    if (found) c->verdict = VIJP_NOT_SUBMERSIVE, c->certified_fraction = NAN;
    else if (c->n_open) {
        c->verdict = VIJP_INCONCLUSIVE, c->certified_fraction = fraction;
        snprintf(c->reason, sizeof c->reason, "%zu piece%s where f′ may vanish left undecided after %zu intervals%s",
                 c->n_open, c->n_open == 1 ? "" : "s", c->boxes, bi.out_of_time ? " (the time budget ran out)" : "");
    } else c->verdict = VIJP_CERTIFIED_SUBMERSIVE, c->s = s, c->certified_fraction = 1;
    return 0;
}

/* J the same at every x: the point certificate at the box's centre. */
static int constant_jacobian(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                             const vijp_certify_opts *o, vijp_box_certificate *c, vijp_error *err)
{
    double *x = vijp_alloc_array(L->in ? L->in : 1, sizeof *x);
    for (size_t i = 0; i < L->in; i++) x[i] = lo[i] + 0.5 * (hi[i] - lo[i]);
    vijp_certificate p;
    int rc = vijp_certify_layer(L, theta, x, o, &p, err);
    free(x);
    if (rc) return rc;
    c->verdict = p.verdict, c->s = p.verdict == VIJP_CERTIFIED_SUBMERSIVE ? p.s : NAN;
    c->certified_fraction = p.verdict == VIJP_CERTIFIED_SUBMERSIVE ? 1 : p.verdict == VIJP_NOT_SUBMERSIVE ? NAN : 0;
    snprintf(c->method, sizeof c->method, "constant-jacobian");
    if (p.verdict == VIJP_NOT_SUBMERSIVE && !p.cokernel_proven) { /* a numerical rank alone proves nothing */
        c->verdict = VIJP_INCONCLUSIVE, c->certified_fraction = 0;
        snprintf(c->reason, sizeof c->reason, "J (the same at every x) is numerically rank deficient, unproven: %.150s",
                 p.reason);
    } else if (p.verdict == VIJP_NOT_SUBMERSIVE) {
        snprintf(c->reason, sizeof c->reason, "J, the same at every x, has a proven cokernel of dimension %zu (%s): "
                 "singular everywhere in the box", p.cokernel_dim, p.method);
    } else if (p.verdict == VIJP_INCONCLUSIVE) {
        snprintf(c->reason, sizeof c->reason, "J, the same at every x: %.200s", p.reason);
    }
    vijp_certificate_clear(&p);
    return 0;
}

int vijp_certify_box(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                     const vijp_box_budget *budget, const vijp_certify_opts *o, vijp_box_certificate *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    out->s = NAN, out->lo = out->hi = NAN;
    for (size_t i = 0; i < L->in; i++)
        if (!isfinite(lo[i]) || !isfinite(hi[i]) || lo[i] > hi[i])
            return vijp_fail(err, VIJP_EDOMAIN, "the box's coordinate %zu is [%g, %g]: want finite lo <= hi", i + 1,
                             lo[i], hi[i]);
    unsigned d = L->type->declare(L);
    if (vijp_deriv_enclose_of(L->type)) return elementwise(L, theta, lo, hi, budget, out);
    if (d & VIJP_DECL_NEVER_SUBMERSIVE) {
        out->verdict = VIJP_NOT_SUBMERSIVE, out->certified_fraction = NAN;
        snprintf(out->method, sizeof out->method, "analytic");
        snprintf(out->reason, sizeof out->reason, "the type declares it never submersive (%zu → %zu): singular "
                 "everywhere in the box", L->in, L->out);
        return 0;
    }
    if (d & VIJP_DECL_LINEAR) return constant_jacobian(L, theta, lo, hi, o, out, err);
    if (d & VIJP_DECL_SUBMERSIVE) {
        out->verdict = VIJP_CERTIFIED_SUBMERSIVE, out->certified_fraction = 1;
        snprintf(out->method, sizeof out->method, "analytic");
        return 0;
    }
    return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no enclosure of its Jacobian over a box (an elementwise "
                     "activation's f′ enclosure, or a Jacobian declared independent of x)", L->type->name);
}

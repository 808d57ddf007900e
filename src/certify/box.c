/* Certification over a box of inputs (vijp_certify_box, certify.h): every x
 * with lo_i <= x_i <= hi_i.  Elementwise activations by interval bisection
 * of f′ along each coordinate (J is diagonal, so the box is a product of
 * one-dimensional questions), layers whose Jacobian does not depend on x by
 * one point certificate, types declared submersive or never submersive by
 * their declaration, and any other type by bisection of the box itself
 * with its interval Jacobian over a box or, failing that, its Lipschitz
 * constant of J (vijp/interval.h). */
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include "oracles/oracles.h"
#include "fprime_bisect.h"
#include "image.h"
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
    fprime_enclosure e; /* the layer and f′'s enclosures (fprime_bisect.h) */
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
        fprime_enclose(&bi->e, end[k], end[k]);
        if (mpfi_is_zero(bi->e.d)) {
            c->exact = 1, c->coordinate = coordinate, c->lo = c->hi = end[k];
            snprintf(c->reason, sizeof c->reason, "f′(%.17g) = 0 exactly: J is singular where x_%zu = %.17g",
                     end[k], coordinate + 1, end[k]);
            return 1;
        }
        sign[k] = mpfi_nan_p(bi->e.d) ? 0 : mpfi_is_strictly_pos(bi->e.d) ? 1 : mpfi_is_strictly_neg(bi->e.d) ? -1 : 0;
    }
    if (!bi->e.L->type->dual_eval || !sign[0] || sign[0] != -sign[1]) return 0;
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

/* One coordinate's bisection as the visitor sees it (fprime_bisect.h). */
typedef struct {
    bisection *bi;
    size_t i;
    double *proven, *s;
    vijp_box_certificate *c;
} coordinate_walk;

static int walk_spent(void *ctx)
{
    coordinate_walk *w = ctx;
    if (spent(w->bi, w->c->boxes)) return 1;
    w->c->boxes++;
    return 0;
}

static int walk_visit(void *ctx, fprime_piece kind, double lo, double hi)
{
    coordinate_walk *w = ctx;
    if (kind == FPRIME_NONZERO) { /* f′ ≠ 0 on all of [lo, hi] */
        mpfi_mig(w->bi->mig, w->bi->e.d);
        *w->s = fmin(*w->s, mpfr_get_d(w->bi->mig, MPFR_RNDD));
        *w->proven += hi - lo;
        return 0;
    }
    if (kind == FPRIME_SUSPECT && zero_proven(w->bi, w->i, lo, hi, w->c)) return 1;
    keep_open(w->c, w->i, lo, hi);
    return 0;
}

/* Coordinate i over [a, b]: the length proven (f′ ≠ 0 on it) into *proven,
 * the least |f′| there into *s; 1 when a zero of f′ was proven (c says
 * where), 0 otherwise (undecided pieces kept in c). */
static int bisect(bisection *bi, size_t i, double a, double b, double *proven, double *s, vijp_box_certificate *c)
{
    coordinate_walk w = {bi, i, proven, s, c};
    return fprime_bisect(&bi->e, a, b, (b - a) * 0x1p-40, &(fprime_visitor){walk_spent, walk_visit, &w});
}

/* Elementwise: each coordinate's interval bisected (a run of equal
 * intervals once), the box's verdict from theirs. */
static int elementwise(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                       const vijp_box_budget *budget, vijp_box_certificate *c)
{
    bisection bi = {.budget = budget && budget->intervals ? budget->intervals : 200000,
                    .deadline = budget && budget->seconds > 0 ? now_seconds() + budget->seconds : 0};
    fprime_enclosure_init(&bi.e, L, theta), mpfr_init2(bi.mig, 53);
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
    fprime_enclosure_clear(&bi.e), mpfr_clear(bi.mig);
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

/* ---- bisection of the box itself: the interval Jacobian, or the Lipschitz ball ---- */

#define LIPSCHITZ_PREC 256    /* bits of the MPFR Jacobian at a box's centre */
#define LEAF_RELATIVE 0x1p-24 /* a box narrower than this fraction of the root in every coordinate is not split */

typedef enum { BY_INTERVAL_JACOBIAN, BY_LIPSCHITZ } box_method;

/* What one box of the bisection needs, allocated once. */
typedef struct {
    const vijp_layer *L;
    const double *theta;
    const vijp_certify_opts *o;
    box_method method;
    double *mid, *rad; /* m × n */
    mpfi_t *xi, *Ji;   /* the interval route */
} box_work;

/* J over the box [lo, hi] from the type's interval Jacobian, as mid ± rad;
 * 0, or nonzero when it cannot be enclosed (NaN, Inf, the type refused). */
static int enclose_interval(box_work *w, const double *lo, const double *hi)
{
    size_t m = w->L->out, n = w->L->in;
    for (size_t j = 0; j < n; j++) mpfi_interv_d(w->xi[j], lo[j], hi[j]);
    if (vijp_jacobian_box_of(w->L->type)(w->L, w->theta, (const mpfi_t *)w->xi, w->Ji)) return 1;
    for (size_t k = 0; k < m * n; k++) {
        if (mpfi_nan_p(w->Ji[k]) || mpfi_inf_p(w->Ji[k])) return 1;
        vo_interval_mid_rad(w->Ji[k], &w->mid[k], &w->rad[k]);
        if (!isfinite(w->mid[k]) || !isfinite(w->rad[k])) return 1;
    }
    return 0;
}

/* J at the box's centre c from the type's MPFR Jacobian at LIPSCHITZ_PREC
 * bits, as mid ± rad, and the Euclidean radius of the box about c into *r
 * (rounded up).  The operator's own error, by the contract the layer
 * battery holds it to (γ_n on the dot-product terms plus `ulps` on the
 * rest, vijp_layer_bounds), is below (ulps + n + 2)·u·max|J| per entry at
 * u = 2^-LIPSCHITZ_PREC; rad adds that to the rounding of J to double. */
static int enclose_centre(box_work *w, const double *lo, const double *hi, double *r)
{
    size_t m = w->L->out, n = w->L->in, P = w->L->type->param_count(w->L);
    vijp_format f;
    vijp_error err = {0};
    if (vijp_format_mpfr(&f, LIPSCHITZ_PREC, &err)) return 1;
    mpfr_t *th = vo_vec_new(P + 1, &f), *x = vo_vec_new(n + 1, &f), *J = vo_vec_new(m * n + 1, &f); /* + 1: never empty */
    mpfr_t t;
    mpfr_init2(t, 64);
    for (size_t p = 0; p < P; p++) mpfr_set_d(th[p], w->theta[p], MPFR_RNDN); /* exact: 256 bits hold a double */
    double r2 = 0;
    for (size_t j = 0; j < n; j++) {
        double c = lo[j] + 0.5 * (hi[j] - lo[j]);
        mpfr_set_d(x[j], c, MPFR_RNDN);
        /* c − lo and hi − c rounded to nearest: one ulp up makes h >= the exact distance */
        double h = nextafter(fmax(c - lo[j], hi[j] - c), INFINITY);
        r2 += h * h;
    }
    /* the sum of n squares within γ_(n+1) relative, the sqrt within u: 2(n + 2)u up covers both */
    *r = sqrt(r2) * (1 + 2 * ((double)n + 2) * 0x1p-53);
    *r = nextafter(*r, INFINITY);
    w->L->type->mp->jacobian(w->L, th, x, J, &f);
    double jmax = 0, ulps = w->L->type->bounds.ulps > 0 ? w->L->type->bounds.ulps : 6;
    int bad = 0;
    for (size_t k = 0; k < m * n && !bad; k++) {
        w->mid[k] = mpfr_get_d(J[k], MPFR_RNDN);
        mpfr_sub_d(t, J[k], w->mid[k], MPFR_RNDA);
        w->rad[k] = fabs(mpfr_get_d(t, MPFR_RNDA));
        bad = !isfinite(w->mid[k]);
        jmax = fmax(jmax, fabs(w->mid[k]));
    }
    double op_err = (ulps + (double)n + 2) * ldexp(nextafter(jmax, INFINITY), 1 - LIPSCHITZ_PREC);
    for (size_t k = 0; k < m * n; k++) w->rad[k] = nextafter(w->rad[k] + op_err, INFINITY);
    mpfr_clear(t);
    vo_vec_free(th, P + 1), vo_vec_free(x, n + 1), vo_vec_free(J, m * n + 1);
    return bad;
}

/* Whether J has full row rank at every x in [lo, hi]: 1 with σ_min >= *s,
 * 0 when not proven.  Interval route: the radius test on the enclosure
 * (vijp_certify_matrix: Weyl with a bound on ‖rad‖₂).  Lipschitz route: σ_min(J(x))
 * >= σ_min(J(c)) − ‖J(x) − J(c)‖₂ >= s_c − LJ·r (Weyl in the 2-norm, s_c
 * the certificate of J(c) ± its rounding). */
static int box_proven(box_work *w, const double *lo, const double *hi, double *s)
{
    size_t m = w->L->out, n = w->L->in;
    double r = 0, LJ = 0;
    if (w->method == BY_INTERVAL_JACOBIAN ? enclose_interval(w, lo, hi)
                                          : (vijp_jacobian_lipschitz_of(w->L->type)(w->L, w->theta, lo, hi, &LJ) ||
                                             !(LJ >= 0) || !isfinite(LJ) || enclose_centre(w, lo, hi, &r)))
        return 0;
    vijp_certificate c;
    vijp_error err = {0};
    if (vijp_certify_matrix(w->mid, w->rad, m, n, w->o, &c, &err)) return 0;
    int ok = c.verdict == VIJP_CERTIFIED_SUBMERSIVE;
    if (ok && w->method == BY_LIPSCHITZ) {
        mpfr_t a;
        mpfr_init2(a, 53);
        mpfr_set_d(a, LJ, MPFR_RNDU), mpfr_mul_d(a, a, r, MPFR_RNDU); /* LJ·r rounded up */
        mpfr_d_sub(a, c.s, a, MPFR_RNDD);                              /* s_c − LJ·r rounded down */
        *s = mpfr_get_d(a, MPFR_RNDD);
        ok = *s > 0;
        mpfr_clear(a);
    } else if (ok) *s = c.s;
    vijp_certificate_clear(&c);
    return ok;
}

/* A proven singular point: the box's centre, where the interval Jacobian
 * of the thin box is exact (every entry a point) and proven rank deficient
 * (vijp_certify_matrix without a radius).  1 with the reason in c, or 0. */
static int singular_centre(box_work *w, const double *lo, const double *hi, double *x, vijp_box_certificate *c)
{
    size_t m = w->L->out, n = w->L->in;
    if (w->method != BY_INTERVAL_JACOBIAN) return 0; /* an MPFR Jacobian is not exact: no proof */
    for (size_t j = 0; j < n; j++) x[j] = lo[j] + 0.5 * (hi[j] - lo[j]);
    if (enclose_interval(w, x, x)) return 0;
    for (size_t k = 0; k < m * n; k++)
        if (w->rad[k] != 0) return 0;
    vijp_certificate p;
    vijp_error err = {0};
    if (vijp_certify_matrix(w->mid, NULL, m, n, w->o, &p, &err)) return 0;
    int found = p.verdict == VIJP_NOT_SUBMERSIVE && p.cokernel_proven;
    if (found) {
        c->exact = 1, c->coordinate = 0, c->lo = c->hi = n ? x[0] : NAN;
        size_t at = (size_t)snprintf(c->reason, sizeof c->reason, "J is exact and rank deficient (cokernel %zu, "
                                     "%s) at x = (", p.cokernel_dim, p.method);
        for (size_t j = 0; j < n && at + 30 < sizeof c->reason; j++)
            at += (size_t)snprintf(c->reason + at, sizeof c->reason - at, "%s%.17g", j ? ", " : "", x[j]);
        if (at + 2 < sizeof c->reason) snprintf(c->reason + at, sizeof c->reason - at, ")");
    }
    vijp_certificate_clear(&p);
    return found;
}

/* The box bisected, its widest coordinate (relative to the root's width)
 * first: boxes proven submersive count towards the certified volume, the
 * first proven singular centre ends it, boxes below LEAF_RELATIVE in every
 * coordinate or past the budget are left open. */
static int bisect_boxes(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                        const vijp_box_budget *budget, const vijp_certify_opts *o, box_method method,
                        vijp_box_certificate *c)
{
    size_t m = L->out, n = L->in, mn = m * n + 1, cap = 64, top = 1, stride = 2 * n + 1; /* lo, hi, share */
    size_t limit = budget && budget->intervals ? budget->intervals : 200000;
    double deadline = budget && budget->seconds > 0 ? now_seconds() + budget->seconds : 0;
    box_work w = {.L = L, .theta = theta, .o = o, .method = method};
    w.mid = vijp_alloc_array(mn, sizeof *w.mid), w.rad = vijp_alloc_array(mn, sizeof *w.rad);
    if (method == BY_INTERVAL_JACOBIAN) {
        w.xi = vijp_alloc_array(n + 1, sizeof *w.xi), w.Ji = vijp_alloc_array(mn, sizeof *w.Ji);
        for (size_t j = 0; j < n; j++) mpfi_init2(w.xi[j], BOX_PREC);
        for (size_t k = 0; k < m * n; k++) mpfi_init2(w.Ji[k], BOX_PREC);
    }
    double *stack = vijp_alloc_array(cap * stride, sizeof *stack), *x = vijp_alloc_array(n + 1, sizeof *x);
    memcpy(stack, lo, n * sizeof *lo), memcpy(stack + n, hi, n * sizeof *hi), stack[2 * n] = 1;
    double s = INFINITY, proven = 0;
    int found = 0, out_of_time = 0;
    snprintf(c->method, sizeof c->method, method == BY_INTERVAL_JACOBIAN ? "interval-jacobian" : "lipschitz");
    while (top && !found) {
        double *blo = stack + (--top) * stride, *bhi = blo + n, share = blo[2 * n], bs = INFINITY;
        if (!out_of_time && deadline > 0 && c->boxes % 64 == 0 && now_seconds() > deadline) out_of_time = 1;
        if (c->boxes >= limit || out_of_time) {
            c->n_open++;
            continue;
        }
        c->boxes++;
        if (box_proven(&w, blo, bhi, &bs)) {
            s = fmin(s, bs), proven += share;
            continue;
        }
        if ((found = singular_centre(&w, blo, bhi, x, c))) break;
        size_t widest = n;
        double rel = LEAF_RELATIVE;
        for (size_t j = 0; j < n; j++)
            if (hi[j] > lo[j] && (bhi[j] - blo[j]) / (hi[j] - lo[j]) > rel)
                rel = (bhi[j] - blo[j]) / (hi[j] - lo[j]), widest = j;
        if (widest == n) { /* a leaf: too narrow to split */
            c->n_open++;
            continue;
        }
        double cut = blo[widest] + 0.5 * (bhi[widest] - blo[widest]);
        if (top + 2 > cap) stack = vijp_realloc(stack, (cap *= 2) * stride * sizeof *stack); /* moves blo */
        double *left = stack + top * stride, *right = left + stride; /* left: the popped box's own slot */
        memcpy(right, left, stride * sizeof *left);
        left[n + widest] = cut, right[widest] = cut, left[2 * n] = right[2 * n] = 0.5 * share;
        top += 2;
    }
    if (method == BY_INTERVAL_JACOBIAN) {
        for (size_t j = 0; j < n; j++) mpfi_clear(w.xi[j]);
        for (size_t k = 0; k < m * n; k++) mpfi_clear(w.Ji[k]);
        free(w.xi), free(w.Ji);
    }
    free(w.mid), free(w.rad), free(stack), free(x);
    if (found) c->verdict = VIJP_NOT_SUBMERSIVE, c->certified_fraction = NAN;
    else if (c->n_open) {
        c->verdict = VIJP_INCONCLUSIVE, c->certified_fraction = proven;
        snprintf(c->reason, sizeof c->reason, "%zu box%s where J may lose rank left undecided after %zu boxes%s",
                 c->n_open, c->n_open == 1 ? "" : "es", c->boxes, out_of_time ? " (the time budget ran out)" : "");
    } else c->verdict = VIJP_CERTIFIED_SUBMERSIVE, c->s = s, c->certified_fraction = 1;
    return 0;
}

int vijp_certify_box(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                     const vijp_box_budget *budget, const vijp_certify_opts *o, vijp_box_certificate *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    out->s = NAN, out->lo = out->hi = NAN;
    if (vijp_image_box_check(lo, hi, L->in, err)) return VIJP_EDOMAIN;
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
    if (vijp_jacobian_box_of(L->type)) return bisect_boxes(L, theta, lo, hi, budget, o, BY_INTERVAL_JACOBIAN, out);
    if (vijp_jacobian_lipschitz_of(L->type) && L->type->mp)
        return bisect_boxes(L, theta, lo, hi, budget, o, BY_LIPSCHITZ, out);
    return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no enclosure of its Jacobian over a box (an elementwise "
                     "activation's f′ enclosure, a Jacobian declared independent of x, an interval Jacobian over "
                     "a box, or a Lipschitz constant of J)", L->type->name);
}

/* Interval bisection of f′ along one coordinate (fprime_bisect.h). */
#include "fprime_bisect.h"
#include "vijp/certify.h"
#include "vijp/error.h"
#include "vijp/interval.h"
#include <stdlib.h>

#define FPRIME_PREC 128 /* bits of the enclosures of f′ (its operators' working precision) */

void fprime_enclosure_init(fprime_enclosure *e, const vijp_layer *L, const double *theta)
{
    e->L = L, e->theta = theta;
    mpfi_init2(e->x, FPRIME_PREC), mpfi_init2(e->d, FPRIME_PREC);
}

void fprime_enclosure_clear(fprime_enclosure *e) { mpfi_clear(e->x), mpfi_clear(e->d); }

void fprime_enclose(fprime_enclosure *e, double a, double b)
{
    mpfi_interv_d(e->x, a, b);
    vijp_deriv_enclose_of(e->L->type)(e->L, e->theta, e->d, e->x);
}

int fprime_bisect(fprime_enclosure *e, double a, double b, double tol, const fprime_visitor *v)
{
    size_t top = 0, cap = 64;
    vijp_span *stack = vijp_alloc_array(cap, sizeof *stack);
    stack[top++] = (vijp_span){a, b};
    int stopped = 0;
    while (top && !stopped) {
        vijp_span p = stack[--top];
        if (v->spent(v->ctx)) {
            stopped = v->visit(v->ctx, FPRIME_UNVISITED, p.lo, p.hi);
            continue;
        }
        fprime_enclose(e, p.lo, p.hi);
        if (!mpfi_nan_p(e->d) && !mpfi_has_zero(e->d)) {
            stopped = v->visit(v->ctx, FPRIME_NONZERO, p.lo, p.hi);
            continue;
        }
        if (mpfi_is_zero(e->d) || p.hi - p.lo <= tol) {
            stopped = v->visit(v->ctx, FPRIME_SUSPECT, p.lo, p.hi);
            continue;
        }
        double mid = 0.5 * (p.lo + p.hi);
        if (top + 2 > cap) stack = vijp_realloc(stack, (cap *= 2) * sizeof *stack);
        stack[top++] = (vijp_span){mid, p.hi};
        stack[top++] = (vijp_span){p.lo, mid};
    }
    free(stack);
    return stopped;
}

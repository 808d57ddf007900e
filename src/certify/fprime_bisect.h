/* Interval bisection of one coordinate's f′ (fprime_bisect.c; internal):
 * the one machinery behind an activation's search for zeros of f′ over
 * [−R, R] (act.c) and a box's certificate, coordinate by coordinate
 * (box.c).  Each caller decides what a piece means to it. */
#ifndef VIJP_CERTIFY_FPRIME_BISECT_H
#define VIJP_CERTIFY_FPRIME_BISECT_H

#include "vijp/layer.h"
#include <mpfi.h>

/* What a piece of the interval turned out to be. */
typedef enum {
    FPRIME_NONZERO, /* f′ ≠ 0 on all of it (its enclosure excludes 0) */
    FPRIME_SUSPECT, /* f′ enclosed as exactly 0, or the piece no wider than tol while its enclosure holds 0 */
    FPRIME_UNVISITED /* the budget ran out before it was looked at */
} fprime_piece;

/* The layer, its parameters, and the enclosures at 128 bits: x the piece,
 * d f′ over it (valid in a visit of a NONZERO or SUSPECT piece). */
typedef struct {
    const vijp_layer *L;
    const double *theta;
    mpfi_t x, d;
} fprime_enclosure;

void fprime_enclosure_init(fprime_enclosure *e, const vijp_layer *L, const double *theta);
void fprime_enclosure_clear(fprime_enclosure *e);
/* f′ enclosed over [a, b] into e->d. */
void fprime_enclose(fprime_enclosure *e, double a, double b);

/* The callbacks: spent() is asked before each piece is looked at (nonzero:
 * the piece goes to visit as UNVISITED); visit() sees every piece that is
 * not split, left to right, and returns nonzero to stop the bisection. */
typedef struct {
    int (*spent)(void *ctx);
    int (*visit)(void *ctx, fprime_piece kind, double lo, double hi);
    void *ctx;
} fprime_visitor;

/* Bisects [a, b] depth first, left half first (so pieces arrive in order),
 * splitting every piece whose enclosure holds 0 and that is wider than tol.
 * 1 when visit() stopped it, 0 when every piece was seen. */
int fprime_bisect(fprime_enclosure *e, double a, double b, double tol, const fprime_visitor *v);

#endif

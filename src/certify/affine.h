/* Affine forms of a layer's inputs over a net's box (internal to certify/):
 * x = c + G·ε + r, ε ∈ [−1, 1]^k, r ∈ [rlo, rhi] entrywise, in doubles with
 * every rounding error bounded and moved into r (affine.c derives each
 * bound).  Where interval boxes lose the correlation a dense layer makes
 * (the wrapping effect), the form keeps it: a rotation of a box is still a
 * box in its generators. */
#ifndef VIJP_CERTIFY_AFFINE_H
#define VIJP_CERTIFY_AFFINE_H

#include "vijp/layer.h"
#include "vijp/error.h"
#include <math.h>

/* The arithmetic is double in round to nearest (the library's mode).  An
 * operation's result r and its exact value v satisfy affine_down(r) <= v <=
 * affine_up(r): the rounding error is at most half the spacing of the
 * doubles about r, one step to the next double at least that (subnormals
 * included; a result rounded to ±Inf is caught as not finite). */
static inline double affine_up(double r) { return nextafter(r, INFINITY); }
static inline double affine_down(double r) { return nextafter(r, -INFINITY); }
/* |v − r| for r = fl(v), one operation: <= 2^-53·|r| in the normal range
 * (v = r(1 + δ), |δ| <= 2^-53: Higham, Accuracy and Stability, Thm 2.3),
 * <= 2^-1075 below it; |r|·2^-53 loses at most 2^-1075 when it underflows,
 * the 2^-1074 term covers both, affine_up the sum's own rounding. */
static inline double affine_rn_err(double r) { return affine_up(fabs(r) * 0x1p-53 + 0x1p-1074); }

typedef struct {
    size_t n, k, cap;  /* coordinates; generators in use; most kept (the smallest past it merge into r) */
    double *c;         /* n: the centre */
    double *G;         /* n × cap, column-major: generator g at G + g·n */
    double *rlo, *rhi; /* n: the remainder's interval */
} vijp_affine;

/* The box [lo, hi] as a form: centre its midpoint, one generator per
 * coordinate (its radius, rounded up), r = 0.  cap >= n. */
void vijp_affine_from_box(vijp_affine *a, size_t n, size_t cap, const double *lo, const double *hi);
void vijp_affine_free(vijp_affine *a);
/* [lo, hi] ⊇ every value of the form (outward rounded). */
void vijp_affine_hull(const vijp_affine *a, double *lo, double *hi);
/* The form of L's values over the inputs a holds, in place: a dense or
 * other declared-linear layer maps it exactly (f(0) + J·x, J enclosed); an
 * elementwise activation by a linearisation f(x) ∈ α_i·x + [g_lo, g_hi]
 * valid over [lo_i, hi_i] (a box that holds every input: the hull of a,
 * or tighter).  VIJP_EUNSUPPORTED for other types (the caller starts a new
 * form from their interval image), VIJP_EDOMAIN when a value leaves
 * double's range. */
int vijp_affine_layer(const vijp_layer *L, const double *theta, const double *lo, const double *hi, vijp_affine *a,
                      vijp_error *err);

/* Room for extra new generators: past the cap the smallest (by Σ_i |G_ig|)
 * merge into the remainder, r_i ± |G_ig|, which holds every value they
 * could add. */
void vijp_affine_make_room(vijp_affine *a, size_t extra);
/* An elementwise activation's linearisation over each [lo_i, hi_i]
 * (affine_act.c): f(x) ∈ alpha[i]·x + [glo[i], ghi[i]] there. */
int vijp_affine_linearise(const vijp_layer *L, const double *theta, const double *lo, const double *hi, double *alpha,
                          double *glo, double *ghi, vijp_error *err);

#endif

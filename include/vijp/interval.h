/* Interval operators of a layer type (MPFI): what certification over
 * intervals needs, kept apart from vijp/layer.h so that only the code that
 * computes with enclosures includes <mpfi.h>.  A type points at one
 * vijp_interval_ops (vijp_layer_type.interval), or at none. */
#ifndef VIJP_INTERVAL_H
#define VIJP_INTERVAL_H

#include "vijp/api.h"
#include "vijp/layer.h"
#include <mpfi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For elementwise layers y_k = f(x_k; θ): an enclosure d of f′ over the
 * interval x (rigorous; where f is not differentiable, of every one-sided
 * derivative), at the parameters theta (NULL for types without).  It
 * serves both the Jacobian enclosure at a point and the search for zeros
 * of f′ over [−R, R] (vijp certify, DESIGN §4). */
typedef void (*vijp_deriv_enclose_fn)(const vijp_layer *L, const double *theta, mpfi_ptr d, mpfi_srcptr x);

/* For any type (plugin ABI 7): an enclosure of the input Jacobian over a
 * box.  x holds L->in intervals, the box; J (L->out × L->in, column-major,
 * initialised by the caller at any precision) receives intervals such that
 * J(x)_ij ∈ J[i + j·out] for every x in the box, rigorously (outward
 * rounding).  0, or a VIJP_E* code when it cannot be enclosed (NaN, a
 * box outside the domain).  vijp certify --box bisects the box and proves
 * full row rank of every matrix in the enclosure (the radius test). */
typedef int (*vijp_jacobian_box_fn)(const vijp_layer *L, const double *theta, const mpfi_t *x, mpfi_t *J);

/* For any type (plugin ABI 7), where no interval Jacobian is written: a
 * Lipschitz constant of J over the box [lo, hi] (L->in entries each), a
 * number LJ with ‖J(x) − J(y)‖₂ <= LJ·‖x − y‖₂ for all x, y in it (a
 * constant, or one that depends on the box).  0 with *LJ set, or a VIJP_E*
 * code.  vijp cannot check the claim: it is the type author's (vijp
 * check-layer spot-checks it at sampled pairs of points).  certify --box
 * then encloses J over a box of Euclidean radius r about its centre c as
 * the ball ‖J(x) − J(c)‖₂ <= LJ·r, J(c) from the type's MPFR Jacobian. */
typedef int (*vijp_jacobian_lipschitz_fn)(const vijp_layer *L, const double *theta, const double *lo,
                                          const double *hi, double *LJ);

/* A plugin built for ABI 6 knows only deriv_enclose: the registry keeps a
 * copy of its descriptor whose table has the later members NULL. */
struct vijp_interval_ops {
    vijp_deriv_enclose_fn deriv_enclose;
    vijp_jacobian_box_fn jacobian_box;
    vijp_jacobian_lipschitz_fn jacobian_lipschitz;
};

/* The type's f′ enclosure, or NULL when it has none. */
static inline vijp_deriv_enclose_fn vijp_deriv_enclose_of(const vijp_layer_type *T)
{
    return T->interval ? T->interval->deriv_enclose : NULL;
}

/* The type's interval Jacobian over a box, or NULL. */
static inline vijp_jacobian_box_fn vijp_jacobian_box_of(const vijp_layer_type *T)
{
    return T->interval ? T->interval->jacobian_box : NULL;
}

/* The type's Lipschitz constant of J over a box, or NULL. */
static inline vijp_jacobian_lipschitz_fn vijp_jacobian_lipschitz_of(const vijp_layer_type *T)
{
    return T->interval ? T->interval->jacobian_lipschitz : NULL;
}

#ifdef __cplusplus
}
#endif

#endif

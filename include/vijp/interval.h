/* Interval operators of a layer type (MPFI): what certification over
 * intervals needs, kept apart from vijp/layer.h so that only the code that
 * computes with enclosures includes <mpfi.h>.  A type points at one
 * vijp_interval_ops (vijp_layer_type.interval), or at none. */
#ifndef VIJP_INTERVAL_H
#define VIJP_INTERVAL_H

#include "vijp/api.h"
#include "vijp/layer.h"
#include <mpfi.h>

/* For elementwise layers y_k = f(x_k; θ): an enclosure d of f′ over the
 * interval x (rigorous; where f is not differentiable, of every one-sided
 * derivative), at the parameters theta (NULL for types without).  It
 * serves both the Jacobian enclosure at a point and the search for zeros
 * of f′ over [−R, R] (vijp certify, DESIGN §4). */
typedef void (*vijp_deriv_enclose_fn)(const vijp_layer *L, const double *theta, mpfi_ptr d, mpfi_srcptr x);

struct vijp_interval_ops {
    vijp_deriv_enclose_fn deriv_enclose;
};

/* The type's f′ enclosure, or NULL when it has none. */
static inline vijp_deriv_enclose_fn vijp_deriv_enclose_of(const vijp_layer_type *T)
{
    return T->interval ? T->interval->deriv_enclose : NULL;
}

#endif

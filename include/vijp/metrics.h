/* Error metrics between a computed matrix and a reference (DESIGN §5). */
#ifndef VIJP_METRICS_H
#define VIJP_METRICS_H

#include "vijp/mat.h"

/* ‖a − ref‖_F / ‖ref‖_F, evaluated in MPFR at max(ref precision, 2·a's precision,
 * 128) bits so that the metric itself adds no visible error; a's entries are
 * converted exactly.  0 when both are zero, +Inf when only ref is. */
double vijp_rel_err(const vijp_mat *a, const vijp_mat *ref);
/* ‖a‖_F (rounded to double). */
double vijp_norm(const vijp_mat *a);

#endif

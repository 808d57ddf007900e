/* MPFR twins of matrices that hold doubles (vijp/mat.h: every format whose
 * values are doubles, vijp_format_values_double), for the code that runs
 * on MPFR arrays whatever the holding: mat.c's rarer stores (":sr",
 * ":ftz", MX and tensor scales, vo_dot_acc) and the layer interface's
 * calls of a type's MPFR operators (src/layer/layer.c). */
#ifndef VIJP_FORMAT_MAT_MP_H
#define VIJP_FORMAT_MAT_MP_H

#include "vijp/mat.h"

/* t := a matrix of a's shape, format and stochastic-rounding stream whose
 * values are MPFR at the format's precision: a's, exactly (copy), or +0.
 * Cleared by vijp_mat_clear. */
void vijp_mat_init_mp(vijp_mat *t, const vijp_mat *a, int copy);
/* a's values := t's (a twin of a), exactly: they are values of a's format,
 * doubles (or, for an MPFR-held a, copied). */
void vijp_mat_put_mp(vijp_mat *a, const vijp_mat *t);

#endif

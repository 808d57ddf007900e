/* binary32@SET's and the mixed formats' @SET native route for layer.c. */
#ifndef VIJP_LAYER_F32_H
#define VIJP_LAYER_F32_H

#include "route.h"

typedef enum { VIJP_F32_FORWARD, VIJP_F32_JVP, VIJP_F32_VJP, VIJP_F32_VJP_PARAM, VIJP_F32_FRAGMENT,
               VIJP_F32_VIJP } vijp_f32_op;

/* On the FLOAT route r (route.h: X in binary32@SET, or in
 * bfloat16+binary32@SET or binary16+binary32@SET, out then rounded to the
 * storage format), where L's type has the operator natively
 * (L->type->f), run it on floats with r's kernels:
 * out := op(theta, X, A[, frag]) with A the tangent (jvp) or cotangent (the
 * others), and return 1 with *rc its code (0, or the vijp's VIJP_ESINGULAR
 * with err filled).  Return 0, touching nothing, where the emulation must
 * run instead (no such operator, another route, or the operator's
 * VIJP_EUNSUPPORTED for this case). */
int vijp_layer_f32(const vijp_route *r, vijp_f32_op op, const vijp_layer *L, const vijp_mat *theta,
                   const vijp_mat *X, const vijp_mat *A, const vijp_mat *frag, vijp_mat *out, int *rc, vijp_error *err);

#endif

/* The drift reference's batch-1 dense parameter gradient formed straight
 * into its packed block (outer.c).  Internal to drift/. */
#ifndef VIJP_DRIFT_OUTER_H
#define VIJP_DRIFT_OUTER_H

#include "vijp/layer.h"
#include "vijp/mat.h"

/* ∇θ of the dense layer L at batch 1 from its input h and cotangent g
 * (MPFR-held, at the level's precision P = fmt's), into *out: a new
 * matrix packed at held's precision (held: fmt itself, or a narrower
 * mpfr:Q): each ∂W(i, k) = RN_Q(RN_P(g_i·x_k)) and ∂b_i = RN_Q(g_i), the
 * values the layer's vjp_param gives at P (vo_dot1's products, zeros +0)
 * after the memo's packing and holding (memo.c).  1 when done; 0, out
 * untouched, where this is not that case (another layer type, a batch
 * above 1, a format whose dot products are not rounded once, the oracle's
 * test hook). */
int drift_outer_param(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                      const vijp_format *held, vijp_mat *out);

#endif

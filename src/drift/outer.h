/* The drift reference's dense parameter gradient formed straight into its
 * packed block (outer.c).  Internal to drift/. */
#ifndef VIJP_DRIFT_OUTER_H
#define VIJP_DRIFT_OUTER_H

#include "vijp/layer.h"
#include "vijp/mat.h"

/* ∇θ of the dense layer L from its input h and cotangent g (MPFR-held,
 * at the level's precision P = fmt's), into *out: a new matrix packed at
 * held's precision (held: fmt itself, or an mpfr:Q, narrower or, where
 * the upper reference level forms it at half its own precision, wider:
 * then each P-bit value held exactly).  At batch 1
 * each ∂W(i, k) = RN_Q(RN_P(g_i·x_k)) (vo_dot1's products, zeros +0); at
 * batch B each ∂W(i, k) = RN_Q(RN_P(Σ_b g(i, b)·x(k, b))) (vo_dot's, by
 * the reference's fast products), formed a block of columns at a time
 * without the layer's mpfr_t structs; ∂b_i = RN_Q(RN_P(Σ_b g(i, b))): the
 * values the layer's vjp_param gives at P after the memo's packing and
 * holding (memo.c).  1 when done; 0, out untouched, where this is not
 * that case (another layer type, a format whose dot products are not
 * rounded once, the oracle's test hook; at batch 1, limbs not 64 bits). */
int drift_outer_param(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                      const vijp_format *held, vijp_mat *out);

/* Whether drift_outer_param forms that gradient (1) or leaves it to the
 * layer's operator (0): from the shapes and formats alone. */
int drift_outer_param_forms(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                            const vijp_format *held);

/* The MPFR block a batch's ∂W is formed in, a block of columns at a time:
 * small beside the layer (a dense:4096 layer's 16.8M values), large
 * enough that the fast products split each block over a curve's threads. */
#define DRIFT_OUTER_BLOCK_BYTES ((size_t)16 << 20)

/* The work, in base/fork.h's units, of packing one value of a block at the
 * held precision (about 25 ns, most of it the first touch of the packed
 * block's pages), over ranges of the block's values on fmt's threads. */
#define DRIFT_OUTER_PACK_WORK 128.0

/* The same at batch 2 and more, ∂W formed cols columns at a time (at
 * least 1, at most all; drift_outer_param takes as many as fill
 * DRIFT_OUTER_BLOCK_BYTES with MPFR values): the tests', whose layers
 * are narrower than one block. */
int drift_outer_param_blocks(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                             const vijp_format *held, size_t cols, vijp_mat *out);

#endif

/* A drift curve's per-layer conditioning, beside its measurement:
 * κ_i and the Lyapunov spread (vijp_drift_curve's kappa, lyap_cum and
 * cond_method), from the numerics of cond.h.  Internal to drift/. */
#ifndef VIJP_DRIFT_CONDITIONING_H
#define VIJP_DRIFT_CONDITIONING_H

#include "vijp/drift.h"
#include "grad/problem.h"

/* κ_i at the points the network visits (double forward from the rounded
 * problem pf, whose values are exact doubles) and the Lyapunov spread
 * along sample 0, into c->kappa and c->lyap_cum (D values each).
 * Estimates beside the measurement, so double is enough.  A layer whose
 * Jacobian does not depend on x (VIJP_DECL_LINEAR) has the same J, so the
 * same κ, at every sample: it is computed at sample 0 only.  Layers wider
 * than exact_max are estimated (cond.h); estimated[i] (D bytes) is set to
 * 1 where some sample's κ_i is an estimate.  The samples after the
 * first run on up to threads threads, each with a Jacobian (and, wider
 * than exact_max, LU factors) of its own: drift_peak_cond_threads says how
 * many fit; the values are the same bits on any count.  layer_done(ctx,
 * i, D) after each layer i (1-based): the drift meter's. */
void drift_conditioning(const vijp_net *net, const vijp_problem *pf, size_t exact_max, int threads, vijp_drift_curve *c,
                        unsigned char *estimated, void (*layer_done)(void *ctx, size_t done, size_t total), void *ctx);

/* Whether L's Jacobian is diagonal at every point by its type (the
 * registry's elementwise layers, vijp/layer.h: an f′ by dual_eval, or a
 * residual kind of SIGN or DERIV; they keep the width) and it has no
 * parameters: its κ and spread then come from its Jacobians' diagonals
 * alone (drift_elementwise_diagonals), in O(n) a sample, where an n × n
 * Jacobian a sample was most of what the conditioning cost (at
 * dense:1024,gelu depth 32 batch 64, 16 GB written and read for 16
 * million values). */
int drift_layer_elementwise(const vijp_layer *L);

/* The diagonals of the Jacobians of L, a drift_layer_elementwise layer,
 * at the samples of h (n × B, double),
 * into dg (n × B): bit for bit vijp_layer_jacobian's diagonals, the rest
 * of which is zero (tests/t-cond.c checks every such type of the
 * catalogue).  0, or 1 where the layer's jvp failed.  Exposed for the
 * tests. */
int drift_elementwise_diagonals(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, double *dg);

/* Whether every layer of net keeps its width (the spread is taken only
 * then), and whether L is square and wider than exact_max (its κ is
 * then estimated through LU factors): the conditioning's two tests, which
 * its memory estimate (peak.c) counts by. */
int drift_net_square(const vijp_net *net);
int drift_layer_wide(const vijp_layer *L, size_t exact_max);

/* vijp_drift_curve.cond_method for a net and the exact limit. */
void drift_cond_method(const vijp_net *net, size_t exact_max, char *out, size_t size);

#endif

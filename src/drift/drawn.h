/* A drift curve on a net whose parameters are already drawn: what a study
 * runs, drawing each net once for all its formats and engines
 * (study/draws.h).  Internal to src/. */
#ifndef VIJP_DRIFT_DRAWN_H
#define VIJP_DRIFT_DRAWN_H

#include "vijp/drift.h"

/* vijp_drift_run with drawn (NULL: drawn here, as vijp_drift_run does) as
 * the net of s->problem: built from its spec or net, s->problem.weights
 * loaded, initialised with s->problem.init and seed (vijp_problem_draw).
 * drawn is only read, so threads may share it; the curve is bit for bit
 * the one vijp_drift_run gives.  The run reads drawn only until it has
 * rounded the problem (vijp_problem_setup_drawn), before any reference or
 * engine work: it then calls release(release_ctx) (where drawn and release
 * are not NULL), once, whatever the outcome, and the caller may free drawn
 * from that call on. */
VIJP_MUST_CHECK int vijp_drift_run_drawn(const vijp_drift_setup *s, const vijp_net *drawn, void (*release)(void *ctx),
                                         void *release_ctx, vijp_drift_curve *c, vijp_error *err);

#endif

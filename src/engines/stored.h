/* Pure forward's stored bytes without its arithmetic, for the memory
 * profile (memory/, stored bytes against depth).  Internal to the library. */
#ifndef VIJP_ENGINES_STORED_H
#define VIJP_ENGINES_STORED_H
#include "vijp/engine.h"
#include "vijp/error.h"

/* stored_by_depth[i] (depth entries) := what a pure-forward run of net on
 * (theta, X) reports there (vijp_grads.stored_by_depth): h_0 and each
 * sample's fragments of layers 1..i+1.  The fragment counts depend on the
 * forward values (a relu's inactive units) and never on the tangents, so
 * the forward passes are run, sample by sample as the engine runs them,
 * and the tangents (n × n a layer and sample: O(n³) each, most of a wide
 * memory table's time) are not; nor is the sweep, which stores nothing
 * the count keeps.  Fails as the run would before its sweep (a layer
 * operator, a cokernel), and with VIJP_ERANGE where a forward value is not
 * finite (the run's gradients would not be: its profile is refused). */
VIJP_MUST_CHECK int vijp_engine_pure_forward_stored(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                                                    size_t *stored_by_depth, vijp_error *err);
#endif

/* Memory against depth (issue 5, `vijp memory`): what each engine stores
 * between its passes for every depth d <= D, from one run at depth D (the
 * engines' ledgers replayed per layer, vijp_grads.stored_by_depth), and the
 * deepest network that fits a budget. */
#ifndef VIJP_MEMORY_H
#define VIJP_MEMORY_H

#include "vijp/engine.h"
#include "vijp/error.h"

/* bytes[d-1] for d = 1..depth: engine e on spec (cycled to depth), seeded
 * orthogonal parameters and inputs, batch samples, in format f.  A vijp that
 * loses rank still leaves its stored bytes measured (they are counted before
 * the sweep).  o (may be NULL): engine options, e.g. the checkpoint segment. */
VIJP_MUST_CHECK int vijp_memory_profile(const char *spec, size_t depth, size_t width, size_t batch, uint64_t seed,
                        const vijp_format *f, vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes,
                        vijp_error *err);
/* Deepest d <= depth with bytes[d-1] <= budget (0 when not even one layer fits). */
size_t vijp_memory_deepest(const size_t *bytes, size_t depth, size_t budget);

#endif

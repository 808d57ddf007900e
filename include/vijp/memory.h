/* Memory against depth (`vijp memory`): what each engine stores
 * between its passes for every depth d <= D, from one run at depth D (the
 * engines' ledgers replayed per layer, vijp_grads.stored_by_depth), and the
 * deepest network that fits a budget. */
#ifndef VIJP_MEMORY_H
#define VIJP_MEMORY_H

#include "vijp/api.h"
#include "vijp/engine.h"
#include "vijp/net.h"
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bytes[d-1] for d = 1..net->depth: engine e on net (a parsed net, e.g. a
 * vijp_net_template: only read), seeded orthogonal parameters where the net
 * gives none, seeded inputs, batch samples, in format f.  A vijp that loses
 * rank still leaves its stored bytes measured (they are counted before the
 * sweep).  Pure forward's are counted from its forward passes alone: what
 * it stores (h_0, each sample's fragments) does not depend on its tangents,
 * n × n a layer and sample, which it does not form here.  o (may be NULL):
 * engine options, e.g. the checkpoint segment. */
VIJP_API VIJP_MUST_CHECK int vijp_memory_profile(const vijp_net *net, size_t batch, uint64_t seed, const vijp_format *f,
                                                 vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes,
                                                 vijp_error *err);
/* Deepest d <= depth with bytes[d-1] <= budget (0 when not even one layer fits). */
VIJP_API size_t vijp_memory_deepest(const size_t *bytes, size_t depth, size_t budget);

/* Sizing a run before making it (the commands refuse one that cannot fit).
 * Bytes one value takes in this process (not as stored: an emulated bfloat16
 * value is held as a double): 8 for double and every format whose values
 * are doubles (vijp_format_values_double), the mpfr_t and its limbs for
 * mpfr:P (a matrix's values are one allocation). */
VIJP_API size_t vijp_resident_value_bytes(const vijp_format *f);
/* The peak bytes of one gradient comparison (vijp grad, one drift unit):
 * net's shapes (any parsed net), batch samples, engines in format f (run one after
 * another) and an MPFR backprop reference at ref_prec bits.  Counted from
 * the shapes: inputs, parameters and their gradients, every activation (the
 * most any engine stores, backprop's) and every rebuilt gradient, in f and
 * in the reference; the operators' own work arrays are not counted, so this
 * is a floor, not a ceiling. */
VIJP_API VIJP_MUST_CHECK int vijp_run_bytes_estimate(const vijp_net *net, size_t batch, const vijp_format *f,
                                                     long ref_prec, double *bytes, vijp_error *err);
/* Bytes this process can still get: the least of /proc/meminfo's
 * MemAvailable, the cgroup's memory.max less memory.current, and RLIMIT_AS
 * less the address space in use.  INFINITY when none is known; which bound
 * applied goes to what (may be NULL). */
VIJP_API double vijp_memory_available(char *what, size_t what_size);
/* Bytes this process may still map, by its limits alone: the least of
 * RLIMIT_AS less the address space in use (VmSize) and RLIMIT_DATA less the
 * data in use (VmData, which private mappings count since Linux 4.7);
 * INFINITY where neither is set. */
VIJP_API double vijp_address_space_left(void);

/* For a process that runs one study curve after another (the vijp command,
 * bench-drift): keep freed memory in the heap for the next curve instead of
 * handing it back to the kernel, which faults it in again page by page when
 * the next curve writes it (a dense:256 reference level is 0.8-1 GB of MPFR
 * values in 3-4 MB matrices: on this project's machines 1-3 s of a ~9 s
 * curve, in the kernel).  Blocks up to 32 MB come from the heap, and up to
 * 1 GB of free heap stays mapped.  glibc's mallopt; elsewhere nothing.
 * Process-wide: the library never calls it itself. */
VIJP_API void vijp_memory_keep_freed(void);
/* Its counterpart once the curves are done: hand the free memory of every
 * heap back to the kernel (glibc's malloc_trim), so that what follows (a
 * study's report) holds what it allocates, not what the curves' heaps kept
 * of them: by then a mix of blocks that depends on how the allocator
 * placed and freed them.  The free space at the top of the calling
 * thread's own heap goes too, which malloc_trim leaves there (a study's
 * curves run on threads).  Elsewhere nothing. */
VIJP_API void vijp_memory_return_freed(void);

#ifdef __cplusplus
}
#endif

#endif

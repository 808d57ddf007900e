/* Fork-join over contiguous ranges, for work whose results must not depend
 * on the number of threads (a format's threads, include/vijp/format.h).
 *
 * [0, n) is cut into parts consecutive ranges, part k being
 * [n·k/parts, n·(k+1)/parts); body runs once on each, on the calling thread
 * or a helper thread, whichever claims it first (fork.c: a helper the
 * system is slow to schedule leaves its parts to the caller), and the call
 * returns when every part is done.  That the results are the same bits for
 * any parts and any threads is the caller's to ensure: each output written
 * inside exactly one range, by the same operations whatever the range (each
 * call site says why its are).
 *
 * A team keeps its helper threads between runs, for work that forks many
 * times in a row (the LU elimination: one run per column); vijp_fork is a
 * team for one run.  Helpers run in the calling thread's MPFR exponent
 * range (MPFR keeps it per thread) and free their MPFR caches when they
 * end.  Where a thread cannot start, the caller runs its parts. */
#ifndef VIJP_BASE_FORK_H
#define VIJP_BASE_FORK_H

#include <stddef.h>

/* What one part computes: the indices [begin, end) of its range; part < the
 * run's parts, so that a body may keep per-part results in an array. */
typedef void vijp_fork_body(void *ctx, size_t part, size_t begin, size_t end);

/* At most this many threads (vijp drift's --jobs at most): a format's
 * threads field beyond it is read as this. */
#define VIJP_FORK_MAX_THREADS 256

/* Work, in the callers' unit (one multiply-add in a SIMD lane, the cheapest
 * operation any call site counts: about 0.1 to 0.5 ns), below which one more
 * part does not pay for itself, measured by bench-fork on the loaded 2-core
 * development machine: 50-60 µs to start a thread (vijp_fork), 12-15 µs to
 * wake a team's waiting helper and see it finish (vijp_team_run).  2^19
 * units are 50-250 µs, 2^16 7-30 µs: from about the cost up to ten times. */
#define VIJP_FORK_MIN_WORK ((double)(1 << 19))
#define VIJP_TEAM_MIN_WORK ((double)(1 << 16))

/* The parts worth running for n indices and work units of work on at most
 * threads threads (0 or 1: the caller's alone): min(threads, n,
 * work / min_work), at least 1; min_work one of the two above. */
size_t vijp_fork_parts(int threads, size_t n, double work, double min_work);

/* Range k of parts over [0, n): its first index (k = parts gives n). */
static inline size_t vijp_fork_begin(size_t n, size_t parts, size_t k)
{
    /* floor(n·k / parts) without forming n·k: n = q·parts + r */
    return n / parts * k + n % parts * k / parts;
}

/* Whether any of a run's per-part flags (an array of VIJP_FORK_MAX_THREADS,
 * zeroed before the run, flag[part] set by a body that met its case) is
 * set: what a serial loop's early return would have said. */
static inline int vijp_fork_any(const int *flag)
{
    int any = 0;
    for (int k = 0; k < VIJP_FORK_MAX_THREADS; k++) any |= flag[k];
    return any;
}

/* body over [0, n) in vijp_fork_parts(threads, n, work, VIJP_FORK_MIN_WORK) parts. */
void vijp_fork(int threads, size_t n, double work, vijp_fork_body *body, void *ctx);

typedef struct vijp_team vijp_team;
/* A team of threads − 1 helpers (as many as start) beside the caller. */
vijp_team *vijp_team_new(int threads);
/* body over [0, n) in min(parts, n, the team's threads) parts. */
void vijp_team_run(vijp_team *t, size_t n, size_t parts, vijp_fork_body *body, void *ctx);
/* Stops and joins the helpers; NULL is ignored. */
void vijp_team_free(vijp_team *t);

#endif

/* What vijp_drift_run computes from the rounded problem alone, kept across
 * runs (vijp_drift_memo, drift.h): the reference backprop at each precision
 * the validation visits, and the per-layer conditioning.  Formats that store
 * in the same format (bfloat16 and bfloat16+binary32; binary16 and
 * binary16+binary32; binary32 and tf32+binary32) round the problem to the
 * same values, so their curves need these once.  Internal to src/. */
#ifndef VIJP_DRIFT_MEMO_H
#define VIJP_DRIFT_MEMO_H

#include "vijp/drift.h"
#include "grad/problem.h"
#include "compare/cache.h"

/* Ties memo to this run's problem: kept when the problem is the one it holds
 * (same spec, depth, width and loss, and the same rounded X, T and θ, value
 * for value and sign of zero for sign of zero), emptied and re-keyed when not.
 * keyed 0: a memo for this run alone, emptied and not keyed. */
void vijp_drift_memo_bind(vijp_drift_memo *m, const vijp_grad_setup *s, const vijp_net *net, const vijp_problem *pf,
                          int keyed);

/* Backprop in mpfr:prec (dot products rounded once, oracles/dot.h) on the
 * bound problem: computed on first request, then the memo's (one run's memo
 * keeps only the levels from prec/2 on: the validation's last two).  *out
 * points into the memo, valid until it is bound to another problem or freed.
 * defer: the level is the lower one of the validation, which compares its
 * dense layers' inputs rather than their parameter gradients (memo.c):
 * those are not formed (their matrices empty) unless a comparison needs
 * them; 0: every matrix formed, a deferred one of a level found too. */
VIJP_MUST_CHECK int vijp_drift_memo_backprop(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf, long prec,
                                             int defer, const vijp_grads **out, vijp_error *err);

/* The validation accepts a level when, besides agreeing in norm, the level
 * below it agrees entry by entry to this many of f's ulps (drift.c). */
#define VIJP_DRIFT_REF_ULPS 0x1p-10

/* A dense layer's parameter gradient entry e's scale: Σ_b |g(r, b)|·|h(k, b)|
 * for ∂W(r, k) (e = r + k·m, W column-major), Σ_b |g(r, b)| for ∂b_r (e =
 * m·n + r), summed in double in this order: deterministic, and within
 * (B + 1)·2^-53 of the exact sum, which moves its ulp by at most one
 * binade at a power of two.  ctx a drift_term_scale; the validation
 * measures the entry in ulps at this scale where its plain measure fails
 * (memo.c: vijp_compare_ulps_at_scale's scale); exposed for the tests. */
typedef struct {
    const double *g, *h; /* |g| m × B, |h| n × B */
    size_t m, n, B;
} drift_term_scale;
double drift_dense_term_scale(const void *ctx, size_t e);

/* A run's own memo hands the heap's free pages back to the kernel each
 * time its comparisons have freed this many bytes of the lower level
 * (memo.c; drift/peak.c counts them). */
#define VIJP_DRIFT_MEMO_RETURN_BYTES (4.0 * 1024 * 1024)

/* The level at 2·lo_prec (computed, or a shared memo's), compared with
 * the level at lo_prec (which the caller has) layer by layer as its reverse
 * pass finishes each: *rel and *ulps the largest disagreement of lo's
 * matrices against it in f (vijp_compare_rel_ulps; where a dense layer's
 * parameter gradient at batch 2 or more exceeds VIJP_DRIFT_REF_ULPS, its
 * ulps at each entry's terms' scale instead: memo.c, param_ulps), and cache (1 + 2D:
 * ∇x, then g_i, then ∇θ_i) filled with its Σ ref², as the engines'
 * comparisons need them when it becomes the reference.  A run's own memo
 * frees lo's ∇θ_i as soon as it is compared, and drops the level. */
VIJP_MUST_CHECK int vijp_drift_memo_next_level(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf,
                                               long lo_prec, const vijp_format *f, vijp_compare_cache *cache,
                                               vijp_xnum *rel, vijp_xnum *ulps, vijp_error *err);

/* layer_done (NULL: none) sees the layer steps of every level m computes
 * from now on (vijp_engine_opts.layer_done): the drift meter's. */
void vijp_drift_memo_meter(vijp_drift_memo *m, void (*layer_done)(void *ctx, size_t done, size_t total), void *ctx);

/* Reference backprops computed over m's life, for the tests: shared runs add none. */
size_t vijp_drift_memo_computed(const vijp_drift_memo *m);

/* The reference at prec, rounded to the comparisons' precision q (when
 * narrower), into *ref whose matrices point to *fmt (the caller's).  A keyed
 * memo gives a copy and keeps its levels; one run's moves the level out and
 * drops the rest, keeping the copy of the problem for
 * vijp_drift_memo_return_theta. */
void vijp_drift_memo_reference(vijp_drift_memo *m, long prec, mpfr_prec_t q, vijp_grads *ref, vijp_format *fmt);

/* One run's memo, after vijp_drift_memo_reference: theta (D matrices,
 * released by the caller after vijp_drift_memo_copy_now) := θ in f again,
 * from the exact copy, value for value what vijp_net_params gave (the copy
 * holds those values, subnormals and signed zeros included); then the copy
 * is dropped.  Where the copy is in double its blocks are handed over, so
 * θ in f costs nothing beside it; else each layer is converted and its
 * copy freed.  The run then reads the drawn net's double θ no more
 * (drift/drawn.h). */
void vijp_drift_memo_return_theta(vijp_drift_memo *m, const vijp_net *net, const vijp_format *f, vijp_mat *theta);

/* The exact copy of the bound problem that the levels read, made now
 * rather than at the first level: the caller may then release pf's θ until
 * the reference is taken (one run's memo then hands it back:
 * vijp_drift_memo_return_theta). */
void vijp_drift_memo_copy_now(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf);
/* Whether that copy of a problem in format f is held in double (8 bytes a
 * value: f's values are doubles), else in MPFR at max(53, P) bits: for
 * the peak count (peak.c) and the tests. */
int vijp_drift_memo_copy_double(const vijp_format *f);

/* Conditioning (κ_i, the Lyapunov spread and whether κ_i was estimated, D
 * values each) of the bound problem: 1 and copied out when the memo has
 * it; 0 when not. */
int vijp_drift_memo_get_conditioning(const vijp_drift_memo *m, double *kappa, double *lyap_cum,
                                     unsigned char *estimated, size_t D);
void vijp_drift_memo_put_conditioning(vijp_drift_memo *m, const double *kappa, const double *lyap_cum,
                                      const unsigned char *estimated, size_t D);

#endif

/* The drift comparator (DESIGN §5): how far gradients rebuilt by an engine
 * (Moonwalk's vijp sweep) drift from exact backprop, layer by layer, in a
 * format, against a validated MPFR reference computed from the same rounded
 * weights and inputs (so the measured error is arithmetic error only). */
#ifndef VIJP_DRIFT_H
#define VIJP_DRIFT_H

#include "vijp/api.h"
#include "vijp/study.h"
#include "vijp/error.h"
#include "vijp/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Highest reference precision the validation may climb to (bits). */
#define VIJP_DRIFT_REF_PREC_MAX 8192
/* Errors above this are past first order (the error is as large as the value,
 * or on its way there): growth fits ignore them, bits-needed extrapolates. */
#define VIJP_FIT_CEILING 1e-1
/* Widest layer whose κ and Lyapunov step are computed exactly (full SVD,
 * Householder QR: O(W³) per layer and sample); wider ones are estimated from
 * an LU factorization (docs/drift.md).  128: up to there the exact path
 * costs about what the estimate does (one depth-256 dense:W,leaky curve in
 * double without its reference, exact against estimated: 0.066 against
 * 0.059 s at W = 64, 0.31 against 0.26 s at 128), while at 256 it took a
 * third of such a curve (1.79 against 1.23 s) and at 512 most of it.  The
 * default report (width 32) and the tests' studies stay exact. */
#define VIJP_DRIFT_COND_EXACT_MAX_WIDTH 128

/* Results a run computes from its rounded problem alone (the reference at
 * each precision the validation visits, the conditioning), kept for the
 * next run on the same problem: formats that store in the same format
 * (bfloat16 and bfloat16+binary32, binary16 and binary16+binary32, binary32
 * and tf32+binary32) round the problem to the same values.  The memo checks
 * that, value by value, and recomputes where the problem differs, so a run
 * gives the same curve with a memo as without.  One per thread. */
typedef struct vijp_drift_memo vijp_drift_memo;
VIJP_API vijp_drift_memo *vijp_drift_memo_new(void);
VIJP_API void vijp_drift_memo_free(vijp_drift_memo *m); /* NULL: nothing */

typedef struct {
    vijp_grad_setup problem;         /* network, seed, format, engine options */
    const vijp_engine_kind *engines; /* rebuilding engines measured beside backprop */
    size_t n_engines;
    long ref_prec_start; /* first reference precision; 0: max(64, min(2P, P + 64)) */
    long ref_prec_max;   /* 0: VIJP_DRIFT_REF_PREC_MAX */
    int skip_reference;  /* benchmarks only: no reference, every metric NaN */
    vijp_drift_memo *memo; /* NULL, or shared with the runs before and after this one (above) */
    size_t cond_exact_max_width; /* 0: VIJP_DRIFT_COND_EXACT_MAX_WIDTH */
    /* optional, for progress meters: called from the thread running the
     * curve as it goes, with the share of the curve's work done so far,
     * in [0, 1], 1 once the curve is complete: the reference's levels,
     * the engines and the conditioning counted layer by layer, weighed by
     * a cost model (src/drift/drift.c), not timed.  It goes back where the
     * curve finds more work: a reference level past the two planned.  The
     * curve sets problem.opts' layer_done (where on_progress is set) and
     * param_ready (where it has a reference) for its engines' runs: a
     * caller's own are not called. */
    void (*on_progress)(void *ctx, double done);
    void *progress_ctx;
} vijp_drift_setup;

typedef struct {
    vijp_engine_kind engine;
    vijp_metric x;            /* g_0 = ∇_x ℓ */
    vijp_metric *g, *theta;   /* per layer i = 1..D; theta is NaN for layers without parameters */
    vijp_xnum *bound;         /* first-order bound on g_i (Moonwalk engines only; NULL otherwise), see vijp_drift_run */
    size_t *stored_by_depth;  /* bytes the engine stores for the first d layers */
    vijp_xnum *reconstruction; /* reversible only: ‖h_i − ĥ_i‖/‖h_i‖ per layer input (vijp_reversible_reconstruction) */
    size_t rebuilt;           /* valid layers: D unless a vijp lost rank */
    char failure[256];        /* the engine's message when rebuilt < D */
    /* Where the run's gradients left the format's range (vijp_grads_check_finite's
     * message), "" if they did not.  Rebuilt cotangents that overflow are the
     * drift being measured, like a vijp that loses rank: the metrics there are
     * infinite or NaN (above every tolerance) and the commands say so in
     * words.  A forward pass that overflows leaves nothing to measure:
     * vijp_drift_run fails with VIJP_ERANGE. */
    char nonfinite[256];
} vijp_drift_run_result;

typedef struct {
    size_t depth;
    size_t n_runs;
    vijp_drift_run_result *runs; /* runs[0] is backprop in the format, then the setup's engines */
    double *kappa;               /* κ_i = σ_max/σ_min (nonzero σ) of J_i at the visited points */
    /* Finite-time Lyapunov spread of J_i ⋯ J_1 (Benettin QR iteration) after
     * layer i, in decades: max_k − min_k of Σ log10 |R_kk|.  NaN when a layer
     * is not square.  lyap_rate = lyap_cum[D−1] / D, decades per layer. */
    double *lyap_cum, lyap_rate;
    /* How kappa and lyap_cum were computed: "exact" where every layer is at
     * most cond_exact_max_width wide, else what was estimated, and how:
     * above that width κ_i is within [κ_i/1.25, κ_i] with probability
     * >= 0.999, and lyap_cum a lower bound on the full iteration's
     * (docs/drift.md). */
    char cond_method[192];
    /* The error the spread predicts: an independent rounding error of size u
     * injected at every layer j and amplified by the spread from j to i,
     * adding in root-sum-square (rounding errors as independent random
     * variables, Higham & Mary 2019):
     *   predicted_i = u (Σ_{j<=i} 10^(2 (lyap_cum_i − lyap_cum_{j−1})))^½,  lyap_cum_0 = 0,
     * and predicted_rate = vijp_growth_fit(predicted, D, INFINITY): the growth rate a
     * measured curve should show.  It includes the √i accumulation of the
     * local errors, which dominates where the spread is small. */
    vijp_xnum *predicted;
    double predicted_rate;
    long ref_prec_start, ref_prec; /* where validation started, and the precision used */
    /* Errors and the sizes they are held against keep their exponent at
     * every precision (vijp/xnum.h): mpfr:P's are near 2^-P. */
    vijp_xnum ref_agreement;       /* the last two reference precisions differ by this (relative) */
    vijp_xnum ref_target;          /* ... and had to agree to this */
    vijp_xnum u;                   /* unit roundoff of the stored values, vijp_format_unit_roundoff's:
                                    * 2^-8 for bfloat16 and bfloat16+binary32, 2^-4 for e4m3+binary32 */
} vijp_drift_curve;

/* One network, seed and format: run backprop and each engine in the format and
 * the reference; fill c (release with vijp_drift_curve_clear).
 *
 * Reference validation: backprop in mpfr:p from p = ref_prec_start, then at 2p,
 * 4p … until two successive precisions agree on g_0, every g_i and every ∇θ_i
 * to within 2^-P·2^-10 relative (P the format's precision: a mixed format's
 * accumulation) and 2^-10 ulps of the format elementwise, so every
 * reported metric of one ulp or more is accurate to 0.1%; the higher of the
 * two is the reference.  Fails with VIJP_EDOMAIN past ref_prec_max.
 *
 * First-order bound on an engine's g_i: e_i <= κ_i (e_{i−1} + n_i u_a + u_s)
 * (κ_i taken as COND_THETA·κ_est at each layer where it was estimated, as it
 * is where exact: cond_method says whether any was), with e_0 the engine's
 * measured g_0 error: the vijp of layer i amplifies its input error by at
 * most κ_i and adds a backward error of n_i u_a (an n_i-term dot product, or
 * a backward-stable solve with modest pivot growth, in the accumulation's
 * unit roundoff u_a = 2^-P) and, where the result is stored narrower (a
 * mixed format: u_s = u > u_a), its rounding to storage; u_s = 0 where
 * storage and accumulation are one format. */
VIJP_API VIJP_MUST_CHECK int vijp_drift_run(const vijp_drift_setup *s, vijp_drift_curve *c, vijp_error *err);
/* The first reference precision of a curve in format f: start when nonzero
 * (--ref-prec), else max(64, min(2P, P + 64)): one limb for the narrow
 * formats and binary32, 106 bits for double, P + 64 for wide mpfr:P.  The
 * default report's references lose at most 19 bits there (the additive
 * RevNet, gaussian init), against the 2^-10 u its validation asks (room
 * for 46 bits lost in bfloat16, 30 in binary32 and the +binary32 formats,
 * 43 in double, 54 in mpfr:113); where a study loses more, the validation
 * doubles once more. */
VIJP_API long vijp_drift_ref_prec_first(const vijp_format *f, long start);
/* Whether the validation can run at all: the first precision must double at
 * least once within cap (0: VIJP_DRIFT_REF_PREC_MAX).  VIJP_EINVAL otherwise,
 * with a message in the user's terms: the largest mpfr:P the cap validates,
 * or the smallest cap the format needs.  vijp_drift_run checks it first. */
VIJP_API VIJP_MUST_CHECK int vijp_drift_check_ref_prec(const vijp_format *f, long start, long cap, vijp_error *err);
/* The largest P whose mpfr:P reference, from max(64, min(2P, P + 64)),
 * doubles within cap (0: VIJP_DRIFT_REF_PREC_MAX): cap/2 − 64, cap/4 under
 * 256 (cap >= 128).  What vijp_drift_check_ref_prec accepts: mpfr:4032 by
 * default. */
VIJP_API long vijp_drift_largest_mpfr(long cap);
VIJP_API void vijp_drift_curve_clear(vijp_drift_curve *c);

/* Statistics of one error curve e_1..e_n (DESIGN §5), its errors and the
 * tolerance with their exponents at any precision (vijp/xnum.h). */

/* Least-squares slope of log10 e_i against i, in decades per layer, over the
 * layers with 0 < e_i <= ceiling (VIJP_FIT_CEILING for measured curves,
 * INFINITY for models that do not saturate); NaN with fewer than 4 such
 * layers.  *intercept (may be NULL) receives log10 e at i = 0 of the line. */
VIJP_API double vijp_growth_fit(const vijp_xnum *e, size_t n, double ceiling, double *intercept);
/* Deepest layer d such that every g_i and ∇θ_i error for i <= d is at most tol
 * (NaN counts as above tol); theta may be NULL; NaN in theta means "no
 * parameters" only where has_param[i] is 0 (has_param may be NULL: all have). */
VIJP_API size_t vijp_safe_depth(const vijp_xnum *g, const vijp_xnum *theta, const int *has_param, size_t n,
                                vijp_xnum tol);
/* Significand bits that keep max_{i<=n} e_i under tol, first-order: the error
 * scales with u = 2^-prec, so bits = prec + log2(max e / tol), rounded up.
 * When the curve leaves first order (max e > VIJP_FIT_CEILING, or non-finite),
 * max e is extrapolated from the growth fit and *extrapolated is set (when not NULL); NaN when
 * there is no fit.  An exact curve (all zeros) needs 2 bits. */
VIJP_API double vijp_bits_needed(const vijp_xnum *e, size_t n, long prec, vijp_xnum tol, int *extrapolated);
/* Default tolerance of a format: 2e-1 for e4m3, 3e-1 for e5m2, 1e-2 for
 * bfloat16 and binary16, 1e-4 for binary32, 1e-10 for double, 2^(-P/2) for
 * mpfr:P (below double's range past mpfr:2044); a mixed format its
 * storage's (tf32+binary32: 1e-2). */
VIJP_API vijp_xnum vijp_drift_default_tol(const vijp_format *f);

#ifdef __cplusplus
}
#endif

#endif

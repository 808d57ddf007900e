/* Gradient engines (DESIGN §2), written once against the layer interface and
 * run in any format. */
#ifndef VIJP_ENGINE_H
#define VIJP_ENGINE_H

#include "vijp/api.h"
#include "vijp/net.h"
#include "vijp/error.h"
#include "vijp/xnum.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    VIJP_ENGINE_BACKPROP,
    VIJP_ENGINE_MOONWALK,     /* mixed mode: reverse pass on input cotangents, then vijp sweep */
    VIJP_ENGINE_PURE_FORWARD, /* g_0 (and fragments) by jvps, then the same sweep */
    VIJP_ENGINE_REVERSIBLE,   /* backprop that rebuilds activations by inverting layers (RevNet style) */
    VIJP_ENGINE_CHECKPOINT,   /* backprop keeping every ⌈√D⌉-th input, recomputing segments */
    VIJP_ENGINE_COUNT
} vijp_engine_kind;

typedef struct {
    size_t depth;
    vijp_mat grad_x;       /* ∇_x ℓ = g_0, n_0 × B */
    vijp_mat *grad_theta;  /* grad_theta[i-1] = ∇θ_i summed over the batch, P_i × 1 */
    vijp_mat *g;           /* g[i-1] = g_i, the cotangent of h_i (m_i × B), i = 1..D */
    double loss;           /* ℓ summed over the batch, rounded to double */
    size_t stored_bytes;   /* peak bytes kept alive between passes, counted by the engine */
    /* stored_by_depth[d-1]: the peak the same engine would store on the first d
     * layers alone (the network cut after layer d), from the ledger's per-layer
     * entries of this run; stored_by_depth[D-1] == stored_bytes. */
    size_t *stored_by_depth;
    /* Layers whose g_i and ∇θ_i are valid, counted from layer 1: depth on
     * success; after a VIJP_ESINGULAR vijp failure, the layers rebuilt before it. */
    size_t rebuilt;
} vijp_grads;

VIJP_API VIJP_MUST_CHECK int vijp_engine_parse(const char *s, vijp_engine_kind *e, vijp_error *err);
/* A comma list of engine names, or "all" (every engine in
 * vijp_engine_kind's order), into out[0..*n-1], which has room for
 * VIJP_ENGINE_COUNT.  An empty item, an unknown name or a name given twice
 * is VIJP_EINVAL with a message. */
VIJP_API VIJP_MUST_CHECK int vijp_engine_parse_list(const char *list, vijp_engine_kind *out, size_t *n, vijp_error *err);
VIJP_API const char *vijp_engine_name(vijp_engine_kind e);

/* Run engine e on network net with parameters theta (from vijp_net_params),
 * inputs X (n_0 × B) and loss data T (m_D × B), all in one format, but
 * that an mpfr:P run (any P) also takes theta in double (format double:
 * every value exact in MPFR at 53 bits), which the layers read as it is
 * (the drift reference's copy of the problem; theta of another mpfr:Q
 * precision is read the same way).  theta of another kind of format
 * (vijp_format_kind) is VIJP_EINVAL otherwise.
 * On success out owns its matrices: release with vijp_grads_clear.  When a
 * vijp fails for lost rank (VIJP_ESINGULAR) out is kept, with out->rebuilt
 * saying how many layers are valid (a drift measurement, not a usage error),
 * and must still be cleared; on any other failure out is left empty. */
VIJP_API VIJP_MUST_CHECK int vijp_engine_run(vijp_engine_kind e, const vijp_net *net, const vijp_mat *theta,
                    const vijp_mat *X, const vijp_mat *T, vijp_grads *out, vijp_error *err);

/* Options of the engines that have any (zero: the default). */
typedef struct {
    size_t checkpoint_segment; /* checkpoint: layers per segment (0: ⌈√D⌉) */
    /* reversible, optional: called with every layer input the reverse pass
     * rebuilds by the layer's inverse (i from D − 1 down; not for inputs
     * the forward pass kept), as soon as it is rebuilt.  The drift study
     * measures the reconstruction error there instead of inverting every
     * layer a second time (vijp_reversible_reconstruction). */
    void (*rebuilt_input)(void *ctx, size_t i, const vijp_mat *x);
    void *rebuilt_ctx;
    /* optional, for progress meters: called after each layer of each of the
     * run's sweeps (forward, reverse, a checkpoint segment's recomputation,
     * Moonwalk's vijp sweep; pure forward: each sample's forward pass) with
     * the layer steps done so far (1, 2, …) and the run's total
     * (vijp_engine_layer_steps); done reaches total when the run succeeds. */
    void (*layer_done)(void *ctx, size_t done, size_t total);
    void *layer_ctx;
    /* optional: called once per layer i as soon as its parameter gradient
     * out->grad_theta[i] is final (backprop, reversible and checkpoint
     * from i = D − 1 down, Moonwalk and pure forward from 0 up), before
     * the next layer's is allocated.  It may read out and free
     * out->grad_theta[i] (vijp_mat_clear), which the run does not read
     * again; a freed ∇θ_i stays empty (0 rows) in the result, where
     * vijp_grads_check_finite skips it, also past a VIJP_ESINGULAR
     * failure (a reversible run's inverse may fail below layers it has
     * reported).  The drift study compares each layer with its reference
     * there and frees it, so that an engine's parameter gradients are
     * never all held at once. */
    void (*param_ready)(void *ctx, size_t i, vijp_grads *out);
    void *param_ctx;
} vijp_engine_opts;

/* The layer steps a run of engine e on a depth-layer network with batch
 * inputs reports to layer_done: backprop and reversible 2·depth, Moonwalk
 * 3·depth, pure forward (batch + 1)·depth, checkpoint 3·depth − the number
 * of segments (o may be NULL: the default segment). */
VIJP_API size_t vijp_engine_layer_steps(vijp_engine_kind e, size_t depth, size_t batch, const vijp_engine_opts *o);

/* vijp_engine_run with options (o may be NULL). */
VIJP_API VIJP_MUST_CHECK int vijp_engine_run_opts(vijp_engine_kind e, const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                         const vijp_mat *T, const vijp_engine_opts *o, vijp_grads *out, vijp_error *err);
VIJP_API void vijp_grads_clear(vijp_grads *g);
/* The results of a run must be finite: its inputs and parameters are checked
 * finite before it starts, so a NaN or ∞ in the loss (as a double), ∇x or a
 * valid g_i or ∇θ_i means the computation left its format's range.
 * VIJP_ERANGE, naming the first such value, if so. */
VIJP_API VIJP_MUST_CHECK int vijp_grads_check_finite(const vijp_grads *g, vijp_error *err);

/* The reversible engine's reconstruction error, as a diagnostic: recon[i] =
 * ‖h_i − ĥ_i‖/‖h_i‖ for the input of layer i+1, h_i from the forward pass
 * and ĥ_i what the engine rebuilds from h_D by inverting layers i+1 … D
 * (0 for inputs it keeps; at any exponent, vijp/xnum.h).  Keeps every h_i to compare, which the engine
 * itself never does. */
VIJP_API VIJP_MUST_CHECK int vijp_reversible_reconstruction(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, vijp_xnum *recon,
                                   vijp_error *err);

#ifdef __cplusplus
}
#endif

#endif

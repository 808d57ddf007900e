/* What the engines share: the stored-bytes ledger (inline here); loss, result
 * allocation and f′ by nested forward AD (common.c); and the engines
 * themselves, which the dispatcher (engine.c) calls.  Calls run one way:
 * engine.c → backprop.c, moonwalk.c, … → common.c. */
#ifndef VIJP_ENGINE_INTERNAL_H
#define VIJP_ENGINE_INTERNAL_H

#include "vijp/engine.h"
#include "vijp/error.h"
#include "watch.h"

/* Bytes kept alive between passes, counted where the engine allocates and
 * releases them (DESIGN §2); the peak is what the engine reports. */
typedef struct {
    size_t current, peak;
} vijp_ledger;

static inline void ledger_keep(vijp_ledger *l, size_t bytes)
{
    l->current += bytes;
    if (l->current > l->peak) l->peak = l->current;
}
static inline void ledger_release(vijp_ledger *l, size_t bytes) { l->current -= bytes; }
static inline size_t mat_bytes(const vijp_mat *a) { return vijp_mat_len(a) * a->fmt->value_bytes; }

/* The run's layer steps, reported to vijp_engine_opts.layer_done (when set)
 * as each one finishes; the dispatcher sets the total
 * (vijp_engine_layer_steps), each engine counts. */
typedef struct {
    void (*layer_done)(void *ctx, size_t done, size_t total);
    void *ctx;
    size_t done, total;
    /* Backprop only (watch.h): layer i's results are final (g_i, ∇θ_i;
     * ∇x too at i = 0); NULL for every other run. */
    vijp_backprop_watch grads_ready;
    vijp_backprop_param param_grad; /* NULL: backprop forms every ∇θ_i (watch.h) */
    void *ready_ctx;
    /* vijp_engine_opts.param_ready, where set */
    void (*param_ready)(void *ctx, size_t i, vijp_grads *out);
    void *param_ctx;
} engine_steps;

static inline void engine_step(engine_steps *s)
{
    s->done++;
    if (s->layer_done) s->layer_done(s->ctx, s->done, s->total);
}

/* ∇θ_i of out is final: the caller's param_ready may read and free it. */
static inline void engine_param_ready(engine_steps *s, size_t i, vijp_grads *out)
{
    if (s->param_ready) s->param_ready(s->param_ctx, i, out);
}

/* Stochastic rounding (mat.h): m holds tensor (role, layer, sample) of the
 * run whose input X names the run's stream (vijp_problem_round keys it with
 * the run's seed); nothing when X names none.  The same tensor in two
 * engines (h_i, g_i) gets the same bits, so their results differ by what
 * the engines compute, not by their draws. */
static inline void engine_key(vijp_mat *m, const vijp_mat *X, vijp_sr_role role, size_t layer, size_t sample)
{
    if (X->sr.keyed) m->sr = vijp_sr_key_of(X->sr.seed, role, layer, sample);
}

/* ---- common.c ---- */

/* Nested forward AD for a VIJP_RESIDUAL_DERIV layer: D := f′(X), the layer's
 * jvp of a tangent of ones (multiplying by 1 is exact in every format, so D
 * is f′ exactly as the layer's own vjp would form it, and G ⊙ D equals its
 * vjp bit for bit). */
VIJP_MUST_CHECK int engine_derivative(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *D, vijp_error *err);

/* Allocate out's matrices for net and the batch of X in X's format,
 * keyed as g_0 … g_D (engine_key); every ∇θ_i is left empty (0 × 0) for
 * the engine to allocate, with engine_param_grad_init (keyed ∇θ_i), when
 * it computes it: a caller's param_ready (or backprop's watch, watch.h)
 * frees what it has compared while later layers' are not yet allocated. */
VIJP_MUST_CHECK int engine_grads_init(vijp_grads *out, const vijp_net *net, const vijp_mat *X);
void engine_param_grad_init(vijp_grads *out, const vijp_net *net, const vijp_mat *X, size_t i, int packing);
/* ∇θ_i of layer i (allocated here) from its input h and the final g_i of
 * out, then handed to the caller's param_ready: Moonwalk's sweep, the
 * reversible and checkpoint engines' reverse passes (backprop's own may
 * have the drift memo form it, watch.h).  X: the run's input. */
VIJP_MUST_CHECK int engine_param_grad(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, size_t i,
                                      const vijp_mat *h, engine_steps *steps, vijp_grads *out, vijp_error *err);
/* g := ∇L(h) (overwrites g, same shape as h); returns the loss summed over the batch. */
double engine_loss(const vijp_net *net, const vijp_mat *h, const vijp_mat *T, vijp_mat *g);

/* ---- the engines (moonwalk.c, backprop.c, checkpoint.c, reversible.c) ---- */

/* Forward sweep shared by both Moonwalk engines: from g_0 = out->grad_x and the
 * fragments frag[i] (released from the ledger as they are consumed), rebuild
 * every g_i by the vijp and every ∇θ_i. */
VIJP_MUST_CHECK int engine_moonwalk_sweep(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                          vijp_mat *frag, vijp_ledger *ledger, engine_steps *steps, vijp_grads *out, vijp_error *err);

VIJP_MUST_CHECK int engine_backprop(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                    engine_steps *steps, vijp_grads *out, vijp_error *err);
VIJP_MUST_CHECK int engine_moonwalk(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                    engine_steps *steps, vijp_grads *out, vijp_error *err);
/* Layers per segment: given, at most D, or ⌈√D⌉ when given is 0. */
size_t engine_checkpoint_segment(size_t D, size_t given);
/* segment: as engine_checkpoint_segment's given. */
VIJP_MUST_CHECK int engine_checkpoint(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                      size_t segment, engine_steps *steps, vijp_grads *out, vijp_error *err);
VIJP_MUST_CHECK int engine_reversible(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                      const vijp_engine_opts *o, engine_steps *steps, vijp_grads *out, vijp_error *err);
VIJP_MUST_CHECK int engine_pure_forward(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                        const vijp_mat *T, engine_steps *steps, vijp_grads *out, vijp_error *err);

#endif

/* Backprop that hands each layer's finished gradients to its caller as the
 * reverse pass goes, for the drift study's validated reference
 * (src/drift/memo.c): a level compares layer i of its gradients with the
 * level below and frees that level's ∇θ_i before ∇θ_(i−1) is allocated, so
 * two full levels are never held at once.  Internal to src/ (the library
 * does not export it). */
#ifndef VIJP_ENGINES_WATCH_H
#define VIJP_ENGINES_WATCH_H

#include "vijp/engine.h"
#include "vijp/layer.h"

/* Called once per layer, i = D−1 down to 0, when g_i and ∇θ_i of out are
 * final (at i = 0 also ∇x); ∇θ_j for j < i are not yet allocated.  It may
 * read out, and replace those final matrices, and nothing else, by packed
 * ones of the same values (vijp_mat_pack): the reverse pass reads none of
 * them again (layer i's step has formed g_(i−1) and ∇θ_i from g_i).  In an
 * mpfr:P format ∇θ_i is held with its limbs already in a packed block
 * (format/packed.h, vijp_mat_init_packing), which vijp_mat_pack keeps. */
typedef void (*vijp_backprop_watch)(void *ctx, size_t layer, vijp_grads *out);

/* Called, where set, for layer i before backprop forms ∇θ_i itself, with
 * the layer's input h_i and its cotangent g_i (final, MPFR-held): it may
 * set grad_theta (unallocated) to ∇θ_i, packed, with the values the
 * layer's vjp_param would give and the packing watch's rounding (the
 * drift memo's batch-1 dense layers, formed straight into their held
 * block), and return 1; 0: backprop forms it as before. */
typedef int (*vijp_backprop_param)(void *ctx, size_t layer, const vijp_layer *L, const vijp_mat *h, const vijp_mat *g,
                                   vijp_mat *grad_theta);

/* vijp_engine_run_opts(VIJP_ENGINE_BACKPROP, …, o, …) (o may be NULL) with
 * watch called as above, and param (NULL: none) before each layer's
 * parameter gradient: the same checks, the same results bit for bit.  o's
 * param_ready must be NULL: it would free ∇θ_i before watch sees it. */
VIJP_MUST_CHECK int vijp_engine_backprop_watched(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                                                 const vijp_mat *T, const vijp_engine_opts *o, vijp_backprop_watch watch,
                                                 vijp_backprop_param param, void *ctx, vijp_grads *out,
                                                 vijp_error *err);

#endif

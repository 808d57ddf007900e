/* One gradient comparison: a network, engines and a format, measured against a
 * validated-precision MPFR backprop reference (what `vijp grad` runs). */
#ifndef VIJP_STUDY_H
#define VIJP_STUDY_H

#include "vijp/api.h"
#include "vijp/engine.h"
#include "vijp/error.h"
#include "vijp/xnum.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *spec;     /* a spec, or a JSON net file (vijp_net_spec_is_json) */
    const char *input;    /* NULL, or a .npy [batch, width] of inputs replacing the seeded ones */
    const char *target;   /* NULL, or a .npy [batch, output width] of loss data (square: targets; linear: c) */
    const char *weights;  /* NULL, or a safetensors file of parameters (vijp_net_load_weights) */
    size_t depth, width, batch;
    uint64_t seed;
    vijp_init init;
    vijp_loss_kind loss;
    vijp_format fmt;
    vijp_engine_opts opts;
    /* NULL, or spec already parsed for this run (vijp_net_template, with
     * depth and width): copied instead of parsing spec again. */
    const vijp_net *net;
} vijp_grad_setup;

typedef struct {
    vijp_engine_kind engine;
    double loss;
    double grad_x_norm, grad_theta_norm;
    size_t stored_bytes;
    /* errors at any exponent (vijp/xnum.h): mpfr:P's are near 2^-P */
    vijp_xnum input_grad_rel_err;     /* ‖g_0 − ref‖/‖ref‖ */
    vijp_xnum param_grad_rel_err_max; /* max over layers with parameters */
    vijp_xnum *rel_err_per_layer;     /* g_i for i = 1..D (depth entries) */
    long ref_prec;                  /* bits of the reference */
} vijp_grad_result;

/* The reference of a comparison runs at max(256, 2P) bits, which must be a
 * precision MPFR formats allow (VIJP_PREC_MAX): so mpfr:P up to P =
 * VIJP_GRAD_PREC_MAX.  vijp_grad_check_format says so in those terms
 * (VIJP_EINVAL); vijp_grad_compare checks it first. */
#define VIJP_GRAD_PREC_MAX (VIJP_PREC_MAX / 2)
VIJP_API VIJP_MUST_CHECK int vijp_grad_check_format(const vijp_format *f, vijp_error *err);

/* Build and initialise the network, round parameters, inputs and loss data to
 * the format, run engine e in it and compare with an MPFR backprop reference at
 * max(256, 2P) bits computed from the same rounded values. */
VIJP_API VIJP_MUST_CHECK int vijp_grad_compare(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r,
                      vijp_error *err);
/* The same, handing the engine's own gradients over in *keep when keep is
 * not NULL (in s->fmt, whose address they keep: s must outlive them; release
 * with vijp_grads_clear).  On failure *keep is left empty. */
VIJP_API VIJP_MUST_CHECK int vijp_grad_compare_keep(const vijp_grad_setup *s, vijp_engine_kind e, vijp_grad_result *r,
                                           vijp_grads *keep, vijp_error *err);

/* A comparison's progress, for a meter: step is called after every layer
 * step of every run (vijp_engine_opts.layer_done) with the run, k for
 * engines[k] and n for the reference, and that run's steps done and total
 * (vijp_engine_layer_steps); done reaches total when the run succeeds. */
typedef struct {
    void (*step)(void *ctx, size_t run, size_t done, size_t total);
    void *ctx;
} vijp_grad_progress;

/* engines[0 .. n−1] each compared, as by vijp_grad_compare, with one
 * reference computed once (the same for every engine of one setup): run
 * after engines[0], so a first engine that fails costs none.  results[k]
 * is bit for bit what vijp_grad_compare(s, engines[k], …) gives.  Runs go
 * in order and stop at the first failure, counted as engines[0]'s when the
 * reference fails.  compared (NULL allowed) receives how many results are
 * filled: n on success, on failure the index of the engine that failed.
 * Release every results[k] with vijp_grad_result_clear, on success or
 * failure.  keep_first: NULL, or engines[0]'s own gradients as
 * vijp_grad_compare_keep's keep (left empty on any failure).  progress:
 * NULL, or called as above; it takes the place of s->opts.layer_done. */
VIJP_API VIJP_MUST_CHECK int vijp_grad_compare_engines(const vijp_grad_setup *s, const vijp_engine_kind *engines,
                                                       size_t n, vijp_grad_result *results, size_t *compared,
                                                       vijp_grads *keep_first, const vijp_grad_progress *progress,
                                                       vijp_error *err);
VIJP_API void vijp_grad_result_clear(vijp_grad_result *r);

#ifdef __cplusplus
}
#endif

#endif

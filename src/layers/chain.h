/* The residual functions of coupling blocks (additive, affine): two chains
 * of existing layers (F and G; S and T), each mapping the half width h to h
 * with widths free inside, parsed from "ITEM+ITEM…" (one list for both) or
 * built from a JSON net's two lists, each chain with its own parameters
 * (the layers' own, in order). */
#ifndef VIJP_LAYERS_CHAIN_H
#define VIJP_LAYERS_CHAIN_H

#include "vijp/catalogue.h"
#include "vijp/error.h"
#include "layer/states.h" /* vijp_chain_state, read by the coupling accessors */

/* Parse "ITEMS" or "ITEMS;ITEMS" (F's chain, then G's; one list is both),
 * each list "ITEM+ITEM…" of at most VIJP_SUB_MAX items of any type with
 * MPFR operators but a coupling block, mapping h to h (each item parsed at
 * the width the one before it gives), into a new L->state; `who` names the
 * block in messages. */
VIJP_MUST_CHECK int vijp_chain_parse(vijp_layer *L, const char *items, size_t h, const char *who, vijp_error *err);
void *vijp_chain_state_copy(const void *state);
void vijp_chain_state_free(void *state);
/* "ITEM+ITEM…" back, or "ITEMS;ITEMS" where the chains differ (the
 * chains' part of a spec). */
int vijp_chain_print(const vijp_layer *L, char *buf, size_t size);
/* Chain c's length (c = 0: F or S, 1: G or T) and its sub-layer k. */
#define vijp_chain_n(L, c) (((const vijp_chain_state *)(L)->state)->n[c])
#define vijp_chain_sub(L, c, k) (&((const vijp_chain_state *)(L)->state)->sub[c][k])
/* Parameters of chain c's layers before its layer k (k = n: the chain's). */
size_t vijp_chain_params(const vijp_layer *L, int c, size_t k);
/* Where chain c's parameters start in the block's θ (F's first, then G's),
 * and the block's parameter count. */
size_t vijp_chain_offset(const vijp_layer *L, int c);
size_t vijp_chain_param_count(const vijp_layer *L);
/* Units per sample of chain c's activations after its layers (acts[1 … n]). */
size_t vijp_chain_units(const vijp_layer *L, int c);
/* Seeded initialisation: F's layers in order, then G's. */
VIJP_MUST_CHECK int vijp_chain_init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta);
/* acts[k+1] = layer k (acts[k]) of chain c, k < n (acts[k]: layer k's input
 * width × B); th: the block's parameters. */
void vijp_chain_forward(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B);
/* out = J·u (transpose 0) or u·J (transpose 1) through chain c at acts (u
 * and out h × B; u is not changed); th: the block's parameters. */
void vijp_chain_apply(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                      const double *u, double *out, int transpose);
/* Chain c's parameter gradient for output cotangent g (h × B), into its
 * part of the block's gradient gth. */
void vijp_chain_vjp_param(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                          const double *g, double *gth);

/* J (n × n) at x as the jvps of the unit vectors, for layers whose Jacobian
 * is only available through their jvp (the coupling blocks). */
void vijp_jacobian_by_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J,
                          void (*jvp)(const vijp_layer *, const vijp_kctx *, const double *, const double *, size_t,
                                      const double *, double *));

/* The halves of a batch (column b: X[b·2h …]) into two h × B blocks, and back. */
void vijp_halves_split(size_t h, size_t B, const double *X, double *a, double *b);
void vijp_halves_join(size_t h, size_t B, const double *a, const double *b, double *Y);

#endif

/* The residual functions of coupling blocks (additive, affine): a chain of
 * existing layers at half width, its items parsed from "ITEM+ITEM…", with
 * one block of parameters per chain (the layers' own, in order). */
#ifndef VIJP_LAYERS_CHAIN_H
#define VIJP_LAYERS_CHAIN_H

#include "vijp/catalogue.h"
#include "vijp/error.h"
#include "layer/states.h" /* vijp_chain_state, read by the coupling accessors */

/* Parse "ITEM+ITEM…" (at most VIJP_SUB_MAX items, each of width h → h, any
 * type with MPFR operators but a coupling block) into a new L->state; `who`
 * names the block in messages. */
VIJP_MUST_CHECK int vijp_chain_parse(vijp_layer *L, const char *items, size_t h, const char *who, vijp_error *err);
void *vijp_chain_state_copy(const void *state);
void vijp_chain_state_free(void *state);
/* "ITEM+ITEM…" back (the chain's part of a spec). */
int vijp_chain_print(const vijp_layer *L, char *buf, size_t size);
/* The chain's length and sub-layer k (width h = L->in/2). */
#define vijp_chain_n(L) (((const vijp_chain_state *)(L)->state)->n)
#define vijp_chain_sub(L, k) (&((const vijp_chain_state *)(L)->state)->sub[k])
/* Parameters of the chain's layers before layer k (k = n: the chain's). */
size_t vijp_chain_params(const vijp_layer *L, size_t k);
/* Seeded initialisation of `chains` consecutive parameter blocks. */
VIJP_MUST_CHECK int vijp_chain_init(const vijp_layer *L, size_t chains, vijp_init in, vijp_rng *rng, double *theta);
/* acts[k+1] = layer k (acts[k]), k < n (each h × B); th: the chain's parameters. */
void vijp_chain_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B);
/* out = J·u (transpose 0) or u·J (transpose 1) through the chain at acts;
 * tmp: h × B scratch; u is not changed. */
void vijp_chain_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                      const double *u, double *out, double *tmp, int transpose);
/* The chain's parameter gradient for output cotangent g (gth: the chain's block). */
void vijp_chain_vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                          const double *g, double *gth, double *t1, double *t2);

/* J (n × n) at x as the jvps of the unit vectors, for layers whose Jacobian
 * is only available through their jvp (the coupling blocks). */
void vijp_jacobian_by_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J,
                          void (*jvp)(const vijp_layer *, const vijp_kctx *, const double *, const double *, size_t,
                                      const double *, double *));

/* The halves of a batch (column b: X[b·2h …]) into two h × B blocks, and back. */
void vijp_halves_split(size_t h, size_t B, const double *X, double *a, double *b);
void vijp_halves_join(size_t h, size_t B, const double *a, const double *b, double *Y);

#endif

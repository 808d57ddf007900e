/* The smooth activations' error bounds as the tests check them (shared by
 * t-activations.c and t-kernels.c): each src/layers/<name>.c states
 * |f̂ − f| <= Kf(x)·u|f| and |f̂′ − f′| <= K1(x)·u|term1| + K2(x)·u|term2|,
 * f′ = term1 + term2 the dual-number sum (one term for sigmoid, softplus,
 * tanh); the terms recomputed here in MPFR at ORACLE_PREC bits from their
 * definitions, with the constants at x. */
#ifndef VIJP_TESTS_ACTTERMS_H
#define VIJP_TESTS_ACTTERMS_H

#include "testutil.h"
#include <mpfr.h>

#define ORACLE_PREC 128
#define NACTS 6

typedef void (*terms_fn)(mpfr_t t1, mpfr_t t2, double *kf, double *k1, double *k2, double x);
typedef struct {
    const char *name;
    terms_fn terms;
    int has_zero; /* f′ vanishes at an isolated x0 < 0 */
} act_terms;
/* sigmoid, softplus, tanh, silu, gelu, mish (the kernel table's order) */
extern const act_terms acts[NACTS];

/* f′(x) by the 128-bit oracle, rounded to double. */
double oracle_deriv(const char *name, double x);
/* The zero of f′ near layerfix's, to adjacent doubles. */
double locate_zero(const char *name);
/* The i-th sample point of an activation whose f′ vanishes at x0 (NaN: none). */
double sample_point(vijp_rng *rng, long i, double x0);

#endif

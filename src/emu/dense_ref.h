/* The drift study's reference products of the dense layer, fast and bit for
 * bit vo_dot's (src/emu/dense_ref.c): for an exact-dots MPFR format
 * (vo_dot_fused) of at most VIJP_DDREF_MAX_PREC bits, each output of W x + b,
 * W u, Wᵀ g and (batch >= 2) Σ_j g xᵀ is computed in double-, triple-double,
 * four or five levels (src/ddot/ddot.h) with a rigorous bound and accepted when
 * every number within the bound rounds to the same P-bit number (Ziv's
 * test); otherwise,
 * and for every format or input the doubles cannot hold exactly, the
 * oracle's vo_dot computes it.  docs/internals.md, "The reference's fast
 * products", says where it applies and why its results are vo_dot's. */
#ifndef VIJP_EMU_DENSE_REF_H
#define VIJP_EMU_DENSE_REF_H

#include "vijp/layer.h"
#include <mpfr.h>

/* Up to VIJP_DD_PREC bits a p-bit number is a double-double (53 + 53
 * bits), up to VIJP_TD_PREC a triple-double (3·53), up to
 * VIJP_DDREF_MAX_PREC four doubles (4·53: the 212-bit level that validates
 * a double study's reference); above, the fast path never runs. */
#define VIJP_DD_PREC 106
#define VIJP_TD_PREC 159
#define VIJP_DDREF_MAX_PREC 212

/* What the fast path did in one call (the tests' view of it). */
typedef struct {
    size_t outputs;   /* outputs accepted by the rounding test */
    size_t fallbacks; /* outputs computed by vo_dot instead: bound too wide, a rounding boundary within it */
    int whole_oracle; /* 1: the whole call ran the oracle (format, an input not exactly in doubles, the hook) */
    double bound_scale; /* 0 or 1: the bound as derived; tests only: < 1 breaks it, +inf forces every fallback */
    int any_size;       /* tests only: the fast path also below the sizes where it pays (VIJP_DDREF_MIN_*) */
} vijp_ddref_stats;

/* Below these the fast path's per-call and per-output costs outweigh what
 * it saves (bench-ddref: at 16 terms it is no faster than vo_dot, at 64
 * 2.5x; the parameter gradient's 2B terms per output pay for its rounding
 * test from batch 8), and vo_dot runs: the same bits either way. */
#define VIJP_DDREF_MIN_TERMS 32
#define VIJP_DDREF_MIN_BATCH 8

/* The work, in fork.h's units, of the fast path's steps that run over
 * ranges on the format's threads before the products: splitting an input
 * value into double parts (20-50 ns: the low end), of which there are
 * n·B (forward, jvp), m·B (vjp) or (m + n)·B (the parameter gradient);
 * and a value of the vjp's copy of Wᵀ (about 2 ns with its first touch),
 * over ranges of W's m rows. */
#define VIJP_DDREF_SPLIT_WORK 128.0
#define VIJP_DDREF_TRANSPOSE_WORK 16.0

/* The dense type's mp operators (layers/dense.c's ops_mp): the fast path
 * where it applies, else vo_dense_* (oracles/oracles.h), with the same
 * contracts. */
void vijp_ref_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vijp_ref_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f);
void vijp_ref_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f);
void vijp_ref_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f);

/* The same with θ held as doubles (th: W column-major, then b, as the
 * drift memo's copy holds them: src/drift/memo.c), the other operands
 * MPFR: the layer interface's MPFR route for such a θ (layer/emu_native.h's
 * mp_* members), without an MPFR twin of W.  The results are bit for bit
 * those of the operators above on an MPFR θ holding the same values (the
 * one path both run: dense_ref.c).  VIJP_EUNSUPPORTED, nothing written,
 * for a format whose dot products are not rounded once (vo_dot_fused):
 * then the caller gives the operators above an MPFR θ. */
int vijp_ref_dense_forward_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Y,
                             const vijp_format *f);
int vijp_ref_dense_jvp_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                         const vijp_format *f);
int vijp_ref_dense_vjp_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                         const vijp_format *f);
int vijp_ref_dense_vjp_param_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                               const vijp_format *f);

/* ∂W alone of the parameter gradient (Gw: m × n, column-major, as the
 * first m·n values of vijp_ref_dense_vjp_param_d's Gt, bit for bit: each
 * value is vo_dot's RN_P of its exact sum, whatever else the call holds).
 * The drift reference forms a layer's ∂W a block of columns at a time
 * this way, each block's inputs the matching rows of X (L's in set to the
 * block's width), straight into its packed block (src/drift/outer.c).
 * VIJP_EUNSUPPORTED, nothing written, as the _d operators. */
int vijp_ref_dense_weight_grad(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gw, const vijp_format *f);

/* The same with what happened in st (bound_scale read from it first): the
 * tests.  op: 0 forward, 1 jvp (X unused, U the input), 2 vjp (Gy → Gx in
 * out), 3 vjp_param (X, Gy → ∂W in out; the bias gradient by vo_dot);
 * _op_d with θ's doubles (th unread for vjp_param). */
void vijp_ref_dense_op(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                       const vijp_format *f, vijp_ddref_stats *st);
int vijp_ref_dense_op_d(int op, const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                        const vijp_format *f, vijp_ddref_stats *st);

/* r := the P-bit (P = r's precision) rounding to nearest, ties to even, of
 * a number known to lie within bound of y[0] + y[1] + y[2] + y[3], when
 * every number there rounds to the same nonzero P-bit number; returns 1
 * then, else 0 (r unspecified).  The fast path's test, alone: the tests. */
int vijp_ddref_round(mpfr_ptr r, const double y[4], double bound);
/* The same on y[0] + ... + y[parts − 1], parts <= 5 (the five levels'). */
int vijp_ddref_round_parts(mpfr_ptr r, const double *y, int parts, double bound);

/* x = d[0] + ... + d[parts − 1] exactly, each part the remainder so far
 * rounded to nearest (the split the fast path loads its inputs by), from
 * x's limbs; 1 where every part is a normal double and they sum to x
 * exactly, 0 (d unspecified) otherwise, where the fast path splits x in
 * MPFR.  64-bit limbs only (0 elsewhere). */
int vijp_ddref_split_limbs(mpfr_srcptr x, double *d, int parts);

#endif

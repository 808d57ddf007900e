/* A batch of vectors in one format: rows × cols, column-major, column j is sample j.
 * Exactly one of d (double), m (MPFR at the format's precision) or packed
 * (below) is set.
 * vijp_mat_init sets d for every format whose values are all doubles
 * (vijp_format_values_double, vijp/format.h: double, and binary32, binary16,
 * bfloat16, e4m3, e5m2 and every mixed format, MX, tensor-core, tensor-scaled,
 * ":sr" and ":ftz" included): 8 bytes a value, each the format's value
 * exactly.  m only for mpfr:P.  (Before, d meant the format double and m
 * every other: code that told the format by which one is set must ask
 * fmt->kind instead.)  Every helper below takes either holding in any
 * format and rounds in the format, not in double; a matrix built by hand
 * with m in an emulated format still works. */
#ifndef VIJP_MAT_H
#define VIJP_MAT_H

#include "vijp/api.h"
#include <stddef.h>
#include <stdint.h>
#include <mpfr.h>
#include "vijp/format.h"
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stochastic rounding's stream (formats with ":sr", format.h's store_sr;
 * docs/formats.md): the run's seed and the tensor a matrix holds, which
 * with an element's index (column-major, row + column·rows) name the
 * random bits its stored value is rounded with.  keyed 0: no stream, and a
 * stored value is rounded to nearest.  The caller that allocates a
 * matrix an operator writes names it (the engines: vijp_sr_key_of), so the
 * bits depend on the run and the tensor only, never on threads or ranks. */
typedef enum {
    VIJP_SR_OUTPUT = 1, /* a layer's output h_i (layer i), forward */
    VIJP_SR_COTANGENT,  /* g_i, the cotangent of h_i (i = 0: ∇x) */
    VIJP_SR_PARAM_GRAD, /* ∇θ_i */
    VIJP_SR_FRAGMENT,   /* layer i's fragment (Moonwalk) */
    VIJP_SR_TANGENT,    /* a jvp's output at layer i (pure forward) */
    VIJP_SR_REBUILT,    /* a layer input rebuilt by the inverse (reversible, Moonwalk) */
    VIJP_SR_BASIS       /* layer i's cokernel basis (pure forward) */
} vijp_sr_role;

typedef struct {
    uint64_t seed, tensor;
    int keyed;
} vijp_sr_key;

/* The stream of tensor (role, layer, sample) in a run of seed (sample: 0
 * for a whole batch, 1 + j for sample j alone). */
VIJP_API vijp_sr_key vijp_sr_key_of(uint64_t seed, vijp_sr_role role, size_t layer, size_t sample);

/* A packed block: an mpfr:P matrix's values without their mpfr_t headers
 * (each value its significand's limbs and 16 bits of sign, kind and
 * exponent: 18 bytes at 128 bits against an MPFR-held value's 48),
 * read only.  Opaque; made by vijp_mat_pack and vijp_mat_pack_copy below. */
typedef struct vijp_packed vijp_packed;

typedef struct {
    size_t rows, cols;
    const vijp_format *fmt;
    double *d;
    mpfr_t *m;
    vijp_sr_key sr; /* zero (unkeyed) from vijp_mat_init; see above */
    /* Last, so that the fields above keep their offsets (a plugin built
     * before it reads a library-made matrix as it did). */
    vijp_packed *packed;
} vijp_mat;

VIJP_API void vijp_mat_init(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt);
/* As vijp_mat_init, but in the format double the entries are unspecified
 * until written (every other format's values are zero, as there): for a result that an operator
 * overwrites whole, where zeroing it first would be a pass over memory for
 * nothing (every layer operator overwrites its output, vijp/layer.h; `vijp
 * check-layer`'s overwrites-outputs check holds a layer to it).  Builds
 * with VIJP_POISON_UNSET (make SANITIZE=1) fill them with NaN instead, so
 * that a read before the write shows in every result it reaches. */
VIJP_API void vijp_mat_init_unset(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt);
VIJP_API void vijp_mat_clear(vijp_mat *a);
/* Packed matrices: the drift study's reference (src/drift/memo.c) holds
 * millions of mpfr:P values that are only read once computed; packed, each
 * costs its significand's limbs and 2 bytes (sign; kind: zero, NaN, Inf or
 * regular; a regular value's exponent, or where it lies outside −16384…16379 a
 * mark that the block's side array holds it in 32 bits) instead of an
 * mpfr_t and its limbs.  The
 * values are exactly the MPFR ones, signed zeros and NaN's sign included.
 * Only the library makes them:
 *   vijp_mat_pack(a)          a (mpfr:P, MPFR-held) packed in place, exactly;
 *                             a no-op on a packed a;
 *   vijp_mat_pack_rounded(a, fmt)  a (MPFR-held or packed) rounded to fmt
 *                             (mpfr:q), to nearest as mpfr_set rounds, then
 *                             packed in place; a->fmt := fmt;
 *   vijp_mat_pack_copy(dst, src, fmt)  dst := src rounded so, packed (dst
 *                             uninitialised; src unchanged).
 * Exponents beyond 32 bits (MPFR's range widened past its default) abort.
 * Read-only: vijp_mat_clear frees it, vijp_mat_len, vijp_mat_get_d,
 * vijp_mat_get_mpfr, vijp_mat_check_finite read it, as do a source of
 * vijp_mat_convert, vijp_mat_copy and vijp_mat_copy_range, and every metric
 * (vijp/metrics.h); every other helper here (those that write, and the
 * arithmetic ones: vijp_mat_sub, _mul_elem, _tdot) refuse a packed
 * matrix: writing one, or passing one where it is not read, is a
 * programming error, reported and stopped (abort).  The layer operators
 * and the engines take MPFR- and double-held matrices only. */
VIJP_API void vijp_mat_pack(vijp_mat *a);
VIJP_API void vijp_mat_pack_rounded(vijp_mat *a, const vijp_format *fmt);
VIJP_API void vijp_mat_pack_copy(vijp_mat *dst, const vijp_mat *src, const vijp_format *fmt);
VIJP_API size_t vijp_mat_len(const vijp_mat *a);
VIJP_API void vijp_mat_zero(vijp_mat *a);
/* a := b (same shape and format; shapes that differ, like an index or a
 * range past a matrix's end in the helpers below, are a programming error:
 * reported on stderr and stopped, abort, as writing a packed matrix). */
VIJP_API void vijp_mat_copy(vijp_mat *a, const vijp_mat *b);
/* Round double data into a (emulated formats round to nearest even with subnormals). */
VIJP_API void vijp_mat_set_d(vijp_mat *a, const double *src);
/* a[i] rounded to double (nearest). */
VIJP_API double vijp_mat_get_d(const vijp_mat *a, size_t i);
/* a[i] := x rounded to the format (mixed formats: once, to the storage). */
VIJP_API void vijp_mat_set_entry_d(vijp_mat *a, size_t i, double x);
/* Exact (or correctly rounded to prec) copy into MPFR values of precision prec.
 * out must have vijp_mat_len(a) entries, initialised by the caller. */
VIJP_API void vijp_mat_get_mpfr(const vijp_mat *a, mpfr_t *out);
/* Return VIJP_EDOMAIN if any entry is NaN or Inf. */
VIJP_API VIJP_MUST_CHECK int vijp_mat_check_finite(const vijp_mat *a, const char *what, vijp_error *err);



/* Round every entry to the format's storage (mixed formats, format.h; a
 * no-op for the others).  The layer operators' results get this in
 * vijp_layer_*; so do the helpers below. */
VIJP_API void vijp_mat_store(vijp_mat *a);
/* What a stored tensor is, for the one format that stores the two apart
 * (fp8+binary32, format.h: forward values E4M3, gradients E5M2); every
 * other format stores both alike.  Forward: layer outputs, tangents,
 * inverses, Jacobians, inputs, parameters.  Gradient: cotangents, parameter
 * gradients, fragments, vijp outputs (vijp_layer_vjp, _vjp_param,
 * _fragment, _vijp), the results of vijp_mat_sub, vijp_mat_mul_elem and
 * vijp_mat_tdot below, whose every use is one (the loss gradient, g ⊙ f′,
 * Tᵀg), and a cotangent given as data (vijp eval's, vijp_mat_set_d_as). */
typedef enum { VIJP_STORE_FORWARD = 0, VIJP_STORE_GRADIENT } vijp_store_role;
/* vijp_mat_store(a) is vijp_mat_store_as(a, VIJP_STORE_FORWARD). */
VIJP_API void vijp_mat_store_as(vijp_mat *a, vijp_store_role role);
/* vijp_mat_set_d for a tensor of that role (a cotangent given as input);
 * vijp_mat_set_d(a, src) is vijp_mat_set_d_as(a, src, VIJP_STORE_FORWARD). */
VIJP_API void vijp_mat_set_d_as(vijp_mat *a, const double *src, vijp_store_role role);
/* MX formats (format.h) store a matrix in blocks of 32 values along the
 * reduction dimension of the product that consumes it.  vijp_mat_store,
 * vijp_mat_set_d and vijp_mat_convert take that to be down each column
 * (a column per sample: activations, cotangents, inputs; the last block of
 * a column shorter when rows is no multiple of 32).  A matrix reduced along
 * its rows instead (dense's W, out × in, in W·x) says so line by line:
 * vijp_mat_store_line rounds entries first + k·stride (k < len) to storage
 * as one line (MX: blocks of 32 from its start; other mixed formats entry
 * by entry, as vijp_mat_store), and vijp_mat_set_d_line sets those entries
 * from src at the same indices (as vijp_mat_set_d: one rounding of each
 * double).  vijp_mat_set_entry_d and vo_store, given one value, quantise it
 * as a block of its own.  nvfp4+binary32 lays its blocks of 16 the same
 * way; the tensor of a tensor-scaled format (format.h) is the whole matrix
 * in every call, vijp_mat_store_line and vijp_mat_set_d_line included (the
 * scale from every entry of a, or of src, as they are at the call). */
VIJP_API void vijp_mat_store_line(vijp_mat *a, size_t first, size_t len, size_t stride);
VIJP_API void vijp_mat_set_d_line(vijp_mat *a, const double *src, size_t first, size_t len, size_t stride);

/* Helpers the engines share; arithmetic is rounded in the matrices' format. */
/* a := b − c (same shape). */
VIJP_API void vijp_mat_sub(vijp_mat *a, const vijp_mat *b, const vijp_mat *c);
/* a := b ⊙ c, entrywise (same shape). */
VIJP_API void vijp_mat_mul_elem(vijp_mat *a, const vijp_mat *b, const vijp_mat *c);
/* dst[doff .. doff+count) := src[soff .. soff+count) (linear, column-major indices). */
VIJP_API void vijp_mat_copy_range(vijp_mat *dst, size_t doff, const vijp_mat *src, size_t soff, size_t count);
/* dst := src rounded to dst's format (exact when dst is at least as precise). */
VIJP_API void vijp_mat_convert(vijp_mat *dst, const vijp_mat *src);
/* r (c × 1) := Aᵀ g with A m × c and g m × 1, summed in index order. */
VIJP_API void vijp_mat_tdot(vijp_mat *r, const vijp_mat *A, const vijp_mat *g);

#ifdef __cplusplus
}
#endif

#endif

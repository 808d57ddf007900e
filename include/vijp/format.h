/* Number formats (DESIGN §3): a format is a run-time value, never a compile-time switch. */
#ifndef VIJP_FORMAT_H
#define VIJP_FORMAT_H

#include "vijp/api.h"
#include <stddef.h>
#include <mpfr.h>

typedef enum {
    VIJP_DOUBLE,   /* native IEEE binary64: the fast path (BLAS/LAPACK) */
    VIJP_MPFR,     /* mpfr:P, unbounded exponent range: the oracle */
    VIJP_BINARY32, /* the three below are MPFR emulations: precision, exponent  */
    VIJP_BINARY16, /* range and subnormals of the IEEE format, round to nearest */
    VIJP_BFLOAT16, /* even (mpfr_subnormalize after every operation)            */
    VIJP_MIXED,    /* storage+accumulation, e.g. bfloat16+binary32: see below     */
    VIJP_E4M3,     /* OCP 8-bit floating point (OFP8): emulated as the three IEEE */
    VIJP_E5M2      /* formats above, with their own overflow rule (below)         */
} vijp_format_kind;

/* What rounding to a format gives past its largest finite value, and for
 * ±Inf (OCP OFP8 1.0's two conversions; IEEE's for every other format).
 * A value rounds past the largest finite one M when its rounding to the
 * format's precision with an unbounded exponent exceeds M: e4m3's 464 (the
 * midpoint of 448 and 480) rounds to the even 448, 465 past it. */
typedef enum {
    VIJP_OVERFLOW_INF = 0,  /* IEEE 754: ±Inf, and ±Inf stays (e5m2 too) */
    VIJP_OVERFLOW_NAN,      /* e4m3, which has no infinities: NaN, and ±Inf becomes NaN */
    VIJP_OVERFLOW_SATURATE  /* e4m3:sat, e5m2:sat: ±M, and ±Inf becomes ±M (CUDA's __NV_SATFINITE) */
} vijp_overflow;

/* Mixed formats model what matrix hardware computes (tensor cores, oneDNN,
 * PyTorch's bf16 matmuls): values are *stored* in a narrow format, every
 * operation *computes* in a wider accumulation format, and matrix products
 * multiply their operands exactly (one fused multiply-add per term, summed
 * in index order).  For them prec, emin and emax below describe the
 * accumulation format, which every vo_* operation rounds to, and store_*
 * the storage format, to which every value leaving an operator (layer
 * outputs, gradients, fragments, parameters, inputs) is rounded once
 * (vo_store, vijp_mat_store).  For every other format store_* equal
 * prec/emin/emax and vo_store is vo_set.
 *   bfloat16+binary32  storage bfloat16, accumulation binary32
 *   binary16+binary32  storage binary16, accumulation binary32
 *   tf32+binary32      storage binary32, accumulation binary32, and the
 *                      operands of matrix products rounded to TF32's
 *                      11-bit significand (operand_prec) first
 *   e4m3+binary32, e5m2+binary32 (and e4m3:sat+binary32, e5m2:sat+binary32)
 *                      storage FP8, accumulation binary32 (TransformerEngine's
 *                      FP8 GEMMs: E4M3 activations and weights, E5M2 gradients)
 *
 * FP8 (OCP OFP8 1.0), stored in one byte:
 *   e4m3  bias 7, 4 significand bits, subnormals down to 2^-9, largest
 *         finite 448 (S.1111.110); no infinities, NaN S.1111.111 only
 *   e5m2  bias 15, 3 significand bits, subnormals down to 2^-16, largest
 *         finite 57344; ±Inf and NaNs as IEEE 754
 * Both round to nearest even; a value past the largest finite one gives
 * what store_overflow says: e4m3 NaN, e5m2 ±Inf (OFP8's non-saturating
 * conversion), and with ":sat" (e4m3:sat, e5m2:sat) ±448 or ±57344.
 *
 * MX (OCP Microscaling Formats v1.0), mixed formats whose storage is a
 * block format: blocks of 32 values share one power-of-two scale X (an
 * E8M0, 2^-127 … 2^127, code 0xFF NaN), each value stored as an element
 * of a narrow format times X.  store_* describe the element format, whose
 * overflow rule is saturation (the specification's conversion clamps to
 * the largest normal element); accumulation is binary32 as for FP8.
 *   mxfp8+binary32      E4M3 elements (as e4m3; emax_elem 8, largest 448)
 *   mxfp8e5m2+binary32  E5M2 elements (as e5m2; emax_elem 15, largest 57344)
 *   mxfp6+binary32      E2M3 elements (bias 1, 3 trailing bits; 7.5, subnormals from 2^-3)
 *   mxfp6e3m2+binary32  E3M2 elements (bias 3, 2 trailing bits; 28, from 2^-4)
 *   mxfp4+binary32      E2M1 elements (bias 1, 1 trailing bit; 6, from 2^-1)
 * and each with ":ceil" before "+binary32" (mxfp4:ceil+binary32): the scale
 * rounded up (src/format/mx.c says which stacks use which).  Where blocks lie
 * is vijp_mat_store's and vijp_mat_store_line's business (mat.h); vo_store
 * on one value, which cannot know its block, quantises it as a block of one.
 *
 * Tensor-core accumulation, STORE+tc:ARCH (ARCH v100, a100, h100, b200):
 * mixed formats as STORE+binary32 (tf32+tc:ARCH as tf32+binary32), whose
 * matrix products add blocks of tc_group exact products at once as the
 * measured models of that GPU's tensor cores do: every product and the
 * accumulator aligned to the largest, truncated to tc_acc_prec +
 * tc_align_bits bits, summed exactly, then rounded to the accumulator
 * (vo_dot_acc, arith.h).  binary16 on every ARCH; bfloat16 and tf32 from
 * a100; e4m3 and e5m2 (and ":sat") on h100 and b200.
 *
 * Tensor-scaled formats (src/format/scaled.c gives the recipes and their
 * sources), mixed formats whose stored tensor (what one vijp_mat_store,
 * vijp_mat_set_d or vijp_mat_convert call stores: a whole matrix) has one
 * binary32 scale from its largest magnitude; accumulation binary32:
 *   nvfp4+binary32      NVIDIA's NVFP4: E2M1 elements (as mxfp4's) in blocks
 *                       of 16 (scale_block), each block with an E4M3 scale,
 *                       times the tensor's scale amax/(6·448)
 *   fp8+binary32        TransformerEngine's hybrid FP8 with current scaling:
 *                       forward values E4M3 (store_*), gradients E5M2
 *                       (grad_*), each tensor scaled by fp8_max/amax
 *   fp8:pow2+binary32   the same with the scale rounded down to a power of two
 * Which tensors are gradients is the storing call's to say (mat.h,
 * vijp_mat_store_as).  vo_store on one value quantises it as a tensor of one. */

typedef struct {
    vijp_format_kind kind;
    mpfr_prec_t prec;     /* significand bits, hidden bit included */
    int emulated;         /* nonzero: clamp to [emin, emax] and subnormalize */
    int threads;          /* threads a run in this format may compute on (the dense products, the LU
                           * elimination: src/base/fork.h); 0 or 1: the calling thread alone.  Changes
                           * time only, never a bit.  Set by the drift study for its curves (spare
                           * --jobs), never by parsing a name; in what was padding, so the struct keeps
                           * plugin ABI 8's size and offsets (format.c checks) */
    mpfr_exp_t emin;      /* MPFR convention: x = m·2^e with 1/2 <= |m| < 1 */
    mpfr_exp_t emax;
    size_t value_bytes;   /* bytes one value takes when stored (for memory accounting) */
    char name[32];
    int mixed;                      /* nonzero: a VIJP_MIXED format (above) */
    mpfr_prec_t store_prec;         /* the storage format; equal to prec, emin, */
    mpfr_exp_t store_emin, store_emax; /* emax unless mixed */
    mpfr_prec_t operand_prec;       /* tf32+binary32: 11; otherwise 0 (no operand rounding) */
    vijp_overflow store_overflow;   /* the storage format's rule past store_max (above); unless mixed, */
    double store_max;               /* every operation's.  store_max: its largest finite value (emulated only) */
    int kernel_set;       /* FORMAT@SET: 1 + the kernel set (0 ref, 1 avx2, 2 avx512, 3 cuda) that engine
                           * runs in this format use; 0: the process's (VIJP_KERNELS or the CPU's best) */
    int exact_dots;       /* nonzero (mpfr:P only): dot products rounded once, not per operation (oracles/dot.h);
                           * set for the drift study's reference, never by parsing a name */
    int mx_block;         /* MX formats (below): 32, the values that share one scale; 0 for every other format */
    int mx_elem_emax;     /* MX: the exponent of the element format's largest normal value (OCP MX's emax_elem) */
    int mx_scale_ceil;    /* MX ":ceil": the scale 2^ceil(log2(amax/store_max)) instead of the specification's */
    /* STORE+tc:ARCH (below): matrix products accumulate as that GPU's tensor cores do
     * (src/format/tc.c, docs/formats.md#tensor-core-accumulation); tc_group 0 for every other format */
    int tc_group;         /* products added at once, with the accumulator, by one block FMA */
    int tc_align_bits;    /* bits kept below the accumulator's precision when the terms are aligned */
    int tc_acc_prec;      /* significand bits of the tensor core's accumulator: 24, or 14 (Hopper FP8) */
    int tc_round_nearest; /* its rounding after each block: 0 toward zero (every NVIDIA model), 1 to nearest even */
    int tc_promote;       /* products after which it is added into a binary32 register, to nearest, and
                           * restarted from zero (Hopper FP8's software promotion); 0: never */
    /* Flush to zero (":ftz", docs/formats.md): a value whose rounding to p
     * bits with an unbounded exponent lies below the smallest normal
     * 2^(emin+p-2) (tininess after rounding, as x86 detects it) becomes a
     * zero of its own sign.  store_ftz: every value rounded to the storage
     * format (S:ftz+binary32; plain formats: both set).  ftz: every
     * operation's result in the arithmetic format (prec, emin), and a
     * product's operands subnormal there count as zero of their sign
     * (S+binary32:ftz, binary32:ftz).  Emulated formats only; MPFR route. */
    int store_ftz;
    int ftz;
    /* Stochastic rounding (":sr" on the storage, S:sr+binary32): a value an
     * operator stores (vijp_mat_store, in a matrix that names its stream,
     * mat.h's vijp_sr_key) goes to one of its two storage neighbours, away
     * from zero with probability (|x| − |down|)/(|up| − |down|), from 32
     * random bits; one value alone (vo_store) rounds to nearest. */
    int store_sr;
    int tensor_scaled;    /* nvfp4+binary32, fp8[:pow2]+binary32 (below): one binary32 scale per stored tensor */
    int scale_block;      /* nvfp4+binary32: 16, the values that share one E4M3 scale; 0 for every other format */
    int scale_pow2;       /* fp8:pow2+binary32: the tensor scale rounded down to a power of two */
    mpfr_prec_t grad_prec;           /* fp8+binary32: the storage of gradients (E5M2: 3, -15, 16, 57344) where */
    mpfr_exp_t grad_emin, grad_emax; /* store_* (E4M3) is that of forward values; grad_prec 0 for every */
    double grad_max;                 /* other format, whose gradients are stored as any value */
} vijp_format;

/* Precision limits of mpfr:P.  The lower limit is MPFR's; the upper one keeps
 * a 256-layer run within minutes and far exceeds any reference we need. */
#define VIJP_PREC_MIN 2
#define VIJP_PREC_MAX 65536

#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse "double", "mpfr:P", "binary32", "binary16", "bfloat16", "e4m3",
 * "e4m3:sat", "e5m2", "e5m2:sat", "bfloat16+binary32", "binary16+binary32",
 * "tf32+binary32", "e4m3+binary32", "e5m2+binary32" (and their ":sat"
 * storage, "e4m3:sat+binary32"), the tensor-core formats "STORE+tc:ARCH"
 * (above: "bfloat16+tc:a100", "e4m3+tc:h100"), the MX formats "mxfp8+binary32",
 * "mxfp8e5m2+binary32", "mxfp6+binary32", "mxfp6e3m2+binary32",
 * "mxfp4+binary32" (and ":ceil" scales, "mxfp4:ceil+binary32"), the
 * tensor-scaled "nvfp4+binary32", "fp8+binary32", "fp8:pow2+binary32", and
 * "double@ref", "double@avx2", "double@avx512", "double@cuda": double through
 * that kernel set (an error where the set is not available), and likewise
 * "binary32@SET": binary32 values, each layer operator that has native float
 * operators (vijp_ops_f: dense through the set's gemm_f, which is BLAS's
 * sgemm but for cuda's cuBLAS, sgetrf/s's LU (src/layers/lu.h) and sgels,
 * leaky, relu, the catalogue's smooth activations) computed by them through
 * that set, the others by the binary32 emulation; and "bfloat16+binary32@SET",
 * "binary16+binary32@SET": the same float operators on values of the
 * storage format, dense's products through the set's gemm_mixed_f (exact
 * products, binary32 sums: sgemm, or cuBLAS's GemmEx on bfloat16 or binary16
 * inputs, the tensor cores' accumulation), each result rounded once to the
 * storage format, the other operators by the mixed format's emulation.
 * (tf32+binary32 has no @SET: its operand rounding has no float route.)
 * Cuda: the set runs where a GPU is and libvijp-cuda.so loads.
 * Modifiers (no @SET): ":ftz" after a part of an emulated format's name
 * ("binary32:ftz", "bfloat16:ftz+binary32", "bfloat16+binary32:ftz"),
 * ":sr" after a narrow storage part ("bfloat16:sr+binary32",
 * "e4m3:sat:sr+binary32"): store_ftz, ftz and store_sr below. */
VIJP_API VIJP_MUST_CHECK int vijp_format_parse(const char *s, vijp_format *f, vijp_error *err);
/* One of the fixed formats (every kind but VIJP_MPFR, which needs a
 * precision: vijp_format_mpfr); cannot fail. */
VIJP_API void vijp_format_fixed(vijp_format *f, vijp_format_kind kind);
/* mpfr:P with P bits, unbounded exponent range. */
VIJP_API VIJP_MUST_CHECK int vijp_format_mpfr(vijp_format *f, long prec, vijp_error *err);
/* The format of f's operations before its results are stored: for
 * bfloat16+binary32 and binary16+binary32 (and their @SET), and the FP8
 * mixed formats (e4m3+binary32, …), binary32 (@SET);
 * f itself for every other format, whose results are values of it.  What
 * an engine keeps between two operations that hardware fuses keeps this
 * precision: the f′ of a smooth activation that nested forward AD stores
 * for its backward product g·f′, rounded to storage once, as the layer's
 * own vjp (docs/formats.md). */
VIJP_API void vijp_format_accumulator(const vijp_format *f, vijp_format *acc);
/* Unit roundoff u = 2^-p of the format's storage (mixed formats: of the
 * narrower of storage and matrix-product operands, the precision a value
 * keeps between operations; fp8+binary32: of the narrower of its forward
 * and gradient storage, E5M2's). */
VIJP_API double vijp_format_unit_roundoff(const vijp_format *f);
/* Nonzero when every value of f is exactly a double: every value stored
 * and every result of an operation (a mixed format's accumulation too).
 * True of double, and of every emulated format (binary32, binary16,
 * bfloat16, e4m3, e5m2, the mixed, MX, tensor-core, tensor-scaled, ":sr"
 * and ":ftz" ones): at most 53 bits, on a grid whose smallest quantum
 * 2^(emin−1) is no finer than binary64's 2^-1074, inside binary64's range
 * (emax <= 1024; the largest stored values, MX's 448·2^127, are far
 * below 2^1024).  mpfr:P (unbounded exponents) is not.  A vijp_mat of
 * such a format holds d, of any other m (vijp/mat.h). */
VIJP_API int vijp_format_values_double(const vijp_format *f);
/* The precision in bits that unit roundoff is of (see above). */
VIJP_API mpfr_prec_t vijp_format_value_prec(const vijp_format *f);

/* FP8 bit patterns (f: a format whose storage is e4m3 or e5m2, sat or not,
 * mixed or not; VIJP_EINVAL otherwise, the scaled ones included: fp8,
 * mxfp8 and mxfp8e5m2, whose values carry a scale a byte does not hold).  Encode rounds x once to f's
 * storage (vo_store, with its overflow rule) and packs the result: sign,
 * biased exponent, trailing significand; every NaN packs as 0x7F.  Decode
 * sets r to the value of the pattern, exactly when r has at least 4 bits
 * (the sign of zero kept; e4m3's 0x7F and 0xFF and e5m2's exponent 31 with a
 * nonzero significand are NaN, e5m2's 0x7C and 0xFC ±Inf). */
VIJP_API VIJP_MUST_CHECK int vijp_fp8_encode(const vijp_format *f, mpfr_srcptr x, unsigned char *bits, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_fp8_decode(const vijp_format *f, unsigned bits, mpfr_ptr r, vijp_error *err);

/* MX element and scale codes (OCP MX v1.0 §5.3, §5.4).  vijp_mx_decode sets
 * r to the value of element code `bits` of f's element format (f an MX
 * format; VIJP_EINVAL otherwise, or for a code wider than the element):
 * E4M3 and E5M2 as vijp_fp8_decode, the 6-bit E2M3 and E3M2 and the 4-bit
 * E2M1 sign, biased exponent, trailing significand with subnormals and no
 * Inf or NaN.  vijp_e8m0_decode sets r to 2^(bits−127), NaN for 0xFF.
 * Both exact when r has at least 4 bits. */
VIJP_API VIJP_MUST_CHECK int vijp_mx_decode(const vijp_format *f, unsigned bits, mpfr_ptr r, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_e8m0_decode(unsigned bits, mpfr_ptr r, vijp_error *err);

#ifdef __cplusplus
}
#endif

#endif

/* The kernel table: the inner loops of the double (and binary32)
 * elementwise operators as function pointers, one set per instruction set.
 *
 *   ref     src/kernels/ref/     portable C, always built: the layers' own
 *                                scalar code, the definition of the results
 *   avx2    src/kernels/avx2/    AVX2 + FMA (not built under make GENERIC=1)
 *   avx512  src/kernels/avx512/  AVX-512F + DQ (not built under GENERIC=1)
 *   cuda    src/kernels/cuda/kernel_set.c in libvijp-cuda.so, loaded
 *           with dlopen when first asked for (kernels.c), where a GPU is
 *
 * Two classes of kernel, and the contract of each (the tests in
 * tests/t-kernels.c check both for every set the machine runs):
 *  - EXACT (leaky, relu, sign pack/unpack, coupling updates): the same
 *    IEEE operations in the same order as ref, no FMA, so bit for bit the
 *    same outputs (NaN payloads aside).  The table the layers use takes
 *    these from the best set the CPU supports.
 *  - BOUNDED (smooth activations with f′, erfc, drift partials, matrix
 *    products): faster evaluations whose error bound is stated next to each
 *    kernel, as data in the table where the tests read it (act_bound,
 *    erfc_bound_u); not bit-identical to ref.  The layers use them only when
 *    the set is chosen explicitly (VIJP_KERNELS=avx2), so that the default
 *    run's numbers, and `make regress`, do not depend on the machine.
 *
 * Selection happens once (pthread_once) at the first use: VIJP_KERNELS=
 * ref|avx2|avx512|cuda forces a set; unset or "auto" takes ref and overrides
 * the exact kernels with the best set __builtin_cpu_supports reports.  A
 * forced set that is unknown or not available here is an error, never a
 * silent fallback: vijp_kernels_init (include/vijp/kernels.h) returns it to
 * a caller that asks first (the vijp command does, and exits 2); the first
 * kernel use without that call prints the message and exits 1, as the
 * library does when memory runs out. */
#ifndef VIJP_KERNELS_KERNELS_H
#define VIJP_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The smooth activations with a kernel, in the catalogue's names. */
enum { VIJP_KACT_SIGMOID, VIJP_KACT_SOFTPLUS, VIJP_KACT_TANH, VIJP_KACT_SILU, VIJP_KACT_GELU, VIJP_KACT_MISH,
       VIJP_KACT_COUNT };
extern const char *const vijp_kact_names[VIJP_KACT_COUNT];

/* The error bound of one set's f and f′ kernels for an activation (act_d[a],
 * act_f[a] below), in units of u = 2^-53: at every finite double x,
 *   |f̂ − f|   <= Kf·u·|f|,             Kf = f_u,
 *   |f̂′ − f′| <= K1·u·|t1| + K2·u·|t2|, K1 = d1_u,
 *                                        K2 = d2_u + d2_u_per_softplus·softplus(x),
 * where f′ = t1 + t2 is the sum the dual-number evaluation forms: for
 * sigmoid, softplus and tanh t1 = f′ and t2 = 0; SiLU σ(x) + x·σ′(x); GELU
 * Φ(x) + x·φ(x); Mish tanh(sp) + x·sech²(sp)·σ(x), sp = softplus(x), the one
 * whose K2 grows with x (the argument of its sech² carries an error
 * proportional to sp).  Relative to the terms, not to f′, which cancels
 * where it vanishes; relative wherever |f| (for f′, |t1| + |t2|) is at least
 * 2^-1022, within 2^-1022 absolutely below.  act_f evaluates in double and
 * rounds once to binary32: within the same plus that rounding, 2^-24
 * relative (2^-150 absolute in binary32's subnormal range).  Each number is
 * derived in src/kernels/ref/dual.c, above the evaluation it bounds.  f_u = 0
 * states no bound (below). */
typedef struct {
    double f_u, d1_u, d2_u, d2_u_per_softplus;
} vijp_kact_bound;

/* Partial sums of the drift metrics of one layer's output a against ref
 * (both stored as double), d = a − ref rounded: Σa², Σref², Σd², Σd·ref and
 * max |d| / ulp_f(ref) for a format f of precision prec and MPFR minimum
 * exponent emin (ulp_f as in vijp/metrics.h; NaN sticks).  Each sum of n
 * terms, in any order, is within (n + 3)u of its exact value relative to
 * the sum of its terms' magnitudes (u = 2^-53: d and each product rounded
 * once, then n − 1 additions); max_ulps within u relative (d's rounding; the
 * power-of-two scaling is exact).  Valid while no sum overflows. */
typedef struct {
    double aa, rr, dd, dr, max_ulps;
} vijp_kdrift;

typedef struct vijp_kernels {
    const char *name;
    /* ---- exact ---- */
    /* leaky ReLU, slope a > 0: y = x·(x > 0 ? 1 : a); v = u·(x > 0 ? 1 : a)
     * (jvp = vjp); vijp g/(x > 0 ? 1 : a); inverse y > 0 ? y : y/a. */
    void (*leaky_forward_d)(size_t n, double a, const double *x, double *y);
    void (*leaky_apply_d)(size_t n, double a, const double *x, const double *u, double *v);
    void (*leaky_vijp_d)(size_t n, double a, const double *x, const double *g, double *v);
    void (*leaky_inverse_d)(size_t n, double a, const double *y, double *x);
    void (*leaky_forward_f)(size_t n, float a, const float *x, float *y);
    void (*leaky_apply_f)(size_t n, float a, const float *x, const float *u, float *v);
    void (*leaky_vijp_f)(size_t n, float a, const float *x, const float *g, float *v);
    void (*leaky_inverse_f)(size_t n, float a, const float *y, float *x);
    /* phase-1 sign bits: bit k of bits[k/8] (LSB first) = [x_k > 0] (NaN: 0);
     * unpack writes ±1.  bits has (n + 7)/8 bytes; pack writes them all
     * (unused high bits of the last byte 0). */
    void (*sign_pack_d)(size_t n, const double *x, uint8_t *bits);
    void (*sign_unpack_d)(size_t n, const uint8_t *bits, double *x);
    void (*sign_pack_f)(size_t n, const float *x, uint8_t *bits);
    void (*sign_unpack_f)(size_t n, const uint8_t *bits, float *x);
    /* ReLU: y = x > 0 ? x : 0; v = x > 0 ? u : 0; gather: the inactive
     * units' (!(x > 0)) cotangents g, in order, into frag, returning their
     * count; scatter: v = x > 0 ? g : frag[k++] (the vijp). */
    void (*relu_forward_d)(size_t n, const double *x, double *y);
    void (*relu_apply_d)(size_t n, const double *x, const double *u, double *v);
    size_t (*relu_gather_d)(size_t n, const double *x, const double *g, double *frag);
    void (*relu_scatter_d)(size_t n, const double *x, const double *g, const double *frag, double *v);
    void (*relu_forward_f)(size_t n, const float *x, float *y);
    void (*relu_apply_f)(size_t n, const float *x, const float *u, float *v);
    size_t (*relu_gather_f)(size_t n, const float *x, const float *g, float *frag);
    void (*relu_scatter_f)(size_t n, const float *x, const float *g, const float *frag, float *v);
    /* coupling updates: additive y = a + b and its inverse y = a − b; affine
     * y = x·s + t (two roundings, no FMA), its inverse x = (y − t)/s and the
     * vijp's y = a/b. */
    void (*add_d)(size_t n, const double *a, const double *b, double *y);
    void (*sub_d)(size_t n, const double *a, const double *b, double *y);
    void (*affine_d)(size_t n, const double *x, const double *s, const double *t, double *y);
    void (*affine_inverse_d)(size_t n, const double *y, const double *s, const double *t, double *x);
    void (*div_d)(size_t n, const double *a, const double *b, double *y);
    void (*add_f)(size_t n, const float *a, const float *b, float *y);
    void (*sub_f)(size_t n, const float *a, const float *b, float *y);
    void (*affine_f)(size_t n, const float *x, const float *s, const float *t, float *y);
    void (*affine_inverse_f)(size_t n, const float *y, const float *s, const float *t, float *x);
    void (*div_f)(size_t n, const float *a, const float *b, float *y);
    /* ---- bounded ---- */
    /* f and f′ together, VIJP_KACT_* order, each pair within act_bound[a]
     * (vijp_kact_bound, above).  ref: the layers' dual evaluation, whose
     * bounds ref/activations.c states, the only place the numbers live; the
     * SIMD sets (simd/activations.h) and cuda (cuda/act_math.h) evaluate
     * the same operations with primitives no less accurate and leave
     * act_bound unset (f_u = 0), which kernels.c's complete() fills with
     * ref's.  Bounded: the default table keeps ref's, and a bound travels
     * with its function (complete, overlay_exact); tests/t-kernels.c holds
     * each set to its own, tests/t-activations.c the layers to ref's. */
    void (*act_d[VIJP_KACT_COUNT])(size_t n, const double *x, double *f, double *df);
    void (*act_f[VIJP_KACT_COUNT])(size_t n, const float *x, float *f, float *df);
    vijp_kact_bound act_bound[VIJP_KACT_COUNT];
    void (*drift_d)(size_t n, const double *a, const double *ref, long prec, long emin, vijp_kdrift *out);
    /* erfc, what GELU's f and f′ are built on: within erfc_bound_u units
     * of u = 2^-53 relative wherever the result is a normal double, and, for
     * a set with erfc_zero_above > 0, 0 beyond that t (where erfc is tiny);
     * NaN stays NaN.  ref: glibc's, within 5 ulps (its manual: 10u); the
     * SIMD sets': 7.1u for t <= 26 and 0 beyond, where erfc < 5.7e-296
     * (simd/activations.h).  Bounded: the default table keeps ref's, and a
     * set's bound travels with its function (complete, overlay_exact in
     * kernels.c); tests/t-kernels.c holds each set to its own. */
    void (*erfc_d)(size_t n, const double *t, double *y);
    double erfc_bound_u, erfc_zero_above;
    /* C := alpha·op(A)·op(B) + beta·C, column-major, op(X) = Xᵀ where its
     * flag is nonzero (BLAS's gemm; the dense layer's products).  ref: the
     * linked BLAS (ref/blas.c); avx512: its own unpacked loops at the dense
     * layer's shapes, else ref (avx512/gemm.c); cuda: cuBLAS.  Each entry is a dot product of
     * k terms in some order, within γ_k·(|op(A)||op(B)|) plus beta's one
     * rounding (Higham eq. 3.5, any order, FMA or not).  Bounded: the
     * default table keeps ref's. */
    void (*gemm_d)(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                   const double *B, size_t ldb, double beta, double *C, size_t ldc);
    void (*gemm_f)(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc);
    /* gemm_f for a mixed format's float route (src/layer/native_f32.c): A and B hold
     * values of the storage format (VIJP_KSTORE_*, exact in float), the
     * products are exact and the sums binary32.  ref: sgemm, which computes
     * exactly that; cuda: cublasGemmEx on bfloat16 or binary16 inputs (the
     * tensor cores' accumulation, cuda.h's bound). */
    void (*gemm_mixed_f)(int storage, int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A,
                         size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);
} vijp_kernels;
enum { VIJP_KSTORE_BF16 = 1, VIJP_KSTORE_F16 = 2 };
/* Raise it with any change to vijp_kernels' entries (order, types, meaning):
 * libvijp-cuda.so holds a table of this layout, and the loader (kernels.c)
 * refuses one built for another. */
#define VIJP_KERNELS_TABLE_VERSION 3

/* The process's default table (selected once, see above): what a format
 * without @SET runs on.  A format's own table, and so every layer
 * operator's, is resolved from the format where the operator is dispatched
 * (vijp_kctx_of, src/layer/route.h) and passed down as an argument: no
 * table is kept per thread. */
const vijp_kernels *vijp_kernels_active(void);

/* vijp_compare's three metrics (vijp/metrics.h) from a set's drift_d, in
 * double: rel = √(Σd²/Σref²); ulps = max_ulps; the angle from the part of
 * d orthogonal to ref, θ = atan2(‖d⊥‖, ‖ref‖ + d·ref/‖ref‖), ‖d⊥‖² =
 * max(Σd² − (Σd·ref)²/Σref², 0), a∥ = ‖ref‖ + d·ref/‖ref‖: the angle is
 * not a difference of nearly equal numbers.  Error: ‖d⊥‖² within about
 * 4(n + 4)u·Σd² (Σd², then (Σd·ref)²/Σref² <= Σd² with twice Σd·ref's and
 * once Σref²'s error), so |θ̂ − θ| <= √(4(n + 4)u·Σd²)/|a∥| + (n + 8)u·θ + 4u
 * radians, where vijp_compare is exact; tests/t-kernels.c asserts it. */
void vijp_kdrift_metric(const vijp_kdrift *p, double *rel, double *ulps, double *angle_deg);

/* Every set this build has, for tests and benchmarks: i = 0 (ref), 1 (avx2),
 * 2 (avx512), 3 (cuda).  NULL where the set is not built or the CPU lacks
 * it; *why (if why) then says which, in one line.  A set's missing entries
 * are ref's. */
#define VIJP_KSET_COUNT 4
const vijp_kernels *vijp_kernels_set(int i, const char **why);
extern const char *const vijp_kset_names[VIJP_KSET_COUNT];

/* Which of its CPU sets (0 ref, 1 avx2, 2 avx512; have[i]: the family has
 * set i on this CPU, have[0] always) a family of kernels outside this
 * table (src/ddot, src/emu's lanes) runs on, following the table's
 * choice: ref for VIJP_KERNELS=ref, avx2 for avx2 (ref where the family
 * lacks it), otherwise the widest the family has. */
int vijp_kernels_follow(const int have[3]);

/* The sets as their files define them (NULL entries are completed from ref
 * by kernels.c): ref in two parts, exact (ref/elementwise.c) and bounded
 * (ref/activations.c, ref/drift.c). */
extern const vijp_kernels vijp_kernels_ref_exact, vijp_kernels_ref_bounded;
extern const vijp_kernels vijp_kernels_avx2, vijp_kernels_avx512;

/* Every function-pointer entry but the activation arrays, for code that
 * walks the table (kernels.c completes sets, the tests count them); the
 * bounded ones also on their own, which the default table keeps from ref. */
#define VIJP_KERNEL_BOUNDED_ENTRIES(X) X(drift_d) X(erfc_d) X(gemm_d) X(gemm_f) X(gemm_mixed_f)
#define VIJP_KERNEL_ENTRIES(X)                                                                            \
    X(leaky_forward_d) X(leaky_apply_d) X(leaky_vijp_d) X(leaky_inverse_d) X(leaky_forward_f)             \
    X(leaky_apply_f) X(leaky_vijp_f) X(leaky_inverse_f) X(sign_pack_d) X(sign_unpack_d) X(sign_pack_f)    \
    X(sign_unpack_f) X(relu_forward_d) X(relu_apply_d) X(relu_gather_d) X(relu_scatter_d)                 \
    X(relu_forward_f) X(relu_apply_f) X(relu_gather_f) X(relu_scatter_f) X(add_d) X(sub_d) X(affine_d)    \
    X(affine_inverse_d) X(div_d) X(add_f) X(sub_f) X(affine_f) X(affine_inverse_f) X(div_f)               \
    VIJP_KERNEL_BOUNDED_ENTRIES(X)

/* The designated initialisers of a set's exact kernels, when its file names
 * them leaky_forward_d, … (as ref/elementwise.c and simd/elementwise.h do). */
#define VIJP_KERNEL_EXACT_ENTRIES(S)                                                                      \
    .leaky_forward_##S = leaky_forward_##S, .leaky_apply_##S = leaky_apply_##S,                           \
    .leaky_vijp_##S = leaky_vijp_##S, .leaky_inverse_##S = leaky_inverse_##S,                             \
    .sign_pack_##S = sign_pack_##S, .sign_unpack_##S = sign_unpack_##S,                                   \
    .relu_forward_##S = relu_forward_##S, .relu_apply_##S = relu_apply_##S,                               \
    .relu_gather_##S = relu_gather_##S, .relu_scatter_##S = relu_scatter_##S, .add_##S = add_##S,         \
    .sub_##S = sub_##S, .affine_##S = affine_##S, .affine_inverse_##S = affine_inverse_##S, .div_##S = div_##S

#endif

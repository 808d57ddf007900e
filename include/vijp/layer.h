/* The layer interface.  One layer type is one descriptor (vijp_layer_type):
 * shape rules, initialisers, structural declarations and its operators, in
 * double (src/layers/) and in MPFR (oracles/, written independently).
 *
 * Conventions for every operator: a batch of B samples is a column-major
 * matrix with one sample per column; X is the layer input (n × B), Y its
 * output (m × B).  Cotangents Gy (m × B), Gx (n × B) are stored the same way
 * (each column is the row vector g of DESIGN §1, transposed).  theta holds the
 * parameters in the layer's own layout (dense: W column-major m × n, then b).
 */
#ifndef VIJP_LAYER_H
#define VIJP_LAYER_H

#include "vijp/api.h"
#include <stddef.h>
#include <stdint.h>
#include <mpfr.h>
#include "vijp/format.h"
#include "vijp/error.h"
#include "vijp/mat.h"
#include "vijp/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vijp_layer_type vijp_layer_type;
typedef struct vijp_interval_ops vijp_interval_ops; /* vijp/interval.h (MPFI) */

/* The widest layer input or output (vijp_layer_parse enforces it on every
 * type, plugins included).  Products of two widths (a dense layer's m·n
 * weights, a Jacobian's entries, channels × rows) stay below 2^48: within
 * size_t and exact in a double. */
#define VIJP_WIDTH_MAX (1u << 24)

/* One layer instance: its type, its widths and the type's parsed arguments.
 * `state` is opaque: only the type's own code reads it, and everyone else
 * through the type's accessors (include/vijp/catalogue.h for the built-in
 * types).  An instance owns its state: vijp_layer_copy duplicates it and
 * vijp_layer_clear releases it.  A plain struct copy is a borrowed view,
 * valid while the original lives (and must not be cleared). */
typedef struct vijp_layer {
    const vijp_layer_type *type;
    size_t in, out; /* n_i and m_i */
    void *state;    /* the type's arguments, NULL for types without any */
} vijp_layer;

/* Structural declarations (DESIGN §4, "analytic" verdicts). */
enum {
    VIJP_DECL_SUBMERSIVE = 1u << 0,       /* J has full row rank at every point */
    VIJP_DECL_NEVER_SUBMERSIVE = 1u << 1, /* J never has full row rank (e.g. m > n) */
    VIJP_DECL_INVERTIBLE = 1u << 2,       /* forward is a bijection with an inverse operator */
    VIJP_DECL_LINEAR = 1u << 3            /* J does not depend on x (dense, conv: affine maps) */
};

/* What Moonwalk mixed mode keeps from the forward pass so that the reverse pass
 * can apply the input vjp (DESIGN §2). */
typedef enum {
    VIJP_RESIDUAL_NONE,  /* the input vjp does not depend on the input (dense) */
    VIJP_RESIDUAL_SIGN,  /* it depends on the input only through [x > 0]: one bit per unit */
    VIJP_RESIDUAL_INPUT, /* it needs the input values */
    VIJP_RESIDUAL_INVERSE, /* it needs the input values, which the layer's inverse rebuilds from its
                            * output going back (coupling blocks: DESIGN §6 "none"); kept like
                            * INPUT where that output is not known itself */
    VIJP_RESIDUAL_DERIV    /* elementwise, input vjp g ⊙ f′(x): the forward pass keeps f′ (nested
                            * forward AD, one value per unit) and the reverse pass multiplies by it,
                            * without evaluating f again */
} vijp_residual_kind;

/* kaiming-uniform is PyTorch's nn.Linear / nn.ConvNd default: weights and
 * biases U(−1/√fan_in, 1/√fan_in) (kaiming_uniform_ with a = √5). */
typedef enum { VIJP_INIT_GAUSSIAN, VIJP_INIT_ORTHOGONAL, VIJP_INIT_SCALED, VIJP_INIT_KAIMING_UNIFORM } vijp_init_kind;
typedef struct {
    vijp_init_kind kind;
    double gain; /* scaled: W = gain · orthogonal */
    int threads; /* threads the draw may use (0 or 1: the caller's alone); the same values on any count */
} vijp_init;

/* The context an operator runs in: the kernel set (the library's inner
 * loops, as in BLIS's cntx_t) of the data's format, and for a mixed format
 * on the binary32 route its storage format.  vijp_layer_* resolve it once
 * per call from the matrices' format and pass it as every double and
 * binary32 operator's second argument.  Opaque: a plugin's operators ignore
 * it, or hand it unchanged to operators they call. */
typedef struct vijp_kctx vijp_kctx;

/* Double operators.  Functions that can fail return 0 or a VIJP_E* code.
 * Every operator (here and in MPFR) overwrites all of its output and reads
 * none of it: the engines pass buffers left over from earlier work
 * (vijp_mat_init_unset), and `vijp check-layer`'s overwrites-outputs check
 * runs each operator into a zeroed and a NaN-filled output.  Outputs never
 * alias inputs: an operator may write part of its output before it has
 * read all of its inputs. */
typedef struct {
    void (*forward)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                    double *Y);
    void (*jvp)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                const double *U, double *V);
    void (*vjp)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                const double *Gy, double *Gx);
    /* Parameter gradient Σ_b Gy_b K_b (overwrites Gtheta); NULL when no parameters. */
    void (*vjp_param)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                      const double *Gy, double *Gtheta);
    /* Fragment c = Gy Q (Q: orthonormal cokernel basis), packed sample after sample;
     * fragment_count gives its length for the batch.  NULL for layers whose
     * cokernel is always trivial. */
    size_t (*fragment_count)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B);
    void (*fragment)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                     const double *Gy, double *frag);
    /* Gy = Gx J^+ + frag Q^T (the vijp).  Fails with VIJP_ESINGULAR when J has
     * lost rank beyond what the fragment covers. */
    int (*vijp)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *X, size_t B,
                const double *Gx, const double *frag, double *Gy, vijp_error *err);
    /* Dense input Jacobian at one sample x: J (m × n, column-major). */
    void (*jacobian)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *x, double *J);
    /* Cokernel basis at one sample: Q (m × k, column-major, k = fragment_count(x, 1)). */
    int (*cokernel)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *x, double *Q,
                    vijp_error *err);
    /* X = f^{-1}(Y); NULL when the layer is not invertible. */
    int (*inverse)(const vijp_layer *L, const vijp_kctx *cx, const double *theta, const double *Y, size_t B,
                   double *X, vijp_error *err);
} vijp_ops_d;

/* MPFR operators: the same contracts, every operation rounded in format f. */
typedef struct {
    void (*forward)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *Y,
                    const vijp_format *f);
    void (*jvp)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                const vijp_format *f);
    void (*vjp)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                const vijp_format *f);
    void (*vjp_param)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *Gy,
                      mpfr_t *Gtheta, const vijp_format *f);
    size_t (*fragment_count)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B);
    void (*fragment)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *Gy,
                     mpfr_t *frag, const vijp_format *f);
    int (*vijp)(const vijp_layer *L, mpfr_t *theta, mpfr_t *X, size_t B, mpfr_t *Gx,
                mpfr_t *frag, mpfr_t *Gy, const vijp_format *f);
    void (*jacobian)(const vijp_layer *L, mpfr_t *theta, mpfr_t *x, mpfr_t *J,
                     const vijp_format *f);
    int (*cokernel)(const vijp_layer *L, mpfr_t *theta, mpfr_t *x, mpfr_t *Q,
                    const vijp_format *f);
    int (*inverse)(const vijp_layer *L, mpfr_t *theta, mpfr_t *Y, size_t B, mpfr_t *X,
                   const vijp_format *f);
} vijp_ops_mp;

/* binary32 operators on native floats, through the kernel set of a
 * binary32@SET format (vijp/format.h): what a float32 run on that hardware
 * computes, against the emulated binary32's stated order.  The same
 * contracts as the double ones; vijp_layer_* convert the format's values to
 * float and back (exactly: they are binary32 values).  A NULL operator, or
 * one that returns VIJP_EUNSUPPORTED, runs in the emulation instead. */
typedef struct {
    void (*forward)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B, float *Y);
    void (*jvp)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B,
                const float *U, float *V);
    void (*vjp)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B,
                const float *Gy, float *Gx);
    void (*vjp_param)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B,
                      const float *Gy, float *Gtheta);
    void (*fragment)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B,
                     const float *Gy, float *frag);
    int (*vijp)(const vijp_layer *L, const vijp_kctx *cx, const float *theta, const float *X, size_t B, const float *Gx,
                const float *frag, float *Gy, vijp_error *err);
} vijp_ops_f;

/* What the battery (tests/t-layers.c) and vijp check-layer hold a layer's
 * operators to, beyond the dot-product bound γ_n of Higham eq. 3.5 that every
 * operator gets (u: the format's unit roundoff).  Zero fields take the
 * defaults said here; each built-in type derives its values in its file. */
typedef enum {
    VIJP_INVBOUND_NONE,        /* no inverse (the default) */
    VIJP_INVBOUND_LINEAR,      /* affine y = Wx + b, W square: ‖W⁻¹‖·(n+2)u‖|W||x| + 2|b|‖ + κ·C_solve·u‖x‖ */
    VIJP_INVBOUND_ELEMENTWISE, /* |x̂ − x| <= u(inv_a|x| + inv_c + inv_b|y|/|f′(x)|) */
    VIJP_INVBOUND_EXACT,       /* a permutation: inverse(forward(x)) == x exactly */
    VIJP_INVBOUND_FIXED_POINT  /* y = x + f(x) solved by x ← y − f(x), stopped once a step is within
                                * inv_a·u·(‖y‖∞ + ‖x‖∞): ‖x̂ − x‖ <= ‖J⁻¹‖·(√n·2·inv_a·u·(‖y‖∞ + ‖x‖∞)
                                * + 2·(n+K)u·‖M|x| + |y|‖), the stop plus the forward's error at x
                                * and x̂ pulled back; instances that refuse (VIJP_EUNSUPPORTED) or
                                * report no convergence are skipped, saying so */
} vijp_invbound_kind;

typedef struct {
    /* Relative error, in units of u, of the terms an entry is formed from
     * beyond the dot product (f and f′ of an activation) on the battery's
     * points: |x| <= 4, 0.5 away from every zero of f′ listed below.  0: 6
     * (a few correctly rounded operations and glibc's 2-ulp functions). */
    double ulps;
    vijp_invbound_kind inverse;
    double inv_a, inv_c, inv_b;
    /* Isolated zeros of f′ (elementwise layers), where relative bounds on
     * f′ mean nothing: the battery keeps its points away from them. */
    size_t n_deriv_zeros;
    double deriv_zeros[2];
    /* The relative backward error of this instance's vijp and inverse
     * solves, in units of u, where the type can prove one tighter than the
     * generic worst case (LU with growth 2^(n−1), which is astronomically
     * loose for n in the hundreds and lets a wrong solve pass); NULL or 0:
     * the generic C_solve(m, n).  The circular convolution's FFT solve
     * derives its own in conv.c. */
    double (*solve_ulps)(const vijp_layer *L);
} vijp_layer_bounds;

struct vijp_layer_type {
    const char *name;   /* as written in a spec: "dense", "leaky", "relu", "tanh" */
    const char *syntax; /* e.g. "dense:M or dense:MxN" */
    /* Fill L from the text after "name:" (arg may be NULL) and the incoming
     * width: L->in, L->out and, for types with arguments, L->state (allocated
     * here; left NULL on failure). */
    int (*parse)(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err);
    /* The instance state's lifetime.  state_free NULL: free(); state_copy
     * NULL: a state_size-byte memcpy (plain structs).  Types whose state owns
     * memory (coupling blocks hold their sub-layers) give both; state_copy
     * allocates through vijp_alloc and so never fails (vijp/error.h). */
    size_t state_size;
    void *(*state_copy)(const void *state);
    void (*state_free)(void *state);
    /* The item as it would be written in a spec ("leaky:0.5"); NULL: the
     * name alone.  Returns what snprintf returns. */
    int (*print)(const vijp_layer *L, char *buf, size_t size);
    size_t (*param_count)(const vijp_layer *L);
    /* Seeded initialiser (NULL when there are no parameters). */
    int (*init)(const vijp_layer *L, vijp_init init, vijp_rng *rng, double *theta);
    unsigned (*declare)(const vijp_layer *L);
    vijp_residual_kind residual;
    const vijp_ops_d *d;
    const vijp_ops_mp *mp; /* NULL: the type has no MPFR twin (plugins); MPFR formats are refused */
    /* The narrow formats' native emulation of mp (binary32, binary16,
     * bfloat16 and the mixed formats, in double arithmetic; the library's
     * src/emu/), bit for bit mp's results: what those formats run, where a
     * type has it.  It has every operator mp has; one returning
     * VIJP_EUNSUPPORTED leaves that case to mp.  NULL: mp runs every format
     * (plugins). */
    const vijp_ops_mp *emu;
    /* Certification (vijp certify, DESIGN §4).  jacobian_exact: the double
     * jacobian operator returns the exact Jacobian at double inputs (dense:
     * its entries are the weights).  interval: the type's interval
     * operators (vijp/interval.h, MPFI), NULL for none; elementwise types
     * give deriv_enclose there, an enclosure of f′ over an interval, and
     * others may give jacobian_box (J enclosed over a box) or
     * jacobian_lipschitz (a Lipschitz constant of J) for certify --box. */
    int jacobian_exact;
    const vijp_interval_ops *interval;
    /* Smooth elementwise activations: f(x) and f′(x) together at the
     * parameters theta, by nested forward-mode AD (dual numbers,
     * src/kernels/dual.h).  The layer's double operators are built on it
     * (src/layers/activation.c); NULL elsewhere. */
    void (*dual_eval)(const vijp_layer *L, const double *theta, double x, double *f, double *df);
    /* Layers whose Jacobian is neither exact nor diagonal: a rigorous
     * enclosure mid ± rad (m × n) at a double point (MPFI); 0 or VIJP_E*. */
    int (*jacobian_enclose)(const vijp_layer *L, const double *theta, const double *x, double *mid, double *rad);
    /* Non-submersive layers whose cokernel is known analytically at every
     * point (LayerNorm: span{1, ŷ}; softmax: span{1}): its dimension, so that
     * certification has only to prove the rest of J's rank. */
    size_t (*analytic_cokernel)(const vijp_layer *L, const double *theta, const double *x);

    /* ---- the layer's error-bound contract (tests, vijp check-layer) ---- */
    vijp_layer_bounds bounds;
    /* The index in theta of the bias added to output i (one sample), or
     * SIZE_MAX where none is; NULL: no bias. */
    size_t (*bias_index)(const vijp_layer *L, size_t i);
    /* An entrywise majorant M >= |J| at one sample x (m × n, double) of the
     * terms each entry is computed from, where they can cancel (LayerNorm,
     * softmax) while their rounding errors do not; NULL: |J| itself. */
    void (*jacobian_majorant)(const vijp_layer *L, const double *theta, const double *x, double *M);
    /* Adds to bound[p] (P entries) a bound on the error of vjp_param's entry
     * p in a format of unit roundoff u, given |X| (n × B) and |Gy| (m × B);
     * theta holds the parameters themselves.  NULL for types without. */
    void (*vjp_param_bound)(const vijp_layer *L, const double *theta, const double *absX, const double *absGy,
                            size_t B, double u, double *bound);
    /* binary32@SET's native operators (vijp_ops_f above); NULL: binary32@SET
     * runs this type in the emulation, as binary32. */
    const vijp_ops_f *f;
    /* The library's own: emu's operators on the doubles that matrices of
     * the emulated formats hold (vijp/mat.h), without MPFR in between
     * (src/layer/emu_native.h; plugin ABI 9).  Leave it NULL: a type from
     * outside the library runs its mp operators there. */
    const struct vijp_emu_native *emu_native;
};

/* Whether T is elementwise by its declaration: an f′ by dual_eval, or a
 * residual kind that keeps one value per unit (SIGN, DERIV).  Such a type
 * needs an f′ enclosure (vijp_layer_type_check), and a drift curve takes
 * its κ from f′ alone where it has no parameters. */
static inline int vijp_layer_type_elementwise(const vijp_layer_type *T)
{
    return T->dual_eval || T->residual == VIJP_RESIDUAL_SIGN || T->residual == VIJP_RESIDUAL_DERIV;
}

/* The registry: every layer type, found by name.  It holds the built-in
 * catalogue and whatever vijp_layer_register added (not thread-safe:
 * register before running anything). */
VIJP_API const vijp_layer_type *vijp_layer_type_find(const char *name);
VIJP_API const vijp_layer_type *const *vijp_layer_types(size_t *count);
#define VIJP_LAYER_TYPES_MAX 64

/* Add a layer type defined outside the tree (a plugin, or a program's own
 * type).  The descriptor must outlive every use.  Refused with VIJP_EINVAL
 * and a message: a name that is taken or not [a-z][a-z0-9_]*, a missing
 * required hook (parse, param_count, declare, the double forward, jvp, vjp,
 * vijp and jacobian; the same five MPFR operators when mp is given), and the
 * contradictions vijp_layer_type_check lists. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_register(const vijp_layer_type *T, vijp_error *err);
/* The checks vijp_layer_register makes, on any descriptor: a parameter
 * gradient operator with a residual kind that drops it (DERIV keeps f′ only),
 * an elementwise layer (dual_eval, or residual SIGN or DERIV) without an f′
 * enclosure, a Lipschitz constant of J without MPFR operators, a residual
 * INVERSE without an inverse, a fragment without its count or cokernel. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_type_check(const vijp_layer_type *T, vijp_error *err);

/* Parse one spec item such as "dense:64x32" or "leaky:0.1" given the incoming
 * width; on success L owns its state (vijp_layer_clear).  Instances are
 * checked too: parameters without vjp_param and init, parameters with a
 * residual kind that would drop their gradient (VIJP_RESIDUAL_DERIV), a
 * declared inverse without the operator. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_parse(vijp_layer *L, const char *item, size_t in_width, vijp_error *err);
/* A residual block y = f(x) + x (nskip = 0) or f(x) + P(x) from parsed
 * layers: f = f_layers[0 … nf), P = skip_layers[0 … nskip), each consuming the
 * previous one's output (vijp/catalogue.h).  The block takes the layers
 * over, and clears them on failure too.  For nets whose blocks nest, which a
 * spec item cannot spell (JSON nets, vijp_net_parse_json). */
VIJP_API VIJP_MUST_CHECK int vijp_layer_residual_new(vijp_layer *L, vijp_layer *f_layers, size_t nf,
                                                     vijp_layer *skip_layers, size_t nskip, vijp_error *err);
/* A coupling block ("additive" or "affine", sigmoid scale) whose residual
 * functions are F = f[0 … nf) and G = g[0 … ng) (S and T for affine), each
 * consuming the previous one's output and mapping h = f[0].in back to h
 * (widths free inside), residual blocks included; ng = 0 (g NULL): G is a
 * copy of F's layers, with parameters of its own.  Takes the layers over,
 * clearing them on failure too. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_coupling_new(vijp_layer *L, const char *type, vijp_layer *f, size_t nf,
                                                     vijp_layer *g, size_t ng, vijp_error *err);
/* dst = a deep copy of src. */
VIJP_API void vijp_layer_copy(vijp_layer *dst, const vijp_layer *src);
/* Release the state; L is then empty (type NULL). */
VIJP_API void vijp_layer_clear(vijp_layer *L);
/* The item as written in a spec ("leaky:0.5", "dense:4x6"). */
VIJP_API void vijp_layer_spec(const vijp_layer *L, char *buf, size_t size);

/* Format-generic operators: dispatch on the matrices' format after checking shapes.
 * theta may be NULL (or empty) for layers without parameters. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_forward(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *Y,
                       vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_layer_jvp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                   const vijp_mat *U, vijp_mat *V, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_layer_vjp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                   const vijp_mat *Gy, vijp_mat *Gx, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_layer_vjp_param(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                         const vijp_mat *Gy, vijp_mat *Gtheta, vijp_error *err);
/* Total fragment length for the batch X (0 for layers with trivial cokernel). */
VIJP_API size_t vijp_layer_fragment_count(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X);
/* frag must have vijp_layer_fragment_count rows (one column). */
VIJP_API VIJP_MUST_CHECK int vijp_layer_fragment(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                        const vijp_mat *Gy, vijp_mat *frag, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_layer_vijp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                    const vijp_mat *Gx, const vijp_mat *frag, vijp_mat *Gy, vijp_error *err);
/* x: n × 1, J: m × n. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_jacobian(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *x, vijp_mat *J,
                        vijp_error *err);
/* x: n × 1, Q: m × k with k = vijp_layer_fragment_count(L, theta, x). */
VIJP_API VIJP_MUST_CHECK int vijp_layer_cokernel(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *x, vijp_mat *Q,
                        vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_layer_inverse(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *Y, vijp_mat *X,
                       vijp_error *err);

#ifdef __cplusplus
}
#endif

#endif

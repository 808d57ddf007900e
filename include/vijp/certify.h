/* Certifying submersivity (DESIGN §4): is J, the input Jacobian of a layer at
 * a point, of full row rank, and by how much?
 *
 *   numerical    LAPACK dgesdd: singular values, rank with tolerance
 *                max(m,n)·u·σ_max, cokernel dimension and an orthonormal basis.
 *                Useful, never called a certificate.
 *   certified    a proof that σ_min(J) > s > 0 for the exact Jacobian: an
 *                enclosure mid ± rad of J, G = fl(mid·midᵀ) with its rounding
 *                bound, and a floating-point Cholesky of G − (s² + e_G + c)·I
 *                that succeeds, with Rump's / ValidSDP's constant c; in double,
 *                then in MPFR at doubling precisions up to a cap.  Weyl's
 *                inequality σ_min(J) >= σ_min(mid) − ‖rad‖₂ takes the radius.
 *                Far-apart row scales are equilibrated by powers of two
 *                (exact) when ‖J‖_F² leaves double's range or the rank is
 *                short: σ_min(J) >= σ_min(DJ)/max D.
 *   proven rank deficiency   from structure (m > n, exact zero rows or
 *                columns, an exact null vector checked in exact arithmetic)
 *                or, for an exact J (no radius) up to 512 rows that LAPACK
 *                sees as rank-deficient, from its exact rank over the
 *                rationals (method "exact-rank", src/certify/exact.c): the
 *                cokernel dimension is then exact, not a lower bound.
 *
 * A false "certified" is the worst bug this project can have: every rounding
 * that matters goes the safe way, and the tests try hard to break it. */
#ifndef VIJP_CERTIFY_H
#define VIJP_CERTIFY_H

#include "vijp/api.h"
#include "vijp/layer.h"
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double lo, hi;
} vijp_span;

typedef enum {
    VIJP_CERTIFIED_SUBMERSIVE,
    VIJP_NOT_SUBMERSIVE,
    VIJP_INCONCLUSIVE
} vijp_verdict;

VIJP_API const char *vijp_verdict_name(vijp_verdict v);

/* LAPACK's view of an m × n matrix. */
typedef struct {
    size_t m, n;
    double *sv;          /* min(m, n) singular values, descending */
    double sigma_max, sigma_min; /* σ_min: the m-th singular value (0 when m > n) */
    double condition;    /* σ_max / σ_min (Inf when σ_min = 0) */
    double rank_tol;     /* max(m, n) · 2^-53 · σ_max */
    size_t rank, cokernel_dim; /* rank: singular values above rank_tol; cokernel = m − rank */
    double *cokernel;    /* m × cokernel_dim orthonormal basis (column-major), left singular vectors */
} vijp_numeric;

VIJP_API VIJP_MUST_CHECK int vijp_numeric_analysis(const double *J, size_t m, size_t n, vijp_numeric *out, vijp_error *err);
VIJP_API void vijp_numeric_clear(vijp_numeric *a);

typedef struct {
    long prec_max;  /* highest MPFR precision the certificate may use (0: 4096) */
} vijp_certify_opts;

typedef struct {
    vijp_verdict verdict;
    char method[32];        /* "analytic", "certified-double", "certified-mpfr:P", "numerical", "structure" */
    double s;               /* proven σ_min(J) > s (rounded down); NaN unless certified */
    long prec;              /* bits of the arithmetic that proved it (53: double) */
    size_t cokernel_dim;    /* the proven one when cokernel_proven, else numerical */
    int cokernel_proven;
    double enclosure_radius; /* >= ‖rad‖₂ (σ_max), at most ‖rad‖_F, rounded up (0: J exact) */
    char reason[256];       /* why, for not-submersive and inconclusive */
    vijp_numeric num;
    double seconds_numeric, seconds_proof; /* wall time of LAPACK's analysis and of the rest (make bench) */
} vijp_certificate;

/* Certify the exact matrix J ∈ [mid − rad, mid + rad] (entrywise; rad NULL:
 * J = mid exactly).  NaN or Inf in mid or rad is VIJP_EDOMAIN. */
VIJP_API VIJP_MUST_CHECK int vijp_certify_matrix(const double *mid, const double *rad, size_t m, size_t n, const vijp_certify_opts *o,
                        vijp_certificate *out, vijp_error *err);
VIJP_API void vijp_certificate_clear(vijp_certificate *c);

/* A proof that rank J >= r for every J in [mid ± rad] (m × n): with P, an
 * m × r matrix of doubles (any; an orthonormal basis of the numerical row
 * space works best), the exact product Pᵀ·J is enclosed (its midpoint's
 * rounding bounded by directed MPFR sums, the radius |P|ᵀ·rad rounded up)
 * and certified of full row rank r, which forces rank J >= r.  Returns 0
 * with *proven = 1 and s (σ_min(Pᵀ J) > s) when it succeeds, *proven = 0
 * when the certificate cannot be made. */
VIJP_API VIJP_MUST_CHECK int vijp_certify_rank_at_least(const double *mid, const double *rad, size_t m, size_t n, const double *P, size_t r,
                               const vijp_certify_opts *o, int *proven, double *s, vijp_error *err);

/* Enclosure of the exact input Jacobian of L at x (one sample), m × n
 * column-major: mid and rad (>= 0, rounded up).  Exact for layers that
 * declare it (dense, leaky, relu: their double Jacobian is the exact one);
 * elementwise activations enclose f′ with MPFI.  VIJP_EUNSUPPORTED when the
 * layer offers neither. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_jacobian_enclosure(const vijp_layer *L, const double *theta, const double *x, double *mid,
                                  double *rad, vijp_error *err);

/* Certify layer L at x: the enclosure, vijp_certify_matrix, and the layer's
 * structural declarations checked against the result; a contradiction is
 * VIJP_EDECLARATION with a message naming the layer.  Declared verdicts report
 * method "analytic" (and keep the certificate's s when it has one). */
VIJP_API VIJP_MUST_CHECK int vijp_certify_layer(const vijp_layer *L, const double *theta, const double *x, const vijp_certify_opts *o,
                       vijp_certificate *out, vijp_error *err);

/* Certification over a box: every input x with lo_i <= x_i <= hi_i (one
 * sample).  The verdict holds for every x in the box:
 *   certified-submersive  σ_min(J(x)) >= s for every x in it, by
 *       "interval-bisection"  elementwise activations: J = diag(f′(x_i)),
 *                             f′ enclosed (MPFI, the type's deriv_enclose)
 *                             over pieces of each [lo_i, hi_i] that exclude
 *                             0; s is the least |f′| those enclosures allow;
 *       "constant-jacobian"   layers that declare J independent of x
 *                             (VIJP_DECL_LINEAR): the point certificate at the
 *                             box's centre holds at every x;
 *       "analytic"            the type declares it submersive everywhere;
 *       "interval-jacobian"   any other type with an interval Jacobian over
 *                             a box (vijp/interval.h): the box bisected,
 *                             widest coordinate first, each piece's
 *                             enclosure mid ± rad through the radius test
 *                             (vijp_certify_matrix); s the least over them;
 *       "lipschitz"           a type with only a Lipschitz constant L_J of J
 *                             (and MPFR operators): each piece of Euclidean
 *                             radius r about its centre c by σ_min(J(c)) −
 *                             L_J·r, J(c) the MPFR Jacobian at 256 bits;
 *   not-submersive        a proven point of the box where J is singular:
 *                         f′(p) = 0 exactly (coordinate i at p), or a zero
 *                         of f′ inside [a, b] by the intermediate value
 *                         theorem (f′ continuous, enclosed strictly positive
 *                         at one end and strictly negative at the other), or
 *                         anywhere (declared never submersive; a constant J
 *                         proven rank deficient); "interval-jacobian": a
 *                         piece's centre where J is enclosed exactly and
 *                         proven rank deficient;
 *   inconclusive          ("undecided" in the report) the pieces left when
 *                         the budget of intervals ran out, or of width
 *                         below (hi − lo)·2^-40 whose enclosure holds 0 with
 *                         no proof of a zero (the box routes: pieces
 *                         below 2^-24 of the box in every coordinate, or
 *                         past the budget, counted in n_open but not listed
 *                         in open[]); certified_fraction says how much of
 *                         the box's volume was proven.
 * The order: f′ enclosure, declarations (never submersive, linear,
 * submersive), interval Jacobian, Lipschitz constant.  Types with none of
 * these have no enclosure of J over a box: VIJP_EUNSUPPORTED. */
typedef struct {
    vijp_verdict verdict;
    char method[32];
    double s;                  /* σ_min(J(x)) >= s on the whole box (rounded down); NaN unless certified */
    int exact;                 /* not-submersive at the point lo == hi below, exactly */
    size_t coordinate;         /* elementwise: the input coordinate of the counterexample or open piece */
    double lo, hi;             /* where J is singular (a point, or an interval holding one) */
    double certified_fraction; /* of the box's volume (1 when certified) */
    size_t boxes, n_open;      /* intervals examined; pieces left undecided */
    vijp_span open[8];         /* the first of them (coordinate open_at[k]) */
    size_t open_at[8];
    char reason[256];
} vijp_box_certificate;

/* How far the bisection may go: intervals (0: 200000) and wall-clock
 * seconds (0: no limit; a verdict that ran out of time may differ between
 * machines, one bounded by intervals does not).  NULL: the defaults. */
typedef struct {
    size_t intervals;
    double seconds;
} vijp_box_budget;

VIJP_API VIJP_MUST_CHECK int vijp_certify_box(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                                              const vijp_box_budget *budget, const vijp_certify_opts *o,
                                              vijp_box_certificate *out, vijp_error *err);
/* "certified-submersive", "not-submersive", "undecided". */
VIJP_API const char *vijp_box_verdict_name(vijp_verdict v);
/* An enclosure [out_lo, out_hi] (L->out entries) of L's forward over the
 * box [lo, hi]: f(x) lies in it for every x in the box (one sample); what a
 * net's next layer is certified over.  In MPFI at 128 bits with outward
 * rounding (src/certify/image.c derives each form):
 *   elementwise activations  the mean value form f(m) + f′([lo, hi])·[lo − m, hi − m];
 *   layers declared linear   f(0) + J·[lo, hi], J enclosed;
 *   layernorm, groupnorm     per run: a-priori |y_i| <= sqrt(n − 1) ∩ the
 *                            natural extension (x_i − μ)/s ∩ (where s > 0
 *                            on the box) the mean value form y(m) +
 *                            J(box)·(box − m); then w ⊙ y + b;
 *   softmax, logsoftmax      their exact ranges, y_k in [1/(1 + Σ_{j≠k}
 *                            exp(hi_j − lo_k)), 1/(1 + Σ_{j≠k} exp(lo_j − hi_k))]
 *                            (the log of it, per run);
 *   maxpool                  [f(lo), f(hi)] (monotone);
 *   additive, affine,        the natural extension through their sub-layers'
 *   residual                 enclosures (intervals between them, no rounding
 *                            to double);
 *   an interval Jacobian     (a plugin's jacobian_box) the mean value form
 *   over a box               f(m) + J(box)·(box − m), intersected with any
 *                            of the above;
 *   a Lipschitz constant     (jacobian_lipschitz) Taylor's form f(m) +
 *   L_J of J                 J(m)·(box − m) ± L_J·r²/2, r the box's radius
 *                            about m.
 * f(m) and f(0) of activations and linear layers from the type's MPFR
 * operators at 256 bits (widened by 2^-200|f| + 2^-1074).  At lo = hi it
 * is the value enclosed to about 120 bits, rounded outward: 2 ulps wide at
 * most, unless the value cancels to below 2^-60 of its terms.  VIJP_EUNSUPPORTED for
 * other types (attention; a plugin without jacobian_box; a block's too,
 * when one of its sub-layers is one),
 * VIJP_EDOMAIN when the values leave double's range, or a coordinate of the
 * box is not finite with lo <= hi. */
VIJP_API VIJP_MUST_CHECK int vijp_layer_image_box(const vijp_layer *L, const double *theta, const double *lo,
                                                  const double *hi, double *out_lo, double *out_hi, vijp_error *err);

/* A proven counterexample for layer i > 0 of a chain of layers (a net's
 * layers[0..i], parameters theta[l]) over the chain's input box [lo, hi]
 * (layers[0].in entries): a point of the box whose image through layers
 * 0..i−1 is a point where layer i's J is singular.  For an elementwise
 * layer i: seeded points of the box (its centre, vertices, random ones),
 * each sent through rigorously (vijp_layer_image_box of the point), where
 * f′ is enclosed as exactly 0 (x_a), or a unit whose f′ is proven > 0 at
 * x_a's image and < 0 at x_b's (every layer continuous: the intermediate
 * value theorem on the segment).  1 with c's verdict not-submersive and
 * its reason, x_a (and x_b, unless c->exact) set; 0 when no proof was found
 * (nothing in c changed): the layer stays undecided. */
VIJP_API int vijp_net_box_counterexample(const vijp_layer *layers, double *const *theta, size_t i, const double *lo,
                                         const double *hi, uint64_t seed, vijp_box_certificate *c, double *x_a,
                                         double *x_b);

/* A chain of layers (layers[0..depth), parameters theta[l]) over the
 * chain's input box [lo, hi] (layers[0].in entries): each layer certified
 * (vijp_certify_box) over an enclosure of the inputs the box sends it, the
 * enclosure of one layer's values (vijp_layer_image_box) the next one's
 * box.  Past the first layer that enclosure holds more than the inputs that
 * reach it, so a singular point found in it refutes nothing by itself: the
 * verdict is undecided unless J is singular everywhere or
 * vijp_net_box_counterexample (seed) pulls a point of [lo, hi] back to one.
 * A layer without an enclosure of its values ends the chain: the layers
 * after it are undecided with no enclosure.  Beside the interval boxes the
 * inputs travel as an affine form c + G·ε + r (ε ∈ [−1, 1]^k, r an
 * interval; src/certify/affine.c) through dense and other linear layers
 * and elementwise activations (linearised over the box), restarted from
 * the box after any other layer; each next box is the interval image
 * intersected with the form's hull, which keeps the correlation a rotation
 * makes where intervals wrap it into a wider cube (nets wider than 256
 * units: intervals alone). */
typedef struct {
    vijp_box_certificate c;
    double *in_lo, *in_hi;  /* the enclosure it was certified over (its L->in inputs); NULL: none reached it */
    double *x_a, *x_b;      /* a proven counterexample in [lo, hi] (layers[0].in entries); NULL: none; x_b NULL when c.exact */
    char image_error[256];  /* why its values have no enclosure over the box ("" when they have one) */
} vijp_net_box_layer;

typedef struct {
    const vijp_box_budget *budget; /* each layer's bisection (NULL: the defaults) */
    const vijp_certify_opts *co;
    uint64_t seed;                 /* of vijp_net_box_counterexample's points */
    int intervals_only;            /* 1: interval boxes alone, as before affine forms (to compare) */
} vijp_net_box_opts;

/* out: depth entries, freed by vijp_net_box_clear.  0, or VIJP_EDOMAIN for
 * a box that is not finite with lo <= hi (nothing held).  o NULL: every
 * option's default (a zeroed vijp_net_box_opts). */
VIJP_API VIJP_MUST_CHECK int vijp_certify_net_box(const vijp_layer *layers, double *const *theta, size_t depth,
                                                  const double *lo, const double *hi, const vijp_net_box_opts *o,
                                                  vijp_net_box_layer *out, vijp_error *err);
VIJP_API void vijp_net_box_clear(vijp_net_box_layer *out, size_t depth);

/* Elementwise activations over the real line (y_k = f(x_k)).  Interval
 * bisection of f′ (the type's deriv_enclose, vijp/interval.h) over [−R, R]: pieces where the
 * enclosure excludes 0 are proven submersive; pieces narrower than tol whose
 * enclosure holds 0, or where f′ is enclosed as exactly 0, are reported,
 * adjacent ones merged.  Then, per format, where the layer's own computed
 * f′ (its double operator, or its MPFR operator in binary32, binary16,
 * bfloat16, bfloat16+binary32 or binary16+binary32, in that order: the
 * default table; vijp_activation_analyze_in takes the formats) first
 * underflows to 0, and where it first falls below u times its largest value
 * (numerically zero next to a unit with f′ ~ 1). */
#define VIJP_ACT_FORMATS 6      /* the default table's formats */
#define VIJP_ACT_FORMATS_MAX 16 /* the most a table holds */

typedef struct {
    double R, tol;
    size_t n_bad;
    vijp_span *bad;      /* where f′ may be 0 (enclosed, merged) */
    int complete;        /* the bisection finished within its budget */
    size_t boxes;        /* intervals examined */
    size_t n_fmt;        /* the table's formats, fmt[0 .. n_fmt) */
    struct {
        char format[32]; /* its name, as vijp_format's */
        double underflow_at;  /* smallest |x| found with computed f′ == 0 (Inf: none up to the scan's end) */
        double negligible_at; /* smallest |x| found with computed f′ < u · max f′ */
    } fmt[VIJP_ACT_FORMATS_MAX];
} vijp_activation_report;

/* theta: the layer's parameters (NULL for types without). */
VIJP_API VIJP_MUST_CHECK int vijp_activation_analyze(const vijp_layer *L, const double *theta, double R, double tol, vijp_activation_report *out, vijp_error *err);
/* The same with the table's formats given: n from 1 to VIJP_ACT_FORMATS_MAX,
 * in that order (e4m3's f′, for one, vanishes long before bfloat16's). */
VIJP_API VIJP_MUST_CHECK int vijp_activation_analyze_in(const vijp_layer *L, const double *theta, double R, double tol,
                                                        const vijp_format *formats, size_t n, vijp_activation_report *out,
                                                        vijp_error *err);
VIJP_API void vijp_activation_report_clear(vijp_activation_report *r);

#ifdef __cplusplus
}
#endif

#endif

/* Error metrics between a computed matrix and a reference (DESIGN §5). */
#ifndef VIJP_METRICS_H
#define VIJP_METRICS_H

#include "vijp/api.h"
#include "vijp/mat.h"
#include "vijp/xnum.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ‖a − ref‖_F / ‖ref‖_F, evaluated in MPFR at max(ref precision, 2·a's precision,
 * 128) bits so that the metric itself adds no visible error; a's entries are
 * converted exactly.  0 when both are zero, +Inf when only ref is.  Its
 * exponent is kept at any precision (vijp/xnum.h). */
VIJP_API vijp_xnum vijp_rel_err(const vijp_mat *a, const vijp_mat *ref);
/* max(m, x) where a NaN on either side sticks: a worst case over values
 * that include a failed (NaN) measurement is NaN, wherever it came. */
static inline double vijp_max_nan(double m, double x) { return m != m || x != x ? m + x : (x > m ? x : m); }

/* ‖a‖_F (rounded to double). */
VIJP_API double vijp_norm(const vijp_mat *a);

/* The three drift metrics of DESIGN §5 for a computed a against ref, each
 * with its exponent at any precision: mpfr:P errors near 2^-P underflow a
 * double past P ≈ 1070, their ulps of a total loss overflow one past 1024
 * (vijp/xnum.h; at ordinary precisions .m is the double they always were). */
typedef struct {
    vijp_xnum rel;       /* ‖a − ref‖₂ / ‖ref‖₂ (vijp_rel_err) */
    vijp_xnum ulps;      /* max_j |a_j − ref_j| / ulp_f(ref_j) */
    vijp_xnum angle_deg; /* angle between a and ref in degrees; NaN if exactly one is zero */
} vijp_metric;

/* ulp_f(x) = 2^max(E(x) − p, emin − 1) with x = m·2^E, 1/2 <= |m| < 1: the
 * spacing of format f at x, subnormals included (for mpfr:P, which has no
 * subnormals, 2^(E(x) − p), and a zero reference makes any nonzero error
 * infinite in ulps).  The angle is 2·atan2(‖â − b̂‖, ‖â + b̂‖) on the unit
 * vectors, accurate for tiny angles where acos(⟨â, b̂⟩) returns 0.  All in MPFR
 * at 2P + 64 bits (P: f's precision; at least 128), enough to resolve any
 * difference that matters in f whatever the reference's precision. */
VIJP_API void vijp_compare(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m);

#ifdef __cplusplus
}
#endif

#endif

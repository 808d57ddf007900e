/* vijp_compare's metrics without multiprecision arithmetic per entry, for
 * the formats the drift study measures most (comparison precision p <= 192
 * bits: binary32, double, the narrow and mixed formats).  Internal.
 *
 * Each entry's difference d = x − y is formed exactly in integer limbs, and
 * its ulp error from d's exact bits (a double against a packed reference:
 * in double arithmetic, with the error of d bounded, where that bound
 * decides); the three sums the metrics need (Σd²,
 * Σyd, Σy²) are kept in double-double with a proven bound on their error.
 * The metrics then come out as intervals (MPFR, directed rounding) that also
 * cover everything by which vijp_compare's exact evaluation (compare_exact,
 * at 2p + 80 bits) may differ from the true value.  Where an interval rounds
 * to one double, that double is what the exact evaluation gives, rounding
 * being monotone; where it does not (the rel or the angle within about
 * 2^-80 of a rounding boundary, an angle lost to cancellation, NaN or Inf
 * inputs), the caller evaluates exactly.  So the metrics stay bit for bit
 * those of the exact evaluation, at a small fraction of its cost. */
#ifndef VIJP_COMPARE_FAST_H
#define VIJP_COMPARE_FAST_H

#include "cache.h"

/* How vijp_compare_fast took its entries: slow, those whose difference
 * needed MPFR (inexact in p bits, or too far apart for the limb window);
 * doubles, those it took in double arithmetic alone (a double, or a packed
 * level of at most 106 bits, against a packed reference of at most p bits:
 * the drift engines' comparisons and the validation's). */
typedef struct {
    size_t slow, doubles;
} vijp_compare_counts;

/* 1: m holds vijp_compare's metrics for (a, ref, f) (angle = 0: angle_deg
 * NaN, as vijp_compare_rel_ulps).  0: undecided, m unspecified; evaluate
 * exactly.  cache (may be NULL): Σ ref² taken from it (fast_ready) or put
 * in it.  counts (may be NULL): set as above. */
int vijp_compare_fast(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m, int angle,
                      vijp_compare_cache *cache, vijp_compare_counts *counts);

/* vijp_compare_fast (without a cache) with the double path's lanes set
 * chosen (compare/lanes.h: 0 the baseline, 1 avx2, 2 avx512; a set this
 * CPU lacks, or -1: every entry one at a time): the tests run each. */
int vijp_compare_fast_lanes(int set, const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                            int angle, vijp_compare_counts *counts);

/* |d| / ulp_f(r) rounded up to 53 bits: vijp_compare's per-entry ulp
 * error (t: scratch of d's precision or more). */
vijp_xnum vijp_ulps_of(mpfr_srcptr d, mpfr_srcptr r, const vijp_format *f, mpfr_ptr t);

/* vijp_compare's exact evaluation alone (the reference the fast path is
 * tested against): angle = 0 as vijp_compare_rel_ulps. */
void vijp_compare_exact(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m, int angle);

#endif

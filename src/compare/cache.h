/* Comparing several matrices with one reference (the drift study compares
 * every engine's gradients with the same MPFR reference): what depends on
 * the reference alone is formed once.  Internal to the library. */
#ifndef VIJP_COMPARE_CACHE_H
#define VIJP_COMPARE_CACHE_H

#include "vijp/metrics.h"

/* Σ ref² once the first comparison with this reference has formed it: at
 * the exact evaluation's working precision (ready, ref_sumsq), and as the
 * fast path's scaled double-double with its error bound (fast_ready; see
 * compare_fast.c), whichever ran.  Zero-initialise; one cache per reference
 * matrix and format; vijp_compare_cache_clear frees it. */
typedef struct {
    int ready;
    mpfr_t ref_sumsq;
    int fast_ready;
    double yy_h, yy_l, yy_E; /* (yy_h + yy_l ± yy_E)·2^yy_scale */
    long yy_scale;
} vijp_compare_cache;

/* The precision vijp_compare works at for format f: 2P + 64 bits, at least
 * 128.  A reference rounded to it beforehand is read in place. */
mpfr_prec_t vijp_compare_prec(const vijp_format *f);

/* vijp_compare, with the reference's share taken from or stored in cache
 * (NULL: none).  Bit for bit vijp_compare's metrics. */
void vijp_compare_cached(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                         vijp_compare_cache *cache);
void vijp_compare_cache_clear(vijp_compare_cache *c);

/* vijp_compare's rel and ulps alone (angle_deg NaN), without the two sums
 * only the angle needs: the reference's validation, which compares two
 * whole gradient sets and looks at no angle.  cache (NULL: none) as in
 * vijp_compare_cached: the validation's Σ ref² is the one the engines'
 * comparisons need next, when ref is what they compare against. */
void vijp_compare_rel_ulps(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                           vijp_compare_cache *cache);

/* vijp_compare's ulps with each entry's unit taken at a scale: the largest
 * |a_i − y_i| / ulp_f(max(|y_i|, scale(ctx, i))), y_i = RN_p(ref_i) at the
 * comparisons' precision p, NaN where a difference is NaN.  scale(ctx, i)
 * >= 0 (0, or not finite: vijp_compare's own ulps at entry i).  The
 * validation's measure where an entry is a sum that may cancel far below
 * its terms (a dense layer's parameter gradient over a batch:
 * src/drift/memo.c), one entry at a time in MPFR: it runs where the plain
 * measure has failed. */
vijp_xnum vijp_compare_ulps_at_scale(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f,
                                     double (*scale)(const void *ctx, size_t i), const void *ctx);

#endif

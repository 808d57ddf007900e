/* Numbers that keep their exponent at every precision vijp accepts.
 *
 * The error of an mpfr:P computation is near 2^-P, and vijp takes P up to
 * 65536: past P ≈ 1070 such an error underflows a double (it read as 0, and
 * "bits needed 2"), and a count of ulps past 2^1024 overflows one.  A
 * vijp_xnum is m·2^e with a long exponent, which holds either without loss.
 *
 * Canonical form: wherever the value is a normal double, zero, infinite or
 * NaN, e = 0 and m is that double, so at ordinary precisions a vijp_xnum
 * carries exactly the double it replaced and prints the same; elsewhere
 * (below DBL_MIN or above DBL_MAX) 1/2 <= |m| < 1 and e is the binary
 * exponent.  Every function here returns canonical values. */
#ifndef VIJP_XNUM_H
#define VIJP_XNUM_H

#include "vijp/api.h"
#include <mpfr.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double m;
    long e;
} vijp_xnum;

/* x (exactly: a subnormal keeps its value, now normalised). */
VIJP_API vijp_xnum vijp_xnum_of(double x);
/* m·2^e, rounded to 53 bits only where m itself has more (it never has). */
VIJP_API vijp_xnum vijp_xnum_2exp(double m, long e);
/* x rounded to 53 bits in direction rnd, at any exponent. */
VIJP_API vijp_xnum vijp_xnum_of_mpfr(mpfr_srcptr x, mpfr_rnd_t rnd);
/* The value set into y (exactly: y has at least 53 bits, MPFR's exponent
 * range holds any e vijp forms). */
VIJP_API void vijp_xnum_get_mpfr(mpfr_ptr y, vijp_xnum x);
/* The nearest double: 0 or a subnormal below double's range, ±Inf above. */
VIJP_API double vijp_xnum_double(vijp_xnum x);
/* log2 |x| and log10 |x| (−Inf at 0, NaN for NaN), at any exponent. */
VIJP_API double vijp_xnum_log2(vijp_xnum x);
VIJP_API double vijp_xnum_log10(vijp_xnum x);
/* a + b, rounded to nearest (where the exponents lie more than about 1000
 * apart, the smaller is below the larger's last bit and drops out). */
VIJP_API vijp_xnum vijp_xnum_add(vijp_xnum a, vijp_xnum b);
/* a·b and a/b, rounded to nearest (a/0 as double's: ±Inf or NaN). */
VIJP_API vijp_xnum vijp_xnum_mul(vijp_xnum a, vijp_xnum b);
VIJP_API vijp_xnum vijp_xnum_div(vijp_xnum a, vijp_xnum b);
/* −1, 0, 1 as a <, =, > b; a NaN on either side compares as 2. */
VIJP_API int vijp_xnum_cmp(vijp_xnum a, vijp_xnum b);
/* max(a, b) where a NaN on either side sticks (vijp_max_nan's rule). */
VIJP_API vijp_xnum vijp_xnum_max_nan(vijp_xnum a, vijp_xnum b);
/* a <= b, false when either is NaN (as double's <=). */
static inline int vijp_xnum_le(vijp_xnum a, vijp_xnum b) { return vijp_xnum_cmp(a, b) <= 0; }
static inline int vijp_xnum_isfinite(vijp_xnum x) { return x.m - x.m == 0; }
static inline int vijp_xnum_isnan(vijp_xnum x) { return x.m != x.m; }
/* Whether x is a double (e = 0): false only past double's normal range. */
static inline int vijp_xnum_is_double(vijp_xnum x) { return x.e == 0; }

/* x printed with fmt, a printf format holding one floating conversion
 * (%e, %g, %f, flags, width and precision as printf's): printf's own text
 * where x is a double, MPFR's "%R…" of the exact value elsewhere (e.g.
 * "1.61e-1214").  Returns what snprintf returns. */
VIJP_API int vijp_xnum_snprintf(char *buf, size_t size, const char *fmt, vijp_xnum x);
/* A decimal (or "inf", "nan") read at any exponent, correctly rounded to 53
 * bits: "1.61e-1214" is not 0.  *end (may be NULL) receives the first
 * character not read; returns 0, or −1 where s does not start with a
 * number. */
VIJP_API int vijp_xnum_parse(const char *s, vijp_xnum *x, char **end);
/* 17 significant digits, which read back (vijp_xnum_parse) to the same
 * value at any exponent: what files that must round-trip write. */
#define VIJP_XNUM_ROUND_TRIP "%.17g"

#ifdef __cplusplus
}
#endif

#endif

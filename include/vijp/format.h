/* Number formats (DESIGN §3): a format is a run-time value, never a compile-time switch. */
#ifndef VIJP_FORMAT_H
#define VIJP_FORMAT_H

#include <stddef.h>
#include <mpfr.h>

typedef enum {
    VIJP_DOUBLE,   /* native IEEE binary64: the fast path (BLAS/LAPACK) */
    VIJP_MPFR,     /* mpfr:P, unbounded exponent range: the oracle */
    VIJP_BINARY32, /* the three below are MPFR emulations: precision, exponent  */
    VIJP_BINARY16, /* range and subnormals of the IEEE format, round to nearest */
    VIJP_BFLOAT16  /* even (mpfr_subnormalize after every operation)            */
} vijp_format_kind;

typedef struct {
    vijp_format_kind kind;
    mpfr_prec_t prec;     /* significand bits, hidden bit included */
    int emulated;         /* nonzero: clamp to [emin, emax] and subnormalize */
    mpfr_exp_t emin;      /* MPFR convention: x = m·2^e with 1/2 <= |m| < 1 */
    mpfr_exp_t emax;
    size_t value_bytes;   /* bytes one value takes when stored (for memory accounting) */
    char name[32];
    int exact_dots;       /* nonzero (mpfr:P only): dot products rounded once, not per operation (oracles/dot.h);
                           * set for the drift study's reference, never by parsing a name */
} vijp_format;

/* Precision limits of mpfr:P.  The lower limit is MPFR's; the upper one keeps
 * a 256-layer run within minutes and far exceeds any reference we need. */
#define VIJP_PREC_MIN 2
#define VIJP_PREC_MAX 65536

#include "vijp/error.h"

/* Parse "double", "mpfr:P", "binary32", "binary16", "bfloat16". */
VIJP_MUST_CHECK int vijp_format_parse(const char *s, vijp_format *f, vijp_error *err);
/* One of the fixed formats (every kind but VIJP_MPFR, which needs a
 * precision: vijp_format_mpfr); cannot fail. */
void vijp_format_fixed(vijp_format *f, vijp_format_kind kind);
/* mpfr:P with P bits, unbounded exponent range. */
VIJP_MUST_CHECK int vijp_format_mpfr(vijp_format *f, long prec, vijp_error *err);
/* Unit roundoff u = 2^-p of the format. */
double vijp_format_unit_roundoff(const vijp_format *f);

#endif

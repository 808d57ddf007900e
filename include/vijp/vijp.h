/* vijp: numerical risk of memory-efficient gradient methods (see docs/DESIGN.md). */
#ifndef VIJP_H
#define VIJP_H

#define VIJP_VERSION "0.1.0"

#include "vijp/error.h"
#include "vijp/format.h"
#include "vijp/rng.h"
#include "vijp/mat.h"
#include "vijp/layer.h"
#include "vijp/net.h"
#include "vijp/engine.h"
#include "vijp/metrics.h"

/* Parse "double", "mpfr:P", "binary32", "binary16", "bfloat16". */
int vijp_format_parse(const char *s, vijp_format *f, vijp_error *err);
/* mpfr:P with P bits, unbounded exponent range. */
int vijp_format_mpfr(vijp_format *f, long prec, vijp_error *err);
/* Unit roundoff u = 2^-p of the format. */
double vijp_format_unit_roundoff(const vijp_format *f);

#endif

/* Correctly rounded elementary functions on the narrow formats' grids
 * (emu.h), bit for bit the oracle's vo_exp, vo_log1p, … (src/format/arith.c:
 * MPFR's exact function value, rounded once to the format).
 *
 * Ziv's rounding test: glibc's double result y lies within a few ulps of the
 * exact value (elementary.c cites the bound); if the two ends of a safety
 * interval around y round to the same grid value, so does everything
 * between them (rounding is monotone), the exact value included.  Otherwise
 * (y within the margin of a midpoint of the grid: about 2^(p−48) of the
 * time) the value comes from the oracle itself, in MPFR.
 *
 * x must lie on f's arithmetic grid (vijp_emu_arith), as every value the
 * emulated operators see does; f must satisfy vijp_emu_applies. */
#ifndef VIJP_EMU_ELEMENTARY_H
#define VIJP_EMU_ELEMENTARY_H

#include "emu.h"

typedef enum {
    VIJP_EMU_EXP, VIJP_EMU_EXPM1, VIJP_EMU_LOG, VIJP_EMU_LOG1P,
    VIJP_EMU_TANH, VIJP_EMU_SECH, VIJP_EMU_ERFC, VIJP_EMU_ATANH,
    VIJP_EMU_FN_COUNT
} vijp_emu_fn;

/* fn(x) correctly rounded in f; *fell_back (if not NULL) := 1 when the
 * rounding test failed and MPFR decided, else 0.  margin_log2: the safety
 * margin relative to |y| as a power of two (VIJP_EMU_ZIV_MARGIN; tests pass
 * others to see the test fail when it is too small). */
double vijp_emu_elem(vijp_emu_fn fn, double x, const vijp_format *f, int margin_log2, int *fell_back);

/* 2^-48 relative: 16 ulps of binary64 (elementary.c). */
#define VIJP_EMU_ZIV_MARGIN (-48)

static inline double vijp_emu_exp(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_EXP, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_expm1(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_EXPM1, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_log(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_LOG, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_log1p(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_LOG1P, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_tanh(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_TANH, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_sech(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_SECH, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_erfc(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_ERFC, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }
static inline double vijp_emu_atanh(double x, const vijp_format *f) { return vijp_emu_elem(VIJP_EMU_ATANH, x, f, VIJP_EMU_ZIV_MARGIN, NULL); }

/* The oracle's vo_fn on x in f (the fallback; tests compare against it). */
double vijp_emu_elem_oracle(vijp_emu_fn fn, double x, const vijp_format *f);

#endif

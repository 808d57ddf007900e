/* Native emulation of the narrow formats, bit for bit.
 *
 * The emulated formats (binary32, binary16, bfloat16 and the mixed ones)
 * are defined by the MPFR oracles (src/format/arith.c: every operation rounded
 * once to the format's grid, subnormals and overflow included).  That
 * definition is exact but costs an MPFR operation per rounding.  For
 * formats of at most 24 bits the same results come from double arithmetic:
 *
 *   +, −, ×, ÷, √ of two p-bit numbers, computed in binary64 and then
 *   rounded to p bits, equal the correctly rounded p-bit result whenever
 *   53 >= 2p + 2 (Figueroa, "When is double rounding innocuous?", SIGNUM
 *   Newsletter 30(3), 1995; Boldo and Melquiond, "When double rounding is
 *   odd", 2005, for the general statement).  p <= 24 gives 53 >= 50.
 *   The argument holds on the subnormal grid as well: sums and products
 *   that land there are exact in binary64 (p-bit operands on that grid),
 *   and a quotient or root cannot fall within 2^-53 relative of one of its
 *   midpoints without equalling it (the midpoint has at most p + 1 bits).
 *
 * Every format of at most 24 bits lies inside binary32's exponent range,
 * so the binary64 intermediates are never subnormal nor out of range and
 * rounding them to the format's grid is one addition and one subtraction
 * (the classic shift constant; no change of rounding mode).  Fused
 * multiply-adds (vo_fma, and the mixed formats' madd in binary32) round
 * the exact a·b + c once, through rounding to odd (vijp_emu_fma below).
 *
 * The oracles stay the definition: tests/t-emu.c checks every function here
 * against them, bit for bit, and `make regress` runs the whole study
 * through both paths' results.  Only src/ uses this file. */
#ifndef VIJP_EMU_H
#define VIJP_EMU_H

#include "vijp/format.h"
#include "format/emulable.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A rounding target: p significand bits, MPFR's exponent convention
 * (x = m·2^e, 1/2 <= |m| < 1, normal for emin + p − 1 < e <= emax; the
 * smallest subnormal 2^(emin − 1)). */
typedef struct {
    int p;
    int emin, emax;
} vijp_emu_grid;


static inline vijp_emu_grid vijp_emu_arith(const vijp_format *f)
{
    return (vijp_emu_grid){(int)f->prec, (int)f->emin, (int)f->emax};
}

static inline vijp_emu_grid vijp_emu_store(const vijp_format *f)
{
    return (vijp_emu_grid){(int)f->store_prec, (int)f->store_emin, (int)f->store_emax};
}

/* x (any double, ±0, ±Inf or NaN)
 * rounded to nearest, ties to even, onto g: the value mpfr_set_d, then
 * mpfr_check_range and mpfr_subnormalize under g give. */
static inline double vijp_emu_round(double x, vijp_emu_grid g)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)((bits >> 52) & 0x7ff);
    if (biased == 0x7ff || x == 0) return x; /* NaN, ±Inf, ±0 */
    if (biased == 0) return copysign(0.0, x); /* below 2^-1022: far under every grid's half-quantum */
    int e = biased - 1022;                    /* MPFR's exponent: |x| in [2^(e-1), 2^e) */
    if (e > g.emax) return copysign(INFINITY, x); /* |x| >= 2^emax: past the grid (and the shift below would overflow) */
    int k = e - g.p > g.emin - 1 ? e - g.p : g.emin - 1; /* the quantum 2^k at x */
    /* C = 1.5·2^(k+52): |x| < 2^(k+p+1) <= 2^(k+25), so |x| + C lies in
     * [2^(k+52), 2^(k+53)), whose binary64 spacing is 2^k: the addition
     * rounds |x| to a multiple of 2^k (nearest, ties to even) and the
     * subtraction is exact (Sterbenz). */
    uint64_t cbits = (uint64_t)(k + 52 + 1023) << 52 | (uint64_t)1 << 51;
    double c;
    memcpy(&c, &cbits, sizeof c);
    double r = (fabs(x) + c) - c, big;
    uint64_t bigbits = (uint64_t)(g.emax + 1023) << 52; /* 2^emax: the first value past the grid */
    memcpy(&big, &bigbits, sizeof big);
    if (r >= big) r = INFINITY; /* rounded to 2^emax or beyond: overflow */
    return copysign(r, x);
}

static inline double vijp_emu_add(double a, double b, vijp_emu_grid g) { return vijp_emu_round(a + b, g); }
static inline double vijp_emu_sub(double a, double b, vijp_emu_grid g) { return vijp_emu_round(a - b, g); }
static inline double vijp_emu_mul(double a, double b, vijp_emu_grid g) { return vijp_emu_round(a * b, g); }
static inline double vijp_emu_div(double a, double b, vijp_emu_grid g) { return vijp_emu_round(a / b, g); }

/* The elimination step of the solves, y − t·x on g: the product and the
 * difference each rounded to g, as vo_ge_solve computes it (the formats'
 * solves). */
static inline double vijp_emu_elim_step(double y, double t, double x, vijp_emu_grid g)
{
    return vijp_emu_sub(y, vijp_emu_mul(t, x, g), g);
}
static inline double vijp_emu_sqrt(double a, vijp_emu_grid g) { return vijp_emu_round(sqrt(a), g); }

/* a·b + c with one rounding onto g (the oracle's vo_fma).  a·b of two
 * p-bit values (p <= 24) is exact in binary64; the sum's rounding error
 * comes from TwoSum (exact, Knuth), and the sum is rounded *to odd* at 53
 * bits: an inexact sum whose last bit is even moves one ulp toward the
 * exact value.  Rounding to odd at q >= p + 2 bits and then to nearest at p
 * bits is one correct rounding to nearest (Boldo and Melquiond, "Emulation
 * of FMA and correctly rounded sums: proved algorithms using rounding to
 * odd", IEEE TC 57(4), 2008, Thm. 1), here with q = 53 >= 26.  Operands
 * within binary32's range keep a·b + c far inside binary64's normal range
 * (|a·b| >= 2^-298 when nonzero, <= 2^256). */
static inline double vijp_emu_fma(double a, double b, double c, vijp_emu_grid g)
{
    double prod = a * b, s = prod + c;
    if (!isfinite(s)) return vijp_emu_round(s, g);
    double bb = s - prod, err = (prod - (s - bb)) + (c - bb); /* TwoSum: prod + c = s + err exactly */
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    if (err != 0 && !(bits & 1)) s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return vijp_emu_round(s, g);
}

/* The oracle's vo_madd (acc += a·b) in format f: mixed formats one fused
 * rounding (operands first rounded to operand_prec where f has one, tf32),
 * the others the product rounded, then the sum. */
static inline double vijp_emu_madd(double acc, double a, double b, const vijp_format *f)
{
    vijp_emu_grid g = vijp_emu_arith(f);
    if (!f->mixed) return vijp_emu_add(acc, vijp_emu_mul(a, b, g), g);
    if (f->operand_prec) {
        vijp_emu_grid o = {(int)f->operand_prec, g.emin, g.emax};
        a = vijp_emu_round(a, o), b = vijp_emu_round(b, o);
    }
    return vijp_emu_fma(a, b, acc, g); /* binary32's grid: every mixed format accumulates there */
}

#endif

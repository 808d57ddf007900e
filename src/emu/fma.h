/* c + a·b rounded once onto a grid of at most 24 bits, in double: the
 * oracle's vo_fma (oracles/arith.c) for every format vijp_emu_applies
 * accepts, bit for bit (tests/t-emu-dense.c, fma_matches_oracle).
 *
 * Why it holds.  a and b are p-bit values (p <= 24) within binary32's
 * exponent range, so a·b is exact in binary64 (<= 48 bits, between 2^-298
 * and 2^256).  c + a·b need not be, and rounding it to 53 bits and then to
 * p bits can go wrong (double rounding: emu.h's theorem covers one
 * operation of two p-bit numbers, not this sum).  So the sum is first
 * rounded to odd at 53 bits: s = RN(c + a·b) and its exact error e (Knuth's
 * TwoSum, exact without overflow); when e ≠ 0 the value lies strictly
 * between s and its neighbour towards e, and round-to-odd picks whichever
 * of the two has an odd last bit.  Rounding that to nearest at p bits gives
 * the correctly rounded p-bit sum whenever 53 >= p + 2 (Boldo and
 * Melquiond, "Emulation of FMA and correctly rounded sums: proved
 * algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008,
 * Theorem 1), on the subnormal grid as well (binary64 is many bits finer
 * there).  A nonzero sum is at least 2^-298 (c and a·b are multiples of it),
 * so s is never 0 when e ≠ 0.  An exactly zero sum has IEEE's sign, which is
 * MPFR's (+0 unless both terms are −0); Inf and NaN operands give IEEE's
 * Inf or NaN, as MPFR. */
#ifndef VIJP_EMU_FMA_H
#define VIJP_EMU_FMA_H

#include "emu.h"

static inline double vijp_emu_fma(double a, double b, double c, vijp_emu_grid g)
{
    double p = a * b, s = c + p; /* p exact */
    if (!isfinite(s)) return s;
    double t = s - c, e = (c - (s - t)) + (p - t); /* TwoSum: c + p = s + e exactly */
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    if (e != 0 && !(bits & 1)) { /* to odd: the neighbour towards e (sign-magnitude: +1 is away from 0) */
        bits = (e > 0) == (s > 0) ? bits + 1 : bits - 1;
        memcpy(&s, &bits, sizeof s);
    }
    return vijp_emu_round(s, g);
}

#endif

/* Stochastic rounding's pieces (sr.c), for mat.c and the tests: the
 * counter-based generator and the rounding of one value with given bits. */
#ifndef VIJP_FORMAT_SR_H
#define VIJP_FORMAT_SR_H

#include "vijp/mat.h"
#include <stdint.h>

/* Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3", SC11): out := the block of counter ctr under key,
 * Random123's philox4x32 with 10 rounds, word for word. */
void vijp_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The 32 random bits of element i of the tensor that k names: Philox's first
 * word for counter (i, tensor) under key seed (64-bit halves, low word first). */
uint32_t vijp_sr_bits(const vijp_sr_key *k, uint64_t i);

/* r := a rounded stochastically to f's storage (format.h, store_sr) with
 * the random bits `bits`: to one of the two storage values around a, away
 * from zero when the first 32 bits a loses, as an integer D, satisfy
 * D + bits >= 2^32 (probability D/2^32), toward zero otherwise; exact values
 * unchanged; past the largest finite value, the format's overflow rule.
 * NaN, ±Inf and ±0 as vo_store.  r may be a. */
void vijp_sr_store(mpfr_ptr r, mpfr_srcptr a, const vijp_format *f, uint32_t bits);

#endif

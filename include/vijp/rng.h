/* Seeded pseudo-random numbers (xoshiro256**, seeded by splitmix64).
 * No global state: every generator is a value owned by its caller. */
#ifndef VIJP_RNG_H
#define VIJP_RNG_H

#include "vijp/api.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4];
} vijp_rng;

VIJP_API void vijp_rng_seed(vijp_rng *r, uint64_t seed);
VIJP_API uint64_t vijp_rng_u64(vijp_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
VIJP_API double vijp_rng_uniform(vijp_rng *r);
/* Standard normal (Marsaglia polar method). */
VIJP_API double vijp_rng_normal(vijp_rng *r);
/* out[0..n) := n draws of vijp_rng_normal, bit for bit the same values
 * and r left as n calls leave it, faster: the accepted pairs are gathered
 * first and their logarithms computed side by side. */
VIJP_API void vijp_rng_normals(vijp_rng *r, double *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif

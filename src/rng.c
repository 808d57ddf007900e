#include "vijp/rng.h"
#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void vijp_rng_seed(vijp_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t vijp_rng_u64(vijp_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double vijp_rng_uniform(vijp_rng *r) { return (double)(vijp_rng_u64(r) >> 11) * 0x1p-53; }

double vijp_rng_normal(vijp_rng *r)
{
    for (;;) {
        double u = 2 * vijp_rng_uniform(r) - 1, v = 2 * vijp_rng_uniform(r) - 1;
        double s = u * u + v * v;
        if (s > 0 && s < 1) return u * sqrt(-2 * log(s) / s);
    }
}

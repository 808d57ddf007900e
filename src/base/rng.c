#include "vijp/rng.h"
#include <math.h>
#include <string.h>

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

/* frexp for a positive normal s, from its bits (libm's is a call a draw):
 * s = m·2^e with m in [½, 1), both exact.  The polar method's s = u² + v²
 * is normal: u and v are multiples of 2^-52, so s >= 2^-104 when s > 0. */
static double frexp_normal(double s, int *e)
{
    uint64_t b;
    memcpy(&b, &s, sizeof b);
    *e = (int)(b >> 52) - 1022;
    b = (b & ~(0x7ffull << 52)) | (1022ull << 52);
    memcpy(&s, &b, sizeof s);
    return s;
}

/* log s for 0 < s < 1 with + − × ÷ only: libm's log may differ between CPUs
 * (glibc picks an FMA variant at run time), and seeded draws must give the
 * same bits everywhere.  s = m·2^e with m in [√½, √2) (frexp is exact), then
 * log m = 2 atanh t, t = (m − 1)/(m + 1), |t| <= 0.1716, by its series to
 * t^23, whose remainder is below 0.1716^25/25 < 1e-20: accurate to a few ulps,
 * which is all a random draw needs. */
/* 1/k for k = 23, 21, …, 1, each the correctly rounded quotient the
 * loop's 1.0 / k gave before it was a table (the compiler folds the
 * divisions with the same IEEE rounding): the same bits, without twelve
 * divisions a draw; and the series' other constants (log_portable and
 * normals2 share them: their lanes must round as it does). */
static const double inv_odd[12] = {1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13,
                                   1.0 / 11, 1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
#define SQRT_HALF 0.70710678118654752
#define LN2 0.69314718055994530942

static double log_portable(double s)
{
    int e;
    double m = frexp_normal(s, &e);
    if (m < SQRT_HALF) m *= 2, e--;
    double t = (m - 1) / (m + 1), t2 = t * t, sum = 0;
    for (int k = 0; k < 12; k++) sum = sum * t2 + inv_odd[k];
    return 2 * t * sum + e * LN2;
}

double vijp_rng_normal(vijp_rng *r)
{
    for (;;) { /* Marsaglia's polar method */
        double u = 2 * vijp_rng_uniform(r) - 1, v = 2 * vijp_rng_uniform(r) - 1;
        double s = u * u + v * v;
        if (s > 0 && s < 1) return u * sqrt(-2 * log_portable(s) / s);
    }
}

/* Two draws' u·sqrt(−2 log s / s) side by side (GCC/Clang vector
 * extensions: two lanes, the baseline's SSE2 on x86-64), each lane with
 * log_portable's and vijp_rng_normal's operations in their order: the
 * same bits.  frexp from the bits, the halving test as a mask (m + m is
 * 2m exactly), the exponent made a double through 1.5·2^52 (exact for
 * |e| < 2^51). */
typedef double v2d __attribute__((vector_size(16)));
typedef int64_t v2i __attribute__((vector_size(16)));
static void normals2(double *out, const double *u, const double *s)
{
    v2d sv, uv;
    memcpy(&sv, s, sizeof sv), memcpy(&uv, u, sizeof uv);
    v2i b = (v2i)sv, e = ((b >> 52) & 0x7ff) - 1022;
    v2d m = (v2d)((b & ~(0x7ffll << 52)) | (1022ll << 52));
    v2i low = (v2i)(m < SQRT_HALF);
    m = m + (v2d)((v2i)m & low), e = e + low;
    v2d ed = (v2d)(e + 0x4338000000000000ll) - 0x1.8p52;
    v2d one = {1, 1}, t = (m - one) / (m + one), t2 = t * t, sum = {0, 0};
    for (int k = 0; k < 12; k++) sum = sum * t2 + inv_odd[k];
    v2d log = 2 * t * sum + ed * LN2;
    v2d q = -2 * log / sv;
    double r[2];
    memcpy(r, &q, sizeof r);
    out[0] = u[0] * sqrt(r[0]), out[1] = u[1] * sqrt(r[1]);
}

/* The draws in batches: the pairs a batch accepts, as vijp_rng_normal
 * draws them (the same uniforms in the same order), then each one's
 * u·sqrt(−2 log s / s) with the same operations: independent of one
 * another, so the processor overlaps their series instead of waiting on
 * each in turn (vijp_rng_normal's loop puts a draw's uniforms and its
 * rejection test between them). */
void vijp_rng_normals(vijp_rng *r, double *out, size_t n)
{
    enum { BATCH = 64 };
    double us[BATCH], ss[BATCH];
    while (n) {
        size_t k = n < BATCH ? n : BATCH;
        for (size_t i = 0; i < k;) { /* without a branch on the test: a fifth of the pairs fail it, unpredictably */
            double u = 2 * vijp_rng_uniform(r) - 1, v = 2 * vijp_rng_uniform(r) - 1;
            double s = u * u + v * v;
            us[i] = u, ss[i] = s;
            i += (size_t)(s > 0) & (size_t)(s < 1);
        }
        size_t i = 0;
        for (; i + 2 <= k; i += 2) normals2(out + i, us + i, ss + i);
        for (; i < k; i++) out[i] = us[i] * sqrt(-2 * log_portable(ss[i]) / ss[i]);
        out += k, n -= k;
    }
}

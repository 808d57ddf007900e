/* Stochastic rounding of stored values (":sr", format.h's store_sr;
 * docs/formats.md): a counter-based generator keyed by the run's seed, the
 * tensor and the element, so a run's bits depend on nothing else (threads,
 * ranks, the order of evaluation), and the rounding itself. */
#include "sr.h"
#include "vijp/arith.h"
#include <math.h>

/* Philox's S-box: the 32×32 → 64-bit product's halves. */
static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32), *lo = (uint32_t)p;
}

void vijp_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    /* Random123's constants: the multipliers, and the Weyl key increments
     * (the golden ratio's and √3 − 1's first 32 bits) */
    const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round) k0 += W0, k1 += W1; /* the key bumped before every round but the first */
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(M0, x0, &hi0, &lo0);
        mulhilo(M1, x2, &hi1, &lo1);
        uint32_t y0 = hi1 ^ x1 ^ k0, y2 = hi0 ^ x3 ^ k1;
        x0 = y0, x1 = lo1, x2 = y2, x3 = lo0;
    }
    out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

uint32_t vijp_sr_bits(const vijp_sr_key *k, uint64_t i)
{
    const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)k->tensor, (uint32_t)(k->tensor >> 32)};
    const uint32_t key[2] = {(uint32_t)k->seed, (uint32_t)(k->seed >> 32)};
    uint32_t out[4];
    vijp_philox4x32_10(ctr, key, out);
    return out[0];
}

/* A tensor's name as one 64-bit word: role, layer and sample in fields of
 * their own (8, 28 and 28 bits: 268 million layers or samples, far past
 * any run), so two tensors of a run never share a counter range. */
vijp_sr_key vijp_sr_key_of(uint64_t seed, vijp_sr_role role, size_t layer, size_t sample)
{
    vijp_sr_key k = {seed, (uint64_t)role << 56 | ((uint64_t)layer & 0xFFFFFFFu) << 28 | ((uint64_t)sample & 0xFFFFFFFu), 1};
    return k;
}

/* r (finite, nonzero, exact) to ±(the format's overflow value): what
 * rounding past the largest finite value gives (format.h, vijp_overflow). */
static void overflow(mpfr_ptr r, const vijp_format *f)
{
    int neg = mpfr_signbit(r) != 0;
    if (f->store_overflow == VIJP_OVERFLOW_NAN) mpfr_set_nan(r);
    else if (f->store_overflow == VIJP_OVERFLOW_SATURATE) mpfr_set_d(r, neg ? -f->store_max : f->store_max, MPFR_RNDN);
    else mpfr_set_inf(r, neg ? -1 : 1);
}

void vijp_sr_store(mpfr_ptr r, mpfr_srcptr a, const vijp_format *f, uint32_t bits)
{
    if (!mpfr_regular_p(a)) { /* ±0, ±Inf, NaN: what rounding to nearest gives */
        vo_store(r, a, f);
        return;
    }
    /* |a| = t·2^k, 2^k the storage's quantum at a (normal: 2^(EXP − p);
     * subnormal: the smallest subnormal 2^(emin − 1)); t = N + φ, N an
     * integer, 0 <= φ < 1.  The neighbours are N·2^k and (N + 1)·2^k. */
    int neg = mpfr_signbit(a) != 0; /* now: r may be a */
    mpfr_exp_t e = mpfr_get_exp(a), k = e - (mpfr_exp_t)f->store_prec;
    if (k < f->store_emin - 1) k = f->store_emin - 1;
    mpfr_prec_t pa = mpfr_get_prec(a), pt = pa + 64; /* room for the integer part and 32 bits of φ, exactly */
    mpfr_t t, n;
    mpfr_inits2(pt, t, n, (mpfr_ptr)0);
    mpfr_abs(t, a, MPFR_RNDN);
    mpfr_div_2si(t, t, k, MPFR_RNDN);   /* exact: a power of two, inside MPFR's range */
    mpfr_rint_floor(n, t, MPFR_RNDN);   /* N: exact (an integer of at most p bits) */
    mpfr_sub(t, t, n, MPFR_RNDN);       /* φ: exact (Sterbenz: the low bits of t) */
    mpfr_mul_2ui(t, t, 32, MPFR_RNDN);  /* φ·2^32, exact */
    uint64_t D = mpfr_get_ui(t, MPFR_RNDZ); /* the first 32 bits a loses; the rest truncated */
    if (D + bits >= (uint64_t)1 << 32) mpfr_add_ui(n, n, 1, MPFR_RNDN); /* away from zero: exact */
    mpfr_mul_2si(n, n, k, MPFR_RNDN);   /* the chosen neighbour, |·|: exact */
    /* past the largest finite value (IEEE: 2^emax and up; e4m3: 480 and up) */
    int past = mpfr_cmp_d(n, f->store_max) > 0;
    mpfr_set(r, n, MPFR_RNDN); /* exact: at most store_prec <= prec(r) bits */
    if (neg) mpfr_neg(r, r, MPFR_RNDN);
    if (past) overflow(r, f);
    mpfr_clears(t, n, (mpfr_ptr)0);
}

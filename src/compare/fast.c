/* vijp_compare's metrics in integer limbs and double-double, certified to be
 * those of its exact evaluation (see compare_fast.h for the argument). */
#include "fast.h"
#include "lanes.h"
#include "format/mpfr_io.h"
#include "format/packed.h"
#include "base/fork.h"
#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
#define FAST_LIMBS 1
#endif

#ifndef FAST_LIMBS
int vijp_compare_fast(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m, int angle,
                      vijp_compare_cache *cache, vijp_compare_counts *counts)
{
    (void)a, (void)ref, (void)f, (void)m, (void)angle, (void)cache;
    if (counts) counts->slow = counts->doubles = 0;
    return 0; /* limbs other than 64 bits: always the exact evaluation */
}

int vijp_compare_fast_lanes(int set, const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                            int angle, vijp_compare_counts *counts)
{
    (void)set;
    return vijp_compare_fast(a, ref, f, m, angle, NULL, counts);
}
#else

typedef unsigned __int128 u128;
typedef uint64_t limb;

/* A finite value: |v| = (sig[2]·2^128 + sig[1]·2^64 + sig[0])·2^(e − 192),
 * the top bit of sig[2] set; zero: 1 for ±0 (sig and e unused). */
typedef struct {
    limb sig[3];
    long e;
    int neg, zero;
} val;

/* The comparison precision this path handles: p-bit values in three limbs. */
#define MAX_P 192
/* Scaled values (|y|·2^-Ky, |δ|·2^-Kd < 1) below 2^-TINY drop out of the sums, each
 * product with such a factor counted and bounded by 2^-TINY: their products
 * with anything stay far above the double range's bottom otherwise. */
#define TINY 400

static inline void load_double(val *v, double x)
{
    v->sig[0] = v->sig[1] = 0;
    v->zero = x == 0;
    if (v->zero) v->neg = signbit(x) != 0;
    else v->neg = vijp_double_split(x, &v->sig[2], &v->e);
}

/* x regular or zero, at most three limbs (n: its limb count). */
static inline void load_limbs(val *v, const limb *s, int n, long e, int neg)
{
    v->neg = neg, v->zero = 0, v->e = e;
    v->sig[0] = n > 2 ? s[n - 3] : 0;
    v->sig[1] = n > 1 ? s[n - 2] : 0;
    v->sig[2] = s[n - 1];
}

static inline void load_mpfr(val *v, mpfr_srcptr x)
{
    if (mpfr_zero_p(x)) {
        v->zero = 1, v->neg = mpfr_signbit(x) != 0;
        return;
    }
    load_limbs(v, mpfr_custom_get_significand(x), (int)((mpfr_get_prec(x) + 63) / 64), mpfr_get_exp(x),
               mpfr_signbit(x) != 0);
}

/* RN_p(x) for a regular x of more than p bits (128 <= p <= 192: three
 * limbs or more), ties to even, as mpfr_set into p bits rounds it. */
static void load_rounded(val *v, mpfr_srcptr x, long p)
{
    const limb *s = mpfr_custom_get_significand(x);
    int n = (int)((mpfr_get_prec(x) + 63) / 64);
    load_limbs(v, s, n, mpfr_get_exp(x), mpfr_signbit(x) != 0);
    int L = (int)(192 - p), li = L / 64, lb = L % 64; /* v's bits below 2^L go: limb li, bit lb */
    limb sticky = 0, rnd;
    for (int i = 0; i < n - 4; i++) sticky |= s[i];
    limb next = n > 3 ? s[n - 4] : 0; /* the limb below v's three */
    if (L) {
        limb below = L == 64 ? v->sig[0] : v->sig[0] & (((limb)1 << L) - 1);
        rnd = below >> (L - 1) & 1;
        sticky |= (L == 1 ? 0 : below << (65 - L)) | next;
        v->sig[0] -= below;
    } else {
        rnd = next >> 63;
        sticky |= next << 1;
    }
    if (rnd && (sticky || (v->sig[li] >> lb & 1))) { /* up by 2^L; a carry out renormalises */
        limb c = (limb)1 << lb;
        for (int i = li; i < 3 && c; i++) {
            v->sig[i] += c;
            c = v->sig[i] < c;
        }
        if (c) v->sig[2] = (limb)1 << 63, v->e++;
    }
}

/* An MPFR view of v (no copy: it reads v->sig); v nonzero. */
static void view(mpfr_ptr r, const val *v)
{
    mpfr_custom_init_set(r, v->neg ? -MPFR_REGULAR_KIND : MPFR_REGULAR_KIND, v->e, 192, (void *)v->sig);
}

/* s >> (64 − k) for 0 <= k < 64 (0 for k = 0), without a shift by 64. */
static inline limb spill(limb s, unsigned k) { return s >> 1 >> (63 - k); }

/* δ = x − y exactly, when the exponents lie within 64 of each other and δ
 * fits p bits (then it is also RN_p(x − y), the d that vijp_compare
 * forms).  Both nonzero.  -1: not (the caller asks MPFR).  Scalar limbs and
 * few branches: this runs once per compared entry. */
static int sub_exact(val *d, const val *x, const val *y, long p)
{
    long k = x->e - y->e;
    if (k >= 64 || k <= -64) return -1;
    /* both on the grid 2^(min(ex, ey) − 192), four limbs each */
    limb x0 = x->sig[0], x1 = x->sig[1], x2 = x->sig[2], x3 = 0, y0 = y->sig[0], y1 = y->sig[1], y2 = y->sig[2], y3 = 0;
    if (k > 0) { /* the usual k = 0 (x beside y) shifts nothing */
        unsigned s = (unsigned)k;
        x3 = spill(x2, s), x2 = x2 << s | spill(x1, s), x1 = x1 << s | spill(x0, s), x0 <<= s;
    } else if (k < 0) {
        unsigned s = (unsigned)-k;
        y3 = spill(y2, s), y2 = y2 << s | spill(y1, s), y1 = y1 << s | spill(y0, s), y0 <<= s;
    }
    long unit = (k > 0 ? y->e : x->e) - 192;
    /* |x| ∓ |y| in five limbs of two's complement (the fifth: the sign) */
    limb m = x->neg == y->neg ? ~(limb)0 : 0; /* subtract: add ~y + 1 */
    u128 t = (u128)x0 + (y0 ^ m) + (m & 1);
    limb d0 = (limb)t;
    t = (u128)x1 + (y1 ^ m) + (limb)(t >> 64);
    limb d1 = (limb)t;
    t = (u128)x2 + (y2 ^ m) + (limb)(t >> 64);
    limb d2 = (limb)t;
    t = (u128)x3 + (y3 ^ m) + (limb)(t >> 64);
    limb d3 = (limb)t;
    limb sgn = m && !(limb)(t >> 64) ? ~(limb)0 : 0; /* subtracting and no carry out: |y| > |x| */
    /* negate when negative: (D ^ s) − s */
    t = (u128)(d0 ^ sgn) + (sgn & 1);
    d0 = (limb)t;
    t = (u128)(d1 ^ sgn) + (limb)(t >> 64);
    d1 = (limb)t;
    t = (u128)(d2 ^ sgn) + (limb)(t >> 64);
    d2 = (limb)t;
    d3 = (d3 ^ sgn) + (limb)(t >> 64);
    int neg = x->neg ^ (int)(sgn & 1);
    if (!(d0 | d1 | d2 | d3)) {
        d->zero = 1, d->neg = 0;
        return 0;
    }
    /* shift up whole limbs until d3 is nonzero */
    long b = 256;
    while (!d3) d3 = d2, d2 = d1, d1 = d0, d0 = 0, b -= 64;
    int lz = __builtin_clzll(d3);
    b -= lz;
    long tz = d0 ? __builtin_ctzll(d0) : d1 ? 64 + __builtin_ctzll(d1) : d2 ? 128 + __builtin_ctzll(d2) : 192 + __builtin_ctzll(d3);
    if (256 - lz - tz > p) return -1; /* RN_p would round: MPFR does it */
    /* normalise (every set bit lies in the top 192: d0's go into d1) */
    unsigned s = (unsigned)lz;
    d->sig[2] = d3 << s | spill(d2, s);
    d->sig[1] = d2 << s | spill(d1, s);
    d->sig[0] = d1 << s | spill(d0, s);
    d->zero = 0, d->neg = neg, d->e = unit + b;
    return 0;
}

/* 2^k for −1022 <= k <= 1023. */
static double pow2(long k)
{
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* ulps_of for an exact d (see metrics.c): |d|·2^-e rounded up to 53 bits,
 * from d's own bits; NAN where the scaled value leaves the normal doubles'
 * interior (the caller then asks MPFR).  0 where it cannot exceed below (the
 * running maximum): |d|·2^-e < 2^E <= below, and rounding up to 53 bits
 * stays at or under the power of two. */
static double ulps_exact(const val *d, const val *y, const vijp_format *f, double below)
{
    long e;
    if (f->kind == VIJP_MPFR) {
        if (y->zero) return INFINITY;
        e = y->e - f->prec;
    } else {
        e = !y->zero ? y->e - f->store_prec : f->store_emin - 1;
        if (e < f->store_emin - 1) e = f->store_emin - 1;
    }
    long E = d->e - e; /* |d|·2^-e = (mant/2^53)·2^E before rounding */
    if (E > -1020 && E < 1023 && pow2(E) <= below) return 0;
    limb mant = d->sig[2] >> 11;
    int sticky = ((d->sig[2] & 0x7ff) | d->sig[1] | d->sig[0]) != 0;
    mant += (limb)sticky;
    if (mant >> 53) mant >>= 1, E++;
    if (E <= -1020 || E >= 1023) return NAN;
    /* mant·2^(E − 53), a normal double: exact in one or two scalings */
    return E - 53 >= -1022 ? (double)mant * pow2(E - 53) : (double)mant * pow2(E - 53 + 64) * 0x1p-64;
}

/* A nonzero value's top 106 bits, v ≈ ±(h·2^53 + l)·2^(e − 106): h has its
 * top bit set, the bits dropped are below 2^-105 of |v|. */
typedef struct {
    limb h, l;
    long e;
    int neg, tiny;
} top106;

static top106 top_of(const val *v, long K)
{
    top106 t = {.e = v->e - K, .neg = v->neg, .tiny = v->e - K < -TINY}; /* e: scaled by 2^-K */
    t.h = v->sig[2] >> 11;
    t.l = (v->sig[2] & 0x7ff) << 42 | v->sig[1] >> 22;
    return t;
}

typedef struct {
    double h, l;
} dd;

/* s += th + tl.  TwoSum of the leading parts is exact; what it leaves (e,
 * at most 2^-53·|s.h + th|) and the low parts are added in double (two
 * roundings), then renormalised.  Error at most 2^-52·(|e| + |tl| + |s.l|)
 * plus 2^-53 of the new low part where it outgrows the high one (then the
 * renormalisation rounds): about 2^-104·(|s| + |th|) + 2^-52·|tl| (see E_of). */
static inline void dd_add(dd *s, double th, double tl)
{
    double a = s->h, t = a + th, v = t - a;
    double e = (a - (t - v)) + (th - v);
    e += tl + s->l;
    s->h = t + e;
    s->l = e - (s->h - t);
}

/* A sum in two stages: terms go into a running pair (h, l) by TwoSum, h
 * the rounded sum and l the exact rounding errors and the terms' low parts
 * gathered in double, so that only one addition per term lies on the
 * dependency chain; every CHUNK terms the pair is folded into a double-
 * double total by dd_add.  Within a chunk of m terms of magnitude sum A the
 * pair errs by at most 2^-53·Σ_k(|e_k| + |tl_k| + |l_k|) <= (m²/2·2^-106 +
 * m·2^-102)·A: 2^-83·A at m = 4096 (|e_k| <= 2^-53·A, |tl_k| <= 2^-50·|th_k|,
 * |l_k| <= k·2^-52·A); folding it (its l up to 2^-41·A) adds at most
 * 2^-94·A of the chunk plus 2^-103 of the running total. */
enum { CHUNK = 4096 };
typedef struct {
    dd total;
    double h, l;
    double lost; /* bound on what rescaling dropped (sum_rescale) */
} sum;

static inline void sum_add(sum *s, double th, double tl)
{
    double t = s->h + th, v = t - s->h;
    s->l += ((s->h - (t - v)) + (th - v)) + tl;
    s->h = t;
}

static void sum_fold(sum *s)
{
    dd_add(&s->total, s->h, s->l);
    s->h = s->l = 0;
}

/* The sum's scale grew by 2^shift (a larger value came): what it holds is
 * scaled by 2^-shift, exactly unless a part falls among the subnormals
 * (then by less than 2^-1074 each: into lost, with 2^-1070); beyond 2^-900
 * it is dropped, its size into lost.  abs (may be NULL) scales alike. */
static void sum_rescale(sum *s, long shift, double *abs)
{
    sum_fold(s);
    if (shift > 900) {
        s->lost = 2 * (fabs(s->total.h) + fabs(s->total.l) + s->lost) * 0x1p-900 + 0x1p-1070;
        s->total.h = s->total.l = 0;
        if (abs) *abs *= 0x1p-900;
        return;
    }
    s->total.h = ldexp(s->total.h, (int)-shift), s->total.l = ldexp(s->total.l, (int)-shift);
    s->lost = ldexp(s->lost, (int)-shift) + 0x1p-1070;
    if (abs) *abs = ldexp(*abs, (int)-shift);
}

/* a·b (each scaled by its 2^-K), added to s (and |a·b| to *abs when abs).  The
 * product of the 106-bit tops, without lo·lo (below 2^-104 of it), exact
 * in a 128-bit integer Z, split in two doubles (the low one rounded, 2^-104);
 * with the tops' own truncation the term errs by less than 2^-101
 * relatively.  A factor below 2^-TINY skips the term and counts it. */
static inline void add_product(sum *s, double *abs, size_t *skipped, const top106 *a, const top106 *b)
{
    if (a->tiny || b->tiny) {
        (*skipped)++;
        return;
    }
    u128 Z = (u128)a->h * b->h + (((u128)a->h * b->l + (u128)a->l * b->h) >> 53);
    long k = a->e + b->e; /* the scaled product is Z·2^(k − 106); −2·TINY <= k <= 0 */
    double zh = (double)(int64_t)(Z >> 54) * pow2(k - 52), zl = (double)(int64_t)(Z & ((((u128)1) << 54) - 1)) * pow2(k - 106);
    if (a->neg != b->neg) zh = -zh, zl = -zl;
    sum_add(s, zh, zl);
    if (abs) *abs += fabs(zh);
}

/* The error bound on a sum of n terms from add_product, abs_sum the sum of
 * their leading parts' magnitudes (a double sum of n < 2^40 terms: within
 * 2^-13 of the terms' Σ|t|), summed in parts ranges (vijp_compare_fast's
 * threads), each in chunks from its first index, then added together:
 * each term's own 2^-101, the running pairs' 2^-83, the folds' 2^-94 of
 * their pair's terms and 2^-103 of the total each (see sum: a chunk folds
 * its one pair, and the lanes' pairs, CMP_LANES_MAX at most, where it ran
 * through lanes: at most 9·(n/CHUNK + parts) folds), and the 2^-103 of
 * the total each addition of a part's total (dd_add, its low part within
 * 2^-53 of its high) give at most (2^-82.9 + (9·n/CHUNK + 10·parts)·
 * 2^-103)·Σ|t|, which the formula below exceeds; each skipped product is
 * below 2^-TINY. */
_Static_assert(CMP_LANES_MAX <= 8, "E_of counts at most 8 lanes' pairs a chunk");
static double E_of(double abs_sum, size_t n, size_t skipped, size_t parts)
{
    return (0x1p-81 + ((double)n / CHUNK + 1 + (double)parts) * 0x1p-99) * abs_sum * 1.0001 +
           (double)skipped * 0x1p-400;
}

/* A scaled sum s·2^scale with its error bound E·2^scale. */
typedef struct {
    dd s;
    double E;
    long scale;
} bounded;

/* [lo, hi] ∋ (s ± E)·2^scale, rounded outwards. */
static void interval(mpfr_ptr lo, mpfr_ptr hi, const bounded *b)
{
    mpfr_set_d(lo, b->s.h, MPFR_RNDD), mpfr_add_d(lo, lo, b->s.l, MPFR_RNDD), mpfr_sub_d(lo, lo, b->E, MPFR_RNDD);
    mpfr_set_d(hi, b->s.h, MPFR_RNDU), mpfr_add_d(hi, hi, b->s.l, MPFR_RNDU), mpfr_add_d(hi, hi, b->E, MPFR_RNDU);
    mpfr_mul_2si(lo, lo, b->scale, MPFR_RNDD), mpfr_mul_2si(hi, hi, b->scale, MPFR_RNDU); /* exact */
}

/* x ·= (1 ± 2^-k), outwards (sgn −1: towards zero for positive x). */
static void widen(mpfr_ptr x, int sgn, long k)
{
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(x));
    mpfr_mul_2si(t, x, -k, MPFR_RNDN); /* exact */
    if (sgn < 0) mpfr_sub(x, x, t, MPFR_RNDD);
    else mpfr_add(x, x, t, MPFR_RNDU);
    mpfr_clear(t);
}

/* The double both ends round to (RN), or 0 with *ok cleared. */
static double settle(mpfr_srcptr lo, mpfr_srcptr hi, int *ok)
{
    double a = mpfr_get_d(lo, MPFR_RNDN), b = mpfr_get_d(hi, MPFR_RNDN);
    if (a != b) *ok = 0;
    /* below double's normal range the exact evaluation keeps the exponent */
    if (!isnormal(a) && !(mpfr_zero_p(lo) && mpfr_zero_p(hi))) *ok = 0;
    return a;
}

/* The intervals' working precision: their ends are rounded outwards, so it
 * only needs to resolve the sums' 2^-80 or so. */
enum { IP = 128 };

/* rel = sqrt(Σd²/Σy²).  compare_exact gives RN53 of a p-bit value within
 * (1 ± 2^-(p−1)) of it (two p-bit roundings; its sums err by 2^-(2p+50) at
 * most): widened by 2^-(p−16). */
static int settle_rel(double *rel, const bounded *dd2, const bounded *yy, long p)
{
    mpfr_t nl, nh, dl, dh;
    mpfr_inits2(IP, nl, nh, dl, dh, (mpfr_ptr)0);
    interval(nl, nh, dd2);
    interval(dl, dh, yy);
    int ok = mpfr_sgn(dl) > 0;
    if (ok) {
        if (mpfr_sgn(nl) < 0) mpfr_set_zero(nl, 1);
        mpfr_div(nl, nl, dh, MPFR_RNDD), mpfr_sqrt(nl, nl, MPFR_RNDD);
        mpfr_div(nh, nh, dl, MPFR_RNDU), mpfr_sqrt(nh, nh, MPFR_RNDU);
        widen(nl, -1, p - 16), widen(nh, 1, p - 16);
        *rel = settle(nl, nh, &ok);
    }
    mpfr_clears(nl, nh, dl, dh, (mpfr_ptr)0);
    return ok;
}

/* The angle θ between x = y + δ and y is atan2(√G, C) with the Gram
 * determinant G = Σδ²·Σy² − (Σyδ)² (= ‖x‖²‖y‖² sin²θ, no cancellation
 * between x and y left in it) and C = x·y = Σy² + Σyδ.  atan2(s, c) is
 * monotone in each argument (s > 0), so its extremes over the box lie at
 * the corners named below.  compare_exact's angle (unit vectors scaled by
 * p-bit 1/‖·‖, sums at 2p + 80 bits, atan2 and the degrees at p bits) lies
 * within 2^-(p−2)
 * relatively plus 2^-(2p−4)/min(θ, π − θ) absolutely of the true one (the
 * p-bit scales leave ‖αx‖ − ‖βy‖ up to 2^-(p−1), which enters squared):
 * widened by 2^-(p−16) and 2^-(2p−40)/min(θ, π − θ) degrees. */
static int settle_angle(double *deg, const bounded *dd2, const bounded *yy, const bounded *yd, long p)
{
    mpfr_t dl, dh, yl, yh, cl, ch, gl, gh, t, u, thl, thh, pi;
    mpfr_inits2(IP, dl, dh, yl, yh, cl, ch, gl, gh, t, u, thl, thh, pi, (mpfr_ptr)0);
    interval(dl, dh, dd2);
    interval(yl, yh, yy);
    interval(cl, ch, yd); /* Σyδ first */
    int ok = mpfr_sgn(yl) > 0 && mpfr_sgn(dl) > 0;
    if (ok) {
        /* (Σyδ)² ∈ [m², M²], m = 0 when the interval holds 0 */
        mpfr_abs(t, cl, MPFR_RNDN), mpfr_abs(u, ch, MPFR_RNDN); /* exact */
        if (mpfr_cmp(t, u) < 0) mpfr_swap(t, u); /* t = max |·|, u = min |·| */
        if (mpfr_sgn(cl) <= 0 && mpfr_sgn(ch) >= 0) mpfr_set_zero(u, 1);
        mpfr_mul(gl, dl, yl, MPFR_RNDD), mpfr_sqr(t, t, MPFR_RNDU), mpfr_sub(gl, gl, t, MPFR_RNDD);
        mpfr_mul(gh, dh, yh, MPFR_RNDU), mpfr_sqr(u, u, MPFR_RNDD), mpfr_sub(gh, gh, u, MPFR_RNDU);
        mpfr_add(cl, cl, yl, MPFR_RNDD), mpfr_add(ch, ch, yh, MPFR_RNDU); /* C */
        ok = mpfr_sgn(gl) > 0;
    }
    if (ok) {
        mpfr_sqrt(gl, gl, MPFR_RNDD), mpfr_sqrt(gh, gh, MPFR_RNDU);
        /* θ falls as c grows; it rises with s where c > 0 and falls where c < 0 */
        mpfr_atan2(thl, mpfr_sgn(ch) > 0 ? gl : gh, ch, MPFR_RNDD);
        mpfr_atan2(thh, mpfr_sgn(cl) > 0 ? gh : gl, cl, MPFR_RNDU);
        mpfr_const_pi(pi, MPFR_RNDD);
        mpfr_sub(t, pi, thh, MPFR_RNDD); /* π − θ, from below */
        if (mpfr_cmp(t, thl) > 0) mpfr_set(t, thl, MPFR_RNDN);
        ok = mpfr_sgn(t) > 0;
        if (ok) {
            mpfr_ui_div(u, 1, t, MPFR_RNDU), mpfr_mul_2si(u, u, -(2 * p - 40), MPFR_RNDU); /* absolute, degrees */
            mpfr_mul_ui(thl, thl, 180, MPFR_RNDD), mpfr_const_pi(pi, MPFR_RNDU), mpfr_div(thl, thl, pi, MPFR_RNDD);
            mpfr_mul_ui(thh, thh, 180, MPFR_RNDU), mpfr_const_pi(pi, MPFR_RNDD), mpfr_div(thh, thh, pi, MPFR_RNDU);
            widen(thl, -1, p - 16), widen(thh, 1, p - 16);
            mpfr_sub(thl, thl, u, MPFR_RNDD), mpfr_add(thh, thh, u, MPFR_RNDU);
            *deg = settle(thl, thh, &ok);
        }
    }
    mpfr_clears(dl, dh, yl, yh, cl, ch, gl, gh, t, u, thl, thh, pi, (mpfr_ptr)0);
    return ok;
}

/* Entry i of a packed matrix (packed.h), as load_entry reads it: its limbs
 * and exponent straight into v where they need no rounding, through an
 * MPFR view of them into load_rounded where they do. */
static inline int load_packed(val *v, const vijp_packed *pk, size_t i, long p, int round)
{
    int kind = vijp_packed_kind(pk, i), neg = vijp_packed_neg(pk, i);
    if (kind == MPFR_ZERO_KIND) v->zero = 1, v->neg = neg;
    else if (kind == MPFR_REGULAR_KIND && pk->prec <= p)
        load_limbs(v, vijp_packed_sig(pk, i), (int)pk->limbs, vijp_packed_exp(pk, i), neg);
    else if (kind == MPFR_REGULAR_KIND && round) {
        mpfr_t x;
        vijp_packed_view(pk, i, x);
        load_rounded(v, x, p);
    } else return -1; /* NaN, Inf, or an x wider than p */
    return 0;
}

/* Entry i of m rounded to p bits, into v: x = a's (round 0: only values that
 * need no rounding are taken) or y = RN_p(ref)'s (round 1); -1 for NaN, Inf
 * or an x wider than p. */
static inline int load_entry(val *v, const vijp_mat *m, size_t i, long p, int round)
{
    if (m->d) {
        if (!isfinite(m->d[i])) return -1;
        load_double(v, m->d[i]);
        return 0;
    }
    if (m->packed && !m->m) return load_packed(v, m->packed, i, p, round); /* m->m first: packed.h */
    mpfr_srcptr x = m->m[i];
    if (mpfr_zero_p(x) || (mpfr_regular_p(x) && mpfr_get_prec(x) <= p)) load_mpfr(v, x);
    else if (mpfr_regular_p(x) && round) load_rounded(v, x, p);
    else return -1; /* NaN, Inf, or an x wider than p */
    return 0;
}

static inline long exp_of(const vijp_mat *a, size_t i)
{
    if (a->d) {
        uint64_t sig;
        long e;
        if (a->d[i] == 0) return LONG_MIN;
        (void)vijp_double_split(a->d[i], &sig, &e); /* Inf, NaN: any exponent, refused later */
        return e;
    }
    if (a->packed && !a->m)
        return vijp_packed_kind(a->packed, i) == MPFR_REGULAR_KIND ? vijp_packed_exp(a->packed, i) : LONG_MIN;
    return mpfr_regular_p(a->m[i]) ? mpfr_get_exp(a->m[i]) : LONG_MIN;
}

/* One range's sums (at its own scales Ky, Kd), largest ulps and counts. */
typedef struct {
    const vijp_mat *a, *ref;
    const vijp_format *f;
    const cmp_lanes_set *lanes; /* NULL: every entry one at a time */
    int angle, have_yy;
    int ok;
    long Ky, Kd;
    sum sdd, syy, syd;
    double abs_yd, ulps;
    vijp_xnum wide_ulps; /* the largest ulps count past double's range */
    size_t skip_dd, skip_yy, skip_yd, nz_x, nz_y, nz_d, nslow, nfast;
} part;

/* One chunk's sums in locals (kept in registers), folded after it; err_dd
 * and err_yd bound what entry_double's differences add to Σd² and Σyd
 * beyond the terms' own relative error (scaled like the sums). */
typedef struct {
    sum dd, yy, yd;
    double abs_yd, ulps, err_dd, err_yd;
} chunk_sums;

/* MPFR scratch of the entries that need it, at p bits. */
typedef struct {
    mpfr_t dm, t;
} entry_scratch;

/* Entry i into c, by limbs (MPFR where d is not exact in p bits, or at the
 * ends of the double range): -1 where the fast path cannot answer. */
static int entry_limbs(part *P, chunk_sums *c, size_t i, long p, entry_scratch *w)
{
    const vijp_format *f = P->f;
    val x, y, d;
    mpfr_t xm, ym;
    if (load_entry(&x, P->a, i, p, 0) || load_entry(&y, P->ref, i, p, 1)) return -1;
    P->nz_x += !x.zero, P->nz_y += !y.zero;
    if (x.zero) d = y, d.neg = !y.neg;
    else if (y.zero) d = x;
    else if (sub_exact(&d, &x, &y, p)) { /* RN_p(x − y) by MPFR */
        view(xm, &x), view(ym, &y);
        mpfr_sub(w->dm, xm, ym, MPFR_RNDN);
        load_mpfr(&d, w->dm);
        P->nslow++;
    }
    if (d.zero) {
        if (y.zero) return 0;
    } else {
        P->nz_d++;
        double u = ulps_exact(&d, &y, f, c->ulps);
        if (u != u) { /* MPFR's path at the ends of the double range */
            mpfr_t dv, yv;
            view(dv, &d);
            if (!y.zero) view(yv, &y);
            else mpfr_init2(yv, 2), mpfr_set_zero(yv, 1);
            vijp_xnum ux = vijp_ulps_of(dv, yv, f, w->t);
            if (y.zero) mpfr_clear(yv);
            /* past double's range (a nonzero error against a zero or tiny
             * reference): kept apart, at its exponent */
            if (vijp_xnum_is_double(ux)) u = ux.m;
            else P->wide_ulps = vijp_xnum_max_nan(P->wide_ulps, ux), u = 0;
        }
        if (u > c->ulps) c->ulps = u;
    }
    top106 ty = y.zero ? (top106){0} : top_of(&y, P->Ky), td = d.zero ? (top106){0} : top_of(&d, P->Kd);
    if (!d.zero) add_product(&c->dd, NULL, &P->skip_dd, &td, &td);
    if (!y.zero && !P->have_yy) add_product(&c->yy, NULL, &P->skip_yy, &ty, &ty);
    if (P->angle && !y.zero && !d.zero) add_product(&c->yd, &c->abs_yd, &P->skip_yd, &ty, &td);
    return 0;
}

/* (h, l): a·b exactly (Dekker's product: no FMA assumed, no overflow or
 * underflow on the scaled values: entry_double's are at least 2^(−TINY+7)
 * and below 1, their split parts' products far above the normal range's
 * bottom). */
static inline void two_prod(double a, double b, double *h, double *l)
{
    const double split = 134217729.0; /* 2^27 + 1 */
    double ca = split * a, ah = ca - (ca - a), al = a - ah;
    double cb = split * b, bh = cb - (cb - b), bl = b - bh;
    *h = a * b;
    *l = ((ah * bh - *h) + ah * bl + al * bh) + al * bl;
}

/* (h, l): a + b exactly (Knuth's TwoSum). */
static inline void two_sum(double a, double b, double *h, double *l)
{
    double t = a + b, v = t - a;
    *l = (a - (t - v)) + (b - v);
    *h = t;
}

/* ±(top 53 bits of s, whose top bit is set)·2^(k − 53), a normal double
 * (k − 1 >= −1022), from its fields. */
static inline double with_top(int neg, limb s, long k)
{
    uint64_t b = (uint64_t)neg << 63 | (uint64_t)(k - 1 + 1023) << 52 | ((s >> 11) & (((uint64_t)1 << 52) - 1));
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* x's entry i as X1 + X2 at d's scale 2^-Kd, exactly, and its sign: a
 * normal double (X2 = 0; the caller passes xd only where |Kd| <= 1000, so
 * that 2^-Kd is a double), or a regular packed value of at most 106 bits
 * (its top 53 bits and the next 53); 0 where it is neither, or out of
 * the range where both are normal doubles. */
static inline int x_parts(const double *xd, const vijp_packed *px, size_t i, long Kd, double *X1, double *X2, int *neg)
{
    if (xd) {
        double x = xd[i];
        *X1 = x * pow2(-Kd), *X2 = 0, *neg = x < 0; /* a power of two: exact where it stays normal */
        return isnormal(x) && isnormal(*X1);
    }
    if (vijp_packed_kind(px, i) != MPFR_REGULAR_KIND) return 0;
    long k = vijp_packed_exp(px, i) - Kd;
    if (k < -700) return 0;
    const limb *s = vijp_packed_sig(px, i);
    int n = (int)px->limbs;
    limb t = s[n - 1], t1 = n > 1 ? s[n - 2] : 0;
    *neg = vijp_packed_neg(px, i);
    *X1 = with_top(*neg, t, k);
    *X2 = (*neg ? -1.0 : 1.0) * (double)((t & 0x7ff) << 42 | t1 >> 22) * pow2(k - 106);
    return 1;
}

/* Entry i of x = X1 + X2 (x_parts, x's sign xneg) against a packed y of
 * at most p bits, both regular, in double arithmetic: 1 when done, 0
 * where entry_limbs must take it (nothing added then).  x has fewer than
 * p bits (a double, or a level of at most 106).  y's at most 192 bits are
 * four doubles exactly, Y1 + … + Y4 (53, 53, 53 and 33 bits), at d's scale
 * 2^-Kd.  Where X1 and Y1 have one sign and Y1/2 <= X1 < 2·Y1, s = X1 −
 * Y1 is exact (Sterbenz); (a, b) = X2 − Y2, (h1, l1) = s + a and (h2, l2)
 * = h1 − Y3 are TwoSums, exact; d = x − y = h2 + b + l1 + l2 − Y4, which
 * is also RN_p(x − y), the d of the exact evaluation: x < 2·Y1 <= 2y (X1
 * < 2·Y1 is a unit of X1 below it at least, which X2 does not reach), so
 * |d| < y < 2^ey, and its last bit is y's or x's, at 2^(ey − p) or above
 * (x has fewer than p bits and an exponent at least y's − 1): p bits at
 * most.  (Allowing X1 = 2·Y1 would let a 106-bit x reach past 2y and d
 * need p + 1 bits.)  The small parts go in with three roundings, t1, t2,
 * t3, and (dh, dl) renormalises h2 + t3: |d − dh − dl| <= 2^-53·(|t1| +
 * |t2| + |t3|); ed is twice that, a margin that covers every later
 * rounding of the bounds' sums (n·2^-53 relative over n < 2^40 terms).
 * ed is about 2^-104 of d whether d is an engine's error (h2 ≈ d, the
 * parts 2^-53 of it) or the validation's (d ≈ 2^-106·y, Y3 as large as d
 * but taken exactly, Y4 and l2 at 2^-53 of d).  Then:
 *   d² as dh² (exact, two_prod) + 2·dh·dl, rounded twice: within 2^-103
 *   of (dh + dl)², inside add_product's 2^-101; (dh + dl)² is within
 *   (2|d| + ed)·ed of d², into err_dd;
 *   y·d from y's top 106 bits (Yk1 + Yk2 at y's scale 2^-Ky, y within
 *   2^-105 of them) as Yk1·dh exact + Yk1·dl + Yk2·dh rounded: within
 *   2^-102 of y·(dh + dl), and that within 2|y|·ed of y·d, into err_yd;
 *   y² likewise as Yk1² + 2·Yk1·Yk2: within 2^-102;
 *   the ulps: |d|·2^-e (e as ulps_exact) is at most (|dh| + |dl| + ed)
 *   rounded up, and where that bound does not exceed the running largest
 *   it cannot raise it (a double at or under it rounds up to at most it);
 *   where it could, entry_limbs forms it exactly.
 * Tiny values (top_of's TINY), a sign change, a difference of zero or
 * bounds out of range: entry_limbs. */
static inline int entry_double(part *P, chunk_sums *c, double X1, double X2, int xneg, const vijp_packed *pk,
                               size_t i)
{
    if (vijp_packed_kind(pk, i) != MPFR_REGULAR_KIND) return 0;
    int neg = vijp_packed_neg(pk, i);
    if (xneg != neg) return 0;
    long ey = vijp_packed_exp(pk, i), Kd = P->Kd, Ky = P->Ky;
    if (ey - Ky < -TINY + 8) return 0;
    const limb *s = vijp_packed_sig(pk, i);
    int n = (int)pk->limbs;
    limb s2 = s[n - 1], s1 = n > 1 ? s[n - 2] : 0, s0 = n > 2 ? s[n - 3] : 0;
    double m2 = (double)((s2 & 0x7ff) << 42 | s1 >> 22), m3 = (double)((s1 & 0x3fffff) << 31 | s0 >> 33),
           m4 = (double)(s0 & 0x1ffffffff);
    double sg = neg ? -1.0 : 1.0;
    long kd = ey - Kd; /* y·2^-Kd = Σ m_k·2^(kd − 53k), each exact while kd − 192 > −1022 */
    if (kd < -700) return 0;
    double Y1 = with_top(neg, s2, kd), Y2 = sg * m2 * pow2(kd - 106), Y3 = sg * m3 * pow2(kd - 159),
           Y4 = sg * m4 * pow2(kd - 192);
    double ax = fabs(X1), a1 = fabs(Y1);
    if (!(ax >= 0.5 * a1 && ax < 2 * a1)) return 0;
    double a, b, h1, l1, h2, l2, dh, dl;
    two_sum(X2, -Y2, &a, &b);
    two_sum(X1 - Y1, a, &h1, &l1);
    two_sum(h1, -Y3, &h2, &l2);
    double t1 = l1 + b, t2 = t1 + l2, t3 = t2 - Y4;
    two_sum(h2, t3, &dh, &dl);
    double ed = (fabs(t1) + fabs(t2) + fabs(t3)) * 0x1.0000000000001p-52;
    double ad = fabs(dh);
    if (!(ad >= pow2(-TINY + 8)) || ed > 0x1p-96 * ad) return 0; /* tiny, zero or cancelled: by limbs */
    /* the ulps: e as ulps_exact forms it, |d|·2^-e <= U */
    const vijp_format *f = P->f;
    long e = f->kind == VIJP_MPFR ? ey - (long)f->prec : ey - (long)f->store_prec;
    if (f->kind != VIJP_MPFR && e < f->store_emin - 1) e = f->store_emin - 1;
    long sh = Kd - e; /* within −600 … 900: U stays a normal double, rounded up by the factor */
    if (sh > 900 || sh < -600) return 0;
    double U = (ad + fabs(dl) + ed) * 0x1.0000000000004p+0 * pow2(sh);
    if (!(U <= c->ulps)) return 0; /* could raise the largest: formed exactly */
    P->nz_x++, P->nz_y++, P->nz_d++, P->nfast++;
    double ph, pl;
    two_prod(dh, dh, &ph, &pl);
    sum_add(&c->dd, ph, pl + 2 * dh * dl);
    c->err_dd += (2 * (ad + fabs(dl)) + ed) * ed;
    if (!P->have_yy || P->angle) {
        long ky = ey - Ky; /* y·2^-Ky: within [2^(−TINY+7), 1) */
        double Yk1 = with_top(neg, s2, ky), Yk2 = sg * (m2 * pow2(ky - 106));
        if (!P->have_yy) {
            two_prod(Yk1, Yk1, &ph, &pl);
            sum_add(&c->yy, ph, pl + 2 * Yk1 * Yk2);
        }
        if (P->angle) {
            two_prod(Yk1, dh, &ph, &pl);
            sum_add(&c->yd, ph, pl + (Yk1 * dl + Yk2 * dh));
            c->abs_yd += fabs(ph);
            c->err_yd += 2 * fabs(Yk1) * ed;
        }
    }
    return 1;
}

/* The lanes' slices: short enough that the running largest ulps count,
 * which a slice's lanes test against, keeps up with the entries that
 * raise it (taken one at a time between slices); while that count is
 * still zero (a range's first entries) shorter still (16, 32, …), since
 * every entry of such a slice raises it. */
enum { SLICE = 256, FIRST_SLICE = 16 };

/* Entries [i0, i1) of one chunk (x doubles xd or packed px against the
 * packed pk, as entry_double takes them) through P's lanes, slice by
 * slice, each entry a lane hands back by limbs; the lanes' pairs folded
 * into P's totals at the end (E_of counts the folds).  0: the fast path
 * cannot answer. */
static int chunk_lanes(part *P, chunk_sums *c, const double *xd, const vijp_packed *px, const vijp_packed *pk,
                       size_t i0, size_t i1, long p, entry_scratch *w)
{
    const vijp_format *f = P->f;
    int mp = f->kind == VIJP_MPFR;
    cmp_lanes_job J = {.xd = xd, .px = xd ? NULL : px, .pk = pk, .Kd = P->Kd, .Ky = P->Ky,
                       .ulp_shift = mp ? (long)f->prec : (long)f->store_prec, .e_floor = mp ? LONG_MIN : f->store_emin - 1,
                       .want_yy = !P->have_yy, .want_yd = P->angle};
    cmp_lanes_sums L = {.taken = 0};
    uint16_t rest[SLICE];
    int ok = 1;
    size_t first = c->ulps > 0 ? SLICE : FIRST_SLICE;
    for (size_t s0 = i0, len = first; s0 < i1 && ok; s0 += len, len = len < SLICE ? 2 * len : SLICE) {
        size_t s1 = i1 - s0 < len ? i1 : s0 + len;
        J.ulps_max = c->ulps;
        size_t nrest = P->lanes->run(&J, s0, s1, &L, rest);
        for (size_t k = 0; k < nrest && ok; k++) ok = !entry_limbs(P, c, s0 + rest[k], p, w);
    }
    for (int l = 0; l < P->lanes->vw; l++) {
        dd_add(&P->sdd.total, L.dd_h[l], L.dd_l[l]);
        dd_add(&P->syy.total, L.yy_h[l], L.yy_l[l]);
        dd_add(&P->syd.total, L.yd_h[l], L.yd_l[l]);
    }
    c->err_dd += L.err_dd, c->err_yd += L.err_yd, c->abs_yd += L.abs_yd;
    P->nz_x += L.taken, P->nz_y += L.taken, P->nz_d += L.taken, P->nfast += L.taken;
    return ok;
}

/* The entries [begin, end) into P (its inputs set, the rest zero). */
static void part_run(part *P, size_t begin, size_t end)
{
    const vijp_mat *a = P->a, *ref = P->ref;
    long p = vijp_compare_prec(P->f);
    entry_scratch w;
    mpfr_init2(w.dm, p), mpfr_init2(w.t, p);
    P->wide_ulps = vijp_xnum_of(0);
    /* x a double or packed at up to 106 bits (and fewer than p), against a
     * packed reference of at most p bits (the engines against the drift
     * reference, held at p; the validation's lower level against the upper
     * one): entry_double first. */
    const vijp_packed *pk = ref->packed && !ref->m && ref->packed->prec <= p ? ref->packed : NULL;
    const double *xd = pk && a->d ? a->d : NULL;
    const vijp_packed *px = pk && !xd && a->packed && !a->m && a->packed->prec <= 106 && a->packed->prec < p ? a->packed
                                                                                                          : NULL;
    /* Scales: |y|·2^-Ky < 1 and |δ|·2^-Kd < 1 (+ 1 for RN_p's carry in y,
     * + 1 for δ = x − y); apart, so that a huge x leaves y's sums intact.
     * They are the largest exponents seen so far, found chunk by chunk
     * (each chunk read twice while it is in cache, not the matrices twice). */
    long Ky = LONG_MIN, Kd = LONG_MIN;
    int ok = 1;
    for (size_t i0 = begin; i0 < end && ok; i0 += CHUNK) {
        size_t i1 = end - i0 < CHUNK ? end : i0 + CHUNK;
        long cy = LONG_MIN, cd = LONG_MIN, low = LONG_MAX;
        if (P->lanes && (xd || px)) { /* both in arrays: the lanes scan them */
            long lx, ly;
            P->lanes->exps(xd, px, i0, i1, &cd, &lx);
            P->lanes->exps(NULL, pk, i0, i1, &cy, &ly);
            low = lx < ly ? lx : ly;
        } else
            for (size_t i = i0; i < i1; i++) {
                long ex = exp_of(a, i), ey = exp_of(ref, i);
                if (ex > cd) cd = ex;
                if (ey > cy) cy = ey;
                if (ex != LONG_MIN && ex < low) low = ex;
                if (ey != LONG_MIN && ey < low) low = ey;
            }
        /* within p + 64 bits of MPFR's smallest exponent the exact
         * evaluation's d (p bits, to nearest) may underflow: it decides */
        if (low != LONG_MAX && low < mpfr_get_emin() + MAX_P + 64) {
            ok = 0;
            break;
        }
        if (cy > cd) cd = cy;
        /* exponents beyond 2^24 (MPFR references only): the exact evaluation
         * (the intervals' scalings stay well inside MPFR's default range) */
        if (cd > (1L << 24) || (cy != LONG_MIN && cy < -(1L << 24)) || (cd != LONG_MIN && cd < -(1L << 24))) {
            ok = 0;
            break;
        }
        if (cd != LONG_MIN && cd + 2 > Kd) {
            if (Kd != LONG_MIN)
                sum_rescale(&P->sdd, 2 * (cd + 2 - Kd), NULL), sum_rescale(&P->syd, cd + 2 - Kd, &P->abs_yd);
            Kd = cd + 2;
        }
        if (cy != LONG_MIN && cy + 2 > Ky) {
            if (Ky != LONG_MIN)
                sum_rescale(&P->syy, 2 * (cy + 2 - Ky), NULL), sum_rescale(&P->syd, cy + 2 - Ky, &P->abs_yd);
            Ky = cy + 2;
        }
        P->Ky = Ky, P->Kd = Kd;
        chunk_sums c = {.dd = {{0, 0}, 0, 0, 0}, .ulps = P->ulps};
        c.yy = c.yd = c.dd;
        /* doubles only where 2^-Kd is one (an MPFR reference's exponent may lie far past x's) */
        const double *xdc = xd && Kd >= -1000 && Kd <= 1000 ? xd : NULL;
        /* (no nonzero y yet, Ky unset: no entry could take the double path) */
        if (P->lanes && (xdc || px) && Ky != LONG_MIN) ok = chunk_lanes(P, &c, xdc, px, pk, i0, i1, p, &w);
        else
            for (size_t i = i0; i < i1 && ok; i++) {
                double X1, X2;
                int xneg;
                if ((xdc || px) && x_parts(xdc, px, i, Kd, &X1, &X2, &xneg) && entry_double(P, &c, X1, X2, xneg, pk, i))
                    continue;
                ok = !entry_limbs(P, &c, i, p, &w);
            }
        dd_add(&P->sdd.total, c.dd.h, c.dd.l), dd_add(&P->syy.total, c.yy.h, c.yy.l), dd_add(&P->syd.total, c.yd.h, c.yd.l);
        /* the chunk's bounds, summed in double: their roundings here and
         * on (into lost, part_merge) lie within ed's factor 2 (entry_double) */
        P->sdd.lost += c.err_dd, P->syd.lost += c.err_yd;
        P->abs_yd += c.abs_yd, P->ulps = c.ulps;
    }
    mpfr_clears(w.dm, w.t, (mpfr_ptr)0);
    P->ok = ok, P->Ky = Ky, P->Kd = Kd;
}

static void part_body(void *ctx, size_t k, size_t begin, size_t end) { part_run((part *)ctx + k, begin, end); }

/* g += P: P's sums taken to g's scales (no smaller than P's), then added
 * (E_of counts the additions); the counts added, the largest ulps kept. */
static void part_merge(part *g, part *P)
{
    if (P->Kd != LONG_MIN && P->Kd < g->Kd)
        sum_rescale(&P->sdd, 2 * (g->Kd - P->Kd), NULL), sum_rescale(&P->syd, g->Kd - P->Kd, &P->abs_yd);
    if (P->Ky != LONG_MIN && P->Ky < g->Ky)
        sum_rescale(&P->syy, 2 * (g->Ky - P->Ky), NULL), sum_rescale(&P->syd, g->Ky - P->Ky, &P->abs_yd);
    sum *to[] = {&g->sdd, &g->syy, &g->syd}, *from[] = {&P->sdd, &P->syy, &P->syd};
    for (int k = 0; k < 3; k++) {
        sum_fold(from[k]);
        dd_add(&to[k]->total, from[k]->total.h, from[k]->total.l);
        to[k]->lost += from[k]->lost;
    }
    g->abs_yd += P->abs_yd;
    if (P->ulps > g->ulps) g->ulps = P->ulps;
    g->wide_ulps = vijp_xnum_max_nan(g->wide_ulps, P->wide_ulps);
    g->skip_dd += P->skip_dd, g->skip_yy += P->skip_yy, g->skip_yd += P->skip_yd;
    g->nz_x += P->nz_x, g->nz_y += P->nz_y, g->nz_d += P->nz_d, g->nslow += P->nslow, g->nfast += P->nfast;
    g->ok &= P->ok;
}

/* About 25 ns an entry on one core, 64 of fork.h's units at the least. */
enum { ENTRY_WORK = 64 };

static int compare_fast(const cmp_lanes_set *lanes, const vijp_mat *a, const vijp_mat *ref, const vijp_format *f,
                        vijp_metric *m, int angle, vijp_compare_cache *cache, vijp_compare_counts *counts);

int vijp_compare_fast(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m, int angle,
                      vijp_compare_cache *cache, vijp_compare_counts *counts)
{
    return compare_fast(vijp_cmp_lanes_active(), a, ref, f, m, angle, cache, counts);
}

int vijp_compare_fast_lanes(int set, const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                            int angle, vijp_compare_counts *counts)
{
    return compare_fast(set < 0 ? NULL : vijp_cmp_lanes_set(set), a, ref, f, m, angle, NULL, counts);
}

static int compare_fast(const cmp_lanes_set *lanes, const vijp_mat *a, const vijp_mat *ref, const vijp_format *f,
                        vijp_metric *m, int angle, vijp_compare_cache *cache, vijp_compare_counts *counts)
{
    if (counts) counts->slow = counts->doubles = 0;
    long p = vijp_compare_prec(f);
    size_t n = vijp_mat_len(ref);
    if (p > MAX_P || n >= (size_t)1 << 40) return 0;
    /* Ranges of the entries, one per thread (the format's threads, base/
     * fork.h), each summed at its own scales and then added at the largest:
     * the metrics are certified intervals whatever the ranges (E_of), so
     * they are the exact evaluation's bits on any count. */
    double work = (double)ENTRY_WORK * (double)n;
    size_t parts = vijp_fork_parts(f->threads, n, work, VIJP_FORK_MIN_WORK);
    int have_yy = cache && cache->fast_ready; /* Σy² depends on y alone: computed once per reference */
    part *P = vijp_alloc_array(parts, sizeof *P);
    for (size_t k = 0; k < parts; k++) P[k] = (part){.a = a, .ref = ref, .f = f, .lanes = lanes, .angle = angle, .have_yy = have_yy};
    if (parts > 1) vijp_fork(f->threads, n, work, part_body, P);
    else part_run(P, 0, n);
    part g = {.Ky = LONG_MIN, .Kd = LONG_MIN, .ok = 1, .wide_ulps = vijp_xnum_of(0)}; /* the sums zero */
    for (size_t k = 0; k < parts; k++) {
        if (P[k].Kd > g.Kd) g.Kd = P[k].Kd;
        if (P[k].Ky > g.Ky) g.Ky = P[k].Ky;
    }
    for (size_t k = 0; k < parts; k++) part_merge(&g, &P[k]);
    free(P);
    if (counts) counts->slow = g.nslow, counts->doubles = g.nfast;
    if (!g.ok) return 0;
    /* Σy² (its scale 0 where y = 0), Σd² and Σyd with their bounds */
    bounded byy = {g.syy.total, E_of(g.syy.total.h, n, g.skip_yy, parts) + g.syy.lost, g.Ky == LONG_MIN ? 0 : 2 * g.Ky};
    if (have_yy) byy = (bounded){{cache->yy_h, cache->yy_l}, cache->yy_E, cache->yy_scale};
    else if (cache) {
        cache->yy_h = byy.s.h, cache->yy_l = byy.s.l, cache->yy_E = byy.E, cache->yy_scale = byy.scale;
        cache->fast_ready = 1;
    }
    m->ulps = vijp_xnum_max_nan(vijp_xnum_of(g.ulps), g.wide_ulps);
    m->angle_deg = vijp_xnum_of(NAN);
    if (!g.nz_d) { /* x = y entry for entry: compare_exact's exact zeros */
        m->rel = m->ulps = vijp_xnum_of(0);
        if (angle) m->angle_deg = vijp_xnum_of(0);
        return 1;
    }
    if (!g.nz_y) { /* Σy² = 0 < Σd² */
        m->rel = vijp_xnum_of(INFINITY);
        return 1; /* the angle: NaN, as compare_exact's (one of the norms zero, not both) */
    }
    bounded bdd = {g.sdd.total, E_of(g.sdd.total.h, n, g.skip_dd, parts) + g.sdd.lost, 2 * g.Kd};
    double rel, deg;
    if (!settle_rel(&rel, &bdd, &byy, p)) return 0;
    m->rel = vijp_xnum_of(rel);
    if (!angle || !g.nz_x) return 1; /* x = 0, y ≠ 0: NaN */
    /* Entries whose d is RN_p(δ) rather than δ move Σδ² by 2^-(p−2) and Σyδ
     * by 2^-(p−1) of Σ|yδ| at most: into the bounds. */
    bdd.E += ldexp(g.sdd.total.h, -(int)p + 3);
    double Eyd = E_of(g.abs_yd, n, g.skip_yd, parts) + ldexp(g.abs_yd, -(int)p + 2) + g.syd.lost;
    bounded byd = {g.syd.total, Eyd, g.Ky + g.Kd};
    if (!settle_angle(&deg, &bdd, &byy, &byd, p)) return 0;
    m->angle_deg = vijp_xnum_of(deg);
    return 1;
}
#endif

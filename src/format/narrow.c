/* Native rounding onto the narrow storage grids and MX blocks (narrow.h
 * says why the steps are exact): the portable code, its AVX2 and AVX-512
 * twins (the same steps in 4 or 8 lanes, compiled for their instruction
 * set by a target attribute, chosen at run time), and the MX blocks. */
#include "narrow.h"
#include "mx.h"
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NARROW_X86 1
#endif

#define SIGN_BIT ((uint64_t)1 << 63)
#define EXP_MASK ((uint64_t)0x7ff << 52)

static double from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t to_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double pow2(int s) /* 2^s for |s| <= 1022: its bits */
{
    return from_bits((uint64_t)(s + 1023) << 52);
}

vijp_narrow vijp_narrow_of(const vijp_format *f)
{
    return (vijp_narrow){(int)f->store_prec, (int)f->store_emin, (int)f->store_emax, f->store_overflow, f->store_max};
}

/* The constants of one grid: the clamps, what C's exponent field adds to
 * the clamped |x|'s, and the magnitude past max gives. */
typedef struct {
    double smallest_normal, top, max, over;
    uint64_t c_add;
} consts;

static consts consts_of(const vijp_narrow *g)
{
    consts c;
    c.smallest_normal = pow2(g->emin + g->p - 2); /* MPFR exponent emin + p − 1: quantum 2^(emin−1) */
    c.top = pow2(g->emax);                        /* 2^emax > max: every value from here overflows */
    c.max = g->max;
    c.over = g->rule == VIJP_OVERFLOW_NAN ? NAN : g->rule == VIJP_OVERFLOW_SATURATE ? g->max : INFINITY;
    /* |x| in [2^(e−1), 2^e) has biased field e + 1022 and quantum 2^(e−p);
     * C = 1.5·2^(e−p+52) has field e − p + 1075: the field plus 53 − p. */
    c.c_add = (uint64_t)(53 - g->p) << 52 | (uint64_t)1 << 51;
    return c;
}

static double round_one(double x, const consts *c)
{
    if (isnan(x)) return x;
    uint64_t sign = to_bits(x) & SIGN_BIT;
    double a = fabs(x) < c->top ? fabs(x) : c->top, lo = a > c->smallest_normal ? a : c->smallest_normal; /* x not NaN */
    double shift = from_bits((to_bits(lo) & EXP_MASK) + c->c_add);
    double r = (a + shift) - shift;
    if (r > c->max) r = c->over;
    return from_bits(to_bits(r) | sign);
}

double vijp_narrow_round(double x, const vijp_narrow *g)
{
    consts c = consts_of(g);
    return round_one(x, &c);
}

static void round_portable(double *dst, const double *src, size_t n, const consts *c, double down, double up)
{
    for (size_t i = 0; i < n; i++) dst[i] = isnan(src[i]) ? src[i] : round_one(src[i] * down, c) * up;
}

#ifdef NARROW_X86
__attribute__((target("avx2"))) static void round_avx2(double *dst, const double *src, size_t n, const consts *c,
                                                       double down, double up)
{
    const __m256d sign = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)SIGN_BIT));
    const __m256i exp_mask = _mm256_set1_epi64x((long long)EXP_MASK), c_add = _mm256_set1_epi64x((long long)c->c_add);
    const __m256d top = _mm256_set1_pd(c->top), small = _mm256_set1_pd(c->smallest_normal);
    const __m256d max = _mm256_set1_pd(c->max), over = _mm256_set1_pd(c->over);
    const __m256d vdown = _mm256_set1_pd(down), vup = _mm256_set1_pd(up);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d in = _mm256_loadu_pd(src + i), x = _mm256_mul_pd(in, vdown);
        __m256d s = _mm256_and_pd(x, sign);
        __m256d a = _mm256_min_pd(_mm256_andnot_pd(sign, x), top); /* NaN lanes: top (blended back below) */
        __m256d lo = _mm256_max_pd(a, small);
        __m256d shift = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_and_si256(_mm256_castpd_si256(lo), exp_mask), c_add));
        __m256d r = _mm256_sub_pd(_mm256_add_pd(a, shift), shift);
        r = _mm256_blendv_pd(r, over, _mm256_cmp_pd(r, max, _CMP_GT_OQ));
        r = _mm256_or_pd(r, s);
        r = _mm256_mul_pd(r, vup);
        _mm256_storeu_pd(dst + i, _mm256_blendv_pd(r, in, _mm256_cmp_pd(in, in, _CMP_UNORD_Q))); /* NaN: as it came */
    }
    round_portable(dst + i, src + i, n - i, c, down, up);
}

__attribute__((target("avx512f"))) static void round_avx512(double *dst, const double *src, size_t n, const consts *c,
                                                            double down, double up)
{
    const __m512i sign = _mm512_set1_epi64((long long)SIGN_BIT), exp_mask = _mm512_set1_epi64((long long)EXP_MASK);
    const __m512i c_add = _mm512_set1_epi64((long long)c->c_add);
    const __m512d top = _mm512_set1_pd(c->top), small = _mm512_set1_pd(c->smallest_normal);
    const __m512d max = _mm512_set1_pd(c->max), over = _mm512_set1_pd(c->over);
    const __m512d vdown = _mm512_set1_pd(down), vup = _mm512_set1_pd(up);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d in = _mm512_loadu_pd(src + i), x = _mm512_mul_pd(in, vdown);
        __m512i xi = _mm512_castpd_si512(x), s = _mm512_and_si512(xi, sign);
        __m512d a = _mm512_min_pd(_mm512_castsi512_pd(_mm512_andnot_si512(sign, xi)), top);
        __m512d lo = _mm512_max_pd(a, small);
        __m512d shift = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_and_si512(_mm512_castpd_si512(lo), exp_mask), c_add));
        __m512d r = _mm512_sub_pd(_mm512_add_pd(a, shift), shift);
        r = _mm512_mask_mov_pd(r, _mm512_cmp_pd_mask(r, max, _CMP_GT_OQ), over);
        r = _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(r), s));
        r = _mm512_mul_pd(r, vup);
        _mm512_storeu_pd(dst + i, _mm512_mask_mov_pd(r, _mm512_cmp_pd_mask(in, in, _CMP_UNORD_Q), in)); /* NaN: as it came */
    }
    round_portable(dst + i, src + i, n - i, c, down, up);
}

/* The largest magnitude of src[0..n) into *amax, and whether a NaN or ±Inf
 * is among them (compares unordered or above DBL_MAX), in lanes. */
__attribute__((target("avx2"))) static int amax_avx2(const double *src, size_t n, double *amax)
{
    const __m256d sign = _mm256_set1_pd(-0.0), big = _mm256_set1_pd(0x1.fffffffffffffp+1023);
    __m256d m = _mm256_setzero_pd(), bad = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d v = _mm256_andnot_pd(sign, _mm256_loadu_pd(src + i));
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(v, big, _CMP_NLE_UQ));
        m = _mm256_max_pd(m, v);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, m);
    int special = _mm256_movemask_pd(bad) != 0;
    *amax = 0;
    for (int k = 0; k < 4; k++) *amax = lanes[k] > *amax ? lanes[k] : *amax;
    for (; i < n; i++) {
        double v = fabs(src[i]);
        special |= !(v <= 0x1.fffffffffffffp+1023);
        *amax = v > *amax ? v : *amax;
    }
    return special;
}

__attribute__((target("avx512f"))) static int amax_avx512(const double *src, size_t n, double *amax)
{
    const __m512i sign = _mm512_set1_epi64((long long)SIGN_BIT);
    const __m512d big = _mm512_set1_pd(0x1.fffffffffffffp+1023);
    __m512d m = _mm512_setzero_pd();
    __mmask8 bad = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d v = _mm512_castsi512_pd(_mm512_andnot_si512(sign, _mm512_castpd_si512(_mm512_loadu_pd(src + i))));
        bad |= _mm512_cmp_pd_mask(v, big, _CMP_NLE_UQ);
        m = _mm512_max_pd(m, v);
    }
    int special = bad != 0;
    *amax = _mm512_reduce_max_pd(m);
    for (; i < n; i++) {
        double v = fabs(src[i]);
        special |= !(v <= 0x1.fffffffffffffp+1023);
        *amax = v > *amax ? v : *amax;
    }
    return special;
}
#endif

int vijp_narrow_isa_ok(vijp_narrow_isa isa)
{
#ifdef NARROW_X86
    if (isa == VIJP_NARROW_AVX2) return __builtin_cpu_supports("avx2");
    if (isa == VIJP_NARROW_AVX512) return __builtin_cpu_supports("avx512f");
#endif
    return isa == VIJP_NARROW_PORTABLE || isa == VIJP_NARROW_BEST;
}

typedef void (*round_fn)(double *dst, const double *src, size_t n, const consts *c, double down, double up);
typedef int (*amax_fn)(const double *src, size_t n, double *amax);

static int amax_portable(const double *src, size_t n, double *amax)
{
    int special = 0;
    *amax = 0;
    for (size_t k = 0; k < n; k++) {
        double v = fabs(src[k]);
        special |= !(v <= 0x1.fffffffffffffp+1023); /* NaN or ±Inf */
        *amax = v > *amax ? v : *amax;
    }
    return special;
}

/* The loops isa names (BEST: the widest this CPU runs; one it lacks: the
 * portable loops), chosen once per call. */
typedef struct {
    round_fn round;
    amax_fn amax;
} loops;

static loops loops_of(vijp_narrow_isa isa)
{
#ifdef NARROW_X86
    if (isa == VIJP_NARROW_BEST)
        isa = vijp_narrow_isa_ok(VIJP_NARROW_AVX512) ? VIJP_NARROW_AVX512
              : vijp_narrow_isa_ok(VIJP_NARROW_AVX2) ? VIJP_NARROW_AVX2
                                                      : VIJP_NARROW_PORTABLE;
    if (isa == VIJP_NARROW_AVX512 && vijp_narrow_isa_ok(isa)) return (loops){round_avx512, amax_avx512};
    if (isa == VIJP_NARROW_AVX2 && vijp_narrow_isa_ok(isa)) return (loops){round_avx2, amax_avx2};
#else
    (void)isa;
#endif
    return (loops){round_portable, amax_portable};
}

void vijp_narrow_round_array(double *dst, const double *src, size_t n, const vijp_narrow *g, double down, double up,
                             vijp_narrow_isa isa)
{
    consts c = consts_of(g);
    loops_of(isa).round(dst, src, n, &c, down, up);
}

/* ---- MX blocks ---- */

#define MANT_MASK (((uint64_t)1 << 52) - 1)

/* The scale exponent of a block with largest magnitude amax (finite, not
 * zero), as arith.c's vijp_mx_scale_exponent: floor(log2 amax) − emax_elem,
 * or with ":ceil" ceil(log2(amax/max)), exactly: with amax = ma·2^A and
 * max = mm·2^E (ma and mm in [1, 2)), amax/max lies in (2^(A−E), 2^(A−E+1))
 * when ma > mm and in (2^(A−E−1), 2^(A−E)] otherwise; for normal doubles
 * A is the exponent field less the bias and ma > mm compares the trailing
 * significand fields.  Clamped to −127 below; 0 past 127 above (the NaN
 * scale).  amax is a magnitude, as the specification's (for a negative
 * amax of exactly max·2^k the scale is 2^k: tests/t-narrow.c's
 * ceil_scale_of_a_negative_amax). */
static int scale_exponent(const vijp_format *f, double amax, int *s)
{
    uint64_t a = to_bits(amax), m = to_bits(f->store_max);
    int normal = amax >= 0x1p-1022;
    int A = normal ? (int)(a >> 52) - 1023 : ilogb(amax);
    if (!f->mx_scale_ceil) *s = A - f->mx_elem_emax;
    else if (normal) *s = A - ((int)(m >> 52) - 1023) + ((a & MANT_MASK) > (m & MANT_MASK));
    else {
        int Af, E;
        double ma = frexp(amax, &Af), mm = frexp(f->store_max, &E);
        *s = Af - E + (ma > mm);
    }
    if (*s < -E8M0_EMAX) *s = -E8M0_EMAX;
    return *s <= E8M0_EMAX;
}

/* One block, the grid's constants and the loops already chosen. */
static void mx_block(const vijp_format *f, const consts *c, loops lp, double *dst, size_t dstride, const double *src,
                     size_t sstride, size_t n)
{
    double amax = 0;
    int special = 0;
    if (sstride == 1) special = lp.amax(src, n, &amax);
    else
        for (size_t k = 0; k < n; k++) {
            double v = fabs(src[k * sstride]);
            special |= !(v <= 0x1.fffffffffffffp+1023); /* NaN or ±Inf */
            amax = v > amax ? v : amax;
        }
    int s = 0;
    if (special || (amax != 0 && !scale_exponent(f, amax, &s))) { /* a NaN scale: every value NaN */
        for (size_t k = 0; k < n; k++) dst[k * dstride] = NAN;
        return;
    }
    if (amax == 0) { /* all zeros, each keeping its sign */
        for (size_t k = 0; k < n; k++) dst[k * dstride] = src[k * sstride];
        return;
    }
    /* v·2^−s rounded to the element grid, times 2^s (mx.c's element).  The
     * second product is exact (an element times a power of two within
     * double's range); the first too unless it falls under 2^−1022, where
     * the exact quotient and its binary64 rounding both lie far below half
     * the smallest element and round to a zero of v's sign. */
    double down = pow2(-s), up = pow2(s);
    if (dstride == 1 && sstride == 1) lp.round(dst, src, n, c, down, up);
    else
        for (size_t k = 0; k < n; k++) dst[k * dstride] = round_one(src[k * sstride] * down, c) * up; /* no NaN here */
}

void vijp_narrow_mx_block(const vijp_format *f, double *dst, size_t dstride, const double *src, size_t sstride,
                          size_t n, vijp_narrow_isa isa)
{
    vijp_narrow g = vijp_narrow_of(f);
    consts c = consts_of(&g);
    mx_block(f, &c, loops_of(isa), dst, dstride, src, sstride, n);
}

void vijp_narrow_mx_line(const vijp_format *f, double *v, size_t n, size_t stride, vijp_narrow_isa isa)
{
    vijp_narrow g = vijp_narrow_of(f);
    consts c = consts_of(&g);
    loops lp = loops_of(isa);
    size_t b = (size_t)f->mx_block;
    for (size_t k = 0; k < n; k += b)
        mx_block(f, &c, lp, v + k * stride, stride, v + k * stride, stride, n - k < b ? n - k : b);
}

/* Dot products rounded once (see dot.h for the contract and the error
 * argument).  Reads MPFR values through the public custom interface
 * (mpfr_custom_get_significand/_exp): limbs most significant last, the top
 * bit of the top limb set, bits below the precision zero. */
#include "dot.h"
#include "vijp/memory.h"
#include <gmp.h>
#include <limits.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if GMP_NAIL_BITS != 0
#error "vo_dot assumes GMP limbs without nail bits"
#endif
#define LB GMP_NUMB_BITS

/* Bits the accumulator keeps below the largest product's exponent, beyond
 * the result's precision: with n products cut, each by less than one unit of
 * the accumulator, the error is below n·2^-(P+GUARD) relative to the largest
 * product, so the rounding test fails (and the exact path runs) only when the
 * sum lies within that of a rounding boundary or cancels by about GUARD − log2 n
 * bits. */
#define GUARD 128
/* Exponents beyond this go to the exact path (their sums would overflow a long). */
#define EXP_SAFE ((long)1 << 60)
/* Scratch limbs kept on the stack; more (precisions beyond ~4000 bits) are allocated. */
#define STACK_LIMBS 512

/* The test hook VIJP_BREAK_REFDOT (any value): keep only P/4 bits (masked, so
 * that 128 and 256 bits keep 32 and 64, not one limb each) and round
 * what is left without the test, so the reference is wrong by about
 * 2^-(P/4): what the drift study's validation must catch.  Read once. */
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static int hook_broken;
static void hook_read(void) { hook_broken = getenv("VIJP_BREAK_REFDOT") != NULL; }

int vo_dot_hook_broken(void)
{
    pthread_once(&hook_once, hook_read);
    return hook_broken;
}

int vo_dot_fused(const vijp_format *f) { return f->exact_dots && !f->emulated && f->kind == VIJP_MPFR; }

static size_t limbs_of(mpfr_srcptr x) { return (size_t)((mpfr_get_prec(x) + LB - 1) / LB); }

void vo_dot_exact(mpfr_ptr r, mpfr_srcptr c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n)
{
    mpfr_t *prod = b ? vijp_alloc_array(n ? n : 1, sizeof *prod) : NULL, sum;
    mpfr_ptr *terms = vijp_alloc_array(n + 1, sizeof *terms);
    /* The products' significands in one block (MPFR's custom interface),
     * each slot sized for the widest: one allocation, not one a term (the
     * comparisons of wide mpfr:P formats sum 10^4–10^5 of them a call). */
    mpfr_prec_t widest = 1;
    for (size_t k = 0; b && k < n; k++)
        if (mpfr_get_prec(a[k]) + mpfr_get_prec(b[k]) > widest) widest = mpfr_get_prec(a[k]) + mpfr_get_prec(b[k]);
    size_t slot = (mpfr_custom_get_size(widest) + sizeof(mp_limb_t) - 1) / sizeof(mp_limb_t), count = n ? n : 1;
    if (count > SIZE_MAX / sizeof(mp_limb_t) / slot) vijp_out_of_memory(SIZE_MAX);
    mp_limb_t *store = b ? vijp_alloc_unset(count * slot * sizeof *store) : NULL; /* mpfr_mul writes every slot */
    for (size_t k = 0; k < n; k++) {
        if (b) { /* exact: a product of p- and q-bit numbers has at most p + q bits */
            mpfr_prec_t pk = mpfr_get_prec(a[k]) + mpfr_get_prec(b[k]);
            mpfr_custom_init(store + k * slot, pk);
            mpfr_custom_init_set(prod[k], MPFR_ZERO_KIND, 0, pk, store + k * slot);
            mpfr_mul(prod[k], a[k], b[k], MPFR_RNDN);
            terms[k] = prod[k];
        } else {
            terms[k] = (mpfr_ptr)a[k];
        }
    }
    size_t m = n;
    if (c) terms[m++] = (mpfr_ptr)c;
    mpfr_init2(sum, mpfr_get_prec(r)); /* r may be an input: sum apart, then copy (exact, same precision) */
    mpfr_sum(sum, terms, (unsigned long)m, MPFR_RNDN);
    if (mpfr_zero_p(sum)) mpfr_set_zero(sum, 1);
    mpfr_set(r, sum, MPFR_RNDN);
    mpfr_clear(sum);
    free(store); /* the products' significands: never mpfr_clear a custom value */
    free(prod);
    free(terms);
}

/* x's significand without its zero low limbs (a double in a 256-bit number
 * has one limb of bits): sig[0..*len) · 2^(EXP(x) − LB·len) is |x|. */
static const mp_limb_t *significand(mpfr_srcptr x, size_t *len)
{
    const mp_limb_t *p = mpfr_custom_get_significand(x);
    size_t l = limbs_of(x);
    while (!*p) p++, l--; /* the top limb is nonzero: x is regular */
    *len = l;
    return p;
}

/* One term x·y (or x alone, y NULL) into the accumulator acc[0..L) whose unit
 * is 2^w.  Returns 1 when bits of the term fell below the accumulator. */
static int accumulate(mp_limb_t *acc, size_t L, long w, mpfr_srcptr x, mpfr_srcptr y, mp_limb_t *prod)
{
    long e = mpfr_get_exp(x) + (y ? mpfr_get_exp(y) : 0);
    if (e <= w) return 1; /* |x·y| < 2^e <= one unit: all of it below */
    size_t lx;
    const mp_limb_t *xp = significand(x, &lx), *src = xp;
    size_t len = lx;
    int neg = mpfr_signbit(x) != 0;
    if (y) {
        size_t ly;
        const mp_limb_t *yp = significand(y, &ly);
        if (ly == 1) prod[lx] = mpn_mul_1(prod, xp, (mp_size_t)lx, yp[0]);
        else if (lx == 1) prod[ly] = mpn_mul_1(prod, yp, (mp_size_t)ly, xp[0]);
        else if (lx >= ly) mpn_mul(prod, xp, (mp_size_t)lx, yp, (mp_size_t)ly);
        else mpn_mul(prod, yp, (mp_size_t)ly, xp, (mp_size_t)lx);
        len = lx + ly, src = prod, neg ^= mpfr_signbit(y) != 0;
    }
    /* src[0..len) · 2^(e − LB·len) is the term's magnitude; its unit sits off
     * bits above the accumulator's: limb q, bit s. */
    long off = e - (long)(LB * len) - w;
    long q = off >= 0 ? off / LB : -((-off + LB - 1) / LB);
    unsigned s = (unsigned)(off - q * LB);
    if (s) { /* shift into prod (in place when it is the product), one limb more */
        mp_limb_t top = mpn_lshift(prod, src, (mp_size_t)len, s);
        prod[len++] = top;
        src = prod;
    }
    size_t lo = q < 0 ? (size_t)-q : 0; /* limbs below the accumulator */
    int cut = 0;
    if (lo) {
        cut = lo >= len || !mpn_zero_p(src, (mp_size_t)lo);
        if (lo >= len) return cut;
        src += lo, len -= lo, q = 0;
    }
    mp_limb_t *dst = acc + q;
    size_t above = L - (size_t)q - len; /* limbs the carry may run through (the top one at least: see vo_dot) */
    if (!neg) {
        mp_limb_t cy = mpn_add_n(dst, dst, src, (mp_size_t)len);
        if (cy && above) mpn_add_1(dst + len, dst + len, (mp_size_t)above, cy);
    } else {
        mp_limb_t bw = mpn_sub_n(dst, dst, src, (mp_size_t)len);
        if (bw && above) mpn_sub_1(dst + len, dst + len, (mp_size_t)above, bw);
    }
    return cut;
}

/* Round the integer ±mag[0..size) · 2^w to r; size 0 gives +0. */
static void round_to(mpfr_ptr r, const mp_limb_t *mag, size_t size, int neg, long w)
{
    while (size && !mag[size - 1]) size--;
    if (!size) {
        mpfr_set_zero(r, 1);
        return;
    }
    mpz_t z;
    mpz_roinit_n(z, mag, neg ? -(mp_size_t)size : (mp_size_t)size);
    mpfr_set_z_2exp(r, z, w, MPFR_RNDN);
}

void vo_dot(mpfr_ptr r, mpfr_srcptr c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n)
{
    pthread_once(&hook_once, hook_read);
    if (n == 1 && b && !c && !hook_broken) { /* one product: mpfr_mul rounds it correctly */
        mpfr_mul(r, a[0], b[0], MPFR_RNDN);
        if (mpfr_zero_p(r)) mpfr_set_zero(r, 1);
        return;
    }
    /* Pass 1: the largest exponent and the widest term; zero terms drop out,
     * NaN and Inf go to the exact path (which gives mpfr_sum's answer). */
    long E = LONG_MIN;
    size_t widest = 0, live = 0;
    for (size_t k = 0; k <= n; k++) {
        mpfr_srcptr x = k < n ? a[k] : c, y = k < n && b ? b[k] : NULL;
        if (!x) continue;
        if (!mpfr_regular_p(x) || (y && !mpfr_regular_p(y))) {
            if (mpfr_nan_p(x) || mpfr_inf_p(x) || (y && (mpfr_nan_p(y) || mpfr_inf_p(y))))
            {
                vo_dot_exact(r, c, a, b, n);
                return;
            }
            continue; /* a zero factor, the other finite */
        }
        long e = mpfr_get_exp(x), ey = y ? mpfr_get_exp(y) : 0;
        if (e > EXP_SAFE || e < -EXP_SAFE || ey > EXP_SAFE || ey < -EXP_SAFE) {
            vo_dot_exact(r, c, a, b, n);
            return;
        }
        size_t len = limbs_of(x) + (y ? limbs_of(y) : 0);
        if (e + ey > E) E = e + ey;
        if (len > widest) widest = len;
        live++;
    }
    if (!live) {
        mpfr_set_zero(r, 1);
        return;
    }
    /* The accumulator: L limbs, two's complement, unit 2^w; its top limb lies
     * wholly above 2^E > every |term|, which leaves room for the carries of
     * up to 2^(LB-1) terms and the sign. */
    mpfr_prec_t P = mpfr_get_prec(r);
    size_t keep = (size_t)(hook_broken ? P / 4 : P + GUARD), L = (keep + LB - 1) / LB + 1;
    size_t lp = (size_t)(P + LB - 1) / LB;
    long w = E + LB - (long)(LB * L);
    /* acc[L], prod[widest + 1], the interval's ends lo[L] and hi[L + 1], two P-bit significands */
    size_t need = L + widest + 1 + 2 * L + 1 + 2 * lp;
    mp_limb_t stack[STACK_LIMBS], *scratch = need <= STACK_LIMBS ? stack : vijp_alloc_array(need, sizeof *scratch);
    mp_limb_t *acc = scratch, *prod = acc + L, *lo = prod + widest + 1, *hi = lo + L, *sig = hi + L + 1;
    memset(acc, 0, L * sizeof *acc);
    size_t cut = 0;
    for (size_t k = 0; k <= n; k++) {
        mpfr_srcptr x = k < n ? a[k] : c, y = k < n && b ? b[k] : NULL;
        if (!x || mpfr_zero_p(x) || (y && mpfr_zero_p(y))) continue;
        cut += (size_t)accumulate(acc, L, w, x, y, prod);
    }
    if (hook_broken) { /* keep `keep` bits below the top limb, whatever the limb count: P/4 bits, not a limb's worth */
        size_t clear = (size_t)LB * (L - 1) > keep ? (size_t)LB * (L - 1) - keep : 0;
        for (size_t i = 0; i < L && clear; i++) {
            size_t bits = clear < (size_t)LB ? clear : (size_t)LB;
            acc[i] &= bits == (size_t)LB ? 0 : ~(mp_limb_t)0 << bits;
            clear -= bits;
        }
    }
    int neg = (int)(acc[L - 1] >> (LB - 1));
    if (neg) mpn_neg(acc, acc, (mp_size_t)L);
    if (!cut || hook_broken) {
        round_to(r, acc, L, neg, w); /* exact (or broken on purpose): one rounding */
    } else if (mpn_sub_1(lo, acc, (mp_size_t)L, (mp_limb_t)cut) || mpn_zero_p(lo, (mp_size_t)L)) {
        vo_dot_exact(r, c, a, b, n); /* |A| <= cut: even the sign is unknown */
    } else {
        /* S lies in [A - cut, A + cut] (units 2^w): when both ends round to the
         * same P-bit number, S rounds to it too (rounding is monotone). */
        hi[L] = mpn_add_1(hi, acc, (mp_size_t)L, (mp_limb_t)cut);
        mpfr_t rlo, rhi;
        mpfr_custom_init_set(rlo, MPFR_ZERO_KIND, 0, P, sig);
        mpfr_custom_init_set(rhi, MPFR_ZERO_KIND, 0, P, sig + lp);
        round_to(rlo, lo, L, neg, w);
        round_to(rhi, hi, L + 1, neg, w);
        if (mpfr_equal_p(rlo, rhi)) mpfr_set(r, rlo, MPFR_RNDN);
        else vo_dot_exact(r, c, a, b, n);
    }
    if (scratch != stack) free(scratch);
}

void vo_dot1(mpfr_ptr r, mpfr_srcptr a, mpfr_srcptr b)
{
    pthread_once(&hook_once, hook_read);
    if (hook_broken) {
        vo_dot(r, NULL, &a, &b, 1);
        return;
    }
    mpfr_mul(r, a, b, MPFR_RNDN); /* vo_dot's one-product case */
    if (mpfr_zero_p(r)) mpfr_set_zero(r, 1);
}

void vo_dot_strided(mpfr_ptr r, mpfr_srcptr c, const mpfr_t *a, size_t sa, const mpfr_t *b, size_t sb, size_t n,
                    mpfr_srcptr *ptrs)
{
    for (size_t k = 0; k < n; k++) ptrs[k] = a[k * sa], ptrs[n + k] = b ? b[k * sb] : NULL;
    vo_dot(r, c, ptrs, b ? ptrs + n : NULL, n);
}

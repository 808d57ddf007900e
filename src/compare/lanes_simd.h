/* The lanes of compare/lanes.h, written once over VW doubles with GCC/Clang
 * vector extensions and compiled per instruction set: avx2/lanes.c (VW =
 * 4) and avx512/lanes.c (8), each with its directory's target flags
 * (mk/lib.mk).  Defines lanes_run and
 * lanes_exps. */
#ifndef VW
#error "define VW before including compare/lanes_simd.h"
#endif
#include "compare/lanes.h"
#include <limits.h>
#include <math.h>
#include <mpfr.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef double vd __attribute__((vector_size(VW * 8)));
typedef uint64_t vu __attribute__((vector_size(VW * 8)));
typedef int64_t vi __attribute__((vector_size(VW * 8)));

/* fast.c's TINY: scaled values below 2^-TINY are left to it. */
#define LANES_TINY 400

static inline vd splat(double x) { return (vd){0} + x; }
static inline vd vabs(vd x) { return (vd)((vu)x & (uint64_t)INT64_MAX); }
/* x where m (all ones or zero per lane), else +0 */
static inline vd keep(vd x, vi m) { return (vd)((vi)x & m); }

/* 2^k per lane, k within the normal doubles' exponents (garbage elsewhere:
 * such a lane is masked off). */
static inline vd pow2v(vi k) { return (vd)((vu)(k + 1023) << 52); }

/* ±(top 53 bits of s, its top bit set)·2^(k − 53), neg 0 or 1: fast.c's
 * with_top, per lane. */
static inline vd with_top_v(vu neg, vu s, vi k)
{
    return (vd)(neg << 63 | (vu)(k - 1 + 1023) << 52 | ((s >> 11) & (((uint64_t)1 << 52) - 1)));
}

/* m exactly, for 0 <= m < 2^53: two halves below 2^52 through the
 * exponent field of 2^52, each exact, then hi·2^26 + lo, exact. */
static inline vd u53(vu m)
{
    const uint64_t magic = 0x4330000000000000; /* 2^52 */
    vd hi = (vd)(m >> 26 | magic) - 0x1p52, lo = (vd)((m & ((1u << 26) - 1)) | magic) - 0x1p52;
    return hi * 0x1p26 + lo;
}

/* (h, l) = a·b exactly (no overflow or underflow: fast.c's two_prod). */
static inline void two_prod_v(vd a, vd b, vd *h, vd *l)
{
    *h = a * b;
#ifdef __FMA__
#if VW == 8
    *l = (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)-*h);
#elif VW == 4
    *l = (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)-*h);
#else
    *l = (vd)_mm_fmadd_pd((__m128d)a, (__m128d)b, (__m128d)-*h);
#endif
#else
    const double split = 134217729.0; /* 2^27 + 1 */
    vd ca = split * a, ah = ca - (ca - a), al = a - ah;
    vd cb = split * b, bh = cb - (cb - b), bl = b - bh;
    *l = ((ah * bh - *h) + ah * bl + al * bh) + al * bl;
#endif
}

static inline void two_sum_v(vd a, vd b, vd *h, vd *l)
{
    vd t = a + b, v = t - a;
    *l = (a - (t - v)) + (b - v);
    *h = t;
}

/* fast.c's sum_add, per lane. */
static inline void sum_add_v(vd *h, vd *l, vd th, vd tl)
{
    vd t = *h + th, v = t - *h;
    *l += ((*h - (t - v)) + (th - v)) + tl;
    *h = t;
}

/* The VW lanes' loads from entry i on (n of them valid, the rest repeat
 * entry i: any finite data, masked off later). */
typedef struct {
    vu s2, s1, s0, neg;
    vi e, regular;
} packed_lanes;

static inline void load_packed_lanes(packed_lanes *L, const vijp_packed *p, size_t i, int n)
{
    uint64_t s2[VW], s1[VW], s0[VW], neg[VW];
    int64_t e[VW], reg[VW];
    size_t nl = p->limbs;
    for (int l = 0; l < VW; l++) {
        size_t j = i + (size_t)(l < n ? l : 0);
        const mp_limb_t *s = p->sig + j * nl;
        int regular = vijp_packed_kind(p, j) == MPFR_REGULAR_KIND;
        s2[l] = s[nl - 1], s1[l] = nl > 1 ? s[nl - 2] : 0, s0[l] = nl > 2 ? s[nl - 3] : 0;
        neg[l] = vijp_packed_neg(p, j);
        reg[l] = l < n && regular ? -1 : 0;
        e[l] = regular ? vijp_packed_exp(p, j) : 0;
    }
    memcpy(&L->s2, s2, sizeof L->s2), memcpy(&L->s1, s1, sizeof L->s1), memcpy(&L->s0, s0, sizeof L->s0);
    memcpy(&L->neg, neg, sizeof L->neg), memcpy(&L->e, e, sizeof L->e), memcpy(&L->regular, reg, sizeof L->regular);
}

typedef uint16_t vu16 __attribute__((vector_size(VW * 2)));

/* The VW heads from entry i on, widened: their codes (head & 0x7fff)
 * into *code, their signs into *neg.  A code from 4 on is a regular
 * value's biased exponent (packed.h); a block with a side array of wide
 * exponents is read lane by lane instead. */
static inline void load_heads(const vijp_packed *p, size_t i, vi *code, vu *neg)
{
    vu16 h16;
    memcpy(&h16, p->head + i, sizeof h16);
    vu h = __builtin_convertvector(h16, vu);
    *code = (vi)(h & VIJP_PACKED_CODE), *neg = h >> 15 & 1;
}

/* load_packed_lanes for a whole block (n = VW): the heads as a contiguous
 * load, widened; the limbs gathered where the set has gathers. */
static inline void load_packed_block(packed_lanes *L, const vijp_packed *p, size_t i)
{
    if (p->wide) {
        load_packed_lanes(L, p, i, VW);
        return;
    }
    size_t nl = p->limbs;
    vi code;
    load_heads(p, i, &code, &L->neg);
    L->regular = (vi)(code > MPFR_REGULAR_KIND);
    L->e = (code - VIJP_PACKED_BIAS) & L->regular;
#if VW == 8 && defined(__AVX512F__) && defined(__AVX512DQ__) /* _mm512_mullo_epi64: DQ */
    const long long *base = (const long long *)(p->sig + i * nl);
    __m512i idx = _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64((long long)nl));
    __m512i top = _mm512_add_epi64(idx, _mm512_set1_epi64((long long)nl - 1));
    L->s2 = (vu)_mm512_i64gather_epi64(top, base, 8);
    L->s1 = nl > 1 ? (vu)_mm512_i64gather_epi64(_mm512_sub_epi64(top, _mm512_set1_epi64(1)), base, 8) : (vu){0};
    L->s0 = nl > 2 ? (vu)_mm512_i64gather_epi64(_mm512_sub_epi64(top, _mm512_set1_epi64(2)), base, 8) : (vu){0};
#else
    uint64_t s2[VW], s1[VW], s0[VW];
    for (int l = 0; l < VW; l++) {
        const mp_limb_t *s = p->sig + (i + (size_t)l) * nl;
        s2[l] = s[nl - 1], s1[l] = nl > 1 ? s[nl - 2] : 0, s0[l] = nl > 2 ? s[nl - 3] : 0;
    }
    memcpy(&L->s2, s2, sizeof L->s2), memcpy(&L->s1, s1, sizeof L->s1), memcpy(&L->s0, s0, sizeof L->s0);
#endif
}

/* ok's lanes as bits, lane l at bit l. */
static inline unsigned lane_bits(vi ok)
{
#if VW == 8 && defined(__AVX512DQ__)
    return _mm512_movepi64_mask((__m512i)ok);
#elif VW == 4 && defined(__AVX__)
    return (unsigned)_mm256_movemask_pd((__m256d)ok);
#else
    unsigned b = 0;
    for (int l = 0; l < VW; l++) b |= (ok[l] != 0) << l;
    return b;
#endif
}

/* x's lanes X1 + X2 at 2^-Kd and their signs; ok: the lanes fast.c's
 * x_parts accepts. */
static inline vi x_lanes(const cmp_lanes_job *J, double scale, size_t i, int n, vd *X1, vd *X2, vu *xneg)
{
    if (J->xd) {
        vd xv;
        if (n == VW) memcpy(&xv, J->xd + i, sizeof xv);
        else {
            double x[VW];
            for (int l = 0; l < VW; l++) x[l] = J->xd[i + (size_t)(l < n ? l : 0)];
            memcpy(&xv, x, sizeof xv);
        }
        *X1 = xv * scale; /* 2^-Kd, exact where both stay normal */
        *X2 = splat(0);
        *xneg = (vu)xv >> 63;
        vu ex = (vu)xv >> 52 & 0x7ff, e1 = (vu)*X1 >> 52 & 0x7ff;
        return (vi)(ex != 0) & (vi)(ex != 0x7ff) & (vi)(e1 != 0) & (vi)(e1 != 0x7ff); /* lanes past n: masked by the caller */
    }
    packed_lanes P;
    if (n == VW) load_packed_block(&P, J->px, i);
    else load_packed_lanes(&P, J->px, i, n);
    vi k = P.e - J->Kd;
    *xneg = P.neg;
    *X1 = with_top_v(P.neg, P.s2, k);
    vu m = (P.s2 & 0x7ff) << 42 | P.s1 >> 22;
    *X2 = (vd)((vu)(u53(m) * pow2v(k - 106)) | P.neg << 63);
    return P.regular & (vi)(k >= -700);
}

/* fast.c's exp_of for entry i of xd (doubles) or p (packed). */
static inline long exp_one(const double *xd, const vijp_packed *p, size_t i)
{
    if (!xd) return vijp_packed_kind(p, i) == MPFR_REGULAR_KIND ? vijp_packed_exp(p, i) : LONG_MIN;
    if (xd[i] == 0) return LONG_MIN;
    uint64_t b;
    memcpy(&b, xd + i, sizeof b);
    long be = (long)(b >> 52 & 0x7ff);
    return be ? be - 1022 : -1010 - __builtin_clzll(b << 12 >> 12); /* subnormal: as vijp_double_split */
}

static inline vi vmax(vi a, vi b)
{
    vi m = (vi)(a > b);
    return (a & m) | (b & ~m);
}

/* The largest exponent among entries [i0, i1) of xd or p (LONG_MIN for
 * zeros and the packed NaN and Inf, as exp_of) into *hi, the smallest of
 * the others into *lo (LONG_MAX if none). */
static void lanes_exps(const double *xd, const vijp_packed *p, size_t i0, size_t i1, long *hi, long *lo)
{
    vi vhi = (vi){0} + LONG_MIN, vlo = (vi){0} + LONG_MIN; /* vlo holds −e: the max of −e is −min e */
    size_t i = i0;
    for (; i + VW <= i1; i += VW) {
        vi e, live;
        if (xd) {
            vu b;
            memcpy(&b, xd + i, sizeof b);
            vi be = (vi)(b >> 52 & 0x7ff);
            vi sub = (vi)(be == 0) & (vi)((b << 12) != 0);
            if (lane_bits(sub)) break; /* a subnormal: the rest one at a time */
            live = (vi)(be != 0), e = be - 1022;
        } else {
            if (p->wide) break; /* wide exponents: one at a time */
            vi code;
            vu neg;
            load_heads(p, i, &code, &neg);
            live = (vi)(code > MPFR_REGULAR_KIND), e = code - VIJP_PACKED_BIAS;
        }
        vi none = ((vi){0} + LONG_MIN) & ~live;
        vhi = vmax(vhi, (e & live) | none);
        vlo = vmax(vlo, (-e & live) | none);
    }
    long h = LONG_MIN, l = LONG_MAX;
    for (int k = 0; k < VW; k++) {
        if (vhi[k] > h) h = vhi[k];
        if (vlo[k] != LONG_MIN && -vlo[k] < l) l = -vlo[k];
    }
    for (; i < i1; i++) {
        long e = exp_one(xd, p, i);
        if (e > h) h = e;
        if (e != LONG_MIN && e < l) l = e;
    }
    *hi = h, *lo = l;
}

static size_t lanes_run(const cmp_lanes_job *J, size_t i0, size_t i1, cmp_lanes_sums *out, uint16_t *rest)
{
    vd ddh, ddl, yyh, yyl, ydh, ydl, zero = splat(0), abs_yd = zero, err_dd = zero, err_yd = zero;
    memcpy(&ddh, out->dd_h, sizeof ddh), memcpy(&ddl, out->dd_l, sizeof ddl);
    memcpy(&yyh, out->yy_h, sizeof yyh), memcpy(&yyl, out->yy_l, sizeof yyl);
    memcpy(&ydh, out->yd_h, sizeof ydh), memcpy(&ydl, out->yd_l, sizeof ydl);
    vd thr = splat(J->ulps_max);
    double scale = J->xd ? ldexp(1, (int)-J->Kd) : 0; /* the caller keeps |Kd| <= 1000 for doubles */
    size_t nrest = 0, taken = 0;
    for (size_t i = i0; i < i1; i += VW) {
        int n = i1 - i < VW ? (int)(i1 - i) : VW;
        vd X1, X2;
        vu xneg;
        vi ok = x_lanes(J, scale, i, n, &X1, &X2, &xneg);
        packed_lanes Y;
        if (n == VW) load_packed_block(&Y, J->pk, i);
        else load_packed_lanes(&Y, J->pk, i, n);
        vi kd = Y.e - J->Kd;
        ok &= Y.regular & (vi)(Y.neg == xneg) & (vi)(Y.e - J->Ky >= -LANES_TINY + 8) & (vi)(kd >= -700);
        vu m2 = (Y.s2 & 0x7ff) << 42 | Y.s1 >> 22, m3 = (Y.s1 & 0x3fffff) << 31 | Y.s0 >> 33,
           m4 = Y.s0 & 0x1ffffffff;
        vu sgn = Y.neg << 63;
        vd Y1 = with_top_v(Y.neg, Y.s2, kd), Y2 = (vd)((vu)(u53(m2) * pow2v(kd - 106)) | sgn),
           Y3 = (vd)((vu)(u53(m3) * pow2v(kd - 159)) | sgn), Y4 = (vd)((vu)(u53(m4) * pow2v(kd - 192)) | sgn);
        vd ax = vabs(X1), a1 = vabs(Y1);
        ok &= (vi)(ax >= 0.5 * a1) & (vi)(ax < 2 * a1);
        vd a, b, h1, l1, h2, l2, dh, dl;
        two_sum_v(X2, -Y2, &a, &b);
        two_sum_v(X1 - Y1, a, &h1, &l1);
        two_sum_v(h1, -Y3, &h2, &l2);
        vd t1 = l1 + b, t2 = t1 + l2, t3 = t2 - Y4;
        two_sum_v(h2, t3, &dh, &dl);
        vd ed = (vabs(t1) + vabs(t2) + vabs(t3)) * 0x1.0000000000001p-52, ad = vabs(dh);
        ok &= (vi)(ad >= 0x1p-392) & (vi)(ed <= 0x1p-96 * ad); /* 2^(-TINY+8) */
        /* the ulps: e as fast.c's ulps_exact forms it */
        vi e = Y.e - J->ulp_shift;
        vi low = (vi)(e < J->e_floor);
        e = (e & ~low) | (J->e_floor & low);
        vi sh = J->Kd - e;
        ok &= (vi)(sh <= 900) & (vi)(sh >= -600);
        vd U = (ad + vabs(dl) + ed) * 0x1.0000000000004p+0 * pow2v(sh);
        ok &= (vi)(U <= thr);
        vd ph, pl;
        two_prod_v(dh, dh, &ph, &pl);
        sum_add_v(&ddh, &ddl, keep(ph, ok), keep(pl + 2 * dh * dl, ok));
        err_dd += keep((2 * (ad + vabs(dl)) + ed) * ed, ok);
        if (J->want_yy || J->want_yd) {
            vi ky = Y.e - J->Ky;
            vd Yk1 = with_top_v(Y.neg, Y.s2, ky), Yk2 = (vd)((vu)(u53(m2) * pow2v(ky - 106)) | sgn);
            if (J->want_yy) {
                two_prod_v(Yk1, Yk1, &ph, &pl);
                sum_add_v(&yyh, &yyl, keep(ph, ok), keep(pl + 2 * Yk1 * Yk2, ok));
            }
            if (J->want_yd) {
                two_prod_v(Yk1, dh, &ph, &pl);
                sum_add_v(&ydh, &ydl, keep(ph, ok), keep(pl + (Yk1 * dl + Yk2 * dh), ok));
                abs_yd += keep(vabs(ph), ok);
                err_yd += keep(2 * vabs(Yk1) * ed, ok);
            }
        }
        unsigned live = n == VW ? (1u << VW) - 1 : (1u << n) - 1, bits = lane_bits(ok) & live, left = live & ~bits;
        taken += (size_t)__builtin_popcount(bits);
        for (; left; left &= left - 1) rest[nrest++] = (uint16_t)(i - i0 + (size_t)__builtin_ctz(left));
    }
    memcpy(out->dd_h, &ddh, sizeof ddh), memcpy(out->dd_l, &ddl, sizeof ddl);
    memcpy(out->yy_h, &yyh, sizeof yyh), memcpy(out->yy_l, &yyl, sizeof yyl);
    memcpy(out->yd_h, &ydh, sizeof ydh), memcpy(out->yd_l, &ydl, sizeof ydl);
    for (int l = 0; l < VW; l++) out->abs_yd += abs_yd[l], out->err_dd += err_dd[l], out->err_yd += err_yd[l];
    out->taken += taken;
    return nrest;
}

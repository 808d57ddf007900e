/* The dense layer's reference products in double-double (and more), bit
 * for bit vo_dot's (dense_ref.h; docs/internals.md, "The reference's fast
 * products").
 *
 * Why the results are vo_dot's: vo_dot returns RN_P(S), S the exact sum.
 * The operands here are exactly the MPFR values (W, b: doubles; a p-bit
 * activation or cotangent: hi + lo for p <= 106, hi + mid + lo for p <=
 * 159, each conversion checked exact), so Dot2 (vijp_dd_gemm; its
 * triple-double twin above 64 bits; the four-level vijp_qd_gemv for
 * triple-double x) computes y = y[0] + ... + y[3] with |y − S| <= bound,
 * bound rigorous (src/ddot/bound.c, +inf where none holds).  The interval is widened
 * outward to [lower, upper] in MPFR with directed rounding, and RN_P is
 * monotone: RN_P(lower) = RN_P(upper) forces RN_P(S) to that number, ties included (a tie inside the interval makes the two
 * ends round apart).  MPFR's exponent range is the reference's (the
 * default, far wider than double's), so no P-bit rounding is subnormal;
 * double underflow in the products is in Dot2's bound (its Nη term).  An
 * interval that reaches zero is refused (vo_dot's exact zero is +0).  Every
 * refused output, and every call the doubles cannot hold, runs vo_dot.
 *
 * θ as doubles: every path below starts from W and b as doubles
 * (vijp_ref_dense_op_d: the drift memo's copy holds them so, 8 bytes a
 * weight); the MPFR entry (vijp_ref_dense_op) reads its weights into
 * doubles once and calls it.  Where vo_dot must run (an output the test
 * refused, or a whole call), it gets the one line of W it reads (a row for
 * W x + b and W u, a column for Wᵀ g), made in MPFR from the doubles at 53
 * bits, exactly; vo_dot's result is a function of its operands' values
 * alone (the exact sum, rounded once: oracles/dot.h), so the bits are
 * those of the same call on an MPFR θ of any precision holding the same
 * values.
 *
 * Cost: the weights are read into doubles once per call (one-limb values
 * by their bits, double_of) or taken as they are, the inputs split once,
 * then m·n·B double- (or triple-) double multiply-adds and one MPFR
 * rounding test per output. */
#include "dense_ref.h"
#include "ddot/ddot.h"
#include "format/mpfr_io.h"
#include "oracles/oracles.h"
#include "oracles/dot.h"
#include "vijp/memory.h"
#include "vijp/error.h"
#include "base/fork.h"
#include <gmp.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bits the rounding test's interval ends carry beyond P: their own
 * rounding (outward) then widens the interval by 2^-(P+32) relative. */
#define TEST_GUARD 32

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM };

/* The MPFR scratch of one call: the interval's ends (max(P + TEST_GUARD, 53) bits)
 * and the upper end rounded to P bits. */
typedef struct {
    mpfr_t lower, upper, upper_p;
} round_scratch;

static void scratch_init(round_scratch *s, mpfr_prec_t P)
{
    /* At least 53 bits: the ends start from hi, which must be exact there
     * (below P = 21, P + TEST_GUARD bits would round it inward). */
    mpfr_prec_t q = P + TEST_GUARD > 53 ? P + TEST_GUARD : 53;
    mpfr_inits2(q, s->lower, s->upper, (mpfr_ptr)0);
    mpfr_init2(s->upper_p, P);
}

static void scratch_clear(round_scratch *s) { mpfr_clears(s->lower, s->upper, s->upper_p, (mpfr_ptr)0); }

/* 2^k as a double, -1022 <= k <= 1023. */
static double pow2(int k)
{
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
/* Adds m·2^ex (m < 2^64) to the 256-bit integer h, or subtracts it (sub),
 * modulo 2^256: assemble's results lie in [0, 2^212).  Without a branch
 * on sub (the parts' signs against hi's are a coin toss: it mispredicted
 * half the time) or on the limbs the carry reaches: m·2^ex as four limbs,
 * complemented for a subtraction, added with a carry in of one, as two's
 * complement does. */
static void limbs_add(uint64_t h[4], uint64_t m, int ex, int sub)
{
    typedef unsigned __int128 u128;
    int li = ex / 64, off = ex % 64;
    uint64_t lo = m << off, hi = off ? m >> (64 - off) : 0, flip = sub ? ~(uint64_t)0 : 0;
    uint64_t v[4];
    for (int i = 0; i < 4; i++) v[i] = ((i == li ? lo : 0) | (i == li + 1 ? hi : 0)) ^ flip;
    u128 t = (u128)h[0] + v[0] + (flip & 1);
    h[0] = (uint64_t)t;
    for (int i = 1; i < 4; i++) {
        t = (u128)h[i] + v[i] + (uint64_t)(t >> 64);
        h[i] = (uint64_t)t;
    }
}

/* r := ±S·2^ex for the integer S in h (four limbs), when S is nonzero and
 * has at most r's precision in bits: S's limbs shifted to the top of r's
 * significand and r's exponent, sign and kind set (MPFR's custom
 * interface: r keeps its block), exactly what mpfr_set_z_2exp gives there
 * without its integer's setup and general path (assemble's last step; at
 * batch 16 the drift reference sets 34M outputs a curve this way).  0,
 * nothing written: S zero or wider, or the exponent past MPFR's range. */
static int set_limbs(mpfr_ptr r, const uint64_t h[4], int neg, long ex)
{
    int top = 3;
    while (top > 0 && !h[top]) top--;
    if (!h[top]) return 0;
    mpfr_prec_t P = mpfr_get_prec(r);
    long bits = 64L * top + 64 - __builtin_clzll(h[top]);
    int nr = (int)((P + 63) / 64);
    if (bits > P || nr > 4) return 0;
    long E = ex + bits; /* S·2^ex = 0.S·2^(ex + bits) */
    if (E < mpfr_get_emin() || E > mpfr_get_emax()) return 0;
    long shift = 64L * nr - bits; /* S << shift fills nr limbs to their top bit */
    int word = (int)(shift / 64), bit = (int)(shift % 64);
    mp_limb_t *sig = mpfr_custom_get_significand(r);
    for (int k = 0; k < nr; k++) {
        int from = k - word;
        uint64_t v = from >= 0 && from < 4 ? h[from] << bit : 0;
        if (bit && from - 1 >= 0 && from - 1 < 4) v |= h[from - 1] >> (64 - bit);
        sig[k] = v;
    }
    mpfr_custom_init_set(r, neg ? -MPFR_REGULAR_KIND : MPFR_REGULAR_KIND, E, P, sig);
    return 1;
}
#endif

/* r := hi + (k[0] + ... + k[nk − 1])·q exactly, where round_fast has
 * decided: the value lies in hi's binade (so it has P <= 212 bits), each k
 * an integer-valued double below 2^(P−53), q = 2^(e−P+1), |hi| in (2^e,
 * 2^(e+1)).  In units of q its magnitude is the integer S = M·2^(P−53)
 * plus or minus each |k| (minus where its sign is not hi's), M hi's 53-bit
 * significand: formed in four limbs and set by one exact mpfr_set_z_2exp,
 * where mpfr_set_d and an mpfr_add_d a part were 4.5% of a dense:1024,gelu
 * study's CPU (perf).  Where limbs are not 64 bits, the same sum in MPFR at
 * P + 2 bits, which hold every partial sum (multiples of q below 2^(e+2))
 * exactly. */
static void assemble(mpfr_ptr r, double hi, int e, const double *k, int nk, mpfr_prec_t P, double q)
{
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
    uint64_t bits, h[4] = {0, 0, 0, 0};
    memcpy(&bits, &hi, sizeof bits);
    int neg = (int)(bits >> 63);
    limbs_add(h, (bits & (((uint64_t)1 << 52) - 1)) | (uint64_t)1 << 52, (int)P - 53, 0);
    for (int i = 0; i < nk; i++) {
        if (k[i] == 0) continue;
        uint64_t kb;
        memcpy(&kb, &k[i], sizeof kb);
        int ex = (int)(kb >> 52 & 0x7ff) - 1075; /* |k| = m·2^ex, k normal: an integer >= 1 */
        uint64_t m = (kb & (((uint64_t)1 << 52) - 1)) | (uint64_t)1 << 52;
        if (ex < 0) m >>= -ex, ex = 0; /* exact: k is an integer */
        limbs_add(h, m, ex, (int)(kb >> 63) != neg);
    }
    if (set_limbs(r, h, neg, (long)e - (long)P + 1)) return;
    mp_size_t n = h[3] ? 4 : h[2] ? 3 : h[1] ? 2 : 1;
    mpz_t z;
    mpfr_set_z_2exp(r, mpz_roinit_n(z, (const mp_limb_t *)h, neg ? -n : n), (mpfr_exp_t)e - (mpfr_exp_t)P + 1,
                    MPFR_RNDN);
    (void)q;
#else
    mpfr_t sum;
    mpfr_init2(sum, P + 2);
    mpfr_set_d(sum, hi, MPFR_RNDN);
    for (int i = 0; i < nk; i++) mpfr_add_d(sum, sum, k[i] * q, MPFR_RNDN); /* k·q a double: exact */
    mpfr_set(r, sum, MPFR_RNDN);
    mpfr_clear(sum);
    (void)e;
#endif
}

/* The test in doubles, for P >= 53 and hi = y[0] normal, not a power of
 * two, with exponent e (|hi| in (2^e, 2^(e+1))): the P-bit numbers there
 * are the multiples of q = 2^(e−P+1), hi among them (a multiple of ulp(hi)
 * = 2^(e−52)).  In units of q (exact scalings by s = 1/q, but for parts
 * so small that they underflow: η/2 of a unit, nothing beside the margin)
 * each further part is y_i·s = k_i + d_i, k_i = rint(y_i·s), d_i exact
 * (|d_i| <= 1/2); D = fl(fl(d_1 + d_2) + d_3) is within 2^-51 of Σd_i,
 * K = rint(D) and d = D − K exact.  So y − hi = (k + d')q with k = Σk_i + K
 * and |d' − d| <= 2^-51.  When |d| + b/q < 1/2 (with a margin 2^-40 that
 * covers 2^-51 and the sum's rounding) the interval lies strictly between
 * the midpoints (k ∓ 1/2)q, so every point of it rounds to hi + kq; when
 * Σ|y_i·s| + b/q < 2^(P−54) (ulp(hi)/2 in units of q: three roundings,
 * within the margin) it lies in hi's binade, where the multiples of q are
 * the P-bit numbers.  hi + kq is formed in r exactly (assemble, from K
 * and the k_i; |k_1·q| <= |y_1| + q/2 < ulp(hi)).  0: undecided here (the
 * MPFR test then decides). */
static int round_fast(mpfr_ptr r, const double *y, int parts, double bound, mpfr_prec_t P)
{
    double hi = y[0];
    uint64_t bits;
    memcpy(&bits, &hi, sizeof bits);
    int field = (int)(bits >> 52 & 0x7ff);
    if (P < 53 || P > VIJP_DDREF_MAX_PREC || field == 0 || field == 0x7ff || !(bits & (((uint64_t)1 << 52) - 1)))
        return 0;
    int e = field - 1023;
    if (e < (int)P - 1000 || e > 1000) return 0; /* s = 2^(P−1−e) and q = 2^(e−P+1) both normal */
    double s = pow2((int)P - 1 - e), q = pow2(e - (int)P + 1), bq = bound * s, k[5], D = 0, size = bq;
    for (int i = 1; i < parts; i++) {
        double ys = y[i] * s;
        if (!isfinite(ys)) return 0;
        k[i] = rint(ys);
        D = D + (ys - k[i]);
        size = size + fabs(ys);
    }
    if (!(bq < 0.25) || !(size < pow2((int)P - 54) * (1 - 0x1p-40))) return 0;
    k[0] = rint(D);
    if (!(fabs(D - k[0]) + bq < 0.5 - 0x1p-40)) return 0;
    assemble(r, hi, e, k, parts, P, q);
    return 1;
}

/* The test on y = y[0] + ... + y[parts − 1] (zeros where the kernel has
 * fewer parts): in doubles where it decides (round_fast), else in MPFR. */
static int round_in(mpfr_ptr r, const double *y, int parts, double bound, round_scratch *s)
{
    if (round_fast(r, y, parts, bound, mpfr_get_prec(r))) return 1;
    for (int i = 0; i < parts; i++)
        if (!isfinite(y[i])) return 0;
    if (!(bound >= 0 && bound < INFINITY)) return 0;
    /* lower <= y − bound and upper >= y + bound: each step rounded outward */
    mpfr_set_d(s->lower, y[0], MPFR_RNDN); /* exact: the scratch has 53 bits or more */
    mpfr_set(s->upper, s->lower, MPFR_RNDN);
    for (int i = 1; i < parts; i++)
        mpfr_add_d(s->lower, s->lower, y[i], MPFR_RNDD), mpfr_add_d(s->upper, s->upper, y[i], MPFR_RNDU);
    mpfr_sub_d(s->lower, s->lower, bound, MPFR_RNDD), mpfr_add_d(s->upper, s->upper, bound, MPFR_RNDU);
    if (!(mpfr_sgn(s->lower) > 0 || mpfr_sgn(s->upper) < 0)) return 0; /* zero possible: its sign is vo_dot's */
    mpfr_set(r, s->lower, MPFR_RNDN);
    mpfr_set(s->upper_p, s->upper, MPFR_RNDN);
    return mpfr_equal_p(r, s->upper_p);
}

int vijp_ddref_round_parts(mpfr_ptr r, const double *y, int parts, double bound)
{
    round_scratch s;
    scratch_init(&s, mpfr_get_prec(r));
    int ok = round_in(r, y, parts, bound, &s);
    scratch_clear(&s);
    return ok;
}

int vijp_ddref_round(mpfr_ptr r, const double y[4], double bound) { return vijp_ddref_round_parts(r, y, 4, bound); }

/* x as a double when it is one exactly (finite, in double's range, at most
 * 53 significant bits).  A one-limb regular x is read by its bits (the
 * weights: m·n of them per call, where mpfr_get_d would cost more than the
 * products); anything else through mpfr_get_d and a comparison. */
static int double_of(mpfr_srcptr x, double *d)
{
    if (mpfr_zero_p(x)) {
        *d = mpfr_signbit(x) ? -0.0 : 0.0;
        return 1;
    }
    if (!mpfr_regular_p(x)) return 0;
    mpfr_exp_t E = mpfr_get_exp(x); /* |x| in [2^(E−1), 2^E) */
    if (GMP_NUMB_BITS == 64 && mpfr_get_prec(x) <= 64 && E - 1 >= -1022 && E <= 1024) {
        uint64_t limb = (uint64_t)*(const mp_limb_t *)mpfr_custom_get_significand(x);
        if (limb & 0x7ff) return 0; /* more than 53 bits */
        uint64_t bits = (uint64_t)(mpfr_signbit(x) != 0) << 63 | (uint64_t)(E - 1 + 1023) << 52 |
                        (limb >> 11 & (((uint64_t)1 << 52) - 1));
        memcpy(d, &bits, sizeof bits);
        return 1;
    }
    *d = mpfr_get_d(x, MPFR_RNDN);
    return isfinite(*d) && mpfr_cmp_d(x, *d) == 0;
}

/* x = d[0] + ... + d[parts − 1] exactly, each part the remainder so far
 * rounded to nearest (so |d[i + 1]| <= ulp(d[i])/2 <= u|d[i]|), or 0.  A
 * p-bit x needs two parts for p <= 106, three for p <= 159 and four for
 * p <= 212 (each
 * remainder has at most 53 fewer bits), unless a part falls outside
 * double's range.  tmp: at least x's precision (each remainder is then
 * exact: a multiple of x's last unit no larger than x). */
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
/* parts_of's split by x's limbs, for a regular x of at most four limbs:
 * the remainder kept as a magnitude M (five limbs, units of 2^(e − 256)
 * for x = 0.X·2^e: x's own limbs at the top of the first four) and a
 * sign; each part M's top 53 bits rounded to nearest, ties to even
 * (mpfr_get_d's rounding), then taken off exactly (M − D or D − M, the
 * sign turning where the part rounded past M; D = 2^256 where the first
 * part rounds up to the next power of two: the fifth limb).  1 where
 * every part is a normal double and the last leaves nothing (parts_of's
 * answer then); 0 where a part would leave the normal range, or a part
 * is inexact (parts_of's MPFR path decides those).  mpfr_get_d and
 * mpfr_sub_d took about 200 ns a value at 212 bits (the drift reference's
 * inputs at batch 16: 7.5% of a curve's command). */
int vijp_ddref_split_limbs(mpfr_srcptr x, double *d, int parts)
{
    typedef unsigned __int128 u128;
    int L = (int)((mpfr_get_prec(x) + 63) / 64);
    if (!mpfr_regular_p(x) || L > 4) return 0;
    const mp_limb_t *s = mpfr_custom_get_significand(x);
    uint64_t M[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < L; i++) M[4 - L + i] = s[i];
    int neg = mpfr_signbit(x) != 0;
    long e = (long)mpfr_get_exp(x) - 256; /* x = ±M·2^e */
    for (int k = 0; k < parts; k++) {
        int top = 4;
        while (top > 0 && !M[top]) top--;
        if (!M[top]) { /* nothing left: the remaining parts are zeros */
            for (; k < parts; k++) d[k] = 0.0;
            return 1;
        }
        long bits = 64L * top + 64 - __builtin_clzll(M[top]), sh = bits - 53; /* M = mant·2^sh + the rest */
        uint64_t mant, up = 0;
        if (sh <= 0) mant = M[0] << -sh; /* M has at most 53 bits (all in M[0]): exact */
        else {
            int w = (int)(sh / 64), b = (int)(sh % 64);
            mant = (M[w] >> b) | (b ? M[w + 1] << (64 - b) : 0); /* M < 2^257, sh <= 204: w + 1 <= 4 */
            mant &= ((uint64_t)1 << 53) - 1;
            long rb = sh - 1; /* the round bit, then the sticky bits below it */
            int rw = (int)(rb / 64), rbit = (int)(rb % 64);
            uint64_t sticky = M[rw] & (((uint64_t)1 << rbit) - 1);
            for (int i = 0; i < rw; i++) sticky |= M[i];
            up = (M[rw] >> rbit & 1) && (sticky || (mant & 1));
        }
        uint64_t pm = mant + up; /* the part: ±pm·2^(e + sh), pm <= 2^53 */
        long ex = e + sh + 52 + (long)(pm >> 53);
        if (ex < -1022 || ex > 1023) return 0;
        d[k] = (neg ? -1.0 : 1.0) * ldexp((double)pm, (int)(e + sh));
        /* M := |M − pm·2^sh|, the sign turned where the part exceeds M */
        uint64_t D[5] = {0, 0, 0, 0, 0};
        if (sh <= 0) D[0] = M[0]; /* the part is M itself */
        else {
            int w = (int)(sh / 64), b = (int)(sh % 64);
            D[w] = pm << b;
            if (b) D[w + 1] |= pm >> (64 - b);
        }
        int ge = 1; /* M >= D */
        for (int i = 4; i >= 0; i--)
            if (M[i] != D[i]) {
                ge = M[i] > D[i];
                break;
            }
        const uint64_t *a = ge ? M : D, *c = ge ? D : M;
        uint64_t R[5], borrow = 0;
        for (int i = 0; i < 5; i++) {
            u128 t = (u128)a[i] - c[i] - borrow;
            R[i] = (uint64_t)t, borrow = (uint64_t)(t >> 64) & 1;
        }
        memcpy(M, R, sizeof M);
        if (!ge) neg = !neg;
    }
    return !(M[0] | M[1] | M[2] | M[3] | M[4]);
}
#else
int vijp_ddref_split_limbs(mpfr_srcptr x, double *d, int parts)
{
    (void)x, (void)d, (void)parts;
    return 0; /* limbs other than 64 bits: parts_of's MPFR path */
}
#endif

static int parts_of(mpfr_srcptr x, double *d, int parts, mpfr_ptr tmp)
{
    if (mpfr_zero_p(x)) {
        d[0] = mpfr_signbit(x) ? -0.0 : 0.0;
        for (int i = 1; i < parts; i++) d[i] = 0.0;
        return 1;
    }
    if (!mpfr_regular_p(x)) return 0;
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
    if (vijp_ddref_split_limbs(x, d, parts)) return 1;
#endif
    d[0] = mpfr_get_d(x, MPFR_RNDN);
    if (!isfinite(d[0]) || mpfr_sub_d(tmp, x, d[0], MPFR_RNDN)) return 0;
    for (int i = 1; i < parts - 1; i++) {
        d[i] = mpfr_get_d(tmp, MPFR_RNDN);
        if (mpfr_sub_d(tmp, tmp, d[i], MPFR_RNDN)) return 0;
    }
    d[parts - 1] = mpfr_get_d(tmp, MPFR_RNDN);
    return mpfr_cmp_d(tmp, d[parts - 1]) == 0; /* the last part representable (not below double's range) */
}

static int applies(const vijp_format *f)
{
    return vo_dot_fused(f) && f->prec <= VIJP_DDREF_MAX_PREC && !vo_dot_hook_broken();
}

/* The oracle's operator for op (the whole call when the fast path cannot run). */
static void oracle(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                   const vijp_format *f)
{
    if (op == OP_FORWARD) vo_dense_forward(L, th, in, B, out, f);
    else if (op == OP_JVP) vo_dense_jvp(L, th, X, B, in, out, f);
    else if (op == OP_VJP) vo_dense_vjp(L, th, X, B, in, out, f);
    else vo_dense_vjp_param(L, th, X, B, in, out, f);
}

/* One line of W in MPFR, for vo_dot where it runs from θ's doubles th (W
 * m × n column-major, then b): row i (stride m) for W x + b and W u, with
 * b_i; column i (contiguous) for Wᵀ g.  53 bits: each double exactly.
 * Made on the first use, so that a call without a fallback makes none. */
typedef struct {
    const vijp_layer *L;
    const double *th;
    mpfr_t *line, bias;
    size_t which; /* the line held: 1 + its index, 0 none */
    mpfr_exp_t emin, emax; /* MPFR's exponent range, read once (vijp_emu_set1_range) */
} theta_line;

static theta_line line_new(const vijp_layer *L, const double *th)
{
    theta_line t;
    memset(&t, 0, sizeof t);
    t.L = L, t.th = th, t.emin = mpfr_get_emin(), t.emax = mpfr_get_emax();
    return t;
}

static void line_load(theta_line *t, int op, size_t i)
{
    size_t m = t->L->out, n = t->L->in, len = op == OP_VJP ? m : n;
    if (!t->line) {
        t->line = vijp_alloc_array(m > n ? m : n, sizeof *t->line);
        for (size_t k = 0; k < (m > n ? m : n); k++) mpfr_init2(t->line[k], 53);
        mpfr_init2(t->bias, 53);
    }
    if (t->which == 1 + i) return;
    /* exact: 53 bits hold a double (mpfr_set_d's value, by its bits where it can) */
    if (op == OP_VJP)
        for (size_t k = 0; k < len; k++) vijp_emu_set1_range(t->line[k], t->th[k + i * m], t->emin, t->emax);
    else
        for (size_t k = 0; k < len; k++) vijp_emu_set1_range(t->line[k], t->th[i + k * m], t->emin, t->emax);
    if (op == OP_FORWARD) vijp_emu_set1_range(t->bias, t->th[m * n + i], t->emin, t->emax);
    t->which = 1 + i;
}

static void line_free(theta_line *t)
{
    if (!t->line) return;
    size_t m = t->L->out, n = t->L->in;
    for (size_t k = 0; k < (m > n ? m : n); k++) mpfr_clear(t->line[k]);
    mpfr_clear(t->bias);
    free(t->line);
}

/* Output (i, j) of op by vo_dot, as the oracle (oracles/dense_fused.c)
 * computes it: the same terms in the same order, W's line from t. */
static void by_vo_dot(int op, theta_line *t, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out, size_t i, size_t j,
                      mpfr_srcptr *ptrs)
{
    size_t m = t->L->out, n = t->L->in;
    if (op == OP_VJP_PARAM) { /* ∂W(i, j): j is W's column; θ unread */
        vo_dot_strided(out[i + j * m], NULL, &in[i], m, &X[j], n, B, ptrs);
        return;
    }
    line_load(t, op, i);
    if (op == OP_FORWARD) vo_dot_strided(out[i + j * m], t->bias, t->line, 1, &in[j * n], 1, n, ptrs);
    else if (op == OP_JVP) vo_dot_strided(out[i + j * m], NULL, t->line, 1, &in[j * n], 1, n, ptrs);
    else vo_dot_strided(out[i + j * n], NULL, t->line, 1, &in[j * m], 1, m, ptrs);
}

/* The whole call by vo_dot from θ's doubles, line by line: the oracle's
 * fused operators' outputs (vo_dense_*_fused, for the vo_dot_fused formats
 * this file takes), with one line of W in MPFR at a time. */
static void oracle_d(int op, const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out)
{
    size_t m = L->out, n = L->in, longest = m > n ? m : n;
    if (op == OP_VJP_PARAM) {
        vo_dense_vjp_param_fused(L, X, B, in, out);
        return;
    }
    theta_line t = line_new(L, th);
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * (longest > B ? longest : B) + 1, sizeof *ptrs);
    for (size_t i = 0; i < (op == OP_VJP ? n : m); i++)
        for (size_t j = 0; j < B; j++) by_vo_dot(op, &t, X, B, in, out, i, j, ptrs);
    free(ptrs);
    line_free(&t);
}

/* One call's doubles: the matrix A (rows × k, column-major), the right
 * side x[0] + ... + x[parts − 1] (k × cols each), the bias c, and the
 * results y[0] + y[1] + y[2] + y[3] (zeros beyond the kernel's parts) with
 * their bounds. */
typedef struct {
    size_t rows, cols, k;
    int parts;
    const double *A, *c; /* W itself (W x + b, W u) and b, or own_A */
    double *own_A, *x[4], *y[5], *bound;
} dd_problem;

/* count doubles, left unset: every one is written before it is read (load,
 * then the kernels), and zeroing megabytes per call would cost as much as
 * the products. */
static double *doubles(size_t count, size_t times)
{
    if (count > SIZE_MAX / sizeof(double) / times) vijp_out_of_memory(SIZE_MAX);
    return vijp_alloc_unset(count * times * sizeof(double));
}

/* Wᵀ (n × m) from W (m × n), by tiles (one of them in cache read and
 * written), W's rows [i0, i1) on one range of the format's threads: each
 * range writes its own columns of Wᵀ (base/fork.h; a copy: the same bits
 * on any count). */
typedef struct {
    const double *W;
    double *Wt;
    size_t m, n;
} transpose_job;

static void transpose_rows(void *ctx, size_t part, size_t i0, size_t i1)
{
    enum { TILE = 32 };
    const transpose_job *J = ctx;
    size_t m = J->m, n = J->n;
    (void)part;
    for (size_t k0 = 0; k0 < n; k0 += TILE)
        for (size_t t0 = i0; t0 < i1; t0 += TILE)
            for (size_t k = k0; k < k0 + TILE && k < n; k++)
                for (size_t i = t0; i < t0 + TILE && i < i1; i++) J->Wt[k + i * n] = J->W[i + k * m];
}

/* op's problem on θ's doubles th: A is W itself for W x + b (c = b) and
 * W u, a transposed copy for Wᵀ g (on up to threads threads), and for the
 * parameter gradient the cotangents' parts (load writes them). */
static void problem_alloc(dd_problem *p, int op, const vijp_layer *L, const double *th, size_t B, int parts,
                          int threads)
{
    /* every size is positive: the caller runs the oracle on an empty shape */
    size_t m = L->out, n = L->in;
    p->parts = parts, p->own_A = NULL, p->c = NULL;
    if (op == OP_VJP_PARAM) p->rows = m, p->cols = n, p->k = (size_t)parts * B;
    else if (op == OP_VJP) p->rows = n, p->cols = B, p->k = m;
    else p->rows = m, p->cols = B, p->k = n;
    if (op == OP_FORWARD || op == OP_JVP) p->A = th;
    else p->A = p->own_A = doubles(p->rows, p->k);
    if (op == OP_FORWARD) p->c = th + m * n;
    if (op == OP_VJP) {
        transpose_job J = {th, p->own_A, m, n};
        vijp_fork(threads, m, VIJP_DDREF_TRANSPOSE_WORK * (double)m * (double)n, transpose_rows, &J);
    }
    p->x[0] = doubles((size_t)parts * p->k, p->cols);
    for (int i = 1; i < 4; i++) p->x[i] = i < parts ? p->x[i - 1] + p->k * p->cols : NULL;
    p->y[0] = doubles(6 * p->rows, p->cols);
    for (int i = 1; i < 5; i++) p->y[i] = p->y[i - 1] + p->rows * p->cols;
    p->bound = p->y[4] + p->rows * p->cols;
}

static void problem_free(dd_problem *p) { free(p->own_A), free(p->x[0]), free(p->y[0]); }

/* The doubles of op's inputs (θ's are there already), over ranges of
 * their values on the format's threads (base/fork.h): value v's parts come
 * from it alone and go to slots of their own, so the bits do not depend on
 * the count.  The values: the parameter gradient's cotangents (m·B,
 * in[i + j·m] the v-th), then its inputs (n·B, X[k + j·n] the (m·B +
 * k·B + j)-th); the other ops' inputs (k·B, in order). */
typedef struct {
    int op;
    const vijp_layer *L;
    mpfr_t *X, *in;
    size_t B;
    dd_problem *p;
    mpfr_prec_t tmp_prec;
    int inexact[VIJP_FORK_MAX_THREADS]; /* a range met a value that is not exactly its parts */
} load_job;

static void load_range(void *ctx, size_t part, size_t begin, size_t end)
{
    load_job *J = ctx;
    dd_problem *p = J->p;
    size_t m = J->L->out, n = J->L->in, B = J->B;
    int ok = 1, np = p->parts;
    double d[4];
    mpfr_t tmp;
    mpfr_init2(tmp, J->tmp_prec); /* parts_of checks its subtractions exact all the same */
    for (size_t v = begin; v < end && ok; v++) {
        if (J->op != OP_VJP_PARAM) {
            ok = parts_of(J->in[v], d, np, tmp);
            for (int r = 0; r < np; r++) p->x[r][v] = d[r];
        } else if (v < m * B) { /* ∂W = Σ_a G_a · Σ_r X_rᵀ over the parts: np·B terms of g_a·(x_0 + ... ) */
            size_t i = v % m, j = v / m;
            ok = parts_of(J->in[v], d, np, tmp);
            for (int a = 0; a < np; a++) p->own_A[i + (a * B + j) * m] = d[a];
        } else { /* k slowest, so that the writes run along each part's rows */
            size_t k = (v - m * B) / B, j = (v - m * B) % B;
            ok = parts_of(J->X[k + j * n], d, np, tmp);
            for (int r = 0; r < np; r++)
                for (int a = 0; a < np; a++) p->x[r][k * np * B + a * B + j] = d[r];
        }
    }
    mpfr_clear(tmp);
    J->inexact[part] = !ok;
}

/* 0 when one of op's inputs is not exactly its parts. */
static int load(int op, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *in, dd_problem *p, mpfr_prec_t tmp_prec,
                int threads)
{
    load_job J = {.op = op, .L = L, .X = X, .in = in, .B = B, .p = p, .tmp_prec = tmp_prec};
    size_t values = op == OP_VJP_PARAM ? (L->out + L->in) * B : p->k * B;
    vijp_fork(threads, values, VIJP_DDREF_SPLIT_WORK * (double)values, load_range, &J);
    return !vijp_fork_any(J.inexact);
}

/* y = A·x + c: with x in double-double, in double-double for P <= 64 bits
 * (Dot2's bound, about N²u²·Σ|terms| = 2^-90 of it at N = 256, leaves ~26
 * bits to the rounding test) and in triple-double above (double-double's
 * 2^-90 could not decide a 106-bit rounding; triple-double's about 2N³u³ =
 * 2^-134 leaves ~28 bits, for twice the work); with x in triple-double
 * (P > 106), in four levels (about 15N⁴u⁴ = 2^-176 at N = 257: ~48 bits
 * left at 128 bits).  Column by column, each a loop over the output rows. */
static void products(dd_problem *p, mpfr_prec_t P)
{
    size_t rows = p->rows, k = p->k, all = rows * p->cols;
    if (p->parts == 4) {
        for (size_t j = 0; j < p->cols; j++) {
            size_t o = j * rows;
            const double *const x[4] = {p->x[0] + j * k, p->x[1] + j * k, p->x[2] + j * k, p->x[3] + j * k};
            double *const y[5] = {p->y[0] + o, p->y[1] + o, p->y[2] + o, p->y[3] + o, p->y[4] + o};
            vijp_d5_gemv(rows, k, p->A, rows, x, p->c, y, p->bound + o);
        }
        return;
    }
    if (p->parts == 3) {
        for (size_t j = 0; j < p->cols; j++) {
            size_t o = j * rows;
            const double *const x[3] = {p->x[0] + j * k, p->x[1] + j * k, p->x[2] + j * k};
            double *const y[4] = {p->y[0] + o, p->y[1] + o, p->y[2] + o, p->y[3] + o};
            vijp_qd_gemv(rows, k, p->A, rows, x, p->c, y, p->bound + o);
        }
        return;
    }
    memset(p->y[3], 0, all * sizeof *p->y[3]);
    if (P <= 64) {
        vijp_dd_gemm(rows, p->cols, k, p->A, rows, p->x[0], p->x[1], k, p->c, p->y[0], p->y[1], p->bound, rows);
        memset(p->y[2], 0, all * sizeof *p->y[2]);
        return;
    }
    for (size_t j = 0; j < p->cols; j++) {
        size_t o = j * rows;
        vijp_td_gemv(rows, k, p->A, rows, p->x[0] + j * k, p->x[1] + j * k, p->c, p->y[0] + o, p->y[1] + o,
                     p->y[2] + o, p->bound + o);
    }
}

/* Columns [j0, j1) of a problem (dd_problem's arrays are column-major,
 * column j of each part of x at j·k, of the results at j·rows): the same
 * outputs, each computed by the same operations as in the whole
 * (vijp_dd_gemm and the triple-double and four-level loops run column by
 * column), so any split of the columns
 * gives the same bits. */
static dd_problem columns(const dd_problem *p, size_t j0, size_t j1)
{
    dd_problem q = *p;
    q.cols = j1 - j0;
    for (int r = 0; r < 4; r++)
        if (q.x[r]) q.x[r] += j0 * p->k; /* x[2], x[3]: three or four parts only */
    for (int r = 0; r < 5; r++) q.y[r] += j0 * p->rows;
    q.bound += j0 * p->rows;
    return q;
}

/* A call's products and rounding tests, shared by the threads that run
 * ranges of its columns (src/base/fork.h); fallbacks[part]: each range's. */
typedef struct {
    int op;
    const vijp_layer *L;
    const double *th;
    mpfr_t *X;
    size_t B;
    mpfr_t *in, *out;
    const dd_problem *p;
    mpfr_prec_t P;
    double scale;
    size_t ptrs_len;
    size_t *fallbacks;
} ref_job;

static void ref_columns(void *ctx, size_t part, size_t j0, size_t j1)
{
    ref_job *J = ctx;
    dd_problem q = columns(J->p, j0, j1);
    products(&q, J->P);
    round_scratch s;
    scratch_init(&s, J->P);
    size_t fallbacks = 0;
    int yparts = J->p->parts == 4 ? 5 : 4; /* the five levels' results, else up to four */
    mpfr_srcptr *ptrs = vijp_alloc_array(J->ptrs_len, sizeof *ptrs);
    theta_line t = line_new(J->L, J->th); /* this range's own: the threads share nothing they write */
    for (size_t j = j0; j < j1; j++)
        for (size_t i = 0; i < J->p->rows; i++) {
            size_t e = i + j * J->p->rows; /* out's layout: rows × cols, column-major, for every op */
            double y[5] = {J->p->y[0][e], J->p->y[1][e], J->p->y[2][e], J->p->y[3][e], 0};
            if (yparts == 5) y[4] = J->p->y[4][e];
            if (round_in(J->out[e], y, yparts, J->p->bound[e] * J->scale, &s)) continue;
            by_vo_dot(J->op, &t, J->X, J->B, J->in, J->out, i, j, ptrs);
            fallbacks++;
        }
    line_free(&t);
    free(ptrs);
    scratch_clear(&s);
    J->fallbacks[part] = fallbacks;
}

/* Whether op's call runs the fast path at all (else the whole call runs
 * vo_dot); P: the results' precision, parts: of each input. */
static int fast_path_runs(int op, const vijp_layer *L, size_t B, mpfr_prec_t P, int parts, const vijp_format *f,
                          const vijp_ddref_stats *st)
{
    size_t m = L->out, n = L->in;
    /* the batch-1 parameter gradient is one product per output: vo_dot1's mpfr_mul already */
    size_t terms = op == OP_VJP_PARAM ? (size_t)parts * B : op == OP_VJP ? m : n;
    int pays = op == OP_VJP_PARAM ? B >= VIJP_DDREF_MIN_BATCH : terms >= VIJP_DDREF_MIN_TERMS;
    return applies(f) && !(op == OP_VJP_PARAM && B < 2) && B && m && n && (pays || (st && st->any_size)) &&
           P <= VIJP_DDREF_MAX_PREC;
}

/* The results' precision, which vo_dot rounds to (0: no outputs). */
static mpfr_prec_t prec_of(const vijp_layer *L, size_t B, mpfr_t *out)
{
    return B && L->out && L->in ? mpfr_get_prec(out[0]) : 0;
}

/* The parts of each input: two (double-double) hold the inputs and results
 * up to 106 bits, three up to 159, four up to 212. */
static int parts_for(mpfr_prec_t P, const vijp_format *f)
{
    mpfr_prec_t widest = P > (mpfr_prec_t)f->prec ? P : (mpfr_prec_t)f->prec;
    return widest > VIJP_TD_PREC ? 4 : widest > VIJP_DD_PREC ? 3 : 2;
}

/* ∂W alone by vo_dot (the oracle's outputs, oracle_d's but for ∂b). */
static void weights_by_vo_dot(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out)
{
    size_t m = L->out, n = L->in;
    theta_line t = line_new(L, NULL);
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * B + 1, sizeof *ptrs);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) by_vo_dot(OP_VJP_PARAM, &t, X, B, in, out, i, j, ptrs);
    free(ptrs);
    line_free(&t);
}

/* vijp_ref_dense_op_d; bias 0: a parameter gradient's ∂W alone. */
static int op_d(int op, int bias, const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *in,
                mpfr_t *out, const vijp_format *f, vijp_ddref_stats *st)
{
    if (!vo_dot_fused(f)) return VIJP_EUNSUPPORTED; /* rounded per operation: vo_dense_* on an MPFR θ */
    double scale = st && st->bound_scale > 0 ? st->bound_scale : 1;
    if (st) st->outputs = st->fallbacks = 0, st->whole_oracle = 1;
    size_t m = L->out, n = L->in;
    mpfr_prec_t P = prec_of(L, B, out);
    int parts = parts_for(P, f);
    if (!fast_path_runs(op, L, B, P, parts, f, st)) {
        if (bias) oracle_d(op, L, th, X, B, in, out);
        else weights_by_vo_dot(L, X, B, in, out);
        return 0;
    }
    dd_problem p;
    problem_alloc(&p, op, L, th, B, parts, f->threads);
    int ok = load(op, L, X, B, in, &p, f->prec > P ? f->prec : P, f->threads);
    if (!ok) {
        problem_free(&p);
        if (bias) oracle_d(op, L, th, X, B, in, out);
        else weights_by_vo_dot(L, X, B, in, out);
        return 0;
    }
    size_t fallbacks[VIJP_FORK_MAX_THREADS] = {0}, longest = m > n ? m : n;
    ref_job job = {op, L, th, X, B, in, out, &p, P, scale, 2 * (longest > B ? longest : B) + 1, fallbacks};
    /* work in lane multiply-adds (fork.h): a double-double one costs about
     * 8 (TwoProd, TwoSum), a five-level one about 130, an output's rounding
     * test about 256 */
    double per_term = parts == 4 ? 130 : 8;
    vijp_fork(f->threads, p.cols, (double)p.rows * (double)p.cols * (per_term * (double)p.k + 256), ref_columns, &job);
    mpfr_srcptr *ptrs = vijp_alloc_array(job.ptrs_len, sizeof *ptrs);
    if (op == OP_VJP_PARAM && bias) /* ∂b_i = Σ_j g(i, j): B terms, by vo_dot as the oracle */
        for (size_t i = 0; i < m; i++) vo_dot_strided(out[m * n + i], NULL, &in[i], m, NULL, 0, B, ptrs);
    free(ptrs);
    for (size_t k = 1; k < VIJP_FORK_MAX_THREADS; k++) fallbacks[0] += fallbacks[k];
    problem_free(&p);
    if (st) st->outputs = p.rows * p.cols - fallbacks[0], st->fallbacks = fallbacks[0], st->whole_oracle = 0;
    return 0;
}

/* θ's doubles (W, and b where op reads it; b := 0 where not) from an MPFR
 * θ; 0 when one is not exactly a double. */
static int theta_doubles(int op, const vijp_layer *L, mpfr_t *th, double *w)
{
    size_t m = L->out, n = L->in;
    int ok = 1;
    for (size_t e = 0; e < m * n && ok; e++) ok = double_of(th[e], &w[e]);
    for (size_t i = 0; i < m && ok; i++)
        if (op == OP_FORWARD) ok = double_of(th[m * n + i], &w[m * n + i]);
        else w[m * n + i] = 0;
    return ok;
}

int vijp_ref_dense_op_d(int op, const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                        const vijp_format *f, vijp_ddref_stats *st)
{
    return op_d(op, 1, L, th, X, B, in, out, f, st);
}

int vijp_ref_dense_weight_grad(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gw, const vijp_format *f)
{
    return op_d(OP_VJP_PARAM, 0, L, NULL, X, B, Gy, Gw, f, NULL);
}

void vijp_ref_dense_op(int op, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *in, mpfr_t *out,
                       const vijp_format *f, vijp_ddref_stats *st)
{
    if (st) st->outputs = st->fallbacks = 0, st->whole_oracle = 1;
    size_t m = L->out, n = L->in;
    mpfr_prec_t P = prec_of(L, B, out);
    if (!fast_path_runs(op, L, B, P, parts_for(P, f), f, st)) {
        oracle(op, L, th, X, B, in, out, f);
        return;
    }
    double *w = NULL; /* the parameter gradient reads no θ */
    if (op != OP_VJP_PARAM && !theta_doubles(op, L, th, w = doubles(m * n + m, 1))) {
        free(w);
        oracle(op, L, th, X, B, in, out, f);
        return;
    }
    if (vijp_ref_dense_op_d(op, L, w, X, B, in, out, f, st)) abort(); /* unreachable: fast_path_runs: vo_dot_fused */
    free(w);
}

void vijp_ref_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    vijp_ref_dense_op(OP_FORWARD, L, th, NULL, B, X, Y, f, NULL);
}

void vijp_ref_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f)
{
    vijp_ref_dense_op(OP_JVP, L, th, X, B, U, V, f, NULL);
}

void vijp_ref_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f)
{
    vijp_ref_dense_op(OP_VJP, L, th, X, B, Gy, Gx, f, NULL);
}

void vijp_ref_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f)
{
    vijp_ref_dense_op(OP_VJP_PARAM, L, th, X, B, Gy, Gt, f, NULL);
}

/* The same with θ's doubles: the layer interface's MPFR route where θ is
 * held as doubles (layer/emu_native.h's mp_* members). */
int vijp_ref_dense_forward_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Y,
                             const vijp_format *f)
{
    return vijp_ref_dense_op_d(OP_FORWARD, L, th, NULL, B, X, Y, f, NULL);
}

int vijp_ref_dense_jvp_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                         const vijp_format *f)
{
    return vijp_ref_dense_op_d(OP_JVP, L, th, X, B, U, V, f, NULL);
}

int vijp_ref_dense_vjp_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                         const vijp_format *f)
{
    return vijp_ref_dense_op_d(OP_VJP, L, th, X, B, Gy, Gx, f, NULL);
}

int vijp_ref_dense_vjp_param_d(const vijp_layer *L, const double *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                               const vijp_format *f)
{
    return vijp_ref_dense_op_d(OP_VJP_PARAM, L, th, X, B, Gy, Gt, f, NULL);
}

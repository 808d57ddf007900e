#include "vijp/arith.h"
#include "vijp/error.h"
#include "mx.h"
#include "tc.h"
#include "scaled.h"
#include <math.h>
#include <stdlib.h>

/* A result already rounded to a grid whose largest finite value is max,
 * past which it becomes what rule says (format.h, vijp_overflow).  Only
 * FP8 grids have a rule of their own, and a finite value of theirs (4 bits
 * at most, exponents within binary32's) is a double: the comparison is
 * exact.  IEEE's rule is what mpfr_check_range has done already. */
static void overflow_rule(mpfr_t r, vijp_overflow rule, double max)
{
    if (rule == VIJP_OVERFLOW_INF || mpfr_nan_p(r) || mpfr_zero_p(r)) return;
    if (!mpfr_inf_p(r) && fabs(mpfr_get_d(r, MPFR_RNDN)) <= max) return;
    if (rule == VIJP_OVERFLOW_NAN) mpfr_set_nan(r);
    else mpfr_set_d(r, mpfr_signbit(r) ? -max : max, MPFR_RNDN); /* exact: max is a value of the grid */
}

/* Whether a non-mixed format's every result obeys a rule of its own (FP8's:
 * a mixed format's results are binary32's, its storage's rule is vo_store's). */
#define VO_OWN_RULE(f) ((f)->store_overflow != VIJP_OVERFLOW_INF && !(f)->mixed)

/* Flush to zero (format.h's ftz): whether r, a result rounded to p bits with
 * an unbounded exponent (MPFR's range is far wider than any format's), lies
 * below the smallest normal value 2^(emin+p-2) of the format with p bits and
 * MPFR's emin: tininess after rounding, x86's rule (SSE/AVX MXCSR.FTZ;
 * Berkeley SoftFloat's 8086 specialisation detects tininess after rounding).
 * Its normal binades have MPFR exponents emin + p − 1 and up. */
static int vo_tiny(mpfr_srcptr r, mpfr_prec_t p, mpfr_exp_t emin)
{
    return mpfr_regular_p(r) && mpfr_get_exp(r) < emin + (mpfr_exp_t)p - 1;
}

/* Run one MPFR operation, then bring it into the format's exponent range and
 * subnormalize.  The operation runs in the caller's (wide) range: an MPFR
 * result is rounded as if the range were unbounded and only then checked, so
 * mpfr_check_range under the format's range, given the operation's ternary
 * value, gives what the operation itself would have given there (MPFR manual,
 * mpfr_check_range); the ternary value is also what mpfr_subnormalize needs
 * to avoid double rounding.  A regular result with emin + P − 1 < EXP <= emax
 * is normal and in range: both calls would leave it as it is, so they (and
 * the four thread-local exponent-range switches, a quarter of a study's
 * time) are skipped.  A format with its own overflow rule (FP8) skips them
 * only below its top binade, EXP < emax, where no value exceeds its largest
 * finite one (e4m3's top binade holds 480, which is NaN).  A flushing format
 * (ftz) turns a tiny result into a zero of its sign first (vo_tiny); only
 * results below its normal range reach that test. */
#define VO_ROUND(f, r, op)                                                         \
    do {                                                                           \
        int t_ = (op);                                                             \
        if (!(f)->emulated || (mpfr_regular_p(r) && mpfr_get_exp(r) <= (f)->emax - VO_OWN_RULE(f) && \
                               mpfr_get_exp(r) > (f)->emin + (mpfr_exp_t)(f)->prec - 1)) \
            break;                                                                 \
        if ((f)->ftz && vo_tiny(r, (f)->prec, (f)->emin)) {                        \
            mpfr_set_zero((r), mpfr_signbit(r) ? -1 : 1);                          \
            break;                                                                 \
        }                                                                          \
        mpfr_exp_t emin_ = mpfr_get_emin(), emax_ = mpfr_get_emax();               \
        mpfr_set_emin((f)->emin);                                                  \
        mpfr_set_emax((f)->emax);                                                  \
        t_ = mpfr_check_range((r), t_, MPFR_RNDN);                                 \
        mpfr_subnormalize((r), t_, MPFR_RNDN);                                     \
        mpfr_set_emin(emin_);                                                      \
        mpfr_set_emax(emax_);                                                      \
        if (VO_OWN_RULE(f)) overflow_rule((r), (f)->store_overflow, (f)->store_max); \
    } while (0)

void vo_set(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_set(r, a, MPFR_RNDN)); }
void vo_set_d(mpfr_t r, double a, const vijp_format *f) { VO_ROUND(f, r, mpfr_set_d(r, a, MPFR_RNDN)); }
void vo_set_si(mpfr_t r, long a, const vijp_format *f) { VO_ROUND(f, r, mpfr_set_si(r, a, MPFR_RNDN)); }
void vo_add(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f) { VO_ROUND(f, r, mpfr_add(r, a, b, MPFR_RNDN)); }
void vo_sub(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f) { VO_ROUND(f, r, mpfr_sub(r, a, b, MPFR_RNDN)); }
void vo_mul(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f) { VO_ROUND(f, r, mpfr_mul(r, a, b, MPFR_RNDN)); }
void vo_div(mpfr_t r, const mpfr_t a, const mpfr_t b, const vijp_format *f) { VO_ROUND(f, r, mpfr_div(r, a, b, MPFR_RNDN)); }
void vo_sqrt(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_sqrt(r, a, MPFR_RNDN)); }
void vo_fma(mpfr_t r, const mpfr_t a, const mpfr_t b, const mpfr_t c, const vijp_format *f) { VO_ROUND(f, r, mpfr_fma(r, a, b, c, MPFR_RNDN)); }
void vo_tanh(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_tanh(r, a, MPFR_RNDN)); }
void vo_atanh(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_atanh(r, a, MPFR_RNDN)); }
void vo_sech(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_sech(r, a, MPFR_RNDN)); }
void vo_neg(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_neg(r, a, MPFR_RNDN)); }
void vo_exp(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_exp(r, a, MPFR_RNDN)); }
void vo_expm1(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_expm1(r, a, MPFR_RNDN)); }
void vo_log(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_log(r, a, MPFR_RNDN)); }
void vo_log1p(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_log1p(r, a, MPFR_RNDN)); }
void vo_erfc(mpfr_t r, const mpfr_t a, const vijp_format *f) { VO_ROUND(f, r, mpfr_erfc(r, a, MPFR_RNDN)); }
void vo_const_pi(mpfr_t r, const vijp_format *f) { VO_ROUND(f, r, mpfr_const_pi(r, MPFR_RNDN)); }

/* Round r in place to precision p under the exponent range [emin, emax],
 * with subnormals (ftz: a tiny result flushed to zero, vo_tiny), then apply
 * the overflow rule (VIJP_OVERFLOW_INF: IEEE's),
 * keeping r's own precision (the value is then exactly representable at p
 * bits; widening back is exact). */
static void round_in_place(mpfr_t r, mpfr_prec_t p, mpfr_exp_t emin, mpfr_exp_t emax, vijp_overflow rule, double max,
                           int ftz)
{
    if (mpfr_inf_p(r)) overflow_rule(r, rule, max); /* e4m3 has no ±Inf; :sat turns it into ±max */
    if (!mpfr_regular_p(r)) return; /* 0, NaN, and ±Inf where the rule keeps it: already in every format */
    mpfr_prec_t own = mpfr_get_prec(r);
    int t = mpfr_prec_round(r, p, MPFR_RNDN); /* in the wide range r lives in */
    if (ftz && vo_tiny(r, p, emin)) { /* flushed: a zero of r's sign, in every precision */
        mpfr_set_zero(r, mpfr_signbit(r) ? -1 : 1);
        (void)mpfr_prec_round(r, own, MPFR_RNDN);
        return;
    }
    mpfr_exp_t emin_ = mpfr_get_emin(), emax_ = mpfr_get_emax();
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    t = mpfr_check_range(r, t, MPFR_RNDN); /* overflow to ±Inf, underflow */
    mpfr_subnormalize(r, t, MPFR_RNDN);    /* t: no double rounding */
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
    overflow_rule(r, rule, max);
    /* exact: own >= p.  Also safe on the custom-interface values of src/format/mat.c
     * (which mpfr_prec_round must never grow beyond their allocation): mixed
     * formats round between 3, 4, 8, 11 and 24 bits, all within r's one limb. */
    (void)mpfr_prec_round(r, own, MPFR_RNDN);
}

/* ---- MX: one value under a block's scale (mx.c quantises the blocks) ---- */

/* The block's scale exponent from its largest magnitude amax (finite, not
 * zero); 0 when past E8M0's range above (a NaN scale). */
int vijp_mx_scale_exponent(const vijp_format *f, mpfr_srcptr amax, long *s)
{
    if (!f->mx_scale_ceil) *s = (long)mpfr_get_exp(amax) - 1 - f->mx_elem_emax; /* floor(log2 amax): MPFR's 1/2 <= m < 1 */
    else {
        /* ceil(log2 q), q = |amax|/max rounded up: rounding up cannot cross
         * a power of two from above, and at or below one it gives the same
         * ceil.  amax may carry its element's sign: dividing by −max then
         * keeps q positive, so that it rounds away from zero and is compared
         * with a positive power of two. */
        mpfr_t q;
        mpfr_init2(q, 64);
        mpfr_div_d(q, amax, mpfr_signbit(amax) ? -f->store_max : f->store_max, MPFR_RNDU);
        long e = (long)mpfr_get_exp(q);
        *s = mpfr_cmp_ui_2exp(q, 1, e - 1) == 0 ? e - 1 : e;
        mpfr_clear(q);
    }
    if (*s < -E8M0_EMAX) *s = -E8M0_EMAX;
    return *s <= E8M0_EMAX;
}

/* r := the element nearest v/2^s (ties to even, saturating) times 2^s. */
void vijp_mx_element(const vijp_format *f, mpfr_ptr r, mpfr_srcptr v, long s)
{
    vijp_format elem = *f;
    elem.mx_block = 0; /* vo_store below: the element grid's rounding, saturating */
    mpfr_t q;
    mpfr_init2(q, mpfr_get_prec(v));
    mpfr_div_2si(q, v, s, MPFR_RNDN); /* exact: MPFR's exponent range is far wider than E8M0's and the data's */
    vo_store(q, q, &elem);
    mpfr_mul_2si(r, q, s, MPFR_RNDN); /* exact: store_prec bits, r has more */
    mpfr_clear(q);
}

void vijp_mx_one(const vijp_format *f, mpfr_ptr r, mpfr_srcptr a)
{
    long s;
    if (!mpfr_number_p(a) || (!mpfr_zero_p(a) && !vijp_mx_scale_exponent(f, a, &s))) mpfr_set_nan(r);
    else if (mpfr_zero_p(a)) mpfr_set(r, a, MPFR_RNDN);
    else vijp_mx_element(f, r, a, s);
}

void vo_store(mpfr_t r, const mpfr_t a, const vijp_format *f)
{
    if (!f->mixed) {
        vo_set(r, a, f);
        return;
    }
    if (f->mx_block) { /* one value, whose block nobody told us: a block of its own (format.h) */
        vijp_mx_one(f, r, a);
        return;
    }
    if (f->tensor_scaled) { /* one value: a tensor of its own (format.h) */
        vijp_scaled_one(f, r, a);
        return;
    }
    if (mpfr_get_prec(a) <= mpfr_get_prec(r)) { /* one rounding, in place */
        if (r != a) mpfr_set(r, a, MPFR_RNDN);   /* exact */
        round_in_place(r, f->store_prec, f->store_emin, f->store_emax, f->store_overflow, f->store_max, f->store_ftz);
        return;
    }
    mpfr_t t; /* a wider than r: round a itself, not r's rounding of it */
    mpfr_init2(t, mpfr_get_prec(a));
    mpfr_set(t, a, MPFR_RNDN);
    round_in_place(t, f->store_prec, f->store_emin, f->store_emax, f->store_overflow, f->store_max, f->store_ftz);
    mpfr_set(r, t, MPFR_RNDN); /* exact: store_prec <= prec */
    mpfr_clear(t);
}

/* acc += a·b.  Mixed formats: the product exact and one rounding of the sum
 * to the accumulation format (an FMA in it, as matrix hardware does), after
 * rounding the operands to operand_prec where the format has one (tf32);
 * a flushing accumulation (ftz) takes a subnormal operand as a zero of its
 * sign.
 * Other formats: the product rounded, then the sum (two roundings), as the
 * IEEE operations without contraction. */
/* acc += Σ a[k]·b[k] in a tensor-core format whose operands are ready:
 * the model's blocks (tc.c) into acc, or, with promotion, into the tensor
 * core's own accumulator, which starts from zero and is added into acc
 * (binary32, to nearest: a CUDA core's addition) every tc_promote
 * products and at the end. */
static void tc_promoted(mpfr_t acc, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n, const vijp_format *f)
{
    size_t window = (size_t)f->tc_promote;
    if (!window) {
        vijp_tc_blocks(acc, a, b, n, f);
        return;
    }
    mpfr_t tc;
    mpfr_init2(tc, f->prec);
    for (size_t k0 = 0; k0 < n; k0 += window) {
        mpfr_set_zero(tc, 1);
        vijp_tc_blocks(tc, a + k0, b + k0, n - k0 < window ? n - k0 : window, f);
        vo_add(acc, acc, tc, f);
    }
    mpfr_clear(tc);
}

/* The same with the operands rounded to operand_prec first where f has
 * one (tf32, as vo_madd below). */
static void tc_dot_ptrs(mpfr_t acc, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n, const vijp_format *f)
{
    if (!f->operand_prec) {
        tc_promoted(acc, a, b, n, f);
        return;
    }
    mpfr_t *r = vijp_alloc_array(n ? 2 * n : 1, sizeof *r);
    mpfr_srcptr *ptrs = vijp_alloc_array(n ? 2 * n : 1, sizeof *ptrs);
    for (size_t k = 0; k < 2 * n; k++) {
        mpfr_init2(r[k], f->prec);
        mpfr_set(r[k], k < n ? a[k] : b[k - n], MPFR_RNDN); /* exact: values of f */
        round_in_place(r[k], f->operand_prec, f->emin, f->emax, VIJP_OVERFLOW_INF, 0, 0);
        ptrs[k] = r[k];
    }
    tc_promoted(acc, ptrs, ptrs + n, n, f);
    for (size_t k = 0; k < 2 * n; k++) mpfr_clear(r[k]);
    free(r), free(ptrs);
}

void vo_dot_acc(mpfr_t acc, const mpfr_t *a, size_t sa, const mpfr_t *b, size_t sb, size_t n, mpfr_t p,
                const vijp_format *f)
{
    if (!f->tc_group) {
        for (size_t k = 0; k < n; k++) vo_madd(acc, a[k * sa], b[k * sb], p, f);
        return;
    }
    mpfr_srcptr *ptrs = vijp_alloc_array(n ? 2 * n : 1, sizeof *ptrs);
    for (size_t k = 0; k < n; k++) ptrs[k] = a[k * sa], ptrs[n + k] = b[k * sb];
    tc_dot_ptrs(acc, ptrs, ptrs + n, n, f);
    free(ptrs);
}

void vo_madd(mpfr_t acc, const mpfr_t a, const mpfr_t b, mpfr_t p, const vijp_format *f)
{
    if (f->tc_group) { /* one block of one product */
        mpfr_srcptr pa = a, pb = b;
        tc_dot_ptrs(acc, &pa, &pb, 1, f);
        return;
    }
    if (!f->mixed) {
        vo_mul(p, a, b, f);
        vo_add(acc, acc, p, f);
        return;
    }
    if (f->ftz && (vo_tiny(a, f->prec, f->emin) || vo_tiny(b, f->prec, f->emin))) {
        /* DAZ: a subnormal operand (a bfloat16 one, in binary32) counts as a
         * zero of its sign, so the product is a zero of the product's sign;
         * a tiny product of normal operands is fused with acc as without
         * ftz, and only the sum is flushed (vo_tiny) */
        mpfr_t zero;
        mp_limb_t lz[1];
        mpfr_custom_init(lz, 2);
        mpfr_custom_init_set(zero, MPFR_ZERO_KIND, 0, 2, lz);
        mpfr_set_zero(zero, mpfr_signbit(a) == mpfr_signbit(b) ? 1 : -1);
        VO_ROUND(f, acc, mpfr_add(acc, acc, zero, MPFR_RNDN));
        return;
    }
    if (!f->operand_prec) {
        VO_ROUND(f, acc, mpfr_fma(acc, a, b, acc, MPFR_RNDN));
        return;
    }
    /* The rounded operands live on the stack (MPFR's custom interface): no
     * allocation per term.  Mixed formats compute in binary32, one limb. */
    mp_limb_t la[1], lb[1];
    if (mpfr_custom_get_size(f->prec) > sizeof la) abort(); /* not a mixed format: a programming error */
    mpfr_t ra, rb;
    mpfr_custom_init(la, f->prec), mpfr_custom_init(lb, f->prec);
    mpfr_custom_init_set(ra, MPFR_ZERO_KIND, 0, f->prec, la);
    mpfr_custom_init_set(rb, MPFR_ZERO_KIND, 0, f->prec, lb);
    mpfr_set(ra, a, MPFR_RNDN), mpfr_set(rb, b, MPFR_RNDN); /* exact: a, b are in f */
    round_in_place(ra, f->operand_prec, f->emin, f->emax, VIJP_OVERFLOW_INF, 0, 0); /* binary32's range */
    round_in_place(rb, f->operand_prec, f->emin, f->emax, VIJP_OVERFLOW_INF, 0, 0);
    VO_ROUND(f, acc, mpfr_fma(acc, ra, rb, acc, MPFR_RNDN));
}

mpfr_t *vo_vec_new(size_t n, const vijp_format *f)
{
    mpfr_t *v = vijp_alloc_array((n ? n : 1), sizeof *v);
    for (size_t i = 0; i < n; i++) mpfr_init2(v[i], f->prec), mpfr_set_zero(v[i], 1);
    return v;
}

void vo_vec_free(mpfr_t *v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) mpfr_clear(v[i]);
    free(v);
}

/* Packed matrices (vijp/mat.h, src/format/packed.[ch]): an mpfr:P matrix's
 * values without their mpfr_t headers.  The oracle is MPFR itself: packed
 * values read back (through the library's readers and the internal MPFR
 * views) are the MPFR-held ones bit for bit (kind, sign, exponent, limbs),
 * at 64, 128, 192 and 256 bits, for random values, signed zeros, NaN of
 * either sign, ±Inf and exponents at MPFR's emin and emax; packed while
 * rounded to a narrower q they are mpfr_set's rounding into q bits (and
 * what vijp_mat_convert into mpfr:q gave the drift reference before),
 * ties to even, carries into the next binade and overflow included.  The
 * comparisons (src/compare/) give the same metrics, bit for bit, on a
 * packed reference and a packed a as on MPFR-held ones; a drift curve,
 * whose reference levels are packed as they are computed, gives the
 * metrics of engines against an unpacked reference computed apart; and a
 * write into a packed matrix stops with a message. */
#include "fixtures/testutil.h"
#include "vijp/rng.h"
#include "vijp/drift.h"
#include "compare/cache.h"
#include "compare/fast.h"
#include "drift/half.h"
#include "format/packed.h"
#include "grad/problem.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static vijp_format mpfr_fmt(long prec)
{
    vijp_format f;
    ck_assert(vijp_format_mpfr(&f, prec, NULL) == 0);
    return f;
}

/* a and b are the same MPFR datum: both NaN, or the same kind, sign and,
 * for regular values, exponent, precision and every limb. */
static int same_value(mpfr_srcptr a, mpfr_srcptr b)
{
    if (!mpfr_signbit(a) != !mpfr_signbit(b)) return 0;
    if (mpfr_nan_p(a) || mpfr_nan_p(b)) return mpfr_nan_p(a) && mpfr_nan_p(b);
    if (mpfr_inf_p(a) || mpfr_inf_p(b)) return mpfr_inf_p(a) && mpfr_inf_p(b);
    if (mpfr_zero_p(a) || mpfr_zero_p(b)) return mpfr_zero_p(a) && mpfr_zero_p(b);
    size_t limbs = mpfr_custom_get_size(mpfr_get_prec(a)) / sizeof(mp_limb_t);
    return mpfr_get_prec(a) == mpfr_get_prec(b) && mpfr_get_exp(a) == mpfr_get_exp(b) &&
           !memcmp(mpfr_custom_get_significand(a), mpfr_custom_get_significand(b), limbs * sizeof(mp_limb_t));
}

/* A random value with 6 doubles' worth of significant bits, times
 * 2^[−spread, spread], either sign. */
static void random_wide(mpfr_t y, vijp_rng *g, long spread)
{
    mpfr_t t;
    mpfr_init2(t, 64);
    mpfr_set_d(y, vijp_rng_normal(g), MPFR_RNDN);
    for (int k = 1; k <= 6; k++) {
        mpfr_set_d(t, vijp_rng_normal(g), MPFR_RNDN);
        mpfr_mul_2si(t, t, -53 * k, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
    }
    if (spread) mpfr_mul_2si(y, y, (long)(vijp_rng_u64(g) % (uint64_t)(2 * spread + 1)) - spread, MPFR_RNDN);
    mpfr_clear(t);
}

/* Entry i of an MPFR-held R := the special or extreme value k (k < N_SPECIAL),
 * else a random one: ±0, NaN of either sign, ±Inf, exponents at MPFR's
 * emin and emax and within 2 of them, far beyond double's range, and at
 * either end of what a packed head holds and one past it (packed.h: the
 * others go to the side array). */
enum { N_SPECIAL = 16 };
static void special_or_random(mpfr_ptr r, size_t k, vijp_rng *g)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t y;
    mpfr_init2(y, 600);
    random_wide(y, g, 40);
    switch (k) {
    case 0: mpfr_set_zero(r, 1); break;
    case 1: mpfr_set_zero(r, -1); break;
    case 2: mpfr_set_nan(r); break;
    case 3: mpfr_set_nan(r), mpfr_neg(r, r, MPFR_RNDN); break; /* a NaN with its sign bit set */
    case 4: mpfr_set_inf(r, 1); break;
    case 5: mpfr_set_inf(r, -1); break;
    case 6: case 7: case 8: case 9: case 10: case 11: {
        mpfr_exp_t e = k < 9 ? emax - (mpfr_exp_t)(k - 6) : emin + (mpfr_exp_t)(k - 9);
        mpfr_set(r, y, MPFR_RNDN);
        ck_assert(mpfr_set_exp(r, e) == 0);
        break;
    }
    case 12: case 13: case 14: case 15: {
        mpfr_exp_t e = k < 14 ? VIJP_PACKED_EXP_MAX + (mpfr_exp_t)(k - 12) : VIJP_PACKED_EXP_MIN - (mpfr_exp_t)(k - 14);
        mpfr_set(r, y, MPFR_RNDN);
        if (k & 1) mpfr_neg(r, r, MPFR_RNDN);
        ck_assert(mpfr_set_exp(r, e) == 0);
        break;
    }
    default: mpfr_set(r, y, MPFR_RNDN);
    }
    mpfr_clear(y);
}

/* n values of P bits: the specials first, then random ones. */
static void fill_values(vijp_mat *R, vijp_rng *g)
{
    for (size_t i = 0, n = vijp_mat_len(R); i < n; i++) special_or_random(R->m[i], i < N_SPECIAL ? i : N_SPECIAL, g);
}

/* Every reader of a packed P against the MPFR-held R it was packed from. */
static void expect_packed_is(const vijp_mat *P, const vijp_mat *R, const char *what)
{
    size_t n = vijp_mat_len(R);
    ck_assert_msg(P->packed && !P->m && !P->d && P->rows == R->rows && P->cols == R->cols && vijp_mat_len(P) == n,
                  "%s: holding and shape", what);
    vijp_format wide = mpfr_fmt(P->packed->prec);
    vijp_mat back;
    vijp_mat_init(&back, R->rows, R->cols, &wide);
    vijp_mat_convert(&back, P);
    mpfr_t *out = vijp_alloc_array(n, sizeof *out);
    for (size_t i = 0; i < n; i++) mpfr_init2(out[i], P->packed->prec);
    vijp_mat_get_mpfr(P, out);
    for (size_t i = 0; i < n; i++) {
        mpfr_t v;
        vijp_packed_view(P->packed, i, v);
        ck_assert_msg(same_value(v, R->m[i]), "%s: entry %zu, its view", what, i);
        ck_assert_msg(same_value(back.m[i], R->m[i]), "%s: entry %zu, vijp_mat_convert from it", what, i);
        ck_assert_msg(same_value(out[i], R->m[i]), "%s: entry %zu, vijp_mat_get_mpfr", what, i);
        double x = vijp_mat_get_d(P, i), y = mpfr_get_d(R->m[i], MPFR_RNDN);
        ck_assert_msg(isnan(y) ? isnan(x) : !memcmp(&x, &y, sizeof x), "%s: entry %zu, vijp_mat_get_d %a, want %a", what,
                      i, x, y);
    }
    for (size_t i = 0; i < n; i++) mpfr_clear(out[i]);
    free(out);
    vijp_mat_clear(&back);
    vijp_error e1 = {0}, e2 = {0};
    int r1 = vijp_mat_check_finite(P, "m", &e1), r2 = vijp_mat_check_finite(R, "m", &e2);
    ck_assert_msg(r1 == r2 && !strcmp(e1.msg, e2.msg), "%s: check_finite '%s', want '%s'", what, e1.msg, e2.msg);
}

/* Packed exactly, by copy and in place, at 64, 128, 192 and 256 bits
 * (one limb to four): every value read back as it was.  A packing that
 * drops the lowest limb, or the sign of a zero or a NaN, fails here. */
START_TEST(pack_round_trip)
{
    static const long precs[] = {64, 128, 192, 256, 113};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
        vijp_format f = mpfr_fmt(precs[pi]);
        vijp_mat R, P, Q;
        vijp_mat_init(&R, 50, 3, &f);
        fill_values(&R, &g);
        R.sr = vijp_sr_key_of(7, VIJP_SR_PARAM_GRAD, 3, 0);
        char what[64];
        snprintf(what, sizeof what, "mpfr:%ld, by copy", precs[pi]);
        vijp_mat_pack_copy(&P, &R, &f);
        expect_packed_is(&P, &R, what);
        ck_assert(P.fmt == &f && !memcmp(&P.sr, &R.sr, sizeof P.sr));
        vijp_mat_init(&Q, 50, 3, &f);
        vijp_mat_copy(&Q, &R);
        vijp_mat_pack(&Q);
        vijp_mat_pack(&Q); /* packed already: nothing to do */
        snprintf(what, sizeof what, "mpfr:%ld, in place", precs[pi]);
        expect_packed_is(&Q, &R, what);
        vijp_mat S; /* a packed source packed again at its precision: the same */
        vijp_mat_pack_copy(&S, &Q, &f);
        snprintf(what, sizeof what, "mpfr:%ld, packed from packed", precs[pi]);
        expect_packed_is(&S, &R, what);
        vijp_mat_clear(&R), vijp_mat_clear(&P), vijp_mat_clear(&Q), vijp_mat_clear(&S);
        ck_assert(!Q.packed && !Q.rows);
    }
    /* the sizes peak.c counts: limbs and a 16-bit head */
    ck_assert_uint_eq(vijp_packed_value_bytes(64), 10);
    ck_assert_uint_eq(vijp_packed_value_bytes(128), 18);
    ck_assert_uint_eq(vijp_packed_value_bytes(256), 34);
}
END_TEST

/* Held with its limbs in their packed slots (vijp_mat_init_packing, the
 * drift reference's parameter gradients): written and read as an
 * MPFR-held matrix (vijp_mat_copy in, vijp_mat_get_mpfr and the
 * comparisons out) before vijp_mat_pack, then packed without copying a
 * limb (the block's slots are where the values were written), every value
 * as it was; a pair exchanged by mpfr_swap (their significand pointers
 * leave their slots) is packed by copy instead, and still right.  At 64,
 * 128, 192, 256 and 113 bits.  A packing that leaves the exponents or
 * kinds unset, or takes the slots after a swap, fails here. */
START_TEST(packing_in_place)
{
    static const long precs[] = {64, 128, 192, 256, 113};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 3);
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++)
        for (int swap = 0; swap < 2; swap++) {
            vijp_format f = mpfr_fmt(precs[pi]);
            vijp_mat R, W;
            vijp_mat_init(&R, 50, 3, &f);
            fill_values(&R, &g);
            vijp_mat_init_packing(&W, 50, 3, &f);
            ck_assert(W.m && W.packed && !W.d);
            const void *block = W.packed;
            vijp_mat_copy(&W, &R); /* written as an MPFR-held matrix */
            if (swap) { /* entries 20 and 40 exchanged, in R too */
                mpfr_swap(W.m[20], W.m[40]);
                mpfr_swap(R.m[20], R.m[40]);
            }
            mpfr_t *out = vijp_alloc_array(150, sizeof *out);
            for (size_t i = 0; i < 150; i++) mpfr_init2(out[i], precs[pi]);
            vijp_mat_get_mpfr(&W, out);
            for (size_t i = 0; i < 150; i++) ck_assert_msg(same_value(out[i], R.m[i]), "before packing: entry %zu", i);
            for (size_t i = 0; i < 150; i++) mpfr_clear(out[i]);
            free(out);
            vijp_mat_pack(&W);
            char what[64];
            snprintf(what, sizeof what, "mpfr:%ld, packing in place%s", precs[pi], swap ? ", a swapped pair" : "");
            expect_packed_is(&W, &R, what);
            ck_assert_msg((W.packed == block) == !swap, "%s: the block %s", what, swap ? "kept" : "replaced");
            vijp_mat_clear(&R), vijp_mat_clear(&W);
        }
    /* the comparisons read such a matrix through its structs, as an MPFR-held
     * one: the same metrics, bit for bit, as a and as the reference */
    vijp_format f = mpfr_fmt(128), fb;
    vijp_format_fixed(&fb, VIJP_BINARY32);
    vijp_mat A, B, W;
    vijp_mat_init(&A, 40, 2, &f), vijp_mat_init(&B, 40, 2, &f), vijp_mat_init_packing(&W, 40, 2, &f);
    for (size_t i = 0; i < 80; i++) {
        random_wide(A.m[i], &g, 5);
        mpfr_mul_d(B.m[i], A.m[i], 1 + ldexp(vijp_rng_normal(&g), -20), MPFR_RNDN);
    }
    vijp_mat_copy(&W, &A);
    vijp_metric m1, m2, m3, m4;
    vijp_compare(&W, &B, &fb, &m1), vijp_compare(&A, &B, &fb, &m2);
    vijp_compare(&B, &W, &fb, &m3), vijp_compare(&B, &A, &fb, &m4);
    ck_assert(!memcmp(&m1, &m2, sizeof m1) && !memcmp(&m3, &m4, sizeof m3));
    int f1 = vijp_compare_fast(&W, &B, &fb, &m1, 1, NULL, NULL), f2 = vijp_compare_fast(&A, &B, &fb, &m2, 1, NULL, NULL);
    int f3 = vijp_compare_fast(&B, &W, &fb, &m3, 1, NULL, NULL), f4 = vijp_compare_fast(&B, &A, &fb, &m4, 1, NULL, NULL);
    ck_assert_msg(f1 && f2 && f3 && f4, "the fast comparisons decided %d %d %d %d", f1, f2, f3, f4);
    ck_assert(!memcmp(&m1, &m2, sizeof m1) && !memcmp(&m3, &m4, sizeof m3));
    ck_assert(vijp_xnum_double(m1.rel) > 0); /* the metrics are about something */
    vijp_mat_clear(&A), vijp_mat_clear(&B), vijp_mat_clear(&W);
}
END_TEST

/* Values of P bits placed around the rounding boundaries of q bits: a q-bit
 * x (either last bit, either sign) plus half a unit of q (a tie), one unit
 * of P above or below it, the all-ones q-bit value below 2^E plus half a
 * unit (a carry into the next binade, once from the largest exponent a
 * packed head holds), the largest P-bit value at emax
 * (rounds up past emax: overflow to Inf), and the specials. */
static void tie_values(vijp_mat *R, long q, vijp_rng *g)
{
    long P = (long)R->fmt->prec;
    mpfr_t x, h;
    mpfr_inits2(700, x, h, (mpfr_ptr)0);
    for (size_t i = 0, n = vijp_mat_len(R); i < n; i++) {
        if (i < N_SPECIAL) {
            special_or_random(R->m[i], i, g);
            continue;
        }
        long k = (long)(i % 6);
        random_wide(x, g, 30);
        mpfr_prec_round(x, q, MPFR_RNDN); /* on the q-bit grid */
        if (k == 4 && i < N_SPECIAL + 6) mpfr_set_exp(x, VIJP_PACKED_EXP_MAX); /* its carry leaves what a head holds */
        long E = mpfr_get_exp(x);
        if (k == 4) { /* 2^E − 2^(E−q), x's sign */
            int neg = mpfr_signbit(x);
            mpfr_set_prec(x, 700);
            mpfr_set_ui_2exp(x, 1, E, MPFR_RNDN);
            mpfr_set_ui_2exp(h, 1, E - q, MPFR_RNDN);
            mpfr_sub(x, x, h, MPFR_RNDN);
            if (neg) mpfr_neg(x, x, MPFR_RNDN);
        } else mpfr_prec_round(x, 700, MPFR_RNDN);
        if (k == 5) { /* the largest P-bit value at emax */
            mpfr_set_ui_2exp(x, 1, 0, MPFR_RNDN);
            mpfr_set_ui_2exp(h, 1, -P, MPFR_RNDN);
            mpfr_sub(x, x, h, MPFR_RNDN);
            ck_assert(mpfr_set(R->m[i], x, MPFR_RNDN) == 0);
            ck_assert(mpfr_set_exp(R->m[i], mpfr_get_emax()) == 0);
            continue;
        }
        mpfr_set_ui_2exp(h, 1, E - q - 1, MPFR_RNDN); /* half a unit of q */
        if (mpfr_signbit(x)) mpfr_neg(h, h, MPFR_RNDN);
        mpfr_add(x, x, h, MPFR_RNDN);
        if (k == 1 || k == 2) { /* one unit of P above or below the tie */
            mpfr_set_ui_2exp(h, 1, E - P, MPFR_RNDN);
            if ((k == 2) != !mpfr_signbit(x)) mpfr_neg(h, h, MPFR_RNDN);
            mpfr_add(x, x, h, MPFR_RNDN);
        }
        ck_assert_msg(mpfr_set(R->m[i], x, MPFR_RNDN) == 0, "entry %zu: not exact at %ld bits", i, P); /* P >= q + 2 */
    }
    mpfr_clears(x, h, (mpfr_ptr)0);
}

/* Packed while rounded to q (vijp_mat_pack_copy from an MPFR-held matrix,
 * vijp_mat_pack_rounded of a packed one, vijp_packed_set value by value
 * into a block at q and into one at P): each value is mpfr_set's
 * rounding into q bits, and vijp_mat_convert's into an mpfr:q matrix (the
 * drift reference's rounding before it was packed).  Rounding towards
 * zero, or away, fails the ties; dropping the overflow fails the last. */
START_TEST(pack_rounded_to_nearest)
{
    /* (the drift study's 212 -> 170 for double; 180 -> 170 within one
     * limb count; 256 -> 192 and 192 -> 64 with the round bit a whole
     * limb below) */
    static const long pairs[][2] = {{256, 128}, {192, 128}, {256, 113}, {192, 64}, {128, 64},
                                    {130, 128}, {128, 100}, {212, 170}, {180, 170}, {256, 192}};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 1);
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        long P = pairs[k][0], q = pairs[k][1];
        vijp_format fP = mpfr_fmt(P), fq = mpfr_fmt(q);
        vijp_mat R, conv, A, B, C, D;
        vijp_mat_init(&R, 120, 2, &fP);
        tie_values(&R, q, &g);
        vijp_mat_init_packed(&C, 120, 2, &fq), vijp_mat_init_packed(&D, 120, 2, &fP);
        for (size_t i = 0; i < vijp_mat_len(&R); i++) vijp_packed_set(C.packed, i, R.m[i]), vijp_packed_set(D.packed, i, R.m[i]);
        vijp_mat_init(&conv, 120, 2, &fq);
        vijp_mat_convert(&conv, &R);
        vijp_mat_pack_copy(&A, &R, &fq);
        vijp_mat_pack_copy(&B, &R, &fP);
        vijp_mat_pack_rounded(&B, &fq);
        ck_assert(A.fmt == &fq && B.fmt == &fq && A.packed->prec == q && B.packed->prec == q);
        size_t ties = 0, overflows = 0;
        for (size_t i = 0, n = vijp_mat_len(&R); i < n; i++) {
            mpfr_t want, va, vb, vc, vd;
            mpfr_init2(want, q);
            vijp_packed_view(C.packed, i, vc), vijp_packed_view(D.packed, i, vd);
            ck_assert_msg(same_value(vd, R.m[i]), "%ld bits, entry %zu: vijp_packed_set at its own precision", P, i);
            int inex = mpfr_set(want, R.m[i], MPFR_RNDN);
            ties += inex != 0 && i % 6 == 0, overflows += mpfr_inf_p(want) && !mpfr_inf_p(R.m[i]);
            vijp_packed_view(A.packed, i, va), vijp_packed_view(B.packed, i, vb);
            ck_assert_msg(same_value(va, want), "%ld -> %ld bits, entry %zu: packed from MPFR", P, q, i);
            ck_assert_msg(same_value(vb, want), "%ld -> %ld bits, entry %zu: packed from packed", P, q, i);
            ck_assert_msg(same_value(vc, want), "%ld -> %ld bits, entry %zu: vijp_packed_set", P, q, i);
            ck_assert_msg(same_value(conv.m[i], want), "%ld -> %ld bits, entry %zu: vijp_mat_convert", P, q, i);
            mpfr_clear(want);
        }
        ck_assert_msg(ties > 10 && overflows > 5, "%ld -> %ld: %zu ties, %zu overflows reached", P, q, ties, overflows);
        vijp_mat_clear(&R), vijp_mat_clear(&conv), vijp_mat_clear(&A), vijp_mat_clear(&B);
        vijp_mat_clear(&C), vijp_mat_clear(&D);
    }
}
END_TEST

/* ---- the metrics on packed matrices ---------------------------------- */

typedef enum { CLOSE, CANCEL, ZEROS, NANS, INFS, HUGE_RANGE, N_FAMILIES } family;
static const char *const family_name[] = {"close", "cancellation", "zeros", "NaN", "Inf", "huge range"};

/* Bit for bit, exponent included (NaN matches NaN). */
static int same_x(vijp_xnum a, vijp_xnum b)
{
    return (a.m != a.m && b.m != b.m) || (!memcmp(&a.m, &b.m, sizeof a.m) && a.e == b.e);
}
static int same_metric(const vijp_metric *a, const vijp_metric *b)
{
    return same_x(a->rel, b->rel) && same_x(a->ulps, b->ulps) && same_x(a->angle_deg, b->angle_deg);
}

/* A reference R (MPFR-held, its own precision) and, beside it, x values
 * for a: in the family's shape.  x goes into a double-held A in format f
 * (vijp_mat_set_d: rounded to it) or into an MPFR-held A (mpfr:P, the
 * validation's lower level). */
static void fill_pair(family fam, vijp_rng *g, vijp_mat *A, vijp_mat *R)
{
    size_t n = vijp_mat_len(R);
    double *xd = A->d ? vijp_alloc_array(n, sizeof *xd) : NULL;
    mpfr_t y, x;
    mpfr_inits2(700, y, x, (mpfr_ptr)0);
    double eps = ldexp(1, -(int)(8 + vijp_rng_u64(g) % 40));
    for (size_t i = 0; i < n; i++) {
        random_wide(y, g, fam == HUGE_RANGE ? 3000 : 12);
        mpfr_mul_d(x, y, 1 + eps * vijp_rng_normal(g), MPFR_RNDN);
        if (fam == CANCEL && vijp_rng_u64(g) % 4) mpfr_set(x, y, MPFR_RNDN); /* a = R, up to a's rounding */
        if (fam == ZEROS) switch (vijp_rng_u64(g) % 4) {
            case 0: mpfr_set_zero(x, vijp_rng_u64(g) % 2 ? 1 : -1); break;
            case 1: mpfr_set_zero(y, -1); break;
            case 2: mpfr_set_zero(x, -1), mpfr_set_zero(y, 1); break;
            default: break;
            }
        if (fam == NANS && i == n / 2) mpfr_set_nan(vijp_rng_u64(g) % 2 ? x : y);
        if (fam == INFS && i == n / 3) mpfr_set_inf(vijp_rng_u64(g) % 2 ? x : y, -1);
        mpfr_set(R->m[i], y, MPFR_RNDN);
        if (xd) xd[i] = mpfr_get_d(x, MPFR_RNDN);
        else mpfr_set(A->m[i], x, MPFR_RNDN);
    }
    if (xd) vijp_mat_set_d(A, xd);
    free(xd);
    mpfr_clears(y, x, (mpfr_ptr)0);
}

/* One case: every comparison of a with the packed reference (and with a
 * packed, where a is MPFR-held) against the same on MPFR-held ones:
 * vijp_compare_cached with a fresh cache and with the cache the MPFR-held
 * reference filled (the drift study fills it during the validation, then
 * packs), vijp_compare_rel_ulps, the exact evaluation, vijp_rel_err and
 * vijp_norm.  Counts the fast path's answers on packed operands. */
static void check_pair(const vijp_mat *A, const vijp_mat *R, const vijp_format *f, const char *what, size_t *fast)
{
    vijp_mat Rp, Ap = {0};
    vijp_mat_pack_copy(&Rp, R, R->fmt);
    if (A->m) vijp_mat_pack_copy(&Ap, A, A->fmt);
    const vijp_mat *as[2] = {A, A->m ? &Ap : A};
    for (int k = 0; k < (A->m ? 2 : 1); k++) {
        const vijp_mat *a = as[k];
        const char *which = k ? "packed" : "held";
        vijp_compare_cache c_mp = {0}, c_pk = {0};
        vijp_metric want, got;
        vijp_compare_cached(A, R, f, &want, &c_mp);
        vijp_compare_cached(a, &Rp, f, &got, &c_pk);
        ck_assert_msg(same_metric(&got, &want), "%s, a %s: cached, fresh cache: rel %a ulps %a angle %a, want %a %a %a",
                      what, which, got.rel.m, got.ulps.m, got.angle_deg.m, want.rel.m, want.ulps.m,
                      want.angle_deg.m);
        vijp_compare_cached(a, &Rp, f, &got, &c_mp); /* Σ ref² from the MPFR-held reference's comparison */
        ck_assert_msg(same_metric(&got, &want), "%s, a %s: cached, the MPFR-held reference's cache", what, which);
        vijp_compare_cached(a, &Rp, f, &got, &c_pk);
        ck_assert_msg(same_metric(&got, &want), "%s, a %s: cached, its own cache", what, which);
        vijp_compare_cache_clear(&c_mp), vijp_compare_cache_clear(&c_pk);
        vijp_compare_rel_ulps(A, R, f, &want, NULL);
        vijp_compare_rel_ulps(a, &Rp, f, &got, NULL);
        ck_assert_msg(same_metric(&got, &want), "%s, a %s: rel_ulps", what, which);
        for (int angle = 0; angle < 2; angle++) {
            vijp_compare_exact(A, R, f, &want, angle);
            vijp_compare_exact(a, &Rp, f, &got, angle);
            ck_assert_msg(same_metric(&got, &want), "%s, a %s: exact evaluation, angle %d", what, which, angle);
            if (vijp_compare_fast(a, &Rp, f, &got, angle, NULL, NULL)) {
                (*fast)++;
                ck_assert_msg(same_metric(&got, &want), "%s, a %s: fast path, angle %d", what, which, angle);
            }
        }
        ck_assert_msg(same_x(vijp_rel_err(a, &Rp), vijp_rel_err(A, R)), "%s: vijp_rel_err", what);
        double n1 = vijp_norm(&Rp), n2 = vijp_norm(R);
        ck_assert_msg(!memcmp(&n1, &n2, sizeof n1) || (isnan(n1) && isnan(n2)), "%s: vijp_norm", what);
    }
    vijp_mat_clear(&Rp), vijp_mat_clear(&Ap);
}

/* In binary32 and bfloat16+binary32 (q = 128: the drift study's two
 * formats), and double (q = 170): a in the format against a reference at
 * q bits (the kept one, read in place) and at 2q (rounded to q by the
 * comparison); an MPFR-held a at 64 bits (the validation's lower level)
 * against one at 128.  Families: close, cancelling, signed zeros on either
 * side, a NaN, an Inf, exponents far past double's range. */
START_TEST(metrics_on_packed)
{
    static const char *const formats[] = {"binary32", "bfloat16+binary32", "double"};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed() + 2);
    size_t fast = 0;
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        vijp_format f;
        ck_assert(vijp_format_parse(formats[fi], &f, NULL) == 0);
        long q = (long)vijp_compare_prec(&f);
        vijp_format ref_q = mpfr_fmt(q), ref_2q = mpfr_fmt(2 * q), lo = mpfr_fmt(64), hi = mpfr_fmt(128);
        for (int fam = 0; fam < N_FAMILIES; fam++)
            for (int shape = 0; shape < 3; shape++) {
                const vijp_format *fa = shape == 2 ? &lo : &f, *fr = shape == 0 ? &ref_q : shape == 1 ? &ref_2q : &hi;
                size_t n = fam == CLOSE && shape == 0 ? 5000 : 97; /* past one of fast.c's chunks once */
                vijp_mat A, R;
                vijp_mat_init(&A, n, 1, fa); /* doubles in the format, or MPFR at 64 bits */
                vijp_mat_init(&R, n, 1, fr);
                fill_pair((family)fam, &g, &A, &R);
                char what[128];
                snprintf(what, sizeof what, "%s, %s, a %s, reference mpfr:%ld", formats[fi], family_name[fam], fa->name,
                         (long)fr->prec);
                check_pair(&A, &R, &f, what, &fast);
                vijp_mat_clear(&A), vijp_mat_clear(&R);
            }
    }
    ck_assert_msg(fast > 50, "the fast path answered %zu times on packed operands", fast);
}
END_TEST

/* ---- a drift curve against an unpacked reference ----------------------- */

/* Backprop of pf in mpfr:prec as the memo runs it (memo.c's compute_level:
 * X and T converted, θ the exact copy in MPFR at max(53, P) bits, dot
 * products rounded once), without the memo and without packing. */
static void level(const vijp_net *net, const vijp_problem *pf, const vijp_problem *copy, long prec, vijp_format *fmt,
                  vijp_grads *g)
{
    ck_assert(vijp_format_mpfr(fmt, prec, NULL) == 0);
    fmt->exact_dots = 1;
    vijp_mat X, T;
    vijp_mat_init(&X, pf->X.rows, pf->X.cols, fmt), vijp_mat_convert(&X, &pf->X);
    vijp_mat_init(&T, pf->T.rows, pf->T.cols, fmt), vijp_mat_convert(&T, &pf->T);
    ck_assert(vijp_engine_run(VIJP_ENGINE_BACKPROP, net, copy->theta, &X, &T, g, NULL) == 0);
    vijp_mat_clear(&X), vijp_mat_clear(&T);
}

/* The layers' inputs h_0 … h_(D−1) of that backprop, apart: each layer's
 * forward in mpfr:prec (dot products rounded once) from X converted. */
static vijp_mat *inputs(const vijp_net *net, const vijp_problem *pf, const vijp_problem *copy, long prec)
{
    vijp_format *fmt = malloc(sizeof *fmt); /* the matrices point to it: freed with them (inputs_free) */
    ck_assert_ptr_nonnull(fmt);
    *fmt = mpfr_fmt(prec), fmt->exact_dots = 1;
    vijp_mat *H = calloc(net->depth + 1, sizeof *H);
    ck_assert_ptr_nonnull(H);
    vijp_mat_init(&H[0], pf->X.rows, pf->X.cols, fmt), vijp_mat_convert(&H[0], &pf->X);
    for (size_t i = 0; i < net->depth; i++) {
        vijp_mat_init(&H[i + 1], net->layers[i].out, pf->X.cols, fmt);
        ck_assert(vijp_layer_forward(&net->layers[i], &copy->theta[i], &H[i], &H[i + 1], NULL) == 0);
    }
    return H;
}

static void inputs_free(vijp_mat *H, size_t depth)
{
    vijp_format *fmt = (vijp_format *)H[0].fmt;
    for (size_t i = 0; i <= depth; i++) vijp_mat_clear(&H[i]);
    free(H), free(fmt);
}

/* Dense layer i's parameter gradient as the upper level forms it
 * (docs/drift.md), into hi's ∇θ_i: from its g and h rounded to p bits, in
 * double-double where p <= 106 (drift/half.h, whose own test holds it to
 * its bound against an exact sum), else the layer's own vjp_param in
 * mpfr:p; and its normwise bound k·2^-p·‖T‖ / (‖∂θ‖ − k·2^-p·‖T‖), T =
 * |g||h|ᵀ (and Σ|g| for the bias), formed entry by entry in double (the
 * memo sums Gram matrices instead), k = 4 or drift_half_kappa's. */
static double half_formed(const vijp_net *net, const vijp_problem *copy, size_t i, const vijp_mat *h, vijp_grads *hi,
                          long p)
{
    const vijp_layer *L = &net->layers[i];
    vijp_format fp = mpfr_fmt(p);
    fp.exact_dots = 1;
    const vijp_mat *g = &hi->g[i];
    const vijp_format *held = hi->grad_theta[i].fmt;
    vijp_mat hp, gp, out, tmp, dd;
    vijp_mat_init(&hp, h->rows, h->cols, &fp), vijp_mat_convert(&hp, h);
    vijp_mat_init(&gp, g->rows, g->cols, &fp), vijp_mat_convert(&gp, g);
    vijp_mat_init(&out, L->type->param_count(L), 1, held);
    double k = 4;
    if (drift_half_param_dd(L, &hp, &gp, held, 1, &dd)) {
        k = drift_half_kappa(p, g->cols, (long)held->prec);
        vijp_mat_init(&tmp, L->type->param_count(L), 1, held);
        vijp_mat_convert(&tmp, &dd); /* exact: the same precision */
        vijp_mat_clear(&dd);
    } else {
        vijp_mat_init(&tmp, L->type->param_count(L), 1, &fp);
        ck_assert(vijp_layer_vjp_param(L, &copy->theta[i], &hp, &gp, &tmp, NULL) == 0);
    }
    vijp_mat_convert(&out, &tmp); /* exact: p bits, or the held precision, fit the level's */
    size_t m = g->rows, n = h->rows, B = g->cols;
    double tt = 0, ww = 0;
    for (size_t r = 0; r < m; r++) {
        for (size_t c = 0; c <= n; c++) { /* c = n: the bias */
            double t = 0;
            for (size_t b = 0; b < B; b++)
                t += fabs(vijp_mat_get_d(&gp, r + b * m)) * (c < n ? fabs(vijp_mat_get_d(&hp, c + b * n)) : 1);
            tt += t * t;
        }
    }
    for (size_t e = 0; e < vijp_mat_len(&tmp); e++) ww += vijp_mat_get_d(&tmp, e) * vijp_mat_get_d(&tmp, e);
    vijp_mat_clear(&hp), vijp_mat_clear(&gp), vijp_mat_clear(&tmp);
    vijp_mat_clear(&hi->grad_theta[i]);
    hi->grad_theta[i] = out;
    double d = k * ldexp(sqrt(tt), -(int)p);
    return d / (sqrt(ww) - d);
}

/* Every matrix of g rounded to fmt, MPFR-held (how the reference was kept
 * before it was packed). */
static vijp_mat *grads_mat(vijp_grads *g, size_t k)
{
    return k == 0 ? &g->grad_x : k <= g->depth ? &g->g[k - 1] : &g->grad_theta[k - 1 - g->depth];
}

static void rounded(vijp_grads *g, const vijp_format *fmt)
{
    for (size_t k = 0; k < 1 + 2 * g->depth; k++) {
        vijp_mat *a = grads_mat(g, k), r;
        vijp_mat_init(&r, a->rows, a->cols, fmt);
        vijp_mat_convert(&r, a);
        vijp_mat_clear(a);
        *a = r;
    }
}

/* The curve's metrics and its validation's agreement are those of the
 * engines against the reference computed apart, MPFR-held (levels at
 * ref_prec/2 and ref_prec, the second rounded to q, its dense parameter
 * gradients formed at ref_prec/2: half_formed): bit for bit; the
 * agreement the largest of the cotangents', ∇x's and the dense layers'
 * inputs' rel, and the dense gradients' bounds within 2^-20 (the memo's
 * sums of them run another way, its slack above them far smaller).  A
 * reference packed wrong (a limb dropped: 2^-64 of it) moves them (the
 * binary32 errors near 2^-24 see the reference's bits down to 2^-77 in a
 * double's 53); one rounded the wrong way at q = 128 bits (2^-128) does
 * not, and pack_rounded_to_nearest is the test for that.  The curve's own memo and a shared one (the
 * reference a packed copy), at the default first precision (64 and 128
 * bits: the reference is the 128-bit level, q = 128) and from 128 (levels
 * at 128 and 256 bits, the second rounded to q as it is packed). */
START_TEST(drift_curve_matches_unpacked_reference)
{
    static const char *const formats[] = {"binary32", "bfloat16+binary32", "binary32", "binary32"};
    static const long starts[] = {0, 0, 128, 128};
    static const int shared[] = {0, 1, 0, 1};
    static const vijp_engine_kind moonwalk[] = {VIJP_ENGINE_MOONWALK};
    for (size_t fi = 0; fi < 4; fi++) {
        vijp_drift_setup s = {0};
        s.problem = (vijp_grad_setup){.spec = "dense:8,gelu", .depth = 10, .width = 8, .batch = 3, .seed = test_seed(),
                                      .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
        ck_assert(!vijp_format_parse(formats[fi], &s.problem.fmt, NULL));
        s.engines = moonwalk, s.n_engines = 1, s.ref_prec_start = starts[fi];
        s.memo = shared[fi] ? vijp_drift_memo_new() : NULL;
        vijp_drift_curve c;
        vijp_error err = {0};
        ck_assert_msg(!vijp_drift_run(&s, &c, &err), "%s", err.msg);
        ck_assert(c.ref_prec == (starts[fi] ? 256 : 128));
        vijp_net net;
        vijp_problem pf, copy = {0};
        ck_assert(!vijp_problem_setup(&s.problem, &net, &pf, NULL));
        vijp_format copy_fmt = mpfr_fmt(pf.X.fmt->prec > 53 ? (long)pf.X.fmt->prec : 53), flo, fhi;
        vijp_problem_convert(&copy, &net, &pf, &copy_fmt);
        vijp_grads lo, hi;
        long p = c.ref_prec / 2;
        level(&net, &pf, &copy, p, &flo, &lo);
        level(&net, &pf, &copy, c.ref_prec, &fhi, &hi);
        vijp_mat *Hlo = inputs(&net, &pf, &copy, p), *Hhi = inputs(&net, &pf, &copy, c.ref_prec);
        const vijp_format *f = &s.problem.fmt;
        /* the validation's last comparison: the largest rel over the
         * cotangents, ∇x and the dense inputs, and the dense bounds */
        vijp_xnum agree = vijp_xnum_of(0);
        double bound = 0;
        for (size_t k = 0; k < 1 + 2 * lo.depth; k++) {
            const vijp_mat *a = grads_mat(&lo, k), *b = grads_mat(&hi, k);
            if (!a->rows) continue;
            if (k > lo.depth) { /* dense (the only layers with θ here): its input instead */
                size_t i = k - 1 - lo.depth;
                a = &Hlo[i], b = &Hhi[i];
                double r = half_formed(&net, &copy, i, &Hhi[i], &hi, p);
                ck_assert_msg(r >= 0 && r <= ldexp(1, -(int)p / 2), "layer %zu's bound %g", i + 1, r);
                if (r > bound) bound = r;
            }
            vijp_metric m;
            vijp_compare_rel_ulps(a, b, f, &m, NULL);
            agree = vijp_xnum_max_nan(agree, m.rel);
        }
        double agreed = vijp_xnum_double(c.ref_agreement), measured = vijp_xnum_double(agree);
        double least = fmax(measured, bound * (1 - 0x1p-20)), most = fmax(measured, bound * (1 + 0x1p-20));
        ck_assert_msg(least <= agreed && agreed <= most, "%s: agreement %a, want %a (measured) or %a (bounds)",
                      formats[fi], agreed, measured, bound);
        if (measured > bound * (1 + 0x1p-20))
            ck_assert_msg(same_x(agree, c.ref_agreement), "%s: agreement %a, the curve's %a", formats[fi], agree.m,
                          c.ref_agreement.m);
        inputs_free(Hlo, net.depth), inputs_free(Hhi, net.depth);
        vijp_format fq = mpfr_fmt((long)vijp_compare_prec(f));
        if (fq.prec < fhi.prec) rounded(&hi, &fq);
        for (size_t k = 0; k < c.n_runs; k++) {
            vijp_grads got;
            ck_assert(vijp_engine_run(c.runs[k].engine, &net, pf.theta, &pf.X, &pf.T, &got, NULL) == 0);
            vijp_metric m;
            vijp_compare(&got.grad_x, &hi.grad_x, f, &m);
            ck_assert_msg(same_metric(&m, &c.runs[k].x), "%s from %ld, run %zu: ∇x", formats[fi], starts[fi], k);
            for (size_t i = 0; i < net.depth; i++) {
                vijp_compare(&got.g[i], &hi.g[i], f, &m);
                ck_assert_msg(same_metric(&m, &c.runs[k].g[i]), "%s from %ld, run %zu: g_%zu rel %a, the curve's %a",
                              formats[fi], starts[fi], k, i + 1, m.rel.m, c.runs[k].g[i].rel.m);
                if (!got.grad_theta[i].rows) continue;
                vijp_compare(&got.grad_theta[i], &hi.grad_theta[i], f, &m);
                ck_assert_msg(same_metric(&m, &c.runs[k].theta[i]), "%s, run %zu: ∇θ_%zu", formats[fi], k, i + 1);
            }
            vijp_grads_clear(&got);
        }
        vijp_grads_clear(&lo), vijp_grads_clear(&hi);
        vijp_problem_clear(&copy, &net), vijp_problem_clear(&pf, &net);
        vijp_net_free(&net);
        vijp_drift_curve_clear(&c);
        vijp_drift_memo_free(s.memo);
    }
}
END_TEST

/* ---- a packed matrix is read only ---------------------------------------- */

/* misuse(k, fmt) in a child, its stderr read here: the child must stop
 * with SIGABRT and say `says`. */
static void expect_stopped(void (*misuse)(int, const char *), int k, const char *fmt, const char *says)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        misuse(k, fmt);
        _exit(0); /* not refused */
    }
    close(fd[1]);
    char msg[512] = {0};
    ssize_t got = read(fd[0], msg, sizeof msg - 1);
    close(fd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s helper %d: not stopped", fmt, k);
    ck_assert_msg(got > 0 && strstr(msg, says), "%s helper %d: said '%s'", fmt, k, msg);
}

/* Helper k writes into a packed matrix (the format is mpfr:128's). */
static void write_packed(int k, const char *fmt)
{
    (void)fmt;
    vijp_format f = mpfr_fmt(128);
    vijp_mat a, p;
    vijp_mat_init(&a, 4, 1, &f);
    vijp_mat_pack_copy(&p, &a, &f);
    double d[4] = {1, 2, 3, 4};
    switch (k) {
    case 0: vijp_mat_zero(&p); break;
    case 1: vijp_mat_set_d(&p, d); break;
    case 2: vijp_mat_copy(&p, &a); break;
    case 3: vijp_mat_sub(&a, &p, &a); break;
    case 4: vijp_mat_convert(&p, &a); break;
    default: vijp_mat_store(&p); break;
    }
}

/* vijp_mat_check_finite on a packed matrix reads its kind bytes first, on
 * doubles their exponent fields: all numbers (zeros too) pass; one NaN,
 * +Inf or −Inf anywhere is found and named as in the MPFR-held matrix. */
START_TEST(check_finite_on_packed)
{
    vijp_format f = mpfr_fmt(128);
    for (int special = 0; special < 4; special++)
        for (size_t at = 0; at < 37; at += 12) {
            vijp_mat R, P;
            vijp_mat_init(&R, 37, 1, &f);
            for (size_t i = 0; i < 37; i++) mpfr_set_si(R.m[i], (long)i % 5 - 2, MPFR_RNDN); /* zeros among them */
            if (special == 1) mpfr_set_nan(R.m[at]);
            if (special == 2) mpfr_set_inf(R.m[at], 1);
            if (special == 3) mpfr_set_inf(R.m[at], -1);
            vijp_mat_pack_copy(&P, &R, &f);
            vijp_format fd;
            vijp_format_fixed(&fd, VIJP_DOUBLE);
            vijp_mat D;
            vijp_mat_init(&D, 37, 1, &fd);
            vijp_mat_convert(&D, &R);
            vijp_error e1 = {0}, e2 = {0}, e3 = {0};
            int r1 = vijp_mat_check_finite(&P, "m", &e1), r2 = vijp_mat_check_finite(&R, "m", &e2),
                r3 = vijp_mat_check_finite(&D, "m", &e3);
            ck_assert_msg(r1 == r2 && r3 == r2 && (special ? r1 != 0 : r1 == 0) && !strcmp(e1.msg, e2.msg) &&
                              !strcmp(e3.msg, e2.msg),
                          "special %d at %zu: packed %d '%s', doubles %d '%s', MPFR-held %d '%s'", special, at, r1,
                          e1.msg, r3, e3.msg, r2, e2.msg);
            vijp_mat_clear(&R), vijp_mat_clear(&P), vijp_mat_clear(&D);
        }
    vijp_mat none = {0}; /* a cleared matrix: nothing to check */
    ck_assert(!vijp_mat_check_finite(&none, "m", NULL));
}
END_TEST

START_TEST(packed_is_read_only)
{
    for (int k = 0; k < 6; k++) expect_stopped(write_packed, k, "mpfr:128", "packed");
}
END_TEST

/* Helper k past a matrix's end, or between two shapes, in format fmt (it
 * read or wrote past the block: an ASan heap overflow, or a crash in MPFR,
 * in the review that found it). */
static void past_the_end(int k, const char *fmt)
{
    vijp_format f;
    if (vijp_format_parse(fmt, &f, NULL)) _exit(3);
    vijp_mat a, b, c;
    vijp_mat_init(&a, 4, 1, &f), vijp_mat_init(&b, 3, 1, &f), vijp_mat_init(&c, 2, 2, &f);
    switch (k) {
    case 0: vijp_mat_copy(&a, &b); break;              /* from a smaller one */
    case 1: vijp_mat_copy(&a, &c); break;              /* the same length, another shape */
    case 2: vijp_mat_set_entry_d(&a, 4, 1.0); break;   /* one past the end */
    case 3: (void)vijp_mat_get_d(&b, 3); break;
    default: vijp_mat_copy_range(&a, 2, &b, 0, 3); break; /* a range past the end */
    }
}

START_TEST(out_of_range_stopped)
{
    static const char *const fmts[] = {"double", "mpfr:64", "bfloat16+binary32"};
    for (size_t f = 0; f < 3; f++)
        for (int k = 0; k < 5; k++) expect_stopped(past_the_end, k, fmts[f], "matri");
}
END_TEST

/* Whether this kernel populates a range on request (MADV_POPULATE_WRITE,
 * Linux 5.14): a mapping of its own asked once. */
static int kernel_populates(void)
{
#ifdef MADV_POPULATE_WRITE
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 0;
    int ok = madvise(m, (size_t)page, MADV_POPULATE_WRITE) == 0;
    munmap(m, (size_t)page);
    return ok;
#else
    return 0;
#endif
}

/* A packed block of 256 KiB or more is resident when it is made, before
 * any value is written (base/heap.h's vijp_heap_populate: one call rather
 * than a fault a page as the values are first written): every whole page
 * inside its limbs, by mincore.  Where the kernel cannot populate, the
 * test says so and checks nothing. */
START_TEST(large_block_resident_when_made)
{
    if (!kernel_populates()) {
        fputs("# large_block_resident_when_made: skipped, the kernel has no MADV_POPULATE_WRITE\n", stderr);
        return;
    }
    vijp_format f;
    ck_assert(!vijp_format_mpfr(&f, 170, NULL));
    vijp_mat a;
    vijp_mat_init_packed(&a, 1 << 16, 1, &f); /* 26 bytes a value: 1.7 MB */
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t mask = (uintptr_t)page - 1, lo = ((uintptr_t)a.packed->sig + mask) & ~mask,
              hi = (uintptr_t)(a.packed->sig + a.packed->n * a.packed->limbs) & ~mask;
    ck_assert(hi > lo);
    size_t pages = (hi - lo) / (size_t)page, resident = 0;
    unsigned char *vec = malloc(pages);
    ck_assert_ptr_nonnull(vec);
    ck_assert_int_eq(mincore((void *)lo, hi - lo, vec), 0);
    for (size_t k = 0; k < pages; k++) resident += vec[k] & 1;
    ck_assert_msg(resident == pages, "%zu of the block's %zu pages resident before a write", resident, pages);
    free(vec);
    vijp_mat_clear(&a);
}
END_TEST

Suite *suite_packed(void)
{
    Suite *s = suite_create("packed");
    TCase *tc = tcase_create("packed");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pack_round_trip);
    tcase_add_test(tc, packing_in_place);
    tcase_add_test(tc, pack_rounded_to_nearest);
    tcase_add_test(tc, metrics_on_packed);
    tcase_add_test(tc, drift_curve_matches_unpacked_reference);
    tcase_add_test(tc, packed_is_read_only);
    tcase_add_test(tc, out_of_range_stopped);
    tcase_add_test(tc, check_finite_on_packed);
    tcase_add_test(tc, large_block_resident_when_made);
    suite_add_tcase(s, tc);
    return s;
}

/* vijp_mat_pack and its two forms (vijp/mat.h): an mpfr:P matrix's values
 * moved into the packed holding (packed.h), exactly or rounded to nearest. */
#include "vijp/mat.h"
#include "vijp/error.h"
#include "packed.h"
#include "base/heap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A misuse of a packed matrix, or a packing MPFR's ranges cannot hold:
 * programming errors, reported and stopped (vijp/mat.h). */
static void refuse(const char *who, const char *why)
{
    fprintf(stderr, "vijp: %s: %s\n", who, why);
    abort();
}

/* A block for n values of prec bits: the header, then the limbs and the
 * heads (in that order each array stays aligned: the header and the limbs
 * are whole limbs). */
static vijp_packed *block_new(size_t n, mpfr_prec_t prec)
{
    size_t limbs = mpfr_custom_get_size(prec) / sizeof(mp_limb_t);
    size_t head = (sizeof(vijp_packed) + sizeof(mp_limb_t) - 1) / sizeof(mp_limb_t) * sizeof(mp_limb_t);
    if (n && vijp_packed_value_bytes(prec) > (SIZE_MAX - head) / n) vijp_out_of_memory(SIZE_MAX);
    char *b = vijp_alloc_unset(head + n * vijp_packed_value_bytes(prec));
    vijp_heap_populate(b, head + n * vijp_packed_value_bytes(prec)); /* every value is written next */
    vijp_packed *p = (vijp_packed *)(void *)b;
    p->prec = prec, p->limbs = limbs, p->n = n;
    p->sig = (mp_limb_t *)(void *)(b + head);
    p->head = (uint16_t *)(void *)(b + head + n * limbs * sizeof(mp_limb_t));
    p->wide = NULL;
    return p;
}

void vijp_packed_put_wide(vijp_packed *p, size_t i, long e, int neg)
{
    if (e < INT32_MIN || e > INT32_MAX)
        refuse("vijp_mat_pack", "an exponent beyond 32 bits (MPFR's exponent range widened past its default)");
    /* made once, by whichever thread gets there first: the drift reference
     * fills one block from several (drift/outer.c) */
    int32_t *w = __atomic_load_n(&p->wide, __ATOMIC_ACQUIRE);
    if (!w) {
        int32_t *mine = vijp_alloc_array(p->n, sizeof *mine);
        if (__atomic_compare_exchange_n(&p->wide, &w, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) w = mine;
        else free(mine);
    }
    w[i] = (int32_t)e;
    p->head[i] = (uint16_t)(MPFR_REGULAR_KIND | (neg ? VIJP_PACKED_NEG : 0));
}

/* Value i's kind, sign and exponent from x, whose limbs (where x is a
 * regular number) are already in slot i; a zero, NaN or Inf slot zeroed. */
static void put_meta(vijp_packed *p, size_t i, mpfr_srcptr x)
{
    int kind = mpfr_nan_p(x) ? MPFR_NAN_KIND : mpfr_inf_p(x) ? MPFR_INF_KIND : mpfr_zero_p(x) ? MPFR_ZERO_KIND
                                                                                                : MPFR_REGULAR_KIND;
    int neg = mpfr_signbit(x) != 0; /* NaN's sign too */
    if (kind != MPFR_REGULAR_KIND) {
        memset(p->sig + i * p->limbs, 0, p->limbs * sizeof *p->sig);
        vijp_packed_put_special(p, i, kind, neg);
    } else
        vijp_packed_put_regular(p, i, (long)mpfr_get_exp(x), neg);
}

/* Value i of p := x rounded to p's precision, to nearest: mpfr_set into an
 * MPFR view of the slot (MPFR's custom interface), so that the rounding,
 * its ties to even and an overflow past emax are mpfr_set's own; then the
 * view's kind, sign and exponent (put_meta). */
static void put(vijp_packed *p, size_t i, mpfr_srcptr x)
{
    mpfr_t v;
    mpfr_custom_init_set(v, MPFR_ZERO_KIND, 0, p->prec, p->sig + i * p->limbs);
    mpfr_set(v, x, MPFR_RNDN);
    put_meta(p, i, v);
}

/* put, for an x of the block's own precision: its limbs copied as they are,
 * which is what mpfr_set does there, less its dispatch and a memcpy call
 * per value (2.2 ns a value in cache against 4.5 at 212 bits; a depth-256
 * dense:256 reference packs 34M values this way, each level's as it goes). */
static void put_same(vijp_packed *p, size_t i, mpfr_srcptr x)
{
    if (mpfr_regular_p(x)) {
        mp_limb_t *s = p->sig + i * p->limbs;
        const mp_limb_t *from = mpfr_custom_get_significand(x);
        for (size_t k = 0; k < p->limbs; k++) s[k] = from[k];
    }
    put_meta(p, i, x);
}

static int plain_mpfr(const vijp_format *f) { return f->kind == VIJP_MPFR && !f->emulated && !f->mixed; }

void vijp_mat_init_packing(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt)
{
    if (!plain_mpfr(fmt)) refuse("vijp_mat_init_packing", "holds an mpfr:P format only");
    size_t n = rows * cols;
    vijp_packed *p = block_new(n, fmt->prec);
    if (n > SIZE_MAX / sizeof(mpfr_t)) vijp_out_of_memory(SIZE_MAX);
    mpfr_t *m = vijp_alloc_unset((n ? n : 1) * sizeof *m); /* each written below, whole */
    for (size_t i = 0; i < n; i++) {
        mp_limb_t *s = p->sig + i * p->limbs;
        mpfr_custom_init(s, fmt->prec);
        mpfr_custom_init_set(m[i], MPFR_ZERO_KIND, 0, fmt->prec, s);
    }
    memset(a, 0, sizeof *a);
    a->rows = rows, a->cols = cols, a->fmt = fmt;
    a->m = m, a->packed = p;
}

void vijp_mat_init_packed(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt)
{
    if (!plain_mpfr(fmt)) refuse("vijp_mat_init_packed", "holds an mpfr:P format only");
    memset(a, 0, sizeof *a);
    a->rows = rows, a->cols = cols, a->fmt = fmt;
    a->packed = block_new(rows * cols, fmt->prec);
}

/* vijp_mat_pack of a matrix from vijp_mat_init_packing: each value's
 * head into the block (put_same's, without the limbs,
 * which are in place), then the structs go.  Where a significand pointer
 * has left its slot (mpfr_swap exchanges them) the values are copied into
 * a new block instead, as an MPFR-held matrix's are. */
static void finish_packing(vijp_mat *a)
{
    vijp_packed *p = a->packed;
    for (size_t i = 0; i < p->n; i++)
        if (mpfr_custom_get_significand(a->m[i]) != (void *)(p->sig + i * p->limbs)) {
            vijp_mat_pack_rounded(a, a->fmt); /* exact: the values' own precision */
            return;
        }
    for (size_t i = 0; i < p->n; i++) put_meta(p, i, a->m[i]);
    free(a->m);
    a->m = NULL;
}

void vijp_mat_pack_copy(vijp_mat *dst, const vijp_mat *src, const vijp_format *fmt)
{
    if (!plain_mpfr(fmt) || (!src->m && !src->packed))
        refuse("vijp_mat_pack", "packs MPFR-held or packed values into an mpfr:P format only");
    size_t n = vijp_mat_len(src);
    vijp_packed *p = block_new(n, fmt->prec);
    mpfr_t view;
    for (size_t i = 0; i < n; i++) {
        if (!src->m) vijp_packed_view(src->packed, i, view); /* src->m first: vijp_mat_init_packing's */
        mpfr_srcptr x = src->m ? src->m[i] : view;
        if (mpfr_get_prec(x) == p->prec) put_same(p, i, x);
        else put(p, i, x);
    }
    memset(dst, 0, sizeof *dst);
    dst->rows = src->rows, dst->cols = src->cols, dst->fmt = fmt, dst->sr = src->sr;
    dst->packed = p;
}

/* Value i of q (a narrower layout of the same block: its head still
 * value i's) := the regular value whose L limbs are s (a
 * scratch copy, rounded in place), rounded to q's precision by its limbs
 * (vijp_limbs_round: mpfr_set's rounding, where mpfr_set took 20 ns a
 * value: the drift reference's upper level rounded to the comparisons'
 * precision, 16.8M values a level at dense:256, depth 256).  0, nothing
 * written to q: not a regular value, or a carry past MPFR's largest
 * exponent (put then: mpfr_set's overflow). */
static int round_limbs(vijp_packed *q, size_t i, mp_limb_t *s, size_t L)
{
    if (vijp_packed_kind(q, i) != MPFR_REGULAR_KIND) return 0;
    long e = vijp_packed_exp(q, i);
    vijp_limbs_round(s, (int)L, (long)q->prec, &e); /* q narrower: L >= q->limbs */
    if (e > mpfr_get_emax() || e > INT32_MAX) return 0;
    memcpy(q->sig + i * q->limbs, s + L - q->limbs, q->limbs * sizeof *s);
    vijp_packed_put_regular(q, i, e, vijp_packed_neg(q, i));
    return 1;
}

/* put, by its limbs where it can: an x of the block's precision copied
 * (put_same), a regular wider one of at most SET_LIMBS limbs rounded by
 * round_limbs (mpfr_set's rounding, at a fraction of its cost: the drift
 * reference's batch parameter gradients are set so, 16.8M values a layer
 * at dense:4096, drift/outer.c); else mpfr_set's. */
#define SET_LIMBS 16
void vijp_packed_set(vijp_packed *p, size_t i, mpfr_srcptr x)
{
    mpfr_prec_t px = mpfr_get_prec(x);
    if (px == p->prec) {
        put_same(p, i, x);
        return;
    }
    size_t L = (size_t)(px + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS;
    if (px > p->prec && L <= SET_LIMBS && mpfr_regular_p(x) && mpfr_get_exp(x) <= INT32_MAX &&
        mpfr_get_exp(x) >= INT32_MIN) {
        mp_limb_t s[SET_LIMBS];
        memcpy(s, mpfr_custom_get_significand(x), L * sizeof *s);
        vijp_packed_put_regular(p, i, (long)mpfr_get_exp(x), mpfr_signbit(x) != 0);
        if (round_limbs(p, i, s, L)) return;
    }
    put(p, i, x);
}

/* vijp_mat_pack_rounded of a packed a into fewer bits, in its own block
 * (the drift reference rounded to the comparisons' precision: a new block
 * was a fresh page for every value, 5% of a depth-256 dense:256 curve in
 * perf).  Value i goes to slot i of the narrower layout, which starts no
 * later than its old slot and ends before value i + 1's: each value is
 * copied out before its slot is written (put: mpfr_set's rounding, as
 * vijp_mat_pack_copy's), its head written in place in the old array,
 * which lies past every new slot; that array then moves down behind the
 * new slots, and the block shrinks (the side array of wide exponents,
 * indexed by value, stays as it is). */
static void round_in_place(vijp_mat *a, const vijp_format *fmt)
{
    vijp_packed *p = a->packed, narrow = *p;
    size_t n = p->n, head = (size_t)((char *)p->sig - (char *)p);
    narrow.prec = fmt->prec, narrow.limbs = mpfr_custom_get_size(fmt->prec) / sizeof(mp_limb_t);
    mp_limb_t *old = vijp_alloc_unset(p->limbs * sizeof *old);
    for (size_t i = 0; i < n; i++) {
        memcpy(old, vijp_packed_sig(p, i), p->limbs * sizeof *old); /* the slot is about to be written */
        if (round_limbs(&narrow, i, old, p->limbs)) continue;
        memcpy(old, vijp_packed_sig(p, i), p->limbs * sizeof *old); /* unwritten yet; round_limbs rounded the copy */
        mpfr_t x;
        vijp_packed_view(p, i, x);
        mpfr_custom_move(x, old);
        put(&narrow, i, x);
    }
    free(old);
    memmove(narrow.sig + n * narrow.limbs, p->head, n * sizeof *p->head);
    int32_t *wide = narrow.wide; /* put_regular may have made it in narrow */
    p = vijp_realloc(p, head + n * vijp_packed_value_bytes(fmt->prec));
    p->prec = narrow.prec, p->limbs = narrow.limbs, p->wide = wide;
    p->sig = (mp_limb_t *)(void *)((char *)p + head);
    p->head = (uint16_t *)(void *)(p->sig + n * p->limbs);
    a->packed = p, a->fmt = fmt;
}

void vijp_mat_pack_rounded(vijp_mat *a, const vijp_format *fmt)
{
    if (a->packed && !a->m && plain_mpfr(fmt) && (mpfr_prec_t)fmt->prec == a->packed->prec) {
        a->fmt = fmt; /* held at that precision already: rounding changes nothing */
        return;
    }
    if (a->packed && !a->m && plain_mpfr(fmt) && fmt->prec < a->packed->prec) {
        round_in_place(a, fmt);
        return;
    }
    vijp_mat r;
    vijp_mat_pack_copy(&r, a, fmt);
    vijp_mat_clear(a);
    *a = r;
}

void vijp_mat_pack(vijp_mat *a)
{
    if (a->packed && a->m) finish_packing(a);
    else if (!a->packed) vijp_mat_pack_rounded(a, a->fmt); /* exact: the values' own precision */
}

/* The packed holding of an mpfr:P matrix (vijp/mat.h: vijp_mat.packed):
 * its values as two arrays in one block, the significands' limbs (value
 * i at sig + i·limbs, MPFR's own layout, so that a value is read in place
 * as an MPFR view) and a 16-bit head of sign, kind and exponent.  At 128
 * bits 18 bytes a value instead of an MPFR-held one's 48 (32 for the
 * mpfr_t, 16 for the limbs): the drift study's reference levels and the
 * reference it keeps are millions of values written once and read by the
 * comparisons (src/drift/memo.c, src/compare/).  Internal to src/:
 * format/ makes and frees it, compare/ reads it through the functions
 * below. */
#ifndef VIJP_FORMAT_PACKED_H
#define VIJP_FORMAT_PACKED_H

#include "vijp/mat.h"
#include <gmp.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdlib.h>

/* A head: the sign in the top bit (NaN keeps its sign too, which
 * mpfr_custom_get_kind alone would drop); below it MPFR's kind for a NaN,
 * an Inf or a zero (MPFR_NAN_KIND … MPFR_ZERO_KIND: 0, 1, 2), and for a
 * regular value its exponent plus VIJP_PACKED_BIAS, from
 * VIJP_PACKED_EXP_MIN (code 4) to VIJP_PACKED_EXP_MAX (code 0x7fff): every
 * exponent of a value that fits a double (−1073 … 1024) many times over.
 * A regular value beyond them has code 3 (MPFR_REGULAR_KIND) and its
 * exponent in the block's side array wide[] (32 bits, allocated at the
 * first such value: MPFR's default range reaches ±2^30, and an mpfr:P
 * format's reference can leave a double's far behind). */
enum { VIJP_PACKED_NEG = 0x8000, VIJP_PACKED_CODE = 0x7fff, VIJP_PACKED_BIAS = 16388 };
#define VIJP_PACKED_EXP_MIN (4L - VIJP_PACKED_BIAS)
#define VIJP_PACKED_EXP_MAX (0x7fffL - VIJP_PACKED_BIAS)

struct vijp_packed {
    mpfr_prec_t prec; /* every value's */
    size_t limbs;     /* per value: ⌈prec / GMP_NUMB_BITS⌉ */
    size_t n;
    mp_limb_t *sig;   /* n·limbs; zero limbs for zeros, NaN and Inf */
    uint16_t *head;   /* n heads */
    int32_t *wide;    /* NULL, or n exponents, read where a head's code is 3 */
};

/* Bytes a value of prec bits takes packed (the block's header, and a side
 * array of wide exponents, aside). */
static inline size_t vijp_packed_value_bytes(mpfr_prec_t prec)
{
    return mpfr_custom_get_size(prec) + sizeof(uint16_t);
}

static inline int vijp_packed_kind(const vijp_packed *p, size_t i)
{
    unsigned c = p->head[i] & VIJP_PACKED_CODE;
    return c < MPFR_REGULAR_KIND ? (int)c : MPFR_REGULAR_KIND;
}
static inline int vijp_packed_neg(const vijp_packed *p, size_t i) { return (p->head[i] & VIJP_PACKED_NEG) != 0; }
/* A regular value's exponent. */
static inline long vijp_packed_exp(const vijp_packed *p, size_t i)
{
    unsigned c = p->head[i] & VIJP_PACKED_CODE;
    return c == MPFR_REGULAR_KIND ? (long)p->wide[i] : (long)c - VIJP_PACKED_BIAS;
}
static inline const mp_limb_t *vijp_packed_sig(const vijp_packed *p, size_t i) { return p->sig + i * p->limbs; }

/* Value i's head := a NaN, an Inf or a zero (kind) of sign neg. */
static inline void vijp_packed_put_special(vijp_packed *p, size_t i, int kind, int neg)
{
    p->head[i] = (uint16_t)((unsigned)kind | (neg ? VIJP_PACKED_NEG : 0));
}
/* Value i's head := a regular value of exponent e (within 32 bits) and
 * sign neg, its limbs the caller's; e beyond the heads' range goes to the
 * side array (packed.c). */
void vijp_packed_put_wide(vijp_packed *p, size_t i, long e, int neg);
static inline void vijp_packed_put_regular(vijp_packed *p, size_t i, long e, int neg)
{
    if (e < VIJP_PACKED_EXP_MIN || e > VIJP_PACKED_EXP_MAX) vijp_packed_put_wide(p, i, e, neg);
    else p->head[i] = (uint16_t)((unsigned long)(e + VIJP_PACKED_BIAS) | (neg ? VIJP_PACKED_NEG : 0));
}

/* Frees p and its side array (NULL: nothing). */
static inline void vijp_packed_free(vijp_packed *p)
{
    if (p) free(p->wide);
    free(p);
}

/* An mpfr:P matrix (fmt plain MPFR) held in MPFR whose significands are
 * already the slots of its packed block: a->m the mpfr_t structs, each
 * pointing at its slot, and a->packed the block, whose heads are filled
 * only by vijp_mat_pack.  Until then a is MPFR-held in
 * every respect (written and read through a->m: readers take a->m first
 * wherever both are set); vijp_mat_pack then fills the heads
 * and frees the structs, without copying a limb.  For matrices written
 * whole and then packed: the drift reference's parameter gradients
 * (engines/watch.h), where packing copied every limb a second time. */
void vijp_mat_init_packing(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt);

/* A packed mpfr:P matrix (fmt plain MPFR) whose every value the caller
 * then writes in place: its limbs and head (vijp_packed_put_regular,
 * _special), or vijp_packed_set. */
void vijp_mat_init_packed(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt);

/* Value i of p := x rounded to nearest to p's precision (mpfr_set's
 * rounding, its overflow to Inf past emax), with its kind and sign. */
void vijp_packed_set(vijp_packed *p, size_t i, mpfr_srcptr x);

/* a[0..n) (least significant limb first, a[n − 1]'s top bit set: a
 * regular value's significand) rounded to nearest, ties to even, at prec
 * bits (prec <= 64·n), as mpfr_set rounds: the bits below prec cleared
 * in the lowest limb kept (the limbs below it are left as they are: the
 * caller reads the top ⌈prec/64⌉), a carry out of the top making it the
 * next power of two, *e (its exponent) one up.  Rounding a packed level
 * to fewer bits (packed.c) and the drift memo's products (drift/outer.c). */
static inline __attribute__((always_inline)) void vijp_limbs_round(mp_limb_t *a, int n, long prec, long *e)
{
    int keep = (int)((unsigned long)(prec + 63) >> 6), lo = n - keep; /* prec > 0: a shift, not a division */
    unsigned sh = (unsigned)(64L * keep - prec);
    mp_limb_t unit = (mp_limb_t)1 << sh, sticky = 0;
    int up = 0;
    if (sh) {
        mp_limb_t below = a[lo] & (unit - 1), half = unit >> 1;
        for (int k = 0; k < lo; k++) sticky |= a[k];
        up = below > half || (below == half && (sticky || (a[lo] & unit)));
        a[lo] -= below;
    } else if (lo > 0) { /* the round bit is the top of the limb below */
        for (int k = 0; k < lo - 1; k++) sticky |= a[k];
        up = (a[lo - 1] >> 63) && ((a[lo - 1] << 1) || sticky || (a[lo] & 1));
    }
    if (up) {
        mp_limb_t c = unit;
        for (int k = lo; k < n && c; k++) a[k] += c, c = a[k] < c;
        if (c) a[n - 1] = (mp_limb_t)1 << 63, ++*e; /* all ones rounded up */
    }
}


/* v := a read-only MPFR view of value i (no copy: v's significand is the
 * block's).  Only read v (as an operand, mpfr_set's source, …); never
 * write it, nor mpfr_clear it. */
static inline void vijp_packed_view(const vijp_packed *p, size_t i, mpfr_ptr v)
{
    int k = vijp_packed_kind(p, i), neg = vijp_packed_neg(p, i);
    mpfr_custom_init_set(v, neg ? -k : k, k == MPFR_REGULAR_KIND ? vijp_packed_exp(p, i) : 0, p->prec,
                         (void *)(p->sig + i * p->limbs));
    if (neg && k == MPFR_NAN_KIND) mpfr_setsign(v, v, 1, MPFR_RNDN); /* the sign field alone (a NaN, same object) */
}

#endif

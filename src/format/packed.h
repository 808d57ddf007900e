/* The packed holding of an mpfr:P matrix (vijp/mat.h: vijp_mat.packed):
 * its values as three arrays in one block, the significands' limbs (value
 * i at sig + i·limbs, MPFR's own layout, so that a value is read in place
 * as an MPFR view), the exponents in 32 bits and a byte of kind and sign.
 * At 128 bits 21 bytes a value instead of an MPFR-held one's 48 (32 for
 * the mpfr_t, 16 for the limbs): the drift study's reference levels and
 * the reference it keeps are millions of values written once and read by
 * the comparisons (src/drift/memo.c, src/compare/).  Internal to src/:
 * format/ makes and frees it, compare/ reads it through the functions
 * below. */
#ifndef VIJP_FORMAT_PACKED_H
#define VIJP_FORMAT_PACKED_H

#include "vijp/mat.h"
#include <gmp.h>
#include <mpfr.h>
#include <stdint.h>

/* kind: MPFR's kind (MPFR_NAN_KIND … MPFR_REGULAR_KIND, all below 4) in the
 * low bits, the sign bit above them; NaN keeps its sign too, which
 * mpfr_custom_get_kind alone would drop. */
enum { VIJP_PACKED_NEG = 4, VIJP_PACKED_KIND = 3 };

struct vijp_packed {
    mpfr_prec_t prec; /* every value's */
    size_t limbs;     /* per value: ⌈prec / GMP_NUMB_BITS⌉ */
    size_t n;
    mp_limb_t *sig;   /* n·limbs; zero limbs for zeros, NaN and Inf */
    int32_t *exp;     /* regular values' exponents (0 for the others) */
    uint8_t *kind;
};

/* Bytes a value of prec bits takes packed (the block's header aside). */
static inline size_t vijp_packed_value_bytes(mpfr_prec_t prec)
{
    return mpfr_custom_get_size(prec) + sizeof(int32_t) + sizeof(uint8_t);
}

/* An mpfr:P matrix (fmt plain MPFR) held in MPFR whose significands are
 * already the slots of its packed block: a->m the mpfr_t structs, each
 * pointing at its slot, and a->packed the block, whose exponents and
 * kinds are filled only by vijp_mat_pack.  Until then a is MPFR-held in
 * every respect (written and read through a->m: readers take a->m first
 * wherever both are set); vijp_mat_pack then fills the exponents and kinds
 * and frees the structs, without copying a limb.  For matrices written
 * whole and then packed: the drift reference's parameter gradients
 * (engines/watch.h), where packing copied every limb a second time. */
void vijp_mat_init_packing(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt);

/* A packed mpfr:P matrix (fmt plain MPFR) whose every value the caller
 * then writes in place: its limbs, exponent and kind-and-sign byte, or
 * vijp_packed_set. */
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

static inline int vijp_packed_kind(const vijp_packed *p, size_t i) { return p->kind[i] & VIJP_PACKED_KIND; }
static inline int vijp_packed_neg(const vijp_packed *p, size_t i) { return (p->kind[i] & VIJP_PACKED_NEG) != 0; }
static inline const mp_limb_t *vijp_packed_sig(const vijp_packed *p, size_t i) { return p->sig + i * p->limbs; }

/* v := a read-only MPFR view of value i (no copy: v's significand is the
 * block's).  Only read v (as an operand, mpfr_set's source, …); never
 * write it, nor mpfr_clear it. */
static inline void vijp_packed_view(const vijp_packed *p, size_t i, mpfr_ptr v)
{
    int k = vijp_packed_kind(p, i), neg = vijp_packed_neg(p, i);
    mpfr_custom_init_set(v, neg ? -k : k, p->exp[i], p->prec, (void *)(p->sig + i * p->limbs));
    if (neg && k == MPFR_NAN_KIND) mpfr_setsign(v, v, 1, MPFR_RNDN); /* the sign field alone (a NaN, same object) */
}

#endif

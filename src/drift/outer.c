/* The drift reference's dense parameter gradient, formed straight into
 * the packed block the memo holds it in (outer.h).  At batch 1: the reverse pass
 * would form each ∂W(i, k) = RN_P(g_i·x_k) in an MPFR-held matrix (an
 * mpfr_t struct and P bits of limbs a value), pack it and, at the upper
 * level, round it again to the comparisons' precision Q in a second pass:
 * at dense:256, depth 256, 16.8M values a level, most of whose cost is
 * the first touch of those bytes (a batch-1 curve's reference is mostly
 * writing and reading W² values).  Here the product of the two factors'
 * limbs is rounded to P and then to Q, as mpfr_mul and mpfr_set round
 * (nearest, ties to even), and written once, at Q.  At batch B >= 2 each
 * ∂W(i, k) is a sum of B products, which the layer's operator forms by
 * the reference's fast products into an MPFR-held matrix whose mpfr_t
 * structs (32 bytes a value: half a gigabyte for a dense:4096 layer)
 * point into the packed block; here the same operator forms ∂W a block of
 * columns at a time into a small MPFR matrix, each value then rounded to
 * Q into the packed block (vijp_packed_set: mpfr_set's rounding). */
#include "outer.h"
#include "base/fork.h"
#include "emu/dense_ref.h"
#include "format/packed.h"
#include "oracles/dot.h"
#include "vijp/error.h"
#include <gmp.h>
#include <limits.h>
#include <stdlib.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
/* Value idx of out := RN_Q(RN_P(a·b)) for regular a, b of at most four
 * limbs each (P <= 256; Q = out's precision, RN_Q exact where Q >= P);
 * 0, nothing written, where an exponent leaves MPFR's range or 32 bits
 * (the caller asks MPFR). */
static inline __attribute__((always_inline)) int product_n(vijp_packed *out, size_t idx, mpfr_srcptr a,
                                                           mpfr_srcptr b, long P, int na, int nb)
{
    typedef unsigned __int128 u128;
    const mp_limb_t *x = mpfr_custom_get_significand(a), *y = mpfr_custom_get_significand(b);
    mp_limb_t q[8] = {0}, *p = q + 8 - na - nb; /* the exact product at the top of q, zeros below */
#pragma GCC unroll 4
    for (int i = 0; i < na; i++) {
        mp_limb_t c = 0;
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            u128 t = (u128)x[i] * y[j] + p[i + j] + c;
            p[i + j] = (mp_limb_t)t, c = (mp_limb_t)(t >> 64);
        }
        p[i + nb] = c;
    }
    long e = (long)mpfr_get_exp(a) + (long)mpfr_get_exp(b);
    if (!(q[7] >> 63)) { /* two significands in [1/2, 1): their product in [1/4, 1) */
#pragma GCC unroll 8
        for (int k = 7; k > 0; k--) q[k] = q[k] << 1 | q[k - 1] >> 63;
        q[0] <<= 1, e--;
    }
    vijp_limbs_round(q, 8, P, &e); /* mpfr_mul's RN_P */
    if (e < mpfr_get_emin() || e > mpfr_get_emax()) return 0;
    long Q = (long)out->prec;
    int nP = (int)((unsigned long)(P + 63) >> 6), nQ = (int)out->limbs;
    if (nQ > 8) return 0;
    if (Q < P) vijp_limbs_round(q + 8 - nP, nP, Q, &e); /* the holding's RN_Q */
    else memset(q, 0, (size_t)(8 - nP) * sizeof *q); /* below P's limbs (RN_P leaves them): Q's are zeros */
    if (e < mpfr_get_emin() || e > mpfr_get_emax() || e < INT32_MIN || e > INT32_MAX) return 0;
    memcpy(out->sig + idx * out->limbs, q + 8 - nQ, (size_t)nQ * sizeof *q);
    vijp_packed_put_regular(out, idx, e, mpfr_signbit(a) != mpfr_signbit(b));
    return 1;
}

/* product_n with the limb counts the levels have (two at 106 bits, four
 * at 212) as constants, its loops unrolled; any other count as it comes. */
static int product(vijp_packed *out, size_t idx, mpfr_srcptr a, mpfr_srcptr b, long P)
{
    int na = (int)((mpfr_get_prec(a) + 63) / 64), nb = (int)((mpfr_get_prec(b) + 63) / 64);
    if (na == 2 && nb == 2) return product_n(out, idx, a, b, P, 2, 2);
    if (na == 4 && nb == 4) return product_n(out, idx, a, b, P, 4, 4);
    if (na > 4 || nb > 4) return 0;
    return product_n(out, idx, a, b, P, na, nb);
}
#endif

/* ∂b_i = Σ_b g(i, b) by vo_dot, as the operator forms it, at g's
 * precision, into value m·n + i of pk. */
static void bias_grad(vijp_packed *pk, const vijp_mat *g, size_t m, size_t n, const vijp_format *fmt)
{
    size_t B = g->cols;
    mpfr_t t;
    mpfr_init2(t, (mpfr_prec_t)fmt->prec);
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * B + 1, sizeof *ptrs);
    for (size_t i = 0; i < m; i++) {
        vo_dot_strided(t, NULL, &g->m[i], m, NULL, 0, B, ptrs);
        vijp_packed_set(pk, m * n + i, t);
    }
    free(ptrs);
    mpfr_clear(t);
}

/* A block's values packed at Q, over ranges of them on the format's
 * threads (base/fork.h): value e goes to its own slot and head
 * (vijp_packed_set; the side array of wide exponents is made once,
 * atomically, by whichever thread needs it first: packed.c), by the same
 * operations on any count. */
typedef struct {
    vijp_packed *pk;
    size_t first; /* the block's first value in pk */
    mpfr_t *w;
} pack_job;

static void pack_range(void *ctx, size_t part, size_t begin, size_t end)
{
    const pack_job *J = ctx;
    (void)part;
    for (size_t e = begin; e < end; e++) vijp_packed_set(J->pk, J->first + e, J->w[e]);
}

/* A batch's ∂W, cols columns (of W; rows of the inputs h) at a time: the
 * block's rows of h as a c × B view (its mpfr_t structs copied: they
 * point at h's limbs, read only), the layer narrowed to the block,
 * vijp_ref_dense_weight_grad's values then packed at Q. */
static void batch_param(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                        const vijp_format *held, size_t cols, vijp_mat *out)
{
    size_t m = L->out, n = L->in, B = h->cols;
    cols = cols < 1 ? 1 : cols > n ? n : cols;
    vijp_mat w;
    vijp_mat_init(&w, m, cols, fmt);
    mpfr_t *xs = vijp_alloc_array(cols * B, sizeof *xs);
    vijp_layer block = *L;
    vijp_mat_init_packed(out, m * n + m, 1, held);
    vijp_packed *pk = out->packed;
    for (size_t k0 = 0; k0 < n; k0 += cols) {
        size_t c = n - k0 < cols ? n - k0 : cols;
        block.in = c;
        for (size_t b = 0; b < B; b++)
            for (size_t k = 0; k < c; k++) xs[k + b * c][0] = h->m[k0 + k + b * n][0];
        if (vijp_ref_dense_weight_grad(&block, xs, B, g->m, w.m, fmt)) abort(); /* unreachable: vo_dot_fused */
        pack_job job = {pk, m * k0, w.m};
        vijp_fork(fmt->threads, m * c, DRIFT_OUTER_PACK_WORK * (double)(m * c), pack_range, &job);
    }
    bias_grad(pk, g, m, n, fmt);
    free(xs);
    vijp_mat_clear(&w);
}

/* drift_outer_param's case: a dense layer, MPFR-held factors of its shape,
 * a format whose dot products are rounded once. */
static int applies(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                   const vijp_format *held)
{
    return !strcmp(L->type->name, "dense") && L->out && L->in && h->cols == g->cols && h->cols && h->m && g->m &&
           h->rows == L->in &&
           g->rows == L->out && vo_dot_fused(fmt) && !vo_dot_hook_broken() && held->kind == VIJP_MPFR;
}

int drift_outer_param_blocks(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                             const vijp_format *held, size_t cols, vijp_mat *out)
{
    if (!applies(L, h, g, fmt, held) || h->cols < 2) return 0;
    batch_param(L, h, g, fmt, held, cols, out);
    return 1;
}

int drift_outer_param_forms(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                            const vijp_format *held)
{
    if (!applies(L, h, g, fmt, held)) return 0;
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
    return h->cols > 1 || fmt->prec <= 256;
#else
    return h->cols > 1;
#endif
}

int drift_outer_param(const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, const vijp_format *fmt,
                      const vijp_format *held, vijp_mat *out)
{
    size_t m = L->out, n = L->in;
    if (!drift_outer_param_forms(L, h, g, fmt, held)) return 0;
    if (h->cols > 1) {
        size_t value = sizeof(mpfr_t) + mpfr_custom_get_size((mpfr_prec_t)fmt->prec);
        return drift_outer_param_blocks(L, h, g, fmt, held, DRIFT_OUTER_BLOCK_BYTES / (m * value), out);
    }
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0 && defined(__SIZEOF_INT128__)
    long P = (long)fmt->prec; /* <= 256: drift_outer_param_forms */
    vijp_mat_init_packed(out, m * n + m, 1, held);
    vijp_packed *pk = out->packed;
    mpfr_t t;
    mpfr_init2(t, P);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < m; i++) {
            size_t e = i + k * m; /* W's column-major layout, as the layer's θ */
            mpfr_srcptr gi = g->m[i], xk = h->m[k];
            if (mpfr_regular_p(gi) && mpfr_regular_p(xk) && product(pk, e, gi, xk, P)) continue;
            vo_dot1(t, gi, xk); /* zeros (+0), NaN, Inf, the range's ends: as the layer's operator */
            vijp_packed_set(pk, e, t);
        }
    mpfr_srcptr ptrs[3];
    for (size_t i = 0; i < m; i++) { /* ∂b_i = Σ over the one sample of g_i: vo_dot, as the operator */
        vo_dot_strided(t, NULL, &g->m[i], m, NULL, 0, 1, ptrs);
        vijp_packed_set(pk, m * n + i, t);
    }
    mpfr_clear(t);
    return 1;
#else
    (void)n, (void)out;
    return 0; /* unreachable: drift_outer_param_forms forms no batch 1 here */
#endif
}

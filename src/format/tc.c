/* Tensor-core accumulation: the STORE+tc:ARCH formats' parameters, where
 * they come from, and the one exact emulation of a block step that every
 * matrix product of those formats goes through (vo_dot_acc, vo_madd).
 *
 * The model (Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of
 * NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021, for V100, T4 and
 * A100; Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores",
 * arXiv:2512.07004, 2025, whose MATLAB models, north-numerical-computing/
 * MATLAB-tensor-core, Generic_BFMA_TC.m and GEMM.m, were matched bit for
 * bit against V100, A100, H100 and B200 on 10^5 random inputs).  One block
 * FMA computes d = c + Σ_{i<k} a_i·b_i, k = tc_group:
 *   1. every product exact;
 *   2. the alignment exponent of each term: a product's is e(a) + e(b),
 *      the sum of its operands' exponents (IEEE convention, |x| in
 *      [2^e, 2^(e+1)); a subnormal operand takes its format's smallest
 *      normal exponent), so a product whose significand lies in [2, 4) is
 *      aligned as if unnormalised (the models' extra bit when the largest
 *      product is >= 2); c's is e(c), a subnormal's −126; E the largest
 *      over the nonzero terms;
 *   3. every term truncated toward zero to a multiple of
 *      2^(E − (tc_acc_prec − 1) − tc_align_bits): the significand of the
 *      largest term keeps tc_acc_prec bits and tc_align_bits more, smaller
 *      ones lose what is shifted out (no guard, round or sticky bit);
 *   4. the truncated terms summed exactly (the carry-out bits on the left
 *      suffice for every block: the models never overflow them);
 *   5. the sum normalised once and rounded to tc_acc_prec bits with
 *      binary32's exponent range (subnormals kept, ±Inf from 2^128 on):
 *      toward zero in every NVIDIA model with a binary32 output; to nearest
 *      even where tc_round_nearest says (binary16 outputs, which vijp never
 *      uses, and tests).
 * A dot product of n terms is ceil(n/k) such blocks in index order, each
 * taking the previous one's d as its c (GEMM.m's recursive summation; the
 * last block shorter, as zero padding gives).  Zero products take no part
 * in the alignment; NaN in, Inf·0, or +Inf with −Inf give NaN, any other
 * Inf that Inf.
 *
 * Hopper's FP8 (e4m3, e5m2) MMA keeps a 14-bit accumulator (tc_acc_prec
 * 14, its alignment 14 bits below the largest term: Khattak and Mikaitis's
 * neab = −10 against binary32's 24; SageAttention2 measured "FP22", 1 + 8
 * + 13 bits, truncated; the DeepSeek-V3 report says 14 bits of each
 * aligned product are kept, one fewer below the largest than this model
 * when its significand is >= 2: we follow the bit-accurate model).  Its
 * software promotion, DeepSeek-V3's and DeepGEMM's: every 128 products
 * (4 blocks of 32) the tensor core's accumulator is added into a binary32
 * register with an ordinary (round-to-nearest) addition and restarted
 * from zero (tc_promote; arith.c's vo_dot_acc, around this file's blocks). */
#include "tc.h"
#include "vijp/error.h"
#include <gmp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The operands a tensor core multiplies. */
enum { IN_F16 = 1, IN_BF16 = 2, IN_TF32 = 4, IN_FP8 = 8 };

/* One row per architecture and operand class (Khattak and Mikaitis's
 * V100TC.m, A100TC.m, H100TC.m, B200TC.m with binary32 output; docs/formats.md
 * tabulates them with the sources and where they disagree). */
static const struct tc_model {
    const char *arch;
    unsigned inputs;
    int group, align_bits, acc_prec, promote;
} models[] = {
    {"v100", IN_F16, 4, 0, 24, 0},            /* Fasi et al.: 4 products, no extra bit, RZ */
    {"a100", IN_F16 | IN_BF16, 8, 1, 24, 0},  /* Fasi et al.: 8 products (binary16, bfloat16) */
    {"a100", IN_TF32, 4, 1, 24, 0},           /* … and 4 with TF32 */
    {"h100", IN_F16 | IN_BF16, 16, 2, 24, 0}, /* Khattak and Mikaitis: fma 16, neab 2 */
    {"h100", IN_TF32, 8, 2, 24, 0},
    {"h100", IN_FP8, 32, 0, 14, 128},         /* fma 32 (two interleaved 16s), neab −10 */
    {"b200", IN_F16 | IN_BF16, 16, 2, 24, 0},
    {"b200", IN_TF32, 8, 2, 24, 0},
    {"b200", IN_FP8, 32, 2, 24, 0},           /* full binary32 accumulator (also DeepGEMM's B200 measurement) */
};
enum { N_MODELS = sizeof models / sizeof *models };

/* binary32's smallest normal exponent: the accumulator's range, 14 bits or 24. */
#define ACC_EMIN_NORMAL (-126L)
/* 2^128, the first value past binary32's range (IEEE convention exponent). */
#define ACC_EMAX_FIRST_OVER 128L

int vijp_tc_named(const char *s) { return strstr(s, "+tc:") != NULL; }

static unsigned input_class(const char *store, size_t n)
{
    static const struct {
        const char *name;
        unsigned cls;
    } stores[] = {{"binary16", IN_F16}, {"bfloat16", IN_BF16}, {"tf32", IN_TF32},  {"e4m3", IN_FP8},
                  {"e4m3:sat", IN_FP8}, {"e5m2", IN_FP8},     {"e5m2:sat", IN_FP8}};
    for (size_t i = 0; i < sizeof stores / sizeof *stores; i++)
        if (strlen(stores[i].name) == n && !strncmp(store, stores[i].name, n)) return stores[i].cls;
    return 0;
}

int vijp_tc_lookup(const char *s, vijp_tc_params *p, char *base, size_t size, vijp_error *err)
{
    const char *plus = strstr(s, "+tc:"), *arch = plus + 4;
    size_t n = (size_t)(plus - s);
    unsigned cls = input_class(s, n);
    if (!cls)
        return vijp_fail(err, VIJP_EINVAL, "format '%s': tensor cores take binary16, bfloat16, tf32, e4m3[:sat] or "
                         "e5m2[:sat] operands (STORE+tc:ARCH)", s);
    const struct tc_model *m = NULL;
    int arch_known = 0;
    for (size_t i = 0; i < N_MODELS && !m; i++) {
        if (strcmp(arch, models[i].arch)) continue;
        arch_known = 1;
        if (models[i].inputs & cls) m = &models[i];
    }
    if (!arch_known)
        return vijp_fail(err, VIJP_EINVAL, "format '%s': unknown tensor core '%s' (tc:v100, tc:a100, tc:h100, "
                         "tc:b200)", s, arch);
    if (!m)
        return vijp_fail(err, VIJP_EINVAL, "format '%s': %s's tensor cores take no %.*s operands (v100: binary16; "
                         "a100: binary16, bfloat16, tf32; h100, b200: those and e4m3, e5m2)", s, arch, (int)n, s);
    *p = (vijp_tc_params){m->group, m->align_bits, m->acc_prec, m->promote};
    snprintf(base, size, "%.*s+binary32", (int)n, s); /* tf32+binary32 included */
    return 0;
}

/* ---- the block step ---- */

/* Step 2's exponent: |x| in [2^e, 2^(e+1)), or emin_normal for a smaller
 * (subnormal) x.  MPFR's exponent is e + 1 (1/2 <= |m| < 1). */
static long align_exp(mpfr_srcptr x, long emin_normal)
{
    long e = (long)mpfr_get_exp(x) - 1;
    return e < emin_normal ? emin_normal : e;
}

typedef struct {
    mpfr_t *prod;   /* tc_group exact products */
    mpfr_t scaled;  /* a term over the quantum */
    mpz_t sum, term, rem, half;
} block_scratch;

/* Step 5: c := ±s·2^q rounded to p bits in binary32's exponent range. */
static void round_sum(mpfr_t c, mpz_t s, long q, const vijp_format *f, block_scratch *w)
{
    int neg = mpz_sgn(s) < 0;
    if (!neg && !mpz_sgn(s)) {
        mpfr_set_zero(c, 1); /* an exact zero sum: +0 */
        return;
    }
    mpz_abs(s, s);
    long p = f->tc_acc_prec, lead = q + (long)mpz_sizeinbase(s, 2) - 1; /* |sum| in [2^lead, 2^(lead+1)) */
    long r = lead - (p - 1) > ACC_EMIN_NORMAL - (p - 1) ? lead - (p - 1) : ACC_EMIN_NORMAL - (p - 1); /* result quantum */
    if (r > q) { /* drop r − q bits */
        mp_bitcnt_t drop = (mp_bitcnt_t)(r - q);
        mpz_tdiv_r_2exp(w->rem, s, drop);
        mpz_tdiv_q_2exp(s, s, drop); /* toward zero */
        if (f->tc_round_nearest) {   /* up past half the quantum, and at half to even */
            mpz_set_ui(w->half, 0);
            mpz_setbit(w->half, drop - 1);
            int cmp = mpz_cmp(w->rem, w->half);
            if (cmp > 0 || (cmp == 0 && mpz_odd_p(s))) mpz_add_ui(s, s, 1);
        }
        q = r;
    }
    if (!mpz_sgn(s)) mpfr_set_zero(c, neg ? -1 : 1); /* truncated below the smallest subnormal */
    else if (q + (long)mpz_sizeinbase(s, 2) - 1 >= ACC_EMAX_FIRST_OVER) mpfr_set_inf(c, neg ? -1 : 1);
    else {
        mpfr_set_z_2exp(c, s, q, MPFR_RNDN); /* exact: s has at most p <= 24 bits, c at least 24 */
        if (neg) mpfr_neg(c, c, MPFR_RNDN);
    }
}

/* Step 3 for one term x: sum += x / 2^q truncated toward zero. */
static void add_truncated(block_scratch *w, mpfr_srcptr x, long q)
{
    mpfr_mul_2si(w->scaled, x, -q, MPFR_RNDN); /* exact: a power of two, and x has at most 2·prec bits */
    mpfr_get_z(w->term, w->scaled, MPFR_RNDZ);
    mpz_add(w->sum, w->sum, w->term);
}

/* One block FMA: c := c + Σ_{i<k} a_i·b_i, steps 1 to 5 of the header. */
static void block(mpfr_t c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t k, const vijp_format *f,
                  block_scratch *w)
{
    long in_emin = (long)f->store_emin + (long)f->store_prec - 2; /* the smallest subnormal 2^(store_emin−1) is
                                                                    * 2^(emin_normal − (store_prec − 1)) */
    int nan = mpfr_nan_p(c), pinf = mpfr_inf_p(c) && !mpfr_signbit(c), ninf = mpfr_inf_p(c) && mpfr_signbit(c);
    long E = LONG_MIN;
    for (size_t i = 0; i < k; i++) {
        mpfr_mul(w->prod[i], a[i], b[i], MPFR_RNDN); /* exact: at least twice the operands' bits */
        if (mpfr_nan_p(w->prod[i])) nan = 1;
        else if (mpfr_inf_p(w->prod[i])) *(mpfr_signbit(w->prod[i]) ? &ninf : &pinf) = 1;
        else if (!mpfr_zero_p(w->prod[i]) && align_exp(a[i], in_emin) + align_exp(b[i], in_emin) > E)
            E = align_exp(a[i], in_emin) + align_exp(b[i], in_emin);
    }
    if (nan || (pinf && ninf)) {
        mpfr_set_nan(c);
        return;
    }
    if (pinf || ninf) {
        mpfr_set_inf(c, pinf ? 1 : -1);
        return;
    }
    int c_live = !mpfr_zero_p(c);
    if (c_live && align_exp(c, ACC_EMIN_NORMAL) > E) E = align_exp(c, ACC_EMIN_NORMAL);
    if (E == LONG_MIN) { /* every term zero */
        mpfr_set_zero(c, 1);
        return;
    }
    long q = E - (f->tc_acc_prec - 1) - f->tc_align_bits; /* the aligned sum's last bit */
    mpz_set_ui(w->sum, 0);
    for (size_t i = 0; i < k; i++)
        if (!mpfr_zero_p(w->prod[i])) add_truncated(w, w->prod[i], q);
    if (c_live) add_truncated(w, c, q);
    round_sum(c, w->sum, q, f, w);
}

void vijp_tc_blocks(mpfr_t c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n, const vijp_format *f)
{
    size_t g = (size_t)f->tc_group;
    block_scratch w;
    w.prod = vijp_alloc_array(g, sizeof *w.prod);
    for (size_t i = 0; i < g; i++) mpfr_init2(w.prod[i], 2 * f->prec); /* values of f have at most f->prec bits */
    mpfr_init2(w.scaled, 2 * f->prec);
    mpz_inits(w.sum, w.term, w.rem, w.half, (mpz_ptr)0);
    for (size_t k0 = 0; k0 < n; k0 += g) block(c, a + k0, b + k0, n - k0 < g ? n - k0 : g, f, &w);
    mpz_clears(w.sum, w.term, w.rem, w.half, (mpz_ptr)0);
    mpfr_clear(w.scaled);
    for (size_t i = 0; i < g; i++) mpfr_clear(w.prod[i]);
    free(w.prod);
}

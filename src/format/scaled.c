/* Tensor-scaled formats (format.h): NVFP4 and FP8 with per-tensor current
 * scaling, each tensor's scale computed from its own largest magnitude
 * amax, every step of the recipe rounded to binary32 as the stacks compute
 * it in float.  The tensor is what one store call holds (mat.h).
 *
 * NVFP4 (nvfp4+binary32).  NVIDIA's two-level scaling: E2M1 elements
 * (±0, 0.5, 1, 1.5, 2, 3, 4, 6) in blocks of 16, each block with an E4M3
 * scale, and one binary32 scale per tensor (NVIDIA's blog "Introducing
 * NVFP4 for Efficient and Accurate Low-Precision Inference"; cuBLAS's
 * CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 block scales with a per-tensor
 * alpha).  We follow torchao's nvfp4_quantize (torchao/prototype/
 * mx_formats/nvfp4_tensor.py, per_tensor_amax_to_scale), in binary32:
 *   S     = fp32(amax / (448·6))                the tensor's decode scale
 *   s_b   = e4m3(fp32(fp32(bamax / 6) / S))     a block's, bamax its amax
 *   T_b   = fp32(s_b · S)
 *   value = fp32(e2m1(fp32(x / T_b)) · T_b)
 * e4m3 and e2m1 round to nearest even and saturate (to 448 and 6), as
 * CUDA's cvt.rn.satfinite does; the last product is the dequantised
 * binary32 (e2m1 times a 24-bit T_b may need 26 bits).
 * TransformerEngine (common/cast/nvfp4/core_nvfp4.cuh) computes the same
 * quantities from the encode side: S_enc = fp32(2688/amax) (1 when amax is
 * 0), s_b = e4m3(bamax · fp32(S_enc · fp32(1/6))), elements
 * e2m1(x · fp32(1/fp32(s_b · fp32(1/S_enc)))): the exact values are ours,
 * the binary32 roundings of the reciprocals differ, which can move a
 * quotient lying within an ulp of a rounding boundary to the other side.
 * torchao clamps s_b below at E4M3's smallest normal 2^-6 in some versions
 * (E4M3_EPS, torch.finfo(float8_e4m3fn).tiny); TransformerEngine does not,
 * nor do we: a block scale may be subnormal, and one that rounds to 0
 * (bamax/amax < 2^-10/448) stores the block as zeros of its signs, as TE's
 * zero scale does.  Ours: S has binary32's smallest subnormal 2^-149 as
 * its floor (amax below 2688·2^-150, where fp32 gives 0 and both stacks
 * divide by it).
 *
 * FP8 current scaling (fp8+binary32, fp8:pow2+binary32).
 * TransformerEngine's Float8CurrentScaling recipe with Format.HYBRID: E4M3
 * for forward tensors, E5M2 for gradients; each tensor scaled by
 * compute_scale_from_amax (common/recipe/recipe_common.cuh):
 *   scale = fp32(fp8_max / amax), fp8_max 448 or 57344, FLT_MAX where that
 *           is Inf; 1 where amax is 0, Inf or NaN; amax floored at
 *           amax_epsilon (0 by default, not modelled); with
 *           force_pow_2_scales (":pow2") the significand bits cleared:
 *           2^floor(log2 scale)
 *   value = fp32(fp8(fp32(x · scale)) · fp32(1/scale))
 * fp8 rounding to nearest even, saturating (TE's fp8 casts use CUDA's
 * __NV_SATFINITE); scale_inv = 1/scale is what TE stores beside the data
 * and the GEMM multiplies back.  Current scaling has no margin (the
 * DelayedScaling recipe's scale/2^margin) and no amax history.
 *
 * Inf, NaN, zero.  A tensor holding an Inf or a NaN, or whose amax is past
 * binary32, stores every value as NaN: TE would scale it by 1 and saturate
 * Inf to ±fp8_max (and its max-reduction can skip a NaN), which hides an
 * overflow a drift curve should show.  A tensor of zeros stores its zeros
 * (TE's scale 1 gives them too). */
#include "scaled.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>

#define B32_PREC 24
#define B32_EMIN (-148) /* MPFR's convention: smallest subnormal 2^-149 */
#define B32_EMAX 128
#define NVFP4_AMAX_DIV 2688 /* 448 · 6: E4M3's and E2M1's largest values */

static const vijp_grid E4M3_GRID = {4, -8, 9, 448};

/* r := the binary32 result of an MPFR operation that gave ternary value t
 * in the wide range (r has 24 bits): overflow to ±Inf, subnormals (the
 * ternary value prevents double rounding, as in arith.c). */
static void b32(mpfr_t r, int t)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(B32_EMIN);
    mpfr_set_emax(B32_EMAX);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
}

/* q := v (a binary32) rounded to nearest even on grid g, saturating: past
 * its largest value (±Inf included) ±max.  q has at least g's bits. */
static void to_grid(mpfr_t q, mpfr_srcptr v, const vijp_grid *g)
{
    if (mpfr_nan_p(v)) {
        mpfr_set_nan(q);
        return;
    }
    /* on the stack (a grid has binary32's 24 bits at most): this runs once
     * per stored value, and a heap temporary's malloc and free were most
     * of the tensor-scaled formats' stores */
    mp_limb_t tl[(B32_PREC + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS];
    mpfr_t t;
    if (g->prec > B32_PREC) abort(); /* not a grid of these formats */
    mpfr_custom_init(tl, g->prec);
    mpfr_custom_init_set(t, MPFR_ZERO_KIND, 0, g->prec, tl);
    int i = mpfr_set(t, v, MPFR_RNDN); /* to g's precision, the exponent unbounded */
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(g->emin);
    mpfr_set_emax(g->emax);
    i = mpfr_check_range(t, i, MPFR_RNDN);
    mpfr_subnormalize(t, i, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    if (mpfr_inf_p(t) || fabs(mpfr_get_d(t, MPFR_RNDN)) > g->max) /* exact: 4 bits at most */
        mpfr_set_d(t, mpfr_signbit(t) ? -g->max : g->max, MPFR_RNDN);
    mpfr_set(q, t, MPFR_RNDN); /* exact */
}

void vijp_scaled_init(vijp_tensor_scale *t, const vijp_format *f, vijp_store_role role)
{
    t->f = f;
    t->special = 0;
    t->elem = (vijp_grid){f->store_prec, f->store_emin, f->store_emax, f->store_max};
    if (role == VIJP_STORE_GRADIENT && f->grad_prec)
        t->elem = (vijp_grid){f->grad_prec, f->grad_emin, f->grad_emax, f->grad_max};
    mpfr_inits2(B32_PREC, t->amax, t->scale, t->inv, (mpfr_ptr)0);
    mpfr_set_zero(t->amax, 1);
}

void vijp_scaled_clear(vijp_tensor_scale *t) { mpfr_clears(t->amax, t->scale, t->inv, (mpfr_ptr)0); }

/* fp32(|v|), and fp32 rounds monotonically: the largest of them is
 * fp32(amax). */
static void see_b32(vijp_tensor_scale *t, mpfr_t a)
{
    if (!mpfr_number_p(a)) t->special = 1;
    else if (mpfr_cmpabs(a, t->amax) > 0) mpfr_abs(t->amax, a, MPFR_RNDN);
}

void vijp_scaled_see(vijp_tensor_scale *t, mpfr_srcptr v)
{
    MPFR_DECL_INIT(a, B32_PREC); /* on the stack: once per value seen */
    b32(a, mpfr_abs(a, v, MPFR_RNDN));
    see_b32(t, a);
}

void vijp_scaled_see_d(vijp_tensor_scale *t, double v)
{
    MPFR_DECL_INIT(a, B32_PREC);
    b32(a, mpfr_set_d(a, fabs(v), MPFR_RNDN));
    see_b32(t, a);
}

void vijp_scaled_ready(vijp_tensor_scale *t)
{
    if (t->special || mpfr_zero_p(t->amax)) return; /* NaN, or zeros: no scale needed */
    if (t->f->scale_block) {                        /* nvfp4: S = fp32(amax/2688), at least 2^-149 */
        b32(t->scale, mpfr_div_ui(t->scale, t->amax, NVFP4_AMAX_DIV, MPFR_RNDN));
        if (mpfr_zero_p(t->scale)) mpfr_set_ui_2exp(t->scale, 1, -149, MPFR_RNDN);
        return;
    }
    b32(t->scale, mpfr_ui_div(t->scale, (unsigned long)t->elem.max, t->amax, MPFR_RNDN)); /* fp8_max: an integer */
    if (mpfr_inf_p(t->scale)) mpfr_set_d(t->scale, FLT_MAX, MPFR_RNDN); /* TE's value_for_inf */
    if (t->f->scale_pow2) mpfr_set_ui_2exp(t->scale, 1, mpfr_get_exp(t->scale) - 1, MPFR_RNDN); /* 2^floor(log2) */
    b32(t->inv, mpfr_ui_div(t->inv, 1, t->scale, MPFR_RNDN));
}

/* An NVFP4 block of n values under the tensor's S (above). */
static void nvfp4_block(const vijp_tensor_scale *t, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n)
{
    mpfr_t bamax, a, total, q;
    mpfr_inits2(B32_PREC, bamax, a, total, q, (mpfr_ptr)0);
    mpfr_set_zero(bamax, 1);
    for (size_t k = 0; k < n; k++) {
        b32(a, mpfr_abs(a, src[k * sstride], MPFR_RNDN));
        if (mpfr_cmp(a, bamax) > 0) mpfr_set(bamax, a, MPFR_RNDN);
    }
    b32(a, mpfr_div_ui(a, bamax, 6, MPFR_RNDN));  /* fp32(bamax/6) */
    b32(a, mpfr_div(a, a, t->scale, MPFR_RNDN));  /* fp32(…/S) */
    to_grid(a, a, &E4M3_GRID);                     /* s_b */
    b32(total, mpfr_mul(total, a, t->scale, MPFR_RNDN));
    for (size_t k = 0; k < n; k++) {
        mpfr_ptr x = src[k * sstride], r = dst[k * dstride];
        if (mpfr_zero_p(total)) { /* a zero scale: zeros, with the signs of the values */
            mpfr_set_zero(r, mpfr_signbit(x) ? -1 : 1);
            continue;
        }
        b32(q, mpfr_div(q, x, total, MPFR_RNDN));
        to_grid(q, q, &t->elem);
        b32(q, mpfr_mul(q, q, total, MPFR_RNDN));
        mpfr_set(r, q, MPFR_RNDN); /* exact: r holds a binary32 */
    }
    mpfr_clears(bamax, a, total, q, (mpfr_ptr)0);
}

/* One FP8 value under the tensor's scale (above). */
static void fp8_value(const vijp_tensor_scale *t, mpfr_ptr r, mpfr_srcptr x)
{
    MPFR_DECL_INIT(q, B32_PREC); /* on the stack: once per value */
    b32(q, mpfr_mul(q, x, t->scale, MPFR_RNDN));
    to_grid(q, q, &t->elem);
    b32(q, mpfr_mul(q, q, t->inv, MPFR_RNDN));
    mpfr_set(r, q, MPFR_RNDN); /* exact: r holds a binary32 */
}

void vijp_scaled_line(const vijp_tensor_scale *t, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n)
{
    if (t->special || mpfr_zero_p(t->amax)) {
        for (size_t k = 0; k < n; k++) {
            if (t->special) mpfr_set_nan(dst[k * dstride]);
            else mpfr_set(dst[k * dstride], src[k * sstride], MPFR_RNDN); /* a zero, its sign kept */
        }
        return;
    }
    if (!t->f->scale_block) {
        for (size_t k = 0; k < n; k++) fp8_value(t, dst[k * dstride], src[k * sstride]);
        return;
    }
    size_t b = (size_t)t->f->scale_block;
    for (size_t k = 0; k < n; k += b) /* the last block holds what is left */
        nvfp4_block(t, dst + k * dstride, dstride, src + k * sstride, sstride, n - k < b ? n - k : b);
}

void vijp_scaled_one(const vijp_format *f, mpfr_ptr r, mpfr_srcptr a)
{
    vijp_tensor_scale t;
    vijp_scaled_init(&t, f, VIJP_STORE_FORWARD);
    vijp_scaled_see(&t, a);
    vijp_scaled_ready(&t);
    mpfr_t x;
    mpfr_init2(x, mpfr_get_prec(a));
    mpfr_set(x, a, MPFR_RNDN);
    vijp_scaled_line(&t, (mpfr_t *)(void *)r, 1, &x, 1, 1); /* r: one mpfr_t's struct */
    mpfr_clear(x);
    vijp_scaled_clear(&t);
}

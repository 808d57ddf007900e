/* OCP Microscaling (MX v1.0) block quantisation (format.h): a block of
 * values sharing one E8M0 scale, each rounded to the element format; the
 * element and scale codes.  Where a block lies in a matrix is mat.c's.
 *
 * The scale.  The specification (§6.3, Algorithm 1) sets
 *   X = 2^(floor(log2(amax)) − emax_elem),
 * amax the block's largest magnitude, and rounds each V/X to nearest even
 * in the element format, clamping to its largest normal: amax/X lies in
 * [2^emax_elem, 2^(emax_elem+1)), past the largest element for e4m3 (448 <
 * 512) and every format whose top binade is not full, so the block's top
 * values saturate.  Microsoft's reference (microxcaling, mx_ops.py) clamps
 * the exponent below to −127 and makes the scale NaN above 127, and a block
 * holding Inf or NaN gets amax Inf or NaN, so a NaN scale: we do the same.
 * ":ceil" is the other rule, X = 2^ceil(log2(amax / max_elem)), under which
 * amax/X never exceeds the largest element: NVIDIA's (CUDA's E8M0
 * conversion rounds towards +Inf, cudaRoundPosInf, and CUDA, TransformerEngine
 * MXFP8, torchao's RCEIL use it), adopted by ROCm aiter (its pull request
 * aligning MXFP4/MXFP8 scales to round-up, after OCP's round-down clipped
 * about 37% of FP4 groups on their max element); ml_dtypes' float8_e8m0fnu
 * cast rounds to nearest instead (its issue "Rounding behavior of
 * float8_e8m0fnu" tabulates the stacks).  A zero block keeps its zeros
 * (any scale gives them; the reference's is 2^-127).  The scale and one
 * element's rounding are arith.c's (one value's rounding, which vo_store
 * also needs); the blocks are this file's. */
#include "vijp/arith.h"
#include "vijp/error.h"
#include "mx.h"
#include <math.h>

void vijp_mx_block(const vijp_format *f, mpfr_t *dst, size_t dstride, mpfr_t *src, size_t sstride, size_t n)
{
    mpfr_srcptr amax = NULL;
    int special = 0;
    for (size_t k = 0; k < n; k++) {
        mpfr_srcptr v = src[k * sstride];
        if (!mpfr_number_p(v)) special = 1;
        else if (!amax || mpfr_cmpabs(v, amax) > 0) amax = v;
    }
    long s = 0;
    if (special || (amax && !mpfr_zero_p(amax) && !vijp_mx_scale_exponent(f, amax, &s))) {
        for (size_t k = 0; k < n; k++) mpfr_set_nan(dst[k * dstride]); /* a NaN scale: every value NaN */
        return;
    }
    if (!amax || mpfr_zero_p(amax)) { /* all zeros */
        for (size_t k = 0; k < n; k++) mpfr_set(dst[k * dstride], src[k * sstride], MPFR_RNDN);
        return;
    }
    for (size_t k = 0; k < n; k++) vijp_mx_element(f, dst[k * dstride], src[k * sstride], s);
}

void vijp_mx_line(const vijp_format *f, mpfr_t *v, size_t n, size_t stride)
{
    size_t b = (size_t)f->mx_block;
    for (size_t k = 0; k < n; k += b) /* the last block holds what is left: n − k < b values */
        vijp_mx_block(f, v + k * stride, stride, v + k * stride, stride, n - k < b ? n - k : b);
}

/* The element layouts of §5.3: exponent and trailing bits, bias.  E4M3
 * and E5M2 are OFP8's, decoded by fp8.c. */
int vijp_mx_decode(const vijp_format *f, unsigned bits, mpfr_ptr r, vijp_error *err)
{
    if (!f->mx_block) return vijp_fail(err, VIJP_EINVAL, "format %s: not an MX format", f->name);
    /* an FP8 element is the FP8 pattern's value: decoded as e4m3/e5m2 alone
     * (vijp_fp8_decode refuses the MX format itself, whose values carry a scale) */
    vijp_format elem = *f;
    elem.mx_block = 0;
    if (f->store_prec == 4 && f->store_emax == 9) return vijp_fp8_decode(&elem, bits, r, err);
    if (f->store_prec == 3 && f->store_emax == 16) return vijp_fp8_decode(&elem, bits, r, err);
    int ebits = f->store_emax == 3 ? 2 : 3, mbits = (int)f->store_prec - 1, bias = (1 << (ebits - 1)) - 1;
    int width = 1 + ebits + mbits;
    if (bits >> width) return vijp_fail(err, VIJP_EINVAL, "MX element 0x%x has more than %d bits", bits, width);
    unsigned field = (bits >> mbits) & ((1u << ebits) - 1), m = bits & ((1u << mbits) - 1);
    unsigned sig = field ? (1u << mbits) + m : m; /* no Inf nor NaN: every code a number */
    mpfr_set_ui_2exp(r, sig, (long)(field ? field : 1) - bias - mbits, MPFR_RNDN); /* exact at 4 bits or more */
    mpfr_setsign(r, r, (int)(bits >> (width - 1)), MPFR_RNDN);
    return 0;
}

int vijp_e8m0_decode(unsigned bits, mpfr_ptr r, vijp_error *err)
{
    if (bits > 0xff) return vijp_fail(err, VIJP_EINVAL, "E8M0 code 0x%x has more than 8 bits", bits);
    if (bits == 0xff) mpfr_set_nan(r);
    else mpfr_set_ui_2exp(r, 1, (long)bits - E8M0_EMAX, MPFR_RNDN);
    return 0;
}

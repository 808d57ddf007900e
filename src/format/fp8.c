/* FP8 bit patterns (format.h): OCP OFP8 1.0's two layouts, sign, biased
 * exponent, trailing significand.  The values themselves are the format's
 * (src/format/format.c, rounded by src/format/arith.c); this only packs
 * and unpacks them. */
#include "vijp/arith.h"
#include "vijp/error.h"
#include <math.h>

typedef struct {
    int bias, mbits; /* e4m3: 7, 3; e5m2: 15, 2 */
    int ieee_top;    /* e5m2: the top exponent field holds ±Inf and NaNs; e4m3: values but S.1111.111 */
} layout;

/* f's storage layout, from its grid (format.c: e4m3 4 bits from 2^-9,
 * e5m2 3 from 2^-16); 0 where it is no FP8. */
static int layout_of(const vijp_format *f, layout *l)
{
    /* fp8+binary32's values are scaled FP8, and an MX or NVFP4 format's carry
     * their block's scale: no pattern of one byte holds them (vo_store
     * quantises a value alone as a block of one, its scale included) */
    if (!f->emulated || f->tensor_scaled || f->mx_block || f->scale_block) return 0;
    if (f->store_prec == 4 && f->store_emin == -8 && f->store_emax == 9) return *l = (layout){7, 3, 0}, 1;
    if (f->store_prec == 3 && f->store_emin == -15 && f->store_emax == 16) return *l = (layout){15, 2, 1}, 1;
    return 0;
}

static int not_fp8(const vijp_format *f, vijp_error *err)
{
    return vijp_fail(err, VIJP_EINVAL, "format %s: its values are not FP8 (e4m3 or e5m2 storage)", f->name);
}

int vijp_fp8_encode(const vijp_format *f, mpfr_srcptr x, unsigned char *bits, vijp_error *err)
{
    layout l;
    if (!layout_of(f, &l)) return not_fp8(f, err);
    mpfr_t v;
    mpfr_init2(v, f->prec);
    vo_store(v, x, f); /* x rounded once to f's storage, with its overflow rule */
    unsigned sign = mpfr_signbit(v) ? 0x80u : 0, top = (1u << (7 - l.mbits)) - 1; /* the largest exponent field */
    if (mpfr_nan_p(v)) *bits = 0x7f;
    else if (mpfr_inf_p(v)) *bits = (unsigned char)(sign | top << l.mbits); /* e5m2 only: e4m3's rule leaves none */
    else {
        double a = fabs(mpfr_get_d(v, MPFR_RNDN)); /* exact: 4 bits at most, within binary32's range */
        int field = a == 0 ? 0 : ilogb(a) + l.bias, e = field - l.bias;
        if (field < 1) field = 0, e = 1 - l.bias; /* zero or subnormal: 0.m·2^(1-bias) */
        unsigned m = (unsigned)ldexp(a, l.mbits - e) & ((1u << l.mbits) - 1); /* the hidden bit masked off */
        *bits = (unsigned char)(sign | (unsigned)field << l.mbits | m);
    }
    mpfr_clear(v);
    return 0;
}

int vijp_fp8_decode(const vijp_format *f, unsigned bits, mpfr_ptr r, vijp_error *err)
{
    layout l;
    if (!layout_of(f, &l)) return not_fp8(f, err);
    if (bits > 0xff) return vijp_fail(err, VIJP_EINVAL, "FP8 pattern 0x%x has more than 8 bits", bits);
    int neg = bits >> 7, field = (int)(bits & 0x7f) >> l.mbits;
    unsigned m = bits & ((1u << l.mbits) - 1), top = (1u << (7 - l.mbits)) - 1, mmask = (1u << l.mbits) - 1;
    if ((unsigned)field == top && (l.ieee_top ? m != 0 : m == mmask)) mpfr_set_nan(r);
    else if ((unsigned)field == top && l.ieee_top) mpfr_set_inf(r, neg ? -1 : 1);
    else {
        /* normal (1.m)·2^(field-bias) = (2^mbits + m)·2^(field-bias-mbits); subnormal m·2^(1-bias-mbits) */
        unsigned sig = field ? (1u << l.mbits) + m : m;
        mpfr_set_ui_2exp(r, sig, (field ? field : 1) - l.bias - l.mbits, MPFR_RNDN); /* exact at 4 bits or more */
        mpfr_setsign(r, r, neg, MPFR_RNDN);
    }
    return 0;
}

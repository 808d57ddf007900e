/* Correctly rounded elementary functions by Ziv's rounding test (elementary.h).
 *
 * The bound.  glibc's manual, "Known Maximum Errors in Math Functions"
 * (§19.7; the x86_64 double column), lists at most 1 ulp for exp, expm1,
 * log and log1p, 2 for tanh, cosh and atanh and 5 for erfc; sech is 1/cosh
 * here, one more rounding.  An error of k ulps of binary64 is a relative
 * error below k·2^-52, so every y below is within 5·2^-52·|y| (sech:
 * 2·2^-52 + 2^-53) of the exact value.  The margin is 2^-48·|y| = 16·2^-52
 * |y|, over three times the largest (the task's figure: 16 ulps); forming
 * y ± margin rounds by at most half an ulp (2^-53|y|), so the interval
 * tested still holds the exact value with 15 ulps to spare.
 *
 * Where y is not a normal double the exact value is decided otherwise:
 * ±Inf or NaN from libm are exact (log 0, atanh ±1, domain errors) or an
 * overflow, which every grid here (largest value below 2^128) also
 * overflows; |y| > 2^200 likewise overflows (and keeps vijp_emu_round
 * within the exponents it handles); y = ±0 is exact (tanh ±0, log 1, …) or
 * an underflow of a value below 2^-1074, far below every grid's half
 * quantum (2^-150), which rounds to the zero of the same sign, as MPFR's
 * subnormalize does; a subnormal y (below 2^-1022) rounds to that zero by
 * vijp_emu_round whatever its error. */
#include "elementary.h"
#include "vijp/arith.h"

static double libm(vijp_emu_fn fn, double x)
{
    switch (fn) {
    case VIJP_EMU_EXP: return exp(x);
    case VIJP_EMU_EXPM1: return expm1(x);
    case VIJP_EMU_LOG: return log(x);
    case VIJP_EMU_LOG1P: return log1p(x);
    case VIJP_EMU_TANH: return tanh(x);
    case VIJP_EMU_SECH: return 1 / cosh(x);
    case VIJP_EMU_ERFC: return erfc(x);
    case VIJP_EMU_ATANH: return atanh(x);
    default: return NAN;
    }
}

double vijp_emu_elem_oracle(vijp_emu_fn fn, double x, const vijp_format *f)
{
    static void (*const vo[VIJP_EMU_FN_COUNT])(mpfr_t, const mpfr_t, const vijp_format *) = {
        [VIJP_EMU_EXP] = vo_exp,   [VIJP_EMU_EXPM1] = vo_expm1, [VIJP_EMU_LOG] = vo_log,
        [VIJP_EMU_LOG1P] = vo_log1p, [VIJP_EMU_TANH] = vo_tanh, [VIJP_EMU_SECH] = vo_sech,
        [VIJP_EMU_ERFC] = vo_erfc, [VIJP_EMU_ATANH] = vo_atanh,
    };
    mpfr_t a, r;
    mpfr_inits2(f->prec, a, r, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN); /* exact: x is on f's grid */
    vo[fn](r, a, f);
    double y = mpfr_get_d(r, MPFR_RNDN); /* exact: r is on f's grid, inside binary64 */
    mpfr_clears(a, r, (mpfr_ptr)0);
    return y;
}

double vijp_emu_elem(vijp_emu_fn fn, double x, const vijp_format *f, int margin_log2, int *fell_back)
{
    vijp_emu_grid g = vijp_emu_arith(f);
    double y = libm(fn, x);
    if (fell_back) *fell_back = 0;
    if (!isfinite(y) || y == 0) return y;
    if (fabs(y) > 0x1p200) return copysign(INFINITY, y);
    double m = ldexp(fabs(y), margin_log2), lo = vijp_emu_round(y - m, g), hi = vijp_emu_round(y + m, g);
    if (lo == hi && signbit(lo) == signbit(hi)) return lo;
    if (fell_back) *fell_back = 1;
    return vijp_emu_elem_oracle(fn, x, f);
}

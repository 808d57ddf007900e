/* Which formats the native emulation (src/emu/emu.h, which argues why it
 * is exact) computes: the format module's to say, since the layer
 * interface chooses a format's route by it (src/layer/route.c). */
#ifndef VIJP_FORMAT_EMULABLE_H
#define VIJP_FORMAT_EMULABLE_H

#include "vijp/format.h"

/* Nonzero when f's arithmetic can run natively, in binary64: an emulated
 * format of at most 24 bits inside binary32's exponent range.  Mixed
 * formats add store (their storage grid); others have store == arith.
 * The native operators round to the arithmetic grid only, with IEEE's
 * overflow: the layer interface rounds their results to storage
 * afterwards (vijp_mat_store, the same code on both routes).  So every
 * mixed format qualifies whatever its storage, the FP8 ones (e4m3+binary32,
 * e5m2+binary32 and ":sat"), MX and the tensor-scaled ones included: their
 * arithmetic is binary32's, products of stored values exact and each sum
 * one rounding.  Plain e4m3 and e5m2 (4 and 3 bits, every result under
 * their own overflow rule: NaN or saturation) take the MPFR route, as do
 * the tensor-core formats (STORE+tc:ARCH: their products' block model exists
 * once, in MPFR, tc.c) and the ":ftz" and ":sr" formats. */
static inline int vijp_emu_applies(const vijp_format *f)
{
    return f->emulated && f->prec <= 24 && f->emin >= -148 && f->emax <= 128 && (f->store_prec >= 8 || f->mixed) &&
           !f->tc_group && /* tensor-core formats: their block model is the oracles' (vo_dot_acc), MPFR only */
           !f->ftz && !f->store_ftz && !f->store_sr; /* ftz, sr: the MPFR route only */
}

#endif

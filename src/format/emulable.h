/* Which formats the native emulation (src/emu/emu.h, which argues why it
 * is exact) computes: the format module's to say, since the layer
 * interface chooses a format's route by it (src/layer/route.c). */
#ifndef VIJP_FORMAT_EMULABLE_H
#define VIJP_FORMAT_EMULABLE_H

#include "vijp/format.h"

/* Nonzero when f's arithmetic can run natively, in binary64: an emulated
 * format of at most 24 bits inside binary32's exponent range (every narrow
 * and mixed format vijp has but FP8).  Mixed formats add store (their
 * storage grid); others have store == arith.  FP8 storage (e4m3, e5m2 and
 * their mixed formats: 4 or 3 bits) takes the MPFR route: the native grids
 * know IEEE's overflow only, not e4m3's NaN nor saturation, and are tested
 * on the formats of 8 bits and more.  The tensor-core formats (STORE+tc:ARCH)
 * take it too: their products' block model exists once, in MPFR (tc.c).  So
 * do the ":ftz" and ":sr" formats. */
static inline int vijp_emu_applies(const vijp_format *f)
{
    return f->emulated && f->prec <= 24 && f->emin >= -148 && f->emax <= 128 && f->store_prec >= 8 &&
           !f->tc_group && /* tensor-core formats: their block model is the oracles' (vo_dot_acc), MPFR only */
           !f->ftz && !f->store_ftz && !f->store_sr; /* ftz, sr: the MPFR route only */
}

#endif

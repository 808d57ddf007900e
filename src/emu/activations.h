/* The smooth activations' MPFR operators, natively, for formats where
 * vijp_emu_applies (src/format/emulable.h): the oracles' operation sequences
 * (oracles/activations.c, oracles/elementwise.c's tanh) with every vo_*
 * replaced by its emu twin, so results are the oracles' bit for bit.
 * kind: the kernel table's VIJP_KACT_* (src/kernels/kernels.h).  The
 * operators read and write the layer's MPFR values (exactly: every value is
 * on the format's grid) and leave storage rounding to the caller
 * (vijp_mat_store in src/layer/layer.c), as the oracles do. */
#ifndef VIJP_EMU_ACTIVATIONS_H
#define VIJP_EMU_ACTIVATIONS_H

#include "vijp/layer.h"
#include <mpfr.h>

/* f(x) and f′(x) in f, x on f's arithmetic grid (the oracle's pair). */
void vijp_emu_act_pair(int kind, double x, const vijp_format *f, double *fx, double *dfx);

void vijp_emu_act_forward(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vijp_emu_act_jvp(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
/* 0, or VIJP_ESINGULAR where f′ is 0 (or, but for tanh, not finite), as the oracle. */
int vijp_emu_act_vijp(int kind, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *Gy,
                      const vijp_format *f);
void vijp_emu_act_jacobian(int kind, const vijp_layer *L, mpfr_t *x, mpfr_t *J, const vijp_format *f);
/* sigmoid, softplus and tanh only (the oracles' vo_*_inverse). */
int vijp_emu_act_inverse(int kind, const vijp_layer *L, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

/* The same three on double-held operands (vijp/mat.h; layer/emu_native.h),
 * bit for bit the MPFR-array ones, over ranges of the L->in·B units on
 * f->threads threads, VIJP_EMU_ACT_UNIT_WORK of fork.h's work units a
 * unit (base/fork.h: a split pays from 2·VIJP_FORK_MIN_WORK of them). */
#define VIJP_EMU_ACT_UNIT_WORK 128.0
void vijp_emu_act_forward_d(int kind, const vijp_layer *L, const double *X, size_t B, double *Y, const vijp_format *f);
void vijp_emu_act_jvp_d(int kind, const vijp_layer *L, const double *X, size_t B, const double *U, double *V,
                        const vijp_format *f);
int vijp_emu_act_vijp_d(int kind, const vijp_layer *L, const double *X, size_t B, const double *Gx, double *Gy,
                        const vijp_format *f);

#endif

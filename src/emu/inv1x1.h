/* inv1x1's MPFR operators, natively in the narrow formats
 * (src/emu/inv1x1.c); the oracle's (vo_inv1x1_*) for every other format.
 * Same contracts. */
#ifndef VIJP_EMU_INV1X1_H
#define VIJP_EMU_INV1X1_H

#include "vijp/layer.h"
#include <mpfr.h>

void vijp_emu_inv1x1_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vijp_emu_inv1x1_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vijp_emu_inv1x1_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vijp_emu_inv1x1_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                               const vijp_format *f);
int vijp_emu_inv1x1_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                         const vijp_format *f);
int vijp_emu_inv1x1_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

/* Forward, jvp, vjp and the parameters' gradient on double-held operands
 * (layer/emu_native.h), bit for bit the functions above: inv1x1's emu_native. */
extern const struct vijp_emu_native vijp_emu_inv1x1_native;

#endif

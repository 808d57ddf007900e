/* conv1d's and conv2d's MPFR operators, natively in the narrow formats
 * (src/emu/conv.c); the oracle's (vo_conv1d_*) for every other format.
 * Same contracts. */
#ifndef VIJP_EMU_CONV_H
#define VIJP_EMU_CONV_H

#include "vijp/layer.h"
#include <mpfr.h>

void vijp_emu_conv_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vijp_emu_conv_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vijp_emu_conv_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vijp_emu_conv_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                             const vijp_format *f);
int vijp_emu_conv_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                       const vijp_format *f);
void vijp_emu_conv_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                            const vijp_format *f);
int vijp_emu_conv_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vijp_emu_conv_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

/* The products (forward, jvp, vjp, the parameters' gradient) on double-held
 * operands (layer/emu_native.h), bit for bit the functions above: conv's emu_native. */
extern const struct vijp_emu_native vijp_emu_conv_native;

#endif

/* What the enclosures of a layer's values over a box share (internal):
 * the intervals' precision, vectors of them and the value of the layer at
 * a point, enclosed (image_value.c), and the forms of image_more.c, which
 * image.c's dispatch calls. */
#ifndef VIJP_CERTIFY_IMAGE_H
#define VIJP_CERTIFY_IMAGE_H

#include "vijp/layer.h"
#include <mpfi.h>

#define IMAGE_PREC 128 /* bits of every interval of an image */

/* The box [lo, hi] of n coordinates: each finite with lo <= hi, else
 * VIJP_EDOMAIN naming the first that is not (1-based). */
int vijp_image_box_check(const double *lo, const double *hi, size_t n, vijp_error *err);

mpfi_t *vijp_image_vec_new(size_t n);
void vijp_image_vec_free(mpfi_t *v, size_t n);

/* f(x) at 256 bits (the type's MPFR operators) into y, widened by
 * 2^-200·|v| + 2^-1074 per output, plus 2^-192·scale[i] when scale is not
 * NULL (image.c says when each suffices). */
int vijp_image_value_at(const vijp_layer *L, const double *theta, mpfr_t *x, const double *scale, mpfi_t *y,
                        vijp_error *err);

/* softplus:β/T's jump where βx passes T, enclosed into jump: 1 when X
 * straddles it (image.c), else 0 (jump untouched). */
int vijp_image_softplus_jump(const vijp_layer *L, mpfi_srcptr x, mpfi_t jump);

/* The enclosures of image_more.c, each into y (L->out intervals) from the
 * box x (L->in intervals): 0, or a VIJP_E* code with err set. */
int vijp_image_mean_value(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err);
int vijp_image_taylor(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err);
int vijp_image_logsoftmax(const vijp_layer *L, mpfi_t *x, mpfi_t *y, vijp_error *err);
int vijp_image_monotone(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err);

#endif

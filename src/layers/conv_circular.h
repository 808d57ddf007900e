/* Circular convolutions' per-frequency solves by FFT (conv_circular.c). */
#ifndef VIJP_LAYERS_CONV_CIRCULAR_H
#define VIJP_LAYERS_CONV_CIRCULAR_H

#include "vijp/catalogue.h"

/* B samples (each width values, the layer's input width): out := the solution of Jᵀ out = in
 * (transpose: the vijp) or of J out = in (the inverse, bias already removed
 * from in), for the stride-1 circular convolution of arguments a and weights th; the
 * per-frequency factorisations are computed once for the batch.  0, or
 * VIJP_ESINGULAR with *bad_freq the index of a frequency whose C × C system
 * is singular (out untouched). */
int vijp_conv_circulant_solve(const vijp_conv_args *a, size_t width, const double *th, const double *in, double *out,
                              size_t B, int transpose, size_t *bad_freq);

#endif

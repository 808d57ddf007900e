/* The normalisation and shape types (src/layers/reshape.c):
 * their parsed arguments, which the double operators there and their MPFR
 * twins here both read (plain structs: no calls between the two), and the
 * MPFR operators themselves (oracles/reshape.c). */
#ifndef VIJP_ORACLES_NORM_H
#define VIJP_ORACLES_NORM_H

#include "oracles.h"

/* dropout:P (eval mode, so the identity; P is kept to print it back). */
typedef struct {
    double p;
} vo_dropout_args;

/* transpose:AxB: each run of A·B units, an A × B row-major matrix, becomes
 * its B × A transpose. */
typedef struct {
    size_t rows, cols;
} vo_transpose_args;

/* The identity (identity, dropout, flatten) and transpose: permutations,
 * every operator exact. */
void vo_identity_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_identity_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
int vo_identity_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                     const vijp_format *f);
void vo_identity_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_identity_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
void vo_identity_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);

void vo_transpose_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_transpose_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vo_transpose_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
int vo_transpose_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f);
void vo_transpose_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_transpose_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

#endif

/* A type's native emulation on doubles (vijp_layer_type's emu_native, the
 * library's own types only): its emu operators (the narrow formats' native
 * path, src/emu/) on the double arrays that matrices of those formats hold
 * (vijp/mat.h), so that layer.c calls them without expanding the operands
 * into MPFR and back.  Same contracts as vijp_ops_mp's operators, and bit
 * for bit emu's results (on the format's arithmetic grid; layer.c stores
 * them as it stores emu's).  A NULL member, or an int one returning
 * VIJP_EUNSUPPORTED, leaves the case to emu (then mp) through MPFR twins.
 * The mp_* members below serve the MPFR route itself. */
#ifndef VIJP_LAYER_EMU_NATIVE_H
#define VIJP_LAYER_EMU_NATIVE_H

#include "vijp/layer.h"

struct vijp_emu_native {
    void (*forward)(const vijp_layer *L, const double *theta, const double *X, size_t B, double *Y,
                    const vijp_format *f);
    void (*jvp)(const vijp_layer *L, const double *theta, const double *X, size_t B, const double *U, double *V,
                const vijp_format *f);
    void (*vjp)(const vijp_layer *L, const double *theta, const double *X, size_t B, const double *Gy, double *Gx,
                const vijp_format *f);
    void (*vjp_param)(const vijp_layer *L, const double *theta, const double *X, size_t B, const double *Gy,
                      double *Gtheta, const vijp_format *f);
    int (*vijp)(const vijp_layer *L, const double *theta, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, const vijp_format *f);
    size_t (*fragment_count)(const vijp_layer *L, const double *theta, const double *X, size_t B);
    int (*inverse)(const vijp_layer *L, const double *theta, const double *Y, size_t B, double *X,
                   const vijp_format *f);
    /* The MPFR route (mpfr:P) with θ alone held as doubles (the drift
     * memo's copy, format double: src/drift/memo.c) and every other matrix
     * MPFR: the type's mp operators of the same name reading θ's doubles
     * as they are, instead of an MPFR twin of them (for a dense layer of
     * 4096² weights, 670 MB a call).  Bit for bit the mp operator's results
     * on the twin.  VIJP_EUNSUPPORTED, nothing written: the twin then, as
     * for a NULL member. */
    int (*mp_forward)(const vijp_layer *L, const double *theta, mpfr_t *X, size_t B, mpfr_t *Y,
                      const vijp_format *f);
    int (*mp_jvp)(const vijp_layer *L, const double *theta, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                  const vijp_format *f);
    int (*mp_vjp)(const vijp_layer *L, const double *theta, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                  const vijp_format *f);
    int (*mp_vjp_param)(const vijp_layer *L, const double *theta, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gtheta,
                        const vijp_format *f);
    /* The MPFR route, an elementwise activation: Y = f(X) and D = f′(X) in
     * one evaluation (vijp_layer_forward_deriv, route.h), bit for bit the mp
     * forward's Y and the mp jvp's V with every tangent 1.  Unit i's Y[i]
     * and D[i] from X[i] alone: vijp_layer_forward_deriv runs it on ranges
     * of the batch's columns, one per thread. */
    void (*mp_forward_deriv)(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, mpfr_t *D, const vijp_format *f);
};

#endif

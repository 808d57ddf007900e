/* The template every smooth elementwise activation y_k = f(x_k) is built on:
 * its double operators come from the type's dual_eval (f and f′ in one sweep,
 * nested forward AD), so an activation file supplies only its dual formula,
 * its error bound, its declarations and, where f is a bijection, its inverse. */
#ifndef VIJP_LAYERS_ACTIVATION_H
#define VIJP_LAYERS_ACTIVATION_H

#include "vijp/layer.h"
#include "vijp/error.h"
#include "dual.h"

VIJP_MUST_CHECK int vijp_act_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err);
size_t vijp_act_no_params(const vijp_layer *L);
void vijp_act_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y);
/* jvp and vjp coincide for a diagonal Jacobian: V = U·f′(X). */
void vijp_act_apply(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U,
                    double *V);
VIJP_MUST_CHECK int vijp_act_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                  const double *frag, double *Gy, vijp_error *err);
void vijp_act_jacobian(const vijp_layer *L, const double *th, const double *x, double *J);

#define VIJP_ACT_OPS_D(inv)                                                                   \
    {                                                                                         \
        .forward = vijp_act_forward, .jvp = vijp_act_apply, .vjp = vijp_act_apply,            \
        .vijp = vijp_act_vijp, .jacobian = vijp_act_jacobian, .inverse = (inv),               \
    }

#endif

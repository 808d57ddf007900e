/* The template every smooth elementwise activation y_k = f(x_k) is built on:
 * its double operators come from the type's dual_eval (f and f′ in one sweep,
 * nested forward AD), so an activation file supplies only its dual formula,
 * its error bound, its declarations and, where f is a bijection, its inverse. */
#ifndef VIJP_LAYERS_ACTIVATION_H
#define VIJP_LAYERS_ACTIVATION_H

#include "vijp/layer.h"
#include "vijp/error.h"
#include "kernels/dual.h"
#include "emu/emu.h"
#include "emu/activations.h"
#include "kernels/kernels.h"

VIJP_MUST_CHECK int vijp_act_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err);
size_t vijp_act_no_params(const vijp_layer *L);
void vijp_act_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y);
/* jvp and vjp coincide for a diagonal Jacobian: V = U·f′(X). */
void vijp_act_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *U, double *V);
VIJP_MUST_CHECK int vijp_act_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X,
                                  size_t B, const double *Gx,
                  const double *frag, double *Gy, vijp_error *err);
void vijp_act_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J);
/* binary32@SET operators of the catalogue's six activations (their act_f
 * kernels); not for other activations, which have no such kernel. */
extern const vijp_ops_f vijp_act_ops_f;

#define VIJP_ACT_OPS_D(inv)                                                                   \
    {                                                                                         \
        .forward = vijp_act_forward, .jvp = vijp_act_apply, .vjp = vijp_act_apply,            \
        .vijp = vijp_act_vijp, .jacobian = vijp_act_jacobian, .inverse = (inv),               \
    }

/* The MPFR operators of a catalogue activation: in the narrow emulated
 * formats the native twins of the oracles (src/emu/activations.h, equal bit
 * for bit), elsewhere (mpfr:P, the drift reference) the oracles vo_NAME_*
 * themselves.  Defines static mp_forward, mp_jvp, mp_vijp, mp_jacobian and,
 * by VIJP_ACT_MP_INVERSE_DEFINE, mp_inverse; VIJP_ACT_OPS_MP(inv) lists them. */
#define VIJP_ACT_MP_DEFINE(name, kind)                                                                        \
    static void mp_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y,                   \
                           const vijp_format *f)                                                              \
    {                                                                                                         \
        if (vijp_emu_applies(f)) vijp_emu_act_forward(kind, L, X, B, Y, f);                                   \
        else vo_##name##_forward(L, th, X, B, Y, f);                                                          \
    }                                                                                                         \
    static void mp_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,            \
                       const vijp_format *f)                                                                  \
    {                                                                                                         \
        if (vijp_emu_applies(f)) vijp_emu_act_jvp(kind, L, X, B, U, V, f);                                    \
        else vo_##name##_jvp(L, th, X, B, U, V, f);                                                           \
    }                                                                                                         \
    static int mp_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,        \
                       mpfr_t *Gy, const vijp_format *f)                                                      \
    {                                                                                                         \
        if (vijp_emu_applies(f)) return vijp_emu_act_vijp(kind, L, X, B, Gx, Gy, f);                          \
        return vo_##name##_vijp(L, th, X, B, Gx, frag, Gy, f);                                                \
    }                                                                                                         \
    static void mp_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)      \
    {                                                                                                         \
        if (vijp_emu_applies(f)) vijp_emu_act_jacobian(kind, L, x, J, f);                                     \
        else vo_##name##_jacobian(L, th, x, J, f);                                                            \
    }

#define VIJP_ACT_MP_INVERSE_DEFINE(name, kind)                                                                \
    static int mp_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X,                    \
                          const vijp_format *f)                                                               \
    {                                                                                                         \
        if (vijp_emu_applies(f)) return vijp_emu_act_inverse(kind, L, Y, B, X, f);                            \
        return vo_##name##_inverse(L, th, Y, B, X, f);                                                        \
    }

#define VIJP_ACT_OPS_MP(inv)                                                                  \
    {                                                                                         \
        .forward = mp_forward, .jvp = mp_jvp, .vjp = mp_jvp, .vijp = mp_vijp,                 \
        .jacobian = mp_jacobian, .inverse = (inv),                                            \
    }

#endif

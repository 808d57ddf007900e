/* The template every smooth elementwise activation y_k = f(x_k) is built on:
 * its double operators come from the type's dual_eval (f and f′ in one sweep,
 * nested forward AD), so an activation file supplies only its dual formula,
 * its error bound, its declarations and, where f is a bijection, its inverse. */
#ifndef VIJP_LAYERS_ACTIVATION_H
#define VIJP_LAYERS_ACTIVATION_H

#include "vijp/layer.h"
#include "vijp/error.h"
#include "kernels/dual.h"
#include "emu/activations.h"
#include "layer/emu_native.h"
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

/* The MPFR operators of a catalogue activation: the oracles vo_NAME_*
 * themselves (mp: mpfr:P, the drift reference) and, for the narrow
 * emulated formats, their native twins (emu: src/emu/activations.h, equal
 * bit for bit); the route (src/layer/route.h) chooses.
 * VIJP_ACT_EMU_DEFINE(kind, deriv) defines static emu_forward, emu_jvp,
 * emu_vijp and emu_jacobian, and ops_native with deriv (vo_NAME_forward_deriv
 * where the oracle is one pair of f and f′, else NULL) as its
 * mp_forward_deriv; VIJP_ACT_EMU_INVERSE_DEFINE(kind) emu_inverse;
 * VIJP_ACT_OPS_MP(name, inv) and VIJP_ACT_OPS_EMU(inv) list the tables. */
#define VIJP_ACT_EMU_DEFINE(kind, deriv)                                                                             \
    static void emu_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y,                  \
                            const vijp_format *f)                                                             \
    {                                                                                                         \
        (void)th;                                                                                             \
        vijp_emu_act_forward(kind, L, X, B, Y, f);                                                            \
    }                                                                                                         \
    static void emu_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,           \
                        const vijp_format *f)                                                                 \
    {                                                                                                         \
        (void)th;                                                                                             \
        vijp_emu_act_jvp(kind, L, X, B, U, V, f);                                                             \
    }                                                                                                         \
    static int emu_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,       \
                        mpfr_t *Gy, const vijp_format *f)                                                     \
    {                                                                                                         \
        (void)th, (void)frag;                                                                                 \
        return vijp_emu_act_vijp(kind, L, X, B, Gx, Gy, f);                                                   \
    }                                                                                                         \
    static void emu_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)     \
    {                                                                                                         \
        (void)th;                                                                                             \
        vijp_emu_act_jacobian(kind, L, x, J, f);                                                              \
    }                                                                                                         \
    static void native_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y,   \
                               const vijp_format *f)                                                          \
    {                                                                                                         \
        (void)th;                                                                                             \
        vijp_emu_act_forward_d(kind, L, X, B, Y, f);                                                          \
    }                                                                                                         \
    static void native_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, \
                           double *V, const vijp_format *f)                                                   \
    {                                                                                                         \
        (void)th;                                                                                             \
        vijp_emu_act_jvp_d(kind, L, X, B, U, V, f);                                                           \
    }                                                                                                         \
    static int native_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx, \
                           const double *frag, double *Gy, const vijp_format *f)                              \
    {                                                                                                         \
        (void)th, (void)frag;                                                                                 \
        return vijp_emu_act_vijp_d(kind, L, X, B, Gx, Gy, f);                                                 \
    }                                                                                                         \
    static const struct vijp_emu_native ops_native = {                                                        \
        .forward = native_forward, .jvp = native_jvp, .vjp = native_jvp, .vijp = native_vijp,                 \
        .mp_forward_deriv = (deriv),                                                                          \
    };

#define VIJP_ACT_EMU_INVERSE_DEFINE(kind)                                                                     \
    static int emu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X,                   \
                           const vijp_format *f)                                                              \
    {                                                                                                         \
        (void)th;                                                                                             \
        return vijp_emu_act_inverse(kind, L, Y, B, X, f);                                                     \
    }

#define VIJP_ACT_OPS_MP(name, inv)                                                            \
    {                                                                                         \
        .forward = vo_##name##_forward, .jvp = vo_##name##_jvp, .vjp = vo_##name##_jvp,       \
        .vijp = vo_##name##_vijp, .jacobian = vo_##name##_jacobian, .inverse = (inv),         \
    }

#define VIJP_ACT_OPS_EMU(inv)                                                                 \
    {                                                                                         \
        .forward = emu_forward, .jvp = emu_jvp, .vjp = emu_jvp, .vijp = emu_vijp,             \
        .jacobian = emu_jacobian, .inverse = (inv),                                           \
    }

#endif

/* The operators of an elementwise activation, generic over its pair (f and
 * f′ of one unit, either output may be NULL), shared by the oracle files of
 * the activations (activations.c, activations_elu.c); defined in
 * activations.c.  L gives a pair the instance's arguments (elu's α,
 * softplus's β); pairs without arguments ignore it. */
#ifndef VIJP_ORACLES_ACT_LOOPS_H
#define VIJP_ORACLES_ACT_LOOPS_H

#include "vijp/layer.h"

typedef void (*vo_pair_fn)(const vijp_layer *L, mpfr_ptr fx, mpfr_ptr dfx, mpfr_t x, const vijp_format *fm);

void vo_act_forward(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *fm, vo_pair_fn p);
void vo_act_jvp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *fm, vo_pair_fn p);
/* Gy = Gx / f′, VIJP_ESINGULAR where f′ is 0 or underflowed. */
int vo_act_vijp(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *Gy, const vijp_format *fm, vo_pair_fn p);
void vo_act_jacobian(const vijp_layer *L, mpfr_t *x, mpfr_t *J, const vijp_format *fm, vo_pair_fn p);
/* Y = f(X) and D = f′(X) from one call of the pair per unit: Y is
 * vo_act_forward's, D vo_act_jvp's with every tangent 1 (the pair's
 * outputs do not depend on which of them it is asked for). */
void vo_act_forward_deriv(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, mpfr_t *D, const vijp_format *fm,
                          vo_pair_fn p);

/* The vo_NAME_* operators of an activation whose pair is NAME_pair: the
 * four of vijp_ops_mp, and forward_deriv (oracles.h). */
#define VO_ACT_DEFINE(name)                                                                                   \
    void vo_##name##_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y,                \
                             const vijp_format *f)                                                            \
    {                                                                                                         \
        (void)th;                                                                                             \
        vo_act_forward(L, X, B, Y, f, name##_pair);                                                          \
    }                                                                                                         \
    void vo_##name##_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,         \
                         const vijp_format *f)                                                                \
    {                                                                                                         \
        (void)th;                                                                                             \
        vo_act_jvp(L, X, B, U, V, f, name##_pair);                                                           \
    }                                                                                                         \
    int vo_##name##_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,     \
                         mpfr_t *Gy, const vijp_format *f)                                                    \
    {                                                                                                         \
        (void)th, (void)frag;                                                                                 \
        return vo_act_vijp(L, X, B, Gx, Gy, f, name##_pair);                                                 \
    }                                                                                                         \
    void vo_##name##_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)   \
    {                                                                                                         \
        (void)th;                                                                                             \
        vo_act_jacobian(L, x, J, f, name##_pair);                                                            \
    }                                                                                                         \
    void vo_##name##_forward_deriv(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, mpfr_t *D,           \
                                   const vijp_format *f)                                                      \
    {                                                                                                         \
        vo_act_forward_deriv(L, X, B, Y, D, f, name##_pair);                                                 \
    }

#endif

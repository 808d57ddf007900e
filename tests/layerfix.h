/* A single-layer fixture shared by the layer and engine suites: one layer, its
 * parameters and random points, held in a format under test F and in a
 * 1024-bit reference R with exactly the same (F-rounded) values. */
#ifndef VIJP_LAYERFIX_H
#define VIJP_LAYERFIX_H

#include "testutil.h"

#define REF_PREC 1024 /* = CHECK_REF_PREC, the layer battery's (src/check_layer/impl.h) */

typedef struct {
    vijp_net net;            /* depth 1: net.layers[0] is the layer */
    const vijp_layer *L;
    vijp_format F, R;
    size_t B;
    vijp_mat thF, thR;       /* parameters */
    vijp_mat XF, XR;         /* points (n × B), |x| >= 1e-3 so kinks are not crossed */
    vijp_mat UF, UR;         /* tangents (n × B) */
    vijp_mat GF, GR;         /* output cotangents (m × B) */
    double u;                /* unit roundoff of F */
} layerfix;

void layerfix_init(layerfix *t, const char *spec, size_t width, const char *fmt, size_t B, uint64_t seed);
void layerfix_clear(layerfix *t);
/* Where f′ of a smooth activation vanishes, as its type's bounds say (NaN for the others). */
double layerfix_deriv_zero(const char *name);
/* max_i |a_i − b_i| / bound_i, computed in MPFR (bound_i = 0 demands equality). */
double ratio_to_bound(const vijp_mat *a, const vijp_mat *b, const double *bound);
/* |a_i − b_i| rounded up to double, exact difference at high precision. */
double absdiff(const vijp_mat *a, size_t i, const vijp_mat *b, size_t j);
double absval(const vijp_mat *a, size_t i);
/* r := a[i] (exact when r is wide enough). */
void mat_entry(mpfr_t r, const vijp_mat *a, size_t i);
/* The dense Jacobian of L at sample b of X (any format), as doubles, m × n,
 * column-major; the caller frees it. */
double *jacobian_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, size_t b);
/* κ(J) = σmax/σmin over J's nonzero singular values at sample b. */
double kappa_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, size_t b);
/* Relative backward-error constant of a vijp followed by a vjp (see t-layers.c):
 * C_solve = 3n·2^(n−1) + 16mn + m + 6. */
double c_solve(size_t m, size_t n);
/* Extremal nonzero singular values of a column-major m × n double matrix. */
void sv_range(const double *J, size_t m, size_t n, double *smax, double *smin_nonzero);

#endif

/* The enclosures of a layer's values over a box beyond image.c's: any type
 * with an interval Jacobian over a box (a plugin's jacobian_box) by the mean
 * value form, a type with only a Lipschitz constant of J by Taylor's form,
 * logsoftmax's exact range and maxpool's (monotone).  MPFI at IMAGE_PREC
 * bits, outward rounded. */
#include "image.h"
#include "vijp/catalogue.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdlib.h>

/* f(X) ⊆ f(m) + J(X)·(X − m), m the box's midpoint: for each x of the
 * (convex) box, f_i(x) − f_i(m) = ∇f_i(ξ)·(x − m) for some ξ on the segment
 * (the mean value theorem, f smooth on the box, which the type's
 * jacobian_box asserts by enclosing J there), and ∇f_i(ξ) lies in row i of
 * the enclosure J(X).
 *
 * f(m) is the type's MPFR forward at 256 bits, widened by 2^-200·|f(m)|
 * and 2^-192·s_i with s_i = Σ_j |J_ij|·|m_j| (|J_ij| the enclosure's
 * magnitude): the forward's error, by the contract MPFR operators are held
 * to (check-layer compares every operator with them; standard error
 * analysis, γ_K on K-term sums, Higham eq. 3.5), is below (ulps + K)·2^-256
 * times |f| plus the size of the terms that may cancel, which for a map
 * formed from x is |J|·|x| (a·(x² − y²): |J||x| = 2a(x² + y²)); ulps + K
 * < 2^64 leaves 2^-192.  A plugin whose MPFR forward errs more at 256 bits
 * breaks this enclosure as it breaks its own oracle. */
int vijp_image_mean_value(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t m = L->out, n = L->in;
    mpfi_t *J = vijp_image_vec_new(m * n), *delta = vijp_image_vec_new(n), t;
    mpfr_t *mid = vijp_alloc_array(n ? n : 1, sizeof *mid), a, s;
    double *scale = vijp_alloc_array(m ? m : 1, sizeof *scale);
    mpfi_init2(t, IMAGE_PREC), mpfr_inits2(IMAGE_PREC, a, s, (mpfr_ptr)0);
    for (size_t j = 0; j < n; j++) mpfr_init2(mid[j], IMAGE_PREC), mpfi_mid(mid[j], x[j]), mpfi_sub_fr(delta[j], x[j], mid[j]);
    int rc = 0;
    if (vijp_jacobian_box_of(L->type)(L, theta, (const mpfi_t *)x, J))
        rc = vijp_fail(err, VIJP_EDOMAIN, "%s: its interval Jacobian refused the box", L->type->name);
    for (size_t k = 0; !rc && k < m * n; k++)
        if (mpfi_nan_p(J[k])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: its interval Jacobian over the box is NaN", L->type->name);
    for (size_t i = 0; !rc && i < m; i++) {
        mpfr_set_zero(s, 1);
        for (size_t j = 0; j < n; j++) mpfi_mag(a, J[i + j * m]), mpfr_mul(a, a, mid[j], MPFR_RNDU), mpfr_abs(a, a, MPFR_RNDU),
                                       mpfr_add(s, s, a, MPFR_RNDU);
        scale[i] = mpfr_get_d(s, MPFR_RNDU);
    }
    if (!rc) rc = vijp_image_value_at(L, theta, mid, scale, y, err);
    for (size_t i = 0; !rc && i < m; i++) {
        for (size_t j = 0; j < n; j++) mpfi_mul(t, J[i + j * m], delta[j]), mpfi_add(y[i], y[i], t);
        if (mpfi_nan_p(y[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no enclosure of output %zu over the box", L->type->name, i + 1);
    }
    for (size_t j = 0; j < n; j++) mpfr_clear(mid[j]);
    mpfi_clear(t), mpfr_clears(a, s, (mpfr_ptr)0);
    vijp_image_vec_free(J, m * n), vijp_image_vec_free(delta, n);
    free(mid), free(scale);
    return rc;
}

/* logsoftmax over each run of N: y_k = −log(1 + Σ_{j≠k} exp(x_j − x_k)),
 * decreasing in every x_j − x_k, so (as softmax's in image.c) the interval
 * evaluation of this form, X_j − X_k = [lo_j − hi_k, hi_j − lo_k], is the
 * exact range, reached at two vertices, outward rounded and intersected
 * with (−∞, 0]. */
int vijp_image_logsoftmax(const vijp_layer *L, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t N = ((const vo_logsoftmax_args *)L->state)->run;
    mpfi_t t, nonpositive;
    mpfr_t lo, hi;
    mpfi_init2(t, IMAGE_PREC), mpfi_init2(nonpositive, IMAGE_PREC), mpfr_inits2(IMAGE_PREC, lo, hi, (mpfr_ptr)0);
    mpfr_set_inf(lo, -1), mpfr_set_zero(hi, 1), mpfi_interv_fr(nonpositive, lo, hi);
    int rc = 0;
    for (size_t r = 0; r < L->in / N; r++)
        for (size_t k = 0; k < N && !rc; k++) {
            mpfi_t *run = x + r * N;
            mpfi_ptr out = y[r * N + k];
            mpfi_set_ui(out, 1);
            for (size_t j = 0; j < N; j++)
                if (j != k) mpfi_sub(t, run[j], run[k]), mpfi_exp(t, t), mpfi_add(out, out, t);
            mpfi_log(out, out), mpfi_neg(out, out);
            mpfi_intersect(out, out, nonpositive);
            if (mpfi_nan_p(out) || mpfi_is_empty(out))
                rc = vijp_fail(err, VIJP_EDOMAIN, "logsoftmax: no enclosure of output %zu over the box", r * N + k + 1);
        }
    mpfi_clear(t), mpfi_clear(nonpositive), mpfr_clears(lo, hi, (mpfr_ptr)0);
    return rc;
}

/* maxpool: every output the largest of its window, nondecreasing in every
 * input, so f(lo) <= f(x) <= f(hi) componentwise: the exact range, from two
 * forwards that only select inputs (exact at any precision). */
int vijp_image_monotone(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t n = L->in, m = L->out;
    mpfr_t *end = vijp_alloc_array(n ? n : 1, sizeof *end), a, b;
    mpfi_t *at_lo = vijp_image_vec_new(m), *at_hi = vijp_image_vec_new(m);
    mpfr_inits2(IMAGE_PREC, a, b, (mpfr_ptr)0);
    for (size_t j = 0; j < n; j++) mpfr_init2(end[j], IMAGE_PREC), mpfi_get_left(end[j], x[j]);
    int rc = vijp_image_value_at(L, theta, end, NULL, at_lo, err);
    for (size_t j = 0; j < n; j++) mpfi_get_right(end[j], x[j]);
    if (!rc) rc = vijp_image_value_at(L, theta, end, NULL, at_hi, err);
    for (size_t i = 0; !rc && i < m; i++) mpfi_get_left(a, at_lo[i]), mpfi_get_right(b, at_hi[i]), mpfi_interv_fr(y[i], a, b);
    for (size_t j = 0; j < n; j++) mpfr_clear(end[j]);
    mpfr_clears(a, b, (mpfr_ptr)0);
    vijp_image_vec_free(at_lo, m), vijp_image_vec_free(at_hi, m);
    free(end);
    return rc;
}

/* A type with only a Lipschitz constant L_J of J (jacobian_lipschitz) and
 * MPFR operators: Taylor's form with the remainder bounded by L_J,
 *   f(x) − f(m) − J(m)(x − m) = ∫₀¹ (J(m + t(x − m)) − J(m))(x − m) dt,
 * whose 2-norm is at most ∫₀¹ L_J·t·r·r dt = L_J·r²/2 (r = ‖x − m‖₂, the
 * segment inside the convex box), so each output lies in f(m) + [J(m)(X −
 * m)]_i ± L_J·r²/2.  J(m) from the type's MPFR Jacobian at 256 bits, each
 * entry widened by 2^-192·max|J(m)|: the contract (ulps + n + 2)·2^-256
 * ·max|J| of box.c's enclose_centre, with ulps + n + 2 < 2^64; f(m) as in
 * the mean value form above.  L_J is the type author's claim, as for
 * certify --box's lipschitz route. */
int vijp_image_taylor(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t m = L->out, n = L->in, P = L->type->param_count(L);
    double *lo = vijp_alloc_array(n ? n : 1, sizeof *lo), *hi = vijp_alloc_array(n ? n : 1, sizeof *hi),
           *scale = vijp_alloc_array(m ? m : 1, sizeof *scale), LJ = NAN;
    mpfr_t *mid = vijp_alloc_array(n ? n : 1, sizeof *mid), a, r2;
    mpfi_t *delta = vijp_image_vec_new(n), t, e;
    mpfi_init2(t, IMAGE_PREC), mpfi_init2(e, IMAGE_PREC), mpfr_inits2(IMAGE_PREC, a, r2, (mpfr_ptr)0);
    mpfr_set_zero(r2, 1);
    for (size_t j = 0; j < n; j++) {
        mpfr_init2(mid[j], IMAGE_PREC), mpfi_mid(mid[j], x[j]), mpfi_sub_fr(delta[j], x[j], mid[j]);
        mpfi_mag(a, delta[j]), mpfr_sqr(a, a, MPFR_RNDU), mpfr_add(r2, r2, a, MPFR_RNDU); /* r² rounded up */
        mpfi_get_left(a, x[j]), lo[j] = mpfr_get_d(a, MPFR_RNDD), mpfi_get_right(a, x[j]), hi[j] = mpfr_get_d(a, MPFR_RNDU);
    }
    vijp_format p256;
    int rc = vijp_format_mpfr(&p256, 256, err);
    vijp_mat th, X, J;
    vijp_mat_init(&th, P, 1, &p256), vijp_mat_init(&X, n, 1, &p256), vijp_mat_init(&J, m, n, &p256);
    if (!rc && (vijp_jacobian_lipschitz_of(L->type)(L, theta, lo, hi, &LJ) || !(LJ >= 0) || !isfinite(LJ)))
        rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no Lipschitz constant of J over the box", L->type->name);
    if (!rc) {
        if (P) vijp_mat_set_d(&th, theta);
        for (size_t j = 0; j < n; j++) mpfr_set(X.m[j], mid[j], MPFR_RNDN); /* exact: 128 < 256 bits */
        rc = vijp_layer_jacobian(L, &th, &X, &J, err);
    }
    double jmax = 0;
    for (size_t k = 0; !rc && k < m * n; k++) jmax = fmax(jmax, fabs(mpfr_get_d(J.m[k], MPFR_RNDA)));
    for (size_t i = 0; !rc && i < m; i++) { /* scale_i = Σ_j |J_ij|·|m_j|, rounded up, with the widening */
        mpfr_t s;
        mpfr_init2(s, 53), mpfr_set_zero(s, 1);
        for (size_t j = 0; j < n; j++)
            mpfr_abs(a, J.m[i + j * m], MPFR_RNDU), mpfr_add_d(a, a, ldexp(jmax, -190), MPFR_RNDU),
                mpfr_mul(a, a, mid[j], MPFR_RNDU), mpfr_abs(a, a, MPFR_RNDU), mpfr_add(s, s, a, MPFR_RNDU);
        scale[i] = mpfr_get_d(s, MPFR_RNDU);
        mpfr_clear(s);
    }
    if (!rc) rc = vijp_image_value_at(L, theta, mid, scale, y, err);
    /* the remainder L_J·r²/2, rounded up, as [−ρ, ρ] */
    mpfr_mul_d(r2, r2, LJ, MPFR_RNDU), mpfr_div_2ui(r2, r2, 1, MPFR_RNDU);
    mpfr_neg(a, r2, MPFR_RNDD), mpfi_interv_fr(e, a, r2);
    for (size_t i = 0; !rc && i < m; i++) {
        for (size_t j = 0; j < n; j++) { /* [J_ij ± 2^-192·max|J|]·(X_j − m_j) */
            mpfi_set_fr(t, J.m[i + j * m]);
            mpfr_set_d(a, ldexp(jmax, -192), MPFR_RNDU), mpfi_increase(t, a);
            mpfi_mul(t, t, delta[j]), mpfi_add(y[i], y[i], t);
        }
        mpfi_add(y[i], y[i], e);
        if (mpfi_nan_p(y[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no enclosure of output %zu over the box", L->type->name, i + 1);
    }
    vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&J);
    for (size_t j = 0; j < n; j++) mpfr_clear(mid[j]);
    mpfi_clear(t), mpfi_clear(e), mpfr_clears(a, r2, (mpfr_ptr)0);
    vijp_image_vec_free(delta, n);
    free(lo), free(hi), free(scale), free(mid);
    return rc;
}

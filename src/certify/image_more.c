/* The enclosures of a layer's values over a box beyond image.c's: any type
 * with an interval Jacobian over a box (a plugin's jacobian_box) by the mean
 * value form, logsoftmax's exact range and maxpool's (monotone).  MPFI at
 * IMAGE_PREC bits, outward rounded. */
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

/* The checks of what goes backwards: the vijp and its fragment, and the
 * inverse.  Solves are backward stable: a vijp followed by a vjp has a
 * relative backward error below C_solve·u (check_c_solve), so a residual is
 * within C_solve·u·‖J‖·‖y‖ and a forward error within κ(J)·C_solve·u. */
#include "impl.h"
#include "vijp/certify.h"
#include <math.h>
#include <stdlib.h>

/* r → g = vjp(r), c = fragment(r), y = vijp(g, c), g2 = vjp(y):
 *   vjp(y) = g  within 1.01·C_solve·u·‖M‖_F·‖y‖ (the residual of a backward
 *               stable solve);
 *   y = r       within 2.02·κ(J)·C_solve·u·‖r‖ (its forward error; the
 *               fragment carries what the vjp cannot see). */
void check_vijp_round_trip(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in, B = t->B, k = vijp_layer_fragment_count(L, &t->thF, &t->XF);
    vijp_error err = {0};
    vijp_mat g, c, y, g2;
    vijp_mat_init(&g, n, B, &t->F), vijp_mat_init(&c, k, 1, &t->F), vijp_mat_init(&y, m, B, &t->F);
    vijp_mat_init(&g2, n, B, &t->F);
    double *b1 = vijp_alloc_array(n * B, sizeof *b1), *b2 = vijp_alloc_array(m * B, sizeof *b2);
    check_method(r, "vjp, fragment (%zu numbers over the batch), vijp and vjp again in %s at %zu points", k, t->F.name, B);
    check_source(r, "1.01·C_solve·u·‖J‖_F·‖y‖ (residual) and 2.02·κ(J)·C_solve·u·‖r‖ (forward error), C_solve = "
                 "%.4g (%s)", check_c_solve(L), check_c_solve_source(L));
    int rc = vijp_layer_vjp(L, &t->thF, &t->XF, &t->GF, &g, &err);
    FAIL_IF(rc, "vjp");
    rc = vijp_layer_fragment(L, &t->thF, &t->XF, &t->GF, &c, &err);
    FAIL_IF(rc, "fragment");
    rc = vijp_layer_vijp(L, &t->thF, &t->XF, &g, &c, &y, &err);
    FAIL_IF(rc, "vijp");
    rc = vijp_layer_vjp(L, &t->thF, &t->XF, &y, &g2, &err);
    FAIL_IF(rc, "vjp");
    double kap = check_kappa(t), C = check_c_solve(L);
    for (size_t b = 0; b < B; b++) {
        double *A = check_abs_jacobian(t, b, &err), fro = 0;
        FAIL_IF(A ? 0 : VIJP_EINVAL, "jacobian (for the bound)");
        for (size_t i = 0; i < m * n; i++) fro += A[i] * A[i];
        for (size_t i = 0; i < n; i++) b1[i + b * n] = 1.01 * C * t->u * sqrt(fro) * check_col_norm(&y, b);
        for (size_t i = 0; i < m; i++) b2[i + b * m] = 2.02 * kap * C * t->u * check_col_norm(&t->GF, b);
        free(A);
    }
    check_compare(r, "vjp(vijp(g)) vs g", &g2, &g, b1, t->ex);
    check_compare(r, "vijp(vjp(r))+fragment vs r", &y, &t->GF, b2, t->ex);
    if (r->status == VIJP_CHECK_PASSED) check_note(r, "κ(J) <= %.3g at these points", kap);
out:
    free(b1), free(b2);
    vijp_mat_clear(&g), vijp_mat_clear(&c), vijp_mat_clear(&y), vijp_mat_clear(&g2);
}

/* The fragment is the cotangent's coordinates in the cokernel basis:
 * fragment(r)_b = Q(x_b)ᵀ r_b within 1.01·C_solve·u·‖r_b‖ (both apply the
 * same orthogonal factor, once formed and once implicitly). */
void check_fragment_cokernel(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in, k = vijp_layer_fragment_count(L, &t->thF, &t->XF);
    if (k == 0) {
        check_skip(r, "no cokernel at these points: the layer stores no fragment");
        return;
    }
    vijp_error err = {0};
    vijp_mat c, x, g, Q = {0}, cb = {0};
    vijp_mat_init(&c, k, 1, &t->F), vijp_mat_init(&x, n, 1, &t->F), vijp_mat_init(&g, m, 1, &t->F);
    check_method(r, "fragment of the batch against Q^T r per point, Q the layer's cokernel basis, in %s", t->F.name);
    check_source(r, "1.01·C_solve·u·‖r‖, C_solve = %.4g (Householder QR: Higham Thm 19.4)", check_c_solve(L));
    int rc = vijp_layer_fragment(L, &t->thF, &t->XF, &t->GF, &c, &err);
    FAIL_IF(rc, "fragment");
    for (size_t b = 0, off = 0; b < t->B; b++) {
        vijp_mat_copy_range(&x, 0, &t->XF, b * n, n);
        vijp_mat_copy_range(&g, 0, &t->GF, b * m, m);
        size_t kb = vijp_layer_fragment_count(L, &t->thF, &x);
        if (off + kb > k) {
            check_fail(r, "fragment_count: %zu numbers for the batch, but its points alone need more", k);
            goto out;
        }
        vijp_mat_init(&Q, m, kb, &t->F), vijp_mat_init(&cb, kb, 1, &t->F);
        rc = vijp_layer_cokernel(L, &t->thF, &x, &Q, &err);
        FAIL_IF(rc, "cokernel");
        vijp_mat_tdot(&cb, &Q, &g);
        double bound = 1.01 * check_c_solve(L) * t->u * check_col_norm(&g, 0);
        for (size_t j = 0; j < kb; j++)
            check_record(r, "fragment vs Q^T r", j, b, check_absdiff(&cb, j, &c, off + j), (check_num){bound, t->ex});
        off += kb;
        vijp_mat_clear(&Q), vijp_mat_clear(&cb);
    }
out:
    vijp_mat_clear(&c), vijp_mat_clear(&x), vijp_mat_clear(&g), vijp_mat_clear(&Q), vijp_mat_clear(&cb);
}

/* The fixed-point model at sample b (M: the majorant there, e: 1.01·u).
 * The last iterate x̂ = y − f(x_k) with ‖x̂ − x_k‖∞ within the stop
 * inv_a·u·(‖y‖∞ + ‖x̂‖∞), so x̂ + f(x̂) − y is the step moved by f (Lip(f) <= 1
 * where the iteration converged), the subtraction's rounding and f's own
 * (the forward's (n+K)u(M|x| + |y|)): within √n·2·inv_a·u·(‖y‖∞ + ‖x‖∞) +
 * 2(n+K)u‖M|x| + |y|‖ in 2-norm, and x̂ − x is J⁻¹ of it (the mean-value J;
 * ‖J⁻¹‖ at x, first order).  Norm-wise, so a bound on every entry. */
static double fixed_point_bound(check_fix *t, size_t b, const double *M, const vijp_mat *Y, double e)
{
    const vijp_layer *L = t->L;
    size_t n = L->in;
    vijp_mat x, J;
    vijp_numeric a;
    double inv = NAN, xmax = 0, ymax = 0, s2 = 0;
    vijp_mat_init(&x, n, 1, t->XR.fmt), vijp_mat_init(&J, n, n, t->XR.fmt);
    vijp_mat_copy_range(&x, 0, &t->XR, b * n, n);
    double *Jd = vijp_alloc_array(n * n, sizeof *Jd);
    if (!vijp_layer_jacobian(L, &t->thR, &x, &J, NULL)) {
        for (size_t i = 0; i < n * n; i++) Jd[i] = vijp_mat_get_d(&J, i);
        if (!vijp_numeric_analysis(Jd, n, n, &a, NULL)) {
            inv = a.sv[n - 1] > 0 ? 1 / a.sv[n - 1] : INFINITY;
            vijp_numeric_clear(&a);
        }
    }
    free(Jd), vijp_mat_clear(&x), vijp_mat_clear(&J);
    for (size_t i = 0; i < n; i++) {
        double s = check_absval(Y, i + b * n);
        xmax = fmax(xmax, check_absval(&t->XF, i + b * n)), ymax = fmax(ymax, s);
        for (size_t j = 0; j < n; j++) s += M[i + j * n] * check_absval(&t->XF, j + b * n);
        s2 += s * s;
    }
    double K = check_term_ulps(L);
    return inv * (sqrt((double)n) * 2 * L->type->bounds.inv_a * e * (xmax + ymax) + 2 * (n + K) * e * sqrt(s2));
}

/* inverse(forward(x)) = x by the contract's error model (vijp_layer_bounds):
 *   linear (y = Wx + b, W square): ‖x̂ − x‖ <= ‖W⁻¹‖·(n+2)u‖|W||x| + 2|b|‖ + κ·C_solve·u‖x‖
 *     (the forward's error pulled back by W⁻¹, plus the solve's);
 *   elementwise: |x̂ − x| <= u(inv_a|x| + inv_c + inv_b|y|/f′), the inverse's
 *     own error plus the forward's relative error amplified by 1/f′;
 *   exact (a permutation): equality.
 * Where the contract gives none, or the layer is not square, the operator
 * must refuse (VIJP_EUNSUPPORTED).  A type that declares itself invertible
 * without a model is skipped, saying so: no bound is made up for it. */
void check_inverse_round_trip(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    const vijp_layer_bounds *bd = &L->type->bounds;
    size_t m = L->out, n = L->in, B = t->B;
    vijp_error err = {0};
    if ((L->type->declare(L) & VIJP_DECL_INVERTIBLE) && bd->inverse == VIJP_INVBOUND_NONE) {
        check_skip(r, "declared invertible, but the contract states no inverse model (bounds.inverse), so the round "
                   "trip cannot be bounded");
        return;
    }
    vijp_mat Y, X2;
    vijp_mat_init(&Y, m, B, &t->F), vijp_mat_init(&X2, n, B, &t->F);
    double *bound = vijp_alloc_array(n * B, sizeof *bound);
    int rc = vijp_layer_forward(L, &t->thF, &t->XF, &Y, &err);
    FAIL_IF(rc, "forward");
    rc = vijp_layer_inverse(L, &t->thF, &Y, &X2, &err);
    if (bd->inverse == VIJP_INVBOUND_FIXED_POINT && (rc == VIJP_EUNSUPPORTED || rc == VIJP_ESINGULAR)) {
        check_skip(r, "the fixed-point inverse %s: %s", rc == VIJP_EUNSUPPORTED ? "refuses" : "refuses these points",
                   err.msg);
        goto out;
    }
    if (bd->inverse == VIJP_INVBOUND_NONE || m != n) {
        if (rc != VIJP_EUNSUPPORTED)
            check_fail(r, "the inverse answered (code %d) where the contract gives no inverse model or the layer is not "
                       "square: it must refuse (VIJP_EUNSUPPORTED)", rc);
        else
            check_skip(r, "no inverse: %s, and the operator refuses", m != n ? "not square" : "none in the contract");
        goto out;
    }
    FAIL_IF(rc, "inverse");
    static const char *const model[] = {"", "linear: ‖W^-1‖·(n+2)u·‖|W||x| + 2|b|‖ + κ·C_solve·u·‖x‖",
                                        "elementwise: u·(%g|x| + %g + %g|y|/f')", "exact: a permutation",
                                        "fixed point: ‖J^-1‖·(√n·2·inv_a·u·(‖y‖∞ + ‖x‖∞) + 2(n+K)u·‖M|x| + |y|‖)"};
    check_method(r, "inverse(forward(x)) in %s at %zu points", t->F.name, B);
    if (bd->inverse == VIJP_INVBOUND_ELEMENTWISE) check_source(r, model[2], bd->inv_a, bd->inv_c, bd->inv_b);
    else check_source(r, "%s", model[bd->inverse]);
    double kap = check_kappa(t), C = check_c_solve(L), e = 1.01 * t->u;
    for (size_t b = 0; b < B; b++) {
        double *A = check_abs_jacobian(t, b, &err), nx = check_col_norm(&t->XF, b), s2 = 0, fro = 0;
        FAIL_IF(A ? 0 : VIJP_EINVAL, "jacobian (for the bound)");
        for (size_t i = 0; bd->inverse == VIJP_INVBOUND_LINEAR && i < m; i++) {
            double s = 2 * check_bias_at(t, i);
            for (size_t j = 0; j < n; j++) s += A[i + j * m] * check_absval(&t->XF, j + b * n);
            s2 += s * s;
        }
        for (size_t i = 0; i < m * n; i++) fro += A[i] * A[i];
        double fixed = bd->inverse == VIJP_INVBOUND_FIXED_POINT ? fixed_point_bound(t, b, A, &Y, e) : 0;
        for (size_t i = 0; i < n; i++) {
            if (bd->inverse == VIJP_INVBOUND_FIXED_POINT) {
                bound[i + b * n] = fixed;
            } else if (bd->inverse == VIJP_INVBOUND_LINEAR) {
                double winv = kap * sqrt((double)n) / sqrt(fro); /* ‖W⁻¹‖ = κ/σ_max, σ_max >= ‖W‖_F/√n */
                bound[i + b * n] = winv * (n + 2) * e * sqrt(s2) + kap * C * e * nx;
            } else if (bd->inverse == VIJP_INVBOUND_EXACT) {
                bound[i + b * n] = 0;
            } else {
                double y = check_absval(&Y, i + b * n), d = A[i + i * n];
                bound[i + b * n] = e * (bd->inv_a * check_absval(&t->XF, i + b * n) + bd->inv_c + bd->inv_b * y / d);
            }
        }
        free(A);
    }
    check_compare(r, "inverse(forward(x)) vs x", &X2, &t->XF, bound, t->ex);
out:
    free(bound);
    vijp_mat_clear(&Y), vijp_mat_clear(&X2);
}

/* The checks of what a type declares about itself (DESIGN §4): its
 * structural declarations against J's singular values, and vijp_certify_layer
 * (which proves, and checks the declarations against its proofs) at the
 * fixture's points. */
#include "impl.h"
#include "vijp/certify.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* J at sample b as doubles: from the MPFR reference rounded once (within
 * u/2 entrywise), else the double operator's. */
static double *jacobian_d(check_fix *t, size_t b, vijp_error *err)
{
    size_t m = t->L->out, n = t->L->in;
    vijp_mat x, J;
    vijp_mat_init(&x, n, 1, &t->R), vijp_mat_init(&J, m, n, &t->R);
    vijp_mat_copy_range(&x, 0, &t->XR, b * n, n);
    double *a = NULL;
    if (!vijp_layer_jacobian(t->L, &t->thR, &x, &J, err)) {
        a = vijp_alloc_array(m * n, sizeof *a);
        for (size_t i = 0; i < m * n; i++) a[i] = vijp_mat_get_d(&J, i);
    }
    vijp_mat_clear(&x), vijp_mat_clear(&J);
    return a;
}

/* ε_J of the double operator's Jacobian at sample b (below), 0 with the
 * MPFR reference. */
static double jacobian_eps(check_fix *t, size_t b, vijp_error *err)
{
    if (t->have_ref) return 0;
    size_t m = t->L->out, n = t->L->in;
    double *M = check_abs_jacobian(t, b, err), fro = 0;
    for (size_t i = 0; M && i < m * n; i++) fro += M[i] * M[i];
    free(M);
    return 1.01 * (n + check_term_ulps(t->L)) * t->u * sqrt(fro);
}

/* A type that declares J independent of x (VIJP_DECL_LINEAR, which lets
 * certify prove a whole box from one point): J at every point equals J at
 * the first, ‖J_b − J_0‖_F <= ε_b + ε_0 (exactly equal with the MPFR
 * reference, rounded once from the same exact J).  0, or the check failed. */
static int linear_holds(check_fix *t, vijp_check_result *r)
{
    size_t mn = t->L->out * t->L->in;
    vijp_error err = {0};
    double *J0 = jacobian_d(t, 0, &err), eps0 = J0 ? jacobian_eps(t, 0, &err) : 0;
    for (size_t b = 1; J0 && b < t->B; b++) {
        double *J = jacobian_d(t, b, &err), diff = 0;
        for (size_t i = 0; J && i < mn; i++) diff += (J[i] - J0[i]) * (J[i] - J0[i]);
        double tol = eps0 + (J ? jacobian_eps(t, b, &err) : 0);
        free(J);
        if (!J) break;
        if (sqrt(diff) > tol) {
            check_fail(r, "declares J independent of x, but ‖J(x_%zu) − J(x_0)‖_F = %.3g > %.3g", b, sqrt(diff), tol);
            free(J0);
            return -1;
        }
    }
    free(J0);
    if (err.code) return check_refused(r, "jacobian", VIJP_EINVAL, &err), -1;
    return 0;
}

/* Numerically, J has full row rank when σ_m(J) stands above the noise floor
 *   τ = max(m,n)·u·σ_max  (LAPACK's rank tolerance, u = 2^-53)  + ε_J,
 * where ε_J bounds ‖Ĵ − J‖₂ for the Ĵ we hold: 0 for the MPFR reference
 * rounded once (‖Ĵ − J‖₂ <= (u/2)‖J‖_F <= (u/2)√m·σ_max, inside the
 * tolerance: Weyl), else the double operator's 1.01(n + K)u‖M‖_F (the
 * jacobian-vs-jvp bound, Frobenius over 2).  A declared submersive type must
 * stand above τ at every point, a declared never-submersive one below. */
void check_declarations(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    unsigned d = L->type->declare(L);
    size_t m = L->out, n = L->in;
    if (!(d & (VIJP_DECL_SUBMERSIVE | VIJP_DECL_NEVER_SUBMERSIVE | VIJP_DECL_INVERTIBLE | VIJP_DECL_LINEAR))) {
        check_skip(r, "the type declares nothing (neither submersive, never submersive, invertible nor linear)");
        return;
    }
    if ((d & VIJP_DECL_LINEAR) && linear_holds(t, r)) return;
    check_method(r, "declared%s%s%s%s against LAPACK's singular values of J (%s) at %zu points",
                 d & VIJP_DECL_SUBMERSIVE ? " submersive" : "", d & VIJP_DECL_NEVER_SUBMERSIVE ? " never-submersive" : "",
                 d & VIJP_DECL_INVERTIBLE ? " invertible" : "", d & VIJP_DECL_LINEAR ? " linear (J alike at every point)" : "",
                 t->have_ref ? "MPFR reference" : "double operator", t->B);
    check_source(r, "σ_m(J) against the noise floor τ = max(m,n)·u·σ_max%s (LAPACK's rank tolerance, DESIGN §4; Weyl)",
                 t->have_ref ? "" : " + 1.01·(n+K)·u·‖J‖_F");
    if ((d & VIJP_DECL_SUBMERSIVE) && (d & VIJP_DECL_NEVER_SUBMERSIVE)) {
        check_fail(r, "declares itself both submersive and never submersive");
        return;
    }
    if ((d & VIJP_DECL_SUBMERSIVE) && m > n) {
        check_fail(r, "declares itself submersive, but maps %zu inputs to %zu outputs (rank <= %zu < %zu)", n, m, n, m);
        return;
    }
    if ((d & VIJP_DECL_INVERTIBLE) && (m != n || !L->type->d->inverse)) {
        check_fail(r, "declares itself invertible, but %s", m != n ? "is not square" : "has no inverse operator");
        return;
    }
    size_t k = vijp_layer_fragment_count(L, &t->thF, &t->XF);
    if ((d & VIJP_DECL_SUBMERSIVE) && k) {
        check_fail(r, "declares itself submersive, but stores a fragment of %zu numbers for the batch", k);
        return;
    }
    int full_rank_wanted = (d & (VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE)) != 0;
    double worst = full_rank_wanted ? INFINITY : 0; /* σ_m / σ_max */
    for (size_t b = 0; b < t->B; b++) {
        vijp_error err = {0};
        double *J = jacobian_d(t, b, &err);
        vijp_numeric a;
        if (!J || vijp_numeric_analysis(J, m, n, &a, &err)) {
            free(J);
            check_refused(r, "jacobian", VIJP_EINVAL, &err);
            return;
        }
        double eps = 0;
        if (!t->have_ref) {
            double *M = check_abs_jacobian(t, b, &err), fro = 0;
            for (size_t i = 0; M && i < m * n; i++) fro += M[i] * M[i];
            eps = 1.01 * (n + check_term_ulps(L)) * t->u * sqrt(fro);
            free(M);
        }
        double tau = a.rank_tol + eps, s = a.sigma_min;
        int full = s > tau;
        worst = full_rank_wanted ? fmin(worst, s / a.sigma_max) : fmax(worst, s / a.sigma_max);
        int broken = full_rank_wanted ? !full : (d & VIJP_DECL_NEVER_SUBMERSIVE) && full;
        if (broken && r->status != VIJP_CHECK_FAILED) {
            /* not a ratio to a bound (a declared submersive J must stay above
             * τ): the element and both numbers, for the report */
            snprintf(r->worst_what, sizeof r->worst_what, "σ_m(J)");
            r->worst_row = 0, r->worst_col = b, r->error = s, r->bound = tau;
            check_num_text(r->error_text, sizeof r->error_text, (check_num){s, 0});
            check_num_text(r->bound_text, sizeof r->bound_text, (check_num){tau, 0});
        }
        if (full_rank_wanted && !full)
            check_fail(r, "declares itself %s, but at point %zu J is numerically rank-deficient: σ_m = %.3g <= τ = %.3g "
                       "(σ_max %.3g)", d & VIJP_DECL_SUBMERSIVE ? "submersive" : "invertible", b, s, tau, a.sigma_max);
        if ((d & VIJP_DECL_NEVER_SUBMERSIVE) && full)
            check_fail(r, "declares itself never submersive, but at point %zu J has full row rank: σ_m = %.3g > τ = %.3g",
                       b, s, tau);
        vijp_numeric_clear(&a);
        free(J);
    }
    check_note(r, "σ_m/σ_max %s %.3g at %zu points", full_rank_wanted ? ">=" : "<=", worst, t->B);
}

/* vijp_certify_layer at each point, with the fixture's parameters: a
 * declaration its proofs contradict (VIJP_EDECLARATION) fails the check;
 * verdicts themselves (certified, not submersive, inconclusive) are
 * reported, since an undeclared layer may be any of them. */
void check_certification(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    size_t n = L->in, P = t->thF.rows, count[3] = {0};
    double *x = vijp_alloc_array(n, sizeof *x), *th = vijp_alloc_array(P + 1, sizeof *th);
    for (size_t i = 0; i < P; i++) th[i] = vijp_mat_get_d(&t->thF, i);
    vijp_certify_opts co = {0};
    char method[32] = "";
    check_method(r, "vijp_certify_layer at %zu points (double parameters and points)", t->B);
    check_source(r, "a proof of σ_min(J) > s or of a cokernel (DESIGN §4) against the type's declarations");
    for (size_t b = 0; b < t->B; b++) {
        for (size_t i = 0; i < n; i++) x[i] = vijp_mat_get_d(&t->XF, i + b * n);
        vijp_certificate c;
        vijp_error err = {0};
        int rc = vijp_certify_layer(L, th, x, &co, &c, &err);
        if (rc == VIJP_EUNSUPPORTED) {
            check_skip(r, "cannot be certified: %s", err.msg);
            goto out;
        }
        if (rc) {
            if (rc == VIJP_EDECLARATION) check_fail(r, "at point %zu: %s", b, err.msg);
            else check_refused(r, "vijp_certify_layer", rc, &err);
            goto out;
        }
        count[c.verdict]++;
        if (!method[0]) snprintf(method, sizeof method, "%s", c.method);
        vijp_certificate_clear(&c);
    }
    check_note(r, "%zu certified submersive (%s), %zu not submersive, %zu inconclusive", count[VIJP_CERTIFIED_SUBMERSIVE],
               method, count[VIJP_NOT_SUBMERSIVE], count[VIJP_INCONCLUSIVE]);
out:
    free(x), free(th);
}

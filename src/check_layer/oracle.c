/* Each operator in the format under test against the type's own MPFR
 * operators at R = check_ref_prec(P) bits (1024; P + 512 past mpfr:512) on
 * the same inputs, entrywise (u: unit roundoff of the format under test, K:
 * the contract's ulps, M >= |J|; the reference's own error is 2^-(R − P) of
 * the bound, 2^-64 at most, inside the 1.01 slack of its γ_n):
 *   forward   (n + K)u (M|x| + |b| + |y|)       a dot product, a bias, f;
 *   jvp       (n + K)u (M|U|)_i                  Higham eq. 3.5;
 *   vjp       (m + K)u (|G|ᵀM)_j;
 *   fragment  κ·C_solve·u·‖G‖                    the null-space basis moves by
 *                                                κ times the backward error;
 *   vijp      2κ·C_solve·u·‖z‖                   the solve's forward error
 *             (on identical inputs: g = vjp(G) and c from the format under test);
 *   vjp_param the contract's vjp_param_bound (a check of its own, skipped
 *             where the contract gives none). */
#include "impl.h"
#include "vijp/metrics.h"
#include <math.h>
#include <stdlib.h>

/* The reference is too close to the format under test past mpfr:65472:
 * skip r saying so, 1; else 0. */
static int ref_too_close(check_fix *t, vijp_check_result *r)
{
    if ((long)t->R.prec >= (long)t->F.prec + CHECK_REF_MARGIN) return 0;
    check_skip(r, "at %s the MPFR reference would need %ld bits or more (P + %d), past MPFR formats' %d: the "
               "comparison runs up to mpfr:%ld", t->F.name, (long)t->F.prec + CHECK_REF_MARGIN, CHECK_REF_MARGIN,
               VIJP_PREC_MAX, check_ref_limit());
    return 1;
}

void check_format_vs_mpfr(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    if (!t->have_ref) {
        check_skip(r, "%s", L->type->mp ? "the type's MPFR operators are not used in this run"
                                        : "the type has no MPFR operators (vijp_ops_mp) to compare with");
        return;
    }
    if (ref_too_close(t, r)) return;
    size_t m = L->out, n = L->in, B = t->B, k = vijp_layer_fragment_count(L, &t->thF, &t->XF);
    check_method(r, "forward, jvp, vjp, fragment and vijp in %s against the MPFR operators at %ld bits, "
                 "%zu points", t->F.name, (long)t->R.prec, B);
    check_source(r, "(n+K)u(|J||x|+|b|+|y|), (n+K)u|J||U|, (m+K)u|G|^T|J| (Higham eq. 3.5, K = %g), κ·C_solve·u "
                 "(solves)", check_term_ulps(L));
    vijp_mat YF, YR, VF, VR, WF, WR, cF, cR, gR, zF, zR, cF2;
    vijp_mat_init(&YF, m, B, &t->F), vijp_mat_init(&YR, m, B, &t->R);
    vijp_mat_init(&VF, m, B, &t->F), vijp_mat_init(&VR, m, B, &t->R);
    vijp_mat_init(&WF, n, B, &t->F), vijp_mat_init(&WR, n, B, &t->R);
    vijp_mat_init(&cF, k, 1, &t->F), vijp_mat_init(&cR, k, 1, &t->R), vijp_mat_init(&cF2, k, 1, &t->R);
    vijp_mat_init(&gR, n, B, &t->R), vijp_mat_init(&zF, m, B, &t->F), vijp_mat_init(&zR, m, B, &t->R);
    double *by = vijp_alloc_array(m * B, sizeof(double)), *bv = vijp_alloc_array(m * B, sizeof(double));
    double *bw = vijp_alloc_array(n * B, sizeof(double));
    double *bz = vijp_alloc_array(m * B, sizeof(double)), *bc = vijp_alloc_array(k + 1, sizeof(double));
    vijp_error err = {0};
    int rc;
#define RUN(op, call)                                                                                                    \
    if ((rc = (call))) {                                                                                                 \
        check_refused(r, op, rc, &err);                                                                                  \
        goto out;                                                                                                        \
    }
    RUN("forward", vijp_layer_forward(L, &t->thF, &t->XF, &YF, &err));
    RUN("forward (MPFR)", vijp_layer_forward(L, &t->thR, &t->XR, &YR, &err));
    RUN("jvp", vijp_layer_jvp(L, &t->thF, &t->XF, &t->UF, &VF, &err));
    RUN("jvp (MPFR)", vijp_layer_jvp(L, &t->thR, &t->XR, &t->UR, &VR, &err));
    RUN("vjp", vijp_layer_vjp(L, &t->thF, &t->XF, &t->GF, &WF, &err));
    RUN("vjp (MPFR)", vijp_layer_vjp(L, &t->thR, &t->XR, &t->GR, &WR, &err));
    RUN("fragment", vijp_layer_fragment(L, &t->thF, &t->XF, &t->GF, &cF, &err));
    RUN("fragment (MPFR)", vijp_layer_fragment(L, &t->thR, &t->XR, &t->GR, &cR, &err));
    /* the vijp on identical inputs: g = vjp(G) and c from the format under test */
    vijp_mat_convert(&gR, &WF), vijp_mat_convert(&cF2, &cF);
    RUN("vijp", vijp_layer_vijp(L, &t->thF, &t->XF, &WF, &cF, &zF, &err));
    RUN("vijp (MPFR)", vijp_layer_vijp(L, &t->thR, &t->XR, &gR, &cF2, &zR, &err));
#undef RUN
    double kap = check_kappa(t), C = check_c_solve(L), e = 1.01 * t->u, K = check_term_ulps(L);
    for (size_t b = 0; b < B; b++) {
        double *A = check_abs_jacobian(t, b, &err);
        if (!A) {
            check_refused(r, "jacobian (for the bound)", VIJP_EINVAL, &err);
            goto out;
        }
        for (size_t i = 0; i < m; i++) {
            double s = check_absval(&YR, i + b * m) + check_bias_at(t, i);
            for (size_t j = 0; j < n; j++) {
                s += A[i + j * m] * check_absval(&t->XR, j + b * n);
                bv[i + b * m] += (n + K) * e * A[i + j * m] * check_absval(&t->UR, j + b * n);
                bw[j + b * n] += (m + K) * e * A[i + j * m] * check_absval(&t->GR, i + b * m);
            }
            by[i + b * m] = (n + K) * e * s;
            bz[i + b * m] = 2 * kap * C * e * check_col_norm(&zR, b);
        }
        free(A);
    }
    for (size_t i = 0; i < k; i++) bc[i] = kap * C * e * vijp_norm(&t->GR);
    check_compare(r, "forward", &YF, &YR, by, t->ex);
    check_compare(r, "jvp", &VF, &VR, bv, t->ex);
    check_compare(r, "vjp", &WF, &WR, bw, t->ex);
    check_compare(r, "fragment", &cF, &cR, bc, t->ex);
    check_compare(r, "vijp", &zF, &zR, bz, t->ex);
out:
    free(by), free(bv), free(bw), free(bz), free(bc);
    vijp_mat *all[] = {&YF, &YR, &VF, &VR, &WF, &WR, &cF, &cR, &gR, &zF, &zR, &cF2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vijp_mat_clear(all[i]);
}

/* vjp_param in the format under test against the MPFR operator at R bits,
 * within the contract's vjp_param_bound on the reference's |X| and |G| (the
 * type derives it; dense: γ_(B+1) Σ_b |G_ib||X_jb|, Higham eq. 3.5), taken
 * at u in the checks' units (impl.h: exact or above the bound at 2^-P). */
void check_vjp_param_vs_mpfr(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in, P = t->thF.rows, B = t->B;
    if (!P) {
        check_skip(r, "the layer has no parameters");
        return;
    }
    if (!t->have_ref) {
        check_skip(r, "%s", L->type->mp ? "the type's MPFR operators are not used in this run"
                                        : "the type has no MPFR operators (vijp_ops_mp) to compare with");
        return;
    }
    if (!L->type->vjp_param_bound) {
        check_skip(r, "the type's contract gives no vjp_param_bound, so its parameter gradient cannot be bounded");
        return;
    }
    if (ref_too_close(t, r)) return;
    check_method(r, "vjp_param in %s against the MPFR operator at %ld bits, %zu points", t->F.name, (long)t->R.prec, B);
    if (t->ex)
        check_source(r, "the contract's vjp_param_bound at u = 1.01·2^-%d, times 2^%ld (u = 1.01·2^-%ld)",
                     CHECK_UNIT_PREC, t->ex, (long)t->F.prec);
    else
        check_source(r, "the contract's vjp_param_bound at u = 1.01·2^-%ld", (long)t->F.prec);
    vijp_error err = {0};
    vijp_mat PF, PR;
    vijp_mat_init(&PF, P, 1, &t->F), vijp_mat_init(&PR, P, 1, &t->R);
    double *aX = vijp_alloc_array(n * B, sizeof *aX), *aG = vijp_alloc_array(m * B, sizeof *aG);
    double *th = vijp_alloc_array(P, sizeof *th), *bound = vijp_alloc_array(P, sizeof *bound);
    FAIL_IF(vijp_layer_vjp_param(L, &t->thF, &t->XF, &t->GF, &PF, &err), "vjp_param");
    FAIL_IF(vijp_layer_vjp_param(L, &t->thR, &t->XR, &t->GR, &PR, &err), "vjp_param (MPFR)");
    for (size_t i = 0; i < n * B; i++) aX[i] = check_absval(&t->XR, i);
    for (size_t i = 0; i < m * B; i++) aG[i] = check_absval(&t->GR, i);
    for (size_t i = 0; i < P; i++) th[i] = vijp_mat_get_d(&t->thR, i);
    L->type->vjp_param_bound(L, th, aX, aG, B, 1.01 * t->u, bound);
    check_compare(r, "vjp_param", &PF, &PR, bound, t->ex);
out:
    free(aX), free(aG), free(th), free(bound);
    vijp_mat_clear(&PF), vijp_mat_clear(&PR);
}

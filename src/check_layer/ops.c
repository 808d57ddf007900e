/* The checks of the derivative operators against each other and against
 * forward: adjoint, jvp against finite differences, Jacobian against jvp.
 * Bounds (u: unit roundoff of the format under test, K: the contract's
 * `ulps`, M >= |J| from check_abs_jacobian): an entry of J·u is a dot product
 * of length n of terms each within K·u, so within (n + K)u (M|U|)_i (Higham
 * eq. 3.5 with γ_n <= 1.01·nu for nu < 0.01). */
#include "impl.h"
#include <math.h>
#include <stdlib.h>

/* ⟨G, J U⟩ = ⟨G J, U⟩ with jvp and vjp in the format under test, both sides
 * summed exactly (MPFR at 4·max(1024, P) bits, products of P + 53).  Each
 * side is within γ_max(m,n) + K·u of Σ|G|ᵀM|U|, so their difference within
 * twice that. */
void check_adjoint(check_fix *t, vijp_check_result *r)
{
    size_t m = t->L->out, n = t->L->in, B = t->B;
    vijp_error err = {0};
    vijp_mat V, W;
    vijp_mat_init(&V, m, B, &t->F), vijp_mat_init(&W, n, B, &t->F);
    mpfr_t lhs, rhs, p, q;
    long P = (long)t->F.prec;
    mpfr_inits2(4 * (P > CHECK_REF_PREC ? P : CHECK_REF_PREC), lhs, rhs, p, q, (mpfr_ptr)0);
    check_method(r, "jvp and vjp in %s at %zu points, inner products summed exactly", t->F.name, B);
    check_source(r, "2·1.01·(max(m,n) + K)·u·Σ|G|ᵀ|J||U| (Higham eq. 3.5; K = %g, the contract's ulps)",
                 check_term_ulps(t->L));
    int rc = vijp_layer_jvp(t->L, &t->thF, &t->XF, &t->UF, &V, &err);
    FAIL_IF(rc, "jvp");
    rc = vijp_layer_vjp(t->L, &t->thF, &t->XF, &t->GF, &W, &err);
    FAIL_IF(rc, "vjp");
    mpfr_set_zero(lhs, 1), mpfr_set_zero(rhs, 1);
    double bound = 0;
    for (size_t b = 0; b < B; b++) {
        double *A = check_abs_jacobian(t, b, &err);
        FAIL_IF(A ? 0 : VIJP_EINVAL, "jacobian (for the bound)");
        for (size_t i = 0; i < m; i++) {
            check_entry(p, &V, i + b * m), check_entry(q, &t->GF, i + b * m);
            mpfr_fma(lhs, p, q, lhs, MPFR_RNDN); /* exact: a few products of P + 53 bits */
            for (size_t k = 0; k < n; k++)
                bound += check_absval(&t->GF, i + b * m) * A[i + k * m] * check_absval(&t->UF, k + b * n);
        }
        for (size_t k = 0; k < n; k++) {
            check_entry(p, &W, k + b * n), check_entry(q, &t->UF, k + b * n);
            mpfr_fma(rhs, p, q, rhs, MPFR_RNDN);
        }
        free(A);
    }
    bound *= 2 * 1.01 * (double)(m > n ? m : n) * t->u + 2 * 1.01 * check_term_ulps(t->L) * t->u;
    mpfr_sub(lhs, lhs, rhs, MPFR_RNDN);
    check_record(r, "<G,jvp(U)> - <vjp(G),U>", 0, 0, check_num_mpfr(lhs), (check_num){bound, t->ex});
out:
    mpfr_clears(lhs, rhs, p, q, (mpfr_ptr)0);
    vijp_mat_clear(&V), vijp_mat_clear(&W);
}

/* Bound on the jvp of the format under test: 1.01(n + K)u (M|U|)_i. */
static int jvp_bound(check_fix *t, double *bound, vijp_error *err)
{
    size_t m = t->L->out, n = t->L->in;
    for (size_t b = 0; b < t->B; b++) {
        double *A = check_abs_jacobian(t, b, err);
        if (!A) return VIJP_EINVAL;
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < n; k++)
                bound[i + b * m] += 1.01 * (n + check_term_ulps(t->L)) * t->u * A[i + k * m] * check_absval(&t->UF, k + b * n);
        free(A);
    }
    return 0;
}

/* D = (f(x + hU) − f(x − hU)) / 2h with the MPFR operators at W bits and
 * h = 2^-hexp (check_diff_prec, check_diff_hexp: 2048 and 300 up to
 * mpfr:344, then growing with P): truncation h²/6·|f‴||U|³ ~ 2^-2hexp and
 * rounding 2^-W/h, both 2^-256 or more below u, are far below the jvp's own
 * bound, which therefore stands as it is.  x ± hU is exact (x and U are
 * doubles, hexp + 60 bits < W). */
static int differences_mpfr(check_fix *t, vijp_mat *D, vijp_error *err)
{
    size_t m = t->L->out, n = t->L->in, B = t->B;
    long hexp = check_diff_hexp((long)t->F.prec);
    vijp_format H;
    int rc = vijp_format_mpfr(&H, check_diff_prec((long)t->F.prec), err);
    if (rc) return rc;
    vijp_mat th, Xp, Xm, Ym;
    vijp_mat_init(&th, t->thR.rows, 1, &H), vijp_mat_convert(&th, &t->thR);
    vijp_mat_init(&Xp, n, B, &H), vijp_mat_init(&Xm, n, B, &H), vijp_mat_init(&Ym, m, B, &H);
    for (size_t i = 0; i < n * B; i++) {
        mpfr_mul_2si(Xp.m[i], t->UR.m[i], -hexp, MPFR_RNDN);
        mpfr_sub(Xm.m[i], t->XR.m[i], Xp.m[i], MPFR_RNDN);
        mpfr_add(Xp.m[i], t->XR.m[i], Xp.m[i], MPFR_RNDN);
    }
    vijp_mat Yp;
    vijp_mat_init(&Yp, m, B, &H);
    if (!(rc = vijp_layer_forward(t->L, &th, &Xp, &Yp, err)) && !(rc = vijp_layer_forward(t->L, &th, &Xm, &Ym, err)))
        for (size_t i = 0; i < m * B; i++) {
            mpfr_sub(Yp.m[i], Yp.m[i], Ym.m[i], MPFR_RNDN);
            mpfr_mul_2si(Yp.m[i], Yp.m[i], hexp - 1, MPFR_RNDN);
        }
    if (!rc) vijp_mat_init(D, m, B, &H), vijp_mat_copy(D, &Yp);
    vijp_mat *all[] = {&th, &Xp, &Xm, &Yp, &Ym};
    for (size_t i = 0; i < 5; i++) vijp_mat_clear(all[i]);
    return rc;
}

/* One Richardson step removes the h² term of the truncation error of the
 * central differences d_k (h_k = 2^(−2−k), k < CHECK_LEVELS; level k's
 * entries at d[k·len …], their rounding bounds at rho[k·len …]):
 * R_k = D_k + (D_k − D_(k−1))/3, rounding (4ρ_k + ρ_(k−1))/3; its h⁴ term is
 * estimated from the next coarser step, T_k = |R_k − R_(k−1)| (R_(k−1)'s is
 * 16 times R_k's), and since the rounding of both may hide up to
 * (ρR_(k−1) + ρR_k)/15 of it,
 *   E_k = T_k + ρR_k + (ρR_(k−1) + ρR_k)/15,
 * the smallest over k kept (with its R_k) into D and est.  T_k is an
 * estimate, not a bound (it assumes the asymptotic regime): a check built on
 * it is the weaker kind. */
void check_richardson(const double *d, const double *rho, size_t len, double *D, double *est)
{
    for (size_t o = 0; o < len; o++) {
        double best = NAN, besterr = INFINITY, Rprev = NAN, rRprev = NAN;
        for (int k = 1; k < CHECK_LEVELS; k++) {
            double dk = d[k * len + o], dp = d[(k - 1) * len + o];
            double R = dk + (dk - dp) / 3, rR = (4 * rho[k * len + o] + rho[(k - 1) * len + o]) / 3;
            if (k >= 2) {
                double E = fabs(R - Rprev) + rR + (rRprev + rR) / 15;
                if (E < besterr) best = R, besterr = E;
            }
            Rprev = R, rRprev = rR;
        }
        D[o] = best, est[o] = besterr;
    }
}

/* Without MPFR operators, in double: central differences
 *   D_k = (f̂(x + h_k U) − f̂(x − h_k U)) / 2h_k,  h_k = 2^(−2−k), k < LEVELS,
 * whose rounding is bounded through the contract: f̂ at x' = fl(x ± hU) is
 * within ε(x') = 1.01(n + K)u(M|x'| + |b| + |y|) of f(x'), and x' within
 * u|x'| of x ± hU (moving f by u·M|x'|), so with the final subtraction
 *   ρ_k = (ε(x⁺) + ε(x⁻) + u·M(|x⁺| + |x⁻|)) / 2h_k + u|D_k|
 * (M at the centre x stands for M at x±: first order), then one Richardson
 * step (check_richardson: an estimate, so this check is the weaker one).
 * Steps go below the 1e-3 that keeps points off kinks. */
#define LEVELS CHECK_LEVELS
static int differences_double(check_fix *t, vijp_mat *D, double *est, vijp_error *err)
{
    size_t m = t->L->out, n = t->L->in, B = t->B;
    double K = check_term_ulps(t->L), u = t->u, e = 1.01 * (n + K) * u;
    vijp_mat Xp, Xm, Yp, Ym;
    vijp_mat_init(&Xp, n, B, &t->F), vijp_mat_init(&Xm, n, B, &t->F);
    vijp_mat_init(&Yp, m, B, &t->F), vijp_mat_init(&Ym, m, B, &t->F);
    double *d = vijp_alloc_array(LEVELS * m * B, sizeof *d), *rho = vijp_alloc_array(LEVELS * m * B, sizeof *rho);
    double **M = vijp_alloc_array(B, sizeof *M);
    int rc = 0;
    for (size_t b = 0; !rc && b < B; b++)
        if (!(M[b] = check_abs_jacobian(t, b, err))) rc = VIJP_EINVAL;
    for (int k = 0; !rc && k < LEVELS; k++) {
        double h = ldexp(1, -2 - k);
        for (size_t i = 0; i < n * B; i++) Xp.d[i] = t->XF.d[i] + h * t->UF.d[i], Xm.d[i] = t->XF.d[i] - h * t->UF.d[i];
        if ((rc = vijp_layer_forward(t->L, &t->thF, &Xp, &Yp, err)) || (rc = vijp_layer_forward(t->L, &t->thF, &Xm, &Ym, err)))
            break;
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < m; i++) {
                size_t o = i + b * m;
                double mx = 0, bias = check_bias_at(t, i);
                for (size_t j = 0; j < n; j++) mx += M[b][i + j * m] * (fabs(Xp.d[j + b * n]) + fabs(Xm.d[j + b * n]));
                double dk = (Yp.d[o] - Ym.d[o]) / (2 * h);
                d[k * m * B + o] = dk;
                rho[k * m * B + o] = (e * (mx + 2 * bias + fabs(Yp.d[o]) + fabs(Ym.d[o])) + u * mx) / (2 * h) + u * fabs(dk);
            }
    }
    if (!rc) {
        vijp_mat_init(D, m, B, &t->F);
        check_richardson(d, rho, m * B, D->d, est);
    }
    for (size_t b = 0; b < B; b++) free(M[b]);
    free(M), free(d), free(rho);
    vijp_mat_clear(&Xp), vijp_mat_clear(&Xm), vijp_mat_clear(&Yp), vijp_mat_clear(&Ym);
    return rc;
}

void check_jvp_differences(check_fix *t, vijp_check_result *r)
{
    size_t m = t->L->out, B = t->B;
    vijp_error err = {0};
    vijp_mat V, D = {0};
    vijp_mat_init(&V, m, B, &t->F);
    double *bound = vijp_alloc_array(m * B, sizeof *bound), *est = vijp_alloc_array(m * B, sizeof *est);
    int rc = vijp_layer_jvp(t->L, &t->thF, &t->XF, &t->UF, &V, &err);
    FAIL_IF(rc, "jvp");
    rc = jvp_bound(t, bound, &err);
    FAIL_IF(rc, "jacobian (for the bound)");
    if (t->have_ref) {
        long P = (long)t->F.prec, hexp = check_diff_hexp(P), W = check_diff_prec(P);
        if (W > VIJP_PREC_MAX) {
            check_skip(r, "at %s the differences need %ld bits (h = 2^-%ld, truncation and rounding 2^-256 below u), "
                       "past MPFR formats' %d: differences are checked up to mpfr:%ld", t->F.name, W, hexp,
                       VIJP_PREC_MAX, check_diff_limit());
            goto out;
        }
        check_method(r, "central differences of the MPFR forward at %ld bits, h = 2^-%ld, at %zu points", W, hexp, B);
        check_source(r, "1.01·(n + K)·u·(|J||U|)_i (Higham eq. 3.5; K = %g, the contract's ulps); truncation "
                     "~2^-%ld and rounding 2^-%ld of the differences are below it", check_term_ulps(t->L), 2 * hexp,
                     W - hexp);
        rc = differences_mpfr(t, &D, &err);
        FAIL_IF(rc, "forward (MPFR, differences)");
    } else {
        r->weaker = 1;
        check_method(r, "Richardson-extrapolated central differences in double (no MPFR operators), "
                     "h = 2^-2 … 2^-17, at %zu points", B);
        check_source(r, "1.01·(n + K)·u·(|J||U|)_i (Higham eq. 3.5; K = %g) plus the differences' rounding "
                     "(the contract's forward bound / h) and their truncation, estimated", check_term_ulps(t->L));
        rc = differences_double(t, &D, est, &err);
        FAIL_IF(rc, "forward");
        for (size_t i = 0; i < m * B; i++) bound[i] += est[i];
    }
    check_compare(r, "jvp", &V, &D, bound, t->ex);
out:
    free(bound), free(est);
    vijp_mat_clear(&V);
    vijp_mat_clear(&D);
}

/* The dense Jacobian's columns equal jvp(e_j): both multiply by exact 0s and
 * 1s, so the bound 1.01(n + K)u M_ij is generous (equality is expected). */
void check_jacobian_columns(check_fix *t, vijp_check_result *r)
{
    size_t m = t->L->out, n = t->L->in;
    vijp_error err = {0};
    vijp_mat x, J, E, V, Xr;
    vijp_mat_init(&x, n, 1, &t->F), vijp_mat_init(&J, m, n, &t->F);
    vijp_mat_init(&E, n, n, &t->F), vijp_mat_init(&V, m, n, &t->F), vijp_mat_init(&Xr, n, n, &t->F);
    double *A = NULL, *bound = vijp_alloc_array(m * n, sizeof *bound);
    check_method(r, "jacobian at the first point against jvp along e_1 … e_%zu, in %s", n, t->F.name);
    check_source(r, "1.01·(n + K)·u·|J_ij| (Higham eq. 3.5; K = %g, the contract's ulps)", check_term_ulps(t->L));
    vijp_mat_copy_range(&x, 0, &t->XF, 0, n);
    for (size_t j = 0; j < n; j++) vijp_mat_set_entry_d(&E, j + j * n, 1), vijp_mat_copy_range(&Xr, j * n, &x, 0, n);
    int rc = vijp_layer_jacobian(t->L, &t->thF, &x, &J, &err);
    FAIL_IF(rc, "jacobian");
    rc = vijp_layer_jvp(t->L, &t->thF, &Xr, &E, &V, &err);
    FAIL_IF(rc, "jvp");
    A = check_abs_jacobian(t, 0, &err);
    FAIL_IF(A ? 0 : VIJP_EINVAL, "jacobian (for the bound)");
    for (size_t i = 0; i < m * n; i++) bound[i] = 1.01 * (n + check_term_ulps(t->L)) * t->u * A[i];
    check_compare(r, "jacobian", &J, &V, bound, t->ex);
out:
    free(A), free(bound);
    vijp_mat *all[] = {&x, &J, &E, &V, &Xr};
    for (size_t i = 0; i < 5; i++) vijp_mat_clear(all[i]);
}

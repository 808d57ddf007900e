/* The check of a type's operators for certification over a box
 * (vijp/interval.h): its interval Jacobian over a box must hold the exact
 * Jacobian at every point of the box, and its Lipschitz constant of J must
 * bound ‖J(x) − J(y)‖₂ / ‖x − y‖₂.  Neither can be proven from outside:
 * both are spot-checked at seeded random points of a box about each of the
 * fixture's points, against the type's MPFR Jacobian at JBOX_PREC bits. */
#include "impl.h"
#include "vijp/arith.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JBOX_PREC 256       /* bits of the reference Jacobian */
#define JBOX_HALF_WIDTH 0.25 /* each box is x ± this in every coordinate */
#define JBOX_SAMPLES 16      /* points per box: its two extreme corners and random ones */

typedef struct {
    const vijp_layer *L;
    vijp_format f;
    mpfr_t *th, *x, *J; /* the parameters, a point, J there (JBOX_PREC bits) */
    double tol;         /* the reference's own error bound per entry, below */
} jbox_ref;

/* J at x (doubles) into ref->J, and the bound on its error: the MPFR
 * operator's contract (γ_n on the dot-product terms plus `ulps` on the rest,
 * vijp_layer_bounds) gives (ulps + n + 2)·u·max|J| per entry at u =
 * 2^-JBOX_PREC. */
static void reference_jacobian(jbox_ref *ref, const double *x)
{
    const vijp_layer *L = ref->L;
    size_t mn = L->out * L->in;
    for (size_t j = 0; j < L->in; j++) mpfr_set_d(ref->x[j], x[j], MPFR_RNDN); /* exact: a double */
    L->type->mp->jacobian(L, ref->th, ref->x, ref->J, &ref->f);
    double jmax = 0;
    for (size_t k = 0; k < mn; k++) jmax = fmax(jmax, fabs(mpfr_get_d(ref->J[k], MPFR_RNDA)));
    ref->tol = (check_term_ulps(L) + (double)L->in + 2) * ldexp(jmax, 1 - JBOX_PREC);
}

/* The enclosure J over [lo, hi] against the reference at x: each entry's
 * distance outside its interval against ref->tol. */
static void record_enclosure(vijp_check_result *r, jbox_ref *ref, mpfi_t *Jbox, size_t point)
{
    size_t m = ref->L->out, mn = m * ref->L->in;
    mpfr_t e, end;
    mpfr_init2(e, JBOX_PREC + 64), mpfr_init2(end, mpfi_get_prec(Jbox[0]));
    for (size_t k = 0; k < mn; k++) {
        mpfr_set_zero(e, 1);
        mpfi_get_left(end, Jbox[k]);
        if (mpfr_less_p(ref->J[k], end)) mpfr_sub(e, end, ref->J[k], MPFR_RNDU);
        mpfi_get_right(end, Jbox[k]);
        if (mpfr_greater_p(ref->J[k], end)) mpfr_sub(e, ref->J[k], end, MPFR_RNDU);
        if (mpfi_nan_p(Jbox[k])) mpfr_set_inf(e, 1);
        check_record(r, "J outside its box enclosure", k % m, point, check_num_mpfr(e), (check_num){ref->tol, 0});
    }
    mpfr_clear(e), mpfr_clear(end);
}

/* ‖J(x) − J(y)‖₂ <= LJ·‖x − y‖₂: the difference (reference Jacobians, to
 * double) through LAPACK's σ_max, within p(n)·u·‖D‖ of the truth for a
 * backward stable SVD (Higham §20; p(n) < 2^12 at these widths), plus the
 * references' own errors (√(mn)·tol in the 2-norm): the bound gets 2^-40
 * relative and 2√(mn)·tol. */
static void record_lipschitz(vijp_check_result *r, const jbox_ref *ref, const mpfr_t *Jy, const double *x,
                             const double *y, double LJ, double tol_y, size_t pair)
{
    size_t m = ref->L->out, n = ref->L->in, mn = m * n;
    double *D = vijp_alloc_array(mn, sizeof *D), d2 = 0;
    mpfr_t t;
    mpfr_init2(t, JBOX_PREC + 8);
    for (size_t k = 0; k < mn; k++) mpfr_sub(t, ref->J[k], Jy[k], MPFR_RNDN), D[k] = mpfr_get_d(t, MPFR_RNDN);
    for (size_t j = 0; j < n; j++) d2 += (x[j] - y[j]) * (x[j] - y[j]);
    mpfr_clear(t);
    vijp_numeric a;
    vijp_error err = {0};
    if (vijp_numeric_analysis(D, m, n, &a, &err)) {
        check_refused(r, "vijp_numeric_analysis", VIJP_EINVAL, &err);
        free(D);
        return;
    }
    double bound = LJ * sqrt(d2) * (1 + 0x1p-40) + 2 * sqrt((double)mn) * fmax(ref->tol, tol_y);
    check_record(r, "|J(x)-J(y)|_2 over L_J|x-y|_2", pair, 0, (check_num){a.sigma_max, 0}, (check_num){bound, 0});
    vijp_numeric_clear(&a);
    free(D);
}

void check_jacobian_box(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    vijp_jacobian_box_fn jbox = vijp_jacobian_box_of(L->type);
    vijp_jacobian_lipschitz_fn lip = vijp_jacobian_lipschitz_of(L->type);
    if (!jbox && !lip) {
        check_skip(r, "the type gives neither an interval Jacobian over a box nor a Lipschitz constant of J");
        return;
    }
    if (!L->type->mp) {
        check_skip(r, "the type has no MPFR operators (vijp_ops_mp): no Jacobian to hold its box operators to");
        return;
    }
    size_t m = L->out, n = L->in, mn = m * n, P = t->thF.rows;
    jbox_ref ref = {.L = L};
    vijp_error err = {0};
    if (vijp_format_mpfr(&ref.f, JBOX_PREC, &err)) {
        check_refused(r, "vijp_format_mpfr", VIJP_EINVAL, &err);
        return;
    }
    check_method(r, "%s at %d points of a box x ± %g about each of %zu points, against the MPFR Jacobian at %d bits",
                 jbox && lip ? "the interval Jacobian and the Lipschitz constant"
                 : jbox      ? "the interval Jacobian over the box"
                             : "the Lipschitz constant of J (at consecutive pairs)",
                 JBOX_SAMPLES, JBOX_HALF_WIDTH, t->B, JBOX_PREC);
    check_source(r, "the type's claim, not provable here: J(x) in the enclosure up to the reference's (K + n + 2)u|J|, "
                 "and |J(x) - J(y)|_2 <= L_J |x - y|_2 up to 2^-40 (LAPACK's σ_max)");
    ref.th = vo_vec_new(P + 1, &ref.f), ref.x = vo_vec_new(n, &ref.f), ref.J = vo_vec_new(mn, &ref.f);
    mpfr_t *Jprev = vo_vec_new(mn, &ref.f);
    for (size_t p = 0; p < P; p++) mpfr_set_d(ref.th[p], vijp_mat_get_d(&t->thF, p), MPFR_RNDN);
    double *th = vijp_alloc_array(P + 1, sizeof *th), *lo = vijp_alloc_array(n, sizeof *lo);
    double *hi = vijp_alloc_array(n, sizeof *hi), *x = vijp_alloc_array(n, sizeof *x), *prev = vijp_alloc_array(n, sizeof *prev);
    for (size_t p = 0; p < P; p++) th[p] = vijp_mat_get_d(&t->thF, p);
    mpfi_t *xi = vijp_alloc_array(n, sizeof *xi), *Jbox = vijp_alloc_array(mn, sizeof *Jbox);
    for (size_t j = 0; j < n; j++) mpfi_init2(xi[j], 128);
    for (size_t k = 0; k < mn; k++) mpfi_init2(Jbox[k], 128);
    vijp_rng rng;
    vijp_rng_seed(&rng, t->seed ^ 0x6a626f78); /* "jbox": apart from the fixture's own draws */
    size_t checked = 0, pairs = 0;
    double prev_tol = 0;
    for (size_t b = 0; b < t->B; b++) {
        for (size_t j = 0; j < n; j++) {
            double c = vijp_mat_get_d(&t->XF, j + b * n);
            lo[j] = c - JBOX_HALF_WIDTH, hi[j] = c + JBOX_HALF_WIDTH;
            mpfi_interv_d(xi[j], lo[j], hi[j]);
        }
        int rc = jbox ? jbox(L, th, (const mpfi_t *)xi, Jbox) : 0;
        double LJ = 0;
        if (!rc && lip) rc = lip(L, th, lo, hi, &LJ);
        if (rc) {
            vijp_fail(&err, rc, "over the box about point %zu", b);
            check_refused(r, jbox && !lip ? "jacobian_box" : "jacobian_box or jacobian_lipschitz", rc, &err);
            goto out;
        }
        for (size_t s = 0; s < JBOX_SAMPLES; s++) {
            for (size_t j = 0; j < n; j++)
                x[j] = s == 0 ? lo[j] : s == 1 ? hi[j] : lo[j] + (hi[j] - lo[j]) * vijp_rng_uniform(&rng);
            reference_jacobian(&ref, x);
            if (jbox) record_enclosure(r, &ref, Jbox, checked);
            if (lip && s > 0) record_lipschitz(r, &ref, (const mpfr_t *)Jprev, x, prev, LJ, prev_tol, pairs++);
            for (size_t k = 0; k < mn; k++) mpfr_set(Jprev[k], ref.J[k], MPFR_RNDN);
            memcpy(prev, x, n * sizeof *x), prev_tol = ref.tol;
            checked++;
        }
    }
out:
    for (size_t j = 0; j < n; j++) mpfi_clear(xi[j]);
    for (size_t k = 0; k < mn; k++) mpfi_clear(Jbox[k]);
    free(xi), free(Jbox), free(th), free(lo), free(hi), free(x), free(prev);
    vo_vec_free(ref.th, P + 1), vo_vec_free(ref.x, n), vo_vec_free(ref.J, mn), vo_vec_free(Jprev, mn);
}

/* Certification (DESIGN §4): vijp_certify_matrix against matrices whose
 * smallest singular value is known or bounded independently, exactly
 * rank-deficient matrices, Kahan matrices, well-conditioned large ones; the
 * cokernel bases and bad input; the verdicts of real layers are in
 * t-certify-layer.c, the activation analysis in t-certify-act.c.
 *
 * The oracle of every adversarial case: for the double matrix J (m × n,
 * m <= n) and ANY nonzero y ∈ R^m,
 *     σ_m(J) = min_{‖y‖=1} ‖Jᵀy‖ <= ‖Jᵀy‖ / ‖y‖
 * (Courant–Fischer).  It is evaluated in MPFI at MP_PREC bits, for y given
 * exactly (MPFR numbers or doubles), so its upper end is a rigorous upper
 * bound on the exact quotient: no slack is needed (a relative slack such as
 * 2^-200 on a round-to-nearest evaluation would not be justified where Jᵀy
 * cancels to nearly 0, which is exactly the near-null case that matters).
 * A certificate claims σ_m(J) > s, so s < bound must hold for every y.
 * A false "certified-submersive" is the worst bug this project can have. */
#include "fixtures/certfix.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <mpfi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. prescribed singular values ------------------------------------- */

/* J = U diag(σ) Vᵀ at 256 bits with Householder-product U, V, rounded to
 * double.  Shapes cycle square / wide / tall / any, dims 1..16.  σ_max is 1
 * (half the cases), 10^U(−30, 30) or 10^U(−300, 300) (the latter reaches
 * subnormal Gram entries and overflowing ones); σ_min/σ_max = 10^U(−20, 0)
 * (70%: where double, its preconditioned route and MPFR at 106 and 212 bits
 * take over from each other: J's rounding caps κ(J) near 1/u anyway) or
 * 10^U(−300, 0);
 * the σ between are log-uniform; in 15% of the cases the smallest few σ are
 * exactly 0 (J in MPFR is then rank-deficient, its rounding J usually is
 * not: σ_min(J) ~ u·σ_max, and the oracle with y = U's last column, an exact
 * cokernel vector of the 256-bit J, bounds it by ‖(J − J_256)ᵀ y‖). */
static void prescribed_case(vijp_rng *r, long cs, uint64_t seed, tally *t, long dmin, long dmax, double rlo,
                            double rhi, int tall)
{
    size_t m, n;
    switch (cs % (tall ? 4 : 2)) {
    case 0: m = n = (size_t)rand_int(r, dmin, dmax); break;
    case 1: m = (size_t)rand_int(r, dmin, dmax - 1), n = (size_t)rand_int(r, (long)m + 1, dmax); break;
    case 2: n = (size_t)rand_int(r, dmin, dmax - 1), m = (size_t)rand_int(r, (long)n + 1, dmax); break;
    default: m = (size_t)rand_int(r, dmin, dmax), n = (size_t)rand_int(r, dmin, dmax); break;
    }
    size_t rk = m < n ? m : n;
    mpfr_t *U = mp_vec(m * m), *V = mp_vec(n * n), *sig = mp_vec(rk), smax, smin;
    mpfr_inits2(MP_PREC, smax, smin, (mpfr_ptr)0);
    mp_orthogonal(U, m, r);
    mp_orthogonal(V, n, r);
    double u = vijp_rng_uniform(r);
    if (u < 0.5) mpfr_set_ui(smax, 1, MPFR_RNDN);
    else if (u < 0.85) log_uniform(smax, r, -30, 30);
    else log_uniform(smax, r, -300, 300);
    log_uniform(smin, r, rlo, rhi); /* the ratio σ_min/σ_max */
    mpfr_mul(smin, smin, smax, MPFR_RNDN);
    /* log-uniform between σ_min and σ_max, σ_max first, σ_min last */
    mpfr_t lo, hi;
    mpfr_inits2(MP_PREC, lo, hi, (mpfr_ptr)0);
    mpfr_log10(lo, smin, MPFR_RNDN), mpfr_log10(hi, smax, MPFR_RNDN);
    for (size_t l = 0; l < rk; l++) {
        if (l == 0 && rk > 1) mpfr_set(sig[l], smax, MPFR_RNDN);
        else if (l == rk - 1) mpfr_set(sig[l], smin, MPFR_RNDN);
        else log_uniform(sig[l], r, mpfr_get_d(lo, MPFR_RNDN), mpfr_get_d(hi, MPFR_RNDN));
    }
    if (vijp_rng_uniform(r) < 0.15) /* exact zeros at the end */
        for (size_t z = (size_t)rand_int(r, 1, (long)rk), l = rk - z; l < rk; l++) mpfr_set_zero(sig[l], 1);
    double *J = malloc(m * n * sizeof *J), *y = malloc(m * sizeof *y);
    ck_assert(J && y);
    mp_svd_compose(J, m, n, U, V, sig);
    int finite = 1;
    for (size_t i = 0; i < m * n; i++) finite &= isfinite(J[i]) != 0;
    if (finite) {
        /* Full row rank known (m <= n): σ_m(J) >= σ_m(J_256) − ‖J − J_256‖₂
         * (Weyl); σ_m(J_256) is the prescribed σ_min up to the 256-bit
         * construction (orthogonality of U, V and the products, each within
         * ~2^-240 relative: 2^-200·σ_max bounds it); J − J_256 is one
         * rounding per entry, |δ| <= u|J_ij| + 2^-1075, so ‖J − J_256‖_F <=
         * u‖J‖_F(1 + u) + √(mn)·2^-1075 <= 2u‖J‖_F + mn·2^-1075. */
        int full_rank = 0;
        if (m <= n) {
            mpfr_t lb, e;
            mpfr_inits2(MP_PREC, lb, e, (mpfr_ptr)0);
            mpfr_set_zero(e, 1); /* ‖J‖_F² exactly (J's squares fit in 256 bits) */
            for (size_t i = 0; i < m * n; i++) {
                mpfr_set_d(lb, J[i], MPFR_RNDN);
                mpfr_fma(e, lb, lb, e, MPFR_RNDU);
            }
            mpfr_sqrt(e, e, MPFR_RNDU);
            mpfr_mul_2si(e, e, -52, MPFR_RNDU); /* 2u‖J‖_F >= u‖J‖_F(1 + u) */
            mpfr_sub(lb, sig[rk - 1], e, MPFR_RNDD);
            mpfr_mul_2si(e, smax, -200, MPFR_RNDU);
            mpfr_sub(lb, lb, e, MPFR_RNDD);
            mpfr_set_ui_2exp(e, (unsigned long)(m * n), -1075, MPFR_RNDU); /* >= √(mn)·2^-1075 */
            mpfr_sub(lb, lb, e, MPFR_RNDD);
            full_rank = mpfr_sgn(lb) > 0;
            mpfr_clears(lb, e, (mpfr_ptr)0);
        }
        double b[2];
        b[0] = oracle_bound_mp(J, m, n, U + (m - 1) * m); /* y = U's last column (exact, MPFR) */
        lapack_last_left(J, m, n, y);
        b[1] = oracle_bound_d(J, m, n, y); /* y = LAPACK's left vector for σ_m */
        vijp_certificate c;
        check_cert(J, m, n, b, 2, full_rank, t, "prescribed-σ", cs, seed, &c);
        if (full_rank) {
            mpfr_div(lo, smax, sig[rk - 1], MPFR_RNDN);
            int k = kappa_band(mpfr_get_d(lo, MPFR_RNDN));
            t->band_cases[k]++, t->band_cert[k] += c.verdict == VIJP_CERTIFIED_SUBMERSIVE;
        }
        vijp_certificate_clear(&c);
    }
    free(J), free(y);
    mpfr_clears(smax, smin, lo, hi, (mpfr_ptr)0);
    mp_vec_free(U, m * m), mp_vec_free(V, n * n), mp_vec_free(sig, rk);
}

START_TEST(prescribed_singular_values)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0001u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "prescribed σ"};
    long N = test_iters(1000);
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        prescribed_case(&r, cs, seed, &t, 1, 16, vijp_rng_uniform(&r) < 0.7 ? -20 : -300, 0, 1);
    }
    tally_print(&t);
    ck_assert(t.cases >= test_mine_count(N) * 9 / 10); /* only σ_max ~ 1e300 overflow cases are skipped */
    /* Not only "no false certificate": every case whose full rank the
     * oracle proves (σ_m(J) > 0 by Weyl, above) is certified, in every band
     * of κ: J is exact, so MPFR up to 4096 bits has the digits for any
     * σ_min/σ_max above ~2^-2000, far past κ = 1e300. */
    for (int k = 0; k < 4; k++)
        ck_assert_msg(t.band_cert[k] == t.band_cases[k], "full rank, κ band %d: certified %ld of %ld", k,
                      t.band_cert[k], t.band_cases[k]);
}
END_TEST

/* Item 1 around κ = 1/u, small: 2..5 rows, κ = 10^U(12, 17).  There
 * LAPACK's σ̂ (double route) and the MPFR estimate λ̂ of λ_min(fl_106(JJᵀ))
 * may exceed σ_min² by far more than the margins of the tries (0.98, 0.81,
 * ...), so the proof alone (e_G, c, the rounding directions) stands between
 * the certificate and a false claim: with e_G and c both dropped, or the
 * shifted Cholesky trusted, these cases produce false certificates. */
START_TEST(near_unit_roundoff)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0007u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "κ near 1/u, small"};
    long N = test_iters(600);
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        prescribed_case(&r, cs, seed, &t, 2, 5, -17, -12, 0);
    }
    tally_print(&t);
    ck_assert_msg(t.band_cert[2] + t.band_cert[3] == t.band_cases[2] + t.band_cases[3] && t.band_cases[2] > test_mine_count(N) / 4,
                  "full rank near κ = 1/u: certified %ld of %ld", t.band_cert[2] + t.band_cert[3],
                  t.band_cases[2] + t.band_cases[3]);
}
END_TEST

/* Orthonormal columns: Q of the QR of a seeded Gaussian k × k matrix. */
static void d_orthogonal(double *Q, size_t k, vijp_rng *r)
{
    double *tau = malloc(k * sizeof *tau);
    for (size_t i = 0; i < k * k; i++) Q[i] = vijp_rng_normal(r);
    ck_assert(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (int)k, (int)k, Q, (int)k, tau) == 0);
    ck_assert(LAPACKE_dorgqr(LAPACK_COL_MAJOR, (int)k, (int)k, (int)k, Q, (int)k, tau) == 0);
    free(tau);
}

/* J = U diag(σ) Vᵀ (m <= n) in double: U, V orthogonal from QR, σ_1 =
 * scale, σ_m = scale/κ, the rest log-uniform between (or all = scale when
 * flat). */
static void d_prescribed(double *J, size_t m, size_t n, double kappa, int flat, double scale, vijp_rng *r)
{
    double *U = malloc(m * m * sizeof *U), *V = malloc(n * n * sizeof *V), *US = malloc(m * m * sizeof *US);
    ck_assert(U && V && US);
    d_orthogonal(U, m, r), d_orthogonal(V, n, r);
    for (size_t l = 0; l < m; l++) { /* US = U diag(σ) */
        double sg = l == 0 ? 1 : l == m - 1 ? 1 / kappa : flat ? 1 : pow(kappa, -vijp_rng_uniform(r));
        for (size_t i = 0; i < m; i++) US[i + l * m] = U[i + l * m] * sg * scale;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)m, 1.0, US, (int)m, V, (int)n, 0.0, J,
                (int)m);
    free(U), free(V), free(US);
}

/* Item 1 where the double routes hand over to each other and to MPFR: m in
 * 8..48, n in m..48, κ = 10^U(4, 10) (direct route, preconditioned route,
 * their failures), spectra log-uniform or flat, scaled by 2^U(−30, 30).
 * Built in double; the oracle is LAPACK's left vector. */
START_TEST(double_routes)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0006u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "double routes' edges"};
    long N = test_iters(100);
    double *J = malloc(48 * 48 * sizeof *J), y[48];
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        size_t m = (size_t)rand_int(&r, 8, 48), n = (size_t)rand_int(&r, (long)m, 48);
        double kappa = pow(10, 4 + 6 * vijp_rng_uniform(&r));
        d_prescribed(J, m, n, kappa, cs % 3 == 2, ldexp(1, (int)rand_int(&r, -30, 30)), &r);
        lapack_last_left(J, m, n, y);
        double b = oracle_bound_d(J, m, n, y);
        check_cert(J, m, n, &b, 1, 0, &t, "double routes", cs, seed, NULL);
    }
    free(J);
    tally_print(&t);
    /* κ in [1e4, 1e10], J exact and far from 1/u: every one is certified,
     * by one double route or by MPFR (a certifier turning inconclusive in
     * this band would pass "no false certificate" but not this). */
    ck_assert_msg(t.cert_double + t.cert_mpfr == t.cases, "κ in [1e4, 1e10]: certified %ld of %ld",
                  t.cert_double + t.cert_mpfr, t.cases);
}
END_TEST

/* Enclosures: the certificate covers every J in [mid − rad, mid + rad]
 * (Weyl: σ_min(J) >= σ_min(mid) − ‖rad‖₂).  The worst member is near
 * J_adv = mid − rad ∘ sign(u vᵀ) (u, v: LAPACK's singular vectors of mid for
 * σ_min), which lowers σ_min by up to ~(2/π)‖rad‖_F: the oracle bounds
 * σ_min(J_adv) with y = u, J_adv's entries enclosed in MPFI, so s <
 * bound(J_adv) must hold.  Radii from 10^-3 to 2 times σ̂_min/√(mn), constant
 * or uniformly random per entry. */
static double oracle_bound_box(const double *mid, const double *rad, const double *u, const double *v, size_t m,
                               size_t n)
{
    mpfi_t z, t, e, num, den;
    mpfi_init2(z, MP_PREC), mpfi_init2(t, MP_PREC), mpfi_init2(e, MP_PREC), mpfi_init2(num, MP_PREC),
        mpfi_init2(den, MP_PREC);
    mpfi_set_ui(num, 0), mpfi_set_ui(den, 0);
    for (size_t k = 0; k < n; k++) {
        mpfi_set_ui(z, 0);
        for (size_t i = 0; i < m; i++) {
            mpfi_set_d(e, rad[i + k * m]); /* J_adv entry: mid − rad·sign(u_i v_k), enclosed */
            if ((u[i] >= 0) == (v[k] >= 0)) mpfi_neg(e, e);
            mpfi_add_d(e, e, mid[i + k * m]);
            mpfi_mul_d(t, e, u[i]);
            mpfi_add(z, z, t);
        }
        mpfi_sqr(z, z);
        mpfi_add(num, num, z);
    }
    for (size_t i = 0; i < m; i++) {
        mpfi_set_d(t, u[i]);
        mpfi_sqr(t, t);
        mpfi_add(den, den, t);
    }
    mpfr_t hi;
    mpfr_init2(hi, MP_PREC);
    mpfi_div(num, num, den);
    mpfi_sqrt(num, num);
    mpfi_get_right(hi, num);
    double b = mpfr_get_d(hi, MPFR_RNDU);
    mpfr_clear(hi);
    mpfi_clear(z), mpfi_clear(t), mpfi_clear(e), mpfi_clear(num), mpfi_clear(den);
    return b;
}

START_TEST(enclosure_radius)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0008u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "enclosures (Weyl)"};
    long N = test_iters(200);
    double J[8 * 12], rad[8 * 12], S[8], U[8 * 8], VT[12 * 12], A[8 * 12], sup[8], v[12];
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        size_t m = (size_t)rand_int(&r, 1, 8), n = (size_t)rand_int(&r, (long)m, 12);
        d_prescribed(J, m, n, pow(10, 6 * vijp_rng_uniform(&r)), 0, ldexp(1, (int)rand_int(&r, -30, 30)), &r);
        memcpy(A, J, m * n * sizeof *A);
        ck_assert(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'A', 'A', (int)m, (int)n, A, (int)m, S, U, (int)m, VT, (int)n, sup) == 0);
        for (size_t k = 0; k < n; k++) v[k] = VT[(m - 1) + k * n]; /* right vector for σ_m */
        double rho = pow(10, -3 + 3.3 * vijp_rng_uniform(&r)) * S[m - 1] / sqrt((double)(m * n));
        int flat = cs % 2;
        for (size_t i = 0; i < m * n; i++) rad[i] = flat ? rho : rho * vijp_rng_uniform(&r);
        double b = oracle_bound_box(J, rad, U + (m - 1) * m, v, m, n);
        vijp_certificate c;
        vijp_error err;
        ck_assert_msg(!vijp_certify_matrix(J, rad, m, n, NULL, &c, &err), "%s", err.msg);
        t.cases++;
        /* the reported radius between σ_max(rad) (LAPACK's, within 10·max(m, n)·u
         * of it, Demmel–Kahan) and ‖rad‖_F (rounded up, MPFR); fr ← the radius
         * for the Weyl check below */
        mpfr_t fr, sum;
        mpfr_inits2(MP_PREC, fr, sum, (mpfr_ptr)0);
        mpfr_set_zero(fr, 1);
        for (size_t i = 0; i < m * n; i++) {
            mpfr_set_d(sum, rad[i], MPFR_RNDN);
            mpfr_fma(fr, sum, sum, fr, MPFR_RNDU);
        }
        mpfr_sqrt(fr, fr, MPFR_RNDU);
        double R[8 * 12], smax[8];
        memcpy(R, rad, m * n * sizeof *R);
        ck_assert(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', (int)m, (int)n, R, (int)m, smax, NULL, 1, NULL, 1, sup) == 0);
        ck_assert_msg(c.enclosure_radius >= smax[0] * (1 - 10 * 12 * 0x1p-52) &&
                          c.enclosure_radius <= mpfr_get_d(fr, MPFR_RNDU) * (1 + 0x1p-51), /* its two roundings up */
                      "reported radius %.17g outside [σ_max(rad) %.17g, ‖rad‖_F %.17g]", c.enclosure_radius, smax[0],
                      mpfr_get_d(fr, MPFR_RNDN));
        mpfr_set_d(fr, c.enclosure_radius, MPFR_RNDN);
        if (c.verdict == VIJP_CERTIFIED_SUBMERSIVE) {
            ck_assert_msg(c.s < b, "FALSE CERTIFICATE: enclosure case %ld (seed %llu, %zu × %zu): s = %.17g, a member has "
                                   "σ_min <= %.17g",
                          cs, (unsigned long long)seed, m, n, c.s, b);
            /* Weyl applied in full: the proof on mid gives s_mid < σ_min(mid)
             * <= bound(mid, y = u), and s <= s_mid − radius */
            double bmid = oracle_bound_d(J, m, n, U + (m - 1) * m);
            mpfr_add_d(sum, fr, c.s, MPFR_RNDD);
            ck_assert_msg(mpfr_cmp_d(sum, bmid) < 0, "s %.17g + radius %.17g is not below σ_min(mid) <= %.17g", c.s,
                          mpfr_get_d(fr, MPFR_RNDN), bmid);
            if (!strcmp(c.method, "certified-double")) t.cert_double++;
            else t.cert_mpfr++;
            t.bounded++;
            if (c.s / b > t.worst) t.worst = c.s / b;
        } else if (c.verdict == VIJP_NOT_SUBMERSIVE) t.not_sub++, t.not_sub_proven += c.cokernel_proven;
        else t.inconclusive++;
        ck_assert(!c.cokernel_proven); /* a box is never proven rank-deficient from its midpoint */
        mpfr_clears(fr, sum, (mpfr_ptr)0);
        vijp_certificate_clear(&c);
    }
    tally_print(&t);
    ck_assert_msg(t.bounded > test_mine_count(N) / 4, "only %ld certified", t.bounded);
}
END_TEST

/* ---- 2. exactly rank-deficient and near rank-deficient ----------------- */

/* Builds an exactly rank-deficient m × n double J (kind 0: A·B with small
 * integers, inner dimension k < m, optionally rows and columns scaled by
 * powers of two, all exact; 1: a row copied exactly as ±2^e times another;
 * 2: zero rows; 3: more than n − m zero columns; 4: m > n) and, for kinds
 * 0–2, an exact null vector y of Jᵀ (doubles, Jᵀy = 0 exactly); returns the
 * row on which y is nonzero (the one to perturb), or −1. */
static long rank_deficient(vijp_rng *r, int kind, double *J, size_t *pm, size_t *pn, double *y)
{
    size_t m, n;
    long row = -1;
    if (kind == 3) m = (size_t)rand_int(r, 1, 16), n = (size_t)rand_int(r, (long)m, 16);
    else if (kind == 4) n = (size_t)rand_int(r, 1, 15), m = (size_t)rand_int(r, (long)n + 1, 16);
    else m = (size_t)rand_int(r, 2, 16), n = (size_t)rand_int(r, 1, 16);
    *pm = m, *pn = n;
    memset(y, 0, m * sizeof *y);
    if (kind == 0) {
        size_t k = (size_t)rand_int(r, 1, (long)m - 1);
        double A[16 * 15], B[15 * 16];
        size_t p = (size_t)rand_int(r, 0, (long)m - 1);
        for (size_t i = 0; i < m; i++) y[i] = i == p ? 1 : (double)rand_int(r, -3, 3);
        for (size_t l = 0; l < k; l++) {
            double s = 0;
            for (size_t i = 0; i < m; i++)
                if (i != p) A[i + l * m] = (double)rand_int(r, -8, 8), s += y[i] * A[i + l * m];
            A[p + l * m] = -s; /* Σ_i y_i A_il = 0: |A_pl| <= 15·3·8 = 360 */
        }
        for (size_t i = 0; i < k * n; i++) B[i] = (double)rand_int(r, -8, 8);
        /* |J_ij| <= k·360·8 < 2^16: every product and partial sum is an
         * integer below 2^53, so the double product is exact */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t l = 0; l < k; l++) s += A[i + l * m] * B[l + j * k];
                J[i + j * m] = s;
            }
        if (vijp_rng_uniform(r) < 0.5) { /* D1 J D2 with powers of two: exact; null vector D1^-1 y */
            for (size_t i = 0; i < m; i++) {
                int e = (int)rand_int(r, -40, 40);
                for (size_t j = 0; j < n; j++) J[i + j * m] = ldexp(J[i + j * m], e);
                y[i] = ldexp(y[i], -e);
            }
            for (size_t j = 0; j < n; j++) {
                int e = (int)rand_int(r, -40, 40);
                for (size_t i = 0; i < m; i++) J[i + j * m] = ldexp(J[i + j * m], e);
            }
        }
        row = (long)p;
    } else if (kind == 4) {
        for (size_t i = 0; i < m * n; i++) J[i] = vijp_rng_uniform(r) < 0.5 ? (double)rand_int(r, -8, 8) : vijp_rng_normal(r);
    } else {
        for (size_t i = 0; i < m * n; i++) J[i] = vijp_rng_normal(r);
        if (kind == 1) {
            size_t a = (size_t)rand_int(r, 0, (long)m - 1), b = (size_t)rand_int(r, 0, (long)m - 2);
            b += b >= a;
            double tt = ldexp(vijp_rng_uniform(r) < 0.5 ? 1 : -1, (int)rand_int(r, -20, 20));
            for (size_t j = 0; j < n; j++) J[b + j * m] = tt * J[a + j * m]; /* exact */
            y[a] = tt, y[b] = -1;
            row = (long)b;
        } else if (kind == 2) {
            size_t z = (size_t)rand_int(r, 1, m < 3 ? (long)m : 3);
            for (size_t q = 0; q < z; q++) {
                size_t a = (size_t)rand_int(r, 0, (long)m - 1);
                for (size_t j = 0; j < n; j++) J[a + j * m] = 0;
                row = (long)a;
            }
            y[row] = 1;
        } else { /* kind 3: zc > n − m zero columns, so rank <= n − zc < m */
            size_t zc = (size_t)rand_int(r, (long)(n - m + 1), (long)n), idx[16];
            for (size_t j = 0; j < n; j++) idx[j] = j;
            for (size_t q = 0; q < zc; q++) { /* a random zc-subset (partial Fisher–Yates) */
                size_t w = (size_t)rand_int(r, (long)q, (long)n - 1), tmp = idx[q];
                idx[q] = idx[w], idx[w] = tmp;
                for (size_t i = 0; i < m; i++) J[i + idx[q] * m] = 0;
            }
        }
    }
    return row;
}

/* Never certified, whatever the shape or scaling.  The bound with the
 * exact null vector is exactly 0 (a check of the construction). */
START_TEST(exact_rank_deficient)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0002u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "exactly rank-deficient"};
    long N = test_iters(500);
    double J[16 * 16], y[16];
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        size_t m, n;
        long row = rank_deficient(&r, (int)(cs % 5), J, &m, &n, y);
        double b = row >= 0 ? oracle_bound_d(J, m, n, y) : INFINITY;
        if (row >= 0) ck_assert_msg(b == 0, "case %ld: the null vector is not exact (%g)", cs, b);
        vijp_certificate c;
        check_cert(J, m, n, &b, 1, 0, &t, "rank-deficient", cs, seed, &c);
        ck_assert_int_eq(t.cert_double + t.cert_mpfr, 0);
        /* every exactly singular matrix is proven so, with its exact cokernel dimension */
        size_t truth = m - rank_rational(J, m, n);
        ck_assert_msg(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven && c.cokernel_dim == truth,
                      "rank-deficient case %ld (%zu × %zu, kind %ld): %s, cokernel %zu (proven %d), exactly %zu: %s", cs, m,
                      n, cs % 5, vijp_verdict_name(c.verdict), c.cokernel_dim, c.cokernel_proven, truth, c.reason);
        vijp_certificate_clear(&c);
    }
    tally_print(&t);
}
END_TEST

/* Exactly full rank but too ill-conditioned for a proof at the precision
 * allowed (κ ≈ 1e16, --prec-max 106): [[1, 1], [1, 1 + 2^-52]] has
 * determinant 2^-52, and its 3 × 3 kin 2^-104; LAPACK sees rank 1 and 1.
 * Full row rank over the rationals is a certificate without a bound s;
 * rank_rational (the test's own elimination) agrees. */
START_TEST(exactly_full_without_bound)
{
    double e = 0x1p-52, M2[4] = {1, 1, 1, 1 + e}, M3[9] = {1, 1, 1, 1, 1 + e, 1, 1, 1, 1 + e};
    const double *M[2] = {M2, M3};
    vijp_certify_opts o = {106};
    for (size_t k = 0; k < 2; k++) {
        size_t m = k + 2;
        vijp_certificate c;
        vijp_error err = {0};
        ck_assert_msg(!vijp_certify_matrix(M[k], NULL, m, m, &o, &c, &err), "%s", err.msg);
        ck_assert_uint_eq(rank_rational(M[k], m, m), m);
        ck_assert_uint_lt(c.num.rank, m); /* LAPACK alone would call it rank deficient */
        ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c.method, "exact-rank") && isnan(c.s) &&
                          c.cokernel_dim == 0 && c.cokernel_proven,
                      "%zu × %zu: %s (%s), cokernel %zu: %s", m, m, vijp_verdict_name(c.verdict), c.method, c.cokernel_dim,
                      c.reason);
        ck_assert_msg(strlen(c.reason) < sizeof c.reason - 1, "the reason is cut: %s", c.reason);
        /* the longest composition: exact rank, MPFR's reason, the equilibrated retry's */
        const char *tail = "(and with rows equilibrated)";
        ck_assert_msg(strlen(c.reason) > strlen(tail) && !strcmp(c.reason + strlen(c.reason) - strlen(tail), tail) &&
                          strstr(c.reason, "no certificate up to mpfr:106"),
                      "the reason: %s", c.reason);
        vijp_certificate_clear(&c);
    }
}
END_TEST

/* The same with one entry of the row where y is nonzero moved by 2^-60
 * times its row and column scale (or, where that is absorbed in rounding,
 * by one ulp): the truth is unknown, but ‖J'ᵀy‖/‖y‖ with the old exact null
 * vector y still bounds σ_min(J') (= |δ|·|y_row|/‖y‖), and so does LAPACK's
 * vector. */
START_TEST(near_rank_deficient)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0003u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "near rank-deficient"};
    long N = test_iters(500);
    double J[16 * 16], y[16], yl[16];
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        size_t m, n;
        long row = rank_deficient(&r, (int)(cs % 3), J, &m, &n, y);
        size_t col = (size_t)rand_int(&r, 0, (long)n - 1);
        double *e = &J[row + col * m];
        /* the scale of the entry's row and column: the largest entry of either */
        double sc = 0;
        for (size_t j = 0; j < n; j++) sc = fmax(sc, fabs(J[row + j * m]));
        for (size_t i = 0; i < m; i++) sc = fmax(sc, fabs(J[i + col * m]));
        double old = *e;
        *e = old + ldexp(sc > 0 ? sc : 1, -60);
        if (*e == old) *e = nextafter(old, INFINITY);
        double b[2];
        b[0] = oracle_bound_d(J, m, n, y);
        lapack_last_left(J, m, n, yl);
        b[1] = oracle_bound_d(J, m, n, yl);
        check_cert(J, m, n, b, 2, 0, &t, "near-rank-deficient", cs, seed, NULL);
    }
    tally_print(&t);
}
END_TEST

/* Reported cases.  [[1,2,3],[4,5,6],[1,2,3]]: rank exactly 2, which the
 * null-vector test could not prove (LAPACK's vector is not exactly in the
 * kernel).  1e155·I₃ (‖J‖_F² overflows double) and diag(1e300, 1e-300)
 * (σ_min = 1e-300 below the largest row's rounding): full rank, σ_min 1e155
 * and 1e-300 exactly, so a certificate must have s in (0.9σ_min, σ_min]. */
START_TEST(exact_rank_and_scales)
{
    vijp_certificate c;
    vijp_error err = {0};
    double A[9] = {1, 4, 1, 2, 5, 2, 3, 6, 3}; /* column-major */
    ck_assert(!vijp_certify_matrix(A, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_NOT_SUBMERSIVE && c.cokernel_proven && c.cokernel_dim == 1, "%s %zu: %s",
                  vijp_verdict_name(c.verdict), c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
    double B[9] = {1e155, 0, 0, 0, 1e155, 0, 0, 0, 1e155};
    ck_assert(!vijp_certify_matrix(B, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e155 && c.s <= 1e155, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
    double C[4] = {1e300, 0, 0, 1e-300};
    ck_assert(!vijp_certify_matrix(C, NULL, 2, 2, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e-300 && c.s <= 1e-300, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
    /* tiny scale too: 1e-155·I₃, whose Gram entries underflow */
    for (int k = 0; k < 9; k++) B[k] *= 1e-310;
    ck_assert(!vijp_certify_matrix(B, NULL, 3, 3, NULL, &c, &err));
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && c.s > 0.9e-155 && c.s <= 1.0000001e-155, "%s s = %g: %s",
                  vijp_verdict_name(c.verdict), c.s, c.reason);
    vijp_certificate_clear(&c);
}
END_TEST

/* A proven cokernel dimension must be proven: J (3 × 4) with one exactly
 * zero row, one row (2^-60, 0, 0, 0) and one ordinary row has rank exactly 2,
 * cokernel dimension exactly 1; numerically (tolerance 4u·σ_max) it looks
 * like 2.  Proven not-submersive, yes; but a cokernel_dim reported as
 * proven (certify.h: "the proven one when cokernel_proven") must not exceed
 * the true 1.  Tall: m > n alone proves m − n, whatever else is found. */
START_TEST(proven_cokernel_dim)
{
    double J[3 * 4] = {0}, Jt[6 * 3];
    J[1] = 0x1p-60;
    for (size_t j = 0; j < 4; j++) J[2 + j * 3] = 1 + (double)j;
    vijp_certificate c;
    vijp_error err;
    ck_assert(!vijp_certify_matrix(J, NULL, 3, 4, NULL, &c, &err));
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.num.cokernel_dim, 2);
    ck_assert_msg(c.cokernel_dim == 1, "cokernel_dim %zu reported as proven; exactly 1 (%s)", c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
    /* 6 × 3 with independent integer columns: proven >= 3 by shape */
    for (size_t i = 0; i < 18; i++) Jt[i] = (double)((i * 7 + 3) % 11) - 5;
    ck_assert(!vijp_certify_matrix(Jt, NULL, 6, 3, NULL, &c, &err));
    ck_assert_int_eq(c.verdict, VIJP_NOT_SUBMERSIVE);
    ck_assert(c.cokernel_proven);
    ck_assert_uint_eq(c.cokernel_dim, 3);
    vijp_certificate_clear(&c);
    /* 3 × 1 (2, 1, −1)ᵀ: LAPACK's first cokernel vector happens to be an
     * exact null vector (a proof of dimension >= 1), and the shape proves 2 */
    double Jc[3] = {2, 1, -1};
    ck_assert(!vijp_certify_matrix(Jc, NULL, 3, 1, NULL, &c, &err));
    ck_assert(c.cokernel_proven);
    ck_assert_msg(c.cokernel_dim == 2, "cokernel_dim %zu (%s)", c.cokernel_dim, c.reason);
    vijp_certificate_clear(&c);
}
END_TEST

/* ---- 3. Kahan matrices ------------------------------------------------- */

/* K = diag(1, s, …, s^{n−1})·(I − c·strict upper ones), c² + s² = 1: σ_min
 * tiny and far from what the diagonal suggests.  Bounded with LAPACK's left
 * vector (and, for Kᵀ, too). */
START_TEST(kahan)
{
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0004u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "Kahan"};
    long N = test_iters(30);
    double *K = malloc(40 * 40 * sizeof *K), *Kt = malloc(40 * 40 * sizeof *Kt), y[40];
    for (long cs = 0; cs < N; cs++) {
        if (!test_mine(cs)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, cs);
        size_t n = (size_t)rand_int(&r, 10, cs % 4 == 3 ? 40 : 24);
        double c = 0.2 + 0.7 * vijp_rng_uniform(&r), s = sqrt(1 - c * c), d = 1;
        for (size_t i = 0; i < n; i++, d *= s)
            for (size_t j = 0; j < n; j++) K[i + j * n] = j < i ? 0 : j == i ? d : -c * d;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) Kt[j + i * n] = K[i + j * n];
        for (int tr = 0; tr < 2; tr++) {
            const double *A = tr ? Kt : K;
            lapack_last_left(A, n, n, y);
            double b = oracle_bound_d(A, n, n, y);
            check_cert(A, n, n, &b, 1, 0, &t, tr ? "Kahan transposed" : "Kahan", cs, seed, NULL);
        }
    }
    free(K), free(Kt);
    tally_print(&t);
}
END_TEST

/* ---- 4. well-conditioned, larger --------------------------------------- */

/* Reach of the double certificate.  The direct route proves σ_min > s by
 * Cholesky of fl(JJᵀ) − (s² + e_G + c)I, e_G + c ≈ (n + m + 1)·u·‖J‖_F², at
 * s² = 0.98σ̂² and 0.81σ̂²; if both fail, the preconditioned route
 * (Z ≈ R^-T) gives s ≈ 0.9σ/1.025 = 0.88σ, before the direct route's last
 * tries at 0.5σ̂ and 0.1σ̂.  Within a factor 2 therefore holds wherever either
 * route succeeds.  With σ log-uniform on [σ_max/κ, σ_max],
 * ‖J‖_F² ≈ mσ_max²/(2 ln κ): 64² at κ 1e6 passes the 0.9 try, 512² and
 * 100–200 at 1e6 go preconditioned.  (Before the preconditioned route came
 * ahead of the 0.5σ̂ try, 100×150 at κ 1e6 got s = σ̂/2 rounded down, just
 * outside the factor 2: this test found it.)
 * Flat spectra (all σ = σ_max but one) have ‖J‖_F² ≈ m. */
START_TEST(well_conditioned)
{
    static const struct {
        size_t m, n;
        double kappa;
        int flat;
    } C[] = {{512, 512, 1e6, 0}, {512, 512, 1e6, 1}, {200, 200, 1e6, 0}, {64, 64, 1e6, 0}, {100, 150, 1e6, 0},
             {150, 200, 1e6, 0}, {128, 128, 1e6, 1}, {64, 100, 1, 0},    {1, 200, 1, 0}};
    uint64_t seed = test_seed();
    const uint64_t stream = seed ^ 0x5eed0005u; /* each case its own generator: shardable (test_mine) */
    tally t = {.name = "well-conditioned"};
    char line[1024] = "certify: well-conditioned, all certified-double:";
    for (size_t k = 0; k < sizeof C / sizeof *C; k++) {
        if (!test_mine((long)k)) continue;
        vijp_rng r;
        test_case_rng(&r, stream, (long)k);
        size_t m = C[k].m, n = C[k].n;
        double *J = malloc(m * n * sizeof *J), *y = malloc(m * sizeof *y);
        ck_assert(J && y);
        d_prescribed(J, m, n, C[k].kappa, C[k].flat, ldexp(1, (int)rand_int(&r, -20, 20)), &r);
        lapack_last_left(J, m, n, y);
        double b = oracle_bound_d(J, m, n, y);
        vijp_certificate c;
        check_cert(J, m, n, &b, 1, 1, &t, "well-conditioned", (long)k, seed, &c); /* κ <= 1e6: full rank */
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s %zu×%zu κ %.0e%s s/σ %.3f", k ? ";" : "", m, n,
                 C[k].kappa, C[k].flat ? " flat" : "", c.s / b);
        ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c.method, "certified-double"),
                      "%zu × %zu, κ %g: %s %s (%s)", m, n, C[k].kappa, vijp_verdict_name(c.verdict), c.method, c.reason);
        /* s < σ_min(J) <= b, and within a factor 2: s >= b/2 >= σ_min/2 */
        ck_assert_msg(c.s >= 0.5 * b, "%zu × %zu, κ %g: s = %g, σ_min <= %g", m, n, C[k].kappa, c.s, b);
        /* LAPACK's view agrees: κ within p(m,n)·u·κ² of the truth; 1% is loose */
        ck_assert_msg(fabs(c.num.condition / C[k].kappa - 1) < 0.01, "condition %g", c.num.condition);
        vijp_certificate_clear(&c);
        free(J), free(y);
    }
    fprintf(stderr, "%s\n", line);
    tally_print(&t);
}
END_TEST

/* ---- 6. cokernel bases ------------------------------------------------- */

/* ‖Q1 Q1ᵀ − Q2 Q2ᵀ‖_F for m × k Q1, Q2, in double. */
static double projector_diff(const double *Q1, const double *Q2, size_t m, size_t k)
{
    double *P = malloc(m * m * sizeof *P);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, (int)k, 1.0, Q1, (int)m, Q1, (int)m, 0.0, P,
                (int)m);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, (int)k, -1.0, Q2, (int)m, Q2, (int)m, 1.0, P,
                (int)m);
    double s = 0;
    for (size_t i = 0; i < m * m; i++) s += P[i] * P[i];
    free(P);
    return sqrt(s);
}

/* Both bases span the exact cokernel of J up to backward error: dgesdd's
 * left vectors are those of J + E with ‖E‖₂ <= p·u·‖J‖₂ (and the layer's
 * Householder QR, dgeqrf/dorgqr, those of W + E' with the same form of
 * bound, Higham Thm 19.4: ‖E'‖_F <= γ̃_{mn}‖W‖_F), so by Wedin's sin-θ
 * theorem each projector is within p·u·‖J‖/δ of the exact one in 2-norm, δ
 * = the smallest nonzero singular value (the gap to the zero ones); both
 * computed bases are orthonormal to p·u, which moves QQᵀ by as much again.
 * With rank-k projectors ‖·‖_F <= √(2k)‖·‖₂, and p = 16·m·n (γ̃ with a
 * generous constant): ‖P1 − P2‖_F <= 4√(2k)·16·m·n·u·‖J‖_F/δ. */
static double cokernel_bound(size_t m, size_t n, size_t k, double normF, double gap)
{
    return 4 * sqrt(2.0 * (double)k) * 16 * (double)(m * n) * 0x1p-53 * normF / gap;
}

START_TEST(cokernel_basis)
{
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_error err;
    for (int which = 0; which < 2; which++) {
        one_layer o;
        one_layer_init(&o, which ? "dense:12x8" : "relu", which ? 8 : 12, 7);
        size_t m = o.L->out, n = o.L->in;
        double x[12] = {0.5, -1, 2, -0.25, 3, 0, 7, -1e-300, 1, 2, -3, 4};
        vijp_certificate c;
        certify_at(&o, x, &c);
        size_t P = o.L->type->param_count(o.L);
        vijp_mat th = {.rows = P, .cols = 1, .fmt = &fd, .d = (double *)o.theta};
        vijp_mat xm = {.rows = n, .cols = 1, .fmt = &fd, .d = x};
        size_t k = vijp_layer_fragment_count(o.L, P ? &th : NULL, &xm);
        ck_assert_uint_eq(k, which ? 4 : 5);
        ck_assert_uint_eq(c.num.cokernel_dim, k);
        ck_assert_uint_eq(c.cokernel_dim, k);
        vijp_mat Q;
        vijp_mat_init(&Q, m, k, &fd);
        ck_assert_msg(!vijp_layer_cokernel(o.L, P ? &th : NULL, &xm, &Q, &err), "%s", err.msg);
        /* ‖J‖_F and the gap: relu J = diag(0/1): √7 and 1; orthogonal W:
         * √8 and 1 (σ = 1 up to O(u)) */
        double d = projector_diff(c.num.cokernel, Q.d, m, k), bound = cokernel_bound(m, n, k, sqrt(8.0), 1);
        ck_assert_msg(d <= bound, "%s: ‖P1 − P2‖_F = %g > %g", o.L->type->name, d, bound);
        fprintf(stderr, "certify: cokernel of %s: ‖P1 − P2‖_F = %.3g (bound %.3g)\n", o.L->type->name, d, bound);
        vijp_mat_clear(&Q);
        vijp_certificate_clear(&c);
        vijp_net_free(&o.net);
    }
}
END_TEST

/* ---- 7. bad input ------------------------------------------------------ */

START_TEST(bad_input)
{
    vijp_certificate c;
    vijp_error err;
    double J[6] = {1, 2, 3, 4, 5, 6}, rad[6] = {0};
    J[4] = NAN;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = -INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    J[4] = 5;
    rad[2] = -1e-300;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    ck_assert_msg(strstr(err.msg, "entry 2 is given a negative radius"), "%s", err.msg); /* not "not finite" */
    rad[2] = NAN;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    ck_assert_msg(strstr(err.msg, "entry 2 is not finite"), "%s", err.msg);
    rad[2] = INFINITY;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), VIJP_EDOMAIN);
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 0, 3, NULL, &c, &err), VIJP_EDIM);
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 0, NULL, &c, &err), VIJP_EDIM);
    /* a radius wider than the proof: σ_min([1 2 3; 4 5 6]) ≈ 0.77, and
     * ‖rad‖_F = 1 takes it all (Weyl): not certified */
    rad[2] = 1;
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), 0);
    ck_assert_int_ne(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    vijp_certificate_clear(&c);
    /* a small radius costs exactly ‖rad‖₂ = ‖rad‖_F (one entry; rounded down) */
    vijp_certificate c0;
    rad[2] = 0x1p-30;
    ck_assert_int_eq(vijp_certify_matrix(J, NULL, 2, 3, NULL, &c0, &err), 0);
    ck_assert_int_eq(vijp_certify_matrix(J, rad, 2, 3, NULL, &c, &err), 0);
    ck_assert_int_eq(c.verdict, VIJP_CERTIFIED_SUBMERSIVE);
    ck_assert(c.enclosure_radius >= 0x1p-30);
    ck_assert_msg(c.s <= c0.s - 0x1p-30, "s %.17g vs %.17g", c.s, c0.s);
    vijp_certificate_clear(&c), vijp_certificate_clear(&c0);

    one_layer o;
    one_layer_init(&o, "dense:4x4", 4, 1);
    double x[4] = {1, 2, 3, 4};
    double *th = o.net.theta[0], keep = th[5];
    th[5] = NAN;
    ck_assert_int_eq(vijp_certify_layer(o.L, th, x, NULL, &c, &err), VIJP_EDOMAIN);
    th[5] = keep;
    x[2] = NAN;
    ck_assert_int_eq(vijp_certify_layer(o.L, th, x, NULL, &c, &err), VIJP_EDOMAIN);
    vijp_net_free(&o.net);
    one_layer_init(&o, "tanh", 4, 1);
    ck_assert_int_eq(vijp_certify_layer(o.L, NULL, x, NULL, &c, &err), VIJP_EDOMAIN);
    x[2] = INFINITY;
    ck_assert_int_eq(vijp_certify_layer(o.L, NULL, x, NULL, &c, &err), VIJP_EDOMAIN);

    vijp_activation_report a;
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 0, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, -5, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 10, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 20, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 0, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, INFINITY, 1e-9, &a, &err), VIJP_EINVAL);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, NAN, 1e-9, &a, &err), VIJP_EINVAL);
    vijp_net_free(&o.net);
    one_layer_init(&o, "dense:4x4", 4, 1);
    ck_assert_int_eq(vijp_activation_analyze(o.L, NULL, 10, 1e-9, &a, &err), VIJP_EUNSUPPORTED);
    vijp_net_free(&o.net);
}
END_TEST

/* vijp_certify_rank_at_least on matrices of known rank: diag(1, 1, 0) with
 * P = I has rank 2 (proven for r = 2 with the first two columns of I, not for
 * r = 3); LayerNorm's enclosed Jacobian (rank n − 2 exactly) is proven of
 * rank >= n − 2 and not of rank >= n − 1. */
START_TEST(rank_at_least)
{
    double mid[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0}, I3[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, s;
    int proven;
    ck_assert(!vijp_certify_rank_at_least(mid, NULL, 3, 3, I3, 2, NULL, &proven, &s, NULL));
    ck_assert_msg(proven && s > 0.9 && s <= 1, "rank 2 of diag(1,1,0): proven %d, s %g", proven, s);
    ck_assert(!vijp_certify_rank_at_least(mid, NULL, 3, 3, I3, 3, NULL, &proven, &s, NULL));
    ck_assert(!proven);
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "layernorm", 1, 6, NULL));
    double x[6] = {0.3, -1.2, 2.0, 0.7, -0.1, 1.4}, J[36], rad[36], U[36], A[36], sv[6], sup[6];
    ck_assert(!vijp_layer_jacobian_enclosure(&net.layers[0], NULL, x, J, rad, NULL));
    memcpy(A, J, sizeof A);
    ck_assert(!LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'A', 'N', 6, 6, A, 6, sv, U, 6, NULL, 1, sup));
    ck_assert(!vijp_certify_rank_at_least(J, rad, 6, 6, U, 4, NULL, &proven, &s, NULL));
    ck_assert_msg(proven, "LayerNorm rank >= 4 not proven");
    ck_assert(!vijp_certify_rank_at_least(J, rad, 6, 6, U, 5, NULL, &proven, &s, NULL));
    ck_assert_msg(!proven, "LayerNorm rank >= 5 'proven': its rank is 4");
    vijp_net_free(&net);
}
END_TEST

Suite *suite_certify(void)
{
    Suite *s = suite_create("certify");
    TCase *adv = tcase_create("adversarial");
    tcase_set_timeout(adv, (double)test_iters(120));
    tcase_add_test(adv, prescribed_singular_values);
    tcase_add_test(adv, near_unit_roundoff);
    tcase_add_test(adv, double_routes);
    tcase_add_test(adv, enclosure_radius);
    tcase_add_test(adv, exact_rank_deficient);
    tcase_add_test(adv, near_rank_deficient);
    tcase_add_test(adv, kahan);
    suite_add_tcase(s, adv);
    TCase *tc = tcase_create("certify");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, well_conditioned);
    tcase_add_test(tc, rank_at_least);
    tcase_add_test(tc, cokernel_basis);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, proven_cokernel_dim);
    tcase_add_test(tc, exact_rank_and_scales);
    tcase_add_test(tc, exactly_full_without_bound);
    suite_add_tcase(s, tc);
    return s;
}

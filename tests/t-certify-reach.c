/* How far the certificate reaches (DESIGN §4): bounds that do not depend on
 * the matrix's scale (×1e±150, ×1e±300, ×2^±900), κ past LAPACK's rank
 * tolerance decided by a bound rather than an exact rank (the κ = 1e14
 * construction at n = 128; n = 512 is in bench-certify), and what
 * `vijp certify --json` says about the cokernel.
 *
 * The oracle: J = RN(Q1 Σ Q2ᵀ) with Q1, Q2 exactly orthogonal (randomised
 * Hadamard matrices P·H·D/√n, n a power of two) and Σ = diag(σ_k) of
 * doubles, so the exact product has singular values σ_k exactly; each
 * entry is the correctly rounded (mpfr_sum) sum of n terms ±σ_k/n, within
 * u·|exact| + η/2 of it (η = 2^-1074, for a subnormal result), hence
 *   ‖J − Q1ΣQ2ᵀ‖₂ <= ‖·‖_F <= u‖σ‖₂ + n·η =: e      (rounded up in MPFR)
 * and σ_min(J) ∈ [σ_n − e, σ_n + e] (Weyl).  A certificate claims
 * σ_min(J) > s: s < σ_n + e must hold, always. */
#include "fixtures/certfix.h"
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* J (n × n, column-major) with singular values sig (doubles, any order)
 * and *e >= ‖J − Q1ΣQ2ᵀ‖_F as above. */
static void hadamard_matrix(double *J, size_t n, const double *sig, vijp_rng *r, double *e)
{
    size_t *p1 = malloc(n * sizeof *p1), *p2 = malloc(n * sizeof *p2);
    int *d = malloc(n * sizeof *d);
    mpfr_t *t = mp_vec(n), sum;
    mpfr_ptr *ptr = malloc(n * sizeof *ptr);
    ck_assert(p1 && p2 && d && ptr);
    mpfr_init2(sum, 53);
    for (size_t k = 0; k < n; k++) p1[k] = p2[k] = k, d[k] = vijp_rng_uniform(r) < 0.5 ? -1 : 1, ptr[k] = t[k];
    for (size_t k = n; k-- > 1;) { /* Fisher–Yates: the rows of H in a random order, for each factor */
        size_t a = (size_t)rand_int(r, 0, (long)k), b = (size_t)rand_int(r, 0, (long)k), x = p1[k];
        p1[k] = p1[a], p1[a] = x, x = p2[k], p2[k] = p2[b], p2[b] = x;
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < n; k++) { /* H_ab = (−1)^popcount(a & b) (Sylvester) */
                int sign = d[k] * (__builtin_popcountll(p1[i] & k) % 2 ? -1 : 1) * (__builtin_popcountll(p2[j] & k) % 2 ? -1 : 1);
                mpfr_set_d(t[k], sign * sig[k], MPFR_RNDN); /* exact */
            }
            mpfr_sum(sum, ptr, n, MPFR_RNDN);
            mpfr_div_ui(sum, sum, n, MPFR_RNDN); /* a power of two: exact unless subnormal */
            J[i + j * n] = mpfr_get_d(sum, MPFR_RNDN);
        }
    /* e = u‖σ‖₂ + n·η, up; the division above rounds at most once more in
     * the subnormal range (η/2), covered by the n·η */
    mpfr_set_zero(sum, 1);
    mpfr_t a;
    mpfr_init2(a, 128);
    mpfr_set_zero(a, 1);
    for (size_t k = 0; k < n; k++) mpfr_set_d(t[k], sig[k], MPFR_RNDN), mpfr_fma(a, t[k], t[k], a, MPFR_RNDU);
    mpfr_sqrt(a, a, MPFR_RNDU);
    mpfr_mul_2si(a, a, -53, MPFR_RNDU);
    mpfr_set_ui_2exp(t[0], n, -1073, MPFR_RNDU); /* n·2η: both roundings' η/2, doubled */
    mpfr_add(a, a, t[0], MPFR_RNDU);
    *e = mpfr_get_d(a, MPFR_RNDU);
    mpfr_clears(sum, a, (mpfr_ptr)0);
    mp_vec_free(t, n);
    free(p1), free(p2), free(d), free(ptr);
}

/* σ_k = scale·10^(−k·log10(κ)/(n−1)), rounded to double: logspace(0, −log10 κ). */
static void logspace_sigma(double *sig, size_t n, double kappa, double scale)
{
    for (size_t k = 0; k < n; k++) sig[k] = scale * pow(kappa, -(double)k / (double)(n - 1));
}

/* Certify J (n × n) whose σ_min lies in [smin − e, smin + e]: certified in
 * double, never above the truth, and within the routes' design of it: the
 * direct route proves s = 0.99σ̂, the preconditioned one s >= (0.9 − e_Y)/√1.05
 * times σ (f = 0.81 or the ‖ŶŶᵀ − I‖_F bound for σ_min(Ŷ), t = 1.05λ for
 * ‖Z‖₂², e_Y <= 1/32 by construction): 0.85 leaves room for both. */
static double check_reach(const double *J, size_t n, double smin, double e, const char *what)
{
    vijp_certificate c;
    vijp_error err = {0};
    ck_assert_msg(!vijp_certify_matrix(J, NULL, n, n, NULL, &c, &err), "%s: %s", what, err.msg);
    ck_assert_msg(c.verdict != VIJP_CERTIFIED_SUBMERSIVE || c.s < smin + e,
                  "FALSE CERTIFICATE: %s: s = %.17g, σ_min <= %.17g", what, c.s, smin + e);
    ck_assert_msg(c.verdict == VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c.method, "certified-double"),
                  "%s: %s (%s): %s", what, vijp_verdict_name(c.verdict), c.method, c.reason);
    ck_assert_msg(c.s >= 0.85 * (smin - e), "%s: s = %.6g, σ_min >= %.6g: ratio %.4f", what, c.s, smin - e,
                  c.s / (smin - e));
    double s = c.s;
    vijp_certificate_clear(&c);
    return s;
}

/* n = 32, κ = 1e3 (the direct route), 1e8 (preconditioned), 1e13
 * (preconditioned, its largest rows of Z·J in double-double), each at scale
 * 1, 1e±150, 1e±300 and 2^±900 (exactly 2^±900·J): the same tightness at
 * every scale (before, ×1e300 gave 0.69 of σ_min at n = 512, and ×1e-300
 * was inconclusive: fl(JJᵀ) underflowed into the η terms). */
START_TEST(scale_invariance)
{
    enum { N = 32 };
    static const double kappas[] = {1e3, 1e8, 1e13}, scales[] = {1e150, 1e-150, 1e300, 1e-300, 0x1p900, 0x1p-900};
    double J[N * N], S[N * N], sig[N], e;
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() ^ 0x5eed0011u);
    for (size_t k = 0; k < sizeof kappas / sizeof *kappas; k++) {
        char what[96];
        logspace_sigma(sig, N, kappas[k], 1);
        vijp_rng r0 = r; /* the same orthogonal factors at every scale */
        hadamard_matrix(J, N, sig, &r, &e);
        snprintf(what, sizeof what, "κ %.0e", kappas[k]);
        check_reach(J, N, sig[N - 1], e, what);
        for (size_t j = 0; j < sizeof scales / sizeof *scales; j++) {
            vijp_rng rj = r0;
            logspace_sigma(sig, N, kappas[k], scales[j]);
            hadamard_matrix(S, N, sig, &rj, &e);
            snprintf(what, sizeof what, "κ %.0e scaled by %g", kappas[k], scales[j]);
            check_reach(S, N, sig[N - 1], e, what);
        }
    }
}
END_TEST

/* Q1·diag(logspace(0, −14, n))·Q2ᵀ at n = 128: σ_min = 1e-14 is below
 * LAPACK's rank tolerance n·u·σ_max = 1.4e-14, so LAPACK calls it rank
 * deficient; the exact rank would say "full" without a bound.  The
 * preconditioned route proves a bound first. */
START_TEST(kappa_past_rank_tolerance)
{
    enum { N = 128 };
    double *J = malloc(N * N * sizeof *J), sig[N], e;
    ck_assert(J != NULL);
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() ^ 0x5eed0012u);
    logspace_sigma(sig, N, 1e14, 1);
    hadamard_matrix(J, N, sig, &r, &e);
    vijp_certificate c;
    ck_assert(!vijp_certify_matrix(J, NULL, N, N, NULL, &c, NULL));
    ck_assert_msg(c.num.rank < N, "LAPACK's rank %zu: the case does not reach past its tolerance", c.num.rank);
    vijp_certificate_clear(&c);
    check_reach(J, N, sig[N - 1], e, "κ 1e14, n = 128");
    free(J);
}
END_TEST

/* vijp certify --jacobian --json: a point's cokernel_dim is the proven one
 * (cokernel_proven), LAPACK's is numerical_cokernel_dim.  The 3 × 4 J of
 * t-certify.c's proven_cokernel_dim (rank exactly 2; LAPACK: 1) and the
 * κ = 1e14 matrix (certified: 0; LAPACK: > 0). */
START_TEST(json_cokernel_fields)
{
    char dir[256], path[300], args[400];
    make_temp_dir(dir, sizeof dir, "reach");
    snprintf(path, sizeof path, "%s/j.npy", dir);
    double J[3 * 4] = {0}, Jrow[4 * 3];
    J[1] = 0x1p-60;
    for (size_t j = 0; j < 4; j++) J[2 + j * 3] = 1 + (double)j;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++) Jrow[i * 4 + j] = J[i + j * 3]; /* .npy: C order */
    size_t shape[2] = {3, 4};
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_write(path, 2, shape, Jrow, &err), "%s", err.msg);
    snprintf(args, sizeof args, "certify --jacobian '%s' --json", path);
    run_result res = run_vijp(args);
    json_t *o = json_loads(res.out, 0, NULL), *p = json_array_get(json_object_get(o, "points"), 0);
    ck_assert_msg(o && p, "not JSON: %s %s", res.out, res.err);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "cokernel_dim")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "cokernel_dim")), 1);
    ck_assert(json_is_true(json_object_get(p, "cokernel_proven")));
    ck_assert_int_eq(json_integer_value(json_object_get(p, "numerical_cokernel_dim")), 2);
    ck_assert(json_is_true(json_object_get(o, "cokernel_proven")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "numerical_cokernel_dim")), 2);
    json_decref(o), run_free(&res);

    /* The same J ± 2^-70 elementwise: a box is never proven rank-deficient
     * from its midpoint, so the top level says its figure is numerical. */
    double R[3 * 4];
    for (size_t i = 0; i < 12; i++) R[i] = 0x1p-70;
    char rpath[300], rargs[700];
    snprintf(rpath, sizeof rpath, "%s/r.npy", dir);
    ck_assert_msg(!vijp_npy_write(rpath, 2, shape, R, &err), "%s", err.msg);
    snprintf(rargs, sizeof rargs, "certify --jacobian '%s' --radius '%s' --json", path, rpath);
    res = run_vijp(rargs);
    o = json_loads(res.out, 0, NULL), p = json_array_get(json_object_get(o, "points"), 0);
    ck_assert_msg(o && p, "not JSON: %s %s", res.out, res.err);
    ck_assert(!json_is_true(json_object_get(p, "cokernel_proven")));
    ck_assert(json_is_false(json_object_get(o, "cokernel_proven")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "cokernel_dim")),
                     json_integer_value(json_object_get(p, "cokernel_dim")));
    json_decref(o), run_free(&res);

    enum { N = 128 };
    double *K = malloc(N * N * sizeof *K), sig[N], e;
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() ^ 0x5eed0012u);
    logspace_sigma(sig, N, 1e14, 1);
    hadamard_matrix(K, N, sig, &r, &e);
    size_t shape2[2] = {N, N};
    ck_assert_msg(!vijp_npy_write(path, 2, shape2, K, &err), "%s", err.msg); /* Kᵀ: the same singular values */
    res = run_vijp(args);
    o = json_loads(res.out, 0, NULL), p = json_array_get(json_object_get(o, "points"), 0);
    ck_assert_msg(o && p && res.rc == CLI_OK, "exit %d: %s %s", res.rc, res.out, res.err);
    ck_assert_str_eq(json_string_value(json_object_get(p, "method")), "certified-double");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "cokernel_dim")), 0);
    ck_assert_int_gt(json_integer_value(json_object_get(p, "numerical_cokernel_dim")), 0);
    ck_assert(json_number_value(json_object_get(p, "sigma_min_lower_bound")) < sig[N - 1] + e);
    json_decref(o), run_free(&res);
    free(K);
    remove_tree(dir);
}
END_TEST

Suite *suite_certify_reach(void)
{
    Suite *s = suite_create("certify-reach");
    TCase *tc = tcase_create("reach");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scale_invariance);
    tcase_add_test(tc, kappa_past_rank_tolerance);
    tcase_add_test(tc, json_cokernel_fields);
    suite_add_tcase(s, tc);
    return s;
}

/* The drift study's conditioning above the exact width (src/drift/cond.c):
 * κ estimates against matrices with known singular values, the spread's two
 * tracked directions against the QR of the explicit Jacobian product, and
 * vijp_drift_run with a lowered exact limit against the exact run (κ once
 * per linear layer, bit for bit the per-sample value; the method string). */
#include "fixtures/testutil.h"
#include "vijp/drift.h"
#include "drift/cond.h"
#include "drift/conditioning.h"
#include "drift/peak.h"
#include "base/fork.h"
#include "grad/problem.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double u = 0x1p-53;

/* A Haar-distributed orthogonal n × n matrix: the Q of a Gaussian's QR. */
static void orthogonal(double *Q, size_t n, vijp_rng *rng)
{
    double *tau = malloc(n * sizeof *tau);
    for (size_t k = 0; k < n * n; k++) Q[k] = vijp_rng_normal(rng);
    ck_assert(!LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (int)n, (int)n, Q, (int)n, tau));
    ck_assert(!LAPACKE_dorgqr(LAPACK_COL_MAJOR, (int)n, (int)n, (int)n, Q, (int)n, tau));
    free(tau);
}

/* J = Q1 diag(s) Q2ᵀ: singular values s, up to the rounding of the two
 * products and of Q1, Q2's orthogonality, each O(n u) relative to σ_max. */
static void with_singular_values(double *J, const double *s, size_t n, vijp_rng *rng)
{
    double *Q1 = malloc(n * n * sizeof *Q1), *Q2 = malloc(n * n * sizeof *Q2);
    orthogonal(Q1, n, rng), orthogonal(Q2, n, rng);
    for (size_t j = 0; j < n; j++) cblas_dscal((int)n, s[j], Q1 + j * n, 1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0, Q1, (int)n, Q2, (int)n, 0.0, J,
                (int)n);
    free(Q1), free(Q2);
}

/* Profiles of singular values, largest first: geometric (κ = 1e4), one
 * outlier at each end (large gaps, fast convergence), and a linear ramp
 * from 1 to 1/2 (κ = 2, the top two and bottom two nearly equal: the
 * slow case of every Krylov method, the one the a-priori bound is for). */
static void profile(double *s, size_t n, int kind)
{
    for (size_t k = 0; k < n; k++) {
        double t = (double)k / (double)(n - 1);
        s[k] = kind == 0 ? pow(10, -4 * t) : kind == 1 ? (k == 0 ? 30 : k == n - 1 ? 1e-3 : 1 - 0.5 * t) : 1 - 0.5 * t;
    }
}

/* The estimate lies in [κ/θ, κ] (cond.c: with probability >= 1 − COND_DELTA
 * per matrix over its seeded start; these seeds are fixed).  κ is the
 * designed s_1/s_n, which the rounded J carries to within a relative
 * perturbation of its σ_n by ‖E‖/σ_n, ‖E‖ <= 4 n^2 u σ_1 for the two
 * products and the Householder factors (Higham, Accuracy and Stability,
 * §3.5 and §19.3, with generous constants): so 4 n^2 u κ relative on κ,
 * and the estimate's own rounding (cond.c) is inside that.  The exact
 * κ (dgesdd) must meet the designed one to the same tolerance. */
START_TEST(estimate_within_bound_of_known_kappa)
{
    enum { N = 48 };
    double J[N * N], A[N * N], s[N], scratch[N];
    cond_work w;
    cond_work_init(&w, N, 1);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (int kind = 0; kind < 3; kind++)
        for (int rep = 0; rep < 3; rep++) {
            profile(s, N, kind);
            with_singular_values(J, s, N, &rng);
            double kappa = s[0] / s[N - 1], tol = 4.0 * N * N * u * kappa, est;
            memcpy(A, J, sizeof A);
            double exact = cond_kappa_exact(A, N, N, scratch, NULL);
            ck_assert_msg(fabs(exact / kappa - 1) <= tol, "profile %d: exact κ %.17g, designed %.17g", kind, exact, kappa);
            ck_assert(!cond_factor(&w, J));
            ck_assert_msg(!cond_kappa_estimate(J, &w, 1000 + (uint64_t)rep, &est), "profile %d: handed over", kind);
            ck_assert_msg(est >= kappa / COND_THETA * (1 - tol) && est <= kappa * (1 + tol),
                          "profile %d rep %d: estimate %.17g, κ %.17g (ratio %.6f, allowed [%.3f, 1])", kind, rep, est,
                          kappa, est / kappa, 1 / COND_THETA);
        }
    cond_work_clear(&w);
}
END_TEST

/* The factors of J (cond_factor: LAPACK's panels, then BLAS's updates by
 * chunks) and the two solves through them, on a J with κ = 1e4 and n = 70
 * (a panel and a tail; rows not a multiple of any vector).  Bounds from
 * Higham, Accuracy and Stability of Numerical Algorithms (2nd ed.),
 * γ_k = k u / (1 − k u):
 *  - Thm 9.3: the computed factors of P·J satisfy
 *    |P·J − L̂Û| <= γ_n |L̂||Û| entrywise, for any order of each entry's
 *    inner product, so for the partitioned factorization with conventional
 *    level-3 BLAS too (§13.2.1; a multiplier formed as a product with the
 *    pivot's reciprocal, as some LAPACKs do, adds one rounding: γ_(j+1) for
 *    column j < n, still within γ_n);
 *  - Thm 9.4 (its proof holds for any two triangular solves after the
 *    permutation): the computed x̂ of Jx = b satisfies
 *    |b − Jx̂| <= γ_3n Pᵀ|L̂||Û||x̂|, and of Jᵀx = b, with Jᵀ = ÛᵀL̂ᵀP,
 *    |b − Jᵀx̂| <= γ_3n |Ûᵀ||L̂ᵀ||P x̂| (BLAS's dtrsv sums in an order of
 *    its own: any order of summation is within the theorem's γ, Higham's
 *    Lemma 8.4 and §3.1, and a fused multiply-add rounds once instead of
 *    twice).
 * The residuals and the bounds' products are formed in long double (64
 * bits: their own error is 2^-11 of u's), the bounds doubled for that. */
START_TEST(factors_and_solves_backward_stable)
{
    enum { N = 70 };
    double *J = malloc(N * N * sizeof *J), s[N], b[N], x[N];
    long double L[N * N], U[N * N], P[N * N];
    cond_work w;
    cond_work_init(&w, N, 1);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    profile(s, N, 0);
    with_singular_values(J, s, N, &rng);
    ck_assert(!cond_factor(&w, J));
    /* L̂, Û as |.| and signed (row-major here), and P·J */
    const double g = N * u / (1 - N * u), g3 = 3 * N * u / (1 - 3 * N * u);
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < N; k++) {
            double a = w.lu[i + k * N];
            L[i * N + k] = i == k ? 1 : k < i ? a : 0;
            U[i * N + k] = k >= i ? a : 0;
            P[i * N + k] = J[i + k * N];
        }
    for (size_t c = 0; c < N; c++) /* the swaps in ascending order */
        for (size_t k = 0, p = (size_t)w.piv[c] - 1; k < N; k++) {
            long double t = P[c * N + k];
            P[c * N + k] = P[p * N + k], P[p * N + k] = t;
        }
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < N; k++) {
            long double lu = 0, bound = 0;
            for (size_t j = 0; j < N; j++) lu += L[i * N + j] * U[j * N + k], bound += fabsl(L[i * N + j] * U[j * N + k]);
            ck_assert_msg(fabsl(P[i * N + k] - lu) <= 2 * g * bound, "(P·J − LU)(%zu, %zu) = %Lg, bound %Lg", i, k,
                          P[i * N + k] - lu, 2 * g * bound);
        }
    for (int trans = 0; trans < 2; trans++) {
        for (size_t i = 0; i < N; i++) b[i] = x[i] = vijp_rng_normal(&rng);
        if (trans) cond_solve_t(&w, x);
        else cond_solve(&w, x);
        /* |L||U||x| (then the swaps undone) or |U|ᵀ|L|ᵀ|P x| (trans) */
        long double y[N], z[N], px[N];
        for (size_t i = 0; i < N; i++) px[i] = x[i];
        if (trans)
            for (size_t c = 0; c < N; c++) {
                size_t p = (size_t)w.piv[c] - 1;
                long double t = px[c];
                px[c] = px[p], px[p] = t;
            }
        for (size_t i = 0; i < N; i++) {
            y[i] = 0;
            for (size_t k = 0; k < N; k++) y[i] += trans ? fabsl(L[k * N + i]) * fabsl(px[k]) : fabsl(U[i * N + k]) * fabsl(px[k]);
        }
        for (size_t i = 0; i < N; i++) {
            z[i] = 0;
            for (size_t k = 0; k < N; k++) z[i] += trans ? fabsl(U[k * N + i]) * y[k] : fabsl(L[i * N + k]) * y[k];
        }
        if (!trans)
            for (size_t c = N; c-- > 0;) {
                size_t p = (size_t)w.piv[c] - 1;
                long double t = z[c];
                z[c] = z[p], z[p] = t;
            }
        for (size_t i = 0; i < N; i++) {
            long double r = b[i];
            for (size_t k = 0; k < N; k++) r -= (long double)(trans ? J[k + i * N] : J[i + k * N]) * x[k];
            ck_assert_msg(fabsl(r) <= 2 * g3 * z[i], "%s: residual %zu %Lg, bound %Lg", trans ? "Jᵀx = b" : "Jx = b", i,
                          r, 2 * g3 * z[i]);
        }
    }
    cond_work_clear(&w);
    free(J);
}
END_TEST

/* The factors and pivots are the same bits on 1, 2, 3 and 5 threads, at a
 * width (613 = a panel, four chunks and a tail of 37) where the first
 * panel's update is work enough for five parts. */
START_TEST(factors_same_bits_any_threads)
{
    enum { N = COND_LU_PANEL + 4 * COND_LU_CHUNK + 37 };
    static const int thread_counts[] = {2, 3, 5};
    double rest = N - COND_LU_PANEL;
    size_t chunks = (N - COND_LU_PANEL + COND_LU_CHUNK - 1) / COND_LU_CHUNK;
    ck_assert(chunks == 5 && vijp_fork_parts(5, chunks, N * rest * COND_LU_PANEL, VIJP_TEAM_MIN_WORK) == 5);
    /* one OpenBLAS thread, as every vijp command runs it (the claim is for that) */
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    double *J = malloc(N * N * sizeof *J), s[N];
    cond_work w, wk;
    cond_work_init(&w, N, 1);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 1);
    profile(s, N, 1);
    with_singular_values(J, s, N, &rng);
    ck_assert(!cond_factor(&w, J));
    for (size_t c = 0; c < sizeof thread_counts / sizeof *thread_counts; c++) {
        cond_work_init(&wk, N, thread_counts[c]);
        ck_assert(!cond_factor(&wk, J));
        ck_assert_msg(!memcmp(w.lu, wk.lu, N * N * sizeof *w.lu) && !memcmp(w.piv, wk.piv, N * sizeof *w.piv),
                      "%d threads: factors differ from one thread's", thread_counts[c]);
        cond_work_clear(&wk);
    }
    openblas_set_num_threads(blas_threads);
    cond_work_clear(&w);
    free(J);
}
END_TEST

/* κ of diag(d) from d alone, hand-derived: σ = |d_k| in any order, so
 * {0.5, −4, 2, 0.25} has κ = 4/0.25 = 16 (exact in double); a diagonal
 * whose entry lies below n·u·σ_max (1e-300 beside 3, n = 3) is deficient,
 * and κ is then taken over the others, 3/1.  s may be d itself. */
START_TEST(diagonal_kappa_by_hand)
{
    double d[4] = {0.5, -4, 2, 0.25}, s[4];
    int deficient = -1;
    ck_assert(cond_kappa_diagonal(d, 4, s, &deficient) == 16 && deficient == 0);
    ck_assert(d[0] == 0.5 && d[1] == -4); /* only read */
    double t[3] = {1, 1e-300, 3};
    ck_assert(cond_kappa_diagonal(t, 3, t, &deficient) == 3 && deficient == 1);
}
END_TEST

/* Where J is (numerically) singular the exact κ leaves σ out and the
 * estimate cannot see which: it hands over.  An exact zero column stops the
 * LU; a designed σ_n = 0, rounded to ~n u σ_1, leaves θ κ_est >= 1/(n u). */
START_TEST(estimate_hands_over_where_singular)
{
    enum { N = 2 * COND_LU_PANEL + 22 };
    double *J = malloc(N * N * sizeof *J), *K = malloc(N * N * sizeof *K), s[N], est;
    cond_work w;
    cond_work_init(&w, N, 1);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    profile(s, N, 0);
    s[N - 1] = 0;
    with_singular_values(J, s, N, &rng);
    int zero_pivot = cond_factor(&w, J);
    ck_assert(zero_pivot || cond_kappa_estimate(J, &w, 1, &est));
    /* a zero column in the first panel, then in the last (past two updates) */
    static const size_t zero_columns[] = {3, N - 10};
    for (size_t z = 0; z < 2; z++) {
        memcpy(K, J, N * N * sizeof *K);
        for (size_t i = 0; i < N; i++) K[i + zero_columns[z] * N] = 0;
        ck_assert_msg(cond_factor(&w, K) == 1 && !w.factored, "zero column %zu: factored", zero_columns[z]);
        ck_assert(cond_kappa_estimate(K, &w, 1, &est) == 1);
    }
    cond_work_clear(&w);
    free(J), free(K);
}
END_TEST

/* Benettin from Q_0 = I gives J_i ⋯ J_1 = Q_i R_i ⋯ R_1, so its first and
 * last sums are log10 |R_11| and log10 |R_nn| of the QR of the explicit
 * product P_i: the oracle here (dgeqrf of P_i formed by dgemm).  Each layer
 * (κ <= 4, a diagonal one among them) moves the tracked norms by a relative
 * O(n u κ_i) and P_i's R_nn carries O(n u κ(P_i)) with κ(P_i) <= 4^i: 
 * 8 n u 4^D / ln 10 decades bounds both with margin. */
START_TEST(spread_tracks_benettin_first_and_last)
{
    enum { N = 24, D = 6 };
    double J[N * N], P[N * N], T[N * N], R[N * N], tau[N], s[N];
    cond_work w;
    cond_work_init(&w, N, 1);
    cond_spread sp;
    cond_spread_init(&sp, N);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t k = 0; k < N * N; k++) P[k] = k % (N + 1) == 0;
    double tol = 8.0 * N * u * pow(4, D) / log(10);
    for (int i = 0; i < D; i++) {
        int diagonal = i == 2;
        for (size_t k = 0; k < N; k++) s[k] = 0.5 + 1.5 * vijp_rng_uniform(&rng);
        if (diagonal) {
            memset(J, 0, sizeof J);
            for (size_t k = 0; k < N; k++) J[k + k * N] = k % 2 ? s[k] : -s[k];
        } else {
            with_singular_values(J, s, N, &rng);
            ck_assert(!cond_factor(&w, J));
        }
        double dg[N];
        for (size_t k = 0; k < N; k++) dg[k] = J[k + k * N];
        ck_assert(!cond_spread_step(&sp, J, diagonal ? dg : NULL, &w));
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, J, N, P, N, 0.0, T, N);
        memcpy(P, T, sizeof P);
        memcpy(R, P, sizeof R);
        ck_assert(!LAPACKE_dgeqrf(LAPACK_COL_MAJOR, N, N, R, N, tau));
        double first = log10(fabs(R[0])), last = log10(fabs(R[N * N - 1]));
        ck_assert_msg(fabs(sp.sum_first - first) <= tol && fabs(sp.sum_last - last) <= tol,
                      "layer %d: tracked %.17g %.17g, QR of the product %.17g %.17g", i + 1, sp.sum_first,
                      sp.sum_last, first, last);
        ck_assert(cond_spread_value(&sp) == fabs(sp.sum_first - sp.sum_last));
    }
    memset(J, 0, sizeof J);
    for (size_t k = 0; k < N; k++) s[k] = k == 5 ? 0 : 1; /* a zero stretch: the product is singular */
    ck_assert(cond_spread_step(&sp, J, s, &w) == 1);
    cond_spread_clear(&sp);
    cond_work_clear(&w);
}
END_TEST

static vijp_drift_setup cond_setup(const char *spec, size_t width, size_t batch, size_t exact_max)
{
    vijp_drift_setup s = {0};
    s.problem = (vijp_grad_setup){.spec = spec, .depth = 6, .width = width, .batch = batch, .seed = test_seed(),
                                  .init = {.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, .loss = VIJP_LOSS_SQUARE};
    ck_assert(!vijp_format_parse("double", &s.problem.fmt, NULL));
    s.skip_reference = 1, s.cond_exact_max_width = exact_max;
    return s;
}

static void run(const vijp_drift_setup *s, vijp_drift_curve *c)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_drift_run(s, c, &err), "%s: %s", s->problem.spec, err.msg);
}

/* Width 24 over a lowered exact limit of 16: the dense layers' κ (estimated
 * once) and the coupling blocks' (estimated at every sample) lie within
 * [κ/θ, κ] of the exact run's, tanh's (diagonal) are the exact run's bit for
 * bit; the spread is a lower bound on the exact one (cond.h), up to the
 * tracked norms' rounding, O(n u κ_i) relative per layer (as above):
 * Σ_i 8 n u κ_i / ln 10 decades.  The method says which. */
START_TEST(drift_estimates_wide_layers)
{
    static const char *const specs[] = {"dense:24,tanh", "additive"};
    for (size_t k = 0; k < 2; k++) {
        vijp_drift_curve exact, est;
        vijp_drift_setup s = cond_setup(specs[k], 24, 3, 0);
        run(&s, &exact);
        s.cond_exact_max_width = 16;
        run(&s, &est);
        ck_assert_str_eq(exact.cond_method, "exact");
        ck_assert_msg(!strncmp(est.cond_method, "estimated above width 16: ", 26), "%s", est.cond_method);
        double slack = 0;
        for (size_t i = 0; i < exact.depth; i++) {
            double kappa = exact.kappa[i], tol = 4.0 * 24 * 24 * u * kappa;
            slack += 8.0 * 24 * u * kappa / log(10);
            if (!strncmp(specs[k], "dense", 5) && i % 2)
                ck_assert_msg(est.kappa[i] == kappa, "%s layer %zu: %.17g vs %.17g", specs[k], i + 1, est.kappa[i], kappa);
            ck_assert_msg(est.kappa[i] >= kappa / COND_THETA * (1 - tol) && est.kappa[i] <= kappa * (1 + tol),
                          "%s layer %zu: κ %.17g estimated %.17g", specs[k], i + 1, kappa, est.kappa[i]);
            ck_assert_msg(isfinite(est.lyap_cum[i]) && est.lyap_cum[i] <= exact.lyap_cum[i] + slack,
                          "%s layer %zu: spread %.17g, exact %.17g", specs[k], i + 1, est.lyap_cum[i], exact.lyap_cum[i]);
        }
        vijp_drift_curve_clear(&exact), vijp_drift_curve_clear(&est);
    }
}
END_TEST

/* Where κ is estimated the first-order bound takes θ·κ_est, which is at
 * least κ (with probability 1 − δ per layer): so it stays at least the
 * exact run's bound, from the same measured g_0 error; an exact κ_i beside
 * them (an elementwise layer's) enters without θ.  And a net whose
 * wide layers are all rectangular estimates nothing: its method is
 * "exact" (the rectangular κ and the spread of a non-square net are never
 * estimated). */
START_TEST(estimated_bound_stays_a_bound)
{
    static const vijp_engine_kind mw = VIJP_ENGINE_MOONWALK;
    vijp_drift_curve exact, est;
    vijp_drift_setup s = cond_setup("dense:24,tanh", 24, 2, 0);
    s.skip_reference = 0, s.engines = &mw, s.n_engines = 1;
    run(&s, &exact);
    s.cond_exact_max_width = 16;
    run(&s, &est);
    ck_assert(exact.runs[1].bound && est.runs[1].bound);
    for (size_t i = 0; i < exact.depth; i++) {
        double b = vijp_xnum_double(exact.runs[1].bound[i]), be = vijp_xnum_double(est.runs[1].bound[i]);
        /* 4n²uκ per estimate, as above, over at most 6 layers: 1e-9 relative */
        ck_assert_msg(be >= b * (1 - 1e-9), "layer %zu: bound %.17g from estimates, %.17g exact", i + 1, be, b);
    }
    /* θ multiplies the estimated κ_i only, the dense layers' (i even); the
     * tanh layers' κ_i are exact (diagonal J) and enter as they are: the
     * bound is this recurrence, bit for bit */
    vijp_xnum e = est.runs[1].x.rel;
    for (size_t i = 0; i < est.depth; i++) {
        vijp_xnum k = vijp_xnum_mul(vijp_xnum_of(i % 2 ? 1 : COND_THETA), vijp_xnum_of(est.kappa[i]));
        e = vijp_xnum_mul(k, vijp_xnum_add(e, vijp_xnum_mul(vijp_xnum_of(24.0), est.u)));
        ck_assert_msg(vijp_xnum_double(e) == vijp_xnum_double(est.runs[1].bound[i]), "layer %zu: bound %.17g, want %.17g",
                      i + 1, vijp_xnum_double(est.runs[1].bound[i]), vijp_xnum_double(e));
    }
    vijp_drift_curve_clear(&exact), vijp_drift_curve_clear(&est);
    vijp_drift_setup r = cond_setup("dense:32,dense:24", 24, 2, 16);
    run(&r, &est);
    ck_assert_str_eq(est.cond_method, "exact");
    vijp_drift_curve_clear(&est);
}
END_TEST

/* Softmax's J is singular (J·1 = 0, a stretch ~1e-17): above the exact limit
 * the estimate hands its κ to the exact SVD, bit for bit the exact run's
 * (the same J, the same dgesdd), and the spread is infinite from that layer
 * on, as the exact run's (t-drift's singular_product_has_no_prediction). */
START_TEST(drift_estimate_keeps_singular_semantics)
{
    vijp_drift_curve exact, est;
    vijp_drift_setup s = cond_setup("dense:24,softmax", 24, 2, 0);
    run(&s, &exact);
    s.cond_exact_max_width = 16;
    run(&s, &est);
    for (size_t i = 0; i < exact.depth; i++) {
        if (i % 2) ck_assert_msg(est.kappa[i] == exact.kappa[i], "layer %zu: %.17g vs %.17g", i + 1, est.kappa[i], exact.kappa[i]);
        ck_assert_msg(i == 0 ? isfinite(est.lyap_cum[i]) && isfinite(exact.lyap_cum[i])
                             : isinf(est.lyap_cum[i]) && isinf(exact.lyap_cum[i]),
                      "layer %zu: spread %g, exact %g", i + 1, est.lyap_cum[i], exact.lyap_cum[i]);
    }
    vijp_drift_curve_clear(&exact), vijp_drift_curve_clear(&est);
}
END_TEST

/* κ of one sample's Jacobian, as the exact path computes it. */
static double kappa_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, size_t b)
{
    vijp_mat x = *h, J;
    x.cols = 1, x.d = h->d + b * L->in;
    vijp_mat_init(&J, L->out, L->in, h->fmt);
    ck_assert(!vijp_layer_jacobian(L, theta, &x, &J, NULL));
    double *s = malloc(L->in * sizeof *s), kappa = cond_kappa_exact(J.d, L->out, L->in, s, NULL);
    free(s);
    vijp_mat_clear(&J);
    return kappa;
}

/* κ_i of s's problem at every sample b, as the exact path computes it,
 * from the double forward of the rounded problem as the conditioning
 * does: k[i·B + b]; linear[i] (NULL: not asked) whether layer i declares
 * a Jacobian that does not depend on x. */
static double *kappas_at_samples(const vijp_drift_setup *s, size_t width, size_t B, unsigned char *linear)
{
    vijp_net net;
    vijp_problem pf, pd = {0};
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    ck_assert(!vijp_problem_setup(&s->problem, &net, &pf, NULL));
    vijp_problem_convert(&pd, &net, &pf, &fd);
    double *k = malloc(net.depth * B * sizeof *k);
    vijp_mat h, hn;
    vijp_mat_init(&h, width, B, &fd);
    vijp_mat_copy(&h, &pd.X);
    for (size_t i = 0; i < net.depth; i++) {
        const vijp_layer *L = &net.layers[i];
        for (size_t b = 0; b < B; b++) k[i * B + b] = kappa_at(L, &pd.theta[i], &h, b);
        if (linear) linear[i] = (L->type->declare(L) & VIJP_DECL_LINEAR) != 0;
        vijp_mat_init(&hn, L->out, B, &fd);
        ck_assert(!vijp_layer_forward(L, &pd.theta[i], &h, &hn, NULL));
        vijp_mat_clear(&h);
        h = hn;
    }
    vijp_mat_clear(&h);
    vijp_problem_clear(&pd, &net), vijp_problem_clear(&pf, &net);
    vijp_net_free(&net);
    return k;
}

/* The curve's κ_i against the maximum over the samples of kappas_at_samples
 * (sample 0's alone where the layer is linear, which every sample must
 * equal), bit for bit, the curve on threads threads (the samples of a
 * layer neither linear nor elementwise run in parallel ranges there,
 * conditioning.c). */
static void check_kappa_every_sample(vijp_drift_setup *s, size_t width, size_t B, int threads)
{
    s->problem.fmt.threads = threads;
    vijp_drift_curve c;
    run(s, &c);
    unsigned char *linear = malloc(c.depth);
    double *k = kappas_at_samples(s, width, B, linear);
    for (size_t i = 0; i < c.depth; i++) {
        double top = 1;
        for (size_t b = 0; b < B; b++) {
            if (linear[i]) ck_assert(k[i * B + b] == c.kappa[i]);
            top = vijp_max_nan(top, k[i * B + b]);
        }
        ck_assert_msg(top == c.kappa[i], "%s layer %zu: %.17g vs %.17g", s->problem.spec, i + 1, top, c.kappa[i]);
    }
    free(k), free(linear);
    vijp_drift_curve_clear(&c);
}

/* A dense layer's κ, taken at sample 0 only, is bit for bit what every
 * sample gives (the same J = W, the same dgesdd), so the curve keeps the
 * maximum over samples it had; an activation's is still that maximum,
 * sample by sample, taken from its Jacobians' diagonals alone
 * (conditioning.c's elementwise layers). */
START_TEST(layer_kappa_is_every_samples)
{
    static const char *const acts[] = {"tanh", "relu", "leaky:0.25", "sigmoid", "softplus:2/1", "elu", "selu",
                                       "silu", "mish", "gelu", "gelu:tanh", "softsign", "layernorm", "softmax"};
    char spec[64];
    for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
        snprintf(spec, sizeof spec, "dense:12,%s", acts[k]);
        vijp_drift_setup s = cond_setup(spec, 12, 5, 0);
        check_kappa_every_sample(&s, 12, 5, 1);
    }
}
END_TEST

/* LayerNorm's samples after the first on two threads, each range with a
 * Jacobian of its own (width 192, 9 samples: work for two ranges,
 * base/fork.h, and room for two, drift_peak_cond_threads), exact up to
 * width 256: κ_i the maximum over the samples, for a seed (found below)
 * where the last sample holds a layer's strict maximum, so that a range
 * that misses it, or reads another sample in its place, shows. */
START_TEST(parallel_samples_give_every_sample)
{
    enum { W = 192, B = 9 };
    vijp_drift_setup s = cond_setup("dense:192,layernorm", W, B, 256);
    vijp_net net;
    ck_assert(!vijp_net_build(&net, "dense:192,layernorm", s.problem.depth, W, NULL));
    ck_assert_int_eq(drift_peak_cond_threads(&net, B, &s.problem.fmt, vijp_drift_ref_prec_first(&s.problem.fmt, 0), 0,
                                             256, 2), 2);
    vijp_net_free(&net);
    int found = 0;
    for (uint64_t seed = 1; seed <= 40 && !found; seed++) {
        s.problem.seed = seed;
        double *k = kappas_at_samples(&s, W, B, NULL);
        for (size_t i = 1; i < s.problem.depth && !found; i += 2) { /* the LayerNorm layers */
            found = 1;
            for (size_t b = 0; b + 1 < B; b++) found &= k[i * B + b] < k[i * B + B - 1];
        }
        free(k);
    }
    ck_assert_msg(found, "no seed up to 40 puts a LayerNorm layer's largest κ at the last sample");
    check_kappa_every_sample(&s, W, B, 2);
}
END_TEST

/* The same estimated: additive coupling blocks (invertible, so their κ is
 * estimated where LayerNorm's singular Jacobian hands over to the SVD) at
 * width 192 over an exact limit of 128, each range with LU factors of its
 * own on one thread and its samples' seeded Lanczos starts, and the
 * spread's two tracked directions: one thread against two, κ and the
 * spread bit for bit. */
START_TEST(parallel_estimates_match_one_thread)
{
    vijp_drift_curve one, two;
    vijp_drift_setup s = cond_setup("additive", 192, 9, 128);
    s.problem.fmt.threads = 1;
    run(&s, &one);
    s.problem.fmt.threads = 2;
    run(&s, &two);
    ck_assert(!strncmp(one.cond_method, "estimated", 9));
    for (size_t i = 0; i < one.depth; i++)
        ck_assert_msg(!memcmp(&one.kappa[i], &two.kappa[i], sizeof(double)) &&
                      !memcmp(&one.lyap_cum[i], &two.lyap_cum[i], sizeof(double)),
                      "layer %zu: kappa %.17g vs %.17g, spread %.17g vs %.17g", i + 1, one.kappa[i], two.kappa[i],
                      one.lyap_cum[i], two.lyap_cum[i]);
    vijp_drift_curve_clear(&one), vijp_drift_curve_clear(&two);
}
END_TEST

/* drift_elementwise_diagonals of item (an elementwise layer of the
 * registry, vijp/layer.h: an f′ by dual_eval, or a residual kind of SIGN
 * or DERIV, without parameters) against vijp_layer_jacobian, whose
 * diagonal it must give bit for bit, the rest zero, at points either side
 * of 0 and of every kink, signed zeros, large and tiny values. */
static void check_diagonals(const char *item)
{
    static const double xs[] = {-INFINITY, -30, -3, -1, -0.5, -1e-300, -0.0, 0.0, 1e-300, 1e-8,
                                0.25,      0.5, 1,  2.5, 3,    30,     NAN,  INFINITY};
    enum { N = sizeof xs / sizeof *xs };
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_layer L;
    ck_assert_msg(!vijp_layer_parse(&L, item, N, NULL), "%s", item);
    ck_assert(L.in == N && L.out == N && !L.type->param_count(&L));
    vijp_mat theta, h, J;
    vijp_mat_init(&theta, 0, 1, &fd), vijp_mat_init(&h, N, 2, &fd), vijp_mat_init(&J, N, N, &fd);
    for (size_t k = 0; k < N; k++) h.d[k] = xs[k], h.d[N + k] = -xs[N - 1 - k] / 7;
    double dg[2 * N];
    ck_assert(!drift_elementwise_diagonals(&L, &theta, &h, dg));
    for (size_t b = 0; b < 2; b++) {
        vijp_mat x = h;
        x.cols = 1, x.d = h.d + b * N;
        ck_assert(!vijp_layer_jacobian(&L, &theta, &x, &J, NULL));
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                double want = J.d[i + j * N], got = i == j ? dg[b * N + i] : 0;
                ck_assert_msg(want == got || (isnan(want) && isnan(got)), "%s at x = %g: J(%zu, %zu) %.17g, from the "
                              "diagonals %.17g", item, x.d[i], i, j, want, got);
            }
    }
    vijp_mat_clear(&theta), vijp_mat_clear(&h), vijp_mat_clear(&J);
    vijp_layer_clear(&L);
}

/* Every elementwise type of the catalogue, found by what marks it (a type
 * added later is checked without being named here), with its default
 * arguments (or α = 0.5 where it needs one), and the variants a type's
 * arguments select. */
START_TEST(elementwise_diagonals_are_the_jacobians)
{
    size_t count, checked = 0;
    const vijp_layer_type *const *types = vijp_layer_types(&count);
    for (size_t t = 0; t < count; t++) {
        const vijp_layer_type *T = types[t];
        vijp_layer L;
        char item[64];
        snprintf(item, sizeof item, "%s", T->name);
        if (vijp_layer_parse(&L, item, 4, NULL)) { /* leaky's α */
            snprintf(item, sizeof item, "%s:0.5", T->name);
            if (vijp_layer_parse(&L, item, 4, NULL)) continue; /* a type that takes no such argument: not one */
        }
        int elementwise = drift_layer_elementwise(&L);
        vijp_layer_clear(&L);
        if (!elementwise) continue;
        check_diagonals(item);
        checked++;
    }
    ck_assert_uint_ge(checked, 11); /* leaky, relu and the nine with an f′ */
    static const char *const variants[] = {"gelu:tanh", "softplus:2/10", "leaky:4", "elu:0.5"};
    for (size_t k = 0; k < 4; k++) check_diagonals(variants[k]);
}
END_TEST

/* The spread through elementwise layers from their diagonals against the
 * same nets with each sign layer's type disguised as one the conditioning
 * does not know to be elementwise (residual INPUT, which their operators
 * do not read: the general path, n × n Jacobians found diagonal): κ_i and
 * the spread bit for bit, Benettin's exact iteration at width 12 and its
 * two tracked directions at 24 over an exact limit of 16.  (The smooth
 * activations' operators need their dual_eval, which marks them
 * elementwise: their diagonals are checked above.) */
START_TEST(elementwise_path_is_the_general_one)
{
    static const char *const specs[] = {"dense:12,leaky:0.5", "dense:12,relu,dense:12,leaky:0.25", "dense:24,leaky:0.5"};
    static const size_t widths[] = {12, 12, 24};
    for (size_t k = 0; k < 3; k++) {
        vijp_drift_setup s = cond_setup(specs[k], widths[k], 3, widths[k] > 12 ? 16 : 0);
        vijp_net tmpl;
        ck_assert(!vijp_net_template(&tmpl, specs[k], s.problem.depth, widths[k], NULL));
        vijp_drift_curve fast, general;
        s.problem.net = &tmpl;
        run(&s, &fast);
        vijp_layer_type disguised[8];
        size_t n = 0;
        for (size_t i = 0; i < tmpl.depth; i++) {
            vijp_layer *L = &tmpl.layers[i];
            if (strcmp(L->type->name, "dense")) {
                ck_assert(n < 8);
                disguised[n] = *L->type;
                disguised[n].residual = VIJP_RESIDUAL_INPUT;
                L->type = &disguised[n++];
            }
        }
        run(&s, &general);
        for (size_t i = 0; i < tmpl.depth; i++)
            ck_assert_msg(!memcmp(&fast.kappa[i], &general.kappa[i], sizeof(double)) &&
                          !memcmp(&fast.lyap_cum[i], &general.lyap_cum[i], sizeof(double)),
                          "%s layer %zu: kappa %.17g vs %.17g, spread %.17g vs %.17g", specs[k], i + 1, fast.kappa[i],
                          general.kappa[i], fast.lyap_cum[i], general.lyap_cum[i]);
        vijp_drift_curve_clear(&fast), vijp_drift_curve_clear(&general);
        vijp_net_free(&tmpl);
    }
}
END_TEST

/* tanh with an f′ that is NaN above 5: a plugin's activation whose
 * derivative fails where its input grows. */
static void tanh_nan_above_5(const vijp_layer *L, const double *theta, double x, double *f, double *df)
{
    (void)L, (void)theta;
    *f = tanh(x);
    *df = x > 5 ? NAN : 1 - *f * *f;
}

/* An elementwise layer whose Jacobian is not finite at some sample has a
 * NaN κ_i, and the spread is NaN from there on, as a Jacobian that is not
 * finite makes it in the general path (conditioning.c); the layers before
 * it keep finite values.  Weights 30 times orthogonal make the second
 * layer's inputs exceed 5. */
START_TEST(nonfinite_diagonal_is_a_nan_kappa)
{
    vijp_drift_setup s = cond_setup("dense:12,tanh", 12, 4, 0);
    s.problem.init = (vijp_init){.kind = VIJP_INIT_SCALED, .gain = 30};
    vijp_net tmpl;
    ck_assert(!vijp_net_template(&tmpl, "dense:12,tanh", s.problem.depth, 12, NULL));
    vijp_layer_type odd = *tmpl.layers[1].type;
    odd.dual_eval = tanh_nan_above_5;
    for (size_t i = 1; i < tmpl.depth; i += 2) tmpl.layers[i].type = &odd;
    s.problem.net = &tmpl;
    vijp_drift_curve c;
    run(&s, &c);
    size_t first = c.depth;
    for (size_t i = 0; i < c.depth && first == c.depth; i++)
        if (isnan(c.kappa[i])) first = i;
    ck_assert_msg(first < c.depth && first % 2 == 1, "no activation's κ is NaN (first %zu)", first);
    for (size_t i = 0; i < c.depth; i++) {
        ck_assert_msg(i < first ? isfinite(c.kappa[i]) && isfinite(c.lyap_cum[i]) : isnan(c.lyap_cum[i]),
                      "layer %zu (first NaN %zu): kappa %g, spread %g", i + 1, first + 1, c.kappa[i], c.lyap_cum[i]);
    }
    vijp_drift_curve_clear(&c);
    vijp_net_free(&tmpl);
}
END_TEST

/* The conditioning's threads each hold a Jacobian and what making it,
 * its SVD or its LU factors take, beside the problem: as many as fit under
 * the curve's estimated peak, which the study's sizing reserved
 * (drift_peak_bytes).  dense:1024,layernorm batch 16 in binary32 over an
 * exact limit of 128: its peak, the reference's two levels (a few hundred
 * MB), leaves room for more than one such part (a 1024 × 1024 Jacobian
 * three times, its LU and Lanczos vectors, about 34 MB) but not for 256;
 * dense:1024,gelu runs no layer's samples in parallel (its activations
 * are elementwise, its dense layers linear): 1. */
START_TEST(conditioning_threads_fit_the_curve)
{
    vijp_net net, elementwise;
    ck_assert(!vijp_net_build(&net, "dense:1024,layernorm", 16, 0, NULL));
    ck_assert(!vijp_net_build(&elementwise, "dense:1024,gelu", 16, 0, NULL));
    vijp_format f;
    ck_assert(!vijp_format_parse("binary32", &f, NULL));
    long first = vijp_drift_ref_prec_first(&f, 0);
    double peak = drift_peak_bytes(&net, 16, &f, first, 0).peak;
    double part = 8.0 * (4 * 1024.0 * 1024 + 1024 * (double)(cond_lanczos_steps(1024) + 2));
    int t = drift_peak_cond_threads(&net, 16, &f, first, 0, 128, 256);
    ck_assert_msg(t > 1 && t < 256 && t * part < peak, "%d threads of %.0f bytes under %.0f", t, part, peak);
    ck_assert_int_eq(drift_peak_cond_threads(&net, 16, &f, first, 0, 128, 1), 1);
    ck_assert_int_eq(drift_peak_cond_threads(&net, 16, &f, first, 0, 128, 2), 2);
    ck_assert_int_eq(drift_peak_cond_threads(&net, 1, &f, first, 0, 128, 2), 1); /* one sample: nothing in parallel */
    ck_assert_int_eq(drift_peak_cond_threads(&elementwise, 16, &f, first, 0, 128, 8), 1);
    vijp_net_free(&net), vijp_net_free(&elementwise);
}
END_TEST

Suite *suite_cond(void)
{
    Suite *s = suite_create("cond");
    TCase *tc = tcase_create("cond");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, estimate_within_bound_of_known_kappa);
    tcase_add_test(tc, factors_and_solves_backward_stable);
    tcase_add_test(tc, factors_same_bits_any_threads);
    tcase_add_test(tc, diagonal_kappa_by_hand);
    tcase_add_test(tc, estimate_hands_over_where_singular);
    tcase_add_test(tc, spread_tracks_benettin_first_and_last);
    tcase_add_test(tc, drift_estimates_wide_layers);
    tcase_add_test(tc, drift_estimate_keeps_singular_semantics);
    tcase_add_test(tc, estimated_bound_stays_a_bound);
    tcase_add_test(tc, layer_kappa_is_every_samples);
    tcase_add_test(tc, parallel_samples_give_every_sample);
    tcase_add_test(tc, parallel_estimates_match_one_thread);
    tcase_add_test(tc, elementwise_diagonals_are_the_jacobians);
    tcase_add_test(tc, elementwise_path_is_the_general_one);
    tcase_add_test(tc, nonfinite_diagonal_is_a_nan_kappa);
    tcase_add_test(tc, conditioning_threads_fit_the_curve);
    suite_add_tcase(s, tc);
    return s;
}

/* Orthogonal initialisation above VIJP_ORTHO_MGS_MAX_WIDTH (Stewart's
 * blocked Householder product, src/layers/orthogonal.c), at small sizes
 * through its own entry point: orthogonality against QᵀQ computed in MPFR,
 * the distribution's first moments, the same bits from the portable and
 * the AVX2 loops and from run to run, and the switch between the two
 * algorithms at the threshold.  Below it, modified Gram–Schmidt twice:
 * the bits of the plain loops it was first written as, kept here. */
#include "fixtures/testutil.h"
#include "layers/init.h"
#include "base/fork.h"
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

static const double u = 0x1p-53;

/* max_ij |(WᵀW − I)_ij| (or WWᵀ when wide: the orthonormal side, c × c)
 * from sums of exact products in MPFR at 256 bits: each of the c² sums of
 * r products within 2^-250 relative of its exact value, nothing beside the
 * bound below. */
static double orthogonality_error(const double *W, size_t m, size_t n)
{
    size_t r = m > n ? m : n, c = m > n ? n : m;
    mpfr_t s, p;
    mpfr_inits2(256, s, p, (mpfr_ptr)0);
    double worst = 0;
    for (size_t i = 0; i < c; i++)
        for (size_t j = 0; j <= i; j++) {
            mpfr_set_si(s, i == j ? -1 : 0, MPFR_RNDN);
            for (size_t k = 0; k < r; k++) {
                double a = m >= n ? W[k + i * m] : W[i + k * m], b = m >= n ? W[k + j * m] : W[j + k * m];
                mpfr_set_d(p, a, MPFR_RNDN);
                mpfr_mul_d(p, p, b, MPFR_RNDN); /* exact: 106 bits of 256 */
                mpfr_add(s, s, p, MPFR_RNDN);
            }
            worst = fmax(worst, fabs(mpfr_get_d(s, MPFR_RNDN)));
        }
    mpfr_clears(s, p, (mpfr_ptr)0);
    return worst;
}

/* Shapes that exercise every edge of the blocked loops: c not a multiple of
 * the 16 reflectors per block, r − i0 not a multiple of the 8-row groups,
 * more than one 128-row tile; tall, wide and square. */
static const size_t shapes[][2] = {{150, 150}, {203, 77}, {77, 203}, {129, 17}, {1, 1}, {5, 1}};

/* Higham, Accuracy and Stability of Numerical Algorithms (2nd ed., 2002),
 * Lemma 19.3 and the explicitly formed Q after Theorem 19.4: the computed
 * Q̂ = Q (I_{r,c} + ΔI) for an exactly orthogonal Q, ‖ΔI(:, j)‖₂ <= c·γ̃_r,
 * with γ̃_k = κ k u / (1 − κ k u), κ the small constant Higham leaves
 * unspecified; the blocked (WY) form has the same bound with another
 * constant (his §19.5, after Bischof and Van Loan 1987).  Then
 * |(Q̂ᵀQ̂ − I)_ij| <= ‖ΔI(:, i)‖ + ‖ΔI(:, j)‖ + ‖ΔI(:, i)‖‖ΔI(:, j)‖
 * <= 2cγ̃_r + (cγ̃_r)², which is c₁·c·u with c₁ = 2κr(1 + O(u)).  κ = 16
 * here, generous for the reflector's one norm and the products' sums. */
static double orthogonality_bound(size_t r, size_t c)
{
    double g = 16.0 * (double)r * u / (1 - 16.0 * (double)r * u), e = (double)c * g;
    return 2 * e + e * e;
}

START_TEST(householder_is_orthogonal_to_working_precision)
{
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t m = shapes[s][0], n = shapes[s][1];
        vijp_rng rng;
        vijp_rng_seed(&rng, 11 + s);
        double *W = malloc(m * n * sizeof *W);
        ck_assert(!vijp_orthogonal_householder(m, n, &rng, 0, 1, W));
        double e = orthogonality_error(W, m, n), bound = orthogonality_bound(m > n ? m : n, m > n ? n : m);
        ck_assert_msg(e <= bound, "%zux%zu: max |QᵀQ − I| = %g > %g", m, n, e, bound);
        free(W);
    }
}
END_TEST

/* Bit for bit: the AVX2 loops against the portable ones (the same sums in
 * the same order, vectors across independent sums only), and a second run
 * of the same seed against the first. */
START_TEST(householder_same_bits_portable_and_vector)
{
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t m = shapes[s][0], n = shapes[s][1];
        double *a = malloc(m * n * sizeof *a), *b = malloc(m * n * sizeof *b), *c = malloc(m * n * sizeof *c);
        vijp_rng r1, r2, r3;
        vijp_rng_seed(&r1, 5), vijp_rng_seed(&r2, 5), vijp_rng_seed(&r3, 5);
        ck_assert(!vijp_orthogonal_householder(m, n, &r1, 0, 1, a));
        ck_assert(!vijp_orthogonal_householder(m, n, &r2, 1, 1, b));
        ck_assert(!vijp_orthogonal_householder(m, n, &r3, 0, 3, c));
        ck_assert_msg(!memcmp(a, b, m * n * sizeof *a), "%zux%zu: portable and vector loops differ", m, n);
        ck_assert_msg(!memcmp(a, c, m * n * sizeof *a), "%zux%zu: two runs differ", m, n);
        free(a), free(b), free(c);
    }
}
END_TEST

/* Bit for bit on any thread count: the Householder product's updates split
 * over ranges of Q's columns (wide enough here that the first blocks split
 * into at least three parts, and the later, narrower ones into fewer), and
 * vijp_orthogonal_init passes its count on above the MGS threshold. */
START_TEST(householder_same_bits_any_threads)
{
    static const size_t wide[][2] = {{600, 600}, {700, 530}, {530, 700}};
    static const int counts[] = {2, 3, 5};
    for (size_t s = 0; s < sizeof wide / sizeof *wide; s++) {
        size_t m = wide[s][0], n = wide[s][1], r = m > n ? m : n, c = m > n ? n : m;
        ck_assert(vijp_fork_parts(5, c, 4.0 * 16 * (double)r * (double)c, VIJP_FORK_MIN_WORK) >= 3);
        double *a = malloc(m * n * sizeof *a), *b = malloc(m * n * sizeof *b);
        vijp_rng r1;
        vijp_rng_seed(&r1, 9);
        ck_assert(!vijp_orthogonal_householder(m, n, &r1, 0, 1, a));
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            vijp_rng rk;
            vijp_rng_seed(&rk, 9);
            ck_assert(!vijp_orthogonal_init(m, n, &rk, counts[k], b));
            ck_assert_msg(!memcmp(a, b, m * n * sizeof *a), "%zux%zu: %d threads differ from one", m, n, counts[k]);
        }
        free(a), free(b);
    }
}
END_TEST

/* Haar's first moments over seeds: Q_11 is symmetric about 0 (a Q built
 * without the sign correction diag(sign R_kk) has Q_11 = x_0/β < 0 always)
 * and Q_11² ~ Beta(1/2, (n − 1)/2): mean 1/n, variance 2(n − 1)/(n²(n + 2)).
 * Each sample mean within 5 standard errors (a false alarm with probability
 * below 1e-6 each, by the CLT; the seeds are fixed, so never flaky). */
START_TEST(householder_first_moments_are_haar)
{
    enum { N = 20, SEEDS = 2000 };
    double sum = 0, sum2 = 0, W[N * N];
    for (int k = 0; k < SEEDS; k++) {
        vijp_rng rng;
        vijp_rng_seed(&rng, 1000 + (uint64_t)k);
        ck_assert(!vijp_orthogonal_householder(N, N, &rng, 0, 1, W));
        sum += W[0], sum2 += W[0] * W[0];
    }
    double n = N, mean = sum / SEEDS, mean2 = sum2 / SEEDS;
    double se1 = sqrt(1 / n / SEEDS), se2 = sqrt(2 * (n - 1) / (n * n * (n + 2)) / SEEDS);
    ck_assert_msg(fabs(mean) <= 5 * se1, "mean Q_11 = %g, 5 SE = %g", mean, 5 * se1);
    ck_assert_msg(fabs(mean2 - 1 / n) <= 5 * se2, "mean Q_11² = %g, want %g ± %g", mean2, 1 / n, 5 * se2);
}
END_TEST

/* MGS twice as first written: one column at a time, each dot product in
 * four sums (lane l the rows i ≡ l mod 4, the tail added to lane 0), then
 * the update.  The bits every study up to the threshold has drawn. */
static void plain_mgs2(size_t m, size_t n, vijp_rng *rng, double *W)
{
    size_t r = m > n ? m : n, c = m > n ? n : m;
    double *A = malloc(r * c * sizeof *A);
    for (size_t i = 0; i < r * c; i++) A[i] = vijp_rng_normal(rng);
    for (size_t j = 0; j < c; j++) {
        double *q = A + j * r;
        for (int pass = 0; pass < 2; pass++)
            for (size_t k = 0; k < j; k++) {
                const double *p = A + k * r;
                double acc[4] = {0, 0, 0, 0};
                size_t i = 0;
                for (; i + 4 <= r; i += 4)
                    for (int l = 0; l < 4; l++) acc[l] += p[i + l] * q[i + l];
                for (; i < r; i++) acc[0] += p[i] * q[i];
                double d = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                for (i = 0; i < r; i++) q[i] -= d * p[i];
            }
        double nrm = 0;
        for (size_t i = 0; i < r; i++) nrm += q[i] * q[i];
        nrm = sqrt(nrm);
        ck_assert(nrm > 0);
        for (size_t i = 0; i < r; i++) q[i] /= nrm;
    }
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) {
            if (m >= n) W[i + j * m] = A[i + j * r];
            else W[j + i * m] = A[i + j * r];
        }
    free(A);
}

/* vijp_orthogonal_mgs2, two columns side by side and each update fused
 * with the next dot product, in the portable and the AVX2 loops: the plain
 * loops' bits, at sizes with and without a tail of rows (r mod 4), tall,
 * wide, one column, and the widest it is used at. */
START_TEST(mgs2_same_bits_as_plain_loops)
{
    static const size_t sizes[][2] = {{1, 1}, {2, 1}, {1, 3}, {5, 3},   {3, 5},   {7, 7},
                                      {8, 8}, {67, 30}, {30, 67}, {130, 129}, {256, 256}, {VIJP_ORTHO_MGS_MAX_WIDTH, 9}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int portable = 0; portable < 2; portable++) {
            size_t m = sizes[s][0], n = sizes[s][1];
            double *a = malloc(m * n * sizeof *a), *b = malloc(m * n * sizeof *b);
            vijp_rng r1, r2;
            vijp_rng_seed(&r1, 11 + s), vijp_rng_seed(&r2, 11 + s);
            plain_mgs2(m, n, &r1, a);
            ck_assert(!vijp_orthogonal_mgs2(m, n, &r2, portable, b));
            for (size_t i = 0; i < m * n; i++)
                ck_assert_msg(!memcmp(a + i, b + i, sizeof *a), "%zux%zu, %s loops: entry %zu is %a, the plain loops' %a",
                              m, n, portable ? "portable" : "vector", i, b[i], a[i]);
            free(a), free(b);
        }
}
END_TEST

/* vijp_orthogonal_init takes MGS twice up to the threshold (bit for bit:
 * the bits every study of that size has always had) and the blocked
 * product past it, on the longer side. */
START_TEST(init_switches_at_threshold)
{
    static const size_t sizes[][2] = {{VIJP_ORTHO_MGS_MAX_WIDTH, 3}, {3, VIJP_ORTHO_MGS_MAX_WIDTH},
                                      {VIJP_ORTHO_MGS_MAX_WIDTH + 1, 3}, {3, VIJP_ORTHO_MGS_MAX_WIDTH + 1}};
    for (size_t s = 0; s < 4; s++) {
        size_t m = sizes[s][0], n = sizes[s][1];
        int mgs = (m > n ? m : n) <= VIJP_ORTHO_MGS_MAX_WIDTH;
        double *a = malloc(m * n * sizeof *a), *b = malloc(m * n * sizeof *b);
        vijp_rng r1, r2;
        vijp_rng_seed(&r1, 3), vijp_rng_seed(&r2, 3);
        ck_assert(!vijp_orthogonal_init(m, n, &r1, 2, a));
        ck_assert(!(mgs ? vijp_orthogonal_mgs2(m, n, &r2, 0, b) : vijp_orthogonal_householder(m, n, &r2, 0, 1, b)));
        ck_assert_msg(!memcmp(a, b, m * n * sizeof *a), "%zux%zu: not the %s algorithm", m, n, mgs ? "MGS" : "blocked");
        free(a), free(b);
    }
}
END_TEST

/* vijp_rng_normal is Marsaglia's polar method on the generator's uniforms,
 * u·√(−2 ln s / s), with a log of its own (+ − × ÷ only): replayed here on
 * the same uniforms, with ln s from MPFR at 128 bits.  The draw's log errs
 * by at most 2^-49 of 2|t|·Σ + |e|·ln 2 (t rounded twice, twelve Horner
 * steps on a sum in [1, 1.011], the ln 2 term rounded twice, the last
 * addition once), which is at most 2^-47 of |ln s| (2|t|·Σ + |e|·ln 2 <=
 * 3|ln s|: e = 0 for s >= √½, and below it |e| >= 1, |ln s| >= ln √2); the
 * division, sqrt and product add 2^-51: 2^-46 in all.  Every draw of
 * 4000, and the uniforms taken (the rejected pairs too) stay in step. */
START_TEST(normal_draws_are_the_polar_method)
{
    vijp_rng r, replay;
    vijp_rng_seed(&r, 42), vijp_rng_seed(&replay, 42);
    mpfr_t L;
    mpfr_init2(L, 128);
    for (int k = 0; k < 4000; k++) {
        double x = vijp_rng_normal(&r), uu, s;
        do {
            uu = 2 * vijp_rng_uniform(&replay) - 1;
            double v = 2 * vijp_rng_uniform(&replay) - 1;
            s = uu * uu + v * v; /* rounded as the draw rounds it */
        } while (!(s > 0 && s < 1));
        mpfr_set_d(L, s, MPFR_RNDN), mpfr_log(L, L, MPFR_RNDN);
        mpfr_mul_d(L, L, -2 / s, MPFR_RNDN); /* −2/s: one rounding, inside the bound's 2^-51 */
        mpfr_sqrt(L, L, MPFR_RNDN), mpfr_mul_d(L, L, uu, MPFR_RNDN);
        double want = mpfr_get_d(L, MPFR_RNDN);
        ck_assert_msg(fabs(x - want) <= 0x1p-46 * fabs(want), "draw %d: %a, the polar method gives %a", k, x, want);
    }
    ck_assert_msg(vijp_rng_u64(&r) == vijp_rng_u64(&replay), "the draws took other uniforms than the polar method's");
    mpfr_clear(L);
}
END_TEST

/* vijp_rng_normals is n calls of vijp_rng_normal: the same bits, and the
 * generator where they leave it (the next uniform the same), for every
 * length from 0 to 200 (the batches' edges at 64 and 128 among them) and
 * one of 100003 from another seed. */
START_TEST(normal_batches_are_the_single_draws)
{
    double *one = malloc(100003 * sizeof *one), *batch = malloc(100003 * sizeof *batch);
    ck_assert(one && batch);
    for (size_t n = 0; n <= 201; n++) {
        size_t len = n == 201 ? 100003 : n;
        vijp_rng r, q;
        vijp_rng_seed(&r, 7 + n), vijp_rng_seed(&q, 7 + n);
        for (size_t i = 0; i < len; i++) one[i] = vijp_rng_normal(&r);
        vijp_rng_normals(&q, batch, len);
        ck_assert_msg(!len || !memcmp(one, batch, len * sizeof *one), "%zu draws differ", len);
        ck_assert_msg(vijp_rng_u64(&r) == vijp_rng_u64(&q), "after %zu draws the generators differ", len);
    }
    free(one), free(batch);
}
END_TEST

Suite *suite_orthogonal(void)
{
    Suite *s = suite_create("orthogonal");
    TCase *tc = tcase_create("householder");
    tcase_add_test(tc, householder_is_orthogonal_to_working_precision);
    tcase_add_test(tc, householder_same_bits_portable_and_vector);
    tcase_add_test(tc, householder_same_bits_any_threads);
    tcase_add_test(tc, householder_first_moments_are_haar);
    tcase_add_test(tc, init_switches_at_threshold);
    tcase_add_test(tc, mgs2_same_bits_as_plain_loops);
    tcase_add_test(tc, normal_draws_are_the_polar_method);
    tcase_add_test(tc, normal_batches_are_the_single_draws);
    suite_add_tcase(s, tc);
    return s;
}

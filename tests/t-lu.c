/* src/layers/lu.h on both routes (LAPACK's getrf/getrs and the recursive
 * one, whichever this machine's BLAS would pick): vijp_lu_factor_d/_f and
 * vijp_lu_solve_d/_f, the dense layer's vijp and inverse.  Two kinds of
 * oracle, neither the code under test:
 *   exact: factors with small entries, A or B formed from them exactly.
 *          For the solves, integer factors (diagonal ±1 or ±2) and an
 *          integer X, B = op(A) X in integer arithmetic: every intermediate
 *          value is an integer below 2^24 in magnitude.  For the
 *          factorisation, multipliers in {−1/2, 0, 1/2} (so partial
 *          pivoting's choice is unique) and integer U: every intermediate
 *          value is a multiple of 1/2 below 2^23.  Each operation (any order
 *          of the sums, a reciprocal of the diagonal or a division) is then
 *          exact, and X, or the factors, interchanges and info, must come
 *          back bit for bit, in double and in binary32;
 *   backward error: for random A, the residuals of the computed factors
 *          and solutions, in MPFR at 256 bits, within lu.h's bounds
 *          γ_{n+1}|L̂||Û| and γ_{2n+2}|L̂||Û||ẑ|.
 * Shapes cross the recursion's leaves (8 rows, 16 columns) and the getrs
 * cut-off (16 columns).  Each test runs once per route (_i). */
#include <stdio.h>
#include "fixtures/testutil.h"
#include "layers/lu.h"
#include "vijp/rng.h"
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

static const size_t sizes[] = {1, 7, 8, 9, 17, 33, 100};
static const size_t columns[] = {1, 15, 16, 17, 40};

/* Row interchanges as getrf reports them (1-based, piv[i] >= i + 1),
 * applied to the rows of the n × c integer matrix M: forward (i = 0..n−1)
 * is Pᵀ M, backward is P M. */
static void swap_rows(long long *M, size_t n, size_t c, const lapack_int *piv, int forward)
{
    for (size_t s = 0; s < n; s++) {
        size_t i = forward ? s : n - 1 - s, k = (size_t)piv[i] - 1;
        for (size_t j = 0; j < c; j++) {
            long long t = M[i + j * n];
            M[i + j * n] = M[k + j * n], M[k + j * n] = t;
        }
    }
}

/* Y = op(T) X for the triangle stored in LU (upper: U with its diagonal;
 * lower: L with a unit diagonal), integers. */
static void tri_mul(const long long *LU, int upper, int trans, size_t n, size_t c, const long long *X, long long *Y)
{
    for (size_t j = 0; j < c; j++)
        for (size_t i = 0; i < n; i++) {
            long long s = 0;
            for (size_t k = 0; k < n; k++) {
                size_t r = trans ? k : i, q = trans ? i : k; /* entry (i, k) of op(T) is T[r, q] */
                long long t = r == q ? (upper ? LU[r + q * n] : 1) : (upper ? r < q : r > q) ? LU[r + q * n] : 0;
                s += t * X[k + j * n];
            }
            Y[i + j * n] = s;
        }
}

static long long small_int(vijp_rng *g, int lo, int hi)
{
    return lo + (long long)(vijp_rng_u64(g) % (uint64_t)(hi - lo + 1));
}

START_TEST(test_lu_solve_exact)
{
    vijp_lu_route route = (vijp_lu_route)_i;
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof columns / sizeof *columns; b++)
            for (int trans = 0; trans < 2; trans++) {
                size_t n = sizes[a], c = columns[b];
                long long *LU = malloc(n * n * sizeof *LU), *X = malloc(n * c * sizeof *X);
                long long *T1 = malloc(n * c * sizeof *T1), *T2 = malloc(n * c * sizeof *T2);
                lapack_int *piv = malloc(n * sizeof *piv);
                for (size_t i = 0; i < n; i++) {
                    piv[i] = (lapack_int)(i + 1 + vijp_rng_u64(&g) % (n - i));
                    for (size_t k = 0; k < n; k++)
                        LU[i + k * n] = i == k ? (small_int(&g, 0, 1) ? 1 : 2) * (small_int(&g, 0, 1) ? 1 : -1)
                                               : small_int(&g, -1, 1);
                }
                for (size_t i = 0; i < n * c; i++) X[i] = small_int(&g, -4, 4);
                /* |entries| <= 2 · 100 · 100 · 4 < 2^24 at every stage */
                if (!trans) { /* B = P L U X */
                    tri_mul(LU, 1, 0, n, c, X, T1);
                    tri_mul(LU, 0, 0, n, c, T1, T2);
                    swap_rows(T2, n, c, piv, 0);
                } else { /* B = Uᵀ Lᵀ Pᵀ X */
                    memcpy(T1, X, n * c * sizeof *T1);
                    swap_rows(T1, n, c, piv, 1);
                    tri_mul(LU, 0, 1, n, c, T1, T2);
                    memcpy(T1, T2, n * c * sizeof *T1);
                    tri_mul(LU, 1, 1, n, c, T1, T2);
                }
                double *LUd = malloc(n * n * sizeof *LUd), *Bd = malloc(n * c * sizeof *Bd);
                float *LUf = malloc(n * n * sizeof *LUf), *Bf = malloc(n * c * sizeof *Bf);
                for (size_t i = 0; i < n * n; i++) LUd[i] = (double)LU[i], LUf[i] = (float)LU[i];
                for (size_t i = 0; i < n * c; i++) {
                    ck_assert(llabs(T2[i]) < (1ll << 24));
                    Bd[i] = (double)T2[i], Bf[i] = (float)T2[i];
                }
                vijp_lu_solve_d(route, trans ? 'T' : 'N', n, c, LUd, piv, Bd);
                vijp_lu_solve_f(route, trans ? 'T' : 'N', n, c, LUf, piv, Bf);
                for (size_t i = 0; i < n * c; i++) {
                    ck_assert_msg(Bd[i] == (double)X[i] && Bf[i] == (float)X[i],
                                  "n %zu, %zu columns, '%c': X[%zu, %zu] = %lld, solved %.17g (double), %.9g (float)",
                                  n, c, trans ? 'T' : 'N', i % n, i / n, X[i], Bd[i], (double)Bf[i]);
                }
                free(LU), free(X), free(T1), free(T2), free(piv), free(LUd), free(Bd), free(LUf), free(Bf);
            }
}
END_TEST

/* Entry (i, k) of op(T) for getrf's factors in LU (ld n), as an exact
 * double: upper T = Û, lower T = L̂ (unit diagonal). */
static double tri_entry(const double *LU, size_t n, int upper, int trans, size_t i, size_t k)
{
    size_t r = trans ? k : i, q = trans ? i : k;
    if (r == q) return upper ? LU[r + q * n] : 1;
    return (upper ? r < q : r > q) ? LU[r + q * n] : 0;
}

/* For one column: t = op(T2) z, then res = b − op(T1) t and mag = |op(T1)|
 * |op(T2)| |z|, all in MPFR at 256 bits (products of doubles exact, each sum
 * within 2^-255 relative of Σ|terms|, far below the bound checked).
 * Returns the largest |res_i| / mag_i (0/0 = 0). */
static double worst_residual(const double *LU, size_t n, int trans, const double *z, const double *b)
{
    /* 'N': Pᵀb = L̂ (Û x̂): T1 = L̂, T2 = Û.  'T': b = Ûᵀ (L̂ᵀ ẑ): T1 = Ûᵀ, T2 = L̂ᵀ. */
    int up1 = trans, up2 = !trans;
    mpfr_t *t = malloc(n * sizeof *t), *m = malloc(n * sizeof *m), s, sm, p;
    mpfr_inits2(256, s, sm, p, (mpfr_ptr)0);
    for (size_t i = 0; i < n; i++) {
        mpfr_inits2(256, t[i], m[i], (mpfr_ptr)0);
        mpfr_set_zero(t[i], 1), mpfr_set_zero(m[i], 1);
        for (size_t k = 0; k < n; k++) {
            double e = tri_entry(LU, n, up2, trans, i, k);
            mpfr_set_d(p, e, MPFR_RNDN), mpfr_mul_d(p, p, z[k], MPFR_RNDN), mpfr_add(t[i], t[i], p, MPFR_RNDN);
            mpfr_set_d(p, fabs(e), MPFR_RNDN), mpfr_mul_d(p, p, fabs(z[k]), MPFR_RNDN);
            mpfr_add(m[i], m[i], p, MPFR_RNDN);
        }
    }
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(s, b[i], MPFR_RNDN), mpfr_set_zero(sm, 1);
        for (size_t k = 0; k < n; k++) {
            double e = tri_entry(LU, n, up1, trans, i, k);
            mpfr_mul_d(p, t[k], e, MPFR_RNDN), mpfr_sub(s, s, p, MPFR_RNDN);
            mpfr_mul_d(p, m[k], fabs(e), MPFR_RNDN), mpfr_add(sm, sm, p, MPFR_RNDN);
        }
        mpfr_abs(s, s, MPFR_RNDN);
        if (!mpfr_zero_p(s)) {
            mpfr_div(s, s, sm, MPFR_RNDU);
            double r = mpfr_get_d(s, MPFR_RNDU);
            if (r > worst) worst = r;
        }
    }
    for (size_t i = 0; i < n; i++) mpfr_clears(t[i], m[i], (mpfr_ptr)0);
    mpfr_clears(s, sm, p, (mpfr_ptr)0);
    free(t), free(m);
    return worst;
}

/* Pᵀ applied to column x (getrf's interchanges in order). */
static void permute_t(const lapack_int *piv, size_t n, const double *x, double *z)
{
    memcpy(z, x, n * sizeof *z);
    for (size_t i = 0; i < n; i++) {
        double t = z[i];
        z[i] = z[piv[i] - 1], z[piv[i] - 1] = t;
    }
}

static double gamma_k(double k, double u) { return k * u / (1 - k * u); }

/* Random Gaussian A (pivoting happens), in double, and once in binary32 with
 * the factors and solution widened to double for the same residual. */
START_TEST(test_lu_solve_backward_error)
{
    vijp_lu_route route = (vijp_lu_route)_i;
    static const size_t shapes[][2] = {{9, 17}, {33, 16}, {100, 40}, {256, 64}};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t a = 0; a < sizeof shapes / sizeof *shapes; a++)
        for (int trans = 0; trans < 2; trans++)
            for (int single = 0; single < 2; single++) {
                size_t n = shapes[a][0], c = shapes[a][1];
                double *A = malloc(n * n * sizeof *A), *B = malloc(n * c * sizeof *B), *X = malloc(n * c * sizeof *X);
                double *z = malloc(n * sizeof *z), *pb = malloc(n * sizeof *pb);
                lapack_int *piv = malloc(n * sizeof *piv);
                for (size_t i = 0; i < n * n; i++) A[i] = vijp_rng_normal(&g);
                for (size_t i = 0; i < n * c; i++) B[i] = vijp_rng_normal(&g);
                if (single) {
                    float *Af = malloc(n * n * sizeof *Af), *Xf = malloc(n * c * sizeof *Xf);
                    for (size_t i = 0; i < n * n; i++) Af[i] = (float)A[i];
                    for (size_t i = 0; i < n * c; i++) Xf[i] = (float)B[i], B[i] = Xf[i];
                    ck_assert_int_eq(LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, (int)n, (int)n, Af, (int)n, piv), 0);
                    vijp_lu_solve_f(route, trans ? 'T' : 'N', n, c, Af, piv, Xf);
                    for (size_t i = 0; i < n * n; i++) A[i] = Af[i];
                    for (size_t i = 0; i < n * c; i++) X[i] = Xf[i];
                    free(Af), free(Xf);
                } else {
                    memcpy(X, B, n * c * sizeof *X);
                    ck_assert_int_eq(LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv), 0);
                    vijp_lu_solve_d(route, trans ? 'T' : 'N', n, c, A, piv, X);
                }
                double bound = gamma_k(2.0 * (double)n + 2, single ? 0x1p-24 : 0x1p-53), worst = 0;
                /* every column at n <= 100; three at n = 256 (the MPFR residual's cost) */
                for (size_t j = 0; j < c; j += n > 100 ? c / 2 - 1 : 1) {
                    double r;
                    if (trans) { /* b = Ûᵀ L̂ᵀ ẑ with ẑ = Pᵀ x̂ */
                        permute_t(piv, n, X + j * n, z);
                        r = worst_residual(A, n, 1, z, B + j * n);
                    } else { /* Pᵀ b = L̂ Û x̂ */
                        permute_t(piv, n, B + j * n, pb);
                        r = worst_residual(A, n, 0, X + j * n, pb);
                    }
                    if (r > worst) worst = r;
                }
                ck_assert_msg(worst <= bound, "n %zu, %zu columns, '%c', %s: residual %.3g of |L||U||z| > γ_{2n+2} = %.3g",
                              n, c, trans ? 'T' : 'N', single ? "binary32" : "double", worst, bound);
                free(A), free(B), free(X), free(z), free(pb), free(piv);
            }
}
END_TEST

/* Random interchanges as getrf reports them: piv[i] in [i + 1, n]. */
static void random_piv(vijp_rng *g, size_t n, lapack_int *piv)
{
    for (size_t i = 0; i < n; i++) piv[i] = (lapack_int)(i + 1 + vijp_rng_u64(g) % (n - i));
}

/* A = P L U from LU (L's multipliers below the diagonal, U on and above),
 * column by column: L U, then the interchanges in reverse (P = P_1 … P_n). */
static void compose(size_t n, const double *LU, const lapack_int *piv, double *A)
{
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t k = 0; k < n; k++) s += tri_entry(LU, n, 0, 0, i, k) * tri_entry(LU, n, 1, 0, k, j);
            A[i + j * n] = s;
        }
        for (size_t t = n; t-- > 0;) {
            double v = A[t + j * n];
            A[t + j * n] = A[piv[t] - 1 + j * n], A[piv[t] - 1 + j * n] = v;
        }
    }
}

/* Factors with multipliers in {−1/2, 0, 1/2} and U's entries integers in
 * [−2, 2], its diagonal ±1 or ±2 (0 at `zero`, whose column of L is then 0
 * and whose interchange none: what getrf leaves at an exactly zero pivot,
 * a column of zeros, idamax's first entry, nothing scaled).  Every partial
 * sum of A = P L U and of the elimination is a multiple of 1/2 below
 * 2^23: exact in binary32 and double. */
static void exact_factors(vijp_rng *g, size_t n, size_t zero, double *LU, lapack_int *piv)
{
    random_piv(g, n, piv);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double v = i == j ? (double)((small_int(g, 0, 1) ? 1 : 2) * (small_int(g, 0, 1) ? 1 : -1))
                       : i > j ? 0.5 * (double)small_int(g, -1, 1) : (double)small_int(g, -2, 2);
            LU[i + j * n] = (i == zero && i == j) || (j == zero && i > j) ? 0 : v;
        }
    if (zero < n) piv[zero] = (lapack_int)zero + 1;
}

START_TEST(test_lu_factor_exact)
{
    vijp_lu_route route = (vijp_lu_route)_i;
    static const size_t orders[] = {1, 2, 9, 16, 17, 31, 33, 64, 100};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t a = 0; a < sizeof orders / sizeof *orders; a++)
        for (int singular = 0; singular < 2; singular++) {
            size_t n = orders[a], zero = singular ? n / 2 + (n > 2) : n; /* n / 2 + 1: in the 2nd half */
            double *LU = malloc(n * n * sizeof *LU), *A = malloc(n * n * sizeof *A);
            float *Af = malloc(n * n * sizeof *Af);
            lapack_int *piv = malloc(n * sizeof *piv), *pd = malloc(n * sizeof *pd), *pf = malloc(n * sizeof *pf);
            exact_factors(&g, n, zero, LU, piv);
            compose(n, LU, piv, A);
            for (size_t i = 0; i < n * n; i++) Af[i] = (float)A[i];
            lapack_int want = singular ? (lapack_int)zero + 1 : 0;
            lapack_int id = vijp_lu_factor_d(route, n, A, pd), is = vijp_lu_factor_f(route, n, Af, pf);
            ck_assert_msg(id == want && is == want, "n %zu: info %d (double), %d (float), want %d", n, (int)id,
                          (int)is, (int)want);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(pd[i] == piv[i] && pf[i] == piv[i], "n %zu: piv[%zu] = %d (double), %d (float), want %d",
                              n, i, (int)pd[i], (int)pf[i], (int)piv[i]);
            for (size_t i = 0; i < n * n; i++)
                ck_assert_msg(A[i] == LU[i] && Af[i] == (float)LU[i],
                              "n %zu%s: LU[%zu, %zu] = %g, factored %.17g (double), %.9g (float)", n,
                              singular ? " (singular)" : "", i % n, i / n, LU[i], A[i], (double)Af[i]);
            free(LU), free(A), free(Af), free(piv), free(pd), free(pf);
        }
}
END_TEST

/* Random Gaussian A: |l_ij| <= 1 (partial pivoting) and, against A itself,
 * |Pᵀ A − L̂ Û| <= γ_{n+1}|L̂||Û| (lu.h), in MPFR at 256 bits (worst_residual
 * with z = e_j: |L̂||Û||e_j| is |L̂||Û|'s column j); every column
 * at n <= 100, three at n = 256.  In binary32 the factors are widened and A
 * is the float matrix factored. */
START_TEST(test_lu_factor_backward_error)
{
    vijp_lu_route route = (vijp_lu_route)_i;
    static const size_t orders[] = {9, 17, 33, 100, 256};
    vijp_rng g;
    vijp_rng_seed(&g, test_seed());
    for (size_t a = 0; a < sizeof orders / sizeof *orders; a++)
        for (int single = 0; single < 2; single++) {
            size_t n = orders[a];
            double *A = malloc(n * n * sizeof *A), *LU = malloc(n * n * sizeof *LU), *col = malloc(n * sizeof *col);
            double *e = malloc(n * sizeof *e);
            lapack_int *piv = malloc(n * sizeof *piv);
            for (size_t i = 0; i < n * n; i++) A[i] = vijp_rng_normal(&g);
            if (single) {
                float *F = malloc(n * n * sizeof *F);
                for (size_t i = 0; i < n * n; i++) F[i] = (float)A[i], A[i] = F[i];
                ck_assert_int_eq(vijp_lu_factor_f(route, n, F, piv), 0);
                for (size_t i = 0; i < n * n; i++) LU[i] = F[i];
                free(F);
            } else {
                memcpy(LU, A, n * n * sizeof *LU);
                ck_assert_int_eq(vijp_lu_factor_d(route, n, LU, piv), 0);
            }
            double bound = gamma_k((double)n + 1, single ? 0x1p-24 : 0x1p-53), worst = 0;
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < i; j++)
                    ck_assert_msg(fabs(LU[i + j * n]) <= 1, "n %zu: |l[%zu, %zu]| = %g > 1", n, i, j, LU[i + j * n]);
            for (size_t j = 0; j < n; j += n > 100 ? n / 2 - 1 : 1) { /* column j: Pᵀa_j − L̂ Û e_j */
                permute_t(piv, n, A + j * n, col);
                memset(e, 0, n * sizeof *e), e[j] = 1;
                double r = worst_residual(LU, n, 0, e, col);
                if (r > worst) worst = r;
            }
            ck_assert_msg(worst <= bound, "n %zu, %s: |PᵀA − LU| reaches %.3g of |L||U| > γ_{n+1} = %.3g", n,
                          single ? "binary32" : "double", worst, bound);
            free(A), free(LU), free(col), free(e), free(piv);
        }
}
END_TEST

/* A NaN in one column of B stays in that column and makes it NaN; the
 * other columns are numbers (nothing turns a NaN into a number, and columns
 * are independent). */
START_TEST(test_lu_solve_nan)
{
    vijp_lu_route route = (vijp_lu_route)_i;
    size_t n = 33, c = 20;
    for (int trans = 0; trans < 2; trans++) {
        double *A = malloc(n * n * sizeof *A), *B = malloc(n * c * sizeof *B);
        lapack_int *piv = malloc(n * sizeof *piv);
        for (size_t i = 0; i < n * n; i++) A[i] = (i % (n + 1) == 0 ? 4 : 0) + 1.0 / (double)(1 + i % 7);
        for (size_t i = 0; i < n * c; i++) B[i] = 1.0 + (double)(i % 5);
        B[n - 1 + 3 * n] = NAN; /* the last row: reached first by 'T', last by 'N' */
        ck_assert_int_eq(LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv), 0);
        vijp_lu_solve_d(route, trans ? 'T' : 'N', n, c, A, piv, B);
        for (size_t j = 0; j < c; j++) {
            int nans = 0;
            for (size_t i = 0; i < n; i++) nans += isnan(B[i + j * n]) != 0;
            ck_assert_msg(j == 3 ? nans > 0 : nans == 0, "'%c': column %zu has %d NaNs", trans ? 'T' : 'N', j, nans);
        }
        free(A), free(B), free(piv);
    }
}
END_TEST

Suite *suite_lu(void)
{
    Suite *s = suite_create("lu");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_lu_factor_exact, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE + 1);
    tcase_add_loop_test(tc, test_lu_factor_backward_error, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE + 1);
    tcase_add_loop_test(tc, test_lu_solve_exact, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE + 1);
    tcase_add_loop_test(tc, test_lu_solve_backward_error, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE + 1);
    tcase_add_loop_test(tc, test_lu_solve_nan, VIJP_LU_LAPACK, VIJP_LU_RECURSIVE + 1);
    suite_add_tcase(s, tc);
    return s;
}

/* bfloat16+binary32@SET and binary16+binary32@SET (vijp/format.h): the
 * float operators of binary32@SET on values of the storage format, each
 * result rounded once to it (src/layer/native_f32.c), dense's products through the
 * set's gemm_mixed_f.
 *   - leaky and relu give the mixed emulation's bits: one correctly rounded
 *     binary32 operation, then one rounding to storage, as the emulation;
 *   - dense on ref: the bits of sgemm (sgetrf/sgetrs for the vijp) called
 *     here and rounded to storage, and each output within u_s·|s| +
 *     (1 + u_s)·γ_{n+1}·Σ|terms| of the exact value s (products of storage
 *     values are exact in binary32; Higham eq. 3.5 for the sums; u_s the
 *     storage's unit roundoff for the last rounding);
 * A study in them: t-b32set.c's study_runs_binary32_sets. */
#include "fixtures/testutil.h"
#include "fixtures/f32fix.h"
#include "kernels/kernels.h"
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mixed_names[] = {"bfloat16+binary32", "binary16+binary32"};

static double gamma_k(double k) { return k * 0x1p-24 / (1 - k * 0x1p-24); }

/* floats into a matrix of format F, rounded to its storage: the route's last step */
static void stored_from(vijp_mat *a, const float *v, size_t rows, size_t cols, const vijp_format *F)
{
    vijp_mat_init(a, rows, cols, F);
    for (size_t i = 0; i < rows * cols; i++) vijp_mat_set_entry_d(a, i, v[i]); /* once to storage, as the float stored */
    vijp_mat_store(a);
}

START_TEST(parse_mixed_sets)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert(!vijp_format_parse("bfloat16+binary32@ref", &f, &err));
    ck_assert(f.kind == VIJP_MIXED && f.mixed && f.prec == 24 && f.store_prec == 8 && f.kernel_set == 1);
    ck_assert_str_eq(f.name, "bfloat16+binary32@ref");
    ck_assert(!vijp_format_parse("binary16+binary32@ref", &f, &err) && f.store_prec == 11 && f.kernel_set == 1);
    ck_assert(vijp_format_parse("tf32+binary32@ref", &f, &err) == VIJP_EINVAL && strstr(err.msg, "only double"));
    ck_assert(vijp_format_parse("bfloat16+binary32@", &f, &err) == VIJP_EINVAL && strstr(err.msg, "unknown kernel set"));
    for (int i = 1; i < VIJP_KSET_COUNT; i++) {
        char name[40];
        snprintf(name, sizeof name, "bfloat16+binary32@%s", vijp_kset_names[i]);
        int have = vijp_kernels_set(i, NULL) != NULL, rc = vijp_format_parse(name, &f, &err);
        ck_assert_msg(have ? !rc && f.kernel_set == 1 + i : rc == VIJP_EINVAL && strstr(err.msg, "not available"), "%s",
                      name);
    }
}
END_TEST

/* leaky and relu in every set the machine runs, both mixed formats: every
 * operator bit for bit the emulation's, specials and an odd length included. */
START_TEST(exact_layers_are_the_emulation)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 11);
    for (int st = 0; st < 2; st++)
        for (int s = 0; s < VIJP_KSET_COUNT; s++) {
            vijp_format E, S;
            char name[40];
            snprintf(name, sizeof name, "%s@%s", mixed_names[st], vijp_kset_names[s]);
            if (!vijp_kernels_set(s, NULL)) continue;
            ck_assert(!vijp_format_parse(mixed_names[st], &E, NULL) && !vijp_format_parse(name, &S, NULL));
            f32_exact_layers_match(&E, &S, &rng);
        }
}
END_TEST

/* dense:16 and dense:24x16 in both mixed formats @ref (see the top). */
START_TEST(dense_is_sgemm_rounded_to_storage)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 12);
    static const char *const specs[] = {"dense:16", "dense:24x16"};
    for (int st = 0; st < 2; st++)
        for (int c = 0; c < 2; c++) {
            vijp_format S;
            char name[40];
            snprintf(name, sizeof name, "%s@ref", mixed_names[st]);
            ck_assert(!vijp_format_parse(name, &S, NULL));
            double us = ldexp(1.0, -(int)S.store_prec);
            vijp_layer L;
            vijp_error err = {0};
            ck_assert(!vijp_layer_parse(&L, specs[c], 16, &err));
            size_t m = L.out, n = L.in, B = 5, P = m * n + m;
            vijp_mat th, X, G, Y, Gx, Gt, R;
            f32_fill(&th, P, 1, &S, &rng, 0), f32_fill(&X, n, B, &S, &rng, 0), f32_fill(&G, m, B, &S, &rng, 0);
            for (size_t i = 0; i < n && m == n; i++) /* W + 4I: far from singular */
                th.d[i + i * m] = (float)(th.d[i + i * m] + 4); /* rounded to 24 bits, as at the matrix's precision */
            vijp_mat_store(&th);
            vijp_mat_init(&Y, m, B, &S), vijp_mat_init(&Gx, n, B, &S), vijp_mat_init(&Gt, P, 1, &S);
            ck_assert(!vijp_layer_forward(&L, &th, &X, &Y, &err));
            ck_assert(!vijp_layer_vjp(&L, &th, &X, &G, &Gx, &err));
            ck_assert(!vijp_layer_vjp_param(&L, &th, &X, &G, &Gt, &err));
            float *w = f32_floats_of(&th), *x = f32_floats_of(&X), *g = f32_floats_of(&G), *y = f32_floats_of(&Y),
                  *ref = malloc(m * B * sizeof *ref), *gx = malloc(n * B * sizeof *gx), *gt = malloc(P * sizeof *gt);
            for (size_t j = 0; j < B; j++) memcpy(ref + j * m, w + m * n, m * sizeof *ref);
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)B, (int)n, 1.0f, w, (int)m, x, (int)n,
                        1.0f, ref, (int)m);
            stored_from(&R, ref, m, B, &S), f32_assert_same_bits(&Y, &R, "forward"), vijp_mat_clear(&R);
            cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)n, (int)B, (int)m, 1.0f, w, (int)m, g, (int)m,
                        0.0f, gx, (int)n);
            stored_from(&R, gx, n, B, &S), f32_assert_same_bits(&Gx, &R, "vjp"), vijp_mat_clear(&R);
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)B, 1.0f, g, (int)m, x, (int)n,
                        0.0f, gt, (int)m);
            for (size_t i = 0; i < m; i++) {
                gt[m * n + i] = 0;
                for (size_t j = 0; j < B; j++) gt[m * n + i] += g[i + j * m];
            }
            stored_from(&R, gt, P, 1, &S), f32_assert_same_bits(&Gt, &R, "vjp_param"), vijp_mat_clear(&R);
            for (size_t j = 0; j < B; j++) /* the forward within its bound of the exact value */
                for (size_t i = 0; i < m; i++) {
                    double s = w[m * n + i], S_ = fabs(s); /* products of storage values: exact in double too */
                    long double e = s;
                    for (size_t k = 0; k < n; k++) {
                        double p = (double)w[i + k * m] * x[k + j * n];
                        e += p, S_ += fabs(p);
                    }
                    /* e: n + 1 exact terms summed in long double (64 bits), within (n + 1)·2^-64·S */
                    double bound = us * fabsl(e) + (1 + us) * gamma_k((double)n + 1) * S_ + (double)(n + 1) * 0x1p-63 * S_;
                    ck_assert_msg(fabsl(y[i + j * m] - e) <= bound, "%s forward (%zu, %zu): %g, exact %Lg, bound %g",
                                  name, i, j, (double)y[i + j * m], e, bound);
                }
            if (m == n) { /* the vijp: sgetrf, sgetrs with Wᵀ, rounded to storage */
                vijp_mat Gy;
                vijp_mat_init(&Gy, m, B, &S);
                ck_assert(!vijp_layer_vijp(&L, &th, &X, &G, NULL, &Gy, &err));
                float *A = malloc(n * n * sizeof *A), *z = malloc(n * B * sizeof *z);
                lapack_int piv[16];
                memcpy(A, w, n * n * sizeof *A), memcpy(z, g, n * B * sizeof *z);
                ck_assert(LAPACKE_sgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv) == 0);
                ck_assert(LAPACKE_sgetrs(LAPACK_COL_MAJOR, 'T', (int)n, (int)B, A, (int)n, piv, z, (int)n) == 0);
                stored_from(&R, z, n, B, &S), f32_assert_same_bits(&Gy, &R, "vijp"), vijp_mat_clear(&R);
                free(A), free(z), vijp_mat_clear(&Gy);
            }
            free(w), free(x), free(g), free(y), free(ref), free(gx), free(gt);
            vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y), vijp_mat_clear(&Gx);
            vijp_mat_clear(&Gt), vijp_layer_clear(&L);
        }
}
END_TEST

Suite *suite_mixedset(void)
{
    Suite *s = suite_create("mixedset");
    TCase *tc = tcase_create("mixedset");
    tcase_add_test(tc, parse_mixed_sets);
    tcase_add_test(tc, exact_layers_are_the_emulation);
    tcase_add_test(tc, dense_is_sgemm_rounded_to_storage);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

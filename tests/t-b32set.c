/* binary32@SET (vijp/format.h, vijp_ops_f in vijp/layer.h): layer operators
 * on native floats through a kernel set, beside the binary32 emulation.
 *   - the exact kernels' layers (leaky, relu) give the emulation's bits: the
 *     same one correctly rounded binary32 operation (or selection) per unit;
 *   - the smooth activations give their set's act_f kernel's f, and one
 *     binary32 product or quotient by its f′ (the kernel's own accuracy is
 *     t-kernels' business);
 *   - dense goes through sgemm and sgetrf/sgetrs: the same bits as those
 *     calls made here, within γ_n of the exact products (Higham eq. 3.5),
 *     and a vijp with the backward error of LU (Higham Thm 9.4); the tall
 *     dense vijp, which has no float operator, is the emulation's;
 *   - a study runs such formats and marks them not bit-reproducible. */
#include "fixtures/testutil.h"
#include "fixtures/f32fix.h"
#include "fixtures/clirun.h"
#include "kernels/kernels.h"
#include <cblas.h>
#include <jansson.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24 /* binary32's unit roundoff */

static double gamma_k(double k) { return k * U32 / (1 - k * U32); }

/* The sets this machine runs, as binary32@SET formats. */
static int set_format(int i, vijp_format *F)
{
    char name[32];
    snprintf(name, sizeof name, "binary32@%s", vijp_kset_names[i]);
    return vijp_kernels_set(i, NULL) && !vijp_format_parse(name, F, NULL);
}

START_TEST(parse_binary32_sets)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert(!vijp_format_parse("binary32@ref", &f, &err));
    ck_assert(f.kind == VIJP_BINARY32 && f.prec == 24 && f.emulated && f.emin == -148 && f.emax == 128);
    ck_assert(f.kernel_set == 1 && !strcmp(f.name, "binary32@ref"));
    ck_assert(vijp_format_parse("binary16@ref", &f, &err) == VIJP_EINVAL && strstr(err.msg, "only double, binary32, bfloat16+binary32 and binary16+binary32"));
    ck_assert(vijp_format_parse("binary32@", &f, &err) == VIJP_EINVAL && strstr(err.msg, "unknown kernel set"));
    ck_assert(vijp_format_parse("binary32x@ref", &f, &err) == VIJP_EINVAL);
    for (int i = 1; i < VIJP_KSET_COUNT; i++) {
        char name[32];
        snprintf(name, sizeof name, "binary32@%s", vijp_kset_names[i]);
        int have = vijp_kernels_set(i, NULL) != NULL, rc = vijp_format_parse(name, &f, &err);
        ck_assert_msg(have ? !rc && f.kernel_set == 1 + i : rc == VIJP_EINVAL && strstr(err.msg, "not available"), "%s",
                      name);
    }
}
END_TEST

/* leaky and relu: every operator bit for bit the emulation's, in every set,
 * special values and a length that is no multiple of a vector included. */
START_TEST(exact_layers_are_the_emulation)
{
    vijp_format E;
    vijp_format_fixed(&E, VIJP_BINARY32);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (int s = 0; s < VIJP_KSET_COUNT; s++) {
        vijp_format S;
        if (set_format(s, &S)) f32_exact_layers_match(&E, &S, &rng);
    }
}
END_TEST

/* The catalogue's smooth activations: f is the set's act_f kernel's, the jvp
 * u·f′ and the vijp g/f′ one binary32 operation on its f′. */
START_TEST(activations_are_their_kernels)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 1);
    for (int s = 0; s < VIJP_KSET_COUNT; s++) {
        vijp_format S;
        if (!set_format(s, &S)) continue;
        const vijp_kernels *K = vijp_kernels_set(s, NULL);
        for (int k = 0; k < VIJP_KACT_COUNT; k++) {
            vijp_layer L;
            vijp_error err = {0};
            size_t n = 13, B = 2, N = n * B;
            ck_assert(!vijp_layer_parse(&L, vijp_kact_names[k], n, &err));
            vijp_mat X, U, Y;
            f32_fill(&X, n, B, &S, &rng, 0), f32_fill(&U, n, B, &S, &rng, 0), vijp_mat_init(&Y, n, B, &S);
            float *x = f32_floats_of(&X), *u = f32_floats_of(&U), *f = malloc(N * sizeof *f), *d = malloc(N * sizeof *d);
            K->act_f[k](N, x, f, d);
            ck_assert(!vijp_layer_forward(&L, NULL, &X, &Y, &err));
            for (size_t i = 0; i < N; i++) ck_assert_msg((float)vijp_mat_get_d(&Y, i) == f[i], "%s forward", L.type->name);
            ck_assert(!vijp_layer_jvp(&L, NULL, &X, &U, &Y, &err));
            for (size_t i = 0; i < N; i++) ck_assert((float)vijp_mat_get_d(&Y, i) == u[i] * d[i]);
            ck_assert(!vijp_layer_vijp(&L, NULL, &X, &U, NULL, &Y, &err));
            for (size_t i = 0; i < N; i++) ck_assert((float)vijp_mat_get_d(&Y, i) == u[i] / d[i]);
            free(x), free(u), free(f), free(d);
            vijp_mat_clear(&X), vijp_mat_clear(&U), vijp_mat_clear(&Y);
            vijp_layer_clear(&L);
        }
    }
}
END_TEST

/* Exact W·v (+ b) in MPFR at 256 bits (float products are exact at 48 bits,
 * and the sums of a few hundred of them are exact at 256). */
static double exact_entry(const float *W, size_t ldw, int trans, size_t i, const float *v, size_t len, double b,
                          double *absum)
{
    mpfr_t acc, p;
    mpfr_inits2(256, acc, p, (mpfr_ptr)0);
    mpfr_set_d(acc, b, MPFR_RNDN);
    *absum = fabs(b);
    for (size_t k = 0; k < len; k++) {
        double w = trans ? W[k + i * ldw] : W[i + k * ldw];
        mpfr_set_d(p, w, MPFR_RNDN);
        mpfr_mul_d(p, p, v[k], MPFR_RNDN);
        mpfr_add(acc, acc, p, MPFR_RNDN);
        *absum += fabs(w * v[k]);
    }
    double r = mpfr_get_d(acc, MPFR_RNDN);
    mpfr_clears(acc, p, (mpfr_ptr)0);
    return r;
}

/* dense:16, dense:24x16 and dense:8x16 in binary32@ref: forward the same
 * bits as sgemm called here, and every product within γ_(n+1)·Σ|terms| (+
 * the final rounding of the exact value to double, u_64 relative) of the
 * exact one; the square vijp with the backward error of LU; the wide one
 * sgels's bits, within the least-squares bound below; the tall one the
 * emulation's. */
START_TEST(dense_is_sgemm_within_gamma_n)
{
    vijp_format S, E;
    ck_assert(set_format(0, &S));
    vijp_format_fixed(&E, VIJP_BINARY32);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 2);
    static const char *const specs[] = {"dense:16", "dense:24x16", "dense:8x16"};
    for (int c = 0; c < 3; c++) {
        vijp_layer L;
        vijp_error err = {0};
        ck_assert(!vijp_layer_parse(&L, specs[c], 16, &err));
        size_t m = L.out, n = L.in, B = 5, P = m * n + m;
        vijp_mat th, X, G, Y, Gx, Gt, Gy;
        f32_fill(&th, P, 1, &S, &rng, 0), f32_fill(&X, n, B, &S, &rng, 0), f32_fill(&G, m, B, &S, &rng, 0);
        for (size_t i = 0; i < n && m == n; i++) /* W + 4I: well conditioned, so the solve is far from breakdown */
            th.d[i + i * m] = (float)(th.d[i + i * m] + 4); /* rounded to 24 bits, as at the matrix's precision */
        vijp_mat_init(&Y, m, B, &S), vijp_mat_init(&Gx, n, B, &S), vijp_mat_init(&Gt, P, 1, &S), vijp_mat_init(&Gy, m, B, &S);
        ck_assert(!vijp_layer_forward(&L, &th, &X, &Y, &err));
        ck_assert(!vijp_layer_vjp(&L, &th, &X, &G, &Gx, &err));
        ck_assert(!vijp_layer_vjp_param(&L, &th, &X, &G, &Gt, &err));
        float *w = f32_floats_of(&th), *x = f32_floats_of(&X), *g = f32_floats_of(&G), *y = f32_floats_of(&Y), *gx = f32_floats_of(&Gx),
              *gt = f32_floats_of(&Gt), *ref = malloc(m * B * sizeof *ref);
        for (size_t j = 0; j < B; j++) memcpy(ref + j * m, w + m * n, m * sizeof *ref);
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)B, (int)n, 1.0f, w, (int)m, x, (int)n, 1.0f,
                    ref, (int)m);
        ck_assert(!memcmp(ref, y, m * B * sizeof *y)); /* the route is sgemm's */
        double s;
        for (size_t j = 0; j < B; j++) {
            for (size_t i = 0; i < m; i++) {
                double e = exact_entry(w, m, 0, i, x + j * n, n, w[m * n + i], &s);
                ck_assert_msg(fabs(y[i + j * m] - e) <= gamma_k((double)n + 1) * s + 0x1p-53 * fabs(e), "forward %zu", i);
            }
            for (size_t k = 0; k < n; k++) {
                double e = exact_entry(w, m, 1, k, g + j * m, m, 0, &s);
                ck_assert_msg(fabs(gx[k + j * n] - e) <= gamma_k((double)m) * s + 0x1p-53 * fabs(e), "vjp %zu", k);
            }
        }
        for (size_t i = 0; i < m; i++) /* ∂W_ik = Σ_j g_ij x_kj, B terms */
            for (size_t k = 0; k < n; k++) {
                double e = 0, sum = 0;
                for (size_t j = 0; j < B; j++) e += (double)g[i + j * m] * x[k + j * n], sum += fabs((double)g[i + j * m] * x[k + j * n]);
                /* e: B exact 48-bit products summed in double, within (B − 1)·2^-53·sum */
                ck_assert(fabs(gt[i + k * m] - e) <= gamma_k((double)B) * sum + (double)B * 0x1p-53 * sum);
            }
        if (m == n) { /* (W + ΔW)ᵀ ŷ = g, |ΔW| <= γ_3n Pᵀ|L̂||Û| (Higham Thm 9.3, 9.4) */
            ck_assert(!vijp_layer_vijp(&L, &th, &X, &Gx, NULL, &Gy, &err));
            float *yv = f32_floats_of(&Gy), *A = malloc(n * n * sizeof *A);
            lapack_int piv[16];
            memcpy(A, w, n * n * sizeof *A);
            ck_assert(LAPACKE_sgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, A, (int)n, piv) == 0);
            double M[16 * 16];
            for (size_t i = 0; i < n; i++) /* |L||U|, rows in pivoted order */
                for (size_t k = 0; k < n; k++) {
                    double t = 0;
                    for (size_t q = 0; q <= (i < k ? i : k); q++)
                        t += (q == i ? 1.0 : fabs((double)A[i + q * n])) * fabs((double)A[q + k * n]);
                    M[i + k * n] = t;
                }
            for (size_t q = n; q-- > 0;) /* Pᵀ: undo the row swaps, last first */
                for (size_t k = 0; k < n; k++) {
                    double t = M[q + k * n];
                    M[q + k * n] = M[(size_t)piv[q] - 1 + k * n], M[(size_t)piv[q] - 1 + k * n] = t;
                }
            for (size_t j = 0; j < B; j++)
                for (size_t k = 0; k < n; k++) {
                    double r = exact_entry(w, m, 1, k, yv + j * m, m, 0, &s) - gx[k + j * n], bound = 0;
                    for (size_t i = 0; i < n; i++) bound += M[i + k * n] * fabs((double)yv[i + j * m]);
                    /* 1.01: M and the bound summed in double; 2^-53·s: r's own rounding */
                    ck_assert_msg(fabs(r) <= 1.01 * gamma_k(3.0 * (double)n) * bound + 0x1p-52 * s, "vijp residual %zu", k);
                }
            free(yv), free(A);
        } else if (m < n) { /* least squares Wᵀ y = g by sgels */
            ck_assert(!vijp_layer_vijp(&L, &th, &X, &Gx, NULL, &Gy, &err));
            float *yv = f32_floats_of(&Gy), *A = malloc(n * m * sizeof *A), *z = malloc(n * B * sizeof *z);
            for (size_t i = 0; i < m; i++)
                for (size_t k = 0; k < n; k++) A[k + i * n] = w[i + k * m];
            memcpy(z, gx, n * B * sizeof *z);
            ck_assert(LAPACKE_sgels(LAPACK_COL_MAJOR, 'N', (int)n, (int)m, (int)B, A, (int)n, z, (int)n) == 0);
            for (size_t j = 0; j < B; j++) /* the route is sgels's */
                ck_assert(!memcmp(yv + j * m, z + j * n, m * sizeof *yv));
            /* With A = Wᵀ (n × m, singular values σ), b = g_x, x = A⁺b the exact
             * solution and r_G = b − A·g (g the cotangent g_x came from):
             * x = g + A⁺r_G, so ‖x − g‖ <= ‖r_G‖/σ_min, ‖b − Ax‖ <= ‖r_G‖; and
             * Householder least squares is backward stable with ε = γ̃_mn,
             * taken as 8mn·u/(1 − 8mn·u) (Higham Thm 19.10, 20.3; the 8 is an
             * assumption, as in tests/t-cuda-dense.c), so (Thm 20.1)
             * ‖ŷ − x‖ <= κε/(1 − κε)·(2 + (κ + 1)‖r_G‖/(σ_max‖x‖))·‖x‖. */
            double W64[16 * 16], sv[16], sup[16];
            for (size_t i = 0; i < m * n; i++) W64[i] = w[i];
            ck_assert(LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', (int)m, (int)n, W64, (int)m, sv, NULL, 1, NULL, 1, sup) == 0);
            double smax = sv[0], smin = sv[m - 1], kappa = smax / smin, eps = 8.0 * m * n * 0x1p-24;
            eps /= 1 - eps;
            for (size_t j = 0; j < B; j++) {
                double rg = 0, gn = 0, dn = 0;
                for (size_t k = 0; k < n; k++) {
                    double t = gx[k + j * n];
                    for (size_t i = 0; i < m; i++) t -= (double)w[i + k * m] * g[i + j * m];
                    rg += t * t;
                }
                for (size_t i = 0; i < m; i++)
                    gn += (double)g[i + j * m] * g[i + j * m],
                    dn += ((double)yv[i + j * m] - g[i + j * m]) * ((double)yv[i + j * m] - g[i + j * m]);
                rg = sqrt(rg), gn = sqrt(gn), dn = sqrt(dn);
                double xn = gn + rg / smin;
                double bound = rg / smin + kappa * eps / (1 - kappa * eps) * (2 + (kappa + 1) * rg / (smax * xn)) * xn;
                /* 1.01: the norms, σ and the bound evaluated in double */
                ck_assert_msg(dn <= 1.01 * bound, "wide vijp column %zu: ‖ŷ − g‖ = %g > bound %g", j, dn, bound);
                if (j == 0) printf("# b32set wide vijp: kappa %.3g, ‖ŷ − g‖/‖g‖ %.3g, bound %.3g\n", kappa, dn / gn, bound / gn);
            }
            free(yv), free(A), free(z);
        } else { /* no float operator: the emulation's QR, bit for bit */
            vijp_mat thE, XE, GxE, GyE, fr, cE, GyS;
            f32_same_in(&thE, &th, &E), f32_same_in(&XE, &X, &E), f32_same_in(&GxE, &Gx, &E);
            size_t k = vijp_layer_fragment_count(&L, &th, &X);
            vijp_mat_init(&fr, k, 1, &S), vijp_mat_init(&cE, k, 1, &E), vijp_mat_init(&GyE, m, B, &E);
            vijp_mat Gs;
            f32_same_in(&Gs, &G, &E);
            ck_assert(!vijp_layer_fragment(&L, &th, &X, &G, &fr, &err) && !vijp_layer_fragment(&L, &thE, &XE, &Gs, &cE, &err));
            ck_assert(!vijp_layer_vijp(&L, &th, &X, &Gx, &fr, &Gy, &err) && !vijp_layer_vijp(&L, &thE, &XE, &GxE, &cE, &GyE, &err));
            f32_same_in(&GyS, &GyE, &S);
            f32_assert_same_bits(&Gy, &GyS, "tall vijp");
            vijp_mat_clear(&thE), vijp_mat_clear(&XE), vijp_mat_clear(&GxE), vijp_mat_clear(&GyE), vijp_mat_clear(&fr);
            vijp_mat_clear(&cE), vijp_mat_clear(&Gs), vijp_mat_clear(&GyS);
        }
        free(w), free(x), free(g), free(y), free(gx), free(gt), free(ref);
        vijp_mat_clear(&th), vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y), vijp_mat_clear(&Gx);
        vijp_mat_clear(&Gt), vijp_mat_clear(&Gy);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* A study with binary32, binary32@ref and binary32@<best>, and the mixed
 * formats bfloat16+binary32 (emulated), bfloat16+binary32@ref and
 * binary16+binary32@ref: every curve there, the set formats marked not
 * reproducible (regress then judges them over seeds, as double), the
 * emulated ones reproducible. */
START_TEST(study_runs_binary32_sets)
{
    char dir[512], args[1024], path[600];
    make_temp_dir(dir, sizeof dir, "b32set");
    int best = vijp_kernels_set(2, NULL) ? 2 : vijp_kernels_set(1, NULL) ? 1 : 0;
    snprintf(args, sizeof args, "drift --net dense:16,leaky:0.5,dense:16,tanh --depth 8 --formats binary32,binary32@ref%s%s,"
             "bfloat16+binary32,bfloat16+binary32@ref,binary16+binary32@ref --engines moonwalk --seeds 1 --out '%s/r' "
             "-q --no-plots", best ? ",binary32@" : "", best ? vijp_kset_names[best] : "", dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(path, sizeof path, "%s/r/drift.json", dir);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je), *curves = json_object_get(o, "curves"), *c;
    ck_assert_msg(o && json_is_array(curves), "%s", je.text);
    size_t i, seen[2] = {0, 0};
    json_array_foreach(curves, i, c) {
        const char *f = json_string_value(json_object_get(c, "format"));
        int set = strchr(f, '@') != NULL;
        seen[set]++;
        ck_assert_msg(json_is_true(json_object_get(c, "reproducible")) == !set, "%s", f);
    }
    ck_assert(seen[0] >= 2 && seen[1] >= (best ? 4u : 3u));
    json_decref(o);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

Suite *suite_b32set(void)
{
    Suite *s = suite_create("b32set");
    TCase *tc = tcase_create("b32set");
    tcase_add_test(tc, parse_binary32_sets);
    tcase_add_test(tc, exact_layers_are_the_emulation);
    tcase_add_test(tc, activations_are_their_kernels);
    tcase_add_test(tc, dense_is_sgemm_within_gamma_n);
    tcase_add_test(tc, study_runs_binary32_sets);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

/* The kernel sets' gemm_d (kernels.h) on every CPU set this machine runs:
 * ref (the linked BLAS) and avx512's own loops (src/kernels/avx512/gemm.c),
 * whose shapes these cases reach (rows a multiple of 16 and columns of 8
 * for op(A) = A; multiples of 4 for Aᵀ B, k with and without a tail of 8;
 * a C large and aligned enough for streaming stores) and leave (α ≠ 1,
 * odd sizes, Aᵀ Bᵀ), with leading dimensions larger than the matrices.
 * Oracles, neither of them the code under test:
 *   MPFR at 320 bits: every product of two doubles is exact in 106 bits and
 *       k <= 256 such sums in 320, so the reference is exact up to 2^-200
 *       relative; each entry must be within γ_{k+1}(|β C₀| + Σ|a||b|)
 *       (kernels.h; Higham eq. 3.5: k products and β C₀ summed in any
 *       order, u = 2^-53);
 *   fma() in C, one step at a time: where avx512's loops say each entry is
 *       a sequential FMA chain over k (op(A) = A), bit for bit.
 * And: β = 0 never reads C (NaN there stays out), entries outside the m × n
 * block of C are never written, a NaN or Inf in A reaches exactly the
 * entries whose sums include it. */
#include <stdio.h>
#include "fixtures/testutil.h"
#include "kernels/kernels.h"
#include "vijp/rng.h"
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int ta, tb;
    size_t m, n, k;
    double alpha, beta;
    size_t pad; /* added to every leading dimension */
} gemm_case;

static const gemm_case cases[] = {
    {0, 0, 32, 16, 37, 1, 0, 0},    {0, 0, 32, 16, 37, 1, 1, 3},  {0, 1, 48, 24, 5, 1, 0, 1},
    {0, 1, 16, 8, 64, 1, 1, 0},     {1, 0, 12, 8, 37, 1, 0, 2},   {1, 0, 8, 4, 3, 1, 1, 0},
    {1, 0, 4, 12, 16, 1, 1, 5},     {0, 0, 256, 64, 256, 1, 1, 0}, {1, 0, 256, 64, 256, 1, 0, 0},
    {0, 1, 256, 256, 64, 1, 0, 0}, /* 512 KB, aligned: streaming stores */
    {0, 0, 17, 8, 5, 1, 0, 0},      {1, 0, 6, 4, 8, 1, 0, 0},     {1, 1, 16, 8, 8, 1, 0, 0},
    {0, 0, 16, 8, 8, 0.5, 1, 0},    {0, 0, 16, 8, 8, 1, 2, 0},
};
#define NCASES (sizeof cases / sizeof *cases)

static double draw(vijp_rng *r) { return vijp_rng_normal(r) * ldexp(1, (int)(vijp_rng_uniform(r) * 40) - 20); }

/* op(X)(i, p) of a column-major X with leading dimension ld */
static double op(const double *X, size_t ld, int t, size_t i, size_t p) { return t ? X[p + i * ld] : X[i + p * ld]; }

typedef struct {
    size_t lda, ldb, ldc, a_cols, b_cols;
    double *A, *B, *C, *C0;
} operands;

static void operands_make(const gemm_case *g, uint64_t seed, operands *o)
{
    size_t a_rows = g->ta ? g->k : g->m, b_rows = g->tb ? g->n : g->k;
    o->a_cols = g->ta ? g->m : g->k, o->b_cols = g->tb ? g->k : g->n;
    o->lda = a_rows + g->pad, o->ldb = b_rows + g->pad, o->ldc = g->m + g->pad;
    size_t cbytes = (o->ldc * g->n * sizeof(double) + 63) / 64 * 64;
    o->A = malloc(o->lda * o->a_cols * sizeof(double)), o->B = malloc(o->ldb * o->b_cols * sizeof(double));
    o->C = aligned_alloc(64, cbytes), o->C0 = malloc(cbytes);
    ck_assert(o->A && o->B && o->C && o->C0);
    vijp_rng r;
    vijp_rng_seed(&r, seed);
    for (size_t i = 0; i < o->lda * o->a_cols; i++) o->A[i] = draw(&r);
    for (size_t i = 0; i < o->ldb * o->b_cols; i++) o->B[i] = draw(&r);
    for (size_t j = 0; j < g->n; j++)
        for (size_t i = 0; i < o->ldc; i++) /* β = 0: C must not be read; padding: not written */
            o->C0[i + j * o->ldc] = i >= g->m ? -7.25 : g->beta == 0 ? NAN : draw(&r);
}

static void operands_free(operands *o) { free(o->A), free(o->B), free(o->C), free(o->C0); }

/* The worst |Ĉ − C| / γ_{k+1}(|β C₀| + Σ|a||b|) over the block; padding intact. */
static double worst_of_bound(const gemm_case *g, const operands *o)
{
    mpfr_t s, t;
    mpfr_inits2(320, s, t, (mpfr_ptr)0);
    double k1 = (double)(g->k + 1), u = ldexp(1, -53), gamma = k1 * u / (1 - k1 * u), worst = 0;
    for (size_t j = 0; j < g->n; j++)
        for (size_t i = 0; i < o->ldc; i++) {
            double got = o->C[i + j * o->ldc];
            if (i >= g->m) {
                ck_assert_msg(got == -7.25, "C[%zu, %zu] outside the block was written: %a", i, j, got);
                continue;
            }
            double mag = g->beta ? fabs(g->beta * o->C0[i + j * o->ldc]) : 0;
            mpfr_set_d(s, g->beta ? g->beta * o->C0[i + j * o->ldc] : 0, MPFR_RNDN); /* β ∈ {0, 0.5, 1, 2}: exact */
            for (size_t p = 0; p < g->k; p++) {
                double a = op(o->A, o->lda, g->ta, i, p), b = op(o->B, o->ldb, g->tb, p, j);
                mpfr_set_d(t, a, MPFR_RNDN);
                mpfr_mul_d(t, t, b, MPFR_RNDN); /* exact: 106 bits */
                mpfr_mul_d(t, t, g->alpha, MPFR_RNDN);
                mpfr_add(s, s, t, MPFR_RNDN);
                mag += fabs(g->alpha * a * b);
            }
            mpfr_sub_d(s, s, got, MPFR_RNDN);
            mpfr_abs(s, s, MPFR_RNDN);
            double err = mpfr_get_d(s, MPFR_RNDU), frac = err / (gamma * mag);
            ck_assert_msg(isfinite(got) && (err == 0 || frac <= 1),
                          "C[%zu, %zu] = %a: error %g, bound %g (%s %s, %zu x %zu x %zu, beta %g)", i, j, got, err,
                          gamma * mag, g->ta ? "T" : "N", g->tb ? "T" : "N", g->m, g->n, g->k, g->beta);
            if (frac > worst) worst = frac;
        }
    mpfr_clears(s, t, (mpfr_ptr)0);
    return worst;
}

static void run(const vijp_kernels *K, const gemm_case *g, operands *o)
{
    memcpy(o->C, o->C0, o->ldc * g->n * sizeof(double));
    K->gemm_d(g->ta, g->tb, g->m, g->n, g->k, g->alpha, o->A, o->lda, o->B, o->ldb, g->beta, o->C, o->ldc);
}

/* Every case on every CPU set, against MPFR (_i: the set). */
START_TEST(gemm_within_bound)
{
    const char *why;
    const vijp_kernels *K = vijp_kernels_set(_i, &why);
    if (!K) {
        printf("# gemm: %s skipped: %s\n", vijp_kset_names[_i], why);
        return;
    }
    double worst = 0;
    for (size_t c = 0; c < NCASES; c++) {
        operands o;
        operands_make(&cases[c], test_seed() + c, &o);
        run(K, &cases[c], &o);
        double w = worst_of_bound(&cases[c], &o);
        if (getenv("VIJP_GEMM_VERBOSE")) printf("#   case %zu: %.3g\n", c, w);
        if (w > worst) worst = w;
        operands_free(&o);
    }
    printf("# gemm: %-6s %zu cases, worst error %.3g of gamma_{k+1}(|beta C0| + sum |a||b|)\n", K->name, NCASES, worst);
}
END_TEST

/* avx512 with op(A) = A: each entry the chain c = fma(a_p, b_p, c), p = 0..k−1
 * from c = 0, then + C₀ where β = 1: bit for bit. */
START_TEST(gemm_avx512_is_an_fma_chain)
{
    const char *why;
    const vijp_kernels *K = vijp_kernels_set(2, &why);
    if (!K) {
        printf("# gemm: avx512 skipped: %s\n", why);
        return;
    }
    size_t checked = 0;
    for (size_t c = 0; c < NCASES; c++) {
        const gemm_case *g = &cases[c];
        if (g->ta || g->m % 16 || g->n % 8 || g->alpha != 1 || (g->beta != 0 && g->beta != 1)) continue;
        operands o;
        operands_make(g, test_seed() + 100 + c, &o);
        run(K, g, &o);
        for (size_t j = 0; j < g->n; j++)
            for (size_t i = 0; i < g->m; i++) {
                double s = 0;
                for (size_t p = 0; p < g->k; p++) s = fma(op(o.A, o.lda, 0, i, p), op(o.B, o.ldb, g->tb, p, j), s);
                if (g->beta == 1) s = o.C0[i + j * o.ldc] + s;
                double got = o.C[i + j * o.ldc];
                ck_assert_msg(!memcmp(&got, &s, sizeof s), "C[%zu, %zu] = %a, the FMA chain gives %a (case %zu)", i, j,
                              got, s, c);
            }
        checked++;
        operands_free(&o);
    }
    ck_assert(checked >= 5);
}
END_TEST

/* A NaN, an Inf times a zero, and an Inf in A: exactly the entries whose
 * sums take them are NaN or Inf, on every set and path (_i: the set). */
START_TEST(gemm_nonfinite)
{
    const char *why;
    const vijp_kernels *K = vijp_kernels_set(_i, &why);
    if (!K) return;
    for (size_t c = 0; c < NCASES; c++) {
        const gemm_case *g = &cases[c];
        if (g->m < 4 || g->k < 2) continue;
        operands o;
        operands_make(g, test_seed() + 200 + c, &o);
        /* entries of op(A): (1, 0) NaN; (2, 1) Inf with op(B)(1, ·) = 0 in column 0 only; (3, 0) −Inf */
        double *nan_at = g->ta ? &o.A[0 + 1 * o.lda] : &o.A[1 + 0 * o.lda];
        double *inf_at = g->ta ? &o.A[1 + 2 * o.lda] : &o.A[2 + 1 * o.lda];
        double *ninf_at = g->ta ? &o.A[0 + 3 * o.lda] : &o.A[3 + 0 * o.lda];
        *nan_at = NAN, *inf_at = INFINITY, *ninf_at = -INFINITY;
        for (size_t j = 0; j < g->n; j++) { /* op(B)(1, j) = 0 for j = 0, finite elsewhere; op(B)(0, j) nonzero */
            double *b1 = g->tb ? &o.B[j + 1 * o.ldb] : &o.B[1 + j * o.ldb];
            double *b0 = g->tb ? &o.B[j + 0 * o.ldb] : &o.B[0 + j * o.ldb];
            *b1 = j == 0 ? 0 : 1, *b0 = 1;
        }
        run(K, g, &o);
        for (size_t j = 0; j < g->n; j++)
            for (size_t i = 0; i < g->m; i++) {
                double v = o.C[i + j * o.ldc];
                if (i == 1 || (i == 2 && j == 0))
                    ck_assert_msg(isnan(v), "case %zu: C[%zu, %zu] = %g, not NaN", c, i, j, v);
                else if (i == 2)
                    ck_assert_msg(v == INFINITY, "case %zu: C[%zu, %zu] = %g, not +Inf", c, i, j, v);
                else if (i == 3)
                    ck_assert_msg(v == -INFINITY, "case %zu: C[%zu, %zu] = %g, not -Inf", c, i, j, v);
                else
                    ck_assert_msg(isfinite(v), "case %zu: C[%zu, %zu] = %g, not finite", c, i, j, v);
            }
        operands_free(&o);
    }
}
END_TEST

/* vijp's allocations start on 64-byte lines (src/base/error.c), which the
 * avx512 gemm's streaming stores need for the engines' dW; zeroed ones are
 * zero to the last byte. */
START_TEST(allocations_are_aligned)
{
    static const size_t sizes[] = {0, 1, 8, 63, 64, 65, 1000, (size_t)1 << 20, ((size_t)1 << 20) + 24};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        unsigned char *z = vijp_alloc(sizes[s]), *u = vijp_alloc_unset(sizes[s]);
        double *a = vijp_alloc_array(sizes[s], sizeof *a);
        ck_assert_msg((uintptr_t)z % 64 == 0 && (uintptr_t)u % 64 == 0 && (uintptr_t)a % 64 == 0,
                      "%zu bytes: %p %p %p", sizes[s], (void *)z, (void *)u, (void *)a);
        for (size_t i = 0; i < sizes[s]; i++) ck_assert_msg(z[i] == 0, "byte %zu of %zu not zero", i, sizes[s]);
        for (size_t i = 0; i < sizes[s]; i++) ck_assert(a[i] == 0);
        vijp_free(z), vijp_free(u), vijp_free(a);
    }
}
END_TEST

/* The kernel's transparent-huge-page mode: 'a' always, 'm' madvise, 'n'
 * never or unknown (the bracketed word of the sysfs file). */
static char thp_mode(void)
{
    char line[128] = "";
    FILE *in = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (in && !fgets(line, sizeof line, in)) line[0] = 0;
    if (in) fclose(in);
    const char *b = strchr(line, '[');
    return b && (b[1] == 'a' || b[1] == 'm') ? b[1] : 'n';
}

/* THPeligible of the mapping holding address a in /proc/self/smaps: 1, 0,
 * or -1 when not found. */
static int thp_eligible(uintptr_t a)
{
    FILE *in = fopen("/proc/self/smaps", "r");
    char line[512];
    int inside = 0, eligible = -1;
    while (in && eligible < 0 && fgets(line, sizeof line, in)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = a >= lo && a < hi;
        else if (inside && !strncmp(line, "THPeligible:", 12)) eligible = atoi(line + 12);
    }
    if (in) fclose(in);
    return eligible;
}

/* A block of 32 MiB or more starts on a huge page and is advised as one
 * (src/base/error.c: a wide study's blocks faulted in 4 KiB at a time cost
 * a fifth of its CPU time).  Only the madvise mode can tell: "always" makes
 * every block eligible, "never" none. */
START_TEST(large_blocks_are_huge_page_memory)
{
    char mode = thp_mode();
    if (mode != 'm') {
        printf("large_blocks_are_huge_page_memory: SKIPPED: transparent huge pages are '%s' here, not 'madvise'\n",
               mode == 'a' ? "always" : "never or absent");
        return;
    }
    size_t sizes[] = {(size_t)32 << 20, ((size_t)48 << 20) + 24}; /* the threshold, and an odd size past it */
    for (int k = 0; k < 2; k++) {
        unsigned char *u = vijp_alloc_unset(sizes[k]), *z = vijp_alloc(sizes[k]);
        ck_assert_msg((uintptr_t)u % (2 << 20) == 0 && (uintptr_t)z % (2 << 20) == 0, "%p %p", (void *)u, (void *)z);
        memset(u, 1, sizes[k]);
        ck_assert_int_eq(thp_eligible((uintptr_t)u), 1);
        ck_assert_int_eq(thp_eligible((uintptr_t)z + sizes[k] / 2), 1);
        vijp_free(u), vijp_free(z);
    }
}
END_TEST

Suite *suite_gemm(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("sets");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, gemm_within_bound, 0, 3);
    tcase_add_test(tc, gemm_avx512_is_an_fma_chain);
    tcase_add_loop_test(tc, gemm_nonfinite, 0, 3);
    tcase_add_test(tc, allocations_are_aligned);
    tcase_add_test(tc, large_blocks_are_huge_page_memory);
    suite_add_tcase(s, tc);
    return s;
}

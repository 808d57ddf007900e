/* The CUDA kernel set as libvijp loads it (src/kernels/kernels.c loads
 * libvijp-cuda.so, src/kernels/cuda/kernel_set.c): found and loaded, or
 * absent for the very reason the kernels give; the library's guards; and,
 * where the set loads (a GPU, or make check's host mock through
 * VIJP_CUDA_LIBRARY: tests/fixtures/cuda-mock.c), its matrix products against ref's
 * and a study in the @cuda formats.  Its elementwise entries are
 * tested with every other set's in t-kernels.c (bit for bit ref's for
 * leaky ReLU, the activations against MPFR), which runs the CUDA set
 * wherever it loads. */
#include "fixtures/cudafix.h"
#include "kernels/kernels.h"
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double gamma_u(double k, double u) { return k * u / (1 - k * u); }
static int built_with_cuda(void)
{
    char reason[256];
    return vijp_cuda_available(reason, sizeof reason) || !strstr(reason, "built without CUDA");
}

/* With a GPU the set loads, and its own entries replace ref's where it has
 * them; without one the loader passes on the library's answer (which the
 * kernels give too), so the library was found and ran; a build without
 * CUDA has no library to load. */
START_TEST(set_loads_or_says_why)
{
    char reason[256];
    int gpu = vijp_cuda_available(reason, sizeof reason);
    const char *why = NULL;
    const vijp_kernels *K = vijp_kernels_set(3, &why), *R = vijp_kernels_set(0, NULL);
    printf("# t-cuda: the CUDA kernel set: %s\n", K ? "loaded" : why);
    if (gpu) {
        ck_assert_msg(K, "a GPU is here but the set did not load: %s", why);
        ck_assert_str_eq(K->name, "cuda");
        ck_assert(K->gemm_d != R->gemm_d && K->gemm_f != R->gemm_f && K->gemm_mixed_f != R->gemm_mixed_f);
        ck_assert(K->leaky_forward_d != R->leaky_forward_d && K->act_f[VIJP_KACT_GELU] != R->act_f[VIJP_KACT_GELU]);
        ck_assert(K->relu_forward_d == R->relu_forward_d && K->drift_d == R->drift_d); /* completed from ref */
    } else if (!built_with_cuda()) {
        ck_assert_msg(!K && strstr(why, "cannot load"), "%s", K ? "loaded" : why);
    } else {
        ck_assert_msg(!K && !strcmp(why, reason), "the set says '%s', the kernels '%s'", K ? "loaded" : why, reason);
    }
}
END_TEST

/* VIJP_CUDA_LIBRARY names the library; one that is not there, not a shared
 * object, or a shared object without the entry is an error that says which.
 * (The loader runs once per process: Check's fork mode, one case a test.) */
START_TEST(set_library_override)
{
    const char *fork = getenv("CK_FORK");
    if (fork && !strcmp(fork, "no")) {
        printf("t-cuda: set_library_override SKIPPED: needs Check's fork mode (CK_FORK=no)\n");
        return;
    }
    char junk[] = "/tmp/vijp-cuda-junk-XXXXXX";
    const char *lib = "/nonexistent/libvijp-cuda.so", *want = "cannot load /nonexistent/libvijp-cuda.so";
    if (_i == 1) { /* a file that is no shared object */
        int fd = mkstemp(junk);
        ck_assert(fd >= 0 && write(fd, "not an ELF file\n", 16) == 16 && close(fd) == 0);
        lib = junk, want = "cannot load /tmp/vijp-cuda-junk-";
    } else if (_i == 2) { /* a shared object, but not ours */
        lib = "libm.so.6", want = "libm.so.6 lacks vijp_cuda_kernel_set";
    }
    setenv("VIJP_CUDA_LIBRARY", lib, 1);
    const char *why = NULL;
    ck_assert(!vijp_kernels_set(3, &why));
    if (_i == 1) unlink(junk);
    ck_assert_msg(strstr(why, want), "%s", why);
}
END_TEST

/* The library, opened directly: it exports its entry alone, and refuses a
 * loader whose table has another size (a libvijp-cuda.so of another
 * version) rather than hand it a table it would misread. */
START_TEST(set_library_guards)
{
    char dir[PATH_MAX] = "", path[PATH_MAX + 32];
    ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
    dir[len > 0 ? len : 0] = 0;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/libvijp-cuda.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!built_with_cuda()) {
        ck_assert(!h);
        printf("t-cuda: set_library_guards SKIPPED: built without CUDA (no %s)\n", path);
        return;
    }
    ck_assert_msg(h, "%s", dlerror());
    const vijp_kernels *(*entry)(size_t, int, char *, size_t);
    *(void **)&entry = dlsym(h, "vijp_cuda_kernel_set");
    ck_assert(entry);
    ck_assert(!dlsym(h, "vijp_fail") && !dlsym(h, "vijp_cuda_gemm_ex_d")); /* local: no clash with libvijp's */
    char why[256] = "";
    ck_assert(!entry(sizeof(vijp_kernels) - sizeof(void *), VIJP_KERNELS_TABLE_VERSION, why, sizeof why));
    ck_assert_msg(strstr(why, "another libvijp"), "%s", why);
    why[0] = 0;
    ck_assert(!entry(sizeof(vijp_kernels), VIJP_KERNELS_TABLE_VERSION + 1, why, sizeof why));
    ck_assert_msg(strstr(why, "another libvijp"), "%s", why);
}
END_TEST

/* ---- products through the set.  op(A) is M × KK with lda > its rows, C has
 * PAD rows beyond M in each column (sentinels, which must survive).
 *   integers: entries in [−8, 8], α = 1, β ∈ {0, 2}: every sum is an
 *     integer below 2^13, exact in any order, so the bits equal ref's; β = 0
 *     with NaN in C (BLAS does not read C then);
 *   normal: α = 0.75, β ∈ {0, 0.5}: each entry is k products (two roundings
 *     each, the product and α) and β·c (one) summed in some order, within
 *     γ_{k+2}·(|α|Σ|a·b| + |β·c|) of the exact value (Higham eq. 3.5, any
 *     order, FMA or not), u of the type. */
enum { M = 37, N = 5, KK = 70, PAD = 3 };
static const double SENTINEL = 12345;

#define GEMM_CASE(T, S, U)                                                                                         \
    static void gemm_case_##S(const vijp_kernels *K, const vijp_kernels *R, int ta, int tb, int integers,         \
                              int beta0, vijp_rng *rng)                                                            \
    {                                                                                                              \
        size_t lda = (ta ? KK : M) + PAD, ldb = (tb ? N : KK) + PAD, ldc = M + PAD;                                \
        size_t na = lda * (ta ? M : KK), nb = ldb * (tb ? KK : N), nc = ldc * N;                                   \
        T *A = vijp_alloc_array(na, sizeof *A), *B = vijp_alloc_array(nb, sizeof *B);                              \
        T *C0 = vijp_alloc_array(nc, sizeof *C0), *C = vijp_alloc_array(nc, sizeof *C);                            \
        T *CR = vijp_alloc_array(nc, sizeof *CR);                                                                  \
        for (size_t i = 0; i < na; i++)                                                                            \
            A[i] = integers ? (T)((int)(vijp_rng_u64(rng) % 17) - 8) : (T)vijp_rng_normal(rng);                    \
        for (size_t i = 0; i < nb; i++)                                                                            \
            B[i] = integers ? (T)((int)(vijp_rng_u64(rng) % 17) - 8) : (T)vijp_rng_normal(rng);                    \
        for (size_t i = 0; i < nc; i++)                                                                            \
            C0[i] = i % ldc >= M ? (T)SENTINEL : beta0 ? (T)NAN : integers ? (T)((int)(vijp_rng_u64(rng) % 17) - 8) \
                                                                           : (T)vijp_rng_normal(rng);              \
        T alpha = integers ? 1 : (T)0.75, beta = beta0 ? 0 : integers ? 2 : (T)0.5;                                \
        memcpy(C, C0, nc * sizeof *C), memcpy(CR, C0, nc * sizeof *C);                                             \
        K->gemm_##S(ta, tb, M, N, KK, alpha, A, lda, B, ldb, beta, C, ldc);                                        \
        R->gemm_##S(ta, tb, M, N, KK, alpha, A, lda, B, ldb, beta, CR, ldc);                                       \
        mpfr_t s, S_, p;                                                                                           \
        mpfr_inits2(512, s, S_, p, (mpfr_ptr)0);                                                                   \
        double g = gamma_u(KK + 2, U), worst = 0;                                                                  \
        for (size_t j = 0; j < N; j++)                                                                             \
            for (size_t i = 0; i < ldc; i++) {                                                                     \
                T c = C[i + j * ldc];                                                                              \
                if (i >= M) {                                                                                      \
                    ck_assert_msg(c == (T)SENTINEL, "gemm_" #S " wrote row %zu of column %zu, beyond m", i, j);     \
                    continue;                                                                                      \
                }                                                                                                  \
                if (integers) {                                                                                    \
                    ck_assert_msg(c == CR[i + j * ldc], "gemm_" #S " ta %d tb %d β %g (%zu, %zu): %.9g, ref %.9g", \
                                  ta, tb, (double)beta, i, j, (double)c, (double)CR[i + j * ldc]);                 \
                    continue;                                                                                      \
                }                                                                                                  \
                mpfr_set_d(s, beta0 ? 0 : (double)beta * C0[i + j * ldc], MPFR_RNDN);                              \
                mpfr_abs(S_, s, MPFR_RNDN);                                                                        \
                for (size_t l = 0; l < KK; l++) {                                                                  \
                    T a = ta ? A[l + i * lda] : A[i + l * lda], b = tb ? B[j + l * ldb] : B[l + j * ldb];          \
                    mpfr_set_d(p, (double)a, MPFR_RNDN), mpfr_mul_d(p, p, (double)b, MPFR_RNDN);                   \
                    mpfr_mul_d(p, p, (double)alpha, MPFR_RNDN);                                                    \
                    mpfr_add(s, s, p, MPFR_RNDN), mpfr_abs(p, p, MPFR_RNDN), mpfr_add(S_, S_, p, MPFR_RNDN);       \
                }                                                                                                  \
                double bound = g * mpfr_get_d(S_, MPFR_RNDU);                                                      \
                for (int who = 0; who < 2; who++) {                                                                \
                    T v = who ? CR[i + j * ldc] : c;                                                               \
                    mpfr_sub_d(p, s, (double)v, MPFR_RNDN);                                                        \
                    double e = fabs(mpfr_get_d(p, MPFR_RNDU));                                                     \
                    ck_assert_msg(e <= bound, "%s gemm_" #S " ta %d tb %d (%zu, %zu): error %g > bound %g",         \
                                  who ? "ref" : "cuda", ta, tb, i, j, e, bound);                                   \
                    if (!who && e / bound > worst) worst = e / bound;                                              \
                }                                                                                                  \
            }                                                                                                      \
        if (!integers)                                                                                             \
            printf("# t-cuda set gemm_" #S " ta %d tb %d β %g: worst %.3g of the bound\n", ta, tb, (double)beta,   \
                   worst);                                                                                         \
        mpfr_clears(s, S_, p, (mpfr_ptr)0);                                                                        \
        free(A), free(B), free(C0), free(C), free(CR);                                                             \
    }
GEMM_CASE(double, d, 0x1p-53)
GEMM_CASE(float, f, 0x1p-24)

/* The cuda set, loaded (a GPU, or VIJP_CUDA_LIBRARY naming the host mock
 * tests/fixtures/cuda-mock.c, as make check does), or a one-line skip. */
static const vijp_kernels *set_or_skip(const char *test)
{
    const char *why = NULL;
    const vijp_kernels *K = vijp_kernels_set(3, &why);
    if (!K) printf("t-cuda: %s SKIPPED: %s\n", test, why);
    return K;
}

START_TEST(set_gemm)
{
    const vijp_kernels *K = set_or_skip("set_gemm"), *R = vijp_kernels_set(0, NULL);
    if (!K) return;
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 31);
    for (int c = 0; c < 16; c++) {
        int ta = c & 1, tb = c >> 1 & 1, integers = c >> 2 & 1, beta0 = c >> 3 & 1;
        gemm_case_d(K, R, ta, tb, integers, beta0, &rng);
        gemm_case_f(K, R, ta, tb, integers, beta0, &rng);
    }
}
END_TEST

/* A mixed format's products: inputs exact in the storage format, products
 * exact, sums binary32 in cuBLAS's order on tensor cores, whose block
 * rounding is only assumed to lose less than 2^-22 per term and addition
 * (cuda.h): within γ'_{k+1}·(Σ|a·b| + |c|), γ' at 2^-22, of the exact
 * value; ref (sgemm) within the same.  (The 1 + 2^-53 of the error's own
 * rounding to double is far inside the slack of 2^-22 against 2^-24.) */
static float storage_value(int storage, vijp_rng *rng)
{
    if (storage == VIJP_KSTORE_BF16) { /* a normal float rounded to 8 bits */
        float f = (float)vijp_rng_normal(rng);
        uint32_t b;
        memcpy(&b, &f, 4);
        b = (b + 0x7fff + (b >> 16 & 1)) & 0xffff0000u;
        memcpy(&f, &b, 4);
        return f;
    }
    return ldexpf((float)((int)(vijp_rng_u64(rng) % 4095) - 2047), -(int)(vijp_rng_u64(rng) % 11)); /* 11 bits */
}

START_TEST(set_gemm_mixed)
{
    const vijp_kernels *K = set_or_skip("set_gemm_mixed"), *R = vijp_kernels_set(0, NULL);
    if (!K) return;
    int storage = _i ? VIJP_KSTORE_F16 : VIJP_KSTORE_BF16;
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 37u + (unsigned)_i);
    mpfr_t s, S_, p;
    mpfr_inits2(256, s, S_, p, (mpfr_ptr)0);
    double g = gamma_u(KK + 1, 0x1p-22), worst = 0;
    for (int c = 0; c < 8; c++) { /* op(A), op(B) as dense's forward, vjp (Wᵀ) and ∂W (Xᵀ) use them; β 1 and 0 */
        int ta = c & 1, tb = c >> 1 & 1, beta0 = c >> 2 & 1;
        size_t lda = (ta ? KK : M) + PAD, ldb = (tb ? N : KK) + PAD, ldc = M + PAD;
        size_t na = lda * (ta ? M : KK), nb = ldb * (tb ? KK : N), nc = ldc * N;
        float *A = vijp_alloc_array(na, sizeof *A), *B = vijp_alloc_array(nb, sizeof *B);
        float *C0 = vijp_alloc_array(nc, sizeof *C0), *C = vijp_alloc_array(nc, sizeof *C), *CR = vijp_alloc_array(nc, sizeof *CR);
        for (size_t i = 0; i < na; i++) A[i] = storage_value(storage, &rng);
        for (size_t i = 0; i < nb; i++) B[i] = storage_value(storage, &rng);
        for (size_t i = 0; i < nc; i++) C0[i] = i % ldc >= M ? (float)SENTINEL : beta0 ? NAN : (float)vijp_rng_normal(&rng);
        float beta = beta0 ? 0 : 1;
        memcpy(C, C0, nc * sizeof *C), memcpy(CR, C0, nc * sizeof *C);
        K->gemm_mixed_f(storage, ta, tb, M, N, KK, 1, A, lda, B, ldb, beta, C, ldc);
        R->gemm_mixed_f(storage, ta, tb, M, N, KK, 1, A, lda, B, ldb, beta, CR, ldc);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < ldc; i++) {
                if (i >= M) {
                    ck_assert_msg(C[i + j * ldc] == (float)SENTINEL, "gemm_mixed_f wrote row %zu of column %zu", i, j);
                    continue;
                }
                mpfr_set_flt(s, beta0 ? 0.0f : C0[i + j * ldc], MPFR_RNDN), mpfr_abs(S_, s, MPFR_RNDN);
                for (size_t l = 0; l < KK; l++) {
                    float a = ta ? A[l + i * lda] : A[i + l * lda], b = tb ? B[j + l * ldb] : B[l + j * ldb];
                    mpfr_set_flt(p, a, MPFR_RNDN), mpfr_mul_d(p, p, b, MPFR_RNDN);
                    mpfr_add(s, s, p, MPFR_RNDN), mpfr_abs(p, p, MPFR_RNDN), mpfr_add(S_, S_, p, MPFR_RNDN);
                }
                double bound = g * mpfr_get_d(S_, MPFR_RNDU);
                for (int who = 0; who < 2; who++) {
                    mpfr_sub_d(p, s, who ? CR[i + j * ldc] : C[i + j * ldc], MPFR_RNDN);
                    double e = mpfr_get_d(p, MPFR_RNDN);
                    e = fabs(e);
                    ck_assert_msg(e <= bound, "%s gemm_mixed_f %s ta %d tb %d β %g (%zu, %zu): error %g > bound %g",
                                  who ? "ref" : "cuda", _i ? "binary16" : "bfloat16", ta, tb, (double)beta, i, j, e, bound);
                    if (!who && e / bound > worst) worst = e / bound;
                }
            }
        free(A), free(B), free(C0), free(C), free(CR);
    }
    printf("# t-cuda set gemm_mixed_f %s inputs: worst %.3g of the bound\n", _i ? "binary16" : "bfloat16", worst);
    mpfr_clears(s, S_, p, (mpfr_ptr)0);
}
END_TEST

/* The @cuda formats through the command: a drift study in them runs (the
 * numbers are the kernels', tested above and in t-kernels.c). */
START_TEST(set_formats_run)
{
    if (!set_or_skip("set_formats_run")) return;
    const char *bin = getenv("VIJP_BIN");
    if (!bin) {
        printf("t-cuda: set_formats_run SKIPPED: VIJP_BIN is not set\n");
        return;
    }
    char dir[] = "/tmp/vijp-cuda-XXXXXX", cmd[4096];
    ck_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "'%s' drift --net dense:16,gelu,dense:16,leaky:0.5 --depth 4 --seeds 1 --no-plots -q --out %s/out "
             "--formats double,double@cuda,binary32@cuda,bfloat16+binary32,bfloat16+binary32@cuda && "
             "grep -q 'bfloat16+binary32@cuda' %s/out/drift.json", bin, dir, dir);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert(system(cmd) == 0);
    ck_assert_msg(rc == 0, "the drift run in the @cuda formats failed (%d)", rc);
}
END_TEST

void cuda_add_set_tests(Suite *s, TCase *host)
{
    tcase_add_test(host, set_loads_or_says_why);
    tcase_add_loop_test(host, set_library_override, 0, 3);
    tcase_add_test(host, set_library_guards);
    TCase *set = tcase_create("set"); /* a GPU's set, or the mock's (make check) */
    tcase_set_timeout(set, (double)test_iters(300));
    tcase_add_test(set, set_gemm);
    tcase_add_loop_test(set, set_gemm_mixed, 0, 2);
    tcase_add_test(set, set_formats_run);
    suite_add_tcase(s, set);
}

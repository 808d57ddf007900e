/* The kernel table (src/kernels/kernels.h): every kernel of every
 * set this machine runs (ref always; avx2, avx512, cuda where present, each
 * absent one skipped with its reason) against the MPFR oracle.
 *
 *  - Exact kernels: each output is the correctly rounded result of the
 *    kernel's stated operations (MPFR at 200 bits, where products and
 *    quotients of doubles are exact or off by less than 2^-200 relative, then
 *    rounded once to the format by mpfr_get_d / mpfr_get_flt): 0 ulps, signed
 *    zeros and NaN included.  Lengths 0…70 and a few long ones (tails of every
 *    vector width), unaligned starts, and the inputs drawn so that each lane
 *    holds a value under test among junk (±0, subnormals, huge, ±Inf, NaN).
 *    Then a hash of all exact outputs over a fixed grid, equal in every set.
 *  - Activation kernels: f and f′ within the bound the set's table states
 *    (act_bound, read through actterms.h) in double; in binary32, the same
 *    plus one rounding to binary32 (max(1.01·2^-24·|f|, 2^-150)); NaN and
 *    ±Inf give what ref gives.
 *  - Drift partials: the three metrics against vijp_compare (MPFR), within the
 *    bounds stated in kernels.h. */
#include "fixtures/actterms.h"
#include "fixtures/clirun.h"
#include "oracles/oracles.h"
#include "kernels/kernels.h"
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HP 200 /* oracle precision of the exact kernels (above) */

static const double junk[] = {0.0,  -0.0,     0x1p-1074, -0x1p-1074, 0x1.8p-1030, -0x1p-1022, 0x1p-149, 1e-40,
                              1.0,  -1.0,     0.5,       -3.0,       1e300,       -1e300,     DBL_MAX,  -DBL_MAX,
                              3e38, -3.5e38,  INFINITY,  -INFINITY,  NAN,         -745.5,     710.0,    -37.0};
#define NJUNK (sizeof junk / sizeof *junk)

/* A value under test (normal or tiny or huge, either sign) or, one time in
 * four, junk. */
static double draw(vijp_rng *rng)
{
    double u = vijp_rng_uniform(rng);
    if (u < 0.25) return junk[vijp_rng_u64(rng) % NJUNK];
    if (u < 0.6) return 4 * vijp_rng_normal(rng);
    double s = vijp_rng_uniform(rng) < 0.5 ? -1 : 1;
    return s * exp2(-1074 + 2097 * vijp_rng_uniform(rng));
}

/* Same bits, or both NaN. */
static int same_d(double a, double b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }
static int same_f(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }
/* The same value (a bounded kernel's promise): NaN as NaN, and −0 as +0,
 * whose difference is no error (GELU's f′ below −2^26 is a negative number
 * under the underflow threshold: the GPU's formula rounds it to −0, ref's to
 * +0, and the oracle to −0). */
static int same_value_d(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }
static int same_value_f(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

/* The oracle of one operation: op(x, y) in MPFR at HP bits, rounded once. */
enum { OP_MUL, OP_DIV, OP_ADD, OP_SUB };
#define DEFINE_OP(T, S, SET, GET)                                                 \
    static T op_##S(int op, T x, T y)                                             \
    {                                                                             \
        mpfr_t a, b;                                                              \
        mpfr_inits2(HP, a, b, (mpfr_ptr)0);                                       \
        SET(a, x, MPFR_RNDN), SET(b, y, MPFR_RNDN);                               \
        if (op == OP_MUL) mpfr_mul(a, a, b, MPFR_RNDN);                           \
        else if (op == OP_DIV) mpfr_div(a, a, b, MPFR_RNDN);                      \
        else if (op == OP_ADD) mpfr_add(a, a, b, MPFR_RNDN);                      \
        else mpfr_sub(a, a, b, MPFR_RNDN);                                        \
        T r = GET(a, MPFR_RNDN);                                                  \
        mpfr_clears(a, b, (mpfr_ptr)0);                                           \
        return r;                                                                 \
    }
DEFINE_OP(double, d, mpfr_set_d, mpfr_get_d)
DEFINE_OP(float, f, mpfr_set_flt, mpfr_get_flt)

/* Every exact kernel of K in type T (suffix S) on n units from x, u, s, t
 * (start offset off, so vector loads are unaligned), against the oracle. */
#define CHECK_EXACT(T, S)                                                                                    \
    static void check_exact_##S(const vijp_kernels *K, size_t n, const T *x, const T *u, const T *s, const T *t, \
                                T a)                                                                         \
    {                                                                                                        \
        T *y = vijp_alloc_array(n + 1, sizeof *y), *frag = vijp_alloc_array(n + 1, sizeof *frag);            \
        uint8_t *bits = vijp_alloc((n + 7) / 8 + 1);                                                         \
        const char *set = K->name;                                                                           \
        K->leaky_forward_##S(n, a, x, y);                                                                    \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], op_##S(OP_MUL, x[i], x[i] > 0 ? 1 : a)),                           \
                          "%s leaky_forward_" #S " n=%zu i=%zu x=%a: %a", set, n, i, (double)x[i], (double)y[i]); \
        K->leaky_apply_##S(n, a, x, u, y);                                                                   \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], op_##S(OP_MUL, u[i], x[i] > 0 ? 1 : a)), "%s leaky_apply n=%zu i=%zu", set, n, i); \
        K->leaky_vijp_##S(n, a, x, u, y);                                                                    \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], op_##S(OP_DIV, u[i], x[i] > 0 ? 1 : a)), "%s leaky_vijp n=%zu i=%zu", set, n, i); \
        K->leaky_inverse_##S(n, a, x, y);                                                                    \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], x[i] > 0 ? x[i] : op_##S(OP_DIV, x[i], a)), "%s leaky_inverse n=%zu i=%zu", set, n, i); \
        K->sign_pack_##S(n, x, bits);                                                                        \
        for (size_t i = 0; i < 8 * ((n + 7) / 8); i++)                                                       \
            ck_assert_msg(((bits[i / 8] >> (i % 8)) & 1) == (i < n && x[i] > 0), "%s sign_pack n=%zu bit %zu", set, n, i); \
        K->sign_unpack_##S(n, bits, y);                                                                      \
        for (size_t i = 0; i < n; i++) ck_assert_msg(y[i] == (x[i] > 0 ? 1 : -1), "%s sign_unpack n=%zu i=%zu", set, n, i); \
        K->relu_forward_##S(n, x, y);                                                                        \
        for (size_t i = 0; i < n; i++) ck_assert_msg(same_##S(y[i], x[i] > 0 ? x[i] : 0), "%s relu_forward i=%zu", set, i); \
        K->relu_apply_##S(n, x, u, y);                                                                       \
        for (size_t i = 0; i < n; i++) ck_assert_msg(same_##S(y[i], x[i] > 0 ? u[i] : 0), "%s relu_apply i=%zu", set, i); \
        /* frag's owner allocates exactly the inactive units: nothing may be written past them */     \
        const T unwritten = (T)12345.5;                                                                      \
        for (size_t i = 0; i <= n; i++) frag[i] = unwritten;                                                 \
        size_t k = K->relu_gather_##S(n, x, u, frag), j = 0;                                                 \
        for (size_t i = 0; i < n; i++)                                                                       \
            if (!(x[i] > 0)) ck_assert_msg(j < k && same_##S(frag[j++], u[i]), "%s relu_gather n=%zu i=%zu", set, n, i); \
        ck_assert_msg(j == k, "%s relu_gather: %zu units gathered, %zu inactive", set, k, j);                \
        for (size_t i = k; i <= n; i++)                                                                      \
            ck_assert_msg(frag[i] == unwritten, "%s relu_gather n=%zu: frag[%zu] written past the %zu units", set, n, i, k); \
        K->relu_scatter_##S(n, x, s, frag, y);                                                               \
        for (size_t i = 0, m = 0; i < n; i++)                                                                \
            ck_assert_msg(same_##S(y[i], x[i] > 0 ? s[i] : frag[m++]), "%s relu_scatter n=%zu i=%zu", set, n, i); \
        K->add_##S(n, x, u, y);                                                                              \
        for (size_t i = 0; i < n; i++) ck_assert_msg(same_##S(y[i], op_##S(OP_ADD, x[i], u[i])), "%s add i=%zu", set, i); \
        K->sub_##S(n, x, u, y);                                                                              \
        for (size_t i = 0; i < n; i++) ck_assert_msg(same_##S(y[i], op_##S(OP_SUB, x[i], u[i])), "%s sub i=%zu", set, i); \
        K->div_##S(n, x, s, y);                                                                              \
        for (size_t i = 0; i < n; i++) ck_assert_msg(same_##S(y[i], op_##S(OP_DIV, x[i], s[i])), "%s div i=%zu", set, i); \
        K->affine_##S(n, x, s, t, y);                                                                        \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], op_##S(OP_ADD, op_##S(OP_MUL, x[i], s[i]), t[i])), "%s affine i=%zu", set, i); \
        K->affine_inverse_##S(n, x, s, t, y);                                                                \
        for (size_t i = 0; i < n; i++)                                                                       \
            ck_assert_msg(same_##S(y[i], op_##S(OP_DIV, op_##S(OP_SUB, x[i], t[i]), s[i])), "%s affine_inverse i=%zu", set, i); \
        free(y), free(frag), free(bits);                                                                     \
    }
CHECK_EXACT(double, d)
CHECK_EXACT(float, f)

/* The sets to test: every one available, each absent one named once. */
static int for_set(int i)
{
    const char *why = NULL;
    if (vijp_kernels_set(i, &why)) return 1;
    printf("# kernels: %s skipped: %s\n", vijp_kset_names[i], why);
    return 0;
}

static size_t test_length(long r)
{
    static const size_t longer[] = {127, 128, 129, 255, 1000, 1031};
    return r <= 70 ? (size_t)r : longer[(size_t)r % (sizeof longer / sizeof *longer)];
}

START_TEST(exact_kernels_vs_oracle)
{
    if (!for_set(_i)) return;
    const vijp_kernels *K = vijp_kernels_set(_i, NULL);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 7u * (unsigned)_i);
    for (long r = 0; r < 77; r++) {
        size_t n = test_length(r), off = (size_t)r % 3; /* element offset: unaligned vector loads */
        double *buf = vijp_alloc_array(4 * (n + 3), sizeof *buf), *x = buf + off, *u = x + n + 3, *s = u + n + 3,
               *t = s + n + 3;
        float *fb = vijp_alloc_array(4 * (n + 3), sizeof *fb), *xf = fb + off, *uf = xf + n + 3, *sf = uf + n + 3,
              *tf = sf + n + 3;
        for (size_t i = 0; i < n; i++) {
            x[i] = draw(&rng), u[i] = draw(&rng), s[i] = draw(&rng), t[i] = draw(&rng);
            xf[i] = (float)x[i], uf[i] = (float)u[i], sf[i] = (float)s[i], tf[i] = (float)t[i];
        }
        double a = ldexp(1 + vijp_rng_uniform(&rng), (int)(vijp_rng_u64(&rng) % 25) - 12); /* the layer's slope range */
        check_exact_d(K, n, x, u, s, t, a);
        check_exact_f(K, n, xf, uf, sf, tf, (float)a);
        free(buf), free(fb);
    }
}
END_TEST

/* Sign packing of long arrays, where the SIMD sets read four streams at
 * once (simd/elementwise.h): every bit ref's, at lengths whose quarter is
 * and is not a multiple of 64 and with tails, and not a byte past the end. */
START_TEST(sign_pack_long)
{
    if (!for_set(_i)) return;
    const vijp_kernels *K = vijp_kernels_set(_i, NULL), *R = vijp_kernels_set(0, NULL);
    static const size_t lengths[] = {65536, 65536 + 64 * 3 + 5, 4 * 65600 + 63, 300001};
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 5u * (unsigned)_i);
    size_t nmax = 300001;
    double *x = vijp_alloc_array(nmax, sizeof *x);
    float *xf = vijp_alloc_array(nmax, sizeof *xf);
    uint8_t *a = vijp_alloc(nmax / 8 + 2), *b = vijp_alloc(nmax / 8 + 2);
    for (size_t i = 0; i < nmax; i++) x[i] = draw(&rng), xf[i] = (float)x[i];
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        size_t n = lengths[l], nb = (n + 7) / 8;
        for (int single = 0; single < 2; single++) {
            memset(a, 0xa5, nb + 1), memset(b, 0x5a, nb + 1);
            if (single) K->sign_pack_f(n, xf, a), R->sign_pack_f(n, xf, b);
            else K->sign_pack_d(n, x, a), R->sign_pack_d(n, x, b);
            ck_assert_msg(!memcmp(a, b, nb), "%s sign_pack_%c, n = %zu: bits differ from ref's", K->name,
                          single ? 'f' : 'd', n);
            ck_assert_msg(a[nb] == 0xa5, "%s sign_pack_%c, n = %zu: wrote past the last byte", K->name,
                          single ? 'f' : 'd', n);
        }
    }
    free(x), free(xf), free(a), free(b);
}
END_TEST

/* FNV-1a over bytes, NaNs made canonical (payloads are not part of the
 * contract). */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    for (size_t i = 0; i < len; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t hash_d(uint64_t h, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double c = isnan(v[i]) ? NAN : v[i];
        h = fnv(h, &c, sizeof c);
    }
    return h;
}
static uint64_t hash_f(uint64_t h, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float c = isnan(v[i]) ? NAN : v[i];
        h = fnv(h, &c, sizeof c);
    }
    return h;
}

/* Every exact kernel's output over a fixed grid (seed 12345, 1031 units). */
#define GRID 1031
#define HASH_EXACT(T, S)                                                                                     \
    static uint64_t hash_exact_##S(const vijp_kernels *K, const T *x, const T *u, const T *s, const T *t, T a, uint64_t h) \
    {                                                                                                        \
        T y[GRID], frag[GRID];                                                                               \
        uint8_t bits[(GRID + 7) / 8];                                                                        \
        K->leaky_forward_##S(GRID, a, x, y), h = hash_##S(h, y, GRID);                                       \
        K->leaky_apply_##S(GRID, a, x, u, y), h = hash_##S(h, y, GRID);                                      \
        K->leaky_vijp_##S(GRID, a, x, u, y), h = hash_##S(h, y, GRID);                                       \
        K->leaky_inverse_##S(GRID, a, x, y), h = hash_##S(h, y, GRID);                                       \
        K->sign_pack_##S(GRID, x, bits), h = fnv(h, bits, sizeof bits);                                      \
        K->sign_unpack_##S(GRID, bits, y), h = hash_##S(h, y, GRID);                                         \
        K->relu_forward_##S(GRID, x, y), h = hash_##S(h, y, GRID);                                           \
        K->relu_apply_##S(GRID, x, u, y), h = hash_##S(h, y, GRID);                                          \
        size_t k = K->relu_gather_##S(GRID, x, u, frag);                                                     \
        h = hash_##S(h, frag, k);                                                                            \
        K->relu_scatter_##S(GRID, x, s, frag, y), h = hash_##S(h, y, GRID);                                  \
        K->add_##S(GRID, x, u, y), h = hash_##S(h, y, GRID);                                                 \
        K->sub_##S(GRID, x, u, y), h = hash_##S(h, y, GRID);                                                 \
        K->div_##S(GRID, x, s, y), h = hash_##S(h, y, GRID);                                                 \
        K->affine_##S(GRID, x, s, t, y), h = hash_##S(h, y, GRID);                                           \
        K->affine_inverse_##S(GRID, x, s, t, y), h = hash_##S(h, y, GRID);                                   \
        return h;                                                                                            \
    }
HASH_EXACT(double, d)
HASH_EXACT(float, f)

START_TEST(exact_kernels_hash_across_sets)
{
    static double x[GRID], u[GRID], s[GRID], t[GRID];
    static float xf[GRID], uf[GRID], sf[GRID], tf[GRID];
    vijp_rng rng;
    vijp_rng_seed(&rng, 12345);
    for (size_t i = 0; i < GRID; i++) {
        x[i] = draw(&rng), u[i] = draw(&rng), s[i] = draw(&rng), t[i] = draw(&rng);
        xf[i] = (float)x[i], uf[i] = (float)u[i], sf[i] = (float)s[i], tf[i] = (float)t[i];
    }
    uint64_t ref = 0;
    for (int i = 0; i < VIJP_KSET_COUNT; i++) {
        if (!for_set(i)) continue;
        const vijp_kernels *K = vijp_kernels_set(i, NULL);
        uint64_t h = hash_exact_f(K, xf, uf, sf, tf, 0.3f, hash_exact_d(K, x, u, s, t, 0.3, 0xcbf29ce484222325ull));
        printf("# kernels: exact outputs over the grid, %-6s hash %016llx\n", K->name, (unsigned long long)h);
        if (i == 0) ref = h;
        else ck_assert_msg(h == ref, "%s: hash %016llx differs from ref's %016llx", K->name, (unsigned long long)h,
                           (unsigned long long)ref);
    }
}
END_TEST

/* The error of a kernel's f or f′ (value v) against the oracle o as a
 * fraction of its bound: the double bound b (1.01·K·u·|terms|; below the
 * double underflow threshold 2^-1022 absolute, as t-activations.c) plus, in
 * binary32, one rounding to binary32. */
static double ratio(const mpfr_t o, double v, double b, double mag, int single)
{
    mpfr_t e;
    mpfr_init2(e, ORACLE_PREC);
    mpfr_sub_d(e, o, v, MPFR_RNDN);
    double err = fabs(mpfr_get_d(e, MPFR_RNDU));
    mpfr_clear(e);
    if (mag < 0x1p-1022) b = 0x1p-1022;
    if (single) b += fmax(1.01 * 0x1p-24 * mag, 0x1p-150);
    return err / b;
}

/* Activation a of set _i / VIJP_KACT_COUNT: arrays of 1…41 units (every
 * tail), values under test among junk; every finite point checked. */
START_TEST(activation_kernels_vs_oracle)
{
    int set = _i / VIJP_KACT_COUNT, a = _i % VIJP_KACT_COUNT;
    if (a == 0 && !for_set(set)) return;
    const vijp_kernels *K = vijp_kernels_set(set, NULL), *R = vijp_kernels_set(0, NULL);
    if (!K) return;
    ck_assert_str_eq(acts[a].name, vijp_kact_names[a]);
    const vijp_kact_bound *B = &K->act_bound[a];
    ck_assert_msg(B->f_u > 0 && B->d1_u > 0 && B->d2_u >= 0 && B->d2_u_per_softplus >= 0,
                  "%s %s: act_bound {%g, %g, %g, %g} is no bound (the table must state it)", K->name, acts[a].name,
                  B->f_u, B->d1_u, B->d2_u, B->d2_u_per_softplus);
    double x0 = acts[a].has_zero ? locate_zero(acts[a].name) : NAN, u = 0x1p-53;
    vijp_format fmt;
    ck_assert(!vijp_format_mpfr(&fmt, ORACLE_PREC, NULL));
    mpfr_t xm, f, d, t1, t2;
    mpfr_inits2(ORACLE_PREC, xm, f, d, t1, t2, (mpfr_ptr)0);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 101u * (unsigned)_i);
    long points = test_iters(20000), i = 0;
    double worst[2][2] = {{0, 0}, {0, 0}}; /* [double, binary32][f, f′] */
    while (i < points) {
        size_t n = 1 + vijp_rng_u64(&rng) % 41;
        double x[41], fx[41], dx[41], rf[41], rd[41];
        float xf[41], ff[41], df[41];
        for (size_t j = 0; j < n; j++) {
            x[j] = vijp_rng_uniform(&rng) < 0.2 ? junk[vijp_rng_u64(&rng) % NJUNK] : sample_point(&rng, i + (long)j, x0);
            xf[j] = (float)x[j];
        }
        float rff[41], rdf[41];
        K->act_d[a](n, x, fx, dx), K->act_f[a](n, xf, ff, df), R->act_d[a](n, x, rf, rd), R->act_f[a](n, xf, rff, rdf);
        for (size_t j = 0; j < n; j++, i++) {
            /* NaN and ±Inf: what ref gives, NaN as NaN.  Beyond 2^26 too: the
             * oracle's e^x leaves MPFR's exponent range (2^30) near |x| = 7e8,
             * and there f, f′ are their limits (x or 0; 1 or 0), exact in both. */
            if (!(fabs(x[j]) <= 0x1p26)) {
                ck_assert_msg(same_value_d(fx[j], rf[j]) && same_value_d(dx[j], rd[j]), "%s %s(%g) = %g, %g; ref %g, %g", K->name,
                              acts[a].name, x[j], fx[j], dx[j], rf[j], rd[j]);
                continue;
            }
            for (int single = 0; single < 2; single++) {
                if (single && !(fabs(xf[j]) <= 0x1p26)) { /* as above */
                    ck_assert_msg(same_value_f(ff[j], rff[j]) && same_value_f(df[j], rdf[j]), "%s binary32 %s(%g): %g, %g; ref %g, %g",
                                  K->name, acts[a].name, (double)xf[j], (double)ff[j], (double)df[j], (double)rff[j],
                                  (double)rdf[j]);
                    continue;
                }
                double xv = single ? (double)xf[j] : x[j], kf, k1, k2;
                double vf = single ? (double)ff[j] : fx[j], vd = single ? (double)df[j] : dx[j];
                mpfr_set_d(xm, xv, MPFR_RNDN);
                vo_activation_pair(acts[a].name, f, d, xm, &fmt);
                acts[a].terms(t1, t2, xv), act_constants(B, xv, &kf, &k1, &k2);
                double a1 = fabs(mpfr_get_d(t1, MPFR_RNDU)), a2 = fabs(mpfr_get_d(t2, MPFR_RNDU));
                double af = fabs(mpfr_get_d(f, MPFR_RNDN));
                double r_f = ratio(f, vf, 1.01 * u * kf * af, af, single);
                double r_d = ratio(d, vd, 1.01 * u * (k1 * a1 + k2 * a2), a1 + a2, single);
                ck_assert_msg(r_f <= 1 && r_d <= 1, "%s %s %s(%.17g): f = %.17g (%g of its bound), f' = %.17g (%g of its bound)",
                              K->name, single ? "binary32" : "double", acts[a].name, xv, vf, r_f, vd, r_d);
                worst[single][0] = fmax(worst[single][0], r_f), worst[single][1] = fmax(worst[single][1], r_d);
            }
        }
    }
    printf("# kernels: %-6s %-8s %ld points: worst fraction of the bound, double f %.2f f' %.2f, binary32 f %.2f f' %.2f\n",
           K->name, acts[a].name, points, worst[0][0], worst[0][1], worst[1][0], worst[1][1]);
    mpfr_clears(xm, f, d, t1, t2, (mpfr_ptr)0);
}
END_TEST

/* The four partial sums themselves, each against its terms' sum in MPFR at
 * 256 bits (the kernel's own d̂ = fl(a − ref) in Σd̂² and Σd̂·ref): any order
 * of n terms, each a product rounded once or fused, is within
 * γ_n·Σ|terms| (Higham eq. 3.5), plus n·2^−1074 for the products that
 * underflow (the tiny entries below; half that would do); MPFR's own error
 * is far smaller, and
 * (1 + 2^−50) covers forming the bound in double.
 * This catches a sum that vijp_kdrift_metric barely reads (Σa² only as a
 * zero test). */
static void check_partials(const char *set, size_t n, const double *a, const double *ref, const vijp_kdrift *p)
{
    const double got[4] = {p->aa, p->rr, p->dd, p->dr};
    static const char *const name[4] = {"Σa²", "Σref²", "Σd²", "Σd·ref"};
    mpfr_t sum, mag, t;
    mpfr_inits2(256, sum, mag, t, (mpfr_ptr)0);
    for (int k = 0; k < 4; k++) {
        mpfr_set_zero(sum, 1), mpfr_set_zero(mag, 1);
        for (size_t i = 0; i < n; i++) {
            double d = a[i] - ref[i], x = k == 0 ? a[i] : k == 1 ? ref[i] : d, y = k == 0 ? a[i] : k == 2 ? d : ref[i];
            mpfr_set_d(t, x, MPFR_RNDN), mpfr_mul_d(t, t, y, MPFR_RNDN), mpfr_add(sum, sum, t, MPFR_RNDN);
            mpfr_abs(t, t, MPFR_RNDN), mpfr_add(mag, mag, t, MPFR_RNDN);
        }
        double gn = (double)n * 0x1p-53 / (1 - (double)n * 0x1p-53);
        double bound = gn * mpfr_get_d(mag, MPFR_RNDU) * (1 + 0x1p-50) + (double)n * 0x1p-1074;
        mpfr_sub_d(t, sum, got[k], MPFR_RNDN);
        double err = fabs(mpfr_get_d(t, MPFR_RNDU));
        ck_assert_msg(err <= bound, "%s n=%zu: %s = %.17g, off by %.3g > %.3g", set, n, name[k], got[k], err, bound);
    }
    mpfr_clears(sum, mag, t, (mpfr_ptr)0);
}

/* Drift partials against vijp_compare: a = ref·(1 + δ) + ε·noise over
 * drifts δ, ε from 0 to 1, in the ulps of double and of binary32. */
START_TEST(drift_kernel_vs_mpfr)
{
    if (!for_set(_i)) return;
    const vijp_kernels *K = vijp_kernels_set(_i, NULL);
    vijp_format dbl, b32;
    vijp_format_fixed(&dbl, VIJP_DOUBLE), vijp_format_fixed(&b32, VIJP_BINARY32);
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 13u * (unsigned)_i);
    const double u = 0x1p-53;
    for (int r = 0; r < 60; r++) {
        size_t n = 1 + vijp_rng_u64(&rng) % 300;
        vijp_mat A, Rm;
        vijp_mat_init(&A, n, 1, &dbl), vijp_mat_init(&Rm, n, 1, &dbl);
        double delta = r % 10 == 0 ? 0 : exp2(-60 * vijp_rng_uniform(&rng)), eps = exp2(-60 * vijp_rng_uniform(&rng));
        double sign = r % 7 == 3 ? -1 : 1, scale = exp2(-200 + 400 * vijp_rng_uniform(&rng));
        for (size_t i = 0; i < n; i++) {
            /* every fifth case: a third of the entries 2^-900 smaller (down to
             * subnormal), where 2^−e leaves the double range and the SIMD sets
             * scale in two steps */
            double sc = r % 5 == 4 && i < n / 3 ? scale * 0x1p-900 : scale;
            Rm.d[i] = sc * vijp_rng_normal(&rng);
            A.d[i] = sign * Rm.d[i] * (1 + delta) + sc * eps * vijp_rng_normal(&rng);
        }
        const vijp_format *f = r % 2 ? &b32 : &dbl;
        vijp_kdrift p;
        K->drift_d(n, A.d, Rm.d, (long)f->prec, (long)f->emin, &p);
        check_partials(K->name, n, A.d, Rm.d, &p);
        double rel, ulps, angle;
        vijp_kdrift_metric(&p, &rel, &ulps, &angle);
        vijp_metric m;
        vijp_compare(&A, &Rm, f, &m);
        double m_rel = vijp_xnum_double(m.rel), m_ulps = vijp_xnum_double(m.ulps), m_angle = vijp_xnum_double(m.angle_deg);
        /* kernels.h: rel within (n + 6)u relative (both sums (n + 3)u, then ÷, √);
         * ulps within 2u (d's rounding, MPFR's upward rounding of its own);
         * the angle within √(4(n + 4)u·Σd²)/|a∥| + (n + 8)u·θ + 4u rad */
        double apar = fabs(sqrt(p.rr) + p.dr / sqrt(p.rr));
        double ba = (sqrt(4 * ((double)n + 4) * u * p.dd) / apar + ((double)n + 8) * u * (m_angle * M_PI / 180) + 4 * u) *
                    (180 / M_PI);
        ck_assert_msg(fabs(rel - m_rel) <= ((double)n + 6) * u * m_rel, "%s n=%zu: rel %.17g, MPFR %.17g", K->name, n, rel, m_rel);
        ck_assert_msg(fabs(ulps - m_ulps) <= 2 * u * m_ulps, "%s n=%zu: ulps %.17g, MPFR %.17g", K->name, n, ulps, m_ulps);
        ck_assert_msg(fabs(angle - m_angle) <= ba, "%s n=%zu δ=%g ε=%g: angle %.17g°, MPFR %.17g° (bound %g)", K->name,
                      n, delta, eps, angle, m_angle, ba);
        vijp_mat_clear(&A), vijp_mat_clear(&Rm);
    }
}
END_TEST

/* The default table: the best set's exact kernels, ref's bounded ones (so
 * that results do not depend on the machine); VIJP_KERNELS: that set whole. */
START_TEST(selection)
{
    const vijp_kernels *A = vijp_kernels_active(), *R = vijp_kernels_set(0, NULL);
    const char *want = getenv("VIJP_KERNELS");
    int best = 0;
    for (int i = 2; i >= 1 && !best; i--)
        if (vijp_kernels_set(i, NULL)) best = i;
    if (want && *want && strcmp(want, "auto")) {
        ck_assert_str_eq(vijp_kernels_name(), want);
        return;
    }
    const vijp_kernels *B = vijp_kernels_set(best, NULL);
    ck_assert_str_eq(vijp_kernels_name(), vijp_kset_names[best]);
    ck_assert(A->leaky_forward_d == B->leaky_forward_d && A->relu_scatter_f == B->relu_scatter_f &&
              A->sign_pack_d == B->sign_pack_d && A->affine_d == B->affine_d);
    for (int a = 0; a < VIJP_KACT_COUNT; a++) /* ref's activations, with their bounds */
        ck_assert(A->act_d[a] == R->act_d[a] && A->act_f[a] == R->act_f[a] &&
                  !memcmp(&A->act_bound[a], &R->act_bound[a], sizeof A->act_bound[a]));
    ck_assert(A->erfc_d == R->erfc_d); /* the other bounded ones too */
    ck_assert(A->erfc_bound_u == R->erfc_bound_u && A->erfc_zero_above == R->erfc_zero_above); /* and their bounds */
    ck_assert(A->drift_d == R->drift_d);
    /* avx512's own gemm_d (avx512/gemm.c) only when that set is asked for */
    ck_assert(A->gemm_d == R->gemm_d && A->gemm_f == R->gemm_f && A->gemm_mixed_f == R->gemm_mixed_f);
}
END_TEST

/* The ref set's gemm_d with one term (alpha 1, beta 0: the batch-1
 * parameter gradient) is written as an outer product without dgemm; it
 * must give cblas_dgemm's bits, signed zeros (an exact −0 product becomes
 * +0 in dgemm's sum into a zeroed C), NaN and ±Inf included, for every
 * transpose, with leading dimensions beyond the shape, over a C full of
 * junk (beta 0 ignores it). */
START_TEST(gemm_one_term_is_dgemm)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 11);
    const vijp_kernels *R = vijp_kernels_set(0, NULL);
    enum { M = 13, N = 9, LD = 17 };
    static double A[LD * LD], B[LD * LD], want[LD * N], got[LD * N];
    for (int it = 0; it < 20; it++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                for (size_t i = 0; i < LD * LD; i++) A[i] = draw(&rng), B[i] = draw(&rng);
                A[0] = -0.0, B[0] = 2.0; /* an exact −0 product */
                for (size_t i = 0; i < LD * N; i++) want[i] = got[i] = draw(&rng);
                cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, 1,
                            1.0, A, LD, B, LD, 0.0, want, LD);
                R->gemm_d(ta, tb, M, N, 1, 1.0, A, LD, B, LD, 0.0, got, LD);
                for (size_t j = 0; j < N; j++)
                    for (size_t i = 0; i < M; i++) {
                        double w = want[i + j * LD], g = got[i + j * LD];
                        ck_assert_msg(!memcmp(&w, &g, sizeof w) || (isnan(w) && isnan(g)),
                                      "ta %d tb %d (%zu, %zu): dgemm %a, outer product %a", ta, tb, i, j, w, g);
                    }
            }
}
END_TEST

/* VIJP_KERNELS through the command: an unknown or absent set exits 2 with
 * the reason, never a silent fallback. */
START_TEST(selection_errors)
{
    const char *bin = getenv("VIJP_BIN");
    if (!bin) {
        printf("# kernels: selection_errors skipped: VIJP_BIN is not set\n");
        return;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "VIJP_KERNELS=sse9 '%s' --version", bin);
    run_result r = run_bin("env", cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "unknown kernel set"), "rc %d: %s", r.rc, r.err);
    run_free(&r);
    for (int i = 0; i < VIJP_KSET_COUNT; i++) {
        const char *why = NULL;
        int have = vijp_kernels_set(i, &why) != NULL;
        snprintf(cmd, sizeof cmd, "VIJP_KERNELS=%s '%s' --version", vijp_kset_names[i], bin);
        r = run_bin("env", cmd);
        ck_assert_msg(have ? r.rc == CLI_OK : r.rc == CLI_USAGE && strstr(r.err, "not available"), "%s: rc %d: %s",
                      vijp_kset_names[i], r.rc, r.err);
        run_free(&r);
    }
}
END_TEST


/* double@SET formats (vijp/format.h): parsed where the set runs, an error
 * where it does not; an engine run in one uses that set's kernels (its
 * GELU differs from ref's), which the format carries down to every
 * operator. */
START_TEST(kernel_formats)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert(!vijp_format_parse("double@ref", &f, &err));
    ck_assert(f.kind == VIJP_DOUBLE && f.prec == 53 && f.kernel_set == 1 && !strcmp(f.name, "double@ref"));
    ck_assert(vijp_format_parse("double@sse9", &f, &err) == VIJP_EINVAL && strstr(err.msg, "unknown kernel set"));
    ck_assert(vijp_format_parse("bfloat16@ref", &f, &err) == VIJP_EINVAL && strstr(err.msg, "only double, binary32, bfloat16+binary32 and binary16+binary32"));
    for (int i = 1; i < VIJP_KSET_COUNT; i++) {
        char name[32];
        snprintf(name, sizeof name, "double@%s", vijp_kset_names[i]);
        int have = vijp_kernels_set(i, NULL) != NULL, rc = vijp_format_parse(name, &f, &err);
        ck_assert_msg(have ? !rc && f.kernel_set == 1 + i : rc == VIJP_EINVAL && strstr(err.msg, "not available"), "%s", name);
    }
    int best = vijp_kernels_set(2, NULL) ? 2 : vijp_kernels_set(1, NULL) ? 1 : 0;
    const char *fmts[] = {"double", "double@ref", best == 2 ? "double@avx512" : "double@avx2"};
    vijp_grads g[3];
    for (int k = 0; k < (best ? 3 : 2); k++) {
        vijp_net net;
        vijp_format F;
        ck_assert(!vijp_format_parse(fmts[k], &F, &err));
        ck_assert(!vijp_net_build(&net, "dense:16,gelu", 4, 16, &err));
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 5, &err));
        vijp_mat *theta = vijp_alloc_array(4, sizeof *theta), X, T;
        ck_assert(!vijp_net_params(&net, &F, theta, &err));
        double *x = vijp_alloc_array(16 * 64, sizeof *x), *t = vijp_alloc_array(16 * 64, sizeof *t);
        vijp_net_sample(&net, 64, 6, x, t);
        vijp_mat_init(&X, 16, 64, &F), vijp_mat_set_d(&X, x);
        vijp_mat_init(&T, 16, 64, &F), vijp_mat_set_d(&T, t);
        ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, theta, &X, &T, &g[k], &err), "%s: %s", fmts[k], err.msg);
        vijp_net_params_clear(&net, theta);
        vijp_mat_clear(&X), vijp_mat_clear(&T), vijp_net_free(&net), free(theta), free(x), free(t);
    }
    size_t len = vijp_mat_len(&g[0].grad_x);
    const char *want = getenv("VIJP_KERNELS");
    if (!want || !*want || !strcmp(want, "auto") || !strcmp(want, "ref")) /* the default runs ref's activations */
        ck_assert_msg(!memcmp(g[0].grad_x.d, g[1].grad_x.d, len * sizeof(double)), "double and double@ref differ");
    if (best) { /* SLEEF and glibc round some of 4096 GELU evaluations differently */
        ck_assert_msg(memcmp(g[1].grad_x.d, g[2].grad_x.d, len * sizeof(double)), "%s ran ref's kernels", fmts[2]);
        vijp_grads_clear(&g[2]);
    }
    vijp_grads_clear(&g[0]), vijp_grads_clear(&g[1]);
}
END_TEST

/* erfc_d against MPFR's erfc correctly rounded to double's 53 bits (MPFR
 * rounds once at the target precision; below DBL_MIN mpfr_get_d rounds
 * again, where the check is absolute), each set held to the bound its table states (erfc_bound_u,
 * erfc_zero_above: ref glibc's 5 ulps = 10u relative; the SIMD sets 7.1u
 * for t <= 26 and 0 beyond, where erfc < 5.7e-296).  Points: uniform over [−30, 30] and [−1, 1], both sides of
 * every table cell's ends (the doubles whose low 48 bits are 0, 0.5 to 27),
 * of both signs, and of the branch points ±1/2 and 26, and ±0, ±Inf, NaN;
 * lengths that leave a tail.  A set that takes ref's erfc (CUDA's) takes
 * its bound with it. */
START_TEST(erfc_kernel_vs_mpfr)
{
    const vijp_kernels *K = vijp_kernels_set(_i, NULL);
    if (!K) return;
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 77);
    size_t n = (size_t)test_iters(40000) + 3, m = 0;
    if (n < 8 * 92 + 16) n = 8 * 92 + 16; /* every cell end, whatever VIJP_TEST_SCALE */
    double *t = malloc(n * sizeof *t), *y = malloc(n * sizeof *y), bound = K->erfc_bound_u, zero = K->erfc_zero_above,
           worst = 0;
    ck_assert_msg(bound >= 1.01 && bound <= 16, "%s: erfc_bound_u %g is no bound (the table must state it)", K->name, bound);
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0.5, -0.5, 26, -26, 0x1p-1074, 1e300};
    for (size_t j = 0; j < sizeof special / sizeof *special; j++) t[m++] = special[j];
    t[m++] = nextafter(26, 0), t[m++] = nextafter(26, 100), t[m++] = nextafter(-26, 0), t[m++] = nextafter(-26, -100);
    for (uint64_t k = 0x3FE0; k <= 0x403B && m + 6 < n; k++) { /* the SIMD table's cell ends, a's top 16 bits */
        double e;
        uint64_t bits = k << 48;
        memcpy(&e, &bits, sizeof e);
        t[m++] = nextafter(e, 0), t[m++] = nextafter(e, 100), t[m++] = -e, t[m++] = e;
        t[m++] = -nextafter(e, 0), t[m++] = -nextafter(e, 100);
    }
    while (m < n) t[m] = (m % 2 ? 60 * vijp_rng_uniform(&rng) - 30 : 2 * vijp_rng_uniform(&rng) - 1), m++;
    K->erfc_d(n, t, y);
    mpfr_t r;
    mpfr_init2(r, 53);
    for (size_t j = 0; j < n; j++) {
        if (isnan(t[j])) {
            ck_assert_msg(isnan(y[j]), "%s erfc(NaN) = %g", K->name, y[j]);
            continue;
        }
        mpfr_set_d(r, t[j], MPFR_RNDN);
        mpfr_erfc(r, r, MPFR_RNDN);
        double e = mpfr_get_d(r, MPFR_RNDN);
        if (zero > 0 && t[j] > zero) { /* erfc(26) = 5.7e-296: a zero there is within that, absolutely */
            ck_assert_msg(y[j] == 0 && e < 5.7e-296, "%s erfc(%a) = %g", K->name, t[j], y[j]);
            continue;
        }
        if (e < DBL_MIN) { /* glibc's subnormal results: within 2^-1022 (the smallest normal), absolutely */
            ck_assert(fabs(y[j] - e) <= 0x1p-1022);
            continue;
        }
        /* e, erfc rounded to nearest, is within u·erfc of it: |y − erfc| <= |y − e| + u·erfc, and
         * erfc <= e(1 + u), so |y − e|/e <= (bound − 1.01)u keeps y within bound·u of erfc */
        double err = fabs(y[j] - e) / e / 0x1p-53;
        if (err > worst) worst = err;
        ck_assert_msg(err <= bound - 1.01, "%s erfc(%a) = %a, MPFR %a: %.2f u > %g u", K->name, t[j], y[j], e, err + 1.01, bound);
    }
    fprintf(stderr, "# erfc_d %s: worst %.2f u (bound %g u) over %zu points\n", K->name, worst + 1.01, bound, n);
    mpfr_clear(r);
    free(t), free(y);
}
END_TEST

Suite *suite_kernels(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, selection);
    tcase_add_test(tc, gemm_one_term_is_dgemm);
    tcase_add_test(tc, selection_errors);
    tcase_add_test(tc, kernel_formats);
    tcase_add_loop_test(tc, exact_kernels_vs_oracle, 0, VIJP_KSET_COUNT);
    tcase_add_loop_test(tc, sign_pack_long, 0, VIJP_KSET_COUNT);
    tcase_add_test(tc, exact_kernels_hash_across_sets);
    tcase_add_loop_test(tc, activation_kernels_vs_oracle, 0, VIJP_KSET_COUNT * VIJP_KACT_COUNT);
    tcase_add_loop_test(tc, drift_kernel_vs_mpfr, 0, VIJP_KSET_COUNT);
    tcase_add_loop_test(tc, erfc_kernel_vs_mpfr, 0, VIJP_KSET_COUNT);
    suite_add_tcase(s, tc);
    return s;
}

/* src/emu/lanes.h's sets (portable, avx2, avx512: one SIMD lane per output,
 * each doing the scalar sequence of roundings) through the dense operators
 * that run them (src/emu/dense.c), against the oracle (oracles/dense.c, MPFR)
 * called directly.  The claim is equality, bit for bit and sign of zero
 * (NaN where the oracle has NaN), for every set this machine has, so no
 * tolerance.  Shapes are chosen to leave remainders everywhere: rows not a
 * multiple of any vector (padding), columns not a multiple of the four-wide
 * blocks, batch 1 and more; entries include subnormals, values near
 * overflow (sums that overflow), ±0, ±Inf and NaN. */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "oracles/oracles.h"
#include "emu/dense.h"
#include "emu/emu.h"
#include "emu/lanes.h"
#include "ddot/ddot.h"
#include "kernels/kernels.h"
#include "format/emulable.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const formats[] = {"binary32", "binary16", "bfloat16", "bfloat16+binary32",
                                      "binary16+binary32", "tf32+binary32"};
#define N_FORMATS (sizeof formats / sizeof *formats)

/* One entry on grid g: ordinary (wild = 0), or, one time in three when wild,
 * one of the edge classes. */
static double draw(vijp_rng *r, vijp_emu_grid g, int wild)
{
    uint64_t u = vijp_rng_u64(r);
    double s = (u & 1) ? -1 : 1, m = 0.5 + 0.5 * vijp_rng_uniform(r);
    if (!wild || (u >> 1) % 3) return vijp_emu_round(vijp_rng_normal(r), g);
    switch ((u >> 3) % 8) {
    case 0: /* ±Inf or NaN, rarely: one in a dot product poisons it */
        if ((u >> 8) % 16 == 0) return (u >> 12) % 4 ? s * INFINITY : NAN;
        return vijp_emu_round(vijp_rng_normal(r), g);
    case 1: return s * 0.0;
    case 2: case 3: return vijp_emu_round(s * ldexp(m, g.emin - (int)((u >> 12) % (unsigned)g.p)), g); /* subnormal */
    case 4: case 5: return vijp_emu_round(s * ldexp(m, g.emax - (int)((u >> 12) % 3)), g); /* near overflow */
    case 6: return vijp_emu_round(s * ldexp(m, g.emin + g.p - 1 + (int)((u >> 12) % 4)), g); /* just normal */
    default: return vijp_emu_round(s * ldexp(m, (g.emin + g.emax) / 2), g); /* products near the bottom */
    }
}

/* count entries of f: on the storage grid for mixed formats (the layer's
 * data), half of the vectors anywhere on the arithmetic grid. */
static mpfr_t *draw_vec(vijp_rng *r, const vijp_format *f, size_t count, int wild)
{
    vijp_emu_grid g = vijp_emu_arith(f), st = f->mixed ? vijp_emu_store(f) : g;
    int stored = f->mixed && (vijp_rng_u64(r) & 1);
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) {
        double d = draw(r, g, wild);
        mpfr_set_d(v[i], stored ? vijp_emu_round(d, st) : d, MPFR_RNDN);
    }
    return v;
}

static mpfr_t *filled(size_t count, const vijp_format *f, double fill)
{
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) mpfr_set_d(v[i], fill, MPFR_RNDN);
    return v;
}

static void expect_same(mpfr_t *oracle, mpfr_t *emu, size_t count, const char *what, const char *set, const char *fmt,
                        size_t m, size_t n, size_t B)
{
    for (size_t i = 0; i < count; i++) {
        double a = mpfr_get_d(oracle[i], MPFR_RNDN), b = mpfr_get_d(emu[i], MPFR_RNDN);
        int ok = (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
        ck_assert_msg(ok, "%s on set %s in %s, dense %zux%zu, batch %zu, entry %zu: oracle %a, emu %a", what, set, fmt,
                      m, n, B, i, a, b);
    }
}

/* forward, jvp, vjp and the parameters' gradient on every set, one shape. */
static void shape_case(vijp_rng *r, const vijp_format *f, const char *fmt, size_t m, size_t n, size_t B, int wild,
                       int *sets_run)
{
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
    vijp_layer L;
    ck_assert_int_eq(vijp_layer_parse(&L, spec, 0, NULL), 0);
    size_t P = m * n + m, outs = P + m * B + n * B;
    mpfr_t *th = draw_vec(r, f, P, wild), *X = draw_vec(r, f, n * B, wild), *Gy = draw_vec(r, f, m * B, wild);
    mpfr_t *fwd = filled(m * B, f, 1), *jvp = filled(m * B, f, 1), *vjp = filled(n * B, f, 1), *gt = filled(P, f, 1);
    vo_dense_forward(&L, th, X, B, fwd, f), vo_dense_jvp(&L, th, NULL, B, X, jvp, f);
    vo_dense_vjp(&L, th, NULL, B, Gy, vjp, f), vo_dense_vjp_param(&L, th, X, B, Gy, gt, f);
    for (int s = 0; s < VIJP_EMU_LANES_COUNT; s++) {
        const vijp_emu_lanes *set = vijp_emu_lanes_set(s);
        if (!set) continue;
        sets_run[s] = 1;
        mpfr_t *e = filled(outs, f, 3); /* unlike the oracle's fill: an unwritten entry shows */
        vijp_emu_dense_forward_on(set, &L, th, X, B, e, 1, f);
        expect_same(fwd, e, m * B, "forward", set->name, fmt, m, n, B);
        vijp_emu_dense_forward_on(set, &L, th, X, B, e, 0, f);
        expect_same(jvp, e, m * B, "jvp", set->name, fmt, m, n, B);
        vijp_emu_dense_vjp_on(set, &L, th, B, Gy, e, f);
        expect_same(vjp, e, n * B, "vjp", set->name, fmt, m, n, B);
        vijp_emu_dense_vjp_param_on(set, &L, X, B, Gy, e, f);
        expect_same(gt, e, P, "vjp_param", set->name, fmt, m, n, B);
        vo_vec_free(e, outs);
    }
    vo_vec_free(th, P), vo_vec_free(X, n * B), vo_vec_free(Gy, m * B);
    vo_vec_free(fwd, m * B), vo_vec_free(jvp, m * B), vo_vec_free(vjp, n * B), vo_vec_free(gt, P);
    vijp_layer_clear(&L);
}

/* Rows (m for forward, n for vjp) past every multiple of 4, 8, 16 and 32
 * lanes and below one vector; batches 1, one four-column block, a block and
 * a remainder; n of 1 (one term), 7 and 37. */
START_TEST(every_set_matches_oracle)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {3, 7, 1}, {17, 37, 5}, {37, 17, 4}, {33, 7, 6}, {9, 33, 3}, {47, 1, 2}};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 40);
    int sets_run[VIJP_EMU_LANES_COUNT] = {0};
    long rounds = test_iters(1);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        ck_assert(vijp_emu_applies(&f));
        ck_assert_msg(vijp_emu_lanes_kind_of(&f) != VIJP_EMU_LANES_NONE, "%s: no lanes", formats[fi]);
        for (long k = 0; k < rounds; k++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (int wild = 0; wild < 2; wild++)
                    shape_case(&r, &f, formats[fi], shapes[s][0], shapes[s][1], shapes[s][2], wild, sets_run);
    }
    ck_assert(sets_run[0]); /* the portable set always runs; the others where the CPU has them */
}
END_TEST

/* The SIMD sets against the portable one at a width past two full blocks of
 * every vector length and a batch of two blocks and a remainder, with
 * binary32 sums that overflow and underflow: equality again (the portable
 * set is emu.h's scalar code, which the test above holds to the oracle). */
START_TEST(sets_agree_at_width)
{
    static const size_t m = 70, n = 45, B = 11;
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 41);
    const vijp_emu_lanes *ref = vijp_emu_lanes_set(0);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        char spec[64];
        snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
        vijp_layer L;
        ck_assert_int_eq(vijp_layer_parse(&L, spec, 0, NULL), 0);
        size_t P = m * n + m, outs = P + m * B + n * B;
        mpfr_t *th = draw_vec(&r, &f, P, 1), *X = draw_vec(&r, &f, n * B, 1), *Gy = draw_vec(&r, &f, m * B, 1);
        mpfr_t *want = filled(outs, &f, 1), *got = filled(outs, &f, 3);
        for (int s = 1; s < VIJP_EMU_LANES_COUNT; s++) {
            const vijp_emu_lanes *set = vijp_emu_lanes_set(s);
            if (!set) continue;
            vijp_emu_dense_forward_on(ref, &L, th, X, B, want, 1, &f), vijp_emu_dense_forward_on(set, &L, th, X, B, got, 1, &f);
            expect_same(want, got, m * B, "forward against ref", set->name, formats[fi], m, n, B);
            vijp_emu_dense_vjp_on(ref, &L, th, B, Gy, want, &f), vijp_emu_dense_vjp_on(set, &L, th, B, Gy, got, &f);
            expect_same(want, got, n * B, "vjp against ref", set->name, formats[fi], m, n, B);
            vijp_emu_dense_vjp_param_on(ref, &L, X, B, Gy, want, &f), vijp_emu_dense_vjp_param_on(set, &L, X, B, Gy, got, &f);
            expect_same(want, got, P, "vjp_param against ref", set->name, formats[fi], m, n, B);
        }
        vo_vec_free(th, P), vo_vec_free(X, n * B), vo_vec_free(Gy, m * B), vo_vec_free(want, outs), vo_vec_free(got, outs);
        vijp_layer_clear(&L);
    }
}
END_TEST

/* The elimination's grid i: format i's arithmetic, named in *name. */
static vijp_emu_grid elimination_grid(size_t i, const char **name)
{
    vijp_format f;
    *name = formats[i];
    ck_assert_int_eq(vijp_format_parse(formats[i], &f, NULL), 0);
    return vijp_emu_arith(&f);
}

/* One step y − t·x on g: emu.h's scalar operations, each rounded to g
 * (which tests/t-emu.c holds to the oracle). */
static double elimination_want(vijp_emu_grid g, double y, double t, double x)
{
    return vijp_emu_sub(y, vijp_emu_mul(t, x, g), g);
}

/* The solves' elimination step (axpy_d) on every set: lengths below, at
 * and past each vector length, every format's grid, edge
 * entries and multipliers; each entry against elimination_want
 * (t-emu-dense's solves_match_oracle runs the whole elimination against
 * vo_ge_solve on the active set). */
START_TEST(elimination_step_every_set)
{
    static const size_t lengths[] = {0, 1, 3, 4, 5, 8, 9, 17, 33};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 42);
    double x[40], y[40], want[40];
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        const char *name;
        vijp_emu_grid g = elimination_grid(fi, &name);
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
            for (int rep = 0; rep < 4; rep++) {
                size_t n = lengths[li];
                double t = draw(&r, g, rep & 1);
                for (size_t k = 0; k < n; k++) x[k] = draw(&r, g, rep & 1), y[k] = draw(&r, g, rep & 1);
                for (size_t k = 0; k < n; k++) want[k] = elimination_want(g, y[k], t, x[k]);
                for (int s = 0; s < VIJP_EMU_LANES_COUNT; s++) {
                    const vijp_emu_lanes *set = vijp_emu_lanes_set(s);
                    if (!set) continue;
                    double got[40];
                    memcpy(got, y, sizeof got);
                    set->axpy_d(n, t, x, got, g);
                    for (size_t k = 0; k < n; k++) {
                        int ok = (isnan(want[k]) && isnan(got[k])) || (want[k] == got[k] && signbit(want[k]) == signbit(got[k]));
                        ck_assert_msg(ok, "axpy_d on set %s in %s, n %zu, entry %zu: y %a, t %a, x %a: want %a, got %a",
                                      set->name, name, n, k, y[k], t, x[k], want[k], got[k]);
                    }
                }
            }
    }
}
END_TEST

/* axpy_many_d (the trailing update's panel of steps on one row) on every
 * set: k = 0 to 5 steps with rows of x 40 apart, lengths around each
 * vector length (four vectors at a time too), every format's grid and
 * edge entries; each entry against the k steps of
 * elimination_want in order.  A set that applied the steps out of order,
 * or rounded y only after the last, fails here. */
START_TEST(elimination_steps_in_a_row_every_set)
{
    static const size_t lengths[] = {0, 1, 3, 4, 5, 8, 9, 17, 33, 40};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 43);
    double x[5 * 40], y[40], t[5], want[40];
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        const char *name;
        vijp_emu_grid g = elimination_grid(fi, &name);
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
            for (size_t steps = 0; steps <= 5; steps++)
                for (int rep = 0; rep < 2; rep++) {
                    size_t n = lengths[li];
                    for (size_t c = 0; c < steps; c++) t[c] = draw(&r, g, rep & 1);
                    for (size_t k = 0; k < 5 * 40; k++) x[k] = draw(&r, g, rep & 1);
                    for (size_t k = 0; k < n; k++) y[k] = want[k] = draw(&r, g, rep & 1);
                    for (size_t c = 0; c < steps; c++)
                        for (size_t k = 0; k < n; k++) want[k] = elimination_want(g, want[k], t[c], x[c * 40 + k]);
                    for (int s = 0; s < VIJP_EMU_LANES_COUNT; s++) {
                        const vijp_emu_lanes *set = vijp_emu_lanes_set(s);
                        if (!set) continue;
                        double got[40];
                        memcpy(got, y, sizeof got);
                        set->axpy_many_d(n, steps, t, x, 40, got, g);
                        for (size_t k = 0; k < n; k++) {
                            int ok = (isnan(want[k]) && isnan(got[k])) ||
                                     (want[k] == got[k] && signbit(want[k]) == signbit(got[k]));
                            ck_assert_msg(ok, "axpy_many_d on set %s in %s, n %zu, %zu steps, entry %zu: want %a, got %a",
                                          set->name, name, n, steps, k, want[k], got[k]);
                        }
                    }
                }
    }
}
END_TEST

/* The lanes and src/ddot run on the set the kernel table runs on
 * (VIJP_KERNELS=ref: ref; avx2: avx2, or ref where a family lacks it;
 * otherwise the widest the family has), so that VIJP_KERNELS steers every
 * family at once.  make check runs this under the machine's default;
 * VIJP_KERNELS=ref and =avx2 runs of this suite check the other two. */
static const char *expected_set(const char *table, const char *const names[3], const int have[3])
{
    if (!strcmp(table, "ref")) return names[0];
    if (!strcmp(table, "avx2")) return have[1] ? names[1] : names[0];
    return have[2] ? names[2] : have[1] ? names[1] : names[0];
}

START_TEST(families_follow_the_table)
{
    static const char *const names[3] = {"ref", "avx2", "avx512"};
    const char *table = vijp_kernels_active()->name;
    int lanes[3], dd[3];
    for (int i = 0; i < 3; i++) lanes[i] = vijp_emu_lanes_set(i) != NULL, dd[i] = vijp_dd_set(i) != NULL;
    ck_assert_str_eq(vijp_emu_lanes_active()->name, expected_set(table, names, lanes));
    ck_assert_str_eq(vijp_dd_active()->name, expected_set(table, names, dd));
}
END_TEST

Suite *suite_emu_lanes(void)
{
    Suite *s = suite_create("emu_lanes");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_set_matches_oracle);
    tcase_add_test(tc, sets_agree_at_width);
    tcase_add_test(tc, elimination_step_every_set);
    tcase_add_test(tc, elimination_steps_in_a_row_every_set);
    tcase_add_test(tc, families_follow_the_table);
    suite_add_tcase(s, tc);
    return s;
}

/* src/emu/dense.c, the dense layer's operators run natively in the narrow
 * formats, against the oracle's (oracles/dense.c) called directly: every
 * output the same number, with the same sign of zero, NaN where the oracle
 * has NaN, and the same error code.  No tolerance: the claim is equality
 * (the same operations in the same order, each equal to the oracle's by
 * the theorem src/emu/emu.h cites).  The inputs cover what could tell a
 * different order or pivot apart: subnormals, ±0, values near overflow,
 * Inf and NaN entries, pivot ties, exactly and nearly singular matrices. */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "oracles/oracles.h"
#include "emu/conv.h"
#include "emu/dense.h"
#include "emu/inv1x1.h"
#include "emu/emu.h"
#include "layer/route.h"
#include "format/mpfr_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const formats[] = {"binary32",          "binary16",      "bfloat16",      "bfloat16+binary32",
                                      "binary16+binary32", "tf32+binary32", "e4m3+binary32", "mxfp8+binary32"};
#define N_FORMATS (sizeof formats / sizeof *formats)

enum { CLEAN, WILD, TIES, N_KINDS };

/* One entry of the arithmetic grid g: CLEAN ordinary values of either sign;
 * TIES small integers (equal magnitudes: pivot ties, exact cancellation);
 * WILD every class — ±0, subnormals, near overflow, just normal, powers of
 * two — and now and then ±Inf or NaN. */
static double draw(vijp_rng *r, vijp_emu_grid g, int kind)
{
    uint64_t u = vijp_rng_u64(r);
    double s = (u & 1) ? -1 : 1, m = 0.5 + 0.5 * vijp_rng_uniform(r);
    if (kind == CLEAN) return vijp_emu_round(vijp_rng_normal(r), g);
    if (kind == TIES) return (double)((int)((u >> 1) % 5) - 2);
    switch ((u >> 1) % 32) {
    case 0: return (u >> 8) % 2 ? s * INFINITY : NAN;
    case 1: case 2: return s * 0.0;
    case 3: case 4: return vijp_emu_round(s * ldexp(m, g.emin - (int)((u >> 12) % (unsigned)g.p)), g); /* subnormal */
    case 5: case 6: return vijp_emu_round(s * ldexp(m, g.emax - (int)((u >> 12) % 3)), g); /* near overflow */
    case 7: return vijp_emu_round(s * ldexp(m, g.emin + g.p - 1 + (int)((u >> 12) % 4)), g); /* just normal */
    case 8: return s * ldexp(1.0, (int)((u >> 12) % 20) - 10);
    default: return vijp_emu_round(s * m * 4, g);
    }
}

/* A vector of count entries of f (mixed formats: half the time on the
 * storage grid, as the layer's data are, else anywhere on the arithmetic
 * grid, which the operators must handle alike).  Formats emu does not
 * apply to (mpfr:P) get binary32 values, which every one of them holds. */
static mpfr_t *draw_vec(vijp_rng *r, const vijp_format *f, size_t count, int kind, double *d)
{
    const vijp_emu_grid binary32 = {24, -125, 128};
    vijp_emu_grid g = vijp_emu_applies(f) ? vijp_emu_arith(f) : binary32, st = f->mixed ? vijp_emu_store(f) : g;
    int stored = f->mixed && (vijp_rng_u64(r) & 1);
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) {
        d[i] = draw(r, g, kind);
        if (stored) d[i] = vijp_emu_round(d[i], st);
        mpfr_set_d(v[i], d[i], MPFR_RNDN);
    }
    return v;
}

/* The same values in a second array (the emu path's copy). */
static mpfr_t *copy_vec(const double *d, size_t count, const vijp_format *f)
{
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) mpfr_set_d(v[i], d[i], MPFR_RNDN);
    return v;
}

/* Output arrays, filled with different values for the two paths so that an
 * entry one path leaves unwritten shows. */
static mpfr_t *out_vec(size_t count, const vijp_format *f, double fill)
{
    mpfr_t *v = vo_vec_new(count, f);
    for (size_t i = 0; i < count; i++) mpfr_set_d(v[i], fill, MPFR_RNDN);
    return v;
}

static void expect_same(mpfr_t *oracle, mpfr_t *emu, size_t count, const char *what, const char *fmt,
                        const vijp_layer *L, size_t B, long cs)
{
    for (size_t i = 0; i < count; i++) {
        double a = mpfr_get_d(oracle[i], MPFR_RNDN), b = mpfr_get_d(emu[i], MPFR_RNDN);
        int ok = (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
        ck_assert_msg(ok, "%s in %s, dense %zux%zu, batch %zu, case %ld, entry %zu: oracle %a, emu %a", what, fmt,
                      L->out, L->in, B, cs, i, a, b);
    }
}

static void dense(vijp_layer *L, size_t m, size_t n)
{
    char spec[64];
    snprintf(spec, sizeof spec, "dense:%zux%zu", m, n);
    ck_assert_int_eq(vijp_layer_parse(L, spec, 0, NULL), 0);
}

static size_t small(vijp_rng *r, size_t most)
{
    return 1 + (size_t)(vijp_rng_u64(r) % most);
}

/* forward, jvp, vjp and vjp_param on one random case. */
static void products_case(vijp_rng *r, const vijp_format *f, const char *fmt, long cs)
{
    size_t m = small(r, cs % 7 ? 9 : 40), n = small(r, cs % 5 ? 9 : 40), B = small(r, 5), P = m * n + m;
    int kind = (int)(vijp_rng_u64(r) % N_KINDS);
    vijp_layer L;
    dense(&L, m, n);
    double *d = vijp_alloc_array(P + 2 * n * B + m * B, sizeof *d), *dth = d, *dx = d + P, *du = dx + n * B, *dg = du + n * B;
    mpfr_t *th = draw_vec(r, f, P, kind, dth), *X = draw_vec(r, f, n * B, kind, dx);
    mpfr_t *U = draw_vec(r, f, n * B, kind, du), *Gy = draw_vec(r, f, m * B, kind, dg);
    mpfr_t *th2 = copy_vec(dth, P, f), *X2 = copy_vec(dx, n * B, f), *U2 = copy_vec(du, n * B, f), *Gy2 = copy_vec(dg, m * B, f);
    size_t outs = P + m * B + n * B; /* room for every operator's output */
    mpfr_t *o = out_vec(outs, f, 1), *e = out_vec(outs, f, 3);

    vo_dense_forward(&L, th, X, B, o, f), vijp_emu_dense_forward(&L, th2, X2, B, e, f);
    expect_same(o, e, m * B, "forward", fmt, &L, B, cs);
    vo_dense_jvp(&L, th, X, B, U, o, f), vijp_emu_dense_jvp(&L, th2, X2, B, U2, e, f);
    expect_same(o, e, m * B, "jvp", fmt, &L, B, cs);
    vo_dense_vjp(&L, th, X, B, Gy, o, f), vijp_emu_dense_vjp(&L, th2, X2, B, Gy2, e, f);
    expect_same(o, e, n * B, "vjp", fmt, &L, B, cs);
    vo_dense_vjp_param(&L, th, X, B, Gy, o, f), vijp_emu_dense_vjp_param(&L, th2, X2, B, Gy2, e, f);
    expect_same(o, e, P, "vjp_param", fmt, &L, B, cs);
    expect_same(th, th2, P, "theta (read only)", fmt, &L, B, cs);

    vo_vec_free(th, P), vo_vec_free(X, n * B), vo_vec_free(U, n * B), vo_vec_free(Gy, m * B);
    vo_vec_free(th2, P), vo_vec_free(X2, n * B), vo_vec_free(U2, n * B), vo_vec_free(Gy2, m * B);
    vo_vec_free(o, outs), vo_vec_free(e, outs), free(d);
    vijp_layer_clear(&L);
}

/* Shapes the square W into what the solves must tell apart: a zero column
 * or row (exactly singular), a repeated column (singular in exact
 * arithmetic, nearly so after rounding), all entries scaled to the edge of
 * the range (overflow, subnormal multipliers); kind TIES gives tied pivots. */
static void shape_matrix(vijp_rng *r, double *W, size_t n, vijp_emu_grid g)
{
    size_t a = (size_t)(vijp_rng_u64(r) % n), b = (size_t)(vijp_rng_u64(r) % n);
    switch (vijp_rng_u64(r) % 6) {
    case 0: for (size_t i = 0; i < n; i++) W[i + a * n] = 0; break;
    case 1: for (size_t k = 0; k < n; k++) W[a + k * n] = 0; break;
    case 2: for (size_t i = 0; i < n; i++) W[i + b * n] = W[i + a * n]; break;
    case 3: for (size_t i = 0; i < n * n; i++) W[i] = vijp_emu_round(ldexp(W[i], g.emax - 3), g); break;
    case 4: for (size_t i = 0; i < n * n; i++) W[i] = vijp_emu_round(ldexp(W[i], g.emin + 2), g); break;
    default: break; /* as drawn */
    }
}

/* The solve on doubles by panels of pw columns (vijp_emu_ge_solve_panel),
 * W loaded as vijp_emu_ge_solve loads it: the oracle's code and solution
 * ro, for every width (1 to 9 against n up to 24: one panel, several, a
 * last one shorter). */
static void panel_solve(mpfr_t *th, int trans, const double *dy, size_t n, size_t B, size_t pw, const vijp_format *f,
                        int rc_o, mpfr_t *ro, const char *fmt, const vijp_layer *L, long cs)
{
    double *A = trans ? vijp_emu_get(th, n * n) : vijp_emu_get_rows(th, n, n);
    double *x = vijp_alloc_array(n * B, sizeof *x);
    memcpy(x, dy, n * B * sizeof *x);
    int rc = vijp_emu_ge_solve_panel(n, A, x, B, vijp_emu_arith(f), 1, pw);
    ck_assert_msg(rc == rc_o, "solve (trans %d) by panels of %zu in %s, n %zu, case %ld: oracle %d, panels %d", trans,
                  pw, fmt, n, cs, rc_o, rc);
    mpfr_t *xe = copy_vec(x, n * B, f);
    char what[64];
    snprintf(what, sizeof what, "solve %s by panels of %zu", trans ? "Wᵀ" : "W", pw);
    expect_same(ro, xe, n * B, what, fmt, L, B, cs);
    vo_vec_free(xe, n * B), free(A), free(x);
}

/* vijp (square: the solve; m ≠ n: the QR), inverse and the solve itself,
 * both orientations, or (m > n) the fragment and cokernel, on one random case.
 * Counts the singular outcomes in *singular. */
static void solves_case(vijp_rng *r, const vijp_format *f, const char *fmt, long cs, long *singular)
{
    size_t n = small(r, cs % 9 ? 8 : 24), m = cs % 3 ? n : small(r, 12), B = small(r, 5), P = m * n + m;
    int kind = (int)(vijp_rng_u64(r) % N_KINDS);
    vijp_layer L;
    dense(&L, m, n);
    size_t k = vo_dense_fragment_count(&L, NULL, NULL, B);
    double *d = vijp_alloc_array(P + n * B + m * B + k, sizeof *d), *dth = d, *dx = d + P, *dy = dx + n * B, *dc = dy + m * B;
    mpfr_t *th = draw_vec(r, f, P, kind, dth), *Gx = draw_vec(r, f, n * B, kind, dx);
    mpfr_t *Y = draw_vec(r, f, m * B, kind, dy), *frag = draw_vec(r, f, k, kind, dc);
    if (m == n) {
        const vijp_emu_grid binary32 = {24, -125, 128};
        shape_matrix(r, dth, n, vijp_emu_applies(f) ? vijp_emu_arith(f) : binary32);
        for (size_t i = 0; i < n * n; i++) mpfr_set_d(th[i], dth[i], MPFR_RNDN);
    }
    mpfr_t *th2 = copy_vec(dth, P, f), *Gx2 = copy_vec(dx, n * B, f), *Y2 = copy_vec(dy, m * B, f), *frag2 = copy_vec(dc, k, f);
    mpfr_t *o = out_vec(m * B, f, 1), *e = out_vec(m * B, f, 3);

    int rc_o = vo_dense_vijp(&L, th, NULL, B, Gx, frag, o, f), rc_e = vijp_emu_dense_vijp(&L, th2, NULL, B, Gx2, frag2, e, f);
    ck_assert_msg(rc_o == rc_e, "vijp in %s, dense %zux%zu, case %ld: oracle returns %d, emu %d", fmt, m, n, cs, rc_o, rc_e);
    if (!rc_o || m == n) /* a failed QR (m ≠ n) leaves gy unwritten; a failed LU leaves it as far as it got */
        expect_same(o, e, m * B, "vijp", fmt, &L, B, cs);
    *singular += rc_o == VIJP_ESINGULAR;
    if (m == n) {
        rc_o = vo_dense_inverse(&L, th, Y, B, o, f), rc_e = vijp_emu_dense_inverse(&L, th2, Y2, B, e, f);
        ck_assert_msg(rc_o == rc_e, "inverse in %s, n %zu, case %ld: oracle returns %d, emu %d", fmt, n, cs, rc_o, rc_e);
        expect_same(o, e, n * B, "inverse", fmt, &L, B, cs);
        for (int trans = 0; trans < 2; trans++) { /* in place on copies of Y */
            mpfr_t *ro = copy_vec(dy, n * B, f), *re = copy_vec(dy, n * B, f);
            rc_o = vo_ge_solve(n, th, trans, ro, B, f), rc_e = vijp_emu_ge_solve(n, th2, trans, re, B, f);
            ck_assert_msg(rc_o == rc_e, "solve (trans %d) in %s, n %zu, case %ld: oracle %d, emu %d", trans, fmt, n, cs,
                          rc_o, rc_e);
            expect_same(ro, re, n * B, trans ? "solve Wᵀ" : "solve W", fmt, &L, B, cs);
            panel_solve(th, trans, dy, n, B, 1 + (size_t)cs % 9, f, rc_o, ro, fmt, &L, cs);
            *singular += rc_o == VIJP_ESINGULAR;
            vo_vec_free(ro, n * B), vo_vec_free(re, n * B);
        }
    } else {
        if (m > n) { /* the fragment of gy (here Y) and the cokernel basis, from the same QR */
            size_t room = k + m * (m - n);
            mpfr_t *qo = out_vec(room, f, 1), *qe = out_vec(room, f, 3);
            vo_dense_fragment(&L, th, NULL, B, Y, qo, f), vijp_emu_dense_fragment(&L, th2, NULL, B, Y2, qe, f);
            expect_same(qo, qe, k, "fragment", fmt, &L, B, cs);
            rc_o = vo_dense_cokernel(&L, th, NULL, qo, f), rc_e = vijp_emu_dense_cokernel(&L, th2, NULL, qe, f);
            ck_assert_msg(rc_o == rc_e, "cokernel in %s, dense %zux%zu, case %ld: oracle %d, emu %d", fmt, m, n, cs, rc_o, rc_e);
            if (!rc_o) expect_same(qo, qe, m * (m - n), "cokernel", fmt, &L, B, cs); /* unwritten on failure */
            vo_vec_free(qo, room), vo_vec_free(qe, room);
        }
        ck_assert_int_eq(vo_dense_inverse(&L, th, Y, B, o, f), VIJP_EUNSUPPORTED);
        ck_assert_int_eq(vijp_emu_dense_inverse(&L, th2, Y2, B, e, f), VIJP_EUNSUPPORTED);
    }
    vo_vec_free(th, P), vo_vec_free(Gx, n * B), vo_vec_free(Y, m * B), vo_vec_free(frag, k);
    vo_vec_free(th2, P), vo_vec_free(Gx2, n * B), vo_vec_free(Y2, m * B), vo_vec_free(frag2, k);
    vo_vec_free(o, m * B), vo_vec_free(e, m * B), free(d);
    vijp_layer_clear(&L);
}

/* Gaussian elimination with partial pivoting as vo_ge_solve performs it,
 * unblocked, in emu.h's scalar operations on A row-major and r (n × B,
 * column-major): step c takes the first row of largest |A(i, c)| at or
 * below c, then every row below it, its multiplier, its entries past c
 * and its right-hand sides; then back substitution, k ascending, then the
 * division.  VIJP_ESINGULAR at a zero pivot. */
static int plain_ge_solve(size_t n, double *A, double *r, size_t B, vijp_emu_grid g)
{
#define A_(i, k) A[(i) * n + (k)]
    for (size_t c = 0; c < n; c++) {
        size_t p = c;
        for (size_t i = c + 1; i < n; i++)
            if (fabs(A_(i, c)) > fabs(A_(p, c))) p = i;
        if (A_(p, c) == 0) return VIJP_ESINGULAR;
        for (size_t k = 0; k < n; k++) {
            double t = A_(c, k);
            A_(c, k) = A_(p, k), A_(p, k) = t;
        }
        for (size_t j = 0; j < B; j++) {
            double t = r[c + j * n];
            r[c + j * n] = r[p + j * n], r[p + j * n] = t;
        }
        for (size_t i = c + 1; i < n; i++) {
            double l = vijp_emu_div(A_(i, c), A_(c, c), g);
            for (size_t k = c + 1; k < n; k++) A_(i, k) = vijp_emu_sub(A_(i, k), vijp_emu_mul(l, A_(c, k), g), g);
            for (size_t j = 0; j < B; j++) r[i + j * n] = vijp_emu_sub(r[i + j * n], vijp_emu_mul(l, r[c + j * n], g), g);
        }
    }
    for (size_t j = 0; j < B; j++)
        for (size_t i = n; i-- > 0;) {
            double *ri = &r[i + j * n];
            for (size_t k = i + 1; k < n; k++) *ri = vijp_emu_sub(*ri, vijp_emu_mul(A_(i, k), r[k + j * n], g), g);
            *ri = vijp_emu_div(*ri, A_(i, i), g);
        }
    return 0;
#undef A_
}

/* The solve at widths past the trailing update's tiles and several panels
 * (n = 200, 300; panels of 32 and 7; one thread and two), against the
 * plain elimination above, bit for bit, in a format of each arithmetic
 * kind (binary32's float lanes, bfloat16's and binary16's rounding on
 * doubles, a mixed format's binary32 grid).  solves_match_oracle holds the
 * same code to vo_ge_solve up to n = 24, inside one tile. */
START_TEST(wide_solves_match_plain_elimination)
{
    static const char *const fmts[] = {"binary32", "bfloat16", "binary16", "bfloat16+binary32"};
    static const size_t widths[] = {200, 300};
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 7);
    for (size_t fi = 0; fi < 4; fi++)
        for (size_t wi = 0; wi < 2; wi++) {
            vijp_format f;
            ck_assert_int_eq(vijp_format_parse(fmts[fi], &f, NULL), 0);
            vijp_emu_grid g = vijp_emu_arith(&f);
            size_t n = widths[wi], B = 3;
            double *A0 = malloc(n * n * sizeof *A0), *r0 = malloc(n * B * sizeof *r0);
            for (size_t i = 0; i < n * n; i++) A0[i] = draw(&r, g, 0);
            for (size_t i = 0; i < n * B; i++) r0[i] = draw(&r, g, 0);
            double *A = malloc(n * n * sizeof *A), *want = malloc(n * B * sizeof *want);
            memcpy(A, A0, n * n * sizeof *A), memcpy(want, r0, n * B * sizeof *want);
            ck_assert_int_eq(plain_ge_solve(n, A, want, B, g), 0);
            for (int threads = 1; threads <= 2; threads++)
                for (size_t panel = 7; panel <= 32; panel += 25) {
                    double *got = malloc(n * B * sizeof *got);
                    memcpy(A, A0, n * n * sizeof *A), memcpy(got, r0, n * B * sizeof *got);
                    ck_assert_int_eq(vijp_emu_ge_solve_panel(n, A, got, B, g, threads, panel), 0);
                    for (size_t i = 0; i < n * B; i++)
                        ck_assert_msg(!memcmp(&got[i], &want[i], sizeof *got),
                                      "%s, n %zu, panels of %zu, %d threads: entry %zu is %a, the plain elimination's %a",
                                      fmts[fi], n, panel, threads, i, got[i], want[i]);
                    free(got);
                }
            free(A0), free(r0), free(A), free(want);
        }
}
END_TEST

START_TEST(products_match_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 10);
    long cases = test_iters(150);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        ck_assert(vijp_emu_applies(&f));
        for (long cs = 0; cs < cases; cs++) products_case(&r, &f, formats[fi], cs);
    }
}
END_TEST

START_TEST(solves_match_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 11);
    long cases = test_iters(300);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        long singular = 0;
        for (long cs = 0; cs < cases; cs++) solves_case(&r, &f, formats[fi], cs, &singular);
        /* the test must have met both outcomes, or it says little */
        ck_assert_msg(singular > 0 && singular < 3 * cases, "%s: %ld singular solves of %ld", formats[fi], singular,
                      3 * cases);
    }
}
END_TEST

/* Hand-made pivot ties: |−2| = |2| in the first column, the pivot is the
 * first of them (row 1), and the solution shows which row was taken. */
START_TEST(pivot_tie_hand_case)
{
    vijp_format f;
    ck_assert_int_eq(vijp_format_parse("bfloat16", &f, NULL), 0);
    const double W[9] = {1, -2, 2, 3, 1, 1, 1, 5, -1}; /* column-major */
    const double y[3] = {1, 0.5, -3};
    mpfr_t *A = copy_vec(W, 9, &f), *ro = copy_vec(y, 3, &f), *re = copy_vec(y, 3, &f);
    ck_assert_int_eq(vo_ge_solve(3, A, 0, ro, 1, &f), 0);
    ck_assert_int_eq(vijp_emu_ge_solve(3, A, 0, re, 1, &f), 0);
    vijp_layer L;
    dense(&L, 3, 3);
    expect_same(ro, re, 3, "tied pivots", "bfloat16", &L, 1, 0);
    vijp_layer_clear(&L);
    vo_vec_free(A, 9), vo_vec_free(ro, 3), vo_vec_free(re, 3);
}
END_TEST

/* conv1d's and conv2d's operators (src/emu/conv.c: fused terms in the
 * oracle's order; the oracle's explicit Jacobian and the native solves)
 * against the oracle's: zero, circular and reflect padding (square J:
 * elimination), strided or fewer output channels (wide J: QR), more output
 * channels (tall J: QR and its fragment), in one and two dimensions. */
START_TEST(conv_matches_oracle)
{
    static const struct { const char *spec; size_t width; } convs[] = {
        {"conv1d:2x3", 8}, {"conv1d:2x3:circular", 8}, {"conv1d:2x3s2", 8}, {"conv1d:3x3", 12},
        {"conv2d:1x3x4", 16}, {"conv2d:1x3x4:circular", 16}, {"conv1d:2x5:circular", 10}, {"conv2d:1x3x4s2", 16},
        /* output channels, even kernels, reflect (taps folded into J's sums), valid */
        {"conv1d:2x4:out=3", 8}, {"conv1d:2x3:out=1:reflect", 8}, {"conv2d:1x3x4:reflect", 16},
        {"conv2d:2x2x3s2:out=3:pad=0", 24},
    };
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 14);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        for (long cs = 0; cs < test_iters(60); cs++) {
            size_t ci = (size_t)cs % (sizeof convs / sizeof *convs), B = small(&r, 3);
            vijp_layer L;
            ck_assert_int_eq(vijp_layer_parse(&L, convs[ci].spec, convs[ci].width, NULL), 0);
            size_t P = L.type->param_count(&L), N = L.in, M = L.out;
            int kind = (int)(vijp_rng_u64(&r) % N_KINDS);
            double *d = vijp_alloc_array(P + N * B + M * B, sizeof *d), *dx = d + P, *dy = dx + N * B;
            mpfr_t *th = draw_vec(&r, &f, P, kind, d), *Gx = draw_vec(&r, &f, N * B, kind, dx), *Y = draw_vec(&r, &f, M * B, kind, dy);
            size_t outs = P + N * B + M * B;
            mpfr_t *o = out_vec(outs, &f, 1), *e = out_vec(outs, &f, 3);
            vo_conv1d_forward(&L, th, Gx, B, o, &f), vijp_emu_conv_forward(&L, th, Gx, B, e, &f);
            expect_same(o, e, M * B, "conv forward", formats[fi], &L, B, cs);
            vo_conv1d_jvp(&L, th, NULL, B, Gx, o, &f), vijp_emu_conv_jvp(&L, th, NULL, B, Gx, e, &f);
            expect_same(o, e, M * B, "conv jvp", formats[fi], &L, B, cs);
            vo_conv1d_vjp(&L, th, NULL, B, Y, o, &f), vijp_emu_conv_vjp(&L, th, NULL, B, Y, e, &f);
            expect_same(o, e, N * B, "conv vjp", formats[fi], &L, B, cs);
            vo_conv1d_vjp_param(&L, th, Gx, B, Y, o, &f), vijp_emu_conv_vjp_param(&L, th, Gx, B, Y, e, &f);
            expect_same(o, e, P, "conv vjp_param", formats[fi], &L, B, cs);
            /* tall J (more outputs): the fragments, then the vijp with one */
            size_t nf = vo_conv1d_fragment_count(&L, th, NULL, B);
            double *df = vijp_alloc_array(nf + 1, sizeof *df);
            mpfr_t *fr = draw_vec(&r, &f, nf + 1, kind, df), *fo = out_vec(nf + 1, &f, 1), *fe = out_vec(nf + 1, &f, 3);
            if (nf) {
                vo_conv1d_fragment(&L, th, NULL, B, Y, fo, &f), vijp_emu_conv_fragment(&L, th, NULL, B, Y, fe, &f);
                expect_same(fo, fe, nf, "conv fragment", formats[fi], &L, B, cs);
            }
            int rc_o = vo_conv1d_vijp(&L, th, NULL, B, Gx, nf ? fr : NULL, o, &f),
                rc_e = vijp_emu_conv_vijp(&L, th, NULL, B, Gx, nf ? fr : NULL, e, &f);
            vo_vec_free(fr, nf + 1), vo_vec_free(fo, nf + 1), vo_vec_free(fe, nf + 1);
            free(df);
            ck_assert_msg(rc_o == rc_e, "%s vijp in %s, case %ld: oracle %d, emu %d", convs[ci].spec, formats[fi], cs, rc_o, rc_e);
            if (!rc_o || M == N) expect_same(o, e, M * B, convs[ci].spec, formats[fi], &L, B, cs);
            rc_o = vo_conv1d_inverse(&L, th, Y, B, o, &f), rc_e = vijp_emu_conv_inverse(&L, th, Y, B, e, &f);
            ck_assert_msg(rc_o == rc_e, "%s inverse in %s, case %ld: oracle %d, emu %d", convs[ci].spec, formats[fi], cs, rc_o, rc_e);
            if (M == N) expect_same(o, e, N * B, convs[ci].spec, formats[fi], &L, B, cs);
            vo_vec_free(th, P), vo_vec_free(Gx, N * B), vo_vec_free(Y, M * B), vo_vec_free(o, outs), vo_vec_free(e, outs);
            free(d);
            vijp_layer_clear(&L);
        }
    }
}
END_TEST

/* inv1x1's operators (src/emu/inv1x1.c: the oracle's factors, fused
 * products and the elimination per position natively) against the oracle's.  W is the same at every
 * position, so a singular W fails at the first and leaves all unwritten. */
START_TEST(inv1x1_matches_oracle)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 15);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        long singular = 0;
        for (long cs = 0; cs < test_iters(60); cs++) {
            size_t C = 1 + small(&r, 5), N = C * small(&r, 4), B = small(&r, 3); /* C >= 2: inv1x1 needs it */
            char spec[32];
            snprintf(spec, sizeof spec, "inv1x1:%zu", C);
            vijp_layer L;
            ck_assert_int_eq(vijp_layer_parse(&L, spec, N, NULL), 0);
            size_t P = L.type->param_count(&L);
            int kind = (int)(vijp_rng_u64(&r) % N_KINDS);
            double *d = vijp_alloc_array(P + 2 * N * B, sizeof *d);
            mpfr_t *th = draw_vec(&r, &f, P, kind, d), *R = draw_vec(&r, &f, N * B, kind, d + P);
            mpfr_t *o = out_vec(N * B + P, &f, 1), *e = out_vec(N * B + P, &f, 3), *X = draw_vec(&r, &f, N * B, kind, d + P + N * B);
            vo_inv1x1_forward(&L, th, X, B, o, &f), vijp_emu_inv1x1_forward(&L, th, X, B, e, &f);
            expect_same(o, e, N * B, "inv1x1 forward", formats[fi], &L, B, cs);
            vo_inv1x1_jvp(&L, th, X, B, R, o, &f), vijp_emu_inv1x1_jvp(&L, th, X, B, R, e, &f);
            expect_same(o, e, N * B, "inv1x1 jvp", formats[fi], &L, B, cs);
            vo_inv1x1_vjp(&L, th, X, B, R, o, &f), vijp_emu_inv1x1_vjp(&L, th, X, B, R, e, &f);
            expect_same(o, e, N * B, "inv1x1 vjp", formats[fi], &L, B, cs);
            vo_inv1x1_vjp_param(&L, th, X, B, R, o, &f), vijp_emu_inv1x1_vjp_param(&L, th, X, B, R, e, &f);
            expect_same(o, e, P, "inv1x1 vjp_param", formats[fi], &L, B, cs);
            for (int inverse = 0; inverse < 2; inverse++) {
                int rc_o = inverse ? vo_inv1x1_inverse(&L, th, R, B, o, &f) : vo_inv1x1_vijp(&L, th, NULL, B, R, NULL, o, &f);
                int rc_e = inverse ? vijp_emu_inv1x1_inverse(&L, th, R, B, e, &f) : vijp_emu_inv1x1_vijp(&L, th, NULL, B, R, NULL, e, &f);
                ck_assert_msg(rc_o == rc_e, "%s %s in %s, case %ld: oracle %d, emu %d", spec, inverse ? "inverse" : "vijp",
                              formats[fi], cs, rc_o, rc_e);
                if (!rc_o) expect_same(o, e, N * B, inverse ? "inv1x1 inverse" : "inv1x1 vijp", formats[fi], &L, B, cs);
                singular += rc_o != 0;
            }
            vo_vec_free(th, P), vo_vec_free(R, N * B), vo_vec_free(X, N * B), vo_vec_free(o, N * B + P), vo_vec_free(e, N * B + P);
            free(d);
            vijp_layer_clear(&L);
        }
        ck_assert_msg(singular < 2 * test_iters(60), "%s: every inv1x1 solve singular", formats[fi]);
    }
}
END_TEST

/* The native path's reader (io.h: MPFR's fields copied into binary64's)
 * gives mpfr_get_d's double, sign of zero included, on every class of
 * value, in each format's precision and in 53 bits. */
START_TEST(reader_matches_mpfr_get_d)
{
    vijp_rng r;
    vijp_rng_seed(&r, test_seed() + 13);
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(formats[fi], &f, NULL), 0);
        vijp_emu_grid g = vijp_emu_arith(&f);
        mpfr_t v, w;
        mpfr_init2(v, f.prec), mpfr_init2(w, 53);
        for (long i = 0; i < test_iters(5000); i++) {
            double d = draw(&r, g, (int)(i % N_KINDS)), e = ldexp(vijp_rng_normal(&r), (int)(vijp_rng_u64(&r) % 2000) - 1000);
            mpfr_set_d(v, d, MPFR_RNDN), mpfr_set_d(w, e, MPFR_RNDN);
            double a = vijp_emu_get1(v), b = mpfr_get_d(v, MPFR_RNDN), a2 = vijp_emu_get1(w), b2 = mpfr_get_d(w, MPFR_RNDN);
            ck_assert_msg((isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)), "%s: %a read as %a", formats[fi], b, a);
            ck_assert_msg(a2 == b2 && signbit(a2) == signbit(b2), "53 bits: %a read as %a", b2, a2);
        }
        mpfr_clears(v, w, (mpfr_ptr)0);
    }
}
END_TEST

/* A format's route (src/layer/route.h) is chosen in one place, and each
 * format takes the one it must: mpfr:P the oracle (the emulation assumes at
 * most 24 bits and computes NaN there), the narrow formats the emulation,
 * FORMAT@SET the native operators.  Checked on the route and on values:
 * dense forward, vjp and vijp through vijp_layer_* in mpfr:64 and mpfr:30
 * equal the oracle's own, bit for bit. */
START_TEST(each_format_takes_its_route)
{
    static const struct {
        const char *fmt;
        vijp_route_kind kind;
    } want[] = {
        {"double", VIJP_ROUTE_DOUBLE},          {"double@ref", VIJP_ROUTE_DOUBLE},
        {"binary32@ref", VIJP_ROUTE_FLOAT},     {"bfloat16+binary32@ref", VIJP_ROUTE_FLOAT},
        {"binary32", VIJP_ROUTE_EMULATED},      {"bfloat16", VIJP_ROUTE_EMULATED},
        {"binary16+binary32", VIJP_ROUTE_EMULATED}, {"tf32+binary32", VIJP_ROUTE_EMULATED},
        {"mpfr:64", VIJP_ROUTE_MPFR},           {"mpfr:30", VIJP_ROUTE_MPFR},
    };
    const vijp_layer_type *D = vijp_layer_type_find("dense");
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        vijp_format f;
        ck_assert_int_eq(vijp_format_parse(want[k].fmt, &f, NULL), 0);
        vijp_route r = vijp_route_of(&f);
        ck_assert_msg(r.kind == want[k].kind, "%s: route %d, want %d", want[k].fmt, (int)r.kind, (int)want[k].kind);
        ck_assert_msg(r.kind > VIJP_ROUTE_FLOAT ? !r.cx.k : !!r.cx.k, "%s: kernels where there are none", want[k].fmt);
        if (r.kind != VIJP_ROUTE_DOUBLE)
            ck_assert_msg(vijp_route_mp_ops(D, &r) == (r.kind == VIJP_ROUTE_MPFR ? D->mp : D->emu), "%s", want[k].fmt);
    }
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + 12);
    const char *const wide[] = {"mpfr:64", "mpfr:30"};
    for (size_t fi = 0; fi < 2; fi++) {
        vijp_format f;
        vijp_net net;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_format_parse(wide[fi], &f, NULL), 0);
        ck_assert_msg(!vijp_net_build(&net, "dense:17", 1, 17, &err), "%s", err.msg);
        ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 3, &err));
        const vijp_layer *L = &net.layers[0];
        size_t n = L->in, B = 4;
        vijp_mat th, X, G, Y, O;
        ck_assert(!vijp_net_params(&net, &f, &th, &err));
        vijp_mat_init(&X, n, B, &f), vijp_mat_init(&G, n, B, &f), vijp_mat_init(&Y, n, B, &f), vijp_mat_init(&O, n, B, &f);
        for (size_t i = 0; i < n * B; i++)
            mpfr_set_d(X.m[i], vijp_rng_normal(&rng), MPFR_RNDN), mpfr_set_d(G.m[i], vijp_rng_normal(&rng), MPFR_RNDN);
        for (int op = 0; op < 3; op++) {
            int rc = op == 0 ? vijp_layer_forward(L, &th, &X, &Y, &err) : op == 1 ? vijp_layer_vjp(L, &th, &X, &G, &Y, &err)
                                                                           : vijp_layer_vijp(L, &th, &X, &G, NULL, &Y, &err);
            ck_assert_msg(!rc, "%s", err.msg);
            if (op == 0) vo_dense_forward(L, th.m, X.m, B, O.m, &f);
            else if (op == 1) vo_dense_vjp(L, th.m, X.m, B, G.m, O.m, &f);
            else ck_assert(!vo_dense_vijp(L, th.m, X.m, B, G.m, NULL, O.m, &f));
            for (size_t i = 0; i < n * B; i++)
                ck_assert_msg(mpfr_equal_p(Y.m[i], O.m[i]), "%s op %d entry %zu: %a, oracle %a", wide[fi], op, i,
                              mpfr_get_d(Y.m[i], MPFR_RNDN), mpfr_get_d(O.m[i], MPFR_RNDN));
        }
        vijp_mat_clear(&X), vijp_mat_clear(&G), vijp_mat_clear(&Y), vijp_mat_clear(&O), vijp_mat_clear(&th);
        vijp_net_free(&net);
    }
}
END_TEST

Suite *suite_emu_dense(void)
{
    Suite *s = suite_create("emu_dense");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, products_match_oracle);
    tcase_add_test(tc, solves_match_oracle);
    tcase_add_test(tc, wide_solves_match_plain_elimination);
    tcase_add_test(tc, pivot_tie_hand_case);
    tcase_add_test(tc, each_format_takes_its_route);
    tcase_add_test(tc, reader_matches_mpfr_get_d);
    tcase_add_test(tc, conv_matches_oracle);
    tcase_add_test(tc, inv1x1_matches_oracle);
    suite_add_tcase(s, tc);
    return s;
}

/* Matrices of the emulated formats hold doubles (vijp/mat.h): every helper
 * of src/format/mat.c on a double-held matrix against the same helper on an
 * MPFR-held twin (format/mat_mp.h), which runs the code that was the only
 * route before (the oracle here: vo_store, vo_sub, vijp_mx_line, the
 * tensor scales, stochastic rounding), bit for bit, in every kind of
 * format; and the layer interface's adapter (src/layer/layer.c), which
 * expands double-held operands into MPFR for a type's mp operators, against
 * the same operators on MPFR-held matrices. */
#include "fixtures/testutil.h"
#include "format/mat_mp.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vijp_format parse(const char *name)
{
    vijp_format f;
    ck_assert_msg(vijp_format_parse(name, &f, NULL) == 0, "%s", name);
    return f;
}

/* a matrix of a's shape and format holding MPFR values (+0) */
static void init_mp(vijp_mat *t, size_t rows, size_t cols, const vijp_format *f)
{
    vijp_mat like = {.rows = rows, .cols = cols, .fmt = f};
    vijp_mat_init_mp(t, &like, 0);
}

/* Entry i of d (double-held) and of m (MPFR-held) are the same number: both
 * NaN, or equal with the same sign (zeros of one sign). */
static void expect_same(const vijp_mat *d, const vijp_mat *m, const char *fmt, const char *what)
{
    ck_assert_msg(d->d && !d->m && m->m, "%s %s: holdings", fmt, what);
    for (size_t i = 0, n = vijp_mat_len(d); i < n; i++) {
        double x = d->d[i], y = mpfr_get_d(m->m[i], MPFR_RNDN); /* exact: a value of the format */
        int same = isnan(x) || isnan(y) ? isnan(x) && isnan(y) : x == y && !signbit(x) == !signbit(y);
        ck_assert_msg(same, "%s, %s, entry %zu: double-held %a, MPFR-held %a", fmt, what, i, x, y);
    }
}

/* Doubles that probe a format: ±0, ±Inf, NaN, its subnormals and their
 * midpoints, values past its largest finite one, ties at its precision, and
 * normals over a range of scales. */
static void probes(double *x, size_t n, const vijp_format *f, vijp_rng *r)
{
    double tiny = ldexp(1, (int)f->store_emin - 1), big = f->store_max > 0 ? f->store_max : ldexp(1, (int)f->emax);
    for (size_t i = 0; i < n; i++) {
        double s = i % 2 ? -1 : 1;
        switch (i % 12) {
        case 0: x[i] = s * 0.0; break;
        case 1: x[i] = i % 24 == 1 ? INFINITY : -INFINITY; break;
        case 2: x[i] = i % 36 == 2 ? NAN : s * tiny * (double)(1 + vijp_rng_u64(r) % 5); break; /* subnormals */
        case 3: x[i] = s * tiny * 1.5; break;                                             /* a subnormal midpoint */
        case 4: x[i] = s * big * (1 + ldexp(1, -(int)f->store_prec - 1)); break;        /* just past the top */
        case 5: x[i] = s * big * 4; break;                                                 /* overflow */
        case 6: x[i] = s * (1 + ldexp(1, -(int)f->store_prec)); break;                   /* a tie at 1 */
        default: x[i] = ldexp(vijp_rng_normal(r), (int)(vijp_rng_u64(r) % 24) - 12); break;
        }
    }
}

/* The formats of every kind: plain emulated, FP8 with each overflow rule,
 * mixed, MX, tensor-scaled, tensor-core, ":sr" and ":ftz". */
static const char *const formats[] = {
    "binary32",          "binary16",          "bfloat16",          "e4m3",           "e5m2",
    "e4m3:sat",          "binary32:ftz",      "bfloat16+binary32", "binary16+binary32", "tf32+binary32",
    "e4m3+binary32",     "e5m2:sat+binary32", "mxfp8+binary32",    "mxfp4+binary32", "mxfp6e3m2+binary32",
    "nvfp4+binary32",    "fp8+binary32",      "bfloat16+tc:a100",  "e4m3+tc:h100",   "bfloat16:sr+binary32",
    "bfloat16:ftz+binary32", "bfloat16+binary32:ftz",
};
enum { NF = sizeof formats / sizeof *formats, R = 37, C = 3 }; /* R: past one MX block of 32 */

START_TEST(every_format_holds_doubles)
{
    for (size_t fi = 0; fi < NF; fi++) {
        vijp_format f = parse(formats[fi]);
        ck_assert_msg(vijp_format_values_double(&f), "%s", formats[fi]);
        vijp_mat a;
        vijp_mat_init(&a, 2, 2, &f);
        ck_assert_msg(a.d && !a.m, "%s: vijp_mat_init holds doubles", formats[fi]);
        vijp_mat_clear(&a);
    }
    vijp_format m;
    ck_assert(vijp_format_mpfr(&m, 53, NULL) == 0);
    ck_assert(!vijp_format_values_double(&m)); /* unbounded exponents */
}
END_TEST

/* set_d (both roles), set_entry_d, set_d_line, store_as, store_line,
 * convert (from double and from mpfr:113), get_mpfr. */
START_TEST(setting_and_storing_match_the_mpfr_route)
{
    vijp_format d113, fd = parse("double");
    ck_assert(vijp_format_mpfr(&d113, 113, NULL) == 0);
    vijp_rng r;
    double x[R * C];
    for (size_t fi = 0; fi < NF; fi++) {
        const char *nm = formats[fi];
        vijp_format f = parse(nm);
        test_case_rng(&r, 0x68656c64, (long)fi);
        probes(x, R * C, &f, &r);
        vijp_mat D, M;
        vijp_mat_init(&D, R, C, &f), init_mp(&M, R, C, &f);
        D.sr = M.sr = vijp_sr_key_of(7, VIJP_SR_OUTPUT, 2, 0); /* :sr's stream; the others ignore it */
        vijp_mat_set_d(&D, x), vijp_mat_set_d(&M, x);
        expect_same(&D, &M, nm, "vijp_mat_set_d");
        vijp_mat_set_d_as(&D, x, VIJP_STORE_GRADIENT), vijp_mat_set_d_as(&M, x, VIJP_STORE_GRADIENT);
        expect_same(&D, &M, nm, "vijp_mat_set_d_as gradient");
        for (size_t i = 0; i < R * C; i += 5) vijp_mat_set_entry_d(&D, i, x[i] * 3), vijp_mat_set_entry_d(&M, i, x[i] * 3);
        expect_same(&D, &M, nm, "vijp_mat_set_entry_d");
        vijp_mat_set_d_line(&D, x, 4, C, R), vijp_mat_set_d_line(&M, x, 4, C, R); /* row 4 */
        expect_same(&D, &M, nm, "vijp_mat_set_d_line");

        /* results of the accumulation format, not yet stored: binary32 values */
        vijp_format acc;
        vijp_format_accumulator(&f, &acc);
        vijp_mat A;
        vijp_mat_init(&A, R, C, &acc);
        vijp_mat_set_d(&A, x);
        for (int role = 0; role < 2; role++) {
            for (size_t i = 0; i < R * C; i++) D.d[i] = A.d[i], mpfr_set_d(M.m[i], A.d[i], MPFR_RNDN); /* exact */
            vijp_mat_store_as(&D, (vijp_store_role)role), vijp_mat_store_as(&M, (vijp_store_role)role);
            expect_same(&D, &M, nm, role ? "vijp_mat_store_as gradient" : "vijp_mat_store_as forward");
        }
        for (size_t i = 0; i < R * C; i++) D.d[i] = A.d[i], mpfr_set_d(M.m[i], A.d[i], MPFR_RNDN);
        vijp_mat_store_line(&D, 2, C, R), vijp_mat_store_line(&M, 2, C, R);
        expect_same(&D, &M, nm, "vijp_mat_store_line");
        vijp_mat_clear(&A);

        vijp_mat S, W;
        vijp_mat_init(&S, R, C, &fd), vijp_mat_init(&W, R, C, &d113);
        memcpy(S.d, x, sizeof x);
        for (size_t i = 0; i < R * C; i++) mpfr_set_d(W.m[i], x[i], MPFR_RNDN), mpfr_nextabove(W.m[i]); /* off every grid */
        vijp_mat_convert(&D, &S), vijp_mat_convert(&M, &S);
        expect_same(&D, &M, nm, "vijp_mat_convert from double");
        vijp_mat_convert(&D, &W), vijp_mat_convert(&M, &W);
        expect_same(&D, &M, nm, "vijp_mat_convert from mpfr:113");
        /* and back out, exactly */
        vijp_mat_convert(&W, &D);
        for (size_t i = 0; i < R * C; i++)
            ck_assert_msg(isnan(D.d[i]) ? mpfr_nan_p(W.m[i]) : mpfr_cmp_d(W.m[i], D.d[i]) == 0, "%s convert out", nm);
        mpfr_t *g = malloc(R * C * sizeof *g);
        for (size_t i = 0; i < R * C; i++) mpfr_init2(g[i], 64);
        vijp_mat_get_mpfr(&D, g);
        for (size_t i = 0; i < R * C; i++) {
            ck_assert_msg(isnan(D.d[i]) ? mpfr_nan_p(g[i]) : mpfr_cmp_d(g[i], D.d[i]) == 0, "%s get_mpfr", nm);
            mpfr_clear(g[i]);
        }
        free(g);
        vijp_mat_clear(&S), vijp_mat_clear(&W), vijp_mat_clear(&D), vijp_mat_clear(&M);
    }
}
END_TEST

/* sub, mul_elem and tdot: rounded in the format (accumulation, then
 * storage as gradients), not in double. */
START_TEST(arithmetic_matches_the_mpfr_route)
{
    vijp_rng r;
    double x[R * C], y[R * C];
    for (size_t fi = 0; fi < NF; fi++) {
        const char *nm = formats[fi];
        vijp_format f = parse(nm);
        test_case_rng(&r, 0x61726974, (long)fi);
        probes(x, R * C, &f, &r), probes(y, R * C, &f, &r);
        for (size_t i = 0; i < R * C; i += 3) y[i] = x[i] * (1 + ldexp(1, -(int)f.store_prec)); /* cancellation */
        vijp_mat Db, Dc, Da, Mb, Mc, Ma;
        vijp_mat_init(&Db, R, C, &f), vijp_mat_init(&Dc, R, C, &f), vijp_mat_init(&Da, R, C, &f);
        init_mp(&Mb, R, C, &f), init_mp(&Mc, R, C, &f), init_mp(&Ma, R, C, &f);
        Da.sr = Ma.sr = vijp_sr_key_of(3, VIJP_SR_COTANGENT, 1, 0);
        vijp_mat_set_d(&Db, x), vijp_mat_set_d(&Mb, x), vijp_mat_set_d(&Dc, y), vijp_mat_set_d(&Mc, y);
        vijp_mat_sub(&Da, &Db, &Dc), vijp_mat_sub(&Ma, &Mb, &Mc);
        expect_same(&Da, &Ma, nm, "vijp_mat_sub");
        vijp_mat_mul_elem(&Da, &Db, &Dc), vijp_mat_mul_elem(&Ma, &Mb, &Mc);
        expect_same(&Da, &Ma, nm, "vijp_mat_mul_elem");
        vijp_mat Dr, Mr, Dg, Mg;
        vijp_mat_init(&Dr, C, 1, &f), init_mp(&Mr, C, 1, &f), vijp_mat_init(&Dg, R, 1, &f), init_mp(&Mg, R, 1, &f);
        for (size_t i = 0; i < R; i++) {
            double v = ldexp(vijp_rng_normal(&r), -2);
            vijp_mat_set_entry_d(&Dg, i, v), vijp_mat_set_entry_d(&Mg, i, v);
        }
        for (size_t i = 0; i < R * C; i++) /* finite factors: a sum of them all is the test */
            if (!isfinite(Db.d[i])) Db.d[i] = 0, mpfr_set_zero(Mb.m[i], 1);
        vijp_mat_tdot(&Dr, &Db, &Dg), vijp_mat_tdot(&Mr, &Mb, &Mg);
        expect_same(&Dr, &Mr, nm, "vijp_mat_tdot");
        vijp_mat *all[] = {&Db, &Dc, &Da, &Mb, &Mc, &Ma, &Dr, &Mr, &Dg, &Mg};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) vijp_mat_clear(all[k]);
    }
}
END_TEST

/* A layer operator on double-held matrices, through the adapter (MPFR and
 * emulated routes) or the emulation's native operators, against the same
 * call on MPFR-held ones: forward, vjp, the parameters' gradient, the vijp
 * and the inverse where the type has one, of dense:12, gelu, linear:4x4,
 * conv1d:3x3 and inv1x1:3 (every type with emu_native). */
START_TEST(layer_operators_match_on_mpfr_held_matrices)
{
    static const char *const fmts[] = {"binary32", "bfloat16+binary32", "e4m3", "bfloat16:sr+binary32",
                                       "mxfp8+binary32", "bfloat16+tc:a100", "binary16:ftz+binary32",
                                       "binary32@ref", "bfloat16+binary32@ref"};
    static const char *const specs[] = {"dense:12", "gelu", "linear:4x4", "conv1d:3x3:circular", "inv1x1:3"};
    enum { N = 12, B = 3 };
    vijp_rng r;
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
        for (size_t si = 0; si < sizeof specs / sizeof *specs; si++) {
            vijp_format f = parse(fmts[fi]);
            vijp_layer L;
            ck_assert(vijp_layer_parse(&L, specs[si], N, NULL) == 0);
            size_t P = L.type->param_count(&L);
            test_case_rng(&r, 0x6c6179, (long)(fi * 8 + si));
            double th[N * N + N], xs[N * B], gs[N * B];
            for (size_t i = 0; i < P; i++) th[i] = (i % (N + 1) == 0 ? 2 : 0) + vijp_rng_normal(&r) / 4;
            for (size_t i = 0; i < N * B; i++) xs[i] = vijp_rng_normal(&r), gs[i] = vijp_rng_normal(&r);
            vijp_mat h[2][7]; /* [double-held, MPFR-held]: θ, X, G, Y, Gx, Gθ, Gy */
            for (int k = 0; k < 2; k++) {
                for (int j = 0; j < 7; j++) {
                    size_t rows = j == 0 || j == 5 ? (P ? P : 1) : N, cols = j == 0 || j == 5 ? 1 : B;
                    if (k == 0) vijp_mat_init(&h[k][j], rows, cols, &f);
                    else init_mp(&h[k][j], rows, cols, &f);
                    h[k][j].sr = vijp_sr_key_of(5, VIJP_SR_OUTPUT, (size_t)j, 0);
                }
                if (P) vijp_mat_set_d(&h[k][0], th);
                vijp_mat_set_d(&h[k][1], xs), vijp_mat_set_d_as(&h[k][2], gs, VIJP_STORE_GRADIENT);
                const vijp_mat *T = P ? &h[k][0] : NULL;
                ck_assert(vijp_layer_forward(&L, T, &h[k][1], &h[k][3], NULL) == 0);
                ck_assert(vijp_layer_vjp(&L, T, &h[k][1], &h[k][2], &h[k][4], NULL) == 0);
                if (P) ck_assert(vijp_layer_vjp_param(&L, T, &h[k][1], &h[k][2], &h[k][5], NULL) == 0);
                int rc = vijp_layer_vijp(&L, T, &h[k][1], &h[k][2], NULL, &h[k][6], NULL);
                ck_assert_msg(rc == 0 || rc == VIJP_ESINGULAR, "%s %s vijp: %d", fmts[fi], specs[si], rc);
                if (rc) vijp_mat_zero(&h[k][6]);
                if (L.type->mp->inverse) { /* back from the forward's output, into G's place */
                    rc = vijp_layer_inverse(&L, T, &h[k][3], &h[k][2], NULL);
                    ck_assert_msg(rc == 0 || rc == VIJP_ESINGULAR || rc == VIJP_EUNSUPPORTED, "%s %s inverse: %d",
                                  fmts[fi], specs[si], rc);
                    if (rc) vijp_mat_zero(&h[k][2]);
                }
            }
            static const char *const what[] = {"theta", "X", "G (inverse where the type has one)", "forward", "vjp",
                                       "vjp_param", "vijp"};
            char label[96];
            for (int j = 0; j < 7; j++) {
                snprintf(label, sizeof label, "%s %s", specs[si], what[j]);
                if (j != 0 && j != 5) expect_same(&h[0][j], &h[1][j], fmts[fi], label);
                else if (P) expect_same(&h[0][j], &h[1][j], fmts[fi], label);
            }
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < 7; j++) vijp_mat_clear(&h[k][j]);
            vijp_layer_clear(&L);
        }
}
END_TEST

Suite *suite_mat_held(void)
{
    Suite *s = suite_create("mat_held");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_format_holds_doubles);
    tcase_add_test(tc, setting_and_storing_match_the_mpfr_route);
    tcase_add_test(tc, arithmetic_matches_the_mpfr_route);
    tcase_add_test(tc, layer_operators_match_on_mpfr_held_matrices);
    suite_add_tcase(s, tc);
    return s;
}

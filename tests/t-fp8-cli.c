/* FP8 formats through the command (format.h): grad, drift, regress,
 * certify's f′ table and eval take them, and refuse a bad spelling with a
 * message and exit 2.  The numbers checked are facts derived in the
 * comments (stored bytes, where e4m3's f′ of tanh first vanishes), or
 * properties any gradient measurement in the format must have (errors
 * finite and nonzero). */
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine rows of grad's table: stored bytes and the three errors. */
typedef struct {
    char engine[16];
    size_t bytes;
    double err[3];
} grad_row;

static size_t grad_rows(const char *out, grad_row *rows, size_t cap)
{
    size_t n = 0;
    const char *line = strstr(out, "\nengine ");
    while (line && (line = strchr(line + 1, '\n')) && n < cap) {
        double loss, gx, gt;
        grad_row *r = &rows[n];
        if (sscanf(line + 1, "%15s %lf %lf %lf %zu %lf %lf %lf", r->engine, &loss, &gx, &gt, &r->bytes, &r->err[0],
                   &r->err[1], &r->err[2]) == 8)
            n++;
    }
    return n;
}

/* Run grad (args): want_rows engine rows, each error finite and nonzero,
 * and backprop's stored bytes (0: not checked). */
static void grad_check(const char *args, size_t want_rows, size_t backprop_bytes)
{
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "%s: exit %d: %s", args, r.rc, r.err);
    grad_row rows[8];
    size_t n = grad_rows(r.out, rows, 8);
    ck_assert_msg(n == want_rows, "%s: %zu engine rows in\n%s", args, n, r.out);
    for (size_t k = 0; k < n; k++)
        for (int e = 0; e < 3; e++)
            ck_assert_msg(isfinite(rows[k].err[e]) && rows[k].err[e] > 0, "%s: %s's error %d is %g", args,
                          rows[k].engine, e, rows[k].err[e]);
    ck_assert_str_eq(rows[0].engine, "backprop");
    ck_assert_msg(!backprop_bytes || rows[0].bytes == backprop_bytes, "%s: backprop stores %zu bytes", args,
                  rows[0].bytes);
    run_free(&r);
}

/* Every engine's errors in FP8 finite and nonzero (leaky ReLU: tanh
 * saturates there, where the reversible engine cannot invert it); the
 * stored bytes of backprop on dense:8,tanh at depth 4 (two dense inputs and
 * two tanh f′ of 8 units each): e4m3 one byte a value, 32; e4m3+binary32
 * keeps f′ in binary32, its accumulation (4 bytes), 2·8 + 2·32 = 80; leaky
 * ReLU keeps its input, 4·8 = 32 in every FP8 format. */
START_TEST(grad_in_fp8)
{
    static const struct {
        const char *fmt, *net, *engines;
        size_t backprop_bytes;
    } cases[] = {{"e4m3+binary32", "dense:8,leaky:0.5", "all", 32}, {"e5m2", "dense:8,leaky:0.5", "all", 32},
                 {"e4m3:sat", "dense:8,leaky:0.5", "all", 32},      {"e4m3+binary32", "dense:8,tanh", "backprop", 80},
                 {"e4m3", "dense:8,tanh", "backprop", 32}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[160];
        snprintf(args, sizeof args, "grad --net %s --depth 4 --engine %s --format %s", cases[i].net, cases[i].engines,
                 cases[i].fmt);
        grad_check(args, strcmp(cases[i].engines, "all") ? 1 : 5, cases[i].backprop_bytes);
    }
    run_result r = run_vijp("grad --net dense:8,tanh --depth 4 --format e4m3:sat:sat");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "e4m3:sat:sat"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* A plugin's type (examples/layer-template/scaledtanh.c, its MPFR twin
 * written against vijp/arith.h) runs in FP8 as the catalogue's do. */
START_TEST(plugin_in_fp8)
{
    char so[4096], args[8400];
    test_plugin_path("scaledtanh", so, sizeof so);
    snprintf(args, sizeof args, "grad --net dense:4,scaledtanh --depth 4 --engine all --format e4m3+binary32 "
             "--plugin '%s'", so);
    grad_check(args, 5, 0);
}
END_TEST

/* A drift study lists every FP8 format, in order, at its tolerance (e4m3
 * 2e-1, e5m2 3e-1: vijp_drift_default_tol), and vijp regress reads the
 * names back from drift.json. */
START_TEST(drift_and_regress)
{
    /* E4M3 storage at 2e-1, E5M2 at 3e-1 */
    static const char *const want[][2] = {{"e4m3", "2e-01"}, {"e4m3:sat", "2e-01"}, {"e5m2", "3e-01"},
                                          {"e5m2:sat", "3e-01"}, {"e4m3+binary32", "2e-01"}, {"e5m2+binary32", "3e-01"}};
    char dir[256], args[640], json[300];
    make_temp_dir(dir, sizeof dir, "fp8");
    snprintf(args, sizeof args, "drift --net dense:16,leaky:0.5 --depth 8 --seeds 1 --no-plots --out %s --formats "
             "e4m3,e4m3:sat,e5m2,e5m2:sat,e4m3+binary32,e5m2+binary32", dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    expect_drift_rows(r.out, want, sizeof want / sizeof *want);
    run_free(&r);
    snprintf(json, sizeof json, "%s/drift.json", dir);
    snprintf(args, sizeof args, "regress --strict %s %s", json, json);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, " 0 changed, ") && strstr(r.out, ": 0 regressions"), "exit %d: %s%s",
                  r.rc, r.out, r.err);
    run_free(&r);
    remove_tree(dir);
}
END_TEST

/* tanh's computed f′ = sech² (each step rounded, oracles/elementwise.c) in
 * e4m3 first vanishes just past |x| = 4.25.  x is stored first: e4m3's
 * values near 4 are 4 and 4.5 (spacing 2^-1), 4.25 the tie that goes to the
 * even 4.  sech 4 = 0.0366 rounds to 2^-5 + 2^-8 (spacing 2^-8 there), whose
 * square 0.00124 is above 2^-10, half the smallest subnormal 2^-9: not 0.
 * sech 4.5 = 0.0222 rounds to at most 2^-5, whose square is at most 2^-10:
 * 0 (2^-10 itself the tie to the even 0). */
START_TEST(certify_table)
{
    run_result r = run_vijp("certify --layer tanh --width 4 --samples 1 --formats e4m3,e5m2:sat+binary32,bfloat16");
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    const char *row = strstr(r.out, "\ne4m3 ");
    double at = NAN;
    ck_assert_msg(row && sscanf(row, " e4m3 %lf", &at) == 1 && at == 4.25, "e4m3's f′ vanishes from %g in\n%s", at, r.out);
    ck_assert_msg(strstr(r.out, "\ne5m2:sat+binary32 ") && strstr(r.out, "\nbfloat16 "), "%s", r.out);
    run_free(&r);
    static const char *const bad[] = {
        "certify --layer tanh --formats e4m3,e6m1",
        "certify --layer tanh --formats e4m3,",
        "certify --layer tanh --formats e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3,e4m3",
        "certify --jacobian examples/jacobian/J.npy --formats e4m3",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = run_vijp(bad[i]);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "--formats") && !r.out[0], "%s: exit %d: %s", bad[i], r.rc,
                      r.err);
        run_free(&r);
    }
}
END_TEST

/* eval of leaky ReLU (slope 1/2) at x = ±1000, past e4m3's range: e4m3
 * stores x as NaN, and eval refuses the non-finite forward (exit 1, its
 * message naming it); e4m3:sat stores ±448, whose images are 448 and
 * −224 (exact: 1.75·2^7 is an e4m3 value). */
START_TEST(eval_overflow)
{
    char dir[256], x[300], args[700];
    make_temp_dir(dir, sizeof dir, "fp8-eval");
    snprintf(x, sizeof x, "%s/x.npy", dir);
    const double pts[2] = {1000, -1000};
    const size_t shape[2] = {1, 2};
    ck_assert(!vijp_npy_write(x, 2, shape, pts, NULL));
    snprintf(args, sizeof args, "eval --layer leaky:0.5 --width 2 --input %s --format e4m3 --save %s/nan", x, dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, "NaN"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "eval --layer leaky:0.5 --width 2 --input %s --format e4m3:sat --save %s/sat", x, dir);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(x, sizeof x, "%s/sat/forward.npy", dir);
    vijp_array y = {0};
    ck_assert(!vijp_npy_read(x, &y, NULL));
    ck_assert_msg(y.len == 2 && y.data[0] == 448 && y.data[1] == -224, "leaky(±448) = %g, %g", y.data[0], y.data[1]);
    vijp_array_clear(&y);
    remove_tree(dir);
}
END_TEST

Suite *suite_fp8_cli(void)
{
    Suite *s = suite_create("fp8_cli");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, grad_in_fp8);
    tcase_add_test(tc, plugin_in_fp8);
    tcase_add_test(tc, drift_and_regress);
    tcase_add_test(tc, certify_table);
    tcase_add_test(tc, eval_overflow);
    suite_add_tcase(s, tc);
    return s;
}

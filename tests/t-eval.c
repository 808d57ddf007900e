/* vijp eval (arrays in and out): the operators at the user's
 * points, against values computed here independently.  dense:2 with
 * W = [[2, 1], [1, 1]] (det 1), b = (0.5, -1) and small dyadic inputs: every
 * product and sum is exact in double, so forward = Wx + b, jvp = Wu,
 * vjp = Wᵀg hold exactly, and the vijp (an LU solve whose pivots 2 and 1/2
 * are exact) rebuilds g exactly too.  tanh: f′ = 1 − tanh² at |x| <= 2, where
 * the subtraction loses at most a factor 1/(1 − tanh²(2)) ≈ 14 of tanh's 2
 * ulps: within 64 ulps of f′ (u = 2^-53: 64·2u relative). */
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void temp_dir(char *dir, size_t size) { make_temp_dir(dir, size, "eval"); }

static void put(const char *dir, const char *name, size_t rows, size_t cols, const double *v)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t shape[2] = {rows, cols};
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_write(path, cols ? 2 : 1, shape, v, &err), "%s", err.msg);
}

/* vijp ARGS, which must succeed. */
static void run_ok(const char *args)
{
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %s", args, r.rc, r.err);
    run_free(&r);
}

static vijp_array get(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/out/%s", dir, name);
    vijp_array a = {0};
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_read(path, &a, &err), "%s", err.msg);
    return a;
}

START_TEST(dense_exact)
{
    char dir[512], args[4096];
    temp_dir(dir, sizeof dir);
    const double theta[6] = {2, 1, 1, 1, 0.5, -1}; /* W column-major: W = [[2, 1], [1, 1]], then b */
    const double x[4] = {0.5, -1, 2, 0.25}, u[4] = {1, 0, -0.5, 2}, g[4] = {1, 2, -1, 0.5}; /* rows: samples */
    put(dir, "theta.npy", 6, 0, theta);
    put(dir, "x.npy", 2, 2, x), put(dir, "u.npy", 2, 2, u), put(dir, "g.npy", 2, 2, g);
    snprintf(args, sizeof args,
             "eval --layer dense:2 --input %s/x.npy --params %s/theta.npy --tangent %s/u.npy --cotangent %s/g.npy "
             "--save %s/out -q", dir, dir, dir, dir, dir);
    run_ok(args);
    double W[2][2] = {{2, 1}, {1, 1}}, b[2] = {0.5, -1};
    vijp_array y = get(dir, "forward.npy"), v = get(dir, "jvp.npy"), gx = get(dir, "vjp.npy"), gy = get(dir, "vijp.npy");
    ck_assert(y.ndim == 2 && y.shape[0] == 2 && y.shape[1] == 2);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 2; i++) {
            double fy = b[i], jv = 0, vj = 0;
            for (int k = 0; k < 2; k++) fy += W[i][k] * x[2 * s + k], jv += W[i][k] * u[2 * s + k], vj += W[k][i] * g[2 * s + k];
            ck_assert_double_eq(y.data[2 * s + i], fy);
            ck_assert_double_eq(v.data[2 * s + i], jv);
            ck_assert_double_eq(gx.data[2 * s + i], vj);
            ck_assert_double_eq(gy.data[2 * s + i], g[2 * s + i]);
        }
    vijp_array_clear(&y), vijp_array_clear(&v), vijp_array_clear(&gx), vijp_array_clear(&gy);
    /* no fprime for a dense layer, no fragment for a submersive one */
    char path[1024];
    snprintf(path, sizeof path, "%s/out/fprime.npy", dir);
    ck_assert(access(path, F_OK) != 0);
    remove_tree(dir);
}
END_TEST

START_TEST(tanh_fprime_and_bad_input)
{
    char dir[512], args[4096];
    temp_dir(dir, sizeof dir);
    const double x[4] = {0.5, -1, 2, 0.25};
    put(dir, "x.npy", 2, 2, x);
    snprintf(args, sizeof args, "eval --layer tanh --width 2 --input %s/x.npy --save %s/out -q", dir, dir);
    run_ok(args);
    vijp_array d = get(dir, "fprime.npy");
    for (int i = 0; i < 4; i++) {
        double t = tanh(x[i]), want = 1 - t * t;
        ck_assert_msg(fabs(d.data[i] - want) <= 64 * 0x1p-52 * want, "f'(%g) = %.17g, 1 - tanh^2 = %.17g", x[i], d.data[i], want);
    }
    vijp_array_clear(&d);
    /* an input of the wrong width: exit 2, and nothing made */
    snprintf(args, sizeof args, "eval --layer tanh --width 3 --input %s/x.npy --save %s/bad -q", dir, dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "x.npy") && strstr(r.err, "shape (2, 2)"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "%s/bad", dir);
    ck_assert(access(args, F_OK) != 0);
    remove_tree(dir);
}
END_TEST

/* The arrays in two .npy files: the same shape and bits. */
static int same_array(const char *p1, const char *p2)
{
    vijp_array a = {0}, b = {0};
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_read(p1, &a, &err) && !vijp_npy_read(p2, &b, &err), "%s", err.msg);
    int same = a.ndim == b.ndim && a.len == b.len && !memcmp(a.shape, b.shape, sizeof a.shape) &&
               !memcmp(a.data, b.data, a.len * sizeof *a.data);
    vijp_array_clear(&a), vijp_array_clear(&b);
    return same;
}

/* Without --width an elementwise layer takes the input's: the same bytes as
 * with --width 2.  Two layers, or an argument left over, are refused by
 * name, and nothing is made. */
START_TEST(width_from_input_and_one_layer)
{
    char dir[512], args[4096];
    temp_dir(dir, sizeof dir);
    const double x[4] = {0.5, -1, 2, 0.25};
    put(dir, "x.npy", 2, 2, x);
    snprintf(args, sizeof args, "eval --layer tanh --input %s/x.npy --save %s/out -q", dir, dir);
    run_ok(args);
    snprintf(args, sizeof args, "eval --layer tanh --width 2 --input %s/x.npy --save %s/out2 -q", dir, dir);
    run_ok(args);
    const char *names[] = {"forward.npy", "fprime.npy", "jvp.npy", "vjp.npy", "vijp.npy"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char p1[1024], p2[1024];
        snprintf(p1, sizeof p1, "%s/out/%s", dir, names[k]), snprintf(p2, sizeof p2, "%s/out2/%s", dir, names[k]);
        ck_assert_msg(same_array(p1, p2), "%s differs without --width", names[k]);
    }
    const char *bad[][2] = {{"--layer tanh,dense:4", "takes one layer, got 'tanh,dense:4'"},
                            {"--layer tanh leftover", "unexpected argument 'leftover'"}};
    for (size_t k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "eval %s --input %s/x.npy --save %s/bad -q", bad[k][0], dir, dir);
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k][1]), "%s: exit %d: %s", bad[k][0], r.rc, r.err);
        run_free(&r);
        snprintf(args, sizeof args, "%s/bad", dir);
        ck_assert(access(args, F_OK) != 0);
    }
    remove_tree(dir);
}
END_TEST

Suite *suite_eval(void)
{
    Suite *s = suite_create("eval");
    TCase *tc = tcase_create("eval");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dense_exact);
    tcase_add_test(tc, tanh_fprime_and_bad_input);
    tcase_add_test(tc, width_from_input_and_one_layer);
    suite_add_tcase(s, tc);
    return s;
}

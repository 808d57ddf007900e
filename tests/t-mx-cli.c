/* MX formats through the command (format.h): grad and drift take them,
 * bit for bit the same twice, regress reads their drift.json, and a bad
 * spelling is refused with exit 2.  The numbers checked are properties
 * any measurement in the format must have (errors finite and nonzero, the
 * same run giving the same bits) and the default tolerances derived in
 * src/drift/stats.c (mx_tol). */
#include "fixtures/clirun.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* grad's engine rows: the three errors of each, finite and nonzero. */
static void errors_finite(const char *args, const char *out, size_t want_rows)
{
    size_t n = 0;
    const char *line = strstr(out, "\nengine ");
    while (line && (line = strchr(line + 1, '\n'))) {
        char engine[16];
        double loss, gx, gt, e[3];
        size_t bytes;
        if (sscanf(line + 1, "%15s %lf %lf %lf %zu %lf %lf %lf", engine, &loss, &gx, &gt, &bytes, &e[0], &e[1], &e[2]) != 8)
            continue;
        for (int k = 0; k < 3; k++) ck_assert_msg(isfinite(e[k]) && e[k] > 0, "%s: %s's error %d is %g", args, engine, k, e[k]);
        n++;
    }
    ck_assert_msg(n == want_rows, "%s: %zu engine rows in\n%s", args, n, out);
}

/* Every MX format, either rule, every engine, on a net whose widths (40)
 * make a block of 32 and a tail of 8; the same output twice. */
START_TEST(grad_in_mx)
{
    static const char *const fmts[] = {"mxfp8+binary32", "mxfp8e5m2+binary32", "mxfp6+binary32", "mxfp6e3m2+binary32",
                                       "mxfp4+binary32", "mxfp4:ceil+binary32"};
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) {
        char args[200];
        snprintf(args, sizeof args, "grad --net dense:40,leaky:0.5 --depth 4 --batch 2 --engine %s --format %s",
                 i ? "backprop" : "all", fmts[i]);
        run_result a = run_vijp(args), b = run_vijp(args);
        ck_assert_msg(a.rc == CLI_OK, "%s: exit %d: %s", args, a.rc, a.err);
        errors_finite(args, a.out, i ? 1 : 5);
        ck_assert_msg(!strcmp(a.out, b.out), "%s: two runs differ:\n%s\n%s", args, a.out, b.out);
        run_free(&a), run_free(&b);
    }
    run_result r = run_vijp("grad --net dense:8 --depth 2 --format mxfp8");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "mxfp8"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

static char *file_text(const char *dir, const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

/* A drift study in mxfp8 and mxfp4 at their tolerances (2e-1, 7e-1), its
 * curves the same bits twice; regress reads drift.json back. */
START_TEST(drift_and_regress)
{
    char dir[256], sub[2][300], args[800], json[2][330];
    /* dir: make_temp_dir's short path under $TMPDIR, well within these */
    make_temp_dir(dir, sizeof dir, "mx");
    for (int k = 0; k < 2; k++) {
        snprintf(sub[k], sizeof sub[k], "%.250s/%c", dir, 'a' + k);
        snprintf(args, sizeof args, "drift --net dense:40,leaky:0.5 --depth 6 --seeds 1 --no-plots --out %s "
                 "--formats mxfp8+binary32,mxfp4+binary32", sub[k]);
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
        static const char *const want[][2] = {{"mxfp8+binary32", "2e-01"}, {"mxfp4+binary32", "7e-01"}};
        expect_drift_rows(r.out, want, 2);
        run_free(&r);
        snprintf(json[k], sizeof json[k], "%.300s/drift.json", sub[k]);
    }
    static const char *const same[] = {"curves.csv", "drift.csv", "summary.csv"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        char *a = file_text(sub[0], same[i]), *b = file_text(sub[1], same[i]);
        ck_assert_msg(!strcmp(a, b), "%s differs between two runs", same[i]);
        free(a), free(b);
    }
    snprintf(args, sizeof args, "regress --strict %s %s", json[0], json[1]);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, " 0 changed, ") && strstr(r.out, ": 0 regressions"), "exit %d: %s%s",
                  r.rc, r.out, r.err);
    run_free(&r);
    remove_tree(dir);
}
END_TEST

Suite *suite_mx_cli(void)
{
    Suite *s = suite_create("mx_cli");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, grad_in_mx);
    tcase_add_test(tc, drift_and_regress);
    suite_add_tcase(s, tc);
    return s;
}

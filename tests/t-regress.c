/* vijp regress reads only whole drift.json files of schema vijp-drift/1
 * (docs/drift.schema.json): a file short of a field, with one of the wrong
 * type, of another version, or whose arrays do not match its study, is
 * refused with exit 2 naming the file and the field, instead of comparing
 * nothing (issue 15: a baseline without "format" gave "0 regressions in 88
 * comparisons", exit 0).  scripts/check-drift-schema.py checks field by
 * field that regress and python's jsonschema agree on the published schema. */
#include "clirun.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512], good[600], bad[600];

static void make_study(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vijp-regress-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert(mkdtemp(dir) != NULL);
    char args[1024];
    snprintf(args, sizeof args, "drift --net dense:8,leaky:0.5 --depth 4 --formats binary32,double --seeds 1,2 "
             "--no-plots -q --out '%s/s'", dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "drift: %s", r.err);
    run_free(&r);
    snprintf(good, sizeof good, "%s/s/drift.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
}

static void remove_study(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}

/* regress BASELINE CURRENT, with the damaged file in either place: exit 2
 * and "bad.json: <says>" on stderr, nothing on stdout. */
static void refused(const char *says, const char *what)
{
    for (int side = 0; side < 2; side++) {
        char args[1400], want[800];
        snprintf(args, sizeof args, "regress '%s' '%s'", side ? good : bad, side ? bad : good);
        snprintf(want, sizeof want, "%s: %s", bad, says);
        run_result r = run_vijp(args);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, want), "%s as the %s: exit %d, want %d and '%s'; "
                      "stdout '%s', stderr '%s'", what, side ? "current file" : "baseline", r.rc, CLI_USAGE, want, r.out,
                      r.err);
        run_free(&r);
    }
}

static json_t *curve(json_t *j, size_t c) { return json_array_get(json_object_get(j, "curves"), c); }
static json_t *seed(json_t *j, size_t c, size_t k) { return json_array_get(json_object_get(curve(j, c), "seeds"), k); }

START_TEST(regress_refuses_incomplete_files)
{
    make_study();
    run_result r;
    char args[1400];
    snprintf(args, sizeof args, "regress '%s' '%s'", good, good);
    r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 regressions"), "%s", r.err);
    run_free(&r);

    static const struct {
        const char *says, *what;
    } cases[] = {
        {"curves[0].format: missing", "curves without 'format' (the issue's reproducer)"},
        {"curves[1].seeds[0].engines[1].x.rel: a string, want number or null", "a metric of the wrong type"},
        {"study.depth: missing", "no depth"},
        {"schema: \"vijp-drift/2\" is not vijp-drift/1", "an unknown version"},
        {"curves[1].seeds: 1, but study.seeds lists 2", "a seed entry short"},
        {"curves[0].seeds[1].engines: 1, but study.engines lists 2", "an engine run short"},
        {"curves[1].seeds[0].engines[0].g.rel: 3 values, but study.depth is 4", "a layer short"},
        {"curves: 1, but study.configs × study.formats makes 2", "a curve short"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *j = json_load_file(good, 0, NULL);
        ck_assert(j != NULL);
        switch (i) {
        case 0:
            for (size_t c = 0; c < json_array_size(json_object_get(j, "curves")); c++) json_object_del(curve(j, c), "format");
            break;
        case 1:
            json_object_set_new(json_object_get(json_array_get(json_object_get(seed(j, 1, 0), "engines"), 1), "x"), "rel",
                                json_string("0.5"));
            break;
        case 2: json_object_del(json_object_get(j, "study"), "depth"); break;
        case 3: json_object_set_new(j, "schema", json_string("vijp-drift/2")); break;
        case 4: json_array_remove(json_object_get(curve(j, 1), "seeds"), 1); break;
        case 5: json_array_remove(json_object_get(seed(j, 0, 1), "engines"), 1); break;
        case 6:
            json_array_remove(json_object_get(json_object_get(json_array_get(json_object_get(seed(j, 1, 0), "engines"), 0),
                                                              "g"), "rel"), 3);
            break;
        case 7: json_array_remove(json_object_get(j, "curves"), 1); break;
        }
        ck_assert(json_dump_file(j, bad, 0) == 0);
        json_decref(j);
        refused(cases[i].says, cases[i].what);
    }
    /* its results unwritable: exit 1 (every command checks stdout, main.c) */
    r = run_bin_to(getenv("VIJP_BIN"), args, "/dev/full");
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, "standard output"), "regress >/dev/full: exit %d: %s", r.rc, r.err);
    run_free(&r);
    remove_study();
}
END_TEST

/* The published schema, vijp's output and regress agree (the script runs
 * vijp drift, validates with python's jsonschema, and checks every required
 * field removed or of the wrong type is refused by both).  Skipped, saying
 * so, only where python3's jsonschema module is missing. */
START_TEST(schema_document_agrees)
{
    const char *bin = getenv("VIJP_BIN");
    char root[4096], args[8300];
    ck_assert_msg(bin && strlen(bin) < sizeof root, "VIJP_BIN unset or too long");
    strcpy(root, bin);
    for (int up = 0; up < 2; up++) { /* ROOT/build/vijp → ROOT */
        char *slash = strrchr(root, '/');
        ck_assert_msg(slash != NULL, "VIJP_BIN '%s' is not a path like ROOT/build/vijp", bin);
        *slash = 0;
    }
    snprintf(args, sizeof args, "'%s/scripts/check-drift-schema.py' '%s'", root, bin);
    run_result r = run_bin("python3", args);
    if (r.rc == 77) {
        fprintf(stderr, "t-regress: schema_document_agrees SKIPPED: %s", r.out);
        run_free(&r);
        return;
    }
    ck_assert_msg(r.rc == 0 && strstr(r.out, "mutations refused by jsonschema and by vijp regress"),
                  "scripts/check-drift-schema.py exited %d:\n%s%s", r.rc, r.out, r.err);
    run_free(&r);
}
END_TEST

/* Without VIJP_BIN there is no command to run: fail rather than pass empty. */
START_TEST(regress_no_vijp_bin)
{
    ck_abort_msg("VIJP_BIN is unset: run the suite through `make check`");
}
END_TEST

Suite *suite_regress(void)
{
    Suite *s = suite_create("regress");
    TCase *tc = tcase_create("regress");
    tcase_set_timeout(tc, 600); /* ~400 regress runs in the schema check; sanitizer builds are slower */
    const char *bin = getenv("VIJP_BIN");
    if (!bin || !*bin) {
        tcase_add_test(tc, regress_no_vijp_bin);
    } else {
        tcase_add_test(tc, regress_refuses_incomplete_files);
        tcase_add_test(tc, schema_document_agrees);
    }
    suite_add_tcase(s, tc);
    return s;
}

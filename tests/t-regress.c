/* vijp regress reads only whole drift.json files of schema vijp-drift/2 (or 1)
 * (docs/drift.schema.json): a file short of a field, with one of the wrong
 * type, of another version, or whose arrays do not match its study, is
 * refused with exit 2 naming the file and the field, instead of comparing
 * nothing (once: a baseline without "format" gave "0 regressions in 88
 * comparisons", exit 0).  scripts/check-drift-schema.py checks field by
 * field that regress and python's jsonschema agree on the published schema.
 *
 * Then regress for CI: files with more or fewer seeds,
 * formats, configurations and engines compare their common part and say
 * what they skipped; --json carries each finding whole; --junit writes a
 * JUnit report CI servers render.  (Directions against the perturbed build:
 * t-report.c.) */
#include "fixtures/clirun.h"
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512], good[600], bad[600];

static void make_study(void)
{
    make_temp_dir(dir, sizeof dir, "regress");
    char args[1024];
    snprintf(args, sizeof args, "drift --net dense:8,leaky:0.5 --depth 4 --formats binary32,double --seeds 1,2 "
             "--no-plots -q --out '%s/s'", dir);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "drift: %s", r.err);
    run_free(&r);
    snprintf(good, sizeof good, "%s/s/drift.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
}

static void remove_study(void) { remove_tree(dir); }

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
        {"curves[0].format: missing", "curves without 'format' (a reported reproducer)"},
        {"curves[1].seeds[0].engines[1].x.rel: '0.5' does not match", "a metric as a string that is not an exponent form"},
        {"study.depth: missing", "no depth"},
        {"schema: \"vijp-drift/3\" is not vijp-drift/2 or vijp-drift/1", "an unknown version"},
        {"curves[1].seeds: 1, but study.seeds lists 2", "a seed entry short"},
        {"curves[0].seeds[1].engines: 1, but study.engines lists 2", "an engine run short"},
        {"curves[1].seeds[0].engines[0].g.rel: 3 values, but study.depth is 4", "a layer short"},
        {"curves: 1, but study.configs × study.formats makes 2", "a curve short"},
        {"curves[1].seeds[1].seed: 7, but study.seeds[1] is 2", "a seed entry named otherwise than the study's"},
        {"curves[0].seeds[0].engines[1].engine: \"reversible\", but study.engines[1] is \"moonwalk\"",
         "an engine run named otherwise than the study's"},
        {"curves[1].format: \"binary32\", but study.formats[1] is \"double\"", "a curve out of the study's order"},
        /* every per-layer array, short or long: regress compared what there was and passed */
        {"curves[1].seeds[0].kappa: 3 values, but study.depth is 4", "kappa a layer short"},
        {"curves[0].seeds[1].lyapunov_cumulative: 5 values, but study.depth is 4", "lyapunov_cumulative a layer long"},
        {"curves[1].seeds[1].predicted: 2 values, but study.depth is 4", "predicted two layers short"},
        {"curves[0].seeds[0].engines[1].bound: 3 values, but study.depth is 4", "bound a layer short"},
        {"curves[0].seeds[0].engines[0].stored_bytes: 3 values, but study.depth is 4", "stored_bytes a layer short"},
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
        case 3: json_object_set_new(j, "schema", json_string("vijp-drift/3")); break;
        case 4: json_array_remove(json_object_get(curve(j, 1), "seeds"), 1); break;
        case 5: json_array_remove(json_object_get(seed(j, 0, 1), "engines"), 1); break;
        case 6:
            json_array_remove(json_object_get(json_object_get(json_array_get(json_object_get(seed(j, 1, 0), "engines"), 0),
                                                              "g"), "rel"), 3);
            break;
        case 7: json_array_remove(json_object_get(j, "curves"), 1); break;
        /* regress pairs curves, seeds and runs by these names */
        case 8: json_object_set_new(seed(j, 1, 1), "seed", json_integer(7)); break;
        case 9:
            json_object_set_new(json_array_get(json_object_get(seed(j, 0, 0), "engines"), 1), "engine",
                                json_string("reversible"));
            break;
        case 10: json_object_set_new(curve(j, 1), "format", json_string("binary32")); break;
        case 11: json_array_remove(json_object_get(seed(j, 1, 0), "kappa"), 0); break;
        case 12: json_array_append_new(json_object_get(seed(j, 0, 1), "lyapunov_cumulative"), json_real(1)); break;
        case 13:
            for (int k = 0; k < 2; k++) json_array_remove(json_object_get(seed(j, 1, 1), "predicted"), 0);
            break;
        case 14: json_array_remove(json_object_get(json_array_get(json_object_get(seed(j, 0, 0), "engines"), 1), "bound"), 0); break;
        case 15:
            json_array_remove(json_object_get(json_array_get(json_object_get(seed(j, 0, 0), "engines"), 0), "stored_bytes"), 0);
            break;
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

/* ------------------------------------------------------------ for CI */

/* A second study beside the first: ARGS with --out DIR/NAME; path receives
 * its drift.json. */
static void other_study(const char *name, const char *args, char *path, size_t size)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "drift --depth 4 --no-plots -q %s --out '%s/%s'", args, dir, name);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "drift %s: %s", args, r.err);
    run_free(&r);
    snprintf(path, size, "%s/%s/drift.json", dir, name);
}

static run_result regress2(const char *opts, const char *base, const char *cur)
{
    char args[5000];
    snprintf(args, sizeof args, "regress %s '%s' '%s'", opts, base, cur);
    return run_vijp(args);
}

static json_int_t summary(json_t *out, const char *key)
{
    json_t *v = json_object_get(json_object_get(out, "summary"), key);
    ck_assert_msg(json_is_integer(v), "summary.%s missing", key);
    return json_integer_value(v);
}

/* A file regress cannot read is named with the reason, never with the
 * "(line -1)" of a parse error that did not happen: a missing file, a
 * folder and a device (refused before they are read: read, a folder could
 * give an empty file, and /dev/zero NULs, parsed as "'[' or '{' expected
 * near end of file"); a file that is not JSON gives the line of its error. */
START_TEST(regress_unreadable_files)
{
    make_study();
    char missing[1100], folder[1100], broken[1100], args[3400];
    snprintf(missing, sizeof missing, "%s/no-such.json", dir);
    snprintf(folder, sizeof folder, "%s/s", dir);
    snprintf(broken, sizeof broken, "%s/broken.json", dir);
    FILE *f = fopen(broken, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\n \"schema\": ,\n}\n", f);
    fclose(f);
    static const char *const says[] = {"cannot open: No such file or directory", "is a folder, not a file",
                                       "not JSON: unexpected token near ',' (line 2)", "is a character device, not a file"};
    const char *paths[] = {missing, folder, broken, "/dev/zero"};
    for (int k = 0; k < 4; k++)
        for (int side = 0; side < 2; side++) {
            snprintf(args, sizeof args, "regress '%s' '%s'", side ? good : paths[k], side ? paths[k] : good);
            run_result r = run_vijp(args);
            char want[1400];
            snprintf(want, sizeof want, "vijp regress: %s: %s\n", paths[k], says[k]);
            ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && !strcmp(r.err, want) && !strstr(r.err, "line -1"),
                          "vijp %s: exit %d, want %d and '%s'; stderr '%s'", args, r.rc, CLI_USAGE, want, r.err);
            run_free(&r);
        }
    remove_study();
}
END_TEST

/* A superset study (one more seed, format, engine and configuration) as the
 * current file, then as the baseline: the common part is compared (exit 0,
 * nothing changed), and what only one has is named on stderr and in --json.
 * Disjoint seeds: nothing in common, exit 2.  The old regress refused every
 * one of these as "another study". */
START_TEST(regress_compares_the_common_part)
{
    make_study();
    char sup[700], disjoint[700];
    other_study("sup", "--net dense:8,leaky:0.5 --net dense:8,tanh --formats binary32,double,bfloat16 --seeds 1,2,3 "
                "--engines moonwalk,reversible", sup, sizeof sup);
    other_study("disjoint", "--net dense:8,leaky:0.5 --formats binary32,double --seeds 3,4", disjoint, sizeof disjoint);
    /* good: 1 config; binary32 (per seed) and double (over seeds); backprop, moonwalk; seeds 1, 2:
     * 2·2 + 2 = 6 curves.  sup: 2 configs × (2 exact formats × 3 engines × 3 seeds + 3 double) = 42. */
    for (int side = 0; side < 2; side++) {
        const char *where = side ? "only in the baseline" : "only in the current file";
        run_result r = side ? regress2("", sup, good) : regress2("", good, sup);
        ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 curves worse, 0 better, 0 changed, 6 unchanged; compared 6 of 42 "
                                               "curves: 0 regressions\n"), "side %d: exit %d\n%s%s", side, r.rc, r.out, r.err);
        const char *line = strstr(r.err, where);
        ck_assert_msg(line && strstr(line, "seed 3; format bfloat16; engine reversible; config dense:8,tanh orthogonal "
                                           "(36 curves)"), "stderr does not say what was skipped:\n%s", r.err);
        run_free(&r);
        r = side ? regress2("--json", sup, good) : regress2("--json", good, sup);
        ck_assert(r.rc == CLI_OK);
        json_t *out = json_loads(r.out, 0, NULL), *only = json_object_get(out, side ? "only_in_baseline" : "only_in_current");
        ck_assert_msg(out && summary(out, "compared") == 6 && summary(out, "curves") == 42 && summary(out, "skipped") == 36,
                      "%s", r.out);
        json_t *want = json_pack("{s:[s], s:[s], s:[s], s:[i]}", "configs", "dense:8,tanh orthogonal", "formats", "bfloat16",
                                 "engines", "reversible", "seeds", 3);
        ck_assert_msg(json_equal(only, want), "%s", r.out);
        json_decref(want);
        size_t i, skipped = 0;
        json_t *c = NULL;
        json_array_foreach(json_object_get(out, "curves"), i, c) {
            if (strcmp(json_string_value(json_object_get(c, "status")), "skipped")) continue;
            skipped++;
            ck_assert(json_is_string(json_object_get(c, "why")) &&
                      !strcmp(json_string_value(json_object_get(c, "only_in")), side ? "baseline" : "current"));
        }
        ck_assert_msg(skipped == 36 && json_array_size(json_object_get(out, "skipped")) == 36, "%zu skipped", skipped);
        /* the double curve over the seeds both have */
        json_array_foreach(json_object_get(out, "curves"), i, c)
            if (!strcmp(json_string_value(json_object_get(c, "name")),
                        "c1 dense:8,leaky:0.5 orthogonal / double / moonwalk / seeds 1-2"))
                break;
        ck_assert_msg(i < json_array_size(json_object_get(out, "curves")) &&
                      !strcmp(json_string_value(json_object_get(c, "status")), "unchanged"), "%s", r.out);
        json_decref(out);
        run_free(&r);
    }
    run_result r = regress2("", good, disjoint);
    ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, "have no curve in common") &&
                  strstr(r.err, "only in the baseline: seeds 1-2") && strstr(r.err, "only in the current file: seeds 3-4"),
                  "disjoint seeds: exit %d\n%s%s", r.rc, r.out, r.err);
    run_free(&r);
    remove_study();
}
END_TEST

/* good with its binary32 curves edited: Moonwalk seed 1's worst g.rel
 * doubled (worse), seed 2's g.ulps halved at a layer that is not its worst
 * (changed: the worst value is the same), backprop seed 1's g.rel doubled
 * and g.angle_deg halved everywhere (changed: one metric worse, one better).
 * The layer each Moonwalk edit is at is returned. */
static void edit_curves(const char *from, const char *to, size_t *worse_layer, size_t *changed_layer)
{
    json_t *j = json_load_file(from, 0, NULL);
    ck_assert(j != NULL);
    for (size_t k = 0; k < 2; k++) {
        json_t *mw = json_array_get(json_object_get(seed(j, 0, k), "engines"), 1);
        ck_assert_str_eq(json_string_value(json_object_get(mw, "engine")), "moonwalk");
        json_t *v = json_object_get(json_object_get(mw, "g"), k ? "ulps" : "rel");
        size_t hi = 0, lo = 0;
        for (size_t i = 1; i < json_array_size(v); i++) {
            double x = json_number_value(json_array_get(v, i));
            if (x > json_number_value(json_array_get(v, hi))) hi = i;
            if (x < json_number_value(json_array_get(v, lo))) lo = i;
        }
        ck_assert_msg(lo != hi, "g.%s is flat", k ? "ulps" : "rel");
        size_t at = k ? lo : hi;
        json_array_set_new(v, at, json_real(json_number_value(json_array_get(v, at)) * (k ? 0.5 : 2)));
        *(k ? changed_layer : worse_layer) = at + 1;
    }
    json_t *bp = json_array_get(json_object_get(seed(j, 0, 0), "engines"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(bp, "engine")), "backprop");
    static const char *const ms[] = {"rel", "angle_deg"};
    for (int m = 0; m < 2; m++) {
        json_t *v = json_object_get(json_object_get(bp, "g"), ms[m]);
        for (size_t i = 0; i < json_array_size(v); i++)
            json_array_set_new(v, i, json_real(json_number_value(json_array_get(v, i)) * (m ? 0.5 : 2)));
    }
    ck_assert(json_dump_file(j, to, JSON_REAL_PRECISION(17)) == 0);
    json_decref(j);
}

/* --json: every finding carries the curve's spec, init, format, engine,
 * seed, and its metric, layer, both values, the factor, its direction and
 * whether it fails.  (The old findings had a config index and no direction.) */
START_TEST(regress_json_findings_are_whole)
{
    make_study();
    char edited[700];
    size_t worse_layer, changed_layer;
    snprintf(edited, sizeof edited, "%s/edited.json", dir);
    edit_curves(good, edited, &worse_layer, &changed_layer);
    run_result r = regress2("--json", good, edited);
    ck_assert_msg(r.rc == CLI_FAILED, "exit %d\n%s", r.rc, r.err);
    json_t *out = json_loads(r.out, 0, NULL), *f;
    ck_assert_msg(out && json_is_true(json_object_get(out, "regressed")) && summary(out, "worse") == 1 &&
                  summary(out, "changed") == 2 && summary(out, "failing") == 3, "%s", r.out);
    size_t i, seen = 0;
    json_array_foreach(json_object_get(out, "findings"), i, f) {
        static const char *const strings[] = {"curve", "spec", "init", "format", "engine", "metric", "direction", "why"};
        for (size_t k = 0; k < sizeof strings / sizeof *strings; k++)
            ck_assert_msg(json_is_string(json_object_get(f, strings[k])), "finding %zu: no %s", i, strings[k]);
        static const char *const numbers[] = {"baseline", "current", "factor"};
        for (size_t k = 0; k < 3; k++) ck_assert(json_is_number(json_object_get(f, numbers[k])));
        ck_assert(json_is_integer(json_object_get(f, "config")) && json_is_integer(json_object_get(f, "seed")) &&
                  json_is_integer(json_object_get(f, "layer")) && json_is_array(json_object_get(f, "seeds")) &&
                  json_is_boolean(json_object_get(f, "fails")) && json_is_true(json_object_get(f, "exact")));
        ck_assert_str_eq(json_string_value(json_object_get(f, "spec")), "dense:8,leaky:0.5");
        ck_assert_str_eq(json_string_value(json_object_get(f, "init")), "orthogonal");
        ck_assert_str_eq(json_string_value(json_object_get(f, "format")), "binary32");
        if (!strcmp(json_string_value(json_object_get(f, "engine")), "backprop")) {
            const char *m = json_string_value(json_object_get(f, "metric")), *d = json_string_value(json_object_get(f, "direction"));
            int rel = !strcmp(m, "g.rel");
            ck_assert_msg((rel || !strcmp(m, "g.angle_deg")) && !strcmp(d, rel ? "worse" : "better") &&
                          json_number_value(json_object_get(f, "factor")) == (rel ? 2 : 0.5) &&
                          json_is_true(json_object_get(f, "fails")) == rel, "backprop: %s %s", m, d);
            seen++;
            continue;
        }
        ck_assert_str_eq(json_string_value(json_object_get(f, "engine")), "moonwalk");
        json_int_t sd = json_integer_value(json_object_get(f, "seed")), layer = json_integer_value(json_object_get(f, "layer"));
        const char *metric = json_string_value(json_object_get(f, "metric")), *d = json_string_value(json_object_get(f, "direction"));
        double b = json_number_value(json_object_get(f, "baseline")), c = json_number_value(json_object_get(f, "current"));
        if (sd == 1) {
            ck_assert_msg(!strcmp(metric, "g.rel") && !strcmp(d, "worse") && layer == (json_int_t)worse_layer && c == 2 * b &&
                          json_number_value(json_object_get(f, "factor")) == 2, "seed 1: %s %s at %lld", metric, d, (long long)layer);
        } else {
            ck_assert_msg(sd == 2 && !strcmp(metric, "g.ulps") && !strcmp(d, "changed") &&
                          layer == (json_int_t)changed_layer && c == 0.5 * b, "seed 2: %s %s at %lld", metric, d, (long long)layer);
        }
        ck_assert(json_is_true(json_object_get(f, "fails")));
        seen++;
    }
    ck_assert_msg(seen == 4, "%zu findings, want 4", seen);
    json_decref(out);
    run_free(&r);
    r = regress2("", good, edited);
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "FAIL worse   c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed 1: g.rel at layer ") &&
                  strstr(r.out, "(×2)\n") && strstr(r.out, "FAIL changed c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed 2: g.ulps at layer ") &&
                  strstr(r.out, "FAIL changed c1 dense:8,leaky:0.5 orthogonal / binary32 / backprop / seed 1: g.rel at layer ") &&
                  strstr(r.out, "(×2), worse; also g.angle_deg ×0.5 better\n") &&
                  strstr(r.out, "1 curve worse, 0 better, 2 changed, 3 unchanged; compared 6 of 6 curves: 3 regressions\n"),
                  "%s", r.out);
    run_free(&r);
    remove_study();
}
END_TEST

/* Occurrences of s in text. */
static size_t count(const char *text, const char *s)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, s)); p += strlen(s)) n++;
    return n;
}

/* The JUnit file against the JSON summary of the same comparison: tests,
 * failures and skipped, counted in the attributes and in the elements;
 * parsed back by python3's xml.etree where python3 exists (it is in
 * install-deps), by counting here always. */
static void check_junit(const char *path, json_t *out, const char *name)
{
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "%s was not written", path);
    char *x = slurp_fd(fd), want[200];
    close(fd);
    size_t tests = (size_t)summary(out, "curves"), failures = (size_t)summary(out, "failing"),
           skipped = (size_t)summary(out, "skipped");
    snprintf(want, sizeof want, "<testsuite name=\"vijp regress\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\"",
             tests, failures, skipped);
    ck_assert_msg(!strncmp(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39) && strstr(x, want) &&
                  count(x, "<testsuite ") == 1 && count(x, "<testcase ") == tests && count(x, "<failure ") == failures &&
                  count(x, "<skipped ") == skipped && strlen(x) > 13 && !strcmp(x + strlen(x) - 13, "</testsuite>\n"),
                  "%s: want %s\n%s", path, want, x);
    free(x);
    if (system("command -v python3 >/dev/null 2>&1")) {
        fprintf(stderr, "t-regress: python3 missing: the JUnit report is checked by counting only\n");
        return;
    }
    char script[600], args[1500];
    snprintf(script, sizeof script, "%s/junit.py", dir);
    FILE *py = fopen(script, "w");
    ck_assert(py != NULL);
    fputs("import sys, xml.etree.ElementTree as ET\n"
          "root = ET.parse(sys.argv[1]).getroot()\n"
          "assert root.tag == 'testsuite', root.tag\n"
          "cases = root.findall('testcase')\n"
          "f = [c for c in cases if c.find('failure') is not None]\n"
          "s = [c for c in cases if c.find('skipped') is not None]\n"
          "assert all(c.find('failure').get('message') for c in f)\n"
          "print(len(cases), root.get('tests'), len(f), root.get('failures'), len(s), root.get('skipped'))\n"
          "for c in cases: print(c.get('name'))\n",
          py);
    ck_assert(fclose(py) == 0);
    snprintf(args, sizeof args, "'%s' '%s'", script, path);
    run_result r = run_bin("python3", args);
    snprintf(want, sizeof want, "%zu %zu %zu %zu %zu %zu\n", tests, tests, failures, failures, skipped, skipped);
    ck_assert_msg(r.rc == 0 && !strncmp(r.out, want, strlen(want)), "xml.etree on %s: exit %d, want '%s'\n%s%s", path, r.rc,
                  want, r.out, r.err);
    snprintf(want, sizeof want, "\n%s\n", name);
    ck_assert_msg(strstr(r.out, want), "no testcase named '%s':\n%s", name, r.out);
    run_free(&r);
}

/* --junit FILE: one testcase per curve, failures and skipped ones as such,
 * well-formed even with XML's special characters in a net spec; written
 * whole in place of what was there (no temporary file left); a file that
 * cannot be written is exit 1 naming it. */
START_TEST(regress_junit_report)
{
    make_study();
    char sup[700], edited[700], base[700], junit[700], args[2400];
    size_t wl, cl;
    other_study("sup", "--net dense:8,leaky:0.5 --formats binary32,double,bfloat16 --seeds 1,2,3", sup, sizeof sup);
    snprintf(edited, sizeof edited, "%s/edited.json", dir);
    snprintf(base, sizeof base, "%s/base.json", dir);
    edit_curves(sup, edited, &wl, &cl);
    /* the spec renamed in both files, as regress reads it (it never parses it) */
    static const char odd[] = "dense:8,leaky:0.5 <&\"'>";
    const char *files[] = {good, edited}, *outs[] = {base, edited};
    for (int k = 0; k < 2; k++) {
        json_t *j = json_load_file(files[k], 0, NULL);
        json_object_set_new(json_array_get(json_object_get(json_object_get(j, "study"), "configs"), 0), "spec", json_string(odd));
        for (size_t c = 0; c < json_array_size(json_object_get(j, "curves")); c++)
            json_object_set_new(curve(j, c), "spec", json_string(odd));
        ck_assert(json_dump_file(j, outs[k], JSON_REAL_PRECISION(17)) == 0);
        json_decref(j);
    }
    snprintf(junit, sizeof junit, "%s/junit.xml", dir);
    FILE *old = fopen(junit, "w");
    ck_assert(old && fputs("an older report\n", old) >= 0 && fclose(old) == 0);
    snprintf(args, sizeof args, "--junit '%s'", junit);
    run_result r = regress2(args, base, edited);
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "3 regressions"), "exit %d\n%s%s", r.rc, r.out, r.err);
    run_free(&r);
    r = regress2("--json", base, edited);
    json_t *out = json_loads(r.out, 0, NULL);
    ck_assert(out && summary(out, "failing") == 3 && summary(out, "skipped") > 0 && summary(out, "compared") == 6);
    check_junit(junit, out, "c1 dense:8,leaky:0.5 <&\"'> orthogonal / binary32 / moonwalk / seed 1");
    json_decref(out);
    run_free(&r);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q vijp-tmp", dir);
    ck_assert_msg(system(cmd) != 0, "a temporary file is left in %s", dir);

    /* the same with nothing failing: every testcase passes or is skipped */
    snprintf(args, sizeof args, "--junit '%s'", junit);
    r = regress2(args, good, sup);
    ck_assert(r.rc == CLI_OK), run_free(&r);
    r = regress2("--json", good, sup);
    out = json_loads(r.out, 0, NULL);
    ck_assert(out && summary(out, "failing") == 0);
    check_junit(junit, out, "c1 dense:8,leaky:0.5 orthogonal / double / moonwalk / seeds 1-2");
    json_decref(out);
    run_free(&r);

    /* unwritable: a missing folder, a folder */
    const char *bad_paths[] = {"/nonexistent-vijp-dir/junit.xml", dir};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--junit '%s'", bad_paths[k]);
        r = regress2(args, good, good);
        char want[800];
        snprintf(want, sizeof want, "cannot write the JUnit report %s: ", bad_paths[k]);
        ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, want) && strstr(r.out, "0 regressions"),
                      "--junit %s: exit %d\n%s", bad_paths[k], r.rc, r.err);
        run_free(&r);
    }
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
        tcase_add_test(tc, regress_unreadable_files);
        tcase_add_test(tc, schema_document_agrees);
        tcase_add_test(tc, regress_compares_the_common_part);
        tcase_add_test(tc, regress_json_findings_are_whole);
        tcase_add_test(tc, regress_junit_report);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* vijp regress BASELINE CURRENT: has the numerical behaviour got worse?
 *
 * This file reads the options and both files and says what was found, as
 * text, JSON and JUnit XML; regress_match.c pairs the curves the two files
 * share, regress_compare.c compares them (exactly in the bit-reproducible
 * formats, with tolerances in double), regress_junit.c writes the JUnit
 * report. */
#include "cli.h"
#include "report/drift_schema.h"
#include "regress/regress.h"
#include "vijp/array_io.h"
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp regress [options] BASELINE CURRENT\n"
    "\n"
    "Compare two drift.json files (from 'vijp drift' or 'vijp report') curve by\n"
    "curve and say whether CURRENT is worse, better or unchanged.  A curve is one\n"
    "configuration (net spec and init) in one format, for one engine and one seed;\n"
    "a double curve is judged over all the seeds both files have.\n"
    "\n"
    "bfloat16, binary16, binary32, the mixed formats (bfloat16+binary32, …) and\n"
    "mpfr:P are emulated in MPFR and\n"
    "bit-reproducible: they are compared exactly, and every metric (g.*, theta.*,\n"
    "x.*: rel, ulps, angle_deg; rebuilt; stored_bytes) that differs at any layer\n"
    "is a finding.  Its direction is that of the metric's worst value over the\n"
    "layers (largest error or bytes, fewest rebuilt layers): 'worse' if it grew,\n"
    "'better' if it shrank, 'changed' if it is the same while other layers moved.\n"
    "double and every FORMAT@SET may differ between machines and BLAS builds: such\n"
    "a curve is 'worse' when the geometric mean over seeds of the worst errors\n"
    "(each taken between 16 unit roundoffs and 1, or 256 where that is more:\n"
    "rounding noise below, no digit left above) grows by more than\n"
    "--error-factor, the median safe depth drops by more than --depth-drop, or a\n"
    "seed's vijp fails earlier, and 'better' when the same holds the other way\n"
    "round.  A curve compared exactly is worse or better when all its findings\n"
    "are, and changed otherwise; a double curve is worse if any finding is, else\n"
    "better if any is.\n"
    "\n"
    "What fails: a worse curve, and a changed one (only the bit-reproducible\n"
    "formats have those).  A better curve fails only with --strict, which so\n"
    "makes any difference in a bit-reproducible format fail; a better curve\n"
    "judged with tolerances (double, FORMAT@SET, any under --tolerant) passes\n"
    "even then (another BLAS build, not a change to guard).\n"
    "Without it an improvement passes, and the baseline no longer guards it (a\n"
    "later change that loses the gain still passes): regenerate the baseline.\n"
    "A change of rounding alone moves errors both ways, and often comes out\n"
    "'better': use --strict where the baseline must hold the exact numbers.\n"
    "\n"
    "The files need not hold the same curves: configurations, formats, engines\n"
    "and seeds that only one file has are not compared, and are listed on stderr,\n"
    "in --json and in --junit; the rest is compared.  Depth, width, batch, loss\n"
    "and each common format's tolerance must agree (another study otherwise).\n"
    "\n"
    "  --error-factor F  double: allowed factor on the worst error (default 2)\n"
    "  --depth-drop R    double: allowed loss of safe depth, a fraction (default 0.10)\n"
    "  --tolerant        compare the reproducible formats with the tolerances too\n"
    "  --strict          a better curve compared exactly fails too\n"
    "  --json            print every curve and finding as JSON instead of text\n"
    "  --junit FILE      also write a JUnit XML report to FILE (one testcase per\n"
    "                    curve; written to a temporary file, then renamed)\n"
    "  -h, --help        this help\n"
    "\n"
    "The text output has one line per curve that differs, failing ones first\n"
    "('FAIL' or 'ok', its verdict, its name, its worst finding: metric, layer,\n"
    "baseline → current and the factor current/baseline), then\n"
    "'N curves worse, M better, J changed, K unchanged; compared X of Y curves:\n"
    "F regressions'.\n"
    "\n"
    "Both files must be drift.json of schema vijp-drift/2 (or the older vijp-drift/1)\n"
    "as docs/drift.schema.json describes it: a missing field or one of the wrong\n"
    "type is refused, naming the file and the field (for example\n"
    "'baseline.json: curves[3].format: missing').  Errors past double's range\n"
    "(mpfr:P past about 1070) are compared at their full exponent.\n"
    "\n"
    "Exit status: 0 no curve fails; 1 some curve fails (listed), or the --junit\n"
    "file could not be written; 2 bad usage or input (unreadable file, not a\n"
    "valid drift.json of that schema, a baseline of another study, or no curve\n"
    "in common).\n";

/* A drift.json of schema vijp-drift/2 or 1 (docs/drift.schema.json), whole: a
 * file short of a field used to compare nothing and report 0 regressions. */
static json_t *load(const char *path)
{
    /* Read as every input is (a device or a folder refused before reading,
     * vijp_input_read), then parsed: jansson reading the stream itself
     * reported /dev/zero, or a folder where reading one gives no error, as
     * "'[' or '{' expected near end of file". */
    unsigned char *text;
    size_t len;
    vijp_error err = {0};
    if (vijp_input_read(path, &text, &len, &err)) {
        fprintf(stderr, "vijp regress: %s\n", err.msg);
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb((const char *)text, len, 0, &e);
    vijp_free(text);
    if (!j) {
        if (e.line > 0)
            fprintf(stderr, "vijp regress: %s: not JSON: %s (line %d)\n", path, e.text, e.line);
        else
            fprintf(stderr, "vijp regress: %s: not JSON: %s\n", path, e.text);
        return NULL;
    }
    char msg[512];
    if (!drift_json_check(j, msg, sizeof msg)) return j;
    fprintf(stderr, "vijp regress: %s: %s\n", path, msg);
    json_decref(j);
    return NULL;
}

/* What only one file has, on stderr. */
static void say_skipped(const regress_result *r, const char *path, const char *side, json_t *only)
{
    char text[1024];
    size_t n = 0, no_common = 0;
    for (size_t i = 0; i < r->n; i++) {
        n += r->v[i].only_in && !strcmp(r->v[i].only_in, side);
        no_common += r->v[i].skipped && !r->v[i].only_in && !strcmp(side, "current");
    }
    regress_only_text(only, text, sizeof text);
    const char *where = side[0] == 'b' ? "the baseline" : "the current file";
    if (*text && n)
        fprintf(stderr, "vijp regress: only in %s (%s), not compared: %s (%zu curve%s)\n", where, path, text, n,
                n == 1 ? "" : "s");
    else if (*text) /* only seeds, and only double curves: judged over the seeds both have */
        fprintf(stderr, "vijp regress: only in %s (%s), not compared: %s (left out of the curves judged over seeds)\n",
                where, path, text);
    else if (n) { /* a configuration listed more often in one file: its curves' own reasons */
        json_t *said = json_object();
        for (size_t i = 0; i < r->n; i++)
            if (r->v[i].only_in && !strcmp(r->v[i].only_in, side) && !json_object_get(said, r->v[i].skipped)) {
                json_object_set_new(said, r->v[i].skipped, json_true());
                fprintf(stderr, "vijp regress: not compared: %s (%s)\n", r->v[i].skipped, path);
            }
        json_decref(said);
    }
    if (no_common)
        fprintf(stderr, "vijp regress: not compared: %zu curve%s with no seed in common\n", no_common,
                no_common == 1 ? "" : "s");
}

static void print_text(const regress_result *r)
{
    char text[1024], summary[256];
    for (int fails = 1; fails >= 0; fails--)
        for (size_t i = 0; i < r->n; i++) {
            const regress_curve *c = &r->v[i];
            if (c->skipped || c->fails != fails || !json_array_size(c->findings)) continue;
            regress_describe(c, text, sizeof text);
            fprintf(cli_out(), "%-4s %-7s %s: %s\n", fails ? "FAIL" : "ok", c->status, c->name, text);
        }
    regress_summary(r, summary, sizeof summary);
    fprintf(cli_out(), "%s\n", summary);
}

static void print_json(const regress_result *r, const regress_opts *o)
{
    json_t *findings = json_array(), *curves = json_array(), *skipped = json_array();
    for (size_t i = 0; i < r->n; i++) {
        const regress_curve *c = &r->v[i];
        json_array_extend(findings, c->findings);
        json_t *one = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:o, s:O, s:b, s:s, s:b}", "name", c->name, "config",
                                c->config, "spec", c->spec, "init", c->init, "format", c->format, "engine", c->engine,
                                "seed", c->seed >= 0 ? json_integer(c->seed) : json_null(), "seeds", c->seeds, "exact",
                                c->exact, "status", c->skipped ? "skipped" : c->status, "fails", c->fails);
        if (c->skipped) {
            json_object_set_new(one, "why", json_string(c->skipped));
            json_object_set_new(one, "only_in", c->only_in ? json_string(c->only_in) : json_null());
            json_array_append_new(skipped, json_pack("{s:s, s:s, s:o}", "curve", c->name, "why", c->skipped, "only_in",
                                                     c->only_in ? json_string(c->only_in) : json_null()));
        }
        json_array_append_new(curves, one);
    }
    json_t *out = json_pack("{s:b, s:b, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o, s:o, s:o, s:O, s:O}",
                            "regressed", r->failing > 0, "strict", o->strict, "summary", "worse", (json_int_t)r->worse,
                            "better", (json_int_t)r->better, "changed", (json_int_t)r->changed, "unchanged",
                            (json_int_t)r->unchanged, "compared", (json_int_t)r->compared, "curves", (json_int_t)r->n,
                            "skipped", (json_int_t)(r->n - r->compared), "failing", (json_int_t)r->failing, "findings",
                            findings, "curves", curves, "skipped", skipped, "only_in_baseline", r->only_base,
                            "only_in_current", r->only_cur);
    json_dumpf(out, cli_out(), JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', cli_out());
    json_decref(out);
}

/* What the command line asked for. */
typedef struct {
    regress_opts o;
    const char *junit, *bpath, *cpath;
    int json;
} regress_args;

/* A number for --error-factor or --depth-drop in [lo, hi): 0, or -1
 * having said why. */
static int parse_number(const char *opt, const char *s, double lo, double hi, const char *want, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (!*end && *out >= lo && *out < hi) return 0;
    cli_say("vijp regress: %s wants %s, got '%s'\n", opt, want, s);
    return -1;
}

/* Options into a; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, regress_args *a)
{
    static const struct option opts[] = {
        {"error-factor", 1, 0, 'f'}, {"depth-drop", 1, 0, 'd'}, {"tolerant", 0, 0, 't'}, {"strict", 0, 0, 's'},
        {"json", 0, 0, 'j'},         {"junit", 1, 0, 'J'},      {"help", 0, 0, 'h'},     {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': if (parse_number("--error-factor", optarg, 1, 1e300, "a number >= 1", &a->o.factor)) return EXIT_USAGE; break;
        case 'd': if (parse_number("--depth-drop", optarg, 0, 1, "a number in [0, 1)", &a->o.drop)) return EXIT_USAGE; break;
        case 't': a->o.all_tolerant = 1; break;
        case 's': a->o.strict = 1; break;
        case 'j': a->json = 1; break;
        case 'J':
            if (!*optarg) return fputs("vijp regress: --junit wants a file name\n", stderr), EXIT_USAGE;
            a->junit = optarg;
            break;
        case 'h': fputs(help, cli_out()); return EXIT_OK;
        default: fputs("run 'vijp regress --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (argc - optind != 2) {
        fputs("vijp regress: want two files, BASELINE and CURRENT (run 'vijp regress --help')\n", stderr);
        return EXIT_USAGE;
    }
    a->bpath = argv[optind], a->cpath = argv[optind + 1];
    return -1;
}

/* Both files read and their curves paired: 0, or -1 having said why (bad
 * input: a file that cannot be read, or two files with nothing in common). */
static int match_files(const regress_args *a, json_t *base, json_t *cur, regress_result *r)
{
    char msg[1024];
    if (!base || !cur) return -1; /* load() said why */
    if (regress_match(base, cur, a->o.all_tolerant, r, msg, sizeof msg))
        return fprintf(stderr, "vijp regress: %s\n", msg), -1;
    if (r->compared) return 0;
    char b[480], c[480];
    regress_only_text(r->only_base, b, sizeof b);
    regress_only_text(r->only_cur, c, sizeof c);
    fprintf(stderr, "vijp regress: %s and %s have no curve in common\n  only in the baseline: %s\n  only in the "
            "current file: %s\n", a->bpath, a->cpath, *b ? b : "nothing", *c ? c : "nothing");
    regress_free(r);
    return -1;
}

int cli_regress(int argc, char **argv)
{
    regress_args a = {.o = {2, 0.10, 0, 0}};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    json_t *base = load(a.bpath), *cur = base ? load(a.cpath) : NULL;
    regress_result r;
    if (match_files(&a, base, cur, &r)) {
        json_decref(base), json_decref(cur);
        return EXIT_USAGE;
    }
    regress_compare(&r, &a.o);
    say_skipped(&r, a.bpath, "baseline", r.only_base);
    say_skipped(&r, a.cpath, "current", r.only_cur);
    vijp_error err;
    int junit_failed = a.junit && regress_junit_write(&r, a.junit, a.bpath, a.cpath, &a.o, &err);
    if (a.json) print_json(&r, &a.o);
    else print_text(&r);
    if (junit_failed) fprintf(stderr, "vijp regress: %s\n", err.msg);
    int failing = r.failing > 0;
    regress_free(&r);
    json_decref(base), json_decref(cur);
    return failing || junit_failed ? EXIT_FAILED : EXIT_OK;
}

/* vijp regress BASELINE CURRENT: has the numerical behaviour got worse?
 *
 * Bit-reproducible formats (the MPFR emulations and mpfr:P) are compared
 * exactly: any change in a measured value is reported.  double goes through
 * BLAS/LAPACK, whose results depend on the machine, so each double curve may
 * worsen by at most a factor in its worst error and lose at most a fraction
 * of its safe depth. */
#include "cli.h"
#include "drift_schema.h"
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp regress [options] BASELINE CURRENT\n"
    "\n"
    "Compare two drift.json files (from 'vijp drift' or 'vijp report') of the same\n"
    "study.  Formats emulated in MPFR (bfloat16, binary16, binary32, mpfr:P) are\n"
    "bit-reproducible and compared exactly: any change in a measured error is a\n"
    "regression (regenerate the baseline if the change is intended).  double may\n"
    "differ between machines and BLAS builds, so each double curve is judged over\n"
    "its seeds: the geometric mean of the worst errors may grow by at most\n"
    "--error-factor, the median safe depth may drop by at most --depth-drop, and\n"
    "no seed's vijp may fail earlier.  Findings for all seeds show seed 'all'.\n"
    "\n"
    "  --error-factor F  allowed growth of the worst error in double (default 2)\n"
    "  --depth-drop R    allowed relative loss of safe depth in double (default 0.10)\n"
    "  --tolerant        compare the reproducible formats with the tolerances too\n"
    "  --json            print the findings as JSON instead of a table\n"
    "  -h, --help        this help\n"
    "\n"
    "Both files must be drift.json of schema vijp-drift/1 as docs/drift.schema.json\n"
    "describes it: a missing field or one of the wrong type is refused, naming the\n"
    "file and the field (for example 'baseline.json: curves[3].format: missing').\n"
    "\n"
    "Exit status: 0 no regression, 1 regressions found (listed), 2 bad usage or\n"
    "input (unreadable file, not a valid drift.json of that schema, or a baseline\n"
    "of another study).\n";

typedef struct {
    json_t *rows;
    size_t compared;
} findings;

static void add(findings *f, json_t *curve, json_int_t seed, const char *engine, const char *metric, long layer,
                json_t *base, json_t *cur, const char *why)
{
    json_array_append_new(f->rows, json_pack("{s:I, s:s, s:I, s:s, s:s, s:I, s:O, s:O, s:s}", "config",
                                             json_integer_value(json_object_get(curve, "config")), "format",
                                             json_string_value(json_object_get(curve, "format")), "seed", seed,
                                             "engine", engine, "metric", metric, "layer", (json_int_t)layer,
                                             "baseline", base ? base : json_null(), "current",
                                             cur ? cur : json_null(), "why", why));
}

/* JSON numbers, with null (a non-finite measurement) as +Inf. */
static double val(json_t *x) { return json_is_number(x) ? json_number_value(x) : INFINITY; }

static void exact(findings *f, json_t *curve, json_int_t seed, const char *engine, const char *what, json_t *b, json_t *c)
{
    f->compared++;
    if (json_equal(b, c)) return;
    if (json_is_array(b) && json_is_array(c) && json_array_size(b) == json_array_size(c)) {
        for (size_t i = 0; i < json_array_size(b); i++)
            if (!json_equal(json_array_get(b, i), json_array_get(c, i))) {
                add(f, curve, seed, engine, what, (long)i + 1, json_array_get(b, i), json_array_get(c, i),
                    "changed (bit-reproducible format)");
                return;
            }
    }
    add(f, curve, seed, engine, what, 0, b, c, "changed (bit-reproducible format)");
}

/* Field key of engine e in every seed of a curve, as doubles (null: +Inf). */
static size_t gather(json_t *curve, size_t e, const char *key, double *out, size_t max)
{
    json_t *seeds = json_object_get(curve, "seeds"), *sd;
    size_t k, n = 0;
    json_array_foreach(seeds, k, sd) {
        if (n < max) out[n++] = val(json_object_get(json_array_get(json_object_get(sd, "engines"), e), key));
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* double: one seed's worst error is one draw of the rounding noise (another
 * BLAS kernel, or a last-bit change in the weights, moves it by up to ~2×),
 * so a curve is judged over its seeds: the geometric mean of the worst errors
 * may grow by at most factor, the median safe depth may drop by at most drop,
 * and no seed may fail its vijp earlier than before.  Errors are compared
 * from NOISE_ULPS unit roundoffs up: a worst error of a few u is a handful of
 * roundings, and OpenBLAS's Prescott kernel instead of Haswell doubles
 * backprop's 4u worst error on the CI study (measured). */
#define NOISE_ULPS 16
static void tolerant(findings *f, json_t *bc, json_t *cc, size_t e, double factor, double drop)
{
    enum { MAXS = 1024 };
    static double b[MAXS], c[MAXS];
    const char *engine = json_string_value(json_object_get(
        json_array_get(json_object_get(json_array_get(json_object_get(bc, "seeds"), 0), "engines"), e), "engine"));
    double u = NOISE_ULPS * val(json_object_get(bc, "unit_roundoff"));
    char why[160];
    size_t n = gather(bc, e, "err_max", b, MAXS);
    gather(cc, e, "err_max", c, MAXS);
    double lb = 0, lc = 0;
    for (size_t k = 0; k < n; k++) lb += log(fmax(b[k], u)), lc += log(fmax(c[k], u));
    double gb = exp(lb / (double)n), gc = exp(lc / (double)n);
    f->compared += 3;
    if (!(gc <= factor * gb)) {
        snprintf(why, sizeof why, "worst error (geometric mean over seeds) %.3g× the baseline (allowed %g×)", gc / gb, factor);
        json_t *jb = json_real(gb), *jc = json_real(gc);
        add(f, bc, -1, engine, "err_max", 0, jb, jc, why);
        json_decref(jb), json_decref(jc);
    }
    gather(bc, e, "safe_depth", b, MAXS);
    gather(cc, e, "safe_depth", c, MAXS);
    double mb = median(b, n), mc = median(c, n);
    if (mc < floor((1 - drop) * mb)) {
        snprintf(why, sizeof why, "median safe depth lost %.0f%% (allowed %.0f%%)", 100 * (1 - mc / mb), 100 * drop);
        json_t *jb = json_real(mb), *jc = json_real(mc);
        add(f, bc, -1, engine, "safe_depth", 0, jb, jc, why);
        json_decref(jb), json_decref(jc);
    }
    gather(bc, e, "rebuilt", b, MAXS);
    gather(cc, e, "rebuilt", c, MAXS);
    for (size_t k = 0; k < n; k++)
        if (c[k] < b[k]) {
            snprintf(why, sizeof why, "the vijp now fails earlier (seed index %zu)", k + 1);
            json_t *jb = json_real(b[k]), *jc = json_real(c[k]);
            add(f, bc, -1, engine, "rebuilt", 0, jb, jc, why);
            json_decref(jb), json_decref(jc);
            break;
        }
}

/* A drift.json of schema vijp-drift/1 (docs/drift.schema.json), whole: a
 * file short of a field used to compare nothing and report 0 regressions. */
static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) {
        fprintf(stderr, "vijp regress: %s: %s (line %d)\n", path, e.text, e.line);
        return NULL;
    }
    char msg[512];
    if (!drift_json_check(j, msg, sizeof msg)) return j;
    fprintf(stderr, "vijp regress: %s: %s\n", path, msg);
    json_decref(j);
    return NULL;
}

static void print_table(json_t *rows, size_t compared)
{
    size_t i;
    json_t *r;
    if (json_array_size(rows))
        printf("%-6s %-10s %-6s %-13s %-16s %-6s %-24s %-24s %s\n", "config", "format", "seed", "engine", "metric",
               "layer", "baseline", "current", "why");
    json_array_foreach(rows, i, r) {
        char b[32], c[32], layer[16];
        json_t *jb = json_object_get(r, "baseline"), *jc = json_object_get(r, "current");
        snprintf(b, sizeof b, json_is_number(jb) ? "%.17g" : "null", json_number_value(jb));
        snprintf(c, sizeof c, json_is_number(jc) ? "%.17g" : "null", json_number_value(jc));
        json_int_t l = json_integer_value(json_object_get(r, "layer"));
        snprintf(layer, sizeof layer, l ? "%lld" : "-", (long long)l);
        char seed[24];
        json_int_t sd = json_integer_value(json_object_get(r, "seed"));
        snprintf(seed, sizeof seed, sd < 0 ? "all" : "%lld", (long long)sd);
        printf("c%-5lld %-10s %-6s %-13s %-16s %-6s %-24s %-24s %s\n",
               (long long)json_integer_value(json_object_get(r, "config")), json_string_value(json_object_get(r, "format")),
               seed, json_string_value(json_object_get(r, "engine")),
               json_string_value(json_object_get(r, "metric")), layer, b, c, json_string_value(json_object_get(r, "why")));
    }
    printf("%zu regression%s in %zu comparisons\n", json_array_size(rows), json_array_size(rows) == 1 ? "" : "s", compared);
}

int cli_regress(int argc, char **argv)
{
    static const struct option opts[] = {
        {"error-factor", 1, 0, 'f'}, {"depth-drop", 1, 0, 'd'}, {"tolerant", 0, 0, 't'},
        {"json", 0, 0, 'j'},         {"help", 0, 0, 'h'},       {0, 0, 0, 0},
    };
    double factor = 2, drop = 0.10;
    int json = 0, all_tolerant = 0, c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            factor = strtod(optarg, &end);
            if (*end || !(factor >= 1 && factor < 1e300)) {
                fprintf(stderr, "vijp regress: --error-factor wants a number >= 1, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'd':
            drop = strtod(optarg, &end);
            if (*end || !(drop >= 0 && drop < 1)) {
                fprintf(stderr, "vijp regress: --depth-drop wants a number in [0, 1), got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 't': all_tolerant = 1; break;
        case 'j': json = 1; break;
        case 'h': fputs(help, stdout); return EXIT_OK;
        default: fputs("run 'vijp regress --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (argc - optind != 2) {
        fputs("vijp regress: want two files, BASELINE and CURRENT (run 'vijp regress --help')\n", stderr);
        return EXIT_USAGE;
    }
    json_t *base = load(argv[optind]), *cur = base ? load(argv[optind + 1]) : NULL;
    if (!cur) {
        json_decref(base);
        return EXIT_USAGE;
    }
    /* The same study: everything but the metadata must match. */
    static const char *const keys[] = {"depth", "width", "batch", "loss", "configs", "formats", "engines", "seeds",
                                       "tolerances"};
    json_t *bs = json_object_get(base, "study"), *cs = json_object_get(cur, "study");
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!json_equal(json_object_get(bs, keys[k]), json_object_get(cs, keys[k]))) {
            char *b = json_dumps(json_object_get(bs, keys[k]), JSON_COMPACT | JSON_ENCODE_ANY),
                 *c2 = json_dumps(json_object_get(cs, keys[k]), JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(stderr, "vijp regress: the baseline is from another study: %s is %s there and %s here\n", keys[k],
                    b ? b : "missing", c2 ? c2 : "missing");
            free(b), free(c2);
            json_decref(base), json_decref(cur);
            return EXIT_USAGE;
        }
    findings f = {json_array(), 0};
    json_t *bcurves = json_object_get(base, "curves"), *ccurves = json_object_get(cur, "curves");
    int shape_ok = json_array_size(bcurves) == json_array_size(ccurves);
    for (size_t i = 0; shape_ok && i < json_array_size(bcurves); i++) {
        json_t *bc = json_array_get(bcurves, i), *cc = json_array_get(ccurves, i);
        json_t *bseeds = json_object_get(bc, "seeds"), *cseeds = json_object_get(cc, "seeds");
        int repro = json_is_true(json_object_get(bc, "reproducible")) && !all_tolerant;
        shape_ok = json_array_size(bseeds) == json_array_size(cseeds) && json_array_size(bseeds) > 0;
        if (shape_ok && !repro) {
            size_t ne = json_array_size(json_object_get(json_array_get(bseeds, 0), "engines"));
            for (size_t e = 0; e < ne; e++) tolerant(&f, bc, cc, e, factor, drop);
            continue;
        }
        for (size_t k = 0; shape_ok && k < json_array_size(bseeds); k++) {
            json_t *bk = json_array_get(bseeds, k), *ck = json_array_get(cseeds, k);
            json_int_t seed = json_integer_value(json_object_get(bk, "seed"));
            json_t *be = json_object_get(bk, "engines"), *ce = json_object_get(ck, "engines");
            shape_ok = json_array_size(be) == json_array_size(ce);
            for (size_t e = 0; shape_ok && e < json_array_size(be); e++) {
                json_t *b1 = json_array_get(be, e), *c1 = json_array_get(ce, e);
                const char *engine = json_string_value(json_object_get(b1, "engine"));
                static const char *const parts[] = {"g", "theta", "x"}, *const ms[] = {"rel", "ulps", "angle_deg"};
                for (int p = 0; p < 3; p++)
                    for (int m = 0; m < 3; m++) {
                        char what[32];
                        snprintf(what, sizeof what, "%s.%s", parts[p], ms[m]);
                        exact(&f, bc, seed, engine, what, json_object_get(json_object_get(b1, parts[p]), ms[m]),
                              json_object_get(json_object_get(c1, parts[p]), ms[m]));
                    }
                exact(&f, bc, seed, engine, "rebuilt", json_object_get(b1, "rebuilt"), json_object_get(c1, "rebuilt"));
                exact(&f, bc, seed, engine, "stored_bytes", json_object_get(b1, "stored_bytes"),
                      json_object_get(c1, "stored_bytes"));
            }
        }
    }
    json_decref(base), json_decref(cur);
    if (!shape_ok) {
        json_decref(f.rows);
        fputs("vijp regress: the two files have the same study but different curves (a damaged file?)\n", stderr);
        return EXIT_USAGE;
    }
    size_t n = json_array_size(f.rows);
    if (json) {
        json_t *out = json_pack("{s:b, s:I, s:o}", "regressed", n > 0, "compared", (json_int_t)f.compared, "findings", f.rows);
        json_dumpf(out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        putchar('\n');
        json_decref(out);
    } else {
        print_table(f.rows, f.compared);
        json_decref(f.rows);
    }
    return n ? EXIT_FAILED : EXIT_OK;
}

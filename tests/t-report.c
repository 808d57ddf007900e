/* vijp drift / report / regress as a user runs them: the files of a report,
 * determinism, bad input writing nothing, regression detection (exact for the
 * bit-reproducible formats, with tolerances for double), and whole reports
 * under SIGKILL (more in t-atomic.c). */
#include "fixtures/clirun.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "base/xnum_json.h"
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A small study: 1 config × 2 formats × 2 seeds × (backprop, moonwalk) × 16 layers. */
#define SMALL "--net dense:8,leaky:0.5 --depth 16 --formats binary32,double --seeds 1,2"
#define SMALL_LAYERS 16

static void temp_dir(char *path, size_t size) { make_temp_dir(path, size, "report"); }

/* Whole file, or NULL if it does not exist; *len receives its size. */
static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    fstat(fd, &st);
    char *buf = slurp_fd(fd);
    close(fd);
    if (len) *len = (size_t)st.st_size;
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static run_result drift(const char *bin, const char *dir, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "drift %s --out '%s'", args, dir);
    return run_bin(bin, cmd);
}

static const char *const plot_files[] = {"error-c1.png", "error-c1.svg", "ratio-c1.png",  "ratio-c1.svg",
                                         "bytes-c1.png", "bytes-c1.svg", "memory-c1.png", "memory-c1.svg",
                                         "safe-depth.png", "safe-depth.svg"};

/* A PNG ends with its IEND chunk (length 0, "IEND", CRC AE 42 60 82). */
static int png_complete(const char *buf, size_t len)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    return len >= 20 && !memcmp(buf, "\x89PNG", 4) && !memcmp(buf + len - 12, iend, 12);
}

/* ------------------------------------------------------------ the report */

START_TEST(drift_writes_every_file)
{
    char dir[512];
    temp_dir(dir, sizeof dir);
    run_result r = drift(getenv("VIJP_BIN"), dir, SMALL);
    ck_assert_msg(r.rc == CLI_OK, "drift exited %d: %s", r.rc, r.err);
    /* Not a terminal: no progress bar, nothing on stderr. */
    ck_assert_msg(r.err[0] == 0, "stderr not empty in a pipe: %s", r.err);
    ck_assert(strstr(r.out, "safe depth") && strstr(r.out, "binary32") && strstr(r.out, "report.md"));
    run_free(&r);

    char *s = slurp(dir, "drift.csv", NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(count_lines(s), 1 + 2 * 2 * 2 * SMALL_LAYERS);
    ck_assert(!strncmp(s, "config,spec,init,format,seed,engine,layer,g_rel,", 48));
    ck_assert(strstr(s, "\n1,\"dense:8,leaky:0.5\",orthogonal,binary32,1,moonwalk,16,") != NULL);
    free(s);
    s = slurp(dir, "curves.csv", NULL);
    ck_assert_uint_eq(count_lines(s), 1 + 2 * SMALL_LAYERS);
    free(s);
    s = slurp(dir, "summary.csv", NULL);
    ck_assert_uint_eq(count_lines(s), 1 + 2);
    free(s);
    s = slurp(dir, "report.md", NULL);
    ck_assert(strstr(s, "## Verdicts") && strstr(s, "error-c1.svg") && strstr(s, "## Reproducibility") &&
              strstr(s, "## Memory against depth") && strstr(s, "memory-c1.svg"));
    ck_assert(!strstr(s, "## Reconstruction") && !strstr(s, "recon-c1")); /* no reversible engine in this study */
    /* the verdict first: the overview and its table before the verdict tables, with the
     * same safe depth as drift.json (16 of 16 layers in double, checked below) */
    char *glance = strstr(s, "## At a glance");
    ck_assert_msg(glance && glance < strstr(s, "## Verdicts") && strstr(glance, "![safe depth per config and format](safe-depth.svg)") &&
                      strstr(glance, "| config | binary32 | double |\n|---|---|---|\n| c1 `dense:8,leaky:0.5` orthogonal | "),
                  "report.md's overview:\n%.600s", glance ? glance : s);
    ck_assert_msg(strstr(glance, " | 16 |\n"), "double's safe depth is not 16 in the overview");
    free(s);
    /* the error plot's key names every format's tolerance line (they were unlabelled arrows) */
    s = slurp(dir, "error-c1.svg", NULL);
    ck_assert(s && strstr(s, "binary32 tolerance") && strstr(s, "double tolerance"));
    free(s);
    /* memory.csv: every engine at every depth; backprop keeps h_0 … h_(d−1),
     * 8 doubles each at batch 1: 64·d bytes (hand count) */
    s = slurp(dir, "memory.csv", NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(count_lines(s), 1 + 5 * SMALL_LAYERS);
    for (int d = 1; d <= SMALL_LAYERS; d++) {
        char row[64];
        snprintf(row, sizeof row, "\n1,0,backprop,%d,%d\n", d, 64 * d);
        ck_assert_msg(strstr(s, row), "memory.csv lacks %s", row + 1);
    }
    free(s);

    char path[1024];
    snprintf(path, sizeof path, "%s/drift.json", dir);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j != NULL, "drift.json: %s", e.text);
    ck_assert_str_eq(json_string_value(json_object_get(j, "schema")), "vijp-drift/2");
    json_t *meta = json_object_get(j, "meta"), *study = json_object_get(j, "study");
    static const char *const meta_keys[] = {"vijp_version", "git_commit", "command", "machine", "blas", "mpfr"};
    for (size_t k = 0; k < sizeof meta_keys / sizeof *meta_keys; k++)
        ck_assert_msg(json_is_string(json_object_get(meta, meta_keys[k])), "meta.%s missing", meta_keys[k]);
    ck_assert_int_eq(json_integer_value(json_object_get(study, "depth")), SMALL_LAYERS);
    json_t *curves = json_object_get(j, "curves");
    ck_assert_uint_eq(json_array_size(curves), 2);
    json_t *c0 = json_array_get(curves, 0), *c1 = json_array_get(curves, 1);
    ck_assert(json_is_true(json_object_get(c0, "reproducible")));  /* binary32 */
    ck_assert(json_is_false(json_object_get(c1, "reproducible"))); /* double */
    json_t *seed = json_array_get(json_object_get(c1, "seeds"), 0);
    ck_assert(json_integer_value(json_object_get(seed, "ref_prec")) >= 212); /* double: 106 doubled at least once */
    json_t *mw = json_array_get(json_object_get(seed, "engines"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(mw, "engine")), "moonwalk");
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(mw, "g"), "rel")), SMALL_LAYERS);
    ck_assert_uint_eq(json_array_size(json_object_get(mw, "stored_bytes")), SMALL_LAYERS);
    /* A depth-16 orthogonal dense + leaky(0.5) net in double is far from its
     * 1e-10 tolerance (measured errors ~1e-15): every layer is safe. */
    ck_assert(json_number_value(json_object_get(mw, "safe_depth")) == SMALL_LAYERS);
    json_decref(j);

    for (size_t k = 0; k < sizeof plot_files / sizeof *plot_files; k++) {
        size_t len;
        s = slurp(dir, plot_files[k], &len);
        ck_assert_msg(s != NULL, "%s missing", plot_files[k]);
        if (strstr(plot_files[k], ".png")) ck_assert_msg(png_complete(s, len), "%s incomplete", plot_files[k]);
        else ck_assert_msg(strstr(s, "</svg>") != NULL, "%s incomplete", plot_files[k]);
        free(s);
    }
    remove_tree(dir);
}
END_TEST

/* Studies whose curves are degenerate still plot: one layer (a single point
 * per curve, an x range of one value), mpfr:P whose errors are all zero in
 * double (nothing a log scale can draw, the tolerance underflowing too), and
 * the reconstruction plot of a one-layer net.  Every plot file is whole and
 * not empty, and a one-layer curve is drawn as a point, not as a line
 * between two points that does not exist. */
START_TEST(drift_degenerate_studies_plot)
{
    static const char *const studies[] = {
        "--depth 1",
        "--depth 1 --net dense:8 --seeds 1",
        "--formats mpfr:500 --depth 4",
        "--formats mpfr:4032 --depth 2 --seeds 1",
        "--depth 1 --seeds 1 --formats binary32 --engines moonwalk,reversible",
    };
    static const char *const kinds[] = {"error", "ratio", "bytes", "memory", "recon"};
    for (size_t t = 0; t < sizeof studies / sizeof *studies; t++) {
        char dir[512];
        temp_dir(dir, sizeof dir);
        run_result r = drift(getenv("VIJP_BIN"), dir, studies[t]);
        ck_assert_msg(r.rc == CLI_OK, "drift %s exited %d: %s", studies[t], r.rc, r.err);
        run_free(&r);
        int recon = strstr(studies[t], "reversible") != NULL;
        for (size_t k = 0; k < 2 * (sizeof kinds / sizeof *kinds - !recon) + 2; k++) {
            char name[64];
            const char *ext = k % 2 ? "svg" : "png";
            if (k / 2 < sizeof kinds / sizeof *kinds - !recon) snprintf(name, sizeof name, "%s-c1.%s", kinds[k / 2], ext);
            else snprintf(name, sizeof name, "safe-depth.%s", ext);
            size_t len = 0;
            char *s = slurp(dir, name, &len);
            ck_assert_msg(s != NULL && len > 0, "drift %s: %s missing or empty", studies[t], name);
            if (k % 2) ck_assert_msg(strstr(s, "</svg>") != NULL, "drift %s: %s incomplete", studies[t], name);
            else ck_assert_msg(png_complete(s, len), "drift %s: %s incomplete", studies[t], name);
            /* gnuplot's SVG draws a point symbol with <use xlink:href='#gpPt...'> */
            if (strstr(studies[t], "--depth 1") && k % 2 && k / 2 < 4)
                ck_assert_msg(strstr(s, "#gpPt") != NULL, "drift %s: %s draws no point", studies[t], name);
            /* mpfr:4032's errors (near 2^-4032) are not zero: its error plot says why it draws nothing */
            if (strstr(studies[t], "mpfr:4032") && k == 1)
                ck_assert_msg(strstr(s, "below double's range") != NULL, "drift %s: %s does not say why it is empty",
                              studies[t], name);
            free(s);
        }
        remove_tree(dir);
    }
}
END_TEST

/* Where gnuplot's SVG writes the text NAME: its anchor point, its angle
 * (degrees as in the SVG, 0 unrotated), its font size and its anchor (the
 * first letter of start, middle, end).  0 if the SVG has no such text. */
typedef struct {
    double x, y, angle, size;
    char anchor;
} svg_text;

static int svg_text_of(const char *svg, const char *name, svg_text *t)
{
    char want[256];
    snprintf(want, sizeof want, "<text>%s</text>", name);
    const char *p = strstr(svg, want), *g = NULL;
    if (!p) return 0;
    for (const char *q = svg; (q = strstr(q, "<g transform=\"translate(")) && q < p; q++) g = q;
    if (!g || sscanf(g, "<g transform=\"translate(%lf,%lf)", &t->x, &t->y) != 2) return 0;
    const char *end = strchr(g, '>'), *r = strstr(g, "rotate("), *fs = strstr(g, "font-size=\""),
               *an = strstr(g, "text-anchor=\"");
    t->angle = r && r < end ? strtod(r + 7, NULL) : 0;
    t->size = fs && fs < end ? strtod(fs + 11, NULL) : 0;
    t->anchor = an && an < end ? an[13] : 's';
    return 1;
}

/* Whether texts a and b (la, lb characters, parallel) stay clear of each
 * other: apart across their direction by a line's height, or apart along
 * it, a character taken as 0.6 em wide (about the average of the sans-serif
 * fonts the plots use). */
static int texts_clear(const svg_text *a, size_t la, const svg_text *b, size_t lb)
{
    double th = a->angle * M_PI / 180, ux = cos(th), uy = sin(th);
    double dx = b->x - a->x, dy = b->y - a->y;
    if (fabs(-dx * uy + dy * ux) >= (a->size > b->size ? a->size : b->size)) return 1;
    double along = dx * ux + dy * uy, wa = 0.6 * a->size * (double)la, wb = 0.6 * b->size * (double)lb;
    double a0 = a->anchor == 'e' ? -wa : a->anchor == 'm' ? -wa / 2 : 0;
    double b0 = along + (b->anchor == 'e' ? -wb : b->anchor == 'm' ? -wb / 2 : 0);
    return a0 + wa <= b0 || b0 + wb <= a0;
}

/* The plot area of a gnuplot SVG (its border, drawn as one closed path) as
 * a share of the canvas width. */
static double svg_plot_width_share(const char *svg)
{
    double w = 0, x0, y0, x1, y1, x2;
    const char *v = strstr(svg, "viewBox=\"0 0 ");
    ck_assert_msg(v && sscanf(v, "viewBox=\"0 0 %lf", &w) == 1 && w > 0, "SVG without a viewBox");
    for (const char *p = svg; (p = strstr(p, "d='M")); p++) {
        const char *z = strchr(p + 3, '\'');
        if (sscanf(p, "d='M%lf,%lf L%lf,%lf L%lf,", &x0, &y0, &x1, &y1, &x2) == 5 && z && z[-3] == 'Z')
            return (x2 - x0) / w;
    }
    ck_abort_msg("SVG without a plot border");
    return 0;
}

/* The default report's layout (its seven nets and two initialisations,
 * shortened), with two more formats, whose long names sit side by side:
 * the safe-depth overview's format names do not run into each other (in
 * the default report's PNG, bfloat16, bfloat16+binary32 and binary32 read
 * as one string), and the error and bytes plots, whose keys list a curve
 * per format and kind, keep most of the width for the curves (their keys
 * beside them took 45% of it) and every key entry on the canvas. */
START_TEST(report_plots_layout)
{
    char dir[512], cmd[1024];
    temp_dir(dir, sizeof dir);
    static const char *const formats[] = {"bfloat16", "bfloat16+binary32", "binary16+binary32", "binary16",
                                          "binary32", "double", "mpfr:113"};
    snprintf(cmd, sizeof cmd, "report --depth 4 --seeds 1 --formats %s,%s,%s,%s,%s,%s,%s --out '%s'", formats[0], formats[1],
             formats[2], formats[3], formats[4], formats[5], formats[6], dir);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    enum { NF = sizeof formats / sizeof *formats };
    char *s = slurp(dir, "safe-depth.svg", NULL);
    ck_assert_ptr_nonnull(s);
    svg_text t[NF];
    for (size_t f = 0; f < NF; f++) ck_assert_msg(svg_text_of(s, formats[f], &t[f]), "safe-depth.svg: no label %s", formats[f]);
    for (size_t f = 0; f + 1 < NF; f++)
        ck_assert_msg(texts_clear(&t[f], strlen(formats[f]), &t[f + 1], strlen(formats[f + 1])),
                      "safe-depth.svg: the labels %s and %s run into each other", formats[f], formats[f + 1]);
    free(s);
    static const char *const plots[] = {"error-c1.svg", "bytes-c1.svg"};
    for (size_t k = 0; k < 2; k++) {
        s = slurp(dir, plots[k], NULL);
        ck_assert_ptr_nonnull(s);
        double share = svg_plot_width_share(s);
        ck_assert_msg(share >= 0.8, "%s: the plot takes %.0f%% of the width", plots[k], 100 * share);
        double w = strtod(strstr(s, "viewBox=\"0 0 ") + 12, NULL);
        for (size_t f = 0; f < NF; f++) {
            char title[64];
            snprintf(title, sizeof title, k ? "%s moonwalk" : "%s tolerance", formats[f]);
            ck_assert_msg(svg_text_of(s, title, &t[0]) && t[0].x >= 0 && t[0].x <= w, "%s: key entry '%s' off the canvas",
                          plots[k], title);
        }
        free(s);
    }
    remove_tree(dir);
}
END_TEST

/* The catalogue's sections: a RevNet stack with the reversible
 * engine gets reconstruction plots and their table; a GELU net gets the
 * nested forward-mode AD table (composite GELU keeps 3 values per unit:
 * x/√2, x and 0.5(1 + erf), nested 1). */
START_TEST(report_catalogue_sections)
{
    char dir[512];
    temp_dir(dir, sizeof dir);
    run_result r = drift(getenv("VIJP_BIN"), dir,
                         "--net additive --net dense:8,gelu --width 8 --depth 12 --formats binary32,double --seeds 1 "
                         "--engines moonwalk,reversible");
    ck_assert_msg(r.rc == CLI_OK, "drift exited %d: %s", r.rc, r.err);
    run_free(&r);
    static const char *const want[] = {"recon-c1.png", "recon-c1.svg", "recon-c2.svg", "memory-c2.svg"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, want[k]);
        ck_assert_msg(exists(path), "%s missing", want[k]);
    }
    char *s = slurp(dir, "report.md", NULL);
    ck_assert(strstr(s, "## Reconstruction by inverses") && strstr(s, "| c1 `additive` orthogonal |"));
    ck_assert(strstr(s, "## Nested forward-mode AD") && strstr(s, "| gelu |") && strstr(s, "` | 3 | 1 | 1 |"));
    free(s);
    /* the reconstruction column of curves.csv: the RevNet's rebuilt inputs in double, error > 0 and < 1e-10 */
    s = slurp(dir, "curves.csv", NULL);
    ck_assert(strstr(s, ",recon_med\n"));
    char *row = strstr(s, "\n1,1,double,1,");
    ck_assert_ptr_nonnull(row);
    char *end = strchr(row + 1, '\n'), *last = end;
    while (last > row && last[-1] != ',') last--;
    double rec = strtod(last, NULL);
    ck_assert_msg(rec > 0 && rec < 1e-10, "RevNet h_0 rebuilt with %g in double", rec);
    free(s);
    remove_tree(dir);
}
END_TEST

/* The same command gives the same files, byte for byte, whatever the number
 * of worker threads (each curve is computed by one thread, deterministically). */
START_TEST(drift_is_deterministic)
{
    char a[512], b[512];
    temp_dir(a, sizeof a);
    temp_dir(b, sizeof b);
    run_result r1 = drift(getenv("VIJP_BIN"), a, SMALL " --jobs 1 --no-plots");
    run_result r2 = drift(getenv("VIJP_BIN"), b, SMALL " --jobs 2 --no-plots");
    ck_assert(r1.rc == CLI_OK && r2.rc == CLI_OK);
    run_free(&r1), run_free(&r2);
    static const char *const files[] = {"drift.csv", "curves.csv", "summary.csv", "memory.csv"};
    for (size_t k = 0; k < 4; k++) {
        char *x = slurp(a, files[k], NULL), *y = slurp(b, files[k], NULL);
        ck_assert_msg(x && y && !strcmp(x, y), "%s differs between --jobs 1 and --jobs 2", files[k]);
        free(x), free(y);
    }
    char *j1 = slurp(a, "drift.json", NULL), *m1 = slurp(a, "report.md", NULL);
    r1 = drift(getenv("VIJP_BIN"), a, SMALL " --jobs 1 --no-plots");
    ck_assert(r1.rc == CLI_OK);
    run_free(&r1);
    char *j2 = slurp(a, "drift.json", NULL), *m2 = slurp(a, "report.md", NULL);
    ck_assert_msg(!strcmp(j1, j2) && !strcmp(m1, m2), "the same command wrote different drift.json/report.md");
    free(j1), free(j2), free(m1), free(m2);
    remove_tree(a), remove_tree(b);
}
END_TEST

/* Each bad input exits 2 with a message and writes nothing. */
START_TEST(drift_bad_input_writes_nothing)
{
    static const char *const bad[] = {
        "--formats binary8",       "--formats double,double", "--depth 0",           "--seeds x",
        "--seeds ''",              "--seeds 1,1",             "--engines backprop",  "--engines nope",
        "--tol double=2",          "--tol binary16=1e-3",     "--net dense:0",       "--net ''",
        "--jobs 0",                "--ref-prec 1",            "--batch 0",           "--init nope",
        "--loss nope",             "extra",                   "--ref-prec 4096 --ref-prec-max 4096",
        "--net dense:8 --net dense:9",
    };
    char parent[512], dir[1024];
    temp_dir(parent, sizeof parent);
    snprintf(dir, sizeof dir, "%s/out", parent);
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        run_result r = drift(getenv("VIJP_BIN"), dir, bad[k]);
        ck_assert_msg(r.rc == CLI_USAGE, "'drift %s' exited %d (want %d)", bad[k], r.rc, CLI_USAGE);
        ck_assert_msg(r.err[0] && !r.out[0], "'drift %s': want a message on stderr only", bad[k]);
        ck_assert_msg(!exists(dir), "'drift %s' created the output folder", bad[k]);
        run_free(&r);
    }
    /* An output path that cannot be a folder: below a regular file, and a file itself. */
    char file[1024], below[1100];
    snprintf(file, sizeof file, "%s/plain", parent);
    FILE *f = fopen(file, "w");
    fputs("keep me\n", f);
    fclose(f);
    snprintf(below, sizeof below, "%s/sub", file);
    const char *outs[] = {file, below, "/proc/vijp-cannot-write-here"};
    for (size_t k = 0; k < 3; k++) {
        run_result r = drift(getenv("VIJP_BIN"), outs[k], SMALL);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, outs[k] == file ? "not a folder" : "cannot"),
                      "--out %s: exit %d, '%s'", outs[k], r.rc, r.err);
        run_free(&r);
    }
    char *s = slurp(parent, "plain", NULL);
    ck_assert_str_eq(s, "keep me\n");
    free(s);
    remove_tree(parent);
}
END_TEST

/* ------------------------------------------------------------ regression */

static run_result regress(const char *a, const char *b, const char *opts)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "regress %s '%s/drift.json' '%s/drift.json'", opts, a, b);
    return run_vijp(cmd);
}

/* The finding of a --json output for one curve and metric, or NULL. */
static json_t *finding(json_t *out, const char *curve, const char *metric)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(out, "findings"), i, f)
        if (!strcmp(json_string_value(json_object_get(f, "curve")), curve) &&
            !strcmp(json_string_value(json_object_get(f, "metric")), metric))
            return f;
    return NULL;
}

/* The g.rel values of engine 1 (moonwalk) of seed k of curve 0 (binary32) in DIR/drift.json. */
static json_t *g_rel(json_t *doc, size_t k)
{
    json_t *sd = json_array_get(json_object_get(json_array_get(json_object_get(doc, "curves"), 0), "seeds"), k);
    json_t *mw = json_array_get(json_object_get(sd, "engines"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(mw, "engine")), "moonwalk");
    return json_object_get(json_object_get(mw, "g"), "rel");
}

static json_t *load_drift(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/drift.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    ck_assert_msg(j != NULL, "%s does not parse", path);
    return j;
}

START_TEST(regress_flags_a_one_ulp_vijp)
{
    const char *perturbed = getenv("VIJP_PERTURBED_BIN");
    ck_assert_msg(perturbed && *perturbed, "VIJP_PERTURBED_BIN not set (run with make check)");
    char base[512], same[512], pert[512];
    temp_dir(base, sizeof base), temp_dir(same, sizeof same), temp_dir(pert, sizeof pert);
    run_result r = drift(getenv("VIJP_BIN"), base, SMALL " --no-plots");
    ck_assert(r.rc == CLI_OK), run_free(&r);
    r = drift(getenv("VIJP_BIN"), same, SMALL " --no-plots --jobs 1");
    ck_assert(r.rc == CLI_OK), run_free(&r);
    r = drift(perturbed, pert, SMALL " --no-plots");
    ck_assert(r.rc == CLI_OK), run_free(&r);

    r = regress(base, same, "");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 regressions") && strstr(r.out, "compared 6 of 6 curves"),
                  "unchanged code: exit %d\n%s%s", r.rc, r.out, r.err);
    run_free(&r);
    /* One ulp per vijp output changes every bit-reproducible binary32
     * Moonwalk curve, and makes its worst errors larger (the errors of single
     * layers move both ways: the old output called the first layer that
     * moved "changed", an improvement there included).  One line per curve,
     * naming it, its worst layer and the factor; no 17-digit numbers. */
    r = regress(base, pert, "");
    ck_assert_msg(r.rc == CLI_FAILED, "perturbed vijp: exit %d\n%s", r.rc, r.out);
    for (int k = 1; k <= 2; k++) {
        char line[200];
        snprintf(line, sizeof line, "FAIL worse   c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed %d: ", k);
        const char *at = strstr(r.out, line);
        ck_assert_msg(at && strstr(at, " at layer ") && strstr(at, "(×"), "no line for seed %d:\n%s", k, r.out);
    }
    ck_assert_msg(!strstr(r.out, "backprop") && strstr(r.out, "2 curves worse, 0 better, 0 changed, ") &&
                  strstr(r.out, "compared 6 of 6 curves: 2 regressions\n"), "%s", r.out);
    for (const char *p = r.out; *p; p++) /* numbers of at most 6 significant digits */
        ck_assert_msg(!(strspn(p, "0123456789.") > 8), "a long number in the output:\n%s", r.out);
    run_free(&r);
    /* --json: the finding names the layer where the current worst g.rel is,
     * the two values there, and the factor between them. */
    r = regress(base, pert, "--json");
    ck_assert(r.rc == CLI_FAILED);
    json_t *j = json_loads(r.out, 0, NULL), *bj = load_drift(base), *pj = load_drift(pert);
    ck_assert(j && json_is_true(json_object_get(j, "regressed")) && json_array_size(json_object_get(j, "findings")) > 0);
    for (size_t k = 0; k < 2; k++) {
        char name[128];
        snprintf(name, sizeof name, "c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed %zu", k + 1);
        json_t *f = finding(j, name, "g.rel"), *bv = g_rel(bj, k), *cv = g_rel(pj, k);
        ck_assert_msg(f && !strcmp(json_string_value(json_object_get(f, "direction")), "worse") &&
                      json_is_true(json_object_get(f, "fails")) && json_is_true(json_object_get(f, "exact")),
                      "%s: g.rel\n%s", name, r.out);
        size_t worst = 0, layer = (size_t)json_integer_value(json_object_get(f, "layer"));
        for (size_t i = 0; i < SMALL_LAYERS; i++)
            if (json_number_value(json_array_get(cv, i)) > json_number_value(json_array_get(cv, worst))) worst = i;
        double b = json_number_value(json_array_get(bv, worst)), c = json_number_value(json_array_get(cv, worst));
        ck_assert_msg(layer == worst + 1 && json_number_value(json_object_get(f, "baseline")) == b &&
                      json_number_value(json_object_get(f, "current")) == c &&
                      fabs(json_number_value(json_object_get(f, "factor")) - c / b) <= 1e-15 * (c / b) && c > b,
                      "%s: layer %zu, want %zu (baseline %g, current %g)", name, layer, worst + 1, b, c);
    }
    json_decref(j), json_decref(bj), json_decref(pj);
    run_free(&r);

    /* The other way round, the normal build against a perturbed baseline:
     * improvements, "better", which pass unless --strict (the old output
     * flagged them as regressions). */
    r = regress(pert, base, "--json");
    ck_assert_msg(r.rc == CLI_OK, "improvements fail: exit %d\n%s", r.rc, r.out);
    j = json_loads(r.out, 0, NULL);
    ck_assert(j && json_is_false(json_object_get(j, "regressed")) && json_array_size(json_object_get(j, "findings")) > 0);
    size_t i;
    json_t *fi;
    json_array_foreach(json_object_get(j, "findings"), i, fi) {
        const char *d = json_string_value(json_object_get(fi, "direction"));
        ck_assert_msg(d && (!strcmp(d, "better") || !strcmp(d, "changed")), "finding %zu is %s", i, d);
        ck_assert_msg(!strcmp(d, "changed") || json_is_false(json_object_get(fi, "fails")), "a better finding fails");
    }
    ck_assert(json_integer_value(json_object_get(json_object_get(j, "summary"), "worse")) == 0 &&
              json_integer_value(json_object_get(json_object_get(j, "summary"), "better")) >= 2);
    json_decref(j);
    run_free(&r);
    r = regress(pert, base, "");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "ok   better  c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed 1: ") &&
                  strstr(r.out, "0 regressions"), "%s", r.out);
    run_free(&r);
    r = regress(pert, base, "--strict");
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "FAIL better  c1 dense:8,leaky:0.5 orthogonal / binary32 / moonwalk / seed 1: ") &&
                  strstr(r.out, "2 regressions"), "--strict: exit %d\n%s", r.rc, r.out);
    run_free(&r);
    remove_tree(same), remove_tree(pert);

    /* double, compared with tolerances over the seeds: rewrite the double
     * curve's worst errors as 1e-12·k (far above the 16u noise floor) in a
     * baseline copy, then worsen them 1.5× (allowed 2×: passes), 3× with a
     * quarter of the safe depth cut (allowed 10%: flagged), or only one seed
     * 3× (geometric mean √3 < 2: passes, one seed is one draw of noise); or
     * improve them 3× (better: passes, with --strict too: a double curve's
     * improvement is another BLAS build, --strict guards the exact ones). */
    char path[1024], b2[512], worse[512];
    snprintf(path, sizeof path, "%s/drift.json", base);
    j = json_load_file(path, 0, NULL);
    json_t *seeds = json_object_get(json_array_get(json_object_get(j, "curves"), 1), "seeds");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "curves"), 1), "format")), "double");
    temp_dir(b2, sizeof b2), temp_dir(worse, sizeof worse);
    static const struct {
        double factor;
        int all_seeds, cut_depth, want;
    } cases[] = {{1.0, 1, 0, CLI_OK}, {1.5, 1, 0, CLI_OK}, {3.0, 0, 0, CLI_OK}, {3.0, 1, 1, CLI_FAILED}, {1 / 3.0, 1, 0, CLI_OK}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++)
        for (int side = 0; side < 2; side++) {
            for (size_t k = 0; k < json_array_size(seeds); k++) {
                json_t *mw = json_array_get(json_object_get(json_array_get(seeds, k), "engines"), 1);
                int hit = side && (cases[t].all_seeds || k == 0);
                json_object_set_new(mw, "err_max", json_real(1e-12 * (double)(k + 1) * (hit ? cases[t].factor : 1)));
                json_object_set_new(mw, "safe_depth", json_real(hit && cases[t].cut_depth ? SMALL_LAYERS * 3 / 4 : SMALL_LAYERS));
            }
            snprintf(path, sizeof path, "%s/drift.json", side ? worse : b2);
            json_dump_file(j, path, JSON_REAL_PRECISION(17));
            if (!side) continue;
            r = regress(b2, worse, "");
            ck_assert_msg(r.rc == cases[t].want, "case %zu: exit %d\n%s", t, r.rc, r.out);
            if (cases[t].want == CLI_FAILED) {
                ck_assert_msg(strstr(r.out, "FAIL worse   c1 dense:8,leaky:0.5 orthogonal / double / moonwalk / seeds 1-2: "
                                     "err_max: 1.414e-12 → 4.243e-12 (×3); also safe_depth ×0.75\n"), "%s", r.out);
                run_free(&r);
                r = regress(b2, worse, "--error-factor 4 --depth-drop 0.3");
                ck_assert_msg(r.rc == CLI_OK, "looser limits still flag:\n%s", r.out);
            } else if (cases[t].factor < 1) {
                ck_assert_msg(strstr(r.out, "ok   better  c1 dense:8,leaky:0.5 orthogonal / double / moonwalk / seeds 1-2: "
                                     "err_max: 1.414e-12 → 4.714e-13 (×0.333)\n"), "%s", r.out);
                run_free(&r);
                r = regress(b2, worse, "--strict");
                ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "ok   better  c1"), "--strict fails a double curve:\n%s",
                              r.out);
            }
            run_free(&r);
        }
    /* Past 1 no digit is left: worst errors of 1e9·k against 1e10·k (a
     * blow-up's size, which another BLAS build moves) are the same curve;
     * 1e-3·k against 10·k still is worse (1 against 1e-3·k). */
    static const double blown[][2] = {{1e9, 1e10}, {1e-3, 10}};
    for (size_t t = 0; t < 2; t++) {
        for (int side = 0; side < 2; side++) {
            for (size_t k = 0; k < json_array_size(seeds); k++) {
                json_t *mw = json_array_get(json_object_get(json_array_get(seeds, k), "engines"), 1);
                json_object_set_new(mw, "err_max", json_real(blown[t][side] * (double)(k + 1)));
                json_object_set_new(mw, "safe_depth", json_real(SMALL_LAYERS));
            }
            snprintf(path, sizeof path, "%s/drift.json", side ? worse : b2);
            json_dump_file(j, path, JSON_REAL_PRECISION(17));
        }
        r = regress(b2, worse, "--strict");
        if (t == 0) ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 curves worse, 0 better"), "blow-ups differ:\n%s", r.out);
        else ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "FAIL worse   c1") && strstr(r.out, "err_max: 0.001414 → 1 (×707)"),
                           "a blow-up from 1e-3 passes:\n%s", r.out);
        run_free(&r);
    }
    /* A format whose noise floor is near 1 already (fp8+binary32's u is
     * 1/8: 16u = 2) keeps a range of 16× above it: 2·k against 20·k is
     * worse (the geometric means 2.83 and 25.3, the second seed's 40 taken
     * as 32). */
    json_t *curve1 = json_array_get(json_object_get(j, "curves"), 1);
    json_object_set_new(curve1, "unit_roundoff", json_real(0.125));
    for (int side = 0; side < 2; side++) {
        for (size_t k = 0; k < json_array_size(seeds); k++) {
            json_t *mw = json_array_get(json_object_get(json_array_get(seeds, k), "engines"), 1);
            json_object_set_new(mw, "err_max", json_real((side ? 20.0 : 2.0) * (double)(k + 1)));
        }
        snprintf(path, sizeof path, "%s/drift.json", side ? worse : b2);
        json_dump_file(j, path, JSON_REAL_PRECISION(17));
    }
    r = regress(b2, worse, "");
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "FAIL worse   c1") && strstr(r.out, "err_max: 2.828 → 25.3 (×8.94)"),
                  "a tenfold error above a floor of 2 passes:\n%s", r.out);
    run_free(&r);
    json_decref(j);
    remove_tree(worse), remove_tree(b2);

    /* A baseline of another study, missing or foreign files, bad options: exit 2. */
    char other[512];
    temp_dir(other, sizeof other);
    r = drift(getenv("VIJP_BIN"), other, "--net dense:8,leaky:0.5 --depth 8 --formats binary32,double --seeds 1,2 --no-plots");
    ck_assert(r.rc == CLI_OK), run_free(&r);
    r = regress(base, other, "");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "another study") && !r.out[0], "%d %s", r.rc, r.err);
    run_free(&r);
    r = regress(base, "/nonexistent", "");
    ck_assert(r.rc == CLI_USAGE && r.err[0]), run_free(&r);
    snprintf(path, sizeof path, "%s/drift.json", other);
    FILE *f = fopen(path, "w");
    fputs("{\"schema\": \"something-else\"}\n", f);
    fclose(f);
    r = regress(base, other, "");
    ck_assert(r.rc == CLI_USAGE && strstr(r.err, "not a drift.json")), run_free(&r);
    r = regress(base, base, "--error-factor 0.5");
    ck_assert(r.rc == CLI_USAGE), run_free(&r);
    r = run_vijp("regress only-one.json");
    ck_assert(r.rc == CLI_USAGE), run_free(&r);
    remove_tree(other), remove_tree(base);
}
END_TEST

/* Errors at every precision, against a hand-derived known error.  The
 * perturbed build adds one ulp to every vijp output; on leaky ReLU(0.5)
 * layers with a linear loss every other operation is exact in mpfr:P (×1 and
 * ×0.5, and their inverses ×1 and ×2, scale a value and its ulp alike), so
 * Moonwalk's g_i is off by i ulps of each entry, one per vijp it went
 * through, and backprop by nothing.  An ulp of y is 2^(E−P) with
 * 2^(E−1) <= |y| < 2^E, between 2^-P|y| and 2^(1−P)|y|, so
 *   ulps(g_i) = i,   i·2^-P < rel(g_i) <= i·2^(1−P),
 *   bits needed = ⌈P + log2(max_i rel / tol)⌉ in [⌈P/2 + log2 D⌉, ⌈P/2 + log2 D⌉ + 1]
 * for the default tol = 2^(-P/2).  (No entry crosses a binade on these seeds:
 * a crossing would count one step double or half, and the test say so.)
 * Past P ≈ 1070 these errors are below double's range: vijp kept them as 0
 * before ("bits needed 2"); at mpfr:2000 and 4032 they are read from
 * drift.json's decimal strings, at double (P = 53) from its numbers. */
static vijp_xnum json_error(json_t *v)
{
    vijp_xnum x;
    ck_assert_msg(!vijp_xnum_from_json(v, &x), "not an error value");
    return x;
}

START_TEST(errors_at_every_precision)
{
    const char *perturbed = getenv("VIJP_PERTURBED_BIN");
    ck_assert_msg(perturbed && *perturbed, "VIJP_PERTURBED_BIN not set (run with make check)");
    enum { D = 6 };
    static const long precs[] = {2000, 4032, 53};
    char base[512], pert[512];
    temp_dir(base, sizeof base), temp_dir(pert, sizeof pert);
    const char *study = "--net leaky:0.5 --width 8 --depth 6 --formats mpfr:2000,mpfr:4032,double --engines moonwalk "
                        "--loss linear --seeds 1 --no-plots -q";
    run_result r = drift(perturbed, pert, study);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err), run_free(&r);
    r = drift(getenv("VIJP_BIN"), base, study);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err), run_free(&r);
    json_t *j = load_drift(pert);
    ck_assert_str_eq(json_string_value(json_object_get(j, "schema")), "vijp-drift/2");
    for (size_t f = 0; f < 3; f++) {
        long P = precs[f];
        json_t *curve = json_array_get(json_object_get(j, "curves"), f);
        json_t *eng = json_object_get(json_array_get(json_object_get(curve, "seeds"), 0), "engines");
        json_t *bp = json_array_get(eng, 0), *mw = json_array_get(eng, 1);
        vijp_xnum tol = json_error(json_object_get(curve, "tol")), worst = vijp_xnum_of(0);
        if (P > 53) ck_assert(vijp_xnum_cmp(tol, vijp_xnum_2exp(1, -P / 2)) == 0);
        for (size_t i = 0; i < D; i++) {
            double k = (double)(i + 1);
            vijp_xnum rel = json_error(json_array_get(json_object_get(json_object_get(mw, "g"), "rel"), i));
            vijp_xnum ulps = json_error(json_array_get(json_object_get(json_object_get(mw, "g"), "ulps"), i));
            ck_assert_msg(vijp_xnum_cmp(ulps, vijp_xnum_of(k)) == 0, "P %ld layer %zu: %.17g ulps, want %g", P, i + 1,
                          vijp_xnum_double(ulps), k);
            ck_assert_msg(vijp_xnum_cmp(vijp_xnum_2exp(k, -P), rel) < 0 && vijp_xnum_le(rel, vijp_xnum_2exp(k, 1 - P)),
                          "P %ld layer %zu: rel 2^%.4f, want in (2^%.4f, 2^%.4f]", P, i + 1, vijp_xnum_log2(rel),
                          log2(k) - (double)P, log2(k) + 1 - (double)P);
            vijp_xnum zero = json_error(json_array_get(json_object_get(json_object_get(bp, "g"), "rel"), i));
            ck_assert(zero.m == 0); /* backprop is exact here */
            worst = vijp_xnum_max_nan(worst, rel);
        }
        /* bits needed: the formula on the measured worst (the hand bounds for mpfr:P) */
        double bits = json_number_value(json_object_get(mw, "bits_needed"));
        double want = ceil((double)P + vijp_xnum_log2(vijp_xnum_div(worst, tol)));
        ck_assert_msg(bits == want, "P %ld: bits %g, want %g", P, bits, want);
        if (P > 53) {
            double lo = ceil((double)P / 2 + log2((double)D));
            ck_assert_msg(bits >= lo && bits <= lo + 1, "P %ld: bits %g, want %g or %g", P, bits, lo, lo + 1);
        }
    }
    json_decref(j);
    /* regress compares them at their exponent: both mpfr:P Moonwalk curves
     * are worse, named with their e-602 and e-1213 values (double's 6 u
     * stay under its noise floor of 16 u: compared with tolerances) */
    r = regress(base, pert, "");
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.out, "2 curves worse") && strstr(r.out, "/ mpfr:4032 / moonwalk") &&
                  strstr(r.out, "e-1213") && strstr(r.out, "e-602"), "%s%s", r.out, r.err);
    run_free(&r);
    r = regress(pert, pert, "--strict");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 regressions"), "%s%s", r.out, r.err);
    run_free(&r);
    /* and a file of the old schema, whose errors are numbers, is read */
    char old[600];
    snprintf(old, sizeof old, "%s/v1", base);
    ck_assert(mkdir(old, 0700) == 0);
    json_t *b = load_drift(base);
    json_object_set_new(b, "schema", json_string("vijp-drift/1"));
    snprintf(old + strlen(old), sizeof old - strlen(old), "/drift.json");
    ck_assert(json_dump_file(b, old, 0) == 0);
    json_decref(b);
    *strrchr(old, '/') = 0;
    r = regress(old, base, "--strict");
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "0 regressions"), "%s%s", r.out, r.err);
    run_free(&r);
    /* --tol at any exponent: 1e-700 was refused as out of double's range */
    char tolled[600];
    snprintf(tolled, sizeof tolled, "%s/tol", base);
    r = drift(getenv("VIJP_BIN"), tolled, "--net dense:8 --depth 2 --formats mpfr:3000 --tol mpfr:3000=1e-700 --seeds 1 "
                                          "--no-plots -q");
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err), run_free(&r);
    j = load_drift(tolled);
    vijp_xnum tol = json_error(json_object_get(json_array_get(json_object_get(j, "curves"), 0), "tol"));
    ck_assert_msg(fabs(vijp_xnum_log10(tol) + 700) < 1e-12, "tol 10^%.17g", vijp_xnum_log10(tol));
    json_decref(j);
    /* grad: the same known error, printed and in --json */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grad --net leaky:0.5 --width 8 --depth %d --format mpfr:4032 --engine moonwalk --loss linear "
                              "-q --json", D);
    r = run_bin(perturbed, cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    j = json_loads(r.out, 0, NULL);
    ck_assert(j);
    for (size_t i = 0; i < D; i++) {
        vijp_xnum rel = json_error(json_array_get(json_object_get(j, "rel_err_per_layer"), i));
        double k = (double)(i + 1);
        ck_assert(vijp_xnum_cmp(vijp_xnum_2exp(k, -4032), rel) < 0 && vijp_xnum_le(rel, vijp_xnum_2exp(k, 1 - 4032)));
    }
    json_decref(j), run_free(&r);
    cmd[strlen(cmd) - strlen(" --json")] = 0;
    r = run_bin(perturbed, cmd);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "e-1213") && !strstr(r.out, "0.000e+00   0.000e+00   0.000e+00"),
                  "%s", r.out);
    run_free(&r);
    remove_tree(base), remove_tree(pert);
}
END_TEST

/* ------------------------------------------------------------ atomic writes */

/* Every report file present is whole: JSON parses, CSVs have all their lines,
 * plots end properly, report.md has its last section. */
static void check_whole(const char *dir, const char *when)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/drift.json", dir);
    if (exists(path)) {
        json_error_t e;
        json_t *j = json_load_file(path, 0, &e);
        ck_assert_msg(j != NULL, "%s: drift.json truncated (%s)", when, e.text);
        json_decref(j);
    }
    static const struct {
        const char *name;
        size_t lines;
    } csv[] = {{"drift.csv", 1 + 2 * 2 * 2 * SMALL_LAYERS}, {"curves.csv", 1 + 2 * SMALL_LAYERS}, {"summary.csv", 3}};
    for (size_t k = 0; k < 3; k++) {
        char *s = slurp(dir, csv[k].name, NULL);
        if (!s) continue;
        ck_assert_msg(count_lines(s) == csv[k].lines && s[strlen(s) - 1] == '\n', "%s: %s truncated", when, csv[k].name);
        free(s);
    }
    for (size_t k = 0; k < sizeof plot_files / sizeof *plot_files; k++) {
        size_t len;
        char *s = slurp(dir, plot_files[k], &len);
        if (!s) continue;
        ck_assert_msg(strstr(plot_files[k], ".png") ? png_complete(s, len) : strstr(s, "</svg>") != NULL,
                      "%s: %s truncated", when, plot_files[k]);
        free(s);
    }
    char *s = slurp(dir, "report.md", NULL);
    if (s) ck_assert_msg(strstr(s, "## Reproducibility") != NULL, "%s: report.md truncated", when), free(s);
}

static struct timespec mtime_of(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st)) return (struct timespec){0, 0};
    return st.st_mtim;
}

/* Whether a run left anything beside the report folder dir (its staging
 * folder, an old generation, its lock file: PARENT/.NAME.vijp-*). */
/* Whether a run left something beside dir: a staging folder, an old
 * generation, a lock.  Not the finished curves a failed or killed run keeps
 * for --resume (.NAME.vijp-units, tests/t-resume.c): a run that succeeds
 * removes them, which the clean runs here check. */
static int left_beside(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A \"$(dirname '%s')\" | grep -F \".$(basename '%s').vijp-\" | grep -qvF .vijp-units",
             dir, dir);
    return system(cmd) == 0;
}

/* Kill runs with SIGKILL over an earlier complete report: half of them at
 * moments spread over the computation, half around the end of the writing
 * phase (a fixed delay after drift.csv changes, which is when the new report
 * replaces the old one).  Whatever survives must be whole.  The kill walk of
 * tests/t-atomic.c kills the commit sequence after each of its steps; this
 * test kills at times, plots included. */
START_TEST(killed_run_leaves_whole_files)
{
    char dir[512], when[64];
    temp_dir(dir, sizeof dir);
    run_result r = drift(getenv("VIJP_BIN"), dir, SMALL);
    ck_assert(r.rc == CLI_OK);
    run_free(&r);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = drift(getenv("VIJP_BIN"), dir, SMALL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    run_free(&r);
    double full = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int kills = 2 * (int)test_iters(8), killed = 0;
    for (int k = 0; k < kills; k++) {
        struct timespec before = mtime_of(dir, "drift.csv");
        pid_t pid = fork();
        ck_assert(pid >= 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1), dup2(null, 2);
            execl(getenv("VIJP_BIN"), "vijp", "drift", "--net", "dense:8,leaky:0.5", "--depth", "16", "--formats",
                  "binary32,double", "--seeds", "1,2", "--out", dir, (char *)NULL);
            _exit(127);
        }
        double at;
        if (k % 2 == 0) { /* during the computation */
            at = full * (0.2 + 0.6 * k / kills);
            struct timespec d = {(time_t)at, (long)((at - floor(at)) * 1e9)};
            nanosleep(&d, NULL);
        } else { /* during the writing: 0, 5, 10 … ms after drift.csv changed */
            at = 0.005 * (k / 2);
            int st;
            for (;;) {
                struct timespec now = mtime_of(dir, "drift.csv"), tick = {0, 50000};
                if (now.tv_sec != before.tv_sec || now.tv_nsec != before.tv_nsec) break;
                if (waitpid(pid, &st, WNOHANG) == pid) ck_abort_msg("the run ended before writing drift.csv");
                nanosleep(&tick, NULL);
            }
            struct timespec d = {0, (long)(at * 1e9)};
            nanosleep(&d, NULL);
        }
        killed += kill(pid, SIGKILL) == 0;
        int st;
        waitpid(pid, &st, 0);
        snprintf(when, sizeof when, "kill %d (%s, %.0f ms)", k, k % 2 ? "writing" : "computing", 1e3 * at);
        check_whole(dir, when);
    }
    ck_assert(killed > 0);
    /* The next run clears the temporaries a killed run left behind. */
    r = drift(getenv("VIJP_BIN"), dir, SMALL);
    ck_assert(r.rc == CLI_OK);
    run_free(&r);
    ck_assert_msg(!left_beside(dir), "a killed run's leftovers beside %s survived a clean run", dir);
    char units[1200];
    snprintf(units, sizeof units, "ls -A \"$(dirname '%s')\" | grep -qF \".$(basename '%s').vijp-units\"", dir, dir);
    ck_assert_msg(system(units) != 0, "a clean run left the finished curves kept beside %s", dir);
    check_whole(dir, "after a clean run");
    remove_tree(dir);
}
END_TEST

/* All or nothing: a failing writer (a gnuplot that exits 1, put first on the
 * PATH) leaves the previous report byte for byte; a later, smaller study
 * removes the plots of configs it no longer has (the old manifest lists
 * them); a folder name with a newline is refused before anything is
 * written. */
START_TEST(report_all_or_nothing)
{
    char dir[512], fake[512], path[1100], cmd[3000];
    temp_dir(dir, sizeof dir);
    temp_dir(fake, sizeof fake);
    run_result r = drift(getenv("VIJP_BIN"), dir, "--net dense:8,leaky:0.5 --net dense:8,tanh --depth 8 --formats double --seeds 1");
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    static const char *const files[] = {"drift.csv", "curves.csv", "summary.csv", "drift.json", "report.md", "error-c2.png"};
    char *before[6];
    for (int k = 0; k < 6; k++) ck_assert((before[k] = slurp(dir, files[k], NULL)) != NULL);
    snprintf(path, sizeof path, "%s/gnuplot", fake);
    FILE *f = fopen(path, "w");
    fputs("#!/bin/sh\ncat >/dev/null\nexit 1\n", f);
    fclose(f);
    chmod(path, 0755);
    snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" '%s' drift --net dense:8,leaky:0.5 --depth 8 --formats double --seeds 2 --out '%s'",
             fake, getenv("VIJP_BIN"), dir);
    r = run_bin("/usr/bin/env", cmd);
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, "gnuplot failed"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    for (int k = 0; k < 6; k++) {
        char *now = slurp(dir, files[k], NULL);
        ck_assert_msg(now && !strcmp(now, before[k]), "%s changed after a failed run", files[k]);
        free(now), free(before[k]);
    }
    ck_assert_msg(!left_beside(dir), "a failed run left its staging folder beside %s", dir);
    r = drift(getenv("VIJP_BIN"), dir, "--net dense:8,leaky:0.5 --depth 8 --formats double --seeds 1");
    ck_assert(r.rc == CLI_OK);
    run_free(&r);
    snprintf(path, sizeof path, "%s/error-c2.png", dir);
    ck_assert_msg(!exists(path), "a stale plot of config 2 survived");
    snprintf(path, sizeof path, "%s/error-c1.png", dir);
    ck_assert(exists(path));
    snprintf(cmd, sizeof cmd, "drift --depth 4 --seeds 1 --formats double --out '%s/a\nb'", dir);
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "control characters"), "%d %s", r.rc, r.err);
    run_free(&r);
    remove_tree(dir), remove_tree(fake);
}
END_TEST

/* A gnuplot stand-in (first on the PATH) that exits 0 whatever it writes, as
 * gnuplot does when its own writes fail on a full disk: it writes a minimal
 * whole PNG or SVG at every `set output`, except the file named by $CUT,
 * which it leaves empty ($HOW=empty) or cut in the middle. */
static void fake_gnuplot_cutting(const char *fake)
{
    char path[600];
    snprintf(path, sizeof path, "%s/gnuplot", fake);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fputs("#!/bin/sh\n"
          "while IFS= read -r line; do\n"
          "  case \"$line\" in \"set output '\"*) ;; *) continue ;; esac\n"
          "  p=${line#\"set output '\"}; p=${p%\"'\"}\n"
          "  case \"$p\" in\n"
          "  */\"$CUT\") if [ \"$HOW\" = empty ]; then : >\"$p\";\n"
          "      elif [ \"${p%.png}\" != \"$p\" ]; then printf '\\211PNG\\r\\n\\032\\n\\000\\000\\000\\015IHDR' >\"$p\";\n"
          "      else printf '<svg>\\n<g>\\n' >\"$p\"; fi ;;\n"
          "  *.png) printf '\\211PNG\\r\\n\\032\\n\\000\\000\\000\\000IEND\\256B`\\202' >\"$p\" ;;\n"
          "  *) printf '<svg>\\n</svg>\\n\\n' >\"$p\" ;;\n"
          "  esac\n"
          "done\n"
          "exit 0\n", f);
    fclose(f);
    chmod(path, 0755);
}

/* A plot that gnuplot left empty or cut (a full disk; gnuplot still exits
 * 0) fails the run naming the file, and the previous report stays byte for
 * byte: every PNG and SVG is read back before the folder is published.  The
 * stand-in's whole files pass, so the failures are the cut files'. */
START_TEST(report_refuses_cut_plots)
{
    char dir[512], fake[512], cmd[3000];
    temp_dir(dir, sizeof dir);
    temp_dir(fake, sizeof fake);
    const char *study = "--net dense:8,tanh --depth 4 --formats double --seeds 1";
    run_result r = drift(getenv("VIJP_BIN"), dir, study);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    enum { N = sizeof plot_files / sizeof *plot_files };
    char *before[N];
    size_t len[N];
    for (int k = 0; k < N; k++) ck_assert((before[k] = slurp(dir, plot_files[k], &len[k])) != NULL);
    fake_gnuplot_cutting(fake);
    static const char *const cuts[][2] = {{"safe-depth.png", "empty"}, {"ratio-c1.svg", "cut"}, {"memory-c1.png", "cut"},
                                          {"error-c1.svg", "empty"}};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        snprintf(cmd, sizeof cmd, "CUT=%s HOW=%s PATH='%s':\"$PATH\" '%s' drift %s --out '%s'", cuts[c][0], cuts[c][1], fake,
                 getenv("VIJP_BIN"), study, dir);
        r = run_bin("/usr/bin/env", cmd);
        ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, cuts[c][0]) && strstr(r.err, "incomplete"),
                      "%s %s: exit %d: %s", cuts[c][0], cuts[c][1], r.rc, r.err);
        run_free(&r);
        for (int k = 0; k < N; k++) {
            size_t n;
            char *now = slurp(dir, plot_files[k], &n);
            ck_assert_msg(now && n == len[k] && !memcmp(now, before[k], n), "%s changed after a run that failed on %s",
                          plot_files[k], cuts[c][0]);
            free(now);
        }
        ck_assert_msg(!left_beside(dir), "a failed run left its staging folder beside %s", dir);
    }
    /* The stand-in's whole files are accepted: what failed above was the cut file. */
    snprintf(cmd, sizeof cmd, "CUT=none PATH='%s':\"$PATH\" '%s' drift %s --out '%s'", fake, getenv("VIJP_BIN"), study, dir);
    r = run_bin("/usr/bin/env", cmd);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    for (int k = 0; k < N; k++) free(before[k]);
    remove_tree(dir), remove_tree(fake);
}
END_TEST

/* A stdout that fails (here /dev/full: the verdicts are lost when stdio
 * flushes them at the close) fails the run before its report is published:
 * exit 1, and the previous report stays, as exit 1 promises; with --quiet
 * (nothing on stdout) the same run publishes. */
START_TEST(drift_stdout_failure_keeps_report)
{
    ck_assert_msg(access("/dev/full", W_OK) == 0, "/dev/full is missing: this test needs Linux's always-full device");
    char dir[512], cmd[1024];
    temp_dir(dir, sizeof dir);
    run_result r = drift(getenv("VIJP_BIN"), dir, "--net dense:8,tanh --depth 4 --formats double --seeds 1 --no-plots");
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    char *before = slurp(dir, "drift.json", NULL);
    snprintf(cmd, sizeof cmd, "drift --net dense:8,tanh --depth 4 --formats double --seeds 2 --no-plots --out '%s'", dir);
    r = run_bin_to(getenv("VIJP_BIN"), cmd, "/dev/full");
    ck_assert_msg(r.rc == CLI_FAILED && strstr(r.err, "standard output") && strstr(r.err, "left as it was"), "exit %d: %s",
                  r.rc, r.err);
    run_free(&r);
    char *now = slurp(dir, "drift.json", NULL);
    ck_assert_msg(now && !strcmp(now, before), "a run whose stdout failed replaced the report");
    free(now);
    ck_assert_msg(!left_beside(dir), "a failed run left its staging folder beside %s", dir);
    snprintf(cmd, sizeof cmd, "drift --net dense:8,tanh --depth 4 --formats double --seeds 2 --no-plots -q --out '%s'", dir);
    r = run_bin_to(getenv("VIJP_BIN"), cmd, "/dev/full");
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    now = slurp(dir, "drift.json", NULL);
    ck_assert_msg(now && strcmp(now, before), "the quiet run did not publish its report");
    free(now), free(before);
    remove_tree(dir);
}
END_TEST

/* Backprop's own safe depth beside the rebuilt engine's (summary.csv's last
 * column, report.md's table, the printed verdicts): per curve, the median
 * over seeds of what drift.json records for the backprop run.  In bfloat16
 * at 1e-2 backprop itself fails at once on this leaky stack: the 0 that
 * explains the rebuilt engine's 0; in binary32 Moonwalk stops short of
 * backprop (51 against 64 layers), so the column cannot be the rebuilt
 * engine's own. */
START_TEST(backprop_safe_depth_beside)
{
    char dir[512], cmd[1024], path[600];
    temp_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "drift --net dense:32,leaky:0.5 --depth 64 --formats bfloat16,binary32 --seeds 1,2,3 "
                              "--no-plots --out '%s'", dir);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    ck_assert_msg(strstr(r.out, "safe depth backprop depth"), "%s", r.out);
    run_free(&r);
    snprintf(path, sizeof path, "%s/drift.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    ck_assert(j != NULL);
    char *csv = slurp(dir, "summary.csv", NULL);
    ck_assert(strstr(csv, ",price_median,backprop_safe_depth_median\n") != NULL);
    const char *line = strchr(csv, '\n') + 1;
    size_t ci;
    json_t *curve;
    json_array_foreach(json_object_get(j, "curves"), ci, curve) {
        double d[3];
        size_t n = 0, si;
        json_t *seed;
        json_array_foreach(json_object_get(curve, "seeds"), si, seed) {
            json_t *bp = json_array_get(json_object_get(seed, "engines"), 0);
            ck_assert_str_eq(json_string_value(json_object_get(bp, "engine")), "backprop");
            d[n++] = json_real_value(json_object_get(bp, "safe_depth"));
        }
        ck_assert_uint_eq(n, 3);
        /* the median of three */
        double lo = fmin(d[0], fmin(d[1], d[2])), hi = fmax(d[0], fmax(d[1], d[2])), median = d[0] + d[1] + d[2] - lo - hi;
        const char *end = strchr(line, '\n'), *last = end;
        while (last > line && last[-1] != ',') last--;
        ck_assert_msg(strtod(last, NULL) == median, "curve %zu: summary.csv says %.*s, drift.json's backprop runs %g",
                      ci, (int)(end - last), last, median);
        double rebuilt = json_real_value(json_object_get(json_object_get(json_object_get(curve, "summary"), "safe_depth"), "median"));
        if (!strcmp(json_string_value(json_object_get(curve, "format")), "bfloat16")) ck_assert(median == 0);
        else ck_assert_msg(rebuilt < median, "binary32: Moonwalk's safe depth %g, backprop's %g", rebuilt, median);
        line = end + 1;
    }
    free(csv);
    json_decref(j);
    char *md = slurp(dir, "report.md", NULL);
    ck_assert(strstr(md, "| safe depth | backprop's |") != NULL);
    free(md);
    remove_tree(dir);
}
END_TEST

/* A layer wider than 1024 is certified at one point, and the report says
 * so (each point is an O(n³) SVD); narrower ones at eight (the other
 * reports here).  dense:1025 at depth 1: about 2 s. */
START_TEST(wide_layer_certified_at_one_point)
{
    char dir[512], cmd[1024];
    temp_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "drift --net dense:1025 --depth 1 --formats binary32 --seeds 1 --no-plots -q --out '%s'",
             dir);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    char *md = slurp(dir, "report.md", NULL);
    ck_assert_msg(strstr(md, "| 1/1 certified (") && strstr(md, "one point only: wider than 1024"), "%s", md);
    ck_assert(!strstr(md, "/8 certified"));
    free(md);
    remove_tree(dir);
}
END_TEST

/* The certification column on the study's two jobs (the points split over
 * them) against the same eight points certified one after another here,
 * as the column says it does: inputs N(0, 1) drawn in turn from one
 * generator (seed 0xce47), the net initialised from seeds 1..8 (Gaussian:
 * an orthogonal layer's σ_min is 1 at every seed), the weakest proven bound
 * printed with %.3g. */
START_TEST(certified_points_on_jobs_match_serial)
{
    char dir[512], cmd[1024];
    temp_dir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "drift --net dense:96,leaky:0.5 --depth 2 --init gaussian --formats binary32 --seeds 1 "
             "--jobs 2 --no-plots -q --out '%s'", dir);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    char *md = slurp(dir, "report.md", NULL);
    vijp_net net;
    vijp_init init;
    ck_assert_int_eq(vijp_net_build(&net, "dense:96,leaky:0.5", 1, 0, NULL), 0);
    ck_assert_int_eq(vijp_init_parse("gaussian", &init, NULL), 0);
    vijp_rng rng;
    vijp_rng_seed(&rng, 0xce47);
    double x[96], smin = INFINITY;
    int certified = 0;
    for (uint64_t k = 1; k <= 8; k++) {
        for (size_t i = 0; i < 96; i++) x[i] = vijp_rng_normal(&rng);
        vijp_certificate cert;
        ck_assert_int_eq(vijp_net_init(&net, init, k, NULL), 0);
        ck_assert_int_eq(vijp_certify_layer(&net.layers[0], net.theta[0], x, NULL, &cert, NULL), 0);
        certified += cert.verdict == VIJP_CERTIFIED_SUBMERSIVE;
        if (cert.verdict == VIJP_CERTIFIED_SUBMERSIVE && cert.s < smin) smin = cert.s;
        vijp_certificate_clear(&cert);
    }
    vijp_net_free(&net);
    char want[160];
    snprintf(want, sizeof want, "| dense 96→96 (c1) | where J has full row rank | no | nothing | %d/8 certified "
             "(certified-double), 0 not submersive; proven σ_min > %.3g |", certified, smin);
    const char *row = strstr(md, "| dense 96→96");
    ck_assert_msg(strstr(md, want), "want \"%s\", got \"%.160s\"", want, row ? row : "(no row)");
    free(md);
    remove_tree(dir);
}
END_TEST

START_TEST(report_quick_study)
{
    char dir[512], cmd[1024];
    temp_dir(dir, sizeof dir);
    run_result r = run_vijp("report --help");
    ck_assert(r.rc == CLI_OK && strstr(r.out, "reports/latest") && strstr(r.out, "mpfr:113"));
    run_free(&r);
    /* The default study's fourteen configurations (seven nets × two
     * initialisations), shortened; the reversible engine runs too. */
    snprintf(cmd, sizeof cmd, "report --depth 8 --seeds 1 --formats double --no-plots --out '%s'", dir);
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "%s", r.err);
    run_free(&r);
    char *s = slurp(dir, "summary.csv", NULL);
    ck_assert_uint_eq(count_lines(s), 1 + 14);
    ck_assert(strstr(s, "leaky:0.1\",gaussian") && strstr(s, "leaky:0.9\",orthogonal") && strstr(s, "\"additive\",gaussian") &&
              strstr(s, "\"dense:32,gelu\"") && strstr(s, "\"dense:32,mish\"") && strstr(s, "relu,dense:32,layernorm\""));
    free(s);
    s = slurp(dir, "report.md", NULL);
    ck_assert(strstr(s, "## Reconstruction by inverses") && strstr(s, "## Nested forward-mode AD") &&
              strstr(s, "| mish |") && strstr(s, "## Memory against depth"));
    free(s);
    remove_tree(dir);
}
END_TEST

/* Without VIJP_BIN there is no command to run: the suite fails rather than
 * passing without testing anything. */
START_TEST(no_vijp_bin)
{
    ck_abort_msg("VIJP_BIN is unset: run the suite through `make check` (or set VIJP_BIN to the vijp command)");
}
END_TEST

Suite *suite_report(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 300); /* whole studies under sanitizers */
    const char *bin = getenv("VIJP_BIN");
    if (!bin || !*bin) tcase_add_test(tc, no_vijp_bin);
    else {
        tcase_add_test(tc, drift_writes_every_file);
        tcase_add_test(tc, drift_degenerate_studies_plot);
        tcase_add_test(tc, report_plots_layout);
        tcase_add_test(tc, backprop_safe_depth_beside);
        tcase_add_test(tc, drift_is_deterministic);
        tcase_add_test(tc, report_catalogue_sections);
        tcase_add_test(tc, drift_bad_input_writes_nothing);
        tcase_add_test(tc, regress_flags_a_one_ulp_vijp);
        tcase_add_test(tc, errors_at_every_precision);
        tcase_add_test(tc, killed_run_leaves_whole_files);
        tcase_add_test(tc, report_quick_study);
        tcase_add_test(tc, wide_layer_certified_at_one_point);
        tcase_add_test(tc, certified_points_on_jobs_match_serial);
        tcase_add_test(tc, report_all_or_nothing);
        tcase_add_test(tc, report_refuses_cut_plots);
        tcase_add_test(tc, drift_stdout_failure_keeps_report);
    }
    suite_add_tcase(s, tc);
    return s;
}

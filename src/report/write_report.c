/* The files of a drift report: drift.csv (every layer), curves.csv (medians
 * over seeds, what the plots read), summary.csv (the verdicts), memory.csv
 * (every engine's stored bytes against depth), plots rendered by gnuplot,
 * drift.json and report.md, written into a new generation of the report
 * folder (atomic.h). */
#include "atomic.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "study/stats.h"
#include "write.h"
#include "vijp/vijp.h"
#include "vijp/catalogue.h"
#include "vijp/certify.h"
#include "sections.h"
#include "prerender.h"
#include "base/fork.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void csv_num(FILE *o, double x) { fprintf(o, isfinite(x) ? ",%.17g" : ",NaN", x); }

/* An error at any exponent: the same 17 digits, which read back exactly
 * (1.61…e-1214 past double's range, where a spreadsheet reads 0). */
static void csv_xnum(FILE *o, vijp_xnum x)
{
    char buf[64];
    if (!vijp_xnum_isfinite(x)) fputs(",NaN", o);
    else vijp_xnum_snprintf(buf, sizeof buf, "," VIJP_XNUM_ROUND_TRIP, x), fputs(buf, o);
}

static int fill_drift_csv(FILE *o, const void *ctx)
{
    const study *s = ctx;
    fputs("config,spec,init,format,seed,engine,layer,g_rel,g_ulps,g_angle_deg,theta_rel,theta_ulps,"
          "theta_angle_deg,bound,kappa,predicted,stored_bytes,reconstruction\n", o);
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++)
            for (size_t k = 0; k < s->n_seeds; k++) {
                const vijp_drift_curve *cu = study_curve(s, c, f, k);
                for (size_t r = 0; r < cu->n_runs; r++) {
                    const vijp_drift_run_result *run = &cu->runs[r];
                    for (size_t i = 0; i < cu->depth; i++) {
                        fprintf(o, "%zu,\"%s\",%s,%s,%llu,%s,%zu", c + 1, s->configs[c].spec, s->configs[c].init_name,
                                s->formats[f].name, (unsigned long long)s->seeds[k], vijp_engine_name(run->engine), i + 1);
                        const vijp_metric *m[2] = {&run->g[i], &run->theta[i]};
                        for (int t = 0; t < 2; t++) csv_xnum(o, m[t]->rel), csv_xnum(o, m[t]->ulps), csv_xnum(o, m[t]->angle_deg);
                        csv_xnum(o, run->bound ? run->bound[i] : vijp_xnum_of(NAN));
                        csv_num(o, cu->kappa[i]);
                        csv_xnum(o, cu->predicted[i]);
                        fprintf(o, ",%zu", run->stored_by_depth[i]);
                        csv_xnum(o, run->reconstruction ? run->reconstruction[i] : vijp_xnum_of(NAN));
                        fputc('\n', o);
                    }
                }
            }
    return ferror(o);
}

/* Column of curves.csv holding the stored bytes of run r (1-based, for gnuplot). */
#define CURVES_BYTES_COL 12

/* curves.csv, or (only = K) config K's rows alone: what that config's
 * plots read, so gnuplot does not scan every config's rows per curve, one
 * gnuplot data block per format (two blank lines between; a plot reads
 * format f's with `index f` and skips the rest unparsed, which halves
 * gnuplot's time). */
typedef struct {
    const study *s;
    size_t only;
} curves_sel;

/* One row of curves.csv: config c, format f, layer i (0-based), medians
 * over the seeds; what the plots draw (plot_span reads the same values). */
typedef struct {
    xspread err;
    vijp_xnum backprop, bound, predicted, recon;
    double ratio;
} curves_row;

static curves_row curves_row_of(const study *s, size_t c, size_t f, size_t i)
{
    size_t n = s->n_seeds, vr = verdict_run(s), rr = reversible_run(s);
    vijp_xnum v[5][STUDY_MAX], nan = vijp_xnum_of(NAN);
    double ratio[STUDY_MAX];
    for (size_t k = 0; k < n; k++) {
        const vijp_drift_curve *cu = study_curve(s, c, f, k);
        vijp_xnum e = cu->runs[vr].g[i].rel, b = cu->runs[0].g[i].rel;
        v[0][k] = e, v[1][k] = b, ratio[k] = b.m > 0 ? vijp_xnum_double(vijp_xnum_div(e, b)) : NAN;
        v[2][k] = cu->runs[vr].bound ? cu->runs[vr].bound[i] : nan;
        v[3][k] = cu->predicted[i];
        const vijp_xnum *rec = rr ? cu->runs[rr].reconstruction : NULL;
        v[4][k] = rec ? rec[i] : nan;
    }
    curves_row row = {.err = xspread_of(v[0], n)};
    row.backprop = xspread_of(v[1], n).median, row.ratio = spread_of(ratio, n).median;
    row.bound = xspread_of(v[2], n).median, row.predicted = xspread_of(v[3], n).median;
    row.recon = xspread_of(v[4], n).median;
    return row;
}

static int fill_curves_rows(FILE *o, const study *s, size_t only)
{
    size_t nr = 1 + s->n_engines;
    fputs("config,format_index,format,layer,err_med,err_min,err_max,backprop_med,ratio_med,bound_med,predicted_med", o);
    fputs(",bytes_backprop", o);
    for (size_t e = 0; e < s->n_engines; e++) fprintf(o, ",bytes_%s", vijp_engine_name(s->engines[e]));
    fputs(",recon_med\n", o);
    for (size_t c = only ? only - 1 : 0; c < (only ? only : s->n_configs); c++)
        for (size_t f = 0; f < s->n_formats; f++)
            for (size_t i = 0; i < s->depth; i++) {
                if (only && f && !i) fputs("\n\n", o);
                curves_row row = curves_row_of(s, c, f, i);
                fprintf(o, "%zu,%zu,%s,%zu", c + 1, f, s->formats[f].name, i + 1);
                csv_xnum(o, row.err.median), csv_xnum(o, row.err.min), csv_xnum(o, row.err.max);
                csv_xnum(o, row.backprop), csv_num(o, row.ratio), csv_xnum(o, row.bound), csv_xnum(o, row.predicted);
                for (size_t r = 0; r < nr; r++) fprintf(o, ",%zu", study_curve(s, c, f, 0)->runs[r].stored_by_depth[i]);
                csv_xnum(o, row.recon);
                fputc('\n', o);
            }
    return ferror(o);
}

static int fill_curves_csv(FILE *o, const void *ctx) { return fill_curves_rows(o, ctx, 0); }
static int fill_curves_one(FILE *o, const void *ctx)
{
    const curves_sel *q = ctx;
    return fill_curves_rows(o, q->s, q->only);
}

typedef struct {
    spread safe, growth, predicted, lyap, bits, price;
    spread backprop_safe; /* backprop's own safe depth in the same format: what no rebuilding can beat */
    int extrapolated;
} verdict;

/* How the first curve with wide layers had its κ and spread estimated; NULL
 * where every curve's are exact (vijp_drift_curve.cond_method). */
static const char *cond_estimated(const study *s)
{
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++)
            for (size_t k = 0; k < s->n_seeds; k++) {
                const char *m = study_curve(s, c, f, k)->cond_method;
                if (m[0] && strcmp(m, "exact")) return m;
            }
    return NULL;
}

static verdict verdict_of(const study *s, size_t c, size_t f)
{
    int *has_param = config_has_param(s, c);
    double v[7][STUDY_MAX];
    verdict out = {0};
    for (size_t k = 0; k < s->n_seeds && has_param; k++) {
        const vijp_drift_curve *cu = study_curve(s, c, f, k);
        run_stats st, bp;
        run_stats_of(cu, verdict_run(s), has_param, s->tol[f], (long)s->formats[f].prec, &st);
        run_stats_of(cu, 0, has_param, s->tol[f], (long)s->formats[f].prec, &bp);
        v[0][k] = st.safe_depth, v[1][k] = st.growth_rate, v[2][k] = cu->predicted_rate;
        v[3][k] = cu->lyap_rate, v[4][k] = st.bits_needed, v[5][k] = st.price, v[6][k] = bp.safe_depth;
        out.extrapolated |= st.bits_extrapolated;
    }
    free(has_param);
    size_t n = s->n_seeds;
    out.safe = spread_of(v[0], n), out.growth = spread_of(v[1], n), out.predicted = spread_of(v[2], n);
    out.lyap = spread_of(v[3], n), out.bits = spread_of(v[4], n), out.price = spread_of(v[5], n);
    out.backprop_safe = spread_of(v[6], n);
    return out;
}

static int fill_summary_csv(FILE *o, const void *ctx)
{
    const study *s = ctx;
    fputs("config,spec,init,format,tol,safe_depth_min,safe_depth_median,safe_depth_max,growth_rate_median,"
          "predicted_rate_median,lyapunov_rate_median,bits_needed_median,bits_extrapolated,price_median,"
          "backprop_safe_depth_median\n", o);
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++) {
            verdict v = verdict_of(s, c, f);
            char tol[40];
            vijp_xnum_snprintf(tol, sizeof tol, "%g", s->tol[f]);
            fprintf(o, "%zu,\"%s\",%s,%s,%s", c + 1, s->configs[c].spec, s->configs[c].init_name, s->formats[f].name, tol);
            double x[] = {v.safe.min, v.safe.median, v.safe.max, v.growth.median, v.predicted.median, v.lyap.median, v.bits.median};
            for (size_t j = 0; j < sizeof x / sizeof *x; j++) csv_num(o, x[j]);
            fprintf(o, ",%d", v.extrapolated);
            csv_num(o, v.price.median);
            csv_num(o, v.backprop_safe.median);
            fputc('\n', o);
        }
    return ferror(o);
}

static int fill_json(FILE *o, const void *ctx)
{
    if (json_dumpf(ctx, o, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) return -1;
    fputc('\n', o);
    return ferror(o);
}

/* ---- plots ---- */

static int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    char buf[4096];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, p);
        if (access(buf, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

/* A gnuplot single-quoted string: quotes doubled. */
static void gq(FILE *o, const char *s)
{
    fputc('\'', o);
    for (; *s; s++) fputs(*s == '\'' ? "''" : (char[]){*s, 0}, o);
    fputc('\'', o);
}

#define PLOT_KINDS 5
static const char *const plot_kinds[PLOT_KINDS] = {"error", "ratio", "bytes", "recon", "memory"};

/* Errors past 1 carry no correct digit: the error plot stops at 1e4. */
#define ERROR_PLOT_TOP 1e4

/* What a log-scale plot can draw: finite, positive, and (error plot) under
 * its top.  gnuplot reads doubles: an error past double's range (mpfr:P
 * past about 1070) is not drawn, as gnuplot reads it as 0 (the CSVs and
 * tables hold it). */
static void span_add(double *lo, double *hi, double v, double top)
{
    if (!(isfinite(v) && v > 0 && v <= top)) return;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
}

/* An error: drawn where it is a double; counted in *below where it lies
 * under double's range, so that the plot can say why it is empty. */
static void span_add_x(double *lo, double *hi, size_t *below, vijp_xnum v, double top)
{
    if (!vijp_xnum_is_double(v) && v.m > 0 && v.e < 0) (*below)++;
    else span_add(lo, hi, vijp_xnum_double(v), top);
}

/* The smallest and largest value that plot `kind` of config c draws, as
 * gnuplot reads them from the scratch CSVs (the same numbers, the same
 * filters); lo > hi when there is none.  *below: how many lie under
 * double's range (not drawn). */
static void plot_span(const study *s, size_t c, int kind, const memory_table *mem, double *lo, double *hi,
                      size_t *below)
{
    double top = kind == 0 ? ERROR_PLOT_TOP : INFINITY;
    *lo = INFINITY, *hi = -INFINITY, *below = 0;
    if (kind == 4) {
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++)
            for (size_t d = 0; d < s->depth; d++) span_add(lo, hi, (double)mem_at(mem, c, (size_t)e)[d], top);
        return;
    }
    for (size_t f = 0; f < s->n_formats; f++) {
        if (kind == 0) span_add_x(lo, hi, below, s->tol[f], top);
        for (size_t i = 0; i < s->depth; i++) {
            if (kind == 2) {
                for (size_t r = 0; r <= s->n_engines; r++)
                    span_add(lo, hi, (double)study_curve(s, c, f, 0)->runs[r].stored_by_depth[i], top);
                continue;
            }
            curves_row row = curves_row_of(s, c, f, i);
            if (kind == 0) {
                span_add_x(lo, hi, below, row.err.median, top), span_add_x(lo, hi, below, row.bound, top);
                span_add_x(lo, hi, below, row.predicted, top);
            }
            else if (kind == 1) span_add(lo, hi, row.ratio, top);
            else span_add_x(lo, hi, below, row.recon, top);
        }
    }
}

/* The axes of plot `kind`: x the study's layers (1 to the depth; the recon
 * plot's layer inputs 0 to depth − 1), not gnuplot's rounding of them (300
 * for 256); y autoscaled on the log scale.  gnuplot refuses a range of one
 * value (one layer; a series that is constant everywhere) and a plot with no
 * point to draw (errors all zero, or below double's range, as mpfr:P's are
 * past P ≈ 1070; a ratio over a backprop error of zero): those get a range
 * of their own, a decade around the value, and a note saying which and no y
 * tics where nothing can be drawn. */
static void plot_axes(FILE *g, const study *s, size_t c, int kind, const memory_table *mem)
{
    size_t x0 = kind == 3 ? 0 : 1, x1 = kind == 3 ? s->depth - 1 : s->depth;
    if (x0 == x1) fprintf(g, "set xrange [%g:%g]\n", x0 - 0.5, x1 + 0.5);
    else fprintf(g, "set xrange [%zu:%zu]\n", x0, x1);
    fputs("unset label\n", g);
    double lo, hi;
    size_t below;
    plot_span(s, c, kind, mem, &lo, &hi, &below);
    fputs(lo > hi ? "unset ytics\n" : "set ytics\n", g);
    if (lo > hi && below)
        fputs("set yrange [0.1:10]\nset label \"nothing to draw on a log scale:\\nthe values lie below double's range "
              "(errors of mpfr:P past P = 1070),\\nwhich a plot cannot hold (curves.csv and drift.csv do)\" at graph 0.5, "
              "0.5 center noenhanced\n", g);
    else if (lo > hi)
        fputs("set yrange [0.1:10]\nset label \"nothing to draw on a log scale:\\nevery value is zero or undefined\\n"
              "(curves.csv holds them)\" at graph 0.5, 0.5 center noenhanced\n", g);
    else if (lo == hi)
        fprintf(g, "set yrange [%.17g:%.17g]\n", lo / 10, hi * 10);
    else if (kind == 0)
        fprintf(g, "set yrange [*:%g]\n", ERROR_PLOT_TOP);
    else
        fputs("set yrange [*:*]\n", g);
}

/* A curve's style: lines, and a point for each layer where the curve has a
 * single layer (no line to draw). */
static const char *curve_style(const study *s) { return s->depth > 1 ? "lines" : "linespoints pt 7 ps 1.5"; }

/* The key: beside the plot where each format has one curve; where it has
 * several (the error plot's tolerance, measured, bound and prediction; the
 * bytes plot's runs), under the plot in a smaller font, a line per format
 * and a column per kind of curve: beside it, their titles of up to 37
 * characters took 45% of the width.  gnuplot fills a key column by column
 * (plot_commands lists the curves kind by kind), and sizes the columns from
 * a character width about a fifth wider than the font's average: a column
 * as wide as the longest title (longest, in characters) is that fifth
 * narrower. */
static void plot_key(FILE *g, const study *s, size_t per_format, size_t longest)
{
    if (per_format > 1)
        fprintf(g, "set key default\nset key below vertical maxrows %zu Left reverse samplen 2 width %d font ',8' "
                   "noenhanced\n", s->n_formats, -(int)(longest / 6));
    else
        fputs("set key default\nset key outside right top noenhanced\n", g);
}

/* recon: the reversible engine's reconstruction error per layer input, per
 * format; memory: every engine's stored bytes in double (memory.csv). */
static void plot_extra(FILE *g, const study *s, size_t c, int kind, const char *csv, const char *mem_csv,
                       const memory_table *mem)
{
    char title[512];
    const char *style = curve_style(s);
    snprintf(title, sizeof title, "%s (%s): %s", s->configs[c].spec, s->configs[c].init_name,
             kind == 3 ? "reversible engine, ||h_i - rebuilt h_i|| / ||h_i||" : "stored bytes for a network of depth d, every engine (double)");
    fputs("set title ", g);
    gq(g, title);
    fprintf(g, "\nset xlabel %s\nset ylabel %s\n", kind == 3 ? "'layer input i'" : "'depth d'",
            kind == 3 ? "'relative error'" : "'bytes'");
    plot_key(g, s, 1, 0);
    plot_axes(g, s, c, kind, mem);
    fputs("unset arrow\nplot ", g);
    if (kind == 3) {
        for (size_t f = 0; f < s->n_formats; f++) {
            fputs(f ? ", " : "", g);
            gq(g, csv);
            fprintf(g, " index %zu using ($4-1):(($1==%zu && $2==%zu && $%zu>0) ? $%zu : 1/0) with %s lw 2 lc %zu title '%s'", f, c + 1, f,
                    CURVES_BYTES_COL + 1 + s->n_engines, CURVES_BYTES_COL + 1 + s->n_engines, style, f + 1, s->formats[f].name);
        }
    } else {
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) {
            fputs(e ? ", " : "", g);
            gq(g, mem_csv);
            fprintf(g, " index %d using 4:(($1==%zu && $2==%d && $5>0) ? $5 : 1/0) with %s lw 2 dt %d lc %d title '%s'", e, c + 1, e, style,
                    e + 1, e + 1, vijp_engine_name((vijp_engine_kind)e));
        }
    }
    fputc('\n', g);
}

/* The key's title of curve j of format f in plot `kind` (plot_commands). */
static void curve_title(const study *s, int kind, size_t j, size_t f, char *buf, size_t size)
{
    const char *fn = s->formats[f].name;
    static const char *const lab[4] = {"tolerance", NULL, "bound", "Lyapunov prediction"};
    if (kind == 0)
        snprintf(buf, size, "%s %s", fn, j == 1 ? vijp_engine_name(s->n_engines ? s->engines[0] : VIJP_ENGINE_BACKPROP) : lab[j]);
    else if (kind == 1)
        snprintf(buf, size, "%s", fn);
    else
        snprintf(buf, size, "%s %s", fn, j ? vijp_engine_name(s->engines[j - 1]) : "backprop");
}

static void plot_commands(FILE *g, const study *s, size_t c, int kind, const char *csv, const memory_table *mem)
{
    const char *style = curve_style(s);
    fputs("set title ", g);
    char title[512];
    static const char *const what[3] = {"relative error of g_i against the MPFR reference",
                                        "error of rebuilt g_i over backprop's (the price)", "stored bytes for a network of depth d"};
    snprintf(title, sizeof title, "%s (%s): %s", s->configs[c].spec, s->configs[c].init_name, what[kind]);
    gq(g, title);
    fprintf(g, "\nset xlabel %s\nset ylabel %s\n", kind == 2 ? "'depth d'" : "'layer i'",
            kind == 0 ? "'relative 2-norm error'" : kind == 1 ? "'ratio'" : "'bytes'");
    /* curves per format: tolerance, measured, bound, prediction; one; or the bytes of every run */
    size_t per = kind == 0 ? 4 : kind == 1 ? 1 : 1 + s->n_engines, longest = 0;
    for (size_t j = 0; j < per; j++)
        for (size_t f = 0; f < s->n_formats; f++) {
            curve_title(s, kind, j, f, title, sizeof title);
            if (strlen(title) > longest) longest = strlen(title);
        }
    plot_key(g, s, per, longest);
    plot_axes(g, s, c, kind, mem);
    fputs("unset arrow\nplot ", g);
    for (size_t j = 0; j < per; j++)
        for (size_t f = 0; f < s->n_formats; f++) {
            int lc = (int)f + 1;
            fputs(j || f ? ", " : "", g);
            curve_title(s, kind, j, f, title, sizeof title);
            if (kind == 0 && j == 0) {
                /* the format's tolerance, a curve of its own so the key names it:
                 * the safe depth is where the measured curve crosses it */
                fprintf(g, "%.17g with lines dt 4 lw 1 lc %d title ", vijp_xnum_double(s->tol[f]), lc);
            } else {
                gq(g, csv);
                if (kind == 0) {
                    static const int cols[4] = {0, 5, 10, 11};
                    fprintf(g, " index %zu using 4:(($1==%zu && $2==%zu && $%d>0) ? $%d : 1/0) with %s lw %d dt %zu lc %d title ",
                            f, c + 1, f, cols[j], cols[j], style, j > 1 ? 1 : 2, j, lc);
                } else if (kind == 1) {
                    fprintf(g, " index %zu using 4:(($1==%zu && $2==%zu && $9>0) ? $9 : 1/0) with %s lw 2 lc %d title ", f, c + 1, f,
                            style, lc);
                } else {
                    fprintf(g, " index %zu using 4:(($1==%zu && $2==%zu) ? $%zu : 1/0) with %s lw 2 dt %zu lc %d title ", f, c + 1, f,
                            CURVES_BYTES_COL + j, style, j + 1, lc);
                }
            }
            gq(g, title);
        }
    fputc('\n', g);
}

/* gnuplot reading its script from the returned stream.  It dies with us
 * (PR_SET_PDEATHSIG): a killed run must not leave it writing temporaries. */
static FILE *spawn_gnuplot(pid_t *pid)
{
    int fd[2];
    /* close-on-exec: a gnuplot started later must not hold this one's
     * write end, or closing it would never reach this one as EOF
     * (several run at once, render_all_plots); dup2 below clears it on
     * the child's stdin. */
    if (pipe2(fd, O_CLOEXEC)) return NULL;
    pid_t parent = getpid();
    *pid = fork();
    if (*pid < 0) {
        close(fd[0]), close(fd[1]);
        return NULL;
    }
    if (*pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        dup2(fd[0], 0);
        close(fd[0]), close(fd[1]);
        /* Its warnings (an empty curve: a format that failed from layer 1)
         * are noise; failure shows in the exit status. */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2), close(null);
        execlp("gnuplot", "gnuplot", (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    return fdopen(fd[1], "w");
}

static int wait_gnuplot(FILE *g, pid_t pid)
{
    int st;
    fclose(g);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* gnuplot exits 0 when its own writes fail (a full disk: 0-byte or cut
 * PNGs and SVGs), so its exit status cannot say that a plot is whole: each
 * file is read back and must end as its format ends, a PNG with its IEND
 * chunk, an SVG with </svg> (trailing white space aside). */
static int plot_complete(const char *path, char *why, size_t size)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    int png = strlen(path) > 4 && !strcmp(path + strlen(path) - 4, ".png");
    unsigned char head[8], tail[64];
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st)) {
        snprintf(why, size, "cannot read it back (%s)", strerror(errno));
        if (fd >= 0) close(fd);
        return 0;
    }
    size_t n = st.st_size < (off_t)sizeof tail ? (size_t)st.st_size : sizeof tail;
    int ok = S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof head && pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
             pread(fd, tail, n, st.st_size - (off_t)n) == (ssize_t)n;
    close(fd);
    if (ok && png) ok = !memcmp(head, png_sig, sizeof png_sig) && n >= sizeof iend && !memcmp(tail + n - sizeof iend, iend, sizeof iend);
    else if (ok) {
        while (n && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' ' || tail[n - 1] == '\t')) n--;
        ok = n >= 6 && !memcmp(tail + n - 6, "</svg>", 6);
    }
    if (!ok) snprintf(why, size, "%lld bytes, %s", (long long)st.st_size, png ? "no PNG end chunk" : "no closing </svg>");
    return ok;
}

/* A plot gnuplot wrote, checked whole (plot_complete) before it joins the
 * report: a cut one fails the run, and the previous report stays. */
static int add_plot(report_out *out, const char *name, vijp_error *err)
{
    char path[PATH_MAX], why[128];
    report_out_path(out, name, path, sizeof path);
    if (!plot_complete(path, why, sizeof why))
        return vijp_fail(err, VIJP_EIO, "gnuplot wrote an incomplete %s/%s: %s (is the disk full?)", out->shown, name, why);
    return report_out_add(out, name, err);
}

/* The j-th plot drawn for every config: error, ratio, bytes, [recon when the
 * reversible engine ran], memory. */
static int plot_kind(const study *s, int j) { return j < 3 ? j : reversible_run(s) && j == 3 ? 3 : 4; }

/* File k of config c's plots: kind k / 2, PNG for even k, SVG for odd. */
static void plot_file(const study *s, size_t c, int k, char *name, size_t size)
{
    snprintf(name, size, "%s-c%zu.%s", plot_kinds[plot_kind(s, k / 2)], c + 1, k % 2 ? "svg" : "png");
}

/* One config's plots in the making: its gnuplot has its whole script and
 * writes while the next configs' start (render_all_plots). */
typedef struct {
    pid_t pid;
    FILE *g;
    char csv[PATH_MAX], mem_csv[PATH_MAX];
} plot_job;

/* Start rendering error-, ratio-, bytes-, [recon-] and memory-c<K>.{png,svg}
 * for config c, gnuplot reading config c's rows of curves.csv and
 * memory.csv from scratch files of its own; finish_plots waits for it. */
static int start_plots(const study *s, size_t c, const memory_table *mem, report_out *out, plot_job *job, vijp_error *err)
{
    int rc = 0, kinds = reversible_run(s) ? 5 : 4;
    char name[64], path[PATH_MAX];
    curves_sel q = {s, c + 1};
    memory_table mq = *mem;
    mq.only = c + 1;
    job->g = NULL;
    snprintf(name, sizeof name, "curves-c%zu.csv", c + 1);
    if ((rc = report_out_scratch(out, name, fill_curves_one, &q, job->csv, sizeof job->csv, err))) return rc;
    snprintf(name, sizeof name, "memory-c%zu.csv", c + 1);
    if ((rc = report_out_scratch(out, name, fill_memory_csv, &mq, job->mem_csv, sizeof job->mem_csv, err))) {
        unlink(job->csv);
        return rc;
    }
    const char *csv = job->csv, *mem_csv = job->mem_csv;
    FILE *g = job->g = spawn_gnuplot(&job->pid);
    if (g) {
        fputs("set datafile separator ','\nset grid\nset logscale y\n"
              "set format y '10^{%L}'\nset termoption enhanced\n", g);
        if (s->depth < 8) fputs("set xtics 1\n", g); /* layers are whole: no tic at 1.2, 1.4, ... */
        for (int j = 0; j < kinds; j++) {
            int kind = plot_kind(s, j);
            fputs("set terminal pngcairo size 1100,600\nset output ", g);
            plot_file(s, c, 2 * j, name, sizeof name), report_out_path(out, name, path, sizeof path);
            gq(g, path);
            fputc('\n', g);
            if (kind < 3) plot_commands(g, s, c, kind, csv, mem);
            else plot_extra(g, s, c, kind, csv, mem_csv, mem);
            fputs("set terminal svg size 1100,600 dynamic\nset output ", g);
            plot_file(s, c, 2 * j + 1, name, sizeof name), report_out_path(out, name, path, sizeof path);
            gq(g, path);
            fputs("\nreplot\nunset output\n", g);
        }
        fflush(g);
    }
    return 0;
}

/* Wait for config c's gnuplot (started by start_plots) and add its files
 * to the report; err set only where rc was 0 (the first failure is told). */
static int finish_plots(const study *s, size_t c, report_out *out, plot_job *j, int rc, vijp_error *err)
{
    char name[64];
    int kinds = reversible_run(s) ? 5 : 4;
    int ok = j->g && wait_gnuplot(j->g, j->pid) == 0;
    if (!ok && !rc) rc = vijp_fail(err, VIJP_EINVAL, "gnuplot failed on the plots of config %zu", c + 1);
    for (int k = 0; k < 2 * kinds && !rc; k++) {
        plot_file(s, c, k, name, sizeof name);
        rc = add_plot(out, name, err);
    }
    unlink(j->csv), unlink(j->mem_csv);
    return rc;
}

/* Every config's plots, several gnuplots at a time (2·max(2, --jobs)),
 * started before the report's other files are written so that they draw
 * while those are formed: one after another, after everything else, they
 * were a tenth of the default report's time, on one core. */
typedef struct {
    plot_job *jobs;
    size_t first, next, window; /* jobs first..next−1 are running */
    int rc;
} plot_run;

static void plots_start(const study *s, const memory_table *mem, report_out *out, plot_run *p, vijp_error *err)
{
    while (!p->rc && p->next < s->n_configs && p->next - p->first < p->window) {
        p->rc = start_plots(s, p->next, mem, out, &p->jobs[p->next], err);
        if (!p->rc) p->next++;
    }
}

/* Wait for every plot (starting the rest), or after a failure (rc) for
 * those running: their scratch files go, nothing more is added. */
static int plots_finish(const study *s, const memory_table *mem, report_out *out, plot_run *p, int rc, vijp_error *err)
{
    if (rc && !p->rc) p->rc = rc;
    while (p->first < s->n_configs) {
        plots_start(s, mem, out, p, err);
        if (p->first == p->next) break; /* nothing running: a start failed */
        p->rc = finish_plots(s, p->first, out, &p->jobs[p->first], p->rc, err);
        p->first++;
    }
    free(p->jobs);
    return p->rc;
}

/* safe-depth.{png,svg}: the verdict at a glance, safe depth (median over
 * seeds) per config × format as a heat map with the numbers written in. */
static int render_overview(const study *s, report_out *out, vijp_error *err)
{
    pid_t pid;
    FILE *g = spawn_gnuplot(&pid);
    char path[PATH_MAX];
    if (g) {
        fprintf(g, "set title 'safe depth (median over seeds) of %zu layers'\n"
                   "set xtics (", s->depth);
        for (size_t f = 0; f < s->n_formats; f++) {
            fputs(f ? ", " : "", g);
            gq(g, s->formats[f].name);
            fprintf(g, " %zu", f);
        }
        fputs(")\nset ytics (", g);
        for (size_t c = 0; c < s->n_configs; c++) {
            char label[300];
            snprintf(label, sizeof label, "c%zu %s (%s)", c + 1, s->configs[c].spec, s->configs[c].init_name);
            fputs(c ? ", " : "", g);
            gq(g, label);
            fprintf(g, " %zu", c);
        }
        fprintf(g, ")\nset yrange [%zu.5:-0.5] reverse\nset xrange [-0.5:%zu.5]\nset cbrange [0:%zu]\n"
                   "set palette defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')\nset cblabel 'safe depth'\n"
                   "set tics nomirror\nset tics noenhanced\nset xtics rotate by 30 right\nunset key\n", s->n_configs - 1, s->n_formats - 1, s->depth);
        /* The formats' names slanted (side by side, bfloat16, bfloat16+binary32
         * and binary32 ran into one string), and the height they take below
         * the map added to it, about 4 pixels a character at 30°. */
        size_t longest = 0;
        for (size_t f = 0; f < s->n_formats; f++)
            if (strlen(s->formats[f].name) > longest) longest = strlen(s->formats[f].name);
        int height = 220 + 36 * (int)s->n_configs + 4 * (int)longest;
        for (int k = 0; k < 2; k++) {
            fprintf(g, k ? "set terminal svg size 1100,%d dynamic\nset output " : "set terminal pngcairo size 1100,%d\nset output ",
                    height);
            report_out_path(out, k ? "safe-depth.svg" : "safe-depth.png", path, sizeof path);
            gq(g, path);
            /* boxes, not 'with image', which needs two rows and two columns to size a pixel */
            fputs("\nplot '-' using 1:2:(0.5):(0.5):3 with boxxyerror fc palette fs solid 1.0 border lc rgb 'white', "
                  "'-' using 1:2:4 with labels\n", g);
            for (int pass = 0; pass < 2; pass++) { /* the same rows for the image and for the labels */
                for (size_t c = 0; c < s->n_configs; c++)
                    for (size_t f = 0; f < s->n_formats; f++) {
                        double d = verdict_of(s, c, f).safe.median;
                        char num[32];
                        snprintf(num, sizeof num, isfinite(d) ? "%.0f" : "-", d);
                        fprintf(g, "%zu %zu %.17g \"%s\"\n", f, c, isfinite(d) ? d : 0.0, num);
                    }
                fputs("e\n", g);
            }
            fputs("unset output\n", g);
        }
    }
    if (!(g && wait_gnuplot(g, pid) == 0)) return vijp_fail(err, VIJP_EINVAL, "gnuplot failed on the safe-depth overview");
    int rc = add_plot(out, "safe-depth.png", err);
    return rc ? rc : add_plot(out, "safe-depth.svg", err);
}

/* ---- report.md ---- */

static void md_spread(FILE *o, spread v, const char *fmt)
{
    if (isnan(v.median)) {
        fputs(" n/a |", o);
        return;
    }
    if (isinf(v.median)) { /* a layer with an exact cokernel (ReLU, LayerNorm) makes the product singular */
        fputs(" ∞ (singular product) |", o);
        return;
    }
    fputc(' ', o);
    fprintf(o, fmt, v.median);
    if (v.min != v.max) {
        fputs(" (", o);
        fprintf(o, fmt, v.min);
        fputs("–", o);
        fprintf(o, fmt, v.max);
        fputc(')', o);
    }
    fputs(" |", o);
}

/* The points of md_certify, each certified on its own copy of the net up
 * to the layer (ranges of them on the study's jobs: the report is written
 * once every curve is done, so the cores are free; base/fork.h).  Point k
 * (0-based) initialises its copy from seed k + 1, which draws every
 * parameter afresh, so a copy per point holds what the one net reused
 * point after point held; the inputs are drawn beforehand, in order.  As
 * many copies at once as threads: those run at once only while their
 * parameters stay under CERTIFY_COPIES_BYTES together (a layer deep in a
 * wide net copies every layer before it). */
enum { CERTIFY_COPIES_BYTES = 256 << 20 };
typedef struct {
    const vijp_net *upto;
    vijp_init init;
    size_t layer;
    const double *x;      /* points × the layer's inputs */
    size_t points;
    vijp_net *nets;       /* each point's copy, freed once it is certified but the last one's */
    vijp_certificate *cert;
    vijp_error *err;
    int *rc;
} certify_points;

static void certify_range(void *ctx, size_t part, size_t begin, size_t end)
{
    certify_points *c = ctx;
    (void)part;
    for (size_t k = begin; k < end; k++) {
        vijp_net *net = &c->nets[k];
        vijp_net_copy(net, c->upto);
        const vijp_layer *L = &net->layers[c->layer];
        c->rc[k] = vijp_net_init(net, c->init, k + 1, &c->err[k]) ||
                   vijp_certify_layer(L, net->theta[c->layer], c->x + k * L->in, NULL, &c->cert[k], &c->err[k]);
        if (k + 1 < c->points) vijp_net_free(net); /* the last point's θ is read after */
    }
}

/* The activation cell of md_certify: where f′ vanishes on [−1000, 1000]
 * (interval bisection) and where each format's f′ becomes negligible or
 * underflows; "—" for a type without an enclosure of f′. */
static void md_activation(FILE *o, const vijp_layer *L, const double *theta)
{
    vijp_activation_report act;
    if (!vijp_deriv_enclose_of(L->type) || vijp_activation_analyze(L, theta, 1000, 1e-9, &act, NULL)) {
        fputs(" — |", o);
        return;
    }
    if (act.complete && !act.n_bad) fputs(" f′ ≠ 0 on [−1000, 1000];", o);
    else fprintf(o, " f′ may vanish on %zu piece(s) of [−1000, 1000], first [%.3g, %.3g];", act.n_bad,
                 act.n_bad ? act.bad[0].lo : NAN, act.n_bad ? act.bad[0].hi : NAN);
    for (size_t k = 0; k < act.n_fmt; k++)
        if (isfinite(act.fmt[k].negligible_at) || isfinite(act.fmt[k].underflow_at))
            fprintf(o, " %s: f′ negligible beyond ±%.3g, 0 beyond ±%.3g;", act.fmt[k].format, act.fmt[k].negligible_at,
                    act.fmt[k].underflow_at);
    vijp_activation_report_clear(&act);
    fputs(" |", o);
}

/* Certification of one layer of config c at 8 points (inputs N(0,1), the
 * config's initialisation, seeds 1..8), as `vijp certify` would; a layer
 * wider than CERTIFY_ALL_POINTS_WIDTH_MAX at the first point only, said in
 * the cell: each point draws the layer and takes the SVD of its n × n
 * Jacobian, O(n³), about 4 s at 2048 and 35 s at 4096 on one core, which
 * eight times over would outweigh the study's curves. */
static void md_certify(FILE *o, const study *s, size_t c, size_t layer)
{
    enum { CERTIFY_ALL_POINTS_WIDTH_MAX = 1024 };
    /* A Jacobian not known exactly is formed in MPFR from n jvps, each a
     * whole evaluation of the layer: for a 2048-wide RevViT block (attention
     * and MLP inside) that is hours, not the seconds a report may take. */
    enum { CERTIFY_MPFR_WIDTH_MAX = 256 };
    const vijp_layer *top = &s->nets[s->configs[c].net].layers[layer];
    const unsigned points = top->in > CERTIFY_ALL_POINTS_WIDTH_MAX || top->out > CERTIFY_ALL_POINTS_WIDTH_MAX ? 1 : 8;
    if (!top->type->jacobian_exact && top->in > CERTIFY_MPFR_WIDTH_MAX) {
        fprintf(o, " not run: width %zu > %d, where certifying needs %zu MPFR evaluations of the layer per point "
                "(`vijp certify --net NET --layer-index %zu`) | — |", top->in, CERTIFY_MPFR_WIDTH_MAX, top->in, layer);
        return;
    }
    /* The net up to this layer only: vijp_net_init draws layer by layer from
     * one generator, so its parameters are the full net's, and no point
     * initialises all s->depth layers (a few seconds of the default report,
     * serial, spent on discarded draws). */
    vijp_net upto = s->nets[s->configs[c].net];
    upto.depth = layer + 1;
    double *x = vijp_alloc_array(points * top->in, sizeof *x), smin = INFINITY;
    vijp_rng rng;
    vijp_rng_seed(&rng, 0xce47);
    for (size_t i = 0; i < points * top->in; i++) x[i] = vijp_rng_normal(&rng);
    certify_points run = {.upto = &upto, .init = s->configs[c].init, .layer = layer, .x = x, .points = points,
                          .nets = vijp_alloc_array(points, sizeof(vijp_net)),
                          .cert = vijp_alloc_array(points, sizeof(vijp_certificate)),
                          .err = vijp_alloc_array(points, sizeof(vijp_error)), .rc = vijp_alloc_array(points, sizeof(int))};
    double copy = sizeof(double) * (double)vijp_net_param_count(&upto), n = (double)top->in;
    int threads = s->jobs;
    while (threads > 1 && (double)threads * copy > CERTIFY_COPIES_BYTES) threads--;
    /* One point (a wide layer) draws its copy on every job instead: an
     * orthogonal 2048-wide layer took 0.7 s on one core here (the same
     * values on any count, vijp_init.threads) */
    if (points == 1) run.init.threads = s->jobs;
    vijp_fork(threads, points, (double)points * n * n * n, certify_range, &run);
    size_t certified = 0, not_sub = 0, failed = points;
    for (size_t k = 0; k < points && failed == points; k++)
        if (run.rc[k]) failed = k;
    char method[32] = "";
    for (size_t k = 0; k < failed; k++) {
        const vijp_certificate *cert = &run.cert[k];
        certified += cert->verdict == VIJP_CERTIFIED_SUBMERSIVE;
        not_sub += cert->verdict == VIJP_NOT_SUBMERSIVE;
        if (cert->verdict == VIJP_CERTIFIED_SUBMERSIVE && cert->s < smin) smin = cert->s;
        if (!method[0]) snprintf(method, sizeof method, "%s", cert->method);
        else if (strcmp(method, cert->method)) snprintf(method, sizeof method, "mixed");
    }
    if (failed < points) fprintf(o, " error: %s |", run.err[failed].msg);
    else {
        fprintf(o, " %zu/%u certified (%s), %zu not submersive;", certified, points, method, not_sub);
        if (points == 1)
            fprintf(o, " one point only: wider than %d, where each point is an O(n³) SVD;", CERTIFY_ALL_POINTS_WIDTH_MAX);
        fprintf(o, isfinite(smin) ? " proven σ_min > %.3g |" : " no numerical bound on σ_min |", smin);
        md_activation(o, &run.nets[points - 1].layers[layer], run.nets[points - 1].theta[layer]);
    }
    for (size_t k = 0; k < points; k++)
        if (!run.rc[k]) vijp_certificate_clear(&run.cert[k]);
    vijp_net_free(&run.nets[points - 1]);
    free(x), free(run.nets), free(run.cert), free(run.err), free(run.rc);
}

static void md_layers(FILE *o, const study *s)
{
    fputs("\n## Layers used\n\nStructural declarations of each layer type in the study (docs/DESIGN.md §4), and `vijp "
          "certify` at 8 points (inputs N(0, 1), the configuration's initialisation): verdicts, the weakest proven "
          "bound, and for activations where f′ vanishes or becomes negligible in each format.\n\n"
          "| layer | submersive | invertible | Moonwalk keeps | certification | activation |\n|---|---|---|---|---|---|\n", o);
    const char *seen[64];
    size_t ns = 0;
    for (size_t c = 0; c < s->n_configs; c++) {
        const vijp_net *net = &s->nets[s->configs[c].net];
        for (size_t i = 0; i < net->depth; i++) {
            const vijp_layer *L = &net->layers[i];
            char label[96];
            snprintf(label, sizeof label, "%s %zu→%zu", L->type->name, L->in, L->out);
            if (L->type == vijp_layer_type_find("leaky")) snprintf(label, sizeof label, "leaky:%g %zu→%zu", vijp_leaky_slope(L), L->in, L->out);
            size_t j = 0;
            while (j < ns && strcmp(seen[j], label)) j++;
            if (j < ns || ns == 64) continue;
            seen[ns++] = vijp_strdup(label);
            unsigned d = L->type->declare(L);
            static const char *const keep[] = {"nothing", "sign bits", "inputs", "nothing (inverse rebuilds inputs)",
                                               "f′ (nested forward AD)"};
            fprintf(o, "| %s (c%zu) | %s | %s | %s |", label, c + 1,
                    d & VIJP_DECL_SUBMERSIVE ? "everywhere" : d & VIJP_DECL_NEVER_SUBMERSIVE ? "never" : "where J has full row rank",
                    d & VIJP_DECL_INVERTIBLE ? "yes" : "no", keep[L->type->residual]);
            md_certify(o, s, c, i);
            fputc('\n', o);
        }
    }
    for (size_t j = 0; j < ns; j++) free((void *)seen[j]);
}

typedef struct {
    const study *s;
    const memory_table *m;
} report_ctx;

static int fill_report_md(FILE *o, const void *ctx)
{
    const study *s = ((const report_ctx *)ctx)->s;
    const memory_table *m = ((const report_ctx *)ctx)->m;
    char machine[512], blas[512];
    machine_description(machine, sizeof machine);
    blas_description(blas, sizeof blas);
    const char *eng = vijp_engine_name(s->n_engines ? s->engines[0] : VIJP_ENGINE_BACKPROP);
    fprintf(o, "# vijp drift report\n\n`%s`\n\nvijp %s, depth %zu, width %zu, batch %zu, seeds", s->command, VIJP_VERSION,
            s->depth, s->width, s->batch);
    for (size_t k = 0; k < s->n_seeds; k++) fprintf(o, "%s%llu", k ? ", " : " ", (unsigned long long)s->seeds[k]);
    fprintf(o, ".  \nMachine: %s.  \nBLAS: %s.  \nMPFR %s, GMP %s.\n\n", machine, blas, mpfr_get_version(), gmp_version);
    fprintf(o, "Every gradient is compared with an MPFR backprop reference computed from the same rounded weights and "
               "inputs (so the error is arithmetic error only), validated by recomputing it at twice the precision "
               "until the two agree to 2^-10 of the format's unit roundoff");
    long lo = 0, hi = 0;
    for (size_t j = 0; j < s->n_configs * s->n_formats * s->n_seeds; j++) {
        long p = s->curves[j].ref_prec;
        if (!lo || p < lo) lo = p;
        if (p > hi) hi = p;
    }
    fprintf(o, lo == hi ? " (here at %ld bits).\n\n" : " (here at %ld to %ld bits).\n\n", lo, hi);
    /* The verdict before the tables: safe depth per config × format. */
    fprintf(o, "## At a glance\n\nSafe depth of %s's rebuilt gradients (median over seeds; of %zu layers):\n\n", eng,
            s->depth);
    if (s->plots) fputs("![safe depth per config and format](safe-depth.svg)\n\n", o);
    fputs("| config |", o);
    for (size_t f = 0; f < s->n_formats; f++) fprintf(o, " %s |", s->formats[f].name);
    fputs("\n|---|", o);
    for (size_t f = 0; f < s->n_formats; f++) fputs("---|", o);
    for (size_t c = 0; c < s->n_configs; c++) {
        fprintf(o, "\n| c%zu `%s` %s |", c + 1, s->configs[c].spec, s->configs[c].init_name);
        for (size_t f = 0; f < s->n_formats; f++) {
            double d = verdict_of(s, c, f).safe.median;
            fprintf(o, isfinite(d) ? " %.0f |" : " - |", d);
        }
    }
    fputs("\n\n", o);
    fprintf(o, "## Verdicts (%s)\n\n"
               "Median over seeds, (min–max) where they differ. *Safe depth*: deepest layer whose g_i and ∇θ_i "
               "errors all stay under the tolerance; *backprop's*: the same for exact backprop in the same format, which "
               "no rebuilt gradient can beat (a 0 there means the format itself fails the tolerance). *Growth*: least-squares slope of log10 error over layers "
               "in first order (error ≤ 0.1), decades per layer. *Predicted*: the same fit on the error the "
               "Lyapunov spread of the Jacobian product predicts (Benettin QR iteration, rounding errors adding in "
               "root-sum-square); *spread* is the asymptotic spread λ₁ − λₙ itself. *Bits*: significand bits that keep "
               "every layer up to depth %zu under the tolerance (first-order scaling with u; † extrapolated along "
               "the fit where the curve saturates). *Price*: the rebuilt g_i's worst error over backprop's worst, in the same format.\n\n",
            eng, s->depth);
    fputs("| config | format | tol | safe depth | backprop's | growth (dec/layer) | predicted | spread | bits | price |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n", o);
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++) {
            verdict v = verdict_of(s, c, f);
            char tol[40];
            vijp_xnum_snprintf(tol, sizeof tol, "%.3g", s->tol[f]);
            fprintf(o, "| c%zu `%s` %s | %s | %s |", c + 1, s->configs[c].spec, s->configs[c].init_name,
                    s->formats[f].name, tol);
            md_spread(o, v.safe, "%.0f");
            md_spread(o, v.backprop_safe, "%.0f");
            md_spread(o, v.growth, "%.3g");
            md_spread(o, v.predicted, "%.3g");
            md_spread(o, v.lyap, "%.3g");
            md_spread(o, v.bits, v.extrapolated ? "%.0f†" : "%.0f");
            md_spread(o, v.price, "%.3g");
            fputc('\n', o);
        }
    if (cond_estimated(s)) fprintf(o, "\nκ and the spread: %s (docs/drift.md).\n", cond_estimated(s));
    fputs("\n## Plots\n\nSolid: measured (median over seeds); dashed: first-order bound from per-layer condition "
          "numbers, starting from the measured g_0 error; dotted: the Lyapunov prediction; thin horizontal lines: "
          "each format's tolerance.  Errors are drawn up to 1e4 (past 1 no digit is correct).\n", o);
    for (size_t c = 0; c < s->n_configs; c++) {
        fprintf(o, "\n### c%zu: `%s`, %s initialisation\n\n", c + 1, s->configs[c].spec, s->configs[c].init_name);
        if (!s->plots) {
            fputs("(plots not rendered: gnuplot was not found or --no-plots was given; curves.csv holds the data)\n", o);
            continue;
        }
        for (int j = 0; j < (reversible_run(s) ? 5 : 4); j++)
            fprintf(o, "![%s c%zu](%s-c%zu.svg)\n", plot_kinds[plot_kind(s, j)], c + 1, plot_kinds[plot_kind(s, j)], c + 1);
    }
    md_reconstruction(o, s);
    md_nested(o, s);
    md_memory(o, m);
    md_layers(o, s);
    fputs("\n## Reproducibility\n\nbfloat16, binary16, binary32, the mixed formats (bfloat16+binary32: bf16 storage, binary32 "
          "accumulation, exact products) and mpfr:P are emulated in MPFR and bit-reproducible "
          "on any machine; `vijp regress` compares them exactly. double, and the FORMAT@SET formats (through a kernel "
          "set and sgemm or cuBLAS), go through BLAS/LAPACK, whose results can depend on the machine and the BLAS build, so they are "
          "compared with tolerances. The files: drift.json "
          "(everything, schema vijp-drift/2), drift.csv (every layer, seed and engine), curves.csv (medians, what "
          "the plots read), summary.csv (this table), memory.csv (every engine's stored bytes against depth, double).\n", o);
    return ferror(o);
}

static int fill_study_json(FILE *o, const void *ctx)
{
    json_t *j = study_json(ctx);
    int rc = fill_json(o, j);
    json_decref(j);
    return rc;
}

/* Every file goes into the new generation; report_out_commit (drift.c)
 * publishes them together, so a failure or a kill leaves the previous report
 * as it was.  The big tables and drift.json are rendered on a helper thread
 * (prerender.h) while this one computes the memory profiles, starts the
 * plots and forms report.md; the files are then written in a fixed order. */
int study_write(const study *s, report_out *out, vijp_error *err)
{
    static const char *const names[] = {"drift.csv", "curves.csv", "summary.csv", "drift.json"};
    prerendered pre[] = {{.fill = fill_drift_csv, .ctx = s}, {.fill = fill_curves_csv, .ctx = s},
                         {.fill = fill_summary_csv, .ctx = s}, {.fill = fill_study_json, .ctx = s}};
    prerender_job job;
    prerender_start(&job, pre, 4);
    memory_table mem = {s, NULL, 0};
    int rc = memory_compute(&mem, s, err);
    plot_run plots = {vijp_alloc_array(s->n_configs ? s->n_configs : 1, sizeof(plot_job)), 0, 0,
                      2 * (size_t)(s->jobs > 2 ? s->jobs : 2), 0};
    if (s->plots && !rc) plots_start(s, &mem, out, &plots, err), rc = plots.rc;
    report_ctx rctx = {s, &mem};
    prerendered md = {.fill = fill_report_md, .ctx = &rctx};
    if (!rc) prerender_one(&md);
    prerender_wait(&job);
    for (size_t k = 0; k < 3 && !rc; k++) rc = report_out_write(out, names[k], prerender_fill, &pre[k], err);
    if (!rc) rc = report_out_write(out, "memory.csv", fill_memory_csv, &mem, err);
    if (s->plots && !rc) rc = render_overview(s, out, err);
    if (!rc) rc = report_out_write(out, names[3], prerender_fill, &pre[3], err);
    if (!rc) rc = report_out_write(out, "report.md", prerender_fill, &md, err);
    prerender_free(pre, 4), prerender_free(&md, 1);
    if (s->plots) rc = plots_finish(s, &mem, out, &plots, rc, err);
    else free(plots.jobs);
    free(mem.bytes);
    return rc;
}

int study_plots_available(void) { return have_gnuplot(); }

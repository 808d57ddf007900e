/* vijp certify: is a layer submersive at sampled points, and how surely? */
#include "cli.h"
#include "certify_cli.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "study/certify_job.h"
#include "mpi/mpi.h"
#include "study/progress.h"
#include "study/stats.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "vijp/array_io.h"
#include <cblas.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp certify --layer SPEC [options]\n"
    "       vijp certify --layer SPEC --box LO,HI | --box-file L.npy,H.npy [options]\n"
    "       vijp certify --net NET [--layer-index I] [options]\n"
    "       vijp certify --jacobian J.npy [--radius R.npy] [--prec-max P] [--json]\n"
    "\n"
    "Certify whether one layer is submersive (its input Jacobian J has full row\n"
    "rank) at sampled points, or whether a given m × n matrix J (every matrix in\n"
    "J ± R, entrywise, with a radius) has full row rank m, with a verdict per\n"
    "point (docs/DESIGN.md §4):\n"
    "  certified-submersive  proven σ_min(J) > s > 0 for the exact Jacobian:\n"
    "                        analytic (the layer type's declaration), or\n"
    "                        certified-double / certified-mpfr:P (enclosure of J,\n"
    "                        G = JJᵀ with its rounding bound, floating-point Cholesky\n"
    "                        of G − (s² + e + c)I with Rump's constant c)\n"
    "  not-submersive        with the cokernel dimension, proven by structure\n"
    "                        (m > n, zero rows/columns, exact null vector) or numerical\n"
    "  inconclusive          with the reason\n"
    "plus LAPACK's numbers (singular values, rank at tolerance max(m,n)·u·σ_max,\n"
    "condition).  Elementwise activations also get f′ searched for zeros over\n"
    "[−R, R] by interval bisection, and where each format's computed f′\n"
    "underflows.\n"
    "\n"
    "  --layer SPEC      one layer, of any type listed below (no commas)\n"
    "  --width N         input width (needed by elementwise layers; default 16)\n"
    "  --samples N       points to certify, 1..100000 (default 16)\n"
    "  --input X.npy     the points themselves, shape [samples, width], a row each\n"
    "  --params F.npy    the layer's parameters, θ in its type's order (1-D)\n"
    "  --seed S          seed of the points, 0..2^63-1 (default 1); sample k draws\n"
    "                    its input and the layer's parameters from seed + k\n"
    "  --init I          parameters: gaussian | orthogonal | kaiming-uniform | scaled:G\n"
    "                    (default gaussian; kaiming-uniform is PyTorch's nn.Linear default)\n"
    "  --scale X         points are X·N(0, 1) entrywise (default 1)\n"
    "  --prec-max P      highest MPFR precision a certificate may use (default 4096)\n"
    "  --range R         activations: search f′ for zeros over [−R, R] (default 1000)\n"
    "  --jacobian FILE   certify this matrix instead of a layer: a 2-D .npy array\n"
    "                    m × n ('<f8', '<f4' or '<f2', C order; numpy.save writes one)\n"
    "  --radius FILE     with --jacobian: a .npy array of the same shape, entries >= 0;\n"
    "                    the verdict then holds for every matrix in J ± R\n"
    "  --net NET         certify every layer of a net (a spec such as dense:8,tanh\n"
    "                    with --depth, or a JSON net with its own weights) at the\n"
    "                    inputs that reach it: each sample point (--input's rows,\n"
    "                    or drawn) sent through the layers before it in double\n"
    "  --depth D         with a spec --net: its number of layers (default: the spec's)\n"
    "  --layer-index I   with --net: only layer I (1 is the first)\n"
    "  --box LO,HI       with --layer (or --net: each layer over an enclosure of the\n"
    "                    inputs the box sends it): certify every input in the box (each coordinate\n"
    "                    in [LO, HI]) instead of sampled points: certified-submersive\n"
    "                    (σ_min(J(x)) >= s for all of it), not-submersive (a proven\n"
    "                    point, or interval holding one, where J is singular), or\n"
    "                    undecided (the share of the box proven, the pieces left)\n"
    "  --box-file L.npy,H.npy  the same, coordinate i in [L[i], H[i]] (1-D arrays)\n"
    "  --budget N|Ts     what a box's bisection may spend: N intervals (default\n"
    "                    200000), or T seconds of wall-clock time (then the verdict\n"
    "                    may differ between machines; an interval count does not)\n"
    "  --json            print one JSON object instead of tables\n"
    "  -v, --verbose     a line per sample even when there are many\n"
    "  -q, --quiet       no progress meter (shown on stderr, when it is a terminal,\n"
    "                    as samples finish: done, time elapsed and left)\n"
    "  -h, --help        this help\n"
    "\n"
    "Under mpirun -n P (a vijp built with MPI) the samples are shared out over\n"
    "the ranks; the output is byte for byte one process's.\n"
    "\n"
    "Exit status: 0 every sample certified submersive; 1 some sample was not\n"
    "(not-submersive or inconclusive); 2 bad usage or input; 3 the layer's\n"
    "structural declaration contradicts its numbers (a bug in the layer).\n"
    "With --jacobian: 0 certified, 1 not, 2 bad usage or an unreadable or\n"
    "malformed file (the message names it).\n";

/* The heading of certify's layer list (the test of its help looks for it). */
#define CLI_CERTIFY_SPEC "SPEC (one layer: every registered type)"

typedef struct {
    vijp_certificate *c;
    size_t n;
} results;

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static const char *overall(const results *r, size_t *certified)
{
    size_t not_sub = 0;
    *certified = 0;
    for (size_t k = 0; k < r->n; k++) {
        *certified += r->c[k].verdict == VIJP_CERTIFIED_SUBMERSIVE;
        not_sub += r->c[k].verdict == VIJP_NOT_SUBMERSIVE;
    }
    return *certified == r->n ? "certified-submersive" : not_sub ? "not-submersive" : "inconclusive";
}

static json_t *activation_json(const vijp_activation_report *a)
{
    json_t *bad = json_array(), *fm = json_array();
    for (size_t i = 0; i < a->n_bad; i++) json_array_append_new(bad, json_pack("[o, o]", num(a->bad[i].lo), num(a->bad[i].hi)));
    for (int k = 0; k < VIJP_ACT_FORMATS; k++)
        json_array_append_new(fm, json_pack("{s:s, s:o, s:o}", "format", a->fmt[k].format, "underflow_at",
                                            num(a->fmt[k].underflow_at), "negligible_at", num(a->fmt[k].negligible_at)));
    return json_pack("{s:f, s:f, s:b, s:b, s:I, s:o, s:o}", "range", a->R, "tol", a->tol, "complete", a->complete,
                     "submersive_everywhere", a->complete && a->n_bad == 0, "boxes", (json_int_t)a->boxes,
                     "derivative_may_vanish", bad, "formats", fm);
}

/* o: the keys that say what was certified; the verdict's are added. */
static void add_verdicts(json_t *o, const results *r, const vijp_activation_report *act)
{
    size_t certified;
    const char *verdict = overall(r, &certified);
    double smin = INFINITY, lo_s = INFINITY, smax = 0, cond = 0;
    int all = 1;
    size_t rank = SIZE_MAX, cok = 0;
    const char *method = r->c[0].method;
    json_t *points = json_array();
    for (size_t k = 0; k < r->n; k++) {
        const vijp_certificate *c = &r->c[k];
        smin = fmin(smin, c->num.sigma_min), smax = fmax(smax, c->num.sigma_max), cond = fmax(cond, c->num.condition);
        all &= c->verdict == VIJP_CERTIFIED_SUBMERSIVE && !isnan(c->s);
        if (all) lo_s = fmin(lo_s, c->s);
        if (c->num.rank < rank) rank = c->num.rank;
        if (c->cokernel_dim > cok) cok = c->cokernel_dim;
        if (strcmp(method, c->method)) method = "mixed";
        json_array_append_new(
            points, json_pack("{s:I, s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:I, s:o, s:I, s:b, s:b, s:o, s:s}", "sample",
                              (json_int_t)k + 1, "verdict", vijp_verdict_name(c->verdict), "method", c->method,
                              "sigma_min_lower_bound", num(c->verdict == VIJP_CERTIFIED_SUBMERSIVE ? c->s : NAN),
                              "prec", (json_int_t)c->prec, "sigma_min", num(c->num.sigma_min), "sigma_max",
                              num(c->num.sigma_max), "condition", num(c->num.condition), "rank",
                              (json_int_t)c->num.rank, "rank_tol", num(c->num.rank_tol), "cokernel_dim",
                              (json_int_t)c->cokernel_dim, "cokernel_proven", c->cokernel_proven,
                              "numerically_degenerate", c->num.rank < c->num.m, "enclosure_radius",
                              num(c->enclosure_radius), "reason", c->reason));
    }
    json_object_update_new(o, json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:I, s:I, s:s, s:o}", "verdict", verdict,
                                    "samples_certified", (json_int_t)certified, "sigma_min_lower_bound",
                                    num(all ? lo_s : NAN), "sigma_min", num(smin), "sigma_max", num(smax), "condition",
                                    num(cond), "rank", (json_int_t)rank, "cokernel_dim", (json_int_t)cok, "method",
                                    method, "points", points));
    if (act) json_object_set_new(o, "activation", activation_json(act));
}

void print_json(json_t *o)
{
    json_dumpf(o, cli_out(), JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', cli_out());
    json_decref(o);
}

/* A line per certificate (and its reason), then a blank line. */
static void print_rows(const results *r)
{
    FILE *out = cli_out();
    fprintf(out, "%6s  %-21s %-19s %11s %11s %11s %11s %9s %9s\n", "sample", "verdict", "method", "s (proven)", "σ_min",
           "σ_max", "κ", "rank", "cokernel");
    for (size_t k = 0; k < r->n; k++) {
        const vijp_certificate *c = &r->c[k];
        char rk[32], ck[32];
        snprintf(rk, sizeof rk, "%zu/%zu", c->num.rank, c->num.m);
        snprintf(ck, sizeof ck, "%zu%s", c->cokernel_dim, c->cokernel_dim ? (c->cokernel_proven ? " proven" : " numer.") : "");
        char sb[16] = "-"; /* no proven bound (not certified, or analytic without one): not a number */
        if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && isfinite(c->s)) snprintf(sb, sizeof sb, "%.4g", c->s);
        fprintf(out, "%6zu  %-21s %-19s %11s %11.4g %11.4g %11.4g %9s %9s\n", k + 1, vijp_verdict_name(c->verdict),
               c->method, sb, c->num.sigma_min, c->num.sigma_max, c->num.condition, rk, ck);
        if (c->reason[0]) fprintf(out, "        %s\n", c->reason);
        if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && c->num.rank < c->num.m)
            fprintf(out, "        numerically degenerate in double: LAPACK's rank is %zu < %zu at tolerance %.3g\n",
                   c->num.rank, c->num.m, c->num.rank_tol);
    }
    fputc('\n', out);
}

static void print_table(const char *spec, const vijp_layer *L, uint64_t seed, const char *params, const char *points,
                        const results *r, const vijp_activation_report *act, int verbose)
{
    size_t certified;
    const char *verdict = overall(r, &certified);
    fprintf(cli_out(), "layer %s (%zu → %zu), %zu samples, seed %llu, %s, points %s\n\n", spec, L->in, L->out, r->n,
            (unsigned long long)seed, params, points);
    if (verbose || r->n <= 20) print_rows(r);
    double *smin = vijp_alloc_array(r->n, sizeof *smin), *s = vijp_alloc_array(r->n, sizeof *s);
    for (size_t k = 0; smin && s && k < r->n; k++) {
        smin[k] = r->c[k].num.sigma_min;
        s[k] = r->c[k].verdict == VIJP_CERTIFIED_SUBMERSIVE ? r->c[k].s : NAN;
    }
    spread a = spread_of(smin, r->n), b = spread_of(s, r->n);
    fprintf(cli_out(), "verdict: %s — %zu of %zu samples certified submersive\n", verdict, certified, r->n);
    fprintf(cli_out(), "σ_min (LAPACK): min %.4g, median %.4g, max %.4g\n", a.min, a.median, a.max);
    if (!isnan(b.median)) fprintf(cli_out(), "proven s:       min %.4g, median %.4g, max %.4g\n", b.min, b.median, b.max);
    free(smin), free(s);
    if (!act) return;
    fprintf(cli_out(), "\nf′ over [−%g, %g] (interval bisection, %zu boxes%s): ", act->R, act->R, act->boxes,
           act->complete ? "" : ", budget exhausted");
    if (act->complete && !act->n_bad) fprintf(cli_out(), "submersive everywhere on [−%g, %g]\n", act->R, act->R);
    else {
        fprintf(cli_out(), "f′ may vanish on\n");
        for (size_t i = 0; i < act->n_bad; i++) fprintf(cli_out(), "  [%.17g, %.17g]\n", act->bad[i].lo, act->bad[i].hi);
    }
    fprintf(cli_out(), "%-17s  %-26s  %s\n", "format", "computed f′ = 0 from |x| ≈", "f′ < u·max f′ from |x| ≈");
    for (int k = 0; k < VIJP_ACT_FORMATS; k++) { /* ∞: f′ never reaches 0 (or negligible) in the format */
        char u[32] = "never", g[32] = "never";
        if (isfinite(act->fmt[k].underflow_at)) snprintf(u, sizeof u, "%.6g", act->fmt[k].underflow_at);
        if (isfinite(act->fmt[k].negligible_at)) snprintf(g, sizeof g, "%.6g", act->fmt[k].negligible_at);
        fprintf(cli_out(), "%-17s  %-26s  %s\n", act->fmt[k].format, u, g);
    }
    fprintf(cli_out(), "(where f′ is 0 or negligible the layer is numerically non-submersive even if analytically submersive)\n");
}

/* Size a certification first.  Per point: the parameters (P), the
 * Jacobian's enclosure (midpoint, radius), LAPACK's copy, U, Vᵀ and the Gram
 * matrix JJᵀ in double, and JJᵀ again in MPFR at 256 bits for the first step
 * of the proof's climb (higher steps are not counted). */
int certify_fits(double m, double n, double P)
{
    vijp_format p256;
    vijp_error e;
    double per = vijp_format_mpfr(&p256, 256, &e) ? 64 : (double)vijp_resident_value_bytes(&p256);
    return cli_memory_fits("certify", 8 * (P + 3 * m * n + 2 * m * m + n * n) + m * m * per);
}

/* --jacobian, --radius: a 2-D .npy array of finite entries (the radius's
 * non-negative), as the column-major matrix vijp_certify_matrix takes. */
static int read_matrix(const char *path, int radius, vijp_array *a, vijp_error *err)
{
    int rc = vijp_npy_read(path, a, err);
    if (rc) return rc;
    char sh[64];
    vijp_array_shape_str(a->ndim, a->shape, sh, sizeof sh);
    const char *what = radius ? "the radius" : "the Jacobian";
    if (a->ndim != 2) return vijp_fail(err, VIJP_EINVAL, "%s: %s must be a 2-D array (m × n), got shape %s", path, what, sh);
    if (!a->len) return vijp_fail(err, VIJP_EINVAL, "%s: %s is empty (shape %s)", path, what, sh);
    for (size_t i = 0; i < a->len; i++)
        if (!isfinite(a->data[i]) || (radius && a->data[i] < 0))
            return vijp_fail(err, VIJP_EINVAL, "%s: entry (%zu, %zu) of %s is %s (%g)", path, i / a->shape[1],
                             i % a->shape[1], what, isfinite(a->data[i]) ? "negative" : "not finite", a->data[i]);
    double *t = vijp_alloc_array(a->len, sizeof *t); /* C order (row-major) to column-major */
    for (size_t i = 0; i < a->shape[0]; i++)
        for (size_t j = 0; j < a->shape[1]; j++) t[i + j * a->shape[0]] = a->data[i * a->shape[1] + j];
    vijp_free(a->data);
    a->data = t;
    return 0;
}

static void print_verdict(const vijp_certificate *c)
{
    FILE *out = cli_out();
    fprintf(out, "verdict: %s — ", vijp_verdict_name(c->verdict));
    if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && isnan(c->s))
        fprintf(out, "proven full row rank %zu (%s), with no bound on σ_min\n", c->num.m, c->method);
    else if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE) fprintf(out, "proven σ_min(J) > %.4g (%s)\n", c->s, c->method);
    else if (c->verdict == VIJP_NOT_SUBMERSIVE)
        fprintf(out, "cokernel of dimension %zu, %s\n", c->cokernel_dim, c->cokernel_proven ? "proven" : "numerical");
    else fprintf(out, "%s\n", c->reason);
    fprintf(out, "σ_min (LAPACK): %.4g, σ_max %.4g, κ %.4g\n", c->num.sigma_min, c->num.sigma_max, c->num.condition);
}

static int certify_jacobian(const char *jpath, const char *rpath, const vijp_certify_opts *co, int json)
{
    FILE *text = cli_out();
    vijp_array J = {0}, R = {0};
    vijp_error err = {0};
    int rc = read_matrix(jpath, 0, &J, &err);
    if (!rc && rpath) rc = read_matrix(rpath, 1, &R, &err);
    if (!rc && rpath && (R.shape[0] != J.shape[0] || R.shape[1] != J.shape[1])) {
        char a[64], b[64];
        vijp_array_shape_str(R.ndim, R.shape, a, sizeof a), vijp_array_shape_str(J.ndim, J.shape, b, sizeof b);
        rc = vijp_fail(&err, VIJP_EINVAL, "%s: the radius has shape %s, the Jacobian %s has %s", rpath, a, jpath, b);
    }
    size_t m = J.shape[0], n = J.shape[1];
    if (rc || !certify_fits((double)m, (double)n, 0)) {
        if (rc) fprintf(stderr, "vijp certify: %s\n", err.msg);
        vijp_array_clear(&J), vijp_array_clear(&R);
        return EXIT_USAGE;
    }
    openblas_set_num_threads(1); /* as for layers: the same numbers on every run */
    results r = {vijp_alloc_array(1, sizeof *r.c), 1};
    rc = vijp_certify_matrix(J.data, rpath ? R.data : NULL, m, n, co, &r.c[0], &err);
    vijp_array_clear(&J), vijp_array_clear(&R);
    if (rc) {
        free(r.c);
        fprintf(stderr, "vijp certify: %s: %s\n", jpath, err.msg);
        return rc == VIJP_EINVAL || rc == VIJP_EDIM || rc == VIJP_EDOMAIN ? EXIT_USAGE : EXIT_FAILED;
    }
    const vijp_certificate *c = &r.c[0];
    if (json) {
        json_t *o = json_pack("{s:s, s:o, s:I, s:I, s:I}", "jacobian", jpath, "radius", rpath ? json_string(rpath) : json_null(),
                              "in", (json_int_t)n, "out", (json_int_t)m, "samples", (json_int_t)1);
        add_verdicts(o, &r, NULL);
        print_json(o);
    } else {
        fprintf(text, "jacobian %s (%zu × %zu: %zu outputs, %zu inputs), ", jpath, m, n, m, n);
        if (rpath) fprintf(text, "radius %s (‖R‖_F <= %.3g)\n\n", rpath, c->enclosure_radius);
        else fprintf(text, "exact\n\n");
        print_rows(&r);
        print_verdict(c);
    }
    int ok = c->verdict == VIJP_CERTIFIED_SUBMERSIVE;
    vijp_certificate_clear(&r.c[0]);
    free(r.c);
    return ok ? EXIT_OK : EXIT_FAILED;
}

/* A positive number below 1e300 for --scale and --range. */
static int parse_positive(const char *opt, const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (!*end && *out > 0 && *out < 1e300) return 0;
    cli_say("vijp certify: %s wants a positive number, got '%s'\n", opt, s);
    return -1;
}

/* --budget N (intervals, 1..10^8) or Ts (seconds, up to 10^6). */
static int parse_budget(const char *s, vijp_box_budget *b)
{
    size_t len = strlen(s);
    if (len > 1 && s[len - 1] == 's') {
        char *end;
        double t = strtod(s, &end);
        if (end == s + len - 1 && t > 0 && t <= 1e6) return b->seconds = t, 0;
        cli_say("vijp certify: --budget wants N intervals or Ts seconds (0 < T <= 1e6), got '%s'\n", s);
        return -1;
    }
    unsigned long long v;
    if (cli_parse_size("--budget", s, 1, 100000000, &v)) return -1;
    b->intervals = (size_t)v;
    return 0;
}

/* Options into a; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, certify_args *a)
{
    enum { O_PREC = 256, O_RANGE, O_JACOBIAN, O_RADIUS, O_INPUT, O_PARAMS, O_NET, O_DEPTH, O_INDEX, O_BOX, O_BOXFILE, O_BUDGET };
    static const struct option opts[] = {
        {"layer", 1, 0, 'l'}, {"width", 1, 0, 'w'},      {"samples", 1, 0, 'n'}, {"seed", 1, 0, 's'},
        {"init", 1, 0, 'i'},  {"scale", 1, 0, 'x'},      {"prec-max", 1, 0, O_PREC}, {"range", 1, 0, O_RANGE},
        {"json", 0, 0, 'j'},  {"verbose", 0, 0, 'v'},    {"help", 0, 0, 'h'},   {"quiet", 0, 0, 'q'},
        {"jacobian", 1, 0, O_JACOBIAN}, {"radius", 1, 0, O_RADIUS}, {"input", 1, 0, O_INPUT}, {"params", 1, 0, O_PARAMS},
        {"net", 1, 0, O_NET}, {"depth", 1, 0, O_DEPTH}, {"layer-index", 1, 0, O_INDEX}, {"box", 1, 0, O_BOX},
        {"box-file", 1, 0, O_BOXFILE}, {"budget", 1, 0, O_BUDGET}, {0, 0, 0, 0},
    };
    vijp_error err = {0};
    unsigned long long v;
    int c, opt_index = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hvq", opts, &opt_index)) != -1) {
        if ((c > 0 && c < 128 && strchr("wnsix", c)) || c == O_RANGE || c == O_INPUT || c == O_PARAMS) a->layer_opt = opts[opt_index].name;
        if (c == 'n') a->point_opt = "--samples counts points; a box certificate covers every point of it";
        if (c == 'x') a->point_opt = "--scale draws points; a box certificate covers every point of it";
        switch (c) {
        case O_JACOBIAN: a->jacobian = optarg; break;
        case O_RADIUS: a->radius = optarg; break;
        case O_INPUT: a->input = optarg; break;
        case O_PARAMS: a->params = optarg; break;
        case O_NET: a->net = optarg; break;
        case O_BOX: a->box = optarg; break;
        case O_BOXFILE: a->box_file = optarg; break;
        case O_BUDGET: if (parse_budget(optarg, &a->budget)) return EXIT_USAGE; a->budget_given = 1; break;
        case O_DEPTH: if (cli_parse_size("--depth", optarg, 1, 100000, &a->depth)) return EXIT_USAGE; a->net_opt = "depth"; break;
        case O_INDEX: if (cli_parse_size("--layer-index", optarg, 1, 100000, &a->layer_index)) return EXIT_USAGE; a->net_opt = "layer-index"; break;
        case 'l': a->spec = optarg; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, 4096, &a->width)) return EXIT_USAGE; break;
        case 'n': if (cli_parse_size("--samples", optarg, 1, 100000, &a->samples)) return EXIT_USAGE; break;
        case 's': if (cli_parse_size("--seed", optarg, 0, INT64_MAX, &a->seed)) return EXIT_USAGE; break;
        case 'i': a->init_name = optarg; if (vijp_init_parse(optarg, &a->init, &err)) return cli_usage_error("vijp certify", &err); break;
        case 'x': if (parse_positive("--scale", optarg, &a->scale)) return EXIT_USAGE; break;
        case O_RANGE: if (parse_positive("--range", optarg, &a->range)) return EXIT_USAGE; break;
        case O_PREC: if (cli_parse_size("--prec-max", optarg, 106, VIJP_PREC_MAX, &v)) return EXIT_USAGE; a->co.prec_max = (long)v; break;
        case 'j': a->json = 1; break;
        case 'v': a->verbose = 1; break;
        case 'q': a->quiet = 1; break;
        case 'h': fputs(help, cli_out()), cli_print_layer_syntax(cli_out(), CLI_CERTIFY_SPEC); return EXIT_OK;
        default: fputs("run 'vijp certify --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_say("vijp certify: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    const char *clash = !!a->jacobian + !!a->spec + !!a->net > 1 ? "--layer, --net and --jacobian exclude each other"
                        : a->radius && !a->jacobian ? "--radius needs --jacobian"
                        : !a->jacobian && !a->spec && !a->net ? "--layer SPEC, --net NET or --jacobian FILE is required (run 'vijp certify --help')"
                        : a->net && a->params ? "--params applies to --layer: a net's parameters come from it, or --init and --seed"
                        : NULL;
    if (clash) return fprintf(stderr, "vijp certify: %s\n", clash), EXIT_USAGE;
    if (!a->net && a->net_opt) return fprintf(stderr, "vijp certify: --%s applies to --net\n", a->net_opt), EXIT_USAGE;
    if (a->box || a->box_file || a->budget_given) {
        const char *why = !a->spec && !a->net ? "--box, --box-file and --budget apply to --layer or --net"
                          : a->box && a->box_file ? "--box and --box-file exclude each other"
                          : !a->box && !a->box_file ? "--budget applies to --box or --box-file"
                          : a->input ? "--input gives points; --box a region: one or the other"
                          : a->point_opt ? a->point_opt
                          : NULL;
        if (why) return fprintf(stderr, "vijp certify: %s\n", why), EXIT_USAGE;
    }
    if (a->jacobian && a->layer_opt)
        return fprintf(stderr, "vijp certify: --%s applies to --layer, not to --jacobian\n", a->layer_opt), EXIT_USAGE;
    if (a->spec && strchr(a->spec, ','))
        return cli_say("vijp certify: --layer takes one layer, got '%s'\n", a->spec), EXIT_USAGE;
    return -1;
}

/* --input's points and --params' θ into the built one-layer net; the number
 * of samples becomes the number of points. */
static int read_user_point(const certify_args *a, vijp_net *net, vijp_array *xin, size_t *samples, vijp_error *err)
{
    const vijp_layer *L = &net->layers[0];
    size_t P = L->type->param_count(L);
    vijp_array th = {0};
    char got[128];
    if (a->input && !vijp_npy_read_rows(a->input, L->in, 0, xin, err)) {
        if (xin->shape[0] > 100000)
            vijp_fail(err, VIJP_EDIM, "--input %s: %zu points, more than the 100000 certify takes", a->input, xin->shape[0]);
        else *samples = xin->shape[0], err->code = 0;
    }
    if (!err->code && a->params && !vijp_npy_read(a->params, &th, err)) {
        vijp_array_shape_str(th.ndim, th.shape, got, sizeof got);
        if (th.ndim != 1 || th.len != P)
            vijp_fail(err, VIJP_EDIM, "--params %s: shape %s, want (%zu,) (θ in %s's order)", a->params, got, P, L->type->name);
        else {
            if (P) memcpy(net->theta[0], th.data, P * sizeof *th.data);
            if (!net->given) net->given = vijp_alloc_array(1, 1);
            net->given[0] = 1; /* vijp_net_init leaves it */
        }
    }
    vijp_array_clear(&th);
    return err->code;
}

/* The layer of --layer, sized before it is built, its parameters drawn or
 * given, and the user's points: -1 to go on (net and xin then hold them),
 * or the exit status with nothing held. */
int certify_setup_layer(const certify_args *a, vijp_net *net, vijp_array *xin, size_t *samples, vijp_error *err)
{
    /* One BLAS thread: LAPACK's numbers (and the targets s is tried at) are
     * then the same on every run on this machine. */
    openblas_set_num_threads(1);
    /* Dense layers know their input width from the spec, a JSON net (one
     * layer, with or without parameters) from its file; others default to 16. */
    size_t w0 = a->width ? a->width : strncmp(a->spec, "dense", 5) && !vijp_net_spec_is_json(a->spec) ? 16 : 0;
    if (vijp_net_shape(net, a->spec, 1, w0, err)) return cli_usage_error("vijp certify", err);
    const vijp_layer *L = &net->layers[0];
    double m = (double)L->out, n = (double)L->in, P = (double)L->type->param_count(L);
    vijp_net_free(net);
    if (!certify_fits(m, n, P)) return EXIT_USAGE;
    if (vijp_net_build(net, a->spec, 1, w0, err)) return cli_usage_error("vijp certify", err);
    if (vijp_net_init(net, a->init, a->seed, err) || ((a->input || a->params) && read_user_point(a, net, xin, samples, err))) {
        vijp_array_clear(xin);
        vijp_net_free(net);
        return cli_usage_error("vijp certify", err);
    }
    return -1;
}

/* Where --layer's θ and points came from, as the command line says. */
static void layer_sources(const certify_args *a, const vijp_net *net, certify_sources *src)
{
    src->label = a->spec;
    if (a->params) snprintf(src->params, sizeof src->params, "parameters from %s", a->params);
    else if (net->given && net->given[0]) snprintf(src->params, sizeof src->params, "parameters from %s", a->spec);
    else snprintf(src->params, sizeof src->params, "%s parameters", a->init_name);
    src->params_json = a->params ? a->params : net->given && net->given[0] ? a->spec : a->init_name;
    if (a->input) snprintf(src->points, sizeof src->points, "from %s", a->input);
    else snprintf(src->points, sizeof src->points, "%g·N(0,1)", a->scale);
}

int certify_samples(const mpi_world *w, const certify_args *a, const certify_sources *src, vijp_net *net,
                    const vijp_array *xin, size_t samples, json_t *collect)
{
    const vijp_layer *L = &net->layers[0];
    vijp_error err = {0};
    results r = {vijp_alloc_array(samples, sizeof *r.c), 0};
    double *x = vijp_alloc_array(L->in, sizeof *x);
    progress meter;
    progress_start(&meter, !w->rank && progress_wanted_here(0, a->quiet) ? stderr : NULL, samples, "samples", NULL);
    certify_job job = {.net = net, .init = a->init, .seed = a->seed, .co = &a->co, .input = xin->data, .scale = a->scale,
                       .x = x, .samples = samples, .meter = &meter};
    vijp_rng_seed(&job.rng, a->seed ^ 0x5eed5eed5eedull);
    int rc = mpi_certify_run(w, &job, r.c, &r.n, &err);
    progress_end(&meter);
    vijp_activation_report act;
    int have_act = 0;
    if (!w->rank && !rc && vijp_deriv_enclose_of(L->type)) {
        double tol = a->range * 1e-12 > 1e-9 ? a->range * 1e-12 : 1e-9;
        have_act = !(rc = vijp_activation_analyze(L, net->theta[0], a->range, tol, &act, &err));
    }
    if (!w->rank && !rc && a->json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:s?}", "layer", src->label, "in", (json_int_t)L->in,
                              "out", (json_int_t)L->out, "samples", (json_int_t)r.n, "seed", (json_int_t)a->seed,
                              "parameters", src->params_json, "input", a->input);
        add_verdicts(o, &r, have_act ? &act : NULL);
        if (collect) json_array_append_new(collect, o);
        else print_json(o);
    } else if (!w->rank && !rc) {
        print_table(src->label, L, a->seed, src->params, src->points, &r, have_act ? &act : NULL, a->verbose);
    }
    size_t certified = 0;
    if (!w->rank && !rc) overall(&r, &certified);
    for (size_t k = 0; k < r.n; k++) vijp_certificate_clear(&r.c[k]);
    free(r.c), free(x);
    if (have_act) vijp_activation_report_clear(&act);
    if (w->rank) return EXIT_OK; /* the other ranks' part is done: rank 0 prints */
    if (rc) {
        fprintf(stderr, "vijp certify: %s\n", err.msg);
        return rc == VIJP_EDECLARATION ? 3 : rc == VIJP_EINVAL || rc == VIJP_EDIM || rc == VIJP_EDOMAIN ? EXIT_USAGE : EXIT_FAILED;
    }
    return certified == samples ? EXIT_OK : EXIT_FAILED;
}

static int certify_command(const mpi_world *w, int argc, char **argv)
{
    certify_args a = {.init_name = "gaussian", .samples = 16, .seed = 1, .scale = 1, .range = 1000,
                      .init = {VIJP_INIT_GAUSSIAN, 1}};
    vijp_net net = {0};
    vijp_array xin = {0};
    vijp_error err = {0};
    size_t samples = 0;
    /* Under mpirun every rank parses; rank 0 alone speaks (mpi/mpi.h). */
    rank_output quiet_rank;
    rank_output_hide(&quiet_rank, w->rank, cli_out());
    int code = parse_args(argc, argv, &a); /* -1 to go on, else the exit status */
    if (code < 0 && a.jacobian) code = w->rank ? EXIT_OK : certify_jacobian(a.jacobian, a.radius, &a.co, a.json);
    samples = a.samples;
    if (code < 0 && !a.net) code = certify_setup_layer(&a, &net, &xin, &samples, &err);
    int stop = rank_parse_agree(w, &quiet_rank, code, "vijp certify", "the certification");
    if (stop < 0 && a.net && (a.box || a.box_file)) stop = w->rank ? EXIT_OK : certify_net_box(&a);
    else if (stop < 0 && a.net) stop = certify_net(w, &a);
    else if (stop < 0 && (a.box || a.box_file)) stop = w->rank ? EXIT_OK : certify_box(&a, &net);
    else if (stop < 0) {
        certify_sources src;
        layer_sources(&a, &net, &src);
        stop = certify_samples(w, &a, &src, &net, &xin, samples, NULL);
    }
    if (code < 0) vijp_array_clear(&xin), vijp_net_free(&net);
    return stop;
}

/* Under mpirun, every rank runs this (mpi_study.h); alone, a world of one. */
int cli_certify(int argc, char **argv)
{
    mpi_world w;
    mpi_world_start(&w, NULL, NULL);
    int rc = certify_command(&w, argc, argv);
    mpi_world_end(&w);
    return rc;
}

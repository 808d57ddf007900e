/* vijp certify: is a layer submersive at sampled points, and how surely? */
#include "cli.h"
#include "certify_cli.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "mpi/mpi.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"
#include "vijp/array_io.h"
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
    "  --formats LIST    activations: the formats of the f′ table, a comma list of\n"
    "                    up to 16 (default double,binary32,binary16,bfloat16,\n"
    "                    bfloat16+binary32,binary16+binary32); any --format of\n"
    "                    grad, e4m3 and e5m2 (OCP FP8) among them\n"
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
    "  --box-file L.npy,H.npy  the same, coordinate i in [L[i], H[i]] (1-D arrays,\n"
    "                    or one row)\n"
    "  --box-form affine|interval  with --net and a box: carry the inputs from layer\n"
    "                    to layer as affine forms beside the interval boxes (default\n"
    "                    affine: tighter after rotations), or as intervals alone\n"
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
    certify_results r = {vijp_alloc_array(1, sizeof *r.c), 1};
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
        certify_add_verdicts(o, &r, NULL);
        print_json(o);
    } else {
        fprintf(text, "jacobian %s (%zu × %zu: %zu outputs, %zu inputs), ", jpath, m, n, m, n);
        if (rpath) fprintf(text, "radius %s (‖R‖₂ <= %.3g)\n\n", rpath, c->enclosure_radius);
        else fprintf(text, "exact\n\n");
        certify_print_rows(&r);
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
    cli_say("vijp certify: %s wants a number in (0, 1e300), got '%s'\n", opt, s);
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

/* --formats: a comma list of format names into a->fmts; 0, or -1 with the
 * message said. */
static int parse_table_formats(const char *list, certify_args *a)
{
    vijp_error err = {0};
    a->n_fmts = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (a->n_fmts == VIJP_ACT_FORMATS_MAX)
            return cli_say("vijp certify: --formats takes at most %d formats\n", VIJP_ACT_FORMATS_MAX), -1;
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        if (len >= sizeof name || vijp_format_parse(name, &a->fmts[a->n_fmts++], &err))
            return cli_say("vijp certify: --formats: %s\n", err.code ? err.msg : "format name too long"), -1;
        p += len;
        if (!*p) return 0;
    }
}

/* Options into a; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, certify_args *a)
{
    enum { O_PREC = 256, O_RANGE, O_JACOBIAN, O_RADIUS, O_INPUT, O_PARAMS, O_NET, O_DEPTH, O_INDEX, O_BOX, O_BOXFILE, O_BUDGET, O_FORMATS, O_BOXFORM };
    static const struct option opts[] = {
        {"layer", 1, 0, 'l'}, {"width", 1, 0, 'w'},      {"samples", 1, 0, 'n'}, {"seed", 1, 0, 's'},
        {"init", 1, 0, 'i'},  {"scale", 1, 0, 'x'},      {"prec-max", 1, 0, O_PREC}, {"range", 1, 0, O_RANGE},
        {"json", 0, 0, 'j'},  {"verbose", 0, 0, 'v'},    {"help", 0, 0, 'h'},   {"quiet", 0, 0, 'q'},
        {"jacobian", 1, 0, O_JACOBIAN}, {"radius", 1, 0, O_RADIUS}, {"input", 1, 0, O_INPUT}, {"params", 1, 0, O_PARAMS},
        {"net", 1, 0, O_NET}, {"depth", 1, 0, O_DEPTH}, {"layer-index", 1, 0, O_INDEX}, {"box", 1, 0, O_BOX},
        {"box-file", 1, 0, O_BOXFILE}, {"budget", 1, 0, O_BUDGET}, {"formats", 1, 0, O_FORMATS},
        {"box-form", 1, 0, O_BOXFORM}, {0, 0, 0, 0},
    };
    vijp_error err = {0};
    unsigned long long v;
    int c, opt_index = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hvq", opts, &opt_index)) != -1) {
        if ((c > 0 && c < 128 && strchr("wnsix", c)) || c == O_RANGE || c == O_INPUT || c == O_PARAMS || c == O_FORMATS)
            a->layer_opt = opts[opt_index].name;
        if (c == 'n') a->point_opt = "--samples counts points; a box certificate covers every point of it";
        if (c == 'x') a->point_opt = "--scale draws points; a box certificate covers every point of it";
        switch (c) {
        case O_JACOBIAN: a->jacobian = optarg; break;
        case O_RADIUS: a->radius = optarg; break;
        case O_INPUT: a->input = optarg; break;
        case O_PARAMS: a->params = optarg; break;
        case O_FORMATS: if (parse_table_formats(optarg, a)) return EXIT_USAGE; break;
        case O_NET: a->net = optarg; break;
        case O_BOX: a->box = optarg; break;
        case O_BOXFILE: a->box_file = optarg; break;
        case O_BOXFORM:
            if (strcmp(optarg, "affine") && strcmp(optarg, "interval"))
                return cli_say("vijp certify: --box-form wants affine or interval, got '%s'\n", optarg), EXIT_USAGE;
            a->box_form = optarg;
            break;
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
    if (a->input && a->point_opt && !a->box && !a->box_file) /* with a box, the box's own message below */
        return fputs("vijp certify: --input gives the points; --samples and --scale draw them: one or the other\n", stderr),
               EXIT_USAGE;
    if (a->box || a->box_file || a->budget_given) {
        const char *why = !a->spec && !a->net ? "--box, --box-file and --budget apply to --layer or --net"
                          : a->box && a->box_file ? "--box and --box-file exclude each other"
                          : !a->box && !a->box_file ? "--budget applies to --box or --box-file"
                          : a->input ? "--input gives points; --box a region: one or the other"
                          : a->point_opt ? a->point_opt
                          : NULL;
        if (why) return fprintf(stderr, "vijp certify: %s\n", why), EXIT_USAGE;
    }
    if (a->box_form && (!a->net || (!a->box && !a->box_file)))
        return fprintf(stderr, "vijp certify: --box-form applies to --net with --box or --box-file\n"), EXIT_USAGE;
    if (a->jacobian && a->layer_opt)
        return fprintf(stderr, "vijp certify: --%s applies to --layer, not to --jacobian\n", a->layer_opt), EXIT_USAGE;
    if (a->spec && strchr(a->spec, ','))
        return cli_say("vijp certify: --layer takes one layer, got '%s'\n", a->spec), EXIT_USAGE;
    return -1;
}


static int certify_command(const mpi_world *w, int argc, char **argv)
{
    certify_args a = {.init_name = "gaussian", .samples = 16, .seed = 1, .scale = 1, .range = 1000,
                      .init = {.kind = VIJP_INIT_GAUSSIAN, .gain = 1}};
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
        certify_layer_sources(&a, &net, &src);
        stop = certify_samples(w, &a, &src, &net, &xin, samples, NULL, NULL);
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

/* vijp check-layer: the layer battery on any registered type, built-in or
 * from a plugin, each check in its own process (vijp/check_layer.h). */
#include "cli.h"
#include "vijp/check_layer.h"
#include "vijp/vijp.h"
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp check-layer SPEC [options]\n"
    "\n"
    "Run the layer battery on one layer (any registered type: built-in, or from\n"
    "--plugin FILE.so), through its public operators and its own error-bound\n"
    "contract (vijp_layer_bounds in vijp/layer.h), so a new layer type can be\n"
    "checked without touching vijp.  Checks, each in its own process (a crash\n"
    "fails that check with the signal's name; one running past --timeout fails):\n"
    "  adjoint               <G, jvp(U)> = <vjp(G), U>\n"
    "  jvp-vs-differences    jvp against central differences: of the MPFR forward\n"
    "                        at 2048 bits (about 1.5·P at mpfr:P past 1100) when\n"
    "                        the type has MPFR operators, else\n"
    "                        Richardson-extrapolated in double (weaker: the\n"
    "                        extrapolation's error is estimated, not bounded)\n"
    "  jacobian-vs-jvp       the dense Jacobian's columns against jvp(e_j)\n"
    "  vijp-round-trip       vjp(vijp(g)) = g, and vijp(vjp(r)) + fragment = r\n"
    "  fragment-vs-cokernel  the fragment is Q^T r in the cokernel basis Q\n"
    "  format-vs-mpfr        forward, jvp, vjp, fragment and vijp against the type's\n"
    "                        own MPFR operators at 1024 bits (P + 512 at mpfr:P\n"
    "                        past 512; skipped without them)\n"
    "  vjp-param-vs-mpfr     the parameter gradient likewise, within the contract's\n"
    "                        vjp_param_bound (skipped without one)\n"
    "  vjp-param-vs-differences\n"
    "                        the parameter gradient against central differences\n"
    "                        of forward in θ, entry by entry (128 entries at\n"
    "                        most) and along random directions: of the MPFR\n"
    "                        forward, else Richardson-extrapolated in double\n"
    "                        (weaker, as above); within vjp_param_bound, or γ_n\n"
    "                        over |G||∂f/∂θ| where the contract gives none\n"
    "  overwrites-outputs    every operator writes all of its output and reads none\n"
    "                        of it: the same bits into a zeroed and a NaN buffer\n"
    "  inverse-round-trip    inverse(forward(x)) = x within the contract's inverse\n"
    "                        model (skipped without an inverse, which must refuse)\n"
    "  declarations          submersive / never submersive / invertible against J's\n"
    "                        singular values\n"
    "  certification         vijp certify's proofs at the points, declarations included\n"
    "  jacobian-box          the type's interval Jacobian over a box holds its MPFR\n"
    "                        Jacobian at sampled points, and its Lipschitz constant\n"
    "                        of J holds at sampled pairs (boxes x ± 0.25; skipped\n"
    "                        for types with neither)\n"
    "Bounds: γ_n (Higham eq. 3.5) plus the contract's ulps; backward-stable solves\n"
    "(Higham Thm 9.4, 19.4) for the vijp; the contract's inverse model.\n"
    "Precision: mpfr:P up to mpfr:65536 (MPFR formats' limit; past it, exit 2).\n"
    "Past mpfr:512 the bounds are formed in units of 2^(512-P) and errors kept\n"
    "as mantissa and binary exponent, so u = 2^-P never underflows and the\n"
    "report prints every number at its size (1.2e-400; in --json, error_text,\n"
    "bound_text and ratio_text, the numbers null where a double cannot hold\n"
    "them).  The differences need about 1.5·P bits, which MPFR formats hold up\n"
    "to mpfr:43435, the MPFR comparisons P + 64, up to mpfr:65472: past those\n"
    "these checks are skipped, saying why.  Time grows with P (a check takes\n"
    "about a minute at mpfr:43435 on a slow layer), and the default --timeout\n"
    "with it.\n"
    "\n"
    "  SPEC              one layer item (no commas), e.g. tanh, dense:4, mylayer:3\n"
    "  --width N         input width (default 8, or N for dense:MxN)\n"
    "  --seed S          parameters from the type's init at seed S, each moved by\n"
    "                    a seeded relative 2^-5..2^-4 (zeros kept) so that none\n"
    "                    is a power of two by accident; points from S + 1,\n"
    "                    0..2^63-1 (default 1); a failure reruns with the same\n"
    "                    --seed\n"
    "  --params F.npy    check at these parameters instead: θ in the type's order\n"
    "                    (1-D, one value per parameter), used as given\n"
    "  --format F        format under test: double | mpfr:P, P <= 65536 (default\n"
    "                    double; mpfr:P needs the type's MPFR operators; see\n"
    "                    Precision above)\n"
    "  --points B        points per check, 1..64 (default 3)\n"
    "  --check NAME      run only this check (repeatable, or a comma list)\n"
    "  --timeout S       the longest one check may run, 1..86400 s (default 60,\n"
    "                    and 60·(P/8192)^2 at mpfr:P past 8192)\n"
    "  --json            print one JSON object instead of the table\n"
    "  -h, --help        this help\n"
    "  --plugin FILE.so  load a layer type first (repeatable; see vijp --help)\n"
    "\n"
    "Exit status: 0 every check passed (or was skipped, with its reason); 1 some\n"
    "check failed; 2 bad usage or input.\n";

#define CLI_CHECK_SPEC "SPEC (one layer: every registered type)"


/* A worst element's number: the double where it holds it (0, or a normal
 * double), else null (past double's range: its _text says it). */
static json_t *num_of(double x, const char *text)
{
    if (x == 0) return !text[0] || !strcmp(text, "0") ? json_real(0) : json_null();
    return isnormal(x) ? json_real(x) : json_null();
}

static json_t *result_json(const vijp_check_result *r)
{
    json_t *worst = !r->worst_what[0]
                        ? json_null()
                        : json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:s, s:s, s:s}", "what", r->worst_what, "row",
                                    (json_int_t)r->worst_row, "col", (json_int_t)r->worst_col, "error",
                                    num_of(r->error, r->error_text), "bound", num_of(r->bound, r->bound_text), "ratio",
                                    isnan(r->ratio) ? json_null() : num_of(r->ratio, r->ratio_text), "error_text",
                                    r->error_text, "bound_text", r->bound_text, "ratio_text", r->ratio_text);
    return json_pack("{s:s, s:s, s:s, s:b, s:s, s:o, s:s, s:I, s:o, s:f}", "name", r->name, "status",
                     r->status == VIJP_CHECK_PASSED ? "passed" : r->status == VIJP_CHECK_FAILED ? "failed" : "skipped",
                     "method", r->method, "weaker", r->weaker, "detail", r->detail, "worst", worst, "bound_source",
                     r->bound_source, "seed", (json_int_t)r->seed, "signal",
                     r->signal ? json_string(vijp_check_signal_name(r->signal)) : json_null(), "seconds", r->seconds);
}

typedef struct {
    const char *spec;
    const vijp_layer *L;
    const char *format;
    unsigned long long seed, points;
    const char *params; /* --params' file, or NULL */
} run_info;

static void print_json(const run_info *in, const vijp_check_result *res, size_t n, size_t counts[3])
{
    json_t *checks = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(checks, result_json(&res[i]));
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:I, s:o, s:I, s:s, s:I, s:I, s:I, s:o}", "layer", in->spec,
                          "type", in->L->type->name, "in", (json_int_t)in->L->in, "out", (json_int_t)in->L->out,
                          "params", (json_int_t)in->L->type->param_count(in->L), "mpfr_operators", in->L->type->mp != NULL,
                          "format", in->format, "seed", (json_int_t)in->seed, "params_file",
                          in->params ? json_string(in->params) : json_null(), "points", (json_int_t)in->points,
                          "verdict", counts[VIJP_CHECK_FAILED] ? "failed" : "passed", "passed",
                          (json_int_t)counts[VIJP_CHECK_PASSED], "failed", (json_int_t)counts[VIJP_CHECK_FAILED],
                          "skipped", (json_int_t)counts[VIJP_CHECK_SKIPPED], "checks", checks);
    json_dumpf(o, cli_out(), JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', cli_out());
    json_decref(o);
}

/* One line per check; a failure adds what broke, the bound and where it comes
 * from, and the command that reruns it. */
static void print_table(const run_info *in, const vijp_check_result *res, size_t n, size_t counts[3])
{
    FILE *text = cli_out();
    size_t P = in->L->type->param_count(in->L);
    fprintf(text, "layer %s (%zu → %zu, %zu parameter%s%s%s), %s, seed %llu, %llu points%s\n\n", in->spec, in->L->in, in->L->out,
           P, P == 1 ? "" : "s", in->params ? " from " : "", in->params ? in->params : "", in->format, in->seed,
           in->points, in->L->type->mp ? "" : "; no MPFR operators");
    fprintf(text, "%-24s %-8s %11s  %s\n", "check", "result", "worst/bound", "worst element, or why");
    for (size_t i = 0; i < n; i++) {
        const vijp_check_result *r = &res[i];
        char ratio[32] = "";
        if (!isnan(r->ratio)) snprintf(ratio, sizeof ratio, "%s", r->ratio_text);
        fprintf(text, "%-24s %-8s %11s  ", r->name, vijp_check_status_name(r->status), ratio);
        if (r->status == VIJP_CHECK_SKIPPED || isnan(r->ratio) || r->signal) fprintf(text, "%s", r->detail);
        else fprintf(text, "%s[%zu,%zu]: error %s %s bound %s", r->worst_what, r->worst_row, r->worst_col, r->error_text,
                    r->ratio <= 1 ? "<=" : ">", r->bound_text);
        if (r->weaker && r->status != VIJP_CHECK_SKIPPED) fprintf(text, " (weaker: an estimated error, no MPFR operators)");
        fputc('\n', text);
        if (r->status != VIJP_CHECK_FAILED) continue;
        /* the detail, unless the line above said it (the worst element) */
        if (!isnan(r->ratio) && !r->signal && strncmp(r->detail, r->worst_what, strlen(r->worst_what)))
            fprintf(text, "%-24s %s\n", "", r->detail);
        if (r->worst_what[0] && r->bound_source[0]) fprintf(text, "%-24s bound: %s\n", "", r->bound_source);
        fprintf(text, "%-24s rerun: vijp check-layer %s%s --width %zu --seed %llu%s%s --check %s%s%s\n", "", in->spec,
               cli_plugin_args(), in->L->in, (unsigned long long)r->seed, in->params ? " --params " : "",
               in->params ? in->params : "", r->name, strcmp(in->format, "double") ? " --format " : "",
               strcmp(in->format, "double") ? in->format : "");
    }
    fprintf(text, "\n%zu passed, %zu failed, %zu skipped\n", counts[VIJP_CHECK_PASSED], counts[VIJP_CHECK_FAILED],
           counts[VIJP_CHECK_SKIPPED]);
}

/* --check NAME[,NAME…] into the selection; 0, or -1 with a message. */
static int select_checks(const char *arg, int *selected)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf) return cli_say("vijp check-layer: --check '%.40s...' is too long\n", arg), -1;
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *comma, *tok = buf; tok; tok = comma ? comma + 1 : NULL) {
        if ((comma = strchr(tok, ','))) *comma = 0;
        if (!*tok) /* an empty list or item: most often a variable that was meant to be set */
            return cli_say("vijp check-layer: --check '%s' %s\n", arg, *arg ? "has an empty item" : "names no check"), -1;
        int k = vijp_check_find(tok);
        if (k < 0) {
            cli_say("vijp check-layer: no check '%s'; the checks:", tok);
            for (size_t i = 0; i < vijp_check_count(); i++) fprintf(stderr, " %s", vijp_check_name(i));
            fputc('\n', stderr);
            return -1;
        }
        selected[k] = 1;
    }
    return 0;
}

/* What the command line asked for. */
typedef struct {
    unsigned long long width, seed, points, timeout; /* timeout 0: the default for the format */
    const char *format, *spec, *params;
    int json, any_selected;
    int *selected; /* selected[k]: --check named check k */
} check_args;

/* Options and SPEC into a; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, check_args *a)
{
    static const struct option opts[] = {
        {"width", 1, 0, 'w'}, {"seed", 1, 0, 's'},    {"format", 1, 0, 'f'}, {"points", 1, 0, 'p'},
        {"check", 1, 0, 'c'}, {"timeout", 1, 0, 't'}, {"json", 0, 0, 'j'},   {"help", 0, 0, 'h'},
        {"params", 1, 0, 'P'}, {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'w': bad = cli_parse_size("--width", optarg, 1, 4096, &a->width); break;
        case 's': bad = cli_parse_size("--seed", optarg, 0, INT64_MAX, &a->seed); break;
        case 'p': bad = cli_parse_size("--points", optarg, 1, 64, &a->points); break;
        case 't': bad = cli_parse_size("--timeout", optarg, 1, 86400, &a->timeout); break;
        case 'f': a->format = optarg; break;
        case 'P': a->params = optarg; break;
        case 'c': bad = select_checks(optarg, a->selected), a->any_selected = 1; break;
        case 'j': a->json = 1; break;
        case 'h': fputs(help, cli_out()), cli_print_layer_syntax(cli_out(), CLI_CHECK_SPEC); return EXIT_OK;
        default: fputs("run 'vijp check-layer --help' for the options\n", stderr), bad = 1;
        }
        if (bad) return EXIT_USAGE;
    }
    a->spec = optind < argc ? argv[optind] : NULL;
    if (!a->spec) return fputs("vijp check-layer: SPEC is required (run 'vijp check-layer --help')\n", stderr), EXIT_USAGE;
    if (optind + 1 < argc)
        return cli_say("vijp check-layer: one SPEC, got '%s' and '%s'\n", a->spec, argv[optind + 1]), EXIT_USAGE;
    if (strchr(a->spec, ','))
        return cli_say("vijp check-layer: SPEC is one layer, got '%s'\n", a->spec), EXIT_USAGE;
    return -1;
}

/* --params F.npy: θ for layer L, 1-D with one value per parameter; 0, or a
 * code with err naming the file. */
static int read_params(const char *path, const vijp_layer *L, vijp_array *th, vijp_error *err)
{
    size_t P = L->type->param_count(L);
    int rc = vijp_npy_read(path, th, err);
    if (rc) return rc;
    if (th->ndim != 1 || th->len != P) {
        char got[64];
        vijp_array_shape_str(th->ndim, th->shape, got, sizeof got);
        vijp_array_clear(th);
        return vijp_fail(err, VIJP_EDIM, "--params %s: shape %s, want (%zu,) (θ in %s's order)", path, got, P,
                         L->type->name);
    }
    return 0;
}

/* Every selected check on the layer, each in its own process; prints the
 * report.  The exit status. */
static int run_checks(check_args *a)
{
    vijp_error err = {0};
    vijp_net net;
    vijp_format F;
    /* dense:MxN says its input width; everything else gets 8 by default */
    if (!a->width && !(!strncmp(a->spec, "dense:", 6) && strchr(a->spec, 'x'))) a->width = 8;
    if (vijp_format_parse(a->format, &F, &err) || vijp_net_shape(&net, a->spec, 1, a->width, &err))
        return fprintf(stderr, "vijp check-layer: %s\n", err.msg), EXIT_USAGE;
    /* MPFR's operations cost about P^2 at mpfr:P: 60 s, scaled so past 8192 bits */
    if (!a->timeout) {
        double P = F.kind == VIJP_MPFR ? (double)F.prec : 0, s = P > 8192 ? 60 * (P / 8192) * (P / 8192) : 60;
        a->timeout = (unsigned long long)ceil(s < 86400 ? s : 86400);
    }
    vijp_array th = {0};
    if (a->params && read_params(a->params, &net.layers[0], &th, &err)) {
        vijp_net_free(&net);
        return fprintf(stderr, "vijp check-layer: %s\n", err.msg), EXIT_USAGE;
    }
    vijp_check_opts o = {.width = a->width, .seed = a->seed, .format = a->format, .batch = a->points,
                         .timeout_s = (unsigned)a->timeout, .params = a->params ? th.data : NULL, .n_params = th.len};
    run_info in = {a->spec, &net.layers[0], F.name, a->seed, a->points, a->params};
    size_t n = 0, counts[3] = {0};
    vijp_check_result *res = vijp_alloc_array(vijp_check_count(), sizeof *res);
    int rc = 0;
    for (size_t k = 0; !rc && k < vijp_check_count(); k++) {
        if (a->any_selected && !a->selected[k]) continue;
        if ((rc = vijp_check_layer_isolated(k, a->spec, &o, &res[n], &err))) break;
        counts[res[n++].status]++;
    }
    if (!rc && a->json) print_json(&in, res, n, counts);
    else if (!rc) print_table(&in, res, n, counts);
    else fprintf(stderr, "vijp check-layer: %s\n", err.msg);
    vijp_net_free(&net);
    vijp_array_clear(&th);
    free(res);
    return rc ? EXIT_USAGE : counts[VIJP_CHECK_FAILED] ? EXIT_FAILED : EXIT_OK;
}

int cli_check_layer(int argc, char **argv)
{
    check_args a = {.seed = 1, .points = 3, .format = "double",
                    .selected = vijp_alloc_array(vijp_check_count(), sizeof *a.selected)};
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) rc = run_checks(&a);
    free(a.selected);
    return rc;
}

/* vijp grad: one network, one or more engines, one format, against an MPFR reference. */
#include "cli.h"
#include "vijp/error.h"
#include "study/progress.h"
#include "vijp/study.h"
#include "vijp/vijp.h"
#include "vijp/memory.h"
#include "vijp/array_io.h"
#include "report/atomic.h"
#include "base/xnum_json.h"
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp grad [options]\n"
    "\n"
    "Compute ∇_x ℓ and every ∇θ_i of a network with an engine, in a number format,\n"
    "and compare them with an MPFR backprop reference at max(256, 2P) bits computed\n"
    "from the same rounded weights and inputs (so the error is arithmetic only).\n"
    "\n"
    "  --net SPEC       layers, cycled to the depth (default dense:64,leaky:0.1):\n"
    "                   see SPEC items below; or FILE.json, a net in JSON\n"
    "                   (docs/nets.md), whose layers set the depth\n"
    "  --input X.npy    inputs, shape [batch, width] (a row per sample), instead of\n"
    "                   seeded ones; the batch is its number of rows\n"
    "  --target T.npy   the loss data, shape [batch, output width]: the targets of\n"
    "                   the square loss ½‖h_D − t‖² (summed over the batch), c of\n"
    "                   the linear loss ⟨c, h_D⟩; seeded when omitted\n"
    "  --weights F      parameters from a safetensors file: <i>.weight and <i>.bias\n"
    "                   (PyTorch's layout, i the 0-based layer) or <i>.theta; other\n"
    "                   layers keep --init\n"
    "  --depth D        number of layers (default 8)\n"
    "  --width N        input width (default: the first dense layer's)\n"
    "  --batch B        inputs whose losses add up (default 1)\n"
    "  --engine E       backprop | moonwalk | pure-forward | reversible | checkpoint\n"
    "                   | all, or a comma list (reversible: backprop rebuilding\n"
    "                   activations by inverting layers, layers without an inverse\n"
    "                   keep their input; checkpoint: every ⌈√D⌉-th input kept,\n"
    "                   segments recomputed)\n"
    "                   (default moonwalk)\n"
    "  --format F       double | binary32 | binary16 | bfloat16 | mpfr:P, P <= 32768\n"
    "                   | bfloat16+binary32 | binary16+binary32 | tf32+binary32\n"
    "                   | e4m3 | e5m2 (OCP FP8, overflowing to NaN and ±Inf)\n"
    "                   | e4m3:sat | e5m2:sat (saturating to ±448, ±57344)\n"
    "                   | e4m3+binary32 | e5m2+binary32 (FP8 storage)\n"
    "                   | mxfp8|mxfp8e5m2|mxfp6|mxfp6e3m2|mxfp4[:ceil]+binary32\n"
    "                   | STORE+tc:ARCH (tensor cores: bfloat16+tc:h100, …)\n"
    "                   | nvfp4+binary32 | fp8[:pow2]+binary32\n"
    "                   | :ftz (flush subnormals to zero: bfloat16:ftz+binary32,\n"
    "                     bfloat16+binary32:ftz, binary32:ftz), :sr (stochastic\n"
    "                     rounding of the storage, seeded: bfloat16:sr+binary32)\n"
    "                   (the reference runs at 2P bits, at most 65536; default double)\n"
    "  --init I         orthogonal | gaussian | kaiming-uniform | scaled:G (default\n"
    "                   orthogonal; kaiming-uniform: PyTorch's nn.Linear default)\n"
    "  --loss L         square (½‖h − y‖²) | linear (⟨c, h⟩) (default square)\n"
    "  --seed S         seed of weights, inputs and targets, 0..2^63-1 (default 1)\n"
    "  --segment K      checkpoint engine: layers per segment (default ⌈√depth⌉)\n"
    "  --save DIR       also write the first engine's gradients to DIR (made if missing)\n"
    "                   as .npy files ('<f8', the format's values rounded to double):\n"
    "                   grad_x.npy (batch × width: ∇_x ℓ, a row per sample),\n"
    "                   grad_theta_I.npy (∇θ_I, P_I values in the layer's parameter\n"
    "                   order) for each layer I = 1..D that has parameters, and\n"
    "                   cotangent_I.npy (batch × m_I: g_I, the cotangent of h_I) for\n"
    "                   I = 1..D; each file is written whole or not at all\n"
    "  --json           print one JSON object (an object with \"runs\" for several engines)\n"
    "  -q, --quiet      no progress meter (shown on stderr, when it is a terminal:\n"
    "                   runs done, the reference and each engine, time elapsed\n"
    "                   and left, redrawn as their layers finish)\n"
    "  -h, --help       this help\n"
    "\n"
    "Exit status: 0 success, 1 the computation failed (e.g. a singular vijp) or\n"
    "writing a --save file failed, 2 bad usage or input.  Nothing is printed on stdout unless every run succeeded.\n";

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *result_json(const vijp_grad_setup *s, const vijp_grad_result *r)
{
    json_t *per = json_array();
    for (size_t i = 0; i < s->depth; i++) json_array_append_new(per, vijp_xnum_to_json(r->rel_err_per_layer[i]));
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:o, s:o, s:o}",
                     "engine", vijp_engine_name(r->engine), "format", s->fmt.name, "net", s->spec,
                     "depth", (json_int_t)s->depth, "width", (json_int_t)s->width, "batch",
                     (json_int_t)s->batch, "seed", (json_int_t)s->seed, "stored_bytes",
                     (json_int_t)r->stored_bytes, "loss", num(r->loss), "grad_x_norm",
                     num(r->grad_x_norm), "grad_theta_norm", num(r->grad_theta_norm), "reference_prec",
                     (json_int_t)r->ref_prec, "input_grad_rel_err", vijp_xnum_to_json(r->input_grad_rel_err),
                     "param_grad_rel_err_max", vijp_xnum_to_json(r->param_grad_rel_err_max), "rel_err_per_layer", per);
}

/* --save DIR's set for a net of depth D: grad_x.npy, then for each layer
 * grad_theta_I.npy (a layer with parameters) and cotangent_I.npy, I from 1;
 * with g, its matrices (a vijp_mat is column-major with a column per
 * sample, which is C order with a row per sample: no transposition; ∇θ_I
 * saved 1-D), without (g NULL), the names alone.  items and buf (40 bytes
 * a name) hold 2D + 1; the count. */
static size_t save_items(const vijp_net *net, const vijp_grads *g, char (*buf)[40], cli_save_item *items)
{
    size_t n = 0;
    items[n++] = (cli_save_item){"grad_x.npy", g ? &g->grad_x : NULL, 0};
    for (size_t i = 0; i < net->depth; i++) {
        if (net->layers[i].type->param_count(&net->layers[i])) {
            snprintf(buf[n], sizeof buf[n], "grad_theta_%zu.npy", i + 1);
            items[n] = (cli_save_item){buf[n], g ? &g->grad_theta[i] : NULL, 1}, n++;
        }
        snprintf(buf[n], sizeof buf[n], "cotangent_%zu.npy", i + 1);
        items[n] = (cli_save_item){buf[n], g ? &g->g[i] : NULL, 0}, n++;
    }
    return n;
}

/* --save DIR: checked with the inputs (g NULL), then written all or none. */
static int save_grads(const char *dir, const vijp_net *net, const vijp_grads *g, vijp_error *err)
{
    char (*buf)[40] = vijp_alloc_array(2 * net->depth + 1, sizeof *buf);
    cli_save_item *items = vijp_alloc_array(2 * net->depth + 1, sizeof *items);
    size_t n = save_items(net, g, buf, items);
    int rc = g ? cli_save_set(dir, items, n, err) : cli_save_check(dir, items, n, err);
    free(buf), free(items);
    return rc;
}

static vijp_xnum max_layer_err(const vijp_grad_result *r, size_t D)
{
    vijp_xnum m = vijp_xnum_of(0);
    for (size_t i = 0; i < D; i++)
        m = vijp_xnum_max_nan(m, r->rel_err_per_layer[i]);
    return m;
}

/* Every number grad prints must be one.  The engine's results were checked
 * finite (vijp_grad_compare_engines); what is left is a relative error against an
 * exactly zero reference (infinite) or a norm past double's range. */
static int check_printed(const vijp_grad_result *r, size_t D, vijp_error *err)
{
    const struct {
        const char *name;
        vijp_xnum v;
    } v[] = {{"loss", vijp_xnum_of(r->loss)},
             {"|grad x|", vijp_xnum_of(r->grad_x_norm)},
             {"|grad θ|", vijp_xnum_of(r->grad_theta_norm)},
             {"rel err x", r->input_grad_rel_err},
             {"rel err θ", r->param_grad_rel_err_max},
             {"max g_i err", max_layer_err(r, D)}};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++)
        if (!vijp_xnum_isfinite(v[k].v))
            return vijp_fail(err, VIJP_ERANGE, "%s is %s, not a finite number, although every input is finite%s", v[k].name,
                             isnan(v[k].v.m) ? "NaN" : "infinite",
                             isinf(v[k].v.m) && strstr(v[k].name, "err") ? " (the reference is exactly 0 where this "
                                                                           "engine's result is not)" : "");
    return 0;
}

/* What the command line asked for; the setup is completed by resolve(). */
typedef struct {
    vijp_grad_setup s;
    vijp_net net; /* --net, parsed once (s.net points at it) */
    const char *engines, *format, *save_dir;
    int json, quiet, depth_given, batch_given, loss_given;
    vijp_engine_kind list[VIJP_ENGINE_COUNT];
    size_t n_engines;
} grad_args;

/* Options into a; -1 to go on, or the exit status (--help, a bad option). */
static int parse_args(int argc, char **argv, grad_args *a, vijp_error *err)
{
    static const struct option opts[] = {
        {"net", 1, 0, 'n'},  {"depth", 1, 0, 'd'}, {"width", 1, 0, 'w'}, {"batch", 1, 0, 'b'},
        {"engine", 1, 0, 'e'}, {"format", 1, 0, 'f'}, {"init", 1, 0, 'i'}, {"loss", 1, 0, 'l'},
        {"seed", 1, 0, 's'}, {"json", 0, 0, 'j'}, {"help", 0, 0, 'h'}, {"segment", 1, 0, 'K'}, {"quiet", 0, 0, 'q'},
        {"save", 1, 0, 'S'}, {"input", 1, 0, 'I'}, {"weights", 1, 0, 'W'}, {"target", 1, 0, 'T'}, {0, 0, 0, 0},
    };
    vijp_grad_setup *s = &a->s;
    unsigned long long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (c) {
        case 'n': s->spec = optarg; break;
        case 'd': if (cli_parse_size("--depth", optarg, 1, 100000, &v)) return EXIT_USAGE; s->depth = v, a->depth_given = 1; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, 1u << 24, &v)) return EXIT_USAGE; s->width = v; break;
        case 'b': if (cli_parse_size("--batch", optarg, 1, 1000000, &v)) return EXIT_USAGE; s->batch = v, a->batch_given = 1; break;
        case 's': if (cli_parse_size("--seed", optarg, 0, INT64_MAX, &v)) return EXIT_USAGE; s->seed = v; break; /* JSON integers are signed 64-bit */
        case 'e': a->engines = optarg; break;
        case 'f': a->format = optarg; break;
        case 'i': if (vijp_init_parse(optarg, &s->init, err)) return cli_usage_error("vijp grad", err); break;
        case 'l': if (vijp_loss_parse(optarg, &s->loss, err)) return cli_usage_error("vijp grad", err); a->loss_given = 1; break;
        case 'I': s->input = optarg; break;
        case 'T': s->target = optarg; break;
        case 'W': s->weights = optarg; break;
        case 'K': if (cli_parse_size("--segment", optarg, 1, 100000, &v)) return EXIT_USAGE; s->opts.checkpoint_segment = v; break;
        case 'j': a->json = 1; break;
        case 'q': a->quiet = 1; break;
        case 'S': a->save_dir = optarg; break;
        case 'h': fputs(help, cli_out()), cli_print_layer_syntax(cli_out(), CLI_SPEC_ITEMS); return EXIT_OK;
        default: fputs("run 'vijp grad --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_say("vijp grad: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    return -1;
}

/* --engine's comma list ("all" for every engine) into a->list. */
static int parse_engines(grad_args *a, vijp_error *err)
{
    return vijp_engine_parse_list(a->engines, a->list, &a->n_engines, err);
}

/* Everything checked before anything runs, so that bad input is exit 2 with
 * nothing computed: the format, a JSON net's depth and loss, the net's
 * shape (and width), --weights and --input against it, whether the run fits
 * in memory, the engines and the --save folder. */
static int resolve(grad_args *a, vijp_error *err)
{
    vijp_grad_setup *s = &a->s;
    if (vijp_format_parse(a->format, &s->fmt, err) || vijp_grad_check_format(&s->fmt, err)) return cli_usage_error("vijp grad", err);
    int loss = (int)s->loss;
    if (cli_net_parse("--depth", s->spec, &s->depth, a->depth_given, &loss, a->loss_given, s->width, &a->net, err))
        return cli_usage_error("vijp grad", err);
    s->loss = (vijp_loss_kind)loss;
    s->width = a->net.width, s->net = &a->net;
    size_t out_width = vijp_net_out_width(&a->net);
    if (s->weights && cli_check_weights(&a->net, s->weights, err)) return cli_usage_error("vijp grad", err);
    if (s->input && cli_input_batch(s->input, s->width, &s->batch, a->batch_given, err)) return cli_usage_error("vijp grad", err);
    if (s->target && cli_check_rows("--target", s->target, out_width, s->batch, err)) return cli_usage_error("vijp grad", err);
    double need; /* the reference's precision: grad/grad.c's */
    long ref_prec = 2 * (long)s->fmt.prec > 256 ? 2 * (long)s->fmt.prec : 256;
    if (vijp_run_bytes_estimate(&a->net, s->batch, &s->fmt, ref_prec, &need, err)) return cli_usage_error("vijp grad", err);
    if (!cli_memory_fits("grad", need)) return EXIT_USAGE;
    if (parse_engines(a, err)) return cli_usage_error("vijp grad", err);
    if (a->save_dir && save_grads(a->save_dir, &a->net, NULL, err)) return cli_usage_error("vijp grad", err);
    return -1;
}

/* The meter's units are the runs, the reference and one per engine, each
 * moving with its layers (vijp_grad_progress); the work is their layer
 * steps (vijp_engine_layer_steps), all of one weight: a step's cost varies
 * with the engine and the format (a Moonwalk sweep step solves, a pure
 * forward step carries a tangent per input), so the time left is a rough
 * estimate until the costly runs are under way. */
static void meter_step(void *ctx, size_t run, size_t done, size_t total)
{
    (void)run;
    progress_step_part(ctx, (double)total, done, total);
}

/* Every engine against the reference, computed once, into res; the first
 * engine's gradients into kept when --save asks for them.  0, or the exit
 * status.  A failure is reported for the engine where it happened (the
 * reference's for the first engine), the first engine whose results are not
 * all numbers before it, as when each engine ran alone. */
static int run_engines(const grad_args *a, vijp_grad_result *res, vijp_grads *kept, vijp_error *err)
{
    const vijp_grad_setup *s = &a->s;
    progress meter;
    progress_start(&meter, progress_wanted_here(0, a->quiet) ? stderr : NULL, a->n_engines + 1, "runs", NULL);
    double steps = (double)vijp_engine_layer_steps(VIJP_ENGINE_BACKPROP, s->depth, s->batch, NULL);
    for (size_t k = 0; k < a->n_engines; k++)
        steps += (double)vijp_engine_layer_steps(a->list[k], s->depth, s->batch, &s->opts);
    progress_set_work(&meter, steps);
    vijp_grad_progress watch = {meter_step, &meter};
    size_t compared, k = 0;
    int rc = vijp_grad_compare_engines(s, a->list, a->n_engines, res, &compared, a->save_dir ? kept : NULL, &watch,
                                       err), unprintable = 0;
    progress_end(&meter);
    while (k < compared && !(unprintable = check_printed(&res[k], s->depth, err))) k++;
    if (unprintable) rc = unprintable;
    if (!rc) return 0;
    for (size_t j = 0; j < a->n_engines; j++) vijp_grad_result_clear(&res[j]);
    fprintf(stderr, "vijp grad: %s: %s\n", vijp_engine_name(a->list[k]), err->msg);
    return rc == VIJP_EINVAL || rc == VIJP_EDIM || rc == VIJP_EDOMAIN ? EXIT_USAGE : EXIT_FAILED;
}

static void print_results(const grad_args *a, const vijp_grad_result *res)
{
    FILE *text = cli_out();
    const vijp_grad_setup *s = &a->s;
    if (a->json) {
        json_t *out = a->n_engines == 1 ? result_json(s, &res[0]) : json_object();
        if (a->n_engines > 1) {
            json_t *runs = json_array();
            for (size_t k = 0; k < a->n_engines; k++) json_array_append_new(runs, result_json(s, &res[k]));
            json_object_set_new(out, "runs", runs);
        }
        json_dumpf(out, text, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', text);
        json_decref(out);
        return;
    }
    fprintf(text, "net %s, depth %zu, width %zu, batch %zu, format %s, seed %llu\n", s->spec, s->depth, s->width, s->batch,
           s->fmt.name, (unsigned long long)s->seed);
    fprintf(text, "reference: MPFR backprop at %ld bits from the same rounded weights and inputs\n\n", res[0].ref_prec);
    fprintf(text, "%-13s %12s %12s %12s %14s %12s %12s %12s\n", "engine", "loss", "|grad x|", "|grad θ|", "stored bytes",
           "rel err x", "rel err θ", "max g_i err");
    for (size_t k = 0; k < a->n_engines; k++) { /* errors at any exponent: mpfr:P's are near 2^-P */
        char ex[48], et[48], eg[48];
        vijp_xnum_snprintf(ex, sizeof ex, "%12.3e", res[k].input_grad_rel_err);
        vijp_xnum_snprintf(et, sizeof et, "%12.3e", res[k].param_grad_rel_err_max);
        vijp_xnum_snprintf(eg, sizeof eg, "%12.3e", max_layer_err(&res[k], s->depth));
        fprintf(text, "%-13s %12.5g %12.5g %12.5g %14zu %s %s %s\n", vijp_engine_name(a->list[k]), res[k].loss,
                res[k].grad_x_norm, res[k].grad_theta_norm, res[k].stored_bytes, ex, et, eg);
    }
}

static int grad_command(grad_args *a, int argc, char **argv)
{
    vijp_error err = {0};
    int rc = parse_args(argc, argv, a, &err);
    if (rc < 0) rc = resolve(a, &err);
    if (rc >= 0) return rc;

    vijp_grad_result res[VIJP_ENGINE_COUNT];
    vijp_grads kept = {0};
    if ((rc = run_engines(a, res, &kept, &err))) {
        vijp_grads_clear(&kept);
        return rc;
    }
    if (a->save_dir) { /* written before anything is printed: stdout stays empty on failure */
        rc = save_grads(a->save_dir, &a->net, &kept, &err);
        vijp_grads_clear(&kept);
        if (rc) {
            for (size_t k = 0; k < a->n_engines; k++) vijp_grad_result_clear(&res[k]);
            fprintf(stderr, "vijp grad: --save: %s\n", err.msg);
            return EXIT_FAILED;
        }
    }
    print_results(a, res);
    for (size_t k = 0; k < a->n_engines; k++) vijp_grad_result_clear(&res[k]);
    return EXIT_OK;
}

int cli_grad(int argc, char **argv)
{
    grad_args a = {.s = {.spec = "dense:64,leaky:0.1", .depth = 8, .batch = 1, .seed = 1,
                         .init = {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, .loss = VIJP_LOSS_SQUARE},
                   .engines = "moonwalk", .format = "double"};
    int rc = grad_command(&a, argc, argv);
    vijp_net_free(&a.net);
    return rc;
}

/* vijp memory: stored bytes against depth per engine, and the deepest
 * network that fits a budget. */
#include "cli.h"
#include "vijp/error.h"
#include "vijp/memory.h"
#include "vijp/vijp.h"
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp memory --net SPEC --depth-max D --budget BYTES [options]\n"
    "\n"
    "Bytes each engine keeps alive between its passes (activations, sign bits,\n"
    "fragments; counted by the engines' own ledgers) for every depth up to D,\n"
    "from one run at depth D, and the deepest network that fits the budget.\n"
    "\n"
    "  --net SPEC        layers, cycled to the depth (e.g. dense:256,leaky:0.5)\n"
    "  --depth-max D     deepest network considered, 1..100000\n"
    "  --budget BYTES    activation budget: an integer, optionally with K, M or G\n"
    "                    (powers of 1024)\n"
    "  --width N         input width (default: the first dense layer's)\n"
    "  --batch B         samples per step (default 1)\n"
    "  --format F        double | binary32 | binary16 | bfloat16 | mpfr:P (default double)\n"
    "                    | bfloat16+binary32 | binary16+binary32 | tf32+binary32\n"
    "                    | e4m3 | e5m2 | e4m3:sat | e5m2:sat (OCP FP8, 1 byte)\n"
    "                    | e4m3+binary32 | e5m2+binary32\n"
    "                    | mxfp8|mxfp8e5m2|mxfp6|mxfp6e3m2|mxfp4[:ceil]+binary32\n"
    "                    | STORE+tc:ARCH (tensor cores: bfloat16+tc:h100, …)\n"
    "                    | nvfp4+binary32 | fp8[:pow2]+binary32\n"
    "                    | :ftz (flush subnormals to zero: bfloat16:ftz+binary32,\n"
    "                      bfloat16+binary32:ftz, binary32:ftz), :sr (stochastic\n"
    "                      rounding of the storage, seeded: bfloat16:sr+binary32)\n"
    "  --engines LIST    a comma list of backprop, moonwalk, pure-forward,\n"
    "                    reversible, checkpoint, or all (the default)\n"
    "  --seed S          seed of parameters and inputs (default 1)\n"
    "  --segment K       checkpoint: layers per segment (default ⌈√d⌉ for each depth d)\n"
    "  --json            one JSON object instead of the table\n"
    "  -h, --help        this help\n"
    "\n"
    "Exit status: 0 success, 1 an engine failed, 2 bad usage or input.\n";

/* What the command line asked for; resolve() fills the rest. */
typedef struct {
    const char *spec, *format, *engines;
    unsigned long long depth, width, batch, seed;
    size_t budget;
    vijp_engine_opts eo;
    int json;
    vijp_format f;
    vijp_engine_kind list[VIJP_ENGINE_COUNT];
    size_t n_engines;
    vijp_net net; /* --net, parsed once */
} memory_args;

/* Options into a; -1 to go on, or the exit status (--help, a bad option). */
static int parse_args(int argc, char **argv, memory_args *a)
{
    static const struct option opts[] = {
        {"net", 1, 0, 'n'},    {"depth-max", 1, 0, 'd'}, {"budget", 1, 0, 'b'}, {"width", 1, 0, 'w'},
        {"batch", 1, 0, 'B'},  {"format", 1, 0, 'f'},    {"engines", 1, 0, 'e'}, {"seed", 1, 0, 's'},
        {"json", 0, 0, 'j'},   {"help", 0, 0, 'h'},      {"segment", 1, 0, 'K'}, {0, 0, 0, 0},
    };
    unsigned long long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': a->spec = optarg; break;
        case 'd': if (cli_parse_size("--depth-max", optarg, 1, 100000, &a->depth)) return EXIT_USAGE; break;
        case 'b': if (cli_parse_bytes("vijp memory", "--budget", optarg, &a->budget)) return EXIT_USAGE; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, 1u << 16, &a->width)) return EXIT_USAGE; break;
        case 'B': if (cli_parse_size("--batch", optarg, 1, 1000000, &a->batch)) return EXIT_USAGE; break;
        case 'f': a->format = optarg; break;
        case 'e': a->engines = optarg; break;
        case 's': if (cli_parse_size("--seed", optarg, 0, INT64_MAX, &a->seed)) return EXIT_USAGE; break;
        case 'K': if (cli_parse_size("--segment", optarg, 1, 100000, &v)) return EXIT_USAGE; a->eo.checkpoint_segment = v; break;
        case 'j': a->json = 1; break;
        case 'h': fputs(help, cli_out()), cli_print_layer_syntax(cli_out(), CLI_SPEC_ITEMS); return EXIT_OK;
        default: fputs("run 'vijp memory --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_say("vijp memory: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    return -1;
}

/* --engines' comma list into a->list: each engine once. */
static int parse_engines(memory_args *a, vijp_error *err)
{
    return vijp_engine_parse_list(a->engines, a->list, &a->n_engines, err);
}

/* A JSON net's depth, the required options, the format, the engines and the
 * net's width, checked before anything runs (bad input: exit 2). */
static int resolve(memory_args *a, vijp_error *err)
{
    int json = a->spec && vijp_net_spec_is_json(a->spec); /* a JSON net: its layers are the depth */
    if (!a->spec || (!a->depth && !json) || !a->budget) {
        fputs("vijp memory: --net, --depth-max and --budget are required (run 'vijp memory --help')\n", stderr);
        return EXIT_USAGE;
    }
    if (vijp_format_parse(a->format, &a->f, err) || parse_engines(a, err)) return cli_usage_error("vijp memory", err);
    size_t d = (size_t)a->depth;
    int loss = 0;
    if (cli_net_parse("--depth-max", a->spec, &d, a->depth != 0, &loss, 0, (size_t)a->width, &a->net, err)) /* checked before anything runs */
        return cli_usage_error("vijp memory", err);
    a->depth = d, a->width = a->net.width;
    return -1;
}

static void print_json(const memory_args *a, const size_t *bytes, const size_t *deepest)
{
    json_t *e = json_array();
    for (size_t k = 0; k < a->n_engines; k++) {
        json_t *b = json_array();
        for (size_t d = 0; d < a->depth; d++) json_array_append_new(b, json_integer((json_int_t)bytes[k * a->depth + d]));
        json_array_append_new(e, json_pack("{s:s, s:I, s:b, s:o}", "engine", vijp_engine_name(a->list[k]), "deepest",
                                           (json_int_t)deepest[k], "all_fit", deepest[k] == a->depth, "stored_bytes", b));
    }
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:s, s:I, s:o}", "net", a->spec, "width", (json_int_t)a->width, "batch",
                          (json_int_t)a->batch, "depth_max", (json_int_t)a->depth, "format", a->f.name, "budget",
                          (json_int_t)a->budget, "engines", e);
    json_dumpf(o, cli_out(), JSON_INDENT(2));
    fputc('\n', cli_out());
    json_decref(o);
}

static void print_table(const memory_args *a, const size_t *bytes, const size_t *deepest)
{
    FILE *out = cli_out();
    size_t depth = a->depth;
    fprintf(out, "net %s, width %zu, batch %zu, format %s, budget %zu bytes\n\n%8s", a->spec, (size_t)a->width,
           (size_t)a->batch, a->f.name, a->budget, "depth");
    for (size_t k = 0; k < a->n_engines; k++) fprintf(out, " %16s", vijp_engine_name(a->list[k]));
    fputc('\n', out);
    for (size_t d = 1; d <= depth; d = d < depth && 2 * d > depth ? depth : 2 * d) {
        fprintf(out, "%8zu", d);
        for (size_t k = 0; k < a->n_engines; k++) fprintf(out, " %16zu", bytes[k * depth + d - 1]);
        fputc('\n', out);
    }
    fprintf(out, "\ndeepest network within %zu bytes:\n", a->budget);
    for (size_t k = 0; k < a->n_engines; k++) {
        fprintf(out, "  %-13s %6zu%s", vijp_engine_name(a->list[k]), deepest[k], deepest[k] == depth ? "+ (all fit)" : "");
        if (a->list[0] == VIJP_ENGINE_BACKPROP && k && deepest[0])
            fprintf(out, "   %.1f× backprop's%s", (double)deepest[k] / (double)deepest[0], deepest[k] == depth ? " (at least)" : "");
        fputc('\n', out);
    }
}

int cli_memory(int argc, char **argv)
{
    memory_args a = {.format = "double", .engines = "all",
                     .batch = 1, .seed = 1};
    vijp_error err = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) rc = resolve(&a, &err);
    if (rc >= 0) return rc;

    size_t *bytes = vijp_alloc_array(a.n_engines * a.depth, sizeof *bytes), deepest[VIJP_ENGINE_COUNT];
    for (size_t k = 0; k < a.n_engines; k++) {
        rc = vijp_memory_profile(&a.net, a.batch, a.seed, &a.f, a.list[k], &a.eo, bytes + k * a.depth, &err);
        if (rc) {
            fprintf(stderr, "vijp memory: %s: %s\n", vijp_engine_name(a.list[k]), err.msg);
            free(bytes), vijp_net_free(&a.net);
            return rc == VIJP_EINVAL || rc == VIJP_EDIM || rc == VIJP_EDOMAIN ? EXIT_USAGE : EXIT_FAILED;
        }
        deepest[k] = vijp_memory_deepest(bytes + k * a.depth, a.depth, a.budget);
    }
    if (a.json) print_json(&a, bytes, deepest);
    else print_table(&a, bytes, deepest);
    free(bytes), vijp_net_free(&a.net);
    return EXIT_OK;
}

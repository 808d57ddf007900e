/* vijp eval: one layer's operators at the user's points, written as .npy
 * (arrays in and out): for debugging a layer and comparing with
 * outside tools.  Everything is computed first, in the chosen format, and
 * written only if every operator succeeded. */
#include "cli.h"
#include "vijp/interval.h"
#include "vijp/array_io.h"
#include "vijp/vijp.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vijp eval --layer SPEC --input X.npy --save DIR [options]\n"
    "\n"
    "Evaluate one layer's operators at given points, in a given format, and\n"
    "write them as .npy files ('<f8', a row per sample; values of the format\n"
    "rounded to double) into DIR (made if missing):\n"
    "  forward.npy  f(x)                      [batch, out]\n"
    "  jvp.npy      J u                        [batch, out]\n"
    "  vjp.npy      gᵀJ                        [batch, in]\n"
    "  vijp.npy     the vijp of vjp.npy: gᵀJ rebuilt into g (with the stored\n"
    "               fragment where J has a cokernel)    [batch, out]\n"
    "  fragment.npy that fragment (1-D), when the layer stores one\n"
    "  fprime.npy   f′(x), elementwise layers only     [batch, in]\n"
    "  vjp_param.npy  Σ_b g_bᵀ ∂f(x_b)/∂θ, layers with parameters (θ's order)  [params]\n"
    "\n"
    "  --layer SPEC       one layer (see vijp certify --help), or a one-layer FILE.json\n"
    "  --width N          input width (default: dense's from SPEC, else --input's)\n"
    "  --input X.npy      the points, shape [batch, width]\n"
    "  --params F.npy     θ in the type's order (1-D); default: --init from --seed\n"
    "  --tangent U.npy    u, shape [batch, in]; default: seeded N(0, 1)\n"
    "  --cotangent G.npy  g, shape [batch, out]; default: seeded N(0, 1)\n"
    "  --format F         double | binary32 | binary16 | bfloat16 | mpfr:P (default double)\n"
    "                     | bfloat16+binary32 | binary16+binary32 | tf32+binary32\n"
    "                     | e4m3 | e5m2 (OCP FP8, overflowing to NaN and ±Inf)\n"
    "                     | e4m3:sat | e5m2:sat (saturating to ±448, ±57344)\n"
    "                     | e4m3+binary32 | e5m2+binary32 (FP8 storage)\n"
    "                     | mxfp8|mxfp8e5m2|mxfp6|mxfp6e3m2|mxfp4[:ceil]+binary32\n"
    "                     | STORE+tc:ARCH (tensor cores: bfloat16+tc:h100, …)\n"
    "                     | nvfp4+binary32 | fp8[:pow2]+binary32\n"
    "                     | :ftz (flush subnormals to zero: bfloat16:ftz+binary32,\n"
    "                       bfloat16+binary32:ftz, binary32:ftz), :sr (stochastic\n"
    "                       rounding of the storage, seeded: bfloat16:sr+binary32)\n"
    "  --seed S           seed of θ and of the default u, g (default 1)\n"
    "  --save DIR         the folder (required)\n"
    "  -q, --quiet        print nothing on success\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit status: 0 success, 1 an operator failed (e.g. a singular vijp; nothing\n"
    "is written) or writing failed (the message names the file), 2 bad usage or input.\n";

/* A [rows, cols] .npy (rows 0: any) as a cols × rows column-major matrix of format f. */
/* role: the cotangent is a gradient (fp8+binary32 stores it in E5M2, mat.h). */
/* The rows of a read [rows, cols] array as the columns of M in format f
 * (a is cleared): path names it in the message when cols differ. */
static int rows_to_mat(const char *path, vijp_array *a, size_t cols, vijp_mat *M, const vijp_format *f,
                       vijp_store_role role, vijp_error *err)
{
    int rc = a->shape[1] == cols ? 0
             : vijp_fail(err, VIJP_EDIM, "%s: shape (%zu, %zu), want [rows, %zu] (a row per sample)", path, a->shape[0],
                         a->shape[1], cols);
    if (!rc) {
        vijp_mat_init(M, cols, a->shape[0], f);
        vijp_mat_set_d_as(M, a->data, role);
    }
    vijp_array_clear(a);
    return rc;
}

static int read_rows(const char *path, size_t cols, size_t rows, vijp_mat *M, const vijp_format *f,
                     vijp_store_role role, vijp_error *err)
{
    vijp_array a;
    int rc = vijp_npy_read_rows(path, cols, rows, &a, err);
    return rc ? rc : rows_to_mat(path, &a, cols, M, f, role, err);
}

static void seeded(vijp_mat *M, size_t rows, size_t cols, const vijp_format *f, vijp_store_role role, vijp_rng *rng)
{
    vijp_mat_init(M, rows, cols, f);
    size_t n = rows * cols;
    double *v = vijp_alloc_array(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = vijp_rng_normal(rng);
    vijp_mat_set_d_as(M, v, role); /* whole columns: MX formats' blocks run down them (mat.h) */
    free(v);
}

/* What the command line asked for. */
typedef struct {
    const char *spec, *input, *params, *tangent, *cotangent, *format, *dir;
    unsigned long long width, seed;
    int quiet;
} eval_args;

/* The layer, its parameters and the points in format F, and what the
 * operators write: a struct so that one function can clear them all. */
typedef struct {
    vijp_format F;
    vijp_net net;
    vijp_mat th, X, U, G, Y, V, Gx, Gy, frag, D, ones, Gt;
    uint64_t seed; /* --seed: also the results' stochastic-rounding streams */
} eval_run;

static void eval_run_clear(eval_run *r)
{
    vijp_mat *all[] = {&r->th, &r->X, &r->U, &r->G, &r->Y, &r->V, &r->Gx, &r->Gy, &r->frag, &r->D, &r->ones, &r->Gt};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) vijp_mat_clear(all[k]); /* empty ones too: a no-op */
    vijp_net_free(&r->net);
}

/* Options into a; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, eval_args *a)
{
    static const struct option opts[] = {
        {"layer", 1, 0, 'l'},  {"width", 1, 0, 'w'},  {"input", 1, 0, 'i'}, {"params", 1, 0, 'p'},
        {"tangent", 1, 0, 'u'}, {"cotangent", 1, 0, 'g'}, {"format", 1, 0, 'f'}, {"seed", 1, 0, 's'},
        {"save", 1, 0, 'o'},   {"quiet", 0, 0, 'q'},  {"help", 0, 0, 'h'},  {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (c) {
        case 'l': a->spec = optarg; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, VIJP_WIDTH_MAX, &a->width)) return EXIT_USAGE; break;
        case 'i': a->input = optarg; break;
        case 'p': a->params = optarg; break;
        case 'u': a->tangent = optarg; break;
        case 'g': a->cotangent = optarg; break;
        case 'f': a->format = optarg; break;
        case 's': if (cli_parse_size("--seed", optarg, 0, (1ull << 63) - 1, &a->seed)) return EXIT_USAGE; break;
        case 'o': a->dir = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'h': fputs(help, cli_out()); return EXIT_OK;
        default: fputs("run 'vijp eval --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vijp eval: unexpected argument '%s' (run 'vijp eval --help')\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (!a->spec || !a->input || !a->dir) {
        fputs("vijp eval: --layer, --input and --save are required (run 'vijp eval --help')\n", stderr);
        return EXIT_USAGE;
    }
    if (!vijp_net_spec_is_json(a->spec) && strchr(a->spec, ',')) {
        fprintf(stderr, "vijp eval: --layer takes one layer, got '%s'\n", a->spec);
        return EXIT_USAGE;
    }
    return -1;
}

/* --params' θ into the built one-layer net (vijp_net_init then leaves it). */
static int read_params(const char *path, vijp_net *net, vijp_error *err)
{
    vijp_array a = {0};
    const vijp_layer *L = &net->layers[0];
    size_t P = L->type->param_count(L);
    int rc = vijp_npy_read(path, &a, err);
    if (!rc && (a.ndim != 1 || a.len != P))
        rc = vijp_fail(err, VIJP_EDIM, "--params %s: %zu values, want (%zu,) (θ in %s's order)", path, a.len, P,
                       L->type->name);
    if (!rc && P) memcpy(net->theta[0], a.data, P * sizeof *a.data);
    if (!rc && !net->given) net->given = vijp_alloc_array(1, 1);
    if (!rc) net->given[0] = 1;
    vijp_array_clear(&a);
    return rc;
}

/* The input's side: format, layer, parameters, points, tangents and
 * cotangents (given or seeded), the --save folder.  A failure is bad input. */
static int setup(const eval_args *a, eval_run *r, vijp_error *err)
{
    /* no --width: a dense SPEC or a file gives it, else the input's rows */
    int width_of_input = !a->width && strncmp(a->spec, "dense", 5) && !vijp_net_spec_is_json(a->spec);
    vijp_array xa = {0};
    size_t w0 = a->width;
    int rc = vijp_format_parse(a->format, &r->F, err);
    if (!rc && width_of_input && !(rc = vijp_npy_read_rows(a->input, 0, 0, &xa, err))) w0 = xa.shape[1];
    if (!rc) rc = vijp_net_build(&r->net, a->spec, 1, w0, err);
    if (!rc && a->params) rc = read_params(a->params, &r->net, err);
    if (!rc) rc = vijp_net_init(&r->net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, a->seed, err);
    if (!rc) rc = vijp_net_params(&r->net, &r->F, &r->th, err);
    if (rc) return vijp_array_clear(&xa), rc;
    const vijp_layer *L = &r->net.layers[0];
    rc = xa.data ? rows_to_mat(a->input, &xa, L->in, &r->X, &r->F, VIJP_STORE_FORWARD, err)
                 : read_rows(a->input, L->in, 0, &r->X, &r->F, VIJP_STORE_FORWARD, err);
    if (rc) return rc;
    size_t B = r->X.cols;
    vijp_rng rng;
    vijp_rng_seed(&rng, a->seed ^ 0xe7a1e7a1ull);
    if (a->tangent) rc = read_rows(a->tangent, L->in, B, &r->U, &r->F, VIJP_STORE_FORWARD, err);
    else seeded(&r->U, L->in, B, &r->F, VIJP_STORE_FORWARD, &rng);
    if (!rc && a->cotangent) rc = read_rows(a->cotangent, L->out, B, &r->G, &r->F, VIJP_STORE_GRADIENT, err);
    else if (!rc) seeded(&r->G, L->out, B, &r->F, VIJP_STORE_GRADIENT, &rng);
    if (rc) return rc;
    /* the files compute will give (save_all), checked now: made by save_all,
     * so a failed run leaves no empty folder */
    cli_save_item names[7] = {{"forward.npy", NULL, 0}, {"jvp.npy", NULL, 0}, {"vjp.npy", NULL, 0}, {"vijp.npy", NULL, 0}};
    size_t n = 4;
    if (vijp_layer_fragment_count(L, &r->th, &r->X)) names[n++].name = "fragment.npy";
    if (vijp_deriv_enclose_of(L->type)) names[n++].name = "fprime.npy";
    if (r->th.rows) names[n++].name = "vjp_param.npy";
    return cli_save_check(a->dir, names, n, err);
}

/* Every operator, and f′ = J·1 for an elementwise layer (J diagonal). */
static int compute(eval_run *r, vijp_error *err)
{
    const vijp_layer *L = &r->net.layers[0];
    const vijp_format *F = &r->F;
    size_t B = r->X.cols;
    vijp_mat_init(&r->Y, L->out, B, F), vijp_mat_init(&r->V, L->out, B, F), vijp_mat_init(&r->Gx, L->in, B, F);
    vijp_mat_init(&r->Gy, L->out, B, F), vijp_mat_init(&r->frag, vijp_layer_fragment_count(L, &r->th, &r->X), 1, F);
    /* stochastic rounding (":sr"): the streams of the one layer's results, from --seed */
    r->Y.sr = vijp_sr_key_of(r->seed, VIJP_SR_OUTPUT, 1, 0), r->V.sr = vijp_sr_key_of(r->seed, VIJP_SR_TANGENT, 1, 0);
    r->Gx.sr = vijp_sr_key_of(r->seed, VIJP_SR_COTANGENT, 0, 0), r->Gy.sr = vijp_sr_key_of(r->seed, VIJP_SR_COTANGENT, 1, 0);
    r->frag.sr = vijp_sr_key_of(r->seed, VIJP_SR_FRAGMENT, 1, 0);
    int rc = vijp_layer_forward(L, &r->th, &r->X, &r->Y, err);
    if (!rc) rc = vijp_layer_jvp(L, &r->th, &r->X, &r->U, &r->V, err);
    if (!rc) rc = vijp_layer_vjp(L, &r->th, &r->X, &r->G, &r->Gx, err);
    if (!rc && r->frag.rows) rc = vijp_layer_fragment(L, &r->th, &r->X, &r->G, &r->frag, err);
    if (!rc) rc = vijp_layer_vijp(L, &r->th, &r->X, &r->Gx, &r->frag, &r->Gy, err);
    if (!rc && vijp_deriv_enclose_of(L->type)) {
        vijp_mat_init(&r->ones, L->in, B, F), vijp_mat_init(&r->D, L->out, B, F);
        for (size_t i = 0; i < vijp_mat_len(&r->ones); i++) vijp_mat_set_entry_d(&r->ones, i, 1.0);
        rc = vijp_layer_jvp(L, &r->th, &r->X, &r->ones, &r->D, err);
    }
    if (!rc && r->th.rows) {
        vijp_mat_init(&r->Gt, r->th.rows, 1, F);
        r->Gt.sr = vijp_sr_key_of(r->seed, VIJP_SR_PARAM_GRAD, 1, 0);
        rc = vijp_layer_vjp_param(L, &r->th, &r->X, &r->G, &r->Gt, err);
    }
    if (!rc) rc = vijp_mat_check_finite(&r->Y, "forward", err);
    return rc;
}

/* Every file, or none and a failure naming the one that failed. */
static int save_all(const char *dir, const eval_run *r, vijp_error *err)
{
    cli_save_item items[7] = {{"forward.npy", &r->Y, 0}, {"jvp.npy", &r->V, 0}, {"vjp.npy", &r->Gx, 0}, {"vijp.npy", &r->Gy, 0}};
    size_t n = 4;
    if (r->frag.rows) items[n++] = (cli_save_item){"fragment.npy", &r->frag, 1};
    if (r->D.rows) items[n++] = (cli_save_item){"fprime.npy", &r->D, 0};
    if (r->Gt.rows) items[n++] = (cli_save_item){"vjp_param.npy", &r->Gt, 1};
    return cli_save_set(dir, items, n, err);
}

int cli_eval(int argc, char **argv)
{
    eval_args a = {.format = "double", .seed = 1};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    eval_run r = {0};
    vijp_error err = {0};
    int usage = (rc = setup(&a, &r, &err)) != 0; /* past setup a failure is the computation's */
    r.seed = a.seed;
    if (!rc) rc = compute(&r, &err);
    if (!rc) rc = save_all(a.dir, &r, &err);
    if (!rc && !a.quiet) {
        const vijp_layer *L = &r.net.layers[0];
        fprintf(cli_out(), "%s (%zu → %zu), %zu points, %s: forward, jvp, vjp, vijp%s%s%s written to %s\n", a.spec, L->in,
               L->out, r.X.cols, r.F.name, r.frag.rows ? ", fragment" : "", r.D.rows ? ", fprime" : "",
               r.Gt.rows ? ", vjp_param" : "", a.dir);
    }
    eval_run_clear(&r);
    if (!rc) return EXIT_OK;
    fprintf(stderr, "vijp eval: %s\n", err.msg);
    return usage ? EXIT_USAGE : EXIT_FAILED;
}

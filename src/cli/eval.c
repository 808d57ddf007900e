/* vijp eval: one layer's operators at the user's points, written as .npy
 * (issue 11, arrays in and out): for debugging a layer and comparing with
 * outside tools.  Everything is computed first, in the chosen format, and
 * written only if every operator succeeded. */
#include "cli.h"
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
    "\n"
    "  --layer SPEC       one layer (see vijp certify --help), or a one-layer FILE.json\n"
    "  --width N          input width (elementwise layers need it; dense: from SPEC)\n"
    "  --input X.npy      the points, shape [batch, width]\n"
    "  --params F.npy     θ in the type's order (1-D); default: --init from --seed\n"
    "  --tangent U.npy    u, shape [batch, in]; default: seeded N(0, 1)\n"
    "  --cotangent G.npy  g, shape [batch, out]; default: seeded N(0, 1)\n"
    "  --format F         double | binary32 | binary16 | bfloat16 | mpfr:P (default double)\n"
    "                     | bfloat16+binary32 | binary16+binary32 | tf32+binary32\n"
    "  --seed S           seed of θ and of the default u, g (default 1)\n"
    "  --save DIR         the folder (required)\n"
    "  -q, --quiet        print nothing on success\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit status: 0 success, 1 an operator failed (e.g. a singular vijp; nothing\n"
    "is written) or writing failed (the message names the file), 2 bad usage or input.\n";

/* A [rows, cols] .npy (rows 0: any) as a cols × rows column-major matrix of format f. */
static int read_rows(const char *path, size_t cols, size_t rows, vijp_mat *M, const vijp_format *f, vijp_error *err)
{
    vijp_array a;
    int rc = vijp_npy_read_rows(path, cols, rows, &a, err);
    if (!rc) {
        vijp_mat_init(M, cols, a.shape[0], f);
        vijp_mat_set_d(M, a.data);
    }
    vijp_array_clear(&a);
    return rc;
}

static void seeded(vijp_mat *M, size_t rows, size_t cols, const vijp_format *f, vijp_rng *rng)
{
    vijp_mat_init(M, rows, cols, f);
    for (size_t i = 0; i < rows * cols; i++) vijp_mat_set_entry_d(M, i, vijp_rng_normal(rng));
}

/* M (rows × batch, column-major: a column per sample) as [batch, rows]. */
static int save(const char *dir, const char *name, const vijp_mat *M, int one_d, vijp_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n = vijp_mat_len(M), shape[2] = {M->cols, M->rows};
    double *d = vijp_alloc_array(n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = vijp_mat_get_d(M, i);
    if (one_d) shape[0] = n;
    int rc = vijp_npy_write(path, one_d ? 1 : 2, shape, d, err);
    free(d);
    return rc;
}

int cli_eval(int argc, char **argv)
{
    static const struct option opts[] = {
        {"layer", 1, 0, 'l'},  {"width", 1, 0, 'w'},  {"input", 1, 0, 'i'}, {"params", 1, 0, 'p'},
        {"tangent", 1, 0, 'u'}, {"cotangent", 1, 0, 'g'}, {"format", 1, 0, 'f'}, {"seed", 1, 0, 's'},
        {"save", 1, 0, 'o'},   {"quiet", 0, 0, 'q'},  {"help", 0, 0, 'h'},  {0, 0, 0, 0},
    };
    const char *spec = NULL, *input = NULL, *params = NULL, *tangent = NULL, *cotangent = NULL, *format = "double",
               *dir = NULL;
    unsigned long long width = 0, seed = 1;
    int quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (c) {
        case 'l': spec = optarg; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, VIJP_WIDTH_MAX, &width)) return EXIT_USAGE; break;
        case 'i': input = optarg; break;
        case 'p': params = optarg; break;
        case 'u': tangent = optarg; break;
        case 'g': cotangent = optarg; break;
        case 'f': format = optarg; break;
        case 's': if (cli_parse_size("--seed", optarg, 0, (1ull << 63) - 1, &seed)) return EXIT_USAGE; break;
        case 'o': dir = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(help, stdout); return EXIT_OK;
        default: fputs("run 'vijp eval --help' for the options\n", stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc || !spec || !input || !dir) {
        fprintf(stderr, "vijp eval: %s (run 'vijp eval --help')\n",
                optind < argc ? "unexpected argument" : "--layer, --input and --save are required");
        return EXIT_USAGE;
    }
    vijp_error err = {0};
    vijp_format F;
    vijp_net net = {0};
    vijp_mat th = {0}, X = {0}, U = {0}, G = {0}, Y = {0}, V = {0}, Gx = {0}, Gy = {0}, frag = {0}, D = {0}, ones = {0};
    int rc = vijp_format_parse(format, &F, &err), usage = 1;
    size_t w0 = width ? width : strncmp(spec, "dense", 5) && !vijp_net_spec_is_json(spec) ? 16 : 0;
    if (!rc) rc = vijp_net_build(&net, spec, 1, w0, &err);
    if (!rc && params) { /* θ given: vijp_net_init leaves it */
        vijp_array a = {0};
        size_t P = net.layers[0].type->param_count(&net.layers[0]);
        if (!(rc = vijp_npy_read(params, &a, &err)) && (a.ndim != 1 || a.len != P))
            rc = vijp_fail(&err, VIJP_EDIM, "--params %s: %zu values, want (%zu,) (θ in %s's order)", params, a.len, P,
                           net.layers[0].type->name);
        if (!rc && P) memcpy(net.theta[0], a.data, P * sizeof *a.data);
        if (!rc && !net.given) net.given = vijp_alloc_array(1, 1);
        if (!rc) net.given[0] = 1;
        vijp_array_clear(&a);
    }
    if (!rc) rc = vijp_net_init(&net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, seed, &err);
    const vijp_layer *L = net.layers ? &net.layers[0] : NULL;
    if (!rc) rc = vijp_net_params(&net, &F, &th, &err);
    if (!rc) rc = read_rows(input, L->in, 0, &X, &F, &err);
    size_t B = X.cols;
    vijp_rng rng;
    vijp_rng_seed(&rng, seed ^ 0xe7a1e7a1ull);
    if (!rc && tangent) rc = read_rows(tangent, L->in, B, &U, &F, &err);
    else if (!rc) seeded(&U, L->in, B, &F, &rng);
    if (!rc && cotangent) rc = read_rows(cotangent, L->out, B, &G, &F, &err);
    else if (!rc) seeded(&G, L->out, B, &F, &rng);
    if (!rc) rc = cli_prepare_dir(dir, &err);
    /* Past here a failure is the computation's, not the input's. */
    if (!rc) {
        usage = 0;
        vijp_mat_init(&Y, L->out, B, &F), vijp_mat_init(&V, L->out, B, &F), vijp_mat_init(&Gx, L->in, B, &F);
        vijp_mat_init(&Gy, L->out, B, &F), vijp_mat_init(&frag, vijp_layer_fragment_count(L, &th, &X), 1, &F);
        rc = vijp_layer_forward(L, &th, &X, &Y, &err);
        if (!rc) rc = vijp_layer_jvp(L, &th, &X, &U, &V, &err);
        if (!rc) rc = vijp_layer_vjp(L, &th, &X, &G, &Gx, &err);
        if (!rc && frag.rows) rc = vijp_layer_fragment(L, &th, &X, &G, &frag, &err);
        if (!rc) rc = vijp_layer_vijp(L, &th, &X, &Gx, &frag, &Gy, &err);
        if (!rc && L->type->deriv_enclose) { /* elementwise: f′ = J·1, J diagonal */
            vijp_mat_init(&ones, L->in, B, &F), vijp_mat_init(&D, L->out, B, &F);
            for (size_t i = 0; i < vijp_mat_len(&ones); i++) vijp_mat_set_entry_d(&ones, i, 1.0);
            rc = vijp_layer_jvp(L, &th, &X, &ones, &D, &err);
        }
        if (!rc) rc = vijp_mat_check_finite(&Y, "forward", &err);
    }
    if (!rc) { /* every file, or a failure naming the one that failed */
        rc = save(dir, "forward.npy", &Y, 0, &err);
        if (!rc) rc = save(dir, "jvp.npy", &V, 0, &err);
        if (!rc) rc = save(dir, "vjp.npy", &Gx, 0, &err);
        if (!rc) rc = save(dir, "vijp.npy", &Gy, 0, &err);
        if (!rc && frag.rows) rc = save(dir, "fragment.npy", &frag, 1, &err);
        if (!rc && D.rows) rc = save(dir, "fprime.npy", &D, 0, &err);
    }
    if (!rc && !quiet)
        printf("%s (%zu → %zu), %zu points, %s: forward, jvp, vjp, vijp%s%s written to %s\n", spec, L->in, L->out, B,
               F.name, frag.rows ? ", fragment" : "", D.rows ? ", fprime" : "", dir);
    vijp_mat *all[] = {&th, &X, &U, &G, &Y, &V, &Gx, &Gy, &frag, &D, &ones};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) vijp_mat_clear(all[k]); /* empty ones too: a no-op */
    vijp_net_free(&net);
    if (!rc) return EXIT_OK;
    fprintf(stderr, "vijp eval: %s\n", err.msg);
    return usage ? EXIT_USAGE : EXIT_FAILED;
}

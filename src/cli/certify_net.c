/* vijp certify --net: every layer of a net (or --layer-index's) certified
 * at its own parameters and at the inputs that reach it: each sample point
 * (a row of --input, or drawn) sent through the layers before it in double.
 * A JSON net's layers keep the weights it gives; the others are drawn from
 * --init and --seed once, as grad and drift draw them. */
#include "cli.h"
#include "certify_cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The net's inputs, a row each: --input's, or scale·N(0,1) drawn. */
static int net_points(const certify_args *a, size_t n0, vijp_array *X, vijp_error *err)
{
    if (a->input) {
        if (vijp_npy_read_rows(a->input, n0, 0, X, err)) return err->code;
        if (X->shape[0] > 100000)
            return vijp_fail(err, VIJP_EDIM, "--input %s: %zu points, more than the 100000 certify takes", a->input,
                             X->shape[0]);
        return 0;
    }
    *X = (vijp_array){.ndim = 2, .shape = {a->samples, n0}, .len = a->samples * n0};
    X->data = vijp_alloc_array(X->len, sizeof *X->data);
    vijp_rng rng;
    certify_seed_points(&rng, a->seed);
    for (size_t i = 0; i < X->len; i++) X->data[i] = a->scale * vijp_rng_normal(&rng);
    return 0;
}

/* H (a row per sample) ← L's forward of it, in double. */
static int forward_rows(const vijp_layer *L, const double *theta, vijp_array *H, vijp_error *err)
{
    vijp_format dbl;
    if (vijp_format_parse("double", &dbl, err)) return err->code;
    size_t B = H->shape[0], P = L->type->param_count(L);
    vijp_mat th, x, y;
    vijp_mat_init(&th, P, 1, &dbl), vijp_mat_init(&x, L->in, B, &dbl), vijp_mat_init(&y, L->out, B, &dbl);
    if (P) vijp_mat_set_d(&th, theta);
    vijp_mat_set_d(&x, H->data); /* column b is sample b: the rows of H in C order */
    int rc = vijp_layer_forward(L, &th, &x, &y, err);
    if (!rc) {
        vijp_array_clear(H);
        *H = (vijp_array){.ndim = 2, .shape = {B, L->out}, .len = B * L->out};
        H->data = vijp_alloc_array(H->len, sizeof *H->data);
        memcpy(H->data, y.d, H->len * sizeof *H->data);
    }
    vijp_mat_clear(&th), vijp_mat_clear(&x), vijp_mat_clear(&y);
    return rc;
}

/* Layer i of net alone, with its parameters, as a net of one layer. */
static int one_layer(const vijp_net *net, size_t i, vijp_net *one, char *item, size_t size, vijp_error *err)
{
    const vijp_layer *L = &net->layers[i];
    vijp_layer_spec(L, item, size);
    if (vijp_net_build(one, item, 1, L->in, err)) return err->code;
    size_t P = L->type->param_count(L);
    if (P) memcpy(one->theta[0], net->theta[i], P * sizeof *net->theta[i]);
    if (!one->given) one->given = vijp_alloc_array(1, 1);
    one->given[0] = 1; /* certify_samples draws nothing for it */
    return 0;
}

int certify_build_net(const certify_args *a, vijp_net *net)
{
    vijp_error err = {0};
    vijp_net tmpl;
    size_t depth = a->depth;
    int loss = 0;
    if (!depth && !vijp_net_spec_is_json(a->net)) /* a spec's own number of items */
        for (const char *c = a->net; c; c = strchr(c + 1, ',')) depth++;
    size_t width = a->width ? a->width : strncmp(a->net, "dense", 5) && !vijp_net_spec_is_json(a->net) ? 16 : 0;
    if (cli_net_parse("--depth", a->net, &depth, a->depth != 0, &loss, 0, width, &tmpl, &err))
        return cli_usage_error("vijp certify", &err);
    vijp_net_copy(net, &tmpl);
    vijp_net_free(&tmpl);
    if (vijp_net_init(net, a->init, a->seed, &err)) {
        vijp_net_free(net);
        return cli_usage_error("vijp certify", &err);
    }
    if (a->layer_index > net->depth) {
        fprintf(stderr, "vijp certify: --layer-index %llu, but %s has %zu layer%s\n", a->layer_index, a->net, net->depth,
                net->depth == 1 ? "" : "s");
        vijp_net_free(net);
        return EXIT_USAGE;
    }
    return 0;
}

/* Layer i's certification at H's rows: its exit status. */
static int certify_layer_i(const mpi_world *w, const certify_args *a, const vijp_net *net, size_t i, const vijp_array *H,
                           json_t *collect, vijp_verdict *verdict)
{
    const vijp_layer *L = &net->layers[i];
    if (!certify_fits((double)L->out, (double)L->in, (double)L->type->param_count(L))) return EXIT_USAGE;
    vijp_error err = {0};
    vijp_net one;
    char item[256], label[4400];
    if (one_layer(net, i, &one, item, sizeof item, &err)) return cli_usage_error("vijp certify", &err);
    certify_sources src = {.label = label};
    snprintf(label, sizeof label, "%zu of %s: %s", i + 1, a->net, item);
    int given = net->given && net->given[i];
    if (given) snprintf(src.params, sizeof src.params, "parameters from %s", a->net);
    else snprintf(src.params, sizeof src.params, "%s parameters", a->init_name);
    src.params_json = given ? a->net : a->init_name;
    char through[64] = "";
    if (i) snprintf(through, sizeof through, i == 1 ? " through layer 1" : " through layers 1-%zu", i);
    if (a->input) snprintf(src.points, sizeof src.points, "from %s%s", a->input, through);
    else snprintf(src.points, sizeof src.points, "%g·N(0,1)%s", a->scale, through);
    int rc = certify_samples(w, a, &src, &one, H, H->shape[0], collect, verdict);
    if (!w->rank && !a->json) fputc('\n', cli_out());
    vijp_net_free(&one);
    return rc;
}

/* The net's verdict from its layers': certified if every one is, else
 * not-submersive if some layer is proven not to be, else inconclusive. */
static const char *net_verdict(size_t certified, size_t refuted, size_t layers)
{
    return certified == layers ? "certified-submersive" : refuted ? "not-submersive" : "inconclusive";
}

int certify_net(const mpi_world *w, const certify_args *a)
{
    vijp_net net;
    int rc = certify_build_net(a, &net);
    if (rc) return rc;
    vijp_error err = {0};
    vijp_array H = {0};
    if (net_points(a, net.width, &H, &err)) {
        vijp_net_free(&net);
        return cli_usage_error("vijp certify", &err);
    }
    json_t *layers = a->json ? json_array() : NULL;
    size_t first = a->layer_index ? a->layer_index - 1 : 0, last = a->layer_index ? a->layer_index : net.depth;
    size_t certified = 0, refuted = 0;
    for (size_t i = 0; i < last && rc != EXIT_USAGE && rc != 3; i++) {
        if (i >= first) {
            vijp_verdict v = VIJP_INCONCLUSIVE;
            int r = certify_layer_i(w, a, &net, i, &H, layers, &v);
            certified += r == EXIT_OK, refuted += !r || r == EXIT_FAILED ? v == VIJP_NOT_SUBMERSIVE : 0;
            rc = r > rc ? r : rc;
        }
        if (i + 1 < last && forward_rows(&net.layers[i], net.theta[i], &H, &err)) {
            fprintf(stderr, "vijp certify: %s layer %zu: %s\n", a->net, i + 1, err.msg);
            rc = EXIT_FAILED;
            break;
        }
    }
    size_t n = last - first;
    if (!w->rank && layers && rc != EXIT_USAGE && rc != 3)
        print_json(json_pack("{s:s, s:I, s:I, s:s, s:I, s:o}", "net", a->net, "depth", (json_int_t)net.depth, "samples",
                             (json_int_t)H.shape[0], "verdict", net_verdict(certified, refuted, n), "layers_certified",
                             (json_int_t)certified, "layers", layers));
    else if (layers) json_decref(layers);
    if (!w->rank && !a->json && rc != EXIT_USAGE && rc != 3)
        fprintf(cli_out(), "net %s: %zu of %zu layer%s certified submersive at every sample\n", a->net, certified, n,
                n == 1 ? "" : "s");
    vijp_array_clear(&H);
    vijp_net_free(&net);
    return rc;
}

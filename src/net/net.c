/* Networks from specs, seeded initialisation, parameters in a format. */
#include "vijp/net.h"
#include "vijp/error.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIJP_DEPTH_MAX 100000 /* far beyond any study; guards absurd allocations */

/* A JSON net where a spec may stand: depth and width, when given, must be
 * the file's; vijp_net_shape's contract keeps no parameter. */
static int build_json(vijp_net *net, const char *path, size_t depth, size_t width, int with_params, vijp_error *err)
{
    int rc = net_json_load(net, path, with_params, err);
    if (rc) return rc;
    if (depth && depth != net->depth)
        rc = vijp_fail(err, VIJP_EINVAL, "%s has %zu layer%s, not depth %zu (a JSON net's depth is its number of layers)",
                       path, net->depth, net->depth == 1 ? "" : "s", depth);
    else if (width && width != net->width)
        rc = vijp_fail(err, VIJP_EDIM, "%s has width %zu, not %zu", path, net->width, width);
    if (rc) vijp_net_free(net);
    for (size_t i = 0; !rc && !with_params && i < net->depth; i++) free(net->theta[i]), net->theta[i] = NULL;
    return rc;
}

int vijp_net_spec_is_json(const char *spec)
{
    size_t n = spec ? strlen(spec) : 0;
    return n > 5 && !strcmp(spec + n - 5, ".json");
}

static int build(vijp_net *net, const char *spec, size_t depth, size_t width, int with_params, vijp_error *err)
{
    memset(net, 0, sizeof *net);
    if (vijp_net_spec_is_json(spec)) return build_json(net, spec, depth, width, with_params, err);
    if (!spec || !*spec) return vijp_fail(err, VIJP_EINVAL, "empty network spec");
    if (depth == 0 || depth > VIJP_DEPTH_MAX)
        return vijp_fail(err, VIJP_EINVAL, "depth %zu out of range [1, %d]", depth, VIJP_DEPTH_MAX);
    size_t nitems = 1;
    for (const char *p = spec; *p; p++) nitems += *p == ',';
    char *copy = vijp_strdup(spec), **items = vijp_alloc_array(nitems, sizeof *items);
    net->layers = vijp_alloc_array(depth, sizeof *net->layers);
    net->theta = vijp_alloc_array(depth, sizeof *net->theta);
    int rc = 0;
    size_t k = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) items[k++] = t;
    if (k != nitems) {
        rc = vijp_fail(err, VIJP_EINVAL, "empty layer in spec '%s'", spec);
        goto out;
    }
    net->depth = depth;
    size_t w = width;
    /* Every layer, then the items the depth leaves unused, checked at the
     * widths they would see: a typo past the depth is an error, not ignored. */
    for (size_t i = 0; i < depth || i < nitems; i++) {
        vijp_layer unused, *L = i < depth ? &net->layers[i] : &unused;
        if ((rc = vijp_layer_parse(L, items[i % nitems], w, err))) {
            char inner[sizeof err->msg], where[96] = "";
            if (err) {
                memcpy(inner, err->msg, sizeof inner);
                /* past the depth it is no layer of the net, only an item of
                 * the spec: say which items the depth leaves unused */
                if (i >= depth && nitems == depth + 1) snprintf(where, sizeof where, ", which depth %zu leaves unused", depth);
                else if (i >= depth)
                    snprintf(where, sizeof where, "; depth %zu leaves items %zu to %zu unused", depth, depth + 1, nitems);
                vijp_fail(err, rc, "%s %zu ('%s'%s): %s", i < depth ? "layer" : "spec item", i + 1, items[i % nitems],
                          where, inner);
            }
            goto out;
        }
        w = L->out;
        if (i >= depth) {
            vijp_layer_clear(&unused);
            continue;
        }
        if (i == 0) net->width = L->in;
        size_t P = L->type->param_count(L);
        if (P && with_params) net->theta[i] = vijp_alloc_array(P, sizeof(double));
    }
out:
    free(copy);
    free(items);
    if (rc) vijp_net_free(net);
    return rc;
}

int vijp_net_build(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err)
{
    return build(net, spec, depth, width, 1, err);
}

int vijp_net_shape(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err)
{
    return build(net, spec, depth, width, 0, err);
}

void vijp_net_free(vijp_net *net)
{
    for (size_t i = 0; net->theta && i < net->depth; i++) free(net->theta[i]);
    for (size_t i = 0; net->layers && i < net->depth; i++) vijp_layer_clear(&net->layers[i]);
    free(net->theta);
    free(net->layers);
    free(net->given);
    memset(net, 0, sizeof *net);
}

size_t vijp_net_out_width(const vijp_net *net) { return net->layers[net->depth - 1].out; }

size_t vijp_net_param_count(const vijp_net *net)
{
    size_t P = 0;
    for (size_t i = 0; i < net->depth; i++) P += net->layers[i].type->param_count(&net->layers[i]);
    return P;
}

int vijp_net_init(vijp_net *net, vijp_init init, uint64_t seed, vijp_error *err)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        /* a given layer still draws its values, into scratch, so that every
         * other layer gets what it would get in the same net by spec */
        int given = net->given && net->given[i];
        size_t P = L->type->param_count(L);
        double *dst = given && P ? vijp_alloc_array(P, sizeof *dst) : net->theta[i];
        int bad = L->type->init && L->type->init(L, init, &rng, dst);
        if (given && P) free(dst);
        if (bad) return vijp_fail(err, VIJP_EINVAL, "initialising layer %zu (%s) failed", i + 1, L->type->name);
    }
    return 0;
}

int vijp_init_parse(const char *s, vijp_init *init, vijp_error *err)
{
    init->gain = 1;
    if (!strcmp(s, "gaussian")) init->kind = VIJP_INIT_GAUSSIAN;
    else if (!strcmp(s, "orthogonal")) init->kind = VIJP_INIT_ORTHOGONAL;
    else if (!strcmp(s, "kaiming-uniform")) init->kind = VIJP_INIT_KAIMING_UNIFORM;
    else if (!strncmp(s, "scaled:", 7)) {
        char *end;
        init->kind = VIJP_INIT_SCALED;
        init->gain = strtod(s + 7, &end);
        if (end == s + 7 || *end || !(init->gain > 0) || init->gain > 1e300)
            return vijp_fail(err, VIJP_EINVAL, "bad gain in '%s' (want scaled:G with G > 0)", s);
    } else
        return vijp_fail(err, VIJP_EINVAL, "unknown initialiser '%s' (known: gaussian, orthogonal, kaiming-uniform, scaled:G)", s);
    return 0;
}

int vijp_loss_parse(const char *s, vijp_loss_kind *loss, vijp_error *err)
{
    if (!strcmp(s, "square")) *loss = VIJP_LOSS_SQUARE;
    else if (!strcmp(s, "linear")) *loss = VIJP_LOSS_LINEAR;
    else return vijp_fail(err, VIJP_EINVAL, "unknown loss '%s' (known: square, linear)", s);
    return 0;
}

void vijp_net_params_clear(const vijp_net *net, vijp_mat *theta)
{
    for (size_t i = 0; i < net->depth; i++) vijp_mat_clear(&theta[i]);
}

int vijp_net_params(const vijp_net *net, const vijp_format *f, vijp_mat *theta, vijp_error *err)
{
    for (size_t i = 0; i < net->depth; i++) {
        size_t P = net->layers[i].type->param_count(&net->layers[i]);
        vijp_mat_init(&theta[i], P, 1, f);
        int rc = 0;
        if (P) vijp_mat_set_d(&theta[i], net->theta[i]);
        if (!rc && P) {
            char what[96];
            snprintf(what, sizeof what, "parameters of layer %zu in %s", i + 1, f->name);
            rc = vijp_mat_check_finite(&theta[i], what, err);
        }
        if (rc) {
            for (size_t j = 0; j <= i; j++) vijp_mat_clear(&theta[j]);
            return rc;
        }
    }
    return 0;
}

void vijp_net_sample(const vijp_net *net, size_t B, uint64_t seed, double *X, double *T)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, seed ^ 0x5a17c0ffee5eedull); /* independent of the parameter stream */
    for (size_t i = 0; i < net->width * B; i++) X[i] = vijp_rng_normal(&rng);
    for (size_t i = 0; i < vijp_net_out_width(net) * B; i++) T[i] = vijp_rng_normal(&rng);
}

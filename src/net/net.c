/* A built net: freeing it, its shape, seeded initialisation, parameters in a
 * format (build.c makes one from a spec or a JSON file). */
#include "vijp/net.h"
#include "vijp/error.h"
#include "shape.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vijp_net_free(vijp_net *net)
{
    for (size_t i = 0; net->theta && i < net->depth; i++) free(net->theta[i]);
    for (size_t i = 0; net->layers && i < net->depth; i++) vijp_layer_clear(&net->layers[i]);
    free(net->theta);
    free(net->layers);
    free(net->given);
    memset(net, 0, sizeof *net);
}

void net_copy_shape(vijp_net *dst, const vijp_net *src)
{
    *dst = *src;
    dst->layers = vijp_alloc_array(src->depth, sizeof *dst->layers);
    for (size_t i = 0; i < src->depth; i++) vijp_layer_copy(&dst->layers[i], &src->layers[i]);
    dst->theta = NULL, dst->given = NULL;
}

void vijp_net_copy(vijp_net *dst, const vijp_net *src)
{
    net_copy_shape(dst, src);
    dst->theta = vijp_alloc_array(src->depth, sizeof *dst->theta);
    dst->given = src->given ? memcpy(vijp_alloc(src->depth), src->given, src->depth) : NULL;
    for (size_t i = 0; i < src->depth; i++) {
        size_t P = src->layers[i].type->param_count(&src->layers[i]);
        if (!P) continue;
        dst->theta[i] = vijp_alloc_array(P, sizeof(double));
        if (src->theta && src->theta[i]) memcpy(dst->theta[i], src->theta[i], P * sizeof(double));
    }
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
    /* what vijp_init_parse would refuse, and a net without parameter arrays
     * (vijp_net_template's, vijp_net_shape's), are refused, not run */
    if ((unsigned)init.kind > VIJP_INIT_KAIMING_UNIFORM)
        return vijp_fail(err, VIJP_EINVAL, "vijp_net_init: unknown initialiser kind %d", (int)init.kind);
    if (init.kind == VIJP_INIT_SCALED && !(init.gain > 0 && init.gain <= 1e300))
        return vijp_fail(err, VIJP_EINVAL, "vijp_net_init: gain %g (want 0 < G <= 1e300)", init.gain);
    for (size_t i = 0; i < net->depth; i++)
        if (!net->theta || (!net->theta[i] && net->layers[i].type->param_count(&net->layers[i])))
            return vijp_fail(err, VIJP_EINVAL, "vijp_net_init: layer %zu has no parameter array (a net from "
                             "vijp_net_template or vijp_net_shape: copy it with vijp_net_copy first)", i + 1);
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
            return vijp_fail(err, VIJP_EINVAL, "bad gain in '%s' (want scaled:G with 0 < G <= 1e300)", s);
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

/* theta := src rounded to theta's format.  MX formats and NVFP4 (format.h) block
 * values along the reduction dimension of the product that consumes them:
 * dense's W (out × in, W(o, c) at o + c·out) is summed over c in W·x, so
 * each row o is a line of `in` values at stride out; its bias (the out
 * values after W), added rather than summed, in blocks down the vector.
 * Every other layer's θ is one line in its own order (conv's kernels
 * included): a choice, documented in docs/formats.md.  NVFP4's tensor
 * scale is the whole θ's, W and bias (mat.h). */
static void set_params(const vijp_layer *L, vijp_mat *theta, const double *src)
{
    size_t m = L->out, n = L->in;
    int blocked = theta->fmt->mx_block || theta->fmt->scale_block;
    if (!blocked || strcmp(L->type->name, "dense") || theta->rows != m * n + m) {
        vijp_mat_set_d(theta, src);
        return;
    }
    for (size_t o = 0; o < m; o++) vijp_mat_set_d_line(theta, src, o, n, m);
    vijp_mat_set_d_line(theta, src, m * n, m, 1);
}

int vijp_net_params(const vijp_net *net, const vijp_format *f, vijp_mat *theta, vijp_error *err)
{
    for (size_t i = 0; i < net->depth; i++) {
        size_t P = net->layers[i].type->param_count(&net->layers[i]);
        vijp_mat_init_unset(&theta[i], P, 1, f); /* set_params writes every entry: no zeroing pass first */
        int rc = 0;
        if (P) set_params(&net->layers[i], &theta[i], net->theta[i]);
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
    vijp_rng_normals(&rng, X, net->width * B);
    vijp_rng_normals(&rng, T, vijp_net_out_width(net) * B);
}

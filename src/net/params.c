/* Parameters from files: shapes checked, PyTorch's layout mapped to θ. */
#include "params.h"
#include "vijp/net.h"
#include "vijp/catalogue.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int net_params_torch_layout(const vijp_layer *L)
{
    const char *n = L->type->name;
    return !strcmp(n, "dense") || !strcmp(n, "conv1d") || !strcmp(n, "conv2d");
}

static int shape_fail(const vijp_array *a, size_t ndim, const size_t *want, const char *what, const char *where,
                      const char *field, vijp_error *err)
{
    char got[128], exp[128];
    vijp_array_shape_str(a->ndim, a->shape, got, sizeof got);
    vijp_array_shape_str(ndim, want, exp, sizeof exp);
    return vijp_fail(err, VIJP_EINVAL, "%s%s: shape %s, want %s (%s)", where, field, got, exp, what);
}

static int shape_is(const vijp_array *a, size_t ndim, const size_t *want)
{
    if (a->ndim != ndim) return 0;
    for (size_t k = 0; k < ndim; k++)
        if (a->shape[k] != want[k]) return 0;
    return 1;
}

/* A parameter file's NaN or infinity is bad input, named by its file and
 * tensor before anything runs (an engine would stop on it later, naming
 * only the layer). */
static int finite_fail(const vijp_array *a, const char *where, const char *field, vijp_error *err)
{
    for (size_t k = 0; k < a->len; k++)
        if (!isfinite(a->data[k]))
            return vijp_fail(err, VIJP_EINVAL, "%s%s: entry %zu is %s (parameters must be finite)", where, field, k,
                             isnan(a->data[k]) ? "NaN" : a->data[k] > 0 ? "+Inf" : "-Inf");
    return 0;
}

int net_params_theta(const vijp_layer *L, const vijp_array *t, double **theta, const char *where, vijp_error *err)
{
    size_t P = L->type->param_count(L);
    if (!shape_is(t, 1, &P)) return shape_fail(t, 1, &P, "θ in the layer type's order", where, "", err);
    if (finite_fail(t, where, "", err)) return err->code;
    if (!*theta) *theta = vijp_alloc_array(P, sizeof **theta);
    if (P) memcpy(*theta, t->data, P * sizeof **theta);
    return 0;
}

int net_params_torch(const vijp_layer *L, const vijp_array *w, const vijp_array *b, double **theta, const char *where,
                     vijp_error *err)
{
    const char *name = L->type->name;
    if (!net_params_torch_layout(L))
        return vijp_fail(err, VIJP_EINVAL, "%s: layer type %s takes no {weight, bias} (only dense, conv1d, conv2d do): give "
                         "{\"theta\": ...} in its own order", where, name);
    size_t ws[4], nd, out;
    char what[96];
    if (!strcmp(name, "dense")) {
        out = L->out, ws[0] = L->out, ws[1] = L->in, nd = 2;
        snprintf(what, sizeof what, "[out, in] as nn.Linear's, for dense %zu → %zu", L->in, L->out);
    } else {
        const vijp_conv_args *a = vijp_conv_get(L);
        out = a->out_channels, ws[0] = a->out_channels, ws[1] = a->channels, ws[2] = ws[3] = a->kernel;
        nd = strcmp(name, "conv2d") ? 3 : 4;
        snprintf(what, sizeof what, "[out, in, %s] as nn.%s's", nd == 3 ? "k" : "kh, kw", nd == 3 ? "Conv1d" : "Conv2d");
    }
    if (!shape_is(w, nd, ws)) return shape_fail(w, nd, ws, what, where, ".weight", err);
    if (!shape_is(b, 1, &out)) return shape_fail(b, 1, &out, "[out]", where, ".bias", err);
    if (finite_fail(w, where, ".weight", err) || finite_fail(b, where, ".bias", err)) return err->code;
    size_t nw = w->len;
    if (!*theta) *theta = vijp_alloc_array(nw + out, sizeof **theta);
    double *th = *theta;
    if (!strcmp(name, "dense")) /* weight[o][c] (C order) is W(o, c), at o + c·m column-major */
        for (size_t o = 0; o < L->out; o++)
            for (size_t c = 0; c < L->in; c++) th[o + c * L->out] = w->data[o * L->in + c];
    else /* conv θ is W[o][c][ky][kx] in C order, PyTorch's own */
        memcpy(th, w->data, nw * sizeof *th);
    memcpy(th + nw, b->data, out * sizeof *th);
    return 0;
}

static const vijp_tensor_info *find(const vijp_safetensors *st, const char *name)
{
    for (size_t k = 0; k < st->n; k++)
        if (!strcmp(st->tensors[k].name, name)) return &st->tensors[k];
    return NULL;
}

/* "<i>.weight" etc.: the layer index i (0-based), or SIZE_MAX. */
static size_t tensor_layer(const char *name, const char **field)
{
    char *end;
    if (*name < '0' || *name > '9') return SIZE_MAX;
    unsigned long long i = strtoull(name, &end, 10);
    if (*end != '.' || (strcmp(end + 1, "weight") && strcmp(end + 1, "bias") && strcmp(end + 1, "theta"))) return SIZE_MAX;
    *field = end + 1;
    return (size_t)i;
}

int vijp_net_load_weights(vijp_net *net, const char *path, vijp_error *err)
{
    vijp_safetensors st;
    for (size_t i = 0; i < net->depth; i++) /* a built net, not vijp_net_shape's */
        if (!net->theta[i] && net->layers[i].type->param_count(&net->layers[i]))
            return vijp_fail(err, VIJP_EINVAL, "vijp_net_load_weights: layer %zu has no parameter array (a net from vijp_net_shape)", i + 1);
    int rc = vijp_safetensors_read(path, &st, err);
    if (rc) return rc;
    /* every tensor must name a layer with parameters: a typo is not ignored */
    for (size_t k = 0; !rc && k < st.n; k++) {
        const char *field, *n = st.tensors[k].name;
        size_t i = tensor_layer(n, &field);
        if (i == SIZE_MAX)
            rc = vijp_fail(err, VIJP_EINVAL, "%s: tensor '%s' is not <i>.weight, <i>.bias or <i>.theta", path, n);
        else if (i >= net->depth || !net->layers[i].type->param_count(&net->layers[i]))
            rc = vijp_fail(err, VIJP_EINVAL, "%s: tensor '%s': layer %zu %s", path, n, i,
                           i >= net->depth ? "is past the net's depth" : "has no parameters");
    }
    if (!net->given && !rc) net->given = vijp_alloc_array(net->depth, 1);
    for (size_t i = 0; !rc && i < net->depth; i++) {
        char tn[3][48], where[4200];
        snprintf(tn[0], sizeof tn[0], "%zu.theta", i), snprintf(tn[1], sizeof tn[1], "%zu.weight", i);
        snprintf(tn[2], sizeof tn[2], "%zu.bias", i);
        const vijp_tensor_info *t = find(&st, tn[0]), *w = find(&st, tn[1]), *b = find(&st, tn[2]);
        if (!t && !w && !b) continue;
        vijp_array a[2] = {{0}, {0}};
        if (t && (w || b)) rc = vijp_fail(err, VIJP_EINVAL, "%s: layer %zu has both %s and %s", path, i, tn[0], w ? tn[1] : tn[2]);
        else if (!t && (!w || !b)) rc = vijp_fail(err, VIJP_EINVAL, "%s: layer %zu has %s but no %s", path, i, w ? tn[1] : tn[2], w ? tn[2] : tn[1]);
        else if (t) {
            snprintf(where, sizeof where, "%s: tensor %s", path, tn[0]);
            if (!(rc = vijp_safetensors_tensor(&st, tn[0], &a[0], err))) rc = net_params_theta(&net->layers[i], &a[0], &net->theta[i], where, err);
        } else {
            snprintf(where, sizeof where, "%s: tensor %zu", path, i);
            if (!(rc = vijp_safetensors_tensor(&st, tn[1], &a[0], err)) && !(rc = vijp_safetensors_tensor(&st, tn[2], &a[1], err)))
                rc = net_params_torch(&net->layers[i], &a[0], &a[1], &net->theta[i], where, err);
        }
        vijp_array_clear(&a[0]), vijp_array_clear(&a[1]);
        if (!rc) net->given[i] = 1;
    }
    vijp_safetensors_clear(&st);
    return rc;
}

/* Nets in JSON, format "vijp-net/1" (docs/net.schema.json,
 * docs/nets.md): the layers as spec items split into type and arguments, with
 * parameters from .npy or safetensors files.  Strict on purpose: an unknown
 * field is an error, since a typo ("parms") silently ignored would run the
 * net on seeded weights the user believes are theirs. */
#include "vijp/net.h"
#include "vijp/array_io.h"
#include "vijp/catalogue.h"
#include "params.h"
#include "json.h"
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_JSON_SCHEMA "vijp-net/1"
#define NET_JSON_DEPTH_MAX 100000 /* vijp_net_build's own limit */
#define NET_JSON_WIDTH_MAX (1u << 24)
#define FIELD_MAX 200 /* a field's path in messages: layers[2].layers[0].skip[1].params */

typedef struct {
    const char *name, *base; /* the file for messages; parameter files' folder (NULL: none read) */
    vijp_error *err;
} ctx;

/* Every message: "<file>: <field>: <what>", the field as a path such as
 * layers[2].params.weight, so that a bad file says where it is bad. */
#define FAIL(c, field, ...) fail_at((c), (field), __VA_ARGS__)
static int __attribute__((format(printf, 3, 4))) fail_at(const ctx *c, const char *field, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vijp_fail(c->err, VIJP_EINVAL, "%s: %s: %s", c->name, field, what);
}

static int only_keys(const ctx *c, json_t *o, const char *const *keys, const char *field)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int known = 0;
        for (size_t i = 0; keys[i]; i++) known |= !strcmp(k, keys[i]);
        if (!known) {
            char list[128] = "";
            for (size_t i = 0; keys[i]; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", keys[i]);
            return FAIL(c, field, "unknown field '%s' (known: %s)", k, list);
        }
    }
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* A REF: "file.npy", {"file": "file.npy"} or {"file": "m.safetensors",
 * "tensor": "0.weight"}, relative to the JSON file's folder. */
static int read_ref(const ctx *c, json_t *ref, const char *field, vijp_array *out)
{
    static const char *const keys[] = {"file", "tensor", NULL};
    const char *file = NULL, *tensor = NULL;
    char sub[160];
    if (json_is_string(ref)) file = json_string_value(ref);
    else if (json_is_object(ref)) {
        if (only_keys(c, ref, keys, field)) return VIJP_EINVAL;
        json_t *f = json_object_get(ref, "file"), *t = json_object_get(ref, "tensor");
        snprintf(sub, sizeof sub, "%s.file", field);
        if (!f) return FAIL(c, sub, "missing");
        if (!json_is_string(f)) return FAIL(c, sub, "not a string");
        snprintf(sub, sizeof sub, "%s.tensor", field);
        if (t && !json_is_string(t)) return FAIL(c, sub, "not a string");
        file = json_string_value(f), tensor = t ? json_string_value(t) : NULL;
    } else
        return FAIL(c, field, "want a file name or {\"file\": ..., \"tensor\": ...}");
    int st = ends_with(file, ".safetensors");
    snprintf(sub, sizeof sub, "%s.tensor", field);
    if (st && !tensor) return FAIL(c, sub, "missing: %s holds named tensors", file);
    if (!st && tensor) return FAIL(c, sub, "only a .safetensors file has named tensors, not %s", file);
    if (!*file) return FAIL(c, field, "empty file name");
    if (!c->base) return FAIL(c, field, "parameter files are not read here (%s)", file);
    size_t n = strlen(c->base) + strlen(file) + 2;
    char *path = vijp_alloc(n);
    if (file[0] == '/') snprintf(path, n, "%s", file);
    else snprintf(path, n, "%s/%s", c->base, file);
    vijp_error e = {0};
    vijp_safetensors s;
    int rc = st ? vijp_safetensors_read(path, &s, &e) : vijp_npy_read(path, out, &e);
    if (st && !rc) {
        rc = vijp_safetensors_tensor(&s, tensor, out, &e);
        vijp_safetensors_clear(&s);
    }
    free(path);
    if (rc) vijp_fail(c->err, rc, "%s: %s: %s", c->name, field, e.msg);
    return rc;
}

/* θ of layer L from its "params" object p (field: its path), into *out. */
static int layer_params(const ctx *c, const vijp_layer *L, json_t *p, const char *field, double **out)
{
    static const char *const keys[] = {"theta", "weight", "bias", NULL};
    if (!json_is_object(p)) return FAIL(c, field, "not an object: want {\"theta\": REF} or {\"weight\": REF, \"bias\": REF}");
    if (!L->type->param_count(L)) return FAIL(c, field, "layer type %s has no parameters", L->type->name);
    if (only_keys(c, p, keys, field)) return VIJP_EINVAL;
    json_t *t = json_object_get(p, "theta"), *w = json_object_get(p, "weight"), *b = json_object_get(p, "bias");
    char f1[FIELD_MAX + 48], f2[FIELD_MAX + 48], where[FIELD_MAX + 300];
    vijp_array a = {0}, bb = {0};
    int rc = 0;
    if (t && (w || b)) return FAIL(c, field, "give theta, or weight and bias, not both");
    /* allocated by the mapping once the arrays have the layer's shapes, not
     * before: a shape-only parse of a huge net allocates nothing */
    double *theta = NULL;
    if (t) {
        snprintf(f1, sizeof f1, "%s.theta", field);
        snprintf(where, sizeof where, "%s: %s", c->name, f1);
        if (!(rc = read_ref(c, t, f1, &a))) rc = net_params_theta(L, &a, &theta, where, c->err);
    } else {
        snprintf(f1, sizeof f1, "%s.weight", field), snprintf(f2, sizeof f2, "%s.bias", field);
        if (!w && !b) rc = FAIL(c, field, "empty: want {\"theta\": REF} or {\"weight\": REF, \"bias\": REF}");
        else if (!w || !b) rc = FAIL(c, w ? f2 : f1, "missing");
        else if (!net_params_torch_layout(L))
            rc = FAIL(c, field, "layer type %s takes no {weight, bias} (only dense, conv1d, conv2d): give theta",
                      L->type->name);
        snprintf(where, sizeof where, "%s: %s", c->name, field);
        if (!rc && !(rc = read_ref(c, w, f1, &a)) && !(rc = read_ref(c, b, f2, &bb)))
            rc = net_params_torch(L, &a, &bb, &theta, where, c->err);
    }
    vijp_array_clear(&a), vijp_array_clear(&bb);
    if (rc) free(theta);
    else *out = theta;
    return rc;
}

static int layer_at(const ctx *c, json_t *l, const char *field, size_t in_width, vijp_layer *L, double **theta);

/* The layers of a block's list (field: its path) from width `in`: their
 * parameters, where given, into th[k] (NULL where not). */
static int layer_list(const ctx *c, json_t *list, const char *field, size_t in, vijp_layer *out, double **th, size_t max,
                      size_t *n)
{
    *n = 0;
    if (!json_is_array(list)) return FAIL(c, field, "not an array of layers");
    if (json_array_size(list) == 0 || json_array_size(list) > max)
        return FAIL(c, field, "%zu layers, want 1 to %zu", json_array_size(list), max);
    for (size_t k = 0; k < json_array_size(list); k++) {
        char sub[FIELD_MAX];
        snprintf(sub, sizeof sub, "%s[%zu]", field, k);
        th[k] = NULL;
        int rc = layer_at(c, json_array_get(list, k), sub, in, &out[k], &th[k]);
        if (rc) return rc;
        in = out[(*n)++].out;
    }
    return 0;
}

/* A block's θ: its layers' in order, when every layer with parameters gives
 * them (*theta stays NULL when none does: the seeded init fills it). */
static int block_theta(const ctx *c, const char *field, vijp_layer *sub, double **th, size_t n, size_t P, double **theta)
{
    size_t given = 0, with = 0;
    for (size_t k = 0; k < n; k++) with += sub[k].type->param_count(&sub[k]) > 0, given += th[k] != NULL;
    if (!given) return 0;
    if (given != with)
        return FAIL(c, field, "params given for %zu of the block's %zu layers with parameters: give them for every "
                    "one or for none", given, with);
    double *t = vijp_alloc_array(P ? P : 1, sizeof *t);
    for (size_t k = 0, off = 0; k < n; k++) {
        size_t Pk = sub[k].type->param_count(&sub[k]);
        if (Pk) memcpy(t + off, th[k], Pk * sizeof *t);
        off += Pk;
    }
    *theta = t;
    return 0;
}

/* {"type": "residual", "layers": [...], "skip": [...]}. */
static int residual_at(const ctx *c, json_t *l, const char *field, size_t in_width, vijp_layer *L, double **theta)
{
    static const char *const keys[] = {"type", "layers", "skip", NULL};
    if (only_keys(c, l, keys, field)) return VIJP_EINVAL;
    vijp_layer sub[VIJP_RESIDUAL_SUB_MAX] = {{0}};
    double *th[VIJP_RESIDUAL_SUB_MAX] = {0};
    size_t nf = 0, np = 0;
    char f1[FIELD_MAX], f2[FIELD_MAX];
    snprintf(f1, sizeof f1, "%s.layers", field), snprintf(f2, sizeof f2, "%s.skip", field);
    json_t *lf = json_object_get(l, "layers"), *ls = json_object_get(l, "skip");
    int rc = lf ? layer_list(c, lf, f1, in_width, sub, th, VIJP_RESIDUAL_SUB_MAX, &nf) : FAIL(c, f1, "missing");
    if (!rc && ls) rc = layer_list(c, ls, f2, in_width, sub + nf, th + nf, VIJP_RESIDUAL_SUB_MAX - nf, &np);
    if (!rc) {
        vijp_error e = {0};
        if ((rc = vijp_layer_residual_new(L, sub, nf, sub + nf, np, &e)))
            vijp_fail(c->err, rc == VIJP_EDIM ? VIJP_EDIM : VIJP_EINVAL, "%s: %s: %s", c->name, field, e.msg);
        else if ((rc = block_theta(c, field, L->state ? (vijp_layer *)vijp_residual_sub(L, 0, 0) : NULL, th, nf + np,
                                   L->type->param_count(L), theta)))
            vijp_layer_clear(L);
    } else
        for (size_t k = 0; k < nf + np; k++) vijp_layer_clear(&sub[k]);
    for (size_t k = 0; k < VIJP_RESIDUAL_SUB_MAX; k++) free(th[k]);
    return rc;
}

/* {"type": "additive" or "affine", "F": [...], "G": [...]} ("S", "T" for
 * affine): the coupling block of those residual functions, each mapping h
 * back to h (widths free inside), different or the same layers. */
static int coupling_at(const ctx *c, json_t *l, const char *field, size_t in_width, vijp_layer *L, double **theta)
{
    int add = !strcmp(json_string_value(json_object_get(l, "type")), "additive");
    const char *k1 = add ? "F" : "S", *k2 = add ? "G" : "T";
    const char *const keys[] = {"type", k1, k2, NULL};
    if (only_keys(c, l, keys, field)) return VIJP_EINVAL;
    if (in_width < 2 || in_width % 2) return FAIL(c, field, "a coupling block needs an even width >= 2, not %zu", in_width);
    vijp_layer sub[2][VIJP_SUB_MAX] = {{{0}}};
    double *th[2 * VIJP_SUB_MAX] = {0};
    size_t n[2] = {0, 0};
    int rc = 0;
    for (int j = 0; j < 2 && !rc; j++) {
        char fj[FIELD_MAX];
        snprintf(fj, sizeof fj, "%s.%s", field, j ? k2 : k1);
        json_t *list = json_object_get(l, j ? k2 : k1);
        rc = list ? layer_list(c, list, fj, in_width / 2, sub[j], th + j * VIJP_SUB_MAX, VIJP_SUB_MAX, &n[j])
                  : FAIL(c, fj, "missing");
    }
    vijp_layer all[2 * VIJP_SUB_MAX]; /* copies for block_theta, in the block's θ order: F's layers, then G's */
    double *tall[2 * VIJP_SUB_MAX];
    size_t n_all = 0;
    for (int j = 0; j < 2; j++)
        for (size_t k = 0; k < n[j]; k++, n_all++)
            vijp_layer_copy(&all[n_all], &sub[j][k]), tall[n_all] = th[j * VIJP_SUB_MAX + k];
    if (!rc) {
        vijp_error e = {0};
        if ((rc = vijp_layer_coupling_new(L, add ? "additive" : "affine", sub[0], n[0], sub[1], n[1], &e)))
            vijp_fail(c->err, rc == VIJP_EDIM ? VIJP_EDIM : VIJP_EINVAL, "%s: %s: %s", c->name, field, e.msg);
        n[0] = n[1] = 0; /* taken over (and cleared on failure) by the block */
    }
    if (!rc && (rc = block_theta(c, field, all, tall, n_all, L->type->param_count(L), theta))) vijp_layer_clear(L);
    for (size_t k = 0; k < n_all; k++) vijp_layer_clear(&all[k]);
    for (int j = 0; j < 2; j++)
        for (size_t k = 0; k < n[j]; k++) vijp_layer_clear(&sub[j][k]);
    for (size_t k = 0; k < 2 * VIJP_SUB_MAX; k++) free(th[k]);
    return rc;
}

/* One layer object at `field` (layers[2], layers[2].layers[0], …) from width
 * in_width into L, its given parameters (or NULL) into *theta. */
static int layer_at(const ctx *c, json_t *l, const char *field, size_t in_width, vijp_layer *L, double **theta)
{
    static const char *const keys[] = {"type", "args", "params", NULL};
    char sub[FIELD_MAX + 16];
    memset(L, 0, sizeof *L);
    *theta = NULL;
    if (!json_is_object(l)) return FAIL(c, field, "not an object");
    json_t *t = json_object_get(l, "type"), *a = json_object_get(l, "args"), *p = json_object_get(l, "params");
    snprintf(sub, sizeof sub, "%s.type", field);
    if (!t) return FAIL(c, sub, "missing");
    if (!json_is_string(t)) return FAIL(c, sub, "not a string");
    const char *type = json_string_value(t);
    if (!vijp_layer_type_find(type)) return FAIL(c, sub, "unknown layer type '%.60s'", type);
    if (!strcmp(type, "residual") && !a) return residual_at(c, l, field, in_width, L, theta);
    if ((!strcmp(type, "additive") || !strcmp(type, "affine")) && !a && !p && json_object_size(l) > 1)
        return coupling_at(c, l, field, in_width, L, theta);
    if (only_keys(c, l, keys, field)) return VIJP_EINVAL;
    snprintf(sub, sizeof sub, "%s.args", field);
    if (a && !json_is_string(a)) return FAIL(c, sub, "not a string");
    const char *args = a ? json_string_value(a) : NULL;
    if (args && strchr(args, ',')) return FAIL(c, sub, "a ',' separates spec items: one layer per entry");
    size_t n = strlen(type) + (args ? strlen(args) + 1 : 0) + 1;
    char *item = vijp_alloc(n);
    snprintf(item, n, "%s%s%s", type, args ? ":" : "", args ? args : "");
    vijp_error e = {0};
    int rc = vijp_layer_parse(L, item, in_width, &e);
    free(item);
    if (rc) return vijp_fail(c->err, rc == VIJP_EDIM ? VIJP_EDIM : VIJP_EINVAL, "%s: %s: %s", c->name, a ? sub : field, e.msg);
    snprintf(sub, sizeof sub, "%s.params", field);
    if (p && (rc = layer_params(c, L, p, sub, theta))) vijp_layer_clear(L);
    return rc;
}

static int one_layer(const ctx *c, vijp_net *net, size_t i, json_t *l, size_t in_width)
{
    char field[FIELD_MAX];
    snprintf(field, sizeof field, "layers[%zu]", i);
    double *theta = NULL;
    int rc = layer_at(c, l, field, in_width, &net->layers[i], &theta);
    if (rc) return rc;
    net->depth = i + 1; /* the layers so far, for vijp_net_free */
    if (theta) net->theta[i] = theta, net->given[i] = 1;
    return 0;
}

static int parse_root(const ctx *c, vijp_net *net, json_t *root)
{
    static const char *const keys[] = {"schema", "width", "loss", "layers", NULL};
    if (!json_is_object(root)) return vijp_fail(c->err, VIJP_EINVAL, "%s: not a JSON object", c->name);
    if (only_keys(c, root, keys, "(top level)")) return VIJP_EINVAL;
    json_t *s = json_object_get(root, "schema"), *w = json_object_get(root, "width"), *l = json_object_get(root, "loss"),
           *layers = json_object_get(root, "layers");
    if (!s) return FAIL(c, "schema", "missing (want \"" NET_JSON_SCHEMA "\")");
    if (!json_is_string(s) || strcmp(json_string_value(s), NET_JSON_SCHEMA))
        return FAIL(c, "schema", "want \"" NET_JSON_SCHEMA "\"");
    if (!w) return FAIL(c, "width", "missing (the input width)");
    if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > NET_JSON_WIDTH_MAX)
        return FAIL(c, "width", "want an integer in [1, %u]", NET_JSON_WIDTH_MAX);
    if (l) {
        vijp_error e = {0};
        if (!json_is_string(l) || vijp_loss_parse(json_string_value(l), &net->loss, &e))
            return FAIL(c, "loss", "want \"square\" or \"linear\"");
        net->loss_given = 1;
    }
    if (!layers) return FAIL(c, "layers", "missing");
    if (!json_is_array(layers)) return FAIL(c, "layers", "not an array");
    size_t D = json_array_size(layers);
    if (D == 0 || D > NET_JSON_DEPTH_MAX) return FAIL(c, "layers", "%zu layers, want 1 to %d", D, NET_JSON_DEPTH_MAX);
    net->width = (size_t)json_integer_value(w);
    net->layers = vijp_alloc_array(D, sizeof *net->layers);
    net->theta = vijp_alloc_array(D, sizeof *net->theta);
    net->given = vijp_alloc_array(D, 1);
    size_t width = net->width;
    for (size_t i = 0; i < D; i++) {
        int rc = one_layer(c, net, i, json_array_get(layers, i), width);
        if (rc) return rc;
        width = net->layers[i].out;
    }
    return 0;
}

int net_json_parse(vijp_net *net, const char *text, size_t len, const char *name, const char *base, int with_params,
                   vijp_error *err)
{
    memset(net, 0, sizeof *net);
    ctx c = {name ? name : "<memory>", base, err};
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return vijp_fail(err, VIJP_EINVAL, "%s: line %d: %s", c.name, je.line, je.text);
    int rc = parse_root(&c, net, root);
    json_decref(root);
    for (size_t i = 0; !rc && with_params && i < net->depth; i++) { /* the layers left to vijp_net_init */
        size_t P = net->layers[i].type->param_count(&net->layers[i]);
        if (P && !net->theta[i]) net->theta[i] = vijp_alloc_array(P, sizeof(double));
    }
    if (rc) vijp_net_free(net);
    return rc;
}

int vijp_net_parse_json(vijp_net *net, const char *text, size_t len, const char *name, const char *base, vijp_error *err)
{
    return net_json_parse(net, text, len, name, base, 1, err);
}

int net_json_load(vijp_net *net, const char *path, int with_params, vijp_error *err)
{
    memset(net, 0, sizeof *net);
    unsigned char *buf;
    size_t n;
    int rc = vijp_input_read(path, &buf, &n, err); /* a device or a folder: refused before reading */
    if (rc) return rc;
    char *base = vijp_strdup(path), *slash = strrchr(base, '/');
    if (slash) *slash = 0;
    rc = net_json_parse(net, (const char *)buf, n, path, slash ? (*base ? base : "/") : ".", with_params, err);
    free(base), vijp_free(buf);
    return rc;
}

int vijp_net_load_json(vijp_net *net, const char *path, vijp_error *err) { return net_json_load(net, path, 1, err); }

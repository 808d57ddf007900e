/* A net from its description: a spec ("dense:64,tanh", cycled to the depth)
 * or the path of a JSON net (json.c).  The one entry point of the module's
 * parsers; it calls json.c and net.c, neither of which calls back. */
#include "vijp/net.h"
#include "vijp/error.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIJP_DEPTH_MAX 100000 /* far beyond any study; guards absurd allocations */

/* Which parameter arrays a built net holds. */
enum { PARAMS_NONE, PARAMS_ALL, PARAMS_GIVEN };

/* A JSON net where a spec may stand: depth and width, when given, must be
 * the file's; vijp_net_shape's contract keeps no parameter, a template the
 * file's own. */
static int build_json(vijp_net *net, const char *path, size_t depth, size_t width, int params, vijp_error *err)
{
    int rc = net_json_load(net, path, params == PARAMS_ALL, err);
    if (rc) return rc;
    if (depth && depth != net->depth)
        rc = vijp_fail(err, VIJP_EINVAL, "%s has %zu layer%s, not depth %zu (a JSON net's depth is its number of layers)",
                       path, net->depth, net->depth == 1 ? "" : "s", depth);
    else if (width && width != net->width)
        rc = vijp_fail(err, VIJP_EDIM, "%s has width %zu, not %zu", path, net->width, width);
    if (rc) vijp_net_free(net);
    for (size_t i = 0; !rc && params == PARAMS_NONE && i < net->depth; i++) free(net->theta[i]), net->theta[i] = NULL;
    return rc;
}

int vijp_net_spec_is_json(const char *spec)
{
    size_t n = spec ? strlen(spec) : 0;
    return n > 5 && !strcmp(spec + n - 5, ".json");
}

static int build(vijp_net *net, const char *spec, size_t depth, size_t width, int params, vijp_error *err)
{
    memset(net, 0, sizeof *net);
    if (vijp_net_spec_is_json(spec)) return build_json(net, spec, depth, width, params, err);
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
        if (P && params == PARAMS_ALL) net->theta[i] = vijp_alloc_array(P, sizeof(double));
    }
out:
    free(copy);
    free(items);
    if (rc) vijp_net_free(net);
    return rc;
}

int vijp_net_build(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err)
{
    return build(net, spec, depth, width, PARAMS_ALL, err);
}

int vijp_net_shape(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err)
{
    return build(net, spec, depth, width, PARAMS_NONE, err);
}

int vijp_net_template(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err)
{
    /* no array allocated but those the description fills: a template of a
     * net too large to run costs nothing before the run is sized */
    return build(net, spec, depth, width, PARAMS_GIVEN, err);
}

/* vijp certify --layer SPEC | --net NET with --box LO,HI | --box-file L.npy,H.npy:
 * the layer (vijp_certify_box) or the net's layers (vijp_certify_net_box) over
 * a box of inputs, reported as a table or JSON. */
#include "cli.h"
#include "certify_cli.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "LO,HI": two finite numbers, LO <= HI. */
static int parse_box(const char *text, double *lo, double *hi, vijp_error *err)
{
    char *end;
    *lo = strtod(text, &end);
    if (end == text || *end != ',') return vijp_fail(err, VIJP_EINVAL, "--box wants LO,HI (two numbers), got '%s'", text);
    const char *second = end + 1;
    *hi = strtod(second, &end);
    if (end == second || *end || !isfinite(*lo) || !isfinite(*hi) || *lo > *hi)
        return vijp_fail(err, VIJP_EINVAL, "--box wants LO,HI with finite LO <= HI, got '%s'", text);
    return 0;
}

/* One of --box-file's arrays: n finite numbers (1-D, or one row). */
static int read_bound(const char *path, size_t n, double *v, vijp_error *err)
{
    vijp_array a = {0};
    if (vijp_npy_read(path, &a, err)) return err->code;
    int rc = 0;
    if (a.len != n || (a.ndim != 1 && !(a.ndim == 2 && a.shape[0] == 1))) {
        char got[64];
        vijp_array_shape_str(a.ndim, a.shape, got, sizeof got);
        rc = vijp_fail(err, VIJP_EDIM, "--box-file %s: shape %s, want (%zu,): a bound for each input coordinate", path, got, n);
    }
    for (size_t i = 0; !rc && i < n; i++)
        if (!isfinite(a.data[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "--box-file %s: entry %zu is not a finite number", path, i);
    if (!rc) memcpy(v, a.data, n * sizeof *v);
    vijp_array_clear(&a);
    return rc;
}

/* The box's bounds, a pair per input coordinate. */
static int read_box(const certify_args *a, size_t n, double *lo, double *hi, vijp_error *err)
{
    if (a->box) {
        double l = 0, h = 0;
        if (parse_box(a->box, &l, &h, err)) return err->code;
        for (size_t i = 0; i < n; i++) lo[i] = l, hi[i] = h;
        return 0;
    }
    const char *comma = strchr(a->box_file, ',');
    if (!comma || strchr(comma + 1, ','))
        return vijp_fail(err, VIJP_EINVAL, "--box-file wants L.npy,H.npy (two files), got '%s'", a->box_file);
    char first[4096];
    if ((size_t)(comma - a->box_file) >= sizeof first) return vijp_fail(err, VIJP_EINVAL, "--box-file: path too long");
    memcpy(first, a->box_file, (size_t)(comma - a->box_file)), first[comma - a->box_file] = 0;
    if (read_bound(first, n, lo, err) || read_bound(comma + 1, n, hi, err)) return err->code;
    for (size_t i = 0; i < n; i++)
        if (lo[i] > hi[i])
            return vijp_fail(err, VIJP_EDOMAIN, "--box-file: coordinate %zu has L = %.17g > H = %.17g", i, lo[i], hi[i]);
    return 0;
}

static void print_box_json(const certify_args *a, const vijp_layer *L, const char *params, const vijp_box_certificate *c)
{
    json_t *open = json_array(), *counter = json_null();
    size_t listed = strcmp(c->method, "interval-bisection") ? 0 : c->n_open; /* boxes of several coordinates are not listed */
    for (size_t k = 0; k < listed && k < sizeof c->open / sizeof *c->open; k++)
        json_array_append_new(open, json_pack("{s:I, s:o, s:o}", "coordinate", (json_int_t)c->open_at[k] + 1, "lo",
                                              certify_json_num(c->open[k].lo), "hi", certify_json_num(c->open[k].hi)));
    if (c->verdict == VIJP_NOT_SUBMERSIVE && !strcmp(c->method, "interval-bisection"))
        counter = json_pack("{s:I, s:o, s:o, s:b}", "coordinate", (json_int_t)c->coordinate + 1, "lo", certify_json_num(c->lo), "hi",
                            certify_json_num(c->hi), "exact", c->exact);
    print_json(json_pack("{s:s, s:I, s:I, s:s?, s:s?, s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:o, s:o, s:s}", "layer", a->spec,
                         "in", (json_int_t)L->in, "out", (json_int_t)L->out, "box", a->box, "box_file", a->box_file,
                         "parameters", params, "verdict", vijp_box_verdict_name(c->verdict), "method", c->method,
                         "sigma_min_lower_bound", certify_json_num(c->s), "certified_fraction", certify_json_num(c->certified_fraction),
                         "intervals", (json_int_t)c->boxes, "undecided_pieces", (json_int_t)c->n_open, "undecided", open,
                         "counterexample", counter, "reason", c->reason));
}

static void print_box_table(const certify_args *a, const vijp_layer *L, const char *params, const vijp_box_certificate *c)
{
    FILE *out = cli_out();
    if (a->box) fprintf(out, "layer %s (%zu → %zu) over the box [%s] in every input coordinate, %s\n\n", a->spec, L->in,
                        L->out, a->box, params);
    else fprintf(out, "layer %s (%zu → %zu) over the box of %s, %s\n\n", a->spec, L->in, L->out, a->box_file, params);
    if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && isnan(c->s))
        fprintf(out, "verdict: certified-submersive over the whole box (%s)\n", c->method);
    else if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE)
        fprintf(out, "verdict: certified-submersive over the whole box: σ_min(J(x)) >= %.4g for every x in it (%s%s)\n",
                c->s, c->method, "");
    else if (c->verdict == VIJP_NOT_SUBMERSIVE)
        fprintf(out, "verdict: not-submersive in the box: %s (%s)\n", c->reason, c->method);
    else {
        /* a fraction just under 1 must not print as 100% */
        double pct = 100 * c->certified_fraction;
        char share[32];
        if (c->certified_fraction < 1 && pct >= 99.995) snprintf(share, sizeof share, "more than 99.99%%");
        else snprintf(share, sizeof share, "%.4g%%", pct);
        fprintf(out, "verdict: undecided: %s of the box's volume proven submersive (%s); %s\n", share, c->method,
                c->reason);
        size_t listed = strcmp(c->method, "interval-bisection") ? 0 : c->n_open; /* boxes of several coordinates are not listed */
        for (size_t k = 0; k < listed && k < sizeof c->open / sizeof *c->open; k++)
            fprintf(out, "  x_%zu in [%.17g, %.17g]\n", c->open_at[k] + 1, c->open[k].lo, c->open[k].hi);
        if (listed > sizeof c->open / sizeof *c->open)
            fprintf(out, "  (and %zu more)\n", c->n_open - sizeof c->open / sizeof *c->open);
    }
    /* f′'s bisection cuts intervals of one coordinate; the others, boxes */
    int one_d = !strcmp(c->method, "interval-bisection");
    const char *unit = c->boxes == 1 ? (one_d ? "interval" : "box") : (one_d ? "intervals" : "boxes");
    if (c->boxes && a->budget.seconds > 0)
        fprintf(out, "%zu %s examined (--budget %gs, %zu)\n", c->boxes, unit, a->budget.seconds,
                a->budget.intervals ? a->budget.intervals : 200000);
    else if (c->boxes)
        fprintf(out, "%zu %s examined (--budget %zu)\n", c->boxes, unit, a->budget.intervals ? a->budget.intervals : 200000);
}

int certify_box(const certify_args *a, const vijp_net *net)
{
    const vijp_layer *L = &net->layers[0];
    vijp_error err = {0};
    double *lo = vijp_alloc_array(L->in ? L->in : 1, sizeof *lo), *hi = vijp_alloc_array(L->in ? L->in : 1, sizeof *hi);
    vijp_box_certificate c;
    if (read_box(a, L->in, lo, hi, &err)) /* bad input, a missing file too: exit 2, as for --net */
        return free(lo), free(hi), cli_usage_error("vijp certify", &err);
    int rc = vijp_certify_box(L, net->theta[0], lo, hi, &a->budget, &a->co, &c, &err);
    free(lo), free(hi);
    if (rc) {
        fprintf(stderr, "vijp certify: %s\n", err.msg);
        return rc == VIJP_EDECLARATION ? 3 : rc == VIJP_ENOMEM || rc == VIJP_EIO ? EXIT_FAILED : EXIT_USAGE;
    }
    certify_sources src;
    certify_layer_sources(a, net, &src);
    if (a->json) print_box_json(a, L, src.params_json, &c);
    else print_box_table(a, L, src.params, &c);
    return c.verdict == VIJP_CERTIFIED_SUBMERSIVE ? EXIT_OK : EXIT_FAILED;
}

/* The enclosure of a layer's inputs as a JSON array (null when none). */
static json_t *bounds_json(const double *v, size_t n)
{
    if (!v) return json_null();
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++) json_array_append_new(a, json_real(v[k]));
    return a;
}

static void point_line(FILE *out, const char *name, const double *x, size_t n)
{
    fprintf(out, "       %s = (", name);
    for (size_t k = 0; k < n; k++) fprintf(out, "%s%.17g", k ? ", " : "", x[k]);
    fprintf(out, ")\n");
}

static void layer_line(FILE *out, size_t i, const char *item, int item_width, const double *lo, const double *hi,
                       size_t n, const vijp_box_certificate *c)
{
    double l = INFINITY, h = -INFINITY;
    for (size_t k = 0; lo && k < n; k++) l = fmin(l, lo[k]), h = fmax(h, hi[k]);
    char within[64] = "unknown"; /* lo NULL: no enclosure reached this layer */
    if (lo) snprintf(within, sizeof within, "[%.4g, %.4g]", l, h);
    fprintf(out, "%5zu  %-*s %-20s  %-21s %-19s", i + 1, item_width, item, within, vijp_box_verdict_name(c->verdict), c->method);
    if (c->verdict == VIJP_CERTIFIED_SUBMERSIVE && !isnan(c->s)) fprintf(out, " σ_min >= %.4g", c->s);
    fputc('\n', out);
    if (c->verdict != VIJP_CERTIFIED_SUBMERSIVE) fprintf(out, "       %s\n", c->reason);
}

int certify_net_box(const certify_args *a)
{
    vijp_net net;
    int rc = certify_build_net(a, &net);
    if (rc) return rc;
    double *lo = vijp_alloc_array(net.width, sizeof *lo), *hi = vijp_alloc_array(net.width, sizeof *hi);
    vijp_error err = {0};
    if (read_box(a, net.width, lo, hi, &err)) {
        free(lo), free(hi), vijp_net_free(&net);
        return cli_usage_error("vijp certify", &err);
    }
    size_t last = a->layer_index ? a->layer_index : net.depth, certified = 0, refuted = 0;
    vijp_net_box_layer *res = vijp_alloc_array(last, sizeof *res);
    vijp_net_box_opts o = {.budget = &a->budget, .co = &a->co, .seed = a->seed,
                           .intervals_only = a->box_form && !strcmp(a->box_form, "interval")};
    if (vijp_certify_net_box(net.layers, net.theta, last, lo, hi, &o, res, &err)) {
        free(lo), free(hi), free(res), vijp_net_free(&net);
        return cli_usage_error("vijp certify", &err);
    }
    json_t *layers = json_array();
    FILE *out = cli_out();
    int item_width = 18; /* the type column: as wide as the longest item (coupling blocks spell out theirs) */
    for (size_t i = 0; i < last; i++) {
        char item[256];
        vijp_layer_spec(&net.layers[i], item, sizeof item);
        item_width = (int)strlen(item) > item_width ? (int)strlen(item) : item_width;
    }
    if (!a->json)
        fprintf(out, "net %s over the box %s%s%s, %s parameters%s\n\n%5s  %-*s %-20s  %-21s %s\n", a->net,
                a->box ? "[" : "", a->box ? a->box : a->box_file, a->box ? "] in every input coordinate" : "",
                a->init_name, net.given ? " where the net gives none" : "", "layer", item_width, "type", "its inputs within",
                "verdict", "method");
    for (size_t i = 0; i < last; i++) {
        const vijp_layer *L = &net.layers[i];
        const vijp_net_box_layer *r = &res[i];
        const vijp_box_certificate *c = &r->c;
        char item[256];
        vijp_layer_spec(L, item, sizeof item);
        if (i + 1 >= (a->layer_index ? a->layer_index : 1)) { /* a layer reported: the net's verdict counts it */
            certified += c->verdict == VIJP_CERTIFIED_SUBMERSIVE, refuted += c->verdict == VIJP_NOT_SUBMERSIVE;
            if (!a->json) layer_line(out, i, item, item_width, r->in_lo, r->in_hi, L->in, c);
            if (!a->json && r->x_a) point_line(out, "counterexample_x", r->x_a, net.width);
            if (!a->json && r->x_b) point_line(out, "counterexample_x_b", r->x_b, net.width);
            json_array_append_new(layers, json_pack("{s:I, s:s, s:s, s:s, s:o, s:s, s:o, s:o, s:o, s:o}", "layer", (json_int_t)i + 1,
                                                    "type", item, "verdict", vijp_box_verdict_name(c->verdict), "method",
                                                    c->method, "sigma_min_lower_bound", certify_json_num(c->s), "reason",
                                                    c->reason, "inputs_lo", bounds_json(r->in_lo, L->in),
                                                    "inputs_hi", bounds_json(r->in_hi, L->in),
                                                    "counterexample_x", bounds_json(r->x_a, net.width),
                                                    "counterexample_x_b", bounds_json(r->x_b, net.width)));
        }
        if (r->image_error[0] && !a->json) fprintf(out, "       its values over the box: %s\n", r->image_error);
    }
    size_t n = a->layer_index ? 1 : last;
    const char *verdict = certified == n ? "certified-submersive" : refuted ? "not-submersive" : "undecided";
    if (a->json)
        print_json(json_pack("{s:s, s:s?, s:s?, s:s, s:I, s:o}", "net", a->net, "box", a->box, "box_file", a->box_file,
                             "verdict", verdict, "layers_certified", (json_int_t)certified, "layers", layers));
    else {
        fprintf(out, "\nverdict: %s: %zu of %zu layer%s certified submersive over every input the box sends them\n",
                verdict, certified, n, n == 1 ? "" : "s");
        json_decref(layers);
    }
    vijp_net_box_clear(res, last);
    free(lo), free(hi), free(res);
    vijp_net_free(&net);
    return certified == n ? EXIT_OK : EXIT_FAILED;
}

/* A chain of layers over its input box (vijp_certify_net_box): the box
 * carried from layer to layer as the enclosure of each layer's values, every
 * layer certified over the enclosure of its inputs, counterexamples past the
 * first layer pulled back to the chain's own box.  The box goes on as the
 * interval image of the last one intersected with the hull of an affine
 * form (affine.h) that travels beside it. */
#include "affine.h"
#include "vijp/certify.h"
#include "image.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layer i's certificate over the enclosure of its inputs: beyond the first
 * layer the enclosure holds more than the inputs that reach it, so a point
 * where J is singular found in it proves nothing about the net (unless J
 * is singular everywhere, or vijp_net_box_counterexample found a point of
 * the net's box sent to one). */
static void over_approximated(vijp_box_certificate *c)
{
    if (c->verdict != VIJP_NOT_SUBMERSIVE || (strcmp(c->method, "interval-bisection") && strcmp(c->method, "interval-jacobian")))
        return;
    c->verdict = VIJP_INCONCLUSIVE;
    char was[sizeof c->reason];
    snprintf(was, sizeof was, "%s", c->reason);
    snprintf(c->reason, sizeof c->reason, "J may be singular in the enclosure of the inputs that reach this layer, "
             "which holds more than they: %.120s", was);
}

static double *copy_of(const double *v, size_t n)
{
    double *c = vijp_alloc_array(n ? n : 1, sizeof *c);
    memcpy(c, v, n * sizeof *v);
    return c;
}

/* Layer i over its box [lo, hi]: the certificate, and a counterexample in
 * the chain's box [box_lo, box_hi] where the enclosure could not refute. */
static void certify_one(const vijp_layer *layers, double *const *theta, size_t i, const double *lo, const double *hi,
                        const double *box_lo, const double *box_hi, const vijp_net_box_opts *o, vijp_net_box_layer *r)
{
    vijp_box_certificate *c = &r->c;
    vijp_error err = {0};
    size_t n0 = layers[0].in;
    if (vijp_certify_box(&layers[i], theta[i], lo, hi, o->budget, o->co, c, &err)) {
        snprintf(c->reason, sizeof c->reason, "%s", err.msg), c->verdict = VIJP_INCONCLUSIVE;
        snprintf(c->method, sizeof c->method, "none");
    }
    r->in_lo = copy_of(lo, layers[i].in), r->in_hi = copy_of(hi, layers[i].in);
    int pulled = 0; /* a proven counterexample in the net's input box (layers past the first) */
    if (i && c->verdict != VIJP_CERTIFIED_SUBMERSIVE && !strcmp(c->method, "interval-bisection")) {
        double *x_a = vijp_alloc_array(n0 ? n0 : 1, sizeof *x_a), *x_b = vijp_alloc_array(n0 ? n0 : 1, sizeof *x_b);
        pulled = vijp_net_box_counterexample(layers, theta, i, box_lo, box_hi, o->seed, c, x_a, x_b);
        if (pulled) r->x_a = x_a, x_a = NULL;
        if (pulled && !c->exact) r->x_b = x_b, x_b = NULL;
        free(x_a), free(x_b);
    }
    if (i && !pulled) over_approximated(c);
}

/* Most generators a form keeps (the smallest past it merge into its
 * remainder): 4 per unit of the widest layer, at least 16, at most 256, so
 * a dense layer's map costs at most out·in·256 double-double products.  0
 * (no forms: intervals alone) past AFFINE_MAX_WIDTH units, where the box
 * alone takes more generators than that. */
#define AFFINE_MAX_WIDTH 256
static size_t generator_cap(const vijp_layer *layers, size_t depth)
{
    size_t w = depth ? layers[0].in : 0;
    for (size_t i = 0; i < depth; i++) w = layers[i].out > w ? layers[i].out : w;
    if (w > AFFINE_MAX_WIDTH) return 0;
    w *= 4;
    return w < 16 ? 16 : w > 256 ? 256 : w;
}

/* The next box: [nl, nh] (layer i's interval image of [l, h]) intersected
 * with the hull of the form carried through the layer, or the form
 * restarted from [nl, nh] where the layer has none.  Both hold every value
 * the layer gives, so their intersection does; an empty one means one of
 * them is wrong: an error. */
static int next_box(const vijp_layer *L, const double *theta, const double *l, const double *h, double *nl, double *nh,
                    vijp_affine *form, size_t cap, vijp_error *err)
{
    vijp_error ferr = {0};
    if (vijp_affine_layer(L, theta, l, h, form, &ferr)) {
        vijp_affine_free(form);
        vijp_affine_from_box(form, L->out, cap, nl, nh);
        return 0;
    }
    double *al = vijp_alloc_array(L->out + 1, sizeof *al), *ah = vijp_alloc_array(L->out + 1, sizeof *ah);
    vijp_affine_hull(form, al, ah);
    int rc = 0;
    for (size_t j = 0; j < L->out && !rc; j++) {
        nl[j] = fmax(nl[j], al[j]), nh[j] = fmin(nh[j], ah[j]);
        if (!(nl[j] <= nh[j]))
            rc = vijp_fail(err, VIJP_EDOMAIN, "%s layer: its interval image and affine form of output %zu do not "
                           "meet: one of them is wrong", L->type->name, j + 1);
    }
    free(al), free(ah);
    return rc;
}

int vijp_certify_net_box(const vijp_layer *layers, double *const *theta, size_t depth, const double *lo,
                         const double *hi, const vijp_net_box_opts *o, vijp_net_box_layer *out, vijp_error *err)
{
    static const vijp_net_box_opts defaults; /* NULL: the default budget and options, seed 0 */
    if (!o) o = &defaults;
    memset(out, 0, depth * sizeof *out);
    size_t n0 = depth ? layers[0].in : 0, cap = n0, gens = generator_cap(layers, depth);
    if (vijp_image_box_check(lo, hi, n0, err)) return VIJP_EDOMAIN;
    for (size_t i = 0; i < depth; i++) cap = layers[i].out > cap ? layers[i].out : cap;
    double *l = vijp_alloc_array(cap + 1, sizeof *l), *h = vijp_alloc_array(cap + 1, sizeof *h),
           *nl = vijp_alloc_array(cap + 1, sizeof *nl), *nh = vijp_alloc_array(cap + 1, sizeof *nh);
    memcpy(l, lo, n0 * sizeof *lo), memcpy(h, hi, n0 * sizeof *hi);
    vijp_affine form = {0};
    int forms = !o->intervals_only && gens;
    if (forms) vijp_affine_from_box(&form, n0, gens, lo, hi);
    int stopped = 0;
    for (size_t i = 0; i < depth; i++) {
        vijp_net_box_layer *r = &out[i];
        if (stopped) {
            r->c.s = r->c.certified_fraction = NAN, r->c.verdict = VIJP_INCONCLUSIVE;
            snprintf(r->c.reason, sizeof r->c.reason, "no enclosure of the inputs that reach it (above)");
            continue;
        }
        certify_one(layers, theta, i, l, h, lo, hi, o, r);
        vijp_error ierr = {0};
        if (i + 1 < depth && (vijp_layer_image_box(&layers[i], theta[i], l, h, nl, nh, &ierr) ||
                              (forms && next_box(&layers[i], theta[i], l, h, nl, nh, &form, gens, &ierr)))) {
            stopped = 1;
            snprintf(r->image_error, sizeof r->image_error, "%s", ierr.msg);
        }
        double *t = l;
        l = nl, nl = t, t = h, h = nh, nh = t;
    }
    vijp_affine_free(&form);
    free(l), free(h), free(nl), free(nh);
    return 0;
}

void vijp_net_box_clear(vijp_net_box_layer *out, size_t depth)
{
    for (size_t i = 0; out && i < depth; i++) {
        free(out[i].in_lo), free(out[i].in_hi), free(out[i].x_a), free(out[i].x_b);
        out[i].in_lo = out[i].in_hi = out[i].x_a = out[i].x_b = NULL;
    }
}

/* Proven counterexamples past a net's first layer (vijp_net_box_counterexample,
 * certify.h).  Layer i is certified over an enclosure of the inputs the box
 * sends it, which holds more than they: a singular point found there is no
 * proof about the net.  A proof is a point x of the net's input box whose
 * image h(x) (layers 1..i−1) is a point where layer i's J is singular.  For
 * an elementwise layer i (J = diag f′(h)) this searches seeded points x of
 * the box (its centre, up to 64 vertices, random points), encloses h(x)
 * rigorously (vijp_layer_image_box of the thin box {x}, MPFI outward
 * rounded, a few ulps wide) and f′ over that enclosure:
 *   f′ = {0} on it          J is singular at h(x): x is a counterexample;
 *   f′ > 0 at x_a, < 0 at x_b (one unit k)   f′(h_k(·)) is continuous on
 *                          the segment [x_a, x_b] (every layer before is
 *                          continuous, f′ too: a smooth activation), so it
 *                          vanishes at some x on it (the intermediate value
 *                          theorem), inside the convex box.
 * Nothing else is a proof: the verdict stays undecided. */
#include "vijp/catalogue.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PULLBACK_RANDOM 256 /* random points searched after the centre and the vertices */
#define PULLBACK_VERTICES 64

/* Whether L is continuous everywhere, as the intermediate value theorem
 * needs of every layer before: not softplus:β/T (it jumps at βx = T), nor
 * a normalisation at ε = 0 (y = 0 at σ = 0, |y_i| up to √(n − 1) beside
 * it), nor a block holding one; a plugin is taken to be (its enclosures
 * already assume it). */
static int continuous(const vijp_layer *L)
{
    const char *name = L->type->name;
    if (!strcmp(name, "softplus") || !strcmp(name, "softplus_beta")) return isinf(vijp_softplus_get(L).threshold);
    if (!strcmp(name, "layernorm") || !strcmp(name, "groupnorm"))
        return L->state && ((const vo_layernorm_args *)L->state)->eps > 0;
    if (!strcmp(name, "additive") || !strcmp(name, "affine")) {
        for (int w = 0; w < 2; w++)
            for (size_t k = 0; k < vijp_coupling_count(L, w); k++)
                if (!continuous(vijp_coupling_sub(L, w, k))) return 0;
    }
    if (!strcmp(name, "residual"))
        for (int w = 0; w < 2; w++)
            for (size_t k = 0; k < vijp_residual_count(L, w); k++)
                if (!continuous(vijp_residual_sub(L, w, k))) return 0;
    return 1;
}

/* Candidate t of the search into x: the centre, vertices, then seeded uniform points. */
static void candidate(size_t t, const double *lo, const double *hi, size_t n, vijp_rng *rng, double *x)
{
    size_t vertices = n < 6 ? (size_t)1 << n : PULLBACK_VERTICES;
    for (size_t j = 0; j < n; j++) {
        if (t == 0) x[j] = lo[j] + 0.5 * (hi[j] - lo[j]);
        else if (t <= vertices) x[j] = ((t - 1) >> (j % 64) & 1) ? hi[j] : lo[j];
        else x[j] = lo[j] + (hi[j] - lo[j]) * vijp_rng_uniform(rng);
        if (x[j] > hi[j]) x[j] = hi[j]; /* lo + (hi − lo)·u rounded past hi */
    }
}

/* h(x) enclosed through layers[0..i) into hlo, hhi (buffers of cap entries). */
static int image_of_point(const vijp_layer *layers, double *const *theta, size_t i, const double *x, double *hlo,
                          double *hhi, double *tlo, double *thi, vijp_error *err)
{
    memcpy(hlo, x, layers[0].in * sizeof *x), memcpy(hhi, x, layers[0].in * sizeof *x);
    for (size_t l = 0; l < i; l++) {
        if (vijp_layer_image_box(&layers[l], theta[l], hlo, hhi, tlo, thi, err)) return err->code;
        memcpy(hlo, tlo, layers[l].out * sizeof *tlo), memcpy(hhi, thi, layers[l].out * sizeof *thi);
    }
    return 0;
}

int vijp_net_box_counterexample(const vijp_layer *layers, double *const *theta, size_t i, const double *lo,
                                const double *hi, uint64_t seed, vijp_box_certificate *c, double *x_a, double *x_b)
{
    const vijp_layer *L = &layers[i];
    vijp_deriv_enclose_fn fprime = vijp_deriv_enclose_of(L->type);
    if (!i || !fprime) return 0;
    size_t n0 = layers[0].in, cap = n0;
    int smooth = L->type->dual_eval != NULL;
    for (size_t l = 0; l <= i; l++) cap = layers[l].out > cap ? layers[l].out : cap, smooth &= continuous(&layers[l]);
    double *x = vijp_alloc_array(n0, sizeof *x), *hlo = vijp_alloc_array(cap, sizeof *hlo),
           *hhi = vijp_alloc_array(cap, sizeof *hhi), *tlo = vijp_alloc_array(cap, sizeof *tlo),
           *thi = vijp_alloc_array(cap, sizeof *thi);
    /* per unit k of layer i: a point seen with f′ > 0 (pos) and one with f′ < 0 (neg) */
    double *pos = vijp_alloc_array(L->in * n0, sizeof *pos), *neg = vijp_alloc_array(L->in * n0, sizeof *neg);
    char *has = vijp_alloc_array(2 * L->in, 1);
    memset(has, 0, 2 * L->in);
    mpfi_t h, d;
    mpfi_init2(h, 128), mpfi_init2(d, 128);
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    size_t vertices = n0 < 6 ? (size_t)1 << n0 : PULLBACK_VERTICES, total = 1 + vertices + PULLBACK_RANDOM;
    int found = 0;
    for (size_t t = 0; t < total && !found; t++) {
        vijp_error err = {0};
        candidate(t, lo, hi, n0, &rng, x);
        if (image_of_point(layers, theta, i, x, hlo, hhi, tlo, thi, &err)) continue;
        for (size_t k = 0; k < L->in && !found; k++) {
            mpfi_interv_d(h, hlo[k], hhi[k]);
            fprime(L, theta[i], d, h);
            if (mpfi_nan_p(d)) continue;
            if (mpfi_is_zero(d)) {
                memcpy(x_a, x, n0 * sizeof *x), found = 1;
                snprintf(c->reason, sizeof c->reason, "a point of the box (counterexample_x) is sent to inputs whose "
                         "unit %zu lies in [%.6g, %.6g], where f′ = 0 exactly: J is singular there", k + 1, hlo[k], hhi[k]);
                c->exact = 1, c->coordinate = k, c->lo = hlo[k], c->hi = hhi[k];
            } else if (smooth && (mpfi_is_strictly_pos(d) || mpfi_is_strictly_neg(d))) {
                int p = mpfi_is_strictly_pos(d);
                memcpy((p ? pos : neg) + k * n0, x, n0 * sizeof *x), has[2 * k + !p] = 1;
                if (has[2 * k] && has[2 * k + 1]) {
                    memcpy(x_a, pos + k * n0, n0 * sizeof *x), memcpy(x_b, neg + k * n0, n0 * sizeof *x), found = 1;
                    snprintf(c->reason, sizeof c->reason, "f′ of unit %zu is > 0 at the image of a point of the box "
                             "and < 0 at another's (counterexample_x, _b), continuous between: it vanishes at the "
                             "image of a point of the segment, where J is singular", k + 1);
                    c->exact = 0, c->coordinate = k, c->lo = c->hi = NAN;
                }
            }
        }
    }
    if (found) c->verdict = VIJP_NOT_SUBMERSIVE, c->certified_fraction = NAN, c->s = NAN;
    mpfi_clear(h), mpfi_clear(d);
    free(x), free(hlo), free(hhi), free(tlo), free(thi), free(pos), free(neg), free(has);
    return found;
}

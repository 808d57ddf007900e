/* vijp_engine_pure_forward_stored (stored.h): engine_pure_forward's counts
 * (moonwalk.c, pure_forward_sample), its forward passes alone. */
#include "stored.h"
#include "engine_internal.h"
#include <stdlib.h>

/* Sample b's fragment counts k[0..D) and whether its forward values stayed
 * finite: the run's h_i, keyed as the run keys them (engine_key), and the
 * cokernel it takes where a layer has fragments. */
static int sample_counts(const vijp_net *net, const vijp_mat *theta, const vijp_mat *x, size_t b, size_t *k,
                         vijp_error *err)
{
    const vijp_format *f = x->fmt;
    vijp_mat h, hn, Q;
    vijp_mat_init(&h, net->width, 1, f);
    vijp_mat_copy(&h, x);
    int rc = 0;
    for (size_t i = 0; i < net->depth && !rc; i++) {
        const vijp_layer *L = &net->layers[i];
        k[i] = vijp_layer_fragment_count(L, &theta[i], &h);
        if (k[i]) {
            vijp_mat_init(&Q, L->out, k[i], f);
            engine_key(&Q, x, VIJP_SR_BASIS, i + 1, b + 1);
            rc = vijp_layer_cokernel(L, &theta[i], &h, &Q, err);
            vijp_mat_clear(&Q);
        }
        vijp_mat_init(&hn, L->out, 1, f);
        engine_key(&hn, x, VIJP_SR_OUTPUT, i + 1, b + 1);
        if (!rc) rc = vijp_layer_forward(L, &theta[i], &h, &hn, err);
        if (!rc) rc = vijp_mat_check_finite(&hn, "a forward value", err) ? VIJP_ERANGE : 0;
        vijp_mat_clear(&h);
        h = hn;
    }
    vijp_mat_clear(&h);
    return rc;
}

int vijp_engine_pure_forward_stored(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                                    size_t *stored_by_depth, vijp_error *err)
{
    size_t D = net->depth, B = X->cols, n0 = net->width;
    size_t *k = vijp_alloc_array(D, sizeof *k), *total = vijp_alloc_array(D, sizeof *total);
    vijp_mat x;
    vijp_mat_init(&x, n0, 1, X->fmt);
    x.sr = X->sr; /* the run's stream, for the keys */
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        vijp_mat_copy_range(&x, 0, X, b * n0, n0);
        if (!(rc = sample_counts(net, theta, &x, b, k, err)))
            for (size_t i = 0; i < D; i++) total[i] += k[i];
    }
    /* the engine's frag[i]: total[i] values in X's format */
    for (size_t i = 0, sum = mat_bytes(X); i < D && !rc; i++)
        stored_by_depth[i] = sum += total[i] * X->fmt->value_bytes;
    vijp_mat_clear(&x);
    free(k), free(total);
    return rc;
}

/* Checkpointing (the classical baseline): keep every k-th layer
 * input (k = ⌈√D⌉), and in the reverse pass recompute each segment's
 * activations from its checkpoint before backpropagating through it.  The
 * recomputation repeats the forward operations exactly, so the gradients are
 * bit for bit backprop's; the price is one extra forward pass. */
#include "engine_internal.h"
#include "vijp/error.h"
#include <math.h>
#include <stdlib.h>

size_t engine_checkpoint_segment(size_t D, size_t given)
{
    if (given) return given < D ? given : D;
    size_t k = (size_t)sqrt((double)D);
    while (k * k < D) k++; /* ⌈√D⌉, exactly */
    return k ? k : 1;
}

/* The ledger of the cut network of depth d, replayed from the shapes alone:
 * going back, segment s holds checkpoints 0..s and its own recomputed
 * activations (all but its first, the checkpoint). */
static void checkpoint_profile(const vijp_net *net, size_t B, size_t vb, size_t given, size_t *by_depth)
{
    size_t D = net->depth;
    for (size_t d = 1; d <= D; d++) {
        size_t k = engine_checkpoint_segment(d, given), ck = 0, peak = 0;
        for (size_t start = 0; start < d; start += k) {
            size_t end = start + k < d ? start + k : d, seg = 0;
            ck += (start ? net->layers[start - 1].out : net->width) * B * vb;
            for (size_t i = start + 1; i < end; i++) seg += net->layers[i - 1].out * B * vb;
            if (ck + seg > peak) peak = ck + seg;
        }
        by_depth[d - 1] = peak;
    }
}

int engine_checkpoint(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                      size_t segment, engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t D = net->depth, B = X->cols, k = engine_checkpoint_segment(D, segment);
    const vijp_format *f = X->fmt;
    vijp_ledger ledger = {0, 0};
    vijp_mat *H = vijp_alloc_array(D + 1, sizeof *H), h, hn; /* H[i] = h_i while it is kept */
    int rc = 0;
    vijp_mat_init(&h, net->width, B, f);
    vijp_mat_copy(&h, X);
    for (size_t i = 0; i < D && !rc; i++) { /* forward: keep the checkpoints */
        const vijp_layer *L = &net->layers[i];
        if (i % k == 0) {
            vijp_mat_init(&H[i], h.rows, B, f);
            vijp_mat_copy(&H[i], &h);
            ledger_keep(&ledger, mat_bytes(&H[i]));
        }
        vijp_mat_init(&hn, L->out, B, f);
        engine_key(&hn, X, VIJP_SR_OUTPUT, i + 1, 0);
        rc = vijp_layer_forward(L, &theta[i], &h, &hn, err);
        vijp_mat_clear(&h);
        h = hn;
        if (!rc) engine_step(steps);
    }
    if (!rc) out->loss = engine_loss(net, &h, T, &out->g[D - 1]);
    vijp_mat_clear(&h);
    for (size_t start = (D - 1) / k * k; H && !rc; start -= k) { /* reverse, segment by segment */
        size_t end = start + k < D ? start + k : D;
        for (size_t i = start + 1; i < end && !rc; i++) { /* recompute h_{start+1} … h_{end−1} */
            vijp_mat_init(&H[i], net->layers[i - 1].out, B, f);
            engine_key(&H[i], X, VIJP_SR_OUTPUT, i, 0);
            rc = vijp_layer_forward(&net->layers[i - 1], &theta[i - 1], &H[i - 1], &H[i], err);
            ledger_keep(&ledger, mat_bytes(&H[i]));
            if (!rc) engine_step(steps);
        }
        for (size_t i = end; i-- > start && !rc;) {
            const vijp_layer *L = &net->layers[i];
            vijp_mat *gin = i ? &out->g[i - 1] : &out->grad_x;
            rc = engine_param_grad(net, theta, X, i, &H[i], steps, out, err);
            if (!rc) rc = vijp_layer_vjp(L, &theta[i], &H[i], &out->g[i], gin, err);
            ledger_release(&ledger, mat_bytes(&H[i]));
            vijp_mat_clear(&H[i]);
            if (!rc) engine_step(steps);
        }
        if (start == 0) break;
    }
    for (size_t i = 0; H && i <= D; i++) vijp_mat_clear(&H[i]);
    free(H);
    checkpoint_profile(net, B, f->value_bytes, segment, out->stored_by_depth);
    out->stored_bytes = ledger.peak;
    return rc;
}

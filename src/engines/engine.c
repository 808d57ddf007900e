/* Engine dispatch and input validation.  The pieces every engine shares
 * (result allocation, loss, f′ by nested forward AD) are in common.c, so
 * calls run one way: engine.c → the engines → common.c. */
#include "engine_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[VIJP_ENGINE_COUNT] = {"backprop", "moonwalk", "pure-forward", "reversible", "checkpoint"};

const char *vijp_engine_name(vijp_engine_kind e) { return (unsigned)e < VIJP_ENGINE_COUNT ? names[e] : "unknown"; }

int vijp_engine_parse(const char *s, vijp_engine_kind *e, vijp_error *err)
{
    if (!s) return vijp_fail(err, VIJP_EINVAL, "no engine given (NULL)");
    for (int i = 0; i < VIJP_ENGINE_COUNT; i++)
        if (!strcmp(s, names[i])) return *e = (vijp_engine_kind)i, 0;
    return vijp_fail(err, VIJP_EINVAL, "unknown engine '%s' (known: backprop, moonwalk, pure-forward, reversible, checkpoint)", s);
}

int vijp_engine_parse_list(const char *list, vijp_engine_kind *out, size_t *n, vijp_error *err)
{
    *n = 0;
    if (!strcmp(list, "all")) {
        for (int i = 0; i < VIJP_ENGINE_COUNT; i++) out[(*n)++] = (vijp_engine_kind)i;
        return 0;
    }
    int rc = 0;
    for (const char *p = list; !rc;) {
        size_t len = strcspn(p, ",");
        char name[32];
        if (len == 0 || len >= sizeof name)
            return vijp_fail(err, VIJP_EINVAL, "engine list '%s': %s", list, len ? "unknown engine" : "an empty item");
        memcpy(name, p, len), name[len] = 0;
        vijp_engine_kind e = VIJP_ENGINE_BACKPROP;
        if (!(rc = vijp_engine_parse(name, &e, err)))
            for (size_t j = 0; j < *n && !rc; j++)
                if (out[j] == e) rc = vijp_fail(err, VIJP_EINVAL, "engine '%s' given twice", name);
        if (!rc) out[(*n)++] = e; /* at most VIJP_ENGINE_COUNT: one more would repeat one */
        if (!p[len]) break;
        p += len + 1;
    }
    return rc;
}

size_t vijp_engine_layer_steps(vijp_engine_kind e, size_t depth, size_t batch, const vijp_engine_opts *o)
{
    switch (e) {
    case VIJP_ENGINE_MOONWALK: return 3 * depth; /* forward, reverse, vijp sweep */
    case VIJP_ENGINE_PURE_FORWARD: return (batch + 1) * depth; /* each sample's forward, then the sweep */
    case VIJP_ENGINE_CHECKPOINT: { /* forward, every segment's layers but its first recomputed, reverse */
        size_t k = depth ? engine_checkpoint_segment(depth, o ? o->checkpoint_segment : 0) : 1;
        return 3 * depth - (depth + k - 1) / k;
    }
    default: return 2 * depth; /* backprop, reversible: forward, reverse */
    }
}

int vijp_engine_run(vijp_engine_kind e, const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                    const vijp_mat *T, vijp_grads *out, vijp_error *err)
{
    return vijp_engine_run_opts(e, net, theta, X, T, NULL, out, err);
}

/* Two formats of one kind that are not one: any kind but double and
 * mpfr:P by its name (bfloat16+binary32, binary16+binary32 and
 * e4m3+binary32 share their kind and precision). */
static int named_apart(const vijp_format *a, const vijp_format *b)
{
    return a->kind != VIJP_DOUBLE && a->kind != VIJP_MPFR && strcmp(a->name, b->name);
}

/* vijp_engine_run_opts, and with watch (backprop only) vijp_engine_backprop_watched. */
static int run(vijp_engine_kind e, const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
               const vijp_engine_opts *o, vijp_backprop_watch watch, vijp_backprop_param param, void *ctx,
               vijp_grads *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    if (X->cols == 0) return vijp_fail(err, VIJP_EDIM, "engine: the batch is empty (the input has 0 columns)");
    if (X->rows != net->width || T->rows != vijp_net_out_width(net) || T->cols != X->cols)
        return vijp_fail(err, VIJP_EDIM, "engine: input is %zux%zu and loss data %zux%zu, but the network maps %zu -> %zu",
                         X->rows, X->cols, T->rows, T->cols, net->width, vijp_net_out_width(net));
    if (X->fmt->kind != T->fmt->kind || X->fmt->prec != T->fmt->prec || named_apart(X->fmt, T->fmt))
        return vijp_fail(err, VIJP_EINVAL, "engine: input and loss data are in different formats (%s, %s)", X->fmt->name,
                         T->fmt->name);
    int rc;
    if ((rc = vijp_mat_check_finite(X, "input", err)) || (rc = vijp_mat_check_finite(T, "loss data", err)))
        return rc;
    /* θ in X's format kind, or in double for an mpfr:P run (vijp/engine.h):
     * the drift memo's exact copy of a problem whose values are doubles
     * (src/drift/memo.c).  The layers read θ's values as they are, as they
     * read an MPFR θ of another precision than the run's (the memo's
     * 53-bit copy has always run levels of 16 and 32 bits: --ref-prec 16),
     * so any P is admitted; an emulated run's operators take θ on its own
     * grid, so a double θ stays refused there. */
    if (!theta) return vijp_fail(err, VIJP_EINVAL, "engine: no parameters (theta NULL; vijp_net_params gives them)");
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        if (theta[i].rows != L->type->param_count(L))
            return vijp_fail(err, VIJP_EDIM, "engine: layer %zu has %zu parameters, theta gives %zu", i + 1,
                             L->type->param_count(L), theta[i].rows);
        int double_in_mpfr = theta[i].fmt->kind == VIJP_DOUBLE && X->fmt->kind == VIJP_MPFR;
        if (theta[i].rows && !double_in_mpfr &&
            (theta[i].fmt->kind != X->fmt->kind || named_apart(X->fmt, theta[i].fmt)))
            return vijp_fail(err, VIJP_EINVAL, "engine: parameters of layer %zu are in %s, the input in %s", i + 1,
                             theta[i].fmt->name, X->fmt->name);
    }
    /* every engine allocates each ∇θ_i as it computes it (engine_grads_init) */
    if ((rc = engine_grads_init(out, net, X))) return vijp_fail(err, rc, "out of memory");
    engine_steps steps = {o ? o->layer_done : NULL, o ? o->layer_ctx : NULL, 0,
                          vijp_engine_layer_steps(e, net->depth, X->cols, o), watch, param, ctx,
                          o ? o->param_ready : NULL, o ? o->param_ctx : NULL};
    switch (e) {
    case VIJP_ENGINE_BACKPROP: rc = engine_backprop(net, theta, X, T, &steps, out, err); break;
    case VIJP_ENGINE_MOONWALK: rc = engine_moonwalk(net, theta, X, T, &steps, out, err); break;
    case VIJP_ENGINE_PURE_FORWARD: rc = engine_pure_forward(net, theta, X, T, &steps, out, err); break;
    case VIJP_ENGINE_REVERSIBLE: rc = engine_reversible(net, theta, X, T, o, &steps, out, err); break;
    case VIJP_ENGINE_CHECKPOINT:
        rc = engine_checkpoint(net, theta, X, T, o ? o->checkpoint_segment : 0, &steps, out, err);
        break;
    default: rc = vijp_fail(err, VIJP_EINVAL, "unknown engine %d", (int)e);
    }
    /* Non-finite results (overflow in a narrow format) are measurements, not
     * errors; so is a vijp that lost rank, whose earlier layers stay valid. */
    if (!rc) out->rebuilt = net->depth;
    else if (rc != VIJP_ESINGULAR) vijp_grads_clear(out);
    else /* the layers past the one that lost rank were never reached: zeros, not leftovers (a
          * ∇θ_i that param_ready freed stays empty) */
        for (size_t i = out->rebuilt; i < net->depth; i++) {
            if (!out->grad_theta[i].fmt) engine_param_grad_init(out, net, X, i, 0);
            vijp_mat_zero(&out->g[i]), vijp_mat_zero(&out->grad_theta[i]);
        }
    return rc;
}

int vijp_engine_run_opts(vijp_engine_kind e, const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                         const vijp_mat *T, const vijp_engine_opts *o, vijp_grads *out, vijp_error *err)
{
    return run(e, net, theta, X, T, o, NULL, NULL, NULL, out, err);
}

int vijp_engine_backprop_watched(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                                 const vijp_engine_opts *o, vijp_backprop_watch watch, vijp_backprop_param param,
                                 void *ctx, vijp_grads *out, vijp_error *err)
{
    if (o && o->param_ready) { /* failed as run() fails: out left empty */
        memset(out, 0, sizeof *out);
        return vijp_fail(err, VIJP_EINVAL, "a watched backprop takes no param_ready (watch.h)");
    }
    return run(VIJP_ENGINE_BACKPROP, net, theta, X, T, o, watch, param, ctx, out, err);
}

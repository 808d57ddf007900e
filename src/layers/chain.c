/* Chains of sub-layers for coupling blocks (see chain.h). */
#include "chain.h"
#include "vijp/error.h"
#include "scratch.h"
#include "state.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_additive, vijp_layer_affine;

size_t vijp_chain_params(const vijp_layer *L, size_t k)
{
    size_t P = 0;
    for (size_t j = 0; j < k; j++) P += vijp_chain_sub(L, j)->type->param_count(vijp_chain_sub(L, j));
    return P;
}

void vijp_chain_state_free(void *state)
{
    vijp_chain_state *s = state;
    for (size_t k = 0; k < s->n; k++) vijp_layer_clear(&s->sub[k]);
    free(s);
}

void *vijp_chain_state_copy(const void *state)
{
    const vijp_chain_state *s = state;
    vijp_chain_state *c = vijp_alloc_array(1, sizeof *c);
    c->exp_scale = s->exp_scale;
    for (; c->n < s->n; c->n++) vijp_layer_copy(&c->sub[c->n], &s->sub[c->n]);
    return c;
}

int vijp_chain_print(const vijp_layer *L, char *buf, size_t size)
{
    size_t at = 0;
    for (size_t k = 0; k < vijp_chain_n(L); k++) {
        char item[128];
        vijp_layer_spec(vijp_chain_sub(L, k), item, sizeof item);
        at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0, "%s%s", k ? "+" : "", item);
    }
    return (int)at;
}

int vijp_chain_parse(vijp_layer *L, const char *items, size_t h, const char *who, vijp_error *err)
{
    char spec[256];
    if (strlen(items) >= sizeof spec) return vijp_fail(err, VIJP_EINVAL, "%s: residual function too long", who);
    snprintf(spec, sizeof spec, "%s", items);
    vijp_chain_state *st = vijp_alloc_array(1, sizeof *st);
    int rc = 0;
    for (char *save = NULL, *item = strtok_r(spec, "+", &save); item && !rc; item = strtok_r(NULL, "+", &save)) {
        if (st->n == VIJP_SUB_MAX) {
            rc = vijp_fail(err, VIJP_EINVAL, "%s: at most %d layers in the residual function", who, VIJP_SUB_MAX);
            break;
        }
        vijp_layer *s = &st->sub[st->n];
        if ((rc = vijp_layer_parse(s, item, h, err))) break;
        st->n++;
        if (s->type == &vijp_layer_additive || s->type == &vijp_layer_affine)
            rc = vijp_fail(err, VIJP_EINVAL, "%s: '%s' cannot be nested in a residual function", who, s->type->name);
        else if (s->in != h || s->out != h)
            rc = vijp_fail(err, VIJP_EDIM, "%s: residual function layer '%s' must keep the half width %zu (it maps "
                           "%zu -> %zu)", who, item, h, s->in, s->out);
        else if (!s->type->mp)
            rc = vijp_fail(err, VIJP_EINVAL, "%s: residual function layer '%s' has no MPFR operators, which the "
                           "block's oracle needs", who, item);
    }
    if (!rc && !st->n) rc = vijp_fail(err, VIJP_EINVAL, "%s: empty residual function", who);
    if (rc) {
        vijp_chain_state_free(st);
        return rc;
    }
    L->state = st;
    return 0;
}

int vijp_layer_coupling_new(vijp_layer *L, const char *type, vijp_layer *sub, size_t n, vijp_error *err)
{
    const vijp_layer_type *T = !strcmp(type, "additive") ? &vijp_layer_additive
                             : !strcmp(type, "affine")   ? &vijp_layer_affine
                                                         : NULL;
    size_t h = n ? sub[0].in : 0;
    int rc = 0;
    memset(L, 0, sizeof *L);
    if (!T) rc = vijp_fail(err, VIJP_EINVAL, "'%s' is not a coupling block (additive, affine)", type);
    else if (n == 0 || n > VIJP_SUB_MAX)
        rc = vijp_fail(err, VIJP_EINVAL, "%s: %zu layers in the residual function, want 1 to %d", type, n, VIJP_SUB_MAX);
    for (size_t k = 0; !rc && k < n; k++) {
        char item[160];
        vijp_layer_spec(&sub[k], item, sizeof item);
        if (sub[k].type == &vijp_layer_additive || sub[k].type == &vijp_layer_affine)
            rc = vijp_fail(err, VIJP_EINVAL, "%s: '%s' cannot be nested in a residual function", type, sub[k].type->name);
        else if (sub[k].in != h || sub[k].out != h)
            rc = vijp_fail(err, VIJP_EDIM, "%s: residual function layer %zu (%s) must keep the half width %zu (it maps "
                           "%zu -> %zu)", type, k, item, h, sub[k].in, sub[k].out);
        else if (!sub[k].type->mp)
            rc = vijp_fail(err, VIJP_EINVAL, "%s: residual function layer %zu (%s) has no MPFR operators, which the "
                           "block's oracle needs", type, k, item);
    }
    if (rc) {
        for (size_t k = 0; k < n; k++) vijp_layer_clear(&sub[k]);
        return rc;
    }
    vijp_chain_state *st = vijp_alloc_array(1, sizeof *st);
    st->n = n;
    memcpy(st->sub, sub, n * sizeof *sub);
    *L = (vijp_layer){T, 2 * h, 2 * h, st};
    return 0;
}

int vijp_chain_init(const vijp_layer *L, size_t chains, vijp_init in, vijp_rng *rng, double *theta)
{
    for (size_t c = 0, off = 0; c < chains; c++)
        for (size_t k = 0; k < vijp_chain_n(L); k++) {
            const vijp_layer *s = vijp_chain_sub(L, k);
            if (s->type->init && s->type->init(s, in, rng, theta + off)) return VIJP_EINVAL;
            off += s->type->param_count(s);
        }
    return 0;
}

void vijp_chain_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B)
{
    for (size_t k = 0; k < vijp_chain_n(L); k++) {
        const vijp_layer *sl = vijp_chain_sub(L, k);
        sl->type->d->forward(sl, cx, th + vijp_chain_params(L, k), acts[k], B, acts[k + 1]);
    }
}

void vijp_chain_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                      const double *u, double *out, double *tmp, int transpose)
{
    size_t len = L->in / 2 * B, k = vijp_chain_n(L);
    memcpy(out, u, len * sizeof *out);
    for (size_t j = 0; j < k; j++) {
        size_t l = transpose ? k - 1 - j : j;
        const vijp_layer *sl = vijp_chain_sub(L, l);
        const double *tl = th + vijp_chain_params(L, l);
        if (transpose) sl->type->d->vjp(sl, cx, tl, acts[l], B, out, tmp);
        else sl->type->d->jvp(sl, cx, tl, acts[l], B, out, tmp);
        memcpy(out, tmp, len * sizeof *out);
    }
}

void vijp_chain_vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                          const double *g, double *gth, double *t1, double *t2)
{
    size_t len = L->in / 2 * B;
    memcpy(t1, g, len * sizeof *t1);
    for (size_t l = vijp_chain_n(L); l-- > 0;) {
        const vijp_layer *sl = vijp_chain_sub(L, l);
        const double *tl = th + vijp_chain_params(L, l);
        if (sl->type->param_count(sl)) sl->type->d->vjp_param(sl, cx, tl, acts[l], B, t1, gth + vijp_chain_params(L, l));
        sl->type->d->vjp(sl, cx, tl, acts[l], B, t1, t2);
        memcpy(t1, t2, len * sizeof *t1);
    }
}

void vijp_halves_split(size_t h, size_t B, const double *X, double *a, double *b)
{
    for (size_t c = 0; c < B; c++)
        memcpy(a + c * h, X + 2 * c * h, h * sizeof *a), memcpy(b + c * h, X + (2 * c + 1) * h, h * sizeof *b);
}

void vijp_halves_join(size_t h, size_t B, const double *a, const double *b, double *Y)
{
    for (size_t c = 0; c < B; c++)
        memcpy(Y + 2 * c * h, a + c * h, h * sizeof *a), memcpy(Y + (2 * c + 1) * h, b + c * h, h * sizeof *b);
}

void vijp_jacobian_by_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J,
                          void (*jvp)(const vijp_layer *, const vijp_kctx *, const double *, const double *, size_t,
                                      const double *, double *))
{
    size_t n = L->in;
    double *X = vijp_scratch(2 * n * n), *E = X + n * n;
    memset(E, 0, n * n * sizeof *E);
    for (size_t j = 0; j < n; j++) memcpy(X + j * n, x, n * sizeof *x), E[j + j * n] = 1;
    jvp(L, cx, th, X, n, E, J);
    free(X);
}

/* Chains of sub-layers for coupling blocks (see chain.h). */
#include "chain.h"
#include "scratch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vijp_layer vijp_chain_layer(const vijp_layer *L, size_t k)
{
    vijp_layer s;
    memset(&s, 0, sizeof s);
    s.type = L->sub[k].type;
    s.in = s.out = L->in / 2;
    s.alpha = L->sub[k].alpha;
    return s;
}

size_t vijp_chain_params(const vijp_layer *L, size_t k)
{
    size_t P = 0;
    for (size_t j = 0; j < k; j++) {
        vijp_layer s = vijp_chain_layer(L, j);
        P += s.type->param_count(&s);
    }
    return P;
}

int vijp_chain_parse(vijp_layer *L, const char *items, size_t h, const char *who, vijp_error *err)
{
    char spec[256];
    if (strlen(items) >= sizeof spec) return vijp_fail(err, VIJP_EINVAL, "%s: residual function too long", who);
    snprintf(spec, sizeof spec, "%s", items);
    L->n_sub = 0;
    for (char *save = NULL, *item = strtok_r(spec, "+", &save); item; item = strtok_r(NULL, "+", &save)) {
        if (L->n_sub == VIJP_SUB_MAX)
            return vijp_fail(err, VIJP_EINVAL, "%s: at most %d layers in the residual function", who, VIJP_SUB_MAX);
        vijp_layer s;
        int rc = vijp_layer_parse(&s, item, h, err);
        if (rc) return rc;
        if (s.n_sub) return vijp_fail(err, VIJP_EINVAL, "%s: '%s' cannot be nested in a residual function", who, s.type->name);
        if (s.in != h || s.out != h || s.iarg[0] || s.iarg[1] || s.iarg[2] || s.iarg[3])
            return vijp_fail(err, VIJP_EDIM, "%s: residual function layer '%s' must keep the half width %zu and take no "
                             "integer arguments", who, item, h);
        L->sub[L->n_sub].type = s.type, L->sub[L->n_sub].alpha = s.alpha;
        L->n_sub++;
    }
    if (!L->n_sub) return vijp_fail(err, VIJP_EINVAL, "%s: empty residual function", who);
    return 0;
}

int vijp_chain_init(const vijp_layer *L, size_t chains, vijp_init in, vijp_rng *rng, double *theta)
{
    for (size_t c = 0, off = 0; c < chains; c++)
        for (size_t k = 0; k < L->n_sub; k++) {
            vijp_layer s = vijp_chain_layer(L, k);
            if (s.type->init && s.type->init(&s, in, rng, theta + off)) return VIJP_EINVAL;
            off += s.type->param_count(&s);
        }
    return 0;
}

void vijp_chain_forward(const vijp_layer *L, const double *th, double **acts, size_t B)
{
    for (size_t k = 0; k < L->n_sub; k++) {
        vijp_layer sl = vijp_chain_layer(L, k);
        sl.type->d->forward(&sl, th + vijp_chain_params(L, k), acts[k], B, acts[k + 1]);
    }
}

void vijp_chain_apply(const vijp_layer *L, const double *th, double **acts, size_t B, const double *u, double *out,
                      double *tmp, int transpose)
{
    size_t len = L->in / 2 * B, k = L->n_sub;
    memcpy(out, u, len * sizeof *out);
    for (size_t j = 0; j < k; j++) {
        size_t l = transpose ? k - 1 - j : j;
        vijp_layer sl = vijp_chain_layer(L, l);
        const double *tl = th + vijp_chain_params(L, l);
        if (transpose) sl.type->d->vjp(&sl, tl, acts[l], B, out, tmp);
        else sl.type->d->jvp(&sl, tl, acts[l], B, out, tmp);
        memcpy(out, tmp, len * sizeof *out);
    }
}

void vijp_chain_vjp_param(const vijp_layer *L, const double *th, double **acts, size_t B, const double *g, double *gth,
                          double *t1, double *t2)
{
    size_t len = L->in / 2 * B;
    memcpy(t1, g, len * sizeof *t1);
    for (size_t l = L->n_sub; l-- > 0;) {
        vijp_layer sl = vijp_chain_layer(L, l);
        const double *tl = th + vijp_chain_params(L, l);
        if (sl.type->param_count(&sl)) sl.type->d->vjp_param(&sl, tl, acts[l], B, t1, gth + vijp_chain_params(L, l));
        sl.type->d->vjp(&sl, tl, acts[l], B, t1, t2);
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

void vijp_jacobian_by_jvp(const vijp_layer *L, const double *th, const double *x, double *J,
                          void (*jvp)(const vijp_layer *, const double *, const double *, size_t, const double *, double *))
{
    size_t n = L->in;
    double *X = vijp_scratch(2 * n * n), *E = X + n * n;
    memset(E, 0, n * n * sizeof *E);
    for (size_t j = 0; j < n; j++) memcpy(X + j * n, x, n * sizeof *x), E[j + j * n] = 1;
    jvp(L, th, X, n, E, J);
    free(X);
}

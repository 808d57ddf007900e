/* Chains of sub-layers for coupling blocks (see chain.h). */
#include "chain.h"
#include "vijp/error.h"
#include "scratch.h"
#include "state.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_additive, vijp_layer_affine;

size_t vijp_chain_params(const vijp_layer *L, int c, size_t k)
{
    size_t P = 0;
    for (size_t j = 0; j < k; j++) P += vijp_chain_sub(L, c, j)->type->param_count(vijp_chain_sub(L, c, j));
    return P;
}

size_t vijp_chain_offset(const vijp_layer *L, int c) { return c ? vijp_chain_params(L, 0, vijp_chain_n(L, 0)) : 0; }

size_t vijp_chain_param_count(const vijp_layer *L)
{
    return vijp_chain_params(L, 0, vijp_chain_n(L, 0)) + vijp_chain_params(L, 1, vijp_chain_n(L, 1));
}

size_t vijp_chain_units(const vijp_layer *L, int c)
{
    size_t u = 0;
    for (size_t k = 0; k < vijp_chain_n(L, c); k++) u += vijp_chain_sub(L, c, k)->out;
    return u;
}

/* The widest input or output of chain c's layers (per sample). */
static size_t widest(const vijp_layer *L, int c)
{
    size_t w = L->in / 2;
    for (size_t k = 0; k < vijp_chain_n(L, c); k++) {
        const vijp_layer *s = vijp_chain_sub(L, c, k);
        if (s->out > w) w = s->out;
    }
    return w;
}

void vijp_chain_state_free(void *state)
{
    vijp_chain_state *s = state;
    for (int c = 0; c < 2; c++)
        for (size_t k = 0; k < s->n[c]; k++) vijp_layer_clear(&s->sub[c][k]);
    free(s);
}

void *vijp_chain_state_copy(const void *state)
{
    const vijp_chain_state *s = state;
    vijp_chain_state *c = vijp_alloc_array(1, sizeof *c);
    c->exp_scale = s->exp_scale;
    for (int j = 0; j < 2; j++)
        for (; c->n[j] < s->n[j]; c->n[j]++) vijp_layer_copy(&c->sub[j][c->n[j]], &s->sub[j][c->n[j]]);
    return c;
}

static size_t print_chain(const vijp_layer *L, int c, char *buf, size_t size, size_t at)
{
    for (size_t k = 0; k < vijp_chain_n(L, c); k++) {
        char item[160];
        vijp_layer_spec(vijp_chain_sub(L, c, k), item, sizeof item);
        at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0, "%s%s", k ? "+" : "", item);
    }
    return at;
}

int vijp_chain_print(const vijp_layer *L, char *buf, size_t size)
{
    char f[1024], g[1024];
    print_chain(L, 0, f, sizeof f, 0), print_chain(L, 1, g, sizeof g, 0);
    if (!strcmp(f, g)) return snprintf(buf, size, "%s", f);
    return snprintf(buf, size, "%s;%s", f, g);
}

/* Layer k of a chain, checked where it stands: not a coupling block, with
 * MPFR operators (the block's oracle composes them), and the last one
 * bringing the chain back to h. */
static int check_sub(const vijp_layer *s, size_t k, size_t n, size_t h, const char *who, vijp_error *err)
{
    char item[160];
    vijp_layer_spec(s, item, sizeof item);
    if (s->type == &vijp_layer_additive || s->type == &vijp_layer_affine)
        return vijp_fail(err, VIJP_EINVAL, "%s: '%s' cannot be nested in a residual function", who, s->type->name);
    if (!s->type->mp)
        return vijp_fail(err, VIJP_EINVAL, "%s: residual function layer '%s' has no MPFR operators, which the "
                         "block's oracle needs", who, item);
    if (k + 1 == n && s->out != h)
        return vijp_fail(err, VIJP_EDIM, "%s: a residual function must map the half width %zu back to %zu, but its "
                         "last layer '%s' gives %zu", who, h, h, item, s->out);
    return 0;
}

/* One "ITEM+ITEM…" list into chain c, each item at the width the one
 * before it gives. */
static int parse_chain(vijp_chain_state *st, int c, char *spec, size_t h, const char *who, vijp_error *err)
{
    size_t n = 1, width = h;
    for (const char *p = spec; *p; p++) n += *p == '+';
    if (n > VIJP_SUB_MAX)
        return vijp_fail(err, VIJP_EINVAL, "%s: at most %d layers in a residual function", who, VIJP_SUB_MAX);
    int rc = 0;
    for (char *save = NULL, *item = strtok_r(spec, "+", &save); item && !rc; item = strtok_r(NULL, "+", &save)) {
        vijp_layer *s = &st->sub[c][st->n[c]];
        if ((rc = vijp_layer_parse(s, item, width, err))) break;
        st->n[c]++;
        rc = check_sub(s, st->n[c] - 1, n, h, who, err);
        width = s->out;
    }
    if (!rc && !st->n[c]) rc = vijp_fail(err, VIJP_EINVAL, "%s: empty residual function", who);
    return rc;
}

int vijp_chain_parse(vijp_layer *L, const char *items, size_t h, const char *who, vijp_error *err)
{
    char spec[512];
    if (strlen(items) >= sizeof spec) return vijp_fail(err, VIJP_EINVAL, "%s: residual functions too long", who);
    snprintf(spec, sizeof spec, "%s", items);
    char *second = strchr(spec, ';');
    if (second) *second++ = 0;
    vijp_chain_state *st = vijp_alloc_array(1, sizeof *st);
    int rc = parse_chain(st, 0, spec, h, who, err);
    if (!rc && second) rc = parse_chain(st, 1, second, h, who, err);
    for (size_t k = 0; !rc && !second && k < st->n[0]; k++) /* one list: G's layers are F's */
        vijp_layer_copy(&st->sub[1][k], &st->sub[0][k]), st->n[1]++;
    if (rc) {
        vijp_chain_state_free(st);
        return rc;
    }
    L->state = st;
    return 0;
}

/* The layers f[0 … n) as chain c, checked as a parsed chain is. */
static int adopt_chain(vijp_chain_state *st, int c, vijp_layer *f, size_t n, size_t h, const char *who, vijp_error *err)
{
    if (n == 0 || n > VIJP_SUB_MAX)
        return vijp_fail(err, VIJP_EINVAL, "%s: %zu layers in a residual function, want 1 to %d", who, n, VIJP_SUB_MAX);
    int rc = 0;
    for (size_t k = 0, width = h; k < n && !rc; width = f[k].out, k++) {
        if (f[k].in != width)
            rc = vijp_fail(err, VIJP_EDIM, "%s: residual function layer %zu takes %zu units, but receives %zu", who, k,
                           f[k].in, width);
        else rc = check_sub(&f[k], k, n, h, who, err);
    }
    if (!rc) memcpy(st->sub[c], f, n * sizeof *f), st->n[c] = n;
    return rc;
}

int vijp_layer_coupling_new(vijp_layer *L, const char *type, vijp_layer *f, size_t nf, vijp_layer *g, size_t ng,
                            vijp_error *err)
{
    const vijp_layer_type *T = !strcmp(type, "additive") ? &vijp_layer_additive
                             : !strcmp(type, "affine")   ? &vijp_layer_affine
                                                         : NULL;
    size_t h = nf ? f[0].in : 0;
    memset(L, 0, sizeof *L);
    vijp_chain_state *st = vijp_alloc_array(1, sizeof *st);
    int rc = T ? 0 : vijp_fail(err, VIJP_EINVAL, "'%s' is not a coupling block (additive, affine)", type);
    if (!rc) rc = adopt_chain(st, 0, f, nf, h, type, err);
    if (!rc && ng) rc = adopt_chain(st, 1, g, ng, h, type, err);
    if (!rc && !ng)
        for (size_t k = 0; k < nf; k++) vijp_layer_copy(&st->sub[1][k], &f[k]), st->n[1]++;
    if (rc) {
        for (size_t k = 0; k < nf; k++) vijp_layer_clear(&f[k]);
        for (size_t k = 0; k < ng; k++) vijp_layer_clear(&g[k]);
        free(st);
        return rc;
    }
    *L = (vijp_layer){T, 2 * h, 2 * h, st};
    return 0;
}

int vijp_chain_init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t off = 0;
    for (int c = 0; c < 2; c++)
        for (size_t k = 0; k < vijp_chain_n(L, c); k++) {
            const vijp_layer *s = vijp_chain_sub(L, c, k);
            size_t P = s->type->param_count(s);
            /* a block without parameters may have theta NULL: no pointer arithmetic on it */
            if (P && s->type->init && s->type->init(s, in, rng, theta + off)) return VIJP_EINVAL;
            off += P;
        }
    return 0;
}

void vijp_chain_forward(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B)
{
    th += vijp_chain_offset(L, c);
    for (size_t k = 0; k < vijp_chain_n(L, c); k++) {
        const vijp_layer *sl = vijp_chain_sub(L, c, k);
        sl->type->d->forward(sl, cx, th + vijp_chain_params(L, c, k), acts[k], B, acts[k + 1]);
    }
}

void vijp_chain_apply(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                      const double *u, double *out, int transpose)
{
    size_t h = L->in / 2, k = vijp_chain_n(L, c), w = widest(L, c) * B;
    double *a = vijp_scratch(2 * w), *b = a + w;
    th += vijp_chain_offset(L, c);
    memcpy(a, u, h * B * sizeof *a);
    for (size_t j = 0; j < k; j++) {
        size_t l = transpose ? k - 1 - j : j;
        const vijp_layer *sl = vijp_chain_sub(L, c, l);
        const double *tl = th + vijp_chain_params(L, c, l);
        if (transpose) sl->type->d->vjp(sl, cx, tl, acts[l], B, a, b);
        else sl->type->d->jvp(sl, cx, tl, acts[l], B, a, b);
        double *t = a;
        a = b, b = t;
    }
    memcpy(out, a, h * B * sizeof *out);
    free(a < b ? a : b);
}

void vijp_chain_vjp_param(const vijp_layer *L, int c, const vijp_kctx *cx, const double *th, double **acts, size_t B,
                          const double *g, double *gth)
{
    size_t off = vijp_chain_offset(L, c), w = widest(L, c) * B;
    double *a = vijp_scratch(2 * w), *b = a + w;
    th += off, gth += off;
    memcpy(a, g, L->in / 2 * B * sizeof *a);
    for (size_t l = vijp_chain_n(L, c); l-- > 0;) {
        const vijp_layer *sl = vijp_chain_sub(L, c, l);
        const double *tl = th + vijp_chain_params(L, c, l);
        if (sl->type->param_count(sl)) sl->type->d->vjp_param(sl, cx, tl, acts[l], B, a, gth + vijp_chain_params(L, c, l));
        if (l) { /* the cotangent of layer l's input, for the layers before it */
            sl->type->d->vjp(sl, cx, tl, acts[l], B, a, b);
            double *t = a;
            a = b, b = t;
        }
    }
    free(a < b ? a : b);
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

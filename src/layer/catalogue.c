/* The built-in catalogue's per-instance accessors (include/vijp/catalogue.h).
 *
 * They sit here, below the catalogue, so that the MPFR oracles and emu/ read
 * instance arguments without calling up into src/layers/.  So they know each
 * type by its name, not by its descriptor's address: the registry
 * (src/layers/registry.c) holds the built-in types from the start and
 * vijp_layer_register refuses a type whose name it already holds, so no
 * plugin can take a built-in name, and a layer whose type came from the
 * registry and is named "leaky" is the built-in leaky layer, with that
 * type's state (states.h). */
#include "vijp/catalogue.h"
#include "states.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* L's state, checking that L is of the built-in type named `name` or, where
 * `other` is not NULL, of the one named `other`: an accessor called on
 * another type is a programming error, reported and stopped here. */
static const void *state_of(const vijp_layer *L, const char *name, const char *other, const char *accessor)
{
    const char *is = L && L->type ? L->type->name : NULL;
    if (!is || (strcmp(is, name) && (!other || strcmp(is, other))) || !L->state) {
        fprintf(stderr, "vijp: %s called on a %s layer\n", accessor, L && L->type ? L->type->name : "(no)");
        abort();
    }
    return L->state;
}

double vijp_leaky_slope(const vijp_layer *L) { return *(const double *)state_of(L, "leaky", NULL, "vijp_leaky_slope"); }

const vijp_conv_args *vijp_conv_get(const vijp_layer *L) { return state_of(L, "conv1d", "conv2d", "vijp_conv_get"); }

const vijp_pool_args *vijp_pool_get(const vijp_layer *L)
{
    const char *is = L && L->type ? L->type->name : "";
    return state_of(L, !strcmp(is, "avgpool2d") ? "avgpool2d" : "maxpool1d", "maxpool2d", "vijp_pool_get");
}

size_t vijp_avgpool_window(const vijp_layer *L)
{
    return *(const size_t *)state_of(L, "avgpool", NULL, "vijp_avgpool_window");
}

const vijp_squeeze_args *vijp_squeeze_get(const vijp_layer *L) { return state_of(L, "squeeze", NULL, "vijp_squeeze_get"); }

size_t vijp_inv1x1_channels(const vijp_layer *L)
{
    return *(const size_t *)state_of(L, "inv1x1", NULL, "vijp_inv1x1_channels");
}

double vijp_elu_alpha(const vijp_layer *L) { return *(const double *)state_of(L, "elu", NULL, "vijp_elu_alpha"); }

/* Plain softplus has no state (its type is the registry's); with arguments
 * the instance's type is softplus_beta, reached only through softplus's
 * parse (src/layers/softplus_beta.c), and holds them. */
vijp_softplus_args vijp_softplus_get(const vijp_layer *L)
{
    if (L && L->type && !strcmp(L->type->name, "softplus") && !L->state) return (vijp_softplus_args){1.0, INFINITY};
    return *(const vijp_softplus_args *)state_of(L, "softplus_beta", NULL, "vijp_softplus_get");
}

/* relu6 is hardtanh:0/6 without a state. */
vijp_hardtanh_args vijp_hardtanh_get(const vijp_layer *L)
{
    if (L && L->type && !strcmp(L->type->name, "relu6")) return (vijp_hardtanh_args){0.0, 6.0};
    return *(const vijp_hardtanh_args *)state_of(L, "hardtanh", NULL, "vijp_hardtanh_get");
}

size_t vijp_prelu_channels(const vijp_layer *L)
{
    return *(const size_t *)state_of(L, "prelu", NULL, "vijp_prelu_channels");
}

static const vijp_chain_state *coupling_state(const vijp_layer *L, const char *accessor)
{
    return state_of(L, "additive", "affine", accessor);
}

size_t vijp_coupling_count(const vijp_layer *L, int which)
{
    return coupling_state(L, "vijp_coupling_count")->n[which != 0];
}

const vijp_layer *vijp_coupling_sub(const vijp_layer *L, int which, size_t k)
{
    const vijp_chain_state *s = coupling_state(L, "vijp_coupling_sub");
    if (k >= s->n[which != 0]) {
        fprintf(stderr, "vijp: vijp_coupling_sub(%d, %zu) of a %zu-layer chain\n", which, k, s->n[which != 0]);
        abort();
    }
    return &s->sub[which != 0][k];
}

int vijp_affine_exp_scale(const vijp_layer *L)
{
    const vijp_chain_state *s = coupling_state(L, "vijp_affine_exp_scale");
    return s->exp_scale;
}

const vijp_linear_args *vijp_linear_get(const vijp_layer *L) { return state_of(L, "linear", NULL, "vijp_linear_get"); }

const vijp_attention_args *vijp_attention_get(const vijp_layer *L)
{
    return state_of(L, "attention", NULL, "vijp_attention_get");
}

static const vijp_residual_state *residual_state(const vijp_layer *L, const char *accessor)
{
    return state_of(L, "residual", NULL, accessor);
}

size_t vijp_residual_count(const vijp_layer *L, int skip)
{
    const vijp_residual_state *s = residual_state(L, "vijp_residual_count");
    return skip ? s->np : s->nf;
}

const vijp_layer *vijp_residual_sub(const vijp_layer *L, int skip, size_t k)
{
    const vijp_residual_state *s = residual_state(L, "vijp_residual_sub");
    if (k >= (skip ? s->np : s->nf)) {
        fprintf(stderr, "vijp: vijp_residual_sub(%d, %zu) of a block with %zu + %zu layers\n", skip, k, s->nf, s->np);
        abort();
    }
    return &s->sub[(skip ? s->nf : 0) + k];
}

int vijp_layer_has_inverse(const vijp_layer *L)
{
    const vijp_layer_type *T = L->type;
    if (L->in != L->out || !T->d->inverse || !T->mp || !T->mp->inverse) return 0;
    return strcmp(T->name, "residual") || !vijp_residual_count(L, 1); /* P's blocks refuse (residual.c) */
}

/* The layer registry (include/vijp/layer.h): the built-in catalogue's types,
 * then those registered at run time (plugins, vijp/plugin.h); lookup by
 * name, and an instance parsed from its spec item.
 *
 * It lives with the catalogue, above src/layer/: its table names every
 * built-in descriptor, and the coupling blocks (chain.c) parse their
 * sub-layers through vijp_layer_parse.  The built-in names are in the table
 * from the start and vijp_layer_register refuses a name it already holds,
 * so no other type can take one: the accessors of vijp/catalogue.h
 * (src/layer/catalogue.c) rely on that to know a built-in type by name. */
#include "vijp/layer.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "legacy.h"
#include <stdlib.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_dense, vijp_layer_leaky_relu, vijp_layer_relu, vijp_layer_tanh,
    vijp_layer_sigmoid, vijp_layer_softplus, vijp_layer_silu, vijp_layer_gelu, vijp_layer_mish,
    vijp_layer_layernorm, vijp_layer_softmax, vijp_layer_additive, vijp_layer_conv1d, vijp_layer_conv2d,
    vijp_layer_avgpool, vijp_layer_squeeze, vijp_layer_affine, vijp_layer_inv1x1, vijp_layer_linear,
    vijp_layer_attention, vijp_layer_residual, vijp_layer_elu, vijp_layer_selu, vijp_layer_hardtanh,
    vijp_layer_relu6, vijp_layer_hardswish, vijp_layer_softsign, vijp_layer_prelu, vijp_layer_identity,
    vijp_layer_dropout, vijp_layer_flatten, vijp_layer_transpose, vijp_layer_batchnorm, vijp_layer_actnorm,
    vijp_layer_groupnorm, vijp_layer_logsoftmax, vijp_layer_avgpool2d, vijp_layer_maxpool1d, vijp_layer_maxpool2d;

/* The built-in catalogue first, then registered types; VIJP_LAYER_TYPES_MAX
 * slots so that registration never allocates. */
static const vijp_layer_type *registry[VIJP_LAYER_TYPES_MAX] = {
    &vijp_layer_dense, &vijp_layer_leaky_relu, &vijp_layer_relu, &vijp_layer_tanh,
    &vijp_layer_sigmoid, &vijp_layer_softplus, &vijp_layer_silu, &vijp_layer_gelu, &vijp_layer_mish,
    &vijp_layer_layernorm, &vijp_layer_softmax, &vijp_layer_additive, &vijp_layer_conv1d, &vijp_layer_conv2d,
    &vijp_layer_avgpool, &vijp_layer_squeeze, &vijp_layer_affine, &vijp_layer_inv1x1, &vijp_layer_linear,
    &vijp_layer_attention, &vijp_layer_residual, &vijp_layer_elu, &vijp_layer_selu, &vijp_layer_hardtanh,
    &vijp_layer_relu6, &vijp_layer_hardswish, &vijp_layer_softsign, &vijp_layer_prelu, &vijp_layer_identity,
    &vijp_layer_dropout, &vijp_layer_flatten, &vijp_layer_transpose, &vijp_layer_batchnorm, &vijp_layer_actnorm,
    &vijp_layer_groupnorm, &vijp_layer_logsoftmax, &vijp_layer_avgpool2d, &vijp_layer_maxpool1d,
    &vijp_layer_maxpool2d,
};
static size_t n_registered = 39;

const vijp_layer_type *const *vijp_layer_types(size_t *count)
{
    *count = n_registered;
    return registry;
}

const vijp_layer_type *vijp_layer_type_find(const char *name)
{
    for (size_t i = 0; i < n_registered; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

int vijp_registering_abi = 0;

/* A type from a plugin built for an older ABI (6, 7 or 8), registered as a
 * copy of its descriptor that shows vijp only what that plugin can be
 * trusted with; both live as long as the process, as the plugin's own
 * descriptor does (one refused by the checks is a few dozen bytes, not
 * freed: the loader keeps the plugin mapped too).
 *   - ABI 6 to 8: its descriptor ends before emu_native (plugin.h), which
 *     the copy has NULL.
 *   - ABI 6: its vijp_interval_ops ends after deriv_enclose, so the copy's
 *     table holds deriv_enclose alone (ABI 7's members NULL).
 *   - ABI 6 and 7: vijp_format grew in ABI 8 (ftz and stochastic rounding,
 *     format.h), and the type's MPFR operators receive a vijp_format that
 *     the plugin's code may copy into an object of the old, shorter size
 *     (vo_* would then read the new members past its end) or fill through
 *     vijp_format_accumulator (which would write past it).  Nothing at load
 *     tells whether it does, so the copy has no MPFR operators (the type
 *     runs in double; MPFR formats refuse it with a message) and no
 *     Lipschitz constant, which needs them.  Its double operators and
 *     interval enclosures never see a vijp_format. */
static const vijp_layer_type *legacy_copy(const vijp_layer_type *T, int abi)
{
    vijp_layer_type *copy = vijp_alloc(sizeof *copy);
    memset(copy, 0, sizeof *copy);
    memcpy(copy, T, offsetof(vijp_layer_type, emu_native)); /* before ABI 9 the descriptor ended there */
    if (abi >= 8) return copy; /* ABI 8: vijp_layer_type's new last member alone */
    copy->mp = copy->emu = NULL;
    if (T->interval) {
        vijp_interval_ops *ops = vijp_alloc(sizeof *ops);
        memset(ops, 0, sizeof *ops);
        ops->deriv_enclose = T->interval->deriv_enclose; /* the one member ABI 6 had */
        if (abi >= 7) ops->jacobian_box = T->interval->jacobian_box; /* MPFI only, no vijp_format */
        copy->interval = ops;
    }
    return copy;
}

int vijp_layer_register(const vijp_layer_type *T, vijp_error *err)
{
    if (vijp_registering_abi && vijp_registering_abi < 9) T = legacy_copy(T, vijp_registering_abi); /* as ABI 9 sees it */
    int rc = vijp_layer_type_check(T, err);
    if (rc) return rc;
    if (vijp_layer_type_find(T->name))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' is already registered", T->name);
    if (n_registered == VIJP_LAYER_TYPES_MAX)
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s': the registry is full (%d types)", T->name,
                         VIJP_LAYER_TYPES_MAX);
    registry[n_registered++] = T;
    return 0;
}

/* An instance's own contradictions (its parameter count and declarations
 * are known only once parsed). */
static int check_instance(const vijp_layer *L, vijp_error *err)
{
    const vijp_layer_type *T = L->type;
    size_t P = T->param_count(L);
    if (P && T->residual == VIJP_RESIDUAL_DERIV)
        return vijp_fail(err, VIJP_EINVAL, "%s has %zu parameters but residual kind DERIV, which keeps only f' and "
                         "would drop their gradient", T->name, P);
    if (P && (!T->d->vjp_param || (T->mp && !T->mp->vjp_param) || !T->init))
        return vijp_fail(err, VIJP_EINVAL, "%s has %zu parameters but no %s", T->name, P,
                         !T->init ? "initialiser (init)" : "parameter gradient (vjp_param)");
    if ((T->declare(L) & VIJP_DECL_INVERTIBLE) && !T->d->inverse)
        return vijp_fail(err, VIJP_EINVAL, "%s declares itself invertible but has no inverse", T->name);
    if ((T->declare(L) & VIJP_DECL_SUBMERSIVE) && (T->declare(L) & VIJP_DECL_NEVER_SUBMERSIVE))
        return vijp_fail(err, VIJP_EINVAL, "%s declares itself both submersive and never submersive", T->name);
    return 0;
}

/* Levenshtein distance of a and b (names of at most 31 characters). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 31 || lb > 31) return 99;
    int row[32];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v) v = up + 1;
            if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
            diag = up, row[j] = v;
        }
    }
    return row[lb];
}

int vijp_layer_parse(vijp_layer *L, const char *item, size_t in_width, vijp_error *err)
{
    if (!item) return memset(L, 0, sizeof *L), vijp_fail(err, VIJP_EINVAL, "no layer given (NULL)");
    char name[32];
    const char *colon = strchr(item, ':');
    size_t len = colon ? (size_t)(colon - item) : strlen(item);
    memset(L, 0, sizeof *L);
    if (len == 0 || len >= sizeof name) return vijp_fail(err, VIJP_EINVAL, "bad layer '%s' in spec", item);
    memcpy(name, item, len);
    name[len] = 0;
    const vijp_layer_type *T = vijp_layer_type_find(name);
    if (!T) {
        /* The closest name within two edits, then as many of the known as
         * a message holds (all of them once overflowed it, cut mid-word). */
        const char *near = NULL;
        int best = 3;
        for (size_t i = 0; i < n_registered; i++) {
            int d = edit_distance(name, registry[i]->name);
            if (d < best) best = d, near = registry[i]->name;
        }
        char known[160] = "";
        size_t at = 0, listed = 0;
        for (; listed < n_registered; listed++) {
            size_t need = strlen(registry[listed]->name) + (listed ? 2 : 0);
            if (at + need + 1 >= sizeof known) break;
            at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", listed ? ", " : "", registry[listed]->name);
        }
        char more[64] = "";
        if (listed < n_registered) snprintf(more, sizeof more, ", and %zu more: vijp grad --help", n_registered - listed);
        return vijp_fail(err, VIJP_EINVAL, "unknown layer '%s'%s%s%s (known: %s%s)", name, near ? "; did you mean " : "",
                         near ? near : "", near ? "?" : "", known, more);
    }
    L->type = T;
    int rc = T->parse(L, colon ? colon + 1 : NULL, in_width, err);
    if (!rc && (L->in == 0 || L->out == 0 || L->in > VIJP_WIDTH_MAX || L->out > VIJP_WIDTH_MAX))
        rc = vijp_fail(err, VIJP_EDIM, "%s maps %zu -> %zu units: widths must be in [1, %u]", T->name, L->in, L->out,
                       VIJP_WIDTH_MAX);
    if (!rc) rc = check_instance(L, err);
    if (rc) vijp_layer_clear(L);
    return rc;
}

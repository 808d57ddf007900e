/* Per-instance state of the catalogue's layer types (see vijp_layer.state):
 * parse allocates it, the accessors in include/vijp/catalogue.h read it. */
#ifndef VIJP_LAYERS_STATE_H
#define VIJP_LAYERS_STATE_H

#include "vijp/layer.h"
#include <stdio.h>
#include <stdlib.h>

/* A new zeroed state of `size` bytes for L, or VIJP_ENOMEM. */
static inline int vijp_state_new(vijp_layer *L, size_t size, vijp_error *err)
{
    if (!(L->state = calloc(1, size))) return vijp_fail(err, VIJP_ENOMEM, "out of memory parsing a %s layer", L->type->name);
    return 0;
}

/* L's state, checking that L is of type T: an accessor called on another
 * type is a programming error, reported and stopped here. */
static inline const void *vijp_state_of(const vijp_layer *L, const vijp_layer_type *T, const char *accessor)
{
    if (!L || L->type != T || !L->state) {
        fprintf(stderr, "vijp: %s called on a %s layer\n", accessor, L && L->type ? L->type->name : "(no)");
        abort();
    }
    return L->state;
}

#endif

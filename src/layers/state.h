/* Per-instance state of the catalogue's layer types (see vijp_layer.state):
 * parse allocates it, the accessors in include/vijp/catalogue.h read it. */
#ifndef VIJP_LAYERS_STATE_H
#define VIJP_LAYERS_STATE_H

#include "vijp/layer.h"
#include "vijp/error.h"
#include <stdio.h>
#include <stdlib.h>

/* A new zeroed state of `size` bytes for L (out of memory is fatal). */
static inline void vijp_state_new(vijp_layer *L, size_t size) { L->state = vijp_alloc(size); }

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

/* Per-instance state of the catalogue's layer types (see vijp_layer.state):
 * parse allocates it, the accessors in include/vijp/catalogue.h
 * (src/layer/catalogue.c; the layouts in src/layer/states.h) read it. */
#ifndef VIJP_LAYERS_STATE_H
#define VIJP_LAYERS_STATE_H

#include "vijp/layer.h"
#include "vijp/error.h"

/* A new zeroed state of `size` bytes for L (out of memory is fatal). */
static inline void vijp_state_new(vijp_layer *L, size_t size) { L->state = vijp_alloc(size); }

#endif

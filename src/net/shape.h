/* A net's layers without its parameters.  Internal to src/. */
#ifndef VIJP_NET_SHAPE_H
#define VIJP_NET_SHAPE_H

#include "vijp/net.h"

/* dst := src's depth, width, loss and layers (each copied, with its
 * arguments: vijp_layer_copy), no parameter array and nothing given: what
 * a run reads of a net once it has rounded θ (drift/drift.c), and the
 * start of vijp_net_copy.  vijp_net_free frees it. */
void net_copy_shape(vijp_net *dst, const vijp_net *src);

#endif

/* The per-instance states of the built-in types that include/vijp/catalogue.h's
 * accessors read (catalogue.c) and the types' parse in src/layers/ writes,
 * in vijp_layer.state:
 *   leaky            one double, the slope
 *   elu              one double, α
 *   softplus         vijp_softplus_args (catalogue.h) with arguments, none without
 *   hardtanh         vijp_hardtanh_args (catalogue.h); relu6 none
 *   prelu            one size_t, the channel count
 *   avgpool          one size_t, the window
 *   inv1x1           one size_t, the channel count
 *   linear           vijp_linear_args (catalogue.h)
 *   attention        vijp_attention_args (catalogue.h)
 *   squeeze          vijp_squeeze_args (catalogue.h)
 *   conv1d, conv2d   vijp_conv_args (catalogue.h)
 *   avgpool2d, maxpool1d, maxpool2d   vijp_pool_args (catalogue.h)
 *   additive, affine vijp_chain_state (below; src/layers/chain.h)
 *   residual         vijp_residual_state (below; src/layers/residual.c) */
#ifndef VIJP_LAYER_STATES_H
#define VIJP_LAYER_STATES_H

#include "vijp/catalogue.h"

/* A coupling block's state: its two residual functions' layers, F's and
 * G's (S's and T's), each layer owning its own state, and for affine the
 * scale.  A spec names one chain for both (parsed once, then copied); a
 * JSON net may give two different ones. */
typedef struct {
    size_t n[2];
    vijp_layer sub[2][VIJP_SUB_MAX];
    int exp_scale;
} vijp_chain_state;

/* A residual block's state: f's layers sub[0 … nf), then P's sub[nf … nf + np),
 * each owning its own state. */
typedef struct {
    size_t nf, np;
    vijp_layer sub[VIJP_RESIDUAL_SUB_MAX];
} vijp_residual_state;

#endif

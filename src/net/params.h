/* Parameters given from files (JSON nets, --weights): the checks and the
 * mapping from PyTorch's layout into each layer type's θ order.  Internal
 * to src/. */
#ifndef VIJP_NET_PARAMS_H
#define VIJP_NET_PARAMS_H

#include "vijp/array_io.h"
#include "vijp/layer.h"

/* *theta (P values; allocated here, after the checks, when NULL) from a flat vector in the type's own order: a 1-D array
 * of length P.  where prefixes the message ("net.json: layers[2].params.theta"). */
VIJP_MUST_CHECK int net_params_theta(const vijp_layer *L, const vijp_array *t, double **theta, const char *where,
                                     vijp_error *err);
/* theta from PyTorch's {weight, bias} (dense, conv1d, conv2d only); where
 * names the params object, and the message adds ".weight" or ".bias". */
VIJP_MUST_CHECK int net_params_torch(const vijp_layer *L, const vijp_array *w, const vijp_array *b, double **theta,
                                     const char *where, vijp_error *err);
/* Whether the type takes PyTorch's layout. */
int net_params_torch_layout(const vijp_layer *L);

#endif

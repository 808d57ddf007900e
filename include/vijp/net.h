/* Networks: a chain of layers built from a compact spec, with a loss. */
#ifndef VIJP_NET_H
#define VIJP_NET_H

#include "vijp/api.h"
#include <stddef.h>
#include "vijp/error.h"
#include <stdint.h>
#include "vijp/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    VIJP_LOSS_SQUARE, /* ½‖h_D − y‖², gradient h_D − y */
    VIJP_LOSS_LINEAR  /* ⟨c, h_D⟩, gradient c */
} vijp_loss_kind;

typedef struct {
    size_t depth;         /* D, number of layers */
    size_t width;         /* n_0, the input width */
    vijp_layer *layers;   /* layers[i-1] is f_i */
    double **theta;       /* master parameters in double, one array per layer (NULL if none) */
    vijp_loss_kind loss;
    /* given[i] != 0: layer i's parameters came from a file (a JSON net's
     * "params", --weights), and vijp_net_init leaves them as they are.
     * NULL: none was given. */
    unsigned char *given;
    int loss_given; /* a JSON net's "loss" field set loss */
} vijp_net;

/* Build a network from a spec such as "dense:64,leaky:0.1", cycled to depth
 * layers, or from a JSON net file (a spec ending in ".json":
 * vijp_net_load_json; depth 0 or its number of layers, width 0 or its
 * width).  width = 0 takes the first layer's input width from the spec
 * (dense:M gives M, dense:MxN gives N); elementwise first layers need it.
 * Parameters are left zero: call vijp_net_init. */
VIJP_API VIJP_MUST_CHECK int vijp_net_build(vijp_net *net, const char *spec, size_t depth, size_t width,
                   vijp_error *err);
/* The layers alone (theta[i] all NULL): shapes and arguments checked, no
 * parameter allocated, e.g. to size a run before making it. */
VIJP_API VIJP_MUST_CHECK int vijp_net_shape(vijp_net *net, const char *spec, size_t depth, size_t width, vijp_error *err);
/* A JSON net, format "vijp-net/1" (docs/net.schema.json,
 * docs/nets.md): its layers and the parameters it gives (net->given), the others
 * left zero for vijp_net_init.  Every problem is VIJP_EINVAL (VIJP_EIO for a
 * file that cannot be read) with a message naming the file, the layer index
 * and the field: "net.json: layers[2].params.weight: shape (3, 2), want ...". */
VIJP_API VIJP_MUST_CHECK int vijp_net_load_json(vijp_net *net, const char *path, vijp_error *err);
/* The same from memory: name stands for the text in messages, and parameter
 * files are relative to the folder base (NULL: any parameter reference is
 * refused, no file is touched). */
VIJP_API VIJP_MUST_CHECK int vijp_net_parse_json(vijp_net *net, const char *text, size_t len, const char *name, const char *base,
                                        vijp_error *err);
/* Whether spec names a JSON net file (ends in ".json"). */
VIJP_API int vijp_net_spec_is_json(const char *spec);
/* Parameters for a built net from a safetensors file (PyTorch's
 * nn.Sequential state_dict names): "<i>.weight" and "<i>.bias" (i the 0-based
 * layer index; dense, conv1d, conv2d in PyTorch's layout) or "<i>.theta" (θ
 * in the type's order).  Layers without a tensor are left alone; the others
 * are marked given.  A tensor naming no layer with parameters is an error. */
VIJP_API VIJP_MUST_CHECK int vijp_net_load_weights(vijp_net *net, const char *path, vijp_error *err);
/* Seeded initialisation (no global random state) of every layer whose
 * parameters were not given. */
VIJP_API VIJP_MUST_CHECK int vijp_net_init(vijp_net *net, vijp_init init, uint64_t seed, vijp_error *err);
VIJP_API void vijp_net_free(vijp_net *net);
/* A run's net, parsed once (a JSON net's file read once): the layers and
 * the parameters the description gives (net->given), no other parameter
 * array.  vijp_net_copy makes a built net of it for each computation. */
VIJP_API VIJP_MUST_CHECK int vijp_net_template(vijp_net *net, const char *spec, size_t depth, size_t width,
                                      vijp_error *err);
/* dst = a built net from src (a vijp_net_template, vijp_net_shape or
 * vijp_net_build net): every layer and given parameter copied, every other
 * parameter array allocated and zero, ready for vijp_net_init.  src is only
 * read, so threads may copy one template at once. */
VIJP_API void vijp_net_copy(vijp_net *dst, const vijp_net *src);
/* Output width m_D. */
VIJP_API size_t vijp_net_out_width(const vijp_net *net);
VIJP_API size_t vijp_net_param_count(const vijp_net *net);

/* Parse "gaussian", "orthogonal", "kaiming-uniform" or "scaled:G". */
VIJP_API VIJP_MUST_CHECK int vijp_init_parse(const char *s, vijp_init *init, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_loss_parse(const char *s, vijp_loss_kind *loss, vijp_error *err);

/* Parameters of every layer rounded to format f: theta[i] is a P_i × 1 matrix
 * (0 × 1 for layers without parameters).  Fails with VIJP_EDOMAIN on NaN/Inf. */
VIJP_API VIJP_MUST_CHECK int vijp_net_params(const vijp_net *net, const vijp_format *f, vijp_mat *theta, vijp_error *err);
VIJP_API void vijp_net_params_clear(const vijp_net *net, vijp_mat *theta);

/* Seeded input batch X (n_0 × B) and loss data T (m_D × B: target y or vector c). */
VIJP_API void vijp_net_sample(const vijp_net *net, size_t B, uint64_t seed, double *X, double *T);

#ifdef __cplusplus
}
#endif

#endif

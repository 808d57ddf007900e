/* The built-in catalogue's per-instance arguments.  A layer instance keeps
 * its type's parsed arguments as opaque state (vijp_layer.state); the double
 * layers, their MPFR oracles and the tests read them only through these
 * accessors, each of which checks the instance's type (a wrong type is a
 * programming error: it aborts with a message). */
#ifndef VIJP_CATALOGUE_H
#define VIJP_CATALOGUE_H

#include "vijp/api.h"
#include <stddef.h>
#include "vijp/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* leaky:ALPHA */
VIJP_API double vijp_leaky_slope(const vijp_layer *L);

/* conv1d:CxK[sS][:out=D][:pad=P][:circular|:reflect] and
 * conv2d:CxKxH[sS][...]: torch's Conv1d/Conv2d(C, D, K, S, P, padding_mode). */
typedef struct {
    size_t channels, kernel; /* C input channels, K >= 1 (K × K in 2-D) */
    size_t stride;           /* S >= 1 (2-D: both directions) */
    size_t rows;             /* grid rows H in 2-D, 0 in 1-D */
    int circular;            /* padding: 1 circular, 0 zero or reflect */
    size_t out_channels;     /* D (default C) */
    size_t pad;              /* P on each side (default K/2, rounded down; 2-D: both directions) */
    int reflect;             /* padding: 1 reflect (torch's 'reflect') */
    int deficient;           /* 1: J loses rank at every weight (a 1 x 1 strided convolution widening channels,
                              * ResNet's downsampling skip): no vijp of its own; inside a residual block the
                              * block's J is what must have full rank */
} vijp_conv_args;
VIJP_API const vijp_conv_args *vijp_conv_get(const vijp_layer *L);

/* avgpool2d:CxKxH[sS], maxpool1d:CxK[sS], maxpool2d:CxKxH[sS]. */
typedef struct {
    size_t channels, kernel; /* C, window K (K × K in 2-D) */
    size_t stride;           /* S >= 1, default K (2-D: both directions) */
    size_t rows;             /* grid rows H in 2-D, 0 in 1-D */
} vijp_pool_args;
VIJP_API const vijp_pool_args *vijp_pool_get(const vijp_layer *L);

/* avgpool:P */
VIJP_API size_t vijp_avgpool_window(const vijp_layer *L);

/* squeeze:CxF */
typedef struct {
    size_t channels, factor;
} vijp_squeeze_args;
VIJP_API const vijp_squeeze_args *vijp_squeeze_get(const vijp_layer *L);

/* inv1x1:C */
VIJP_API size_t vijp_inv1x1_channels(const vijp_layer *L);

/* linear:OUTxIN (one token of IN units to OUT units) */
typedef struct {
    size_t out, in;
} vijp_linear_args;
VIJP_API const vijp_linear_args *vijp_linear_get(const vijp_layer *L);

/* attention:DxH[:causal] (embed dim D, H heads) */
typedef struct {
    size_t dim, heads;
    int causal; /* 1: token l attends to tokens <= l */
} vijp_attention_args;
VIJP_API const vijp_attention_args *vijp_attention_get(const vijp_layer *L);
/* elu[:ALPHA] (α = 1 when not given) */
VIJP_API double vijp_elu_alpha(const vijp_layer *L);

/* softplus[:BETA[/THRESHOLD]]: y = log(1 + e^{βx})/β, and y = x where βx
 * (rounded) > threshold.  Plain softplus: β = 1, threshold +∞. */
typedef struct {
    double beta, threshold;
} vijp_softplus_args;
VIJP_API vijp_softplus_args vijp_softplus_get(const vijp_layer *L);

/* hardtanh[:LO/HI] (default -1/1) and relu6 (0/6): y = min(max(x, lo), hi). */
typedef struct {
    double lo, hi;
} vijp_hardtanh_args;
VIJP_API vijp_hardtanh_args vijp_hardtanh_get(const vijp_layer *L);

/* prelu[:C] (C channels, channel-major; default 1) */
VIJP_API size_t vijp_prelu_channels(const vijp_layer *L);

/* Coupling blocks (additive, affine): two residual functions, F and G (S
 * and T), each a chain of at most VIJP_SUB_MAX layers of any type but a
 * coupling block, mapping the half width h to h (widths may change inside:
 * h -> 4h -> h).  A spec names one chain for both; a JSON net may give two
 * different ones.  θ: F's layers' parameters in order, then G's.  `which`
 * is 0 for F (S), 1 for G (T). */
#define VIJP_SUB_MAX 8
VIJP_API size_t vijp_coupling_count(const vijp_layer *L, int which);
VIJP_API const vijp_layer *vijp_coupling_sub(const vijp_layer *L, int which, size_t k);
/* affine: 1 when the scale is exp(S), 0 for sigmoid(S + 2). */
VIJP_API int vijp_affine_exp_scale(const vijp_layer *L);

/* Residual blocks: y = f(x) + x, or f(x) + P(x) with a projection P on the
 * skip path; f and P are chains of layers of any type (residual blocks
 * included) whose widths may change inside, f's output width that of P's
 * (of x without P).  θ: f's layers' in order, then P's. */
#define VIJP_RESIDUAL_SUB_MAX 16 /* f's and P's layers together */
/* The number of layers of f (skip 0) or of P (skip 1; 0: the identity). */
VIJP_API size_t vijp_residual_count(const vijp_layer *L, int skip);
VIJP_API const vijp_layer *vijp_residual_sub(const vijp_layer *L, int skip, size_t k);

/* Whether this instance's inverse operator answers (the reversible engine
 * rebuilds its input through it): square, an inverse in double and MPFR,
 * and for a residual block no projection P. */
VIJP_API int vijp_layer_has_inverse(const vijp_layer *L);

#ifdef __cplusplus
}
#endif

#endif

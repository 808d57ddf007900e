/* The normalisation and shape types (src/layers/reshape.c, layernorm_runs.c,
 * channelnorm.c, logsoftmax.c):
 * their parsed arguments, which the double operators there and their MPFR
 * twins here both read (plain structs: no calls between the two), and the
 * MPFR operators themselves (oracles/reshape.c, normlayers.c, channelnorm.c,
 * logsoftmax.c). */
#ifndef VIJP_ORACLES_NORM_H
#define VIJP_ORACLES_NORM_H

#include "oracles.h"

/* dropout:P (eval mode, so the identity; P is kept to print it back). */
typedef struct {
    double p;
} vo_dropout_args;

/* transpose:AxB: each run of A·B units, an A × B row-major matrix, becomes
 * its B × A transpose. */
typedef struct {
    size_t rows, cols;
} vo_transpose_args;

/* layernorm with arguments, layernorm[:N][:eps=E][:affine] (plain layernorm
 * has no state): each run of `run` units normalised by its biased variance
 * plus eps, then, with affine, scaled by weight[run] and shifted by
 * bias[run] (θ = weight, bias: PyTorch's LayerNorm(run) state_dict). */
typedef struct {
    size_t run;
    double eps;
    int run_given, eps_given, affine; /* what the item said, to print it back */
    size_t channels, groups;          /* groupnorm:GxC (0 for layernorm): a run is a group of C/G channels,
                                       * θ = weight[C], bias[C] */
} vo_layernorm_args;

/* actnorm:C and batchnorm:C[:eps=E][:affine] (eval mode): per-channel
 * affine maps of a channel-major sample, C channels of width/C positions.
 * θ: actnorm s[C], b[C]; batchnorm weight[C], bias[C] (affine only),
 * running_mean[C], running_var[C] (PyTorch's state_dict order). */
typedef struct {
    size_t channels;
    double eps;
    int batchnorm, eps_given, affine;
} vo_channel_args;

/* logsoftmax[:N]: y = x − log Σ exp(x) over each run of `run` units. */
typedef struct {
    size_t run;
    int run_given;
} vo_logsoftmax_args;

/* The identity (identity, dropout, flatten) and transpose: permutations,
 * every operator exact. */
void vo_identity_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_identity_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
int vo_identity_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                     const vijp_format *f);
void vo_identity_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_identity_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
void vo_identity_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);

void vo_transpose_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_transpose_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vo_transpose_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
int vo_transpose_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                      const vijp_format *f);
void vo_transpose_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_transpose_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

void vo_lnr_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_lnr_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vo_lnr_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_lnr_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f);
size_t vo_lnr_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_lnr_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                     const vijp_format *f);
int vo_lnr_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                const vijp_format *f);
void vo_lnr_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_lnr_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vo_lnr_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);

void vo_chan_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vo_chan_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f);
void vo_chan_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f);
int vo_chan_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                 const vijp_format *f);
void vo_chan_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f);
int vo_chan_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
int vo_chan_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

VO_LAYER_OPS(logsoftmax)
void vo_logsoftmax_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
size_t vo_logsoftmax_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_logsoftmax_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                            const vijp_format *f);
int vo_logsoftmax_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vo_logsoftmax_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);

#endif

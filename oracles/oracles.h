/* MPFR oracles of every layer operator, in any format (see arith.h).
 * Written simply and independently of src/: plain loops in the textbook order,
 * Gaussian elimination with partial pivoting, Householder QR.  The contracts
 * are those of vijp_ops_mp in include/vijp/layer.h. */
#ifndef VIJP_ORACLES_H
#define VIJP_ORACLES_H

#include "vijp/layer.h"
#include "vijp/interval.h"
#include "vijp/error.h"

#define VO_LAYER_OPS(name)                                                                      \
    void vo_##name##_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y,     \
                             const vijp_format *f);                                               \
    void vo_##name##_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U,         \
                         mpfr_t *V, const vijp_format *f);                                        \
    int vo_##name##_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx,        \
                         mpfr_t *frag, mpfr_t *Gy, const vijp_format *f);                         \
    void vo_##name##_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J,              \
                              const vijp_format *f);

VO_LAYER_OPS(leaky)
VO_LAYER_OPS(relu)
VO_LAYER_OPS(tanh)
VO_LAYER_OPS(dense)
VO_LAYER_OPS(sigmoid)
VO_LAYER_OPS(softplus)
VO_LAYER_OPS(silu)
VO_LAYER_OPS(gelu)
VO_LAYER_OPS(mish)
VO_LAYER_OPS(elu)
VO_LAYER_OPS(selu)
VO_LAYER_OPS(gelu_tanh)
VO_LAYER_OPS(softplus_beta)
VO_LAYER_OPS(softsign)
VO_LAYER_OPS(hardtanh)
VO_LAYER_OPS(hardswish)
VO_LAYER_OPS(prelu)
/* The activations whose oracle is one pair of f and f′ (act_loops.h): Y =
 * f(X) and D = f′(X) at once, bit for bit vo_NAME_forward's Y and
 * vo_NAME_jvp's V for a tangent of ones, with the work they share done
 * once (GELU's Φ, SiLU's σ, …). */
#define VO_ACT_FORWARD_DERIV(name)                                                                   \
    void vo_##name##_forward_deriv(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Y, mpfr_t *D, \
                                   const vijp_format *f);
VO_ACT_FORWARD_DERIV(sigmoid)
VO_ACT_FORWARD_DERIV(softplus)
VO_ACT_FORWARD_DERIV(silu)
VO_ACT_FORWARD_DERIV(gelu)
VO_ACT_FORWARD_DERIV(mish)
VO_ACT_FORWARD_DERIV(elu)
VO_ACT_FORWARD_DERIV(selu)
VO_ACT_FORWARD_DERIV(gelu_tanh)
VO_ACT_FORWARD_DERIV(softplus_beta)
VO_ACT_FORWARD_DERIV(softsign)
void vo_prelu_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                        const vijp_format *f);
int vo_prelu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
size_t vo_hardtanh_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_hardtanh_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                          const vijp_format *f);
int vo_hardtanh_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
size_t vo_hardswish_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_hardswish_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                           const vijp_format *f);
int vo_hardswish_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
VO_LAYER_OPS(layernorm)
VO_LAYER_OPS(softmax)
VO_LAYER_OPS(additive)
VO_LAYER_OPS(conv1d)
VO_LAYER_OPS(affine)
VO_LAYER_OPS(inv1x1)
VO_LAYER_OPS(residual)
void vo_residual_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_residual_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                           const vijp_format *f);
size_t vo_residual_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_residual_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                          const vijp_format *f);
int vo_residual_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vo_residual_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* A lower bound on ‖A‖₂ for A n × n column-major, by power iteration in
 * double: the residual block's inverse and its oracle refuse a fixed point
 * where ‖J_f‖₂ >= 1 by it. */
double vo_norm2_below(size_t n, const double *A);
void vo_inv1x1_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_inv1x1_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f);
VIJP_MUST_CHECK int vo_inv1x1_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* Lm (unit lower), Um (U + diag exp(log_s)) and W = P Lm Um, each C × C
 * column-major, as the operators above form them. */
void vo_inv1x1_factors(const vijp_layer *L, mpfr_t *th, mpfr_t *Lm, mpfr_t *Um, mpfr_t *W, const vijp_format *f);
void vo_affine_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_affine_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f);
int vo_affine_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
VO_LAYER_OPS(avgpool)
VO_LAYER_OPS(avgpool2d)
VO_LAYER_OPS(maxpool)
void vo_avgpool2d_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_maxpool_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
size_t vo_maxpool_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_maxpool_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *f);
int vo_maxpool_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
VO_LAYER_OPS(squeeze)
void vo_avgpool_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_squeeze_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
int vo_squeeze_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
void vo_conv1d_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_conv1d_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f);
int vo_conv1d_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* More outputs than inputs: the dense oracle's fragment and cokernel on J. */
size_t vo_conv1d_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_conv1d_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *f);
int vo_conv1d_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
/* The input position (row-major over the grid) that output position p
 * reads through tap k (ky·K + kx), or −1 (zero padding). */
long vo_conv_source(const vijp_layer *L, size_t p, size_t k);
void vo_additive_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_additive_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                           const vijp_format *f);
int vo_additive_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
size_t vo_layernorm_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_layernorm_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                           const vijp_format *f);
int vo_layernorm_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
size_t vo_softmax_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_softmax_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                         const vijp_format *f);
int vo_softmax_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);

/* The MPFR operators of a smooth activation (oracles/activations.c). */
#define VO_ACT_OPS_MP(name, inv)                                                              \
    {                                                                                         \
        .forward = vo_##name##_forward, .jvp = vo_##name##_jvp, .vjp = vo_##name##_jvp,       \
        .vijp = vo_##name##_vijp, .jacobian = vo_##name##_jacobian, .inverse = (inv),         \
    }
int vo_sigmoid_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
int vo_softplus_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* f(x) and f′(x) of an activation, each operation rounded in format fm (the
 * oracles of the dual-number evaluations in src/layers/). */
void vo_activation_pair(const char *name, mpfr_t fx, mpfr_t dfx, mpfr_t x, const vijp_format *fm);
/* The same for the activations with arguments (oracles/activations_elu.c:
 * elu, selu, gelu_tanh, softplus_beta), at L's. */
void vo_activation2_pair(const vijp_layer *L, mpfr_t fx, mpfr_t dfx, mpfr_t x, const vijp_format *fm);
int vo_elu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
int vo_selu_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
int vo_softsign_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

int vo_leaky_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
int vo_tanh_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
int vo_dense_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);

size_t vo_relu_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_relu_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                      const vijp_format *f);
int vo_relu_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);

void vo_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                  const vijp_format *f);
void vo_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy,
                        mpfr_t *Gt, const vijp_format *f);
size_t vo_dense_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_dense_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                       const vijp_format *f);
int vo_dense_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);

/* Solve Aᵀ z = r (trans) or A z = r, A n × n column-major, r n × B
 * overwritten: Gaussian elimination with partial pivoting (oracles/dense.c). */
int vo_ge_solve(size_t n, mpfr_t *A0, int trans, mpfr_t *r, size_t B, const vijp_format *f);

/* linear:OUTxIN (oracles/linear.c): the dense oracle on L·B token columns. */
VO_LAYER_OPS(linear)
void vo_linear_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_linear_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                         const vijp_format *f);
size_t vo_linear_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_linear_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                        const vijp_format *f);
int vo_linear_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vo_linear_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* theta in the dense layer's layout (W column-major, then b; a new vector of
 * OUT·(IN + 1) exact copies), and back; Q = I_L ⊗ Q₁ (Q₁ OUT × (OUT − IN)). */
mpfr_t *vo_linear_dense_theta(const vijp_layer *L, mpfr_t *th, const vijp_format *f);
void vo_linear_theta_from_dense(const vijp_layer *L, mpfr_t *d, mpfr_t *th);
void vo_linear_block_cokernel(const vijp_layer *L, mpfr_t *Q1, mpfr_t *Q);

/* attention:DxH[:causal] (oracles/attention.c). */
VO_LAYER_OPS(attention)
void vo_attention_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f);
void vo_attention_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                            const vijp_format *f);
size_t vo_attention_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B);
void vo_attention_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                           const vijp_format *f);
int vo_attention_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);

/* Interval enclosures of f′ (MPFI) for the elementwise layers. */
void vo_leaky_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_relu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_tanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_sigmoid_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_softplus_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_silu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_gelu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_mish_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_elu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_selu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_gelu_tanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_softplus_beta_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_softsign_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_hardtanh_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_hardswish_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
void vo_prelu_deriv_enclose(const vijp_layer *L, const double *th, mpfi_ptr d, mpfi_srcptr x);
/* The double nearest an interval's centre, and its distance to either end,
 * rounded up: v ⊆ [mid − rad, mid + rad]. */
void vo_interval_mid_rad(mpfi_srcptr v, double *mid, double *rad);
/* Enclosures of whole Jacobians at one sample (MPFI, 128 bits): mid ± rad. */
int vo_layernorm_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
int vo_softmax_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
/* The same for the layers whose J does not depend on x but is not exact in
 * double (1/P, exp(log_s)): x is not read. */
int vo_avgpool_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
int vo_inv1x1_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
int vo_avgpool2d_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);
int vo_conv_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad);

#endif

/* layernorm with arguments and groupnorm (layernorm_runs.c), which
 * layernorm.c's descriptors hand every instance with a state to; plain
 * layernorm keeps its own code. */
#ifndef VIJP_LAYERS_LAYERNORM_RUNS_H
#define VIJP_LAYERS_LAYERNORM_RUNS_H

#include "vijp/layer.h"

int vijp_lnr_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err);
int vijp_gn_parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err);
int vijp_lnr_print(const vijp_layer *L, char *buf, size_t size);
size_t vijp_lnr_param_count(const vijp_layer *L);
int vijp_lnr_init(const vijp_layer *L, vijp_init init, vijp_rng *rng, double *theta);
size_t vijp_lnr_bias_index(const vijp_layer *L, size_t i);
size_t vijp_lnr_cokernel_per_run(const vijp_layer *L);
void vijp_lnr_jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M);
void vijp_lnr_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y);
void vijp_lnr_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V);
void vijp_lnr_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx);
void vijp_lnr_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                        double *Gt);
void vijp_lnr_fragment(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                       double *frag);
int vijp_lnr_vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                  const double *frag, double *Gy, vijp_error *err);
void vijp_lnr_jacobian(const vijp_layer *L, const double *th, const double *x, double *J);
int vijp_lnr_cokernel(const vijp_layer *L, const double *th, const double *x, double *Q, vijp_error *err);

#endif

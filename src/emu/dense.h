/* The dense layer's MPFR operators, run natively in the narrow formats
 * (src/emu/dense.c): the type's emu table, for data on the EMULATED route
 * (src/layer/route.h; f satisfies vijp_emu_applies).  Same contracts as
 * the oracle's vo_dense_* and vo_ge_solve (oracles/oracles.h); an int
 * operator returns VIJP_EUNSUPPORTED for a case it leaves to the oracle. */
#ifndef VIJP_EMU_DENSE_H
#define VIJP_EMU_DENSE_H

#include "vijp/layer.h"
#include "emu.h"
#include "emu/lanes.h"
#include <mpfr.h>

void vijp_emu_dense_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f);
void vijp_emu_dense_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V,
                        const vijp_format *f);
void vijp_emu_dense_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx,
                        const vijp_format *f);
void vijp_emu_dense_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                              const vijp_format *f);
/* The products on a given set of lanes.h (the functions above run the
 * active one): forward with bias nonzero, the jvp with bias 0. */
void vijp_emu_dense_forward_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B,
                               mpfr_t *Y, int bias, const vijp_format *f);
void vijp_emu_dense_vjp_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *th, size_t B, mpfr_t *Gy,
                           mpfr_t *Gx, const vijp_format *f);
void vijp_emu_dense_vjp_param_on(const vijp_emu_lanes *set, const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy,
                                 mpfr_t *Gt, const vijp_format *f);
int vijp_emu_dense_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                        mpfr_t *Gy, const vijp_format *f);
/* The QR cases (dense_qr.c): the vijp when m ≠ n (vijp_emu_dense_vijp
 * sends it only those), the fragment and the cokernel basis. */
int vijp_emu_dense_vijp_qr(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                           mpfr_t *Gy, const vijp_format *f);
void vijp_emu_dense_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                             const vijp_format *f);
int vijp_emu_dense_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f);
int vijp_emu_dense_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f);
/* vo_ge_solve's contract: A0 n × n column-major, r (n × B) overwritten,
 * also when the matrix is singular (VIJP_ESINGULAR, r as far as it got). */
int vijp_emu_ge_solve(size_t n, mpfr_t *A0, int trans, mpfr_t *r, size_t B, const vijp_format *f);
/* The same on doubles, for f's arithmetic grid g: A (n × n, row-major: the
 * matrix to solve with, already transposed where asked) is overwritten by
 * its LU factors (on success: U on and above the diagonal, the multipliers
 * below, rows as pivoted); on up to threads threads (f's), the same bits. */
int vijp_emu_ge_solve_d(size_t n, double *A, double *r, size_t B, vijp_emu_grid g, int threads);
/* Columns per panel of vijp_emu_ge_solve_d: the panel's pivot rows past it,
 * 32 × n doubles (1 MiB at n = 4096), stay in the second-level cache while
 * every row below takes the panel's steps. */
#define VIJP_EMU_GE_PANEL 32
/* The same elimination by panels of panel columns (0: 1): the same bits
 * for every width (the tests). */
int vijp_emu_ge_solve_panel(size_t n, double *A, double *r, size_t B, vijp_emu_grid g, int threads, size_t panel);

/* The products and the square vijp on double-held operands (layer/emu_native.h),
 * bit for bit the functions above: dense's emu_native. */
extern const struct vijp_emu_native vijp_emu_dense_native;

#endif

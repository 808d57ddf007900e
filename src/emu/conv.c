/* conv1d's and conv2d's vijp and inverse in the narrow formats: the
 * oracle's (oracles/conv.c) explicit Jacobian J, then the dense path's
 * native solves (src/emu/dense.c: elimination, or the QR when strided),
 * which give the oracle's solves' bits (emu.h's theorem; t-emu-dense).  The
 * solve is O(N³) against J's O(N²) copies, so only it leaves MPFR.  The
 * products stay the oracle's: their fused terms (vo_fma, one rounding onto
 * a grid that may be narrower than binary32) have no double equivalent in
 * emu.h.  Other formats run the oracle. */
#include "conv.h"
#include "dense.h"
#include "emu.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "../../oracles/oracles.h"
#include <string.h>

int vijp_emu_conv_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                       const vijp_format *f)
{
    if (!vijp_emu_applies(f)) return vo_conv1d_vijp(L, th, X, B, Gx, frag, Gy, f);
    size_t N = L->in, M = L->out;
    mpfr_t *J = vo_vec_new(M * N + M, f); /* [J; b = 0]: a dense layer's parameters */
    vo_conv1d_jacobian(L, th, NULL, J, f);
    int rc;
    if (M < N) { /* strided: the dense layer's minimum-norm solve */
        vijp_layer dl;
        memset(&dl, 0, sizeof dl);
        dl.in = N, dl.out = M;
        rc = vijp_emu_dense_vijp(&dl, J, X, B, Gx, NULL, Gy, f);
    } else {
        for (size_t i = 0; i < N * B; i++) vo_set(Gy[i], Gx[i], f);
        rc = vijp_emu_ge_solve(N, J, 1, Gy, B, f); /* Jᵀ g_y = g_x */
    }
    vo_vec_free(J, M * N + M);
    return rc;
}

int vijp_emu_conv_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    if (!vijp_emu_applies(f) || L->out != L->in) return vo_conv1d_inverse(L, th, Y, B, X, f);
    size_t N = L->in, C = vijp_conv_get(L)->channels, n = N / C, bias = L->type->param_count(L) - C;
    mpfr_t *J = vo_vec_new(N * N, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++) vo_sub(X[b * N + i], Y[b * N + i], th[bias + i / n], f);
    int rc = vijp_emu_ge_solve(N, J, 0, X, B, f);
    vo_vec_free(J, N * N);
    return rc;
}

/* inv1x1's vijp and inverse in the narrow formats: the oracle's
 * (oracles/inv1x1.c) W = P L U′, formed in MPFR as it forms it
 * (vo_inv1x1_weight: O(C³), with exp and fused terms emu.h has no double
 * equivalent for), then per position its elimination run natively
 * (vijp_emu_ge_solve_d: the oracle's vo_ge_solve, bit for bit by emu.h's
 * theorem).  As the oracle, the first singular position stops the loop and
 * leaves its own and later outputs unwritten.  Other formats run the oracle. */
#include "inv1x1.h"
#include "dense.h"
#include "emu.h"
#include "io.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "../../oracles/oracles.h"
#include <stdlib.h>
#include <string.h>

/* Wᵀ z = r (trans) or W z = r at every position of every sample. */
static int solve(const vijp_layer *L, mpfr_t *th, mpfr_t *R, size_t B, mpfr_t *Z, int trans, const vijp_format *f)
{
    size_t C = vijp_inv1x1_channels(L), n = L->in / C;
    mpfr_t *W = vo_vec_new(C * C, f);
    vo_inv1x1_weight(L, th, W, f);
    double *A0 = trans ? vijp_emu_get(W, C * C) : vijp_emu_get_rows(W, C, C); /* row-major, as the solve takes it */
    double *A = vijp_alloc_array(C * C, sizeof *A), *r = vijp_alloc_array(C, sizeof *r);
    vijp_emu_grid g = vijp_emu_arith(f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++)
        for (size_t p = 0; p < n && !rc; p++) {
            for (size_t c = 0; c < C; c++) r[c] = vijp_emu_get1(R[b * L->in + c * n + p]);
            memcpy(A, A0, C * C * sizeof *A); /* the oracle eliminates afresh at every position */
            if (!(rc = vijp_emu_ge_solve_d(C, A, r, 1, g)))
                for (size_t c = 0; c < C; c++) mpfr_set_d(Z[b * L->in + c * n + p], r[c], MPFR_RNDN); /* exact */
        }
    free(A0), free(A), free(r);
    vo_vec_free(W, C * C);
    return rc;
}

int vijp_emu_inv1x1_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                         const vijp_format *f)
{
    if (!vijp_emu_applies(f)) return vo_inv1x1_vijp(L, th, X, B, Gx, frag, Gy, f);
    return solve(L, th, Gx, B, Gy, 1, f);
}

int vijp_emu_inv1x1_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    if (!vijp_emu_applies(f)) return vo_inv1x1_inverse(L, th, Y, B, X, f);
    return solve(L, th, Y, B, X, 0, f);
}

/* The emulated dense products (lanes.h): the portable set, the definition
 * the SIMD sets (simd.h) match bit for bit, and the choice of set.  Each
 * output is emu.h's scalar dot product: the oracle's vo_madd sequence from
 * +0, t ascending. */
#include "emu/lanes.h"
#include "kernels/kernels.h"
#include <pthread.h>
#include <string.h>

static const vijp_emu_grid binary32 = {24, -148, 128};

static void ref_fused_f(size_t m, size_t ncols, size_t K, const float *A, size_t lda, const float *B, size_t bst,
                        size_t bsc, float *C, size_t ldc)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t i = 0; i < m; i++) {
            double acc = 0;
            for (size_t t = 0; t < K; t++) acc = vijp_emu_fma(A[i + t * lda], B[t * bst + c * bsc], acc, binary32);
            C[i + c * ldc] = (float)acc; /* exact: on binary32's grid */
        }
}

static void ref_split_f(size_t m, size_t ncols, size_t K, const float *A, size_t lda, const float *B, size_t bst,
                        size_t bsc, float *C, size_t ldc)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t i = 0; i < m; i++) {
            double acc = 0;
            for (size_t t = 0; t < K; t++)
                acc = vijp_emu_add(acc, vijp_emu_mul(A[i + t * lda], B[t * bst + c * bsc], binary32), binary32);
            C[i + c * ldc] = (float)acc;
        }
}

static void ref_split_d(size_t m, size_t ncols, size_t K, const double *A, size_t lda, const double *B, size_t bst,
                        size_t bsc, double *C, size_t ldc, vijp_emu_grid g)
{
    for (size_t c = 0; c < ncols; c++)
        for (size_t i = 0; i < m; i++) {
            double acc = 0;
            for (size_t t = 0; t < K; t++) acc = vijp_emu_add(acc, vijp_emu_mul(A[i + t * lda], B[t * bst + c * bsc], g), g);
            C[i + c * ldc] = acc;
        }
}

static void ref_axpy_d(size_t n, double t, const double *x, double *y, vijp_emu_grid g)
{
    for (size_t k = 0; k < n; k++) y[k] = vijp_emu_elim_step(y[k], t, x[k], g);
}

static void ref_axpy_many_d(size_t n, size_t k, const double *t, const double *x, size_t ldx, double *y,
                            vijp_emu_grid g)
{
    for (size_t c = 0; c < k; c++) ref_axpy_d(n, t[c], x + c * ldx, y, g);
}

static const vijp_emu_lanes ref_set = {"ref", ref_fused_f, ref_split_f, ref_split_d, ref_axpy_d, ref_axpy_many_d};
#ifndef VIJP_GENERIC
extern const vijp_emu_lanes vijp_emu_lanes_avx2, vijp_emu_lanes_avx512;
#endif

static const vijp_emu_lanes *sets[VIJP_EMU_LANES_COUNT], *active;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The sets the kernel table found on this CPU (the same instruction sets:
 * avx2 is AVX2 + FMA, avx512 AVX-512F + DQ); the active one follows the
 * table's choice (vijp_kernels_follow). */
static void choose(void)
{
    sets[0] = &ref_set;
#ifndef VIJP_GENERIC
    if (vijp_kernels_set(1, NULL)) sets[1] = &vijp_emu_lanes_avx2;
    if (vijp_kernels_set(2, NULL)) sets[2] = &vijp_emu_lanes_avx512;
#endif
    int have[3] = {1, sets[1] != NULL, sets[2] != NULL};
    active = sets[vijp_kernels_follow(have)];
}

const vijp_emu_lanes *vijp_emu_lanes_set(int i)
{
    pthread_once(&once, choose);
    return i >= 0 && i < VIJP_EMU_LANES_COUNT ? sets[i] : NULL;
}

const vijp_emu_lanes *vijp_emu_lanes_active(void)
{
    pthread_once(&once, choose);
    return active;
}

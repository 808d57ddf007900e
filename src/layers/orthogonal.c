/* Orthogonal initialisation (init.h): a matrix with orthonormal columns (or
 * rows, when wide), Haar-distributed, the same bits on every machine, BLAS
 * and thread count, which keeps studies in the emulated formats
 * bit-reproducible (LAPACK's dgeqrf is not).  Two algorithms, chosen by the
 * longer side r:
 *
 *  - r <= VIJP_ORTHO_MGS_MAX_WIDTH: the Q of the QR of a Gaussian matrix by
 *    modified Gram–Schmidt applied twice, as vijp has always drawn it: every
 *    study of that size keeps its bits.  4 r c² flops, each column streamed
 *    past every earlier one, two columns at a time: 0.056 s at 512.
 *  - wider: Stewart's product of Householder reflectors of Gaussian vectors
 *    (G. W. Stewart, The efficient generation of random orthogonal matrices
 *    with an application to condition estimators, SIAM J. Numer. Anal. 17
 *    (1980) 403–409), accumulated backwards in blocks of OB reflectors
 *    (compact WY, as LAPACK's dorgqr): 2 r c² − 2c³/3 flops, in
 *    matrix-product loops that keep a tile in cache and vectorise across
 *    independent sums (orthogonal_block.h). */
#include "init.h"
#include "base/fork.h"
#include "vijp/error.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Stewart's method, blocked ---- */

enum {
    OB = 16,  /* reflectors per block */
    OV = 4,   /* doubles per vector (AVX2's; SSE2 runs each as two) */
    OR = 8,   /* rows per group in the update C −= V Y */
    OT = 128, /* rows per tile: OT·OB doubles of V (16 KB) stay in L1 */
};
typedef double ortho_vec __attribute__((vector_size(OV * sizeof(double))));

#define ORTHO_ATTR
#define ORTHO_NAME(f) f##_portable
#include "orthogonal_block.h"
#include "orthogonal_mgs.h"
#undef ORTHO_ATTR
#undef ORTHO_NAME
#if defined(__x86_64__) && !defined(VIJP_GENERIC)
#define ORTHO_HAVE_AVX2 1
#define ORTHO_ATTR __attribute__((target("avx2")))
#define ORTHO_NAME(f) f##_avx2
#include "orthogonal_block.h"
#include "orthogonal_mgs.h"
#undef ORTHO_ATTR
#undef ORTHO_NAME
#endif

/* The two loops of a block's update, in one of the two sets, chosen once
 * per matrix (the same bits either way). */
typedef struct {
    void (*vt_c)(const double *Vt, const double *C, size_t ldc, size_t t0, size_t t1, size_t nc, double *W);
    void (*c_minus_vy)(const double *Vp, const double *Y, double *C, size_t ldc, size_t t0, size_t t1, size_t nc);
} wy_kernels;
static const wy_kernels portable_kernels = {vt_c_portable, c_minus_vy_portable};
#ifdef ORTHO_HAVE_AVX2
static const wy_kernels avx2_kernels = {vt_c_avx2, c_minus_vy_avx2};
#endif

/* Reflector k from ℓ Gaussian draws x in A (ℓ = r − k, rows k..r−1 of its
 * column): H = I − τ v vᵀ with v_0 = 1, v_t = x_t / (x_0 − β) below,
 * β = −sign(x_0)·‖x‖ (LAPACK's dlarfg, unscaled: Gaussian draws neither
 * overflow nor underflow a sum of squares), so that H x = β e_1.  Returns
 * sign(β), the sign R_kk would have in the QR that Q's column k takes to
 * make diag(R) positive. */
static double reflector(double *x, size_t len, double *tau)
{
    double alpha = x[0], rest = 0;
    for (size_t t = 1; t < len; t++) rest += x[t] * x[t];
    if (rest == 0) { /* H = I: nothing below x_0 to annihilate */
        *tau = 0;
        return alpha < 0 ? -1 : 1;
    }
    double norm = sqrt(alpha * alpha + rest), beta = alpha >= 0 ? -norm : norm, scale = 1 / (alpha - beta);
    *tau = (beta - alpha) / beta;
    for (size_t t = 1; t < len; t++) x[t] *= scale;
    return beta < 0 ? -1 : 1;
}

typedef struct {
    size_t len;   /* rows of the block: r − i0 */
    double *Vt;   /* V row by row: Vt[t·OB + p] */
    double *Vp;   /* V packed by OR rows (orthogonal_block.h) */
    double T[OB * OB]; /* upper triangular, T[p + q·OB]: H_i0 ⋯ H_(i0+ib−1) = I − V T Vᵀ */
} wy_block;

/* V of reflectors i0..i0+ib−1 (stored in A's columns as reflector() left
 * them) into blk, zero past ib; then those columns become e_k, Q's starting
 * columns; T as LAPACK's dlarft (forward, columnwise). */
static void wy_pack(double *A, size_t r, size_t i0, size_t ib, const double *tau, wy_block *blk)
{
    size_t len = r - i0, groups = (len + OR - 1) / OR;
    blk->len = len;
    memset(blk->Vt, 0, len * OB * sizeof *blk->Vt);
    memset(blk->Vp, 0, groups * OB * OR * sizeof *blk->Vp);
    for (size_t p = 0; p < ib; p++) {
        double *col = A + (i0 + p) * r;
        for (size_t t = p; t < len; t++) {
            double v = t == p ? 1 : col[i0 + t];
            blk->Vt[t * OB + p] = v;
            blk->Vp[((t / OR) * OB + p) * OR + t % OR] = v;
        }
        memset(col, 0, r * sizeof *col);
        col[i0 + p] = 1;
    }
    memset(blk->T, 0, sizeof blk->T);
    for (size_t p = 0; p < ib; p++) {
        double z[OB] = {0}; /* z_q = v_qᵀ v_p, t ascending from p (v_p is zero above) */
        for (size_t t = p; t < len; t++)
            for (size_t q = 0; q < p; q++) z[q] += blk->Vt[t * OB + q] * blk->Vt[t * OB + p];
        for (size_t q = 0; q < p; q++) { /* T[0:p, p] = −τ_p T[0:p, 0:p] z */
            double s = 0;
            for (size_t k = q; k < p; k++) s += blk->T[q + k * OB] * z[k];
            blk->T[q + p * OB] = -tau[i0 + p] * s;
        }
        blk->T[p + p * OB] = tau[i0 + p];
    }
}

/* C := (I − V T Vᵀ) C for C the ℓ × nc block of Q at rows and columns i0:
 * W = Vᵀ C by tiles of OT rows in ascending order, Y = T W, C −= V Y. */
static void wy_apply(const wy_block *blk, double *C, size_t ldc, size_t nc, double *W, double *Y, const wy_kernels *k)
{
    size_t len = blk->len;
    memset(W, 0, nc * OB * sizeof *W);
    for (size_t t0 = 0; t0 < len; t0 += OT) k->vt_c(blk->Vt, C, ldc, t0, t0 + OT < len ? t0 + OT : len, nc, W);
    for (size_t j = 0; j < nc; j++)
        for (size_t p = 0; p < OB; p++) {
            double s = 0;
            for (size_t q = p; q < OB; q++) s += blk->T[p + q * OB] * W[j * OB + q];
            Y[j * OB + p] = s;
        }
    for (size_t t0 = 0; t0 < len; t0 += OT) k->c_minus_vy(blk->Vp, Y, C, ldc, t0, t0 + OT < len ? t0 + OT : len, nc);
}

/* wy_apply over ranges of C's columns on up to threads threads: a column's
 * W, Y and update read that column alone and the block, by the same
 * operations in the same order whatever the range (the kernels run their
 * vectors across independent sums, two or four columns at a time or one),
 * so any split gives the same bits (base/fork.h). */
typedef struct {
    const wy_block *blk;
    double *C, *W, *Y;
    size_t ldc;
    const wy_kernels *k;
} wy_task;

static void wy_columns(void *ctx, size_t part, size_t begin, size_t end)
{
    (void)part;
    const wy_task *t = ctx;
    wy_apply(t->blk, t->C + begin * t->ldc, t->ldc, end - begin, t->W + begin * OB, t->Y + begin * OB, t->k);
}

int vijp_orthogonal_householder(size_t m, size_t n, vijp_rng *rng, int portable, int threads, double *W)
{
    size_t r = m > n ? m : n, c = m > n ? n : m;
    const wy_kernels *kernels = &portable_kernels;
#ifdef ORTHO_HAVE_AVX2
    if (!portable && __builtin_cpu_supports("avx2")) kernels = &avx2_kernels;
#endif
    double *A = vijp_alloc_array(r * c, sizeof *A), *tau = vijp_alloc_array(c, sizeof *tau),
           *sign = vijp_alloc_array(c, sizeof *sign);
    /* Stewart: reflector k's Gaussian vector stands for column k of a
     * Gaussian matrix after the earlier reflectors, which are orthogonal
     * and independent of it, so it is again N(0, I) in r − k dimensions. */
    for (size_t k = 0; k < c; k++) {
        double *x = A + k + k * r;
        vijp_rng_normals(rng, x, r - k);
        sign[k] = reflector(x, r - k, &tau[k]);
    }
    wy_block blk;
    size_t groups = (r + OR - 1) / OR;
    blk.Vt = vijp_alloc_array(r * OB, sizeof *blk.Vt);
    blk.Vp = vijp_alloc_array(groups * OB * OR, sizeof *blk.Vp);
    double *Wk = vijp_alloc_array(c * OB, sizeof *Wk), *Y = vijp_alloc_array(c * OB, sizeof *Y);
    /* Q = H_0 ⋯ H_(c−1) [I; 0], last block first: block i0 acts on rows
     * i0.. only, where the columns from i0 on are all that is not yet e_k
     * or zero. */
    for (size_t i0 = (c - 1) / OB * OB;; i0 -= OB) {
        size_t ib = c - i0 < OB ? c - i0 : OB;
        wy_pack(A, r, i0, ib, tau, &blk);
        size_t nc = c - i0;
        wy_task task = {&blk, A + i0 + i0 * r, Wk, Y, r, kernels};
        /* about 4·OB multiply-adds a row and column: W and the update */
        vijp_fork(threads, nc, 4.0 * OB * (double)(r - i0) * (double)nc, wy_columns, &task);
        if (i0 == 0) break;
    }
    /* diag(R) > 0: Haar, as the Gaussian's QR; W = Q, or Qᵀ when wide */
    for (size_t j = 0; j < c; j++)
        for (size_t i = 0; i < r; i++) A[i + j * r] *= sign[j];
    if (m >= n) memcpy(W, A, r * c * sizeof *W);
    else
        for (size_t i0 = 0; i0 < r; i0 += 64) /* by 64 rows of Q: its columns are read, W's written, in cache */
            for (size_t j = 0; j < c; j++)
                for (size_t i = i0; i < r && i < i0 + 64; i++) W[j + i * m] = A[i + j * r];
    free(A), free(tau), free(sign), free(blk.Vt), free(blk.Vp), free(Wk), free(Y);
    return 0;
}

/* ---- modified Gram–Schmidt twice ---- */

/* MGS twice ("twice is enough": orthogonal to O(u) for any numerically
 * full-rank matrix, Giraud, Langou & Rozložník 2005), with only + − × ÷ √:
 * column j is swept past columns 0 … j−1 twice, then normalised.  The
 * sweeps run two columns at a time (orthogonal_mgs.h): column j's second
 * beside column j+1's first over the columns before j, which are final by
 * then; column j+1 then takes column j alone.  Every column sees the same
 * operations in the same order as swept one at a time. */
typedef void (*mgs_sweep_fn)(const double *A, size_t r, size_t k0, size_t k1, double *a, double *b);

static int mgs2_columns(double *A, size_t r, size_t c, mgs_sweep_fn sweep)
{
    for (size_t j = 0; j < c; j++) {
        double *q = A + j * r, *next = j + 1 < c ? q + r : NULL;
        sweep(A, r, 0, j, q, next);
        double nrm = 0;
        for (size_t i = 0; i < r; i++) nrm += q[i] * q[i];
        nrm = sqrt(nrm);
        if (!(nrm > 0)) return VIJP_EINVAL; /* probability zero for Gaussian draws */
        for (size_t i = 0; i < r; i++) q[i] /= nrm;
        if (next) sweep(A, r, j, j + 1, next, NULL);
    }
    return 0;
}

int vijp_orthogonal_mgs2(size_t m, size_t n, vijp_rng *rng, int portable, double *W)
{
    size_t r = m > n ? m : n, c = m > n ? n : m;
    double *A = vijp_alloc_array(r * c, sizeof *A);
    vijp_rng_normals(rng, A, r * c);
    mgs_sweep_fn sweep = mgs_sweep_portable;
#ifdef ORTHO_HAVE_AVX2
    if (!portable && __builtin_cpu_supports("avx2")) sweep = mgs_sweep_avx2;
#else
    (void)portable;
#endif
    int rc = mgs2_columns(A, r, c, sweep);
    if (!rc)
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < c; j++) {
                if (m >= n) W[i + j * m] = A[i + j * r]; /* W = Q (m × n) */
                else W[j + i * m] = A[i + j * r];        /* W = Qᵀ (m × n) */
            }
    free(A);
    return rc;
}

int vijp_orthogonal_init(size_t m, size_t n, vijp_rng *rng, int threads, double *W)
{
    size_t r = m > n ? m : n;
    if (r <= VIJP_ORTHO_MGS_MAX_WIDTH) return vijp_orthogonal_mgs2(m, n, rng, 0, W);
    return vijp_orthogonal_householder(m, n, rng, 0, threads, W);
}

/* The avx512 set's gemm_d (contract in kernels.h): C := op(A)·op(B) + β·C
 * for α = 1 and β ∈ {0, 1}, the dense layer's three products, by two
 * register-blocked loops that read A and B where they lie (no packing):
 *
 *   op(A) = A    (W X, G Xᵀ): 16 rows of C (two vectors) by 8 columns, each
 *                C entry a sequential FMA chain over k; while the first
 *                8 columns of a row strip run, the next strip of A is
 *                prefetched, so a W streamed from DRAM arrives before use;
 *   op(A) = Aᵀ, op(B) = B  (Wᵀ G): 4 × 4 dot products of columns, each
 *                8 lane-wise FMA chains over k (masked at the tail), then
 *                summed by a tree; the next 4 columns of A prefetched.
 *
 * Why: OpenBLAS packs A before every call, and a W that comes from DRAM
 * (each layer's own, in a deep net) is read by that copy loop at latency,
 * not bandwidth: at the engine's shapes (256 × 256 × 64) its dgemm drops
 * from 47–49 GFLOP/s in cache to 38–44 streamed (bench-engines, Zen 4),
 * while these loops keep 45–52.  Other shapes, α ≠ 1 and other β go to the
 * linked BLAS (ref).
 *
 * Error: each entry is a sum of k exact products in a fixed order (FMA
 * rounds each step once), β = 1 adds C's old value as one more term, so
 * |Ĉ − C| <= γ_{k+1}·(|β·C₀| + |op(A)||op(B)|) (Higham eq. 3.5, any order):
 * the bound of kernels.h.  NaN and ±Inf propagate as in the sums (nothing
 * compares or branches on values); β = 0 never reads C. */
#include "kernels/kernels.h"
#include <immintrin.h>

void vijp_kernels_avx512_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A,
                                size_t lda, const double *B, size_t ldb, double beta, double *C, size_t ldc);
void vijp_kernels_ref_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                             const double *B, size_t ldb, double beta, double *C, size_t ldc);

/* C's columns written with streaming stores when C is this large (bytes)
 * and β = 0: a 512 KB dW is not read again before it leaves the cache, and
 * skipping the read-for-ownership halves its memory traffic (G Xᵀ from 44
 * to 50 GFLOP/s); a smaller C (the next layer's input) stays cached. */
#define STREAM_BYTES (256u << 10)

/* op(A) = A: C (m × n, m % 16 == 0, n % 8 == 0) from A (m × k, lda) and
 * op(B)(p, j) = B[p·sk + j·sj].  Inlined into callers with sk = 1 (W X) or
 * sj = 1 (G Xᵀ): with both strides variables, W X ran at 34–40 GFLOP/s. */
static inline __attribute__((always_inline)) void strips(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *B, size_t sk, size_t sj,
                   int accumulate, int stream, double *C, size_t ldc)
{
    for (size_t i0 = 0; i0 < m; i0 += 16) {
        const double *next = i0 + 16 < m ? A + i0 + 16 : NULL;
        for (size_t j0 = 0; j0 < n; j0 += 8) {
            __m512d c[8][2];
            for (int j = 0; j < 8; j++) c[j][0] = c[j][1] = _mm512_setzero_pd();
            const double *a = A + i0, *b = B + j0 * sj;
            const double *pf = j0 == 0 ? next : NULL;
            /* op(B) = Xᵀ (G Xᵀ): X is a stored activation, from DRAM, and
             * the first strip reads it; fetch its next 8 rows ahead */
            const double *pfb = sj == 1 && i0 == 0 && j0 + 8 < n ? b + 8 : NULL;
            for (size_t p = 0; p < k; p++) {
                __m512d a0 = _mm512_loadu_pd(a + p * lda), a1 = _mm512_loadu_pd(a + p * lda + 8);
                if (pf) {
                    _mm_prefetch((const char *)(pf + p * lda), _MM_HINT_T1);
                    _mm_prefetch((const char *)(pf + p * lda + 8), _MM_HINT_T1);
                }
                if (pfb) _mm_prefetch((const char *)(pfb + p * sk), _MM_HINT_T1);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    __m512d bj = _mm512_set1_pd(b[p * sk + (size_t)j * sj]);
                    c[j][0] = _mm512_fmadd_pd(a0, bj, c[j][0]);
                    c[j][1] = _mm512_fmadd_pd(a1, bj, c[j][1]);
                }
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                double *cj = C + i0 + (j0 + (size_t)j) * ldc;
                if (accumulate) {
                    c[j][0] = _mm512_add_pd(_mm512_loadu_pd(cj), c[j][0]);
                    c[j][1] = _mm512_add_pd(_mm512_loadu_pd(cj + 8), c[j][1]);
                }
                if (stream) {
                    _mm512_stream_pd(cj, c[j][0]);
                    _mm512_stream_pd(cj + 8, c[j][1]);
                } else {
                    _mm512_storeu_pd(cj, c[j][0]);
                    _mm512_storeu_pd(cj + 8, c[j][1]);
                }
            }
        }
    }
    if (stream) _mm_sfence(); /* streaming stores are weakly ordered */
}

/* Two accumulators' lanes added in pairs of 128-bit blocks, then of
 * doubles: 16 accumulators become two vectors of their 16 sums. */
#define HALVES(a, b) _mm512_add_pd(_mm512_shuffle_f64x2(a, b, 0x44), _mm512_shuffle_f64x2(a, b, 0xEE))
#define QUARTERS(a, b) _mm512_add_pd(_mm512_shuffle_f64x2(a, b, 0x88), _mm512_shuffle_f64x2(a, b, 0xDD))
#define PAIRS(a, b) _mm512_add_pd(_mm512_unpacklo_pd(a, b), _mm512_unpackhi_pd(a, b))

static void strips_nn(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *B, size_t ldb,
                      int accumulate, int stream, double *C, size_t ldc)
{
    strips(m, n, k, A, lda, B, 1, ldb, accumulate, stream, C, ldc);
}

static void strips_nt(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *B, size_t ldb,
                      int accumulate, int stream, double *C, size_t ldc)
{
    strips(m, n, k, A, lda, B, ldb, 1, accumulate, stream, C, ldc);
}

/* op(A) = Aᵀ: C (m × n, both % 4 == 0) = Aᵀ B, A (k × m, lda), B (k × n, ldb).
 * The 16 accumulators are named, not an array: as an array GCC kept them
 * in memory (17 GFLOP/s against 45). */
static void dots(size_t m, size_t n, size_t k, const double *A, size_t lda, const double *B, size_t ldb,
                 int accumulate, double *C, size_t ldc)
{
    const __mmask8 tail = (__mmask8)((1u << (k % 8)) - 1);
    for (size_t i0 = 0; i0 < m; i0 += 4) {
        const double *a0 = A + i0 * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
        for (size_t j0 = 0; j0 < n; j0 += 4) {
            const double *b0 = B + j0 * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            const double *pf = j0 == 0 && i0 + 4 < m ? a0 + 4 * lda : NULL;
            __m512d c00 = _mm512_setzero_pd(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00,
                    c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
/* One step of 8 k: four columns of A against four of B (LOAD: a full or a
 * masked load; the masked one only at the tail, as it ran slower). */
#define DOTS_STEP(LOAD)                                                                                       \
    do {                                                                                                      \
        __m512d x0 = LOAD(a0 + p), x1 = LOAD(a1 + p), x2 = LOAD(a2 + p), x3 = LOAD(a3 + p), y = LOAD(b0 + p); \
        c00 = _mm512_fmadd_pd(x0, y, c00), c10 = _mm512_fmadd_pd(x1, y, c10);                               \
        c20 = _mm512_fmadd_pd(x2, y, c20), c30 = _mm512_fmadd_pd(x3, y, c30);                               \
        y = LOAD(b1 + p);                                                                                     \
        c01 = _mm512_fmadd_pd(x0, y, c01), c11 = _mm512_fmadd_pd(x1, y, c11);                               \
        c21 = _mm512_fmadd_pd(x2, y, c21), c31 = _mm512_fmadd_pd(x3, y, c31);                               \
        y = LOAD(b2 + p);                                                                                     \
        c02 = _mm512_fmadd_pd(x0, y, c02), c12 = _mm512_fmadd_pd(x1, y, c12);                               \
        c22 = _mm512_fmadd_pd(x2, y, c22), c32 = _mm512_fmadd_pd(x3, y, c32);                               \
        y = LOAD(b3 + p);                                                                                     \
        c03 = _mm512_fmadd_pd(x0, y, c03), c13 = _mm512_fmadd_pd(x1, y, c13);                               \
        c23 = _mm512_fmadd_pd(x2, y, c23), c33 = _mm512_fmadd_pd(x3, y, c33);                               \
    } while (0)
#define FULL(q) _mm512_loadu_pd(q)
#define TAIL(q) _mm512_maskz_loadu_pd(tail, q)
            size_t p = 0;
            for (; p + 8 <= k; p += 8) {
                if (pf) {
                    _mm_prefetch((const char *)(pf + p), _MM_HINT_T1);
                    _mm_prefetch((const char *)(pf + lda + p), _MM_HINT_T1);
                    _mm_prefetch((const char *)(pf + 2 * lda + p), _MM_HINT_T1);
                    _mm_prefetch((const char *)(pf + 3 * lda + p), _MM_HINT_T1);
                }
                DOTS_STEP(FULL);
            }
            if (p < k) DOTS_STEP(TAIL);
            /* lanes of s0: (i, j) = (0,0) (0,1) (1,0) (1,1) (2,0) (2,1) (3,0) (3,1); s1: j + 2 */
            __m512d r0 = QUARTERS(HALVES(c00, c10), HALVES(c20, c30));
            __m512d r1 = QUARTERS(HALVES(c01, c11), HALVES(c21, c31));
            __m512d r2 = QUARTERS(HALVES(c02, c12), HALVES(c22, c32));
            __m512d r3 = QUARTERS(HALVES(c03, c13), HALVES(c23, c33));
            double s[16];
            _mm512_storeu_pd(s, PAIRS(r0, r1));
            _mm512_storeu_pd(s + 8, PAIRS(r2, r3));
            for (int t = 0; t < 16; t++) {
                size_t i = (size_t)(t % 8) / 2, j = (size_t)(t % 2) + (t >= 8 ? 2 : 0);
                double *cij = C + i0 + i + (j0 + j) * ldc;
                *cij = accumulate ? *cij + s[t] : s[t];
            }
        }
    }
}

void vijp_kernels_avx512_gemm_d(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A,
                                size_t lda, const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    int ours = alpha == 1 && (beta == 0 || beta == 1) && m && n && k;
    if (ours && !ta && m % 16 == 0 && n % 8 == 0) {
        int stream = beta == 0 && m * n * sizeof *C >= STREAM_BYTES && (uintptr_t)C % 64 == 0 && ldc % 8 == 0;
        (tb ? strips_nt : strips_nn)(m, n, k, A, lda, B, ldb, beta == 1, stream, C, ldc);
    } else if (ours && ta && !tb && m % 4 == 0 && n % 4 == 0)
        dots(m, n, k, A, lda, B, ldb, beta == 1, C, ldc);
    else
        vijp_kernels_ref_gemm_d(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Circular convolutions' vijp and inverse by FFT (conv.c's header): the DFT
 * over an R × Q grid turns the block-circulant J into one C × C system per
 * frequency ω,
 *   transpose (vijp):   Ŵ(ω)ᵀ ẑ(ω) = r̂(ω),
 *   otherwise (inverse): conj(Ŵ(ω)) ẑ(ω) = r̂(ω)   (y = Jx is a correlation),
 *   Ŵ(ω)[o][c] = Σ_k W[o,c,k] e^{−2πi⟨ω, d_k⟩/grid},
 * d_k the tap's offset reduced mod the grid.  FFTW computes every DFT: the
 * C input channels (r̂), the C² kernels embedded in the grid (Ŵ: the same
 * sum, FFTW's forward sign is e^{−2πi jk/n}), and the inverse transform of
 * ẑ.  Each frequency's system is solved by LU with partial pivoting, factored
 * once per call and shared by the batch: our own for C <= SMALL_C, LAPACK's
 * zgetrf/zgetrs (what zgesv does) beyond.  OpenBLAS wakes its threads even
 * for a 16 × 16 zgesv: 26 µs a call against 6 µs on one thread (measured
 * here), 3.5× the whole vijp of conv2d:16x3x32:circular, and its result then
 * depends on the thread count; the plain LU is as backward stable (Higham,
 * ASNA Thm 9.4: O(C)·u·|L||U|) and the same on every machine.  Real data: only the
 * Q/2 + 1 non-redundant columns of each row of the spectrum are solved (the
 * others are their conjugates, and the inverse real transform reads only
 * these).  O(C²·P log P + P·C³) per call (Ŵ and the factorisations) and
 * O(C·P log P + P·C²) per sample for P positions, against the plain DFT's
 * O(C·P²), which stays only in the MPFR oracle (oracles/conv.c).
 *
 * Error: FFTW's transforms are within O(log P)·u relative in the 2-norm
 * (Cooley–Tukey; Higham, ASNA §24.1), better than the plain DFT's O(P)·u;
 * zgesv's backward error is O(C)·u per frequency.  The vijp's error is then
 * bounded as any backward-stable solve's, by κ(J) times those (the layer
 * battery's round-trip test holds it to its contract).
 *
 * FFTW_ESTIMATE: plans do not depend on timing, so results are the same on
 * every run.  FFTW's planner is not thread-safe (drift runs curves on
 * several threads), so planning and destroying plans hold a lock; executing
 * a plan on new arrays is thread-safe (fftw_execute_dft_*). */
#include "conv_circular.h"
#include "vijp/catalogue.h"
#include "vijp/error.h"
#include <complex.h> /* before fftw3.h: fftw_complex is then C99's double complex */
#include <fftw3.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

#define SMALL_C 64

/* a·b in real arithmetic: C99's complex product calls __muldc3, whose care
 * for infinities costs more than the product (the operands here are finite:
 * the layer checks its inputs). */
static inline double complex cmul(double complex a, double complex b)
{
    double ar = creal(a), ai = cimag(a), br = creal(b), bi = cimag(b);
    double complex z;
    __real__ z = ar * br - ai * bi; /* CMPLX needs a compiler builtin clang 14 lacks */
    __imag__ z = ar * bi + ai * br;
    return z;
}

/* |re| + |im|: LAPACK's pivot measure (izamax), no square root. */
static double cabs1(double complex z) { return fabs(creal(z)) + fabs(cimag(z)); }

/* A = P L U by Gaussian elimination with partial pivoting, A C × C column-
 * major, in place: U on and above the diagonal, the multipliers l below it,
 * piv[c] the row swapped with row c at step c.  0 or VIJP_ESINGULAR.  The
 * factorisation is shared by every sample of a batch (lu_solve), and the
 * operations on each right-hand side are those of eliminating it alongside A,
 * in the same order: factoring once changes no bit of the result. */
static int small_lu_factor(size_t C, double complex *A, size_t *piv)
{
    for (size_t c = 0; c < C; c++) {
        size_t p = c;
        for (size_t i = c + 1; i < C; i++)
            if (cabs1(A[i + c * C]) > cabs1(A[p + c * C])) p = i;
        if (A[p + c * C] == 0) return VIJP_ESINGULAR;
        piv[c] = p;
        if (p != c) /* columns < c hold the earlier steps' multipliers: they stay with the step that used them */
            for (size_t j = c; j < C; j++) {
                double complex t = A[c + j * C];
                A[c + j * C] = A[p + j * C], A[p + j * C] = t;
            }
        for (size_t i = c + 1; i < C; i++) {
            double complex l = A[i + c * C] / A[c + c * C];
            for (size_t j = c + 1; j < C; j++) A[i + j * C] -= cmul(l, A[c + j * C]);
            A[i + c * C] = l;
        }
    }
    return 0;
}

/* r := A⁻¹ r from small_lu_factor's factors. */
static void small_lu_solve(size_t C, const double complex *A, const size_t *piv, double complex *r)
{
    for (size_t c = 0; c < C; c++) {
        if (piv[c] != c) {
            double complex t = r[c];
            r[c] = r[piv[c]], r[piv[c]] = t;
        }
        for (size_t i = c + 1; i < C; i++) r[i] -= cmul(A[i + c * C], r[c]);
    }
    for (size_t i = C; i-- > 0;) {
        for (size_t j = i + 1; j < C; j++) r[i] -= cmul(A[i + j * C], r[j]);
        r[i] /= A[i + i * C];
    }
}

/* howmany real R × Q grids (stride R·Q apart) to their half spectra
 * (R × (Q/2 + 1) each), or back (the inverse is unnormalised). */
static fftw_plan plan_many(size_t howmany, size_t R, size_t Q, double *real, fftw_complex *spec, int backward)
{
    int dims[2] = {(int)R, (int)Q}, rank = R > 1 ? 2 : 1;
    int *n = rank == 2 ? dims : dims + 1, half = (int)(R * (Q / 2 + 1)), full = (int)(R * Q);
    pthread_mutex_lock(&planner);
    fftw_plan p = backward ? fftw_plan_many_dft_c2r(rank, n, (int)howmany, spec, NULL, 1, half, real, NULL, 1, full,
                                                    FFTW_ESTIMATE | FFTW_DESTROY_INPUT)
                           : fftw_plan_many_dft_r2c(rank, n, (int)howmany, real, NULL, 1, full, spec, NULL, 1, half,
                                                    FFTW_ESTIMATE);
    pthread_mutex_unlock(&planner);
    return p;
}

static void plan_free(fftw_plan p)
{
    pthread_mutex_lock(&planner);
    fftw_destroy_plan(p);
    pthread_mutex_unlock(&planner);
}

int vijp_conv_circulant_solve(const vijp_conv_args *a, size_t width, const double *th, const double *in, double *out,
                              size_t B, int transpose, size_t *bad_freq)
{
    size_t C = a->channels, K = a->kernel, R = a->rows ? a->rows : 1, KH = a->rows ? K : 1;
    size_t n = width / C, Q = n / R, T = KH * K, H = R * (Q / 2 + 1); /* H: half-spectrum length */
    size_t hy = (KH - 1) / 2, hx = (K - 1) / 2;
    double *grid = fftw_alloc_real(C * C * n > C * n ? C * C * n : C * n);
    fftw_complex *X = fftw_alloc_complex(C * H), *W = fftw_alloc_complex(C * C * H);
    if (!grid || !X || !W) vijp_out_of_memory((C * C + C) * (n + H) * sizeof(double) * 2);
    /* Ŵ: kernel (o, c) placed at its taps' offsets mod the grid */
    memset(grid, 0, C * C * n * sizeof *grid);
    for (size_t oc = 0; oc < C * C; oc++)
        for (size_t k = 0; k < T; k++) {
            size_t dy = (k / K + R - hy) % R, dx = (k % K + Q - hx) % Q;
            grid[oc * n + dy * Q + dx] += th[oc * T + k];
        }
    fftw_plan p = plan_many(C * C, R, Q, grid, W, 0);
    fftw_execute_dft_r2c(p, grid, W);
    plan_free(p);
    /* One C × C system per frequency (column-major for LAPACK), factored once
     * for the batch: LU[w] holds frequency w's factors. */
    double complex *LU = vijp_alloc_array(C * C * H, sizeof *LU), *z = vijp_alloc_array(C, sizeof *z);
    size_t *spiv = vijp_alloc_array(C * H, sizeof *spiv);
    lapack_int *piv = vijp_alloc_array(C * H, sizeof *piv);
    int rc = 0;
    for (size_t w = 0; w < H && !rc; w++) {
        double complex *A = LU + w * C * C;
        for (size_t o = 0; o < C; o++)
            for (size_t c = 0; c < C; c++) {
                double complex s = W[(o * C + c) * H + w];
                if (transpose) A[c + o * C] = s; /* Ŵᵀ[c][o] */
                else A[o + c * C] = conj(s);
            }
        if (C <= SMALL_C ? small_lu_factor(C, A, spiv + w * C)
                         : LAPACKE_zgetrf(LAPACK_COL_MAJOR, (lapack_int)C, (lapack_int)C, A, (lapack_int)C, piv + w * C)) {
            rc = VIJP_ESINGULAR;
            *bad_freq = w;
        }
    }
    fftw_plan fwd = rc ? NULL : plan_many(C, R, Q, grid, X, 0), back = rc ? NULL : plan_many(C, R, Q, grid, X, 1);
    for (size_t b = 0; b < B && !rc; b++) {
        /* r̂: the C channels of sample b */
        memcpy(grid, in + b * C * n, C * n * sizeof *grid);
        fftw_execute_dft_r2c(fwd, grid, X);
        for (size_t w = 0; w < H; w++) {
            for (size_t c = 0; c < C; c++) z[c] = X[c * H + w];
            if (C <= SMALL_C) small_lu_solve(C, LU + w * C * C, spiv + w * C, z);
            else LAPACKE_zgetrs(LAPACK_COL_MAJOR, 'N', (lapack_int)C, 1, LU + w * C * C, (lapack_int)C, piv + w * C, z,
                                (lapack_int)C);
            for (size_t c = 0; c < C; c++) X[c * H + w] = z[c];
        }
        /* ẑ back to positions: FFTW's inverse is unnormalised */
        fftw_execute_dft_c2r(back, X, grid);
        for (size_t i = 0; i < C * n; i++) out[b * C * n + i] = grid[i] / (double)n;
    }
    if (fwd) plan_free(fwd), plan_free(back);
    free(LU), free(z), free(spiv), free(piv);
    fftw_free(grid), fftw_free(X), fftw_free(W);
    return rc;
}

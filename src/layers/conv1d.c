/* 1-D convolution, "same" padding: conv1d:CxK[sS][:circular].  The input of
 * width n holds C channels of length L = n/C, channel-major (x[c·L + p]); the
 * output holds C channels of length L/S (stride S, default 1).  With
 * h = (K−1)/2 and K odd,
 *   y[o,p] = b[o] + Σ_c Σ_k W[o,c,k] · x[c, S·p + k − h],
 * positions outside [0, L) being 0 (zero padding, the default) or wrapped
 * (circular).  Parameters: W[o][c][k] at (o·C + c)·K + k, then b.
 *
 * J[(o,p),(c,q)] = W[o,c,k] where q = S·p + k − h (mod L when circular): its
 * entries are the weights themselves, exactly (K <= L, so no two taps meet).
 * A strided convolution is wide (C·L/S × C·L): submersive exactly when J has
 * full row rank, which depends on the weights; vijp certify proves it (or
 * not) at given weights, from this exact Jacobian.
 *
 * The vijp solves g_y J = g_x.  Circular padding makes J block-circulant:
 * the DFT over positions turns it into one C × C system per frequency ω,
 *   Ŵ(ω)ᵀ ĝ_y(ω) = ĝ_x(ω),  Ŵ(ω)[o][c] = Σ_k W[o,c,k] e^{−2πiω(k−h)/L},
 * solved by complex LU with partial pivoting: O(C L² + L C³) per sample
 * (a plain DFT; L is small here) instead of O((CL)³).  Zero padding breaks
 * that structure (J is block-Toeplitz, not circulant), so the vijp and the
 * inverse fall back to a dense LU of J (LAPACK dgesv), and say so here.  So
 * does a stride S > 1 (the decimation mixes frequencies): its vijp is the
 * dense layer's minimum-norm solve on J (QR of Jᵀ), and it has no inverse. */
#include "vijp/layer.h"
#include "init.h"
#include "../../oracles/oracles.h"
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH(L) ((L)->iarg[0])
#define KS(L) ((L)->iarg[1])
#define CIRC(L) ((L)->iarg[2] & 1)
#define STRIDE(L) ((L)->iarg[2] >> 1) /* iarg[2] = 2·S + circular */
#define LEN(L) ((L)->in / CH(L))
#define OUTLEN(L) ((L)->out / CH(L))

extern const vijp_layer_type vijp_layer_dense;

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    unsigned long c = 0, k = 0, stride = 1;
    int used = 0, u2 = 0;
    const char *pad = "";
    if (arg && sscanf(arg, "%lux%lu%n", &c, &k, &used) == 2) {
        pad = arg + used;
        if (*pad == 's' && sscanf(pad, "s%lu%n", &stride, &u2) == 1) pad += u2;
        else if (*pad == 's') stride = 0;
    }
    if (!arg || !used || c == 0 || k == 0 || stride == 0 || (*pad && strcmp(pad, ":zero") && strcmp(pad, ":circular")))
        return vijp_fail(err, VIJP_EINVAL, "conv1d needs conv1d:CHANNELSxKERNEL[sSTRIDE][:zero|:circular] (e.g. conv1d:4x3, "
                         "conv1d:4x3s2), got 'conv1d:%s'", arg ? arg : "");
    if (k % 2 == 0) return vijp_fail(err, VIJP_EINVAL, "conv1d: the kernel size must be odd (got %lu)", k);
    if (in_width == 0 || in_width % c)
        return vijp_fail(err, VIJP_EDIM, "conv1d: the input width %zu is not a multiple of %lu channels%s", in_width, c,
                         in_width ? "" : " (give --width)");
    if (k > in_width / c)
        return vijp_fail(err, VIJP_EDIM, "conv1d: kernel %lu is longer than the %zu positions per channel", k, in_width / c);
    if ((in_width / c) % stride)
        return vijp_fail(err, VIJP_EDIM, "conv1d: stride %lu does not divide the %zu positions per channel", stride,
                         in_width / c);
    L->in = in_width, L->out = in_width / stride;
    CH(L) = c, KS(L) = k, L->iarg[2] = 2 * stride + !strcmp(pad, ":circular");
    return 0;
}

static size_t param_count(const vijp_layer *L) { return CH(L) * CH(L) * KS(L) + CH(L); }
static unsigned declare(const vijp_layer *L) { (void)L; return 0; } /* submersive iff J is nonsingular */

/* Gaussian: N(0, 1/(C·K)) every tap.  Orthogonal (and scaled): delta-
 * orthogonal (Xiao et al. 2018), an orthogonal C × C centre tap and zero
 * elsewhere, which makes J orthogonal. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t C = CH(L), K = KS(L), h = (K - 1) / 2;
    memset(theta, 0, param_count(L) * sizeof *theta);
    if (in.kind == VIJP_INIT_GAUSSIAN) {
        double s = 1 / sqrt((double)(C * K));
        for (size_t i = 0; i < C * C * K; i++) theta[i] = s * vijp_rng_normal(rng);
    } else {
        double *Q = malloc(C * C * sizeof *Q);
        int rc = Q ? vijp_orthogonal_init(C, C, rng, Q) : VIJP_ENOMEM;
        for (size_t o = 0; !rc && o < C; o++)
            for (size_t c = 0; c < C; c++) theta[(o * C + c) * K + h] = (in.kind == VIJP_INIT_SCALED ? in.gain : 1) * Q[o + c * C];
        free(Q);
        if (rc) return rc;
    }
    for (size_t o = 0; o < C; o++) theta[C * C * K + o] = 0.1 * vijp_rng_normal(rng);
    return 0;
}

/* Input position of output position p through tap k, or −1 (zero padding). */
static long tap(const vijp_layer *L, size_t p, size_t k)
{
    long q = (long)(STRIDE(L) * p) + (long)k - (long)(KS(L) - 1) / 2, n = (long)LEN(L);
    if (CIRC(L)) return ((q % n) + n) % n;
    return q < 0 || q >= n ? -1 : q;
}

/* V = J U (+ b when bias), per sample. */
static void apply(const vijp_layer *L, const double *th, const double *U, size_t B, double *V, int bias)
{
    size_t C = CH(L), K = KS(L), n = LEN(L), no = OUTLEN(L);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < no; p++) {
                double s = bias ? th[C * C * K + o] : 0;
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < K; k++) {
                        long q = tap(L, p, k);
                        if (q >= 0) s += th[(o * C + c) * K + k] * U[b * L->in + c * n + (size_t)q];
                    }
                V[b * L->out + o * no + p] = s;
            }
}

static void forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y) { apply(L, th, X, B, Y, 1); }

static void jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V)
{
    (void)X;
    apply(L, th, U, B, V, 0);
}

/* G_x[c,q] = Σ_o Σ_k W[o,c,k] G_y[o,p] over the p with tap(p, k) = q. */
static void vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx)
{
    (void)X;
    size_t C = CH(L), K = KS(L), n = LEN(L), no = OUTLEN(L);
    memset(Gx, 0, L->in * B * sizeof *Gx);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < no; p++) {
                double g = Gy[b * L->out + o * no + p];
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < K; k++) {
                        long q = tap(L, p, k);
                        if (q >= 0) Gx[b * L->in + c * n + (size_t)q] += th[(o * C + c) * K + k] * g;
                    }
            }
}

static void vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gt)
{
    (void)th;
    size_t C = CH(L), K = KS(L), n = LEN(L), no = OUTLEN(L);
    memset(Gt, 0, param_count(L) * sizeof *Gt);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < no; p++) {
                double g = Gy[b * L->out + o * no + p];
                Gt[C * C * K + o] += g;
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < K; k++) {
                        long q = tap(L, p, k);
                        if (q >= 0) Gt[(o * C + c) * K + k] += g * X[b * L->in + c * n + (size_t)q];
                    }
            }
}

static void jacobian(const vijp_layer *L, const double *th, const double *x, double *J)
{
    (void)x;
    size_t C = CH(L), K = KS(L), n = LEN(L), no = OUTLEN(L), M = L->out;
    memset(J, 0, M * L->in * sizeof *J);
    for (size_t o = 0; o < C; o++)
        for (size_t p = 0; p < no; p++)
            for (size_t c = 0; c < C; c++)
                for (size_t k = 0; k < K; k++) {
                    long q = tap(L, p, k);
                    if (q >= 0) J[(o * no + p) + (c * n + (size_t)q) * M] = th[(o * C + c) * K + k];
                }
}

/* ---- circular: per-frequency C × C solves ---- */

/* Solve A z = r (A: C × C complex, row-major A[i·C + j], overwritten). */
static int csolve(size_t C, double complex *A, double complex *r)
{
    for (size_t c = 0; c < C; c++) {
        size_t piv = c;
        for (size_t i = c + 1; i < C; i++)
            if (cabs(A[i * C + c]) > cabs(A[piv * C + c])) piv = i;
        if (A[piv * C + c] == 0) return VIJP_ESINGULAR;
        if (piv != c) {
            for (size_t j = 0; j < C; j++) {
                double complex t = A[c * C + j];
                A[c * C + j] = A[piv * C + j], A[piv * C + j] = t;
            }
            double complex t = r[c];
            r[c] = r[piv], r[piv] = t;
        }
        for (size_t i = c + 1; i < C; i++) {
            double complex l = A[i * C + c] / A[c * C + c];
            for (size_t j = c + 1; j < C; j++) A[i * C + j] -= l * A[c * C + j];
            r[i] -= l * r[c];
        }
    }
    for (size_t i = C; i-- > 0;) {
        for (size_t j = i + 1; j < C; j++) r[i] -= A[i * C + j] * r[j];
        r[i] /= A[i * C + i];
    }
    return 0;
}

/* out[c][·] from in[c][·] by one channel-wise solve per frequency:
 * transpose: Ŵ(ω)ᵀ ẑ = r̂ (the vijp); otherwise conj(Ŵ(ω)) ẑ = r̂ (the inverse,
 * for y = Jx is a correlation: ŷ = Σ_c conj(ŵ_oc) x̂_c). */
static int circulant_solve(const vijp_layer *L, const double *th, const double *in, double *out, int transpose,
                           size_t *bad_freq)
{
    size_t C = CH(L), K = KS(L), n = LEN(L), h = (K - 1) / 2;
    double complex *R = malloc(C * n * sizeof *R), *A = malloc(C * C * sizeof *A), *z = malloc(C * sizeof *z);
    int rc = R && A && z ? 0 : VIJP_ENOMEM;
    const double tau = 2 * M_PI / (double)n;
    for (size_t c = 0; !rc && c < C; c++) /* DFT of every channel */
        for (size_t w = 0; w < n; w++) {
            double complex s = 0;
            for (size_t p = 0; p < n; p++) s += in[c * n + p] * cexp(-I * tau * (double)((w * p) % n));
            R[c * n + w] = s;
        }
    for (size_t w = 0; !rc && w < n; w++) {
        for (size_t o = 0; o < C; o++)
            for (size_t c = 0; c < C; c++) {
                double complex s = 0;
                for (size_t k = 0; k < K; k++) {
                    size_t d = (k + n - h) % n; /* k − h mod n */
                    s += th[(o * C + c) * K + k] * cexp(-I * tau * (double)((w * d) % n));
                }
                if (transpose) A[c * C + o] = s; /* Ŵᵀ[c][o] */
                else A[o * C + c] = conj(s);
            }
        for (size_t c = 0; c < C; c++) z[c] = R[c * n + w];
        if ((rc = csolve(C, A, z))) *bad_freq = w;
        for (size_t c = 0; c < C; c++) R[c * n + w] = z[c];
    }
    for (size_t c = 0; !rc && c < C; c++) /* inverse DFT, real part */
        for (size_t p = 0; p < n; p++) {
            double complex s = 0;
            for (size_t w = 0; w < n; w++) s += R[c * n + w] * cexp(I * tau * (double)((w * p) % n));
            out[c * n + p] = creal(s) / (double)n;
        }
    free(R), free(A), free(z);
    return rc;
}

/* ---- zero padding: dense LU of J (no structure used) ---- */

static int dense_solve(const vijp_layer *L, const double *th, double *rhs, size_t B, int transpose)
{
    size_t N = L->in;
    double *J = malloc(N * N * sizeof *J), *A = malloc(N * N * sizeof *A);
    lapack_int *piv = malloc(N * sizeof *piv);
    int rc = J && A && piv ? 0 : VIJP_ENOMEM;
    if (!rc) {
        jacobian(L, th, NULL, J);
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++) A[i + j * N] = transpose ? J[j + i * N] : J[i + j * N];
        if (LAPACKE_dgesv(LAPACK_COL_MAJOR, (int)N, (int)B, A, (int)N, piv, rhs, (int)N)) rc = VIJP_ESINGULAR;
    }
    free(J), free(A), free(piv);
    return rc;
}

static int vijp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    int rc = 0;
    size_t w = 0;
    if (STRIDE(L) > 1) { /* the dense layer's minimum-norm solve on J (wide: QR of Jᵀ) */
        size_t M = L->out, N = L->in;
        double *th_d = calloc(M * N + M, sizeof *th_d);
        if (!th_d) return vijp_fail(err, VIJP_ENOMEM, "out of memory");
        jacobian(L, th, NULL, th_d);
        vijp_layer dl = {.type = &vijp_layer_dense, .in = N, .out = M};
        rc = vijp_layer_dense.d->vijp(&dl, th_d, X, B, Gx, NULL, Gy, err);
        free(th_d);
        return rc;
    }
    if (CIRC(L)) {
        for (size_t b = 0; b < B && !rc; b++) rc = circulant_solve(L, th, Gx + b * L->in, Gy + b * L->in, 1, &w);
    } else {
        memcpy(Gy, Gx, L->in * B * sizeof *Gy);
        rc = dense_solve(L, th, Gy, B, 1);
    }
    if (rc == VIJP_ESINGULAR && CIRC(L))
        return vijp_fail(err, rc, "conv1d vijp: the channel matrix at frequency %zu is singular", w);
    if (rc == VIJP_ESINGULAR) return vijp_fail(err, rc, "conv1d vijp: J is singular (dense LU)");
    return rc ? vijp_fail(err, rc, "conv1d vijp: out of memory") : 0;
}

static int inverse(const vijp_layer *L, const double *th, const double *Y, size_t B, double *X, vijp_error *err)
{
    if (STRIDE(L) > 1) return vijp_fail(err, VIJP_EUNSUPPORTED, "conv1d with stride %zu is not invertible", STRIDE(L));
    size_t C = CH(L), K = KS(L), n = LEN(L), w = 0;
    double *R = malloc(L->in * B * sizeof *R);
    if (!R) return vijp_fail(err, VIJP_ENOMEM, "out of memory");
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L->in; i++) R[b * L->in + i] = Y[b * L->in + i] - th[C * C * K + i / n];
    int rc = 0;
    if (CIRC(L)) {
        for (size_t b = 0; b < B && !rc; b++) rc = circulant_solve(L, th, R + b * L->in, X + b * L->in, 0, &w);
    } else {
        rc = dense_solve(L, th, R, B, 0);
        if (!rc) memcpy(X, R, L->in * B * sizeof *X);
    }
    free(R);
    return rc ? vijp_fail(err, rc, "conv1d inverse: J is singular") : 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_conv1d_forward, .jvp = vo_conv1d_jvp, .vjp = vo_conv1d_vjp, .vjp_param = vo_conv1d_vjp_param,
    .vijp = vo_conv1d_vijp, .jacobian = vo_conv1d_jacobian, .inverse = vo_conv1d_inverse,
};

const vijp_layer_type vijp_layer_conv1d = {
    .name = "conv1d",
    .syntax = "conv1d:CxK[sS][:zero|:circular] (C channels of width/C positions, odd kernel K, stride S, same padding)",
    .parse = parse, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .jacobian_exact = 1,
};

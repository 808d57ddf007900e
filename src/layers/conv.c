/* Convolutions with "same" padding, 1-D and 2-D:
 *   conv1d:CxK[sS][:circular]    C channels of L = n/C positions;
 *   conv2d:CxKxH[sS][:circular]  C channels of an H × (n/(C·H)) grid, K × K kernel.
 * Channel-major layout (x[c·H·Wd + row·Wd + col]); the output holds C
 * channels of the grid decimated by the stride S (default 1; 1-D decimates
 * columns only).  With K odd and h = (K−1)/2,
 *   y[o,r,q] = b[o] + Σ_c Σ_(ky,kx) W[o,c,ky,kx] · x[c, S·r + ky − h, S·q + kx − h]
 * (1-D: one row, ky = 0), positions outside the grid being 0 (zero padding,
 * the default) or wrapped (circular).  Parameters: W[o][c][ky][kx] at
 * ((o·C + c)·KH + ky)·K + kx (KH = 1 in 1-D), then b.
 *
 * J[(o,r,q),(c,r′,q′)] = W[o,c,ky,kx] for the tap that reaches (r′, q′): its
 * entries are the weights themselves, exactly (K <= the grid, so no two taps
 * meet).  A strided convolution is wide: submersive exactly when J has full
 * row rank, which depends on the weights; vijp certify proves it (or not) at
 * given weights, from this exact Jacobian.
 *
 * The vijp solves g_y J = g_x.  Circular padding with stride 1 makes J block-
 * circulant (doubly so in 2-D): the DFT over positions turns it into one
 * C × C system per frequency ω,
 *   Ŵ(ω)ᵀ ĝ_y(ω) = ĝ_x(ω),  Ŵ(ω)[o][c] = Σ_k W[o,c,k] e^{−2πi⟨ω, k − h⟩/grid},
 * by FFT and LAPACK's complex LU (conv_circular.c): O(C²·P log P + P·C³) per
 * sample for P positions instead of O((C·P)³).  Zero
 * padding breaks that structure (J is block-Toeplitz, not circulant), so the
 * vijp and the inverse fall back to a dense LU of J (LAPACK dgesv), and say
 * so here.  So does a stride S > 1 (the decimation mixes frequencies): its
 * vijp is the dense layer's minimum-norm solve on J (QR of Jᵀ), and it has no
 * inverse. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "args.h"
#include "init.h"
#include "conv_circular.h"
#include "state.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include "emu/conv.h"
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The operators read their own instance's state directly: the type check of
 * vijp_conv_get is for callers outside this file, not for every index. */
#define ARGS(L) ((const vijp_conv_args *)(L)->state)
#define CH(L) (ARGS(L)->channels)
#define KS(L) (ARGS(L)->kernel)
#define CIRC(L) (ARGS(L)->circular)
#define STRIDE(L) (ARGS(L)->stride)
#define IS2D(L) (ARGS(L)->rows > 0)
#define ROWS(L) (IS2D(L) ? ARGS(L)->rows : 1)
#define KH(L) (IS2D(L) ? KS(L) : 1)
#define LEN(L) ((L)->in / CH(L))       /* positions per input channel */
#define OUTLEN(L) ((L)->out / CH(L))   /* per output channel */
#define COLS(L) (LEN(L) / ROWS(L))
#define OROWS(L) (IS2D(L) ? ROWS(L) / STRIDE(L) : 1)
#define OCOLS(L) (OUTLEN(L) / OROWS(L))

extern const vijp_layer_type vijp_layer_dense, vijp_layer_conv1d, vijp_layer_conv2d;

static int print(const vijp_layer *L, char *buf, size_t size)
{
    const vijp_conv_args *a = vijp_conv_get(L);
    char stride[24] = "";
    if (a->stride > 1) snprintf(stride, sizeof stride, "s%zu", a->stride);
    if (a->rows) return snprintf(buf, size, "conv2d:%zux%zux%zu%s%s", a->channels, a->kernel, a->rows, stride, a->circular ? ":circular" : "");
    return snprintf(buf, size, "conv1d:%zux%zu%s%s", a->channels, a->kernel, stride, a->circular ? ":circular" : "");
}

/* CxK[xH][sS][:zero|:circular] into a (rows 0 in 1-D); the rest of the
 * spec's shape rules are checked by parse_conv. */
static int read_conv(const char *arg, int two_d, vijp_conv_args *a)
{
    const char *p = arg;
    size_t rows = 0, stride = 1;
    int rc = !p ? VIJP_ARG_NOT_A_COUNT : vijp_arg_count(&p, &a->channels);
    if (!rc) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &a->kernel)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && two_d) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &rows)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && *p == 's') p++, rc = vijp_arg_count(&p, &stride);
    if (rc) return rc;
    if (*p && strcmp(p, ":zero") && strcmp(p, ":circular")) return VIJP_ARG_NOT_A_COUNT;
    if (!a->channels || !a->kernel || (two_d && !rows) || !stride) return VIJP_ARG_NOT_A_COUNT;
    a->rows = rows, a->stride = stride, a->circular = !strcmp(p, ":circular");
    return 0;
}

static int parse_conv(vijp_layer *L, const char *arg, size_t in_width, int two_d, vijp_error *err)
{
    const char *name = two_d ? "conv2d" : "conv1d";
    vijp_conv_args a = {0};
    int rc = read_conv(arg, two_d, &a);
    if (rc)
        return vijp_fail(err, VIJP_EINVAL, two_d ? "conv2d needs conv2d:CHANNELSxKERNELxROWS[sSTRIDE][:zero|:circular] (e.g. "
                                                   "conv2d:2x3x4), every count in [1, %u], got 'conv2d:%s'"
                                                 : "conv1d needs conv1d:CHANNELSxKERNEL[sSTRIDE][:zero|:circular] (e.g. "
                                                   "conv1d:4x3, conv1d:4x3s2), every count in [1, %u], got 'conv1d:%s'",
                         VIJP_WIDTH_MAX, arg ? arg : "");
    size_t c = a.channels, k = a.kernel, rows = two_d ? a.rows : 1, stride = a.stride; /* each <= 2^24: no product overflows */
    if (k % 2 == 0) return vijp_fail(err, VIJP_EINVAL, "%s: the kernel size must be odd (got %zu)", name, k);
    if (in_width == 0 || in_width % (c * rows))
        return vijp_fail(err, VIJP_EDIM, "%s: the input width %zu is not a multiple of %zu channels x %zu rows%s", name,
                         in_width, c, rows, in_width ? "" : " (give --width)");
    size_t cols = in_width / (c * rows);
    if (!two_d && k > cols)
        return vijp_fail(err, VIJP_EDIM, "conv1d: kernel %zu is longer than the %zu positions per channel", k, cols);
    if (two_d && (k > cols || k > rows))
        return vijp_fail(err, VIJP_EDIM, "conv2d: kernel %zu is larger than the %zu x %zu grid", k, rows, cols);
    if (cols % stride || (two_d && rows % stride))
        return vijp_fail(err, VIJP_EDIM, "%s: stride %zu does not divide the %zu x %zu grid", name, stride, rows, cols);
    vijp_state_new(L, sizeof(vijp_conv_args));
    L->in = in_width, L->out = in_width / stride / (two_d ? stride : 1);
    *(vijp_conv_args *)L->state = a;
    return 0;
}

static int parse1(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err) { return parse_conv(L, arg, in_width, 0, err); }
static int parse2(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err) { return parse_conv(L, arg, in_width, 1, err); }

static size_t param_count(const vijp_layer *L) { return CH(L) * CH(L) * KH(L) * KS(L) + CH(L); }
#define NW(L) (CH(L) * CH(L) * KH(L) * KS(L)) /* weights before the biases */
static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_LINEAR; } /* submersive iff J is nonsingular */

/* Gaussian: N(0, 1/(C·K)) every tap.  Orthogonal (and scaled): delta-
 * orthogonal (Xiao et al. 2018), an orthogonal C × C centre tap and zero
 * elsewhere, which makes J orthogonal. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t C = CH(L), K = KS(L), T = KH(L) * K, centre = (KH(L) - 1) / 2 * K + (K - 1) / 2;
    memset(theta, 0, param_count(L) * sizeof *theta);
    if (in.kind == VIJP_INIT_KAIMING_UNIFORM) {
        vijp_kaiming_uniform(NW(L) + C, C * T, rng, theta); /* fan_in = C·taps, as nn.ConvNd */
        return 0;
    }
    if (in.kind == VIJP_INIT_GAUSSIAN) {
        double s = 1 / sqrt((double)(C * T));
        for (size_t i = 0; i < NW(L); i++) theta[i] = s * vijp_rng_normal(rng);
    } else {
        double *Q = vijp_alloc_array(C * C, sizeof *Q);
        int rc = vijp_orthogonal_init(C, C, rng, Q);
        for (size_t o = 0; !rc && o < C; o++)
            for (size_t c = 0; c < C; c++) theta[(o * C + c) * T + centre] = (in.kind == VIJP_INIT_SCALED ? in.gain : 1) * Q[o + c * C];
        free(Q);
        if (rc) return rc;
    }
    for (size_t o = 0; o < C; o++) theta[NW(L) + o] = 0.1 * vijp_rng_normal(rng);
    return 0;
}

/* Input position (row-major in the grid) read by output position p through
 * tap k = ky·K + kx, or −1 (zero padding). */
static long tap(const vijp_layer *L, size_t p, size_t k)
{
    long K = (long)KS(L), hy = (long)(KH(L) - 1) / 2, hx = (K - 1) / 2, S = (long)STRIDE(L);
    long R = (long)ROWS(L), Q = (long)COLS(L), oc = (long)OCOLS(L);
    long r = IS2D(L) ? S * ((long)p / oc) + (long)k / K - hy : 0, q = S * ((long)p % oc) + (long)k % K - hx;
    if (CIRC(L)) return ((r % R + R) % R) * Q + (q % Q + Q) % Q;
    return r < 0 || r >= R || q < 0 || q >= Q ? -1 : r * Q + q;
}

#define TAPS(L) (KH(L) * KS(L))

/* tap(L, p, k) for every output position p and tap k, at p·TAPS + k.  Built
 * once per call, it takes tap's divisions out of the operators' inner loops;
 * the terms and their order are unchanged, so are the results, bit for bit. */
static long *tap_table(const vijp_layer *L)
{
    size_t K = TAPS(L), no = OUTLEN(L);
    long *t = vijp_alloc_array(no * K, sizeof *t);
    for (size_t p = 0; p < no; p++)
        for (size_t k = 0; k < K; k++) t[p * K + k] = tap(L, p, k);
    return t;
}

/* V = J U (+ b when bias), per sample.  Each output's sum is formed as
 * b + Σ_c Σ_k w·u in that order; the positions run innermost, so that the
 * additions of neighbouring outputs overlap instead of waiting on one
 * another (each output's own order is unchanged). */
static void apply(const vijp_layer *L, const double *th, const double *U, size_t B, double *V, int bias)
{
    size_t C = CH(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L), *tk = vijp_alloc_array(no * K, sizeof *tk); /* tk[k·no + p]: tap k of position p */
    for (size_t p = 0; p < no; p++)
        for (size_t k = 0; k < K; k++) tk[k * no + p] = t[p * K + k];
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++) {
            double *v = V + b * L->out + o * no;
            for (size_t p = 0; p < no; p++) v[p] = bias ? th[NW(L) + o] : 0;
            for (size_t c = 0; c < C; c++) {
                const double *u = U + b * L->in + c * n;
                for (size_t k = 0; k < K; k++) {
                    double w = th[(o * C + c) * K + k];
                    const long *q = tk + k * no;
                    for (size_t p = 0; p < no; p++)
                        if (q[p] >= 0) v[p] += w * u[q[p]];
                }
            }
        }
    free(t), free(tk);
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    double *Y) { (void)cx; apply(L, th, X, B, Y, 1); }

static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)cx, (void)X;
    apply(L, th, U, B, V, 0);
}

/* G_x[c,q] = Σ_o Σ_k W[o,c,k] G_y[o,p] over the p with tap(p, k) = q. */
static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    (void)cx, (void)X;
    size_t C = CH(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L);
    memset(Gx, 0, L->in * B * sizeof *Gx);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < no; p++) {
                double g = Gy[b * L->out + o * no + p];
                const long *tp = t + p * K;
                for (size_t c = 0; c < C; c++) {
                    const double *w = th + (o * C + c) * K;
                    double *gx = Gx + b * L->in + c * n;
                    for (size_t k = 0; k < K; k++)
                        if (tp[k] >= 0) gx[tp[k]] += w[k] * g;
                }
            }
    free(t);
}

static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx, (void)th;
    size_t C = CH(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L);
    memset(Gt, 0, param_count(L) * sizeof *Gt);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < C; o++)
            for (size_t p = 0; p < no; p++) {
                double g = Gy[b * L->out + o * no + p];
                const long *tp = t + p * K;
                Gt[NW(L) + o] += g;
                for (size_t c = 0; c < C; c++) {
                    double *gt = Gt + (o * C + c) * K;
                    const double *x = X + b * L->in + c * n;
                    for (size_t k = 0; k < K; k++)
                        if (tp[k] >= 0) gt[k] += g * x[tp[k]];
                }
            }
    free(t);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    size_t C = CH(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L), M = L->out;
    memset(J, 0, M * L->in * sizeof *J);
    for (size_t o = 0; o < C; o++)
        for (size_t p = 0; p < no; p++)
            for (size_t c = 0; c < C; c++)
                for (size_t k = 0; k < K; k++) {
                    long q = tap(L, p, k);
                    if (q >= 0) J[(o * no + p) + (c * n + (size_t)q) * M] = th[(o * C + c) * K + k];
                }
}

/* ---- zero padding: dense LU of J (no structure used) ---- */

static int dense_solve(const vijp_layer *L, const vijp_kctx *cx, const double *th, double *rhs, size_t B, int transpose)
{
    size_t N = L->in;
    double *J = vijp_alloc_array(N * N, sizeof *J), *A = vijp_alloc_array(N * N, sizeof *A);
    lapack_int *piv = vijp_alloc_array(N, sizeof *piv);
    int rc = 0;
    if (!rc) {
        jacobian(L, cx, th, NULL, J);
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++) A[i + j * N] = transpose ? J[j + i * N] : J[i + j * N];
        if (LAPACKE_dgesv(LAPACK_COL_MAJOR, (int)N, (int)B, A, (int)N, piv, rhs, (int)N)) rc = VIJP_ESINGULAR;
    }
    free(J), free(A), free(piv);
    return rc;
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    int rc = 0;
    size_t w = 0;
    if (STRIDE(L) > 1) { /* the dense layer's minimum-norm solve on J (wide: QR of Jᵀ) */
        size_t M = L->out, N = L->in;
        double *th_d = vijp_alloc_array(M * N + M, sizeof *th_d);
        jacobian(L, cx, th, NULL, th_d);
        vijp_layer dl = {.type = &vijp_layer_dense, .in = N, .out = M};
        rc = vijp_layer_dense.d->vijp(&dl, cx, th_d, X, B, Gx, NULL, Gy, err);
        free(th_d);
        return rc;
    }
    if (CIRC(L)) {
        rc = vijp_conv_circulant_solve(ARGS(L), L->in, th, Gx, Gy, B, 1, &w);
    } else {
        memcpy(Gy, Gx, L->in * B * sizeof *Gy);
        rc = dense_solve(L, cx, th, Gy, B, 1);
    }
    if (rc == VIJP_ESINGULAR && CIRC(L))
        return vijp_fail(err, rc, "conv1d vijp: the channel matrix at frequency %zu is singular", w);
    if (rc == VIJP_ESINGULAR) return vijp_fail(err, rc, "conv1d vijp: J is singular (dense LU)");
    return rc ? vijp_fail(err, rc, "conv1d vijp: out of memory") : 0;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    if (STRIDE(L) > 1) return vijp_fail(err, VIJP_EUNSUPPORTED, "conv1d with stride %zu is not invertible", STRIDE(L));
    size_t n = LEN(L), w = 0;
    double *R = vijp_alloc_array(L->in * B, sizeof *R);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L->in; i++) R[b * L->in + i] = Y[b * L->in + i] - th[NW(L) + i / n];
    int rc = 0;
    if (CIRC(L)) {
        rc = vijp_conv_circulant_solve(ARGS(L), L->in, th, R, X, B, 0, &w);
    } else {
        rc = dense_solve(L, cx, th, R, B, 0);
        if (!rc) memcpy(X, R, L->in * B * sizeof *X);
    }
    free(R);
    return rc ? vijp_fail(err, rc, "conv1d inverse: J is singular") : 0;
}

/* ---- the error-bound contract (vijp_layer_bounds; tests/t-layers.c) ---- */

/* b[o] is added to every position of output channel o. */
/* The FFT solve's backward error (stride 1, circular; conv_circular.c), for
 * the layer battery and vijp check-layer, in units of u.  The normwise
 * backward error of z = vijp(g) as a solution of Jᵀz = g, residual formed
 * by the layer's vjp, is η = ‖vjp(z) − g‖/(‖J‖_F‖z‖ + ‖g‖) <=
 * (10·log₂P + 3C·2^(C−1) + CK + 1)·u: forward and inverse FFTs (Higham,
 * ASNA §24.1, about 5·log₂P·u each), the per-frequency C × C LU with partial
 * pivoting (Thm 9.4: γ_3C times the growth, at most 2^(C−1)), and the vjp's
 * dot products of C·K terms (eq. 3.5); tests/t-layers.c checks it
 * (circular_vijp_backward_error).  The battery measures the residual
 * against ‖J‖_F‖z‖ alone; ‖g‖ <= ‖vjp(z)‖ + ‖vjp(z) − g‖ <= (1 + η)‖J‖_F‖z‖
 * (the vjp's own error inside the bound above), so twice the constant, plus
 * one, covers it.  Other convolutions (zero padding, strides: dense
 * solves): 0, the generic bound. */
static double solve_ulps(const vijp_layer *L)
{
    if (!CIRC(L) || STRIDE(L) != 1) return 0;
    double C = (double)CH(L), P = (double)LEN(L), K = (double)(KH(L) * KS(L));
    return 2 * (10 * log2(P) + 3 * C * ldexp(1, (int)CH(L) - 1) + C * K + 1) + 1;
}

static size_t bias_index(const vijp_layer *L, size_t i) { return NW(L) + (i % L->out) / (L->out / CH(L)); }

/* Every entry of the parameter gradient is a sum over the batch and the
 * output positions of products G·X (or of G alone for b):
 *   dW[o,c,k] = Σ_b Σ_p G[o,p] X[c, p+k−h],  db[o] = Σ_b Σ_p G[o,p],
 * within γ_(terms+1) Σ |G||X| (Higham eq. 3.5), terms = B·(positions). */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bp)
{
    (void)th;
    size_t m = L->out, n = L->in, C = CH(L), K = KS(L), T = KH(L) * K, np = n / C, no = m / C;
    size_t S = STRIDE(L), R = ROWS(L), Q = np / R, oq = IS2D(L) ? Q / S : no;
    double terms = (double)(B * no + 1);
    for (size_t o = 0; o < C; o++)
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < no; p++) {
                double g = aG[b * m + o * no + p];
                bp[NW(L) + o] += terms * u * g;
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < T; k++) {
                        long r = IS2D(L) ? (long)(S * (p / oq) + k / K) - (long)(KH(L) / 2) : 0;
                        long q = (long)(S * (p % oq) + k % K) - (long)(K / 2);
                        if (CIRC(L)) r = (r + (long)R) % (long)R, q = (q + (long)Q) % (long)Q;
                        if (r >= 0 && r < (long)R && q >= 0 && q < (long)Q)
                            bp[(o * C + c) * T + k] += terms * u * g * aX[b * n + c * np + (size_t)(r * (long)Q + q)];
                    }
            }
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

/* The oracle's operators (mp), and in the narrow formats the same run
 * natively, bit for bit (emu: src/emu/conv.c); the route chooses. */
static const vijp_ops_mp ops_mp = {
    .forward = vo_conv1d_forward, .jvp = vo_conv1d_jvp, .vjp = vo_conv1d_vjp, .vjp_param = vo_conv1d_vjp_param,
    .vijp = vo_conv1d_vijp, .jacobian = vo_conv1d_jacobian, .inverse = vo_conv1d_inverse,
};
static const vijp_ops_mp ops_emu = {
    .forward = vijp_emu_conv_forward, .jvp = vijp_emu_conv_jvp, .vjp = vijp_emu_conv_vjp,
    .vjp_param = vijp_emu_conv_vjp_param, .vijp = vijp_emu_conv_vijp, .jacobian = vo_conv1d_jacobian,
    .inverse = vijp_emu_conv_inverse,
};

const vijp_layer_type vijp_layer_conv1d = {
    .name = "conv1d",
    .syntax = "conv1d:CxK[sS][:zero|:circular] (C channels of width/C positions, odd kernel K, stride S, same padding)",
    .parse = parse1, .state_size = sizeof(vijp_conv_args), .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .jacobian_exact = 1,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR, .solve_ulps = solve_ulps}, .bias_index = bias_index, .vjp_param_bound = vjp_param_bound,
};

const vijp_layer_type vijp_layer_conv2d = {
    .name = "conv2d",
    .syntax = "conv2d:CxKxH[sS][:zero|:circular] (C channels of an H x width/(C*H) grid, odd K x K kernel, stride S)",
    .parse = parse2, .state_size = sizeof(vijp_conv_args), .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .jacobian_exact = 1,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR, .solve_ulps = solve_ulps}, .bias_index = bias_index, .vjp_param_bound = vjp_param_bound,
};

/* Convolutions, 1-D and 2-D, as PyTorch's Conv1d and Conv2d:
 *   conv1d:CxK[sS][:out=D][:pad=P][:zero|:circular|:reflect]
 *       C input channels of L = n/C positions, D output channels (default C);
 *   conv2d:CxKxH[sS][...]  C channels of an H × (n/(C·H)) grid, K × K kernel.
 * Channel-major layout (x[c·H·Wd + row·Wd + col]).  Each axis of N positions
 * is padded by P (default K/2 rounded down: "same" for odd K) on both sides
 * and read every S-th position: N_out = (N + 2P − K)/S + 1 (rounded down;
 * 1-D pads and strides the columns only), and
 *   y[o,r,q] = b[o] + Σ_c Σ_(ky,kx) W[o,c,ky,kx] · x[c, S·r + ky − P, S·q + kx − P]
 * (1-D: one row, ky = 0), positions outside the grid being 0 (zero padding,
 * the default), wrapped (circular: i mod N, P <= N) or mirrored without the
 * edge (reflect: −i, 2N − 2 − i; P < N), as torch pads.  Parameters:
 * W[o][c][ky][kx] at ((o·C + c)·KH + ky)·K + kx (KH = 1 in 1-D), then b[D]:
 * torch's weight [D, C, K(, K)] and bias [D], flattened in C order.
 *
 * J[(o,r,q),(c,r′,q′)] = Σ W[o,c,ky,kx] over the taps that reach (r′, q′):
 * one weight, exactly, unless padding folds two taps onto one input
 * (reflect, or circular with K larger than the grid), where it is their
 * rounded sum (jacobian_enclose encloses it, oracles/interval.c).  A layer
 * with fewer outputs than inputs (a stride, D < C, "valid" padding) is
 * submersive exactly when J has full row rank, which depends on the weights;
 * vijp certify proves it (or not) at given weights.  One with more outputs
 * than inputs (D > C, even kernels' extra position) is never submersive.
 *
 * The vijp solves g_y J = g_x.  Circular padding with stride 1, D = C and
 * P = (K−1)/2 makes J block-circulant (doubly so in 2-D): the DFT over
 * positions turns it into one C × C system per frequency ω,
 *   Ŵ(ω)ᵀ ĝ_y(ω) = ĝ_x(ω),  Ŵ(ω)[o][c] = Σ_k W[o,c,k] e^{−2πi⟨ω, k − h⟩/grid},
 * by FFT and LAPACK's complex LU (conv_circular.c): O(C²·P log P + P·C³) per
 * sample for P positions instead of O((C·P)³).  Zero or reflect
 * padding breaks that structure (J is block-Toeplitz, not circulant), so a
 * square J falls back to a dense LU (LAPACK dgesv), and say so here.  So
 * does any other shape: its vijp is the dense layer's on J (minimum-norm
 * QR of Jᵀ when wide, the QR with a fragment when tall), and it has no
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
#include "base/lapack.h"
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The operators read their own instance's state directly: the type check of
 * vijp_conv_get is for callers outside this file, not for every index. */
#define ARGS(L) ((const vijp_conv_args *)(L)->state)
#define CH(L) (ARGS(L)->channels)
#define DOUT(L) (ARGS(L)->out_channels)
#define KS(L) (ARGS(L)->kernel)
#define CIRC(L) (ARGS(L)->circular)
#define STRIDE(L) (ARGS(L)->stride)
#define IS2D(L) (ARGS(L)->rows > 0)
#define ROWS(L) (IS2D(L) ? ARGS(L)->rows : 1)
#define KH(L) (IS2D(L) ? KS(L) : 1)
#define LEN(L) ((L)->in / CH(L))       /* positions per input channel */
#define OUTLEN(L) ((L)->out / DOUT(L)) /* per output channel */
#define COLS(L) (LEN(L) / ROWS(L))
#define OROWS(L) (IS2D(L) ? out_extent(ARGS(L), ROWS(L)) : 1)
#define OCOLS(L) (OUTLEN(L) / OROWS(L))

extern const vijp_layer_type vijp_layer_dense, vijp_layer_conv1d, vijp_layer_conv2d;

/* Output positions along an axis of N inputs: (N + 2P − K)/S + 1. */
static size_t out_extent(const vijp_conv_args *a, size_t N) { return (N + 2 * a->pad - a->kernel) / a->stride + 1; }

/* The FFT's structure (conv_circular.c): a block-circulant square J. */
static int circulant(const vijp_layer *L)
{
    return CIRC(L) && STRIDE(L) == 1 && DOUT(L) == CH(L) && 2 * ARGS(L)->pad + 1 == KS(L);
}

/* Modifiers print only where they differ from the default, so that the
 * specs that existed before them print as they did. */
static int print(const vijp_layer *L, char *buf, size_t size)
{
    const vijp_conv_args *a = vijp_conv_get(L);
    char stride[24] = "", out[32] = "", pad[32] = "";
    if (a->stride > 1) snprintf(stride, sizeof stride, "s%zu", a->stride);
    if (a->out_channels != a->channels) snprintf(out, sizeof out, ":out=%zu", a->out_channels);
    if (a->pad != a->kernel / 2) snprintf(pad, sizeof pad, ":pad=%zu", a->pad);
    const char *mode = a->circular ? ":circular" : a->reflect ? ":reflect" : "";
    if (a->rows) return snprintf(buf, size, "conv2d:%zux%zux%zu%s%s%s%s", a->channels, a->kernel, a->rows, stride, out, pad, mode);
    return snprintf(buf, size, "conv1d:%zux%zu%s%s%s%s", a->channels, a->kernel, stride, out, pad, mode);
}

/* One ":..." modifier at *p (past its ':'): out=D, pad=P or a padding mode;
 * a mode given twice or two modes are refused. */
static int read_modifier(const char **p, vijp_conv_args *a, int *have_out, int *have_pad, int *have_mode)
{
    const char *s = *p;
    size_t len = strcspn(s, ":");
    if (!strncmp(s, "out=", 4) && !*have_out) {
        s += 4, *have_out = 1;
        if (vijp_arg_count(&s, &a->out_channels) || !a->out_channels) return VIJP_ARG_NOT_A_COUNT;
    } else if (!strncmp(s, "pad=", 4) && !*have_pad) {
        s += 4, *have_pad = 1;
        if (vijp_arg_count(&s, &a->pad)) return VIJP_ARG_NOT_A_COUNT;
    } else if (!*have_mode && len == 4 && !strncmp(s, "zero", 4)) {
        s += len, *have_mode = 1;
    } else if (!*have_mode && len == 8 && !strncmp(s, "circular", 8)) {
        s += len, *have_mode = 1, a->circular = 1;
    } else if (!*have_mode && len == 7 && !strncmp(s, "reflect", 7)) {
        s += len, *have_mode = 1, a->reflect = 1;
    } else {
        return VIJP_ARG_NOT_A_COUNT;
    }
    if (*s && *s != ':') return VIJP_ARG_NOT_A_COUNT;
    *p = s;
    return 0;
}

/* CxK[xH][sS][:modifier]... into a (rows 0 in 1-D); the rest of the spec's
 * shape rules are checked by parse_conv. */
static int read_conv(const char *arg, int two_d, vijp_conv_args *a)
{
    const char *p = arg;
    size_t rows = 0, stride = 1;
    int rc = !p ? VIJP_ARG_NOT_A_COUNT : vijp_arg_count(&p, &a->channels);
    if (!rc) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &a->kernel)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && two_d) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &rows)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && *p == 's') p++, rc = vijp_arg_count(&p, &stride);
    if (rc) return rc;
    a->out_channels = a->channels, a->pad = a->kernel / 2;
    int have_out = 0, have_pad = 0, have_mode = 0;
    while (!rc && *p == ':') p++, rc = read_modifier(&p, a, &have_out, &have_pad, &have_mode);
    if (rc || *p) return VIJP_ARG_NOT_A_COUNT;
    if (!a->channels || !a->kernel || (two_d && !rows) || !stride) return VIJP_ARG_NOT_A_COUNT;
    a->rows = rows, a->stride = stride;
    return 0;
}

/* Index i of a padded axis of N positions (−P <= i < N + P) in the grid, or
 * −1 (zero padding). */
static long pad_at(const vijp_conv_args *a, long i, long N)
{
    if (i >= 0 && i < N) return i;
    if (a->circular) return (i % N + N) % N;
    if (a->reflect) return i < 0 ? -i : 2 * (N - 1) - i;
    return -1;
}
#define pad_index(L, i, N) pad_at(ARGS(L), i, N)

/* The grid positions output position q of an axis reads through its K taps
 * (−1: padding), hashed (FNV-1a) so that equal reads sort together. */
typedef struct {
    uint64_t hash;
    size_t q;
} axis_read;

static uint64_t read_hash(const vijp_conv_args *a, size_t q, long N)
{
    uint64_t h = 1469598103934665603u;
    for (size_t k = 0; k < a->kernel; k++) {
        long i = pad_at(a, (long)(a->stride * q + k) - (long)a->pad, N);
        h = (h ^ (uint64_t)(i + 1)) * 1099511628211u;
    }
    return h;
}

static int same_reads(const vijp_conv_args *a, size_t q1, size_t q2, long N)
{
    for (size_t k = 0; k < a->kernel; k++)
        if (pad_at(a, (long)(a->stride * q1 + k) - (long)a->pad, N) != pad_at(a, (long)(a->stride * q2 + k) - (long)a->pad, N))
            return 0;
    return 1;
}

static int by_hash(const void *x, const void *y)
{
    const axis_read *u = x, *v = y;
    return u->hash < v->hash ? -1 : u->hash > v->hash ? 1 : (u->q > v->q) - (u->q < v->q);
}

/* Padding can make J lose rank whatever the weights: an output position that
 * reads only zero padding (P >= K) is a zero row of J, and two that read the
 * same grid positions through the same taps (circular padding wrapping a
 * strided axis around, reflect with K = 1) are equal rows.  Their cokernel
 * is structural, and neither the dense solves nor a fragment here cover it,
 * so such an axis is refused: 1 (zero row at *q1) or 2 (rows *q1 and *q2
 * equal), else 0. */
static int axis_degenerate(const vijp_conv_args *a, size_t N, size_t *q1, size_t *q2)
{
    size_t no = out_extent(a, N);
    axis_read *r = vijp_alloc_array(no, sizeof *r);
    int found = 0;
    for (size_t q = 0; q < no && !found; q++) {
        int zero = 1;
        for (size_t k = 0; k < a->kernel && zero; k++) zero = pad_at(a, (long)(a->stride * q + k) - (long)a->pad, (long)N) < 0;
        if (zero) found = 1, *q1 = q;
        r[q] = (axis_read){read_hash(a, q, (long)N), q};
    }
    if (!found) qsort(r, no, sizeof *r, by_hash);
    for (size_t j = 0; !found && j + 1 < no; j++)
        for (size_t l = j + 1; !found && l < no && r[l].hash == r[j].hash; l++)
            if (same_reads(a, r[j].q, r[l].q, (long)N)) found = 2, *q1 = r[j].q, *q2 = r[l].q;
    free(r);
    return found;
}

/* One axis of N positions: torch's rules for the padded length and the
 * padding modes (circular wraps at most once, reflect never reaches past
 * the far edge). */
static int check_axis(const char *name, const vijp_conv_args *a, size_t N, const char *axis, vijp_error *err)
{
    if (N + 2 * a->pad < a->kernel)
        return vijp_fail(err, VIJP_EDIM, "%s: kernel %zu is larger than the %zu %s padded by %zu on each side", name,
                         a->kernel, N, axis, a->pad);
    if (a->circular && a->pad > N)
        return vijp_fail(err, VIJP_EDIM, "%s: circular padding %zu is more than the %zu %s", name, a->pad, N, axis);
    if (a->reflect && a->pad >= N)
        return vijp_fail(err, VIJP_EDIM, "%s: reflect padding %zu must be less than the %zu %s", name, a->pad, N, axis);
    size_t q1 = 0, q2 = 0;
    int degenerate = axis_degenerate(a, N, &q1, &q2);
    if (degenerate == 1)
        return vijp_fail(err, VIJP_EDIM, "%s: output position %zu of the %zu %s reads only padding (pad %zu >= kernel %zu): "
                         "J has a zero row whatever the weights, which no vijp covers", name, q1, N, axis, a->pad, a->kernel);
    if (degenerate == 2)
        return vijp_fail(err, VIJP_EDIM, "%s: output positions %zu and %zu of the %zu %s read the same inputs through the "
                         "same taps (the padding folds them together): J has equal rows whatever the weights, which no "
                         "vijp covers", name, q1, q2, N, axis);
    return 0;
}

/* The first position of an axis of N that no output reads, or N. */
static size_t unread_position(const vijp_conv_args *a, size_t N)
{
    size_t no = out_extent(a, N), first = N;
    unsigned char *read = vijp_alloc_array(N, 1);
    for (size_t q = 0; q < no; q++)
        for (size_t k = 0; k < a->kernel; k++) {
            long i = pad_at(a, (long)(a->stride * q + k) - (long)a->pad, (long)N);
            if (i >= 0) read[i] = 1;
        }
    for (size_t i = N; i-- > 0;)
        if (!read[i]) first = i;
    free(read);
    return first;
}

static int generic_rank(const vijp_layer *L, size_t *rank);

static int parse_conv(vijp_layer *L, const char *arg, size_t in_width, int two_d, vijp_error *err)
{
    const char *name = two_d ? "conv2d" : "conv1d";
    vijp_conv_args a = {0};
    int rc = read_conv(arg, two_d, &a);
    if (rc)
        return vijp_fail(err, VIJP_EINVAL, two_d ? "conv2d needs conv2d:CHANNELSxKERNELxROWS[sSTRIDE][:out=D][:pad=P]"
                                                   "[:zero|:circular|:reflect] (e.g. conv2d:2x3x4, conv2d:2x2x4s2:out=4:pad=0), "
                                                   "every count in [1, %u] (P from 0), got 'conv2d:%s'"
                                                 : "conv1d needs conv1d:CHANNELSxKERNEL[sSTRIDE][:out=D][:pad=P]"
                                                   "[:zero|:circular|:reflect] (e.g. conv1d:4x3, conv1d:4x3s2, "
                                                   "conv1d:2x4:out=3:pad=0), every count in [1, %u] (P from 0), got 'conv1d:%s'",
                         VIJP_WIDTH_MAX, arg ? arg : "");
    size_t c = a.channels, rows = two_d ? a.rows : 1; /* each <= 2^24: no product overflows */
    if (in_width == 0 || in_width % (c * rows))
        return vijp_fail(err, VIJP_EDIM, "%s: the input width %zu is not a multiple of %zu channels x %zu rows%s", name,
                         in_width, c, rows, in_width ? "" : " (give --width)");
    size_t cols = in_width / (c * rows);
    if ((rc = check_axis(name, &a, cols, two_d ? "columns" : "positions per channel", err))) return rc;
    if (two_d && (rc = check_axis(name, &a, rows, "rows", err))) return rc;
    size_t ocols = out_extent(&a, cols), orows = two_d ? out_extent(&a, rows) : 1;
    if ((double)a.out_channels * (double)orows * (double)ocols > VIJP_WIDTH_MAX)
        return vijp_fail(err, VIJP_EDIM, "%s: %zu output channels of %zu x %zu positions exceed the widest layer, %u", name,
                         a.out_channels, orows, ocols, VIJP_WIDTH_MAX);
    /* More outputs than inputs: J's cokernel is out − in wide, which the
     * fragment covers, only while J keeps full column rank; an input no
     * output reads (a stride past the kernel, or what the last window leaves
     * over) is a zero column, and more cokernel than the fragment holds. */
    size_t skipped = unread_position(&a, cols), skipped_row = two_d ? unread_position(&a, rows) : 0;
    if (a.out_channels * orows * ocols > in_width && (skipped < cols || (two_d && skipped_row < rows)))
        return vijp_fail(err, VIJP_EDIM, "%s: more outputs (%zu) than inputs (%zu), and no output reads %s %zu: J loses "
                         "column rank, and the fragment covers only out - in of its cokernel", name,
                         a.out_channels * orows * ocols, in_width, skipped < cols ? "column" : "row",
                         skipped < cols ? skipped : skipped_row);
    vijp_state_new(L, sizeof(vijp_conv_args));
    L->in = in_width, L->out = a.out_channels * orows * ocols;
    *(vijp_conv_args *)L->state = a;
    size_t rank = 0, full = L->in < L->out ? L->in : L->out;
    if ((rc = generic_rank(L, &rank))) {
        free(L->state), L->state = NULL;
        return vijp_fail(err, rc, "%s: the SVD of J at random weights failed", name);
    }
    /* A geometry that costs J rank whatever the weights (more output
     * channels than one position's window reads, or padding folding taps)
     * has no vijp of its own (no fragment here covers that cokernel), but it
     * is what ResNet's downsampling skip is: kept, declared, and its vijp
     * refuses; a residual block around it solves with its own J. */
    ((vijp_conv_args *)L->state)->deficient = rank < full;
    return 0;
}

static int parse1(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err) { return parse_conv(L, arg, in_width, 0, err); }
static int parse2(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err) { return parse_conv(L, arg, in_width, 1, err); }

#define TAPS(L) (KH(L) * KS(L))
#define NW(L) (DOUT(L) * CH(L) * TAPS(L)) /* weights before the biases */
static size_t param_count(const vijp_layer *L) { return NW(L) + DOUT(L); }

/* Submersive iff J has full row rank, which the weights decide unless J is
 * tall. */
static unsigned declare(const vijp_layer *L)
{
    return VIJP_DECL_LINEAR | (L->out > L->in || ARGS(L)->deficient ? VIJP_DECL_NEVER_SUBMERSIVE : 0u);
}

/* The refusal of every solve of a geometry that loses rank at any weight. */
static int deficient(const vijp_layer *L, const char *what, vijp_error *err)
{
    return vijp_fail(err, VIJP_ESINGULAR, "%s %s: this geometry's J (%zu x %zu) loses rank whatever the weights, so it "
                     "has no %s (inside a residual block, the block's vijp solves with the block's J)", L->type->name,
                     what, L->out, L->in, what);
}

/* Gaussian: N(0, 1/(C·K)) every tap.  Orthogonal (and scaled): delta-
 * orthogonal (Xiao et al. 2018), an orthogonal D × C centre tap (orthonormal
 * rows or columns when D ≠ C) and zero elsewhere, which makes J orthogonal
 * for same padding and D = C. */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *theta)
{
    size_t C = CH(L), D = DOUT(L), K = KS(L), T = KH(L) * K, centre = (KH(L) - 1) / 2 * K + (K - 1) / 2;
    memset(theta, 0, param_count(L) * sizeof *theta);
    if (in.kind == VIJP_INIT_KAIMING_UNIFORM) {
        vijp_kaiming_uniform(NW(L) + D, C * T, rng, theta); /* fan_in = C·taps, as nn.ConvNd */
        return 0;
    }
    if (in.kind == VIJP_INIT_GAUSSIAN) {
        double s = 1 / sqrt((double)(C * T));
        for (size_t i = 0; i < NW(L); i++) theta[i] = s * vijp_rng_normal(rng);
    } else {
        double *Q = vijp_alloc_array(D * C, sizeof *Q);
        int rc = vijp_orthogonal_init(D, C, rng, in.threads, Q);
        for (size_t o = 0; !rc && o < D; o++)
            for (size_t c = 0; c < C; c++) theta[(o * C + c) * T + centre] = (in.kind == VIJP_INIT_SCALED ? in.gain : 1) * Q[o + c * D];
        free(Q);
        if (rc) return rc;
    }
    for (size_t o = 0; o < D; o++) theta[NW(L) + o] = 0.1 * vijp_rng_normal(rng);
    return 0;
}


/* Input position (row-major in the grid) read by output position p through
 * tap k = ky·K + kx, or −1 (zero padding). */
static long tap(const vijp_layer *L, size_t p, size_t k)
{
    long K = (long)KS(L), P = (long)ARGS(L)->pad, S = (long)STRIDE(L);
    long R = (long)ROWS(L), Q = (long)COLS(L), oc = (long)OCOLS(L);
    long r = IS2D(L) ? pad_index(L, S * ((long)p / oc) + (long)k / K - P, R) : 0;
    long q = pad_index(L, S * ((long)p % oc) + (long)k % K - P, Q);
    return r < 0 || q < 0 ? -1 : r * Q + q;
}

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
    size_t C = CH(L), D = DOUT(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L), *tk = vijp_alloc_array(no * K, sizeof *tk); /* tk[k·no + p]: tap k of position p */
    for (size_t p = 0; p < no; p++)
        for (size_t k = 0; k < K; k++) tk[k * no + p] = t[p * K + k];
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < D; o++) {
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
    size_t C = CH(L), D = DOUT(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L);
    memset(Gx, 0, L->in * B * sizeof *Gx);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < D; o++)
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
    size_t C = CH(L), D = DOUT(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L);
    long *t = tap_table(L);
    memset(Gt, 0, param_count(L) * sizeof *Gt);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < D; o++)
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

/* J (or, absolute, |w| in its place): taps folded onto one input by the
 * padding add up, in tap order. */
static void scatter_taps(const vijp_layer *L, const double *th, int absolute, double *J)
{
    size_t C = CH(L), D = DOUT(L), K = TAPS(L), n = LEN(L), no = OUTLEN(L), M = L->out;
    memset(J, 0, M * L->in * sizeof *J);
    for (size_t o = 0; o < D; o++)
        for (size_t p = 0; p < no; p++)
            for (size_t c = 0; c < C; c++)
                for (size_t k = 0; k < K; k++) {
                    long q = tap(L, p, k);
                    double w = th[(o * C + c) * K + k];
                    if (q >= 0) J[(o * no + p) + (c * n + (size_t)q) * M] += absolute ? fabs(w) : w;
                }
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    scatter_taps(L, th, 0, J);
}

/* J's rank at seeded Gaussian weights: its rank for almost every weight
 * (the geometry's structural rank), counting singular values above
 * max(m, n)·2^-40·σ_max, far above a generic J's rounding (2^-52) and far
 * below the smallest singular value of the random J.  Checked at parse
 * time for J of at most 2^16 entries (a few ms); a larger layer is taken as
 * full rank, which the per-position rule below still checks for the common
 * case: one output position of a wide J whose D rows read fewer than D
 * inputs (a 1 x 1 strided convolution widening channels). */
static int generic_rank(const vijp_layer *L, size_t *rank)
{
    size_t m = L->out, n = L->in, full = m < n ? m : n;
    if (m <= n) { /* the per-position rule: D rows in the span of the window's C·(distinct positions) inputs */
        size_t K = TAPS(L), no = OUTLEN(L);
        long *t = tap_table(L);
        for (size_t p = 0; p < no; p++) {
            size_t distinct = 0;
            for (size_t k = 0; k < K; k++) {
                int seen = t[p * K + k] < 0;
                for (size_t j = 0; j < k && !seen; j++) seen = t[p * K + j] == t[p * K + k];
                distinct += !seen;
            }
            if (DOUT(L) > CH(L) * distinct) {
                free(t);
                *rank = full - 1; /* at most: enough to refuse */
                return 0;
            }
        }
        free(t);
    }
    *rank = full;
    if (m * n > (1u << 16)) return 0;
    vijp_rng rng;
    vijp_rng_seed(&rng, 0x636f6e76); /* any fixed seed: the rank is the same for almost every θ */
    size_t P = param_count(L);
    double *th = vijp_alloc_array(P, sizeof *th), *J = vijp_alloc_array(m * n, sizeof *J), *sv = vijp_alloc_array(full, sizeof *sv);
    for (size_t i = 0; i < P; i++) th[i] = vijp_rng_normal(&rng);
    jacobian(L, NULL, th, NULL, J);
    int rc = vijp_lapack_dgesdd('N', m, n, J, sv, NULL, 1, NULL, 1) ? VIJP_EINVAL : 0;
    if (!rc) {
        double tol = (double)(m > n ? m : n) * 0x1p-40 * sv[0];
        *rank = 0;
        for (size_t i = 0; i < full; i++) *rank += sv[i] > tol;
    }
    free(th), free(J), free(sv);
    return rc;
}

/* ---- no structure: the dense layer's operators on J ---- */

/* Square J: a dense LU (LAPACK dgesv), on J or Jᵀ. */
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

/* The dense layer dense:MxN with W = J and b = 0 (its θ: J column-major,
 * then M zeros), for the shapes no structure serves. */
static double *as_dense(const vijp_layer *L, const vijp_kctx *cx, const double *th, vijp_layer *dl)
{
    size_t M = L->out, N = L->in;
    double *th_d = vijp_alloc_array(M * N + M, sizeof *th_d);
    jacobian(L, cx, th, NULL, th_d);
    *dl = (vijp_layer){.type = &vijp_layer_dense, .in = N, .out = M};
    return th_d;
}

/* Tall J (more outputs than inputs): the cokernel is at least out − in
 * wide, the dense layer's fragment on J. */
static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    if (L->out <= L->in) return;
    vijp_layer dl;
    double *th_d = as_dense(L, cx, th, &dl);
    vijp_layer_dense.d->fragment(&dl, cx, th_d, X, B, Gy, frag);
    free(th_d);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q, vijp_error *err)
{
    if (ARGS(L)->deficient) return deficient(L, "cokernel", err);
    if (L->out <= L->in) return 0;
    vijp_layer dl;
    double *th_d = as_dense(L, cx, th, &dl);
    int rc = vijp_layer_dense.d->cokernel(&dl, cx, th_d, x, Q, err);
    free(th_d);
    return rc;
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    if (ARGS(L)->deficient) return deficient(L, "vijp", err);
    int rc = 0;
    size_t w = 0;
    if (!circulant(L) && L->out != L->in) { /* the dense layer's solve on J: minimum-norm when wide, QR when tall */
        vijp_layer dl;
        double *th_d = as_dense(L, cx, th, &dl);
        rc = vijp_layer_dense.d->vijp(&dl, cx, th_d, X, B, Gx, frag, Gy, err);
        free(th_d);
        return rc;
    }
    if (circulant(L)) {
        rc = vijp_conv_circulant_solve(ARGS(L), L->in, th, Gx, Gy, B, 1, &w);
    } else {
        memcpy(Gy, Gx, L->in * B * sizeof *Gy);
        rc = dense_solve(L, cx, th, Gy, B, 1);
    }
    if (rc == VIJP_ESINGULAR && CIRC(L) && circulant(L))
        return vijp_fail(err, rc, "conv1d vijp: the channel matrix at frequency %zu is singular", w);
    if (rc == VIJP_ESINGULAR) return vijp_fail(err, rc, "conv1d vijp: J is singular (dense LU)");
    return rc ? vijp_fail(err, rc, "conv1d vijp: out of memory") : 0;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    if (L->out != L->in)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "%s is not invertible: %zu inputs, %zu outputs", L->type->name, L->in, L->out);
    if (ARGS(L)->deficient) return deficient(L, "inverse", err);
    size_t no = OUTLEN(L), w = 0;
    double *R = vijp_alloc_array(L->in * B, sizeof *R);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L->in; i++) R[b * L->in + i] = Y[b * L->in + i] - th[NW(L) + i / no];
    int rc = 0;
    if (circulant(L)) {
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
 * one, covers it.  Other convolutions (zero or reflect padding, strides,
 * other shapes: dense solves): 0, the generic bound. */
static double solve_ulps(const vijp_layer *L)
{
    if (!circulant(L)) return 0;
    double C = (double)CH(L), P = (double)LEN(L), K = (double)(KH(L) * KS(L));
    return 2 * (10 * log2(P) + 3 * C * ldexp(1, (int)CH(L) - 1) + C * K + 1) + 1;
}

static size_t bias_index(const vijp_layer *L, size_t i) { return NW(L) + (i % L->out) / OUTLEN(L); }

/* Where padding folds taps onto one input, J's entry is a sum of weights
 * that can cancel while the rounding of each term does not: M = Σ |w| over
 * the folded taps (|J| elsewhere). */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *Mj)
{
    (void)x;
    scatter_taps(L, th, 1, Mj);
}

/* Every entry of the parameter gradient is a sum over the batch and the
 * output positions of products G·X (or of G alone for b):
 *   dW[o,c,k] = Σ_b Σ_p G[o,p] X[c, tap(p, k)],  db[o] = Σ_b Σ_p G[o,p],
 * within γ_(terms+1) Σ |G||X| (Higham eq. 3.5), terms = B·(positions). */
static void vjp_param_bound(const vijp_layer *L, const double *th, const double *aX, const double *aG, size_t B,
                            double u, double *bp)
{
    (void)th;
    size_t m = L->out, n = L->in, C = CH(L), D = DOUT(L), T = TAPS(L), np = LEN(L), no = OUTLEN(L);
    double terms = (double)(B * no + 1);
    long *t = tap_table(L);
    for (size_t o = 0; o < D; o++)
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < no; p++) {
                double g = aG[b * m + o * no + p];
                bp[NW(L) + o] += terms * u * g;
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < T; k++)
                        if (t[p * T + k] >= 0) bp[(o * C + c) * T + k] += terms * u * g * aX[b * n + c * np + (size_t)t[p * T + k]];
            }
    free(t);
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .fragment_count = fragment_count, .fragment = fragment, .cokernel = cokernel,
    .jacobian = jacobian, .inverse = inverse,
};

/* The oracle's operators (mp), and in the narrow formats the same run
 * natively, bit for bit (emu: src/emu/conv.c); the route chooses. */
static const vijp_ops_mp ops_mp = {
    .forward = vo_conv1d_forward, .jvp = vo_conv1d_jvp, .vjp = vo_conv1d_vjp, .vjp_param = vo_conv1d_vjp_param,
    .vijp = vo_conv1d_vijp, .jacobian = vo_conv1d_jacobian, .inverse = vo_conv1d_inverse,
    .fragment_count = vo_conv1d_fragment_count, .fragment = vo_conv1d_fragment, .cokernel = vo_conv1d_cokernel,
};
static const vijp_ops_mp ops_emu = {
    .forward = vijp_emu_conv_forward, .jvp = vijp_emu_conv_jvp, .vjp = vijp_emu_conv_vjp,
    .vjp_param = vijp_emu_conv_vjp_param, .vijp = vijp_emu_conv_vijp, .jacobian = vo_conv1d_jacobian,
    .inverse = vijp_emu_conv_inverse, .fragment_count = vo_conv1d_fragment_count, .fragment = vijp_emu_conv_fragment,
    .cokernel = vijp_emu_conv_cokernel,
};

const vijp_layer_type vijp_layer_conv1d = {
    .name = "conv1d",
    .syntax = "conv1d:CxK[sS][:out=D][:pad=P][:zero|:circular|:reflect] (C channels of width/C positions to D, kernel K, "
              "stride S, padding P (default K/2))",
    .parse = parse1, .state_size = sizeof(vijp_conv_args), .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &vijp_emu_conv_native, .jacobian_enclose = vo_conv_jacobian_enclose,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR, .solve_ulps = solve_ulps}, .bias_index = bias_index, .vjp_param_bound = vjp_param_bound,
    .jacobian_majorant = jacobian_majorant,
};

const vijp_layer_type vijp_layer_conv2d = {
    .name = "conv2d",
    .syntax = "conv2d:CxKxH[sS][:out=D][:pad=P][:zero|:circular|:reflect] (C channels of an H x width/(C*H) grid to D, "
              "K x K kernel, stride S, padding P (default K/2))",
    .parse = parse2, .state_size = sizeof(vijp_conv_args), .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_NONE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &vijp_emu_conv_native, .jacobian_enclose = vo_conv_jacobian_enclose,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR, .solve_ulps = solve_ulps}, .bias_index = bias_index, .vjp_param_bound = vjp_param_bound,
    .jacobian_majorant = jacobian_majorant,
};

/* Windowed pooling over channel-major grids, as PyTorch's AvgPool2d,
 * MaxPool1d and MaxPool2d (no padding, no dilation, floor mode):
 *   avgpool2d:CxKxH[sS]  C channels of an H × (n/(C·H)) grid, K × K windows;
 *   maxpool1d:CxK[sS]    C channels of n/C positions, windows of K;
 *   maxpool2d:CxKxH[sS]  as avgpool2d, the maximum of each window.
 * The stride S defaults to K (torch's default).  Each axis of N positions
 * gives (N − K)/S + 1 windows (rounded down); output (c, r, q) reads the
 * window whose corner is (S·r, S·q), its taps in row-major order.
 *
 * avgpool2d: J = (1/K²)·[ones on each window].  Its rows have full rank at
 * any stride: ordered by corner, each window holds its own corner, which no
 * later window holds (a later window starts further down or further right),
 * so J is a row echelon form: submersive everywhere.  Without overlap
 * (S >= K) J Jᵀ = I/K², so the vijp is g_y[j] = Σ_(i in window j) g_x[i]
 * in structure; with overlap, the dense layer's minimum-norm solve on J.
 *
 * maxpool: y_j = x[a_j], a_j the first tap of window j (row-major) holding
 * the window's largest value (later equal values do not replace it; a NaN
 * does, as torch's `val > max || isnan(val)`), so J's row j is e_(a_j).
 * Without overlap (S >= K) the a_j are distinct: J has orthonormal rows,
 * submersive, g_y[j] = g_x[a_j].  With overlap two windows can select the
 * same input; then their rows are equal and the cokernel is spanned, for
 * each group G of g > 1 outputs selecting one input (groups by first
 * member, members ascending), by the Helmert vectors
 *   v_l = (e_G1 + … + e_Gl − l·e_G(l+1)) / √(l(l+1)),  l = 1 … g − 1,
 * orthonormal and summing to zero over G.  The fragment is g_y's
 * coordinates on them, and the vijp puts g_x[i]/g on each member of i's
 * group (the minimum-norm solution) plus the fragment's part.  So the
 * overlapping maxpool declares nothing: its rank depends on x. */
#include "vijp/layer.h"
#include "vijp/error.h"
#include "activation.h"
#include "args.h"
#include "state.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const vijp_layer_type vijp_layer_dense;

#define ARGS(L) ((const vijp_pool_args *)(L)->state)
#define IS2D(L) (ARGS(L)->rows > 0)
#define KW(L) (ARGS(L)->kernel)
#define TAPS(L) (IS2D(L) ? KW(L) * KW(L) : KW(L))
#define OVERLAP(L) (ARGS(L)->stride < KW(L))
#define INLEN(L) ((L)->in / ARGS(L)->channels)
#define OUTLEN(L) ((L)->out / ARGS(L)->channels)

static size_t windows(size_t N, size_t K, size_t S) { return (N - K) / S + 1; }

/* CxK[xH][sS] into a (rows 0 in 1-D). */
static int read_pool(const char *arg, int two_d, vijp_pool_args *a)
{
    const char *p = arg;
    size_t stride = 0;
    int rc = !p ? VIJP_ARG_NOT_A_COUNT : vijp_arg_count(&p, &a->channels);
    if (!rc) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &a->kernel)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && two_d) rc = *p == 'x' ? (p++, vijp_arg_count(&p, &a->rows)) : VIJP_ARG_NOT_A_COUNT;
    if (!rc && *p == 's') {
        p++, rc = vijp_arg_count(&p, &stride);
        if (!rc && !stride) rc = VIJP_ARG_NOT_A_COUNT;
    }
    if (rc || *p || !a->channels || !a->kernel || (two_d && !a->rows)) return VIJP_ARG_NOT_A_COUNT;
    a->stride = stride ? stride : a->kernel;
    return 0;
}

static int parse_pool(vijp_layer *L, const char *arg, size_t in_width, const char *name, int two_d, vijp_error *err)
{
    vijp_pool_args a = {0};
    if (read_pool(arg, two_d, &a))
        return vijp_fail(err, VIJP_EINVAL, "%s needs %s:CHANNELSxKERNEL%s[sSTRIDE] (e.g. %s:2x2%s, stride default the kernel), "
                         "every count in [1, %u], got '%s:%s'", name, name, two_d ? "xROWS" : "", name, two_d ? "x4" : "",
                         VIJP_WIDTH_MAX, name, arg ? arg : "");
    size_t rows = two_d ? a.rows : 1;
    if (in_width == 0 || in_width % (a.channels * rows))
        return vijp_fail(err, VIJP_EDIM, "%s: the input width %zu is not a multiple of %zu channels x %zu rows%s", name,
                         in_width, a.channels, rows, in_width ? "" : " (give --width)");
    size_t cols = in_width / (a.channels * rows);
    if (a.kernel > cols || (two_d && a.kernel > rows))
        return vijp_fail(err, VIJP_EDIM, "%s: window %zu is larger than the %zu x %zu grid", name, a.kernel, rows, cols);
    /* A 1-unit window at stride 1 is the identity: one type for it (an
     * elementwise type must enclose its f′ for certify, which no pooling
     * type does). */
    if (a.kernel == 1 && a.stride == 1)
        return vijp_fail(err, VIJP_EINVAL, "%s: a window of 1 at stride 1 is the identity: use 'identity'", name);
    vijp_state_new(L, sizeof a);
    *(vijp_pool_args *)L->state = a;
    L->in = in_width;
    L->out = a.channels * windows(cols, a.kernel, a.stride) * (two_d ? windows(rows, a.kernel, a.stride) : 1);
    return 0;
}

static int parse_avg2(vijp_layer *L, const char *arg, size_t w, vijp_error *err) { return parse_pool(L, arg, w, "avgpool2d", 1, err); }
static int parse_max1(vijp_layer *L, const char *arg, size_t w, vijp_error *err) { return parse_pool(L, arg, w, "maxpool1d", 0, err); }
static int parse_max2(vijp_layer *L, const char *arg, size_t w, vijp_error *err) { return parse_pool(L, arg, w, "maxpool2d", 1, err); }

static int print(const vijp_layer *L, char *buf, size_t size)
{
    const vijp_pool_args *a = vijp_pool_get(L);
    char stride[24] = "", rows[24] = "";
    if (a->stride != a->kernel) snprintf(stride, sizeof stride, "s%zu", a->stride);
    if (a->rows) snprintf(rows, sizeof rows, "x%zu", a->rows);
    return snprintf(buf, size, "%s:%zux%zu%s%s", L->type->name, a->channels, a->kernel, rows, stride);
}

/* src[j·T + t]: the input unit (within one sample) of tap t of output j. */
static size_t *tap_table(const vijp_layer *L)
{
    const vijp_pool_args *a = ARGS(L);
    size_t T = TAPS(L), K = a->kernel, S = a->stride, n = INLEN(L), no = OUTLEN(L);
    size_t R = IS2D(L) ? a->rows : 1, Q = n / R, oq = windows(Q, K, S);
    size_t *src = vijp_alloc_array(L->out * T, sizeof *src);
    for (size_t c = 0; c < a->channels; c++)
        for (size_t p = 0; p < no; p++)
            for (size_t t = 0; t < T; t++) {
                size_t ky = IS2D(L) ? t / K : 0, kx = IS2D(L) ? t % K : t;
                size_t r = IS2D(L) ? S * (p / oq) + ky : 0, q = S * (p % oq) + kx;
                src[(c * no + p) * T + t] = c * n + r * Q + q;
            }
    return src;
}

/* ---- avgpool2d ---- */

static unsigned declare_avg(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_LINEAR; }

static void avg_apply(const vijp_layer *L, const double *X, size_t B, double *Y)
{
    size_t T = TAPS(L), *src = tap_table(L);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) {
            double s = 0;
            for (size_t t = 0; t < T; t++) s += X[b * L->in + src[j * T + t]];
            Y[b * L->out + j] = s / (double)T;
        }
    free(src);
}

static void avg_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    avg_apply(L, X, B, Y);
}

static void avg_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *U, double *V)
{
    (void)cx, (void)th, (void)X;
    avg_apply(L, U, B, V);
}

static void avg_vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *Gy, double *Gx)
{
    (void)cx, (void)th, (void)X;
    size_t T = TAPS(L), *src = tap_table(L);
    memset(Gx, 0, L->in * B * sizeof *Gx);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++)
            for (size_t t = 0; t < T; t++) Gx[b * L->in + src[j * T + t]] += Gy[b * L->out + j] / (double)T;
    free(src);
}

static void avg_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    size_t T = TAPS(L), m = L->out, *src = tap_table(L);
    memset(J, 0, m * L->in * sizeof *J);
    for (size_t j = 0; j < m; j++)
        for (size_t t = 0; t < T; t++) J[j + src[j * T + t] * m] = 1 / (double)T;
    free(src);
}

static int avg_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                    const double *frag, double *Gy, vijp_error *err)
{
    (void)frag;
    if (OVERLAP(L)) { /* the dense layer's minimum-norm solve on J (full row rank: see above) */
        size_t M = L->out, N = L->in;
        double *W = vijp_alloc_array(M * N + M, sizeof *W);
        avg_jacobian(L, cx, th, NULL, W);
        vijp_layer dl = {.type = &vijp_layer_dense, .in = N, .out = M};
        int rc = vijp_layer_dense.d->vijp(&dl, cx, W, X, B, Gx, NULL, Gy, err);
        free(W);
        return rc;
    }
    size_t T = TAPS(L), *src = tap_table(L);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) {
            double s = 0;
            for (size_t t = 0; t < T; t++) s += Gx[b * L->in + src[j * T + t]];
            Gy[b * L->out + j] = s;
        }
    free(src);
    return 0;
}

/* ---- maxpool1d, maxpool2d ---- */

static unsigned declare_max(const vijp_layer *L) { return OVERLAP(L) ? 0u : VIJP_DECL_SUBMERSIVE; }

/* sel[b·m + j]: the input unit output j of sample b selects (torch's first
 * maximum; a NaN replaces it). */
static size_t *selection(const vijp_layer *L, const double *X, size_t B)
{
    size_t T = TAPS(L), m = L->out, *src = tap_table(L), *sel = vijp_alloc_array(m * B + 1, sizeof *sel);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < m; j++) {
            const double *x = X + b * L->in;
            size_t best = src[j * T];
            for (size_t t = 1; t < T; t++) {
                double v = x[src[j * T + t]];
                if (v > x[best] || isnan(v)) best = src[j * T + t];
            }
            sel[b * m + j] = best;
        }
    free(src);
    return sel;
}

static void max_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    size_t *sel = selection(L, X, B);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) Y[b * L->out + j] = X[b * L->in + sel[b * L->out + j]];
    free(sel);
}

static void max_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *U, double *V)
{
    (void)cx, (void)th;
    size_t *sel = selection(L, X, B);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) V[b * L->out + j] = U[b * L->in + sel[b * L->out + j]];
    free(sel);
}

static void max_vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    const double *Gy, double *Gx)
{
    (void)cx, (void)th;
    size_t *sel = selection(L, X, B);
    memset(Gx, 0, L->in * B * sizeof *Gx);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < L->out; j++) Gx[b * L->in + sel[b * L->out + j]] += Gy[b * L->out + j];
    free(sel);
}

static void max_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    size_t m = L->out, *sel = selection(L, x, 1);
    memset(J, 0, m * L->in * sizeof *J);
    for (size_t j = 0; j < m; j++) J[j + sel[j] * m] = 1;
    free(sel);
}

/* One sample's groups: lead[j] the first output selecting what j selects,
 * size[j] (at a lead) how many do. */
static void groups(const size_t *sel, size_t m, size_t *lead, size_t *size)
{
    for (size_t j = 0; j < m; j++) {
        lead[j] = j, size[j] = 0;
        for (size_t i = 0; i < j; i++)
            if (sel[i] == sel[j]) { lead[j] = i; break; }
        size[lead[j]]++;
    }
}

static size_t max_fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th;
    if (!OVERLAP(L)) return 0;
    size_t m = L->out, k = 0, *sel = selection(L, X, B), *lead = vijp_alloc_array(2 * m, sizeof *lead), *size = lead + m;
    for (size_t b = 0; b < B; b++) {
        groups(sel + b * m, m, lead, size);
        for (size_t j = 0; j < m; j++) k += lead[j] == j ? size[j] - 1 : 0;
    }
    free(sel), free(lead);
    return k;
}

/* Visit the Helmert vectors of one sample in the fragment's order: for each
 * group (by lead), l = 1 … g − 1, the members (ascending) m_1 … m_g;
 * fn(ctx, idx, members, l) with idx the coordinate's index. */
typedef void (*helmert_fn)(void *ctx, size_t idx, const size_t *members, size_t l);

static size_t each_helmert(const size_t *sel, size_t m, size_t *lead, size_t *size, size_t *members, helmert_fn fn, void *ctx)
{
    groups(sel, m, lead, size);
    size_t idx = 0;
    for (size_t j = 0; j < m; j++) {
        if (lead[j] != j || size[j] < 2) continue;
        size_t g = 0;
        for (size_t i = j; i < m; i++)
            if (lead[i] == j) members[g++] = i;
        for (size_t l = 1; l < g; l++) fn(ctx, idx++, members, l);
    }
    return idx;
}

typedef struct {
    const double *gy;
    double *out;
} helmert_io;

/* c = (g_y[m_1] + … + g_y[m_l] − l·g_y[m_(l+1)]) / √(l(l+1)) */
static void frag_coord(void *ctx, size_t idx, const size_t *mem, size_t l)
{
    helmert_io *io = ctx;
    double s = 0;
    for (size_t i = 0; i < l; i++) s += io->gy[mem[i]];
    io->out[idx] = (s - (double)l * io->gy[mem[l]]) / sqrt((double)(l * (l + 1)));
}

/* g_y += c·v_l (io->gy: the coordinates, io->out: g_y) */
static void frag_add(void *ctx, size_t idx, const size_t *mem, size_t l)
{
    helmert_io *io = ctx;
    double c = io->gy[idx] / sqrt((double)(l * (l + 1)));
    for (size_t i = 0; i < l; i++) io->out[mem[i]] += c;
    io->out[mem[l]] -= (double)l * c;
}

/* Q's column idx: v_l (io->out: Q, io->gy unused; the column from idx·m). */
typedef struct {
    double *Q;
    size_t m;
} basis_io;

static void basis_col(void *ctx, size_t idx, const size_t *mem, size_t l)
{
    basis_io *io = ctx;
    double *q = io->Q + idx * io->m, s = 1 / sqrt((double)(l * (l + 1)));
    for (size_t i = 0; i < l; i++) q[mem[i]] = s;
    q[mem[l]] = -(double)l * s;
}

static void max_fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                         const double *Gy, double *frag)
{
    (void)cx, (void)th;
    if (!OVERLAP(L)) return;
    size_t m = L->out, *sel = selection(L, X, B), *buf = vijp_alloc_array(3 * m, sizeof *buf), off = 0;
    for (size_t b = 0; b < B; b++) {
        helmert_io io = {Gy + b * m, frag + off};
        off += each_helmert(sel + b * m, m, buf, buf + m, buf + 2 * m, frag_coord, &io);
    }
    free(sel), free(buf);
}

static int max_cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    if (!OVERLAP(L)) return 0;
    size_t m = L->out, *sel = selection(L, x, 1), *buf = vijp_alloc_array(3 * m, sizeof *buf);
    size_t k = max_fragment_count(L, cx, th, x, 1);
    memset(Q, 0, m * k * sizeof *Q);
    basis_io io = {Q, m};
    each_helmert(sel, m, buf, buf + m, buf + 2 * m, basis_col, &io);
    free(sel), free(buf);
    return 0;
}

/* g_y[j] = g_x[a_j]/g (g: the size of j's group), then the fragment's
 * Helmert vectors added. */
static int max_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                    const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    size_t m = L->out, *sel = selection(L, X, B), *buf = vijp_alloc_array(3 * m, sizeof *buf), off = 0;
    for (size_t b = 0; b < B; b++) {
        const size_t *s = sel + b * m;
        double *gy = Gy + b * m;
        if (!OVERLAP(L)) {
            for (size_t j = 0; j < m; j++) gy[j] = Gx[b * L->in + s[j]];
            continue;
        }
        groups(s, m, buf, buf + m);
        for (size_t j = 0; j < m; j++) gy[j] = Gx[b * L->in + s[j]] / (double)buf[m + buf[j]];
        helmert_io io = {frag + off, gy};
        off += each_helmert(s, m, buf, buf + m, buf + 2 * m, frag_add, &io);
    }
    free(sel), free(buf);
    return 0;
}

/* ---- descriptors ---- */

static const vijp_ops_d avg_d = {
    .forward = avg_forward, .jvp = avg_jvp, .vjp = avg_vjp, .vijp = avg_vijp, .jacobian = avg_jacobian,
};
static const vijp_ops_mp avg_mp = {
    .forward = vo_avgpool2d_forward, .jvp = vo_avgpool2d_jvp, .vjp = vo_avgpool2d_vjp, .vijp = vo_avgpool2d_vijp,
    .jacobian = vo_avgpool2d_jacobian,
};
static const vijp_ops_d max_d = {
    .forward = max_forward, .jvp = max_jvp, .vjp = max_vjp, .vijp = max_vijp, .jacobian = max_jacobian,
    .fragment_count = max_fragment_count, .fragment = max_fragment, .cokernel = max_cokernel,
};
static const vijp_ops_mp max_mp = {
    .forward = vo_maxpool_forward, .jvp = vo_maxpool_jvp, .vjp = vo_maxpool_vjp, .vijp = vo_maxpool_vijp,
    .jacobian = vo_maxpool_jacobian, .fragment_count = vo_maxpool_fragment_count, .fragment = vo_maxpool_fragment,
    .cokernel = vo_maxpool_cokernel,
};

const vijp_layer_type vijp_layer_avgpool2d = {
    .name = "avgpool2d",
    .syntax = "avgpool2d:CxKxH[sS] (mean of each K x K window of C channels of an H x width/(C*H) grid, stride S, default K)",
    .parse = parse_avg2, .state_size = sizeof(vijp_pool_args), .print = print, .param_count = vijp_act_no_params,
    .declare = declare_avg, .residual = VIJP_RESIDUAL_NONE, .d = &avg_d, .mp = &avg_mp,
    .jacobian_enclose = vo_avgpool2d_jacobian_enclose, /* 1/K² is exact in double only for K a power of two */
};

const vijp_layer_type vijp_layer_maxpool1d = {
    .name = "maxpool1d",
    .syntax = "maxpool1d:CxK[sS] (max of each window of K of C channels of width/C positions, stride S, default K)",
    .parse = parse_max1, .state_size = sizeof(vijp_pool_args), .print = print, .param_count = vijp_act_no_params,
    .declare = declare_max, .residual = VIJP_RESIDUAL_INPUT, .d = &max_d, .mp = &max_mp, .jacobian_exact = 1,
};

const vijp_layer_type vijp_layer_maxpool2d = {
    .name = "maxpool2d",
    .syntax = "maxpool2d:CxKxH[sS] (max of each K x K window of C channels of an H x width/(C*H) grid, stride S, default K)",
    .parse = parse_max2, .state_size = sizeof(vijp_pool_args), .print = print, .param_count = vijp_act_no_params,
    .declare = declare_max, .residual = VIJP_RESIDUAL_INPUT, .d = &max_d, .mp = &max_mp, .jacobian_exact = 1,
};

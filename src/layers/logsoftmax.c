/* logsoftmax[:N]: over each run of N units (default the whole sample),
 *   y = x − log Σ exp(x) = (x − max) − log Σ exp(x − max),
 * PyTorch's LogSoftmax on the last axis.  With p = softmax(x) of the run,
 * ∂y_i/∂x_j = δ_ij − p_j:
 *   J = I − 1pᵀ.
 * J·1 = 1 − 1(pᵀ1) = 0, and on the left vᵀJ = vᵀ − (vᵀ1)pᵀ = 0 iff
 * v = (vᵀ1)·p: the cokernel is span{p} (pᵀJ = pᵀ − (pᵀ1)pᵀ = 0), one
 * dimension per run at every x, even where some p_k underflows (pᵀ1 = 1
 * still).  Unlike softmax's (span{1}) it depends on x.  The fragment is
 * c = qᵀg_y, q = p/‖p‖ (‖p‖ >= 1/√N); since g_x = Jᵀg_y = g_y − p(1ᵀg_y),
 * every g_y with that g_x is g_x + p·t, and qᵀg_y = c fixes
 *   t = (c − qᵀg_x)/‖p‖,  g_y = g_x + p·t,
 * O(N), never singular. */
#include "vijp/layer.h"
#include "activation.h"
#include "args.h"
#include "scratch.h"
#include "state.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN(L) (((const vo_logsoftmax_args *)(L)->state)->run)

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    vo_logsoftmax_args a = {.run = in_width};
    if (arg) {
        const char *p = arg;
        if (vijp_arg_count(&p, &a.run) || *p || a.run < 2)
            return vijp_fail(err, VIJP_EINVAL, "logsoftmax[:N] takes a run length N >= 2, got 'logsoftmax:%s'", arg);
        a.run_given = 1;
    }
    if (in_width < 2 || in_width % a.run)
        return vijp_fail(err, VIJP_EDIM, "logsoftmax over runs of %zu units: the input width %zu %s", a.run, in_width,
                         in_width ? "is not a multiple of it (>= 2)" : "is unknown: give --width");
    vijp_state_new(L, sizeof a);
    *(vo_logsoftmax_args *)L->state = a;
    L->in = L->out = in_width;
    return 0;
}

static int print(const vijp_layer *L, char *buf, size_t size)
{
    const vo_logsoftmax_args *a = L->state;
    return a->run_given ? snprintf(buf, size, "logsoftmax:%zu", a->run) : snprintf(buf, size, "logsoftmax");
}

static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_NEVER_SUBMERSIVE; }

/* One per run: span{p}. */
static size_t analytic_cokernel(const vijp_layer *L, const double *th, const double *x)
{
    (void)th, (void)x;
    return L->in / RUN(L);
}

/* p of one run; returns log Σ exp(x − max) and the max in *mx. */
static double run_softmax(const double *x, size_t N, double *p, double *mx)
{
    double m = x[0], s = 0;
    for (size_t i = 1; i < N; i++) m = x[i] > m ? x[i] : m;
    for (size_t i = 0; i < N; i++) p[i] = exp(x[i] - m), s += p[i];
    for (size_t i = 0; i < N; i++) p[i] /= s;
    *mx = m;
    return log(s);
}

static double norm2(const double *p, size_t N)
{
    double s = 0;
    for (size_t i = 0; i < N; i++) s += p[i] * p[i];
    return sqrt(s);
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, double *Y)
{
    (void)cx, (void)th;
    size_t N = RUN(L);
    double *p = vijp_scratch(N), mx;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double ls = run_softmax(X + r * N, N, p, &mx);
        for (size_t i = 0; i < N; i++) Y[r * N + i] = (X[r * N + i] - mx) - ls;
    }
    free(p);
}

/* V = U − 1·(pᵀU). */
static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)cx, (void)th;
    size_t N = RUN(L);
    double *p = vijp_scratch(N), mx;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double d = 0;
        run_softmax(X + r * N, N, p, &mx);
        for (size_t i = 0; i < N; i++) d += p[i] * U[r * N + i];
        for (size_t i = 0; i < N; i++) V[r * N + i] = U[r * N + i] - d;
    }
    free(p);
}

/* Gx = Gy − p·(1ᵀGy). */
static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    (void)cx, (void)th;
    size_t N = RUN(L);
    double *p = vijp_scratch(N), mx;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double s = 0;
        run_softmax(X + r * N, N, p, &mx);
        for (size_t i = 0; i < N; i++) s += Gy[r * N + i];
        for (size_t i = 0; i < N; i++) Gx[r * N + i] = Gy[r * N + i] - p[i] * s;
    }
    free(p);
}

static size_t fragment_count(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B)
{
    (void)cx, (void)th, (void)X;
    return L->in * B / RUN(L);
}

static void fragment(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                     const double *Gy, double *frag)
{
    (void)cx, (void)th;
    size_t N = RUN(L);
    double *p = vijp_scratch(N), mx;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double c = 0;
        run_softmax(X + r * N, N, p, &mx);
        for (size_t i = 0; i < N; i++) c += p[i] * Gy[r * N + i];
        frag[r] = c / norm2(p, N);
    }
    free(p);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    size_t N = RUN(L);
    double *p = vijp_scratch(N), mx;
    for (size_t r = 0; r < L->in * B / N; r++) {
        double d = 0;
        run_softmax(X + r * N, N, p, &mx);
        double nrm = norm2(p, N);
        for (size_t i = 0; i < N; i++) d += p[i] * Gx[r * N + i];
        double t = (frag[r] - d / nrm) / nrm;
        for (size_t i = 0; i < N; i++) Gy[r * N + i] = Gx[r * N + i] + p[i] * t;
    }
    free(p);
    return 0;
}

/* scale·(δ_ij + sign·p_j) inside each run: J (sign −1, scale 1) or the
 * majorant of its terms (sign +1, scale 1.01: its own rounding). */
static void run_blocks(const vijp_layer *L, const double *x, double sign, double scale, double *J)
{
    size_t n = L->in, N = RUN(L);
    double *p = vijp_scratch(N), mx;
    memset(J, 0, n * n * sizeof *J);
    for (size_t r = 0; r < n / N; r++) {
        run_softmax(x + r * N, N, p, &mx);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) J[(r * N + i) + (r * N + j) * n] = scale * ((i == j) + sign * p[j]);
    }
    free(p);
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th;
    run_blocks(L, x, -1, 1, J);
}

/* J_ii = 1 − p_i cancels as p_i → 1 while its rounding does not. */
static void jacobian_majorant(const vijp_layer *L, const double *th, const double *x, double *M)
{
    (void)th;
    run_blocks(L, x, 1, 1.01, M);
}

static int cokernel(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *Q,
                    vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    size_t n = L->in, N = RUN(L);
    double *p = vijp_scratch(N), mx;
    memset(Q, 0, n * (n / N) * sizeof *Q);
    for (size_t r = 0; r < n / N; r++) {
        run_softmax(x + r * N, N, p, &mx);
        double nrm = norm2(p, N);
        for (size_t i = 0; i < N; i++) Q[(r * N + i) + r * n] = p[i] / nrm;
    }
    free(p);
    return 0;
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp,
    .fragment_count = fragment_count, .fragment = fragment, .vijp = vijp,
    .jacobian = jacobian, .cokernel = cokernel,
};

static const vijp_ops_mp ops_mp = {
    .forward = vo_logsoftmax_forward, .jvp = vo_logsoftmax_jvp, .vjp = vo_logsoftmax_vjp,
    .fragment_count = vo_logsoftmax_fragment_count, .fragment = vo_logsoftmax_fragment, .vijp = vo_logsoftmax_vijp,
    .jacobian = vo_logsoftmax_jacobian, .cokernel = vo_logsoftmax_cokernel,
};

const vijp_layer_type vijp_layer_logsoftmax = {
    .name = "logsoftmax",
    .syntax = "logsoftmax[:N] (over each run of N units, default the width; fragment 1 per run: span{softmax})",
    .parse = parse, .state_size = sizeof(vo_logsoftmax_args), .print = print, .param_count = vijp_act_no_params,
    .declare = declare, .residual = VIJP_RESIDUAL_INPUT, .d = &ops_d, .mp = &ops_mp,
    .jacobian_enclose = vo_logsoftmax_jacobian_enclose, .analytic_cokernel = analytic_cokernel,
    .jacobian_majorant = jacobian_majorant,
};

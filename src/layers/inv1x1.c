/* Invertible 1×1 convolution in LU form (Glow, Kingma & Dhariwal 2018):
 * inv1x1:C mixes the C channels at every position (the input of width n holds
 * C channels of n/C positions, channel-major) by one C × C matrix
 *   W = P · L · (U + diag(exp(log_s))),
 * P the channel reversal (fixed), L unit lower triangular, U strictly upper.
 * Parameters: one C × C column-major array A holding L below the diagonal,
 * U above it and log_s on it (C² numbers).  det W = ±exp(Σ log_s) ≠ 0, so the
 * layer is submersive and invertible for every parameter value, and its
 * log-determinant costs C additions (vijp_inv1x1_logdet).  The vijp and the
 * inverse are two triangular substitutions and a permutation per position,
 * O(C²), no factorisation.  Its vjp needs no input values, but it declares
 * VIJP_RESIDUAL_INVERSE so that Moonwalk can rebuild its input by inversion
 * and keep a Glow stack (affine couplings between inv1x1 and squeeze
 * layers) rebuilding all the way down, storing only h_0. */
#include "vijp/flow.h"
#include "vijp/layer.h"
#include "args.h"
#include "scratch.h"
#include "state.h"
#include "vijp/catalogue.h"
#include <stdio.h>
#include "oracles/oracles.h"
#include "emu/inv1x1.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CH(L) (*(const size_t *)(L)->state) /* its own state: vijp_inv1x1_channels is for other files */

static int print(const vijp_layer *L, char *buf, size_t size) { return snprintf(buf, size, "inv1x1:%zu", CH(L)); }

static int parse(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t c = 0;
    if (!p || vijp_arg_count(&p, &c) || *p || c < 2)
        return vijp_fail(err, VIJP_EINVAL, "inv1x1 needs a channel count in [2, %u]: inv1x1:C (e.g. inv1x1:4), got "
                         "'inv1x1:%s'", VIJP_WIDTH_MAX, arg ? arg : "");
    if (in_width == 0 || in_width % c)
        return vijp_fail(err, VIJP_EDIM, "inv1x1:%zu: the input width %zu is not a multiple of the channels%s", c,
                         in_width, in_width ? "" : " (give --width)");
    vijp_state_new(L, sizeof(size_t));
    L->in = L->out = in_width, *(size_t *)L->state = c;
    return 0;
}

static size_t param_count(const vijp_layer *L) { return CH(L) * CH(L); }
static unsigned declare(const vijp_layer *L) { (void)L; return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE | VIJP_DECL_LINEAR; }

/* orthogonal: L = I, U = 0, log_s = 0, so W = P; scaled:G: log_s = log G;
 * Gaussian: L and U entries N(0, 1/C), log_s N(0, 0.1²). */
static int init(const vijp_layer *L, vijp_init in, vijp_rng *rng, double *A)
{
    size_t C = CH(L);
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double *a = &A[i + j * C];
            if (in.kind == VIJP_INIT_GAUSSIAN) *a = (i == j ? 0.1 : 1 / sqrt((double)C)) * vijp_rng_normal(rng);
            else *a = i == j && in.kind == VIJP_INIT_SCALED ? log(in.gain) : 0;
        }
    return 0;
}

double vijp_inv1x1_logdet(const vijp_layer *L, const double *A)
{
    size_t C = CH(L);
    double s = 0;
    for (size_t i = 0; i < C; i++) s += A[i + i * C];
    return s * (double)(L->in / C); /* det J = det(W)^(positions) */
}

/* W = P L U′ (C × C, column-major), U′ = U + diag(exp(log_s)). */
static void weight(size_t C, const double *A, double *W)
{
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double s = 0; /* (L U′)_ij = Σ_k L_ik U′_kj, k <= min(i, j) */
            for (size_t k = 0; k <= (i < j ? i : j); k++) {
                double l = k == i ? 1 : A[i + k * C], u = k == j ? exp(A[j + j * C]) : A[k + j * C];
                s += l * u;
            }
            W[(C - 1 - i) + j * C] = s; /* P reverses the rows */
        }
}

/* V = (W ⊗ positions) U, or Wᵀ when transpose. */
static void mix(const vijp_layer *L, const double *A, const double *U, size_t B, double *V, int transpose)
{
    size_t C = CH(L), n = L->in / C;
    double *W = vijp_scratch(C * C);
    weight(C, A, W);
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p < n; p++)
            for (size_t i = 0; i < C; i++) {
                double s = 0;
                for (size_t k = 0; k < C; k++) s += (transpose ? W[k + i * C] : W[i + k * C]) * U[b * L->in + k * n + p];
                V[b * L->in + i * n + p] = s;
            }
    free(W);
}

static void forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                    double *Y) { (void)cx; mix(L, th, X, B, Y, 0); }
static void jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *U, double *V)
{
    (void)cx, (void)X;
    mix(L, th, U, B, V, 0);
}
static void vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                const double *Gy, double *Gx)
{
    (void)cx, (void)X;
    mix(L, th, Gy, B, Gx, 1);
}

/* dW = Σ g xᵀ; with M = L U′ = Pᵀ W: dM = Pᵀ dW, dL = dM U′ᵀ (below the
 * diagonal), dU′ = Lᵀ dM (on and above), d log_s = dU′_ii · exp(log_s_i). */
static void vjp_param(const vijp_layer *L, const vijp_kctx *cx, const double *A, const double *X, size_t B,
                      const double *Gy, double *Gt)
{
    (void)cx;
    size_t C = CH(L), n = L->in / C;
    double *dM = vijp_scratch(C * C);
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double s = 0; /* dW_(C−1−i) j = Σ g_(C−1−i) x_j */
            for (size_t b = 0; b < B; b++)
                for (size_t p = 0; p < n; p++) s += Gy[b * L->in + (C - 1 - i) * n + p] * X[b * L->in + j * n + p];
            dM[i + j * C] = s;
        }
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double s = 0;
            if (i > j) /* dL_ij = Σ_k dM_ik U′_jk, k >= j */
                for (size_t k = j; k < C; k++) s += dM[i + k * C] * (k == j ? exp(A[j + j * C]) : A[j + k * C]);
            else /* dU′_ij = Σ_k L_ki dM_kj, k >= i */
                for (size_t k = i; k < C; k++) s += (k == i ? 1 : A[k + i * C]) * dM[k + j * C];
            Gt[i + j * C] = i == j ? s * exp(A[i + i * C]) : s;
        }
    free(dM);
}

/* Row vector: g W = r  ⇔  w = g P solves w L U′ = r: z U′ = r (forward
 * substitution over columns), w L = z (backward, unit diagonal), g = w P. */
static void solve_row(size_t C, const double *A, const double *r, double *g, double *z)
{
    for (size_t j = 0; j < C; j++) {
        double s = r[j];
        for (size_t i = 0; i < j; i++) s -= z[i] * A[i + j * C];
        z[j] = s / exp(A[j + j * C]);
    }
    for (size_t j = C; j-- > 0;) {
        double s = z[j];
        for (size_t i = j + 1; i < C; i++) s -= g[C - 1 - i] * A[i + j * C];
        g[C - 1 - j] = s; /* w_j, stored reversed */
    }
}

/* Column: W x = y  ⇔  L U′ x = P y: L t = P y (forward, unit diagonal),
 * U′ x = t (backward). */
static void solve_col(size_t C, const double *A, const double *y, double *x, double *t)
{
    for (size_t i = 0; i < C; i++) {
        double s = y[C - 1 - i];
        for (size_t k = 0; k < i; k++) s -= A[i + k * C] * t[k];
        t[i] = s;
    }
    for (size_t i = C; i-- > 0;) {
        double s = t[i];
        for (size_t k = i + 1; k < C; k++) s -= A[i + k * C] * x[k];
        x[i] = s / exp(A[i + i * C]);
    }
}

static void per_position(const vijp_layer *L, const double *A, const double *in, size_t B, double *out, int row)
{
    size_t C = CH(L), n = L->in / C;
    double *a = vijp_scratch(3 * C), *o = a + C, *z = a + 2 * C;
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p < n; p++) {
            for (size_t c = 0; c < C; c++) a[c] = in[b * L->in + c * n + p];
            if (row) solve_row(C, A, a, o, z);
            else solve_col(C, A, a, o, z);
            for (size_t c = 0; c < C; c++) out[b * L->in + c * n + p] = o[c];
        }
    free(a);
}

static int vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B, const double *Gx,
                const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)X, (void)frag;
    for (size_t i = 0; i < CH(L); i++)
        if (!(exp(th[i + i * CH(L)]) > 0) || !isfinite(exp(th[i + i * CH(L)])))
            return vijp_fail(err, VIJP_ESINGULAR, "inv1x1 vijp: exp(log_s_%zu) = %g", i, exp(th[i + i * CH(L)]));
    per_position(L, th, Gx, B, Gy, 1);
    return 0;
}

static int inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B, double *X,
                   vijp_error *err)
{
    (void)cx;
    for (size_t i = 0; i < CH(L); i++)
        if (!(exp(th[i + i * CH(L)]) > 0) || !isfinite(exp(th[i + i * CH(L)])))
            return vijp_fail(err, VIJP_ESINGULAR, "inv1x1 inverse: exp(log_s_%zu) = %g", i, exp(th[i + i * CH(L)]));
    per_position(L, th, Y, B, X, 0);
    return 0;
}

static void jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)x;
    size_t C = CH(L), n = L->in / C, N = L->in;
    double *W = vijp_scratch(C * C);
    weight(C, th, W);
    memset(J, 0, N * N * sizeof *J);
    for (size_t i = 0; i < C; i++)
        for (size_t k = 0; k < C; k++)
            for (size_t p = 0; p < n; p++) J[(i * n + p) + (k * n + p) * N] = W[i + k * C];
    free(W);
}

/* ---- the error-bound contract (vijp_layer_bounds; tests/t-layers.c) ---- */

/* dM = Pᵀ dW, dW_ij = Σ_(b,p) g_i x_j within γ_T Σ|g||x| (T = B·positions + 1,
 * Higham eq. 3.5); then dL = dM U′ᵀ, dU′ = Lᵀ dM (C-term products of a
 * perturbed dM: |E||U′|ᵀ + γ_(C+1)|dM||U′|ᵀ), and the diagonal times
 * exp(log_s) (2u). */
static void vjp_param_bound(const vijp_layer *L, const double *A, const double *aX, const double *aG, size_t B,
                            double e, double *bp)
{
    size_t C = CH(L), n = L->in, np = n / C;
    double T = (double)(B * np + 1);
    double *E = vijp_scratch(2 * C * C), *M = E + C * C;
    memset(E, 0, 2 * C * C * sizeof *E);
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++)
            for (size_t b = 0; b < B; b++)
                for (size_t p = 0; p < np; p++) {
                    double g = aG[b * n + (C - 1 - i) * np + p], x = aX[b * n + j * np + p];
                    E[i + j * C] += T * e * g * x, M[i + j * C] += g * x;
                }
    for (size_t j = 0; j < C; j++)
        for (size_t i = 0; i < C; i++) {
            double s = 0;
            if (i > j)
                for (size_t k = j; k < C; k++) {
                    double uv = fabs(k == j ? exp(A[j + j * C]) : A[j + k * C]);
                    s += (E[i + k * C] + (double)(C + 1) * e * M[i + k * C]) * uv;
                }
            else
                for (size_t k = i; k < C; k++) {
                    double lv = k == i ? 1 : fabs(A[k + i * C]);
                    s += lv * (E[k + j * C] + (double)(C + 1) * e * M[k + j * C]);
                }
            bp[i + j * C] += i == j ? exp(A[i + i * C]) * (s + 2 * e * s) + 2 * e * exp(A[i + i * C]) * s : s;
        }
    free(E);
}

static const vijp_ops_d ops_d = {
    .forward = forward, .jvp = jvp, .vjp = vjp, .vjp_param = vjp_param, .vijp = vijp,
    .jacobian = jacobian, .inverse = inverse,
};

/* The oracle's operators (mp), and in the narrow formats the same run
 * natively, bit for bit (emu: src/emu/inv1x1.c); the route chooses. */
static const vijp_ops_mp ops_mp = {
    .forward = vo_inv1x1_forward, .jvp = vo_inv1x1_jvp, .vjp = vo_inv1x1_vjp, .vjp_param = vo_inv1x1_vjp_param,
    .vijp = vo_inv1x1_vijp, .jacobian = vo_inv1x1_jacobian, .inverse = vo_inv1x1_inverse,
};
static const vijp_ops_mp ops_emu = {
    .forward = vijp_emu_inv1x1_forward, .jvp = vijp_emu_inv1x1_jvp, .vjp = vijp_emu_inv1x1_vjp,
    .vjp_param = vijp_emu_inv1x1_vjp_param, .vijp = vijp_emu_inv1x1_vijp, .jacobian = vo_inv1x1_jacobian,
    .inverse = vijp_emu_inv1x1_inverse,
};

const vijp_layer_type vijp_layer_inv1x1 = {
    .name = "inv1x1", .syntax = "inv1x1:C (Glow's invertible 1x1 convolution over C channels, LU form)",
    .parse = parse, .state_size = sizeof(size_t), .print = print, .param_count = param_count, .init = init, .declare = declare,
    .residual = VIJP_RESIDUAL_INVERSE, .d = &ops_d, .mp = &ops_mp, .emu = &ops_emu, .emu_native = &vijp_emu_inv1x1_native,
    .bounds = {.inverse = VIJP_INVBOUND_LINEAR}, .vjp_param_bound = vjp_param_bound,
    .jacobian_enclose = vo_inv1x1_jacobian_enclose, /* W rounds (exp, products): enclosed, not exact */
};

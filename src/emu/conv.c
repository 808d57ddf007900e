/* conv1d's and conv2d's MPFR operators in the narrow formats, natively.
 *
 * Products (forward, jvp, vjp, vjp_param): the oracle's loops
 * (oracles/conv.c) on doubles, every term its fused one rounding — vo_fma,
 * here vijp_emu_fma (emu.h: rounding to odd, then to the grid), or vo_madd
 * for tf32+binary32's rounded operands — in the oracle's order: the bias
 * first, then channels and taps ascending (vo_conv_source gives the oracle's
 * own geometry), and for vjp the oracle's explicit Jacobian J, built the same
 * way, its zero entries skipped.  vijp and inverse: the oracle's J, then the
 * dense path's native solves (src/emu/dense.c: elimination, or the QR when
 * strided).  Each is bit for bit the oracle's (t-emu-dense); other formats
 * take the oracle's route (src/layer/route.h). */
#include "conv.h"
#include "dense.h"
#include "emu.h"
#include "layer/emu_native.h"
#include "format/mpfr_io.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "oracles/oracles.h"
#include <stdlib.h>
#include <string.h>

/* The layer's sizes, the taps' sources and the weights as doubles. */
typedef struct {
    size_t C, D, K, n, no, NW; /* channels in and out, taps per kernel, positions in and out, weights */
    long *src;              /* src[p·K + k]: vo_conv_source(L, p, k) */
    double *w;              /* the NW weights, then the D biases */
} geom;

/* w: the weights and biases as doubles (th's, or the caller's: vijp_emu_conv_native). */
static geom geom_new_w(const vijp_layer *L, double *w)
{
    geom G;
    G.C = vijp_conv_get(L)->channels, G.D = vijp_conv_get(L)->out_channels, G.n = L->in / G.C, G.no = L->out / G.D;
    G.NW = L->type->param_count(L) - G.D, G.K = G.NW / (G.D * G.C);
    G.src = vijp_alloc_array(G.no * G.K, sizeof *G.src);
    for (size_t p = 0; p < G.no; p++)
        for (size_t k = 0; k < G.K; k++) G.src[p * G.K + k] = vo_conv_source(L, p, k);
    G.w = w;
    return G;
}

static geom geom_new(const vijp_layer *L, mpfr_t *th)
{
    size_t P = L->type->param_count(L);
    return geom_new_w(L, vijp_emu_get(th, P));
}

static void geom_free(geom *G) { free(G->src), free(G->w); }

/* The weights of a double-held theta, copied (geom_free frees them). */
static geom geom_new_d(const vijp_layer *L, const double *th)
{
    size_t P = L->type->param_count(L);
    double *w = vijp_alloc_array(P ? P : 1, sizeof *w);
    memcpy(w, th, P * sizeof *w);
    return geom_new_w(L, w);
}

/* acc + w·x, one term of the oracle's (term in oracles/conv.c). */
static inline double term(double acc, double w, double x, const vijp_format *f)
{
    return f->operand_prec ? vijp_emu_madd(acc, w, x, f) : vijp_emu_fma(w, x, acc, vijp_emu_arith(f));
}

/* y = conv(x) (+ bias): vo_conv1d_forward, or vo_conv1d_jvp without bias, on doubles. */
static void conv_d(const vijp_layer *L, const geom G, const double *x, size_t B, double *y, int bias,
                   const vijp_format *f)
{
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < G.D; o++)
            for (size_t p = 0; p < G.no; p++) {
                double acc = bias ? G.w[G.NW + o] : 0;
                for (size_t c = 0; c < G.C; c++)
                    for (size_t k = 0; k < G.K; k++) {
                        long q = G.src[p * G.K + k];
                        if (q >= 0) acc = term(acc, G.w[(o * G.C + c) * G.K + k], x[b * L->in + c * G.n + (size_t)q], f);
                    }
                y[b * L->out + o * G.no + p] = acc;
            }
}

static void conv(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, int bias, const vijp_format *f)
{
    geom G = geom_new(L, th);
    double *x = vijp_emu_get(X, L->in * B), *y = vijp_alloc_array(L->out * B, sizeof *y);
    conv_d(L, G, x, B, y, bias, f);
    vijp_emu_put(Y, y, L->out * B);
    free(x), free(y);
    geom_free(&G);
}

void vijp_emu_conv_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    conv(L, th, X, B, Y, 1, f);
}

void vijp_emu_conv_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    conv(L, th, U, B, V, 0, f);
}

/* G_x = Jᵀ G_y with vo_conv1d_jacobian's J (taps that share a source: the
 * first set, each later one added in the format, as there), sums over J's
 * nonzero entries in row order (mpfr_zero_p: NaN is not zero). */
static void vjp_d(const vijp_layer *L, const geom G, size_t B, const double *gy, double *gx, const vijp_format *f)
{
    size_t M = L->out, N = L->in;
    double *J = vijp_alloc_array(M * N, sizeof *J);
    for (size_t i = 0; i < M * N; i++) J[i] = 0;
    for (size_t o = 0; o < G.D; o++)
        for (size_t p = 0; p < G.no; p++)
            for (size_t c = 0; c < G.C; c++)
                for (size_t k = 0; k < G.K; k++) {
                    long q = G.src[p * G.K + k];
                    if (q < 0) continue;
                    double *e = &J[(o * G.no + p) + (c * G.n + (size_t)q) * M], w = G.w[(o * G.C + c) * G.K + k];
                    *e = *e == 0 ? w : vijp_emu_add(*e, w, vijp_emu_arith(f));
                }
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < N; j++) {
            double acc = 0;
            for (size_t i = 0; i < M; i++)
                if (J[i + j * M] != 0) acc = term(acc, J[i + j * M], gy[b * M + i], f);
            gx[b * N + j] = acc;
        }
    free(J);
}

void vijp_emu_conv_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)X;
    geom G = geom_new(L, th);
    double *gy = vijp_emu_get(Gy, L->out * B), *gx = vijp_alloc_array(L->in * B, sizeof *gx);
    vjp_d(L, G, B, gy, gx, f);
    vijp_emu_put(Gx, gx, L->in * B);
    free(gy), free(gx);
    geom_free(&G);
}

static void vjp_param_d(const vijp_layer *L, const geom G, const double *x, size_t B, const double *gy, double *gt,
                        const vijp_format *f)
{
    vijp_emu_grid g = vijp_emu_arith(f);
    for (size_t o = 0; o < G.D; o++) {
        for (size_t c = 0; c < G.C; c++)
            for (size_t k = 0; k < G.K; k++) {
                double acc = 0;
                for (size_t b = 0; b < B; b++)
                    for (size_t p = 0; p < G.no; p++) {
                        long q = G.src[p * G.K + k];
                        if (q >= 0) acc = term(acc, gy[b * L->out + o * G.no + p], x[b * L->in + c * G.n + (size_t)q], f);
                    }
                gt[(o * G.C + c) * G.K + k] = acc;
            }
        double s = 0;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < G.no; p++) s = vijp_emu_add(s, gy[b * L->out + o * G.no + p], g);
        gt[G.NW + o] = s;
    }
}

void vijp_emu_conv_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                             const vijp_format *f)
{
    geom G = geom_new(L, th);
    double *x = vijp_emu_get(X, L->in * B), *gy = vijp_emu_get(Gy, L->out * B), *gt = vijp_alloc_array(G.NW + G.D, sizeof *gt);
    vjp_param_d(L, G, x, B, gy, gt, f);
    vijp_emu_put(Gt, gt, G.NW + G.D);
    free(x), free(gy), free(gt);
    geom_free(&G);
}

/* ---- The same four on double-held operands (emu_native, layer/emu_native.h) ---- */

static void native_forward(const vijp_layer *L, const double *th, const double *X, size_t B, double *Y,
                           const vijp_format *f)
{
    geom G = geom_new_d(L, th);
    conv_d(L, G, X, B, Y, 1, f);
    geom_free(&G);
}

static void native_jvp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *U, double *V,
                       const vijp_format *f)
{
    (void)X;
    geom G = geom_new_d(L, th);
    conv_d(L, G, U, B, V, 0, f);
    geom_free(&G);
}

static void native_vjp(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy, double *Gx,
                       const vijp_format *f)
{
    (void)X;
    geom G = geom_new_d(L, th);
    vjp_d(L, G, B, Gy, Gx, f);
    geom_free(&G);
}

static void native_vjp_param(const vijp_layer *L, const double *th, const double *X, size_t B, const double *Gy,
                             double *Gt, const vijp_format *f)
{
    geom G = geom_new_d(L, th);
    vjp_param_d(L, G, X, B, Gy, Gt, f);
    geom_free(&G);
}

const struct vijp_emu_native vijp_emu_conv_native = {
    .forward = native_forward, .jvp = native_jvp, .vjp = native_vjp, .vjp_param = native_vjp_param,
};

/* [J; b = 0]: the oracle's J as a dense layer's parameters. */
static mpfr_t *as_dense(const vijp_layer *L, mpfr_t *th, vijp_layer *dl, const vijp_format *f)
{
    mpfr_t *J = vo_vec_new(L->out * L->in + L->out, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    memset(dl, 0, sizeof *dl);
    dl->in = L->in, dl->out = L->out;
    return J;
}

int vijp_emu_conv_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                       const vijp_format *f)
{
    if (vijp_conv_get(L)->deficient) return VIJP_ESINGULAR; /* rank lost at every weight: no solve (conv.c) */
    size_t N = L->in, M = L->out;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    /* the dense layer's vijp with W = J: Jᵀ g_y = g_x by elimination, or
     * (M ≠ N) the QR solves, with the fragment when tall */
    int rc = vijp_emu_dense_vijp(&dl, J, X, B, Gx, frag, Gy, f);
    vo_vec_free(J, M * N + M);
    return rc;
}

void vijp_emu_conv_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                            const vijp_format *f)
{
    if (L->out <= L->in) return;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    vijp_emu_dense_fragment(&dl, J, X, B, Gy, frag, f);
    vo_vec_free(J, L->out * L->in + L->out);
}

int vijp_emu_conv_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    if (L->out <= L->in) return 0;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    int rc = vijp_emu_dense_cokernel(&dl, J, x, Q, f);
    vo_vec_free(J, L->out * L->in + L->out);
    return rc;
}

int vijp_emu_conv_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    if (L->out != L->in) return VIJP_EUNSUPPORTED; /* the oracle's case: mp runs it (src/layer/route.h) */
    size_t N = L->in, D = vijp_conv_get(L)->out_channels, no = N / D, bias = L->type->param_count(L) - D;
    mpfr_t *J = vo_vec_new(N * N, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++) vo_sub(X[b * N + i], Y[b * N + i], th[bias + i / no], f);
    int rc = vijp_emu_ge_solve(N, J, 0, X, B, f);
    vo_vec_free(J, N * N);
    return rc;
}

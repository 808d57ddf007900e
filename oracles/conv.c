/* Oracle of conv1d and conv2d (src/layers/conv.c for the layout): plain loops over
 * the definition, and, for the vijp and the inverse, the explicit Jacobian
 * whatever the padding: Gaussian elimination when square, the dense oracle's
 * minimum-norm QR solve when strided (wide); independent of the layer's
 * per-frequency solves. */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "vijp/memory.h"
#include "dot.h"
#include <stdlib.h>
#include <string.h>

/* acc += w·x, one term of a convolution: an FMA in the format (exact
 * product, one rounding), after rounding the operands to TF32 for
 * tf32+binary32 (vo_madd; format.h); a tensor-core format's block of one
 * product (vo_madd). */
static void term(mpfr_t acc, const mpfr_t w, const mpfr_t x, const vijp_format *f)
{
    if (f->operand_prec || f->tc_group) vo_madd(acc, w, x, NULL, f);
    else vo_fma(acc, w, x, acc, f);
}

static size_t chans(const vijp_layer *L) { return vijp_conv_get(L)->channels; }
static size_t outchans(const vijp_layer *L) { return vijp_conv_get(L)->out_channels; }
static size_t kern(const vijp_layer *L) { return vijp_conv_get(L)->kernel; }
static int two_d(const vijp_layer *L) { return vijp_conv_get(L)->rows > 0; }
static size_t len(const vijp_layer *L) { return L->in / chans(L); }
static size_t outlen(const vijp_layer *L) { return L->out / outchans(L); }
static size_t stride(const vijp_layer *L) { return vijp_conv_get(L)->stride; }
static size_t rows(const vijp_layer *L) { return two_d(L) ? vijp_conv_get(L)->rows : 1; }
static size_t kh(const vijp_layer *L) { return two_d(L) ? kern(L) : 1; }
static size_t taps(const vijp_layer *L) { return kh(L) * kern(L); }
static size_t nweights(const vijp_layer *L) { return outchans(L) * chans(L) * taps(L); }

/* Where position i of the padded axis (N positions, i from −P) reads the
 * grid: itself inside, and outside by torch's padding modes: 0 (−1 here),
 * wrapped, or mirrored about the edge without repeating it. */
static long padded(const vijp_conv_args *a, long i, long N)
{
    if (0 <= i && i < N) return i;
    if (a->circular) return i < 0 ? i + N : i - N;
    if (a->reflect) return i < 0 ? -i : (N - 1) - (i - (N - 1));
    return -1;
}

/* Input position feeding output position p (row-major over the output grid)
 * through tap k = ky·K + kx, or −1. */
static long source(const vijp_layer *L, size_t p, size_t k)
{
    const vijp_conv_args *a = vijp_conv_get(L);
    long R = (long)rows(L), Q = (long)(len(L) / rows(L)), S = (long)stride(L), K = (long)kern(L), P = (long)a->pad;
    long oq = (Q + 2 * P - K) / S + 1; /* output columns */
    long r = two_d(L) ? padded(a, S * ((long)p / oq) + (long)k / K - P, R) : 0;
    long q = padded(a, S * ((long)p % oq) + (long)k % K - P, Q);
    return r >= 0 && q >= 0 ? r * Q + q : -1;
}

long vo_conv_source(const vijp_layer *L, size_t p, size_t k) { return source(L, p, k); }

/* The drift study's reference (vo_dot_fused formats): the same sums, each
 * output rounded once by vo_dot over the terms the loops below visit, in a
 * list of pointers (ptrs: room for 2·terms + 1). */
static void conv_fused(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, int bias)
{
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L), t;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * C * K + 1, sizeof *ptrs);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < D; o++)
            for (size_t p = 0; p < no; p++) {
                t = 0;
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < K; k++) {
                        long q = source(L, p, k);
                        if (q >= 0) ptrs[t] = th[(o * C + c) * K + k], ptrs[C * K + t++] = X[b * L->in + c * n + (size_t)q];
                    }
                vo_dot(Y[b * L->out + o * no + p], bias ? th[nweights(L) + o] : NULL, ptrs, ptrs + C * K, t);
            }
    free(ptrs);
}

/* G_x = Jᵀ G_y over J's nonzero entries, each output rounded once. */
static void conv_vjp_fused(const vijp_layer *L, mpfr_t *J, size_t B, mpfr_t *Gy, mpfr_t *Gx)
{
    size_t N = L->in, M = L->out, t;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * M + 1, sizeof *ptrs);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < N; j++) {
            t = 0;
            for (size_t i = 0; i < M; i++)
                if (!mpfr_zero_p(J[i + j * M])) ptrs[t] = J[i + j * M], ptrs[M + t++] = Gy[b * M + i];
            vo_dot(Gx[b * N + j], NULL, ptrs, ptrs + M, t);
        }
    free(ptrs);
}

static void conv_vjp_param_fused(const vijp_layer *L, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt)
{
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L), NW = nweights(L), T = B * no, t;
    mpfr_srcptr *ptrs = vijp_alloc_array(2 * T + 1, sizeof *ptrs);
    for (size_t o = 0; o < D; o++) {
        for (size_t c = 0; c < C; c++)
            for (size_t k = 0; k < K; k++) {
                t = 0;
                for (size_t b = 0; b < B; b++)
                    for (size_t p = 0; p < no; p++) {
                        long q = source(L, p, k);
                        if (q >= 0) ptrs[t] = Gy[b * L->out + o * no + p], ptrs[T + t++] = X[b * L->in + c * n + (size_t)q];
                    }
                vo_dot(Gt[(o * C + c) * K + k], NULL, ptrs, ptrs + T, t);
            }
        t = 0;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < no; p++) ptrs[t++] = Gy[b * L->out + o * no + p];
        vo_dot(Gt[NW + o], NULL, ptrs, NULL, t);
    }
    free(ptrs);
}

static void conv(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, int bias, const vijp_format *f)
{
    if (vo_dot_fused(f)) { conv_fused(L, th, X, B, Y, bias); return; }
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L);
    mpfr_t t;
    mpfr_init2(t, f->prec);
    for (size_t b = 0; b < B; b++)
        for (size_t o = 0; o < D; o++)
            for (size_t p = 0; p < no; p++) {
                mpfr_t *y = &Y[b * L->out + o * no + p];
                if (bias) vo_set(*y, th[nweights(L) + o], f);
                else mpfr_set_zero(*y, 1);
                for (size_t c = 0; c < C; c++)
                    for (size_t k = 0; k < K; k++) {
                        long q = source(L, p, k);
                        if (q >= 0) term(*y, th[(o * C + c) * K + k], X[b * L->in + c * n + (size_t)q], f);
                    }
            }
    mpfr_clear(t);
}

void vo_conv1d_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    conv(L, th, X, B, Y, 1, f);
}

void vo_conv1d_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    (void)X;
    conv(L, th, U, B, V, 0, f);
}

/* J's entry sums the taps that padding folds onto one input, in tap order
 * (the first one set, each later one added: one rounding each). */
void vo_conv1d_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    (void)x;
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L), M = L->out;
    for (size_t i = 0; i < M * L->in; i++) mpfr_set_zero(J[i], 1);
    for (size_t o = 0; o < D; o++)
        for (size_t p = 0; p < no; p++)
            for (size_t c = 0; c < C; c++)
                for (size_t k = 0; k < K; k++) {
                    long q = source(L, p, k);
                    if (q < 0) continue;
                    mpfr_t *e = &J[(o * no + p) + (c * n + (size_t)q) * M];
                    if (mpfr_zero_p(*e)) vo_set(*e, th[(o * C + c) * K + k], f);
                    else vo_add(*e, *e, th[(o * C + c) * K + k], f);
                }
}

/* G_x = Jᵀ G_y with the explicit Jacobian, sums in index order. */
void vo_conv1d_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    (void)X;
    size_t N = L->in, M = L->out;
    mpfr_t *J = vo_vec_new(M * N, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    if (vo_dot_fused(f)) conv_vjp_fused(L, J, B, Gy, Gx), B = 0; /* done: the loop below is skipped */
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < N; j++) {
            mpfr_set_zero(Gx[b * N + j], 1);
            for (size_t i = 0; i < M; i++)
                if (!mpfr_zero_p(J[i + j * M])) term(Gx[b * N + j], J[i + j * M], Gy[b * M + i], f);
        }
    vo_vec_free(J, M * N);
}

void vo_conv1d_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt, const vijp_format *f)
{
    (void)th;
    if (vo_dot_fused(f)) { conv_vjp_param_fused(L, X, B, Gy, Gt); return; }
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L), NW = nweights(L);
    for (size_t i = 0; i < NW + D; i++) mpfr_set_zero(Gt[i], 1);
    for (size_t o = 0; o < D; o++) {
        for (size_t c = 0; c < C; c++)
            for (size_t k = 0; k < K; k++)
                for (size_t b = 0; b < B; b++)
                    for (size_t p = 0; p < no; p++) {
                        long q = source(L, p, k);
                        if (q >= 0)
                            term(Gt[(o * C + c) * K + k], Gy[b * L->out + o * no + p], X[b * L->in + c * n + (size_t)q], f);
                    }
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < no; p++) vo_add(Gt[NW + o], Gt[NW + o], Gy[b * L->out + o * no + p], f);
    }
}

/* The dense layer dense:MxN with W = J, b = 0 (its θ: J, then M zeros), for
 * the oracle's solves on the explicit Jacobian. */
static mpfr_t *as_dense(const vijp_layer *L, mpfr_t *th, vijp_layer *dl, const vijp_format *f)
{
    size_t N = L->in, M = L->out;
    mpfr_t *J = vo_vec_new(M * N + M, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    memset(dl, 0, sizeof *dl);
    dl->in = N, dl->out = M;
    return J;
}

int vo_conv1d_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                   const vijp_format *f)
{
    if (vijp_conv_get(L)->deficient) return VIJP_ESINGULAR; /* rank lost at every weight: no solve (conv.c) */
    size_t N = L->in, M = L->out;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    int rc;
    if (M != N) { /* the dense oracle's solve: minimum-norm when wide, with the fragment when tall */
        rc = vo_dense_vijp(&dl, J, X, B, Gx, frag, Gy, f);
    } else {
        for (size_t i = 0; i < N * B; i++) vo_set(Gy[i], Gx[i], f);
        rc = vo_ge_solve(N, J, 1, Gy, B, f); /* Jᵀ g_y = g_x */
    }
    vo_vec_free(J, M * N + M);
    return rc;
}

size_t vo_conv1d_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

void vo_conv1d_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag, const vijp_format *f)
{
    if (L->out <= L->in) return;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    vo_dense_fragment(&dl, J, X, B, Gy, frag, f);
    vo_vec_free(J, L->out * L->in + L->out);
}

int vo_conv1d_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    if (vijp_conv_get(L)->deficient) return VIJP_ESINGULAR; /* rank lost at every weight: no solve (conv.c) */
    if (L->out <= L->in) return 0;
    vijp_layer dl;
    mpfr_t *J = as_dense(L, th, &dl, f);
    int rc = vo_dense_cokernel(&dl, J, x, Q, f);
    vo_vec_free(J, L->out * L->in + L->out);
    return rc;
}

int vo_conv1d_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    if (vijp_conv_get(L)->deficient) return VIJP_ESINGULAR; /* rank lost at every weight: no solve (conv.c) */
    if (L->out != L->in) return VIJP_EUNSUPPORTED;
    size_t no = outlen(L), N = L->in;
    mpfr_t *J = vo_vec_new(N * N, f);
    vo_conv1d_jacobian(L, th, NULL, J, f);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++) vo_sub(X[b * N + i], Y[b * N + i], th[nweights(L) + i / no], f);
    int rc = vo_ge_solve(N, J, 0, X, B, f);
    vo_vec_free(J, N * N);
    return rc;
}

/* J enclosed at double weights: each entry the exact sum of the taps that
 * padding folds onto it (one weight, rad = 0, unless reflect or a wide
 * circular kernel folds several), enclosed in MPFI at 128 bits.  The
 * entries of one (output, input channel) pair are apart from every other
 * pair's, so each group of K taps is summed on its own. */
int vo_conv_jacobian_enclose(const vijp_layer *L, const double *th, const double *x, double *mid, double *rad)
{
    (void)x;
    size_t C = chans(L), D = outchans(L), K = taps(L), n = len(L), no = outlen(L), M = L->out;
    long *src = vijp_alloc_array(K, sizeof *src);
    mpfi_t s;
    mpfi_init2(s, 128);
    memset(mid, 0, M * L->in * sizeof *mid), memset(rad, 0, M * L->in * sizeof *rad);
    for (size_t o = 0; o < D; o++)
        for (size_t p = 0; p < no; p++)
            for (size_t c = 0; c < C; c++) {
                for (size_t k = 0; k < K; k++) src[k] = source(L, p, k);
                for (size_t k = 0; k < K; k++) {
                    int seen = src[k] < 0;
                    for (size_t j = 0; j < k && !seen; j++) seen = src[j] == src[k];
                    if (seen) continue;
                    mpfi_set_d(s, th[(o * C + c) * K + k]);
                    for (size_t j = k + 1; j < K; j++)
                        if (src[j] == src[k]) mpfi_add_d(s, s, th[(o * C + c) * K + j]);
                    size_t e = (o * no + p) + (c * n + (size_t)src[k]) * M;
                    vo_interval_mid_rad(s, &mid[e], &rad[e]);
                }
            }
    mpfi_clear(s);
    free(src);
    return 0;
}

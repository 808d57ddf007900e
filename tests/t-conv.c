/* conv1d and conv2d as PyTorch's Conv1d/Conv2d (src/layers/conv.c), and
 * the pooling layers (src/layers/pool_window.c).  Convolutions: the
 * forward against a direct sum written here from torch's definition (pad
 * the input as F.pad does, then correlate "valid"), independent of the
 * layer's tap geometry and of the MPFR oracle's; the spec's modifiers
 * printed back; the shape rules (a JSON net's {weight, bias} with D output
 * channels: t-netjson.c).  The operators against the MPFR twin, differences and the
 * narrow formats run in the layer battery (t-check-layer.c, t-layers.c). */
#include "fixtures/testutil.h"
#include "vijp/catalogue.h"
#include "vijp/layer.h"
#include "vijp/net.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *spec;
    size_t width;
    size_t C, D, K, S, P, R; /* R: rows (1 in 1-D) */
    int mode;                /* 0 zero, 1 circular, 2 reflect */
    int two_d;
} conv_case;

/* torch.nn.functional.pad on one axis of N: the padded index i (from −P)
 * read from the grid, or −1 for zero padding. */
static long torch_pad(long i, long N, int mode)
{
    if (i >= 0 && i < N) return i;
    if (mode == 1) return ((i % N) + N) % N;
    if (mode == 2) return i < 0 ? -i : 2 * N - 2 - i;
    return -1;
}

/* The padded input of one sample, channel-major (C, Rp, Qp), then the
 * valid correlation with stride S; y and its error bound γ_t Σ|w||x| + |b|
 * terms (Higham eq. 3.5, t = C·K² + 1 terms, u = 2^-53). */
static void direct_conv(const conv_case *c, const double *th, const double *x, double *y, double *bound, size_t *m)
{
    size_t R = c->R, Q = c->width / (c->C * R), KH = c->two_d ? c->K : 1, PR = c->two_d ? c->P : 0;
    size_t Rp = R + 2 * PR, Qp = Q + 2 * c->P;
    double *xp = calloc(c->C * Rp * Qp, sizeof *xp);
    for (size_t ch = 0; ch < c->C; ch++)
        for (size_t r = 0; r < Rp; r++)
            for (size_t q = 0; q < Qp; q++) {
                long sr = torch_pad((long)r - (long)PR, (long)R, c->mode), sq = torch_pad((long)q - (long)c->P, (long)Q, c->mode);
                xp[(ch * Rp + r) * Qp + q] = sr < 0 || sq < 0 ? 0 : x[ch * R * Q + (size_t)sr * Q + (size_t)sq];
            }
    size_t Ro = (Rp - KH) / c->S + 1, Qo = (Qp - c->K) / c->S + 1, NW = c->D * c->C * KH * c->K;
    double t = (double)(c->C * KH * c->K + 1), gamma = t * 0x1p-53 / (1 - t * 0x1p-53);
    for (size_t o = 0; o < c->D; o++)
        for (size_t r = 0; r < Ro; r++)
            for (size_t q = 0; q < Qo; q++) {
                double s = th[NW + o], a = fabs(s);
                for (size_t ch = 0; ch < c->C; ch++)
                    for (size_t ky = 0; ky < KH; ky++)
                        for (size_t kx = 0; kx < c->K; kx++) {
                            double w = th[((o * c->C + ch) * KH + ky) * c->K + kx];
                            double v = xp[(ch * Rp + c->S * r + ky) * Qp + c->S * q + kx];
                            s += w * v, a += fabs(w * v);
                        }
                size_t i = (o * Ro + r) * Qo + q;
                y[i] = s, bound[i] = 2 * gamma * a; /* both sums' errors */
            }
    *m = c->D * Ro * Qo;
    free(xp);
}

static const conv_case cases[] = {
    {"conv1d:2x3", 8, 2, 2, 3, 1, 1, 1, 0, 0},
    {"conv1d:2x4:out=3", 10, 2, 3, 4, 1, 2, 1, 0, 0},             /* even kernel: one position more */
    {"conv1d:2x4s2:out=3:pad=0", 14, 2, 3, 4, 2, 0, 1, 0, 0},     /* valid, 7 positions: (7 − 4)/2 + 1 */
    {"conv1d:1x5:out=2:reflect", 6, 1, 2, 5, 1, 2, 1, 2, 0},      /* reflect folds taps together */
    {"conv1d:3x2:reflect", 12, 3, 3, 2, 1, 1, 1, 2, 0},
    {"conv1d:2x3s3:circular", 8, 2, 2, 3, 3, 1, 1, 1, 0},         /* stride not dividing: torch's count */
    {"conv1d:1x7:out=2:circular", 4, 1, 2, 7, 1, 3, 1, 1, 0}, /* circular kernel wider than the channel */
    {"conv2d:1x3x4", 16, 1, 1, 3, 1, 1, 4, 0, 1},
    {"conv2d:2x2x4:out=3", 40, 2, 3, 2, 1, 1, 4, 0, 1},           /* 4 x 5 grid, even kernel */
    {"conv2d:2x3x5s2:out=1:pad=0", 60, 2, 1, 3, 2, 0, 5, 0, 1},
    {"conv2d:1x3x4:out=2:reflect", 20, 1, 2, 3, 1, 1, 4, 2, 1},
    {"conv2d:2x4x3:reflect", 18, 2, 2, 4, 1, 2, 3, 2, 1},
    {"conv2d:1x3x3s2:out=2:circular", 12, 1, 2, 3, 2, 1, 3, 1, 1},
};

START_TEST(forward_matches_torch_definition)
{
    const conv_case *c = &cases[_i];
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_parse(&L, c->spec, c->width, &err), "%s: %s", c->spec, err.msg);
    size_t P = L.type->param_count(&L), n = L.in;
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed() + (uint64_t)_i);
    double *th = malloc(P * sizeof *th), *x = malloc(n * sizeof *x), *y = malloc(L.out * sizeof *y);
    double *want = malloc(L.out * sizeof *want), *bound = malloc(L.out * sizeof *bound);
    for (size_t k = 0; k < P; k++) th[k] = vijp_rng_normal(&rng);
    for (size_t k = 0; k < n; k++) x[k] = vijp_rng_normal(&rng);
    size_t m = 0;
    direct_conv(c, th, x, want, bound, &m);
    ck_assert_uint_eq(m, L.out);
    ck_assert_uint_eq(P, c->D * c->C * (c->two_d ? c->K : 1) * c->K + c->D);
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat thm = {.rows = P, .cols = 1, .fmt = &fd, .d = th}, xm = {.rows = n, .cols = 1, .fmt = &fd, .d = x};
    vijp_mat ym = {.rows = L.out, .cols = 1, .fmt = &fd, .d = y};
    ck_assert(!vijp_layer_forward(&L, &thm, &xm, &ym, &err));
    for (size_t i = 0; i < m; i++)
        ck_assert_msg(fabs(y[i] - want[i]) <= bound[i], "%s: y[%zu] = %.17g, torch's definition %.17g", c->spec, i, y[i],
                      want[i]);
    /* the spec prints back as written, and D, P, the mode as parsed */
    char buf[128];
    vijp_layer_spec(&L, buf, sizeof buf);
    ck_assert_str_eq(buf, c->spec);
    const vijp_conv_args *a = vijp_conv_get(&L);
    ck_assert_uint_eq(a->out_channels, c->D);
    ck_assert_uint_eq(a->pad, c->P);
    ck_assert_int_eq(a->circular, c->mode == 1);
    ck_assert_int_eq(a->reflect, c->mode == 2);
    /* more outputs than inputs: never submersive, declared */
    ck_assert_int_eq(!!(L.type->declare(&L) & VIJP_DECL_NEVER_SUBMERSIVE), L.out > L.in);
    free(th), free(x), free(y), free(want), free(bound);
    vijp_layer_clear(&L);
}
END_TEST

/* Modifiers in any order read as the same layer; defaults print away. */
START_TEST(modifiers_print_canonically)
{
    static const char *const same[][2] = {
        {"conv1d:2x3:reflect:out=4:pad=1", "conv1d:2x3:out=4:reflect"},
        {"conv1d:2x3:pad=1:zero:out=2", "conv1d:2x3"},
        {"conv2d:2x3x4s2:circular:pad=0", "conv2d:2x3x4s2:pad=0:circular"},
    };
    for (size_t k = 0; k < sizeof same / sizeof *same; k++) {
        vijp_layer L;
        ck_assert(!vijp_layer_parse(&L, same[k][0], 32, NULL));
        char buf[128];
        vijp_layer_spec(&L, buf, sizeof buf);
        ck_assert_str_eq(buf, same[k][1]);
        vijp_layer_clear(&L);
    }
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"conv1d:2x3:out=0", 8, VIJP_EINVAL},         {"conv1d:2x3:out=", 8, VIJP_EINVAL},
        {"conv1d:2x3:pad=-1", 8, VIJP_EINVAL},        {"conv1d:2x3:pad=1:pad=1", 8, VIJP_EINVAL},
        {"conv1d:2x3:reflect:circular", 8, VIJP_EINVAL}, {"conv1d:2x3:reflectx", 8, VIJP_EINVAL},
        {"conv1d:2x3:", 8, VIJP_EINVAL},              {"conv1d:2x0", 8, VIJP_EINVAL},
        {"conv1d:2x9:pad=0", 8, VIJP_EDIM},           /* kernel longer than the padded channel */
        {"conv1d:2x3:pad=4:reflect", 8, VIJP_EDIM},   /* torch: reflect padding < the channel */
        {"conv1d:2x3:pad=5:circular", 8, VIJP_EDIM},  /* torch: circular padding <= the channel */
        {"conv2d:1x3x2:reflect:pad=2", 8, VIJP_EDIM}, /* 2 rows: reflect by at most 1 */
        {"conv1d:1x1:out=16777216", 16, VIJP_EDIM},   /* the output past the widest layer */
        /* a zero row or column, or two equal rows: refused, not left to a failing solve */
        {"conv1d:3x2s2:out=2:pad=1:circular", 12, VIJP_EDIM}, /* outputs 0 and 2 read inputs 3, 0 */
        {"conv1d:1x1s2:pad=1:reflect", 4, VIJP_EDIM},  /* outputs 0 and 1 read input 1 */
        {"conv1d:1x2:pad=2", 4, VIJP_EDIM},            /* output 0 reads only padding: a zero row */
        {"conv2d:1x3x4:pad=3", 16, VIJP_EDIM},
        {"conv1d:1x1s2:out=3", 4, VIJP_EDIM},         /* tall, inputs 1 and 3 unread: zero columns */
        {"conv1d:1x2s2:out=3:pad=0", 5, VIJP_EDIM},    /* tall, input 4 left over by the last window */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        ck_assert_msg(vijp_layer_parse(&L, bad[k].spec, bad[k].width, &err) == bad[k].rc, "%s", bad[k].spec);
        ck_assert_msg(err.msg[0], "%s: no message", bad[k].spec);
    }
    /* Rank lost at every weight, found by the SVD at parse or by the
     * per-position rule: kept (ResNet's downsampling skip is one), declared
     * never submersive and marked so that its solves refuse (t-residual.c
     * runs such a block). */
    static const struct {
        const char *spec;
        size_t width;
    } deficient[] = {
        {"conv2d:1x3x4s2:out=3:pad=2:reflect", 24}, /* rank 23 of 24 at any weights (torch's J too) */
        {"conv2d:2x1x4s2:out=4", 32},               /* 1 x 1 strided widening: 4 rows on 2 inputs per position */
    };
    for (size_t k = 0; k < sizeof deficient / sizeof *deficient; k++) {
        vijp_layer L;
        ck_assert_msg(!vijp_layer_parse(&L, deficient[k].spec, deficient[k].width, NULL), "%s", deficient[k].spec);
        ck_assert_msg(vijp_conv_get(&L)->deficient, "%s", deficient[k].spec);
        ck_assert(L.type->declare(&L) & VIJP_DECL_NEVER_SUBMERSIVE);
        vijp_layer_clear(&L);
    }
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "conv2d:2x3x4s2:out=4", 32, NULL)); /* the block's f: full rank */
    ck_assert(!vijp_conv_get(&L)->deficient);
    vijp_layer_clear(&L);
}
END_TEST

/* ---- pooling: avgpool2d, maxpool1d, maxpool2d ---- */

/* forward and vjp of one sample against the definition written here:
 * windows at corners (S·r, S·q), torch's first maximum (a later equal value
 * does not replace it), the mean as the window's sum over K² (within
 * γ_(K²) of the sum's magnitude, Higham eq. 3.5, and one rounding of the
 * division). */
static void pool_check(const char *spec, size_t width, size_t C, size_t K, size_t S, size_t R, int is_max, const double *x)
{
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_msg(!vijp_layer_parse(&L, spec, width, &err), "%s: %s", spec, err.msg);
    size_t Q = width / (C * R), KH = R > 1 ? K : 1, oR = R > 1 ? (R - K) / S + 1 : 1, oQ = (Q - K) / S + 1;
    ck_assert_uint_eq(L.out, C * oR * oQ);
    double *y = malloc(L.out * sizeof *y), *gy = malloc(L.out * sizeof *gy), *gx = malloc(width * sizeof *gx);
    double *want_gx = calloc(width, sizeof *want_gx);
    for (size_t j = 0; j < L.out; j++) gy[j] = (double)(j + 1);
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat xm = {.rows = width, .cols = 1, .fmt = &fd, .d = (double *)x}, ym = {.rows = L.out, .cols = 1, .fmt = &fd, .d = y};
    vijp_mat gym = {.rows = L.out, .cols = 1, .fmt = &fd, .d = gy}, gxm = {.rows = width, .cols = 1, .fmt = &fd, .d = gx};
    ck_assert(!vijp_layer_forward(&L, NULL, &xm, &ym, &err));
    ck_assert(!vijp_layer_vjp(&L, NULL, &xm, &gym, &gxm, &err));
    for (size_t c = 0, j = 0; c < C; c++)
        for (size_t r = 0; r < oR; r++)
            for (size_t q = 0; q < oQ; q++, j++) {
                size_t best = SIZE_MAX;
                double sum = 0, mag = 0;
                for (size_t ky = 0; ky < KH; ky++)
                    for (size_t kx = 0; kx < K; kx++) {
                        size_t i = c * R * Q + (S * r + ky) * Q + S * q + kx;
                        if (best == SIZE_MAX || x[i] > x[best]) best = i;
                        sum += x[i], mag += fabs(x[i]);
                    }
                if (is_max) {
                    ck_assert_msg(y[j] == x[best], "%s: y[%zu] = %g, want x[%zu] = %g", spec, j, y[j], best, x[best]);
                    want_gx[best] += gy[j];
                } else {
                    double T = (double)(KH * K), g = T * 0x1p-53 / (1 - T * 0x1p-53);
                    ck_assert_msg(fabs(y[j] - sum / T) <= 2 * g * mag / T + 0x1p-53 * fabs(sum / T), "%s: y[%zu]", spec, j);
                }
            }
    if (is_max) /* integer sums: exact */
        for (size_t i = 0; i < width; i++) ck_assert_msg(gx[i] == want_gx[i], "%s: gx[%zu] = %g, want %g", spec, i, gx[i], want_gx[i]);
    unsigned d = L.type->declare(&L);
    ck_assert_int_eq(!!(d & VIJP_DECL_SUBMERSIVE), !is_max || S >= K); /* maxpool: only without overlap */
    free(y), free(gy), free(gx), free(want_gx);
    vijp_layer_clear(&L);
}

START_TEST(pooling_matches_definition)
{
    /* small integers: ties in most windows, which the first maximum breaks */
    double x[60];
    vijp_rng rng;
    vijp_rng_seed(&rng, test_seed());
    for (size_t i = 0; i < 60; i++) x[i] = (double)(vijp_rng_u64(&rng) % 4);
    pool_check("maxpool1d:2x3s1", 12, 2, 3, 1, 1, 1, x);
    pool_check("maxpool1d:3x2", 18, 3, 2, 2, 1, 1, x);
    pool_check("maxpool1d:1x2s3", 10, 1, 2, 3, 1, 1, x);   /* windows apart, inputs left out */
    pool_check("maxpool2d:1x3x5s2", 30, 1, 3, 2, 5, 1, x);
    pool_check("maxpool2d:2x2x4", 32, 2, 2, 2, 4, 1, x);
    pool_check("maxpool2d:1x2x3s1", 12, 1, 2, 1, 3, 1, x);
    for (size_t i = 0; i < 60; i++) x[i] = vijp_rng_normal(&rng);
    pool_check("avgpool2d:2x2x4", 32, 2, 2, 2, 4, 0, x);
    pool_check("avgpool2d:1x3x5s1", 30, 1, 3, 1, 5, 0, x);
    pool_check("avgpool2d:1x3x6s2", 36, 1, 3, 2, 6, 0, x);
}
END_TEST

/* maxpool's overlapping windows: two outputs selecting one input make
 * equal rows of J, and the fragment is exactly their cokernel.  On
 * x = (0, 5, 1, 2) with windows of 2 at stride 1, outputs 0 and 1 both
 * select x1: the cokernel is spanned by (e0 − e1)/√2, so the fragment of
 * g_y is (g0 − g1)/√2 and vijp(g_x, c) puts g_x[1]/2 on each of them plus
 * c/√2, −c/√2. */
START_TEST(maxpool_equal_rows_fragment)
{
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "maxpool1d:1x2s1", 4, NULL));
    double x[4] = {0, 5, 1, 2}, gy[3] = {3, 1, 4}, frag[1], gyb[3], gx[4] = {0, 6, 0, 8};
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat xm = {.rows = 4, .cols = 1, .fmt = &fd, .d = x}, gym = {.rows = 3, .cols = 1, .fmt = &fd, .d = gy};
    vijp_mat fm = {.rows = 1, .cols = 1, .fmt = &fd, .d = frag}, gxm = {.rows = 4, .cols = 1, .fmt = &fd, .d = gx};
    vijp_mat gybm = {.rows = 3, .cols = 1, .fmt = &fd, .d = gyb};
    ck_assert_uint_eq(vijp_layer_fragment_count(&L, NULL, &xm), 1);
    vijp_error err = {0};
    ck_assert(!vijp_layer_fragment(&L, NULL, &xm, &gym, &fm, &err));
    ck_assert_double_eq(frag[0], 2 / sqrt(2)); /* (3 − 1)/√2, each step one rounding */
    ck_assert(!vijp_layer_vijp(&L, NULL, &xm, &gxm, &fm, &gybm, &err));
    double c = frag[0] / sqrt(2);
    ck_assert_double_eq_tol(gyb[0], 3 + c, 1e-15 * 4);
    ck_assert_double_eq_tol(gyb[1], 3 - c, 1e-15 * 4);
    ck_assert_double_eq(gyb[2], 8);
    vijp_layer_clear(&L);
}
END_TEST

START_TEST(pooling_bad_arguments)
{
    static const struct {
        const char *spec;
        size_t width;
        int rc;
    } bad[] = {
        {"maxpool1d", 8, VIJP_EINVAL},         {"maxpool1d:2", 8, VIJP_EINVAL},      {"maxpool1d:2x0", 8, VIJP_EINVAL},
        {"maxpool1d:2x2s0", 8, VIJP_EINVAL},   {"maxpool1d:2x2s", 8, VIJP_EINVAL},   {"maxpool1d:2x2:x", 8, VIJP_EINVAL},
        {"maxpool2d:2x2", 8, VIJP_EINVAL},     {"avgpool2d:1x2x0", 8, VIJP_EINVAL},  {"maxpool1d:3x2", 8, VIJP_EDIM},
        {"maxpool1d:2x5", 8, VIJP_EDIM},       {"maxpool2d:1x3x2", 8, VIJP_EDIM},    {"avgpool2d:1x2x3", 8, VIJP_EDIM},
        {"maxpool1d:2x1", 8, VIJP_EINVAL},     {"avgpool2d:1x1x2", 8, VIJP_EINVAL}, /* the identity */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        vijp_layer L;
        vijp_error err = {0};
        ck_assert_msg(vijp_layer_parse(&L, bad[k].spec, bad[k].width, &err) == bad[k].rc, "%s", bad[k].spec);
        ck_assert_msg(err.msg[0], "%s: no message", bad[k].spec);
    }
}
END_TEST

Suite *suite_conv(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");
    tcase_add_loop_test(tc, forward_matches_torch_definition, 0, (int)(sizeof cases / sizeof *cases));
    tcase_add_test(tc, modifiers_print_canonically);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, pooling_matches_definition);
    tcase_add_test(tc, maxpool_equal_rows_fragment);
    tcase_add_test(tc, pooling_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

/* The SIMD sets of the double-double products, written once over VW doubles
 * with GCC/Clang vector extensions and compiled per instruction set by
 * avx2/ddot.c (VW = 4) and avx512/ddot.c (VW = 8), each with its directory's
 * target flags (mk/lib.mk).  y = A·x + c runs one lane per output row:
 * column j of A is a contiguous load (column-major), x_j a broadcast, and
 * every lane does dd_row's operations (eft.h) in dd_row's order, so the
 * outputs are ref's bit for bit (tests/t-ddot.c checks it).  Two vectors of
 * rows at a time keep both FP ports busy past the adds' latency; leftover
 * rows take one vector, then dd_row itself (compiled here with FMA). */
#ifndef VIJP_DDOT_SIMD_H
#define VIJP_DDOT_SIMD_H

#include "ddot/ddot.h"
#include "ddot/eft.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef double vd __attribute__((vector_size(VW * 8)));
typedef int64_t vm __attribute__((vector_size(VW * 8)));
#if VW == 4
static inline vd vfma(vd a, vd b, vd c) { return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c); }
#elif VW == 8
static inline vd vfma(vd a, vd b, vd c) { return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c); }
#else
#error "VW must be 4 or 8"
#endif
static inline vd vload(const double *p)
{
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline vd vabs(vd x) { return (vd)((vm)x & INT64_MAX); }

/* One term a·x_j into a lane's (p, s, absum): dd_row's body, lane by lane. */
#define DD_STEP(P, S, AB, a, x)                                                                                       \
    do {                                                                                                              \
        vd h_ = (a) * (x), r_ = vfma((a), (x), -h_), t_ = (P) + h_, z_ = t_ - (P);                                    \
        vd q_ = ((P) - (t_ - z_)) + (h_ - z_);                                                                        \
        (P) = t_;                                                                                                     \
        (S) = (S) + (q_ + r_);                                                                                        \
        (AB) = (AB) + vabs(h_);                                                                                       \
    } while (0)

/* Lanes' (p, s, absum) to outputs yh, yl, bound. */
static size_t finish_lanes(vd p, vd s, vd ab, size_t nterms, int dd_input, double *yh, double *yl, double *bound)
{
    double pp[VW], ss[VW], aa[VW];
    size_t unbounded = 0;
    memcpy(pp, &p, sizeof pp), memcpy(ss, &s, sizeof ss), memcpy(aa, &ab, sizeof aa);
    for (int l = 0; l < VW; l++)
        unbounded += vijp_dd_finish(pp[l], ss[l], aa[l], nterms, dd_input, yh + l, yl + l, bound + l);
    return unbounded;
}

/* Rows [0, 2VW) of A (already offset) times x. */
static size_t block2(size_t n, const double *A, size_t lda, const double *xh, const double *xl, const double *c,
                     double *yh, double *yl, double *bound)
{
    vd zero = {0}, p0 = c ? vload(c) : zero, p1 = c ? vload(c + VW) : zero, s0 = zero, s1 = zero;
    vd b0 = vabs(p0), b1 = vabs(p1);
    if (xl)
        for (size_t j = 0; j < n; j++) {
            const double *col = A + j * lda;
            vd a0 = vload(col), a1 = vload(col + VW), x = xh[j] - zero, lo = xl[j] - zero;
            DD_STEP(p0, s0, b0, a0, x);
            DD_STEP(p1, s1, b1, a1, x);
            s0 = vfma(a0, lo, s0), s1 = vfma(a1, lo, s1);
        }
    else
        for (size_t j = 0; j < n; j++) {
            const double *col = A + j * lda;
            vd a0 = vload(col), a1 = vload(col + VW), x = xh[j] - zero;
            DD_STEP(p0, s0, b0, a0, x);
            DD_STEP(p1, s1, b1, a1, x);
        }
    size_t N = n + (c != NULL);
    return finish_lanes(p0, s0, b0, N, xl != NULL, yh, yl, bound) +
           finish_lanes(p1, s1, b1, N, xl != NULL, yh + VW, yl + VW, bound + VW);
}

/* Rows [0, VW). */
static size_t block1(size_t n, const double *A, size_t lda, const double *xh, const double *xl, const double *c,
                     double *yh, double *yl, double *bound)
{
    vd zero = {0}, p = c ? vload(c) : zero, s = zero, b = vabs(p);
    for (size_t j = 0; j < n; j++) {
        vd a = vload(A + j * lda), x = xh[j] - zero;
        DD_STEP(p, s, b, a, x);
        if (xl) s = vfma(a, xl[j] - zero, s);
    }
    return finish_lanes(p, s, b, n + (c != NULL), xl != NULL, yh, yl, bound);
}

static size_t simd_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                       const double *c, double *hi, double *lo, double *bound)
{
    return dd_row(n, a, inca, xh, xl, incx, c, hi, lo, bound);
}

static size_t simd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                        const double *c, double *yh, double *yl, double *bound)
{
    size_t i = 0, unbounded = 0;
#define AT(i) n, A + (i), lda, xh, xl, c ? c + (i) : NULL, yh + (i), yl + (i), bound + (i)
    for (; i + 2 * VW <= m; i += 2 * VW) unbounded += block2(AT(i));
    for (; i + VW <= m; i += VW) unbounded += block1(AT(i));
#undef AT
    for (; i < m; i++) unbounded += dd_row(n, A + i, lda, xh, xl, 1, c ? c + i : NULL, yh + i, yl + i, bound + i);
    return unbounded;
}

/* ---- triple-double: td_row's body lane by lane ---- */

#define TWO_SUM(X, E, a, b)                                                                                           \
    do {                                                                                                              \
        vd a_ = (a), b_ = (b), s_ = a_ + b_, z_ = s_ - a_;                                                            \
        (E) = (a_ - (s_ - z_)) + (b_ - z_);                                                                           \
        (X) = s_;                                                                                                     \
    } while (0)

/* One term a·x (and a·xl when XL) into a lane's (p, s, t, absum). */
#define TD_STEP(P, S, T, AB, a, x, XL, xl)                                                                            \
    do {                                                                                                              \
        vd h_ = (a) * (x), r_ = vfma((a), (x), -h_), q_, e1_, e2_;                                                    \
        TWO_SUM(P, q_, P, h_);                                                                                        \
        TWO_SUM(S, e1_, S, q_);                                                                                       \
        TWO_SUM(S, e2_, S, r_);                                                                                       \
        if (XL) {                                                                                                     \
            vd h2_ = (a) * (xl), r2_ = vfma((a), (xl), -h2_), e3_;                                                    \
            TWO_SUM(S, e3_, S, h2_);                                                                                  \
            (T) = (T) + ((e1_ + e2_) + (e3_ + r2_));                                                                  \
        } else                                                                                                        \
            (T) = (T) + (e1_ + e2_);                                                                                  \
        (AB) = (AB) + vabs(h_);                                                                                       \
    } while (0)

static size_t td_finish_lanes(vd p, vd s, vd t, vd ab, size_t nterms, int dd_input, double *yh, double *ym, double *yl,
                              double *bound)
{
    double pp[VW], ss[VW], tt[VW], aa[VW];
    size_t unbounded = 0;
    memcpy(pp, &p, sizeof pp), memcpy(ss, &s, sizeof ss), memcpy(tt, &t, sizeof tt), memcpy(aa, &ab, sizeof aa);
    for (int l = 0; l < VW; l++)
        unbounded += vijp_td_finish(pp[l], ss[l], tt[l], aa[l], nterms, dd_input, yh + l, ym + l, yl + l, bound + l);
    return unbounded;
}

/* Rows [0, 2VW), XL a constant so that each loop is compiled apart. */
static inline size_t td_block2(size_t n, const double *A, size_t lda, const double *xh, const double *xl, int XL,
                               const double *c, double *yh, double *ym, double *yl, double *bound)
{
    vd zero = {0}, p0 = c ? vload(c) : zero, p1 = c ? vload(c + VW) : zero, s0 = zero, s1 = zero, t0 = zero,
       t1 = zero, b0 = vabs(p0), b1 = vabs(p1);
    for (size_t j = 0; j < n; j++) {
        const double *col = A + j * lda;
        vd a0 = vload(col), a1 = vload(col + VW), x = xh[j] - zero, lo = XL ? xl[j] - zero : zero;
        TD_STEP(p0, s0, t0, b0, a0, x, XL, lo);
        TD_STEP(p1, s1, t1, b1, a1, x, XL, lo);
    }
    size_t N = n + (c != NULL);
    return td_finish_lanes(p0, s0, t0, b0, N, XL, yh, ym, yl, bound) +
           td_finish_lanes(p1, s1, t1, b1, N, XL, yh + VW, ym + VW, yl + VW, bound + VW);
}

static size_t td_block1(size_t n, const double *A, size_t lda, const double *xh, const double *xl, const double *c,
                        double *yh, double *ym, double *yl, double *bound)
{
    vd zero = {0}, p = c ? vload(c) : zero, s = zero, t = zero, b = vabs(p);
    for (size_t j = 0; j < n; j++) {
        vd a = vload(A + j * lda), x = xh[j] - zero, lo = xl ? xl[j] - zero : zero;
        TD_STEP(p, s, t, b, a, x, xl != NULL, lo);
    }
    return td_finish_lanes(p, s, t, b, n + (c != NULL), xl != NULL, yh, ym, yl, bound);
}

static size_t simd_td_row(size_t n, const double *a, size_t inca, const double *xh, const double *xl, size_t incx,
                          const double *c, double *hi, double *mid, double *lo, double *bound)
{
    return td_row(n, a, inca, xh, xl, incx, c, hi, mid, lo, bound);
}

static size_t simd_td_gemv(size_t m, size_t n, const double *A, size_t lda, const double *xh, const double *xl,
                           const double *c, double *yh, double *ym, double *yl, double *bound)
{
    size_t i = 0, unbounded = 0;
#define AT(i) c ? c + (i) : NULL, yh + (i), ym + (i), yl + (i), bound + (i)
    for (; i + 2 * VW <= m; i += 2 * VW)
        unbounded += xl ? td_block2(n, A + i, lda, xh, xl, 1, AT(i)) : td_block2(n, A + i, lda, xh, NULL, 0, AT(i));
    for (; i + VW <= m; i += VW) unbounded += td_block1(n, A + i, lda, xh, xl, AT(i));
#undef AT
    for (; i < m; i++)
        unbounded += td_row(n, A + i, lda, xh, xl, 1, c ? c + i : NULL, yh + i, ym + i, yl + i, bound + i);
    return unbounded;
}

/* ---- triple-double x: qd_row's body lane by lane ---- */

/* eft.h's levels3 lane by lane: h0 into P; its error, r0 and h1 into S;
 * those errors, r1 and h2 into T; T's errors out in F0..F4, in its order. */
#define LEVELS3(P, S, T, h0, r0, h1, r1, h2, F0, F1, F2, F3, F4)                                                      \
    do {                                                                                                              \
        vd q_, e0_, e1_, e2_;                                                                                         \
        TWO_SUM(P, q_, P, h0);                                                                                        \
        TWO_SUM(S, e0_, S, q_);                                                                                       \
        TWO_SUM(S, e1_, S, r0);                                                                                       \
        TWO_SUM(S, e2_, S, h1);                                                                                       \
        TWO_SUM(T, F0, T, e0_);                                                                                       \
        TWO_SUM(T, F1, T, e1_);                                                                                       \
        TWO_SUM(T, F2, T, e2_);                                                                                       \
        TWO_SUM(T, F3, T, r1);                                                                                        \
        TWO_SUM(T, F4, T, h2);                                                                                        \
    } while (0)

/* One term a·(x0 + x1 + x2) into a lane's (p, s, t, w, absum). */
#define QD_STEP(P, S, T, W, AB, a, x0, x1, x2)                                                                        \
    do {                                                                                                              \
        vd h0_ = (a) * (x0), r0_ = vfma((a), (x0), -h0_), h1_ = (a) * (x1), r1_ = vfma((a), (x1), -h1_);              \
        vd h2_ = (a) * (x2), r2_ = vfma((a), (x2), -h2_), f0_, f1_, f2_, f3_, f4_;                                    \
        LEVELS3(P, S, T, h0_, r0_, h1_, r1_, h2_, f0_, f1_, f2_, f3_, f4_);                                           \
        (W) = (W) + (((f0_ + f1_) + (f2_ + f3_)) + (f4_ + r2_));                                                      \
        (AB) = (AB) + vabs(h0_);                                                                                      \
    } while (0)

/* Lanes' (p, s, t, w, absum) to outputs [at, at + VW) of y and bound. */
static size_t qd_finish_lanes(vd p, vd s, vd t, vd w, vd ab, size_t nterms, double *const y[4], size_t at,
                              double *bound)
{
    double pp[VW], ss[VW], tt[VW], ww[VW], aa[VW], yl[4];
    size_t unbounded = 0;
    memcpy(pp, &p, sizeof pp), memcpy(ss, &s, sizeof ss), memcpy(tt, &t, sizeof tt), memcpy(ww, &w, sizeof ww);
    memcpy(aa, &ab, sizeof aa);
    for (int l = 0; l < VW; l++) {
        unbounded += vijp_qd_finish(pp[l], ss[l], tt[l], ww[l], aa[l], nterms, yl, bound + at + l);
        for (int k = 0; k < 4; k++) y[k][at + l] = yl[k];
    }
    return unbounded;
}

/* Rows [at, at + 2VW) of A·x + c. */
static size_t qd_block2(size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                        double *const y[4], size_t at, double *bound)
{
    vd zero = {0}, p0 = c ? vload(c + at) : zero, p1 = c ? vload(c + at + VW) : zero, s0 = zero, s1 = zero,
       t0 = zero, t1 = zero, w0 = zero, w1 = zero, b0 = vabs(p0), b1 = vabs(p1);
    for (size_t j = 0; j < n; j++) {
        const double *col = A + at + j * lda;
        vd a0 = vload(col), a1 = vload(col + VW), x0 = x[0][j] - zero, x1 = x[1][j] - zero, x2 = x[2][j] - zero;
        QD_STEP(p0, s0, t0, w0, b0, a0, x0, x1, x2);
        QD_STEP(p1, s1, t1, w1, b1, a1, x0, x1, x2);
    }
    size_t N = n + (c != NULL);
    return qd_finish_lanes(p0, s0, t0, w0, b0, N, y, at, bound) +
           qd_finish_lanes(p1, s1, t1, w1, b1, N, y, at + VW, bound);
}

/* Rows [at, at + VW). */
static size_t qd_block1(size_t n, const double *A, size_t lda, const double *const x[3], const double *c,
                        double *const y[4], size_t at, double *bound)
{
    vd zero = {0}, p = c ? vload(c + at) : zero, s = zero, t = zero, w = zero, b = vabs(p);
    for (size_t j = 0; j < n; j++) {
        vd a = vload(A + at + j * lda), x0 = x[0][j] - zero, x1 = x[1][j] - zero, x2 = x[2][j] - zero;
        QD_STEP(p, s, t, w, b, a, x0, x1, x2);
    }
    return qd_finish_lanes(p, s, t, w, b, n + (c != NULL), y, at, bound);
}

static size_t simd_qd_row(size_t n, const double *a, size_t inca, const double *const x[3], size_t incx,
                          const double *c, double y[4], double *bound)
{
    return qd_row(n, a, inca, x, incx, c, y, bound);
}

static size_t simd_qd_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[3],
                           const double *c, double *const y[4], double *bound)
{
    size_t i = 0, unbounded = 0;
    for (; i + 2 * VW <= m; i += 2 * VW) unbounded += qd_block2(n, A, lda, x, c, y, i, bound);
    for (; i + VW <= m; i += VW) unbounded += qd_block1(n, A, lda, x, c, y, i, bound);
    for (; i < m; i++) {
        double yi[4];
        unbounded += qd_row(n, A + i, lda, x, 1, c ? c + i : NULL, yi, bound + i);
        for (int k = 0; k < 4; k++) y[k][i] = yi[k];
    }
    return unbounded;
}

/* ---- four-part x, five levels: d5_row's body lane by lane ---- */

/* One term a·(x0 + x1 + x2 + x3) into a lane's (p, s, t, v, w, A). */
#define D5_STEP(P, S, T, V, W, AA, a, x0, x1, x2, x3)                                                                 \
    do {                                                                                                              \
        vd h0_ = (a) * (x0), r0_ = vfma((a), (x0), -h0_), h1_ = (a) * (x1), r1_ = vfma((a), (x1), -h1_);              \
        vd h2_ = (a) * (x2), r2_ = vfma((a), (x2), -h2_), h3_ = (a) * (x3), r3_ = vfma((a), (x3), -h3_);              \
        vd f0_, f1_, f2_, f3_, f4_, g0_, g1_, g2_, g3_, g4_, g5_, g6_;                                                \
        LEVELS3(P, S, T, h0_, r0_, h1_, r1_, h2_, f0_, f1_, f2_, f3_, f4_);                                           \
        TWO_SUM(V, g0_, V, f0_);                                                                                      \
        TWO_SUM(V, g1_, V, f1_);                                                                                      \
        TWO_SUM(V, g2_, V, f2_);                                                                                      \
        TWO_SUM(V, g3_, V, f3_);                                                                                      \
        TWO_SUM(V, g4_, V, f4_);                                                                                      \
        TWO_SUM(V, g5_, V, r2_);                                                                                      \
        TWO_SUM(V, g6_, V, h3_);                                                                                      \
        (W) = (W) + (((g0_ + g1_) + (g2_ + g3_)) + ((g4_ + g5_) + (g6_ + r3_)));                                      \
        (AA) = (AA) + (((vabs(g0_) + vabs(g1_)) + (vabs(g2_) + vabs(g3_))) +                                          \
                       ((vabs(g4_) + vabs(g5_)) + (vabs(g6_) + vabs(r3_))));                                          \
    } while (0)

/* Lanes' (p, s, t, v, w, A) to outputs [at, at + VW) of y and bound. */
static size_t d5_finish_lanes(vd p, vd s, vd t, vd v, vd w, vd A, size_t n, size_t nterms, double *const y[5],
                              size_t at, double *bound)
{
    double pp[VW], ss[VW], tt[VW], vv[VW], ww[VW], aa[VW], yl[5];
    size_t unbounded = 0;
    memcpy(pp, &p, sizeof pp), memcpy(ss, &s, sizeof ss), memcpy(tt, &t, sizeof tt), memcpy(vv, &v, sizeof vv);
    memcpy(ww, &w, sizeof ww), memcpy(aa, &A, sizeof aa);
    for (int l = 0; l < VW; l++) {
        unbounded += vijp_d5_finish(pp[l], ss[l], tt[l], vv[l], ww[l], aa[l], n, nterms, yl, bound + at + l);
        for (int k = 0; k < 5; k++) y[k][at + l] = yl[k];
    }
    return unbounded;
}

/* Rows [at, at + 2VW) of A·x + c. */
static size_t d5_block2(size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                        double *const y[5], size_t at, double *bound)
{
    vd zero = {0}, p0 = c ? vload(c + at) : zero, p1 = c ? vload(c + at + VW) : zero, s0 = zero, s1 = zero,
       t0 = zero, t1 = zero, v0 = zero, v1 = zero, w0 = zero, w1 = zero, a0s = zero, a1s = zero;
    for (size_t j = 0; j < n; j++) {
        const double *col = A + at + j * lda;
        vd a0 = vload(col), a1 = vload(col + VW), x0 = x[0][j] - zero, x1 = x[1][j] - zero, x2 = x[2][j] - zero,
           x3 = x[3][j] - zero;
        D5_STEP(p0, s0, t0, v0, w0, a0s, a0, x0, x1, x2, x3);
        D5_STEP(p1, s1, t1, v1, w1, a1s, a1, x0, x1, x2, x3);
    }
    size_t N = n + (c != NULL);
    return d5_finish_lanes(p0, s0, t0, v0, w0, a0s, n, N, y, at, bound) +
           d5_finish_lanes(p1, s1, t1, v1, w1, a1s, n, N, y, at + VW, bound);
}

/* Rows [at, at + VW). */
static size_t d5_block1(size_t n, const double *A, size_t lda, const double *const x[4], const double *c,
                        double *const y[5], size_t at, double *bound)
{
    vd zero = {0}, p = c ? vload(c + at) : zero, s = zero, t = zero, v = zero, w = zero, as = zero;
    for (size_t j = 0; j < n; j++) {
        vd a = vload(A + at + j * lda), x0 = x[0][j] - zero, x1 = x[1][j] - zero, x2 = x[2][j] - zero,
           x3 = x[3][j] - zero;
        D5_STEP(p, s, t, v, w, as, a, x0, x1, x2, x3);
    }
    return d5_finish_lanes(p, s, t, v, w, as, n, n + (c != NULL), y, at, bound);
}

static size_t simd_d5_row(size_t n, const double *a, size_t inca, const double *const x[4], size_t incx,
                          const double *c, double y[5], double *bound)
{
    return d5_row(n, a, inca, x, incx, c, y, bound);
}

static size_t simd_d5_gemv(size_t m, size_t n, const double *A, size_t lda, const double *const x[4],
                           const double *c, double *const y[5], double *bound)
{
    size_t i = 0, unbounded = 0;
    for (; i + 2 * VW <= m; i += 2 * VW) unbounded += d5_block2(n, A, lda, x, c, y, i, bound);
    for (; i + VW <= m; i += VW) unbounded += d5_block1(n, A, lda, x, c, y, i, bound);
    for (; i < m; i++) {
        double yi[5];
        unbounded += d5_row(n, A + i, lda, x, 1, c ? c + i : NULL, yi, bound + i);
        for (int k = 0; k < 5; k++) y[k][i] = yi[k];
    }
    return unbounded;
}

#endif

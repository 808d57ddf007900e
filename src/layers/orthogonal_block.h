/* The inner loops of orthogonal.c's blocked Householder accumulation,
 * included there twice: once in portable C and once for AVX2 (ORTHO_ATTR,
 * ORTHO_NAME set by the includer).  Each output is one sum in one fixed
 * order; the vectors run across independent outputs only, never across a
 * sum, and -ffp-contract=off keeps every product and sum rounded on its
 * own, so both copies give the same bits (tests/t-orthogonal.c checks it).
 * Not a header to include anywhere else. */

#define ORTHO_LD(v, p) memcpy(&(v), (p), sizeof(v))
#define ORTHO_ST(p, v) memcpy((p), &(v), sizeof(v))

/* W[j·OB + p] += Σ_{t = t0}^{t1−1} Vt[t·OB + p] · C[t + j·ldc], t ascending,
 * for nc columns: the sums of Vᵀ C over the rows t0..t1−1, so that tiles
 * taken in ascending order give the same sums as one pass (a sum kept in
 * W between tiles is the same double it was in a register).  OB = 4·OV:
 * four vectors hold a column's OB sums; two columns at a time. */
ORTHO_ATTR static void ORTHO_NAME(vt_c)(const double *Vt, const double *C, size_t ldc, size_t t0, size_t t1, size_t nc,
                                        double *W)
{
    size_t j = 0;
    for (; j + 2 <= nc; j += 2) {
        double *w0 = W + j * OB, *w1 = w0 + OB;
        ortho_vec a0, a1, a2, a3, b0, b1, b2, b3;
        ORTHO_LD(a0, w0), ORTHO_LD(a1, w0 + OV), ORTHO_LD(a2, w0 + 2 * OV), ORTHO_LD(a3, w0 + 3 * OV);
        ORTHO_LD(b0, w1), ORTHO_LD(b1, w1 + OV), ORTHO_LD(b2, w1 + 2 * OV), ORTHO_LD(b3, w1 + 3 * OV);
        const double *c0 = C + j * ldc, *c1 = c0 + ldc;
        for (size_t t = t0; t < t1; t++) {
            const double *v = Vt + t * OB;
            ortho_vec v0, v1, v2, v3;
            ORTHO_LD(v0, v), ORTHO_LD(v1, v + OV), ORTHO_LD(v2, v + 2 * OV), ORTHO_LD(v3, v + 3 * OV);
            double x = c0[t], y = c1[t];
            a0 += v0 * x, a1 += v1 * x, a2 += v2 * x, a3 += v3 * x;
            b0 += v0 * y, b1 += v1 * y, b2 += v2 * y, b3 += v3 * y;
        }
        ORTHO_ST(w0, a0), ORTHO_ST(w0 + OV, a1), ORTHO_ST(w0 + 2 * OV, a2), ORTHO_ST(w0 + 3 * OV, a3);
        ORTHO_ST(w1, b0), ORTHO_ST(w1 + OV, b1), ORTHO_ST(w1 + 2 * OV, b2), ORTHO_ST(w1 + 3 * OV, b3);
    }
    for (; j < nc; j++) {
        double *w0 = W + j * OB;
        ortho_vec a0, a1, a2, a3;
        ORTHO_LD(a0, w0), ORTHO_LD(a1, w0 + OV), ORTHO_LD(a2, w0 + 2 * OV), ORTHO_LD(a3, w0 + 3 * OV);
        const double *c0 = C + j * ldc;
        for (size_t t = t0; t < t1; t++) {
            const double *v = Vt + t * OB;
            ortho_vec v0, v1, v2, v3;
            ORTHO_LD(v0, v), ORTHO_LD(v1, v + OV), ORTHO_LD(v2, v + 2 * OV), ORTHO_LD(v3, v + 3 * OV);
            double x = c0[t];
            a0 += v0 * x, a1 += v1 * x, a2 += v2 * x, a3 += v3 * x;
        }
        ORTHO_ST(w0, a0), ORTHO_ST(w0 + OV, a1), ORTHO_ST(w0 + 2 * OV, a2), ORTHO_ST(w0 + 3 * OV, a3);
    }
}

/* C −= V Y for the OR = 2·OV rows from t of 4 columns from j: each
 * entry's sum Σ_p V[t, p]·Y[p, j] formed p ascending from 0, then
 * subtracted; rows past `rows` (V's zero padding) computed, not stored. */
ORTHO_ATTR static inline void ORTHO_NAME(c_minus_vy4)(const double *v, const double *Y, double *C, size_t ldc,
                                                      size_t rows)
{
    ortho_vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    for (int p = 0; p < OB; p++) {
        ortho_vec lo, hi;
        ORTHO_LD(lo, v + p * OR), ORTHO_LD(hi, v + p * OR + OV);
        double y0 = Y[p], y1 = Y[OB + p], y2 = Y[2 * OB + p], y3 = Y[3 * OB + p];
        s0 += lo * y0, s1 += hi * y0, s2 += lo * y1, s3 += hi * y1;
        s4 += lo * y2, s5 += hi * y2, s6 += lo * y3, s7 += hi * y3;
    }
    double sum[4][OR];
    ORTHO_ST(sum[0], s0), ORTHO_ST(sum[0] + OV, s1), ORTHO_ST(sum[1], s2), ORTHO_ST(sum[1] + OV, s3);
    ORTHO_ST(sum[2], s4), ORTHO_ST(sum[2] + OV, s5), ORTHO_ST(sum[3], s6), ORTHO_ST(sum[3] + OV, s7);
    for (size_t q = 0; q < 4; q++)
        for (size_t i = 0; i < rows; i++) C[i + q * ldc] -= sum[q][i];
}

/* The same for one column. */
ORTHO_ATTR static inline void ORTHO_NAME(c_minus_vy1)(const double *v, const double *Y, double *C, size_t rows)
{
    ortho_vec s0 = {0}, s1 = {0};
    for (int p = 0; p < OB; p++) {
        ortho_vec lo, hi;
        ORTHO_LD(lo, v + p * OR), ORTHO_LD(hi, v + p * OR + OV);
        s0 += lo * Y[p], s1 += hi * Y[p];
    }
    double sum[OR];
    ORTHO_ST(sum, s0), ORTHO_ST(sum + OV, s1);
    for (size_t i = 0; i < rows; i++) C[i] -= sum[i];
}

/* C[t + j·ldc] −= Σ_{p < OB} V[t, p] · Y[j·OB + p] for the rows t0..t1−1
 * (t0 a multiple of OR) of nc columns.  Vp holds V packed by OR rows: the
 * rows from t = OR·g, column p, at Vp[(g·OB + p)·OR]; its rows past the
 * block's length are zeros. */
ORTHO_ATTR static void ORTHO_NAME(c_minus_vy)(const double *Vp, const double *Y, double *C, size_t ldc, size_t t0,
                                              size_t t1, size_t nc)
{
    size_t j = 0;
    for (; j + 4 <= nc; j += 4)
        for (size_t t = t0; t < t1; t += OR)
            ORTHO_NAME(c_minus_vy4)(Vp + (t / OR) * OB * OR, Y + j * OB, C + t + j * ldc, ldc,
                                    t1 - t < OR ? t1 - t : OR);
    for (; j < nc; j++)
        for (size_t t = t0; t < t1; t += OR)
            ORTHO_NAME(c_minus_vy1)(Vp + (t / OR) * OB * OR, Y + j * OB, C + t + j * ldc, t1 - t < OR ? t1 - t : OR);
}

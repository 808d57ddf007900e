/* The dense layer's QR operators (m ≠ n: the vijp, the fragment and the
 * cokernel basis) in the narrow formats, natively: the oracle's Householder
 * QR (oracles/dense.c, hh_qr and hh_apply, LAPACK's reflector convention)
 * replayed operation for operation with emu.h's roundings, which equal the
 * oracle's MPFR ones by the theorem emu.h cites.  Other formats run the
 * oracle.  tests/t-emu-dense.c compares both, bit for bit. */
#include "dense.h"
#include "emu.h"
#include "format/mpfr_io.h"
#include "oracles/oracles.h"
#include <stdlib.h>

/* hh_qr: A (r × c, r >= c) in place, tau[c].  The sign test is mpfr_sgn(α)
 * >= 0, true for ±0 and (mpfr_sgn's 0) NaN: !(α < 0).  A zero on R's
 * diagonal is reported, but the factorisation goes on, as the oracle's. */
static int hh_qr(size_t r, size_t c, double *A, double *tau, vijp_emu_grid g)
{
    int rc = 0;
    for (size_t k = 0; k < c; k++) {
        double *a = &A[k * r], nrm = 0;
        for (size_t i = k + 1; i < r; i++) nrm = vijp_emu_add(nrm, vijp_emu_mul(a[i], a[i], g), g);
        if (nrm == 0) {
            tau[k] = 0;
        } else {
            double beta = vijp_emu_sqrt(vijp_emu_add(vijp_emu_mul(a[k], a[k], g), nrm, g), g);
            if (!(a[k] < 0)) beta = -beta;
            tau[k] = vijp_emu_div(vijp_emu_sub(beta, a[k], g), beta, g); /* τ = (β − α)/β */
            double s = vijp_emu_sub(a[k], beta, g);                        /* v = x / (α − β) */
            for (size_t i = k + 1; i < r; i++) a[i] = vijp_emu_div(a[i], s, g);
            a[k] = beta;
        }
        for (size_t j = k + 1; j < c; j++) { /* apply H_k to the remaining columns */
            double *aj = &A[j * r], s = aj[k];
            for (size_t i = k + 1; i < r; i++) s = vijp_emu_add(s, vijp_emu_mul(a[i], aj[i], g), g);
            s = vijp_emu_mul(s, tau[k], g);
            aj[k] = vijp_emu_sub(aj[k], s, g);
            for (size_t i = k + 1; i < r; i++) aj[i] = vijp_emu_sub(aj[i], vijp_emu_mul(s, a[i], g), g);
        }
        if (a[k] == 0) rc = VIJP_ESINGULAR;
    }
    return rc;
}

/* hh_apply: z := Qᵀ z (trans) or Q z, Q = H_0 H_1 … H_{c−1}. */
static void hh_apply(size_t r, size_t c, const double *A, const double *tau, double *z, int trans, vijp_emu_grid g)
{
    for (size_t q = 0; q < c; q++) {
        size_t k = trans ? q : c - 1 - q;
        const double *a = &A[k * r];
        double s = z[k];
        for (size_t i = k + 1; i < r; i++) s = vijp_emu_add(s, vijp_emu_mul(a[i], z[i], g), g);
        s = vijp_emu_mul(s, tau[k], g);
        z[k] = vijp_emu_sub(z[k], s, g);
        for (size_t i = k + 1; i < r; i++) z[i] = vijp_emu_sub(z[i], vijp_emu_mul(s, a[i], g), g);
    }
}

/* dense_qr: QR of W (tall) or Wᵀ (wide); A is r × c, r = max(m, n). */
typedef struct {
    size_t r, c;
    double *A, *tau;
    int rc;
} qr;

static qr dense_qr(const vijp_layer *L, mpfr_t *th, vijp_emu_grid g)
{
    size_t m = L->out, n = L->in;
    qr q = {m > n ? m : n, m > n ? n : m, NULL, vijp_alloc_array(m > n ? n : m, sizeof(double)), 0};
    q.A = m > n ? vijp_emu_get(th, m * n) : vijp_emu_get_rows(th, m, n);
    q.rc = hh_qr(q.r, q.c, q.A, q.tau, g);
    return q;
}

static void qr_free(qr *q) { free(q->A), free(q->tau); }

/* vo_dense_vijp's QR cases (m ≠ n): gy is written only when R has no zero
 * on its diagonal, as the oracle's. */
static int vijp_qr(const vijp_layer *L, mpfr_t *th, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy, vijp_emu_grid g)
{
    size_t m = L->out, n = L->in;
    qr q = dense_qr(L, th, g);
    size_t r = q.r;
    const double *A = q.A;
    if (!q.rc) {
        double *gx = vijp_emu_get(Gx, n * B), *gy = vijp_alloc_array(m * B, sizeof *gy), *z = vijp_alloc_array(r, sizeof *z);
        double *c = m > n ? vijp_emu_get(frag, (m - n) * B) : NULL;
        for (size_t j = 0; j < B; j++) {
            for (size_t i = 0; i < n; i++) z[i] = gx[i + j * n];
            if (m < n) { /* Wᵀ = QR: gy = R⁻¹ (Qᵀ gx)[0:m] */
                hh_apply(r, q.c, A, q.tau, z, 1, g);
                for (size_t i = m; i-- > 0;) {
                    for (size_t k = i + 1; k < m; k++) z[i] = vijp_emu_sub(z[i], vijp_emu_mul(A[i + k * r], z[k], g), g);
                    z[i] = vijp_emu_div(z[i], A[i + i * r], g);
                }
            } else { /* W = QR: gy = Q [R⁻ᵀ gx; c] */
                for (size_t i = 0; i < n; i++) {
                    for (size_t k = 0; k < i; k++) z[i] = vijp_emu_sub(z[i], vijp_emu_mul(A[k + i * r], z[k], g), g);
                    z[i] = vijp_emu_div(z[i], A[i + i * r], g);
                }
                for (size_t i = n; i < m; i++) z[i] = c[(i - n) + j * (m - n)];
                hh_apply(r, q.c, A, q.tau, z, 0, g);
            }
            for (size_t i = 0; i < m; i++) gy[i + j * m] = z[i];
        }
        vijp_emu_put(Gy, gy, m * B);
        free(gx), free(gy), free(z), free(c);
    }
    int rc = q.rc;
    qr_free(&q);
    return rc;
}

int vijp_emu_dense_vijp_qr(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag,
                           mpfr_t *Gy, const vijp_format *f)
{
    (void)X;
    return vijp_qr(L, th, B, Gx, frag, Gy, vijp_emu_arith(f));
}

void vijp_emu_dense_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                             const vijp_format *f)
{
    (void)X;
    size_t m = L->out, n = L->in;
    vijp_emu_grid g = vijp_emu_arith(f);
    qr q = dense_qr(L, th, g); /* a rank-deficient W is the vijp's to report, as in the oracle */
    double *z = vijp_emu_get(Gy, m * B), *c = vijp_alloc_array((m - n) * B, sizeof *c);
    for (size_t j = 0; j < B; j++) {
        hh_apply(m, n, q.A, q.tau, &z[j * m], 1, g);
        for (size_t i = n; i < m; i++) c[(i - n) + j * (m - n)] = z[i + j * m];
    }
    vijp_emu_put(frag, c, (m - n) * B);
    free(z), free(c);
    qr_free(&q);
}

int vijp_emu_dense_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    (void)x;
    size_t m = L->out, n = L->in;
    if (m <= n) return VIJP_EUNSUPPORTED; /* the oracle's case: mp runs it (src/layer/route.h) */
    vijp_emu_grid g = vijp_emu_arith(f);
    qr q = dense_qr(L, th, g);
    if (!q.rc) { /* column j of Q = Q e_j */
        double *e = vijp_alloc_array(m * (m - n), sizeof *e);
        for (size_t j = n; j < m; j++) {
            for (size_t i = 0; i < m; i++) e[i + (j - n) * m] = i == j; /* +0 and 1, as mpfr_set_si */
            hh_apply(m, n, q.A, q.tau, &e[(j - n) * m], 0, g);
        }
        vijp_emu_put(Q, e, m * (m - n));
        free(e);
    }
    int rc = q.rc;
    qr_free(&q);
    return rc;
}

/* A drift curve's per-layer conditioning (conditioning.h): κ_i of each
 * layer's Jacobian at the points the network visits and the Lyapunov
 * spread along sample 0, in double, beside the measurement. */
#include "conditioning.h"
#include "cond.h"
#include "base/lapack.h"
#include "vijp/vijp.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Lyapunov spread along sample 0 (vijp_drift_curve.lyap_cum): Benettin's
 * full QR iteration at widths up to the exact limit, its first and last
 * directions (cond.h) above it. */
typedef struct {
    size_t n;
    int ok;        /* every layer square, every step taken */
    int singular;  /* the Jacobian product has lost rank */
    int estimated; /* wider than the exact limit: sp, not Q */
    double *Q, *Z, *sums, *tau;
    cond_spread sp;
} spread;

static void spread_init(spread *ly, const vijp_net *net, size_t exact_max)
{
    size_t n = net->width;
    memset(ly, 0, sizeof *ly);
    ly->n = n, ly->ok = 1;
    for (size_t i = 0; i < net->depth; i++) ly->ok &= net->layers[i].in == n && net->layers[i].out == n;
    if (!ly->ok) return;
    ly->estimated = n > exact_max;
    if (ly->estimated) {
        cond_spread_init(&ly->sp, n);
        return;
    }
    ly->Q = vijp_alloc_array(n * n, sizeof *ly->Q), ly->Z = vijp_alloc_array(n * n, sizeof *ly->Z);
    ly->sums = vijp_alloc_array(n, sizeof *ly->sums), ly->tau = vijp_alloc_array(n, sizeof *ly->tau);
    for (size_t k = 0; k < n; k++) ly->Q[k + k * n] = 1;
}

static void spread_clear(spread *ly)
{
    free(ly->Q), free(ly->Z), free(ly->sums), free(ly->tau);
    if (ly->estimated) cond_spread_clear(&ly->sp);
}

/* Benettin's step through J (n × n): Z = J Q = Q' R; the spread after it. */
static double spread_exact_step(spread *ly, const double *J, int diag)
{
    size_t n = ly->n;
    double *Z = ly->Z;
    if (diag) /* an elementwise layer: J Q scales Q's rows, as dgemm's one nonzero term per entry gives them
               * (0 + J_ii·Q_ij: its sum into a zeroed Z makes an exact −0 +0), without its 2n³ flops */
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) Z[i + j * n] = 0.0 + J[i + i * n] * ly->Q[i + j * n];
    else
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, J, (int)n, ly->Q, (int)n,
                    0.0, Z, (int)n);
    if (vijp_lapack_dgeqrf(n, n, Z, n, ly->tau)) ly->ok = 0;
    /* A direction the layer maps to (numerically) nothing, below n·u of the
     * largest stretch, makes the product singular: the spread is infinite
     * from there on and no prediction is made.  (Softmax's exact kernel
     * shows up as ~1e-17, not 0, and would otherwise give a finite,
     * meaningless spread.)  Moonwalk's error there is governed by the
     * product of pseudo-inverses, with the fragments resetting the cokernel
     * part: not modelled here. */
    double hi = -INFINITY, lo = INFINITY, rmax = 0, value = NAN;
    for (size_t k = 0; ly->ok && k < n; k++) rmax = fmax(rmax, fabs(Z[k + k * n]));
    for (size_t k = 0; ly->ok && k < n; k++) {
        if (!(fabs(Z[k + k * n]) > (double)n * 0x1p-53 * rmax)) ly->singular = 1;
        ly->sums[k] += log10(fabs(Z[k + k * n]));
        hi = fmax(hi, ly->sums[k]), lo = fmin(lo, ly->sums[k]);
    }
    if (ly->ok) value = ly->singular ? INFINITY : hi - lo;
    if (ly->ok && vijp_lapack_dorgqr(n, n, n, Z, n, ly->tau)) ly->ok = 0;
    memcpy(ly->Q, Z, n * n * sizeof *ly->Q);
    return value;
}

/* One layer's κ at one sample, J destroyed: estimated where the layer is
 * wider than the exact limit, square and not elementwise (w factored from
 * J), exact otherwise or where the estimate hands over (cond.h); *estimated
 * says which. */
static double layer_kappa(double *J, size_t m, size_t n, int estimate, cond_work *w, uint64_t seed, double *s,
                          int *deficient, int *estimated)
{
    double kappa;
    *deficient = 0;
    *estimated = estimate && !cond_kappa_estimate(J, w, seed, &kappa);
    return *estimated ? kappa : cond_kappa_exact(J, m, n, s, deficient);
}

/* θ_i in double for the conditioning: where pf holds doubles (every format
 * but mpfr:P) a view of them read as double, the same values without a
 * copy of the net (4% of a depth-256 dense:256 curve's CPU in perf, with
 * its page faults); else converted, and *owned set. */
static vijp_mat theta_in_double(const vijp_mat *t, const vijp_format *fd, int *owned)
{
    vijp_mat v = *t;
    *owned = !t->d;
    if (*owned) vijp_mat_init(&v, t->rows, t->cols, fd), vijp_mat_convert(&v, t);
    v.fmt = fd;
    return v;
}

void drift_conditioning(const vijp_net *net, const vijp_problem *pf, size_t exact_max, vijp_drift_curve *c,
                        unsigned char *estimated, void (*layer_done)(void *ctx, size_t done, size_t total), void *ctx)
{
    size_t D = net->depth, B = pf->X.cols, n0 = net->width;
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat h, hn, J, x, theta;
    vijp_mat_init(&h, n0, B, &fd);
    vijp_mat_convert(&h, &pf->X);
    spread ly;
    spread_init(&ly, net, exact_max);
    cond_work w = {0};
    for (size_t i = 0; i < D; i++) {
        const vijp_layer *L = &net->layers[i];
        size_t m = L->out, n = L->in, r = m < n ? m : n;
        int owned;
        theta = theta_in_double(&pf->theta[i], &fd, &owned);
        size_t samples = L->type->declare(L) & VIJP_DECL_LINEAR ? 1 : B;
        int wide = m == n && n > exact_max;
        if (wide && w.n != n) cond_work_clear(&w), cond_work_init(&w, n, pf->X.fmt->threads);
        double *s = vijp_alloc_array(r, sizeof *s);
        vijp_mat_init(&J, m, n, &fd);
        c->kappa[i] = 1, estimated[i] = 0;
        for (size_t b = 0; b < samples; b++) {
            x = h, x.cols = 1, x.d = h.d + b * n; /* a view of sample b */
            if (vijp_layer_jacobian(L, &theta, &x, &J, NULL) || vijp_mat_check_finite(&J, "J", NULL)) {
                c->kappa[i] = NAN;
                ly.ok = 0;
                continue;
            }
            int diag = cond_is_diagonal(J.d, m, n), estimate = wide && !diag;
            if (estimate) (void)cond_factor(&w, J.d); /* a zero pivot: w.factored 0, the exact κ, a singular product */
            if (b == 0 && ly.ok && !ly.estimated) c->lyap_cum[i] = spread_exact_step(&ly, J.d, diag);
            else if (b == 0 && ly.ok && !ly.singular) ly.singular = cond_spread_step(&ly.sp, J.d, diag, &w);
            int deficient, by_estimate;
            double kb = layer_kappa(J.d, m, n, estimate, &w, ((uint64_t)i << 32 | b) ^ 0x9e3779b97f4a7c15u, s, &deficient,
                                    &by_estimate);
            estimated[i] |= (unsigned char)by_estimate;
            if (b == 0 && ly.ok && ly.estimated) {
                ly.singular |= deficient; /* J_i itself has lost rank: the product has */
                c->lyap_cum[i] = ly.singular ? INFINITY : cond_spread_value(&ly.sp);
            }
            c->kappa[i] = vijp_max_nan(c->kappa[i], kb);
        }
        if (!ly.ok) c->lyap_cum[i] = NAN;
        free(s);
        vijp_mat_clear(&J);
        vijp_mat_init(&hn, m, B, &fd);
        int failed = vijp_layer_forward(L, &theta, &h, &hn, NULL);
        if (owned) vijp_mat_clear(&theta);
        vijp_mat_clear(&h);
        h = hn;
        layer_done(ctx, i + 1, D);
        if (failed) { /* past a failed double forward the estimates are unknown (NaN), not an error of the study */
            for (size_t j = i + 1; j < D; j++) c->kappa[j] = c->lyap_cum[j] = NAN, estimated[j] = 0;
            break;
        }
    }
    vijp_mat_clear(&h);
    spread_clear(&ly);
    cond_work_clear(&w);
}

void drift_cond_method(const vijp_net *net, size_t exact_max, char *out, size_t size)
{
    /* drift_conditioning estimates κ only of square layers past the limit, and
     * the spread only of all-square nets past it: a wide rectangular layer
     * is still exact */
    int square = 1, wide_square = 0;
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        square &= L->in == net->width && L->out == net->width;
        wide_square |= L->in == L->out && L->in > exact_max;
    }
    if (!wide_square) snprintf(out, size, "exact");
    else
        snprintf(out, size, "estimated above width %zu: kappa by Lanczos on JtJ and its inverse (kappa/%g <= it <= kappa, "
                 "p >= %g)%s", exact_max, COND_THETA, 1 - COND_DELTA,
                 square ? "; spread of Benettin's first and last directions (a lower bound)" : "");
}

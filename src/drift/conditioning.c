/* A drift curve's per-layer conditioning (conditioning.h): κ_i of each
 * layer's Jacobian at the points the network visits and the Lyapunov
 * spread along sample 0, in double, beside the measurement. */
#include "conditioning.h"
#include "cond.h"
#include "base/lapack.h"
#include "base/fork.h"
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
    ly->n = n, ly->ok = drift_net_square(net);
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

/* Benettin's step through J (n × n; dg its diagonal where it is diagonal,
 * J then not read, else NULL): Z = J Q = Q' R; the spread after it. */
static double spread_exact_step(spread *ly, const double *J, const double *dg)
{
    size_t n = ly->n;
    double *Z = ly->Z;
    if (dg) /* an elementwise layer: J Q scales Q's rows, as dgemm's one nonzero term per entry gives them
             * (0 + J_ii·Q_ij: its sum into a zeroed Z makes an exact −0 +0), without its 2n³ flops */
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) Z[i + j * n] = 0.0 + dg[i] * ly->Q[i + j * n];
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

/* The spread's step through layer i at sample 0, before its κ (which
 * destroys J): Benettin's exact step, or the two tracked directions' (J
 * factored in w where it is not diagonal; dg its diagonal where it is,
 * else NULL). */
static void spread_step(spread *ly, const double *J, const double *dg, const cond_work *w, double *lyap)
{
    if (ly->ok && !ly->estimated) *lyap = spread_exact_step(ly, J, dg);
    else if (ly->ok && !ly->singular) ly->singular = cond_spread_step(&ly->sp, J, dg, w);
}

/* The tracked directions' spread after that step, once κ has said whether
 * J_i itself lost rank (deficient): the product then has. */
static void spread_after_kappa(spread *ly, int deficient, double *lyap)
{
    if (!ly->ok || !ly->estimated) return;
    ly->singular |= deficient;
    *lyap = ly->singular ? INFINITY : cond_spread_value(&ly->sp);
}

/* Layer L's Jacobian at sample b of h into J (n × n, double); 1 where it
 * failed or is not finite (κ NaN, and the spread ends). */
static int jacobian_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, size_t b, vijp_mat *J)
{
    vijp_mat x = *h;
    x.cols = 1, x.d = h->d + b * L->in; /* a view of sample b */
    return vijp_layer_jacobian(L, theta, &x, J, NULL) || vijp_mat_check_finite(J, "J", NULL);
}

/* One layer's κ at one sample, J destroyed: estimated where the layer is
 * wider than the exact limit, square and not elementwise (w factored from
 * J), exact otherwise or where the estimate hands over (cond.h); *estimated
 * says which. */
static double layer_kappa(double *J, size_t m, size_t n, int diag, int estimate, cond_work *w, uint64_t seed,
                          double *s, int *deficient, int *estimated)
{
    double kappa;
    *deficient = 0;
    *estimated = estimate && !cond_kappa_estimate(J, w, seed, &kappa);
    return *estimated ? kappa : cond_kappa_exact_known(J, m, n, diag, s, deficient);
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

int drift_net_square(const vijp_net *net)
{
    int square = 1;
    for (size_t i = 0; i < net->depth; i++) square &= net->layers[i].in == net->width && net->layers[i].out == net->width;
    return square;
}

int drift_layer_wide(const vijp_layer *L, size_t exact_max) { return L->in == L->out && L->in > exact_max; }

int drift_layer_elementwise(const vijp_layer *L)
{
    const vijp_layer_type *T = L->type;
    return L->in == L->out && T->param_count(L) == 0 && vijp_layer_type_elementwise(T);
}

/* f′ by the type's dual_eval where it has one (what the activations'
 * jacobian operator writes on the diagonal, layers/activation.c), else the
 * jvp of ones (1·f′, exact: what the sign layers' operators write). */
int drift_elementwise_diagonals(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, double *dg)
{
    size_t len = vijp_mat_len(h);
    if (L->type->dual_eval) {
        for (size_t k = 0; k < len; k++) {
            double f;
            L->type->dual_eval(L, theta->d, h->d[k], &f, &dg[k]);
        }
        return 0;
    }
    vijp_mat U, V;
    vijp_mat_init(&U, h->rows, h->cols, h->fmt), vijp_mat_init(&V, h->rows, h->cols, h->fmt);
    for (size_t k = 0; k < len; k++) U.d[k] = 1;
    int rc = vijp_layer_jvp(L, theta, h, &U, &V, NULL);
    if (!rc) memcpy(dg, V.d, len * sizeof *dg);
    vijp_mat_clear(&U), vijp_mat_clear(&V);
    return rc != 0;
}

/* Layer i, elementwise, at its first samples samples: κ_i and the spread's
 * step from the Jacobians' diagonals, what the general path gives from
 * the n × n Jacobians it finds diagonal (cond_is_diagonal), in O(n) a
 * sample. */
static void elementwise_layer(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, size_t samples, spread *ly,
                              double *kappa, double *lyap)
{
    size_t n = L->in;
    double *dg = vijp_alloc_array(vijp_mat_len(h), sizeof *dg);
    if (drift_elementwise_diagonals(L, theta, h, dg)) {
        *kappa = NAN, ly->ok = 0;
        samples = 0;
    }
    vijp_mat col = *h;
    col.cols = 1;
    for (size_t b = 0; b < samples; b++) {
        col.d = dg + b * n;
        if (vijp_mat_check_finite(&col, "J", NULL)) { /* as a Jacobian not finite */
            *kappa = NAN, ly->ok = 0;
            continue;
        }
        if (b == 0) spread_step(ly, NULL, col.d, NULL, lyap);
        int deficient;
        double kb = cond_kappa_diagonal(col.d, n, col.d, &deficient); /* the sample's f′, not read again */
        if (b == 0) spread_after_kappa(ly, deficient, lyap);
        *kappa = vijp_max_nan(*kappa, kb);
    }
    free(dg);
}

/* The seed of layer i's estimate at sample b: its own, whichever thread
 * takes it. */
static uint64_t sample_seed(size_t i, size_t b) { return ((uint64_t)i << 32 | b) ^ 0x9e3779b97f4a7c15u; }

/* Sample 0 of layer i (J, w and s the caller's): its κ, and the spread's
 * step through its Jacobian. */
static void sample_zero(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, size_t i, int wide, vijp_mat *J,
                        cond_work *w, spread *ly, double *s, double *kappa, double *lyap, unsigned char *estimated)
{
    size_t m = L->out, n = L->in;
    if (jacobian_at(L, theta, h, 0, J)) {
        *kappa = NAN;
        ly->ok = 0;
        return;
    }
    int diag = cond_is_diagonal(J->d, m, n), estimate = wide && !diag;
    if (estimate) (void)cond_factor(w, J->d); /* a zero pivot: w->factored 0, the exact κ, a singular product */
    for (size_t k = 0; diag && k < n; k++) s[k] = J->d[k + k * n]; /* s: r = n doubles, free until κ */
    spread_step(ly, J->d, diag ? s : NULL, w, lyap);
    int deficient, by_estimate;
    double kb = layer_kappa(J->d, m, n, diag, estimate, w, sample_seed(i, 0), s, &deficient, &by_estimate);
    *estimated |= (unsigned char)by_estimate;
    spread_after_kappa(ly, deficient, lyap);
    *kappa = vijp_max_nan(*kappa, kb);
}

/* κ_i at samples 1 .. S − 1 of a layer that depends on x (sample 0's is
 * taken with the spread's step): each sample's is its own (its Jacobian,
 * its seeded estimate), so the samples run in ranges on the curve's
 * threads, each range with a Jacobian and, where it estimates, LU factors
 * of its own (cond_factor on one thread: the same bits as on any count,
 * cond.h), and the caller merges them in sample order as the loop over
 * samples did.  flag[b]: 1 κ estimated, 2 the Jacobian failed or was not
 * finite. */
typedef struct {
    const vijp_layer *L;
    const vijp_mat *theta, *h;
    size_t i;
    int wide; /* drift_layer_wide */
    double *kappa;
    unsigned char *flag;
} samples_job;

static void samples_part(void *ctx, size_t part, size_t begin, size_t end)
{
    const samples_job *jb = ctx;
    const vijp_layer *L = jb->L;
    size_t m = L->out, n = L->in, r = m < n ? m : n;
    int wide = jb->wide;
    (void)part;
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat J;
    vijp_mat_init(&J, m, n, &fd);
    double *s = vijp_alloc_array(r, sizeof *s);
    cond_work w = {0};
    for (size_t b = 1 + begin; b < 1 + end; b++) {
        if (jacobian_at(L, jb->theta, jb->h, b, &J)) {
            jb->flag[b] = 2;
            continue;
        }
        int diag = cond_is_diagonal(J.d, m, n), estimate = wide && !diag, deficient, by_estimate;
        if (estimate && w.n != n) cond_work_init(&w, n, 1);
        if (estimate) (void)cond_factor(&w, J.d); /* a zero pivot: w.factored 0, the exact κ */
        jb->kappa[b] = layer_kappa(J.d, m, n, diag, estimate, &w, sample_seed(jb->i, b), s, &deficient, &by_estimate);
        jb->flag[b] = (unsigned char)by_estimate;
    }
    cond_work_clear(&w);
    free(s);
    vijp_mat_clear(&J);
}

/* Merges samples_part's results into κ_i, estimated[i] and the spread's
 * state, as the loop over samples 1 .. S − 1 did. */
static void samples_merge(const samples_job *jb, size_t samples, double *kappa, unsigned char *estimated, int *ly_ok)
{
    for (size_t b = 1; b < samples; b++) {
        if (jb->flag[b] == 2) {
            *kappa = NAN;
            *ly_ok = 0;
            continue;
        }
        *estimated |= jb->flag[b];
        *kappa = vijp_max_nan(*kappa, jb->kappa[b]);
    }
}

/* Layer i, any other: κ_i from its n × n Jacobians (an SVD, or an
 * estimate through LU factors, w's on lu_threads at sample 0 where it is
 * wide), sample 0 with the spread's step, the others in ranges on up to
 * threads threads. */
static void general_layer(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *h, size_t i, size_t samples,
                          size_t exact_max, int threads, int lu_threads, cond_work *w, spread *ly,
                          vijp_drift_curve *c, unsigned char *estimated)
{
    size_t m = L->out, n = L->in, r = m < n ? m : n;
    int wide = drift_layer_wide(L, exact_max);
    if (wide && w->n != n) cond_work_clear(w), cond_work_init(w, n, lu_threads);
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat J;
    double *s = vijp_alloc_array(r, sizeof *s);
    vijp_mat_init(&J, m, n, &fd);
    sample_zero(L, theta, h, i, wide, &J, w, ly, s, &c->kappa[i], &c->lyap_cum[i], &estimated[i]);
    free(s), vijp_mat_clear(&J);
    if (samples < 2) return;
    cond_work_clear(w); /* the samples' own Jacobians and factors instead (w's are not read again) */
    samples_job jb = {L, theta, h, i, wide, vijp_alloc_array(samples, sizeof(double)), vijp_alloc_array(samples, 1)};
    /* work a sample: the Jacobian written and scanned twice, then an SVD
     * (about 4·m·n·min(m, n)) or, wide, an LU (2n³/3) and Lanczos */
    double per = 4.0 * (double)m * (double)n * (wide ? 1 + (double)n / 6 : 1 + (double)r);
    vijp_fork(threads, samples - 1, per * (double)(samples - 1), samples_part, &jb);
    samples_merge(&jb, samples, &c->kappa[i], &estimated[i], &ly->ok);
    free(jb.kappa), free(jb.flag);
}

void drift_conditioning(const vijp_net *net, const vijp_problem *pf, size_t exact_max, int threads, vijp_drift_curve *c,
                        unsigned char *estimated, void (*layer_done)(void *ctx, size_t done, size_t total), void *ctx)
{
    size_t D = net->depth, B = pf->X.cols, n0 = net->width;
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat h, hn, theta;
    vijp_mat_init(&h, n0, B, &fd);
    vijp_mat_convert(&h, &pf->X);
    spread ly;
    spread_init(&ly, net, exact_max);
    cond_work w = {0};
    for (size_t i = 0; i < D; i++) {
        const vijp_layer *L = &net->layers[i];
        int owned;
        theta = theta_in_double(&pf->theta[i], &fd, &owned);
        size_t samples = L->type->declare(L) & VIJP_DECL_LINEAR ? 1 : B;
        c->kappa[i] = 1, estimated[i] = 0;
        if (drift_layer_elementwise(L)) elementwise_layer(L, &theta, &h, samples, &ly, &c->kappa[i], &c->lyap_cum[i]);
        else general_layer(L, &theta, &h, i, samples, exact_max, threads, pf->X.fmt->threads, &w, &ly, c, estimated);
        if (!ly.ok) c->lyap_cum[i] = NAN;
        vijp_mat_init(&hn, L->out, B, &fd);
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
    int square = drift_net_square(net), wide_square = 0;
    for (size_t i = 0; i < net->depth; i++) wide_square |= drift_layer_wide(&net->layers[i], exact_max);
    if (!wide_square) snprintf(out, size, "exact");
    else
        snprintf(out, size, "estimated above width %zu: kappa by Lanczos on JtJ and its inverse (kappa/%g <= it <= kappa, "
                 "p >= %g)%s", exact_max, COND_THETA, 1 - COND_DELTA,
                 square ? "; spread of Benettin's first and last directions (a lower bound)" : "");
}

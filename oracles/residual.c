/* Oracle of the residual block (src/layers/residual.c for the mathematics):
 * y = f(x) + x or f(x) + P(x), f and P chains of the sub-layers' own MPFR
 * operators, every step rounded in the format.  Written plainly: one sample
 * at a time, every intermediate its own vector; the vijp forms J column by
 * column from the jvp and hands it to the dense oracle's solve as a weight
 * matrix; the inverse iterates x ← y − f(x) in the format, with the double
 * path's stop rule (STOP_ULPS·u·(‖y‖∞ + ‖x‖∞), u = 2^-p). */
#include "oracles.h"
#include "vijp/arith.h"
#include "vijp/catalogue.h"
#include "vijp/error.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STOP_ULPS 64  /* residual.c's */
#define ITER_PER_BIT 40 /* residual.c's: 40·p steps at most */

typedef struct {
    size_t n;
    const vijp_layer *L; /* the block */
    int skip;
    mpfr_t *th;          /* the chain's parameters */
} path;

static size_t offset(const path *p, size_t k)
{
    size_t P = 0;
    for (size_t j = 0; j < k; j++) {
        const vijp_layer *s = vijp_residual_sub(p->L, p->skip, j);
        P += s->type->param_count(s);
    }
    return P;
}

static path path_of(const vijp_layer *L, mpfr_t *th, int skip)
{
    path p = {vijp_residual_count(L, skip), L, skip, th};
    if (skip) {
        path f = {vijp_residual_count(L, 0), L, 0, th};
        p.th = th + offset(&f, f.n);
    }
    return p;
}

static vijp_layer sub(const path *p, size_t k) { return *vijp_residual_sub(p->L, p->skip, k); }

/* One sample's activations: a[0] = x (borrowed), a[k+1] = layer k's output. */
static mpfr_t **chain_eval(const path *p, mpfr_t *x, const vijp_format *f)
{
    mpfr_t **a = vijp_alloc_array(p->n + 1, sizeof *a);
    a[0] = x;
    for (size_t k = 0; k < p->n; k++) {
        vijp_layer s = sub(p, k);
        a[k + 1] = vo_vec_new(s.out, f);
        s.type->mp->forward(&s, p->th + offset(p, k), a[k], 1, a[k + 1], f);
    }
    return a;
}

static void chain_clear(const path *p, mpfr_t **a)
{
    for (size_t k = 1; k <= p->n; k++) vo_vec_free(a[k], sub(p, k - 1).out);
    free(a);
}

/* out = J u (forward through the chain) for one sample; width: the block's input. */
static void chain_jvp(const path *p, mpfr_t **a, size_t width, mpfr_t *u, mpfr_t *out, const vijp_format *f)
{
    size_t w = width;
    mpfr_t *cur = vo_vec_new(w, f);
    for (size_t i = 0; i < w; i++) vo_set(cur[i], u[i], f);
    for (size_t k = 0; k < p->n; k++) {
        vijp_layer s = sub(p, k);
        mpfr_t *next = vo_vec_new(s.out, f);
        s.type->mp->jvp(&s, p->th + offset(p, k), a[k], 1, cur, next, f);
        vo_vec_free(cur, w);
        cur = next, w = s.out;
    }
    for (size_t i = 0; i < w; i++) vo_set(out[i], cur[i], f);
    vo_vec_free(cur, w);
}

/* out = g J (backwards through the chain), adding each layer's θ gradient
 * into Gt (the chain's block) where Gt is given; width: the block's output. */
static void chain_vjp(const path *p, mpfr_t **a, size_t width, mpfr_t *g, mpfr_t *out, mpfr_t *Gt, const vijp_format *f)
{
    size_t w = width;
    mpfr_t *cur = vo_vec_new(w, f);
    for (size_t i = 0; i < w; i++) vo_set(cur[i], g[i], f);
    for (size_t k = p->n; k-- > 0;) {
        vijp_layer s = sub(p, k);
        size_t P = s.type->param_count(&s), off = offset(p, k);
        if (Gt && P) {
            mpfr_t *t = vo_vec_new(P, f);
            s.type->mp->vjp_param(&s, p->th + off, a[k], 1, cur, t, f);
            for (size_t i = 0; i < P; i++) vo_add(Gt[off + i], Gt[off + i], t[i], f);
            vo_vec_free(t, P);
        }
        mpfr_t *next = vo_vec_new(s.in, f);
        s.type->mp->vjp(&s, p->th + off, a[k], 1, cur, next, f);
        vo_vec_free(cur, w);
        cur = next, w = s.in;
    }
    if (out)
        for (size_t i = 0; i < w; i++) vo_set(out[i], cur[i], f);
    vo_vec_free(cur, w);
}

void vo_residual_forward(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Y, const vijp_format *f)
{
    path pf = path_of(L, th, 0), pp = path_of(L, th, 1);
    for (size_t b = 0; b < B; b++) {
        mpfr_t **af = chain_eval(&pf, X + b * L->in, f), **ap = chain_eval(&pp, X + b * L->in, f);
        for (size_t i = 0; i < L->out; i++) vo_add(Y[b * L->out + i], ap[pp.n][i], af[pf.n][i], f);
        chain_clear(&pf, af), chain_clear(&pp, ap);
    }
}

void vo_residual_jvp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *U, mpfr_t *V, const vijp_format *f)
{
    path pf = path_of(L, th, 0), pp = path_of(L, th, 1);
    size_t n = L->in, m = L->out;
    mpfr_t *vf = vo_vec_new(m, f), *vp = vo_vec_new(m, f);
    for (size_t b = 0; b < B; b++) {
        mpfr_t **af = chain_eval(&pf, X + b * n, f), **ap = chain_eval(&pp, X + b * n, f);
        chain_jvp(&pf, af, n, U + b * n, vf, f);
        chain_jvp(&pp, ap, n, U + b * n, vp, f);
        for (size_t i = 0; i < m; i++) vo_add(V[b * m + i], vp[i], vf[i], f);
        chain_clear(&pf, af), chain_clear(&pp, ap);
    }
    vo_vec_free(vf, m), vo_vec_free(vp, m);
}

/* Gx = Gy J and, where Gt is given, the θ gradient summed over the samples in order. */
static void reverse(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, mpfr_t *Gt,
                    const vijp_format *f)
{
    path pf = path_of(L, th, 0), pp = path_of(L, th, 1);
    size_t n = L->in, m = L->out, PF = offset(&pf, pf.n);
    mpfr_t *gf = vo_vec_new(n, f), *gp = vo_vec_new(n, f);
    if (Gt)
        for (size_t i = 0; i < PF + offset(&pp, pp.n); i++) mpfr_set_zero(Gt[i], 1);
    for (size_t b = 0; b < B; b++) {
        mpfr_t **af = chain_eval(&pf, X + b * n, f), **ap = chain_eval(&pp, X + b * n, f);
        chain_vjp(&pf, af, m, Gy + b * m, gf, Gt, f);
        chain_vjp(&pp, ap, m, Gy + b * m, gp, Gt ? Gt + PF : NULL, f);
        for (size_t i = 0; Gx && i < n; i++) vo_add(Gx[b * n + i], gp[i], gf[i], f);
        chain_clear(&pf, af), chain_clear(&pp, ap);
    }
    vo_vec_free(gf, n), vo_vec_free(gp, n);
}

void vo_residual_vjp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gx, const vijp_format *f)
{
    reverse(L, th, X, B, Gy, Gx, NULL, f);
}

void vo_residual_vjp_param(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *Gt,
                           const vijp_format *f)
{
    reverse(L, th, X, B, Gy, NULL, Gt, f);
}

/* Column j is jvp(e_j): exact 0s and 1s as the tangent. */
void vo_residual_jacobian(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *J, const vijp_format *f)
{
    size_t n = L->in;
    mpfr_t *e = vo_vec_new(n, f);
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < n; i++) vo_set_si(e[i], i == j, f);
        vo_residual_jvp(L, th, x, 1, e, J + j * L->out, f);
    }
    vo_vec_free(e, n);
}

/* θ of a dense layer whose W is J at x (bias 0), and that layer. */
static mpfr_t *as_dense(const vijp_layer *L, mpfr_t *th, mpfr_t *x, vijp_layer *D, const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    mpfr_t *W = vo_vec_new(m * n + m, f);
    vo_residual_jacobian(L, th, x, W, f);
    for (size_t i = 0; i < m; i++) mpfr_set_zero(W[m * n + i], 1);
    *D = (vijp_layer){NULL, n, m, NULL}; /* the dense oracle reads the widths alone */
    return W;
}

size_t vo_residual_fragment_count(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B)
{
    (void)th, (void)X;
    return L->out > L->in ? (L->out - L->in) * B : 0;
}

void vo_residual_fragment(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gy, mpfr_t *frag,
                          const vijp_format *f)
{
    size_t m = L->out, n = L->in;
    for (size_t b = 0; b < B; b++) {
        vijp_layer D;
        mpfr_t *W = as_dense(L, th, X + b * n, &D, f);
        vo_dense_fragment(&D, W, X + b * n, 1, Gy + b * m, frag + b * (m - n), f);
        vo_vec_free(W, m * n + m);
    }
}

int vo_residual_vijp(const vijp_layer *L, mpfr_t *th, mpfr_t *X, size_t B, mpfr_t *Gx, mpfr_t *frag, mpfr_t *Gy,
                     const vijp_format *f)
{
    size_t m = L->out, n = L->in, k = m > n ? m - n : 0;
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        vijp_layer D;
        mpfr_t *W = as_dense(L, th, X + b * n, &D, f);
        rc = vo_dense_vijp(&D, W, X + b * n, 1, Gx + b * n, k ? frag + b * k : NULL, Gy + b * m, f);
        vo_vec_free(W, m * n + m);
    }
    return rc;
}

int vo_residual_cokernel(const vijp_layer *L, mpfr_t *th, mpfr_t *x, mpfr_t *Q, const vijp_format *f)
{
    if (L->out <= L->in) return 0;
    vijp_layer D;
    mpfr_t *W = as_dense(L, th, x, &D, f);
    int rc = vo_dense_cokernel(&D, W, x, Q, f);
    vo_vec_free(W, L->out * L->in + L->out);
    return rc;
}

/* max |v_i| into r (exact: a copy of one entry). */
static void vec_max(mpfr_t r, mpfr_t *v, size_t n)
{
    mpfr_set_zero(r, 1);
    for (size_t i = 0; i < n; i++)
        if (mpfr_cmpabs(v[i], r) > 0) mpfr_abs(r, v[i], MPFR_RNDN);
}

/* A lower bound on ‖A‖₂ (A n × n, in double; residual.c's inverse uses it
 * too): the Rayleigh quotient of 30 power
 * steps on AᵀA from a fixed start, so a value >= 1 proves ‖A‖₂ >= 1. */
double vo_norm2_below(size_t n, const double *A)
{
    double *v = vijp_alloc_array(2 * n, sizeof(double)), *w = v + n, est = 0;
    for (size_t i = 0; i < n; i++) v[i] = 1 + 0.5 * (double)(i % 3); /* not orthogonal to a generic top vector */
    for (int it = 0; it < 30; it++) {
        double nv = 0, nw = 0;
        for (size_t i = 0; i < n; i++) nv += v[i] * v[i];
        for (size_t i = 0; i < n; i++) {
            w[i] = 0;
            for (size_t j = 0; j < n; j++) w[i] += A[i + j * n] * v[j];
            nw += w[i] * w[i];
        }
        est = nv > 0 ? sqrt(nw / nv) : 0; /* ‖Av‖/‖v‖ <= ‖A‖₂ */
        for (size_t j = 0; j < n; j++) {  /* v = Aᵀ w */
            v[j] = 0;
            for (size_t i = 0; i < n; i++) v[j] += A[i + j * n] * w[i];
        }
        double s = 0;
        for (size_t j = 0; j < n; j++) s = fmax(s, fabs(v[j]));
        if (!(s > 0)) break;
        for (size_t j = 0; j < n; j++) v[j] /= s;
    }
    free(v);
    return est;
}

/* residual.c's iteration: the stop, and a refusal once two steps' 2-norms
 * grow (Lip(f) >= 1) while above RATIO_FLOOR times the stop. */
#define RATIO_FLOOR 16

int vo_residual_inverse(const vijp_layer *L, mpfr_t *th, mpfr_t *Y, size_t B, mpfr_t *X, const vijp_format *f)
{
    if (vijp_residual_count(L, 1)) return VIJP_EUNSUPPORTED;
    path pf = path_of(L, th, 0);
    size_t n = L->in;
    long p = (long)vijp_format_value_prec(f);
    mpfr_t step, tol, a, d, s2, prev;
    mpfr_inits2(f->prec + 8, step, tol, a, d, s2, prev, (mpfr_ptr)0);
    mpfr_t *next = vo_vec_new(n, f);
    int rc = 0;
    for (size_t b = 0; b < B && !rc; b++) {
        mpfr_t *x = X + b * n, *y = Y + b * n;
        for (size_t i = 0; i < n; i++) vo_set(x[i], y[i], f);
        size_t iter_max = ITER_PER_BIT * (size_t)p;
        for (size_t iter = 0;; iter++) {
            if (iter == iter_max) {
                rc = VIJP_ESINGULAR; /* no convergence: Lip(f) >= 1, or rounding above the stop */
                break;
            }
            mpfr_t **af = chain_eval(&pf, x, f);
            for (size_t i = 0; i < n; i++) vo_sub(next[i], y[i], af[pf.n][i], f);
            chain_clear(&pf, af);
            mpfr_set_zero(step, 1), mpfr_set_zero(s2, 1);
            for (size_t i = 0; i < n; i++) {
                mpfr_sub(d, next[i], x[i], MPFR_RNDN); /* diagnostics, not results: any rounding will do */
                if (mpfr_cmpabs(d, step) > 0) mpfr_abs(step, d, MPFR_RNDN);
                mpfr_fma(s2, d, d, s2, MPFR_RNDN);
                vo_set(x[i], next[i], f);
            }
            mpfr_sqrt(s2, s2, MPFR_RNDN);
            vec_max(tol, y, n), vec_max(a, x, n);
            mpfr_add(tol, tol, a, MPFR_RNDN);
            mpfr_mul_ui(tol, tol, STOP_ULPS, MPFR_RNDN), mpfr_mul_2si(tol, tol, -p, MPFR_RNDN);
            if (!mpfr_number_p(step)) {
                rc = VIJP_ESINGULAR; /* diverged */
                break;
            }
            mpfr_mul_ui(a, tol, RATIO_FLOOR, MPFR_RNDN);
            if (iter && mpfr_cmp(prev, a) > 0 && mpfr_cmp(s2, prev) >= 0) {
                rc = VIJP_ESINGULAR; /* Lip(f) >= 1: the fixed point need not be x */
                break;
            }
            mpfr_set(prev, s2, MPFR_RNDN);
            if (mpfr_cmp(step, tol) <= 0) break;
        }
        if (!rc) { /* ‖J_f(x̂)‖₂ >= 1 refuses, as in residual.c (the estimate in double) */
            mpfr_t *J = vo_vec_new(n * n, f);
            double *Jd = vijp_alloc_array(n * n, sizeof *Jd);
            vo_residual_jacobian(L, th, x, J, f);
            for (size_t i = 0; i < n * n; i++) Jd[i] = mpfr_get_d(J[i], MPFR_RNDN) - (i % (n + 1) == 0);
            if (vo_norm2_below(n, Jd) >= 1) rc = VIJP_ESINGULAR;
            free(Jd), vo_vec_free(J, n * n);
        }
    }
    vo_vec_free(next, n);
    mpfr_clears(step, tol, a, d, s2, prev, (mpfr_ptr)0);
    return rc;
}

/* The layer checks' fixture and the contract read through the layer's type
 * (vijp/check_layer.h says what the fixture holds). */
#include "impl.h"
#include "vijp/certify.h"
#include "vijp/metrics.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Activations whose f′ vanishes at isolated points x0 (the contract's
 * deriv_zeros): relative bounds on f′ mean nothing near x0, so points keep
 * 0.5 away from it and |x| <= 4, where the contract's `ulps` holds. */
static int near_deriv_zero(const vijp_layer *L, double x)
{
    const vijp_layer_bounds *b = &L->type->bounds;
    for (size_t k = 0; k < b->n_deriv_zeros; k++)
        if (fabs(x - b->deriv_zeros[k]) < 0.5) return 1;
    return 0;
}

/* N(0,1) entries with |x| >= away (points: not on a kink), the same values in
 * F and R. */
static void rand_mat(vijp_mat *F, vijp_mat *R, vijp_rng *rng, double away, const vijp_layer *L)
{
    int avoid = L && L->type->bounds.n_deriv_zeros;
    for (size_t i = 0; i < vijp_mat_len(F); i++) {
        double x;
        do x = vijp_rng_normal(rng);
        while (fabs(x) < away || (avoid && (near_deriv_zero(L, x) || fabs(x) > 4)));
        vijp_mat_set_entry_d(F, i, x);
    }
    vijp_mat_convert(R, F);
}

/* Parameters that are not exact by accident.  A type's init may give 1 or
 * 0.25 (a scale, PReLU's slope): products with such a θ are exact, so every
 * comparison is, and a check holds an operator to nothing.  Each θ_p
 * becomes θ_p·(1 ± (1 + U)/32), U uniform in [0, 1), the sign at random:
 * moved by a relative 2^-5 to 2^-4, so that a power of two stays one only
 * with probability 0, its sign kept (a positive scale stays positive).
 * Zeros stay zero: the init's zeros may be structure (a mask, a triangle,
 * a rank the type's declarations rest on; broken-layers/false-submersive.c),
 * which --params can still move.  Its own stream (seed ^ a constant): the
 * points, from seed + 1, are those of the same seed at any θ. */
static void perturb(double *th, size_t P, uint64_t seed)
{
    vijp_rng rng;
    vijp_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ull);
    for (size_t p = 0; p < P; p++) {
        double a = (1 + vijp_rng_uniform(&rng)) / 32, s = vijp_rng_uniform(&rng) < 0.5 ? -1 : 1;
        th[p] *= 1 + s * a;
    }
}

/* θ: the caller's (o->params), or the type's init from the seed, moved. */
static int set_params(check_fix *t, const vijp_check_opts *o, vijp_error *err)
{
    size_t P = t->L->type->param_count(t->L);
    if (o->params && o->n_params != P)
        return vijp_fail(err, VIJP_EDIM, "%zu parameter values given, the %s layer has %zu", o->n_params,
                         t->L->type->name, P);
    for (size_t p = 0; o->params && p < P; p++)
        if (!isfinite(o->params[p]))
            return vijp_fail(err, VIJP_EINVAL, "parameter %zu given is %g, not a finite number", p, o->params[p]);
    int rc = vijp_net_init(&t->net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, o->seed, err);
    if (rc || !P) return rc;
    if (o->params) memcpy(t->net.theta[0], o->params, P * sizeof *o->params);
    else perturb(t->net.theta[0], P, o->seed);
    return 0;
}

int check_fix_init(check_fix *t, const char *spec, const vijp_check_opts *o, vijp_error *err)
{
    memset(t, 0, sizeof *t);
    int rc = vijp_format_parse(o->format ? o->format : "double", &t->F, err);
    if (rc) return rc;
    /* The bounds below assume no underflow or overflow: the emulated IEEE
     * formats' exponent ranges are not in them. */
    if (t->F.kind != VIJP_DOUBLE && t->F.kind != VIJP_MPFR)
        return vijp_fail(err, VIJP_EINVAL, "layers are checked in double or mpfr:P, not %s (the bounds assume an "
                         "unbounded exponent range)", t->F.name);
    if ((rc = vijp_net_build(&t->net, spec, 1, o->width, err))) return rc;
    t->L = &t->net.layers[0];
    t->have_ref = t->L->type->mp && !o->double_only;
    if (t->F.kind != VIJP_DOUBLE && !t->have_ref) {
        rc = vijp_fail(err, VIJP_EUNSUPPORTED, "the %s layer %s, so it is checked in double only", t->L->type->name,
                       t->L->type->mp ? "is checked without its MPFR operators" : "has no MPFR operators");
        vijp_net_free(&t->net);
        return rc;
    }
    if (t->have_ref) rc = vijp_format_mpfr(&t->R, check_ref_prec(t->F.kind == VIJP_MPFR ? (long)t->F.prec : 53), err);
    else t->R = t->F;
    if (!rc) rc = set_params(t, o, err);
    if (rc) {
        vijp_net_free(&t->net);
        return rc;
    }
    t->B = o->batch ? o->batch : 3;
    t->seed = o->seed;
    /* bounds in units of 2^ex: u = 2^-P itself up to CHECK_UNIT_PREC bits,
     * 2^-CHECK_UNIT_PREC above (impl.h) */
    t->ex = (long)t->F.prec > CHECK_UNIT_PREC ? CHECK_UNIT_PREC - (long)t->F.prec : 0;
    t->u = ldexp(1.0, -(int)((long)t->F.prec + t->ex));
    size_t P = t->L->type->param_count(t->L), n = t->L->in, m = t->L->out, B = t->B;
    vijp_mat_init(&t->thF, P, 1, &t->F), vijp_mat_init(&t->thR, P, 1, &t->R);
    if (P) vijp_mat_set_d(&t->thF, t->net.theta[0]);
    vijp_mat_convert(&t->thR, &t->thF);
    vijp_rng rng;
    vijp_rng_seed(&rng, o->seed + 1);
    vijp_mat_init(&t->XF, n, B, &t->F), vijp_mat_init(&t->XR, n, B, &t->R);
    vijp_mat_init(&t->UF, n, B, &t->F), vijp_mat_init(&t->UR, n, B, &t->R);
    vijp_mat_init(&t->GF, m, B, &t->F), vijp_mat_init(&t->GR, m, B, &t->R);
    rand_mat(&t->XF, &t->XR, &rng, 1e-3, t->L);
    rand_mat(&t->UF, &t->UR, &rng, 0, NULL);
    rand_mat(&t->GF, &t->GR, &rng, 0, NULL);
    return 0;
}

void check_fix_clear(check_fix *t)
{
    vijp_mat *all[] = {&t->thF, &t->thR, &t->XF, &t->XR, &t->UF, &t->UR, &t->GF, &t->GR};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vijp_mat_clear(all[i]);
    vijp_net_free(&t->net);
}

double check_term_ulps(const vijp_layer *L) { return L->type->bounds.ulps > 0 ? L->type->bounds.ulps : 6; }

/* J at sample b of X (any format), as doubles (m × n), or NULL. */
static double *jacobian_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, size_t b, vijp_error *err)
{
    size_t m = L->out, n = L->in;
    vijp_mat x, J;
    vijp_mat_init(&x, n, 1, X->fmt), vijp_mat_init(&J, m, n, X->fmt);
    vijp_mat_copy_range(&x, 0, X, b * n, n);
    double *a = NULL;
    if (!vijp_layer_jacobian(L, theta, &x, &J, err)) {
        a = vijp_alloc_array(m * n, sizeof *a);
        for (size_t i = 0; i < m * n; i++) a[i] = vijp_mat_get_d(&J, i);
    }
    vijp_mat_clear(&x), vijp_mat_clear(&J);
    return a;
}

double *check_abs_jacobian(check_fix *t, size_t b, vijp_error *err)
{
    const vijp_layer *L = t->L;
    size_t n = L->in, P = t->thR.rows;
    double *a = jacobian_at(L, &t->thR, &t->XR, b, err);
    if (!a) return NULL;
    for (size_t i = 0; i < L->out * n; i++) a[i] = fabs(a[i]);
    if (L->type->jacobian_majorant) {
        double *x = vijp_alloc_array(n, sizeof *x), *th = vijp_alloc_array(P + 1, sizeof *th);
        for (size_t i = 0; i < n; i++) x[i] = vijp_mat_get_d(&t->XR, i + b * n);
        for (size_t i = 0; i < P; i++) th[i] = vijp_mat_get_d(&t->thR, i);
        L->type->jacobian_majorant(L, th, x, a);
        free(x), free(th);
    }
    return a;
}

double check_bias_at(check_fix *t, size_t i)
{
    const vijp_layer *L = t->L;
    if (!t->thR.rows || !L->type->bias_index) return 0;
    size_t k = L->type->bias_index(L, i % L->out);
    return k == SIZE_MAX ? 0 : check_absval(&t->thR, k);
}

double check_kappa(check_fix *t)
{
    double k = 1;
    for (size_t b = 0; b < t->B; b++) {
        double *J = jacobian_at(t->L, &t->thR, &t->XR, b, NULL);
        vijp_numeric a;
        if (!J || vijp_numeric_analysis(J, t->L->out, t->L->in, &a, NULL)) {
            free(J);
            return NAN;
        }
        /* the smallest singular value that is not an exact structural zero
         * (ReLU's inactive units): above 1e-14 σ_max */
        size_t r = t->L->out < t->L->in ? t->L->out : t->L->in;
        double smin = a.sv[0];
        for (size_t i = 0; i < r; i++)
            if (a.sv[i] > 1e-14 * a.sv[0]) smin = a.sv[i];
        if (smin > 0) k = fmax(k, a.sv[0] / smin);
        vijp_numeric_clear(&a);
        free(J);
    }
    return k;
}

static double own_solve_ulps(const vijp_layer *L)
{
    return L->type->bounds.solve_ulps ? L->type->bounds.solve_ulps(L) : 0;
}

double check_c_solve(const vijp_layer *L)
{
    size_t m = L->out, n = L->in;
    return own_solve_ulps(L) > 0 ? own_solve_ulps(L) : 3.0 * n * ldexp(1, (int)n - 1) + 16.0 * m * n + m + 6;
}

const char *check_c_solve_source(const vijp_layer *L)
{
    return own_solve_ulps(L) > 0 ? "the layer's own solve bound" : "LU: Higham Thm 9.4, growth 2^(n-1); QR: Thm 19.4";
}

double check_absval(const vijp_mat *a, size_t i) { return fabs(a->d ? a->d[i] : mpfr_get_d(a->m[i], MPFR_RNDN)); }

void check_entry(mpfr_t r, const vijp_mat *a, size_t i)
{
    if (a->d) mpfr_set_d(r, a->d[i], MPFR_RNDN);
    else mpfr_set(r, a->m[i], MPFR_RNDN);
}

/* Numbers as check_num (impl.h). */
check_num check_num_mpfr(mpfr_srcptr x)
{
    if (mpfr_nan_p(x)) return (check_num){NAN, 0};
    if (mpfr_inf_p(x)) return (check_num){INFINITY, 0};
    if (mpfr_zero_p(x)) return (check_num){0, 0};
    /* within double's normal range: the double, read toward +inf as the
     * checks always have; beyond it a mantissa and an exponent, rounded
     * away from zero */
    if (mpfr_get_exp(x) > -1000 && mpfr_get_exp(x) < 1000) return (check_num){fabs(mpfr_get_d(x, MPFR_RNDU)), 0};
    long e;
    double m = mpfr_get_d_2exp(&e, x, mpfr_sgn(x) < 0 ? MPFR_RNDD : MPFR_RNDU);
    return (check_num){fabs(m), e};
}

check_num check_absdiff(const vijp_mat *a, size_t i, const vijp_mat *b, size_t j)
{
    /* exact: as many bits as lie between the larger top bit and the lower
     * bottom one (a few million at most: beyond, rounded away from zero) */
    mpfr_prec_t pa = a->d ? 53 : mpfr_get_prec(a->m[i]), pb = b->d ? 53 : mpfr_get_prec(b->m[j]);
    mpfr_t x, y, d;
    mpfr_init2(x, pa), mpfr_init2(y, pb);
    check_entry(x, a, i), check_entry(y, b, j);
    long p = pa > pb ? (long)pa : (long)pb;
    if (mpfr_regular_p(x) && mpfr_regular_p(y)) {
        long ea = (long)mpfr_get_exp(x), eb = (long)mpfr_get_exp(y), la = ea - (long)pa, lb = eb - (long)pb;
        p = (ea > eb ? ea : eb) + 1 - (la < lb ? la : lb);
    }
    if (p < CHECK_REF_PREC) p = CHECK_REF_PREC;
    if (p > (1L << 22)) p = 1L << 22;
    mpfr_init2(d, (mpfr_prec_t)p);
    mpfr_sub(d, x, y, MPFR_RNDA);
    check_num r = check_num_mpfr(d);
    mpfr_clears(x, y, d, (mpfr_ptr)0);
    return r;
}

long check_ref_prec(long P)
{
    long R = P <= CHECK_UNIT_PREC ? CHECK_REF_PREC : P + CHECK_UNIT_PREC;
    return R < VIJP_PREC_MAX ? R : VIJP_PREC_MAX;
}

long check_diff_hexp(long P) { return P / 2 + 128 > 300 ? P / 2 + 128 : 300; }

long check_diff_prec(long P)
{
    long W = check_diff_hexp(P) + P + 256;
    return W > 2048 ? W : 2048;
}

long check_diff_limit(void)
{
    long P = VIJP_PREC_MAX;
    while (P > VIJP_PREC_MIN && check_diff_prec(P) > VIJP_PREC_MAX) P--;
    return P;
}

long check_ref_limit(void) { return VIJP_PREC_MAX - CHECK_REF_MARGIN; }

double check_col_norm(const vijp_mat *a, size_t col)
{
    double s = 0;
    for (size_t i = 0; i < a->rows; i++) s += check_absval(a, i + col * a->rows) * check_absval(a, i + col * a->rows);
    return sqrt(s);
}

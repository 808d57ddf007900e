#include "layerfix.h"
#include "check_layer/impl.h"
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Activations whose f′ vanishes at isolated points x0 (the layer's
 * bounds.deriv_zeros, located to 1e-12 and checked in t-activations.c): the
 * battery's relative bounds need points at least 0.5 from x0 and |x| <= 4,
 * where S(x)/|f′(x)| stays small (see vijp_layer_bounds.ulps). */
static int near_deriv_zero(const vijp_layer *L, double x)
{
    const vijp_layer_bounds *b = &L->type->bounds;
    for (size_t k = 0; k < b->n_deriv_zeros; k++)
        if (fabs(x - b->deriv_zeros[k]) < 0.5) return 1;
    return 0;
}

double layerfix_deriv_zero(const char *name)
{
    const vijp_layer_type *T = vijp_layer_type_find(name);
    return T && T->bounds.n_deriv_zeros ? T->bounds.deriv_zeros[0] : NAN;
}

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

void layerfix_init(layerfix *t, const char *spec, size_t width, const char *fmt, size_t B, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    vijp_error err = {0};
    ck_assert_msg(!vijp_format_parse(fmt, &t->F, &err), "%s", err.msg);
    ck_assert(!vijp_format_mpfr(&t->R, REF_PREC, NULL));
    ck_assert_msg(!vijp_net_build(&t->net, spec, 1, width, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&t->net, (vijp_init){VIJP_INIT_GAUSSIAN, 1}, seed, &err));
    t->L = &t->net.layers[0];
    t->B = B;
    t->u = ldexp(1.0, -(int)t->F.prec);
    size_t P = t->L->type->param_count(t->L), n = t->L->in, m = t->L->out;
    vijp_mat_init(&t->thF, P, 1, &t->F);
    vijp_mat_init(&t->thR, P, 1, &t->R);
    if (P) vijp_mat_set_d(&t->thF, t->net.theta[0]);
    vijp_mat_convert(&t->thR, &t->thF);
    vijp_rng rng;
    vijp_rng_seed(&rng, seed + 1);
    vijp_mat_init(&t->XF, n, B, &t->F), vijp_mat_init(&t->XR, n, B, &t->R);
    vijp_mat_init(&t->UF, n, B, &t->F), vijp_mat_init(&t->UR, n, B, &t->R);
    vijp_mat_init(&t->GF, m, B, &t->F), vijp_mat_init(&t->GR, m, B, &t->R);
    rand_mat(&t->XF, &t->XR, &rng, 1e-3, t->L);
    rand_mat(&t->UF, &t->UR, &rng, 0, NULL);
    rand_mat(&t->GF, &t->GR, &rng, 0, NULL);
}

void layerfix_clear(layerfix *t)
{
    vijp_mat *all[] = {&t->thF, &t->thR, &t->XF, &t->XR, &t->UF, &t->UR, &t->GF, &t->GR};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vijp_mat_clear(all[i]);
    vijp_net_free(&t->net);
}

/* The layer battery's own (src/check_layer/fixture.c, at the same 1024-bit
 * reference precision), under the names the suites use. */
_Static_assert(REF_PREC == CHECK_REF_PREC, "the suites and the battery must compare at one precision");
void mat_entry(mpfr_t r, const vijp_mat *a, size_t i) { check_entry(r, a, i); }
double absdiff(const vijp_mat *a, size_t i, const vijp_mat *b, size_t j) { return check_absdiff(a, i, b, j); }
double absval(const vijp_mat *a, size_t i) { return check_absval(a, i); }

double ratio_to_bound(const vijp_mat *a, const vijp_mat *b, const double *bound)
{
    double worst = 0;
    for (size_t i = 0; i < vijp_mat_len(a); i++) {
        double d = absdiff(a, i, b, i), r = d == 0 ? 0 : bound[i] > 0 ? d / bound[i] : INFINITY;
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

void sv_range(const double *J, size_t m, size_t n, double *smax, double *smin)
{
    size_t k = m < n ? m : n;
    double *A = malloc(m * n * sizeof *A), *s = malloc(k * sizeof *s), *sup = malloc(k * sizeof *sup);
    memcpy(A, J, m * n * sizeof *A);
    ck_assert(!LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'N', (int)m, (int)n, A, (int)m, s, NULL, 1, NULL, 1, sup));
    *smax = s[0];
    *smin = s[0];
    for (size_t i = 0; i < k; i++)
        if (s[i] > 1e-14 * s[0]) *smin = s[i]; /* nonzero: exact zeros come from structure (ReLU) */
    free(A), free(s), free(sup);
}

double *jacobian_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, size_t b)
{
    size_t m = L->out, n = L->in;
    vijp_mat x, J;
    vijp_mat_init(&x, n, 1, X->fmt), vijp_mat_init(&J, m, n, X->fmt);
    vijp_mat_copy_range(&x, 0, X, b * n, n);
    ck_assert(!vijp_layer_jacobian(L, theta, &x, &J, NULL));
    double *a = malloc(m * n * sizeof *a);
    for (size_t i = 0; i < m * n; i++) a[i] = vijp_mat_get_d(&J, i);
    vijp_mat_clear(&x), vijp_mat_clear(&J);
    return a;
}

double kappa_at(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, size_t b)
{
    double *J = jacobian_at(L, theta, X, b), smax, smin;
    sv_range(J, L->out, L->in, &smax, &smin);
    free(J);
    return smax / smin;
}

double c_solve(size_t m, size_t n) { return 3.0 * n * ldexp(1, (int)n - 1) + 16.0 * m * n + m + 6; }

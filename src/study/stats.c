#include "stats.h"
#include "vijp/error.h"
#include <math.h>
#include <stdlib.h>

void run_stats_of(const vijp_drift_curve *c, size_t r, const int *has_param, vijp_xnum tol, long prec, run_stats *out)
{
    size_t D = c->depth;
    const vijp_drift_run_result *run = &c->runs[r];
    vijp_xnum *g = vijp_alloc_array(D, sizeof *g), *t = vijp_alloc_array(D, sizeof *t);
    out->err_max = vijp_xnum_of(0);
    for (size_t i = 0; g && t && i < D; i++) {
        g[i] = run->g[i].rel;
        t[i] = run->theta[i].rel;
        out->err_max = vijp_xnum_max_nan(out->err_max, g[i]);
        if (has_param[i]) out->err_max = vijp_xnum_max_nan(out->err_max, t[i]);
    }
    out->safe_depth = g && t ? (double)vijp_safe_depth(g, t, has_param, D, tol) : NAN;
    out->growth_rate = g ? vijp_growth_fit(g, D, VIJP_FIT_CEILING, NULL) : NAN;
    out->bits_needed = g ? vijp_bits_needed(g, D, prec, tol, &out->bits_extrapolated) : NAN;
    /* Worst g_i over worst g_i: at g_D alone a linear loss makes both exact (0/0). */
    vijp_xnum bp = vijp_xnum_of(0), mine = bp;
    for (size_t i = 0; i < D; i++)
        bp = vijp_xnum_max_nan(bp, c->runs[0].g[i].rel), mine = vijp_xnum_max_nan(mine, run->g[i].rel);
    out->price = r && bp.m > 0 ? vijp_xnum_double(vijp_xnum_div(mine, bp)) : NAN;
    free(g), free(t);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

spread spread_of(const double *v, size_t n)
{
    double *w = vijp_alloc_array((n ? n : 1), sizeof *w);
    size_t k = 0;
    for (size_t i = 0; w && i < n; i++)
        if (!isnan(v[i])) w[k++] = v[i]; /* an overflowed error (+Inf) is a value */
    spread s = {NAN, NAN, NAN};
    if (k) {
        qsort(w, k, sizeof *w, cmp);
        s.min = w[0];
        s.max = w[k - 1];
        s.median = k % 2 ? w[k / 2] : 0.5 * (w[k / 2 - 1] + w[k / 2]);
    }
    free(w);
    return s;
}

static int xcmp(const void *a, const void *b) { return vijp_xnum_cmp(*(const vijp_xnum *)a, *(const vijp_xnum *)b); }

xspread xspread_of(const vijp_xnum *v, size_t n)
{
    vijp_xnum *w = vijp_alloc_array((n ? n : 1), sizeof *w), nan = vijp_xnum_of(NAN);
    size_t k = 0;
    for (size_t i = 0; w && i < n; i++)
        if (!vijp_xnum_isnan(v[i])) w[k++] = v[i]; /* an overflowed error (+Inf) is a value */
    xspread s = {nan, nan, nan};
    if (k) {
        qsort(w, k, sizeof *w, xcmp); /* NaN-free: a total order */
        s.min = w[0];
        s.max = w[k - 1];
        s.median = k % 2 ? w[k / 2] : vijp_xnum_mul(vijp_xnum_of(0.5), vijp_xnum_add(w[k / 2 - 1], w[k / 2]));
    }
    free(w);
    return s;
}

int *config_has_param(const study *s, size_t config)
{
    const vijp_net *net = &s->nets[s->configs[config].net];
    int *h = vijp_alloc_array(s->depth, sizeof *h);
    for (size_t i = 0; i < s->depth; i++) h[i] = net->layers[i].type->param_count(&net->layers[i]) > 0;
    return h;
}

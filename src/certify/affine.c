/* Affine forms of a layer's inputs (affine.h): built from a box, their hull,
 * the cap on generators, and their image through a declared-linear layer or
 * an elementwise activation (vijp_affine_layer).  Every rounding error is
 * bounded as affine.h says and added to the remainder, so the form holds
 * every exact value the layer gives. */
#include "affine.h"
#include "image.h"
#include "ddot/ddot.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include <stdlib.h>
#include <string.h>

#define up affine_up
#define down affine_down

static double *zeros(size_t n)
{
    double *v = vijp_alloc_array(n ? n : 1, sizeof *v);
    memset(v, 0, (n ? n : 1) * sizeof *v);
    return v;
}

void vijp_affine_from_box(vijp_affine *a, size_t n, size_t cap, const double *lo, const double *hi)
{
    a->n = n, a->k = n, a->cap = cap < n ? n : cap;
    a->c = zeros(n), a->G = zeros(n * a->cap), a->rlo = zeros(n), a->rhi = zeros(n);
    for (size_t i = 0; i < n; i++) {
        a->c[i] = 0.5 * lo[i] + 0.5 * hi[i]; /* any point does: the radius is measured from it */
        a->G[i + i * n] = fmax(up(hi[i] - a->c[i]), up(a->c[i] - lo[i]));
    }
}

void vijp_affine_free(vijp_affine *a)
{
    free(a->c), free(a->G), free(a->rlo), free(a->rhi);
    memset(a, 0, sizeof *a);
}

void vijp_affine_hull(const vijp_affine *a, double *lo, double *hi)
{
    for (size_t i = 0; i < a->n; i++) {
        double s = 0; /* >= Σ_g |G_ig|: each partial sum rounded up */
        for (size_t g = 0; g < a->k; g++) s = up(s + fabs(a->G[i + g * a->n]));
        lo[i] = down(down(a->c[i] - s) + a->rlo[i]), hi[i] = up(up(a->c[i] + s) + a->rhi[i]);
    }
}

static int by_size(const void *x, const void *y)
{
    const double *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

void vijp_affine_make_room(vijp_affine *a, size_t extra)
{
    if (a->k + extra <= a->cap) return;
    size_t n = a->n, drop = a->k + extra - a->cap; /* <= k: extra <= n <= cap */
    double *order = vijp_alloc_array(2 * a->k, sizeof *order); /* (size, index): which merge, not a bound */
    for (size_t g = 0; g < a->k; g++) {
        double s = 0;
        for (size_t i = 0; i < n; i++) s += fabs(a->G[i + g * n]);
        order[2 * g] = s, order[2 * g + 1] = (double)g;
    }
    qsort(order, a->k, 2 * sizeof *order, by_size);
    unsigned char *merged = vijp_alloc_array(a->k, 1);
    memset(merged, 0, a->k);
    for (size_t d = 0; d < drop; d++) merged[(size_t)order[2 * d + 1]] = 1;
    size_t kept = 0;
    for (size_t g = 0; g < a->k; g++) {
        double *col = a->G + g * n;
        if (merged[g])
            for (size_t i = 0; i < n; i++) a->rlo[i] = down(a->rlo[i] - fabs(col[i])), a->rhi[i] = up(a->rhi[i] + fabs(col[i]));
        else if (kept++ != g) memcpy(a->G + (kept - 1) * n, col, n * sizeof *col);
    }
    a->k = kept;
    free(order), free(merged);
}

/* y = f(0) + J·x, J ∈ mid ± rad (the enclosure at 0, the same at every x),
 * f(0) enclosed by the MPFR forward: the centre and generators through
 * mid by double-double dot products (|exact − hi| <= |lo| + bound,
 * ddot.h), the remainder through mid as intervals, rad·|x| (|x| <= the
 * box's largest end, every input being in it) and f(0) into the remainder. */
static int affine_linear(const vijp_layer *L, const double *theta, const double *lo, const double *hi, vijp_affine *a,
                         vijp_error *err)
{
    size_t m = L->out, n = L->in, k = a->k, cap = a->cap > m ? a->cap : m;
    double *zero = zeros(n), *mid = zeros(m * n), *rad = zeros(m * n);
    mpfi_t *b = vijp_image_vec_new(m);
    mpfr_t *zero_mp = vijp_alloc_array(n ? n : 1, sizeof *zero_mp), e;
    for (size_t j = 0; j < n; j++) mpfr_init2(zero_mp[j], IMAGE_PREC), mpfr_set_zero(zero_mp[j], 1);
    mpfr_init2(e, IMAGE_PREC);
    int rc = vijp_image_value_at(L, theta, zero_mp, NULL, b, err);
    if (!rc) rc = vijp_layer_jacobian_enclosure(L, theta, zero, mid, rad, err);
    double *c = zeros(m), *G = zeros(m * cap), *rlo = zeros(m), *rhi = zeros(m);
    for (size_t j = 0; !rc && j < m; j++) {
        double bound, sl = 0, sh = 0;
        vijp_dd d = vijp_dd_dot(n, mid + j, m, a->c, 1, &bound);
        c[j] = d.hi;
        double E = up(fabs(d.lo) + bound);
        for (size_t g = 0; g < k; g++) {
            d = vijp_dd_dot(n, mid + j, m, a->G + g * n, 1, &bound);
            G[j + g * m] = d.hi, E = up(E + up(fabs(d.lo) + bound));
        }
        for (size_t q = 0; q < n; q++) {
            double w = mid[j + q * m], p1 = w * a->rlo[q], p2 = w * a->rhi[q];
            sl = down(sl + down(fmin(p1, p2))), sh = up(sh + up(fmax(p1, p2)));
            if (rad[j + q * m] != 0) E = up(E + up(rad[j + q * m] * fmax(fabs(lo[q]), fabs(hi[q])))); /* NaN reaches E */
        }
        mpfi_get_left(e, b[j]);
        rlo[j] = down(down(sl - E) + mpfr_get_d(e, MPFR_RNDD));
        mpfi_get_right(e, b[j]);
        rhi[j] = up(up(sh + E) + mpfr_get_d(e, MPFR_RNDU));
        if (!isfinite(c[j]) || !isfinite(rlo[j]) || !isfinite(rhi[j]))
            rc = vijp_fail(err, VIJP_EDOMAIN, "%s layer: its affine form leaves double's range", L->type->name);
    }
    if (!rc) {
        vijp_affine_free(a);
        *a = (vijp_affine){.n = m, .k = k, .cap = cap, .c = c, .G = G, .rlo = rlo, .rhi = rhi};
    } else free(c), free(G), free(rlo), free(rhi);
    for (size_t j = 0; j < n; j++) mpfr_clear(zero_mp[j]);
    mpfr_clear(e);
    vijp_image_vec_free(b, m);
    free(zero), free(mid), free(rad), free(zero_mp);
    return rc;
}

/* y_i = α_i·x_i + g_i, g_i ∈ [glo_i, ghi_i] = gm_i ± h_i: the centre
 * α·c + gm (one fma, one rounding), the generators α·G, the remainder α·r,
 * each rounding error into the remainder, and h_i as a new generator of
 * coordinate i alone. */
static int affine_elementwise(const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                              vijp_affine *a, vijp_error *err)
{
    size_t n = a->n;
    double *alpha = zeros(n), *glo = zeros(n), *ghi = zeros(n);
    int rc = vijp_affine_linearise(L, theta, lo, hi, alpha, glo, ghi, err);
    if (!rc) vijp_affine_make_room(a, n);
    for (size_t i = 0; !rc && i < n; i++) {
        double al = alpha[i], gm = 0.5 * glo[i] + 0.5 * ghi[i];
        double h = fmax(up(ghi[i] - gm), up(gm - glo[i])); /* gm ± h ⊇ [glo, ghi] */
        a->c[i] = fma(al, a->c[i], gm);
        double E = affine_rn_err(a->c[i]);
        for (size_t g = 0; g < a->k; g++) {
            double *v = &a->G[i + g * n];
            *v = al * *v, E = up(E + affine_rn_err(*v));
        }
        double p1 = al * a->rlo[i], p2 = al * a->rhi[i];
        a->rlo[i] = down(down(fmin(p1, p2)) - E), a->rhi[i] = up(up(fmax(p1, p2)) + E);
        if (h > 0) {
            double *col = a->G + a->k++ * n;
            memset(col, 0, n * sizeof *col), col[i] = h;
        }
        if (!isfinite(a->c[i]) || !isfinite(a->rlo[i]) || !isfinite(a->rhi[i]) || !isfinite(h))
            rc = vijp_fail(err, VIJP_EDOMAIN, "%s layer: its affine form leaves double's range", L->type->name);
    }
    free(alpha), free(glo), free(ghi);
    return rc;
}

int vijp_affine_layer(const vijp_layer *L, const double *theta, const double *lo, const double *hi, vijp_affine *a,
                      vijp_error *err)
{
    if (!L->type->mp) return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no MPFR operators", L->type->name);
    if (vijp_deriv_enclose_of(L->type) && L->in == L->out && a->n == L->in)
        return affine_elementwise(L, theta, lo, hi, a, err);
    if ((L->type->declare(L) & VIJP_DECL_LINEAR) && a->n == L->in) return affine_linear(L, theta, lo, hi, a, err);
    return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no affine form of its values", L->type->name);
}

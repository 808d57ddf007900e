/* vijp_compare and the norms: every metric of a gradient against its
 * reference, in MPFR, or through fast.c where the format allows (ulps.c:
 * the per-entry measure both share). */
#include "vijp/metrics.h"
#include "vijp/memory.h"
#include "oracles/dot.h"
#include "format/packed.h"
#include "cache.h"
#include "fast.h"
#include <math.h>
#include <stdlib.h>

static mpfr_prec_t metric_prec(const vijp_mat *a, const vijp_mat *ref)
{
    mpfr_prec_t p = ref->fmt->prec > 2 * a->fmt->prec ? ref->fmt->prec : 2 * a->fmt->prec;
    return p < 128 ? 128 : p;
}

/* r := entry i of a, rounded to r's precision (a packed entry read
 * through its MPFR view, packed.h: the same value, the same rounding). */
static void entry(mpfr_t r, const vijp_mat *a, size_t i)
{
    if (a->d) mpfr_set_d(r, a->d[i], MPFR_RNDN);
    else if (!a->m) { /* packed (a->m first: packed.h) */
        mpfr_t v;
        vijp_packed_view(a->packed, i, v);
        mpfr_set(r, v, MPFR_RNDN);
    } else mpfr_set(r, a->m[i], MPFR_RNDN);
}

vijp_xnum vijp_rel_err(const vijp_mat *a, const vijp_mat *ref)
{
    mpfr_t x, y, num, den;
    mpfr_inits2(metric_prec(a, ref), x, y, num, den, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (size_t i = 0, n = vijp_mat_len(ref); i < n; i++) {
        entry(x, a, i);
        entry(y, ref, i);
        mpfr_fma(den, y, y, den, MPFR_RNDN);
        mpfr_sub(x, x, y, MPFR_RNDN);
        mpfr_fma(num, x, x, num, MPFR_RNDN);
    }
    vijp_xnum r;
    if (mpfr_nan_p(num)) r = vijp_xnum_of(NAN);
    else if (mpfr_zero_p(num)) r = vijp_xnum_of(0);
    else if (mpfr_zero_p(den)) r = vijp_xnum_of(INFINITY);
    else {
        mpfr_div(num, num, den, MPFR_RNDN);
        mpfr_sqrt(num, num, MPFR_RNDN);
        r = vijp_xnum_of_mpfr(num, MPFR_RNDN);
    }
    mpfr_clears(x, y, num, den, (mpfr_ptr)0);
    return r;
}

double vijp_norm(const vijp_mat *a)
{
    mpfr_t x, s;
    mpfr_inits2(a->fmt->prec < 128 ? 128 : a->fmt->prec, x, s, (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) entry(x, a, i), mpfr_fma(s, x, x, s, MPFR_RNDN);
    mpfr_sqrt(s, s, MPFR_RNDN);
    double r = mpfr_get_d(s, MPFR_RNDN);
    mpfr_clears(x, s, (mpfr_ptr)0);
    return r;
}

static void compare_exact(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                          vijp_compare_cache *cache, int angle);

/* The fast path where it can certify its doubles (compare_fast.h), the exact
 * evaluation otherwise: the same metrics either way. */
static void compare(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                    vijp_compare_cache *cache, int angle)
{
    if (!vijp_compare_fast(a, ref, f, m, angle, cache, NULL)) compare_exact(a, ref, f, m, cache, angle);
}

void vijp_compare_exact(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m, int angle)
{
    compare_exact(a, ref, f, m, NULL, angle);
}

void vijp_compare(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m)
{
    compare(a, ref, f, m, NULL, 1);
}

void vijp_compare_cached(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                         vijp_compare_cache *cache)
{
    compare(a, ref, f, m, cache, 1);
}

void vijp_compare_rel_ulps(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                           vijp_compare_cache *cache)
{
    compare(a, ref, f, m, cache, 0);
}

void vijp_compare_cache_clear(vijp_compare_cache *c)
{
    if (c->ready) mpfr_clear(c->ref_sumsq);
    c->ready = c->fast_ready = 0;
}

/* angle = 0: the angle is left NaN and its two sums (Σx², Σxy) are not formed. */
static void compare_exact(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f, vijp_metric *m,
                          vijp_compare_cache *cache, int angle)
{
    mpfr_prec_t p = vijp_compare_prec(f), wide = 2 * p + 64;
    size_t n = vijp_mat_len(ref);
    /* The entries at p bits (x, y, d = x − y, as they always were), a chunk
     * at a time, so that the four sums Σx², Σy², Σd², Σxy grow by one vo_dot
     * per chunk (the running sum its addend) instead of one fma per entry:
     * the study's reference spent most of its time here (16.8M parameter
     * gradients per depth-256 dense:256 curve, three comparisons each).
     * Each sum is rounded once per chunk at wide + 16 bits: with at most
     * 2^16 chunks its error stays below 2^-wide·Σ|terms|.  Chunks keep the
     * buffers small enough to be reused rather than mapped afresh. */
    enum { CHUNK = 1024 };
    vijp_format fp;
    if (vijp_format_mpfr(&fp, p, NULL)) abort(); /* p <= 2·VIJP_PREC_MAX + 64: in range by construction */
    vijp_mat X, D;
    vijp_mat_init(&X, CHUNK, 1, &fp), vijp_mat_init(&D, CHUNK, 1, &fp);
    mpfr_srcptr px[CHUNK], py[CHUNK], pd[CHUNK];
    mpfr_t t, na, nr, num, sxy, s, q;
    mpfr_init2(t, p);
    mpfr_inits2(wide + 16, na, nr, num, sxy, s, q, (mpfr_ptr)0);
    mpfr_set_zero(na, 1), mpfr_set_zero(nr, 1), mpfr_set_zero(num, 1), mpfr_set_zero(sxy, 1);
    m->ulps = vijp_xnum_of(0);
    /* A reference already at p bits is read in place (its entries are what
     * rounding them to p bits would give), and Σy², which depends on it
     * alone, comes from the cache when an earlier comparison with the same
     * reference filled it: the same sums, in the same chunks. */
    int direct = (ref->m && n && mpfr_get_prec(ref->m[0]) == p) || (!ref->m && ref->packed && ref->packed->prec == p);
    int have_nr = cache && cache->ready;
    vijp_mat Y = {0}; /* the reference's entries rounded to p: only when not read in place */
    if (!direct) vijp_mat_init(&Y, CHUNK, 1, &fp);
    mpfr_t *views = direct && !ref->m && ref->packed ? vijp_alloc_array(CHUNK, sizeof *views) : NULL; /* a packed one's */
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t cnt = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (size_t j = 0; j < cnt; j++) {
            entry(X.m[j], a, i0 + j);
            if (views) vijp_packed_view(ref->packed, i0 + j, views[j]), py[j] = views[j];
            else if (direct) py[j] = ref->m[i0 + j];
            else entry(Y.m[j], ref, i0 + j), py[j] = Y.m[j];
            mpfr_sub(D.m[j], X.m[j], py[j], MPFR_RNDN);
            px[j] = X.m[j], pd[j] = D.m[j];
            m->ulps = vijp_xnum_max_nan(m->ulps, vijp_ulps_of(D.m[j], py[j], f, t));
        }
        if (angle) vo_dot(na, na, px, px, cnt);
        if (!have_nr) vo_dot(nr, nr, py, py, cnt);
        vo_dot(num, num, pd, pd, cnt);
        if (angle) vo_dot(sxy, sxy, px, py, cnt);
    }
    if (have_nr) mpfr_set(nr, cache->ref_sumsq, MPFR_RNDN); /* exact: the same precision */
    else if (cache) {
        mpfr_init2(cache->ref_sumsq, wide + 16);
        mpfr_set(cache->ref_sumsq, nr, MPFR_RNDN);
        cache->ready = 1;
    }
    if (mpfr_nan_p(num)) m->rel = vijp_xnum_of(NAN);
    else if (mpfr_zero_p(num)) m->rel = vijp_xnum_of(0);
    else if (mpfr_zero_p(nr)) m->rel = vijp_xnum_of(INFINITY);
    else {
        mpfr_div(t, num, nr, MPFR_RNDN);
        mpfr_sqrt(t, t, MPFR_RNDN);
        m->rel = vijp_xnum_of_mpfr(t, MPFR_RNDN);
    }
    if (!angle || mpfr_nan_p(na) || mpfr_inf_p(na) || mpfr_nan_p(sxy)) m->angle_deg = vijp_xnum_of(NAN);
    else if (mpfr_zero_p(na) || mpfr_zero_p(nr))
        m->angle_deg = vijp_xnum_of(mpfr_zero_p(na) && mpfr_zero_p(nr) ? 0 : NAN);
    else {
        /* â = αx, r̂ = βy with α = 1/‖x‖, β = 1/‖y‖ (p bits, as before):
         * ‖â ∓ r̂‖² = α²Σx² + β²Σy² ∓ 2αβΣxy.  The difference cancels down to
         * about θ², so it is formed at 2p + 80 bits from sums accurate to
         * 2^-(2p+64): a relative error near 2^-(2p+64)/θ², below the
         * per-entry rounding's 2^-p/θ of the two-pass form it replaces for
         * any θ above 2^-(p+64).  x = y exactly gives α = β, identical
         * products and exactly 0. */
        mpfr_t al, be, t1, t2, t3;
        mpfr_inits2(p, al, be, (mpfr_ptr)0);
        mpfr_inits2(wide + 16, t1, t2, t3, (mpfr_ptr)0);
        mpfr_rec_sqrt(al, na, MPFR_RNDN);
        mpfr_rec_sqrt(be, nr, MPFR_RNDN);
        mpfr_mul(t1, al, al, MPFR_RNDN), mpfr_mul(t1, t1, na, MPFR_RNDN);
        mpfr_mul(t2, al, be, MPFR_RNDN), mpfr_mul(t2, t2, sxy, MPFR_RNDN), mpfr_mul_2ui(t2, t2, 1, MPFR_RNDN);
        mpfr_mul(t3, be, be, MPFR_RNDN), mpfr_mul(t3, t3, nr, MPFR_RNDN);
        mpfr_add(t1, t1, t3, MPFR_RNDN);
        mpfr_sub(s, t1, t2, MPFR_RNDN);
        mpfr_add(q, t1, t2, MPFR_RNDN);
        if (mpfr_sgn(s) < 0) mpfr_set_zero(s, 1); /* |θ| below the rounding: 0 */
        mpfr_sqrt(s, s, MPFR_RNDN);
        mpfr_sqrt(q, q, MPFR_RNDN);
        mpfr_atan2(t, s, q, MPFR_RNDN);
        mpfr_mul_ui(t, t, 360, MPFR_RNDN); /* 2·θ rad · 180/π */
        mpfr_const_pi(q, MPFR_RNDN);
        mpfr_div(t, t, q, MPFR_RNDN);
        m->angle_deg = vijp_xnum_of_mpfr(t, MPFR_RNDN);
        mpfr_clears(al, be, t1, t2, t3, (mpfr_ptr)0);
    }
    mpfr_clears(t, na, nr, num, sxy, s, q, (mpfr_ptr)0);
    vijp_mat_clear(&X), vijp_mat_clear(&Y), vijp_mat_clear(&D);
    free(views);
}

vijp_xnum vijp_compare_ulps_at_scale(const vijp_mat *a, const vijp_mat *ref, const vijp_format *f,
                                     double (*scale)(const void *ctx, size_t i), const void *ctx)
{
    mpfr_prec_t p = vijp_compare_prec(f);
    mpfr_t x, y, d, s, t;
    mpfr_inits2(p, x, y, d, s, t, (mpfr_ptr)0);
    vijp_xnum worst = vijp_xnum_of(0);
    for (size_t i = 0, n = vijp_mat_len(ref); i < n; i++) {
        entry(x, a, i), entry(y, ref, i); /* as compare_exact: RN_p of both */
        mpfr_sub(d, x, y, MPFR_RNDN);
        mpfr_abs(s, y, MPFR_RNDN);
        double at = scale(ctx, i); /* not finite (terms past double's range): no scale, the plain measure */
        if (isfinite(at) && mpfr_cmp_d(s, at) < 0) mpfr_set_d(s, at, MPFR_RNDN); /* exact: p >= 128 bits */
        worst = vijp_xnum_max_nan(worst, vijp_ulps_of(d, s, f, t));
    }
    mpfr_clears(x, y, d, s, t, (mpfr_ptr)0);
    return worst;
}

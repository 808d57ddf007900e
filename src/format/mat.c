#include "vijp/mat.h"
#include "vijp/error.h"
#include "vijp/arith.h"
#include "vijp/memory.h"
#include "mpfr_io.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t vijp_mat_len(const vijp_mat *a) { return a->rows * a->cols; }

/* n MPFR values at precision prec, +0, in one allocation: the mpfr_t
 * structs, then every significand (MPFR's custom interface), instead of one
 * malloc per value.  The drift study's reference holds millions of values
 * (a depth-256 dense:256 net has 16.8M parameter gradients): per-value
 * mallocs, their headers and the page faults on them were about a sixth of
 * its time.  Freed by one free(); never mpfr_clear an entry (nothing
 * does: mpfr_swap between entries of such blocks only exchanges pointers). */
static mpfr_t *mp_block_new(size_t n, mpfr_prec_t prec)
{
    size_t size = mpfr_custom_get_size(prec), head = (n ? n : 1) * sizeof(mpfr_t);
    head = (head + sizeof(mp_limb_t) - 1) / sizeof(mp_limb_t) * sizeof(mp_limb_t);
    char *block = vijp_alloc(head + n * size);
    mpfr_t *v = (mpfr_t *)(void *)block;
    for (size_t i = 0; i < n; i++) {
        void *sig = block + head + i * size;
        mpfr_custom_init(sig, prec);
        mpfr_custom_init_set(v[i], MPFR_ZERO_KIND, 0, prec, sig);
    }
    return v;
}

/* vijp_mat_init and vijp_mat_init_unset: MPFR values are always zero (they
 * must be initialised anyway); doubles zeroed or not. */
static void mat_init(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt, int zeroed)
{
    memset(a, 0, sizeof *a);
    a->rows = rows;
    a->cols = cols;
    a->fmt = fmt;
    size_t n = rows * cols;
    if (fmt->kind != VIJP_DOUBLE) {
        a->m = mp_block_new(n, fmt->prec);
        return;
    }
    if (n > SIZE_MAX / sizeof *a->d) vijp_out_of_memory(SIZE_MAX);
    a->d = zeroed ? vijp_alloc_array(n ? n : 1, sizeof *a->d) : vijp_alloc_unset((n ? n : 1) * sizeof *a->d);
}

void vijp_mat_init(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt) { mat_init(a, rows, cols, fmt, 1); }

void vijp_mat_init_unset(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt)
{
    mat_init(a, rows, cols, fmt, 0);
}

void vijp_mat_clear(vijp_mat *a)
{
    free(a->d);
    free(a->m); /* the block of mp_block_new: values and limbs */
    a->d = NULL;
    a->m = NULL;
    a->rows = a->cols = 0;
}

void vijp_mat_zero(vijp_mat *a)
{
    size_t n = vijp_mat_len(a);
    if (a->d) memset(a->d, 0, n * sizeof *a->d);
    else
        for (size_t i = 0; i < n; i++) mpfr_set_zero(a->m[i], 1);
}

void vijp_mat_copy(vijp_mat *a, const vijp_mat *b)
{
    size_t n = vijp_mat_len(a);
    if (a->d) memcpy(a->d, b->d, n * sizeof *a->d);
    else
        for (size_t i = 0; i < n; i++) mpfr_set(a->m[i], b->m[i], MPFR_RNDN); /* same format: exact */
}

void vijp_mat_set_entry_d(vijp_mat *a, size_t i, double x)
{
    if (a->d) a->d[i] = x;
    else if (!a->fmt->mixed) vo_set_d(a->m[i], x, a->fmt);
    else { /* one rounding of x to the storage format (not via the accumulation format) */
        mpfr_t t;
        mpfr_init2(t, 53);
        mpfr_set_d(t, x, MPFR_RNDN); /* exact */
        vo_store(a->m[i], t, a->fmt);
        mpfr_clear(t);
    }
}

void vijp_mat_store(vijp_mat *a)
{
    if (!a->m || !a->fmt->mixed) return;
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) vo_store(a->m[i], a->m[i], a->fmt);
}

void vijp_mat_set_d(vijp_mat *a, const double *src)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) vijp_mat_set_entry_d(a, i, src[i]);
}

double vijp_mat_get_d(const vijp_mat *a, size_t i)
{
    return a->d ? a->d[i] : mpfr_get_d(a->m[i], MPFR_RNDN);
}

void vijp_mat_get_mpfr(const vijp_mat *a, mpfr_t *out)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        if (a->d) mpfr_set_d(out[i], a->d[i], MPFR_RNDN);
        else mpfr_set(out[i], a->m[i], MPFR_RNDN);
    }
}

int vijp_mat_check_finite(const vijp_mat *a, const char *what, vijp_error *err)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        int finite = a->d ? isfinite(a->d[i]) : mpfr_number_p(a->m[i]);
        if (!finite)
            return vijp_fail(err, VIJP_EDOMAIN, "%s: entry %zu (row %zu, column %zu) is %s", what, i,
                             i % (a->rows ? a->rows : 1), i / (a->rows ? a->rows : 1),
                             (a->d ? isnan(a->d[i]) : mpfr_nan_p(a->m[i])) ? "NaN" : "infinite");
    }
    return 0;
}

/* A helper's result, rounded to the storage of a mixed format. */
static void stored(mpfr_t r, const vijp_format *f)
{
    if (f->mixed) vo_store(r, r, f);
}

void vijp_mat_sub(vijp_mat *a, const vijp_mat *b, const vijp_mat *c)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        if (a->d) a->d[i] = b->d[i] - c->d[i];
        else vo_sub(a->m[i], b->m[i], c->m[i], a->fmt), stored(a->m[i], a->fmt);
    }
}

void vijp_mat_mul_elem(vijp_mat *a, const vijp_mat *b, const vijp_mat *c)
{
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        if (a->d) a->d[i] = b->d[i] * c->d[i];
        else vo_mul(a->m[i], b->m[i], c->m[i], a->fmt), stored(a->m[i], a->fmt);
    }
}

void vijp_mat_copy_range(vijp_mat *dst, size_t doff, const vijp_mat *src, size_t soff, size_t count)
{
    if (dst->d) memcpy(dst->d + doff, src->d + soff, count * sizeof(double));
    else
        for (size_t i = 0; i < count; i++) mpfr_set(dst->m[doff + i], src->m[soff + i], MPFR_RNDN);
}

void vijp_mat_tdot(vijp_mat *r, const vijp_mat *A, const vijp_mat *g)
{
    size_t m = A->rows;
    if (r->d) {
        for (size_t j = 0; j < A->cols; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++) s += A->d[i + j * m] * g->d[i];
            r->d[j] = s;
        }
        return;
    }
    mpfr_t p;
    mpfr_init2(p, r->fmt->prec);
    for (size_t j = 0; j < A->cols; j++) {
        mpfr_set_zero(r->m[j], 1);
        for (size_t i = 0; i < m; i++) vo_madd(r->m[j], A->m[i + j * m], g->m[i], p, r->fmt);
    }
    vijp_mat_store(r);
    mpfr_clear(p);
}

void vijp_mat_convert(vijp_mat *dst, const vijp_mat *src)
{
    /* Into plain MPFR (mpfr:P, the drift reference): vo_store is mpfr_set
     * there, and rounding the value once, straight from the source, is what
     * the two steps below give (the first is exact).  One call per entry:
     * the drift reference copies whole problems this way (drift_memo.c). */
    if (dst->m && !dst->fmt->emulated && !dst->fmt->mixed) {
        for (size_t i = 0, n = vijp_mat_len(dst); i < n; i++) {
            if (src->d) vijp_emu_set1(dst->m[i], src->d[i]); /* rounds through mpfr_set_d below 53 bits; 16.8M per dense:256 reference */
            else mpfr_set(dst->m[i], src->m[i], MPFR_RNDN);
        }
        return;
    }
    mpfr_t t;
    mpfr_init2(t, src->fmt->prec > 53 ? src->fmt->prec : 53);
    for (size_t i = 0, n = vijp_mat_len(dst); i < n; i++) {
        if (src->d) mpfr_set_d(t, src->d[i], MPFR_RNDN);
        else mpfr_set(t, src->m[i], MPFR_RNDN); /* exact: same precision */
        if (dst->d) dst->d[i] = mpfr_get_d(t, MPFR_RNDN);
        else vo_store(dst->m[i], t, dst->fmt); /* vo_set unless mixed */
    }
    mpfr_clear(t);
}

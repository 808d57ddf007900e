#include "vijp/mat.h"
#include "vijp/error.h"
#include "vijp/arith.h"
#include "vijp/memory.h"
#include "mat_mp.h"
#include "mpfr_io.h"
#include "mx.h"
#include "narrow.h"
#include "packed.h"
#include "sr.h"
#include "scaled.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t vijp_mat_len(const vijp_mat *a) { return a->rows * a->cols; }

/* A packed matrix (packed.h) is read only, and read by the helpers mat.h
 * names; handing one to another is a programming error, stopped here. */
static void refuse_packed(const vijp_mat *a, const char *who)
{
    if (!a->packed || a->m) return; /* a->m too: MPFR-held until packed (packed.h, vijp_mat_init_packing) */
    fprintf(stderr, "vijp: %s: the matrix is packed (vijp_mat_pack), read only, and this helper does not read one\n",
            who);
    abort();
}

/* An index or range past a matrix's end, or two shapes that differ where
 * the helper wants one: a programming error, reported and stopped like a
 * packed matrix written (it read or wrote past a block). */
static void refuse_out_of_range(const char *who, size_t end, size_t len)
{
    fprintf(stderr, "vijp: %s: entries up to %zu asked of a matrix of %zu\n", who, end, len);
    abort();
}

static void refuse_shapes(const char *who, const vijp_mat *a, const vijp_mat *b)
{
    fprintf(stderr, "vijp: %s: a %zu × %zu matrix and a %zu × %zu one (the same shape wanted)\n", who, a->rows, a->cols,
            b->rows, b->cols);
    abort();
}

/* Entry i of an MPFR-held or packed a, to read (v: room for a packed
 * entry's view, packed.h: no copy either way). */
static inline mpfr_srcptr mp_at(const vijp_mat *a, size_t i, mpfr_ptr v)
{
    if (a->m) return a->m[i];
    vijp_packed_view(a->packed, i, v);
    return v;
}

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
    /* Unset: every mpfr_t is written below, whole (precision, sign,
     * exponent, significand pointer), and a zero's significand is never
     * read; zeroing first was a pass over the block (13% of a
     * dense:2048,gelu study's CPU in perf, the reference's levels). */
    char *block = vijp_alloc_unset(head + n * size);
    mpfr_t *v = (mpfr_t *)(void *)block;
    for (size_t i = 0; i < n; i++) {
        void *sig = block + head + i * size;
        mpfr_custom_init(sig, prec);
        mpfr_custom_init_set(v[i], MPFR_ZERO_KIND, 0, prec, sig);
    }
    return v;
}

/* vijp_mat_init and vijp_mat_init_unset: MPFR values are always zero (they
 * must be initialised anyway); doubles zeroed or not, but those of a format
 * other than double always zeroed, as its MPFR values were before they were
 * held as doubles (a pass over memory, nothing next to that format's
 * arithmetic).  mp: MPFR values whatever the format (mat_mp.h's twins). */
static void mat_init(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt, int zeroed, int mp)
{
    memset(a, 0, sizeof *a);
    a->rows = rows;
    a->cols = cols;
    a->fmt = fmt;
    size_t n = rows * cols;
    if (mp || !vijp_format_values_double(fmt)) {
        a->m = mp_block_new(n, fmt->prec);
        return;
    }
    if (n > SIZE_MAX / sizeof *a->d) vijp_out_of_memory(SIZE_MAX);
    zeroed = zeroed || fmt->kind != VIJP_DOUBLE;
    a->d = zeroed ? vijp_alloc_array(n ? n : 1, sizeof *a->d) : vijp_alloc_unset((n ? n : 1) * sizeof *a->d);
}

void vijp_mat_init(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt)
{
    mat_init(a, rows, cols, fmt, 1, 0);
}

void vijp_mat_init_unset(vijp_mat *a, size_t rows, size_t cols, const vijp_format *fmt)
{
    mat_init(a, rows, cols, fmt, 0, 0);
}

/* ---- MPFR twins of double-held matrices (mat_mp.h) ---- */

void vijp_mat_init_mp(vijp_mat *t, const vijp_mat *a, int copy)
{
    mat_init(t, a->rows, a->cols, a->fmt, 1, 1);
    t->sr = a->sr;
    if (copy && a->d) vijp_emu_put(t->m, a->d, vijp_mat_len(a)); /* exact: a's values fit the format's precision */
    else if (copy) vijp_mat_copy(t, a);
}

void vijp_mat_put_mp(vijp_mat *a, const vijp_mat *t)
{
    if (!a->d) {
        vijp_mat_copy(a, t);
        return;
    }
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) a->d[i] = vijp_emu_get1(t->m[i]); /* exact: values are doubles */
}

/* A double-held matrix of a format other than double (vijp_format_values_double):
 * its values are the format's, which every helper below rounds to as the
 * MPFR-held one does: natively where narrow.c's grids give the same bits,
 * a line at a time through MPFR scratch for tensor scales and MX sets
 * (line_put), and through an MPFR twin of the whole matrix for the rest
 * (":sr" and ":ftz" stores, vo_dot_acc); t-mat-held checks every route
 * against the MPFR-held one. */
static int held_d(const vijp_mat *a) { return a->d && a->fmt->kind != VIJP_DOUBLE; }

/* Whether f's rounding of one double to its storage (vo_store; unless mixed
 * vo_set, the same grid: format.h) is narrow.c's vijp_narrow_round on
 * vijp_narrow_of(f): an emulated grid of at most 24 bits (FP8, bfloat16,
 * binary16, binary32 and the mixed formats' storage), not flushed, not a
 * block or tensor scale. */
static int rounds_natively(const vijp_format *f)
{
    return f->emulated && f->store_prec <= 24 && f->store_emax <= 128 && !f->mx_block && !f->tensor_scaled &&
           !f->store_ftz && !f->ftz;
}

/* f's arithmetic grid (vo_sub, vo_mul: prec, emin, emax; mixed formats
 * binary32 with IEEE's overflow, the others their own rule) as a narrow.c
 * grid: an operation on two of f's values, done in binary64 and rounded
 * there, is the correctly rounded one when 53 >= 2p + 2 (Figueroa, "When is
 * double rounding innocuous?", 1995; src/emu/emu.h), p <= 24 here; a
 * product of such values is exact in binary64, and so is a difference
 * landing on the subnormal grid. */
static int arith_natively(const vijp_format *f, vijp_narrow *g)
{
    if (!f->emulated || f->prec > 24 || f->emax > 128 || f->emin < -148 || f->ftz || f->store_ftz) return 0;
    if (!f->mixed) *g = vijp_narrow_of(f); /* store_* are prec, emin, emax and every operation's rule */
    else *g = (vijp_narrow){(int)f->prec, (int)f->emin, (int)f->emax, VIJP_OVERFLOW_INF,
                            ldexp(1 - ldexp(1, -(int)f->prec), (int)f->emax)};
    return 1;
}

void vijp_mat_clear(vijp_mat *a)
{
    free(a->d);
    free(a->m);      /* the block of mp_block_new: values and limbs (or the structs alone: packed.h) */
    vijp_packed_free(a->packed); /* packed.c's one block, and its wide exponents if any */
    a->d = NULL;
    a->m = NULL;
    a->packed = NULL;
    a->rows = a->cols = 0;
}

void vijp_mat_zero(vijp_mat *a)
{
    size_t n = vijp_mat_len(a);
    refuse_packed(a, "vijp_mat_zero");
    if (a->d) memset(a->d, 0, n * sizeof *a->d);
    else
        for (size_t i = 0; i < n; i++) mpfr_set_zero(a->m[i], 1);
}

void vijp_mat_copy(vijp_mat *a, const vijp_mat *b)
{
    if (a->rows != b->rows || a->cols != b->cols) refuse_shapes("vijp_mat_copy", a, b);
    vijp_mat_copy_range(a, 0, b, 0, vijp_mat_len(a));
}

/* x rounded once to a's storage (vijp_mat_set_entry_d) for a double-held a. */
static double entry_rounded(const vijp_mat *a, double x)
{
    const vijp_format *f = a->fmt;
    if (rounds_natively(f)) {
        vijp_narrow g = vijp_narrow_of(f);
        return vijp_narrow_round(x, &g);
    }
    mpfr_t t, r;
    mpfr_init2(t, 53), mpfr_init2(r, f->prec);
    mpfr_set_d(t, x, MPFR_RNDN); /* exact */
    if (f->mixed) vo_store(r, t, f);
    else vo_set(r, t, f);
    double v = mpfr_get_d(r, MPFR_RNDN); /* exact: a value of the format */
    mpfr_clear(t), mpfr_clear(r);
    return v;
}

void vijp_mat_set_entry_d(vijp_mat *a, size_t i, double x)
{
    refuse_packed(a, "vijp_mat_set_entry_d");
    if (i >= vijp_mat_len(a)) refuse_out_of_range("vijp_mat_set_entry_d", i + 1, vijp_mat_len(a));
    if (held_d(a)) a->d[i] = entry_rounded(a, x);
    else if (a->d) a->d[i] = x;
    else if (!a->fmt->mixed) vo_set_d(a->m[i], x, a->fmt);
    else { /* one rounding of x to the storage format (not via the accumulation format) */
        mpfr_t t;
        mpfr_init2(t, 53);
        mpfr_set_d(t, x, MPFR_RNDN); /* exact */
        vo_store(a->m[i], t, a->fmt);
        mpfr_clear(t);
    }
}

/* Entry i of a, a result, stored: stochastically where a's format rounds
 * so and a names its stream (mat.h), to nearest otherwise. */
static void store_entry(vijp_mat *a, size_t i)
{
    if (a->fmt->store_sr && a->sr.keyed) vijp_sr_store(a->m[i], a->m[i], a->fmt, vijp_sr_bits(&a->sr, i));
    else vo_store(a->m[i], a->m[i], a->fmt);
}

/* A double-held a's line of len values from first, stride apart, written
 * through w (an MPFR scratch line at a's precision, mp_block_new's: what
 * the MPFR-only quantisers, vijp_scaled_line and vijp_mx_block, write an
 * MPFR-held a's entries as), exactly: the values are the format's. */
static void line_put(vijp_mat *a, size_t first, size_t stride, mpfr_t *w, size_t len)
{
    for (size_t k = 0; k < len; k++) a->d[first + k * stride] = vijp_emu_get1(w[k]);
}

/* Tensor-scaled formats (format.h, scaled.c): the tensor is the whole
 * matrix a; its scale from src's values (src: a's own, a matrix of a's
 * shape, or doubles at a's indices), then each line of a.  first, len,
 * stride: one line (vijp_mat_*_line); len 0: every column (blocks down
 * the columns, as MX's). */
static void scaled_store(vijp_mat *a, const vijp_mat *src, const double *src_d, vijp_store_role role, size_t first,
                         size_t len, size_t stride)
{
    size_t n = vijp_mat_len(a), lines = len ? 1 : a->cols;
    if (!len) len = a->rows, stride = 1;
    vijp_tensor_scale t;
    vijp_scaled_init(&t, a->fmt, role);
    mpfr_t view; /* a packed source's entry (mp_at) */
    for (size_t i = 0; i < n; i++) {
        if (src_d) vijp_scaled_see_d(&t, src_d[i]);
        else if (src->d) vijp_scaled_see_d(&t, src->d[i]);
        else vijp_scaled_see(&t, mp_at(src, i, view));
    }
    vijp_scaled_ready(&t);
    mpfr_prec_t p = src && !src->d && src->fmt->prec > 53 ? src->fmt->prec : 53;
    mpfr_t *v = vijp_alloc_array(len ? len : 1, sizeof *v); /* the line's values, exact */
    for (size_t k = 0; k < len; k++) mpfr_init2(v[k], p);
    mpfr_t *w = a->d ? mp_block_new(len, a->fmt->prec) : NULL; /* a double-held a's line (line_put) */
    for (size_t j = 0; j < lines; j++) {
        size_t at = lines > 1 ? j * a->rows : first;
        for (size_t k = 0; k < len; k++) {
            size_t i = at + k * stride;
            if (src_d) mpfr_set_d(v[k], src_d[i], MPFR_RNDN);
            else if (src->d) mpfr_set_d(v[k], src->d[i], MPFR_RNDN);
            else mpfr_set(v[k], mp_at(src, i, view), MPFR_RNDN);
        }
        if (w) vijp_scaled_line(&t, w, 1, v, 1, len), line_put(a, at, stride, w, len);
        else vijp_scaled_line(&t, a->m + at, stride, v, 1, len);
    }
    for (size_t k = 0; k < len; k++) mpfr_clear(v[k]);
    free(v), free(w);
    vijp_scaled_clear(&t);
}

void vijp_mat_store(vijp_mat *a) { vijp_mat_store_as(a, VIJP_STORE_FORWARD); }

/* A double-held a's storage grid or MX blocks, natively: FP8, bfloat16,
 * binary16 and binary32 storage grids and MX blocks round through narrow.c
 * (narrow.h: bit for bit vo_store's and vijp_mx_line's, tests/t-narrow.c).
 * Stochastic rounding, flushing and tensor scales keep the MPFR route
 * (returns 0: the twin does it).  An MPFR-held matrix (a twin, or a test's)
 * is stored by that route, the definition. */
static int store_held_natively(vijp_mat *a, size_t first, size_t len, size_t stride)
{
    const vijp_format *f = a->fmt;
    if (f->store_sr || f->store_ftz || f->ftz || f->tensor_scaled || (!f->mx_block && !rounds_natively(f))) return 0;
    if (f->mx_block) vijp_narrow_mx_line(f, a->d + first, len, stride, VIJP_NARROW_BEST);
    else if (stride == 1) {
        vijp_narrow g = vijp_narrow_of(f);
        vijp_narrow_round_array(a->d + first, a->d + first, len, &g, 1, 1, VIJP_NARROW_BEST);
    } else {
        vijp_narrow g = vijp_narrow_of(f);
        for (size_t k = 0; k < len; k++) a->d[first + k * stride] = vijp_narrow_round(a->d[first + k * stride], &g);
    }
    return 1;
}

/* MX formats: a column is the reduction dimension of the product that
 * consumes it (a column per sample, its entries the features the next
 * dense layer sums over), so its blocks run down each column (mat.h). */
void vijp_mat_store_as(vijp_mat *a, vijp_store_role role)
{
    refuse_packed(a, "vijp_mat_store");
    if (!a->fmt->mixed || (!a->m && !held_d(a))) return;
    if (a->fmt->tensor_scaled) {
        scaled_store(a, a, NULL, role, 0, 0, 1);
        return;
    }
    if (a->d) {
        int done = 1;
        if (a->fmt->mx_block) /* blocks down each column */
            for (size_t j = 0; done && j < a->cols; j++) done = store_held_natively(a, j * a->rows, a->rows, 1);
        else done = store_held_natively(a, 0, vijp_mat_len(a), 1);
        if (!done) { /* nothing written: the first call refuses for the format */
            vijp_mat t;
            vijp_mat_init_mp(&t, a, 1);
            vijp_mat_store_as(&t, role);
            vijp_mat_put_mp(a, &t);
            vijp_mat_clear(&t);
        }
        return;
    }
    if (a->fmt->mx_block) {
        for (size_t j = 0; j < a->cols; j++) vijp_mx_line(a->fmt, a->m + j * a->rows, a->rows, 1);
        return;
    }
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) store_entry(a, i);
}

void vijp_mat_store_line(vijp_mat *a, size_t first, size_t len, size_t stride)
{
    refuse_packed(a, "vijp_mat_store_line");
    if (!a->fmt->mixed || (!a->m && !held_d(a))) return;
    if (a->fmt->tensor_scaled) {
        if (len) scaled_store(a, a, NULL, VIJP_STORE_FORWARD, first, len, stride);
        return;
    }
    if (a->d) {
        if (!store_held_natively(a, first, len, stride)) {
            vijp_mat t;
            vijp_mat_init_mp(&t, a, 1);
            vijp_mat_store_line(&t, first, len, stride);
            vijp_mat_put_mp(a, &t);
            vijp_mat_clear(&t);
        }
        return;
    }
    if (a->fmt->mx_block) vijp_mx_line(a->fmt, a->m + first, len, stride);
    else
        for (size_t k = 0; k < len; k++) vo_store(a->m[first + k * stride], a->m[first + k * stride], a->fmt);
}

/* MX: the values of one block of the line, exact at 53 bits, then quantised
 * straight into a (no rounding to binary32 first: one rounding). */
static void set_d_line_mx(vijp_mat *a, const double *src, size_t first, size_t len, size_t stride)
{
    enum { MAXB = 64 };
    size_t b = (size_t)a->fmt->mx_block;
    if (b > MAXB) abort(); /* every MX format has 32: a programming error */
    mpfr_t t[MAXB];
    for (size_t i = 0; i < b; i++) mpfr_init2(t[i], 53);
    mpfr_t *w = a->d ? mp_block_new(b, a->fmt->prec) : NULL; /* a double-held a's block (line_put) */
    for (size_t k = 0; k < len; k += b) {
        size_t nb = len - k < b ? len - k : b;
        for (size_t i = 0; i < nb; i++) mpfr_set_d(t[i], src[first + (k + i) * stride], MPFR_RNDN); /* exact */
        if (w) vijp_mx_block(a->fmt, w, 1, t, 1, nb), line_put(a, first + k * stride, stride, w, nb);
        else vijp_mx_block(a->fmt, a->m + first + k * stride, stride, t, 1, nb);
    }
    for (size_t i = 0; i < b; i++) mpfr_clear(t[i]);
    free(w);
}

void vijp_mat_set_d_line(vijp_mat *a, const double *src, size_t first, size_t len, size_t stride)
{
    refuse_packed(a, "vijp_mat_set_d_line");
    if ((a->m || held_d(a)) && a->fmt->tensor_scaled) {
        if (len) scaled_store(a, NULL, src, VIJP_STORE_FORWARD, first, len, stride);
    } else if ((a->m || held_d(a)) && a->fmt->mx_block) set_d_line_mx(a, src, first, len, stride);
    else
        for (size_t k = 0; k < len; k++) vijp_mat_set_entry_d(a, first + k * stride, src[first + k * stride]);
}

void vijp_mat_set_d(vijp_mat *a, const double *src) { vijp_mat_set_d_as(a, src, VIJP_STORE_FORWARD); }

void vijp_mat_set_d_as(vijp_mat *a, const double *src, vijp_store_role role)
{
    refuse_packed(a, "vijp_mat_set_d");
    if ((a->m || held_d(a)) && a->fmt->tensor_scaled) { /* one tensor, blocks down each column */
        scaled_store(a, NULL, src, role, 0, 0, 1);
        return;
    }
    if ((a->m || held_d(a)) && a->fmt->mx_block) { /* blocks down each column, as vijp_mat_store */
        for (size_t j = 0; j < a->cols; j++) set_d_line_mx(a, src, j * a->rows, a->rows, 1);
        return;
    }
    size_t n = vijp_mat_len(a);
    if (a->d && !held_d(a)) { /* double: the values themselves (a net's parameters, 16.8M at dense:256, depth 256) */
        if (n) memmove(a->d, src, n * sizeof *src);
        return;
    }
    for (size_t i = 0; i < n; i++) vijp_mat_set_entry_d(a, i, src[i]);
}

double vijp_mat_get_d(const vijp_mat *a, size_t i)
{
    if (i >= vijp_mat_len(a)) refuse_out_of_range("vijp_mat_get_d", i + 1, vijp_mat_len(a));
    mpfr_t v;
    return a->d ? a->d[i] : mpfr_get_d(mp_at(a, i, v), MPFR_RNDN);
}

void vijp_mat_get_mpfr(const vijp_mat *a, mpfr_t *out)
{
    mpfr_t v;
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++) {
        if (a->d) mpfr_set_d(out[i], a->d[i], MPFR_RNDN);
        else mpfr_set(out[i], mp_at(a, i, v), MPFR_RNDN);
    }
}

/* Whether every entry of a packed block is a number: its heads alone
 * (a drift reference level is 16.8M values at dense:256, depth 256, whose
 * MPFR views cost as much as the comparison's double arithmetic). */
static int packed_all_numbers(const vijp_packed *pk)
{
    unsigned bad = 0;
    for (size_t i = 0; i < pk->n; i++) {
        unsigned c = pk->head[i] & VIJP_PACKED_CODE;
        bad |= c == MPFR_NAN_KIND || c == MPFR_INF_KIND;
    }
    return !bad;
}

/* Whether n doubles are all finite: their exponent fields, without a
 * branch a value (the engines' gradients, checked after every run). */
static int doubles_all_finite(const double *x, size_t n)
{
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &x[i], sizeof b);
        bad |= (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
    }
    return !bad;
}

/* Whether n MPFR values are all numbers: their exponent fields (NaN and
 * Inf are two of its values, mpfr.h's macros), without a call or a branch
 * a value (the drift reference's parameter gradients, MPFR-held until the
 * memo packs them: 16.8M values a level at dense:256, depth 256). */
static int mpfr_all_numbers(const mpfr_t *m, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) bad |= (unsigned)mpfr_nan_p(m[i]) | (unsigned)mpfr_inf_p(m[i]);
    return !bad;
}

int vijp_mat_check_finite(const vijp_mat *a, const char *what, vijp_error *err)
{
    /* the common answer at once; else the loop below finds the first and names it */
    size_t n = vijp_mat_len(a);
    if (a->d ? doubles_all_finite(a->d, n)
             : a->m ? mpfr_all_numbers((const mpfr_t *)a->m, n) : !a->packed || packed_all_numbers(a->packed))
        return 0;
    mpfr_t v;
    for (size_t i = 0; i < n; i++) {
        int finite = a->d ? isfinite(a->d[i]) : mpfr_number_p(mp_at(a, i, v));
        if (!finite)
            return vijp_fail(err, VIJP_EDOMAIN, "%s: entry %zu (row %zu, column %zu) is %s", what, i,
                             i % (a->rows ? a->rows : 1), i / (a->rows ? a->rows : 1),
                             (a->d ? isnan(a->d[i]) : mpfr_nan_p(mp_at(a, i, v))) ? "NaN" : "infinite");
    }
    return 0;
}

/* A helper's result, rounded to the storage of a mixed format (MX: by
 * blocks once the whole result is there, vijp_mat_store). */
static void stored(vijp_mat *a, size_t i)
{
    if (a->fmt->mixed && !a->fmt->mx_block && !a->fmt->tensor_scaled) store_entry(a, i);
}

/* a := b − c (op '-') or b ⊙ c ('*') entrywise, each entry rounded in a's
 * format, then stored as a gradient (mat.h).  Matrices of one holding:
 * doubles for double and the formats of vijp_format_values_double (of the
 * arithmetic grids arith_natively takes, natively; of the others through
 * MPFR twins), MPFR otherwise. */
static void entrywise(vijp_mat *a, const vijp_mat *b, const vijp_mat *c, char op)
{
    size_t n = vijp_mat_len(a);
    refuse_packed(a, "vijp_mat_sub or vijp_mat_mul_elem"), refuse_packed(b, "vijp_mat_sub or vijp_mat_mul_elem");
    refuse_packed(c, "vijp_mat_sub or vijp_mat_mul_elem");
    vijp_narrow g;
    if (a->d && !held_d(a)) { /* double */
        for (size_t i = 0; i < n; i++) a->d[i] = op == '-' ? b->d[i] - c->d[i] : b->d[i] * c->d[i];
        return;
    }
    if (a->d && b->d && c->d && arith_natively(a->fmt, &g)) {
        for (size_t i = 0; i < n; i++) a->d[i] = vijp_narrow_round(op == '-' ? b->d[i] - c->d[i] : b->d[i] * c->d[i], &g);
        vijp_mat_store_as(a, VIJP_STORE_GRADIENT); /* mixed: to storage, MX and tensor scales included */
        return;
    }
    if (a->d || b->d || c->d) { /* a format arith_natively leaves (":ftz", wider ones): MPFR twins */
        vijp_mat ta, tb, tc;
        vijp_mat_init_mp(&ta, a, 0), vijp_mat_init_mp(&tb, b, 1), vijp_mat_init_mp(&tc, c, 1);
        entrywise(&ta, &tb, &tc, op);
        vijp_mat_put_mp(a, &ta);
        vijp_mat_clear(&ta), vijp_mat_clear(&tb), vijp_mat_clear(&tc);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (op == '-') vo_sub(a->m[i], b->m[i], c->m[i], a->fmt);
        else vo_mul(a->m[i], b->m[i], c->m[i], a->fmt);
        stored(a, i);
    }
    if (a->fmt->mx_block || a->fmt->tensor_scaled) vijp_mat_store_as(a, VIJP_STORE_GRADIENT); /* mat.h */
}

void vijp_mat_sub(vijp_mat *a, const vijp_mat *b, const vijp_mat *c) { entrywise(a, b, c, '-'); }

void vijp_mat_mul_elem(vijp_mat *a, const vijp_mat *b, const vijp_mat *c) { entrywise(a, b, c, '*'); }

/* Same format, so exact whichever way each holds its values. */
void vijp_mat_copy_range(vijp_mat *dst, size_t doff, const vijp_mat *src, size_t soff, size_t count)
{
    mpfr_t v;
    refuse_packed(dst, "vijp_mat_copy_range (into)");
    if (doff > vijp_mat_len(dst) || count > vijp_mat_len(dst) - doff)
        refuse_out_of_range("vijp_mat_copy_range (into)", doff + count, vijp_mat_len(dst));
    if (soff > vijp_mat_len(src) || count > vijp_mat_len(src) - soff)
        refuse_out_of_range("vijp_mat_copy_range (from)", soff + count, vijp_mat_len(src));
    if (dst->d && src->d) memcpy(dst->d + doff, src->d + soff, count * sizeof(double));
    else if (dst->d)
        for (size_t i = 0; i < count; i++) dst->d[doff + i] = vijp_emu_get1(mp_at(src, soff + i, v));
    else if (src->d)
        for (size_t i = 0; i < count; i++) vijp_emu_set1(dst->m[doff + i], src->d[soff + i]);
    else
        for (size_t i = 0; i < count; i++) mpfr_set(dst->m[doff + i], mp_at(src, soff + i, v), MPFR_RNDN);
}

void vijp_mat_tdot(vijp_mat *r, const vijp_mat *A, const vijp_mat *g)
{
    size_t m = A->rows;
    refuse_packed(r, "vijp_mat_tdot"), refuse_packed(A, "vijp_mat_tdot"), refuse_packed(g, "vijp_mat_tdot");
    if (held_d(r) || (!r->d && (A->d || g->d))) { /* vo_dot_acc's MPFR model (tc formats' blocks included): twins */
        vijp_mat tr, tA, tg;
        vijp_mat_init_mp(&tr, r, 0), vijp_mat_init_mp(&tA, A, 1), vijp_mat_init_mp(&tg, g, 1);
        vijp_mat_tdot(&tr, &tA, &tg);
        vijp_mat_put_mp(r, &tr);
        vijp_mat_clear(&tr), vijp_mat_clear(&tA), vijp_mat_clear(&tg);
        return;
    }
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
        vo_dot_acc(r->m[j], &A->m[j * m], 1, g->m, 1, m, p, r->fmt);
    }
    vijp_mat_store_as(r, VIJP_STORE_GRADIENT); /* Tᵀg (mat.h) */
    mpfr_clear(p);
}

/* Into an MX format: each column's values exact at the source's precision
 * (53 bits for doubles), then quantised by blocks down it. */
static void convert_mx(vijp_mat *dst, const vijp_mat *src)
{
    size_t rows = dst->rows, b = (size_t)dst->fmt->mx_block;
    mpfr_prec_t p = !src->d && src->fmt->prec > 53 ? src->fmt->prec : 53;
    mpfr_t *t = vijp_alloc_array(rows ? rows : 1, sizeof *t), view;
    for (size_t i = 0; i < rows; i++) mpfr_init2(t[i], p);
    mpfr_t *w = dst->d ? mp_block_new(rows, dst->fmt->prec) : NULL; /* a double-held dst's column (line_put) */
    for (size_t j = 0; j < dst->cols; j++) {
        for (size_t i = 0; i < rows; i++) {
            if (src->d) mpfr_set_d(t[i], src->d[i + j * rows], MPFR_RNDN); /* exact */
            else mpfr_set(t[i], mp_at(src, i + j * rows, view), MPFR_RNDN); /* exact */
        }
        mpfr_t *col = w ? w : dst->m + j * rows;
        for (size_t k = 0; k < rows; k += b)
            vijp_mx_block(dst->fmt, col + k, 1, t + k, 1, rows - k < b ? rows - k : b);
        if (w) line_put(dst, j * rows, 1, w, rows);
    }
    for (size_t i = 0; i < rows; i++) mpfr_clear(t[i]);
    free(t), free(w);
}

void vijp_mat_convert(vijp_mat *dst, const vijp_mat *src)
{
    mpfr_t view; /* a packed source's entry (mp_at) */
    refuse_packed(dst, "vijp_mat_convert (into)");
    /* Into plain MPFR (mpfr:P, the drift reference): vo_store is mpfr_set
     * there, and rounding the value once, straight from the source, is what
     * the two steps below give (the first is exact).  One call per entry:
     * the drift reference copies whole problems this way (drift_memo.c). */
    if (dst->m && !dst->fmt->emulated && !dst->fmt->mixed) {
        for (size_t i = 0, n = vijp_mat_len(dst); i < n; i++) {
            if (src->d) vijp_emu_set1(dst->m[i], src->d[i]); /* rounds through mpfr_set_d below 53 bits; 16.8M per dense:256 reference */
            else mpfr_set(dst->m[i], mp_at(src, i, view), MPFR_RNDN);
        }
        return;
    }
    if (held_d(dst) && src->d && rounds_natively(dst->fmt)) { /* vo_store of a double: one rounding, natively */
        vijp_narrow g = vijp_narrow_of(dst->fmt);
        for (size_t i = 0, n = vijp_mat_len(dst); i < n; i++) dst->d[i] = vijp_narrow_round(src->d[i], &g);
        return;
    }
    if ((dst->m || held_d(dst)) && dst->fmt->tensor_scaled) { /* one tensor, from the source's values */
        scaled_store(dst, src, NULL, VIJP_STORE_FORWARD, 0, 0, 1);
        return;
    }
    if ((dst->m || held_d(dst)) && dst->fmt->mx_block) { /* blocks down each column, from the source's values */
        convert_mx(dst, src);
        return;
    }
    mpfr_t t, v; /* v: a double-held dst's value, at its format's precision as an MPFR-held one's */
    mpfr_init2(t, src->fmt->prec > 53 ? src->fmt->prec : 53), mpfr_init2(v, dst->fmt->prec);
    for (size_t i = 0, n = vijp_mat_len(dst); i < n; i++) {
        if (src->d) mpfr_set_d(t, src->d[i], MPFR_RNDN);
        else mpfr_set(t, mp_at(src, i, view), MPFR_RNDN); /* exact: same precision */
        if (held_d(dst)) vo_store(v, t, dst->fmt), dst->d[i] = mpfr_get_d(v, MPFR_RNDN); /* exact: a value of it */
        else if (dst->d) dst->d[i] = mpfr_get_d(t, MPFR_RNDN);
        else vo_store(dst->m[i], t, dst->fmt); /* vo_set unless mixed */
    }
    mpfr_clear(t), mpfr_clear(v);
}

/* .npy read and write, after numpy/lib/format.py ("Format Version 1.0",
 * "Format Version 2.0", "Format Version 3.0"; NEP 1):
 *
 *   "\x93NUMPY", major, minor            8 bytes; versions 1.0, 2.0, 3.0
 *   HEADER_LEN                           little-endian, 2 bytes (1.0) or 4 (2.0, 3.0)
 *   header                               a Python dict literal with exactly the keys
 *                                        'descr', 'fortran_order' and 'shape', padded
 *                                        with spaces and ended by '\n' so that the
 *                                        data starts at a multiple of 64 bytes
 *   data                                 prod(shape) elements of descr, C order unless
 *                                        fortran_order
 *
 * Versions 2.0 and 3.0 differ from 1.0 only in the header's length field
 * (4 bytes, for headers over 65535 bytes) and encoding (3.0: UTF-8); the
 * header we accept is ASCII in all three. */
#include "vijp/array_io.h"
#include "file.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[] = "\x93NUMPY";
enum { MAGIC_LEN = 6 };

void vijp_array_clear(vijp_array *a)
{
    vijp_free(a->data);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------- the header's dict literal */

typedef struct {
    const char *p, *end, *start;
    const char *name;
    vijp_error *err;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && strchr(" \t\n\r\f", *c->p) && *c->p) c->p++;
}

static int peek(cursor *c, char ch)
{
    skip_ws(c);
    return c->p < c->end && *c->p == ch;
}

static int eat(cursor *c, char ch)
{
    if (!peek(c, ch)) return 0;
    c->p++;
    return 1;
}

static int malformed(cursor *c, const char *wanted)
{
    return aio_bad(c->err, c->name, "malformed .npy header at byte %zu: expected %s", (size_t)(c->p - c->start), wanted);
}

/* A Python string literal without escapes: 'x' or "x".  NumPy writes no
 * escapes in the keys or in the descr of a plain dtype. */
static int string(cursor *c, char *out, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, "a quoted string");
    char q = *c->p++;
    size_t n = 0;
    for (; c->p < c->end && *c->p != q; c->p++) {
        if (*c->p == '\\' || (unsigned char)*c->p < 0x20 || (unsigned char)*c->p >= 0x7f)
            return malformed(c, "a plain ASCII string");
        if (n + 1 < cap) out[n++] = *c->p;
        else return malformed(c, "a shorter string");
    }
    if (c->p >= c->end) return malformed(c, "the end of a string");
    c->p++;
    out[n] = 0;
    return 0;
}

static int boolean(cursor *c, int *v)
{
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "True", 4)) *v = 1, c->p += 4;
    else if (left >= 5 && !memcmp(c->p, "False", 5)) *v = 0, c->p += 5;
    else return malformed(c, "True or False");
    return 0;
}

/* A tuple of non-negative Python ints: "()", "(3,)", "(2, 3)", "(2, 3,)".
 * "(3)" is the int 3 in Python, not a tuple, and NumPy refuses it too. */
static int shape_tuple(cursor *c, size_t *shape, size_t *ndim)
{
    if (!eat(c, '(')) return peek(c, '[') ? aio_bad(c->err, c->name, "the shape is a list; .npy writes a tuple")
                                          : malformed(c, "the shape, a tuple");
    size_t n = 0;
    int comma = 0;
    while (!eat(c, ')')) {
        if (n && !comma) return malformed(c, "',' or ')' in the shape");
        skip_ws(c);
        if (c->p < c->end && *c->p == '-') return aio_bad(c->err, c->name, "negative dimension in the shape");
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return malformed(c, "a dimension (a non-negative integer)");
        if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9')
            return malformed(c, "a dimension without leading zeros");
        size_t v = 0;
        for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
            if (v > (SIZE_MAX - 9) / 10) return aio_bad(c->err, c->name, "a dimension of the shape is too large");
            v = 10 * v + (size_t)(*c->p - '0');
        }
        if (n == VIJP_ARRAY_MAX_DIMS)
            return aio_bad(c->err, c->name, "more than %d dimensions", VIJP_ARRAY_MAX_DIMS);
        shape[n++] = v;
        comma = eat(c, ',');
    }
    if (n == 1 && !comma) return aio_bad(c->err, c->name, "the shape (%zu) is not a tuple (a 1-tuple is written (%zu,))", shape[0], shape[0]);
    *ndim = n;
    return 0;
}

/* The element types read: little-endian IEEE floats.  '>' (big-endian) is
 * refused, and so are '=' and '|' for them: '=' is the writer's native order,
 * unknown to the reader, and '|' means "not applicable", which NumPy uses
 * only for one-byte types. */
static int descr_size(cursor *c, const char *descr, size_t *size)
{
    static const char *const ok[] = {"<f8", "<f4", "<f2"};
    static const size_t sizes[] = {8, 4, 2};
    for (int k = 0; k < 3; k++)
        if (!strcmp(descr, ok[k])) return *size = sizes[k], 0;
    if ((descr[0] == '>' || descr[0] == '=' || descr[0] == '|') && descr[1] == 'f' && strchr("248", descr[2]) && !descr[3])
        return aio_bad(c->err, c->name, "element type '%s' is %s; vijp reads little-endian '<f8', '<f4' and '<f2'",
                       descr, descr[0] == '>' ? "big-endian" : "of unstated byte order");
    return aio_bad(c->err, c->name, "element type '%s' is not supported; vijp reads '<f8', '<f4' and '<f2'", descr);
}

/* Parse the header text (hlen bytes at h) into shape and element size. */
static int header(const char *h, size_t hlen, const char *name, vijp_array *out, size_t *isize, vijp_error *err)
{
    cursor c = {h, h + hlen, h, name, err};
    char key[32], descr[32];
    int have[3] = {0, 0, 0}, fortran = 0, rc;
    if (!eat(&c, '{')) return malformed(&c, "'{'");
    while (!eat(&c, '}')) {
        if ((rc = string(&c, key, sizeof key))) return rc;
        if (!eat(&c, ':')) return malformed(&c, "':'");
        int k = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 : !strcmp(key, "shape") ? 2 : -1;
        if (k < 0) return aio_bad(err, name, "unexpected key '%s' in the .npy header", key);
        if (have[k]++) return aio_bad(err, name, "key '%s' twice in the .npy header", key);
        if (k == 0 && peek(&c, '[')) return aio_bad(err, name, "structured element types are not supported");
        if ((rc = k == 0 ? string(&c, descr, sizeof descr) : k == 1 ? boolean(&c, &fortran)
                                                            : shape_tuple(&c, out->shape, &out->ndim)))
            return rc;
        if (!eat(&c, ',') && !peek(&c, '}')) return malformed(&c, "',' or '}'");
    }
    skip_ws(&c);
    if (c.p != c.end) return malformed(&c, "only spaces after the dict");
    for (int k = 0; k < 3; k++)
        if (!have[k]) return aio_bad(err, name, "the .npy header lacks '%s'", k == 0 ? "descr" : k == 1 ? "fortran_order" : "shape");
    if ((rc = descr_size(&c, descr, isize))) return rc;
    if (fortran && out->ndim > 1)
        return aio_bad(err, name, "Fortran-order arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
    return 0;
}

int vijp_npy_parse(const void *buf, size_t len, const char *name, vijp_array *out, vijp_error *err)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    if (!name) name = "<memory>";
    if (!len) return aio_bad(err, name, "empty file, not a .npy file");
    if (memcmp(b, magic, len < MAGIC_LEN ? len : MAGIC_LEN))
        return aio_bad(err, name, "not a .npy file (it does not start with the magic string \\x93NUMPY)");
    if (len < MAGIC_LEN + 2) return aio_bad(err, name, "truncated .npy file (%zu bytes)", len);
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return aio_bad(err, name, ".npy format version %u.%u is not supported (1.0, 2.0 and 3.0 are)", major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre) return aio_bad(err, name, "truncated .npy file (%zu bytes, its preamble needs %zu)", len, pre);
    size_t hlen = (size_t)aio_le(b + 8, (int)pre - 8);
    if (hlen > VIJP_NPY_MAX_HEADER)
        return aio_bad(err, name, ".npy header of %zu bytes exceeds the limit of %d (NumPy's max_header_size)", hlen,
                       VIJP_NPY_MAX_HEADER);
    if (len - pre < hlen)
        return aio_bad(err, name, "truncated .npy file: the header needs %zu bytes, %zu follow the preamble", hlen, len - pre);
    size_t isize = 8;
    int rc = header((const char *)b + pre, hlen, name, out, &isize, err);
    if (rc) return rc;
    size_t n = 1;
    for (size_t k = 0; k < out->ndim; k++) n = out->shape[k] ? n : 0;
    for (size_t k = 0; n && k < out->ndim; k++) {
        if (out->shape[k] > SIZE_MAX / isize / n) return aio_bad(err, name, "the shape is too large");
        n *= out->shape[k];
    }
    char sh[64];
    size_t have = len - pre - hlen;
    if (have != n * isize) {
        vijp_array_shape_str(out->ndim, out->shape, sh, sizeof sh);
        return aio_bad(err, name, "%s: shape %s needs %zu bytes of data, the file has %zu after its header",
                       have < n * isize ? "truncated .npy file" : "size mismatch", sh, n * isize, have);
    }
    const unsigned char *d = b + pre + hlen;
    out->len = n;
    out->data = n ? vijp_alloc_array(n, sizeof *out->data) : NULL;
    for (size_t i = 0; i < n; i++)
        out->data[i] = isize == 8 ? aio_f64(aio_le(d + 8 * i, 8))
                       : isize == 4 ? aio_f32((uint32_t)aio_le(d + 4 * i, 4)) : aio_f16((unsigned)aio_le(d + 2 * i, 2));
    return 0;
}

int vijp_npy_read(const char *path, vijp_array *out, vijp_error *err)
{
    unsigned char *b;
    size_t len;
    memset(out, 0, sizeof *out);
    int rc = vijp_input_read(path, &b, &len, err);
    if (rc) return rc;
    rc = vijp_npy_parse(b, len, path, out, err);
    vijp_free(b);
    return rc;
}

int vijp_npy_read_rows(const char *path, size_t cols, size_t rows, vijp_array *out, vijp_error *err)
{
    int rc = vijp_npy_read(path, out, err);
    if (rc) return rc;
    if (out->ndim == 2 && out->shape[0] && (!rows || out->shape[0] == rows) && (!cols || out->shape[1] == cols)) return 0;
    char got[128], r[32] = "rows", c[32] = "width";
    vijp_array_shape_str(out->ndim, out->shape, got, sizeof got);
    if (rows) snprintf(r, sizeof r, "%zu", rows);
    if (cols) snprintf(c, sizeof c, "%zu", cols);
    vijp_array_clear(out);
    return vijp_fail(err, VIJP_EDIM, "%s: shape %s, want [%s, %s] (a row per sample)", path, got, r, c);
}

/* ------------------------------------------------------------------- writing */

/* The header NumPy itself writes for '<f8' in C order (its keys sorted, a
 * trailing ", "), padded so that the data starts at a multiple of 64, in
 * version 1.0 unless its length needs 2.0's 4-byte field.  Returns the
 * bytes up to the data. */
static size_t npy_header(size_t ndim, const size_t *shape, char *h, size_t cap)
{
    char sh[VIJP_ARRAY_MAX_DIMS * 22 + 8];
    vijp_array_shape_str(ndim, shape, sh, sizeof sh);
    int text = snprintf(h + 12, cap - 12, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }", sh);
    size_t pre = 10, total;
    for (;;) {
        total = (pre + (size_t)text + 1 + 63) / 64 * 64; /* + '\n', then round up */
        if (pre == 12 || total - pre <= 65535) break;
        pre = 12;
    }
    if (pre == 10) memmove(h + 10, h + 12, (size_t)text);
    memcpy(h, magic, MAGIC_LEN);
    h[6] = pre == 10 ? 1 : 2, h[7] = 0;
    aio_put_le((unsigned char *)h + 8, total - pre, (int)pre - 8);
    memset(h + pre + text, ' ', total - pre - (size_t)text - 1);
    h[total - 1] = '\n';
    return total;
}

typedef struct {
    size_t ndim;
    const size_t *shape;
    const double *data;
    size_t n;
} npy_src;

static int check_shape(size_t ndim, const size_t *shape, size_t *n, vijp_error *err)
{
    if (ndim > VIJP_ARRAY_MAX_DIMS) return vijp_fail(err, VIJP_EINVAL, "an array of %zu dimensions (at most %d)", ndim, VIJP_ARRAY_MAX_DIMS);
    *n = 1;
    for (size_t k = 0; k < ndim; k++) *n = shape[k] ? *n : 0;
    for (size_t k = 0; *n && k < ndim; k++) {
        if (shape[k] > (SIZE_MAX - 4096) / 8 / *n) return vijp_fail(err, VIJP_EINVAL, "an array too large to write");
        *n *= shape[k];
    }
    return 0;
}

static void encode_values(const double *x, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &x[i], 8);
        aio_put_le(out + 8 * i, u, 8);
    }
}

int vijp_npy_encode(size_t ndim, const size_t *shape, const double *data, unsigned char **buf, size_t *len,
                    vijp_error *err)
{
    size_t n;
    int rc = check_shape(ndim, shape, &n, err);
    if (rc) return rc;
    char h[2048];
    size_t hl = npy_header(ndim, shape, h, sizeof h);
    *len = hl + 8 * n;
    *buf = vijp_alloc(*len);
    memcpy(*buf, h, hl);
    encode_values(data, n, *buf + hl);
    return 0;
}

static void emit(aio_out *o, const void *ctx)
{
    const npy_src *s = ctx;
    char h[2048];
    aio_put(o, h, npy_header(s->ndim, s->shape, h, sizeof h));
    unsigned char chunk[8 * 512];
    for (size_t i = 0; i < s->n; i += 512) {
        size_t k = s->n - i < 512 ? s->n - i : 512;
        encode_values(s->data + i, k, chunk);
        aio_put(o, chunk, 8 * k);
    }
}

int vijp_npy_write(const char *path, size_t ndim, const size_t *shape, const double *data, vijp_error *err)
{
    npy_src s = {ndim, shape, data, 0};
    int rc = check_shape(ndim, shape, &s.n, err);
    return rc ? rc : aio_write_atomic(path, emit, &s, err);
}

/* safetensors read, after the format's README ("Format"):
 *
 *   8 bytes   N, an unsigned little-endian 64-bit integer: the header's size
 *   N bytes   a UTF-8 JSON object starting with '{' (it may be padded with
 *             spaces): {"NAME": {"dtype": "F16", "shape": [1, 16, 256],
 *             "data_offsets": [BEGIN, END]}, ...}, plus an optional
 *             "__metadata__" string-to-string map (ignored here); duplicate
 *             keys are disallowed
 *   the rest  the byte buffer: offsets are relative to its start, END is one
 *             past the tensor's last byte, data little-endian in C order; the
 *             buffer "needs to be entirely indexed, and cannot contain holes"
 *
 * Every tensor's offsets are checked at parse time, as the reference
 * implementation's validation does (sorted by offset, each starting where the
 * previous ends, the last ending at the buffer's end, each END − BEGIN equal
 * to its shape's size times its dtype's): out of range, overlapping, holes
 * and trailing bytes are refused, each with its own message. */
#include "vijp/array_io.h"
#include "file.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The dtypes of the README with their sizes: all are checked for offsets,
 * the floating-point ones with an exact double image are converted. */
static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"BF16", 2}, {"F16", 2}, /* read: the first four */
    {"I64", 8}, {"U64", 8}, {"I32", 4},  {"U32", 4}, {"I16", 2}, {"U16", 2},
    {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
};
enum { READABLE = 4 };

static int dtype_index(const char *s)
{
    for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++)
        if (!strcmp(s, dtypes[k].name)) return (int)k;
    return -1;
}

void vijp_safetensors_clear(vijp_safetensors *st)
{
    for (size_t i = 0; i < st->n; i++) vijp_free(st->tensors[i].name), vijp_free(st->tensors[i].shape);
    vijp_free(st->tensors);
    vijp_free(st->owned);
    vijp_free(st->source);
    memset(st, 0, sizeof *st);
}

/* A non-negative JSON integer. */
static int size_of(const json_t *j, size_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
    *v = (size_t)json_integer_value(j);
    return 1;
}

/* One header entry, checked on its own: dtype, shape, offsets in range and
 * of the shape's size. */
static int entry(const char *src, const char *key, const json_t *v, size_t data_len, vijp_tensor_info *t, vijp_error *err)
{
    if (!json_is_object(v)) return aio_bad(err, src, "tensor '%.80s': its header entry is not an object", key);
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                 *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !sh || !off)
        return aio_bad(err, src, "tensor '%.80s': its header entry needs \"dtype\" (a string), \"shape\" and \"data_offsets\"", key);
    int d = dtype_index(json_string_value(dt));
    if (d < 0) return aio_bad(err, src, "tensor '%.80s': unknown dtype '%.20s'", key, json_string_value(dt));
    snprintf(t->dtype, sizeof t->dtype, "%s", dtypes[d].name);
    if (!json_is_array(sh)) return aio_bad(err, src, "tensor '%.80s': \"shape\" is not an array", key);
    t->ndim = json_array_size(sh);
    if (t->ndim > VIJP_ARRAY_MAX_DIMS) return aio_bad(err, src, "tensor '%.80s': more than %d dimensions", key, VIJP_ARRAY_MAX_DIMS);
    t->shape = vijp_alloc_array(t->ndim ? t->ndim : 1, sizeof *t->shape);
    size_t n = 1, zero = 0;
    for (size_t k = 0; k < t->ndim; k++) {
        if (!size_of(json_array_get(sh, k), &t->shape[k]))
            return aio_bad(err, src, "tensor '%.80s': shape entry %zu is not a non-negative integer", key, k);
        zero |= t->shape[k] == 0;
    }
    for (size_t k = 0; !zero && k < t->ndim; k++) {
        if (t->shape[k] > SIZE_MAX / dtypes[d].size / n) return aio_bad(err, src, "tensor '%.80s': the shape is too large", key);
        n *= t->shape[k];
    }
    n = zero ? 0 : n * dtypes[d].size;
    if (!json_is_array(off) || json_array_size(off) != 2 || !size_of(json_array_get(off, 0), &t->begin) ||
        !size_of(json_array_get(off, 1), &t->end))
        return aio_bad(err, src, "tensor '%.80s': \"data_offsets\" is not [BEGIN, END] with non-negative integers", key);
    if (t->end < t->begin)
        return aio_bad(err, src, "tensor '%.80s': data offsets [%zu, %zu] end before they begin", key, t->begin, t->end);
    if (t->end > data_len)
        return aio_bad(err, src, "tensor '%.80s': data offsets [%zu, %zu] out of range: the data buffer has %zu bytes", key,
                       t->begin, t->end, data_len);
    if (t->end - t->begin != n) {
        char s[64];
        vijp_array_shape_str(t->ndim, t->shape, s, sizeof s);
        return aio_bad(err, src, "tensor '%.80s': size mismatch: shape %s of %s needs %zu bytes, its offsets hold %zu", key, s,
                       t->dtype, n, t->end - t->begin);
    }
    return 0;
}

static int by_offset(const void *a, const void *b)
{
    const vijp_tensor_info *x = *(const vijp_tensor_info *const *)a, *y = *(const vijp_tensor_info *const *)b;
    return x->begin != y->begin ? (x->begin > y->begin) - (x->begin < y->begin) : (x->end > y->end) - (x->end < y->end);
}

/* The tensors tile the buffer: no overlap, no hole, nothing after them. */
static int tiling(const vijp_safetensors *st, vijp_error *err)
{
    const vijp_tensor_info **o = vijp_alloc_array(st->n ? st->n : 1, sizeof *o);
    for (size_t i = 0; i < st->n; i++) o[i] = &st->tensors[i];
    qsort(o, st->n, sizeof *o, by_offset);
    size_t at = 0;
    const char *prev = NULL;
    int rc = 0;
    for (size_t i = 0; i < st->n && !rc; i++) {
        if (o[i]->begin < at)
            rc = aio_bad(err, st->source, "tensors '%.60s' and '%.60s' overlap (bytes [%zu, %zu) and [%zu, %zu))", prev,
                         o[i]->name, o[i - 1]->begin, at, o[i]->begin, o[i]->end);
        else if (o[i]->begin > at)
            rc = aio_bad(err, st->source, "the data buffer has a hole: bytes [%zu, %zu) belong to no tensor", at, o[i]->begin);
        at = o[i]->end, prev = o[i]->name;
    }
    if (!rc && at != st->data_len)
        rc = aio_bad(err, st->source, "the data buffer has %zu bytes after the last tensor's end (%zu), which belong to no tensor",
                     st->data_len - at, at);
    vijp_free(o);
    return rc;
}

int vijp_safetensors_parse(const void *buf, size_t len, const char *name, vijp_safetensors *out, vijp_error *err)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    out->source = vijp_strdup(name ? name : "<memory>");
    const char *src = out->source;
    int rc = 0;
    if (len < 8) {
        rc = aio_bad(err, src, "truncated safetensors file (%zu bytes; its header size alone takes 8)", len);
        goto fail;
    }
    unsigned long long N = aio_le(b, 8);
    if (N > VIJP_SAFETENSORS_MAX_HEADER) {
        rc = aio_bad(err, src, "safetensors header size %llu exceeds the limit of %u bytes", N, VIJP_SAFETENSORS_MAX_HEADER);
        goto fail;
    }
    if (N > len - 8) {
        rc = aio_bad(err, src, "truncated safetensors file: the header needs %llu bytes, %zu follow its size", N, len - 8);
        goto fail;
    }
    if (N == 0 || b[8] != '{') {
        rc = aio_bad(err, src, "the safetensors header does not start with '{'");
        goto fail;
    }
    json_error_t je;
    json_t *root = json_loadb((const char *)b + 8, (size_t)N, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        rc = aio_bad(err, src, "bad JSON in the safetensors header at byte %d: %s", je.position, je.text);
        goto fail;
    }
    out->data = b + 8 + N, out->data_len = len - 8 - (size_t)N;
    out->tensors = vijp_alloc_array(json_object_size(root) ? json_object_size(root) : 1, sizeof *out->tensors);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        vijp_tensor_info *t = &out->tensors[out->n++];
        t->name = vijp_strdup(key);
        if ((rc = entry(src, key, v, out->data_len, t, err))) break;
    }
    json_decref(root);
    if (!rc) rc = tiling(out, err);
    if (!rc) return 0;
fail:
    vijp_safetensors_clear(out);
    return rc;
}

int vijp_safetensors_read(const char *path, vijp_safetensors *out, vijp_error *err)
{
    unsigned char *b;
    size_t len;
    memset(out, 0, sizeof *out);
    int rc = vijp_input_read(path, &b, &len, err);
    if (rc) return rc;
    if ((rc = vijp_safetensors_parse(b, len, path, out, err))) {
        vijp_free(b);
        return rc;
    }
    out->owned = b;
    return 0;
}

int vijp_safetensors_tensor(const vijp_safetensors *st, const char *tensor, vijp_array *out, vijp_error *err)
{
    memset(out, 0, sizeof *out);
    const vijp_tensor_info *t = NULL;
    for (size_t i = 0; i < st->n && !t; i++)
        if (!strcmp(st->tensors[i].name, tensor)) t = &st->tensors[i];
    if (!t) return aio_bad(err, st->source, "no tensor named '%.80s'", tensor);
    int d = dtype_index(t->dtype);
    if (d >= READABLE)
        return aio_bad(err, st->source, "tensor '%.80s' has dtype %s; vijp reads F64, F32, BF16 and F16", tensor, t->dtype);
    size_t sz = dtypes[d].size, n = (t->end - t->begin) / sz;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, t->ndim * sizeof *t->shape);
    out->len = 1;
    for (size_t k = 0; k < t->ndim; k++) out->len *= t->shape[k];
    out->data = n ? vijp_alloc_array(n, sizeof *out->data) : NULL;
    const unsigned char *p = st->data + t->begin;
    for (size_t i = 0; i < n; i++, p += sz)
        out->data[i] = d == 0 ? aio_f64(aio_le(p, 8))
                       : d == 1 ? aio_f32((uint32_t)aio_le(p, 4))
                       : d == 2 ? aio_f32((uint32_t)aio_le(p, 2) << 16)  /* BF16: the top half of a binary32 */
                                : aio_f16((unsigned)aio_le(p, 2));
    return 0;
}

/* Arrays in and out: NumPy's .npy (read and write) and safetensors (read).
 *
 * Both formats are read into doubles, exactly (every accepted element type
 * is a subset of binary64), in C order: the last index runs fastest, as in
 * both formats.  Anything else is refused with VIJP_EINVAL and a message
 * that names the file (or the name given for a buffer) and the problem:
 * Fortran order, big-endian or native-order element types, other element
 * types, shapes whose size disagrees with the data, truncated files,
 * oversized headers, safetensors offsets out of range, overlapping or with
 * holes.  Reading or writing a file that fails is VIJP_EIO, naming the file
 * with strerror; a file that is not a regular file (a device, a folder, a
 * pipe) is refused before it is read, VIJP_EINVAL (vijp_input_read).  Out of
 * memory is fatal (include/vijp/error.h).
 *
 * Formats, as cited in the code:
 *   .npy         numpy/lib/format.py, "Format Version 1.0/2.0/3.0" (NEP 1):
 *                "\x93NUMPY", major, minor, a little-endian header length
 *                (2 bytes in version 1, 4 in versions 2 and 3), then a Python
 *                dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
 *                padded with spaces and ended by '\n', then the data.
 *   safetensors  the safetensors README, "Format": an 8-byte little-endian
 *                header size N, N bytes of JSON {"NAME": {"dtype", "shape",
 *                "data_offsets": [BEGIN, END]}, "__metadata__": {...}}, then
 *                the byte buffer, which the tensors must cover exactly. */
#ifndef VIJP_ARRAY_IO_H
#define VIJP_ARRAY_IO_H

#include "vijp/api.h"
#include <stddef.h>
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NumPy's own limit (NPY_MAXDIMS is 32 before NumPy 2, 64 from it). */
#define VIJP_ARRAY_MAX_DIMS 64

typedef struct {
    size_t ndim;                       /* 0: a scalar */
    size_t shape[VIJP_ARRAY_MAX_DIMS];
    size_t len;                        /* the product of the shape: values in data */
    double *data;                      /* C order; vijp_alloc'd (NULL when len is 0) */
} vijp_array;

VIJP_API void vijp_array_clear(vijp_array *a);
/* "(2, 3)", "(5,)", "()": a shape as Python writes a tuple (for messages). */
VIJP_API void vijp_array_shape_str(size_t ndim, const size_t *shape, char *buf, size_t size);

/* ------------------------------------------------------------ input files */

/* The whole of the input file path in *buf (vijp_alloc'd, free it with
 * vijp_free; *len bytes, then a NUL), as every reader of vijp reads one.
 * Regular files only: anything else (a device such as /dev/zero or
 * /dev/urandom, a folder, a pipe, a socket), also through a symbolic link, is
 * refused before a byte is read, with VIJP_EINVAL, "PATH: is a character
 * device, not a file".  A file that cannot be opened or read is VIJP_EIO,
 * "PATH: cannot open: strerror". */
VIJP_API VIJP_MUST_CHECK int vijp_input_read(const char *path, unsigned char **buf, size_t *len, vijp_error *err);

/* ------------------------------------------------------------------- .npy */

/* Largest header accepted, in bytes: NumPy's own reading limit
 * (max_header_size = 10000 in numpy.lib.format since 1.24). */
#define VIJP_NPY_MAX_HEADER 10000

/* Parse the bytes of a .npy file (versions 1.0, 2.0, 3.0; '<f8', '<f4' or
 * '<f2'; C order).  name stands for the bytes in messages (NULL: "<memory>"). */
VIJP_API VIJP_MUST_CHECK int vijp_npy_parse(const void *buf, size_t len, const char *name, vijp_array *out, vijp_error *err);
VIJP_API VIJP_MUST_CHECK int vijp_npy_read(const char *path, vijp_array *out, vijp_error *err);
/* A 2-D array of samples, a row each: [rows, cols], rows >= 1 (rows 0: any
 * number; cols 0: any width).  Another shape is VIJP_EDIM naming path, its
 * shape and the one wanted; out is then empty. */
VIJP_API VIJP_MUST_CHECK int vijp_npy_read_rows(const char *path, size_t cols, size_t rows, vijp_array *out, vijp_error *err);

/* The bytes of a .npy file holding data ('<f8', C order, version 1.0, or 2.0
 * if the header needs more than 65535 bytes): *buf is vijp_alloc'd.
 * VIJP_EINVAL when ndim exceeds VIJP_ARRAY_MAX_DIMS or the size overflows. */
VIJP_API VIJP_MUST_CHECK int vijp_npy_encode(size_t ndim, const size_t *shape, const double *data, unsigned char **buf,
                                    size_t *len, vijp_error *err);
/* The same, to path, atomically: written to a temporary file in the same
 * folder, flushed to disk (fsync) and renamed over path, so path holds its
 * old contents or the whole new array, never part of it.  A failure
 * (a full disk, a file size limit) is VIJP_EIO naming path, and removes the
 * temporary. */
VIJP_API VIJP_MUST_CHECK int vijp_npy_write(const char *path, size_t ndim, const size_t *shape, const double *data,
                                   vijp_error *err);

/* ------------------------------------------------------------ safetensors */

/* Largest header accepted: the reference implementation's MAX_HEADER_SIZE. */
#define VIJP_SAFETENSORS_MAX_HEADER 100000000u

typedef struct {
    char *name;
    char dtype[16];                    /* as in the file: "F64", "BF16", "I64", ... */
    size_t ndim, *shape;               /* shape: ndim entries (vijp_alloc'd) */
    size_t begin, end;                 /* byte offsets into the data buffer */
} vijp_tensor_info;

typedef struct {
    char *source;                      /* the file's name, for messages */
    size_t n;
    vijp_tensor_info *tensors;         /* in the header's order; __metadata__ is ignored */
    const unsigned char *data;         /* the byte buffer after the header */
    size_t data_len;
    unsigned char *owned;              /* the file's bytes, when read from a file */
} vijp_safetensors;

/* Parse the bytes of a safetensors file: header, dtypes, shapes and offsets
 * are all checked here (every tensor's offsets against its shape and dtype,
 * against the buffer's size and against each other).  out refers to buf,
 * which must outlive it. */
VIJP_API VIJP_MUST_CHECK int vijp_safetensors_parse(const void *buf, size_t len, const char *name, vijp_safetensors *out,
                                           vijp_error *err);
/* The same for a file (out owns a copy of its bytes). */
VIJP_API VIJP_MUST_CHECK int vijp_safetensors_read(const char *path, vijp_safetensors *out, vijp_error *err);
/* Tensor `tensor` converted exactly to double: dtypes F64, F32, BF16 and F16.
 * VIJP_EINVAL naming the file and the tensor when it is absent or of another
 * dtype. */
VIJP_API VIJP_MUST_CHECK int vijp_safetensors_tensor(const vijp_safetensors *st, const char *tensor, vijp_array *out,
                                            vijp_error *err);
VIJP_API void vijp_safetensors_clear(vijp_safetensors *st);

#ifdef __cplusplus
}
#endif

#endif

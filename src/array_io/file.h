/* Whole-file reads and atomic writes for the array readers and writers
 * (internal to src/array_io). */
#ifndef VIJP_ARRAY_IO_FILE_H
#define VIJP_ARRAY_IO_FILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "vijp/error.h"

/* Where an emitter writes: the first failure's errno sticks in err, and later
 * writes do nothing. */
typedef struct {
    int fd;
    int err;
} aio_out;
void aio_put(aio_out *o, const void *p, size_t n);

/* path := what emit writes, atomically (array_io.h, vijp_npy_write). */
VIJP_MUST_CHECK int aio_write_atomic(const char *path, void (*emit)(aio_out *o, const void *ctx), const void *ctx,
                                     vijp_error *err);

/* VIJP_EINVAL with "name: <problem>". */
int aio_bad(vijp_error *err, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Little-endian loads and stores, byte by byte (any host, any alignment). */
static inline unsigned long long aio_le(const unsigned char *p, int bytes)
{
    unsigned long long v = 0;
    for (int k = bytes - 1; k >= 0; k--) v = v << 8 | p[k];
    return v;
}
static inline void aio_put_le(unsigned char *p, unsigned long long v, int bytes)
{
    for (int k = 0; k < bytes; k++, v >>= 8) p[k] = (unsigned char)v;
}

/* IEEE binary16 bits to double, exactly (NaN keeps no payload). */
static inline double aio_f16(unsigned h)
{
    unsigned e = h >> 10 & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, (int)e - 25);
    return h & 0x8000 ? -v : v;
}

/* bfloat16 and binary32 bits to double, exactly (bfloat16 is the top half
 * of a binary32). */
static inline double aio_f32(unsigned long u)
{
    uint32_t b = (uint32_t)u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static inline double aio_f64(unsigned long long u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

#endif

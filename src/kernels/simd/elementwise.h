/* Exact SIMD kernels (kernels.h): per lane the very operations of
 * src/kernels/ref/elementwise.c, the tail (n mod width) by the same scalar
 * expressions, so the outputs are ref's bit for bit.  Included once per
 * width by src/kernels/<isa>/kernels.c after vec.h. */
#include "vec.h"

/* relu_gather's whole vectors: the inactive lanes of g's, appended to frag
 * at k, which has room for exactly the inactive units.  Where vec.h's store
 * masked to the packed lanes is cheap (COMPRESS_STORE_DIRECT), straight into
 * frag: nothing lands past them; else whole vectors into a staging buffer,
 * flushed 64 units at a time, so that no whole vector is stored past k. */
#if COMPRESS_STORE_DIRECT
#define GATHER_VECTORS(T, S, W)                                                                      \
    for (; i + W <= n; i += W) k += compress_store_##S(frag + k, ~movemask_##S(load_##S(x + i) > 0) & all, load_##S(g + i));
#else
#define GATHER_VECTORS(T, S, W)                                                                      \
    {                                                                                                \
        T buf[64 + W];                                                                               \
        size_t c = 0;                                                                                \
        for (; i + W <= n; i += W) {                                                                 \
            c += compress_full_##S(buf + c, ~movemask_##S(load_##S(x + i) > 0) & all, load_##S(g + i)); \
            if (c >= 64) {                                                                           \
                memcpy(frag + k, buf, 64 * sizeof *buf), k += 64, c -= 64;                           \
                memcpy(buf, buf + 64, c * sizeof *buf);                                              \
            }                                                                                        \
        }                                                                                            \
        memcpy(frag + k, buf, c * sizeof *buf), k += c;                                              \
    }
#endif

#define SIMD_EXACT(T, S, V, M, W)                                                                    \
    static void leaky_forward_##S(size_t n, T a, const T *x, T *y)                                   \
    {                                                                                                \
        size_t i = 0;                                                                                \
        V one = splat_##S(1), av = splat_##S(a);                                                     \
        for (; i + W <= n; i += W) {                                                                 \
            V xv = load_##S(x + i);                                                                  \
            store_##S(y + i, xv * sel_##S(xv > 0, one, av));                                         \
        }                                                                                            \
        for (; i < n; i++) y[i] = x[i] * (x[i] > 0 ? 1 : a);                                         \
    }                                                                                                \
    static void leaky_apply_##S(size_t n, T a, const T *x, const T *u, T *v)                         \
    {                                                                                                \
        size_t i = 0;                                                                                \
        V one = splat_##S(1), av = splat_##S(a);                                                     \
        for (; i + W <= n; i += W)                                                                   \
            store_##S(v + i, load_##S(u + i) * sel_##S(load_##S(x + i) > 0, one, av));               \
        for (; i < n; i++) v[i] = u[i] * (x[i] > 0 ? 1 : a);                                         \
    }                                                                                                \
    static void leaky_vijp_##S(size_t n, T a, const T *x, const T *g, T *v)                          \
    {                                                                                                \
        size_t i = 0;                                                                                \
        V one = splat_##S(1), av = splat_##S(a);                                                     \
        for (; i + W <= n; i += W)                                                                   \
            store_##S(v + i, load_##S(g + i) / sel_##S(load_##S(x + i) > 0, one, av));               \
        for (; i < n; i++) v[i] = g[i] / (x[i] > 0 ? 1 : a);                                         \
    }                                                                                                \
    static void leaky_inverse_##S(size_t n, T a, const T *y, T *x)                                   \
    {                                                                                                \
        size_t i = 0;                                                                                \
        V av = splat_##S(a);                                                                         \
        for (; i + W <= n; i += W) {                                                                 \
            V yv = load_##S(y + i);                                                                  \
            store_##S(x + i, sel_##S(yv > 0, yv, yv / av));                                          \
        }                                                                                            \
        for (; i < n; i++) x[i] = y[i] > 0 ? y[i] : y[i] / a;                                        \
    }                                                                                                \
    /* 64 units per 64-bit word of bits (64 is a multiple of every W). */                           \
    static inline void sign_word_##S(const T *x, uint8_t *bits)                                      \
    {                                                                                                \
        uint64_t word = 0;                                                                           \
        for (int j = 0; j < 64; j += W) word |= movemask_##S(load_##S(x + j) > 0) << j;              \
        memcpy(bits, &word, 8); /* bit k of byte k/8: little-endian x86 */                           \
    }                                                                                                \
    /* Large arrays in four interleaved streams: a read-only kernel gets more                        \
     * cache misses in flight so (bench-kernels at 8M units on a Zen 2 VM: 82-87 %                   \
     * of copy bandwidth in one stream, 114-129 % in four); each word lands in                       \
     * its own place, so the bits are the same in any order. */                                     \
    static void sign_pack_##S(size_t n, const T *x, uint8_t *bits)                                   \
    {                                                                                                \
        size_t i = 0, q = n >= 65536 ? n / 4 / 64 * 64 : 0;                                          \
        for (size_t k = 0; k < q; k += 64)                                                           \
            for (size_t s = 0; s < 4; s++) sign_word_##S(x + s * q + k, bits + (s * q + k) / 8);    \
        for (i = 4 * q; i + 64 <= n; i += 64) sign_word_##S(x + i, bits + i / 8);                   \
        for (size_t b = i / 8; b < (n + 7) / 8; b++) bits[b] = 0;                                    \
        for (; i < n; i++)                                                                           \
            if (x[i] > 0) bits[i / 8] |= (uint8_t)(1u << (i % 8));                                   \
    }                                                                                                \
    static void sign_unpack_##S(size_t n, const uint8_t *bits, T *x)                                 \
    {                                                                                                \
        size_t i = 0;                                                                                \
        M lane;                                                                                      \
        for (int j = 0; j < W; j++) lane[j] = (__typeof__(lane[0]))1 << j;                           \
        V one = splat_##S(1), minus = splat_##S(-1);                                                 \
        for (; i + 64 <= n; i += 64) {                                                               \
            uint64_t word;                                                                           \
            memcpy(&word, bits + i / 8, 8);                                                          \
            for (int j = 0; j < 64; j += W) {                                                        \
                M b = (M){0} + (__typeof__(lane[0]))((word >> j) & ((1ull << W) - 1));               \
                store_##S(x + i + j, sel_##S((b & lane) != 0, one, minus));                          \
            }                                                                                        \
        }                                                                                            \
        for (; i < n; i++) x[i] = (bits[i / 8] >> (i % 8)) & 1 ? 1 : -1;                             \
    }                                                                                                \
    static void relu_forward_##S(size_t n, const T *x, T *y)                                         \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W) {                                                                 \
            V xv = load_##S(x + i);                                                                  \
            store_##S(y + i, sel_##S(xv > 0, xv, splat_##S(0)));                                     \
        }                                                                                            \
        for (; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;                                               \
    }                                                                                                \
    static void relu_apply_##S(size_t n, const T *x, const T *u, T *v)                               \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W)                                                                   \
            store_##S(v + i, sel_##S(load_##S(x + i) > 0, load_##S(u + i), splat_##S(0)));           \
        for (; i < n; i++) v[i] = x[i] > 0 ? u[i] : 0;                                               \
    }                                                                                                \
    /* The inactive lanes of each vector, compressed (vec.h: permutes, or    \
     * AVX-512's compress; values moved, not computed). */                    \
    static size_t relu_gather_##S(size_t n, const T *x, const T *g, T *frag)                         \
    {                                                                                                \
        size_t i = 0, k = 0;                                                                         \
        const uint64_t all = (1ull << W) - 1;                                                        \
        GATHER_VECTORS(T, S, W)                                                                      \
        for (; i < n; i++)                                                                           \
            if (!(x[i] > 0)) frag[k++] = g[i];                                                       \
        return k;                                                                                    \
    }                                                                                                \
    static void relu_scatter_##S(size_t n, const T *x, const T *g, const T *frag, T *v)              \
    {                                                                                                \
        size_t i = 0, k = 0;                                                                         \
        const uint64_t all = (1ull << W) - 1;                                                        \
        for (; i + W <= n; i += W) {                                                                 \
            M on = load_##S(x + i) > 0;                                                              \
            V out = sel_##S(on, load_##S(g + i), splat_##S(0));                                      \
            uint64_t off = ~movemask_##S(on) & all;                                                  \
            if (off) out = expand_load_##S(frag + k, off, out), k += (size_t)__builtin_popcountll(off); \
            store_##S(v + i, out);                                                                   \
        }                                                                                            \
        for (; i < n; i++) v[i] = x[i] > 0 ? g[i] : frag[k++];                                       \
    }                                                                                                \
    static void add_##S(size_t n, const T *a, const T *b, T *y)                                      \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W) store_##S(y + i, load_##S(a + i) + load_##S(b + i));             \
        for (; i < n; i++) y[i] = a[i] + b[i];                                                       \
    }                                                                                                \
    static void sub_##S(size_t n, const T *a, const T *b, T *y)                                      \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W) store_##S(y + i, load_##S(a + i) - load_##S(b + i));             \
        for (; i < n; i++) y[i] = a[i] - b[i];                                                       \
    }                                                                                                \
    static void affine_##S(size_t n, const T *x, const T *s, const T *t, T *y)                       \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W)                                                                   \
            store_##S(y + i, load_##S(x + i) * load_##S(s + i) + load_##S(t + i));                   \
        for (; i < n; i++) y[i] = x[i] * s[i] + t[i];                                                \
    }                                                                                                \
    static void affine_inverse_##S(size_t n, const T *y, const T *s, const T *t, T *x)               \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W)                                                                   \
            store_##S(x + i, (load_##S(y + i) - load_##S(t + i)) / load_##S(s + i));                 \
        for (; i < n; i++) x[i] = (y[i] - t[i]) / s[i];                                              \
    }                                                                                                \
    static void div_##S(size_t n, const T *a, const T *b, T *y)                                      \
    {                                                                                                \
        size_t i = 0;                                                                                \
        for (; i + W <= n; i += W) store_##S(y + i, load_##S(a + i) / load_##S(b + i));             \
        for (; i < n; i++) y[i] = a[i] / b[i];                                                       \
    }

SIMD_EXACT(double, d, vd, vm, VW)
SIMD_EXACT(float, f, vf, vmf, VFW)


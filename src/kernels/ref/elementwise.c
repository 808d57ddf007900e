/* Reference exact kernels (kernels.h): the loops the layers ran before the
 * kernel table, unchanged, in double and in binary32.  Every other set must
 * reproduce these bit for bit (tests/t-kernels.c hashes them). */
#include "kernels/kernels.h"

#define LEAKY_SLOPE(x, a) ((x) > 0 ? 1 : (a))

#define DEFINE_EXACT(T, S)                                                                        \
    static void leaky_forward_##S(size_t n, T a, const T *x, T *y)                                \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = x[i] * LEAKY_SLOPE(x[i], a);                        \
    }                                                                                             \
    static void leaky_apply_##S(size_t n, T a, const T *x, const T *u, T *v)                      \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) v[i] = u[i] * LEAKY_SLOPE(x[i], a);                        \
    }                                                                                             \
    static void leaky_vijp_##S(size_t n, T a, const T *x, const T *g, T *v)                       \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) v[i] = g[i] / LEAKY_SLOPE(x[i], a);                        \
    }                                                                                             \
    static void leaky_inverse_##S(size_t n, T a, const T *y, T *x)                                \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) x[i] = y[i] > 0 ? y[i] : y[i] / a;                         \
    }                                                                                             \
    static void sign_pack_##S(size_t n, const T *x, uint8_t *bits)                                \
    {                                                                                             \
        for (size_t b = 0; b < (n + 7) / 8; b++) bits[b] = 0;                                     \
        for (size_t k = 0; k < n; k++)                                                            \
            if (x[k] > 0) bits[k / 8] |= (uint8_t)(1u << (k % 8));                                \
    }                                                                                             \
    static void sign_unpack_##S(size_t n, const uint8_t *bits, T *x)                              \
    {                                                                                             \
        for (size_t k = 0; k < n; k++) x[k] = (bits[k / 8] >> (k % 8)) & 1 ? 1 : -1;              \
    }                                                                                             \
    static void relu_forward_##S(size_t n, const T *x, T *y)                                      \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;                                \
    }                                                                                             \
    static void relu_apply_##S(size_t n, const T *x, const T *u, T *v)                            \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) v[i] = x[i] > 0 ? u[i] : 0;                                \
    }                                                                                             \
    static size_t relu_gather_##S(size_t n, const T *x, const T *g, T *frag)                      \
    {                                                                                             \
        size_t k = 0;                                                                             \
        for (size_t i = 0; i < n; i++)                                                            \
            if (!(x[i] > 0)) frag[k++] = g[i];                                                    \
        return k;                                                                                 \
    }                                                                                             \
    static void relu_scatter_##S(size_t n, const T *x, const T *g, const T *frag, T *v)           \
    {                                                                                             \
        for (size_t i = 0, k = 0; i < n; i++) v[i] = x[i] > 0 ? g[i] : frag[k++];                 \
    }                                                                                             \
    static void add_##S(size_t n, const T *a, const T *b, T *y)                                   \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];                                        \
    }                                                                                             \
    static void sub_##S(size_t n, const T *a, const T *b, T *y)                                   \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = a[i] - b[i];                                        \
    }                                                                                             \
    static void affine_##S(size_t n, const T *x, const T *s, const T *t, T *y)                    \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = x[i] * s[i] + t[i];                                 \
    }                                                                                             \
    static void affine_inverse_##S(size_t n, const T *y, const T *s, const T *t, T *x)            \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) x[i] = (y[i] - t[i]) / s[i];                               \
    }                                                                                             \
    static void div_##S(size_t n, const T *a, const T *b, T *y)                                   \
    {                                                                                             \
        for (size_t i = 0; i < n; i++) y[i] = a[i] / b[i];                                        \
    }

DEFINE_EXACT(double, d)
DEFINE_EXACT(float, f)


const vijp_kernels vijp_kernels_ref_exact = {.name = "ref", VIJP_KERNEL_EXACT_ENTRIES(d), VIJP_KERNEL_EXACT_ENTRIES(f)};

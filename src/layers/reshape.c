/* The shape types, none of which computes anything:
 *   identity       y = x;
 *   dropout:P      PyTorch's Dropout in eval mode, also y = x (P, the
 *                  training-time drop probability in [0, 1], is kept only to
 *                  print the item back);
 *   flatten        y = x (a row is already one sample flattened in C order);
 *   transpose:AxB  each run of A·B units, read as an A × B row-major matrix,
 *                  becomes its B × A transpose: y[r + j·A + i] = x[r + i·B + j].
 * Each Jacobian is a permutation matrix: submersive, invertible, linear, and
 * every operator, vijp and inverse included, moves values without rounding
 * in any format (bounds: VIJP_INVBOUND_EXACT).  The identity's vjp needs
 * nothing from the forward pass (VIJP_RESIDUAL_NONE: a dropout between two
 * layers of an MLP costs Moonwalk no memory); transpose, a permutation like
 * squeeze, declares VIJP_RESIDUAL_INVERSE as squeeze does, so that
 * Moonwalk's rebuild-by-inversion chain through a flow runs through it. */
#include "vijp/layer.h"
#include "activation.h"
#include "args.h"
#include "decimal.h"
#include "state.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static unsigned declare_permutation(const vijp_layer *L)
{
    (void)L;
    return VIJP_DECL_SUBMERSIVE | VIJP_DECL_INVERTIBLE | VIJP_DECL_LINEAR;
}

/* ---- identity, dropout, flatten ---- */

static int parse_same_width(vijp_layer *L, const char *name, size_t in_width, vijp_error *err)
{
    if (in_width == 0) return vijp_fail(err, VIJP_EDIM, "%s keeps its input width, which is unknown here: give --width", name);
    L->in = L->out = in_width;
    return 0;
}

static int parse_identity(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg) return vijp_fail(err, VIJP_EINVAL, "identity takes no argument, got 'identity:%s'", arg);
    return parse_same_width(L, "identity", in_width, err);
}

static int parse_flatten(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    if (arg)
        return vijp_fail(err, VIJP_EINVAL, "flatten takes no argument (a row is one sample already flattened), got "
                         "'flatten:%s'", arg);
    return parse_same_width(L, "flatten", in_width, err);
}

static int parse_dropout(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    char *end = NULL;
    double p = arg ? strtod(arg, &end) : NAN;
    if (!arg || end == arg || *end || !(p >= 0 && p <= 1))
        return vijp_fail(err, VIJP_EINVAL, "dropout needs its drop probability: dropout:P with 0 <= P <= 1 (e.g. "
                         "dropout:0.1), got 'dropout%s%s'", arg ? ":" : "", arg ? arg : "");
    int rc = parse_same_width(L, "dropout", in_width, err);
    if (rc) return rc;
    vijp_state_new(L, sizeof(vo_dropout_args));
    ((vo_dropout_args *)L->state)->p = p;
    return 0;
}

static int print_dropout(const vijp_layer *L, char *buf, size_t size)
{
    char num[32];
    vijp_shortest_decimal(((const vo_dropout_args *)L->state)->p, num, sizeof num);
    return snprintf(buf, size, "dropout:%s", num);
}

static void copy_units(const double *in, size_t count, double *out) { memmove(out, in, count * sizeof *out); }

static void identity_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                             double *Y)
{
    (void)cx, (void)th;
    copy_units(X, L->in * B, Y);
}

/* jvp and vjp coincide: J = Jᵀ = I. */
static void identity_apply(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                           const double *U, double *V)
{
    (void)cx, (void)th, (void)X;
    copy_units(U, L->in * B, V);
}

static int identity_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                         const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)X, (void)frag, (void)err;
    copy_units(Gx, L->in * B, Gy);
    return 0;
}

static int identity_inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                            double *X, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    copy_units(Y, L->in * B, X);
    return 0;
}

static void identity_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t i = 0; i < L->in; i++) J[i + i * L->in] = 1;
}

static const vijp_ops_d identity_d = {
    .forward = identity_forward, .jvp = identity_apply, .vjp = identity_apply, .vijp = identity_vijp,
    .jacobian = identity_jacobian, .inverse = identity_inverse,
};

static const vijp_ops_mp identity_mp = {
    .forward = vo_identity_forward, .jvp = vo_identity_jvp, .vjp = vo_identity_jvp, .vijp = vo_identity_vijp,
    .jacobian = vo_identity_jacobian, .inverse = vo_identity_inverse,
};

/* An elementwise map (diagonal J) states its f′ enclosure: here 1. */
static const vijp_interval_ops identity_interval = {.deriv_enclose = vo_identity_deriv_enclose};

#define IDENTITY_TYPE(NAME, SYNTAX, PARSE, ...)                                                                    \
    {                                                                                                              \
        .name = NAME, .syntax = SYNTAX, .parse = PARSE, .param_count = vijp_act_no_params,                          \
        .declare = declare_permutation, .residual = VIJP_RESIDUAL_NONE, .d = &identity_d, .mp = &identity_mp,      \
        .jacobian_exact = 1, .interval = &identity_interval,                                                       \
        .bounds = {.inverse = VIJP_INVBOUND_EXACT}, /* a copy: no rounding at all */                              \
        __VA_ARGS__                                                                                                \
    }

const vijp_layer_type vijp_layer_identity = IDENTITY_TYPE("identity", "identity (y = x; keeps its width)",
                                                          parse_identity);
const vijp_layer_type vijp_layer_flatten = IDENTITY_TYPE(
    "flatten", "flatten (y = x: a row is one sample flattened in C order already)", parse_flatten);
const vijp_layer_type vijp_layer_dropout = IDENTITY_TYPE(
    "dropout", "dropout:P (eval mode: y = x; 0 <= P <= 1)", parse_dropout, .state_size = sizeof(vo_dropout_args),
    .print = print_dropout);

/* ---- transpose:AxB ---- */

static int parse_transpose(vijp_layer *L, const char *arg, size_t in_width, vijp_error *err)
{
    const char *p = arg;
    size_t a = 0, b = 0; /* each <= 2^24 (args.h), so a·b cannot wrap */
    int bad = !p || vijp_arg_count(&p, &a) || *p != 'x';
    if (!bad) p++, bad = vijp_arg_count(&p, &b) || *p;
    if (bad || a == 0 || b == 0)
        return vijp_fail(err, VIJP_EINVAL, "transpose needs transpose:AxB (each run of A*B units read as an A x B "
                         "row-major matrix; 2 <= A, B <= %u, e.g. transpose:2x3), got 'transpose%s%s'", VIJP_WIDTH_MAX,
                         arg ? ":" : "", arg ? arg : "");
    /* A 1 x B or A x 1 matrix is its own transpose in C order: that map is
     * the identity, whose descriptor states what an elementwise map must
     * (its f′ enclosure), which a permutation's cannot. */
    if (a == 1 || b == 1)
        return vijp_fail(err, VIJP_EINVAL, "transpose:%zux%zu leaves every unit in place: use 'identity'", a, b);
    if (in_width == 0 || in_width % (a * b))
        return vijp_fail(err, VIJP_EDIM, "transpose:%zux%zu: the input width %zu is not a multiple of %zu%s", a, b,
                         in_width, a * b, in_width ? "" : " (give --width)");
    vijp_state_new(L, sizeof(vo_transpose_args));
    L->in = L->out = in_width;
    *(vo_transpose_args *)L->state = (vo_transpose_args){a, b};
    return 0;
}

static int print_transpose(const vijp_layer *L, char *buf, size_t size)
{
    const vo_transpose_args *a = L->state;
    return snprintf(buf, size, "transpose:%zux%zu", a->rows, a->cols);
}

/* The input index that output index j reads (within one sample): output
 * j = r + q·A + i (q < B, i < A) reads input r + i·B + q. */
static size_t source(const vijp_layer *L, size_t j)
{
    const vo_transpose_args *a = L->state;
    size_t run = a->rows * a->cols, r = j - j % run, k = j % run;
    return r + (k % a->rows) * a->cols + k / a->rows;
}

/* Y = P X (gather) or X = Pᵀ Y (scatter), sample by sample. */
static void permute(const vijp_layer *L, const double *in, size_t B, double *out, int scatter)
{
    size_t n = L->in;
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < n; j++)
            if (scatter) out[b * n + source(L, j)] = in[b * n + j];
            else out[b * n + j] = in[b * n + source(L, j)];
}

static void transpose_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                              double *Y)
{
    (void)cx, (void)th;
    permute(L, X, B, Y, 0);
}

static void transpose_jvp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                          const double *U, double *V)
{
    (void)cx, (void)th, (void)X;
    permute(L, U, B, V, 0);
}

static void transpose_vjp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                          const double *Gy, double *Gx)
{
    (void)cx, (void)th, (void)X;
    permute(L, Gy, B, Gx, 1);
}

static int transpose_vijp(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                          const double *Gx, const double *frag, double *Gy, vijp_error *err)
{
    (void)cx, (void)th, (void)X, (void)frag, (void)err;
    permute(L, Gx, B, Gy, 0);
    return 0;
}

static int transpose_inverse(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *Y, size_t B,
                             double *X, vijp_error *err)
{
    (void)cx, (void)th, (void)err;
    permute(L, Y, B, X, 1);
    return 0;
}

static void transpose_jacobian(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *x, double *J)
{
    (void)cx, (void)th, (void)x;
    memset(J, 0, L->in * L->in * sizeof *J);
    for (size_t j = 0; j < L->in; j++) J[j + source(L, j) * L->in] = 1;
}

static const vijp_ops_d transpose_d = {
    .forward = transpose_forward, .jvp = transpose_jvp, .vjp = transpose_vjp, .vijp = transpose_vijp,
    .jacobian = transpose_jacobian, .inverse = transpose_inverse,
};

static const vijp_ops_mp transpose_mp = {
    .forward = vo_transpose_forward, .jvp = vo_transpose_jvp, .vjp = vo_transpose_vjp, .vijp = vo_transpose_vijp,
    .jacobian = vo_transpose_jacobian, .inverse = vo_transpose_inverse,
};

const vijp_layer_type vijp_layer_transpose = {
    .name = "transpose", .syntax = "transpose:AxB (each run of A*B units, an A x B row-major matrix, transposed)",
    .parse = parse_transpose, .state_size = sizeof(vo_transpose_args), .print = print_transpose,
    .param_count = vijp_act_no_params, .declare = declare_permutation,
    .residual = VIJP_RESIDUAL_INVERSE, .d = &transpose_d, .mp = &transpose_mp, .jacobian_exact = 1,
    .bounds = {.inverse = VIJP_INVBOUND_EXACT}, /* a permutation: no rounding at all */
};

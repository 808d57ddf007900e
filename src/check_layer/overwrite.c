/* The check that every operator writes the whole of its output and reads
 * none of it (vijp/layer.h): the engines hand operators buffers whose
 * contents are left over from earlier use (vijp_mat_init_unset), so an
 * operator that accumulates into its output, or skips entries it considers
 * zero, gives wrong gradients there and right ones in a zeroed buffer.
 * Each operator runs twice on the same inputs, once into a zeroed output and
 * once into one filled with NaN; the two results must be the same bits.
 * No tolerance: the same operations on the same inputs round the same way. */
#include "impl.h"
#include <math.h>
#include <string.h>

enum { OP_FORWARD, OP_JVP, OP_VJP, OP_VJP_PARAM, OP_FRAGMENT, OP_VIJP, OP_INVERSE, OP_JACOBIAN, OP_COKERNEL,
       OP_COUNT };
static const char *const op_names[OP_COUNT] = {"forward", "jvp", "vjp", "vjp_param", "fragment", "vijp", "inverse",
                                               "jacobian", "cokernel"};

/* Sample 0 of X as a one-column view (no copy). */
static vijp_mat sample0(const vijp_mat *X) { return (vijp_mat){.rows = X->rows, .cols = 1, .fmt = X->fmt, .d = X->d, .m = X->m}; }

static void fill_nan(vijp_mat *a)
{
    for (size_t i = 0; i < vijp_mat_len(a); i++) {
        if (a->d) a->d[i] = NAN;
        else mpfr_set_nan(a->m[i]);
    }
}

static int same_entry(const vijp_mat *a, const vijp_mat *b, size_t i)
{
    if (a->d) return !memcmp(&a->d[i], &b->d[i], sizeof *a->d);
    if (mpfr_nan_p(a->m[i]) || mpfr_nan_p(b->m[i])) return mpfr_nan_p(a->m[i]) && mpfr_nan_p(b->m[i]);
    return mpfr_equal_p(a->m[i], b->m[i]) && mpfr_signbit(a->m[i]) == mpfr_signbit(b->m[i]);
}

/* The output's shape for op, 0 when the layer has no such operator here. */
static int out_shape(check_fix *t, int op, size_t k, size_t *rows, size_t *cols)
{
    const vijp_layer *L = t->L;
    size_t m = L->out, n = L->in, B = t->B;
    switch (op) {
    case OP_FORWARD: case OP_JVP: case OP_VIJP: *rows = m, *cols = B; return 1;
    case OP_VJP: *rows = n, *cols = B; return 1;
    case OP_VJP_PARAM: *rows = L->type->param_count(L), *cols = 1; return *rows > 0;
    case OP_FRAGMENT: *rows = k, *cols = 1; return k > 0;
    case OP_INVERSE: /* wherever the operator exists; a refusal (not square) is skipped */
        *rows = n, *cols = B;
        return m == n && (t->XF.fmt->kind != VIJP_DOUBLE ? L->type->mp && L->type->mp->inverse : L->type->d->inverse != NULL);
    case OP_JACOBIAN: *rows = m, *cols = n; return 1;
    case OP_COKERNEL: {
        vijp_mat x = sample0(&t->XF);
        *rows = m, *cols = vijp_layer_fragment_count(L, &t->thF, &x);
        return *cols > 0;
    }
    }
    return 0;
}

/* op into out; y (forward's output), g (vjp's) and c (the fragment) are its
 * inputs where it needs them. */
static int run_op(check_fix *t, int op, const vijp_mat *y, const vijp_mat *g, const vijp_mat *c, vijp_mat *out,
                  vijp_error *err)
{
    const vijp_layer *L = t->L;
    switch (op) {
    case OP_FORWARD: return vijp_layer_forward(L, &t->thF, &t->XF, out, err);
    case OP_JVP: return vijp_layer_jvp(L, &t->thF, &t->XF, &t->UF, out, err);
    case OP_VJP: return vijp_layer_vjp(L, &t->thF, &t->XF, &t->GF, out, err);
    case OP_VJP_PARAM: return vijp_layer_vjp_param(L, &t->thF, &t->XF, &t->GF, out, err);
    case OP_FRAGMENT: return vijp_layer_fragment(L, &t->thF, &t->XF, &t->GF, out, err);
    case OP_VIJP: return vijp_layer_vijp(L, &t->thF, &t->XF, g, c->rows ? c : NULL, out, err);
    case OP_INVERSE: return vijp_layer_inverse(L, &t->thF, y, out, err);
    case OP_JACOBIAN: {
        vijp_mat x = sample0(&t->XF);
        return vijp_layer_jacobian(L, &t->thF, &x, out, err);
    }
    case OP_COKERNEL: {
        vijp_mat x = sample0(&t->XF);
        return vijp_layer_cokernel(L, &t->thF, &x, out, err);
    }
    }
    return VIJP_EINVAL;
}

void check_overwrites(check_fix *t, vijp_check_result *r)
{
    const vijp_layer *L = t->L;
    size_t k = vijp_layer_fragment_count(L, &t->thF, &t->XF), ran = 0;
    vijp_error err = {0};
    vijp_mat y, g, c, a, b;
    vijp_mat_init(&y, L->out, t->B, &t->F), vijp_mat_init(&g, L->in, t->B, &t->F), vijp_mat_init(&c, k, 1, &t->F);
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    check_method(r, "each operator in %s at %zu points, into a zeroed output and into one filled with NaN", t->F.name,
                 t->B);
    check_source(r, "none: the same operations on the same inputs give the same bits, whatever the output held");
    FAIL_IF(vijp_layer_forward(L, &t->thF, &t->XF, &y, &err), "forward");
    FAIL_IF(vijp_layer_vjp(L, &t->thF, &t->XF, &t->GF, &g, &err), "vjp");
    if (k) FAIL_IF(vijp_layer_fragment(L, &t->thF, &t->XF, &t->GF, &c, &err), "fragment");
    for (int op = 0; op < OP_COUNT; op++) {
        size_t rows, cols;
        if (!out_shape(t, op, k, &rows, &cols)) continue;
        vijp_mat_init(&a, rows, cols, &t->F), vijp_mat_init(&b, rows, cols, &t->F);
        fill_nan(&b);
        int rc = run_op(t, op, &y, &g, &c, &a, &err);
        if (!rc) rc = run_op(t, op, &y, &g, &c, &b, &err);
        /* an inverse that refuses this layer writes nothing, nor does a fixed-point one that reports no convergence */
        if (op == OP_INVERSE && (rc == VIJP_EUNSUPPORTED ||
                                 (rc == VIJP_ESINGULAR && L->type->bounds.inverse == VIJP_INVBOUND_FIXED_POINT))) {
            vijp_mat_clear(&a), vijp_mat_clear(&b);
            continue;
        }
        FAIL_IF(rc, op_names[op]);
        for (size_t i = 0; i < vijp_mat_len(&a); i++)
            if (!same_entry(&a, &b, i)) {
                check_fail(r, "%s's output entry [%zu,%zu] depends on what the buffer held before the call (%g "
                           "after a zeroed buffer, %g after NaN): an operator must overwrite all of its output and "
                           "read none of it", op_names[op], i % rows, i / rows, vijp_mat_get_d(&a, i),
                           vijp_mat_get_d(&b, i));
                goto out;
            }
        vijp_mat_clear(&a), vijp_mat_clear(&b);
        ran++;
    }
    check_note(r, "%zu operators overwrite their outputs", ran);
out:
    vijp_mat_clear(&a), vijp_mat_clear(&b);
    vijp_mat_clear(&y), vijp_mat_clear(&g), vijp_mat_clear(&c);
}

/* binary32@SET and the mixed formats' @SET: a layer operator on native
 * floats through the format's kernel set (vijp_ops_f, vijp/layer.h), for the
 * format-generic operators of layer.c.  The matrices hold binary32 values
 * (as doubles, vijp/mat.h, or in MPFR at 24 bits; a mixed format's values are of
 * its narrower storage format, which float holds exactly), so the conversion
 * to float is exact, and so is the one back: the roundings are the float
 * operations themselves, and for a mixed format the one rounding of each
 * result to the storage format (vijp_mat_store), what hardware does when it
 * writes a binary32 accumulator to bfloat16 or binary16. */
#include "native_f32.h"
#include "vijp/error.h"
#include "route.h"
#include <stdlib.h>

static float *to_float(const vijp_mat *a)
{
    size_t n = a ? vijp_mat_len(a) : 0;
    float *p = vijp_alloc_unset((n ? n : 1) * sizeof *p);
    if (a && a->d)
        for (size_t i = 0; i < n; i++) p[i] = (float)a->d[i]; /* exact: binary32 values held as doubles */
    else
        for (size_t i = 0; i < n; i++) p[i] = mpfr_get_flt(a->m[i], MPFR_RNDN); /* exact */
    return p;
}

int vijp_layer_f32(const vijp_route *route, vijp_f32_op op, const vijp_layer *L, const vijp_mat *theta,
                   const vijp_mat *X, const vijp_mat *A, const vijp_mat *frag, vijp_mat *out, int *rc, vijp_error *err)
{
    const vijp_ops_f *o = L->type->f;
    const vijp_kctx *cx = &route->cx;
    if (!o || route->kind != VIJP_ROUTE_FLOAT) return 0;
    int have = op == VIJP_F32_FORWARD ? !!o->forward : op == VIJP_F32_JVP ? !!o->jvp : op == VIJP_F32_VJP ? !!o->vjp
             : op == VIJP_F32_VJP_PARAM ? !!o->vjp_param : op == VIJP_F32_FRAGMENT ? !!o->fragment : !!o->vijp;
    if (!have) return 0;
    const vijp_mat *th = theta && theta->rows ? theta : NULL;
    size_t n = vijp_mat_len(out), B = X->cols;
    float *t = to_float(th), *x = to_float(X), *a = to_float(A), *c = to_float(frag);
    float *y = vijp_alloc_unset((n ? n : 1) * sizeof *y); /* NaN in SANITIZE builds: a skipped entry shows */
    int r = 0;
    switch (op) {
    case VIJP_F32_FORWARD: o->forward(L, cx, th ? t : NULL, x, B, y); break;
    case VIJP_F32_JVP: o->jvp(L, cx, th ? t : NULL, x, B, a, y); break;
    case VIJP_F32_VJP: o->vjp(L, cx, th ? t : NULL, x, B, a, y); break;
    case VIJP_F32_VJP_PARAM: o->vjp_param(L, cx, t, x, B, a, y); break;
    case VIJP_F32_FRAGMENT: o->fragment(L, cx, th ? t : NULL, x, B, a, y); break;
    case VIJP_F32_VIJP: r = o->vijp(L, cx, th ? t : NULL, x, B, a, frag && frag->rows ? c : NULL, y, err); break;
    }
    if (!r) {
        if (out->d)
            for (size_t i = 0; i < n; i++) out->d[i] = y[i];
        else
            for (size_t i = 0; i < n; i++) mpfr_set_flt(out->m[i], y[i], MPFR_RNDN); /* exact at 24 bits */
        if (cx->storage) vijp_mat_store(out); /* the mixed format's one rounding to storage */
    }
    free(t), free(x), free(a), free(c), free(y);
    if (r == VIJP_EUNSUPPORTED) return 0; /* not this case (a tall dense vijp): the emulation's */
    *rc = r;
    return 1;
}

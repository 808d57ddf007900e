/* The layer interface: what a type descriptor must hold (vijp_layer_type_check),
 * an instance's copy, clear and spec, and the format-generic operators
 * engines call.  The registry of types is src/layers/registry.c. */
#include "vijp/layer.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "native_f32.h"
#include "route.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vijp_layer_type_check(const vijp_layer_type *T, vijp_error *err)
{
    const char *nm = T && T->name ? T->name : "(unnamed)";
    if (!T || !T->name || !T->name[0] || !islower((unsigned char)T->name[0]))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s': a name must start with a lower-case letter", nm);
    for (const char *c = T->name; *c; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_')
            return vijp_fail(err, VIJP_EINVAL, "layer type '%s': a name may hold only a-z, 0-9 and _", nm);
    if (strlen(T->name) >= 32) return vijp_fail(err, VIJP_EINVAL, "layer type '%s': name longer than 31 characters", nm);
    const char *missing = !T->syntax ? "syntax" : !T->parse ? "parse" : !T->param_count ? "param_count"
                        : !T->declare ? "declare" : !T->d ? "double operators (d)" : !T->d->forward ? "d->forward"
                        : !T->d->jvp ? "d->jvp" : !T->d->vjp ? "d->vjp" : !T->d->vijp ? "d->vijp"
                        : !T->d->jacobian ? "d->jacobian" : NULL;
    if (!missing && T->mp)
        missing = !T->mp->forward ? "mp->forward" : !T->mp->jvp ? "mp->jvp" : !T->mp->vjp ? "mp->vjp"
                : !T->mp->vijp ? "mp->vijp" : !T->mp->jacobian ? "mp->jacobian" : NULL;
    if (missing) return vijp_fail(err, VIJP_EINVAL, "layer type '%s' has no %s", nm, missing);
    if (T->emu && !T->mp) return vijp_fail(err, VIJP_EINVAL, "layer type '%s' emulates MPFR operators it lacks", nm);
#define SAME(op) (!T->emu || !!T->emu->op == !!T->mp->op)
    if (!(SAME(forward) && SAME(jvp) && SAME(vjp) && SAME(vjp_param) && SAME(fragment_count) && SAME(fragment) &&
          SAME(vijp) && SAME(jacobian) && SAME(cokernel) && SAME(inverse)))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s': its emulated and MPFR operators differ in which "
                         "they have", nm);
#undef SAME
    if (T->residual == VIJP_RESIDUAL_DERIV && (T->d->vjp_param || (T->mp && T->mp->vjp_param)))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' has a parameter gradient but residual kind DERIV, which "
                         "keeps only f' and so drops it: declare VIJP_RESIDUAL_INPUT", nm);
    int elementwise = T->dual_eval || T->residual == VIJP_RESIDUAL_DERIV || T->residual == VIJP_RESIDUAL_SIGN;
    if (elementwise && !vijp_deriv_enclose_of(T))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' is elementwise (%s) but has no f' enclosure "
                         "(deriv_enclose), which certification needs", nm,
                         T->dual_eval ? "it has dual_eval" : "its residual kind keeps one value per unit");
    if (vijp_jacobian_lipschitz_of(T) && !T->mp)
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' gives a Lipschitz constant of its Jacobian but no MPFR "
                         "operators: certify --box needs the MPFR Jacobian at each box's centre", nm);
    if (T->residual == VIJP_RESIDUAL_INVERSE && (!T->d->inverse || (T->mp && !T->mp->inverse)))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' declares residual kind INVERSE but has no inverse "
                         "operator%s", nm, T->d->inverse ? " in MPFR" : "");
    if (!!T->d->fragment_count != !!T->d->fragment || (T->d->fragment_count && !T->d->cokernel))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s': fragment_count, fragment and cokernel go together", nm);
    if (T->mp && (!!T->mp->fragment_count != !!T->d->fragment_count || !!T->mp->fragment != !!T->d->fragment))
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s': its MPFR operators and double operators disagree on "
                         "whether it has a fragment", nm);
    if (T->bounds.inverse != VIJP_INVBOUND_NONE && !T->d->inverse)
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' gives an inverse bound but no inverse", nm);
    if (T->state_copy && !T->state_free)
        return vijp_fail(err, VIJP_EINVAL, "layer type '%s' copies its state deeply but gives no state_free", nm);
    return 0;
}

void vijp_layer_copy(vijp_layer *dst, const vijp_layer *src)
{
    *dst = *src;
    dst->state = NULL;
    if (!src->state) return;
    const vijp_layer_type *T = src->type;
    if (T->state_copy) dst->state = T->state_copy(src->state);
    else dst->state = memcpy(vijp_alloc(T->state_size), src->state, T->state_size);
}

void vijp_layer_clear(vijp_layer *L)
{
    if (L->state) {
        if (L->type->state_free) L->type->state_free(L->state);
        else free(L->state);
    }
    memset(L, 0, sizeof *L);
}

void vijp_layer_spec(const vijp_layer *L, char *buf, size_t size)
{
    if (L->type->print) L->type->print(L, buf, size);
    else snprintf(buf, size, "%s", L->type->name);
}

/* Every operator below chooses its route once, from the data's format
 * (vijp_route_of, route.h): double, the native binary32 route, the narrow
 * formats' emulation, or MPFR.  MPFR-array results are then stored: for a
 * mixed format rounded once to the storage format (vijp_mat_store;
 * format.h), cotangents, parameter gradients, fragments and vijp outputs
 * as gradients (vijp_mat_store_as: fp8+binary32 stores them in E5M2). */

static int shape(const vijp_mat *a, size_t rows, size_t cols, const char *what, const vijp_layer *L,
                 vijp_error *err)
{
    if (a->rows != rows || (cols && a->cols != cols))
        return vijp_fail(err, VIJP_EDIM, "%s layer (%zu -> %zu): %s is %zux%zu, expected %zux%zu",
                         L->type->name, L->in, L->out, what, a->rows, a->cols, rows, cols ? cols : a->cols);
    return 0;
}

/* theta's shape, and an MPFR twin where the data (a) is not double. */
static int check_theta(const vijp_layer *L, const vijp_route *r, const vijp_mat *theta, const vijp_mat *a,
                       vijp_error *err)
{
    if (r->kind != VIJP_ROUTE_DOUBLE && !L->type->mp)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer has no MPFR operators, so it cannot run in %s",
                         L->type->name, a->fmt->name);
    size_t P = L->type->param_count(L);
    if (P == 0) return 0;
    if (!theta) return vijp_fail(err, VIJP_EINVAL, "%s layer needs its parameters", L->type->name);
    return shape(theta, P, 1, "theta", L, err);
}

#define TH(t, f) ((t) ? (t)->f : NULL)
#define MP(L, r) vijp_route_mp_ops((L)->type, r)
/* An int operator of the emulation that leaves its case to mp (route.h). */
#define MP_RETRY(L, r, rc, call) \
    ((rc) == VIJP_EUNSUPPORTED && MP(L, r) != (L)->type->mp ? (L)->type->mp->call : (rc))

int vijp_layer_forward(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *Y,
                       vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Y, L->out, X->cols, "output", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->forward(L, &r.cx, TH(theta, d), X->d, X->cols, Y->d);
    else if (!vijp_layer_f32(&r, VIJP_F32_FORWARD, L, theta, X, NULL, NULL, Y, &rc, err))
        MP(L, &r)->forward(L, TH(theta, m), X->m, X->cols, Y->m, X->fmt), vijp_mat_store(Y);
    return rc;
}

int vijp_layer_jvp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *U,
                   vijp_mat *V, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(U, L->in, X->cols, "tangent", L, err)) ||
        (rc = shape(V, L->out, X->cols, "output tangent", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->jvp(L, &r.cx, TH(theta, d), X->d, X->cols, U->d, V->d);
    else if (!vijp_layer_f32(&r, VIJP_F32_JVP, L, theta, X, U, NULL, V, &rc, err))
        MP(L, &r)->jvp(L, TH(theta, m), X->m, X->cols, U->m, V->m, X->fmt), vijp_mat_store(V);
    return rc;
}

int vijp_layer_vjp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *Gy,
                   vijp_mat *Gx, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)) ||
        (rc = shape(Gx, L->in, X->cols, "input cotangent", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->vjp(L, &r.cx, TH(theta, d), X->d, X->cols, Gy->d, Gx->d);
    else if (!vijp_layer_f32(&r, VIJP_F32_VJP, L, theta, X, Gy, NULL, Gx, &rc, err))
        MP(L, &r)->vjp(L, TH(theta, m), X->m, X->cols, Gy->m, Gx->m, X->fmt), vijp_mat_store_as(Gx, VIJP_STORE_GRADIENT);
    return rc;
}

int vijp_layer_vjp_param(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                         const vijp_mat *Gy, vijp_mat *Gt, vijp_error *err)
{
    if (L->type->param_count(L) == 0) return 0;
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)) ||
        (rc = shape(Gt, theta->rows, 1, "parameter gradient", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->vjp_param(L, &r.cx, theta->d, X->d, X->cols, Gy->d, Gt->d);
    else if (!vijp_layer_f32(&r, VIJP_F32_VJP_PARAM, L, theta, X, Gy, NULL, Gt, &rc, err))
        MP(L, &r)->vjp_param(L, theta->m, X->m, X->cols, Gy->m, Gt->m, X->fmt), vijp_mat_store_as(Gt, VIJP_STORE_GRADIENT);
    return rc;
}

static size_t fragment_count_on(const vijp_layer *L, const vijp_route *r, const vijp_mat *theta, const vijp_mat *X)
{
    if (r->kind == VIJP_ROUTE_DOUBLE)
        return L->type->d->fragment_count ? L->type->d->fragment_count(L, &r->cx, TH(theta, d), X->d, X->cols) : 0;
    const vijp_ops_mp *o = MP(L, r);
    return o && o->fragment_count ? o->fragment_count(L, TH(theta, m), X->m, X->cols) : 0;
}

size_t vijp_layer_fragment_count(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X)
{
    const vijp_route r = vijp_route_of(X->fmt);
    return fragment_count_on(L, &r, theta, X);
}

int vijp_layer_fragment(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                        const vijp_mat *Gy, vijp_mat *frag, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    size_t k = fragment_count_on(L, &r, theta, X);
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)) ||
        (rc = shape(frag, k, 1, "fragment", L, err)))
        return rc;
    if (k == 0) return 0;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->fragment(L, &r.cx, TH(theta, d), X->d, X->cols, Gy->d, frag->d);
    else if (!vijp_layer_f32(&r, VIJP_F32_FRAGMENT, L, theta, X, Gy, NULL, frag, &rc, err))
        MP(L, &r)->fragment(L, TH(theta, m), X->m, X->cols, Gy->m, frag->m, X->fmt), vijp_mat_store_as(frag, VIJP_STORE_GRADIENT);
    return rc;
}

int vijp_layer_vijp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *Gx,
                    const vijp_mat *frag, vijp_mat *Gy, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    size_t k = fragment_count_on(L, &r, theta, X);
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gx, L->in, X->cols, "input cotangent", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)))
        return rc;
    if (k && (!frag || (rc = shape(frag, k, 1, "fragment", L, err))))
        return rc ? rc : vijp_fail(err, VIJP_EINVAL, "%s layer vijp needs its %zu-entry fragment", L->type->name, k);
    mpfr_t *fm = k ? frag->m : NULL;
    if (r.kind == VIJP_ROUTE_DOUBLE) {
        rc = L->type->d->vijp(L, &r.cx, TH(theta, d), X->d, X->cols, Gx->d, k ? frag->d : NULL, Gy->d, err);
    } else if (vijp_layer_f32(&r, VIJP_F32_VIJP, L, theta, X, Gx, k ? frag : NULL, Gy, &rc, err)) {
        /* rc and err as the native operator left them */
    } else {
        rc = MP(L, &r)->vijp(L, TH(theta, m), X->m, X->cols, Gx->m, fm, Gy->m, X->fmt);
        rc = MP_RETRY(L, &r, rc, vijp(L, TH(theta, m), X->m, X->cols, Gx->m, fm, Gy->m, X->fmt));
        if (rc) return vijp_fail(err, rc, "%s layer (%zu -> %zu) vijp in %s: the Jacobian is singular "
                                 "in this format (rank lost beyond the fragment)", L->type->name, L->in, L->out, X->fmt->name);
        vijp_mat_store_as(Gy, VIJP_STORE_GRADIENT);
    }
#ifdef VIJP_PERTURB_VIJP
    /* Regression-test build only (vijp-perturbed, see the Makefile): one ulp
     * up on every vijp output, the smallest change vijp regress must catch. */
    for (size_t i = 0; !rc && i < vijp_mat_len(Gy); i++) {
        if (Gy->d) Gy->d[i] = nextafter(Gy->d[i], INFINITY);
        else mpfr_nextabove(Gy->m[i]);
    }
#endif
    return rc;
}

int vijp_layer_jacobian(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *x, vijp_mat *J,
                        vijp_error *err)
{
    const vijp_route r = vijp_route_of(x->fmt);
    int rc;
    if ((rc = check_theta(L, &r, theta, x, err)) || (rc = shape(x, L->in, 1, "point", L, err)) ||
        (rc = shape(J, L->out, L->in, "Jacobian", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->jacobian(L, &r.cx, TH(theta, d), x->d, J->d);
    else MP(L, &r)->jacobian(L, TH(theta, m), x->m, J->m, x->fmt), vijp_mat_store(J);
    return 0;
}

int vijp_layer_cokernel(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *x, vijp_mat *Q,
                        vijp_error *err)
{
    const vijp_route r = vijp_route_of(x->fmt);
    int rc;
    size_t k = fragment_count_on(L, &r, theta, x);
    if ((rc = check_theta(L, &r, theta, x, err)) || (rc = shape(x, L->in, 1, "point", L, err)) ||
        (rc = shape(Q, L->out, k, "cokernel basis", L, err)))
        return rc;
    if (k == 0) return 0;
    if (r.kind == VIJP_ROUTE_DOUBLE) return L->type->d->cokernel(L, &r.cx, TH(theta, d), x->d, Q->d, err);
    rc = MP(L, &r)->cokernel(L, TH(theta, m), x->m, Q->m, x->fmt);
    if ((rc = MP_RETRY(L, &r, rc, cokernel(L, TH(theta, m), x->m, Q->m, x->fmt))))
        return vijp_fail(err, rc, "%s layer cokernel in %s: rank lost beyond the fragment", L->type->name, x->fmt->name);
    vijp_mat_store(Q);
    return 0;
}

int vijp_layer_inverse(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *Y, vijp_mat *X,
                       vijp_error *err)
{
    const vijp_route r = vijp_route_of(Y->fmt);
    int rc, dbl = r.kind == VIJP_ROUTE_DOUBLE;
    if (dbl ? !L->type->d->inverse : !L->type->mp || !L->type->mp->inverse)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer has no inverse", L->type->name);
    if ((rc = check_theta(L, &r, theta, Y, err)) || (rc = shape(Y, L->out, 0, "output", L, err)) ||
        (rc = shape(X, L->in, Y->cols, "input", L, err)))
        return rc;
    if (dbl) return L->type->d->inverse(L, &r.cx, TH(theta, d), Y->d, Y->cols, X->d, err);
    rc = MP(L, &r)->inverse(L, TH(theta, m), Y->m, Y->cols, X->m, Y->fmt);
    if ((rc = MP_RETRY(L, &r, rc, inverse(L, TH(theta, m), Y->m, Y->cols, X->m, Y->fmt))))
        return vijp_fail(err, rc, "%s layer inverse in %s failed (%s)", L->type->name, Y->fmt->name,
                         rc == VIJP_EUNSUPPORTED ? "not square" : "singular or outside the range");
    vijp_mat_store(X);
    return 0;
}

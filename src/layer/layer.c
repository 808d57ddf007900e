/* The layer interface: what a type descriptor must hold (vijp_layer_type_check),
 * an instance's copy, clear and spec, and the format-generic operators
 * engines call.  The registry of types is src/layers/registry.c. */
#include "vijp/layer.h"
#include "vijp/interval.h"
#include "vijp/error.h"
#include "format/mat_mp.h"
#include "base/fork.h"
#include "emu_native.h"
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
    int elementwise = vijp_layer_type_elementwise(T);
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

/* The MPFR arrays a type's mp (or emu) operators take, for matrices that
 * hold doubles in a format other than double (vijp/mat.h: every format
 * whose values are doubles): each input expanded exactly into an MPFR twin
 * at the format's precision (format/mat_mp.h), each output computed in a
 * twin of its own values and read back exactly (the operators' results lie
 * on the format's arithmetic grid, doubles: vijp_format_values_double),
 * then stored as before.  An MPFR-held matrix passes its own array.  The
 * public vijp_ops_mp signature stays as it is (oracles, plugins). */
enum { MP_ARGS_MAX = 6 };
typedef struct {
    vijp_mat twin[MP_ARGS_MAX];
    vijp_mat *back[MP_ARGS_MAX]; /* the output a twin is read back into; NULL for an input */
    int n;
} mp_args;

static mpfr_t *mp_arg(mp_args *g, const vijp_mat *a, vijp_mat *out)
{
    if (!a || a->m || !a->d) return a ? a->m : NULL;
    if (g->n == MP_ARGS_MAX) abort(); /* a programming error: no operator takes more */
    vijp_mat *t = &g->twin[g->n];
    g->back[g->n++] = out;
    vijp_mat_init_mp(t, a, 1); /* an output's own values too: what an operator leaves unwritten stays */
    return t->m;
}

static mpfr_t *mp_in(mp_args *g, const vijp_mat *a) { return mp_arg(g, a, NULL); }
static mpfr_t *mp_out(mp_args *g, vijp_mat *a) { return mp_arg(g, a, a); }

/* The type's emulation on doubles (emu_native.h) where the route emulates
 * (the narrow formats; FLOAT where the float operator declined) and every
 * matrix given holds doubles (NULL: none given); NULL otherwise, and the
 * operator runs on MPFR arrays as below. */
static const struct vijp_emu_native *native_of(const vijp_layer *L, const vijp_route *r, const vijp_mat *a,
                                               const vijp_mat *b, const vijp_mat *c, const vijp_mat *d)
{
    if ((r->kind != VIJP_ROUTE_EMULATED && r->kind != VIJP_ROUTE_FLOAT) || !L->type->emu || !L->type->emu_native)
        return NULL;
    const vijp_mat *all[] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (all[i] && !all[i]->d) return NULL;
    return L->type->emu_native;
}

/* The type's mp operators on θ's doubles (emu_native.h's mp_*) where the
 * route is MPFR, θ alone holds doubles (the drift memo's copy: format
 * double, src/drift/memo.c) and every other matrix given is MPFR-held
 * (NULL: none given); NULL otherwise, and θ gets an MPFR twin as below. */
static const struct vijp_emu_native *theta_d_of(const vijp_layer *L, const vijp_route *r, const vijp_mat *theta,
                                                const vijp_mat *a, const vijp_mat *b, const vijp_mat *c)
{
    if (r->kind != VIJP_ROUTE_MPFR || !theta || !theta->d || theta->m || !L->type->emu_native) return NULL;
    const vijp_mat *all[] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (all[i] && !all[i]->m) return NULL;
    return L->type->emu_native;
}

/* Outputs read back (also where the operator failed: what it left there,
 * as in an MPFR-held output), every twin freed. */
static void mp_done(mp_args *g)
{
    for (int i = 0; i < g->n; i++) {
        if (g->back[i]) vijp_mat_put_mp(g->back[i], &g->twin[i]);
        vijp_mat_clear(&g->twin[i]);
    }
    g->n = 0;
}
/* An int operator of the emulation that leaves its case to mp (route.h). */
#define MP_RETRY(L, r, rc, call) \
    ((rc) == VIJP_EUNSUPPORTED && MP(L, r) != (L)->type->mp ? (L)->type->mp->call : (rc))

int vijp_layer_forward(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *Y,
                       vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    const struct vijp_emu_native *nat;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Y, L->out, X->cols, "output", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->forward(L, &r.cx, TH(theta, d), X->d, X->cols, Y->d);
    else if (vijp_layer_f32(&r, VIJP_F32_FORWARD, L, theta, X, NULL, NULL, Y, &rc, err)) {
        /* rc and err as the native float operator left them */
    } else if ((nat = native_of(L, &r, theta, X, Y, NULL)) && nat->forward) {
        nat->forward(L, TH(theta, d), X->d, X->cols, Y->d, X->fmt), vijp_mat_store(Y);
    } else if ((nat = theta_d_of(L, &r, theta, X, Y, NULL)) && nat->mp_forward &&
               !nat->mp_forward(L, theta->d, X->m, X->cols, Y->m, X->fmt)) {
        vijp_mat_store(Y);
    } else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *y = mp_out(&g, Y);
        MP(L, &r)->forward(L, th, x, X->cols, y, X->fmt);
        mp_done(&g), vijp_mat_store(Y);
    }
    return rc;
}

int vijp_layer_jvp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *U,
                   vijp_mat *V, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    const struct vijp_emu_native *nat;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(U, L->in, X->cols, "tangent", L, err)) ||
        (rc = shape(V, L->out, X->cols, "output tangent", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->jvp(L, &r.cx, TH(theta, d), X->d, X->cols, U->d, V->d);
    else if (vijp_layer_f32(&r, VIJP_F32_JVP, L, theta, X, U, NULL, V, &rc, err)) {
        /* rc and err as the native float operator left them */
    } else if ((nat = native_of(L, &r, theta, X, U, V)) && nat->jvp) {
        nat->jvp(L, TH(theta, d), X->d, X->cols, U->d, V->d, X->fmt), vijp_mat_store(V);
    } else if ((nat = theta_d_of(L, &r, theta, X, U, V)) && nat->mp_jvp &&
               !nat->mp_jvp(L, theta->d, X->m, X->cols, U->m, V->m, X->fmt)) {
        vijp_mat_store(V);
    } else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *u = mp_in(&g, U), *v = mp_out(&g, V);
        MP(L, &r)->jvp(L, th, x, X->cols, u, v, X->fmt);
        mp_done(&g), vijp_mat_store(V);
    }
    return rc;
}

/* An elementwise activation's forward pass with its derivative on a range
 * of the batch's columns (the format's threads, base/fork.h): a unit's Y
 * and D come from its own X alone (emu_native.h), by the same operations
 * whichever thread computes them, so the bits do not depend on the count
 * (tests/t-fork.c). */
typedef struct {
    const vijp_layer *L;
    const struct vijp_emu_native *nat;
    const vijp_mat *X;
    vijp_mat *Y, *D;
} forward_deriv_run;

static void forward_deriv_columns(void *ctx, size_t part, size_t begin, size_t end)
{
    const forward_deriv_run *r = ctx;
    size_t in = r->L->in; /* = out: elementwise */
    (void)part;
    r->nat->mp_forward_deriv(r->L, r->X->m + begin * in, end - begin, r->Y->m + begin * in, r->D->m + begin * in,
                             r->X->fmt);
}

int vijp_layer_forward_deriv(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, vijp_mat *Y, vijp_mat *D,
                             vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    const struct vijp_emu_native *nat = L->type->emu_native;
    if (r.kind != VIJP_ROUTE_MPFR || !nat || !nat->mp_forward_deriv || !X->m || !Y->m || !D->m ||
        D->fmt->kind != VIJP_MPFR || D->fmt->prec != X->fmt->prec || L->type->residual != VIJP_RESIDUAL_DERIV)
        return VIJP_EUNSUPPORTED;
    int rc;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Y, L->out, X->cols, "output", L, err)) || (rc = shape(D, L->in, X->cols, "derivative", L, err)))
        return rc;
    /* An MPFR elementary function (or a division) per unit at 64 bits or
     * more, 0.4 to 4 µs: 4096 of fork.h's units is the low end. */
    forward_deriv_run run = {L, nat, X, Y, D};
    vijp_fork(X->fmt->threads, X->cols, 4096.0 * (double)(L->in * X->cols), forward_deriv_columns, &run);
    vijp_mat_store(Y), vijp_mat_store(D);
    return 0;
}

int vijp_layer_vjp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *Gy,
                   vijp_mat *Gx, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    const struct vijp_emu_native *nat;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)) ||
        (rc = shape(Gx, L->in, X->cols, "input cotangent", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->vjp(L, &r.cx, TH(theta, d), X->d, X->cols, Gy->d, Gx->d);
    else if (vijp_layer_f32(&r, VIJP_F32_VJP, L, theta, X, Gy, NULL, Gx, &rc, err)) {
        /* rc and err as the native float operator left them */
    } else if ((nat = native_of(L, &r, theta, X, Gy, Gx)) && nat->vjp) {
        nat->vjp(L, TH(theta, d), X->d, X->cols, Gy->d, Gx->d, X->fmt), vijp_mat_store_as(Gx, VIJP_STORE_GRADIENT);
    } else if ((nat = theta_d_of(L, &r, theta, X, Gy, Gx)) && nat->mp_vjp &&
               !nat->mp_vjp(L, theta->d, X->m, X->cols, Gy->m, Gx->m, X->fmt)) {
        vijp_mat_store_as(Gx, VIJP_STORE_GRADIENT);
    } else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *gy = mp_in(&g, Gy), *gx = mp_out(&g, Gx);
        MP(L, &r)->vjp(L, th, x, X->cols, gy, gx, X->fmt);
        mp_done(&g), vijp_mat_store_as(Gx, VIJP_STORE_GRADIENT);
    }
    return rc;
}

int vijp_layer_vjp_param(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X,
                         const vijp_mat *Gy, vijp_mat *Gt, vijp_error *err)
{
    if (L->type->param_count(L) == 0) return 0;
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    const struct vijp_emu_native *nat;
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)) ||
        (rc = shape(Gt, theta->rows, 1, "parameter gradient", L, err)))
        return rc;
    if (r.kind == VIJP_ROUTE_DOUBLE) L->type->d->vjp_param(L, &r.cx, theta->d, X->d, X->cols, Gy->d, Gt->d);
    else if (vijp_layer_f32(&r, VIJP_F32_VJP_PARAM, L, theta, X, Gy, NULL, Gt, &rc, err)) {
        /* rc and err as the native float operator left them */
    } else if ((nat = native_of(L, &r, theta, X, Gy, Gt)) && nat->vjp_param) {
        nat->vjp_param(L, theta->d, X->d, X->cols, Gy->d, Gt->d, X->fmt), vijp_mat_store_as(Gt, VIJP_STORE_GRADIENT);
    } else if ((nat = theta_d_of(L, &r, theta, X, Gy, Gt)) && nat->mp_vjp_param &&
               !nat->mp_vjp_param(L, theta->d, X->m, X->cols, Gy->m, Gt->m, X->fmt)) {
        vijp_mat_store_as(Gt, VIJP_STORE_GRADIENT);
    } else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *gy = mp_in(&g, Gy), *gt = mp_out(&g, Gt);
        MP(L, &r)->vjp_param(L, th, x, X->cols, gy, gt, X->fmt);
        mp_done(&g), vijp_mat_store_as(Gt, VIJP_STORE_GRADIENT);
    }
    return rc;
}

static size_t fragment_count_on(const vijp_layer *L, const vijp_route *r, const vijp_mat *theta, const vijp_mat *X)
{
    if (r->kind == VIJP_ROUTE_DOUBLE)
        return L->type->d->fragment_count ? L->type->d->fragment_count(L, &r->cx, TH(theta, d), X->d, X->cols) : 0;
    const vijp_ops_mp *o = MP(L, r);
    if (!o || !o->fragment_count) return 0;
    const struct vijp_emu_native *nat = native_of(L, r, theta, X, NULL, NULL);
    if (nat && nat->fragment_count) return nat->fragment_count(L, TH(theta, d), X->d, X->cols);
    mp_args g = {0};
    mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X);
    size_t k = o->fragment_count(L, th, x, X->cols);
    mp_done(&g);
    return k;
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
    {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *gy = mp_in(&g, Gy), *fr = mp_out(&g, frag);
        MP(L, &r)->fragment(L, th, x, X->cols, gy, fr, X->fmt);
        mp_done(&g), vijp_mat_store_as(frag, VIJP_STORE_GRADIENT);
    }
    return rc;
}

int vijp_layer_vijp(const vijp_layer *L, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *Gx,
                    const vijp_mat *frag, vijp_mat *Gy, vijp_error *err)
{
    const vijp_route r = vijp_route_of(X->fmt);
    int rc;
    const struct vijp_emu_native *nat;
    size_t k = fragment_count_on(L, &r, theta, X);
    if ((rc = check_theta(L, &r, theta, X, err)) || (rc = shape(X, L->in, 0, "input", L, err)) ||
        (rc = shape(Gx, L->in, X->cols, "input cotangent", L, err)) ||
        (rc = shape(Gy, L->out, X->cols, "output cotangent", L, err)))
        return rc;
    if (k && (!frag || (rc = shape(frag, k, 1, "fragment", L, err))))
        return rc ? rc : vijp_fail(err, VIJP_EINVAL, "%s layer vijp needs its %zu-entry fragment", L->type->name, k);
    if (r.kind == VIJP_ROUTE_DOUBLE) {
        rc = L->type->d->vijp(L, &r.cx, TH(theta, d), X->d, X->cols, Gx->d, k ? frag->d : NULL, Gy->d, err);
    } else if (vijp_layer_f32(&r, VIJP_F32_VIJP, L, theta, X, Gx, k ? frag : NULL, Gy, &rc, err)) {
        /* rc and err as the native operator left them */
    } else if ((nat = native_of(L, &r, theta, X, Gx, k ? frag : NULL)) && nat->vijp && Gy->d &&
               (rc = nat->vijp(L, TH(theta, d), X->d, X->cols, Gx->d, k ? frag->d : NULL, Gy->d, X->fmt)) !=
                   VIJP_EUNSUPPORTED) {
        if (rc) return vijp_fail(err, rc, "%s layer (%zu -> %zu) vijp in %s: the Jacobian is singular "
                                 "in this format (rank lost beyond the fragment)", L->type->name, L->in, L->out, X->fmt->name);
        vijp_mat_store_as(Gy, VIJP_STORE_GRADIENT);
    } else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *x = mp_in(&g, X), *gx = mp_in(&g, Gx), *fm = k ? mp_in(&g, frag) : NULL;
        mpfr_t *gy = mp_out(&g, Gy);
        rc = MP(L, &r)->vijp(L, th, x, X->cols, gx, fm, gy, X->fmt);
        rc = MP_RETRY(L, &r, rc, vijp(L, th, x, X->cols, gx, fm, gy, X->fmt));
        mp_done(&g);
        if (rc) return vijp_fail(err, rc, "%s layer (%zu -> %zu) vijp in %s: the Jacobian is singular "
                                 "in this format (rank lost beyond the fragment)", L->type->name, L->in, L->out, X->fmt->name);
        vijp_mat_store_as(Gy, VIJP_STORE_GRADIENT);
    }
#ifdef VIJP_PERTURB_VIJP
    /* Regression-test build only (vijp-perturbed, see the Makefile): one ulp
     * up on every vijp output, the smallest change vijp regress must catch. */
    for (size_t i = 0; !rc && i < vijp_mat_len(Gy); i++) {
        if (Gy->d && Gy->fmt->kind == VIJP_DOUBLE) Gy->d[i] = nextafter(Gy->d[i], INFINITY);
        else if (Gy->d) { /* one ulp of the format's precision, as on an MPFR-held Gy */
            mpfr_t t;
            mpfr_init2(t, Gy->fmt->prec);
            mpfr_set_d(t, Gy->d[i], MPFR_RNDN), mpfr_nextabove(t), Gy->d[i] = mpfr_get_d(t, MPFR_RNDN); /* exact */
            mpfr_clear(t);
        } else mpfr_nextabove(Gy->m[i]);
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
    else {
        mp_args g = {0};
        mpfr_t *th = mp_in(&g, theta), *xm = mp_in(&g, x), *j = mp_out(&g, J);
        MP(L, &r)->jacobian(L, th, xm, j, x->fmt);
        mp_done(&g), vijp_mat_store(J);
    }
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
    mp_args g = {0};
    mpfr_t *th = mp_in(&g, theta), *xm = mp_in(&g, x), *q = mp_out(&g, Q);
    rc = MP(L, &r)->cokernel(L, th, xm, q, x->fmt);
    rc = MP_RETRY(L, &r, rc, cokernel(L, th, xm, q, x->fmt));
    mp_done(&g);
    if (rc)
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
    const struct vijp_emu_native *nat = native_of(L, &r, theta, Y, X, NULL);
    if (nat && nat->inverse && (rc = nat->inverse(L, TH(theta, d), Y->d, Y->cols, X->d, Y->fmt)) != VIJP_EUNSUPPORTED) {
        if (rc) return vijp_fail(err, rc, "%s layer inverse in %s failed (%s)", L->type->name, Y->fmt->name,
                                 "singular or outside the range");
        vijp_mat_store(X);
        return 0;
    }
    mp_args g = {0};
    mpfr_t *th = mp_in(&g, theta), *y = mp_in(&g, Y), *xm = mp_out(&g, X);
    rc = MP(L, &r)->inverse(L, th, y, Y->cols, xm, Y->fmt);
    rc = MP_RETRY(L, &r, rc, inverse(L, th, y, Y->cols, xm, Y->fmt));
    mp_done(&g);
    if (rc)
        return vijp_fail(err, rc, "%s layer inverse in %s failed (%s)", L->type->name, Y->fmt->name,
                         rc == VIJP_EUNSUPPORTED ? "not square" : "singular or outside the range");
    vijp_mat_store(X);
    return 0;
}

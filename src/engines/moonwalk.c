/* Moonwalk (DESIGN §2): g_0 by a cheap first phase, then one forward sweep that
 * recomputes h_i and rebuilds g_i = vijp_i(h_{i−1}, g_{i−1}) [+ fragment].
 *   mixed mode:   forward pass keeping only what input vjps need (sign bits,
 *                 or inputs for layers that need values), reverse pass on input
 *                 cotangents only, storing each layer's fragment;
 *   pure forward: g_0 and every fragment c_i = g_i Q_i by forward-mode jvps of
 *                 the identity and of the cokernel bases Q_i; stores fragments.
 * Cost against backprop: per layer, mixed mode runs forward F twice, the input
 * vjp V, the vijp S and the parameter vjp P, where backprop runs F, V and P:
 * Σ(2F + V + S + P) / Σ(F + V + P) in flops, 5/3 + n/(9B) for square dense
 * layers (S = LU + two triangular solves).  bench/engines.c derives it
 * per layer type and measures the time ratio against it. */
#include "engine_internal.h"
#include "layer/route.h"
#include "vijp/error.h"
#include <stdlib.h>
#include <string.h>

static void mat_free_all(vijp_mat *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++) vijp_mat_clear(&a[i]);
    free(a);
}

int engine_moonwalk_sweep(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                          vijp_mat *frag, vijp_ledger *ledger, engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t B = X->cols;
    vijp_mat h, hn;
    vijp_mat_init(&h, net->width, B, X->fmt);
    vijp_mat_copy(&h, X);
    const vijp_mat *gprev = &out->grad_x;
    int rc = 0;
    for (size_t i = 0; i < net->depth && !rc; i++) {
        const vijp_layer *L = &net->layers[i];
        rc = vijp_layer_vijp(L, &theta[i], &h, gprev, frag[i].rows ? &frag[i] : NULL, &out->g[i], err);
        if (rc == VIJP_ESINGULAR) out->rebuilt = i;
        ledger_release(ledger, mat_bytes(&frag[i]));
        vijp_mat_clear(&frag[i]);
        if (!rc) rc = engine_param_grad(net, theta, X, i, &h, steps, out, err);
        vijp_mat_init_unset(&hn, L->out, B, X->fmt);
        engine_key(&hn, X, VIJP_SR_OUTPUT, i + 1, 0);
        if (!rc) rc = vijp_layer_forward(L, &theta[i], &h, &hn, err);
        vijp_mat_clear(&h);
        h = hn;
        gprev = &out->g[i];
        if (!rc) engine_step(steps);
    }
    vijp_mat_clear(&h);
    return rc;
}

/* The input surrogate a mixed-mode reverse pass hands to the layer's vjp:
 * the stored input, ±1 rebuilt from sign bits, or zeros when the vjp ignores it. */
static void surrogate(vijp_mat *Xt, vijp_residual_kind kind, const uint8_t *bits, const vijp_mat *vals)
{
    size_t n = vijp_mat_len(Xt);
    static const double sign[2] = {-1.0, 1.0};
    if (kind == VIJP_RESIDUAL_INPUT || kind == VIJP_RESIDUAL_INVERSE) vijp_mat_copy(Xt, vals);
    else if (kind == VIJP_RESIDUAL_SIGN && Xt->fmt->kind == VIJP_DOUBLE) /* d also holds the emulated formats' values */
        vijp_kctx_of(Xt->fmt).k->sign_unpack_d(n, bits, Xt->d);
    else if (kind == VIJP_RESIDUAL_SIGN)
        for (size_t k = 0; k < n; k++) vijp_mat_set_entry_d(Xt, k, sign[(bits[k / 8] >> (k % 8)) & 1]);
    else vijp_mat_zero(Xt);
}

/* The ledger of a depth-d network replayed from this run's per-layer entries:
 * h_0, then residuals r_0 … r_{d−1} kept going forward; going back, layer i
 * keeps its fragment c_i before releasing r_i.  The peak is therefore
 *   h_0 + max_{i<d} (R_i + C_d − C_i),  R_i = r_0 + … + r_i,  C_i = c_0 + … + c_{i−1},
 * and the running maximum of R_i − C_i makes every depth O(1).  The vijp
 * sweep only releases.  t-engines.c checks this against runs of the cut
 * networks.
 *
 * A layer whose input its inverse rebuilds (VIJP_RESIDUAL_INVERSE) stores it
 * in the depth-d network only when the chain of such layers above it ends,
 * below d, at a layer that keeps no input values (see rebuilds()): then its
 * r_i depends on d, and that depth is replayed in O(d). */
static void mixed_profile(size_t *by_depth, size_t h0, const size_t *res, const size_t *in_bytes,
                          const vijp_layer *layers, const vijp_mat *frag, size_t D)
{
    int any_inverse = 0;
    for (size_t i = 0; i < D; i++) any_inverse |= layers[i].type->residual == VIJP_RESIDUAL_INVERSE;
    long long R = 0, C = 0, best = 0; /* R_i − C_i may be negative */
    for (size_t d = 1; d <= D; d++) {
        if (!any_inverse) {
            R += (long long)res[d - 1];
            if (d == 1 || R - C > best) best = R - C; /* i = d − 1 joins the maximum */
            C += (long long)mat_bytes(&frag[d - 1]);
            by_depth[d - 1] = h0 + (size_t)(best + C);
            continue;
        }
        long long Rd = 0, Cd = 0, bd = 0, Ctot = 0;
        for (size_t i = 0; i < d; i++) Ctot += (long long)mat_bytes(&frag[i]);
        for (size_t i = 0; i < d; i++) {
            size_t r = res[i];
            if (layers[i].type->residual == VIJP_RESIDUAL_INVERSE) {
                size_t j = i + 1;
                while (j < d && layers[j].type->residual == VIJP_RESIDUAL_INVERSE) j++;
                r = j < d && layers[j].type->residual != VIJP_RESIDUAL_INPUT ? in_bytes[i] : 0;
            }
            Rd += (long long)r;
            if (i == 0 || Rd - Cd > bd) bd = Rd - Cd;
            Cd += (long long)mat_bytes(&frag[i]);
        }
        by_depth[d - 1] = h0 + (size_t)(bd + Ctot);
    }
}

/* Which layers' inputs the reverse pass rebuilds with their inverse: an
 * INVERSE layer whose output is known going back, because it is h_D, the
 * stored input of the layer above, or rebuilt by the layer above. */
static void rebuilds(const vijp_net *net, int *rb)
{
    for (size_t i = net->depth; i-- > 0;) {
        const vijp_layer *L = &net->layers[i];
        int known = i + 1 == net->depth || net->layers[i + 1].type->residual == VIJP_RESIDUAL_INPUT ||
                    (net->layers[i + 1].type->residual == VIJP_RESIDUAL_INVERSE && rb[i + 1]);
        rb[i] = L->type->residual == VIJP_RESIDUAL_INVERSE && known;
    }
}

int engine_moonwalk(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, const vijp_mat *T,
                    engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t D = net->depth, B = X->cols;
    const vijp_format *f = X->fmt;
    vijp_format acc; /* what a smooth activation's f′ is kept in (vijp_format_accumulator) */
    vijp_format_accumulator(f, &acc);
    vijp_ledger ledger = {0, 0};
    uint8_t **bits = vijp_alloc_array(D, sizeof *bits);
    vijp_mat *vals = vijp_alloc_array(D, sizeof *vals), *frag = vijp_alloc_array(D, sizeof *frag);
    size_t *res_bytes = vijp_alloc_array(D, sizeof *res_bytes), *in_bytes = vijp_alloc_array(D, sizeof *in_bytes);
    int *rebuild = vijp_alloc_array(D, sizeof *rebuild);
    vijp_mat h, hn, g = {0}, gn, Xt;
    int rc = 0;
    if (rc) goto done;

    ledger_keep(&ledger, mat_bytes(X)); /* h_0, read again by the sweep */
    rebuilds(net, rebuild);
    vijp_mat_init(&h, net->width, B, f);
    vijp_mat_copy(&h, X);
    for (size_t i = 0; i < D && !rc; i++) { /* forward: keep residuals only */
        const vijp_layer *L = &net->layers[i];
        size_t n = vijp_mat_len(&h);
        in_bytes[i] = mat_bytes(&h);
        if (L->type->residual == VIJP_RESIDUAL_SIGN) {
            res_bytes[i] = (n + 7) / 8;
            bits[i] = vijp_alloc_array(res_bytes[i], 1);
            if (h.fmt->kind == VIJP_DOUBLE) vijp_kctx_of(h.fmt).k->sign_pack_d(n, h.d, bits[i]);
            else /* an emulated format's values, held as doubles or in MPFR (vijp/mat.h): positive, as mpfr_sgn > 0 */
                for (size_t k = 0; k < n; k++)
                    if (h.d ? h.d[k] > 0 : mpfr_sgn(h.m[k]) > 0) bits[i][k / 8] |= (uint8_t)(1u << (k % 8));
        } else if (L->type->residual == VIJP_RESIDUAL_INPUT ||
                   (L->type->residual == VIJP_RESIDUAL_INVERSE && !rebuild[i])) {
            vijp_mat_init_unset(&vals[i], h.rows, B, f);
            vijp_mat_copy(&vals[i], &h);
            res_bytes[i] = mat_bytes(&vals[i]);
        } else if (L->type->residual == VIJP_RESIDUAL_DERIV) { /* nested forward AD: keep f′, unrounded to storage */
            vijp_mat_init_unset(&vals[i], h.rows, B, &acc);
            rc = engine_derivative(L, &theta[i], &h, &vals[i], err);
            res_bytes[i] = mat_bytes(&vals[i]);
        }
        ledger_keep(&ledger, res_bytes[i]);
        vijp_mat_init_unset(&hn, L->out, B, f);
        engine_key(&hn, X, VIJP_SR_OUTPUT, i + 1, 0);
        if (!rc) rc = vijp_layer_forward(L, &theta[i], &h, &hn, err); /* not over engine_derivative's failure */
        vijp_mat_clear(&h);
        h = hn;
        if (!rc) engine_step(steps);
    }
    if (!rc) {
        vijp_mat_init(&g, h.rows, B, f);
        engine_key(&g, X, VIJP_SR_COTANGENT, D, 0);
        out->loss = engine_loss(net, &h, T, &g);
    }
    /* h now holds h_D: going back it is the output of the layer at hand
     * whenever that layer's input is stored or rebuilt (a work buffer, not
     * counted: the reversible engine's "last activation"). */
    for (size_t i = D; i-- > 0 && !rc;) { /* reverse: input cotangents and fragments */
        const vijp_layer *L = &net->layers[i];
        vijp_mat_init(&Xt, L->in, B, f);
        engine_key(&Xt, X, VIJP_SR_REBUILT, i, 0);
        int deriv = L->type->residual == VIJP_RESIDUAL_DERIV;
        if (rebuild[i]) rc = vijp_layer_inverse(L, &theta[i], &h, &Xt, err);
        else if (!deriv) surrogate(&Xt, L->type->residual, bits[i], &vals[i]);
        size_t k = deriv ? 0 : vijp_layer_fragment_count(L, &theta[i], &Xt); /* smooth: no cokernel to store */
        vijp_mat_init(&frag[i], k, 1, f);
        engine_key(&frag[i], X, VIJP_SR_FRAGMENT, i + 1, 0);
        ledger_keep(&ledger, mat_bytes(&frag[i]));
        if (!rc && !deriv) rc = vijp_layer_fragment(L, &theta[i], &Xt, &g, &frag[i], err);
        vijp_mat_init_unset(&gn, L->in, B, f);
        engine_key(&gn, X, VIJP_SR_COTANGENT, i, 0);
        if (!rc && deriv) vijp_mat_mul_elem(&gn, &g, &vals[i]); /* g ⊙ f′ */
        else if (!rc) rc = vijp_layer_vjp(L, &theta[i], &Xt, &g, &gn, err);
        vijp_mat_clear(&g);
        g = gn;
        vijp_mat_clear(&h);
        h = Xt; /* the input, where it is real (stored or rebuilt); a surrogate only below a layer that needs none */
        ledger_release(&ledger, res_bytes[i]);
        free(bits[i]), bits[i] = NULL;
        vijp_mat_clear(&vals[i]);
        if (!rc) engine_step(steps);
    }
    vijp_mat_clear(&h);
    if (!rc) {
        mixed_profile(out->stored_by_depth, mat_bytes(X), res_bytes, in_bytes, net->layers, frag, D);
        vijp_mat_copy(&out->grad_x, &g);
        vijp_mat_clear(&g);
        rc = engine_moonwalk_sweep(net, theta, X, frag, &ledger, steps, out, err);
    } else if (g.d || g.m) {
        vijp_mat_clear(&g);
    }
done:
    for (size_t i = 0; bits && i < D; i++) free(bits[i]);
    free(bits);
    free(res_bytes), free(in_bytes), free(rebuild);
    mat_free_all(vals, vals ? D : 0);
    mat_free_all(frag, frag ? D : 0);
    out->stored_bytes = ledger.peak;
    return rc;
}

/* One sample: forward with a block of tangents (identity for g_0, then each
 * layer's cokernel basis appended as it is met); r = Tᵀ g_D gives g_0 followed
 * by the fragments in layer order.  k[i] receives each layer's fragment size. */
static int pure_forward_sample(const vijp_net *net, const vijp_mat *theta, const vijp_mat *x, size_t b,
                               const vijp_mat *t, vijp_mat *r, size_t *k, double *loss, engine_steps *steps,
                               vijp_error *err)
{
    const vijp_format *f = x->fmt;
    size_t c = net->width;
    vijp_mat h, hn, Tg, Tn, Hrep, Q, gD;
    vijp_mat_init(&h, net->width, 1, f);
    vijp_mat_copy(&h, x);
    vijp_mat_init(&Tg, c, c, f);
    for (size_t j = 0; j < c; j++) vijp_mat_set_entry_d(&Tg, j + j * c, 1.0);
    int rc = 0;
    for (size_t i = 0; i < net->depth && !rc; i++) {
        const vijp_layer *L = &net->layers[i];
        vijp_mat_init(&Hrep, L->in, c, f);
        for (size_t j = 0; j < c; j++) vijp_mat_copy_range(&Hrep, j * L->in, &h, 0, L->in);
        k[i] = vijp_layer_fragment_count(L, &theta[i], &h);
        vijp_mat_init(&Tn, L->out, c + k[i], f);
        engine_key(&Tn, x, VIJP_SR_TANGENT, i + 1, b + 1); /* sample b's tensors: the run's stream, x carries it */
        vijp_mat Tv = Tn; /* view of the first c columns */
        Tv.cols = c;
        rc = vijp_layer_jvp(L, &theta[i], &Hrep, &Tg, &Tv, err);
        if (!rc && k[i]) {
            vijp_mat_init(&Q, L->out, k[i], f);
            engine_key(&Q, x, VIJP_SR_BASIS, i + 1, b + 1);
            rc = vijp_layer_cokernel(L, &theta[i], &h, &Q, err);
            vijp_mat_copy_range(&Tn, c * L->out, &Q, 0, L->out * k[i]);
            vijp_mat_clear(&Q);
        }
        vijp_mat_init(&hn, L->out, 1, f);
        engine_key(&hn, x, VIJP_SR_OUTPUT, i + 1, b + 1);
        if (!rc) rc = vijp_layer_forward(L, &theta[i], &h, &hn, err);
        vijp_mat_clear(&h), vijp_mat_clear(&Hrep), vijp_mat_clear(&Tg);
        h = hn;
        Tg = Tn;
        c += k[i];
        if (!rc) engine_step(steps);
    }
    if (!rc) {
        vijp_mat_init(&gD, h.rows, 1, f);
        engine_key(&gD, x, VIJP_SR_COTANGENT, net->depth, b + 1);
        *loss += engine_loss(net, &h, t, &gD);
        vijp_mat_init(r, c, 1, f);
        engine_key(r, x, VIJP_SR_FRAGMENT, 0, b + 1); /* g_0 and every fragment of sample b */
        vijp_mat_tdot(r, &Tg, &gD);
        vijp_mat_clear(&gD);
    }
    vijp_mat_clear(&h), vijp_mat_clear(&Tg);
    return rc;
}

int engine_pure_forward(const vijp_net *net, const vijp_mat *theta, const vijp_mat *X,
                        const vijp_mat *T, engine_steps *steps, vijp_grads *out, vijp_error *err)
{
    size_t D = net->depth, B = X->cols, n0 = net->width, mD = vijp_net_out_width(net);
    const vijp_format *f = X->fmt;
    vijp_ledger ledger = {0, 0};
    vijp_mat *r = vijp_alloc_array(B, sizeof *r), *frag = vijp_alloc_array(D, sizeof *frag), x, t;
    size_t *k = vijp_alloc_array(D * B, sizeof *k);
    int rc = 0;
    ledger_keep(&ledger, mat_bytes(X)); /* h_0, read again by the sweep */
    vijp_mat_init(&x, n0, 1, f);
    x.sr = X->sr; /* the run's stream, for pure_forward_sample's keys */
    vijp_mat_init(&t, mD, 1, f);
    for (size_t b = 0; b < B && !rc; b++) {
        vijp_mat_copy_range(&x, 0, X, b * n0, n0);
        vijp_mat_copy_range(&t, 0, T, b * mD, mD);
        rc = pure_forward_sample(net, theta, &x, b, &t, &r[b], k + b * D, &out->loss, steps, err);
        if (!rc) ledger_keep(&ledger, (vijp_mat_len(&r[b]) - n0) * f->value_bytes); /* its fragments */
    }
    vijp_mat_clear(&x), vijp_mat_clear(&t);
    for (size_t i = 0; i < D && !rc; i++) { /* regroup fragments by layer */
        size_t total = 0;
        for (size_t b = 0; b < B; b++) total += k[b * D + i];
        vijp_mat_init(&frag[i], total, 1, f);
        for (size_t b = 0, pos = 0, o; b < B; b++) {
            o = n0;
            for (size_t j = 0; j < i; j++) o += k[b * D + j];
            vijp_mat_copy_range(&frag[i], pos, &r[b], o, k[b * D + i]);
            pos += k[b * D + i];
        }
    }
    for (size_t i = 0, sum = mat_bytes(X); i < D && !rc; i++) /* h_0 and the fragments of layers 1..d */
        out->stored_by_depth[i] = sum += mat_bytes(&frag[i]);
    for (size_t b = 0; b < B && !rc; b++) vijp_mat_copy_range(&out->grad_x, b * n0, &r[b], 0, n0);
    mat_free_all(r, r ? B : 0);
    if (!rc) rc = engine_moonwalk_sweep(net, theta, X, frag, &ledger, steps, out, err);
    mat_free_all(frag, frag ? D : 0);
    free(k);
    out->stored_bytes = ledger.peak;
    return rc;
}

/* Enclosures of a layer's values over a box of inputs (vijp_layer_image_box,
 * certify.h): what `vijp certify --net NET --box` certifies each next layer
 * over.  In MPFI at IMAGE_PREC bits, every operation outward rounded, the
 * box travelling between the sub-layers of a block as intervals:
 *   elementwise activations  mean value form f(m) + f′(X)·(X − m);
 *   layers declared linear   f(0) + J·X, J enclosed;
 *   layernorm, groupnorm     per run: a-priori range ∩ natural extension ∩
 *                            mean value form (layernorm_image below), then
 *                            the affine part w ⊙ ŷ + b;
 *   softmax                  its exact range, 1/(1 + Σ_{j≠k} exp(X_j − X_k));
 *   additive, affine,        the natural extension through the enclosures of
 *   residual                 their sub-layers (coupling_image, residual_image);
 *   the rest (image_more.c)  logsoftmax's exact range, maxpool's (monotone),
 *                            and any type with an interval Jacobian over a
 *                            box (plugins): the mean value form f(m) +
 *                            J(X)·(X − m), or with only a Lipschitz
 *                            constant L_J of J Taylor's form f(m) +
 *                            J(m)·(X − m) ± L_J·r²/2, intersected with any
 *                            enclosure above.
 * The built-in types without an interval hook of their own are known by
 * name, as the catalogue's accessors know them (src/layer/catalogue.c: no
 * plugin can take a built-in name). */
#include "image.h"
#include "vijp/catalogue.h"
#include "vijp/certify.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include "oracles/norm.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define box_new vijp_image_vec_new
#define box_free vijp_image_vec_free

static int enclose(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err);


/* softplus:β/T jumps down where βx passes T: f = x there, below the smooth
 * log(1 + e^(βx))/β by log1p(e^(−βx))/β <= e^(−T)/β.  0 when X keeps to one
 * side (the margin 2^-40·max(1, |T|) covers βx rounded by the forward),
 * else that jump enclosed, [−e^(−T)/β, e^(−T)/β], which the mean value form
 * (f′ enclosed over both pieces) must add to stay sound across it. */
int vijp_image_softplus_jump(const vijp_layer *L, mpfi_srcptr x, mpfi_t jump)
{
    if (strcmp(L->type->name, "softplus") && strcmp(L->type->name, "softplus_beta")) return 0;
    vijp_softplus_args a = vijp_softplus_get(L);
    if (isinf(a.threshold)) return 0;
    double margin = 0x1p-40 * fmax(1, fabs(a.threshold));
    mpfi_mul_d(jump, x, a.beta);
    if (mpfr_cmp_d(&jump->right, a.threshold - margin) < 0 || mpfr_cmp_d(&jump->left, a.threshold + margin) > 0) return 0;
    mpfr_t e;
    mpfr_init2(e, IMAGE_PREC);
    mpfi_set_d(jump, -a.threshold), mpfi_exp(jump, jump), mpfi_div_d(jump, jump, a.beta), mpfi_get_right(e, jump);
    mpfi_interv_fr(jump, e, e), mpfi_neg(jump, jump), mpfi_put_fr(jump, e); /* [−e, e] */
    mpfr_clear(e);
    return 1;
}

/* Elementwise: f(X) ⊆ f(m) + f′(X)·(X − m), m the midpoint (in X); where
 * f′(X) keeps one sign f is monotone on X (continuous: no jump in it), and
 * its range is exactly the hull of f(lo) and f(hi), which is intersected
 * (relu's image is then >= 0, tanh's its exact range). */
static int image_elementwise(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t n = L->in;
    mpfr_t *mid = vijp_alloc_array(n, sizeof *mid);
    mpfi_t *at_lo = box_new(n), *at_hi = box_new(n);
    for (size_t i = 0; i < n; i++) mpfr_init2(mid[i], IMAGE_PREC), mpfi_get_left(mid[i], x[i]);
    int rc = vijp_image_value_at(L, theta, mid, NULL, at_lo, err);
    for (size_t i = 0; i < n; i++) mpfi_get_right(mid[i], x[i]);
    if (!rc) rc = vijp_image_value_at(L, theta, mid, NULL, at_hi, err);
    for (size_t i = 0; i < n; i++) mpfi_mid(mid[i], x[i]);
    if (!rc) rc = vijp_image_value_at(L, theta, mid, NULL, y, err);
    mpfi_t d, t;
    mpfi_init2(d, IMAGE_PREC), mpfi_init2(t, IMAGE_PREC);
    for (size_t i = 0; !rc && i < n; i++) {
        vijp_deriv_enclose_of(L->type)(L, theta, d, x[i]);
        int monotone = !mpfi_nan_p(d) && (mpfr_sgn(&d->left) >= 0 || mpfr_sgn(&d->right) <= 0);
        if (vijp_image_softplus_jump(L, x[i], t)) mpfi_add(y[i], y[i], t), monotone = 0;
        mpfi_sub_fr(t, x[i], mid[i]); /* X − m, outward */
        mpfi_mul(d, d, t);
        mpfi_add(y[i], y[i], d);
        if (monotone) {
            mpfi_put(at_lo[i], at_hi[i]); /* the hull of f(lo) and f(hi), either order */
            mpfi_intersect(y[i], y[i], at_lo[i]);
        }
        if (mpfi_nan_p(y[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no enclosure of f over input %zu's interval", L->type->name, i + 1);
    }
    mpfi_clear(d), mpfi_clear(t);
    for (size_t i = 0; i < n; i++) mpfr_clear(mid[i]);
    box_free(at_lo, n), box_free(at_hi, n);
    free(mid);
    return rc;
}

/* J the same at every x: f(X) = f(0) + J X, with J enclosed at 0. */
static int image_linear(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t m = L->out, n = L->in;
    double *zero = vijp_alloc_array(n, sizeof *zero), *mid = vijp_alloc_array(m * n, sizeof *mid),
           *rad = vijp_alloc_array(m * n, sizeof *rad);
    mpfr_t *zero_mp = vijp_alloc_array(n, sizeof *zero_mp);
    for (size_t k = 0; k < n; k++) mpfr_init2(zero_mp[k], IMAGE_PREC), mpfr_set_zero(zero_mp[k], 1);
    int rc = vijp_image_value_at(L, theta, zero_mp, NULL, y, err);
    if (!rc) rc = vijp_layer_jacobian_enclosure(L, theta, zero, mid, rad, err);
    mpfi_t j;
    mpfr_t a, b;
    mpfi_init2(j, IMAGE_PREC), mpfr_inits2(IMAGE_PREC, a, b, (mpfr_ptr)0);
    for (size_t i = 0; !rc && i < m; i++)
        for (size_t k = 0; k < n; k++) { /* [mid ∓ rad], exact at 128 bits, times X_k, outward */
            mpfr_set_d(a, mid[i + k * m], MPFR_RNDN), mpfr_sub_d(a, a, rad[i + k * m], MPFR_RNDD);
            mpfr_set_d(b, mid[i + k * m], MPFR_RNDN), mpfr_add_d(b, b, rad[i + k * m], MPFR_RNDU);
            mpfi_interv_fr(j, a, b);
            mpfi_mul(j, j, x[k]);
            mpfi_add(y[i], y[i], j);
        }
    mpfi_clear(j), mpfr_clears(a, b, (mpfr_ptr)0);
    for (size_t k = 0; k < n; k++) mpfr_clear(zero_mp[k]);
    free(zero), free(mid), free(rad), free(zero_mp);
    return rc;
}

/* ---- LayerNorm on one run of n units: ŷ = (x − μ)/s, s = √(σ² + ε), σ² =
 * mean((x − μ)²) (src/layers/layernorm.c, layernorm_runs.c; ŷ = 0 where
 * s = 0); the affine part and the runs after (norm_image) ---- */

/* c_i = x_i − mean(x) over the box X: ((n − 1)X_i − Σ_{j≠i} X_j)/n, each
 * X_j used once, so the interval is the exact range (outward rounded),
 * where X_i − mean(X) would count X_i twice. */
static void centred(mpfi_t *x, size_t n, mpfi_t *c)
{
    mpfi_t *before = box_new(n + 1), after;
    mpfi_init2(after, IMAGE_PREC);
    mpfi_set_ui(before[0], 0);
    for (size_t i = 0; i < n; i++) mpfi_add(before[i + 1], before[i], x[i]); /* Σ_{j<i} in before[i] */
    mpfi_set_ui(after, 0);                                                  /* Σ_{j>i}, from the end */
    for (size_t i = n; i-- > 0;) {
        mpfi_add(c[i], before[i], after);
        mpfi_mul_ui(before[n], x[i], (unsigned long)(n - 1)); /* before[n] is free once the sums are taken */
        mpfi_sub(c[i], before[n], c[i]);
        mpfi_div_ui(c[i], c[i], (unsigned long)n);
        mpfi_add(after, after, x[i]);
    }
    mpfi_clear(after);
    box_free(before, n + 1);
}

/* sqrt(Σ c_i² / n) into s. */
static void rms(mpfi_t *c, size_t n, mpfi_t s)
{
    mpfi_t t;
    mpfi_init2(t, IMAGE_PREC);
    mpfi_set_ui(s, 0);
    for (size_t i = 0; i < n; i++) mpfi_sqr(t, c[i]), mpfi_add(s, s, t);
    mpfi_div_ui(s, s, (unsigned long)n), mpfi_sqrt(s, s);
    mpfi_clear(t);
}

/* v/σ over the box, where σ ∈ S may reach 0: for σ > 0 it is V/S; where
 * S's lower end is 0 only V's sign bounds it (v_i > 0 forces σ > 0, so
 * v_i/σ >= v_lo/σ_hi); else the whole line (0 at σ = 0 is in it). */
static void over_sigma(mpfi_t out, mpfi_t v, mpfi_t S)
{
    if (mpfi_is_strictly_pos(S)) {
        mpfi_div(out, v, S);
        return;
    }
    mpfr_t a, b;
    mpfr_inits2(IMAGE_PREC, a, b, (mpfr_ptr)0);
    mpfi_get_right(b, S);
    if (mpfi_is_strictly_pos(v) && mpfr_sgn(b) > 0) {
        mpfi_get_left(a, v), mpfr_div(a, a, b, MPFR_RNDD), mpfr_set_inf(b, 1);
    } else if (mpfi_is_strictly_neg(v) && mpfr_sgn(b) > 0) {
        mpfi_get_right(a, v), mpfr_div(b, a, b, MPFR_RNDU), mpfr_set_inf(a, -1);
    } else mpfr_set_inf(a, -1), mpfr_set_inf(b, 1);
    mpfi_interv_fr(out, a, b);
    mpfr_clears(a, b, (mpfr_ptr)0);
}

/* Three sound enclosures of each y_i, intersected:
 *  a-priori  |y_i| <= sqrt(n − 1).  Proof: c = x − μ1 sums to 0, so
 *            c_i = −Σ_{j≠i} c_j and, by Cauchy–Schwarz, c_i² <= (n − 1)
 *            Σ_{j≠i} c_j² = (n − 1)(‖c‖² − c_i²), i.e. n c_i² <= (n − 1)‖c‖²;
 *            with s² = ‖c‖²/n + ε >= ‖c‖²/n (ε >= 0), y_i² = c_i²/s²
 *            <= n c_i²/‖c‖² <= n − 1 (equality at c ∝ (n − 1, −1, …, −1),
 *            ε = 0).  At s = 0 the layer gives 0, inside.
 *  natural   C_i/S: C_i = x_i − μ's exact range (centred), S ⊇ σ(box)
 *            from the intersection of sqrt(Σ C_i²/n) and the triangle
 *            inequality √n·σ(x) = ‖P x‖ ∈ ‖P m‖ ± ‖x − m‖ (P = I − 11ᵀ/n,
 *            an orthogonal projection: ‖P(x − m)‖ <= ‖x − m‖).
 *            With ε > 0, S is √(S² + ε), s increasing in σ.
 *  mean value, where S > 0 (s is then smooth and positive on the convex
 *            box): y_i(x) = y_i(m) + [J(ξ)(x − m)]_i for some ξ in the box,
 *            J = (I − 11ᵀ/n − ŷŷᵀ/n)/s (∂s/∂x_j = c_j/(n s) at any ε):
 *            y_i(m) + Σ_j (δ_ij − 1/n −
 *            Ŷ_iŶ_j/n)Δ_j / S, Δ = X − m, Ŷ the natural enclosure ∩
 *            a-priori.  O(n²), entry by entry: its excess over the range
 *            is second order in the box's width.  (The O(n) form
 *            (Δ_i − mean(Δ) − Ŷ_i·Σ_j Ŷ_jΔ_j/n)/S loses the signs of the
 *            entries: 1.55 times the sampled range where this one is 1.03,
 *            and never narrower in tests/t-certify-box.c's boxes.) */
static int layernorm_image(size_t n, double eps, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    mpfi_t *c = box_new(n), *mpt = box_new(n), *cm = box_new(n), *delta = box_new(n);
    mpfi_t bound, S, Sm, R, t, u, sum;
    mpfi_init2(bound, IMAGE_PREC), mpfi_init2(S, IMAGE_PREC), mpfi_init2(Sm, IMAGE_PREC), mpfi_init2(R, IMAGE_PREC);
    mpfi_init2(t, IMAGE_PREC), mpfi_init2(u, IMAGE_PREC), mpfi_init2(sum, IMAGE_PREC);
    mpfr_t e, m;
    mpfr_inits2(IMAGE_PREC, e, m, (mpfr_ptr)0);

    mpfi_set_ui(bound, (unsigned long)(n - 1)), mpfi_sqrt(bound, bound), mpfi_get_right(e, bound);
    mpfr_neg(m, e, MPFR_RNDD), mpfi_interv_fr(bound, m, e); /* [−sqrt(n − 1), sqrt(n − 1)], outward */

    centred(x, n, c);
    mpfi_set_ui(sum, 0);
    for (size_t i = 0; i < n; i++) {
        mpfi_mid(m, x[i]), mpfi_set_fr(mpt[i], m);
        mpfi_sub_fr(delta[i], x[i], m);
        mpfi_mag(e, delta[i]), mpfi_set_fr(t, e), mpfi_sqr(t, t), mpfi_add(sum, sum, t);
    }
    mpfi_sqrt(R, sum), mpfi_get_right(e, R);                 /* ‖x − m‖ <= e over the box */
    centred(mpt, n, cm), rms(cm, n, Sm);                      /* σ(m) */
    rms(c, n, S);                                             /* natural */
    mpfi_set_ui(t, (unsigned long)n), mpfi_sqrt(t, t);
    mpfi_mul(u, Sm, t), mpfi_add_fr(sum, u, e), mpfi_sub_fr(u, u, e); /* ‖Pm‖ ± e */
    mpfi_put(u, sum), mpfi_div(u, u, t);                      /* triangle: hull / √n */
    mpfi_get_left(e, u);
    if (mpfr_sgn(e) < 0) mpfr_set_zero(e, 1), mpfi_get_right(m, u), mpfi_interv_fr(u, e, m);
    mpfi_intersect(S, S, u);

    int rc = 0;
    mpfi_get_right(e, S);
    if (mpfr_zero_p(e)) { /* σ = 0 on the whole box: every input is constant, the layer gives 0 */
        for (size_t i = 0; i < n; i++) mpfi_set_ui(y[i], 0);
        goto done;
    }
    if (eps > 0) /* s = √(σ² + ε), increasing in σ >= 0: each interval used once */
        mpfi_sqr(S, S), mpfi_add_d(S, S, eps), mpfi_sqrt(S, S), mpfi_sqr(Sm, Sm), mpfi_add_d(Sm, Sm, eps), mpfi_sqrt(Sm, Sm);
    for (size_t i = 0; i < n; i++) over_sigma(y[i], c[i], S), mpfi_intersect(y[i], y[i], bound);
    if (mpfi_is_strictly_pos(S) && mpfi_is_strictly_pos(Sm)) { /* the mean value form, with Ŷ = y[] so far */
        mpfi_t *yh = box_new(n), row, entry;
        mpfi_init2(row, IMAGE_PREC), mpfi_init2(entry, IMAGE_PREC);
        for (size_t i = 0; i < n; i++) mpfi_set(yh[i], y[i]);
        for (size_t i = 0; i < n; i++) {
            mpfi_set_ui(row, 0); /* Σ_j (δ_ij − (1 + Ŷ_iŶ_j)/n)·Δ_j */
            for (size_t j = 0; j < n; j++) {
                mpfi_mul(entry, yh[i], yh[j]), mpfi_add_ui(entry, entry, 1), mpfi_div_ui(entry, entry, (unsigned long)n);
                mpfi_ui_sub(entry, i == j, entry), mpfi_mul(entry, entry, delta[j]), mpfi_add(row, row, entry);
            }
            mpfi_div(row, row, S);
            mpfi_div(t, cm[i], Sm), mpfi_add(row, row, t); /* y_i(m) + … */
            mpfi_intersect(y[i], y[i], row);
        }
        mpfi_clear(row), mpfi_clear(entry);
        box_free(yh, n);
    }
    for (size_t i = 0; i < n && !rc; i++)
        if (mpfi_nan_p(y[i]) || mpfi_is_empty(y[i]))
            rc = vijp_fail(err, VIJP_EDOMAIN, "layernorm: no enclosure of output %zu over the box", i + 1);
done:
    mpfr_clears(e, m, (mpfr_ptr)0);
    mpfi_clear(bound), mpfi_clear(S), mpfi_clear(Sm), mpfi_clear(R), mpfi_clear(t), mpfi_clear(u), mpfi_clear(sum);
    box_free(c, n), box_free(mpt, n), box_free(cm, n), box_free(delta, n);
    return rc;
}

/* layernorm[:N][:eps=E][:affine] and groupnorm:GxC[...]: each run of N
 * units (a group of C/G channels) by layernorm_image, then w ⊙ ŷ + b, the
 * weight of a unit its position in the run (layernorm) or its channel
 * (groupnorm), as oracles/normlayers.c reads them: each interval used once,
 * so the affine part adds only its outward rounding.  Plain layernorm (no
 * state) is one run, ε = 0, no affine part. */
static int norm_image(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    if (!L->state) return layernorm_image(L->in, 0, x, y, err);
    const vo_layernorm_args *a = L->state;
    size_t N = a->run, weights = a->channels ? a->channels : N;
    int rc = 0;
    for (size_t r = 0; r < L->in / N && !rc; r++) rc = layernorm_image(N, a->eps, x + r * N, y + r * N, err);
    for (size_t u = 0; a->affine && !rc && u < L->in; u++) {
        size_t q = a->channels ? u / (L->in / a->channels) : u % N;
        mpfi_mul_d(y[u], y[u], theta[q]), mpfi_add_d(y[u], y[u], theta[weights + q]);
    }
    return rc;
}

/* ---- softmax: y_k = 1/(1 + Σ_{j≠k} exp(x_j − x_k)) ---- */

/* y_k decreases in every x_j − x_k (j ≠ k), so its range over the box is
 * [1/(1 + Σ_{j≠k} exp(hi_j − lo_k)), 1/(1 + Σ_{j≠k} exp(lo_j − hi_k))],
 * reached at two corners: exactly what the interval evaluation of this form
 * gives (X_j − X_k = [lo_j − hi_k, hi_j − lo_k]), outward rounded, and
 * intersected with [0, 1].  exp overflowing to +Inf keeps it sound
 * (1/[t, +Inf] = [0, 1/t]).  n² exponentials. */
static int softmax_image(const vijp_layer *L, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t n = L->in;
    mpfi_t t, unit;
    mpfi_init2(t, IMAGE_PREC), mpfi_init2(unit, IMAGE_PREC);
    mpfi_interv_ui(unit, 0, 1);
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        mpfi_set_ui(y[k], 1);
        for (size_t j = 0; j < n; j++)
            if (j != k) mpfi_sub(t, x[j], x[k]), mpfi_exp(t, t), mpfi_add(y[k], y[k], t);
        mpfi_inv(y[k], y[k]);
        mpfi_intersect(y[k], y[k], unit);
        if (mpfi_nan_p(y[k]) || mpfi_is_empty(y[k]))
            rc = vijp_fail(err, VIJP_EDOMAIN, "softmax: no enclosure of output %zu over the box", k + 1);
    }
    mpfi_clear(t), mpfi_clear(unit);
    return rc;
}

/* ---- coupling blocks: the natural extension through the sub-layers ---- */

/* Function c's image of a (h intervals) into out (h intervals), the block's
 * parameters from theta (F's, then G's). */
static int chain_image(const vijp_layer *L, int c, const double *theta, mpfi_t *a, mpfi_t *out, vijp_error *err)
{
    size_t h = L->in / 2, k = vijp_coupling_count(L, c), P = 0, w = h;
    for (size_t j = 0; c && j < vijp_coupling_count(L, 0); j++)
        P += vijp_coupling_sub(L, 0, j)->type->param_count(vijp_coupling_sub(L, 0, j));
    mpfi_t *cur = box_new(h);
    for (size_t i = 0; i < h; i++) mpfi_set(cur[i], a[i]);
    int rc = 0;
    for (size_t j = 0; j < k && !rc; j++) {
        const vijp_layer *s = vijp_coupling_sub(L, c, j);
        mpfi_t *next = box_new(s->out);
        rc = enclose(s, theta + P, cur, next, err);
        if (rc) { /* say which block the sub-layer belongs to */
            char was[sizeof err->msg];
            snprintf(was, sizeof was, "%s", err->msg);
            rc = vijp_fail(err, rc, "%s block, its sub-layer %zu: %.200s", L->type->name, j + 1, was);
        }
        P += s->type->param_count(s);
        box_free(cur, w);
        cur = next, w = s->out;
    }
    for (size_t i = 0; !rc && i < h; i++) mpfi_set(out[i], cur[i]);
    box_free(cur, w);
    return rc;
}

/* x = (x1, x2), halves of width h.
 *   additive  Y1 = X1 + F(X2), Y2 = X2 + G(Y1);
 *   affine    Y1 = X1, Y2 = X2 ⊙ scale(S(X1)) + T(X1), scale = exp, or
 *             σ(a + 2) = 1/(1 + exp(−(a + 2))), both increasing, each
 *             interval used once.
 * Sound (each x_k lies in its interval and every step is an interval
 * operation or a sub-layer's enclosure) but blind to the dependencies:
 * x2 enters Y2 directly and through Y1; s and t both depend on x1.  No
 * mean value form: nothing encloses a coupling's Jacobian over a box. */
static int coupling_image(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    size_t h = L->in / 2;
    mpfi_t *x1 = x, *x2 = x + h, *y1 = y, *y2 = y + h;
    mpfi_t *a = box_new(h), *b = box_new(h);
    int rc;
    if (!strcmp(L->type->name, "additive")) {
        rc = chain_image(L, 0, theta, x2, a, err);
        for (size_t i = 0; !rc && i < h; i++) mpfi_add(y1[i], x1[i], a[i]);
        if (!rc) rc = chain_image(L, 1, theta, y1, b, err);
        for (size_t i = 0; !rc && i < h; i++) mpfi_add(y2[i], x2[i], b[i]);
    } else {
        rc = chain_image(L, 0, theta, x1, a, err);
        if (!rc) rc = chain_image(L, 1, theta, x1, b, err);
        int exp_scale = vijp_affine_exp_scale(L);
        for (size_t i = 0; !rc && i < h; i++) {
            if (!exp_scale) mpfi_add_ui(a[i], a[i], 2), mpfi_neg(a[i], a[i]);
            mpfi_exp(a[i], a[i]);
            if (!exp_scale) mpfi_add_ui(a[i], a[i], 1), mpfi_inv(a[i], a[i]);
            mpfi_mul(y2[i], x2[i], a[i]), mpfi_add(y2[i], y2[i], b[i]);
            mpfi_set(y1[i], x1[i]);
        }
    }
    for (size_t i = 0; !rc && i < 2 * h; i++)
        if (mpfi_nan_p(y[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no enclosure of output %zu over the box", L->type->name, i + 1);
    box_free(a, h), box_free(b, h);
    return rc;
}

/* L's values over the box x (L->in intervals) into y (L->out). */
/* One path of a residual block (f, or P on the skip path; P absent: the
 * identity) over the box x into out (the block's output width), through
 * its layers' enclosures; *P_at the path's first parameter in theta. */
static int path_image(const vijp_layer *L, int skip, const double *theta, mpfi_t *x, mpfi_t *out, vijp_error *err)
{
    size_t k = vijp_residual_count(L, skip), w = L->in, at = 0;
    for (size_t j = 0; skip && j < vijp_residual_count(L, 0); j++)
        at += vijp_residual_sub(L, 0, j)->type->param_count(vijp_residual_sub(L, 0, j));
    mpfi_t *cur = box_new(w);
    for (size_t i = 0; i < w; i++) mpfi_set(cur[i], x[i]);
    int rc = 0;
    for (size_t j = 0; j < k && !rc; j++) {
        const vijp_layer *s = vijp_residual_sub(L, skip, j);
        mpfi_t *next = box_new(s->out);
        rc = enclose(s, theta ? theta + at : NULL, cur, next, err);
        at += s->type->param_count(s);
        box_free(cur, w);
        cur = next, w = s->out;
    }
    for (size_t i = 0; !rc && i < L->out; i++) mpfi_set(out[i], cur[i]);
    box_free(cur, w);
    return rc;
}

/* residual: Y = f(X) + P(X) (P = I without a projection), the natural
 * extension through each path's enclosures: sound (every step encloses),
 * blind to f and P sharing x. */
static int residual_image(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    mpfi_t *skip = box_new(L->out);
    int rc = path_image(L, 0, theta, x, y, err);
    if (!rc) rc = path_image(L, 1, theta, x, skip, err);
    for (size_t i = 0; !rc && i < L->out; i++) mpfi_add(y[i], y[i], skip[i]);
    box_free(skip, L->out);
    return rc;
}

/* The type's own enclosure into y: 0, a VIJP_E* code, or NO_OWN_IMAGE
 * (err untouched) when it has none. */
#define NO_OWN_IMAGE (-1)
static int own_image(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    const char *name = L->type->name;
    if (vijp_deriv_enclose_of(L->type)) return image_elementwise(L, theta, x, y, err);
    if (!strcmp(name, "layernorm") || !strcmp(name, "groupnorm")) return norm_image(L, theta, x, y, err);
    if (!strcmp(name, "softmax")) return softmax_image(L, x, y, err);
    if (!strcmp(name, "logsoftmax")) return vijp_image_logsoftmax(L, x, y, err);
    if (!strcmp(name, "maxpool1d") || !strcmp(name, "maxpool2d")) return vijp_image_monotone(L, theta, x, y, err);
    if (!strcmp(name, "additive") || !strcmp(name, "affine")) return coupling_image(L, theta, x, y, err);
    if (!strcmp(name, "residual")) return residual_image(L, theta, x, y, err);
    if (L->type->declare(L) & VIJP_DECL_LINEAR) return image_linear(L, theta, x, y, err);
    return NO_OWN_IMAGE;
}

/* The type's own enclosure, intersected with the mean value form where the
 * type encloses its Jacobian over a box (a plugin's jacobian_box), or with
 * Taylor's form where it gives only a Lipschitz constant of J, or either
 * form alone. */
static int enclose(const vijp_layer *L, const double *theta, mpfi_t *x, mpfi_t *y, vijp_error *err)
{
    if (!L->type->mp)
        return vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no MPFR operators to enclose its values over a box",
                         L->type->name);
    int rc = own_image(L, theta, x, y, err);
    int (*form)(const vijp_layer *, const double *, mpfi_t *, mpfi_t *, vijp_error *) =
        vijp_jacobian_box_of(L->type)          ? vijp_image_mean_value
        : vijp_jacobian_lipschitz_of(L->type) ? vijp_image_taylor
                                               : NULL;
    if (!form) {
        if (rc == NO_OWN_IMAGE)
            rc = vijp_fail(err, VIJP_EUNSUPPORTED, "%s layer: no enclosure of its values over a box (an elementwise "
                           "activation, a Jacobian independent of x, enclosed over a box or with a Lipschitz constant, "
                           "a normalisation, softmax, maxpool or a block)", L->type->name);
        return rc;
    }
    if (rc == NO_OWN_IMAGE) return form(L, theta, x, y, err);
    if (rc) return rc;
    mpfi_t *mv = box_new(L->out);
    rc = form(L, theta, x, mv, err);
    for (size_t i = 0; !rc && i < L->out; i++) {
        mpfi_intersect(y[i], y[i], mv[i]);
        if (mpfi_is_empty(y[i])) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: its enclosures of output %zu over the box "
                                                "do not meet: one of them is wrong", L->type->name, i + 1);
    }
    box_free(mv, L->out);
    return rc;
}

int vijp_image_box_check(const double *lo, const double *hi, size_t n, vijp_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lo[i]) || !isfinite(hi[i]) || lo[i] > hi[i])
            return vijp_fail(err, VIJP_EDOMAIN, "the box's coordinate %zu is [%g, %g]: want finite lo <= hi", i + 1,
                             lo[i], hi[i]);
    return 0;
}

int vijp_layer_image_box(const vijp_layer *L, const double *theta, const double *lo, const double *hi, double *out_lo,
                         double *out_hi, vijp_error *err)
{
    if (vijp_image_box_check(lo, hi, L->in, err)) return VIJP_EDOMAIN; /* as vijp_certify_box refuses it */
    mpfi_t *x = box_new(L->in), *y = box_new(L->out);
    for (size_t i = 0; i < L->in; i++) mpfi_interv_d(x[i], lo[i], hi[i]);
    int rc = enclose(L, theta, x, y, err);
    mpfr_t e;
    mpfr_init2(e, IMAGE_PREC);
    for (size_t i = 0; !rc && i < L->out; i++) {
        mpfi_get_left(e, y[i]), out_lo[i] = mpfr_get_d(e, MPFR_RNDD);
        mpfi_get_right(e, y[i]), out_hi[i] = mpfr_get_d(e, MPFR_RNDU);
        if (!isfinite(out_lo[i]) || !isfinite(out_hi[i]))
            rc = vijp_fail(err, VIJP_EDOMAIN, "%s layer: its values over the box leave double's range", L->type->name);
    }
    mpfr_clear(e);
    box_free(x, L->in), box_free(y, L->out);
    return rc;
}

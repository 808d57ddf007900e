/* The parameter gradient against differences of forward in θ
 * (vjp-param-vs-differences), independent of the type's own vjp_param and
 * of its MPFR twin's: a gradient that drops a term fails here whether the
 * twin is absent or shares the bug.
 *
 * vjp_param's entries ĝ_p approximate g_p = Σ_b Σ_i G_ib ∂f_i(x_b; θ)/∂θ_p,
 * and along a direction v of θ
 *   ⟨g, v⟩ = Σ_b ⟨G_b, J_θ(x_b) v⟩ = d/dε Σ_b ⟨G_b, f(x_b; θ + εv)⟩ at ε = 0.
 * Differences of forward give D ≈ J_θ v output by output (m × B) within E
 * (below); both sides are summed in MPFR at S = max(4096, W + 128) bits
 * (exact unless MPFR says otherwise, and then within 1.01·N·2^-S of the sum
 * of the N terms' magnitudes), and
 *   |⟨ĝ, v⟩ − ⟨G, D⟩| <= Σ_p |v_p|·β_p + Σ|G|·E (+ those roundings),
 * β_p a bound on ĝ_p's error: the contract's vjp_param_bound where the type
 * gives one, else, formed as the jvp's bound is,
 *   β_p = 1.01·(mB + n + K + 2)·u·Σ_b Σ_i |G_ib|·(|D_ib| + E_ib)  along e_p:
 * ĝ_p sums mB terms G_ib·∂_p f_i (Higham eq. 3.5), each a product of up to
 * three factors (two roundings), one of them within (n + K)u as the jvp
 * check holds an entry of J (a dot product of length n forming it, the
 * contract's ulps K), and |∂_p f_i| <= |D_ib| + E_ib.
 *
 * Directions: every e_p when P <= PG_COORDS (ĝ entry by entry); with MPFR
 * operators also PG_DIRS seeded Gaussian directions, which weigh every entry
 * at once, where every β_p is known (the contract's, or all coordinates
 * done).  Above PG_COORDS parameters these directions alone, where they run
 * (each costs four MPFR forwards, as a coordinate does), else PG_COORDS
 * seeded coordinates.
 *
 * Past mpfr:512 every bound and error term is held in units of 2^ex
 * (impl.h), the differences' E included. */
#include "impl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PG_COORDS 128
#define PG_DIRS 4
#define PG_SUM_PREC 4096

typedef struct {
    check_fix *t;
    size_t P, m, n, B;
    double K;
    long hexp, W;  /* MPFR differences: h = 2^-hexp, at W bits (or more, for exact steps) */
    vijp_mat ghat; /* vjp_param in the format under test (P × 1) */
    double *beta;  /* β_p, NaN until known */
    double *mx;    /* (M|x|)_ib at θ (m × B): the forward's error model */
    vijp_format H; /* the last direction's working format */
    vijp_mat D;    /* the last direction's differences (m × B, in H or in double) */
    double *E;     /* and their error bounds */
} pgrad;

static void pg_init(pgrad *g, check_fix *t)
{
    memset(g, 0, sizeof *g);
    g->t = t, g->P = t->thF.rows, g->m = t->L->out, g->n = t->L->in, g->B = t->B, g->K = check_term_ulps(t->L);
    /* truncation h²·|∂³f| near 2^-(prec + 256) and rounding 2^-W/h = 2^-(prec + 256) relative, both far below u */
    g->hexp = (long)t->F.prec / 2 + 128, g->W = g->hexp + (long)t->F.prec + 256;
    vijp_mat_init(&g->ghat, g->P, 1, &t->F);
    g->beta = vijp_alloc_array(g->P, sizeof *g->beta);
    g->mx = vijp_alloc_array(g->m * g->B, sizeof *g->mx), g->E = vijp_alloc_array(g->m * g->B, sizeof *g->E);
    for (size_t p = 0; p < g->P; p++) g->beta[p] = NAN;
}

static void pg_clear(pgrad *g)
{
    vijp_mat_clear(&g->ghat), vijp_mat_clear(&g->D);
    free(g->beta), free(g->mx), free(g->E);
}

/* Bits of the sums: S = max(PG_SUM_PREC, W + 128), W the differences'. */
static mpfr_prec_t sum_prec(const pgrad *g)
{
    long p = (long)g->H.prec + 128;
    return (mpfr_prec_t)(p > PG_SUM_PREC ? p : PG_SUM_PREC);
}

/* mx = M|x| per output and sample, M >= |J| from check_abs_jacobian. */
static int forward_model(pgrad *g, vijp_error *err)
{
    check_fix *t = g->t;
    size_t m = g->m, n = g->n;
    for (size_t b = 0; b < g->B; b++) {
        double *A = check_abs_jacobian(t, b, err);
        if (!A) return VIJP_EINVAL;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) g->mx[i + b * m] += A[i + j * m] * check_absval(&t->XR, j + b * n);
        free(A);
    }
    return 0;
}

/* β from the contract's vjp_param_bound, on the reference's |X|, |G| (as
 * vjp-param-vs-mpfr holds the MPFR operator to it). */
static void contract_beta(pgrad *g)
{
    check_fix *t = g->t;
    const vijp_layer *L = t->L;
    if (!L->type->vjp_param_bound) return;
    size_t nB = g->n * g->B, mB = g->m * g->B;
    double *aX = vijp_alloc_array(nB, sizeof *aX), *aG = vijp_alloc_array(mB, sizeof *aG);
    double *th = vijp_alloc_array(g->P, sizeof *th);
    for (size_t i = 0; i < nB; i++) aX[i] = check_absval(&t->XR, i);
    for (size_t i = 0; i < mB; i++) aG[i] = check_absval(&t->GR, i);
    for (size_t p = 0; p < g->P; p++) th[p] = vijp_mat_get_d(&t->thR, p), g->beta[p] = 0;
    L->type->vjp_param_bound(L, th, aX, aG, g->B, 1.01 * t->u, g->beta);
    free(aX), free(aG), free(th);
}

/* |b_i| at θ with θ_p = val (p may be output i's bias). */
static double bias_with(pgrad *g, size_t i, size_t p, double val)
{
    const vijp_layer *L = g->t->L;
    if (L->type->bias_index && L->type->bias_index(L, i) == p) return fabs(val);
    return check_bias_at(g->t, i);
}

/* Bits that hold θ_q ± h·v_q and θ_q ± 2h·v_q exactly, at least W: a
 * value in [2^(e−1), 2^e) of k significant bits has its lowest at 2^(e−k),
 * and |a ± s| < 2^(max(e_a, e_s) + 1). */
static long exact_prec(pgrad *g, const double *v)
{
    long need = g->W;
    mpfr_t a, s;
    mpfr_inits2((mpfr_prec_t)(g->t->F.prec > 53 ? g->t->F.prec : 53), a, s, (mpfr_ptr)0);
    for (size_t q = 0; q < g->P; q++) {
        if (v[q] == 0) continue;
        mpfr_set_d(s, v[q], MPFR_RNDN), mpfr_mul_2si(s, s, 1 - g->hexp, MPFR_RNDN); /* 2h·v_q, exact */
        check_entry(a, &g->t->thF, q);
        long es = (long)mpfr_get_exp(s), top = es, low = es - (long)mpfr_min_prec(s) - 1; /* h·v_q's lowest bit */
        if (!mpfr_zero_p(a)) {
            long ea = (long)mpfr_get_exp(a), la = ea - (long)mpfr_min_prec(a);
            top = top > ea ? top : ea, low = low < la ? low : la;
        }
        if (top + 1 - low > need) need = top + 1 - low;
    }
    mpfr_clears(a, s, (mpfr_ptr)0);
    return need;
}

/* With MPFR operators, along v: D = (f(θ + hv) − f(θ − hv)) / 2h at W bits
 * (more where θ ± hv needs them: the steps are exact), h = 2^-hexp; E
 * bounds D's error:
 *   rounding: each forward within ε = 1.01(n + K)·2^-W·(M|x| + |b| + |y|)
 *     (the contract's model, to which format-vs-mpfr holds the forward; M
 *     and |b| at θ: first order, the step being 2^-hexp), over 2h, and the
 *     subtraction's 2^-W|D|;
 *   truncation: h²/6·|∂³_ε f|, estimated by |D(h) − D(2h)| (3 times it to
 *     leading order).
 * D(2h) reuses D's buffer after D(h) is saved. */
static int diff_mpfr(pgrad *g, const double *v, vijp_error *err)
{
    check_fix *t = g->t;
    size_t P = g->P, m = g->m, mB = m * g->B;
    long W = exact_prec(g, v);
    vijp_mat_clear(&g->D);
    int rc = vijp_format_mpfr(&g->H, W, err);
    if (rc) return rc;
    vijp_mat tp, tm, X, Yp, Ym, D2;
    vijp_mat_init(&g->D, m, g->B, &g->H), vijp_mat_init(&D2, m, g->B, &g->H);
    vijp_mat_init(&tp, P, 1, &g->H), vijp_mat_init(&tm, P, 1, &g->H);
    vijp_mat_init(&X, g->n, g->B, &g->H), vijp_mat_convert(&X, &t->XR); /* exact: F's values */
    vijp_mat_init(&Yp, m, g->B, &g->H), vijp_mat_init(&Ym, m, g->B, &g->H);
    mpfr_t s;
    mpfr_init2(s, W);
    double e = 1.01 * ((double)g->n + g->K);
    for (int k = 1; !rc && k <= 2; k++) { /* steps h, then 2h */
        vijp_mat *Dk = k == 1 ? &g->D : &D2;
        for (size_t q = 0; q < P; q++) {
            mpfr_set_d(s, v[q], MPFR_RNDN), mpfr_mul_2si(s, s, k - 1 - g->hexp, MPFR_RNDN);
            check_entry(tp.m[q], &t->thF, q), mpfr_sub(tm.m[q], tp.m[q], s, MPFR_RNDN); /* exact: exact_prec */
            mpfr_add(tp.m[q], tp.m[q], s, MPFR_RNDN);
        }
        if ((rc = vijp_layer_forward(t->L, &tp, &X, &Yp, err)) || (rc = vijp_layer_forward(t->L, &tm, &X, &Ym, err)))
            break;
        for (size_t o = 0; o < mB; o++) {
            mpfr_sub(Dk->m[o], Yp.m[o], Ym.m[o], MPFR_RNDN);
            mpfr_mul_2si(Dk->m[o], Dk->m[o], g->hexp - k, MPFR_RNDN); /* / 2kh, exact */
            if (k > 1) continue;
            double y = fabs(mpfr_get_d(Yp.m[o], MPFR_RNDU)) + fabs(mpfr_get_d(Ym.m[o], MPFR_RNDU));
            double rnd = e * (2 * (g->mx[o] + check_bias_at(t, o % m)) + y); /* ε⁺ + ε⁻ in units of 2^-W */
            g->E[o] = ldexp(rnd, (int)(g->hexp - 1 - W - t->ex)) + ldexp(fabs(mpfr_get_d(Dk->m[o], MPFR_RNDU)), (int)(-W - t->ex));
        }
    }
    for (size_t o = 0; !rc && o < mB; o++) {
        mpfr_sub(s, g->D.m[o], D2.m[o], MPFR_RNDN), mpfr_abs(s, s, MPFR_RNDN);
        mpfr_mul_2si(s, s, -t->ex, MPFR_RNDN); /* into the checks' units: exact */
        g->E[o] += mpfr_get_d(s, MPFR_RNDU);
    }
    mpfr_clear(s);
    vijp_mat *all[] = {&tp, &tm, &X, &Yp, &Ym, &D2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vijp_mat_clear(all[i]);
    return rc;
}

/* Without MPFR operators, along e_p in double: D_k = (f̂(θ + h_k e_p) −
 * f̂(θ − h_k e_p)) / 2h_k, h_k = 2^(−2−k); f̂ at θ' = fl(θ ± h e_p) is within
 * ε(θ') = 1.01(n + K)u(M|x| + |b'| + |y'|) of f(θ') (b' the bias at θ':
 * θ_p may be one), and θ'_p within u|θ'_p| of θ_p ± h, which moves f by
 * u|θ'_p|·|∂_p f| (|∂_p f| ≈ |D_k| and M at θ: first order, as M at the
 * centre in the jvp's differences), so with the subtraction
 *   ρ_k = (ε(θ⁺) + ε(θ⁻) + u(|θ⁺_p| + |θ⁻_p|)|D_k|) / 2h_k + u|D_k|;
 * then one Richardson step (check_richardson: an estimate, so the check is
 * the weaker kind). */
static int diff_double(pgrad *g, size_t p, vijp_error *err)
{
    check_fix *t = g->t;
    size_t m = g->m, mB = m * g->B;
    double u = t->u, e = 1.01 * ((double)g->n + g->K) * u;
    vijp_mat tp, tm, Yp, Ym;
    vijp_mat_init(&tp, g->P, 1, &t->F), vijp_mat_init(&tm, g->P, 1, &t->F);
    vijp_mat_copy(&tp, &t->thF), vijp_mat_copy(&tm, &t->thF);
    vijp_mat_init(&Yp, m, g->B, &t->F), vijp_mat_init(&Ym, m, g->B, &t->F);
    double *d = vijp_alloc_array(CHECK_LEVELS * mB, sizeof *d), *rho = vijp_alloc_array(CHECK_LEVELS * mB, sizeof *rho);
    int rc = 0;
    for (int k = 0; !rc && k < CHECK_LEVELS; k++) {
        double h = ldexp(1, -2 - k), a = tp.d[p] = t->thF.d[p] + h, c = tm.d[p] = t->thF.d[p] - h;
        if ((rc = vijp_layer_forward(t->L, &tp, &t->XF, &Yp, err)) || (rc = vijp_layer_forward(t->L, &tm, &t->XF, &Ym, err)))
            break;
        for (size_t o = 0; o < mB; o++) {
            double dk = (Yp.d[o] - Ym.d[o]) / (2 * h);
            double ep = e * (g->mx[o] + bias_with(g, o % m, p, a) + fabs(Yp.d[o]));
            double em = e * (g->mx[o] + bias_with(g, o % m, p, c) + fabs(Ym.d[o]));
            d[k * mB + o] = dk;
            rho[k * mB + o] = (ep + em + u * (fabs(a) + fabs(c)) * fabs(dk)) / (2 * h) + u * fabs(dk);
        }
    }
    if (!rc) {
        vijp_mat_clear(&g->D), vijp_mat_init(&g->D, m, g->B, &t->F);
        check_richardson(d, rho, mB, g->D.d, g->E);
    }
    free(d), free(rho);
    vijp_mat_clear(&tp), vijp_mat_clear(&tm), vijp_mat_clear(&Yp), vijp_mat_clear(&Ym);
    return rc;
}

/* s = ⟨G, D⟩ at sum_prec bits; *aGD = Σ|G||D|, *aGE = Σ|G|E, and the
 * sum's rounding (0 when MPFR says it was exact) added to *aGE (in the
 * checks' units, as E). */
static void g_dot_d(pgrad *g, mpfr_t s, double *aGD, double *aGE)
{
    check_fix *t = g->t;
    size_t mB = g->m * g->B;
    mpfr_t p, q;
    mpfr_prec_t S = sum_prec(g);
    mpfr_inits2(S, p, q, (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    int inexact = 0;
    *aGD = *aGE = 0;
    for (size_t o = 0; o < mB; o++) {
        check_entry(p, &t->GF, o), check_entry(q, &g->D, o);
        inexact |= mpfr_fma(s, p, q, s, MPFR_RNDN) != 0;
        *aGD += check_absval(&t->GF, o) * check_absval(&g->D, o);
        *aGE += check_absval(&t->GF, o) * g->E[o];
    }
    if (inexact) *aGE += ldexp(1.01 * (double)mB * *aGD, (int)(-(long)S - t->ex));
    mpfr_clears(p, q, (mpfr_ptr)0);
}

/* ĝ_p against ⟨G, D⟩ along e_p; β_p formed from the differences where the
 * contract gives none. */
static void compare_coordinate(pgrad *g, size_t p, vijp_check_result *r)
{
    check_fix *t = g->t;
    mpfr_t s, a;
    mpfr_inits2(sum_prec(g), s, a, (mpfr_ptr)0);
    double aGD, aGE;
    g_dot_d(g, s, &aGD, &aGE);
    /* aGE is in units of 2^ex, aGD not: u·(aGD + aGE) in those units */
    if (isnan(g->beta[p]))
        g->beta[p] = 1.01 * ((double)(g->m * g->B + g->n) + g->K + 2) * t->u * (aGD + ldexp(aGE, (int)t->ex));
    check_entry(a, &g->ghat, p);
    mpfr_sub(a, a, s, MPFR_RNDN); /* within 2^-S of itself, then read up */
    check_record(r, "vjp_param", p, 0, check_num_mpfr(a), (check_num){g->beta[p] + aGE, t->ex});
    mpfr_clears(s, a, (mpfr_ptr)0);
}

/* ⟨ĝ, v⟩ against ⟨G, D⟩ along direction k, within Σ|v_p|β_p and the rest. */
static void compare_direction(pgrad *g, const double *v, size_t k, vijp_check_result *r)
{
    mpfr_t s, a, p;
    mpfr_prec_t S = sum_prec(g);
    mpfr_inits2(S, s, a, p, (mpfr_ptr)0);
    double aGD, aGE, av = 0, bound = 0;
    g_dot_d(g, s, &aGD, &aGE);
    mpfr_set_zero(a, 1);
    int inexact = 0;
    for (size_t q = 0; q < g->P; q++) {
        check_entry(p, &g->ghat, q);
        inexact |= mpfr_mul_d(p, p, v[q], MPFR_RNDN) != 0, inexact |= mpfr_add(a, a, p, MPFR_RNDN) != 0;
        av += check_absval(&g->ghat, q) * fabs(v[q]), bound += fabs(v[q]) * g->beta[q];
    }
    if (inexact) bound += ldexp(2.02 * (double)g->P * av, (int)(-(long)S - g->t->ex));
    mpfr_sub(a, a, s, MPFR_RNDN);
    check_record(r, "<vjp_param,v>", k, 0, check_num_mpfr(a), (check_num){bound + aGE, g->t->ex});
    mpfr_clears(s, a, p, (mpfr_ptr)0);
}

/* The coordinates to check, in order: all of them up to PG_COORDS; above,
 * none where the random directions run (MPFR operators and the contract's
 * β), else PG_COORDS seeded ones. */
static size_t pick_coordinates(const pgrad *g, vijp_rng *rng, size_t *idx)
{
    size_t P = g->P;
    for (size_t p = 0; p < P; p++) idx[p] = p;
    if (P <= PG_COORDS) return P;
    if (g->t->have_ref && g->t->L->type->vjp_param_bound) return 0;
    for (size_t k = 0; k < PG_COORDS; k++) { /* a partial Fisher–Yates shuffle */
        size_t j = k + (size_t)(vijp_rng_uniform(rng) * (double)(P - k));
        if (j >= P) j = P - 1;
        size_t s = idx[k];
        idx[k] = idx[j], idx[j] = s;
    }
    for (size_t k = 1; k < PG_COORDS; k++) /* insertion sort: the report reads in order */
        for (size_t j = k; j > 0 && idx[j - 1] > idx[j]; j--) {
            size_t s = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = s;
        }
    return PG_COORDS;
}

static int all_known(const pgrad *g)
{
    for (size_t p = 0; p < g->P; p++)
        if (isnan(g->beta[p])) return 0;
    return 1;
}

static void describe(pgrad *g, size_t nc, vijp_check_result *r)
{
    check_fix *t = g->t;
    int own = t->L->type->vjp_param_bound != NULL;
    if (t->have_ref)
        check_method(r, "central differences of the MPFR forward in θ at %ld bits, h = 2^-%ld: %zu of %zu e_p, %d "
                     "random directions, %zu points", g->W, g->hexp, nc, g->P, own || nc == g->P ? PG_DIRS : 0, g->B);
    else
        check_method(r, "Richardson-extrapolated central differences in θ in double (no MPFR operators), h = 2^-2 … "
                     "2^-17: %zu of %zu e_p, %zu points", nc, g->P, g->B);
    if (own)
        check_source(r, "the contract's vjp_param_bound (Σ|v_p|·bound_p along v) + Σ|G|·E, E the differences' "
                     "rounding (the forward's, over 2h) and truncation%s", t->have_ref ? " (|D(h) - D(2h)|)" : ", estimated");
    else
        check_source(r, "1.01·(mB + n + K + 2)·u·Σ|G||∂f/∂θ_p| (Higham eq. 3.5, K = %g; no vjp_param_bound) + Σ|G|·E, "
                     "E the differences' error%s", g->K, t->have_ref ? "" : ", estimated");
}

void check_vjp_param_differences(check_fix *t, vijp_check_result *r)
{
    if (!t->thF.rows) {
        check_skip(r, "the layer has no parameters");
        return;
    }
    vijp_error err = {0};
    pgrad g;
    pg_init(&g, t);
    vijp_rng rng;
    vijp_rng_seed(&rng, t->seed ^ 0x6a09e667f3bcc909ull);
    size_t *idx = vijp_alloc_array(g.P, sizeof *idx), nc = pick_coordinates(&g, &rng, idx);
    double *v = vijp_alloc_array(g.P, sizeof *v);
    describe(&g, nc, r);
    if (!t->have_ref) r->weaker = 1;
    if (t->have_ref && g.W > VIJP_PREC_MAX) {
        check_skip(r, "at %s the differences need %ld bits (h = 2^-%ld, truncation and rounding 2^-256 below u), "
                   "past MPFR formats' %d: differences are checked up to mpfr:%ld", t->F.name, g.W, g.hexp,
                   VIJP_PREC_MAX, check_diff_limit());
        goto out;
    }
    FAIL_IF(vijp_layer_vjp_param(t->L, &t->thF, &t->XF, &t->GF, &g.ghat, &err), "vjp_param");
    FAIL_IF(forward_model(&g, &err), "jacobian (for the bound)");
    contract_beta(&g);
    for (size_t k = 0; k < nc; k++) {
        size_t p = idx[k];
        if (t->have_ref) {
            memset(v, 0, g.P * sizeof *v), v[p] = 1;
            FAIL_IF(diff_mpfr(&g, v, &err), "forward (MPFR, differences in θ)");
        } else
            FAIL_IF(diff_double(&g, p, &err), "forward (differences in θ)");
        compare_coordinate(&g, p, r);
    }
    for (size_t k = 0; t->have_ref && all_known(&g) && k < PG_DIRS; k++) {
        for (size_t q = 0; q < g.P; q++) v[q] = vijp_rng_normal(&rng);
        FAIL_IF(diff_mpfr(&g, v, &err), "forward (MPFR, differences in θ)");
        compare_direction(&g, v, k, r);
    }
out:
    free(idx), free(v);
    pg_clear(&g);
}

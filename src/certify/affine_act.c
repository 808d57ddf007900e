/* An elementwise activation's linearisation over an interval [l, u]
 * (vijp_affine_linearise, affine.h): a slope α and an enclosure of
 * g(x) = f(x) − α·x over [l, u], so f(x) ∈ α·x + [g_lo, g_hi] there.
 *
 * Any α is sound: the enclosure of g carries it.  That enclosure cuts
 * [l, u] into PIECES equal pieces and takes the hull of each piece's:
 * where f′ − α keeps one sign on a piece (f′ enclosed by the type's
 * deriv_enclose, MPFI) g is monotone there and its range is exactly the
 * hull of its ends; elsewhere the mean value form g(m) + (f′(P) − α)·(P − m).
 * f at the cuts and midpoints comes from the type's MPFR forward at 256
 * bits (vijp_image_value_at, widened by its error bound); softplus:β/T's
 * jump is added where a piece straddles it, as image.c does.  Of the
 * candidates 0 (f's own range: the form restarts), the chord slope
 * (f(u) − f(l))/(u − l), and f′'s least, largest and middle value over
 * [l, u] (the min-range slopes), the one with the narrowest [g_lo, g_hi]
 * is kept.  For a convex or concave piece of a sigmoid the chord is the
 * minimax slope; across an inflection f′'s ends often do better. */
#include "affine.h"
#include "image.h"
#include "vijp/interval.h"
#include "vijp/vijp.h"
#include <stdlib.h>
#include <string.h>

#define PIECES 16
#define CANDIDATES 5

typedef struct {
    size_t n;
    mpfr_t *cut;    /* (PIECES + 1) × n: cut p of coordinate i at p·n + i */
    mpfr_t *mid;    /* PIECES × n */
    mpfi_t *f_cut;  /* f at each cut, enclosed */
    mpfi_t *f_mid;  /* f at each midpoint */
    mpfi_t *d;      /* f′ over each piece */
    mpfi_t *jump;   /* softplus's jump over each piece */
    int *jumps;     /* whether the piece straddles it */
} pieces;

static void pieces_clear(pieces *P)
{
    size_t n = P->n;
    for (size_t k = 0; k < (PIECES + 1) * n; k++) mpfr_clear(P->cut[k]);
    for (size_t k = 0; k < PIECES * n; k++) mpfr_clear(P->mid[k]);
    vijp_image_vec_free(P->f_cut, (PIECES + 1) * n), vijp_image_vec_free(P->f_mid, PIECES * n);
    vijp_image_vec_free(P->d, PIECES * n), vijp_image_vec_free(P->jump, PIECES * n);
    free(P->cut), free(P->mid), free(P->jumps);
}

/* The cuts l + (u − l)·p/PIECES (rounded to nearest: nondecreasing in p,
 * the ends exactly l and u, so the pieces cover [l, u]), midpoints, and f
 * and f′ on them. */
static int pieces_init(pieces *P, const vijp_layer *L, const double *theta, const double *lo, const double *hi,
                       vijp_error *err)
{
    size_t n = L->in;
    P->n = n;
    P->cut = vijp_alloc_array((PIECES + 1) * n + 1, sizeof *P->cut);
    P->mid = vijp_alloc_array(PIECES * n + 1, sizeof *P->mid);
    P->f_cut = vijp_image_vec_new((PIECES + 1) * n), P->f_mid = vijp_image_vec_new(PIECES * n);
    P->d = vijp_image_vec_new(PIECES * n), P->jump = vijp_image_vec_new(PIECES * n);
    P->jumps = vijp_alloc_array(PIECES * n + 1, sizeof *P->jumps);
    for (size_t k = 0; k < (PIECES + 1) * n; k++) mpfr_init2(P->cut[k], IMAGE_PREC);
    for (size_t k = 0; k < PIECES * n; k++) mpfr_init2(P->mid[k], IMAGE_PREC);
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; p <= PIECES; p++) {
            mpfr_ptr c = P->cut[p * n + i];
            if (p == PIECES) mpfr_set_d(c, hi[i], MPFR_RNDN);
            else {
                mpfr_set_d(c, hi[i], MPFR_RNDN), mpfr_sub_d(c, c, lo[i], MPFR_RNDN);
                mpfr_mul_ui(c, c, (unsigned long)p, MPFR_RNDN), mpfr_div_ui(c, c, PIECES, MPFR_RNDN);
                mpfr_add_d(c, c, lo[i], MPFR_RNDN);
            }
        }
    mpfi_t x;
    mpfi_init2(x, IMAGE_PREC);
    for (size_t p = 0; p < PIECES; p++)
        for (size_t i = 0; i < n; i++) {
            size_t k = p * n + i;
            mpfr_add(P->mid[k], P->cut[k], P->cut[k + n], MPFR_RNDN), mpfr_div_2ui(P->mid[k], P->mid[k], 1, MPFR_RNDN);
            mpfi_interv_fr(x, P->cut[k], P->cut[k + n]);
            vijp_deriv_enclose_of(L->type)(L, theta, P->d[k], x);
            P->jumps[k] = vijp_image_softplus_jump(L, x, P->jump[k]);
        }
    mpfi_clear(x);
    int rc = 0;
    for (size_t p = 0; !rc && p <= PIECES; p++) rc = vijp_image_value_at(L, theta, P->cut + p * n, NULL, P->f_cut + p * n, err);
    for (size_t p = 0; !rc && p < PIECES; p++) rc = vijp_image_value_at(L, theta, P->mid + p * n, NULL, P->f_mid + p * n, err);
    return rc;
}

/* g = f − α·x over piece p of coordinate i, into out (see the top). */
static void piece_range(const pieces *P, size_t p, size_t i, double alpha, mpfi_t out, mpfi_t t, mpfi_t s)
{
    size_t n = P->n, k = p * n + i;
    mpfi_sub_d(t, P->d[k], alpha);
    /* f − α·x monotone on the piece: its range is the hull of its ends.  A
     * NaN enclosure of f′ (a plugin's) says nothing: mpfr_sgn(NaN) is 0,
     * which must not read as a sign, so it takes the mean value form. */
    if (!P->jumps[k] && !mpfi_nan_p(t) && (mpfr_sgn(&t->left) >= 0 || mpfr_sgn(&t->right) <= 0)) {
        mpfi_set_fr(s, P->cut[k]), mpfi_mul_d(s, s, alpha), mpfi_sub(out, P->f_cut[k], s);
        mpfi_set_fr(s, P->cut[k + n]), mpfi_mul_d(s, s, alpha), mpfi_sub(s, P->f_cut[k + n], s);
        mpfi_put(out, s);
        return;
    }
    mpfi_interv_fr(s, P->cut[k], P->cut[k + n]), mpfi_sub_fr(s, s, P->mid[k]); /* P − m, outward */
    mpfi_mul(t, t, s);
    mpfi_set_fr(s, P->mid[k]), mpfi_mul_d(s, s, alpha), mpfi_sub(out, P->f_mid[k], s);
    mpfi_add(out, out, t);
    if (P->jumps[k]) mpfi_add(out, out, P->jump[k]);
}

int vijp_affine_linearise(const vijp_layer *L, const double *theta, const double *lo, const double *hi, double *alpha,
                          double *glo, double *ghi, vijp_error *err)
{
    pieces P;
    int rc = pieces_init(&P, L, theta, lo, hi, err);
    size_t n = L->in;
    mpfi_t range, best, piece, t, s, D;
    mpfi_init2(range, IMAGE_PREC), mpfi_init2(best, IMAGE_PREC), mpfi_init2(piece, IMAGE_PREC);
    mpfi_init2(t, IMAGE_PREC), mpfi_init2(s, IMAGE_PREC), mpfi_init2(D, IMAGE_PREC);
    mpfr_t w, bw;
    mpfr_inits2(IMAGE_PREC, w, bw, (mpfr_ptr)0);
    for (size_t i = 0; !rc && i < n; i++) {
        mpfi_set(D, P.d[i]);
        for (size_t p = 1; p < PIECES; p++) mpfi_put(D, P.d[p * n + i]);
        double cand[CANDIDATES] = {0, 0, mpfr_get_d(&D->left, MPFR_RNDN), mpfr_get_d(&D->right, MPFR_RNDN), 0};
        mpfi_mid(w, D), cand[4] = mpfr_get_d(w, MPFR_RNDN);
        if (hi[i] > lo[i]) { /* the chord's slope, its enclosure's midpoint */
            mpfi_sub(t, P.f_cut[PIECES * n + i], P.f_cut[i]);
            mpfi_set_d(s, hi[i]), mpfi_sub_d(s, s, lo[i]), mpfi_div(t, t, s);
            mpfi_mid(w, t), cand[1] = mpfr_get_d(w, MPFR_RNDN);
        }
        int found = 0;
        for (size_t c = 0; c < CANDIDATES; c++) {
            if (!isfinite(cand[c])) continue;
            piece_range(&P, 0, i, cand[c], range, t, s);
            for (size_t p = 1; p < PIECES; p++) piece_range(&P, p, i, cand[c], piece, t, s), mpfi_put(range, piece);
            if (mpfi_nan_p(range) || !mpfi_bounded_p(range)) continue;
            mpfi_diam_abs(w, range);
            if (!found || mpfr_less_p(w, bw)) mpfi_set(best, range), mpfr_set(bw, w, MPFR_RNDN), alpha[i] = cand[c], found = 1;
        }
        if (!found) rc = vijp_fail(err, VIJP_EDOMAIN, "%s: no linearisation over input %zu's interval", L->type->name, i + 1);
        else glo[i] = mpfr_get_d(&best->left, MPFR_RNDD), ghi[i] = mpfr_get_d(&best->right, MPFR_RNDU);
    }
    mpfi_clear(range), mpfi_clear(best), mpfi_clear(piece), mpfi_clear(t), mpfi_clear(s), mpfi_clear(D);
    mpfr_clears(w, bw, (mpfr_ptr)0);
    pieces_clear(&P);
    return rc;
}

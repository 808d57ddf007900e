/* vijp_drift_memo (drift.h, drift_memo.h): the reference levels and the
 * conditioning of one rounded problem, keyed by the problem's values. */
#include "memo.h"
#include "outer.h"
#include "half.h"
#include "vijp/vijp.h"
#include "compare/cache.h"
#include "engines/watch.h"
#include "base/heap.h"
#include "vijp/memory.h"
#include "format/packed.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Precisions double from VIJP_PREC_MIN (2 = 2^1) up to VIJP_PREC_MAX (2^16):
 * at most 16 levels in one memo. */
enum { MEMO_LEVELS = 16 };

typedef struct {
    long prec;
    vijp_format fmt; /* the level's matrices point here: levels are allocated one by one, never moved */
    vijp_format held; /* or here, once held at the comparisons' precision (compute_level) */
    vijp_grads g;
    /* |h_i| in double (n_i × B) of each dense layer i at batch 2 or more,
     * where the level was computed as the upper one of a comparison
     * (compute_level): the scale its parameter gradient's entries are
     * validated at (compare_layer).  NULL where none; a run's own memo
     * frees each once its layer is compared, a keyed one keeps them for
     * the formats that share the level (8 bytes an activation of the
     * batch: drift/peak.c counts them). */
    double **h_abs;
    size_t n_abs;
    /* Each dense layer's input h_i, packed at the level's precision
     * (compute_level), which a comparison of two levels compares where
     * the upper one's parameter gradient was formed from its g and h
     * rounded to half its precision (formed_half[i]: form_half; such a
     * gradient is not compared, its error is bounded a priori).  NULL
     * where none. */
    vijp_mat *kept_h;
    unsigned char *formed_half;
    vijp_xnum *half_rel; /* a formed_half gradient's normwise relative error bound (form_half) */
    double *half_k;      /* and its bound's constant k: each entry within k·2^-p of its terms */
    /* Dense parameter gradients not formed (a level computed as the lower
     * one: ensure_param forms one where a comparison reads it after all),
     * their matrices empty meanwhile. */
    unsigned char *deferred;
    size_t n_kept;
    vijp_format half; /* mpfr at prec / 2, which formed_half's were formed at */
} memo_level;

static void free_inputs(memo_level *L)
{
    for (size_t i = 0; L->h_abs && i < L->n_abs; i++) free(L->h_abs[i]);
    free(L->h_abs);
    L->h_abs = NULL;
    for (size_t i = 0; L->kept_h && i < L->n_kept; i++) vijp_mat_clear(&L->kept_h[i]);
    free(L->kept_h), free(L->formed_half), free(L->half_rel), free(L->half_k), free(L->deferred);
    L->kept_h = NULL, L->formed_half = NULL, L->half_rel = NULL, L->half_k = NULL, L->deferred = NULL;
}

struct vijp_drift_memo {
    int keyed; /* shared with other runs: checked against their problems, its levels kept */
    /* what the key holds beside the values: the net's spec and shape, the loss */
    char *spec;
    size_t depth, width;
    vijp_loss_kind loss;
    /* The rounded problem, exactly: the key, and the θ every level reads
     * (the operators round each result to the level's precision and read θ
     * as values, vo_dot by its own limbs).  In double (8 bytes a value)
     * where the format's values are doubles (vijp_drift_memo_copy_double),
     * else in MPFR at its own precision.  Made at bind when keyed, else at
     * the first level. */
    vijp_format copy_fmt;
    vijp_problem copy;
    int have_copy;
    memo_level *level[MEMO_LEVELS];
    size_t n_levels;
    double *kappa, *lyap_cum; /* NULL until put */
    unsigned char *kappa_estimated;
    size_t computed;          /* backprops run over the memo's life (vijp_drift_memo_computed) */
    vijp_engine_opts meter;   /* its layer_done sees every level's layer steps (vijp_drift_memo_meter) */
};

void vijp_drift_memo_meter(vijp_drift_memo *m, void (*layer_done)(void *ctx, size_t done, size_t total), void *ctx)
{
    m->meter = (vijp_engine_opts){.layer_done = layer_done, .layer_ctx = ctx};
}

vijp_drift_memo *vijp_drift_memo_new(void)
{
    vijp_drift_memo *m = vijp_alloc(sizeof *m);
    memset(m, 0, sizeof *m);
    return m;
}

static void drop_level(vijp_drift_memo *m, size_t k)
{
    free_inputs(m->level[k]);
    vijp_grads_clear(&m->level[k]->g);
    free(m->level[k]);
    m->level[k] = m->level[--m->n_levels];
}

static void drop_below(vijp_drift_memo *m, long prec)
{
    for (size_t k = m->n_levels; k-- > 0;)
        if (m->level[k]->prec < prec) drop_level(m, k);
}

int vijp_drift_memo_copy_double(const vijp_format *f)
{
    return f->kind != VIJP_MPFR && vijp_format_values_double(f) && f->prec <= 53;
}

/* a := b in double (fd), exactly: b's values are doubles (the copy's
 * format holds them), copied as they are where b holds them so (every
 * vijp_mat of such a format does, vijp/mat.h), else by vijp_mat_convert
 * (mpfr_set of a value of at most 53 bits into 53, then mpfr_get_d: exact). */
static void mat_in_double(vijp_mat *a, const vijp_mat *b, const vijp_format *fd)
{
    vijp_mat_init_unset(a, b->rows, b->cols, fd);
    size_t n = vijp_mat_len(b);
    if (!n) return; /* a layer without parameters */
    if (b->d) memcpy(a->d, b->d, n * sizeof *a->d);
    else vijp_mat_convert(a, b);
}

/* The copy in double where the format's values are doubles: every value,
 * subnormals and signed zeros included, is one exactly (vijp/format.h).
 * The levels then read θ as doubles, the dense layer's products without
 * an MPFR twin (layer/emu_native.h's mp_*), the other layers' through a
 * twin at 53 bits holding the values the MPFR copy held: the same bits
 * (tests/t-drift.c checks the two copies' levels).  Else in MPFR at
 * max(53, P) bits. */
static void make_copy(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf)
{
    const vijp_format *f = pf->X.fmt;
    long P = f->prec > 53 ? (long)f->prec : 53;
    m->have_copy = 1;
    if (!vijp_drift_memo_copy_double(f)) {
        if (vijp_format_mpfr(&m->copy_fmt, P, NULL)) abort(); /* P is a format's precision: in range */
        vijp_problem_convert(&m->copy, net, pf, &m->copy_fmt); /* exact: the format holds its values */
        return;
    }
    vijp_format_fixed(&m->copy_fmt, VIJP_DOUBLE);
    m->copy.theta = vijp_alloc_array(net->depth, sizeof *m->copy.theta);
    mat_in_double(&m->copy.X, &pf->X, &m->copy_fmt), mat_in_double(&m->copy.T, &pf->T, &m->copy_fmt);
    for (size_t i = 0; i < net->depth; i++) mat_in_double(&m->copy.theta[i], &pf->theta[i], &m->copy_fmt);
}

static void drop_copy(vijp_drift_memo *m)
{
    if (m->have_copy) {
        vijp_mat_clear(&m->copy.X), vijp_mat_clear(&m->copy.T);
        for (size_t i = 0; i < m->depth; i++) vijp_mat_clear(&m->copy.theta[i]);
        free(m->copy.theta);
    }
    m->copy.theta = NULL;
    m->have_copy = 0;
}

static void memo_empty(vijp_drift_memo *m)
{
    while (m->n_levels) drop_level(m, 0);
    drop_copy(m);
    free(m->spec), free(m->kappa), free(m->lyap_cum), free(m->kappa_estimated);
    m->spec = NULL, m->kappa = m->lyap_cum = NULL, m->kappa_estimated = NULL;
    m->keyed = 0;
}

void vijp_drift_memo_copy_now(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf)
{
    if (!m->have_copy) make_copy(m, net, pf);
}

void vijp_drift_memo_free(vijp_drift_memo *m)
{
    if (!m) return;
    memo_empty(m);
    free(m);
}

/* Entry i of a equals entry i of b: the same number, or both zeros of the
 * same sign (a signed zero can change a later product's sign); NaN equals
 * nothing, so a problem holding one is never shared. */
static int same_entry(const vijp_mat *a, const vijp_mat *b, size_t i)
{
    if (a->d && b->d) return a->d[i] == b->d[i] && signbit(a->d[i]) == signbit(b->d[i]);
    if (a->d) return same_entry(b, a, i);
    if (mpfr_nan_p(a->m[i])) return 0;
    if (b->d) return !isnan(b->d[i]) && mpfr_cmp_d(a->m[i], b->d[i]) == 0 && !mpfr_signbit(a->m[i]) == !signbit(b->d[i]);
    return mpfr_equal_p(a->m[i], b->m[i]) && !mpfr_signbit(a->m[i]) == !mpfr_signbit(b->m[i]);
}

static int same_mat(const vijp_mat *a, const vijp_mat *b)
{
    if (a->rows != b->rows || a->cols != b->cols) return 0;
    for (size_t i = 0, n = vijp_mat_len(a); i < n; i++)
        if (!same_entry(a, b, i)) return 0;
    return 1;
}

static int same_problem(const vijp_drift_memo *m, const vijp_grad_setup *s, const vijp_net *net, const vijp_problem *pf)
{
    if (!m->keyed || strcmp(m->spec, s->spec) || m->depth != net->depth || m->width != net->width || m->loss != s->loss)
        return 0;
    if (!same_mat(&m->copy.X, &pf->X) || !same_mat(&m->copy.T, &pf->T)) return 0;
    for (size_t i = 0; i < net->depth; i++)
        if (!same_mat(&m->copy.theta[i], &pf->theta[i])) return 0;
    return 1;
}

void vijp_drift_memo_bind(vijp_drift_memo *m, const vijp_grad_setup *s, const vijp_net *net, const vijp_problem *pf,
                          int keyed)
{
    if (same_problem(m, s, net, pf)) return;
    memo_empty(m);
    m->depth = net->depth;
    if (!keyed) return; /* one run's: it will not be asked about another problem */
    m->spec = vijp_strdup(s->spec);
    m->width = net->width, m->loss = s->loss;
    make_copy(m, net, pf);
    m->keyed = 1;
}

/* A level's matrices are packed (vijp/mat.h: their values without the
 * mpfr_t headers, 18 bytes a value at 128 bits instead of 48) layer by
 * layer as the reverse pass finishes them: g_i, ∇θ_i (and ∇x at i = 0),
 * which backprop reads no more (engines/watch.h), and then shown to the
 * caller's watch (NULL: none).  Held at the comparisons' precision first
 * where they are held: the comparison reads each value rounded there
 * anyway (vijp_compare's y = RN_q(ref)), so it finds it rounded once, in
 * the packed block, instead of rounding it again from an MPFR-held one.
 * The cotangents g_j (j < i) it allocated whole at the start stay
 * MPFR-held until their turn. */
typedef void (*level_watch_fn)(void *ctx, size_t i, memo_level *level);
typedef struct {
    level_watch_fn watch;
    void *ctx;
    const vijp_format *fmt;  /* the level's */
    const vijp_format *held; /* NULL: packed at the level's precision */
    memo_level *level;       /* the one being computed; its h_abs set where its inputs are kept */
    /* the level's half precision, where it is the upper level of a
     * comparison: its dense parameter gradients are formed there */
    const vijp_format *half;
    int defer; /* dense parameter gradients left unformed (memo_level.deferred) */
} pack_watch;

/* |h| in double, n × B as h (MPFR-held at the level's precision): the
 * scale of layer i's parameter gradient entries, NULL where that is not
 * a dense layer's at batch 2 or more (batch 1's entries are single
 * products: no sum to cancel). */
static double *inputs_abs(const vijp_layer *L, const vijp_mat *h)
{
    if (strcmp(L->type->name, "dense") || h->cols < 2) return NULL;
    size_t n = vijp_mat_len(h);
    double *a = vijp_alloc_array(n, sizeof *a);
    for (size_t j = 0; j < n; j++) a[j] = fabs(vijp_mat_get_d(h, j));
    return a;
}

/* An upper bound on ‖T‖_F, T = |g|·|h|ᵀ of a dense layer (m × n over a
 * batch of B) beside the bias' Σ_b |g| (ag, ah: the factors' magnitudes
 * as doubles, rounded up): Σ_{r,k} T(r, k)² = Σ_{b,c} (ag_b·ag_c)(ah_b·ah_c)
 * from the two B × B Gram matrices, O((m + n)·B²) without forming T, and
 * the bias' Σ_r (Σ_b ag(r, b))² = Σ_{b,c} ag_b·ag_c.  Every term is
 * nonnegative, so the doubles' roundings are relative: at most m + n + B²
 * + 4 of them on any path, covered by the factor (the products' underflow,
 * at most 2^-1074 a term, by the last term). */
static double terms_norm(const double *ag, const double *ah, size_t m, size_t n, size_t B)
{
    double sum = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t c = 0; c < B; c++) {
            double gg = 0, hh = 0;
            for (size_t r = 0; r < m; r++) gg += ag[r + b * m] * ag[r + c * m];
            for (size_t k = 0; k < n; k++) hh += ah[k + b * n] * ah[k + c * n];
            sum += gg * hh + gg;
        }
    double slack = 1 + (double)(m + n + B * B + 8) * 0x1p-51;
    return sqrt(sum * slack + (double)(m * n + m) * 0x1p-1074) * (1 + 0x1p-51);
}

/* |a| as doubles rounded up (nearest, then one ulp's relative more). */
static double *magnitudes(const vijp_mat *a)
{
    size_t n = vijp_mat_len(a);
    double *v = vijp_alloc_array(n, sizeof *v);
    for (size_t j = 0; j < n; j++) v[j] = fabs(vijp_mat_get_d(a, j)) * (1 + 0x1p-52);
    return v;
}

/* The normwise bound of form_half's gradient gt: ‖ΔW‖_F <= k·u·‖T‖_F with
 * ΔW its error against the level's exact one E (entry by entry, below),
 * u = 2^-p, over ‖E‖_F >= ‖gt‖_F − k·u·‖T‖_F; +inf where that is not
 * positive.
 * T from the p-bit factors gp, hp: within (1 + u)² of the level's own
 * |g||h|, which the factor 1 + 2^-30 covers.  ‖gt‖_F from its entries as
 * doubles, summed: each square within 2^-52 of the exact one's, the sum
 * within len roundings of 2^-53, so that sqrt(w)·(1 − (len + 4)·2^-52) is
 * below ‖gt‖_F (squares that underflow only make w smaller). */
static vijp_xnum half_rel_bound(const vijp_mat *gp, const vijp_mat *hp, const vijp_mat *gt, long p, double k)
{
    size_t m = gp->rows, n = hp->rows, B = gp->cols;
    double *ag = magnitudes(gp), *ah = magnitudes(hp);
    double t = terms_norm(ag, ah, m, n, B) * (1 + 0x1p-30), w = 0;
    free(ag), free(ah);
    size_t len = vijp_mat_len(gt);
    for (size_t j = 0; j < len; j++) {
        double x = vijp_mat_get_d(gt, j);
        w += x * x;
    }
    if (t == 0) return vijp_xnum_of(0); /* every product an exact zero: so is every entry */
    double below = sqrt(w) * (1 - (double)(len + 4) * 0x1p-52) - k * ldexp(t, (int)(p < 1000 ? -p : -1000));
    if (!(below > 0) || !isfinite(t)) return vijp_xnum_of(INFINITY);
    return vijp_xnum_2exp(k * (t / below) * (1 + 0x1p-50), -p);
}

/* A dense layer's ∇θ from g and h rounded to half's precision p, ∂W(i,
 * k) from Σ_b RN_p(g(i, b))·RN_p(h(k, b)) and ∂b_i from Σ_b RN_p(g(i,
 * b)), held as the level's other matrices.  With u = 2^-p and T = Σ_b
 * |g(i, b)|·|h(k, b)| (1 in place of |h| for ∂b), each entry is within
 * k·u·T of the level's exact Σ g h: summed in double-double where p <=
 * 106 (half.h: k about 4 + 2^(p−102)·B², 4228 at p = 106 and batch 16),
 * else rounded once at p (drift_outer_param: each product within (2u +
 * u²)|g||h| of the exact one, so u·|Σ g h| + (1 + u)(2u + u²)·T <= 4u·T,
 * k = 4, held exactly: p bits fit).  k·u is below 2^-10 of an ulp in a
 * format of P bits at the terms' scale (ulp_P(T) > 2^-P·T) where p >= P
 * + 12 and k·2^(P−p) <= 2^-10 (compare_input), the measure the validation
 * asks of parameter gradients (param_ulps); in norm the gradient is
 * within half_rel_bound's, which the validation holds to its target as
 * any other matrix's agreement.  1 where formed, 0 where neither way
 * applies or that bound is past 2^(-p/2). */
static int form_half(const pack_watch *w, size_t i, const vijp_layer *L, const vijp_mat *h, const vijp_mat *g,
                     vijp_mat *gt)
{
    vijp_mat hp, gp;
    vijp_mat_init(&hp, h->rows, h->cols, w->half), vijp_mat_convert(&hp, h);
    vijp_mat_init(&gp, g->rows, g->cols, w->half), vijp_mat_convert(&gp, g);
    long p = (long)w->half->prec;
    const vijp_format *held = w->held ? w->held : w->fmt;
    double k = 4;
    int done = drift_half_param_dd(L, &hp, &gp, held, w->half->threads, gt);
    if (done) k = drift_half_kappa(p, g->cols, (long)held->prec);
    else done = drift_outer_param(L, &hp, &gp, w->half, held, gt);
    if (done) w->level->half_rel[i] = half_rel_bound(&gp, &hp, gt, p, k), w->level->half_k[i] = k;
    vijp_mat_clear(&hp), vijp_mat_clear(&gp);
    if (!done) return 0;
    /* A gradient that cancels in norm to 2^(p/2) of its terms (an exact
     * zero over a batch among them) is formed at the level's precision
     * and compared after all: its bound would fail any target */
    if (!vijp_xnum_le(w->level->half_rel[i], vijp_xnum_2exp(1, -p / 2))) {
        vijp_mat_clear(gt);
        return 0;
    }
    w->level->formed_half[i] = 1;
    return 1;
}

/* A dense layer's ∇θ straight into its packed (and held) block (outer.h),
 * where backprop would write it MPFR-held and pack_layer pack and round
 * it: the same values, written once; or at half the precision (form_half).
 * The layer's input is kept first (kept_h). */
static int form_param(void *ctx, size_t i, const vijp_layer *L, const vijp_mat *h, const vijp_mat *g, vijp_mat *gt)
{
    const pack_watch *w = ctx;
    const vijp_format *held = w->held ? w->held : w->fmt;
    if (!strcmp(L->type->name, "dense")) {
        vijp_mat_pack_copy(&w->level->kept_h[i], h, w->fmt);
        if (w->half && form_half(w, i, L, h, g, gt)) return 1;
        if (w->defer && drift_outer_param_forms(L, h, g, w->fmt, held)) {
            memset(gt, 0, sizeof *gt);
            gt->fmt = w->fmt;
            w->level->deferred[i] = 1;
            return 1;
        }
    }
    if (w->level->h_abs) w->level->h_abs[i] = inputs_abs(L, h); /* for param_ulps, where compared */
    return drift_outer_param(L, h, g, w->fmt, held, gt);
}

/* a packed; then rounded to held's precision (in place) where held is set */
static void pack_as(vijp_mat *a, const vijp_format *held)
{
    vijp_mat_pack(a);
    if (held) vijp_mat_pack_rounded(a, held);
}

static void pack_layer(void *ctx, size_t i, vijp_grads *g)
{
    const pack_watch *w = ctx;
    pack_as(&g->g[i], w->held);
    if (!w->level->deferred[i]) pack_as(&g->grad_theta[i], w->held);
    if (i == 0) pack_as(&g->grad_x, w->held);
    if (w->watch) w->watch(w->ctx, i, w->level);
}

/* Backprop of the problem (X, T from pf; θ the memo's copy) in mpfr:prec
 * into a new level *out (NULL on failure, its code returned), packed as it
 * goes (pack_layer); watch (NULL: none) sees each layer's results as they
 * are final (engines/watch.h), once they are packed.  held > 0 and below
 * prec: each layer is held rounded to held bits (the comparisons'
 * precision) as it is packed, before watch compares it.  With a watch
 * (the level is the upper one of a comparison) it keeps its dense layers'
 * inputs' sizes (h_abs): a keyed memo compares it so again for the other
 * formats that share it.  (A keyed memo's first level, computed without,
 * measures plainly where a curve starting at half its precision compares
 * with it: conservative.)  The level keeps its dense layers' inputs
 * (kept_h); with a watch it forms their parameter gradients at half its
 * precision (form_half), which its comparison bounds instead of comparing
 * them (compare_layer). */
static int compute_level(const vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf, long prec, long held,
                         int defer, level_watch_fn watch, void *ctx, memo_level **out, vijp_error *err)
{
    memo_level *L = vijp_alloc(sizeof *L);
    memset(L, 0, sizeof *L);
    L->prec = prec;
    int rc = vijp_format_mpfr(&L->fmt, prec, err);
    L->fmt.exact_dots = 1; /* dot products rounded once: exact sums, faster (oracles/dot.h) */
    L->fmt.threads = pf->X.fmt->threads; /* the curve's: time only, the same bits */
    L->held = L->fmt;
    int narrower = held > 0 && held < prec && !rc && !vijp_format_mpfr(&L->held, held, NULL);
    if (watch) L->h_abs = vijp_alloc_array(L->n_abs = net->depth, sizeof *L->h_abs);
    for (size_t i = 0; i < L->n_abs; i++) L->h_abs[i] = NULL;
    pack_watch pw = {watch, ctx, &L->fmt, narrower ? &L->held : NULL, L, NULL, defer && !watch};
    L->kept_h = vijp_alloc_array(L->n_kept = net->depth, sizeof *L->kept_h);
    L->formed_half = vijp_alloc_array(net->depth, sizeof *L->formed_half);
    L->half_rel = vijp_alloc_array(net->depth, sizeof *L->half_rel);
    L->half_k = vijp_alloc_array(net->depth, sizeof *L->half_k);
    L->deferred = vijp_alloc_array(net->depth, sizeof *L->deferred);
    memset(L->kept_h, 0, net->depth * sizeof *L->kept_h), memset(L->formed_half, 0, net->depth);
    if (watch && !rc && !vijp_format_mpfr(&L->half, prec / 2, NULL)) {
        L->half.exact_dots = 1, L->half.threads = L->fmt.threads;
        pw.half = &L->half;
    }
    vijp_mat X = {0}, T = {0};
    if (!rc) {
        vijp_mat_init(&X, pf->X.rows, pf->X.cols, &L->fmt), vijp_mat_convert(&X, &pf->X);
        vijp_mat_init(&T, pf->T.rows, pf->T.cols, &L->fmt), vijp_mat_convert(&T, &pf->T);
        rc = vijp_engine_backprop_watched(net, m->copy.theta, &X, &T, &m->meter, pack_layer, form_param, &pw, &L->g,
                                          err);
    }
    vijp_mat_clear(&X), vijp_mat_clear(&T);
    if (rc) free_inputs(L), free(L), L = NULL;
    *out = L;
    return rc;
}

static const memo_level *find_level(const vijp_drift_memo *m, long prec)
{
    for (size_t k = 0; k < m->n_levels; k++)
        if (m->level[k]->prec == prec) return m->level[k];
    return NULL;
}

/* Room for a level of precision prec: a run's memo keeps the validation's
 * last two levels only; the copy of the problem is made. */
static void make_room(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf, long prec)
{
    if (!m->keyed) drop_below(m, prec / 2);
    if (m->n_levels == MEMO_LEVELS) drop_level(m, 0); /* unreachable within VIJP_PREC_MAX; bounded anyway */
    if (!m->have_copy) make_copy(m, net, pf);
}

static void add_level(vijp_drift_memo *m, memo_level *L)
{
    m->level[m->n_levels++] = L;
    m->computed++;
}

/* Level L's dense ∇θ_i where it was deferred: formed now from the
 * level's own g_i and kept input (both packed at its precision, exactly),
 * as form_param would have formed it. */
static void ensure_param(const vijp_net *net, memo_level *L, size_t i)
{
    if (!L->deferred[i]) return;
    vijp_mat h, g;
    vijp_mat_init(&h, L->kept_h[i].rows, L->kept_h[i].cols, &L->fmt), vijp_mat_convert(&h, &L->kept_h[i]);
    vijp_mat_init(&g, L->g.g[i].rows, L->g.g[i].cols, &L->fmt), vijp_mat_convert(&g, &L->g.g[i]);
    if (!drift_outer_param(&net->layers[i], &h, &g, &L->fmt, &L->fmt, &L->g.grad_theta[i]))
        abort(); /* unreachable: deferred only where it forms (form_param) */
    vijp_mat_clear(&h), vijp_mat_clear(&g);
    L->deferred[i] = 0;
}

int vijp_drift_memo_backprop(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf, long prec, int defer,
                             const vijp_grads **out, vijp_error *err)
{
    memo_level *have = (memo_level *)find_level(m, prec);
    if (have) {
        for (size_t i = 0; !defer && i < net->depth; i++) ensure_param(net, have, i);
        *out = &have->g;
        return 0;
    }
    make_room(m, net, pf, prec);
    memo_level *L;
    int rc = compute_level(m, net, pf, prec, 0, defer, NULL, NULL, &L, err);
    if (rc) return rc;
    add_level(m, L);
    *out = &L->g;
    return 0;
}

/* The validation's comparison of two levels, one layer at a time: lo's
 * matrices against hi's (rel and ulps at most, NaN kept), and the cache of
 * each hi matrix filled as the engines' comparisons need it when hi becomes
 * the reference (drift.c).  lo's ∇θ_i freed once compared where the memo
 * is a run's own: the levels' peak is then one level and a layer, not two
 * levels. */
typedef struct {
    memo_level *lo;
    const vijp_net *net;
    int own; /* a run's own memo: lo's ∇θ_i and hi's h_abs[i] freed once compared */
    const vijp_format *f;
    vijp_compare_cache *cache;
    vijp_xnum rel, ulps;
    int compared;
    double freed; /* bytes of lo's ∇θ freed since the heap last handed pages back */
} level_watch;

static vijp_metric compare_one(const vijp_mat *a, const vijp_mat *b, const vijp_format *f, vijp_compare_cache *cache)
{
    vijp_metric m;
    if (cache) vijp_compare_cache_clear(cache);
    vijp_compare_rel_ulps(a, b, f, &m, cache);
    return m;
}

static void merge(level_watch *w, const vijp_mat *a, vijp_metric m)
{
    if (!a->rows) return; /* a layer without parameters */
    w->rel = w->compared ? vijp_xnum_max_nan(w->rel, m.rel) : m.rel;
    w->ulps = w->compared ? vijp_xnum_max_nan(w->ulps, m.ulps) : m.ulps;
    w->compared = 1;
}

double drift_dense_term_scale(const void *ctx, size_t e)
{
    const drift_term_scale *t = ctx;
    size_t m = t->m, n = t->n;
    int bias = e >= m * n;
    size_t r = bias ? e - m * n : e % m, k = bias ? 0 : e / m;
    double s = 0;
    for (size_t b = 0; b < t->B; b++) s += t->g[r + b * m] * (bias ? 1 : t->h[k + b * n]);
    return s;
}

/* ulps of lo's ∇θ_i against hi's where they exceed VIJP_DRIFT_REF_ULPS in
 * a dense layer at batch 2 or more: each entry's ulp taken at its terms'
 * scale (vijp_compare_ulps_at_scale).  Its entries are sums over the batch
 * that cancel, in a wide layer, one in millions far below their terms
 * (one in 8.4 million to 2^-26 of them at dense:1024, depth 16, batch 16
 * in binary32, seed 1: 0.0014 of its ulps at 64 bits), where
 * the lower level's rounding of g and h, about 2^-p of the terms, is many
 * ulps of the entry though the upper level's is 2^-p of that again.  An
 * engine in f resolves no such entry below the terms' ulp in f: rounding
 * its own g and h to f moves it by about that much.  Measured there, the
 * validation asks the same 2^-10 of what f resolves as everywhere else. */
static vijp_xnum param_ulps(const level_watch *w, size_t i, const memo_level *hi, vijp_xnum plain)
{
    const double *h = hi->h_abs ? hi->h_abs[i] : NULL;
    const vijp_mat *g = &hi->g.g[i], *lo = &w->lo->g.grad_theta[i];
    if (!h || vijp_xnum_cmp(plain, vijp_xnum_of(VIJP_DRIFT_REF_ULPS)) != 1) return plain; /* NaN stays */
    double *ga = vijp_alloc_array(vijp_mat_len(g), sizeof *ga);
    for (size_t j = 0, n = vijp_mat_len(g); j < n; j++) ga[j] = fabs(vijp_mat_get_d(g, j));
    /* ∇θ holds m·n + m values (dense's θ: W, then b) */
    drift_term_scale t = {ga, h, g->rows, vijp_mat_len(lo) / g->rows - 1, g->cols};
    vijp_xnum u = vijp_compare_ulps_at_scale(lo, &hi->g.grad_theta[i], w->f, drift_dense_term_scale, &t);
    free(ga);
    return u;
}

/* Dense layer i's input in the lower level against the upper one's
 * (kept_h), where the upper level formed the layer's parameter gradient
 * at half its precision: what comparing the two levels' gradients
 * validated of h, compared directly (their g's are compared as ever);
 * and the gradient's own bounds (form_half): in norm, and k·2^(P − p)
 * of f's ulp at the terms' scale, which holds the validation's 2^-10
 * where half the upper precision p is 12 bits past f's P and k is 4 (p
 * more still where k is larger: about 2^-41 at p = 106, P = 53, batch
 * 16).  Else, and
 * where an input is missing, NaN: the levels have not settled, the next
 * pair is tried. */
static void compare_input(level_watch *w, size_t i, const memo_level *hi)
{
    const vijp_mat *lo_h = &w->lo->kept_h[i], *hi_h = &hi->kept_h[i];
    long p = hi->prec / 2, P = (long)w->f->prec;
    if (lo_h->rows && hi_h->rows && p >= P + 12) {
        merge(w, lo_h, compare_one(lo_h, hi_h, w->f, NULL));
        merge(w, &hi->g.grad_theta[i], (vijp_metric){hi->half_rel[i], vijp_xnum_2exp(hi->half_k[i], P - p), vijp_xnum_of(NAN)});
    } else
        w->rel = vijp_xnum_of(NAN), w->ulps = vijp_xnum_of(NAN), w->compared = 1;
}

static void compare_layer(level_watch *w, size_t i, memo_level *hi)
{
    vijp_grads *lo = &w->lo->g;
    size_t D = lo->depth;
    merge(w, &lo->g[i], compare_one(&lo->g[i], &hi->g.g[i], w->f, &w->cache[1 + i]));
    /* a parameter gradient formed at half the upper level's precision
     * has its bound (form_half): its input is compared instead */
    if (hi->formed_half[i]) compare_input(w, i, hi);
    else {
        /* compared after all: formed where a level computed as a lower
         * one deferred it (the lower level here; the upper one where a
         * keyed memo found a level computed so) */
        ensure_param(w->net, w->lo, i), ensure_param(w->net, hi, i);
        if (lo->grad_theta[i].rows) {
            vijp_metric m = compare_one(&lo->grad_theta[i], &hi->g.grad_theta[i], w->f, &w->cache[1 + D + i]);
            m.ulps = param_ulps(w, i, hi, m.ulps);
            merge(w, &lo->grad_theta[i], m);
        }
    }
    if (i == 0) merge(w, &lo->grad_x, compare_one(&lo->grad_x, &hi->g.grad_x, w->f, &w->cache[0]));
    if (w->own) {
        double bytes = (double)vijp_mat_len(&lo->grad_theta[i]) * (double)vijp_packed_value_bytes(w->lo->held.prec);
        if (bytes < VIJP_HEAP_MMAP_BYTES) w->freed += bytes; /* a mapped block went back as it was freed */
        /* and the upper level's input to layer i, which its reverse pass
         * freed once it formed ∇θ_i: where lo's dense ∇θ were deferred,
         * the only blocks of the size the next layers take */
        bytes = (double)w->net->layers[i].in * (double)lo->g[i].cols * (double)vijp_resident_value_bytes(&hi->fmt);
        if (bytes < VIJP_HEAP_MMAP_BYTES) w->freed += bytes;
        vijp_mat_clear(&lo->grad_theta[i]), vijp_mat_clear(&w->lo->kept_h[i]);
        if (hi->h_abs) free(hi->h_abs[i]), hi->h_abs[i] = NULL;
    }
    /* Freed blocks of the heap (under glibc's mmap threshold: at widths up
     * to about 1024) are not all taken again by the upper level's, which
     * are larger (more bits a value): measured at dense:1024,gelu depth 16
     * batch 16 (bfloat16+binary32 and binary32, one job), the two levels'
     * peak held both whole, 530 MB, and 469 MB with the pages handed back
     * as they are freed (drift/peak.c counts them so).  In steps of
     * VIJP_DRIFT_MEMO_RETURN_BYTES, so that a deep net does not pay a
     * trim a layer. */
    if (w->freed >= VIJP_DRIFT_MEMO_RETURN_BYTES) vijp_heap_return_freed(), w->freed = 0;
}

/* A new level's reverse pass at layer i (compute_level then packs it). */
static void watch_layer(void *ctx, size_t i, memo_level *hi) { compare_layer(ctx, i, hi); }

int vijp_drift_memo_next_level(vijp_drift_memo *m, const vijp_net *net, const vijp_problem *pf, long lo_prec,
                               const vijp_format *f, vijp_compare_cache *cache, vijp_xnum *rel, vijp_xnum *ulps,
                               vijp_error *err)
{
    memo_level *lo = (memo_level *)find_level(m, lo_prec); /* the caller computed it */
    level_watch w = {lo, net, !m->keyed, f, cache, {0, 0}, {0, 0}, 0, 0};
    memo_level *have = (memo_level *)find_level(m, 2 * lo_prec);
    int rc = 0;
    if (have) /* a shared memo's: compared whole, as the reverse pass would have */
        for (size_t i = lo->g.depth; i-- > 0;) compare_layer(&w, i, have);
    else {
        make_room(m, net, pf, 2 * lo_prec);
        /* What the lower level's pass freed (its activations, its
         * blocks of products) goes back before the upper one starts: its
         * comparisons free no parameter gradients of that level to hand
         * the pages back with (compare_layer), where dense ones are
         * deferred. */
        if (!m->keyed) vijp_heap_return_freed();
        memo_level *L;
        /* A run's own level is held at the comparisons' precision, layer
         * by layer as lo is compared with it: what the engines are
         * measured against if it settles (vijp_drift_memo_reference rounds
         * it there), and what the next level is compared with if not.  Its
         * peak is then the second level's, not twice it at the fourth
         * (docs/memory.md). */
        long held = m->keyed ? 0 : (long)vijp_compare_prec(f);
        if (!(rc = compute_level(m, net, pf, 2 * lo_prec, held, 0, watch_layer, &w, &L, err))) add_level(m, L);
    }
    /* A run's own memo has freed lo's parameter gradients: the level goes,
     * whatever the outcome (the next comparison starts from this one). */
    if (!m->keyed)
        for (size_t k = 0; k < m->n_levels; k++)
            if (m->level[k] == lo) drop_level(m, k);
    *rel = w.rel, *ulps = w.ulps;
    return rc;
}

size_t vijp_drift_memo_computed(const vijp_drift_memo *m) { return m->computed; }

static void point_to(vijp_grads *g, const vijp_format *fmt)
{
    g->grad_x.fmt = fmt;
    for (size_t i = 0; i < g->depth; i++) g->g[i].fmt = g->grad_theta[i].fmt = fmt;
}

void vijp_drift_memo_reference(vijp_drift_memo *m, long prec, mpfr_prec_t q, vijp_grads *ref, vijp_format *fmt)
{
    size_t k = 0;
    while (m->level[k]->prec != prec) k++; /* the caller asked for it with vijp_drift_memo_backprop */
    memo_level *L = m->level[k];
    for (size_t i = 0; i < L->g.depth; i++)
        if (L->deferred[i]) abort(); /* unreachable: the upper level of the last comparison, whole by then */
    *fmt = L->fmt;
    int narrower = q < prec && !vijp_format_mpfr(fmt, q, NULL);
    /* Packed at q bits (vijp_mat_pack_copy, _rounded: each entry rounded
     * once, to nearest, as mpfr_set rounds it), or at the level's where q
     * is not narrower: the engines' runs hold it at q bits' packed size. */
    if (m->keyed) { /* a copy: the level stays for the runs that share it */
        const vijp_grads *g = &L->g;
        *ref = *g;
        vijp_mat_pack_copy(&ref->grad_x, &g->grad_x, fmt);
        ref->g = vijp_alloc_array(g->depth, sizeof *ref->g);
        ref->grad_theta = vijp_alloc_array(g->depth, sizeof *ref->grad_theta);
        for (size_t i = 0; i < g->depth; i++) {
            vijp_mat_pack_copy(&ref->g[i], &g->g[i], fmt);
            vijp_mat_pack_copy(&ref->grad_theta[i], &g->grad_theta[i], fmt);
        }
        if (g->stored_by_depth) {
            ref->stored_by_depth = vijp_alloc_array(g->depth, sizeof *ref->stored_by_depth);
            memcpy(ref->stored_by_depth, g->stored_by_depth, g->depth * sizeof *ref->stored_by_depth);
        }
        return;
    }
    /* moved out, packed already; a run's own level is held at q since it
     * was compared (compute_level), which vijp_mat_pack_rounded leaves as
     * it is; the other levels go */
    *ref = L->g;
    point_to(ref, fmt);
    memset(&L->g, 0, sizeof L->g);
    while (m->n_levels) drop_level(m, 0);
    if (!narrower) return;
    vijp_mat_pack_rounded(&ref->grad_x, fmt);
    for (size_t i = 0; i < ref->depth; i++)
        vijp_mat_pack_rounded(&ref->g[i], fmt), vijp_mat_pack_rounded(&ref->grad_theta[i], fmt);
}

void vijp_drift_memo_return_theta(vijp_drift_memo *m, const vijp_net *net, const vijp_format *f, vijp_mat *theta)
{
    for (size_t i = 0; i < net->depth; i++) {
        vijp_mat *c = &m->copy.theta[i];
        if (vijp_drift_memo_copy_double(f)) { /* the same doubles, as vijp_net_params made them: moved */
            theta[i] = *c;
            theta[i].fmt = f;
        } else { /* exact: f holds every value of the copy, which it rounded to them */
            vijp_mat_init(&theta[i], c->rows, c->cols, f);
            vijp_mat_convert(&theta[i], c);
            vijp_mat_clear(c);
        }
        memset(c, 0, sizeof *c);
    }
    drop_copy(m);
}

int vijp_drift_memo_get_conditioning(const vijp_drift_memo *m, double *kappa, double *lyap_cum,
                                     unsigned char *estimated, size_t D)
{
    if (!m->kappa || D != m->depth) return 0;
    memcpy(kappa, m->kappa, D * sizeof *kappa);
    memcpy(lyap_cum, m->lyap_cum, D * sizeof *lyap_cum);
    memcpy(estimated, m->kappa_estimated, D * sizeof *estimated);
    return 1;
}

void vijp_drift_memo_put_conditioning(vijp_drift_memo *m, const double *kappa, const double *lyap_cum,
                                      const unsigned char *estimated, size_t D)
{
    if (D != m->depth) return;
    free(m->kappa), free(m->lyap_cum), free(m->kappa_estimated);
    m->kappa = vijp_alloc_array(D, sizeof *m->kappa);
    m->lyap_cum = vijp_alloc_array(D, sizeof *m->lyap_cum);
    m->kappa_estimated = vijp_alloc_array(D, sizeof *m->kappa_estimated);
    memcpy(m->kappa, kappa, D * sizeof *kappa);
    memcpy(m->lyap_cum, lyap_cum, D * sizeof *lyap_cum);
    memcpy(m->kappa_estimated, estimated, D * sizeof *estimated);
}

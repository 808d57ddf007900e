/* The drift comparator: engines in a format against a validated reference,
 * with per-layer condition numbers and the Lyapunov spread beside them. */
#include "base/heap.h"
#include "vijp/drift.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include "grad/problem.h"
#include "compare/cache.h"
#include "emu/dense_ref.h"
#include "net/shape.h"
#include "memo.h"
#include "drawn.h"
#include "cond.h"
#include "conditioning.h"
#include "peak.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_clear(vijp_drift_run_result *r)
{
    free(r->g), free(r->theta), free(r->bound), free(r->stored_by_depth), free(r->reconstruction);
    memset(r, 0, sizeof *r);
}

void vijp_drift_curve_clear(vijp_drift_curve *c)
{
    for (size_t k = 0; c->runs && k < c->n_runs; k++) run_clear(&c->runs[k]);
    free(c->runs), free(c->kappa), free(c->lyap_cum), free(c->predicted);
    memset(c, 0, sizeof *c);
}

static const vijp_metric no_metric = {{NAN, 0}, {NAN, 0}, {NAN, 0}};

long vijp_drift_ref_prec_first(const vijp_format *f, long start)
{
    long p = (long)f->prec, first = 2 * p < p + 64 ? 2 * p : p + 64;
    return start ? start : first > 64 ? first : 64;
}

/* P + 64 <= cap/2 from P = 64 on, 2P <= cap/2 below. */
long vijp_drift_largest_mpfr(long cap)
{
    if (!cap) cap = VIJP_DRIFT_REF_PREC_MAX;
    return cap / 2 - 64 >= 64 ? cap / 2 - 64 : cap / 4;
}

int vijp_drift_check_ref_prec(const vijp_format *f, long start, long cap, vijp_error *err)
{
    long first = vijp_drift_ref_prec_first(f, start);
    if (!cap) cap = VIJP_DRIFT_REF_PREC_MAX;
    if (2 * first <= cap) return 0;
    if (start)
        return vijp_fail(err, VIJP_EINVAL, "--ref-prec %ld must double at least once (to %ld bits) within --ref-prec-max "
                         "%ld: give --ref-prec-max %ld or more, or --ref-prec %ld or less", start, 2 * start, cap,
                         2 * start, cap / 2);
    if (cap < 128 || f->kind != VIJP_MPFR)
        return vijp_fail(err, VIJP_EINVAL, "--ref-prec-max %ld leaves no room for the %s reference, which starts at %ld "
                         "bits (max(64, min(2P, P + 64))) and must double at least once: give --ref-prec-max %ld or more",
                         cap, f->name, first, 2 * first);
    return vijp_fail(err, VIJP_EINVAL, "format %s: its reference starts at %ld bits (%s) and must double at least once, "
                     "to %ld, within --ref-prec-max %ld: the largest mpfr:P it validates is mpfr:%ld (--ref-prec-max "
                     "goes up to %d, for mpfr:%ld)", f->name, first, first == 2 * (long)f->prec ? "2P" : "P + 64",
                     2 * first, cap, vijp_drift_largest_mpfr(cap), VIJP_PREC_MAX, vijp_drift_largest_mpfr(VIJP_PREC_MAX));
}

/* The curve's progress (vijp_drift_setup.on_progress): its phases (the
 * reference, the engines, the conditioning) one after another, each of a
 * planned weight (drift.h's), advanced by the layer steps its runs report
 * (vijp_engine_opts.layer_done) and closed at its end whatever it ran (a
 * shared memo's levels are not computed again).  A third level, where
 * the first two disagree, is added to the plan as it starts (meter_more):
 * the share then goes back, so that the time left a meter derives from
 * it grows with the work found. */
typedef struct {
    const vijp_drift_setup *s;
    double total;      /* the planned weight of the curve */
    double start, end; /* the phase under way's span */
    double step;       /* the weight of one of its layer steps */
    double runs;       /* the weight of its runs finished so far */
    double shown;      /* the share last reported */
    /* the plan (meter_plan): the phases' weights, an engine's layer step */
    double ref_weight, engine_step, engine_weight, cond_weight;
} curve_meter;

static void meter_show(curve_meter *m, double at)
{
    double f = m->total > 0 && at < m->total ? at / m->total : 1;
    if (!m->s->on_progress || f == m->shown) return;
    m->shown = f;
    m->s->on_progress(m->s->progress_ctx, f);
}

/* A run of the phase under way has ended, of steps planned steps: they
 * count whether it reported them all or stopped early (a vijp losing
 * rank), and a shared memo's level that was not computed counts too. */
static void meter_run_end(curve_meter *m, size_t steps) { m->runs += (double)steps * m->step; }

/* The phase under way ends; the next one weighs weight, step a step. */
static void meter_phase(curve_meter *m, double weight, double step)
{
    meter_show(m, m->end);
    m->start = m->end, m->end += weight, m->step = step, m->runs = 0;
}

/* The phase under way turns out to have a run more, of weight, step a
 * step (the runs before it have counted theirs). */
static void meter_more(curve_meter *m, double weight, double step)
{
    m->end += weight, m->total += weight, m->step = step;
    meter_show(m, m->start + m->runs);
}

/* vijp_engine_opts.layer_done of the phase's run under way. */
static void meter_steps(void *ctx, size_t done, size_t total)
{
    curve_meter *m = ctx;
    (void)total;
    double at = m->start + m->runs + (double)done * m->step;
    meter_show(m, at < m->end ? at : m->end);
}

/* The meter's cost model, in a reference level's layer step at p bits
 * (1 + p/64: its limbs, and more past the fast products).  An engine's layer step in an mpfr:P format is a
 * level's at P; in double or an emulated format, and a layer of the
 * conditioning (an LU, Lanczos, a Jacobian a sample), a share of the
 * first level's that grows with the width w and falls with the batch b,
 * fitted to dense GELU stacks at batch 16 (2-core Xeon, 2026-12-07):
 * engines 0.065 and 0.28 of it at widths 1024 and 4096, the conditioning
 * 0.23 and 2.9 (before the activations' κ came from their diagonals,
 * which took dense:1024,gelu's at batch 64 from 2.7 to 1.0 s: the meter
 * now overestimates the conditioning at 1024); floors for the
 * narrow nets, whose steps are mostly overhead.  An estimate for the
 * meter's time left, nothing else. */
static double level_step(long p)
{
    /* past the fast products' widest (dense_ref.h) the dense layers' dots
     * are MPFR's: at 256 bits ten times the 128-bit level's step, measured */
    return (1 + (double)p / 64) * (p > VIJP_DDREF_MAX_PREC ? 6 : 1);
}

static double engine_step(const vijp_format *f, long p1, double w, double b)
{
    if (f->kind == VIJP_MPFR && !f->emulated && !f->mixed) return level_step((long)f->prec);
    return level_step(p1) * fmax(0.08 * (w / 1024) * (16 / b), 0.1);
}

static double cond_layer(long p1, double w, double b)
{
    return level_step(p1) * fmax(0.23 * pow(w / 1024, 1.8) * (16 / b), 0.5);
}

/* The meter of curve s on net at batch b: two levels of 2D steps from the
 * first precision on (none without a reference), the engines' steps, a
 * layer of conditioning at a time. */
static curve_meter meter_plan(const vijp_drift_setup *s, const vijp_net *net, size_t b)
{
    curve_meter m = {.s = s};
    size_t D = net->depth;
    long p1 = vijp_drift_ref_prec_first(&s->problem.fmt, s->ref_prec_start);
    double w = (double)net->width, steps = (double)vijp_engine_layer_steps(VIJP_ENGINE_BACKPROP, D, b, &s->problem.opts);
    for (size_t k = 0; k < s->n_engines; k++)
        steps += (double)vijp_engine_layer_steps(s->engines[k], D, b, &s->problem.opts);
    m.ref_weight = s->skip_reference ? 0 : 2 * (double)D * (level_step(p1) + level_step(2 * p1));
    m.engine_step = engine_step(&s->problem.fmt, p1, w, (double)b);
    m.engine_weight = steps * m.engine_step;
    m.cond_weight = (double)D * cond_layer(p1, w, (double)b);
    m.total = m.ref_weight + m.engine_weight + m.cond_weight;
    return m;
}

/* The validated reference (see drift.h), rounded to the comparisons'
 * precision.  ref and its format fmt (which the matrices point to) belong to
 * the caller; the levels visited stay in a shared memo. */
static int reference(const vijp_drift_setup *s, const vijp_net *net, const vijp_problem *pf, vijp_drift_curve *c,
                     vijp_drift_memo *memo, vijp_grads *ref, vijp_format *fmt, vijp_compare_cache *cache,
                     curve_meter *meter, vijp_error *err)
{
    long p = vijp_drift_ref_prec_first(&s->problem.fmt, s->ref_prec_start);
    long cap = s->ref_prec_max ? s->ref_prec_max : VIJP_DRIFT_REF_PREC_MAX;
    c->ref_prec_start = p;
    /* the accumulation's unit roundoff (a mixed format's finer one): the
     * reference must settle well below every rounding the format makes */
    c->ref_target = vijp_xnum_2exp(1, -(long)s->problem.fmt.prec - 10);
    const vijp_grads *first;
    int rc = vijp_drift_memo_backprop(memo, net, pf, p, 1, &first, err); /* its dense ∇θ unread: deferred */
    meter_run_end(meter, 2 * net->depth); /* backprop's layer steps (vijp_engine_layer_steps) */
    while (!rc) {
        if (2 * p > cap) {
            char got[32], need[32];
            vijp_xnum_snprintf(got, sizeof got, "%.3g", c->ref_agreement);
            vijp_xnum_snprintf(need, sizeof need, "%.3g", c->ref_target);
            rc = vijp_fail(err, VIJP_EDOMAIN,
                           "the reference did not settle below %ld bits (mpfr:%ld and mpfr:%ld differ by %s, "
                           "need %s); raise --ref-prec-max",
                           cap, p / 2, p, got, need);
            break;
        }
        if (p > c->ref_prec_start) /* a level past the two planned: its 2D steps at 2p bits */
            meter_more(meter, 2 * (double)net->depth * level_step(2 * p), level_step(2 * p));
        vijp_xnum rel, ulps; /* the level at p against the one at 2p, which fills cache for the engines */
        if ((rc = vijp_drift_memo_next_level(memo, net, pf, p, &s->problem.fmt, cache, &rel, &ulps, err))) break;
        meter_run_end(meter, 2 * net->depth);
        c->ref_agreement = rel;
        p *= 2;
        if (vijp_xnum_le(rel, c->ref_target) && vijp_xnum_le(ulps, vijp_xnum_of(VIJP_DRIFT_REF_ULPS))) break;
    }
    if (rc) return rc;
    c->ref_prec = p;
    /* Rounded once to the precision the comparisons work at (when narrower),
     * so that they read it rather than round every entry again for every
     * engine.  Their results do not change: they rounded it there anyway. */
    vijp_drift_memo_reference(memo, p, vijp_compare_prec(&s->problem.fmt), ref, fmt);
    return 0;
}

/* 10^l at any exponent: pow's own value where it is a normal double. */
static vijp_xnum power_of_ten(double l)
{
    if (!isfinite(l) || (l > -307 && l < 308)) return vijp_xnum_of(pow(10, l));
    double b = l * 3.32192809488736234787, k = floor(b); /* log2(10) */
    return vijp_xnum_2exp(exp2(b - k), (long)k);
}

/* The spread's rate and the error it predicts, from c->lyap_cum and c->u. */
static void predict(vijp_drift_curve *c, size_t D)
{
    c->lyap_rate = c->lyap_cum[D - 1] / (double)D;
    /* S_i = Σ_{j<=i} 10^(2 (L_i − L_{j−1})) obeys S_i = 10^(2 (L_i − L_{i−1})) (S_{i−1} + 1):
     * one step per layer, carried in log10 so that hundreds of decades of
     * spread neither overflow nor underflow.  The fit sees 10^(log − top)
     * for one common shift, which leaves its slope unchanged. */
    double *lp = vijp_alloc_array(D, sizeof *lp), top = -INFINITY, ls = -INFINITY; /* log10 S_0 = log10 0 */
    vijp_xnum *fit = vijp_alloc_array(D, sizeof *fit);
    for (size_t i = 0; lp && i < D; i++) {
        double grow = 2 * (c->lyap_cum[i] - (i ? c->lyap_cum[i - 1] : 0)); /* log10 S_{−1} = log10 0 */
        ls = grow + (ls > 0 ? ls + log10(1 + pow(10, -ls)) : log10(1 + pow(10, ls)));
        lp[i] = vijp_xnum_log10(c->u) + 0.5 * ls;
        c->predicted[i] = power_of_ten(lp[i]);
        if (lp[i] > top) top = lp[i];
    }
    for (size_t i = 0; lp && fit && i < D; i++) fit[i] = vijp_xnum_of(pow(10, lp[i] - top)); /* in (0, 1] */
    c->predicted_rate = lp && fit ? vijp_growth_fit(fit, D, INFINITY, NULL) : NAN;
    free(lp), free(fit);
}

static void first_order_bound(const vijp_net *net, const vijp_drift_curve *c, const vijp_format *f,
                              const unsigned char *estimated, vijp_drift_run_result *r)
{
    /* e_{i−1} + n_i u_a (+ u where the result is stored narrower than it
     * is accumulated) at any exponent, then times κ_i; where κ_i was
     * estimated (κ/θ <= κ_est <= κ, cond.h), times θ·κ_est, a bound on κ
     * with probability at least 1 − COND_DELTA per layer; an exact κ_i
     * (an elementwise layer's, a narrow one's) as it is */
    vijp_xnum u_a = vijp_xnum_2exp(1, -(long)f->prec), store = vijp_xnum_le(c->u, u_a) ? vijp_xnum_of(0) : c->u;
    vijp_xnum e = r->x.rel;
    for (size_t i = 0; i < net->depth; i++) {
        vijp_xnum kappa = vijp_xnum_mul(vijp_xnum_of(estimated[i] ? COND_THETA : 1), vijp_xnum_of(c->kappa[i]));
        vijp_xnum local = vijp_xnum_add(vijp_xnum_mul(vijp_xnum_of((double)net->layers[i].in), u_a), store);
        e = vijp_xnum_mul(kappa, vijp_xnum_add(e, local));
        r->bound[i] = e;
    }
}

/* The reversible engine's reconstruction error, taken during its own run
 * (vijp_engine_opts.rebuilt_input) against the true layer inputs H of a
 * forward pass: what vijp_reversible_reconstruction gives (the same inverses
 * of the same values, compared by the same vijp_rel_err) without inverting
 * every layer a second time, a sixth of the default study in mpfr:113. */
typedef struct {
    vijp_mat *H; /* H[i]: the input of layer i + 1, i = 0..D */
    size_t n;
    vijp_xnum *recon;
} recon_watch;

static void on_rebuilt(void *ctx, size_t i, const vijp_mat *x)
{
    recon_watch *w = ctx;
    w->recon[i] = vijp_rel_err(x, &w->H[i]);
}

/* The forward pass's layer inputs; 0 or an error code (recon_watch_clear
 * frees w->H either way). */
static int recon_watch_init(recon_watch *w, const vijp_net *net, const vijp_mat *theta, const vijp_mat *X, vijp_xnum *recon)
{
    size_t D = net->depth, B = X->cols;
    int rc = 0;
    w->H = vijp_alloc_array(D + 1, sizeof *w->H), w->n = D + 1, w->recon = recon;
    for (size_t i = 0; i <= D && !rc; i++) {
        vijp_mat_init(&w->H[i], i ? net->layers[i - 1].out : net->width, B, X->fmt);
        if (i == 0) vijp_mat_copy(&w->H[0], X);
        else rc = vijp_layer_forward(&net->layers[i - 1], &theta[i - 1], &w->H[i - 1], &w->H[i], NULL);
    }
    return rc;
}

static void recon_watch_clear(recon_watch *w)
{
    for (size_t i = 0; w->H && i < w->n; i++) vijp_mat_clear(&w->H[i]);
    free(w->H);
    w->H = NULL;
}

/* An engine's parameter gradients measured as the run finishes each layer
 * (vijp_engine_opts.param_ready) and freed there, so that a run never holds
 * all of them (at width 4096 and depth 16 a gigabyte a curve): the same
 * comparison of the same matrices as measure's, earlier.  A non-finite ∇θ_i
 * is kept for the run's finiteness check, which names the first such value
 * (vijp_grads_check_finite). */
typedef struct {
    const vijp_grads *ref;
    const vijp_format *f;
    vijp_drift_run_result *r;
    vijp_compare_cache *cache; /* as measure's */
    unsigned char *measured;   /* measured[i]: ∇θ_i compared here */
} param_watch;

static void on_param_ready(void *ctx, size_t i, vijp_grads *out)
{
    param_watch *w = ctx;
    vijp_mat *t = &out->grad_theta[i];
    if (!t->rows) return;
    vijp_compare_cached(t, &w->ref->grad_theta[i], w->f, &w->r->theta[i], &w->cache[1 + out->depth + i]);
    w->measured[i] = 1;
    if (!vijp_mat_check_finite(t, "∇θ", NULL)) vijp_mat_clear(t);
}

static void measure_init(vijp_drift_run_result *r, size_t D)
{
    r->g = vijp_alloc_array(D, sizeof *r->g);
    r->theta = vijp_alloc_array(D, sizeof *r->theta);
    r->stored_by_depth = vijp_alloc_array(D, sizeof *r->stored_by_depth);
    r->x = no_metric;
    for (size_t i = 0; i < D; i++) r->g[i] = r->theta[i] = no_metric;
}

/* cache: one per reference matrix, grad_x first, then g_i and ∇θ_i, shared
 * by the engines' measurements (compare_cache.h); measured: the ∇θ_i the
 * run's param_watch compared. */
static void measure(const vijp_net *net, const vijp_drift_setup *s, const vijp_grads *got, const vijp_grads *ref,
                    const unsigned char *measured, vijp_drift_run_result *r, vijp_compare_cache *cache)
{
    size_t D = net->depth;
    memcpy(r->stored_by_depth, got->stored_by_depth, D * sizeof *r->stored_by_depth);
    const vijp_format *f = &s->problem.fmt;
    if (ref && r->rebuilt > 0) vijp_compare_cached(&got->grad_x, &ref->grad_x, f, &r->x, &cache[0]);
    for (size_t i = 0; i < D; i++) {
        if (!ref || i >= r->rebuilt) {
            r->g[i] = r->theta[i] = no_metric;
            continue;
        }
        vijp_compare_cached(&got->g[i], &ref->g[i], f, &r->g[i], &cache[1 + i]);
        if (!measured[i] && got->grad_theta[i].rows)
            vijp_compare_cached(&got->grad_theta[i], &ref->grad_theta[i], f, &r->theta[i], &cache[1 + D + i]);
    }
}

int vijp_drift_run(const vijp_drift_setup *s, vijp_drift_curve *c, vijp_error *err)
{
    return vijp_drift_run_drawn(s, NULL, NULL, NULL, c, err);
}

int vijp_drift_run_drawn(const vijp_drift_setup *s, const vijp_net *drawn, void (*release)(void *ctx),
                         void *release_ctx, vijp_drift_curve *c, vijp_error *err)
{
    memset(c, 0, sizeof *c);
    vijp_net own = {0}, net;
    vijp_problem pf;
    int rc = s->skip_reference ? 0 : vijp_drift_check_ref_prec(&s->problem.fmt, s->ref_prec_start, s->ref_prec_max, err);
    if (rc) {
        if (drawn && release) release(release_ctx); /* not read at all */
        return rc;
    }
    if (!drawn && (rc = vijp_problem_draw(&s->problem, &own, err))) return rc;
    /* The drawn net, read only: a view whose loss is this run's (a shared
     * one may have been drawn for a run with another loss) */
    net = drawn ? *drawn : own;
    net.loss = s->problem.loss;
    rc = vijp_problem_setup_drawn(&s->problem, &net, &pf, err);
    /* From here on the run reads the rounded problem and the layers' shapes,
     * never the drawn θ again (θ in the format comes back from the memo's
     * exact copy below): the draw is handed back now, not held beside the
     * curve's peak (a gigabyte at width 4096, depth 16) */
    vijp_net shape;
    net_copy_shape(&shape, &net);
    net = shape;
    vijp_net_free(&own);
    if (drawn && release) release(release_ctx);
    if (rc) {
        vijp_net_free(&net);
        return rc;
    }
    size_t D = net.depth;
    c->depth = D;
    c->u = vijp_xnum_2exp(1, -(long)vijp_format_value_prec(&s->problem.fmt)); /* the stored values' rounding */
    c->n_runs = 1 + s->n_engines;
    c->runs = vijp_alloc_array(c->n_runs, sizeof *c->runs);
    c->kappa = vijp_alloc_array(D, sizeof *c->kappa);
    c->lyap_cum = vijp_alloc_array(D, sizeof *c->lyap_cum);
    c->predicted = vijp_alloc_array(D, sizeof *c->predicted);
    size_t exact_max = s->cond_exact_max_width ? s->cond_exact_max_width : VIJP_DRIFT_COND_EXACT_MAX_WIDTH;
    drift_cond_method(&net, exact_max, c->cond_method, sizeof c->cond_method);
    vijp_grads ref = {0};
    vijp_format ref_fmt;
    vijp_compare_cache *cache = vijp_alloc_array(1 + 2 * D, sizeof *cache); /* zeroed: not ready */
    unsigned char *measured = vijp_alloc_array(D, sizeof *measured);
    /* The caller's memo, shared with other runs, or one for this run alone. */
    vijp_drift_memo *memo = s->memo ? s->memo : vijp_drift_memo_new();
    vijp_drift_memo_bind(memo, &s->problem, &net, &pf, s->memo != NULL);
    /* A run's own memo reads its exact copy of θ, and hands it back as θ
     * in the format once the reference is taken: θ in the format is not
     * held beside the reference levels (vijp_drift_memo_return_theta) */
    int own_memo = memo != s->memo && !s->skip_reference;
    curve_meter meter = meter_plan(s, &net, pf.X.cols);
    if (s->on_progress) vijp_drift_memo_meter(memo, meter_steps, &meter);
    meter_phase(&meter, meter.ref_weight, meter.ref_weight / (4 * (double)D)); /* the two levels' 4D steps */
    if (own_memo) vijp_drift_memo_copy_now(memo, &net, &pf), vijp_net_params_clear(&net, pf.theta);
    if (!s->skip_reference && (rc = reference(s, &net, &pf, c, memo, &ref, &ref_fmt, cache, &meter, err))) goto out;
    meter_phase(&meter, meter.engine_weight, meter.engine_step);
    if (own_memo) vijp_drift_memo_return_theta(memo, &net, &s->problem.fmt, pf.theta);
    /* The reference's phase freed its heap blocks (activations,
     * cotangents, structs: 117 MiB of them at dense:4096 batch 16) in sizes
     * and an order the engines' blocks do not all fit back into: their
     * whole free pages go back to the kernel now rather than stay resident
     * beside the engines' phase */
    vijp_heap_return_freed();
    for (size_t k = 0; k < c->n_runs && !rc; k++) {
        vijp_drift_run_result *r = &c->runs[k];
        r->engine = k ? s->engines[k - 1] : VIJP_ENGINE_BACKPROP;
        vijp_grads got;
        vijp_error e2 = {0};
        vijp_engine_opts o = s->problem.opts;
        recon_watch watch = {0};
        measure_init(r, D);
        param_watch pw = {&ref, &s->problem.fmt, r, cache, measured};
        memset(measured, 0, D);
        if (!s->skip_reference) o.param_ready = on_param_ready, o.param_ctx = &pw;
        if (s->on_progress) o.layer_done = meter_steps, o.layer_ctx = &meter;
        if (r->engine == VIJP_ENGINE_REVERSIBLE) { /* layers the engine keeps rather than rebuilds: 0 */
            r->reconstruction = vijp_alloc_array(D, sizeof(vijp_xnum));
            if (!recon_watch_init(&watch, &net, pf.theta, &pf.X, r->reconstruction))
                o.rebuilt_input = on_rebuilt, o.rebuilt_ctx = &watch;
        }
        rc = vijp_engine_run_opts(r->engine, &net, pf.theta, &pf.X, &pf.T, &o, &got, &e2);
        meter_run_end(&meter, vijp_engine_layer_steps(r->engine, D, pf.X.cols, &s->problem.opts));
        recon_watch_clear(&watch);
        int engine_rc = rc;
        if (rc && rc != VIJP_ESINGULAR) {
            if (err) *err = e2;
            break;
        }
        r->rebuilt = got.rebuilt;
        if (rc) snprintf(r->failure, sizeof r->failure, "%s", e2.msg);
        if (!isfinite(got.loss)) { /* the forward pass overflowed: no gradient to measure */
            rc = vijp_fail(err, VIJP_ERANGE, "%s: the loss is %s as a double although every input and parameter is "
                           "finite: the forward pass left the range of %s, so there is no gradient to measure",
                           vijp_engine_name(r->engine), isnan(got.loss) ? "NaN" : "infinite", s->problem.fmt.name);
            vijp_grads_clear(&got);
            break;
        }
        if (vijp_grads_check_finite(&got, &e2)) snprintf(r->nonfinite, sizeof r->nonfinite, "%s", e2.msg);
        rc = 0; /* a singular vijp is recorded in r->failure: a measurement */
        measure(&net, s, &got, s->skip_reference ? NULL : &ref, measured, r, cache);
        vijp_grads_clear(&got);
        /* Where the run stopped early (or its forward pass could not be
         * watched) the diagnostic itself says what it would give. */
        if (r->engine == VIJP_ENGINE_REVERSIBLE && (engine_rc || !o.rebuilt_input) &&
            vijp_reversible_reconstruction(&net, pf.theta, &pf.X, r->reconstruction, NULL))
            for (size_t i = 0; i < D; i++) r->reconstruction[i] = vijp_xnum_of(NAN); /* an inverse failed: a measurement */
    }
    if (rc) goto out;
    /* the engines are measured: the reference is not read again */
    vijp_grads_clear(&ref);
    for (size_t i = 0; i < 1 + 2 * D; i++) vijp_compare_cache_clear(&cache[i]);
    meter_phase(&meter, meter.cond_weight, meter.cond_weight / (double)D);
    unsigned char *estimated = vijp_alloc_array(D, sizeof *estimated);
    if (!vijp_drift_memo_get_conditioning(memo, c->kappa, c->lyap_cum, estimated, D)) {
        int threads = drift_peak_cond_threads(&net, pf.X.cols, &s->problem.fmt,
                                              vijp_drift_ref_prec_first(&s->problem.fmt, s->ref_prec_start),
                                              s->memo != NULL, exact_max, pf.X.fmt->threads);
        /* the threads' blocks come from arenas of their own: the engines'
         * freed pages go back first, not stay beside them */
        if (threads > 1) vijp_heap_return_freed();
        drift_conditioning(&net, &pf, exact_max, threads, c, estimated, meter_steps, &meter);
        if (s->memo) vijp_drift_memo_put_conditioning(memo, c->kappa, c->lyap_cum, estimated, D);
    }
    predict(c, D);
    for (size_t k = 1; k < c->n_runs; k++) /* the vijp sweep's bound: Moonwalk's engines only */
        if (c->runs[k].engine == VIJP_ENGINE_MOONWALK || c->runs[k].engine == VIJP_ENGINE_PURE_FORWARD) {
            c->runs[k].bound = vijp_alloc_array(D, sizeof(vijp_xnum));
            first_order_bound(&net, c, &s->problem.fmt, estimated, &c->runs[k]);
        }
    free(estimated);
    meter_show(&meter, meter.total);
out:
    if (memo != s->memo) vijp_drift_memo_free(memo);
    else if (s->on_progress) vijp_drift_memo_meter(memo, NULL, NULL); /* the meter was this run's */
    for (size_t i = 0; i < 1 + 2 * D; i++) vijp_compare_cache_clear(&cache[i]);
    free(cache);
    free(measured);
    vijp_grads_clear(&ref);
    vijp_problem_clear(&pf, &net);
    vijp_net_free(&net);
    if (rc) vijp_drift_curve_clear(c);
    /* The curve's blocks are freed: their whole free pages go back now, so
     * that the next curve on this thread starts from what is held rather
     * than beside this one's freed heap, which its blocks (other sizes)
     * fit back into only in part: the dense:1024,gelu pair at one job,
     * batch 16, peaked in its second curve at 447 MB against the first's
     * 346 (drift/peak.c counts a curve alone) */
    vijp_heap_return_freed();
    return rc;
}

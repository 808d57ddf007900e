/* Running a drift study: parsing its lists, a pool of worker threads, a
 * progress meter on terminals (progress.h). */
#include "draws.h"
#include "progress.h"
#include "study.h"
#include "drift/drawn.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Split a comma list into at most max items of a copy the caller frees.
 * An empty item (",," or a comma at either end) is refused, not skipped:
 * it is most often a shell variable that was meant to be set. */
static char *split(const char *list, char **items, size_t max, size_t *n, const char *what, vijp_error *err)
{
    char *copy = vijp_strdup(list), *t = copy;
    *n = 0;
    if (!*list) {
        vijp_fail(err, VIJP_EINVAL, "no %s given", what);
        free(copy);
        return NULL;
    }
    for (char *comma; t; t = comma ? comma + 1 : NULL) {
        if ((comma = strchr(t, ','))) *comma = 0;
        if (!*t || *n == max) {
            if (*n == max) vijp_fail(err, VIJP_EINVAL, "too many %s (at most %zu)", what, max);
            else vijp_fail(err, VIJP_EINVAL, "an empty item in the list of %s '%s'", what, list);
            free(copy);
            return NULL;
        }
        items[(*n)++] = t;
    }
    return copy;
}

int study_parse_formats(study *s, const char *list, vijp_error *err)
{
    char *items[STUDY_MAX];
    char *copy = split(list, items, STUDY_MAX, &s->n_formats, "formats", err);
    if (!copy) return VIJP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < s->n_formats && !rc; i++) {
        rc = vijp_format_parse(items[i], &s->formats[i], err);
        if (!rc) s->tol[i] = vijp_drift_default_tol(&s->formats[i]);
        for (size_t j = 0; j < i && !rc; j++)
            if (!strcmp(s->formats[j].name, s->formats[i].name))
                rc = vijp_fail(err, VIJP_EINVAL, "format '%s' given twice", items[i]);
    }
    free(copy);
    return rc;
}

int study_parse_tols(study *s, const char *list, vijp_error *err)
{
    char *items[STUDY_MAX];
    size_t n;
    char *copy = split(list, items, STUDY_MAX, &n, "tolerances", err);
    if (!copy) return VIJP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char *eq = strchr(items[i], '='), *end;
        if (!eq) {
            rc = vijp_fail(err, VIJP_EINVAL, "tolerance '%s' is not FORMAT=TOL", items[i]);
            break;
        }
        *eq = 0;
        vijp_xnum t; /* any exponent: mpfr:P studies hold errors near 2^-P */
        if (!eq[1] || isspace((unsigned char)eq[1]) || vijp_xnum_parse(eq + 1, &t, &end) || *end ||
            !(t.m > 0 && vijp_xnum_cmp(t, vijp_xnum_of(1)) < 0)) {
            rc = vijp_fail(err, VIJP_EINVAL, "tolerance for %s must be a number in (0, 1), got '%s'", items[i], eq + 1);
            break;
        }
        size_t f = 0;
        while (f < s->n_formats && strcmp(s->formats[f].name, items[i])) f++;
        if (f == s->n_formats) rc = vijp_fail(err, VIJP_EINVAL, "tolerance for '%s', which is not a format of the study", items[i]);
        else s->tol[f] = t;
        for (size_t j = 0; j < i && !rc; j++)
            if (!strcmp(items[j], items[i])) rc = vijp_fail(err, VIJP_EINVAL, "tolerance for %s given twice", items[i]);
    }
    free(copy);
    return rc;
}

int study_parse_seeds(study *s, const char *list, vijp_error *err)
{
    char *items[STUDY_MAX];
    char *copy = split(list, items, STUDY_MAX, &s->n_seeds, "seeds", err);
    if (!copy) return VIJP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < s->n_seeds && !rc; i++) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(items[i], &end, 10);
        if (items[i][0] < '0' || items[i][0] > '9' || *end || errno || v > INT64_MAX)
            rc = vijp_fail(err, VIJP_EINVAL, "seed '%s' is not an integer in [0, 2^63-1]", items[i]);
        s->seeds[i] = v;
        for (size_t j = 0; j < i && !rc; j++)
            if (s->seeds[j] == v) rc = vijp_fail(err, VIJP_EINVAL, "seed %llu given twice", v);
    }
    free(copy);
    return rc;
}

int study_parse_engines(vijp_engine_kind *out, size_t *n, const char *list, int allow_backprop, vijp_error *err)
{
    vijp_engine_kind all[VIJP_ENGINE_COUNT];
    size_t m;
    int rc = vijp_engine_parse_list(list, all, &m, err), every = !strcmp(list, "all");
    *n = 0;
    for (size_t i = 0; i < m && !rc; i++) {
        if (all[i] == VIJP_ENGINE_BACKPROP && !allow_backprop) {
            if (every) continue; /* "all" that rebuild gradients */
            rc = vijp_fail(err, VIJP_EINVAL, "backprop is always measured; --engines lists the engines that rebuild gradients");
        }
        out[(*n)++] = all[i];
    }
    return rc;
}

int study_add_configs(study *s, const char *const *specs, size_t n_specs, const char *inits, vijp_error *err)
{
    char *items[STUDY_MAX];
    size_t n;
    char *copy = split(inits, items, STUDY_MAX, &n, "initialisations", err);
    if (!copy) return VIJP_EINVAL;
    int rc = 0;
    s->n_configs = 0;
    /* Without --width, every spec that fixes its own input width (a dense
     * layer first, a JSON net) must agree; specs that do not (a coupling
     * block first) take that width.  Probing a text spec reads no file. */
    size_t given = s->width;
    for (size_t i = 0; i < n_specs && !given && !rc; i++) {
        vijp_net probe = {0};
        size_t w = s->nets[i].layers ? s->nets[i].width : 0;
        if (!w && vijp_net_shape(&probe, specs[i], s->depth, 0, NULL)) continue; /* shapes only: no parameter blocks */
        if (!w) w = probe.width, vijp_net_free(&probe);
        if (s->width && w != s->width)
            rc = vijp_fail(err, VIJP_EINVAL, "networks '%s' and '%s' take different input widths; give --width", specs[0],
                           specs[i]);
        s->width = w;
    }
    for (size_t i = 0; i < n_specs && !rc; i++) {
        vijp_net *net = &s->nets[i]; /* the spec checked and parsed once, before anything runs */
        if (!net->layers && (rc = vijp_net_template(net, specs[i], s->depth, s->width, err))) break;
        s->n_nets = i + 1;
        if (s->width && net->width != s->width) rc = vijp_fail(err, VIJP_EINVAL, "spec '%s' takes input width %zu, not %zu", specs[i], net->width, s->width);
        for (size_t j = 0; j < i && !rc; j++)
            if (!strcmp(specs[j], specs[i])) rc = vijp_fail(err, VIJP_EINVAL, "network '%s' given twice", specs[i]);
        for (size_t j = 0; j < n && !rc; j++) {
            study_config *c = &s->configs[s->n_configs++];
            c->spec = specs[i];
            c->net = i;
            snprintf(c->init_name, sizeof c->init_name, "%s", items[j]);
            rc = vijp_init_parse(items[j], &c->init, err);
            for (size_t k = 0; k < j && !rc; k++)
                if (!strcmp(items[k], items[j])) rc = vijp_fail(err, VIJP_EINVAL, "initialisation '%s' given twice", items[j]);
        }
    }
    free(copy);
    return rc;
}

/* ---- running ---- */

/* Work per layer ∝ width² × batch multiply-adds, in each engine's format
 * and in the reference, validated at p and 2p bits.  An MPFR operation
 * costs about (1 + limbs) units, a double one a fiftieth of one. */
static double layer_work(const study *s)
{
    double w = s->width ? (double)s->width : 32;
    return (double)s->depth * w * w * (double)s->batch;
}

static double reference_cost(const study *s, const vijp_format *F)
{
    double limbs = (double)vijp_drift_ref_prec_first(F, s->ref_prec_start) / 64;
    return layer_work(s) * ((1 + limbs) + (1 + 2 * limbs));
}

static double format_cost(const study *s, const vijp_format *F)
{
    double format = F->kind == VIJP_DOUBLE ? 0.02 : 1 + (double)F->prec / 64;
    return layer_work(s) * (double)(1 + s->n_engines) * format;
}

/* Formats whose curves can share a reference: the same storage format (the
 * problem rounds to the same values: bfloat16 and bfloat16+binary32) and the
 * same first reference precision.  Only a schedule: vijp_drift_memo checks
 * the values themselves. */
static int share_reference(const study *s, const vijp_format *a, const vijp_format *b)
{
    return a->kind != VIJP_DOUBLE && b->kind != VIJP_DOUBLE && a->store_prec == b->store_prec &&
           a->store_emin == b->store_emin && a->store_emax == b->store_emax &&
           a->store_overflow == b->store_overflow && a->store_max == b->store_max &&
           a->mx_block == b->mx_block && a->mx_scale_ceil == b->mx_scale_ceil && /* MX: blocks round otherwise */
           a->tensor_scaled == b->tensor_scaled && a->scale_block == b->scale_block && a->scale_pow2 == b->scale_pow2 &&
           vijp_drift_ref_prec_first(a, s->ref_prec_start) == vijp_drift_ref_prec_first(b, s->ref_prec_start);
}

int study_format_shares_reference(const study *s, size_t f)
{
    for (size_t g = 0; g < s->n_formats; g++)
        if (g != f && share_reference(s, &s->formats[g], &s->formats[f])) return 1;
    return 0;
}

size_t study_reference_groups(const study *s)
{
    size_t leaders = 0;
    for (size_t f = 0; f < s->n_formats; f++) {
        size_t g = 0;
        while (g < f && !share_reference(s, &s->formats[g], &s->formats[f])) g++;
        leaders += g == f;
    }
    return s->n_configs * s->n_seeds * leaders;
}

/* The first curve of j's group: the same config and seed, in the first
 * format that shares j's reference (j itself when none before it does). */
static size_t group_leader(const study *s, size_t j)
{
    size_t k = j % s->n_seeds, f = j / s->n_seeds % s->n_formats, c = j / s->n_seeds / s->n_formats, g = 0;
    while (g < f && !share_reference(s, &s->formats[g], &s->formats[f])) g++;
    return (c * s->n_formats + g) * s->n_seeds + k;
}

struct study_pool {
    study *s;
    pthread_mutex_t lock;
    size_t *order, *leader, next, n_order, done, todo; /* leader[k]: group_leader of order[k] */
    /* The threads a group's curves compute on (curve_threads): groups_from[k]
     * groups begin at order[k] or after it; running, the groups this
     * process's workers are running; jobs, the threads asked for. */
    size_t *groups_from, running;
    int jobs;
    int workers; /* the worker threads planned: jobs, or fewer (study.at_once, the curves) */
    double *cost; /* cost[j]: curve j's estimated share of the work (the meter's weights) */
    double *share, under_way; /* share[j]: the part of curve j done (unit_progress); under_way: Σ cost·share */
    int failed;
    vijp_error err;
    progress meter; /* drawn under the lock, by whoever finished a curve */
    pthread_t *threads;
    int started;
};

typedef struct {
    double cost; /* of the whole group */
    size_t leader, j;
} costed;

/* Largest group first, a group's curves together in index order; equal
 * costs in index order. */
static int by_cost(const void *a, const void *b)
{
    const costed *x = a, *y = b;
    if (x->leader != y->leader) {
        if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
        return (x->leader > y->leader) - (x->leader < y->leader);
    }
    return (x->j > y->j) - (x->j < y->j);
}

/* A curve's hold on its draw, put back once (vijp_drift_run_drawn's release). */
typedef struct {
    study_draws *draws;
    study_draw_key key;
    int put;
} unit_draw;

static void put_draw(void *ctx)
{
    unit_draw *u = ctx;
    if (!u->put) study_draws_put(u->draws, u->key, 1);
    u->put = 1;
}

int study_run_unit(const study *s, size_t j, vijp_drift_curve *c, vijp_error *err)
{
    return study_run_unit_memo(s, j, NULL, 1, NULL, NULL, c, err);
}

int study_run_unit_memo(const study *s, size_t j, vijp_drift_memo *memo, int threads,
                        void (*on_progress)(void *ctx, double done), void *progress_ctx, vijp_drift_curve *c,
                        vijp_error *err)
{
    size_t k = j % s->n_seeds, f = j / s->n_seeds % s->n_formats, ci = j / s->n_seeds / s->n_formats;
    vijp_drift_setup ds = {
        .problem = {.spec = s->configs[ci].spec, .net = &s->nets[s->configs[ci].net], .depth = s->depth, .width = s->width, .batch = s->batch,
                    .input = s->input, .weights = s->weights, .seed = s->seeds[k], .init = s->configs[ci].init, .loss = s->loss, .fmt = s->formats[f],
                    .opts = s->opts},
        .engines = s->engines, .n_engines = s->n_engines, .ref_prec_start = s->ref_prec_start,
        .ref_prec_max = s->ref_prec_max, .memo = memo, .on_progress = on_progress, .progress_ctx = progress_ctx,
    };
    ds.problem.fmt.threads = threads; /* the format carries it down: the products, the solves, the reference */
    ds.problem.init.threads = threads; /* and the draw, where this curve draws its own net */
    vijp_error e = {0};
    const vijp_net *drawn = NULL;
    unit_draw held = {s->draws, study_unit_draw(s, j), 0};
    /* The net drawn once for every format and engine of this config and
     * seed (draws.h), where the pool keeps a table, and handed back as soon
     * as the curve has rounded it; else this curve's own */
    int rc = s->draws ? study_draws_get(s->draws, held.key, threads, &drawn, &e) : 0;
    if (!rc) rc = vijp_drift_run_drawn(&ds, drawn, put_draw, &held, c, &e);
    if (drawn) put_draw(&held); /* where the run did not */
    if (rc) vijp_fail(err, rc, "%s", e.msg);
    return rc;
}

study_draw_key study_unit_draw(const study *s, size_t j)
{
    size_t k = j % s->n_seeds, ci = j / s->n_seeds / s->n_formats;
    return (study_draw_key){s->configs[ci].net, s->configs[ci].init, s->seeds[k], s->weights != NULL};
}

study_draw_key study_profile_draw(const study *s, size_t c)
{
    return (study_draw_key){s->configs[c].net, {.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, s->seeds[0], 0};
}

void study_unit_name(const study *s, size_t j, char *buf, size_t size)
{
    size_t k = j % s->n_seeds, f = j / s->n_seeds % s->n_formats, c = j / s->n_seeds / s->n_formats;
    snprintf(buf, size, "%s (%s), %s, seed %llu", s->configs[c].spec, s->configs[c].init_name, s->formats[f].name,
             (unsigned long long)s->seeds[k]);
}

int study_pool_take(study_pool *p, size_t *j)
{
    size_t n;
    int got = study_pool_take_group(p, j, 1, &n);
    /* computed by another process, from its own draw */
    if (got && p->s->draws) study_draws_expect(p->s->draws, study_unit_draw(p->s, *j), -1);
    return got;
}

/* study_pool_take_group's work, under the lock. */
static void take_locked(study_pool *p, size_t *js, size_t max, size_t *n)
{
    *n = 0;
    while (!p->failed && p->next < p->n_order && *n < max &&
           (*n == 0 || p->leader[p->next] == p->leader[p->next - 1]))
        js[(*n)++] = p->order[p->next++];
}

int study_pool_take_group(study_pool *p, size_t *js, size_t max, size_t *n)
{
    pthread_mutex_lock(&p->lock);
    take_locked(p, js, max, n);
    pthread_mutex_unlock(&p->lock);
    return *n > 0;
}

void study_pool_done(study_pool *p, size_t j, int rc, const char *where, const char *msg)
{
    study *s = p->s;
    if (!rc && s->on_unit) s->on_unit(s->on_unit_ctx, j, &s->curves[j]);
    pthread_mutex_lock(&p->lock);
    if (rc && !p->failed) {
        char name[256];
        study_unit_name(s, j, name, sizeof name);
        p->failed = rc;
        vijp_fail(&p->err, rc, "%s%s: %s", where, name, msg);
    }
    p->under_way -= p->cost[j] * p->share[j], p->share[j] = 0;
    p->meter.under_way = p->under_way; /* redrawn with the count next */
    progress_step_work(&p->meter, ++p->done, p->cost[j]);
    pthread_mutex_unlock(&p->lock);
}

/* A curve under way has done the share done of its work
 * (vijp_drift_setup.on_progress): the meter moves within the curves. */
typedef struct {
    study_pool *p;
    size_t j;
} unit_meter;

static void unit_progress(void *ctx, double done)
{
    unit_meter *u = ctx;
    study_pool *p = u->p;
    pthread_mutex_lock(&p->lock);
    p->under_way += p->cost[u->j] * (done - p->share[u->j]), p->share[u->j] = done;
    progress_under_way(&p->meter, p->under_way);
    pthread_mutex_unlock(&p->lock);
}

/* The threads for a group taken now (under the lock, after the take): the
 * pool's jobs spread over the groups that can still run at once (those
 * running, this one among them, and those not started), so that a study
 * with fewer groups than jobs gives the spare cores to its curves.  No two
 * groups running together hold more than jobs threads: each got at most
 * jobs over a count that included every group that can run beside it.
 * Only time depends on it: a curve's numbers are the same on any threads. */
static int curve_threads(const study_pool *p)
{
    size_t at_once = p->running + p->groups_from[p->next], jobs = (size_t)p->jobs;
    size_t cap = (size_t)p->workers < jobs ? (size_t)p->workers : jobs; /* no more groups run at once than workers */
    if (at_once > cap) at_once = cap;
    return at_once > 1 ? (int)(jobs / at_once) : p->jobs;
}

/* study_pool_take_group for this process's workers: also how many threads
 * the group gets, and the group counted as running until group_end. */
static int take_running(study_pool *p, size_t *js, size_t *n, int *threads)
{
    pthread_mutex_lock(&p->lock);
    take_locked(p, js, STUDY_MAX, n);
    if (*n) p->running++, *threads = curve_threads(p);
    pthread_mutex_unlock(&p->lock);
    return *n > 0;
}

static void group_end(study_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->running--;
    pthread_mutex_unlock(&p->lock);
}

/* A group's curves one after another on one thread (and the threads inside
 * each curve: curve_threads), sharing a memo: the reference and
 * conditioning of its rounded problem are computed once. */
static void *worker(void *arg)
{
    study_pool *p = arg;
    size_t js[STUDY_MAX], n;
    int threads;
    while (take_running(p, js, &n, &threads)) {
        vijp_drift_memo *memo = n > 1 ? vijp_drift_memo_new() : NULL;
        for (size_t k = 0; k < n; k++) {
            vijp_error e = {0};
            unit_meter u = {p, js[k]};
            int metered = p->meter.out != NULL; /* the meter is drawn: no lock a step otherwise */
            int rc = study_run_unit_memo(p->s, js[k], memo, threads, metered ? unit_progress : NULL, &u,
                                         &p->s->curves[js[k]], &e);
            study_pool_done(p, js[k], rc, "", e.msg);
            if (rc) break; /* the pool stops: the rest of the group is not computed */
        }
        vijp_drift_memo_free(memo);
        group_end(p);
    }
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* this thread's constants (π, log 2) */
    return NULL;
}

study_pool *study_pool_start(study *s, int threads)
{
    study_pool *p = vijp_alloc(sizeof *p);
    *p = (study_pool){.s = s};
    size_t total = study_units(s);
    if (!s->curves) s->curves = vijp_alloc_array(total, sizeof *s->curves);
    /* The curves not kept (--resume), largest first: the last ones to
     * start are the short ones, so no worker is left with a long tail. */
    p->order = vijp_alloc_array(total ? total : 1, sizeof *p->order);
    /* A group of curves sharing a reference (group_leader) costs one
     * reference and each curve's own runs. */
    p->leader = vijp_alloc_array(total ? total : 1, sizeof *p->leader);
    costed *c = vijp_alloc_array(total ? total : 1, sizeof *c);
    double *group = vijp_alloc_array(total ? total : 1, sizeof *group), *reference = vijp_alloc_array(total ? total : 1, sizeof *reference);
    size_t *members = vijp_alloc_array(total ? total : 1, sizeof *members);
    for (size_t j = 0; j < total; j++) {
        if (s->done && s->done[j]) continue;
        size_t l = group_leader(s, j);
        const vijp_format *F = &s->formats[j / s->n_seeds % s->n_formats];
        if (!members[l]++) reference[l] = reference_cost(s, F);
        group[l] += (members[l] > 1 ? 0 : reference[l]) + format_cost(s, F);
        c[p->n_order++] = (costed){0, l, j};
    }
    /* The meter's weights: each curve's own runs and its share of its
     * group's reference, so that the heavy groups run first do not make
     * the time left look twice what it is. */
    p->cost = vijp_alloc_array(total ? total : 1, sizeof *p->cost);
    p->share = vijp_alloc_array(total ? total : 1, sizeof *p->share);
    double work = 0;
    for (size_t k = 0; k < p->n_order; k++) {
        size_t j = c[k].j, l = c[k].leader;
        c[k].cost = group[l];
        p->cost[j] = format_cost(s, &s->formats[j / s->n_seeds % s->n_formats]) + reference[l] / (double)members[l];
        work += p->cost[j];
    }
    free(reference), free(members);
    /* Each curve's net drawn once and kept until the last of its curves
     * has rounded it (study_run_unit_memo); the report's memory table
     * (sections.c) draws its config's net again after the curves where
     * that net is gone, rather than keep it beside every curve's peak */
    if (!s->draws) {
        study_draws_source src = {s->nets, s->depth, s->width, s->batch, s->weights};
        s->draws = study_draws_new(&src);
    }
    for (size_t k = 0; k < p->n_order; k++) study_draws_expect(s->draws, study_unit_draw(s, c[k].j), 1);
    qsort(c, p->n_order, sizeof *c, by_cost);
    for (size_t k = 0; k < p->n_order; k++) p->order[k] = c[k].j, p->leader[k] = c[k].leader;
    free(c), free(group);
    p->groups_from = vijp_alloc_array(p->n_order + 1, sizeof *p->groups_from);
    for (size_t k = p->n_order; k-- > 0;) /* a group's curves are together in the order */
        p->groups_from[k] = p->groups_from[k + 1] + (k == 0 || p->leader[k] != p->leader[k - 1]);
    p->todo = p->n_order;
    pthread_mutex_init(&p->lock, NULL);
    /* The meter counts the curves this run computes (kept ones aside), so that its estimate of the time left holds. */
    progress_start(&p->meter, s->progress && p->todo ? stderr : NULL, p->todo, "curves", NULL); /* none left: no "0/0" */
    progress_set_work(&p->meter, work);
    /* MPFR keeps its exponent range per thread only when built thread-safe. */
    if (!mpfr_buildopt_tls_p() && threads > 1) threads = 1;
    p->jobs = threads > 1 ? threads : 1; /* threads inside a curve run MPFR too: the same condition */
    if (s->at_once > 0 && threads > s->at_once) threads = s->at_once; /* the memory's limit: the rest inside the curves */
    if ((size_t)threads > p->todo) threads = (int)p->todo;
    p->workers = threads > 1 ? threads : 1;
    /* Curves run in parallel; OpenBLAS threads on top of them only spin
     * (sched_yield) on these small matrices.  One BLAS thread always, so
     * that double results do not depend on --jobs either. */
    openblas_set_num_threads(1);
    p->threads = vijp_alloc_array(threads > 0 ? (size_t)threads : 1, sizeof *p->threads);
    for (; p->started < threads; p->started++)
        if (pthread_create(&p->threads[p->started], NULL, worker, p)) break;
    return p;
}

int study_pool_finish(study_pool *p, vijp_error *err)
{
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    /* the report next: the curves' heaps give their free pages back, which
     * its sizing counts on (cli/drift.c's study_peak_bytes) */
    vijp_memory_return_freed();
    progress_end(&p->meter);
    pthread_mutex_destroy(&p->lock);
    int rc = p->failed;
    if (rc && err) *err = p->err;
    free(p->threads), free(p->order), free(p->leader), free(p->groups_from), free(p->cost), free(p->share), free(p);
    return rc;
}

int study_run(study *s, vijp_error *err)
{
    int jobs = s->jobs < 1 ? 1 : s->jobs;
    study_pool *p = study_pool_start(s, jobs);
    if (p->started == 0) worker(p); /* no thread could start: this one computes */
    return study_pool_finish(p, err);
}

void study_free(study *s)
{
    size_t total = study_units(s);
    for (size_t j = 0; s->curves && j < total; j++) vijp_drift_curve_clear(&s->curves[j]);
    free(s->curves);
    free(s->done);
    free(s->command);
    study_draws_free(s->draws);
    s->draws = NULL;
    for (size_t i = 0; i < STUDY_MAX; i++) vijp_net_free(&s->nets[i]); /* parsed ones, also past a failure */
    s->n_nets = 0;
    s->curves = NULL;
    s->done = NULL;
    s->command = NULL;
}

/* Running a drift study: parsing its lists, a pool of worker threads, a
 * progress meter on terminals (progress.h). */
#include "progress.h"
#include "study.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Split a comma list into at most max items of a copy the caller frees. */
static char *split(const char *list, char **items, size_t max, size_t *n, const char *what, vijp_error *err)
{
    char *copy = vijp_strdup(list), *save = NULL;
    *n = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == max) {
            vijp_fail(err, VIJP_EINVAL, "too many %s (at most %zu)", what, max);
            free(copy);
            return NULL;
        }
        items[(*n)++] = t;
    }
    if (*n == 0) {
        vijp_fail(err, VIJP_EINVAL, "no %s given", what);
        free(copy);
        return NULL;
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
        errno = 0;
        double t = strtod(eq + 1, &end);
        if (!eq[1] || *end || errno || !(t > 0 && t < 1)) {
            rc = vijp_fail(err, VIJP_EINVAL, "tolerance for %s must be a number in (0, 1), got '%s'", items[i], eq + 1);
            break;
        }
        size_t f = 0;
        while (f < s->n_formats && strcmp(s->formats[f].name, items[i])) f++;
        if (f == s->n_formats) rc = vijp_fail(err, VIJP_EINVAL, "tolerance for '%s', which is not a format of the study", items[i]);
        else s->tol[f] = t;
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
    char *items[VIJP_ENGINE_COUNT];
    char *copy = split(list, items, allow_backprop ? VIJP_ENGINE_COUNT : VIJP_ENGINE_COUNT - 1, n, "engines", err);
    if (!copy) return VIJP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < *n && !rc; i++) {
        rc = vijp_engine_parse(items[i], &out[i], err);
        if (!rc && !allow_backprop && out[i] == VIJP_ENGINE_BACKPROP)
            rc = vijp_fail(err, VIJP_EINVAL, "backprop is always measured; --engines lists the engines that rebuild gradients");
        for (size_t j = 0; j < i && !rc; j++)
            if (out[j] == out[i]) rc = vijp_fail(err, VIJP_EINVAL, "engine '%s' given twice", items[i]);
    }
    free(copy);
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
     * layer first) must agree; specs that do not (a coupling block first)
     * take that width. */
    size_t given = s->width;
    for (size_t i = 0; i < n_specs && !given && !rc; i++) {
        vijp_net probe;
        if (vijp_net_build(&probe, specs[i], s->depth, 0, NULL)) continue;
        if (s->width && probe.width != s->width)
            rc = vijp_fail(err, VIJP_EINVAL, "networks '%s' and '%s' take different input widths; give --width", specs[0],
                           specs[i]);
        s->width = probe.width;
        vijp_net_free(&probe);
    }
    for (size_t i = 0; i < n_specs && !rc; i++) {
        vijp_net probe; /* validate the spec before running anything */
        if ((rc = vijp_net_build(&probe, specs[i], s->depth, s->width, err))) break;
        if (s->width && probe.width != s->width) rc = vijp_fail(err, VIJP_EINVAL, "spec '%s' takes input width %zu, not %zu", specs[i], probe.width, s->width);
        vijp_net_free(&probe);
        for (size_t j = 0; j < n && !rc; j++) {
            study_config *c = &s->configs[s->n_configs++];
            c->spec = specs[i];
            snprintf(c->init_name, sizeof c->init_name, "%s", items[j]);
            rc = vijp_init_parse(items[j], &c->init, err);
        }
    }
    free(copy);
    return rc;
}

/* ---- running ---- */

typedef struct {
    study *s;
    pthread_mutex_t lock;
    size_t next, done, total;
    int failed;
    vijp_error err;
    progress meter; /* drawn under the lock, by whichever worker finished a curve */
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    study *s = p->s;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->failed && p->next < p->total && s->done && s->done[p->next]) p->next++;
        size_t j = p->failed ? p->total : p->next++;
        pthread_mutex_unlock(&p->lock);
        if (j >= p->total) {
            mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* this thread's constants (π, log 2) */
            return NULL;
        }
        size_t k = j % s->n_seeds, f = j / s->n_seeds % s->n_formats, c = j / s->n_seeds / s->n_formats;
        vijp_drift_setup ds = {
            .problem = {.spec = s->configs[c].spec, .depth = s->depth, .width = s->width, .batch = s->batch,
                        .input = s->input, .weights = s->weights, .seed = s->seeds[k], .init = s->configs[c].init, .loss = s->loss, .fmt = s->formats[f],
                        .opts = s->opts},
            .engines = s->engines, .n_engines = s->n_engines, .ref_prec_start = s->ref_prec_start,
            .ref_prec_max = s->ref_prec_max,
        };
        vijp_error e = {0};
        int rc = vijp_drift_run(&ds, &s->curves[j], &e);
        if (!rc && s->on_unit) s->on_unit(s->on_unit_ctx, j, &s->curves[j]);
        pthread_mutex_lock(&p->lock);
        if (rc && !p->failed) {
            p->failed = rc;
            vijp_fail(&p->err, rc, "%s (%s), %s, seed %llu: %s", ds.problem.spec, s->configs[c].init_name, ds.problem.fmt.name,
                      (unsigned long long)ds.problem.seed, e.msg);
        }
        progress_step(&p->meter, ++p->done);
        pthread_mutex_unlock(&p->lock);
    }
}

int study_run(study *s, vijp_error *err)
{
    pool p = {.s = s, .total = study_units(s)};
    if (!s->curves) s->curves = vijp_alloc_array(p.total, sizeof *s->curves);
    size_t todo = p.total;
    for (size_t j = 0; s->done && j < p.total; j++) todo -= s->done[j];
    pthread_mutex_init(&p.lock, NULL);
    /* The meter counts the curves this run computes (kept ones aside), so that its estimate of the time left holds. */
    progress_start(&p.meter, s->progress ? stderr : NULL, todo, "curves", NULL);
    /* MPFR keeps its exponent range per thread only when built thread-safe. */
    int jobs = mpfr_buildopt_tls_p() ? s->jobs : 1;
    if (jobs < 1) jobs = 1;
    if ((size_t)jobs > todo) jobs = todo ? (int)todo : 1;
    /* Curves run in parallel; OpenBLAS threads on top of them only spin
     * (sched_yield) on these small matrices.  One BLAS thread always, so
     * that double results do not depend on --jobs either. */
    openblas_set_num_threads(1);
    pthread_t *t = vijp_alloc_array((size_t)jobs, sizeof *t);
    int started = 0;
    for (; t && started < jobs; started++)
        if (pthread_create(&t[started], NULL, worker, &p)) break;
    if (started == 0) worker(&p);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    progress_end(&p.meter);
    free(t);
    pthread_mutex_destroy(&p.lock);
    if (p.failed) {
        if (err) *err = p.err;
        return p.failed;
    }
    return 0;
}

void study_free(study *s)
{
    size_t total = study_units(s);
    for (size_t j = 0; s->curves && j < total; j++) vijp_drift_curve_clear(&s->curves[j]);
    free(s->curves);
    free(s->done);
    free(s->command);
    s->curves = NULL;
    s->done = NULL;
    s->command = NULL;
}

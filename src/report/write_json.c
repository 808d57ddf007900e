/* drift.json: the whole study, every layer of every curve, with metadata.
 * Schema "vijp-drift/2", written out in docs/drift.schema.json: vijp regress
 * validates what it reads against that document, so a field added or changed
 * here must be added or changed there (make check's schema test says where).
 * Version 2 keeps every error at any precision: a number where it is a
 * double, a decimal string of 17 digits past double's range ("1.61e-1214",
 * an mpfr:P error past P ≈ 1070); vijp regress reads versions 1 and 2. */
#include "study/stats.h"
#include "write.h"
#include "base/xnum_json.h"
#include "vijp/vijp.h"
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef VIJP_GIT_COMMIT
#define VIJP_GIT_COMMIT "unknown"
#endif

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *spread_json(spread s)
{
    return json_pack("{s:o, s:o, s:o}", "min", num(s.min), "median", num(s.median), "max", num(s.max));
}

/* double and every FORMAT@SET go through BLAS (and SIMD libm, or a GPU): machine-dependent. */
int format_reproducible(const vijp_format *f) { return f->kind != VIJP_DOUBLE && !f->kernel_set; }

void machine_description(char *buf, size_t size)
{
    struct utsname u;
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    if (uname(&u)) strcpy(u.machine, "?"), strcpy(u.sysname, "?"), strcpy(u.release, "?");
    snprintf(buf, size, "%s %s %s, %s, %ld cores", u.sysname, u.release, u.machine, model, sysconf(_SC_NPROCESSORS_ONLN));
}

/* OpenBLAS's openblas_get_config() rebuilds a static buffer on every call
 * (it appends the core's name), so two threads asking at once read
 * "... ZenZen ...": drift.json's and report.md's are formed on two threads
 * (prerender.h).  Formed once, under pthread_once (immutable afterwards). */
static char blas_text[512];
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_form(void) { snprintf(blas_text, sizeof blas_text, "%s (core %s)", openblas_get_config(), openblas_get_corename()); }

void blas_description(char *buf, size_t size)
{
    pthread_once(&blas_once, blas_form);
    snprintf(buf, size, "%s", blas_text);
}

static json_t *metric_arrays(const vijp_metric *m, size_t D)
{
    json_t *rel = json_array(), *ulps = json_array(), *ang = json_array();
    for (size_t i = 0; i < D; i++) {
        json_array_append_new(rel, vijp_xnum_to_json(m[i].rel));
        json_array_append_new(ulps, vijp_xnum_to_json(m[i].ulps));
        json_array_append_new(ang, vijp_xnum_to_json(m[i].angle_deg));
    }
    return json_pack("{s:o, s:o, s:o}", "rel", rel, "ulps", ulps, "angle_deg", ang);
}

static json_t *doubles(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, num(v[i]));
    return a;
}

static json_t *xnums(const vijp_xnum *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, vijp_xnum_to_json(v[i]));
    return a;
}

static json_t *run_json(const study *s, const vijp_drift_curve *c, size_t r, const int *has_param, vijp_xnum tol,
                        long prec)
{
    const vijp_drift_run_result *run = &c->runs[r];
    run_stats st;
    run_stats_of(c, r, has_param, tol, prec, &st);
    json_t *bytes = json_array();
    for (size_t i = 0; i < c->depth; i++) json_array_append_new(bytes, json_integer((json_int_t)run->stored_by_depth[i]));
    (void)s;
    json_t *o = json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:{s:o, s:o, s:o}, s:o, s:o, s:o, s:o}",
                     "engine", vijp_engine_name(run->engine), "rebuilt", (json_int_t)run->rebuilt, "failure",
                     run->rebuilt < c->depth ? json_string(run->failure) : json_null(), "safe_depth",
                     num(st.safe_depth), "growth_rate", num(st.growth_rate), "bits_needed", num(st.bits_needed),
                     "bits_extrapolated", st.bits_extrapolated, "err_max", vijp_xnum_to_json(st.err_max), "price",
                     num(st.price), "x", "rel", vijp_xnum_to_json(run->x.rel), "ulps", vijp_xnum_to_json(run->x.ulps), "angle_deg",
                     vijp_xnum_to_json(run->x.angle_deg), "g", metric_arrays(run->g, c->depth), "theta",
                     metric_arrays(run->theta, c->depth), "bound",
                     run->bound ? xnums(run->bound, c->depth) : json_null(), "stored_bytes", bytes);
    if (run->reconstruction) json_object_set_new(o, "reconstruction", xnums(run->reconstruction, c->depth));
    return o;
}

static json_t *curve_json(const study *s, size_t ci, size_t fi)
{
    const vijp_format *f = &s->formats[fi];
    int *has_param = config_has_param(s, ci);
    json_t *seeds = json_array();
    double v[6][STUDY_MAX];
    for (size_t k = 0; k < s->n_seeds; k++) {
        const vijp_drift_curve *c = study_curve(s, ci, fi, k);
        json_t *engines = json_array();
        for (size_t r = 0; r < c->n_runs; r++)
            json_array_append_new(engines, run_json(s, c, r, has_param, s->tol[fi], (long)vijp_format_value_prec(f)));
        run_stats st;
        run_stats_of(c, verdict_run(s), has_param, s->tol[fi], (long)vijp_format_value_prec(f), &st);
        v[0][k] = st.safe_depth, v[1][k] = st.growth_rate, v[2][k] = c->predicted_rate;
        v[3][k] = c->lyap_rate, v[4][k] = st.bits_needed, v[5][k] = st.price;
        json_array_append_new(
            seeds, json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "seed",
                             (json_int_t)s->seeds[k], "ref_prec_start", (json_int_t)c->ref_prec_start, "ref_prec",
                             (json_int_t)c->ref_prec, "ref_agreement", vijp_xnum_to_json(c->ref_agreement), "kappa",
                             doubles(c->kappa, c->depth), "lyapunov_cumulative", doubles(c->lyap_cum, c->depth),
                             "lyapunov_rate", num(c->lyap_rate), "predicted", xnums(c->predicted, c->depth),
                             "predicted_rate", num(c->predicted_rate), "ref_target", vijp_xnum_to_json(c->ref_target),
                             "engines", engines));
        if (c->cond_method[0] && strcmp(c->cond_method, "exact")) /* absent: exact, as before the field */
            json_object_set_new(json_array_get(seeds, k), "cond_method", json_string(c->cond_method));
    }
    free(has_param);
    size_t n = s->n_seeds;
    json_t *summary = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "engine",
                                vijp_engine_name(s->n_engines ? s->engines[0] : VIJP_ENGINE_BACKPROP), "safe_depth",
                                spread_json(spread_of(v[0], n)), "growth_rate", spread_json(spread_of(v[1], n)),
                                "predicted_rate", spread_json(spread_of(v[2], n)), "lyapunov_rate",
                                spread_json(spread_of(v[3], n)), "bits_needed", spread_json(spread_of(v[4], n)),
                                "price", spread_json(spread_of(v[5], n)));
    return json_pack("{s:I, s:s, s:s, s:s, s:b, s:o, s:o, s:o, s:o}", "config", (json_int_t)ci + 1, "spec",
                     s->configs[ci].spec, "init", s->configs[ci].init_name, "format", f->name, "reproducible",
                     format_reproducible(f), "tol", vijp_xnum_to_json(s->tol[fi]), "unit_roundoff",
                     vijp_xnum_to_json(vijp_xnum_2exp(1, -(long)vijp_format_value_prec(f))), "summary", summary, "seeds", seeds);
}

json_t *study_json(const study *s)
{
    char machine[512], blas[512];
    machine_description(machine, sizeof machine);
    blas_description(blas, sizeof blas);
    json_t *seeds = json_array(), *formats = json_array(), *engines = json_array(), *configs = json_array(),
           *tols = json_object(), *curves = json_array();
    for (size_t k = 0; k < s->n_seeds; k++) json_array_append_new(seeds, json_integer((json_int_t)s->seeds[k]));
    for (size_t f = 0; f < s->n_formats; f++) {
        json_array_append_new(formats, json_string(s->formats[f].name));
        json_object_set_new(tols, s->formats[f].name, vijp_xnum_to_json(s->tol[f]));
    }
    json_array_append_new(engines, json_string("backprop"));
    for (size_t e = 0; e < s->n_engines; e++) json_array_append_new(engines, json_string(vijp_engine_name(s->engines[e])));
    for (size_t c = 0; c < s->n_configs; c++)
        json_array_append_new(configs, json_pack("{s:s, s:s}", "spec", s->configs[c].spec, "init", s->configs[c].init_name));
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++) json_array_append_new(curves, curve_json(s, c, f));
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "vijp_version", VIJP_VERSION, "git_commit",
                             VIJP_GIT_COMMIT, "command", s->command ? s->command : "", "machine", machine, "blas", blas,
                             "mpfr", mpfr_get_version(), "gmp", gmp_version, "double_note",
                             "double results go through BLAS/LAPACK and may differ between machines and BLAS "
                             "builds, as do the FORMAT@SET formats' (sgemm, cuBLAS); the emulated formats and mpfr:P are "
                             "bit-reproducible");
    json_t *st = json_pack("{s:I, s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I}", "depth", (json_int_t)s->depth,
                           "width", (json_int_t)s->width, "batch", (json_int_t)s->batch, "loss",
                           s->loss == VIJP_LOSS_SQUARE ? "square" : "linear", "configs", configs, "formats", formats,
                           "engines", engines, "seeds", seeds, "tolerances", tols, "ref_prec_start",
                           (json_int_t)s->ref_prec_start, "ref_prec_max",
                           (json_int_t)(s->ref_prec_max ? s->ref_prec_max : VIJP_DRIFT_REF_PREC_MAX));
    return json_pack("{s:s, s:o, s:o, s:o}", "schema", "vijp-drift/2", "meta", meta, "study", st, "curves", curves);
}

/* A drift study as the CLI runs it: configurations (spec × initialisation) ×
 * formats × seeds, every curve held in memory until the report is written. */
#ifndef VIJP_CLI_STUDY_H
#define VIJP_CLI_STUDY_H

#include "vijp/drift.h"
#include "vijp/error.h"
#include "draws.h"

#define STUDY_MAX 32 /* of each list: specs, inits, formats, engines, seeds */

typedef struct {
    const char *spec;
    size_t net; /* its net: study.nets[net] */
    char init_name[32];
    vijp_init init;
} study_config;

typedef struct {
    study_config configs[STUDY_MAX * STUDY_MAX];
    size_t n_configs;
    /* Each spec's net (nets[k] for spec k), parsed once (vijp_net_template)
     * and copied by every curve, read by every check and writer: a JSON
     * net's file is read once a run. */
    vijp_net nets[STUDY_MAX];
    size_t n_nets;
    vijp_format formats[STUDY_MAX];
    vijp_xnum tol[STUDY_MAX]; /* per format, at any exponent (mpfr:P's default 2^(-P/2)) */
    size_t n_formats;
    uint64_t seeds[STUDY_MAX];
    size_t n_seeds;
    vijp_engine_kind engines[VIJP_ENGINE_COUNT - 1]; /* rebuilding engines; backprop is always measured */
    size_t n_engines;
    size_t depth, width, batch;
    const char *input, *weights; /* --input X.npy, --weights FILE.safetensors (NULL: none) */
    const char *const *plugins;  /* the --plugin files loaded, in order (n_plugins of them) */
    size_t n_plugins;
    vijp_loss_kind loss;
    long ref_prec_start, ref_prec_max;
    vijp_engine_opts opts;
    const char *out_dir;
    char *command;         /* the command line, shell-quoted */
    int jobs, progress, plots;
    /* Curves computed at once (0: as many as jobs and the curves allow): the
     * sizing's choice where that many would not fit the memory, the spare
     * jobs then threads inside each curve. */
    int at_once;
    /* The report's memory table's engines run at once (0: as many as
     * jobs): the sizing's, as at_once; the same bytes on any count. */
    int table_at_once;
    vijp_drift_curve *curves; /* [(config · n_formats + format) · n_seeds + seed] */
    unsigned char *done;      /* NULL, or done[j]: curves[j] is already there (--resume, resume.h) */
    /* Called (on a worker thread) with each curve as it is finished, when set. */
    void (*on_unit)(void *ctx, size_t j, const vijp_drift_curve *c);
    void *on_unit_ctx;
    /* NULL, or the nets drawn once for the curves, and for the memory
     * table after them (draws.h): made by study_pool_start, freed by
     * study_free */
    study_draws *draws;
} study;

static inline size_t study_units(const study *s) { return s->n_configs * s->n_formats * s->n_seeds; }

static inline vijp_drift_curve *study_curve(const study *s, size_t c, size_t f, size_t k)
{
    return &s->curves[(c * s->n_formats + f) * s->n_seeds + k];
}

/* Run every curve (but those done) on s->jobs threads, with the progress meter (progress.h) when s->progress.
 * Returns 0, or a VIJP_E* code with err naming the failed curve. */
VIJP_MUST_CHECK int study_run(study *s, vijp_error *err);
void study_free(study *s);

/* The parts of study_run, for a scheduler that also hands curves to other
 * processes (mpi_study.h).  study_pool_start orders the curves not done,
 * largest first, a group of curves that share a reference (the same config,
 * seed and storage format) together and costed as one reference and its
 * curves' runs; starts `threads` worker threads (0: none), each taking a
 * group at a time and running it with one vijp_drift_memo, on more threads
 * inside its curves where fewer groups than `threads` can run at once
 * (docs/scale-out.md); and starts the progress meter.
 * study_pool_take hands the next curve to another computer (0: none left,
 * or a curve failed); study_pool_done records it, computed into
 * s->curves[j] (or failed with rc and msg; where, such as "rank 3: ",
 * prefixes the message), and calls s->on_unit.  study_pool_finish joins the
 * threads and returns the first failure, its message naming the curve. */
typedef struct study_pool study_pool;
study_pool *study_pool_start(study *s, int threads);
int study_pool_take(study_pool *p, size_t *j);
void study_pool_done(study_pool *p, size_t j, int rc, const char *where, const char *msg);
VIJP_MUST_CHECK int study_pool_finish(study_pool *p, vijp_error *err);
/* Up to max curves into js[0..*n−1]: the next one and those after it that
 * share its reference (the same config, seed and storage format), for one
 * thread to run in turn with a vijp_drift_memo.  0: none left, or a failure. */
int study_pool_take_group(study_pool *p, size_t *js, size_t max, size_t *n);
/* Curve j into *c (what every worker runs); err: the engine's message. */
VIJP_MUST_CHECK int study_run_unit(const study *s, size_t j, vijp_drift_curve *c, vijp_error *err);
/* The same, with results of the rounded problem shared through memo (drift.h; NULL: none), on up to
 * threads threads inside the curve (the format's threads: the same numbers on any), reporting its
 * progress to on_progress (NULL: none; vijp_drift_setup.on_progress). */
VIJP_MUST_CHECK int study_run_unit_memo(const study *s, size_t j, vijp_drift_memo *memo, int threads,
                                        void (*on_progress)(void *ctx, double done), void *progress_ctx,
                                        vijp_drift_curve *c, vijp_error *err);
/* The draw curve j runs on, and the one the memory table profiles config
 * c on (orthogonal, the first seed, no --weights: vijp_memory_profile's). */
study_draw_key study_unit_draw(const study *s, size_t j);
study_draw_key study_profile_draw(const study *s, size_t c);
/* Whether format f's curves share their reference with another format's
 * (the same storage format): each group of a config and seed then runs
 * with one vijp_drift_memo. */
int study_format_shares_reference(const study *s, size_t f);
/* How many such groups the study has: one thread runs each, in turn. */
size_t study_reference_groups(const study *s);
/* "SPEC (INIT), FORMAT, seed K": curve j in messages. */
void study_unit_name(const study *s, size_t j, char *buf, size_t size);


/* Parse comma lists into the study. */
VIJP_MUST_CHECK int study_parse_formats(study *s, const char *list, vijp_error *err);
/* Configurations: every spec with every initialisation of the comma list.
 * Spec k's net is s->nets[k] where the caller parsed it already (a JSON
 * net, whose depth is the study's: cli_net_parse), else parsed here at
 * s->depth and s->width (0: the specs', which must agree). */
VIJP_MUST_CHECK int study_add_configs(study *s, const char *const *specs, size_t n_specs, const char *inits, vijp_error *err);
VIJP_MUST_CHECK int study_parse_seeds(study *s, const char *list, vijp_error *err);
VIJP_MUST_CHECK int study_parse_engines(vijp_engine_kind *out, size_t *n, const char *list, int allow_backprop, vijp_error *err);
/* "FMT=TOL,…" overrides of the default tolerances. */
VIJP_MUST_CHECK int study_parse_tols(study *s, const char *list, vijp_error *err);

#endif

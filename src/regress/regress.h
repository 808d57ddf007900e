/* vijp regress, shared by its files: regress.c (options, loading, what is
 * printed), regress_match.c (which curves the two files share),
 * regress_compare.c (the findings and each curve's verdict) and
 * regress_junit.c (the JUnit report).
 *
 * A curve of the comparison is one configuration (net spec and init) in one
 * format, for one engine and one seed when its format is compared exactly
 * (bit-reproducible), or over the seeds both files have when it is compared
 * with tolerances (double).  Configurations, formats, engines and seeds are
 * matched by name and value, not by position, so a baseline with more or
 * fewer of any of them is compared on what the two files share. */
#ifndef VIJP_CLI_REGRESS_H
#define VIJP_CLI_REGRESS_H

#include <jansson.h>
#include <stddef.h>
#include "vijp/error.h"
#include "vijp/xnum.h"

typedef struct {
    double factor, drop; /* double's tolerances: --error-factor, --depth-drop */
    int all_tolerant;    /* --tolerant: the reproducible formats with tolerances too */
    int strict;          /* --strict: a 'better' curve fails too */
} regress_opts;

typedef struct {
    char *name;                                /* "c1 SPEC INIT / FORMAT / ENGINE / seed 1" (or "seeds 1-4") */
    json_t *bc, *cc;                           /* the curve in BASELINE and in CURRENT (borrowed; NULL: absent) */
    const char *spec, *init, *format, *engine; /* borrowed from the files */
    json_int_t config;                         /* cN: the index in CURRENT (in BASELINE if only there) */
    json_int_t seed;                           /* compared exactly: the seed; -1: over the seeds */
    int exact;                                 /* compared exactly (bit-reproducible, no --tolerant) */
    json_t *seeds;                             /* the seeds compared, or this curve's seeds if skipped */
    char *skipped;                             /* why it was not compared; NULL: compared */
    const char *only_in;                       /* skipped: "baseline" or "current" when only one has it */
    json_t *findings;                          /* what differs (regress_compare.c) */
    const char *status;                        /* worse, changed, better, unchanged (skipped: NULL) */
    int fails;
} regress_curve;

typedef struct {
    json_t *base, *cur; /* the two files (borrowed) */
    regress_curve *v;
    size_t n, cap;
    /* What only one file has: {"configs": ["SPEC INIT", ...], "formats": [...],
     * "engines": [...], "seeds": [...]}, empty arrays where nothing. */
    json_t *only_base, *only_cur;
    size_t compared, failing, worse, better, changed, unchanged;
} regress_result;

/* Pair the curves of two validated drift.json.  Depth, width, batch, loss,
 * and the tolerance and reproducibility of every format both have must
 * agree; otherwise -1 with msg saying what differs (exit 2: another study).
 * 0 otherwise, with r->compared the curves both have (possibly none). */
VIJP_MUST_CHECK int regress_match(json_t *base, json_t *cur, int all_tolerant, regress_result *r, char *msg,
                                  size_t size);
/* "seeds 1-4,7": word, then the array's integers with runs as ranges ("seed
 * 3" for one), into buf. */
void regress_seed_list(json_t *seeds, const char *word, char *buf, size_t size);
/* "seeds 3-4; format bfloat16; config SPEC INIT" from an only_* object; ""
 * when it is all empty. */
void regress_only_text(json_t *only, char *buf, size_t size);
/* A seed's entry in a curve, and an engine's run in it; NULL if absent. */
json_t *regress_seed_entry(json_t *curve, json_int_t seed);
json_t *regress_engine_run(json_t *seed_entry, const char *engine);
/* An integer of the file (the schema lets one be written as 3.0). */
json_int_t regress_int(json_t *x);
/* A measurement at any exponent: a number, or schema 2's decimal string
 * past double's range; null (non-finite, docs/drift.schema.json) counts as
 * the worst value: −Inf where higher is better, +Inf elsewhere. */
vijp_xnum regress_value(json_t *x, int higher);
/* printf into a string from vijp_alloc (never NULL; free with free). */
char *regress_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void regress_free(regress_result *r);

/* Compare every paired curve: its findings, status and whether it fails;
 * the counts in r. */
void regress_compare(regress_result *r, const regress_opts *o);
/* One line for a curve with findings: its headline finding (the worst, for
 * a worse curve; the largest gain, for a better one) and the others' names. */
void regress_describe(const regress_curve *c, char *buf, size_t size);
/* One finding as text: "g.rel at layer 12: 8.1e-07 → 9.6e-07 (×1.18), worse". */
void regress_describe_finding(json_t *f, char *buf, size_t size);
/* "N curves worse, M better, J changed, K unchanged; compared X of Y curves: F regressions" */
void regress_summary(const regress_result *r, char *buf, size_t size);

/* The JUnit XML report, written to a temporary file beside path and renamed
 * over it (a path that exists and is not a regular file, such as
 * /dev/stdout, is written in place).  VIJP_EIO with the path on failure,
 * when path is left as it was. */
VIJP_MUST_CHECK int regress_junit_write(const regress_result *r, const char *path, const char *baseline,
                                        const char *current, const regress_opts *o, vijp_error *err);

#endif

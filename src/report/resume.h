/* --resume: the finished units of a drift study, kept beside its report
 * folder until the report is published.
 *
 * PARENT/.NAME.vijp-units/ (beside DIR, like the lock and the staging folder
 * of atomic.h, never inside DIR: DIR only ever holds a whole report, and is
 * swapped as one) holds
 *   study      the study's parameters, one "key: value" a line (what
 *              changes a curve or the report: nets and their files' contents,
 *              initialisations, formats, tolerances, seeds, engines, depth,
 *              width, batch, loss, inputs, weights, reference precisions,
 *              checkpoint segment, vijp's version and commit, MPFR's and GMP's
 *              versions), and its hash;
 *   unit-J     curve J of the study (study.h's index), unit_io.h's text,
 *              tagged with that hash; each written to unit-J.tmp, flushed to
 *              disk, then renamed, so a kill at any instant leaves either
 *              the whole unit or none (a .tmp left over is removed).
 * A run without --resume removes what an earlier run left there; with
 * --resume it reads the units whose study is this one's, recomputes the
 * others (a damaged unit: said on stderr), and refuses a folder of another
 * study (exit 2, naming the parameter that differs).  The folder is removed
 * once the report is published; a failed or interrupted run leaves it for
 * the next --resume.  It is guarded by the report folder's lock. */
#ifndef VIJP_CLI_RESUME_H
#define VIJP_CLI_RESUME_H

#include "atomic.h"
#include "study/study.h"
#include <stdint.h>

#define UNITS_SUFFIX ".vijp-units"

typedef struct {
    int parent_fd, dir_fd; /* parent_fd: the report_out's */
    char name[NAME_MAX + 1], shown[PATH_MAX + NAME_MAX + 2];
    uint64_t hash;
    int warned; /* a unit could not be kept: said once */
    unsigned long saved, kill_after; /* the test hook VIJP_KILL_AFTER_UNITS (resume.c) */
} unit_store;

/* The study's parameters as text (caller frees); 0 on success, VIJP_EIO
 * when a file it names (a JSON net, --input, --weights) cannot be read. */
VIJP_MUST_CHECK int study_description(const study *s, char **out, vijp_error *err);

/* Open the units folder of report o for study s (after report_out_open,
 * which holds the lock).  Allocates s->curves and s->done when NULL; with
 * resume, fills the kept units into them (done[j] = 1).  *kept receives
 * their number.  VIJP_EINVAL (usage) for units of another study, VIJP_EIO
 * when the folder cannot be written.  notes: say on stderr what was
 * removed or recomputed. */
VIJP_MUST_CHECK int unit_store_open(unit_store *u, const report_out *o, study *s, int resume, int notes, size_t *kept,
                                    vijp_error *err);
/* Keep unit j (any thread; distinct j at once).  A unit that cannot be
 * written is said on stderr once, and the run goes on without it. */
void unit_store_save(unit_store *u, size_t j, const vijp_drift_curve *c);
/* The report is published: remove the folder.  After a failure, only
 * unit_store_close (the units stay). */
void unit_store_finish(unit_store *u);
void unit_store_close(unit_store *u);

#endif

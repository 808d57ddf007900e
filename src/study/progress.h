/* The progress meter of the long commands (grad: engines, certify: samples,
 * drift and report: curves): units done, time elapsed and an estimate of the
 * time left, redrawn in place on stderr.
 *
 * Shown only where someone is watching: stderr a terminal, no -q, and not in
 * CI (whose logs keep every redraw as a line); drift's --progress and
 * --no-progress decide explicitly.  The decision and the line are pure
 * functions, and the clock is injected, so tests/t-progress.c checks both
 * without a terminal or a wait. */
#ifndef VIJP_CLI_PROGRESS_H
#define VIJP_CLI_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

typedef double (*progress_clock)(void); /* seconds, from any origin; monotonic */

typedef struct {
    FILE *out;          /* NULL: off, every call does nothing */
    const char *unit;   /* plural: "curves", "engines", "samples" */
    size_t total, done;
    progress_clock clock;
    double start, last_draw;
    int drawn;          /* a line is on screen, to be erased */
    double work_total, work_done; /* progress_set_work: units weighted by their cost */
    double part;        /* progress_step_part: the fraction of the unit under way counted so far */
    double under_way;   /* progress_under_way: the work done in units not yet finished */
} progress;

/* forced: > 0 --progress, < 0 --no-progress, 0 neither: then shown exactly
 * when stderr is a terminal, not quiet and not in CI. */
int progress_wanted(int forced, int quiet, int stderr_is_tty, int in_ci);
/* The same for this process: isatty(2), and CI from the environment. */
int progress_wanted_here(int forced, int quiet);

/* Start a meter of total units on out (NULL: off), with clock (NULL: the
 * monotonic clock); draws the first line. */
void progress_start(progress *p, FILE *out, size_t total, const char *unit, progress_clock clock);
/* done units finished: redraws at most ten times a second, and always at
 * the last unit. */
void progress_step(progress *p, size_t done);
/* Units of unequal cost (a study's curves: the largest run first, so a
 * count of units would overstate the time left): the total of their
 * estimated costs, then each unit's cost with it as it finishes.  The time
 * left is then elapsed × (total − done work) / done work. */
void progress_set_work(progress *p, double total);
void progress_step_work(progress *p, size_t done, double work);
/* Units that report their own steps, one unit after the other (grad's
 * runs, layer by layer): the unit under way, of cost work (its share of
 * progress_set_work's total), has done steps of its total.  The work done
 * grows with every step, so the time left moves within a unit; the unit
 * counts as done, and the next one begins, when steps reaches total. */
void progress_step_part(progress *p, double work, size_t steps, size_t total);
/* Units that run at once and report their own share (a study's curves,
 * several on the pool's threads): work, in progress_set_work's units, done
 * so far in the units not yet finished, counted beside the finished ones'
 * (the time left moves within the units).  The caller takes a unit's
 * share out of it as the unit finishes, when progress_step_work counts
 * its whole work.  Redraws as progress_step. */
void progress_under_way(progress *p, double work);
/* Erase the line, so that what the command prints next starts clean. */
void progress_end(progress *p);

/* The line, without the carriage return:
 *   [=========                     ] 3/10 curves, 12 s elapsed, about 28 s left */
void progress_format(char *buf, size_t size, size_t done, size_t total, const char *unit, double elapsed);
/* The same with work_done, the fraction of the work done (in [0, 1]),
 * deciding the time left. */
void progress_format_work(char *buf, size_t size, size_t done, size_t total, const char *unit, double elapsed,
                          double work_done);
/* "42 s", "3 min 05 s", "2 h 07 min". */
void progress_duration(char *buf, size_t size, double seconds);

#endif

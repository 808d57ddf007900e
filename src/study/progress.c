/* The progress meter (progress.h). */
#include "progress.h"
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define BAR 30
#define REDRAW_S 0.1 /* a terminal redrawn more often only flickers, and 10^5 certify samples would each cost a write */

int progress_wanted(int forced, int quiet, int stderr_is_tty, int in_ci)
{
    if (forced) return forced > 0;
    return stderr_is_tty && !quiet && !in_ci;
}

int progress_wanted_here(int forced, int quiet)
{
    const char *ci = getenv("CI");
    return progress_wanted(forced, quiet, isatty(STDERR_FILENO), ci && *ci);
}

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void progress_duration(char *buf, size_t size, double seconds)
{
    long s = seconds > 0 ? lround(seconds) : 0;
    if (s < 60) snprintf(buf, size, "%ld s", s);
    else if (s < 3600) snprintf(buf, size, "%ld min %02ld s", s / 60, s % 60);
    else snprintf(buf, size, "%ld h %02ld min", s / 3600, s % 3600 / 60);
}

void progress_format(char *buf, size_t size, size_t done, size_t total, const char *unit, double elapsed)
{
    progress_format_work(buf, size, done, total, unit, elapsed, total ? (double)done / (double)total : 1);
}

void progress_format_work(char *buf, size_t size, size_t done, size_t total, const char *unit, double elapsed,
                          double work_done)
{
    char bar[BAR + 1], spent[32], left[48];
    size_t filled = total ? BAR * (done < total ? done : total) / total : BAR;
    for (size_t i = 0; i < BAR; i++) bar[i] = i < filled ? '=' : ' ';
    bar[BAR] = 0;
    progress_duration(spent, sizeof spent, elapsed);
    /* The work so far is the only evidence of the rest: the same time per
     * unit of work (by default a unit is a unit: samples of one layer are
     * alike; a study's curves are weighted by their estimated cost; grad's
     * runs count from their first layer, progress_step_part). */
    if (done >= total) snprintf(left, sizeof left, "done");
    else if (!(work_done > 0)) snprintf(left, sizeof left, "estimating the time left"); /* not even part of a unit */
    else {
        char t[32];
        progress_duration(t, sizeof t, elapsed * (1 - (work_done < 1 ? work_done : 1)) / work_done);
        snprintf(left, sizeof left, "about %s left", t);
    }
    snprintf(buf, size, "[%s] %zu/%zu %s, %s elapsed, %s", bar, done, total, unit, spent, left);
}

static void draw(progress *p, double now)
{
    char line[160];
    double work = p->work_total > 0   ? (p->work_done + p->under_way) / p->work_total
                  : p->total          ? (double)p->done / (double)p->total
                                      : 1;
    progress_format_work(line, sizeof line, p->done, p->total, p->unit, now - p->start, work);
    /* \033[K clears what a longer earlier line left: the meter only draws on
     * terminals (or when --progress asks). */
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->last_draw = now;
    p->drawn = 1;
}

void progress_start(progress *p, FILE *out, size_t total, const char *unit, progress_clock clock)
{
    *p = (progress){.out = out, .unit = unit, .total = total, .clock = clock ? clock : monotonic};
    if (!out) return;
    p->start = p->clock();
    draw(p, p->start);
}

void progress_step(progress *p, size_t done)
{
    if (!p->out) return;
    p->done = done;
    double now = p->clock();
    if (done < p->total && now - p->last_draw < REDRAW_S) return;
    draw(p, now);
}

void progress_set_work(progress *p, double total) { p->work_total = total; }

void progress_step_work(progress *p, size_t done, double work)
{
    p->work_done += work;
    progress_step(p, done);
}

void progress_step_part(progress *p, double work, size_t steps, size_t total)
{
    double f = steps < total ? (double)steps / (double)total : 1;
    p->work_done += work * (f - p->part);
    p->part = f < 1 ? f : 0;
    progress_step(p, p->done + (f < 1 ? 0 : 1));
}

void progress_under_way(progress *p, double work)
{
    p->under_way = work;
    progress_step(p, p->done);
}

void progress_end(progress *p)
{
    if (p->out && p->drawn) fputs("\r\033[K", p->out), fflush(p->out);
    p->drawn = 0;
}

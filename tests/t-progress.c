/* The progress meter of grad, certify and drift (src/study/progress.c): when it
 * shows, the line it draws, and its redraws, with an injected clock and a
 * memory stream in place of the terminal, so that nothing waits or depends
 * on where the suite runs.  That runs without a terminal print no meter is
 * checked on the command itself in t-cli.c. */
#include "fixtures/testutil.h"
#include "study/progress.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stream into memory, for the meter's lines (*text: free it). */
static FILE *memory_file(char **text, size_t *len)
{
    *text = NULL, *len = 0;
    FILE *f = open_memstream(text, len);
    ck_assert(f != NULL);
    return f;
}

START_TEST(progress_decision)
{
    /* forced, quiet, stderr a terminal, CI → shown */
    static const int table[][5] = {
        {0, 0, 1, 0, 1}, /* a terminal: shown */
        {0, 0, 0, 0, 0}, /* a pipe or a file: never */
        {0, 1, 1, 0, 0}, /* -q */
        {0, 0, 1, 1, 0}, /* CI, even on a pseudo-terminal */
        {1, 1, 0, 1, 1}, /* --progress wins over everything */
        {-1, 0, 1, 0, 0}, /* --no-progress too */
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        ck_assert_msg(progress_wanted(table[i][0], table[i][1], table[i][2], table[i][3]) == table[i][4],
                      "row %zu", i);
}
END_TEST

START_TEST(progress_line)
{
    char buf[160];
    static const struct {
        double s;
        const char *text;
    } d[] = {{0, "0 s"}, {-3, "0 s"}, {59.4, "59 s"}, {59.6, "1 min 00 s"}, {65, "1 min 05 s"}, {3599, "59 min 59 s"},
             {3600, "1 h 00 min"}, {7325, "2 h 02 min"}};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) {
        progress_duration(buf, sizeof buf, d[i].s);
        ck_assert_str_eq(buf, d[i].text);
    }
    /* 3 of 10 in 12 s: 4 s a unit, 28 s for the 7 left; 9 of the 30 bars */
    progress_format(buf, sizeof buf, 3, 10, "curves", 12);
    ck_assert_str_eq(buf, "[=========                     ] 3/10 curves, 12 s elapsed, about 28 s left");
    progress_format(buf, sizeof buf, 0, 4, "samples", 0.2);
    ck_assert_str_eq(buf, "[                              ] 0/4 samples, 0 s elapsed, estimating the time left");
    progress_format(buf, sizeof buf, 5, 5, "engines", 125);
    ck_assert_str_eq(buf, "[==============================] 5/5 engines, 2 min 05 s elapsed, done");
    progress_format(buf, sizeof buf, 1, 3, "curves", 1800);
    ck_assert_str_eq(buf, "[==========                    ] 1/3 curves, 30 min 00 s elapsed, about 1 h 00 min left");
}
END_TEST

static double now;
static double fake_clock(void) { return now; }

START_TEST(progress_redraws)
{
    char *text;
    size_t len;
    FILE *f = memory_file(&text, &len);
    progress p;
    now = 100;
    progress_start(&p, f, 3, "curves", fake_clock); /* drawn at once: 0/3 */
    now = 100.05;
    progress_step(&p, 1); /* within 0.1 s of the last draw: not redrawn */
    now = 102;
    progress_step(&p, 2); /* drawn: 2 done in 2 s, 1 s left */
    now = 102.01;
    progress_step(&p, 3); /* the last unit is always drawn */
    progress_end(&p);     /* and the line erased */
    fclose(f);
    const char *want = "\r[                              ] 0/3 curves, 0 s elapsed, estimating the time left\033[K"
                       "\r[====================          ] 2/3 curves, 2 s elapsed, about 1 s left\033[K"
                       "\r[==============================] 3/3 curves, 2 s elapsed, done\033[K"
                       "\r\033[K";
    ck_assert_msg(!strcmp(text, want), "drew:\n%s", text);
    free(text);
    /* off: nothing, whatever is called */
    progress_start(&p, NULL, 3, "curves", fake_clock);
    progress_step(&p, 3);
    progress_end(&p);
    ck_assert(p.drawn == 0);
}
END_TEST

/* Weighted units (a study's curves, the costly ones first): the time left
 * follows the work done, not the count.  Two curves of cost 3 done in 6 s,
 * two of cost 1 left: 6 · (1 − 6/8) / (6/8)
 * = 2 s, where counting curves would say 6 s. */
START_TEST(progress_weighted)
{
    char buf[160];
    progress_format_work(buf, sizeof buf, 2, 4, "curves", 6, 6.0 / 8);
    ck_assert_str_eq(buf, "[===============               ] 2/4 curves, 6 s elapsed, about 2 s left");
    progress_format(buf, sizeof buf, 2, 4, "curves", 6);
    ck_assert_str_eq(buf, "[===============               ] 2/4 curves, 6 s elapsed, about 6 s left");
    char *text;
    size_t len;
    FILE *f = memory_file(&text, &len);
    progress p;
    now = 10;
    progress_start(&p, f, 4, "curves", fake_clock);
    progress_set_work(&p, 8);
    now = 13;
    progress_step_work(&p, 1, 3);
    now = 16;
    progress_step_work(&p, 2, 3); /* 6 of 8 in 6 s: 2 s left */
    progress_end(&p);
    fclose(f);
    ck_assert_msg(strstr(text, "2/4 curves, 6 s elapsed, about 2 s left") != NULL, "drew:\n%s", text);
    free(text);
}
END_TEST

/* Units that report their own steps (grad's runs, layer by layer): three
 * runs of cost 1, 4 and 1 (6 in all) in 2, 4 and 2 steps.  The count moves
 * as runs finish, the time left with every step: 1 s for half of the
 * first run's cost, 0.5 of 6, leaves 1 · (6 − 0.5) / 0.5 = 11 s. */
START_TEST(progress_steps_within_units)
{
    char *text;
    size_t len;
    FILE *f = memory_file(&text, &len);
    progress p;
    now = 0;
    progress_start(&p, f, 3, "runs", fake_clock);
    progress_set_work(&p, 6);
    now = 1;
    progress_step_part(&p, 1, 1, 2); /* 0.5 of 6 */
    now = 2;
    progress_step_part(&p, 1, 2, 2); /* the first run done: 1 of 6 in 2 s, 10 s left */
    now = 4;
    progress_step_part(&p, 4, 1, 4); /* 2 of 6 in 4 s: 8 s left */
    now = 4.05;
    progress_step_part(&p, 4, 2, 4); /* within 0.1 s: not redrawn */
    now = 10;
    progress_step_part(&p, 4, 4, 4); /* a step not reported (3) is counted with the next: 5 of 6 in 10 s, 2 s left */
    now = 11;
    progress_step_part(&p, 1, 1, 2); /* 5.5 of 6 in 11 s: 1 s left */
    now = 11.01;
    progress_step_part(&p, 1, 2, 2); /* the last run: always drawn */
    progress_end(&p);
    fclose(f);
    const char *want = "\r[                              ] 0/3 runs, 0 s elapsed, estimating the time left\033[K"
                       "\r[                              ] 0/3 runs, 1 s elapsed, about 11 s left\033[K"
                       "\r[==========                    ] 1/3 runs, 2 s elapsed, about 10 s left\033[K"
                       "\r[==========                    ] 1/3 runs, 4 s elapsed, about 8 s left\033[K"
                       "\r[====================          ] 2/3 runs, 10 s elapsed, about 2 s left\033[K"
                       "\r[====================          ] 2/3 runs, 11 s elapsed, about 1 s left\033[K"
                       "\r[==============================] 3/3 runs, 11 s elapsed, done\033[K"
                       "\r\033[K";
    ck_assert_msg(!strcmp(text, want), "drew:\n%s", text);
    ck_assert(p.work_done == 6 && p.part == 0);
    free(text);
    /* off: the work is counted all the same, nothing drawn */
    progress_start(&p, NULL, 1, "runs", fake_clock);
    progress_set_work(&p, 2);
    progress_step_part(&p, 2, 1, 4);
    ck_assert(p.work_done == 0.5 && p.drawn == 0);
}
END_TEST

/* Units under way at once (a study's curves on the pool's threads), each
 * reporting its share: curves of cost 1 and 3 (4 in all).  The second's
 * third done at 2 s: 1 of 4, 6 s left; the first done at 4 s (its cost
 * counted whole, the second's third still under way): 2 of 4, 4 s left;
 * the second two thirds done at 6 s: 3 of 4, 2 s left.  The shares are
 * counted beside the units done, not instead of them. */
START_TEST(progress_units_under_way)
{
    char *text;
    size_t len;
    FILE *f = memory_file(&text, &len);
    progress p;
    now = 0;
    progress_start(&p, f, 2, "curves", fake_clock);
    progress_set_work(&p, 4);
    now = 2;
    progress_under_way(&p, 1);
    now = 4;
    p.under_way = 1;
    progress_step_work(&p, 1, 1);
    now = 6;
    progress_under_way(&p, 2);
    progress_end(&p);
    fclose(f);
    ck_assert_msg(strstr(text, "0/2 curves, 2 s elapsed, about 6 s left") != NULL, "drew:\n%s", text);
    ck_assert_msg(strstr(text, "1/2 curves, 4 s elapsed, about 4 s left") != NULL, "drew:\n%s", text);
    ck_assert_msg(strstr(text, "1/2 curves, 6 s elapsed, about 2 s left") != NULL, "drew:\n%s", text);
    free(text);
}
END_TEST

Suite *suite_progress(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_add_test(tc, progress_decision);
    tcase_add_test(tc, progress_line);
    tcase_add_test(tc, progress_redraws);
    tcase_add_test(tc, progress_weighted);
    tcase_add_test(tc, progress_steps_within_units);
    tcase_add_test(tc, progress_units_under_way);
    suite_add_tcase(s, tc);
    return s;
}

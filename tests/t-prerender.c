/* Report files rendered in memory on a helper thread (src/report/prerender.c):
 * the bytes written are those the fill writes directly, in every item and
 * with or without the thread; a fill that fails makes the write fail with
 * its errno (the report's write then names the file, atomic.c). */
#include "fixtures/testutil.h"
#include "report/prerender.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ctx: a line count; each line names its number, so order and length show. */
static int fill_lines(FILE *o, const void *ctx)
{
    for (long k = 0; k < *(const long *)ctx; k++) fprintf(o, "line %ld of %ld, %.17g\n", k, *(const long *)ctx, 1.0 / (double)(k + 3));
    return ferror(o);
}

static int fill_fails(FILE *o, const void *ctx)
{
    (void)ctx;
    fputs("half a file", o);
    errno = ENOSPC;
    return -1;
}

/* What fill writes directly into a memory stream. */
static char *direct(int (*fill)(FILE *, const void *), const void *ctx, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ck_assert(f && fill(f, ctx) == 0);
    fclose(f);
    return buf;
}

/* The bytes prerender_fill writes for p. */
static char *written(const prerendered *p, size_t *len, int *rc, int *err)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ck_assert(f);
    errno = 0;
    *rc = prerender_fill(f, p);
    *err = errno;
    fclose(f);
    return buf;
}

static void check_job(int threaded)
{
    static const long lines[] = {0, 3, 200000, 17}; /* an empty file, and one of ~7 MB */
    prerendered items[4];
    for (size_t k = 0; k < 4; k++) items[k] = (prerendered){.fill = fill_lines, .ctx = &lines[k]};
    prerender_job job;
    if (threaded) prerender_start(&job, items, 4);
    else job = (prerender_job){.items = items, .n = 4, .started = 0}; /* as when no thread could start */
    prerender_wait(&job);
    for (size_t k = 0; k < 4; k++) {
        size_t want_len, got_len;
        int rc, err;
        char *want = direct(fill_lines, &lines[k], &want_len), *got = written(&items[k], &got_len, &rc, &err);
        ck_assert_msg(rc == 0 && got_len == want_len && !memcmp(got, want, want_len), "item %zu (%s): %zu bytes, want %zu",
                      k, threaded ? "thread" : "inline", got_len, want_len);
        free(want), free(got);
    }
    prerender_free(items, 4);
}

START_TEST(prerendered_bytes_are_the_fills)
{
    check_job(1);
    check_job(0);
}
END_TEST

START_TEST(failed_fill_fails_the_write)
{
    prerendered items[] = {{.fill = fill_fails}, {.fill = fill_lines, .ctx = &(long){2}}};
    prerender_job job;
    prerender_start(&job, items, 2);
    prerender_wait(&job);
    size_t len;
    int rc, err;
    char *got = written(&items[0], &len, &rc, &err);
    ck_assert_msg(rc != 0 && err == ENOSPC && len == 0, "rc %d, errno %d, %zu bytes written", rc, err, len);
    free(got);
    got = written(&items[1], &len, &rc, &err); /* the next item is rendered all the same */
    ck_assert(rc == 0 && len > 0);
    free(got);
    prerender_free(items, 2);
}
END_TEST

Suite *suite_prerender(void)
{
    Suite *s = suite_create("prerender");
    TCase *tc = tcase_create("prerender");
    tcase_add_test(tc, prerendered_bytes_are_the_fills);
    tcase_add_test(tc, failed_fill_fails_the_write);
    suite_add_tcase(s, tc);
    return s;
}

/* prerender.h: report files rendered in memory on a helper thread. */
#include "prerender.h"
#include <errno.h>
#include <stdlib.h>

void prerender_one(prerendered *p)
{
    FILE *f = open_memstream(&p->buf, &p->len);
    errno = 0;
    int ok = f && p->fill(f, p->ctx) == 0 && !ferror(f);
    p->err_no = errno ? errno : EIO;
    if (f && fclose(f) && ok) ok = 0, p->err_no = errno;
    p->failed = !ok;
}

static void *render_all(void *arg)
{
    prerender_job *j = arg;
    for (size_t k = 0; k < j->n; k++) prerender_one(&j->items[k]);
    return NULL;
}

void prerender_start(prerender_job *j, prerendered *items, size_t n)
{
    j->items = items, j->n = n;
    j->started = pthread_create(&j->thread, NULL, render_all, j) == 0;
}

void prerender_wait(prerender_job *j)
{
    if (j->started) pthread_join(j->thread, NULL);
    else render_all(j);
    j->started = 0;
}

int prerender_fill(FILE *o, const void *ctx)
{
    const prerendered *p = ctx;
    if (p->failed) {
        errno = p->err_no;
        return -1;
    }
    return fwrite(p->buf, 1, p->len, o) != p->len || ferror(o);
}

void prerender_free(prerendered *items, size_t n)
{
    for (size_t k = 0; k < n; k++) free(items[k].buf), items[k].buf = NULL;
}

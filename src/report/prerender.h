/* Report files rendered into memory ahead of being written, on a helper
 * thread: drift.csv, the CSVs and drift.json are seconds of number
 * formatting, serial after the study; rendered while the main thread forms
 * report.md and the memory profiles, then written in the usual order
 * through report_out_write (atomic.h), so that the commit sequence, its
 * steps and its failure handling are those of files written directly. */
#ifndef VIJP_CLI_PRERENDER_H
#define VIJP_CLI_PRERENDER_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    int (*fill)(FILE *, const void *); /* what report_out_write would call */
    const void *ctx;
    char *buf;   /* the rendered bytes (NULL until rendered) */
    size_t len;
    int failed;  /* fill or the memory stream failed; errno in err_no */
    int err_no;
} prerendered;

typedef struct {
    prerendered *items;
    size_t n;
    pthread_t thread;
    int started; /* 0: no thread could start; prerender_wait renders them itself */
} prerender_job;

/* Start rendering items[0..n−1], in order, on a helper thread. */
void prerender_start(prerender_job *j, prerendered *items, size_t n);
/* Wait until every item is rendered. */
void prerender_wait(prerender_job *j);
/* Render one item on this thread. */
void prerender_one(prerendered *p);
/* A fill for report_out_write: ctx is a rendered prerendered item; fails
 * (nonzero, errno set) where its rendering failed. */
int prerender_fill(FILE *o, const void *ctx);
void prerender_free(prerendered *items, size_t n);

#endif

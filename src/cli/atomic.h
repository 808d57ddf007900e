/* Writing report files atomically: each file is written under a temporary
 * name in its final folder, flushed to disk, then renamed over the final name,
 * so a reader (or a run killed midway) only ever sees a whole old file or a
 * whole new one. */
#ifndef VIJP_CLI_ATOMIC_H
#define VIJP_CLI_ATOMIC_H

#include <stdio.h>
#include "vijp/error.h"

#define ATOMIC_TMP_PREFIX ".vijp-tmp-"

/* dir/name := what fill writes (fill returns 0 on success). */
int atomic_write(const char *dir, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                 vijp_error *err);
/* What fill writes, in a fresh temporary of dir (flushed to disk); tmp
 * receives its path, for atomic_commit.  Nothing is left on failure. */
int atomic_stage(const char *dir, const char *name, int (*fill)(FILE *out, const void *ctx), const void *ctx,
                 char *tmp, size_t size, vijp_error *err);
/* A fresh temporary file in dir, for a writer that is not a FILE* (gnuplot):
 * path receives its name; commit renames it to dir/name, or removes it when
 * ok is 0. */
int atomic_tmp(const char *dir, char *path, size_t size, vijp_error *err);
int atomic_commit(const char *tmp, const char *dir, const char *name, int ok, vijp_error *err);
/* mkdir -p dir, prove it writable, and remove temporaries a killed run left. */
int atomic_prepare_dir(const char *dir, vijp_error *err);

#endif

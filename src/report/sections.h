/* The catalogue's parts of a drift report: every engine's stored
 * bytes against depth (memory.csv and its plots), and the report.md sections
 * on reconstruction by inverses, nested forward-mode AD and memory. */
#ifndef VIJP_CLI_REPORT_SECTIONS_H
#define VIJP_CLI_REPORT_SECTIONS_H

#include <stdio.h>
#include "vijp/error.h"
#include "study/study.h"

/* The run index of the reversible engine in every curve (0: not in the study). */
size_t reversible_run(const study *s);

/* Stored bytes against depth for every engine (not only the study's), in
 * double at the study's batch, first seed: [config][engine][depth]. */
typedef struct {
    const study *s;
    size_t *bytes;
    size_t only; /* fill_memory_csv: every config (0) or config K alone */
} memory_table;

size_t *mem_at(const memory_table *m, size_t c, size_t e);
VIJP_MUST_CHECK int memory_compute(memory_table *m, const study *s, vijp_error *err);
int fill_memory_csv(FILE *o, const void *ctx);

void md_reconstruction(FILE *o, const study *s);
void md_nested(FILE *o, const study *s);
void md_memory(FILE *o, const memory_table *m);

#endif

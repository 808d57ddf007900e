/* The report writers of a drift study (drift.json, CSVs, plots, report.md). */
#ifndef VIJP_CLI_WRITE_H
#define VIJP_CLI_WRITE_H

#include <jansson.h>
#include "study/study.h"
#include "atomic.h"

json_t *study_json(const study *s);
/* Emulated formats and mpfr:P are bit-reproducible; double goes through BLAS. */
int format_reproducible(const vijp_format *f);
void machine_description(char *buf, size_t size);
void blas_description(char *buf, size_t size);
/* Whether gnuplot is on the PATH. */
int study_plots_available(void);

/* Write drift.csv, curves.csv, summary.csv, memory.csv, the plots,
 * drift.json and report.md into the report generation out has begun
 * (atomic.h), which publishes them together. */
VIJP_MUST_CHECK int study_write(const study *s, report_out *out, vijp_error *err);

#endif

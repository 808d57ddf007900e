/* Per-seed and per-curve figures of a study, shared by the writers. */
#ifndef VIJP_CLI_STUDY_STATS_H
#define VIJP_CLI_STUDY_STATS_H

#include "study.h"

typedef struct {
    double safe_depth, growth_rate, bits_needed, price;
    vijp_xnum err_max;
    int bits_extrapolated;
} run_stats;

typedef struct {
    double min, median, max; /* over the seeds' values but NaN (Inf counts); NaN when none */
} spread;

/* Figures of run r of curve c (tolerance tol): safe depth, fitted growth,
 * bits needed, worst error over layers (g and θ), and for a rebuilding engine
 * its price: its worst g_i error over backprop's worst g_i error. */
void run_stats_of(const vijp_drift_curve *c, size_t r, const int *has_param, vijp_xnum tol, long prec, run_stats *out);
spread spread_of(const double *v, size_t n);
/* The same over errors, at any exponent (the median of two: their mean). */
typedef struct {
    vijp_xnum min, median, max;
} xspread;
xspread xspread_of(const vijp_xnum *v, size_t n);
/* has_param[i] for the config's layers (caller frees). */
int *config_has_param(const study *s, size_t config);
/* The engine the verdicts describe: the first rebuilding engine, or backprop. */
static inline size_t verdict_run(const study *s) { return s->n_engines ? 1 : 0; }

#endif

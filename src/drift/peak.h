/* What one drift curve (vijp_drift_run) holds at its peak, from the net's
 * shapes alone: the sizing a study is refused or run by (cli/drift.c).
 * Internal to src/. */
#ifndef VIJP_DRIFT_PEAK_H
#define VIJP_DRIFT_PEAK_H

#include "vijp/format.h"
#include "vijp/net.h"

/* What a study's process touches beside its curves' blocks and its
 * resident set when sized: the worker threads' stacks and heap arenas,
 * OpenBLAS's work buffer, the report's tables.  Measured, not derived: a
 * depth-2 dense:8 study (blocks of a few KB) peaks 3.9 MB above the rest of
 * the estimate on the 2-core development machine (2026-12-05). */
#define DRIFT_PEAK_PROCESS_BYTES (4.0 * 1024 * 1024)

typedef struct {
    double peak; /* bytes allocated at the curve's peak (the reference's upper level, or an engine's run) */
} drift_peak;

/* A curve of net (batch samples) in format f whose reference starts at
 * ref_first bits (vijp_drift_ref_prec_first) and validates at twice that:
 * the two reference levels (the first freed layer by layer as the second's
 * reverse pass compares with it) with the activations of the second beside
 * the memo's exact copy of the problem, then one engine's gradients and
 * activations beside the problem in f and the reference.  shared: the
 * curve's reference memo is shared with another format's curve (the same
 * storage format), and keeps the problem in f, the copy and its level
 * throughout.  The net's double θ is not counted: the study draws it once
 * per seed (drift_peak_draw_bytes). */
drift_peak drift_peak_bytes(const vijp_net *net, size_t batch, const vijp_format *f, long ref_first, int shared);

/* The threads a curve's conditioning (conditioning.h) may take, at most
 * threads: each holds the Jacobian of a layer whose samples run in
 * parallel (neither linear nor elementwise) with what making it and its
 * SVD take and, wider than exact_max, its LU factors and Lanczos vectors
 * (cond.h), beside what the curve holds then (the problem in f and in
 * double, Benettin's matrices, a shared memo's levels and copy); as many
 * as fit under drift_peak_bytes, which the study reserved for the curve,
 * and at least 1 (1 where no layer's samples run in parallel). */
int drift_peak_cond_threads(const vijp_net *net, size_t batch, const vijp_format *f, long ref_first, int shared,
                            size_t exact_max, int threads);

/* The bytes of one drawn net: its double θ (study/draws.h). */
double drift_peak_draw_bytes(const vijp_net *net);

/* The bytes of vijp_memory_profile's runs in double on a drawn net (the
 * report's memory table, after every curve), at_once engines at a time on
 * one problem: the most of any engine's, at_once times, beside it. */
double drift_peak_profile_bytes(const vijp_net *net, size_t batch, size_t at_once);

#endif

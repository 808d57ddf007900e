/* What one drift curve (vijp_drift_run) holds at its peak, from the net's
 * shapes alone: the sizing a study is refused or run by (cli/drift.c).
 * Internal to src/. */
#ifndef VIJP_DRIFT_PEAK_H
#define VIJP_DRIFT_PEAK_H

#include "vijp/format.h"
#include "vijp/net.h"

/* Blocks from this size on are mapped on their own and handed back when
 * freed (vijp_memory_keep_freed's M_MMAP_THRESHOLD); smaller ones stay in
 * the heap of the thread that freed them, and so in the process's RSS. */
#define DRIFT_PEAK_MMAP_BYTES (32.0 * 1024 * 1024)

typedef struct {
    double peak;     /* bytes allocated at the curve's peak (the reference's second level, or an engine's run) */
    double retained; /* of them, in heap blocks (under DRIFT_PEAK_MMAP_BYTES): kept mapped after the curve */
} drift_peak;

/* A curve of net (batch samples) in format f whose reference starts at
 * ref_first bits (vijp_drift_ref_prec_first) and validates at twice that:
 * the net's double master copy, the problem rounded to f, the memo's exact
 * copy, the two reference levels with the activations of the second, then
 * one engine's gradients and activations beside the rounded reference. */
drift_peak drift_peak_bytes(const vijp_net *net, size_t batch, const vijp_format *f, long ref_first);

/* The bytes of vijp_memory_profile's runs in double (the report's memory
 * table, on the main thread after every curve): the most of any engine's. */
double drift_peak_profile_bytes(const vijp_net *net, size_t batch);

#endif

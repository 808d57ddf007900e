/* One unit of a drift study (a curve: config × format × seed) as bytes, for
 * --resume's unit files (resume.h) and for MPI's messages (mpi_study.h).
 *
 * Text, one field a line, every double as a C99 hex float (%a), which
 * strtod reads back to the same bits (NaN and ±∞ as nan, inf, -inf), so a
 * report written from decoded units is byte for byte the report written from
 * the units themselves.  The first lines name the format, the study (its
 * parameter hash, resume.h) and the unit's index; the last line is a
 * checksum of everything before it, so a damaged or truncated unit is
 * refused, not read. */
#ifndef VIJP_CLI_UNIT_IO_H
#define VIJP_CLI_UNIT_IO_H

#include "study.h"
#include <stdint.h>
#include <stdio.h>

/* FNV-1a, 64 bits, continuing from h (start with UNIT_HASH_START). */
#define UNIT_HASH_START 0xcbf29ce484222325ull
uint64_t unit_hash(uint64_t h, const void *data, size_t n);

/* Curve c, unit j of the study whose parameters hash to study_hash, as text: *size bytes that the
 * caller frees. */
char *unit_encode(uint64_t study_hash, size_t j, const vijp_drift_curve *c, size_t *size);

/* text[0..size) as unit j of study s into *c (vijp_drift_curve_clear
 * releases it).  Checks the checksum, the study hash, the index, the
 * depth, the engines in order, and that every field is there and well
 * formed.  -1 with why (a phrase such as "checksum mismatch") and *c empty
 * otherwise. */
int unit_decode(const study *s, uint64_t study_hash, size_t j, const char *text, size_t size, vijp_drift_curve *c,
                char *why, size_t why_size);

#endif

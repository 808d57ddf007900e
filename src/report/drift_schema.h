/* drift.json against its schema, docs/drift.schema.json. */
#ifndef VIJP_CLI_DRIFT_SCHEMA_H
#define VIJP_CLI_DRIFT_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* The version vijp writes, and the one before it, which it still reads:
 * version 2 writes errors past double's range as decimal strings. */
#define DRIFT_SCHEMA_VERSION "vijp-drift/2"
#define DRIFT_SCHEMA_VERSION_1 "vijp-drift/1"

/* 0 if doc is a drift.json of either version; otherwise -1 and msg
 * holds the first problem as "JSON.path: what", e.g. "curves[3].format:
 * missing" or "study.depth: a string, want an integer". */
int drift_schema_validate(json_t *doc, char *msg, size_t size);
/* What vijp regress accepts: a version this vijp reads, the schema, and
 * the study's own arrays (one curve per config × format, one entry per seed
 * and engine, one value per layer); 0, or -1 with msg as above. */
int drift_json_check(json_t *doc, char *msg, size_t size);

#endif

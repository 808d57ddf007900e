/* drift.json against its schema, docs/drift.schema.json. */
#ifndef VIJP_CLI_DRIFT_SCHEMA_H
#define VIJP_CLI_DRIFT_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#define DRIFT_SCHEMA_VERSION "vijp-drift/1"

/* 0 if doc is a drift.json of DRIFT_SCHEMA_VERSION; otherwise -1 and msg
 * holds the first problem as "JSON.path: what", e.g. "curves[3].format:
 * missing" or "study.depth: a string, want an integer". */
int drift_schema_validate(json_t *doc, char *msg, size_t size);

#endif

/* libFuzzer harness: what vijp regress reads (src/report/drift_schema.c):
 * jansson's parser, then drift_json_check (version, the schema document,
 * the study's own arrays).  Beyond "no crash, no sanitizer report": a
 * refusal says why, and an accepted document passes again (the check is a
 * function of the document). */
#include "report/drift_schema.h"
#include "vijp/error.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    json_error_t e;
    json_t *doc = json_loadb((const char *)data, size, 0, &e);
    if (!doc) return 0;
    char msg[512] = "", again[512] = "";
    int rc = drift_json_check(doc, msg, sizeof msg);
    if (rc && !msg[0]) abort();
    if (drift_json_check(doc, again, sizeof again) != rc) abort();
    json_decref(doc);
    return 0;
}

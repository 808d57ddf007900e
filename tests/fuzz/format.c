/* libFuzzer harness: the format parser (vijp_format_parse).  Beyond "no
 * crash, no sanitizer report": a refusal has a message, and an accepted
 * format's own name parses to the same format. */
#include "vijp/vijp.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    if (size > 256) return 0;
    char s[257];
    memcpy(s, data, size);
    s[size] = 0;
    vijp_format f, g;
    vijp_error err = {0};
    memset(&f, 0, sizeof f), memset(&g, 0, sizeof g);
    if (vijp_format_parse(s, &f, &err)) {
        if (!err.msg[0]) abort();
        return 0;
    }
    if (vijp_format_parse(f.name, &g, &err) || memcmp(&f, &g, sizeof f)) {
        fprintf(stderr, "format: '%s' parses to '%s', which does not parse to the same format\n", s, f.name);
        abort();
    }
    /* u = 2^-P, which is 0 in double past P = 1074: in [0, 1/2] */
    double u = vijp_format_unit_roundoff(&f);
    if (!(u >= 0 && u <= 0.5)) abort();
    return 0;
}

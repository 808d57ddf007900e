/* libFuzzer harness: the .npy reader (vijp_npy_parse) on the bytes as a
 * whole file, from memory; nothing is written.
 *
 * Properties checked beyond "no crash, no sanitizer report": a refusal is
 * VIJP_EINVAL with a message naming the file; an accepted array has as many
 * values as its shape says, and survives vijp_npy_encode and a second parse
 * with the same shape and the same bits. */
#include "vijp/vijp.h"
#include "vijp/array_io.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int ok, const char *what, const char *msg)
{
    if (ok) return;
    fprintf(stderr, "npy: %s (%s)\n", what, msg);
    abort(); /* the fuzzer's finding */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    vijp_array a, b;
    vijp_error err = {0};
    int rc = vijp_npy_parse(data, size, "fuzz.npy", &a, &err);
    if (rc) {
        must(rc == VIJP_EINVAL && strstr(err.msg, "fuzz.npy") == err.msg, "a refusal that does not name the file", err.msg);
        vijp_array_clear(&a);
        return 0;
    }
    size_t n = 1;
    for (size_t k = 0; k < a.ndim; k++) n *= a.shape[k];
    must(n == a.len && (n == 0) == (a.data == NULL), "values and shape disagree", "");
    unsigned char *buf;
    size_t len;
    must(!vijp_npy_encode(a.ndim, a.shape, a.data, &buf, &len, &err), "an accepted array does not encode", err.msg);
    must(!vijp_npy_parse(buf, len, "again", &b, &err), "an encoded array does not parse", err.msg);
    must(b.ndim == a.ndim && !memcmp(b.shape, a.shape, a.ndim * sizeof *a.shape) && b.len == a.len,
         "the round trip changes the shape", "");
    must(!a.len || !memcmp(a.data, b.data, a.len * sizeof *a.data), "the round trip changes a value", "");
    vijp_free(buf);
    vijp_array_clear(&a), vijp_array_clear(&b);
    return 0;
}

/* libFuzzer harness: the safetensors reader (vijp_safetensors_parse, then
 * vijp_safetensors_tensor for every tensor) on the bytes as a whole file,
 * from memory; nothing is written.
 *
 * Properties checked beyond "no crash, no sanitizer report": a refusal is
 * VIJP_EINVAL with a message naming the file; the tensors of an accepted file
 * tile its data buffer (their sizes add up to it); every F64, F32, BF16 or
 * F16 tensor converts, to as many values as its shape says, and every other
 * dtype is refused naming the file. */
#include "vijp/vijp.h"
#include "vijp/array_io.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int ok, const char *what, const char *msg)
{
    if (ok) return;
    fprintf(stderr, "safetensors: %s (%s)\n", what, msg);
    abort(); /* the fuzzer's finding */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    vijp_safetensors st;
    vijp_error err = {0};
    int rc = vijp_safetensors_parse(data, size, "fuzz.safetensors", &st, &err);
    if (rc) {
        must(rc == VIJP_EINVAL && strstr(err.msg, "fuzz.safetensors") == err.msg, "a refusal that does not name the file",
             err.msg);
        return 0;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < st.n; i++) {
        const vijp_tensor_info *t = &st.tensors[i];
        bytes += t->end - t->begin;
        int readable = !strcmp(t->dtype, "F64") || !strcmp(t->dtype, "F32") || !strcmp(t->dtype, "BF16") ||
                       !strcmp(t->dtype, "F16");
        vijp_array a;
        rc = vijp_safetensors_tensor(&st, t->name, &a, &err);
        if (readable) {
            must(!rc, "a readable tensor is refused", err.msg);
            size_t n = 1;
            for (size_t k = 0; k < a.ndim; k++) n *= a.shape[k];
            size_t isize = t->dtype[1] == '6' ? 8 : t->dtype[1] == '3' ? 4 : 2;
            must(a.ndim == t->ndim && n == a.len && a.len * isize == t->end - t->begin, "values and shape disagree", t->name);
        } else {
            must(rc == VIJP_EINVAL && strstr(err.msg, "fuzz.safetensors") == err.msg, "an unread dtype is not refused", t->dtype);
        }
        vijp_array_clear(&a);
    }
    must(bytes == st.data_len, "the tensors do not tile the data buffer", "");
    vijp_safetensors_clear(&st);
    return 0;
}

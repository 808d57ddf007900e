/* libFuzzer harness: the net-spec parser (vijp_net_shape, vijp_layer_parse)
 * and, for nets small enough, a seeded double forward through them.
 *
 * Input: byte 0 picks the depth (1..16), byte 1 the input width (0: from the
 * spec), the rest is the spec.  Properties checked beyond "no crash, no
 * sanitizer report": every parsed layer prints back (vijp_layer_spec) to an
 * item that parses at the same width to the same shape and the same text. */
#include "vijp/vijp.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int ok, const char *what, const char *spec)
{
    if (ok) return;
    fprintf(stderr, "netspec: %s for spec '%s'\n", what, spec);
    abort(); /* the fuzzer's finding */
}

static void round_trip(const vijp_layer *L, const char *spec)
{
    char printed[256], again[256];
    vijp_layer_spec(L, printed, sizeof printed);
    vijp_layer R;
    vijp_error err = {0};
    must(!vijp_layer_parse(&R, printed, L->in, &err), "a printed layer does not parse again", spec);
    must(R.in == L->in && R.out == L->out, "a printed layer parses to another shape", spec);
    vijp_layer_spec(&R, again, sizeof again);
    must(!strcmp(printed, again), "a printed layer prints differently once parsed", spec);
    vijp_layer_clear(&R);
}

/* A double forward of one seeded sample, for nets of at most 4096 values. */
static void forward(const char *spec, size_t depth, size_t width)
{
    vijp_net net;
    vijp_error err = {0};
    if (vijp_net_build(&net, spec, depth, width, &err)) return;
    if (vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 1, &err)) {
        vijp_net_free(&net);
        return;
    }
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    vijp_mat *theta = vijp_alloc_array(depth, sizeof *theta), h, hn;
    if (vijp_net_params(&net, &fd, theta, &err)) {
        free(theta);
        vijp_net_free(&net);
        return;
    }
    vijp_mat_init(&h, net.width, 1, &fd);
    for (size_t i = 0; i < net.width; i++) vijp_mat_set_entry_d(&h, i, 0.25 * (double)(i % 7) - 0.75);
    for (size_t i = 0; i < depth; i++) {
        vijp_mat_init(&hn, net.layers[i].out, 1, &fd);
        int rc = vijp_layer_forward(&net.layers[i], &theta[i], &h, &hn, &err);
        vijp_mat_clear(&h);
        h = hn;
        if (rc) break;
    }
    vijp_mat_clear(&h);
    for (size_t i = 0; i < depth; i++) vijp_mat_clear(&theta[i]);
    free(theta);
    vijp_net_free(&net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    if (size < 2 || size > 1024) return 0;
    size_t depth = 1 + data[0] % 16, width = data[1];
    char *spec = malloc(size - 1);
    memcpy(spec, data + 2, size - 2);
    spec[size - 2] = 0;
    vijp_net net;
    vijp_error err = {0};
    if (!vijp_net_shape(&net, spec, depth, width, &err)) {
        double values = (double)net.width;
        for (size_t i = 0; i < depth; i++) {
            round_trip(&net.layers[i], spec);
            values += (double)net.layers[i].out + (double)net.layers[i].type->param_count(&net.layers[i]);
        }
        vijp_net_free(&net);
        if (values <= 4096) forward(spec, depth, width);
    } else {
        must(err.msg[0] != 0, "a refused spec without a message", spec);
    }
    free(spec);
    return 0;
}

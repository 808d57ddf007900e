/* libFuzzer harness: the JSON-net reader (vijp_net_parse_json's internals),
 * from memory, with no base folder: no file is touched, so parameter
 * references can only fail, with a message.
 *
 * Properties beyond "no crash, no sanitizer report": a failure leaves the
 * net empty and says what, naming the input; a success chains its widths
 * (layer 0 takes "width", each layer the one before's output), gives no
 * parameters (nothing could be read), and, for nets of at most 4096
 * parameters, builds with parameters and initialises. */
#include "vijp/vijp.h"
#include "net/json.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "netjson: %s\n", what);
    abort(); /* the fuzzer's finding */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int installed;
    if (!installed) vijp_memory_policy_install(), installed = 1;
    vijp_net net;
    vijp_error err = {0};
    int rc = net_json_parse(&net, (const char *)data, size, "fuzz.json", NULL, 0, &err);
    if (rc) {
        must(net.depth == 0 && !net.layers && !net.theta && !net.given, "a failed parse left a net behind");
        must(!strncmp(err.msg, "fuzz.json", 9), "a failure that does not name the file");
        return 0;
    }
    must(net.depth >= 1 && net.layers[0].in == net.width, "layer 0 does not take the width");
    for (size_t i = 0; i < net.depth; i++) {
        must(!net.given[i] && !net.theta[i], "parameters without any file");
        if (i) must(net.layers[i].in == net.layers[i - 1].out, "widths do not chain");
    }
    size_t P = vijp_net_param_count(&net), D = net.depth;
    vijp_net_free(&net);
    if (P <= 4096 && D <= 64) {
        vijp_net full;
        must(!vijp_net_parse_json(&full, (const char *)data, size, "fuzz.json", NULL, &err), "parses without parameters, not with");
        must(!vijp_net_init(&full, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 1, &err), "init failed");
        vijp_net_free(&full);
    }
    return 0;
}

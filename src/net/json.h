/* JSON nets, internal entry points (src/net/json.c). */
#ifndef VIJP_NET_JSON_INTERNAL_H
#define VIJP_NET_JSON_INTERNAL_H

#include "vijp/net.h"

/* vijp_net_parse_json and vijp_net_load_json; with_params 0 allocates θ
 * only for the layers whose parameters the file gives (a shape-only read,
 * as vijp_net_shape wants, of however large a net). */
VIJP_MUST_CHECK int net_json_parse(vijp_net *net, const char *text, size_t len, const char *name, const char *base,
                                   int with_params, vijp_error *err);
VIJP_MUST_CHECK int net_json_load(vijp_net *net, const char *path, int with_params, vijp_error *err);

#endif

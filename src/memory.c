#include "vijp/memory.h"
#include "problem.h"
#include <string.h>

int vijp_memory_profile(const char *spec, size_t depth, size_t width, size_t batch, uint64_t seed,
                        const vijp_format *f, vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes,
                        vijp_error *err)
{
    if (batch == 0 || batch > 1000000) return vijp_fail(err, VIJP_EINVAL, "batch %zu out of range [1, 1000000]", batch);
    vijp_net net;
    int rc = vijp_net_build(&net, spec, depth, width, err);
    if (rc) return rc;
    vijp_problem p = {0};
    vijp_grads g = {0};
    if (!(rc = vijp_net_init(&net, (vijp_init){VIJP_INIT_ORTHOGONAL, 1}, seed, err)) &&
        !(rc = vijp_problem_round(&p, &net, batch, seed, f, err))) {
        rc = vijp_engine_run_opts(e, &net, p.theta, &p.X, &p.T, o, &g, err);
        /* A vijp that lost rank ends the sweep, after the ledger was replayed;
         * h_0 alone makes every depth's count positive, so a profile still
         * zero was not filled. */
        if (rc == VIJP_ESINGULAR)
            rc = g.stored_by_depth && g.stored_by_depth[depth - 1] ? 0
                 : vijp_fail(err, VIJP_ESINGULAR, "%s: failed before its stored bytes were counted", vijp_engine_name(e));
        if (!rc) memcpy(bytes, g.stored_by_depth, depth * sizeof *bytes);
    }
    vijp_grads_clear(&g);
    vijp_problem_clear(&p, &net);
    vijp_net_free(&net);
    return rc;
}

size_t vijp_memory_deepest(const size_t *bytes, size_t depth, size_t budget)
{
    size_t d = 0;
    for (size_t i = 0; i < depth; i++) /* bytes grow with depth for every engine here, but do not assume it */
        if (bytes[i] <= budget) d = i + 1;
        else break;
    return d;
}

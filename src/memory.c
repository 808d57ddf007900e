#include "vijp/memory.h"
#include "problem.h"
#include <string.h>

int vijp_memory_profile(const char *spec, size_t depth, size_t width, size_t batch, uint64_t seed,
                        const vijp_format *f, vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes,
                        vijp_error *err)
{
    vijp_grad_setup s = {.spec = spec, .depth = depth, .width = width, .batch = batch, .seed = seed,
                         .init = {VIJP_INIT_ORTHOGONAL, 1}, .loss = VIJP_LOSS_SQUARE, .fmt = *f};
    vijp_net net;
    vijp_problem p;
    vijp_grads g = {0};
    int rc = vijp_problem_setup(&s, &net, &p, err);
    if (rc) return rc;
    rc = vijp_engine_run_opts(e, &net, p.theta, &p.X, &p.T, o, &g, err);
    /* Some residuals depend on the values (a relu fragment holds the
     * inactive units): counted from NaN or ∞ they mean nothing. */
    if ((!rc || rc == VIJP_ESINGULAR) && vijp_grads_check_finite(&g, err)) rc = VIJP_ERANGE;
    /* A vijp that lost rank ends the sweep, after the ledger was replayed;
     * h_0 alone makes every depth's count positive, so a profile still
     * zero was not filled. */
    if (rc == VIJP_ESINGULAR)
        rc = g.stored_by_depth && g.stored_by_depth[depth - 1] ? 0
             : vijp_fail(err, VIJP_ESINGULAR, "%s: failed before its stored bytes were counted", vijp_engine_name(e));
    if (!rc) memcpy(bytes, g.stored_by_depth, depth * sizeof *bytes);
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

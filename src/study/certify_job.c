/* certify --layer's samples (certify_job.h): one sample, and all of them in
 * order in one process.  The MPI back end (mpi/) shares the same samples
 * out over ranks. */
#include "certify_job.h"
#include "vijp/error.h"
#include "vijp/vijp.h"
#include <string.h>

/* The point source: seeded Gaussian points, or --input's rows. */
static void next_point(vijp_rng *rng, double scale, double *x, size_t n)
{
    for (size_t k = 0; k < n; k++) x[k] = scale * vijp_rng_normal(rng);
}

int certify_sample(certify_job *j, size_t k, vijp_certificate *c, vijp_error *err)
{
    const vijp_layer *L = &j->net->layers[0];
    int rc = vijp_net_init(j->net, j->init, j->seed + k, err); /* a point is an input and the layer's parameters */
    if (rc) return rc;
    if (j->input) memcpy(j->x, j->input + k * L->in, L->in * sizeof *j->x);
    else
        for (; j->drawn <= k; j->drawn++) next_point(&j->rng, j->scale, j->x, L->in);
    return vijp_certify_layer(L, j->net->theta[0], j->x, j->co, c, err);
}

int certify_run_serial(certify_job *j, vijp_certificate *c, size_t *n, vijp_error *err)
{
    int rc = 0;
    for (*n = 0; !rc && *n < j->samples; ++*n) {
        if ((rc = certify_sample(j, *n, &c[*n], err))) {
            char inner[sizeof err->msg];
            memcpy(inner, err->msg, sizeof inner);
            vijp_fail(err, rc, "sample %zu: %s", *n + 1, inner);
            break;
        }
        progress_step(j->meter, *n + 1);
    }
    return rc;
}

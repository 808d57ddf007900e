/* vijp certify --layer's samples as a job that one process runs in order
 * (certify_run_serial) or MPI ranks share (mpi_certify_run, mpi_study.h).
 * Sample k certifies the layer with its parameters initialised from seed +
 * k at point k: the k-th row of --input, or the k-th point drawn from the
 * seeded generator, which every process replays to the samples it is given
 * (in increasing order), so every certificate is the one a single process
 * computes. */
#ifndef VIJP_CLI_CERTIFY_JOB_H
#define VIJP_CLI_CERTIFY_JOB_H

#include "progress.h"
#include "vijp/certify.h"
#include "vijp/vijp.h"

typedef struct {
    vijp_net *net; /* one layer; re-initialised for each sample */
    vijp_init init;
    uint64_t seed;
    const vijp_certify_opts *co;
    const double *input; /* samples × in (--input), or NULL: drawn */
    vijp_rng rng;        /* the draws, replayed up to the sample asked for */
    size_t drawn;        /* points drawn so far */
    double scale;
    double *x;           /* the current point (in) */
    size_t samples;
    progress *meter;
} certify_job;

/* Sample k's certificate into *c (k not below the last one asked). */
VIJP_MUST_CHECK int certify_sample(certify_job *j, size_t k, vijp_certificate *c, vijp_error *err);
/* Every sample in order into c[0..samples), *n receiving how many are
 * filled; stops at the first failure, err saying "sample K: ...". */
VIJP_MUST_CHECK int certify_run_serial(certify_job *j, vijp_certificate *c, size_t *n, vijp_error *err);

#endif

/* The serial stand-in for mpi_study.c in a build without MPI: one process,
 * rank 0 of a world of one (mpi_study.h). */
#include "mpi.h"
#include <stdio.h>
#include <stdlib.h>

int mpi_built(void) { return 0; }

/* Started by mpirun as one of several ranks, this build would run the
 * whole study in every rank, all racing for the same folder: say so, once,
 * and stop every rank. */
void mpi_world_start(mpi_world *w, int *argc, char ***argv)
{
    (void)argc, (void)argv;
    *w = (mpi_world){.rank = 0, .size = 1, .active = 0};
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!size) size = getenv("PMI_SIZE"), rank = getenv("PMI_RANK");
    if (size && atoi(size) > 1) {
        if (!rank || atoi(rank) == 0)
            fprintf(stderr, "vijp: this vijp was built without MPI, so under mpirun each of the %d ranks would run the "
                    "whole study; rebuild with MPI (install libopenmpi-dev, then make MPI=1), or run it without mpirun\n",
                    atoi(size));
        exit(2); /* the commands' usage exit code */
    }
}

void mpi_world_end(mpi_world *w) { (void)w; }

int mpi_world_share(const mpi_world *w, int v) { return (void)w, v; }

int mpi_world_all(const mpi_world *w, int ok, int *root_ok)
{
    (void)w;
    *root_ok = ok;
    return ok;
}

int mpi_study_run(const mpi_world *w, study *s, int threads, uint64_t study_hash, vijp_error *err)
{
    (void)w, (void)study_hash;
    s->jobs = threads;
    return study_run(s, err);
}

int mpi_certify_run(const mpi_world *w, certify_job *job, vijp_certificate *c, size_t *n, vijp_error *err)
{
    (void)w;
    return certify_run_serial(job, c, n, err);
}

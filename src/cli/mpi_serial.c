/* The serial stand-in for mpi_study.c in a build without MPI: one process,
 * rank 0 of a world of one (mpi_study.h). */
#include "mpi_study.h"

int mpi_built(void) { return 0; }

void mpi_world_start(mpi_world *w, int *argc, char ***argv)
{
    (void)argc, (void)argv;
    *w = (mpi_world){.rank = 0, .size = 1, .active = 0};
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

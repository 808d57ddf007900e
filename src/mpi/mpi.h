/* A drift study spread over MPI ranks: `mpirun -n P vijp drift|report …`.
 *
 * Rank 0 parses, locks and writes the report as a single process does; it
 * hands the curves out one at a time, in study_pool's order (largest group first), to
 * the other ranks as each finishes its last one (dynamic load balancing),
 * computes on its own `threads` threads from the same queue, and gathers
 * every curve as unit_io.h's text (lossless: the report is byte for byte
 * the single process's).  The other ranks parse the same options, compute
 * one curve at a time, and write nothing.  Finished curves are kept by
 * rank 0 for --resume (resume.h) as they arrive.
 *
 * Built from mpi_study.c when the build has MPI (make MPI=1; the default
 * where mpicc is found), from mpi_serial.c otherwise: a world of one
 * process.  MPI is started only when mpirun (or another PMI launcher)
 * started the process, so `vijp drift` without mpirun never touches MPI. */
#ifndef VIJP_CLI_MPI_STUDY_H
#define VIJP_CLI_MPI_STUDY_H

#include "study/study.h"
#include "study/certify_job.h"
#include <stdint.h>

typedef struct {
    int rank, size; /* 0 and 1 without MPI */
    int active;     /* MPI_Init was called */
} mpi_world;

/* Whether this build can spread a study over ranks. */
int mpi_built(void);
void mpi_world_start(mpi_world *w, int *argc, char ***argv);
void mpi_world_end(mpi_world *w);
/* Rank 0's v on every rank (the decision to go on, or the exit status). */
int mpi_world_share(const mpi_world *w, int v);
/* Whether ok is nonzero on every rank; *root_ok receives rank 0's. */
int mpi_world_all(const mpi_world *w, int ok, int *root_ok);

/* Under mpirun, ranks other than 0 parse the command line with their
 * stdout and stderr set aside (a temporary file), so that a mistake is said
 * once, by rank 0; a worker's messages are shown only when it alone failed
 * (a file it cannot read, say). */

typedef struct {
    int rank, saved_out, saved_err;
    FILE *captured, *results;
} rank_output;
/* rank > 0: the results stream (stdout, or the command's own stream that
 * plugins cannot reach) and stderr into a temporary file until
 * rank_output_show, which puts them back and prints what was captured (each
 * line prefixed "rank R: ") when show. */
void rank_output_hide(rank_output *o, int rank, FILE *results);
void rank_output_show(rank_output *o, int show);
/* After every rank parsed the same command line (code < 0: this rank's
 * parse succeeded, otherwise its exit status): -1 when all go on;
 * otherwise the status every rank stops with, rank 0's, after showing
 * the messages of a worker that alone failed (rank 0 then says that
 * another rank could not set up WHAT). */
int rank_parse_agree(const mpi_world *w, rank_output *o, int code, const char *name, const char *what);

/* Run study s over the world (study_run for a world of one).  On rank 0: 0
 * with every curve in s->curves, or the first failure, its message naming
 * the rank and the curve.  On the other ranks: compute what rank 0 sends
 * until it says stop; s->curves is not used.  study_hash: the study's
 * parameter hash (resume.h), which every unit sent carries, so a rank that
 * sees another study (another file under the same name) is caught. */
VIJP_MUST_CHECK int mpi_study_run(const mpi_world *w, study *s, int threads, uint64_t study_hash, vijp_error *err);

/* vijp certify's samples over the world (certify_job.h): rank 0 hands out
 * sample indices in increasing order, computes samples itself between
 * handling the others', and gathers every certificate into c[0..*n) (the
 * first failure stops it: err "sample K: ...", naming the rank); the
 * other ranks compute what they are sent (c unused).  A world of one:
 * certify_run_serial. */
VIJP_MUST_CHECK int mpi_certify_run(const mpi_world *w, certify_job *job, vijp_certificate *c, size_t *n, vijp_error *err);

#endif

/* Ranks other than 0 parsing quietly (mpi.h). */
#include "mpi.h"
#include <stdio.h>
#include <unistd.h>

void rank_output_hide(rank_output *o, int rank, FILE *results)
{
    *o = (rank_output){.rank = rank, .results = results, .saved_out = -1, .saved_err = -1};
    if (!rank || !(o->captured = tmpfile())) return;
    fflush(results), fflush(stdout), fflush(stderr);
    o->saved_out = dup(fileno(results)), o->saved_err = dup(STDERR_FILENO);
    dup2(fileno(o->captured), fileno(results)), dup2(fileno(o->captured), STDERR_FILENO);
}

void rank_output_show(rank_output *o, int show)
{
    if (!o->captured) return;
    fflush(o->results), fflush(stdout), fflush(stderr);
    dup2(o->saved_out, fileno(o->results)), dup2(o->saved_err, STDERR_FILENO);
    close(o->saved_out), close(o->saved_err);
    char line[1024];
    rewind(o->captured);
    while (show && fgets(line, sizeof line, o->captured)) fprintf(stderr, "rank %d: %s", o->rank, line);
    fclose(o->captured);
}


int rank_parse_agree(const mpi_world *w, rank_output *o, int code, const char *name, const char *what)
{
    int root_ok, all_ok = mpi_world_all(w, code < 0, &root_ok);
    rank_output_show(o, root_ok && code >= 0);
    if (all_ok) return -1;
    if (!root_ok) return mpi_world_share(w, code);
    if (!w->rank) fprintf(stderr, "%s: another rank could not set up %s (its message above)\n", name, what);
    return 2; /* the commands' usage exit code */
}

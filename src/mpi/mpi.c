/* A drift study over MPI ranks (mpi_study.h); compiled only in a build
 * with MPI (mpi_serial.c otherwise).
 *
 * Messages, all on MPI_COMM_WORLD between rank 0 and one other rank:
 *   TAG_WORK   0 → r  one int64: compute curve j
 *   TAG_STOP   0 → r  one int64 (ignored): no more curves, finish
 *   TAG_RESULT r → 0  text: "ok\n" and the curve as unit_io.h's text, or
 *                     "failed RC\n" and the message
 * Only the main thread of a process calls MPI (MPI_THREAD_FUNNELED); rank
 * 0's own curves are computed on study_pool's threads meanwhile. */
#include "mpi.h"
#include "report/atomic.h"
#include "study/unit_io.h"
#include "vijp/vijp.h"
#include <cblas.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_WORK = 1, TAG_STOP, TAG_RESULT };

int mpi_built(void) { return 1; }

/* Started by mpirun (Open MPI), or by a PMI/PMIx launcher (MPICH's Hydra,
 * Slurm's srun): their environment says so.  Otherwise MPI is left alone,
 * so that a plain `vijp drift` never pays for (or trips over) a singleton
 * MPI start. */
static int launched_by_mpirun(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"};
    for (size_t k = 0; k < sizeof vars / sizeof *vars; k++)
        if (getenv(vars[k])) return 1;
    return 0;
}

void mpi_world_start(mpi_world *w, int *argc, char ***argv)
{
    *w = (mpi_world){.rank = 0, .size = 1, .active = 0};
    if (!launched_by_mpirun()) return;
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
    w->active = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
}

void mpi_world_end(mpi_world *w)
{
    if (w->active) MPI_Finalize();
    w->active = 0;
}

int mpi_world_share(const mpi_world *w, int v)
{
    if (w->size > 1) MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v;
}

int mpi_world_all(const mpi_world *w, int ok, int *root_ok)
{
    *root_ok = mpi_world_share(w, ok != 0);
    int all = ok != 0;
    if (w->size > 1) MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* ---- the other ranks ---- */

static int worker(const mpi_world *w, const study *s, uint64_t hash)
{
    /* Test hook: VIJP_KILL_RANK=R: rank R dies of SIGKILL as it receives
     * its second curve (scripts/check-mpi.sh). */
    const char *hook = getenv("VIJP_KILL_RANK");
    int die = hook && atoi(hook) == w->rank, received = 0;
    openblas_set_num_threads(1); /* as study_pool_start: double results do not depend on the rank */
    for (;;) {
        int64_t j;
        MPI_Status st;
        MPI_Recv(&j, 1, MPI_INT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP) break;
        if (die && ++received == 2) raise(SIGKILL);
        vijp_drift_curve c;
        vijp_error e = {0};
        int rc = study_run_unit(s, (size_t)j, &c, &e);
        char *msg;
        size_t n;
        if (!rc) {
            char *text = unit_encode(hash, (size_t)j, &c, &n);
            msg = vijp_alloc(n + 4);
            memcpy(msg, "ok\n", 3), memcpy(msg + 3, text, n);
            n += 3;
            free(text);
            vijp_drift_curve_clear(&c);
        } else {
            msg = vijp_alloc(sizeof e.msg + 32);
            n = (size_t)snprintf(msg, sizeof e.msg + 32, "failed %d\n%s", rc, e.msg);
        }
        MPI_Send(msg, (int)n, MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
        free(msg);
    }
    mpfr_free_cache();
    return 0;
}

/* ---- rank 0 ---- */

/* What each rank computes, for the signal handler's note (atomic.h): when
 * a rank dies, mpirun ends the others by a signal, and the note is what
 * rank 0 can still say about it.  Two buffers, so that the handler never
 * reads one being rewritten. */
typedef struct {
    char *buf[2];
    size_t size;
    int which;
} note;

static void note_update(note *nt, const study *s, const size_t *current, int size)
{
    nt->which ^= 1;
    char *b = nt->buf[nt->which];
    size_t used = (size_t)snprintf(b, nt->size, "vijp: stopped by a signal while computing (mpirun ends every rank "
                                   "when one dies or is killed); the ranks had:");
    for (int r = 1; r < size && used < nt->size; r++)
        if (current[r] != SIZE_MAX) {
            char name[300];
            study_unit_name(s, current[r], name, sizeof name);
            used += (size_t)snprintf(b + used, nt->size - used, "\n  rank %d: %s", r, name);
        }
    if (used < nt->size) snprintf(b + used, nt->size - used, "\nthe curves finished are kept for --resume\n");
    report_out_signal_note(b);
}

static void send_next(study_pool *p, int r, size_t *current)
{
    size_t j;
    int64_t v = 0;
    if (study_pool_take(p, &j)) {
        v = (int64_t)j, current[r] = j;
        MPI_Send(&v, 1, MPI_INT64_T, r, TAG_WORK, MPI_COMM_WORLD);
    } else {
        current[r] = SIZE_MAX;
        MPI_Send(&v, 1, MPI_INT64_T, r, TAG_STOP, MPI_COMM_WORLD);
    }
}

/* Curve j's message from rank r, into s->curves[j] and the pool. */
static void receive(study_pool *p, study *s, uint64_t hash, int r, size_t j, char *msg, size_t n)
{
    char where[32], why[300];
    snprintf(where, sizeof where, "rank %d: ", r);
    if (n >= 3 && !memcmp(msg, "ok\n", 3)) {
        if (unit_decode(s, hash, j, msg + 3, n - 3, &s->curves[j], why, sizeof why) == 0)
            study_pool_done(p, j, 0, where, "");
        else {
            char m[400];
            snprintf(m, sizeof m, "its result cannot be read: %s (does every rank run the same vijp on the same files?)", why);
            study_pool_done(p, j, VIJP_EIO, where, m);
        }
        return;
    }
    int rc = VIJP_EIO;
    char *text = strchr(msg, '\n');
    if (!strncmp(msg, "failed ", 7)) rc = atoi(msg + 7);
    study_pool_done(p, j, rc ? rc : VIJP_EIO, where, text ? text + 1 : msg);
}

static int root(const mpi_world *w, study *s, int threads, uint64_t hash, vijp_error *err)
{
    study_pool *p = study_pool_start(s, threads);
    size_t *current = vijp_alloc_array((size_t)w->size, sizeof *current);
    note nt = {.size = 64 + (size_t)w->size * 320};
    nt.buf[0] = vijp_alloc(nt.size), nt.buf[1] = vijp_alloc(nt.size);
    int busy = 0;
    current[0] = SIZE_MAX;
    for (int r = 1; r < w->size; r++) {
        send_next(p, r, current);
        busy += current[r] != SIZE_MAX;
    }
    note_update(&nt, s, current, w->size);
    while (busy) {
        int flag;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
        if (!flag) { /* polled, not a blocking receive: Open MPI's spins a core that rank 0's own threads compute on */
            nanosleep(&(struct timespec){0, 200000}, NULL);
            continue;
        }
        int n;
        MPI_Get_count(&st, MPI_CHAR, &n);
        char *msg = vijp_alloc((size_t)n + 1);
        MPI_Recv(msg, n, MPI_CHAR, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        msg[n] = 0;
        int r = st.MPI_SOURCE;
        receive(p, s, hash, r, current[r], msg, (size_t)n);
        free(msg);
        send_next(p, r, current); /* after a failure: stop (study_pool_take hands out no more) */
        busy -= current[r] == SIZE_MAX;
        note_update(&nt, s, current, w->size);
    }
    int rc = study_pool_finish(p, err);
    report_out_signal_note(NULL);
    free(nt.buf[0]), free(nt.buf[1]), free(current);
    return rc;
}

int mpi_study_run(const mpi_world *w, study *s, int threads, uint64_t study_hash, vijp_error *err)
{
    if (w->size <= 1) {
        s->jobs = threads;
        return study_run(s, err);
    }
    if (w->rank) return worker(w, s, study_hash);
    return root(w, s, threads, study_hash, err);
}

/* ---- vijp certify's samples ----
 * The same tags: TAG_WORK carries a sample index, TAG_RESULT an int64 status
 * and then the certificate (the struct's bytes, then its singular values and
 * cokernel basis where its pointers are set: every rank runs the same
 * binary) or the message. */

static char *certificate_message(int64_t rc, const vijp_certificate *c, const char *msg, size_t *n)
{
    size_t sv = c && c->num.sv ? (c->num.m < c->num.n ? c->num.m : c->num.n) : 0;
    size_t cok = c && c->num.cokernel ? (c->num.cokernel_dim ? c->num.cokernel_dim : 1) * c->num.m : 0;
    *n = sizeof rc + (rc ? strlen(msg) : sizeof *c + (sv + cok) * sizeof(double));
    char *out = vijp_alloc(*n), *p = out + sizeof rc;
    memcpy(out, &rc, sizeof rc);
    if (rc) memcpy(p, msg, strlen(msg));
    else {
        memcpy(p, c, sizeof *c), p += sizeof *c;
        if (sv) memcpy(p, c->num.sv, sv * sizeof(double)), p += sv * sizeof(double);
        if (cok) memcpy(p, c->num.cokernel, cok * sizeof(double));
    }
    return out;
}

/* The certificate in msg into *c; 0, or the sender's status with its text in err. */
static int certificate_of(const char *msg, size_t n, vijp_certificate *c, vijp_error *err)
{
    int64_t rc;
    memcpy(&rc, msg, sizeof rc);
    if (rc) return vijp_fail(err, (int)rc, "%.*s", (int)(n - sizeof rc), msg + sizeof rc);
    memcpy(c, msg + sizeof rc, sizeof *c);
    const char *p = msg + sizeof rc + sizeof *c;
    if (c->num.sv) {
        size_t sv = c->num.m < c->num.n ? c->num.m : c->num.n;
        c->num.sv = vijp_alloc_array(sv, sizeof(double));
        memcpy(c->num.sv, p, sv * sizeof(double)), p += sv * sizeof(double);
    }
    if (c->num.cokernel) {
        size_t cok = (c->num.cokernel_dim ? c->num.cokernel_dim : 1) * c->num.m;
        c->num.cokernel = vijp_alloc_array(cok, sizeof(double));
        memcpy(c->num.cokernel, p, cok * sizeof(double));
    }
    return 0;
}

static int certify_worker(const mpi_world *w, certify_job *job)
{
    const char *hook = getenv("VIJP_KILL_RANK");
    int die = hook && atoi(hook) == w->rank, received = 0;
    for (;;) {
        int64_t k;
        MPI_Status st;
        MPI_Recv(&k, 1, MPI_INT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP) break;
        if (die && ++received == 2) raise(SIGKILL);
        vijp_certificate c;
        vijp_error e = {0};
        int rc = certify_sample(job, (size_t)k, &c, &e);
        size_t n;
        char *msg = certificate_message(rc, rc ? NULL : &c, e.msg, &n);
        MPI_Send(msg, (int)n, MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
        free(msg);
        if (!rc) vijp_certificate_clear(&c);
    }
    return 0;
}

/* Rank 0's bookkeeping: each other rank holds up to two samples (the next
 * waits in its mailbox while it computes), answered in the order sent. */
enum { AHEAD = 2 };
typedef struct {
    size_t k[AHEAD];
    int held, stopped;
} rank_queue;

int mpi_certify_run(const mpi_world *w, certify_job *job, vijp_certificate *c, size_t *n, vijp_error *err)
{
    if (w->size <= 1) return certify_run_serial(job, c, n, err);
    if (w->rank) return certify_worker(w, job);
    size_t total = job->samples, next = 0, done = 0, failed_k = SIZE_MAX;
    unsigned char *have = vijp_alloc_array(total, 1);
    rank_queue *q = vijp_alloc_array((size_t)w->size, sizeof *q);
    int failed = 0, stopped = 0;
    vijp_error first = {0};
    /* A failure: the lowest sample's, as one process would meet it first. */
#define FAILED(k, rc, where, text)                                                                                     \
    do {                                                                                                               \
        if ((k) < failed_k) failed_k = (k), failed = (rc), vijp_fail(&first, (rc), "sample %zu%s: %s", (k) + 1, where, text); \
    } while (0)
    for (int r = 1; r < w->size; r++)
        for (int a = 0; a < AHEAD && next < total; a++) {
            int64_t v = (int64_t)next;
            q[r].k[q[r].held++] = next++;
            MPI_Send(&v, 1, MPI_INT64_T, r, TAG_WORK, MPI_COMM_WORLD);
        }
    while (stopped < w->size - 1) {
        int flag;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
        if (flag) {
            int r = st.MPI_SOURCE, len;
            MPI_Get_count(&st, MPI_CHAR, &len);
            char *msg = vijp_alloc((size_t)len + 1);
            MPI_Recv(msg, len, MPI_CHAR, r, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            size_t k = q[r].k[0];
            memmove(q[r].k, q[r].k + 1, sizeof *q[r].k * (AHEAD - 1)), q[r].held--;
            vijp_error e = {0};
            char where[32];
            snprintf(where, sizeof where, " (rank %d)", r);
            if (certificate_of(msg, (size_t)len, &c[k], &e)) FAILED(k, e.code, where, e.msg);
            else have[k] = 1, progress_step(job->meter, ++done);
            free(msg);
        }
        for (int r = 1; r < w->size; r++) { /* top every rank up, or stop those with nothing left */
            int64_t v = 0;
            while (!q[r].stopped && !failed && next < total && q[r].held < AHEAD) {
                v = (int64_t)next;
                q[r].k[q[r].held++] = next++;
                MPI_Send(&v, 1, MPI_INT64_T, r, TAG_WORK, MPI_COMM_WORLD);
            }
            if (!q[r].stopped && !q[r].held && (failed || next == total)) {
                q[r].stopped = 1, stopped++;
                MPI_Send(&v, 1, MPI_INT64_T, r, TAG_STOP, MPI_COMM_WORLD);
            }
        }
        if (!failed && next < total) { /* one of its own between rounds */
            size_t k = next++;
            vijp_error e = {0};
            if (certify_sample(job, k, &c[k], &e)) FAILED(k, e.code, "", e.msg);
            else have[k] = 1, progress_step(job->meter, ++done);
        } else if (!flag)
            nanosleep(&(struct timespec){0, 200000}, NULL);
    }
#undef FAILED
    *n = failed ? 0 : total;
    if (failed) {
        for (size_t k = 0; k < total; k++)
            if (have[k]) vijp_certificate_clear(&c[k]);
        if (err) *err = first;
    }
    free(have), free(q);
    return failed;
}

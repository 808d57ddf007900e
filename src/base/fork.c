/* Fork-join over contiguous ranges (fork.h).
 *
 * A run's parts are claimed, one at a time under the team's lock, by
 * whichever thread is free: the caller claims too, and returns once every
 * part is finished.  So a helper the system does not schedule in time (a
 * loaded machine, more threads than cores) costs nothing but its share of
 * the work going to the caller, never a wait for it to wake: the caller
 * waits only for parts a helper has started.  Which thread runs a part does
 * not matter to its results (fork.h).
 *
 * Helpers sleep on a condition variable between runs (a round number), not
 * spinning: a spinning helper would take the core the caller needs.  They
 * are detached, and the team is freed by whoever leaves it last (the owner
 * in vijp_team_free, or the last helper to see it stopped), so that freeing
 * it does not wait for a helper to be scheduled either. */
#include "base/fork.h"
#include "vijp/error.h"
#include <mpfr.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    vijp_fork_body *body;
    void *ctx;
    size_t n, parts;
    mpfr_exp_t emin, emax; /* the caller's MPFR exponent range */
} fork_job;

struct vijp_team {
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    unsigned long round;    /* bumped by each run */
    fork_job job;           /* this round's */
    size_t next, finished;  /* its parts claimed, and finished */
    size_t helpers;         /* started */
    size_t holders;         /* the owner until vijp_team_free, and each helper until it leaves */
    int stop;
};

static int clamp_threads(int threads)
{
    return threads < 1 ? 1 : threads > VIJP_FORK_MAX_THREADS ? VIJP_FORK_MAX_THREADS : threads;
}

size_t vijp_fork_parts(int threads, size_t n, double work, double min_work)
{
    double worth = work / min_work;
    size_t parts = (size_t)clamp_threads(threads);
    if (parts > n) parts = n;
    if (!(worth < (double)parts)) return parts ? parts : 1; /* NaN work: as much as asked */
    return worth >= 1 ? (size_t)worth : 1;
}

/* Runs parts of the current round while any are unclaimed; called and
 * returning with the lock held.  A helper first takes the caller's MPFR
 * exponent range (MPFR keeps it per thread). */
static void work(vijp_team *t, int helper)
{
    while (t->next < t->job.parts) {
        size_t k = t->next++;
        fork_job j = t->job;
        pthread_mutex_unlock(&t->lock);
        if (helper) mpfr_set_emin(j.emin), mpfr_set_emax(j.emax);
        j.body(j.ctx, k, vijp_fork_begin(j.n, j.parts, k), vijp_fork_begin(j.n, j.parts, k + 1));
        pthread_mutex_lock(&t->lock); /* the part's writes are seen by whoever locks after this */
        if (++t->finished == t->job.parts) pthread_cond_signal(&t->done);
    }
}

/* One holder leaves: called with the lock held, returns without it; the
 * last one frees the team. */
static void leave(vijp_team *t)
{
    int last = --t->holders == 0;
    pthread_mutex_unlock(&t->lock);
    if (!last) return;
    pthread_cond_destroy(&t->go), pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void *helper(void *p)
{
    vijp_team *t = p;
    unsigned long seen = 0;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (t->round == seen && !t->stop) pthread_cond_wait(&t->go, &t->lock);
        if (t->stop) break;
        seen = t->round;
        work(t, 1); /* nothing left when it woke late: back to waiting */
    }
    leave(t);
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* this thread's constants (π, log 2), if a body used them */
    return NULL;
}

vijp_team *vijp_team_new(int threads)
{
    vijp_team *t = vijp_alloc(sizeof *t);
    *t = (vijp_team){.holders = 1};
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->go, NULL), pthread_cond_init(&t->done, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&t->lock); /* a helper that starts at once waits for holders to count it */
    for (int k = 1; k < clamp_threads(threads); k++) {
        pthread_t id;
        if (pthread_create(&id, &attr, helper, t)) break; /* fewer helpers: the caller runs more parts */
        t->helpers++, t->holders++;
    }
    pthread_mutex_unlock(&t->lock);
    pthread_attr_destroy(&attr);
    return t;
}

void vijp_team_run(vijp_team *t, size_t n, size_t parts, vijp_fork_body *body, void *ctx)
{
    if (parts > n) parts = n;
    if (parts > VIJP_FORK_MAX_THREADS) parts = VIJP_FORK_MAX_THREADS;
    if (parts <= 1 || !t->helpers) { /* the same parts in turn: the bits do not depend on who runs them */
        for (size_t k = 0; k < parts; k++) body(ctx, k, vijp_fork_begin(n, parts, k), vijp_fork_begin(n, parts, k + 1));
        return;
    }
    pthread_mutex_lock(&t->lock);
    t->job = (fork_job){body, ctx, n, parts, mpfr_get_emin(), mpfr_get_emax()};
    t->next = t->finished = 0;
    t->round++;
    pthread_cond_broadcast(&t->go);
    work(t, 0);
    while (t->finished < parts) pthread_cond_wait(&t->done, &t->lock); /* parts helpers have started */
    pthread_mutex_unlock(&t->lock);
}

void vijp_team_free(vijp_team *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_broadcast(&t->go);
    leave(t);
}

void vijp_fork(int threads, size_t n, double work_units, vijp_fork_body *body, void *ctx)
{
    size_t parts = vijp_fork_parts(threads, n, work_units, VIJP_FORK_MIN_WORK);
    if (parts <= 1) {
        if (n) body(ctx, 0, 0, n);
        return;
    }
    vijp_team *t = vijp_team_new((int)parts);
    vijp_team_run(t, n, parts, body, ctx);
    vijp_team_free(t);
}

/* The study's drawn nets (draws.h): a table under one lock, each entry
 * drawn outside the lock by the thread that first asks for it. */
#include "draws.h"
#include "grad/problem.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef enum { DRAW_NONE, DRAW_BUILDING, DRAW_READY, DRAW_FAILED } draw_state;

typedef struct {
    study_draw_key key;
    draw_state state;
    vijp_net net;     /* DRAW_READY: the drawn net, never written again */
    int rc;           /* DRAW_FAILED: the draw's code */
    vijp_error error; /* and why */
    long expected;    /* uses still to come (study_draws_expect) */
    long holders;     /* gets not yet put */
} draw_entry;

struct study_draws {
    study_draws_source src;
    pthread_mutex_t lock;
    pthread_cond_t drawn; /* an entry left DRAW_BUILDING */
    draw_entry **entries; /* allocated one by one: an entry never moves */
    size_t n, cap, made;
};

study_draws *study_draws_new(const study_draws_source *src)
{
    study_draws *d = vijp_alloc(sizeof *d);
    memset(d, 0, sizeof *d);
    d->src = *src;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->drawn, NULL);
    return d;
}

void study_draws_free(study_draws *d)
{
    if (!d) return;
    for (size_t k = 0; k < d->n; k++) {
        vijp_net_free(&d->entries[k]->net);
        free(d->entries[k]);
    }
    free(d->entries);
    pthread_cond_destroy(&d->drawn);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static int same_key(study_draw_key a, study_draw_key b)
{
    return a.net == b.net && a.init.kind == b.init.kind && a.init.gain == b.init.gain && a.seed == b.seed &&
           !a.weights == !b.weights;
}

/* k's entry, added when missing; under the lock. */
static draw_entry *entry_of(study_draws *d, study_draw_key k)
{
    for (size_t i = 0; i < d->n; i++)
        if (same_key(d->entries[i]->key, k)) return d->entries[i];
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 16;
        d->entries = vijp_realloc(d->entries, d->cap * sizeof *d->entries); /* cap entries of a study: no overflow */
    }
    draw_entry *e = vijp_alloc(sizeof *e);
    memset(e, 0, sizeof *e);
    e->key = k;
    return d->entries[d->n++] = e;
}

/* Frees e's net once no use is expected or held; under the lock. */
static void release_if_unused(draw_entry *e)
{
    if (e->expected > 0 || e->holders > 0 || e->state != DRAW_READY) return;
    vijp_net_free(&e->net);
    e->state = DRAW_NONE;
}

void study_draws_expect(study_draws *d, study_draw_key k, long uses)
{
    pthread_mutex_lock(&d->lock);
    draw_entry *e = entry_of(d, k);
    e->expected += uses;
    release_if_unused(e);
    pthread_mutex_unlock(&d->lock);
}

/* The draw itself, as vijp_problem_setup makes it for a curve, on up to
 * threads threads (the same values on any). */
static int draw(const study_draws_source *src, study_draw_key k, int threads, vijp_net *net, vijp_error *err)
{
    vijp_grad_setup s = {.net = &src->nets[k.net], .depth = src->depth, .width = src->width, .batch = src->batch,
                         .weights = k.weights ? src->weights : NULL, .seed = k.seed, .init = k.init};
    s.init.threads = threads;
    return vijp_problem_draw(&s, net, err);
}

int study_draws_get(study_draws *d, study_draw_key k, int threads, const vijp_net **net, vijp_error *err)
{
    pthread_mutex_lock(&d->lock);
    draw_entry *e = entry_of(d, k);
    while (e->state == DRAW_BUILDING) pthread_cond_wait(&d->drawn, &d->lock);
    if (e->state == DRAW_NONE) {
        e->state = DRAW_BUILDING;
        d->made++;
        pthread_mutex_unlock(&d->lock);
        vijp_net drawn;
        vijp_error why = {0};
        int rc = draw(&d->src, k, threads, &drawn, &why);
        pthread_mutex_lock(&d->lock);
        if (rc) e->state = DRAW_FAILED, e->rc = rc, e->error = why;
        else e->state = DRAW_READY, e->net = drawn;
        pthread_cond_broadcast(&d->drawn);
    }
    int rc = 0;
    if (e->state == DRAW_FAILED) {
        rc = e->rc;
        if (err) *err = e->error;
    } else {
        e->holders++;
        *net = &e->net;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void study_draws_put(study_draws *d, study_draw_key k, int done_use)
{
    pthread_mutex_lock(&d->lock);
    draw_entry *e = entry_of(d, k);
    e->holders--;
    if (done_use) e->expected--;
    release_if_unused(e);
    pthread_mutex_unlock(&d->lock);
}

size_t study_draws_made(study_draws *d)
{
    pthread_mutex_lock(&d->lock);
    size_t n = d->made;
    pthread_mutex_unlock(&d->lock);
    return n;
}

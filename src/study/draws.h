/* A study's drawn nets: each spec's net with its parameters loaded and
 * drawn once per initialisation and seed, shared read-only by every format
 * and engine of its curves (each hands it back once it has rounded it),
 * and by the report's memory table's configs, which draw it again where
 * the curves' is gone, instead of drawn again for each (an orthogonal
 * 4096-wide layer takes seconds).
 * Internal to src/. */
#ifndef VIJP_STUDY_DRAWS_H
#define VIJP_STUDY_DRAWS_H

#include "vijp/net.h"
#include "vijp/error.h"

/* What a draw depends on: the spec's net (study.nets[net]), the
 * initialisation, the seed, and whether the study's --weights are loaded
 * (the memory table's profiles load none). */
typedef struct {
    size_t net;
    vijp_init init;
    uint64_t seed;
    int weights;
} study_draw_key;

/* The table: a lock and its entries, each drawn by the first thread that
 * asks for it while the others wait, then immutable until freed. */
typedef struct study_draws study_draws;

/* How to draw a key's net: the study's template nets and the options
 * every draw shares (vijp_problem_draw's setup).  Copied by
 * study_draws_new; the nets and weights path must outlive the table. */
typedef struct {
    const vijp_net *nets;
    size_t depth, width, batch;
    const char *weights;
} study_draws_source;

study_draws *study_draws_new(const study_draws_source *src);
void study_draws_free(study_draws *d); /* NULL: nothing */

/* uses more (or fewer: negative) uses of k are expected: its net is kept
 * between them, and freed once the last is done and nobody holds it. */
void study_draws_expect(study_draws *d, study_draw_key k, long uses);
/* k's net, drawn on first request (or again, after it was freed), into
 * *net, on up to threads threads where this request draws it (the
 * initialisers' vijp_init.threads: the same values on any count): only
 * read, valid until the matching study_draws_put.  A failed draw fails
 * every request with the same message. */
VIJP_MUST_CHECK int study_draws_get(study_draws *d, study_draw_key k, int threads, const vijp_net **net,
                                    vijp_error *err);
/* Done holding k's net (after a successful get); done_use: this was one of
 * the expected uses. */
void study_draws_put(study_draws *d, study_draw_key k, int done_use);
/* Draws made over the table's life (for the tests: a shared net counts once). */
size_t study_draws_made(study_draws *d);

#endif

/* vijp_memory_profile (memory.h) in two halves, so that a study draws
 * each net once for all its engines (report/sections.c).  Internal to
 * src/. */
#ifndef VIJP_MEMORY_PROFILE_H
#define VIJP_MEMORY_PROFILE_H

#include "vijp/memory.h"

/* The net a profile of tmpl runs on: built from it, seeded orthogonal
 * parameters where it gives none.  batch is checked as the profile would. */
VIJP_MUST_CHECK int vijp_memory_profile_draw(const vijp_net *tmpl, size_t batch, uint64_t seed, vijp_net *net,
                                             vijp_error *err);
/* vijp_memory_profile of the template drawn drew from (with the same
 * seed): drawn is only read; the bytes are the same as the profile's. */
VIJP_MUST_CHECK int vijp_memory_profile_drawn(const vijp_net *drawn, size_t batch, uint64_t seed, const vijp_format *f,
                                              vijp_engine_kind e, const vijp_engine_opts *o, size_t *bytes,
                                              vijp_error *err);

/* The same for the n engines e[k] into bytes[k], on one problem, the
 * engines split over up to threads threads in ranges of e (each engine
 * on its own: the bytes are the same on any); of several failures, that
 * of the engine first in vijp_engine_kind's order is the one returned. */
VIJP_MUST_CHECK int vijp_memory_profile_engines(const vijp_net *drawn, size_t batch, uint64_t seed,
                                                const vijp_format *f, const vijp_engine_kind *e, size_t n,
                                                const vijp_engine_opts *o, int threads, size_t *const *bytes,
                                                vijp_error *err);

#endif

/* A problem instance shared by the studies (grad, drift): inputs X, loss data
 * T and parameters θ of a network, in one format.  Internal to src/. */
#ifndef VIJP_PROBLEM_H
#define VIJP_PROBLEM_H

#include "vijp/study.h"
#include "vijp/error.h"

typedef struct {
    vijp_mat X, T, *theta;
} vijp_problem;

/* Seeded inputs and loss data for B samples and the network's parameters, all
 * rounded from their double master copies to format f. */
VIJP_MUST_CHECK int vijp_problem_round(vijp_problem *p, const vijp_net *net, size_t B, uint64_t seed, const vijp_format *f,
                       vijp_error *err);
/* The same values as from, converted exactly to format f (f at least as wide). */
void vijp_problem_convert(vijp_problem *p, const vijp_net *net, const vijp_problem *from, const vijp_format *f);
void vijp_problem_clear(vijp_problem *p, const vijp_net *net);
/* The network of setup s (s->net copied, or spec parsed and cycled to
 * depth; loss, seeded parameters) and its problem rounded to s->fmt: what
 * every study starts from.  On failure
 * both are released. */
VIJP_MUST_CHECK int vijp_problem_setup(const vijp_grad_setup *s, vijp_net *net, vijp_problem *p, vijp_error *err);
/* vijp_problem_setup's two halves.  vijp_problem_draw: the net of s,
 * built, its loss set, its parameters loaded (s->weights) and drawn
 * (s->init, s->seed); released on failure.  vijp_problem_setup_drawn: the
 * problem of s (inputs and loss data from s->seed, s->input, s->target;
 * parameters rounded to s->fmt) on a net so drawn, which it only reads:
 * one drawn net serves every format and engine of a seed (the study's
 * draws, study/draws.h) with the same bits as a net drawn for each. */
VIJP_MUST_CHECK int vijp_problem_draw(const vijp_grad_setup *s, vijp_net *net, vijp_error *err);
VIJP_MUST_CHECK int vijp_problem_setup_drawn(const vijp_grad_setup *s, const vijp_net *net, vijp_problem *p,
                                             vijp_error *err);

#endif

/* The catalogue's parts of a drift report (see report_sections.h). */
#include "sections.h"
#include "vijp/error.h"
#include "study/stats.h"
#include "vijp/vijp.h"
#include "vijp/composite.h"
#include "vijp/memory.h"
#include "memory/profile.h"
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

/* The run index of the reversible engine in every curve (0: not in the study). */
size_t reversible_run(const study *s)
{
    for (size_t e = 0; e < s->n_engines; e++)
        if (s->engines[e] == VIJP_ENGINE_REVERSIBLE) return e + 1;
    return 0;
}

size_t *mem_at(const memory_table *m, size_t c, size_t e) { return m->bytes + (c * VIJP_ENGINE_COUNT + e) * m->s->depth; }

/* Config c's profiles of every engine, on one net: the study's draw (drawn
 * again here where the curves have handed theirs back) or, without a
 * table, its own; the engines split over the study's jobs, at most
 * table_at_once of them at once (the sizing's, cli/drift.c). */
static int memory_config(memory_table *m, const study *s, size_t c, const vijp_format *fd, vijp_error *err)
{
    const vijp_net *tmpl = &s->nets[s->configs[c].net], *net;
    vijp_net own = {0};
    study_draw_key key = study_profile_draw(s, c);
    int rc = s->draws ? study_draws_get(s->draws, key, s->jobs, &net, err) /* after the curves: every job idle */
                      : vijp_memory_profile_draw(tmpl, s->batch, s->seeds[0], &own, err);
    if (rc) return rc;
    if (!s->draws) net = &own;
    /* in halves of about equal time for two threads (the fork's ranges): the
     * two that solve with an LU a dense layer (Moonwalk's vijp, the
     * reversible engine's inverses) apart; measured at dense:2048 batch 16,
     * Moonwalk 3.95 s and backprop 1.24, reversible 4.37, checkpoint 0.67
     * and pure forward's counts 0.47 */
    _Static_assert(VIJP_ENGINE_COUNT == 5, "every engine in the memory table's order");
    static const vijp_engine_kind order[VIJP_ENGINE_COUNT] = {VIJP_ENGINE_MOONWALK, VIJP_ENGINE_BACKPROP,
                                                              VIJP_ENGINE_REVERSIBLE, VIJP_ENGINE_CHECKPOINT,
                                                              VIJP_ENGINE_PURE_FORWARD};
    size_t *bytes[VIJP_ENGINE_COUNT];
    for (int k = 0; k < VIJP_ENGINE_COUNT; k++) bytes[k] = mem_at(m, c, (size_t)order[k]);
    int threads = s->table_at_once > 0 && s->table_at_once < s->jobs ? s->table_at_once : s->jobs;
    if (!mpfr_buildopt_tls_p()) threads = 1; /* the helpers set MPFR's exponent range: per thread only there */
    if (!rc) rc = vijp_memory_profile_engines(net, s->batch, s->seeds[0], fd, order, VIJP_ENGINE_COUNT, &s->opts,
                                              threads, bytes, err);
    if (s->draws) study_draws_put(s->draws, key, 1);
    vijp_net_free(&own);
    return rc;
}

int memory_compute(memory_table *m, const study *s, vijp_error *err)
{
    m->s = s;
    m->bytes = vijp_alloc_array(s->n_configs * VIJP_ENGINE_COUNT * s->depth, sizeof *m->bytes);
    vijp_format fd;
    vijp_format_fixed(&fd, VIJP_DOUBLE);
    /* configs of one net share its draw: kept from one to the next */
    for (size_t c = 0; s->draws && c < s->n_configs; c++) study_draws_expect(s->draws, study_profile_draw(s, c), 1);
    for (size_t c = 0; c < s->n_configs; c++) {
        int rc = memory_config(m, s, c, &fd, err);
        for (size_t d = c + 1; rc && s->draws && d < s->n_configs; d++) /* not to come: nothing kept for them */
            study_draws_expect(s->draws, study_profile_draw(s, d), -1);
        if (rc) return rc;
    }
    return 0;
}

int fill_memory_csv(FILE *o, const void *ctx)
{
    const memory_table *m = ctx;
    fputs("config,engine_index,engine,depth,stored_bytes\n", o);
    for (size_t c = m->only ? m->only - 1 : 0; c < (m->only ? m->only : m->s->n_configs); c++)
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) {
            if (m->only && e) fputs("\n\n", o); /* one config's plot data: a gnuplot block per engine (index e) */
            for (size_t d = 0; d < m->s->depth; d++)
                fprintf(o, "%zu,%d,%s,%zu,%zu\n", c + 1, e, vijp_engine_name((vijp_engine_kind)e), d + 1, mem_at(m, c, (size_t)e)[d]);
        }
    return ferror(o);
}

/* Reversible engine: how well h_0 is rebuilt after the whole depth (and the
 * worst layer input), median over seeds, per config and format. */
void md_reconstruction(FILE *o, const study *s)
{
    size_t rr = reversible_run(s);
    if (!rr) return;
    fprintf(o, "\n## Reconstruction by inverses (reversible engine)\n\nThe reversible engine rebuilds every input of an "
               "invertible layer from h_%zu going back, with the layers' inverses; non-invertible layers (ReLU, GELU, "
               "LayerNorm, rectangular dense) keep their inputs. ‖h_i − ĥ_i‖/‖h_i‖, median over seeds: h_0 after all %zu "
               "layers, and the worst layer input. For RevNet blocks (additive coupling) this is the reconstruction "
               "RevNets rely on; Moonwalk rebuilds their inputs the same way.\n\n| config |",
            s->depth, s->depth);
    for (size_t f = 0; f < s->n_formats; f++) fprintf(o, " %s h_0 | worst |", s->formats[f].name);
    fputs("\n|---|", o);
    for (size_t f = 0; f < s->n_formats; f++) fputs("---|---|", o);
    fputc('\n', o);
    for (size_t c = 0; c < s->n_configs; c++) {
        fprintf(o, "| c%zu `%s` %s |", c + 1, s->configs[c].spec, s->configs[c].init_name);
        for (size_t f = 0; f < s->n_formats; f++) {
            vijp_xnum h0[STUDY_MAX], worst[STUDY_MAX], nan = vijp_xnum_of(NAN);
            for (size_t k = 0; k < s->n_seeds; k++) {
                const vijp_xnum *rec = study_curve(s, c, f, k)->runs[rr].reconstruction;
                h0[k] = rec ? rec[0] : nan, worst[k] = rec ? vijp_xnum_of(0) : nan;
                for (size_t i = 0; rec && i < s->depth; i++) worst[k] = vijp_xnum_max_nan(worst[k], rec[i]);
            }
            vijp_xnum a = xspread_of(h0, s->n_seeds).median, b = xspread_of(worst, s->n_seeds).median;
            char ta[40], tb[40];
            vijp_xnum_snprintf(ta, sizeof ta, "%.3g", a), vijp_xnum_snprintf(tb, sizeof tb, "%.3g", b);
            if (vijp_xnum_isnan(a)) fputs(" failed | |", o);
            else fprintf(o, " %s | %s |", ta, tb);
        }
        fputc('\n', o);
    }
}

/* Nested forward AD for the activations the study uses (DESIGN §6). */
void md_nested(FILE *o, const study *s)
{
    const char *seen[16];
    size_t ns = 0;
    for (size_t c = 0; c < s->n_configs; c++) {
        const vijp_net *net = &s->nets[s->configs[c].net];
        for (size_t i = 0; i < net->depth && ns < 16; i++) {
            const char *name = net->layers[i].type->name;
            size_t j = 0;
            while (j < ns && strcmp(seen[j], name)) j++;
            if (j == ns && vijp_composite_known(name) && net->layers[i].type->dual_eval) seen[ns++] = name;
        }
    }
    if (!ns) return;
    fputs("\n## Nested forward-mode AD (activations)\n\nEach smooth activation evaluates f on dual numbers and gets f "
          "and f′ in one sweep, so the backward pass needs f′ alone: one value per unit. A composite autograd "
          "differentiates the textbook formula op by op and keeps what each op's backward reads (counted on a tape, "
          "src/memory/composite.c); recomputation keeps x and evaluates f′ again going back (its time: `make bench`). "
          "Accuracy: worst f′ error over 8001 points of [−40, 40] against MPFR at 128 bits, in ulps of |f′|, "
          "leaving out ±0.05 around certified zeros of f′.\n\n"
          "| activation | composite formula | kept per unit: composite | nested | recompute | f′ error, nested (ulps) | "
          "composite (ulps) |\n|---|---|---|---|---|---|---|\n", o);
    for (size_t j = 0; j < ns; j++) {
        vijp_tape t;
        double x = 0.5, y;
        vijp_accuracy acc;
        if (vijp_composite_forward(seen[j], &x, 1, &y, &t)) continue;
        size_t kept = t.count;
        vijp_tape_clear(&t);
        if (vijp_composite_accuracy(seen[j], -40, 40, 8001, 0.05, &acc, NULL)) continue;
        fprintf(o, "| %s | `%s` | %zu | 1 | 1 | %.3g | %.3g%s |\n", seen[j], vijp_composite_formula(seen[j]), kept,
                acc.nested_ulps, acc.composite_ulps, acc.composite_nonfinite ? " (and NaN)" : "");
    }
}

/* Stored bytes of every engine (double): at the full depth, and the deepest
 * network within backprop's bytes at an eighth of it. */
void md_memory(FILE *o, const memory_table *m)
{
    const study *s = m->s;
    size_t ref = s->depth / 8 ? s->depth / 8 : 1;
    fprintf(o, "\n## Memory against depth (every engine, double)\n\nBytes each engine keeps between its passes "
               "(docs/DESIGN.md §2), from its own ledger, batch %zu; the *memory* plots above draw every depth. Deepest: the "
               "deepest network (up to %zu) within backprop's bytes at depth %zu, i.e. how much deeper each engine "
               "trains under the same activation budget (+: all depths run fit).\n\n| config |",
            s->batch, s->depth, ref);
    for (int e = 0; e < VIJP_ENGINE_COUNT; e++) fprintf(o, " %s bytes | deepest |", vijp_engine_name((vijp_engine_kind)e));
    fputs("\n|---|", o);
    for (int e = 0; e < VIJP_ENGINE_COUNT; e++) fputs("---|---|", o);
    fputc('\n', o);
    for (size_t c = 0; c < s->n_configs; c++) {
        fprintf(o, "| c%zu `%s` %s |", c + 1, s->configs[c].spec, s->configs[c].init_name);
        size_t budget = mem_at(m, c, VIJP_ENGINE_BACKPROP)[ref - 1];
        for (int e = 0; e < VIJP_ENGINE_COUNT; e++) {
            const size_t *b = mem_at(m, c, (size_t)e);
            size_t d = vijp_memory_deepest(b, s->depth, budget);
            fprintf(o, " %zu | %zu%s (%.3gx) |", b[s->depth - 1], d, d == s->depth ? "+" : "", (double)d / (double)ref);
        }
        fputc('\n', o);
    }
}


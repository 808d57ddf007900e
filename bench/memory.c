/* make bench (memory part): how much deeper Moonwalk mixed mode trains than
 * backprop under the same activation budget, on a leaky-ReLU stack
 * (dense:64,leaky:0.5) and a RevNet stack (additive blocks, width 64, F = G =
 * dense:32 + tanh), double, batch 1 and 32.  The budget is what backprop
 * stores at depth 256; both engines run once at depth 4096 and their ledgers
 * give every shallower depth.  Target: at least 8× deeper. */
#include "vijp/memory.h"
#include "vijp/vijp.h"
#include "bench.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 0, "Usage: bench-memory [--smoke]\n  how much deeper Moonwalk trains than backprop under the same activation budget (make bench; takes no arguments).\n");
    static const struct {
        const char *spec;
        size_t width;
    } stacks[] = {{"dense:64,leaky:0.5", 0}, {"additive", 64}};
    size_t D = smoke ? 256 : 4096, ref = smoke ? 32 : 256, batches[] = {1, 32};
    vijp_format f;
    vijp_format_fixed(&f, VIJP_DOUBLE);
    size_t *bp = malloc(D * sizeof *bp), *mw = malloc(D * sizeof *mw);
    vijp_error err;
    printf("memory: double, budget = backprop's bytes at depth %zu, engines run at depth %zu\n", ref, D);
    printf("%-20s %6s %14s %16s %16s %10s\n", "net", "batch", "budget bytes", "backprop depth", "moonwalk depth", "ratio");
    for (size_t n = 0; n < 2; n++)
        for (int b = 0; b < 2; b++) {
            const char *spec = stacks[n].spec;
            vijp_net net;
            if (vijp_net_template(&net, spec, D, stacks[n].width, &err) ||
                vijp_memory_profile(&net, batches[b], 1, &f, VIJP_ENGINE_BACKPROP, NULL, bp, &err) ||
                vijp_memory_profile(&net, batches[b], 1, &f, VIJP_ENGINE_MOONWALK, NULL, mw, &err)) {
                fprintf(stderr, "bench-memory: %s: %s\n", spec, err.msg);
                return 1;
            }
            vijp_net_free(&net);
            size_t budget = bp[ref - 1], db = vijp_memory_deepest(bp, D, budget), dm = vijp_memory_deepest(mw, D, budget);
            printf("%-20s %6zu %14zu %16zu %15zu%s %9.1f%s\n", n ? "additive (RevNet)" : spec, batches[b], budget, db, dm,
                   dm == D ? "+" : " ", (double)dm / (double)db, dm == D ? "+" : "");
        }
    printf("target: moonwalk at least 8x deeper (+: every depth run fits, the ratio is a lower bound)\n");
    free(bp), free(mw);
    return 0;
}

/* The peak bytes of one drift curve (peak.h), counted as vijp_drift_run
 * allocates them: every matrix is one block (format/mat.c: the mpfr_t
 * structs, then the significands), one per layer, so the count is per
 * block, which also says whether the heap keeps it after the free. */
#include "peak.h"
#include "vijp/layer.h"
#include "memo.h"
#include "cond.h"
#include "conditioning.h"
#include "outer.h"
#include "compare/cache.h"
#include "format/packed.h"
#include "layer/emu_native.h"
#include "base/heap.h"
#include <math.h>
#include <mpfr.h>
#include <string.h>

/* Bytes per value of a matrix in format f: a double for double and every
 * format whose values are doubles (vijp/mat.h: the emulated and mixed
 * ones), else an mpfr_t and its significand in one block (mat.c's
 * mp_block_new: no size limb, no per-value malloc header). */
static double value_bytes(const vijp_format *f)
{
    if (vijp_format_values_double(f)) return sizeof(double);
    return (double)(sizeof(mpfr_t) + mpfr_custom_get_size((mpfr_prec_t)f->prec));
}

static double mpfr_bytes(long prec)
{
    return (double)(sizeof(mpfr_t) + mpfr_custom_get_size((mpfr_prec_t)prec));
}

/* A packed value of prec bits (format/packed.h: its limbs and a 16-bit
 * head of sign, kind and exponent; the side array of exponents past the
 * heads' range is not counted: no value of a double's range needs it):
 * how the reference's levels and the reference the engines are measured
 * against hold their values (memo.c), 18 bytes at 128 bits against
 * mpfr_bytes' 48. */
static double packed_bytes(long prec) { return (double)vijp_packed_value_bytes((mpfr_prec_t)prec); }

/* A value of the memo's exact copy of the problem: a double where f's
 * values are doubles (vijp_drift_memo_copy_double), else MPFR at max(53, P). */
static double copy_bytes(const vijp_format *f)
{
    return vijp_drift_memo_copy_double(f) ? sizeof(double) : mpfr_bytes(f->prec > 53 ? (long)f->prec : 53);
}

/* Blocks from VIJP_HEAP_MMAP_BYTES on are mapped on their own and handed
 * back when freed (base/heap.h); the others come from the heap, which
 * keeps what is freed for the blocks allocated next.  Every count below
 * is a sum of bytes. */
static void add(double *b, double bytes) { *b += bytes; }

/* Per layer and value size v: parameters (θ_i or ∇θ_i), the layer's
 * outputs over the batch (g_i or h_i), the inputs' (h_0, grad_x). */
static void params(double *b, const vijp_net *net, double v)
{
    for (size_t i = 0; i < net->depth; i++) add(b, v * (double)net->layers[i].type->param_count(&net->layers[i]));
}

static void outputs(double *b, const vijp_net *net, size_t batch, double v)
{
    add(b, v * (double)(net->width * batch));
    for (size_t i = 0; i < net->depth; i++) add(b, v * (double)(net->layers[i].out * batch));
}

/* A problem (X, T, θ) at v bytes a value. */
static void problem(double *b, const vijp_net *net, size_t batch, double v)
{
    add(b, v * (double)(net->width * batch));
    add(b, v * (double)(vijp_net_out_width(net) * batch));
    params(b, net, v);
}

/* A gradient set (vijp_grads: grad_x, g_i, ∇θ_i) at v bytes a value. */
static void grads(double *b, const vijp_net *net, size_t batch, double v)
{
    params(b, net, v);
    outputs(b, net, batch, v);
}

static int is_dense(const vijp_layer *L) { return !strcmp(L->type->name, "dense"); }

/* Every dense layer's input over the batch at v bytes a value: what each
 * reference level keeps of its activations (memo.c's kept_h). */
static void dense_inputs(double *b, const vijp_net *net, size_t batch, double v)
{
    for (size_t i = 0; i < net->depth; i++)
        if (is_dense(&net->layers[i])) add(b, v * (double)(net->layers[i].in * batch));
}

/* The parameters of every layer but the dense ones at v bytes a value:
 * the lower reference level's parameter gradients (its dense ones are
 * deferred: memo.c). */
static void params_not_dense(double *b, const vijp_net *net, double v)
{
    for (size_t i = 0; i < net->depth; i++)
        if (!is_dense(&net->layers[i])) add(b, v * (double)net->layers[i].type->param_count(&net->layers[i]));
}

/* What a shared memo keeps beside a curve's engines and its conditioning:
 * its two levels packed with their dense inputs (the lower one without
 * its dense parameter gradients), the upper one's |h| (memo.c's h_abs)
 * and the exact copy of the problem. */
static void shared_memo(double *b, const vijp_net *net, size_t batch, const vijp_format *f, long ref_first)
{
    params_not_dense(b, net, packed_bytes(ref_first));
    outputs(b, net, batch, packed_bytes(ref_first));
    grads(b, net, batch, packed_bytes(2 * ref_first));
    dense_inputs(b, net, batch, packed_bytes(ref_first) + packed_bytes(2 * ref_first));
    outputs(b, net, batch, sizeof(double));
    problem(b, net, batch, copy_bytes(f));
}

/* The two levels' parameter gradients while the upper level's reverse
 * pass runs (memo.c's vijp_drift_memo_next_level), both packed as they go
 * (memo.c's pack_layer): at layer i, while ∇θ_i of the upper level is
 * computed (in_flight: its limbs in its packed block at the level's
 * precision, format/packed.h's vijp_mat_init_packing), the lower level
 * holds ∇θ_j packed (plo) for j <= i, and for j > i too where its memo is
 * shared (kept); the upper one holds ∇θ_j (phi: packed, rounded to the
 * comparisons' precision where its memo is its own) for j > i, allocated
 * as the lower level's were freed (backprop allocates each as it computes
 * it, once the one before is compared).  The heap keeps what it is handed
 * back (blocks under VIJP_HEAP_MMAP_BYTES), and the upper level's blocks, which
 * are larger, fit back into little of it: a run's own memo hands those
 * pages back to the kernel as its comparisons free them, a step of
 * VIJP_DRIFT_MEMO_RETURN_BYTES at a time (memo.c), so the resident set
 * holds the upper blocks and at most a step of the freed.  The largest over i
 * (at i = D − 1 the lower level whole, as during the forward pass).  A
 * dense layer's ∇θ_i in the upper level is formed at the lower level's
 * precision straight into its held block (memo.c's form_half): in
 * flight, phi a parameter, as once held; the lower level never forms its
 * dense ones (deferred: memo.c), which count nothing.  A
 * batch-1 dense layer's ∇θ_i is formed straight into its held block
 * (outer.c), without the structs or the level's wider limbs: a little
 * less than counted here, for one layer. */
static void levels_sweep(double *b, const vijp_net *net, double plo, double in_flight, double phi, int shared)
{
    double top = 0;
    for (size_t i = net->depth; i-- > 0;) {
        double at = 0;
        double freed = 0, since = 0; /* heap bytes of the lower level freed, of the upper allocated */
        for (size_t j = 0; j < net->depth; j++) {
            double P = (double)net->layers[j].type->param_count(&net->layers[j]);
            int dense = is_dense(&net->layers[j]);
            double flight = dense ? phi : in_flight;
            double lo = dense ? 0 : plo * P, hi = j == i ? flight * P : j > i ? phi * P : 0; /* dense: deferred */
            if (j <= i || shared) add(&at, lo);
            else if (lo < VIJP_HEAP_MMAP_BYTES) freed += lo;
            if (hi >= VIJP_HEAP_MMAP_BYTES || shared) add(&at, hi);
            else since += hi;
        }
        /* the lower level's freed blocks handed back in steps (memo.c) */
        add(&at, since + (freed < VIJP_DRIFT_MEMO_RETURN_BYTES ? freed : VIJP_DRIFT_MEMO_RETURN_BYTES));
        if (at > top) top = at;
    }
    *b += top;
}

/* The widest layer output over the batch at v bytes a value: a second
 * level's cotangent g_i packed beside its MPFR block (pack_layer). */
static double widest_output(const vijp_net *net, size_t batch, double v)
{
    double w = v * (double)(net->width * batch);
    for (size_t i = 0; i < net->depth; i++)
        if (v * (double)(net->layers[i].out * batch) > w) w = v * (double)(net->layers[i].out * batch);
    return w;
}

/* The most parameters of a layer; twin_only: of a layer whose type reads a
 * double θ through an MPFR twin at 53 bits, made for each operator call
 * and freed after it (src/layer/layer.c): every type but those whose MPFR
 * operators read θ's doubles themselves (dense: layer/emu_native.h's
 * mp_*).  The reference holds one twin where the memo's copy is in double. */
static double widest_params(const vijp_net *net, int twin_only)
{
    double widest = 0;
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer_type *T = net->layers[i].type;
        double p = (double)T->param_count(&net->layers[i]);
        if (!(twin_only && T->emu_native && T->emu_native->mp_forward) && p > widest) widest = p;
    }
    return widest;
}

/* While the reference's reverse pass forms a layer's parameter gradient
 * at v bytes an MPFR value: a dense layer's in a block of columns at a
 * time (outer.h: at most DRIFT_OUTER_BLOCK_BYTES of MPFR values) and, at
 * batch 2 and more, the fast products' outputs for that block
 * (emu/dense_ref.c's problem_alloc: six doubles an output), or while its
 * vjp runs, their transposed copy of W (a double a weight), whichever is
 * larger; another type's limbs in its packed block, pointed at by an
 * mpfr_t struct a value.  A block from the heap, of either kind, counts
 * twice: measured at dense:1024 batch 16, the resident set rises by about
 * two layers' scratch between the heap's returns (memo.c), as the held
 * block of one layer takes the place that the next layer's scratch would
 * have reused; a mapped one goes back whole when freed. */
static double scratch_block(double bytes) { return bytes < VIJP_HEAP_MMAP_BYTES ? 2 * bytes : bytes; }

static double param_scratch(const vijp_net *net, size_t batch, double v)
{
    double widest = 0;
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        double p = (double)L->type->param_count(L), b = scratch_block(sizeof(mpfr_t) * p);
        if (!strcmp(L->type->name, "dense")) {
            double block = v * p < DRIFT_OUTER_BLOCK_BYTES ? v * p : DRIFT_OUTER_BLOCK_BYTES;
            double fast = batch > 1 ? 6 * sizeof(double) * block / v : 0, wt = sizeof(double) * (double)(L->out * L->in);
            b = scratch_block(block) + scratch_block(fast);
            if (scratch_block(wt) > b) b = scratch_block(wt);
        }
        if (b > widest) widest = b;
    }
    return widest;
}

/* The reference's phase while the level at hi bits is computed and
 * compared with the one below it, held packed at lo bits: the memo's
 * exact copy of the problem (memo.c; in double, with the MPFR twin of one
 * layer's θ while that layer's operators run: widest_params), the lower
 * level's cotangents (packed), the upper one's activations h_0..h_D and its
 * cotangents (allocated in MPFR at the start, each packed as its layer is
 * done: at most all of them in MPFR and one beside its packed copy), and
 * the levels' parameter gradients as the upper level's reverse pass frees
 * the lower one's (levels_sweep); the upper level's layers are then held
 * at held bits.  θ in f is released meanwhile where the curve has a memo of
 * its own (drift.c), held where the memo is shared. */
static double level_phase(const vijp_net *net, size_t batch, double vf, double vcopy, int copy_double, long lo,
                          long hi, long held, int shared)
{
    double ref = 0;
    double vhi = mpfr_bytes(hi), phi = packed_bytes(hi);
    if (copy_double) add(&ref, mpfr_bytes(53) * widest_params(net, 1));
    if (shared) problem(&ref, net, batch, vf);
    else add(&ref, vf * (double)(net->width * batch)), add(&ref, vf * (double)(vijp_net_out_width(net) * batch));
    problem(&ref, net, batch, vcopy);
    outputs(&ref, net, batch, vhi);
    outputs(&ref, net, batch, vhi);
    outputs(&ref, net, batch, packed_bytes(lo));
    add(&ref, widest_output(net, batch, phi));
    if (shared) outputs(&ref, net, batch, sizeof(double)); /* the upper level's |h| (memo.c's h_abs), kept */
    add(&ref, param_scratch(net, batch, vhi));
    /* the dense inputs: the lower level's whole (a run's own memo frees
     * each as its layer is compared: not counted), the upper one's */
    dense_inputs(&ref, net, batch, packed_bytes(lo) + packed_bytes(hi));
    levels_sweep(&ref, net, packed_bytes(lo), phi, packed_bytes(held), shared);
    return ref;
}

drift_peak drift_peak_bytes(const vijp_net *net, size_t batch, const vijp_format *f, long ref_first, int shared)
{
    /* the memo's exact copy: doubles where f's values are (memo.c) */
    int copy_double = vijp_drift_memo_copy_double(f);
    double vf = value_bytes(f), vcopy = copy_bytes(f);
    long q = vijp_compare_prec(f), second = 2 * ref_first;
    /* The net's double θ is the study's draw (study/draws.h), shared by
     * the curves of a seed: drift_peak_draw_bytes counts it.  The second
     * level against the first, its layers held at the comparisons'
     * precision q as they are packed, where the memo is the curve's own (memo.c);
     * a shared memo keeps every level at its own precision.  A third level,
     * computed where the two disagree, is not counted (docs/memory.md). */
    double ref = level_phase(net, batch, vf, vcopy, copy_double, ref_first, second, shared || q >= second ? second : q,
                             shared);
    /* An engine's run: the problem in f, the reference (packed, at the
     * comparisons' precision q where that is narrower: a curve's own level
     * rounded in place, or a shared memo's copy of it, the memo keeping
     * its two levels, packed, with the copy of the problem), its gradients
     * in f (∇x and the cotangents whole, the parameter gradients one layer
     * at a time: each is compared and freed as the run finishes it,
     * drift.c's param_watch) and the most any engine stores (backprop's
     * activations), beside a layer's double copy for a solve (the largest
     * layer's parameters). */
    double eng = 0;
    problem(&eng, net, batch, vf);
    grads(&eng, net, batch, packed_bytes(q < second ? q : second));
    if (shared) shared_memo(&eng, net, batch, f, ref_first); /* every level it computed, and its copy */
    outputs(&eng, net, batch, vf);
    add(&eng, vf * widest_params(net, 0));
    outputs(&eng, net, batch, vf);
    add(&eng, sizeof(double) * widest_params(net, 0));
    /* The reference phase's heap blocks are not counted beside the
     * engines': the curve hands the heap's free pages back between the
     * phases (drift.c), and the exact copy of θ, where it is in double,
     * becomes the engines' θ in f (memo.c), counted above.  Measured on
     * twelve studies against counting them whole, as this did before: the
     * deep double ones at +5 to +11% instead of +25 to +31% (docs/memory.md). */
    return (drift_peak){ref >= eng ? ref : eng};
}

int drift_peak_cond_threads(const vijp_net *net, size_t batch, const vijp_format *f, long ref_first, int shared,
                            size_t exact_max, int threads)
{
    double part = 0;
    for (size_t i = 0; i < net->depth; i++) {
        const vijp_layer *L = &net->layers[i];
        if (L->type->declare(L) & VIJP_DECL_LINEAR || drift_layer_elementwise(L)) continue; /* one sample, or no J */
        double m = (double)L->out, n = (double)L->in, r = m < n ? m : n, big = m > n ? m : n;
        /* J, and as much again twice where a block forms it column by column
         * from jvps (layer/chain.c: its scratch and a sub-layer's outputs);
         * dgesdd's workspace without vectors (3r + max(m, n, 7r) doubles
         * and 8r ints) and the singular values; where it is wide, the LU
         * factors, the Lanczos vectors and the pivots (cond.h) */
        double J = 3 * m * n + 5 * r + (big > 7 * r ? big : 7 * r) + 4 * r;
        if (drift_layer_wide(L, exact_max)) J += n * n + n * (double)(cond_lanczos_steps(L->in) + 2);
        if (sizeof(double) * J > part) part = sizeof(double) * J;
    }
    if (threads <= 1 || batch < 2 || part == 0) return 1; /* no layer's samples run in parallel */
    double held = 0;
    problem(&held, net, batch, value_bytes(f));
    add(&held, 2 * widest_output(net, batch, sizeof(double))); /* a layer's input and output in double */
    if (!vijp_format_values_double(f)) add(&held, sizeof(double) * widest_params(net, 0)); /* θ_i in double */
    if (drift_net_square(net) && net->width <= exact_max) /* Benettin's exact iteration: Q, Z, the sums and τ */
        add(&held, sizeof(double) * (2.0 * (double)net->width * (double)net->width + 2.0 * (double)net->width));
    if (shared) shared_memo(&held, net, batch, f, ref_first);
    double room = drift_peak_bytes(net, batch, f, ref_first, shared).peak - held;
    double fit = room > 0 ? floor(room / part) : 1;
    return fit < 1 ? 1 : fit < threads ? (int)fit : threads;
}

double drift_peak_draw_bytes(const vijp_net *net)
{
    double b = 0;
    params(&b, net, sizeof(double));
    return b;
}

double drift_peak_profile_bytes(const vijp_net *net, size_t batch, size_t at_once)
{
    /* vijp_memory_profile_engines on the study's draw (drift_peak_draw_bytes):
     * the problem in double, and each engine running its double gradients
     * and backprop's double activations */
    double b = 0, engine = 0;
    problem(&b, net, batch, sizeof(double));
    grads(&engine, net, batch, sizeof(double));
    outputs(&engine, net, batch, sizeof(double));
    return b + (double)(at_once ? at_once : 1) * engine;
}

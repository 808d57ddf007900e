/* vijp drift and vijp report: error-versus-depth studies written as reports. */
#include "report/atomic.h"
#include "vijp/error.h"
#include "cli.h"
#include "study/progress.h"
#include "mpi/mpi.h"
#include "report/resume.h"
#include "study/unit_io.h"
#include "study/stats.h"
#include "report/write.h"
#include "vijp/vijp.h"
#include "drift/peak.h"
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char help_drift[] =
    "usage: vijp drift [options]\n"
    "\n"
    "Measure how far gradients rebuilt by Moonwalk's vijp (or pure forward) drift\n"
    "from exact backprop, layer by layer, in each format, against a validated MPFR\n"
    "reference computed from the same rounded weights and inputs.  Writes a report\n"
    "folder (drift.json, drift.csv, curves.csv, summary.csv, memory.csv, PNG/SVG\n"
    "plots, report.md) and prints the verdict table.\n"
    "\n"
    "The folder is replaced all or nothing: the new report is written beside it\n"
    "and swapped in at once, so a failed or killed run leaves the previous report\n"
    "whole.  Files vijp did not write (those not listed in the folder's\n"
    ".vijp-manifest) and subfolders are kept, and the folder and every subfolder\n"
    "keep their owner, group and mode (they are new folders: new inode numbers).\n"
    "One run per folder at a time (a lock file beside it); the folder's parent\n"
    "must be writable.  Refused before computing (exit 2, nothing written): a\n"
    "folder that is or holds a mount point; --out . or any folder holding the\n"
    "working directory (replacing it would leave the shell in a deleted folder);\n"
    "a folder holding a FIFO, socket or device; a folder, link or file (one it\n"
    "may not hard-link) whose copy would need an owner or group this run cannot\n"
    "give (not root, and not its owner in that group).\n"
    "\n"
    "  --net SPEC        layers, cycled to the depth; repeat for several networks;\n"
    "                    or FILE.json, a net in JSON (docs/nets.md),\n"
    "                    whose layers set the depth (default dense:32,leaky:0.5)\n"
    "  --input X.npy     inputs, shape [batch, width], instead of seeded ones\n"
    "  --weights F       parameters from a safetensors file (<i>.weight, <i>.bias,\n"
    "                    <i>.theta; i the 0-based layer); other layers keep --init\n"
    "  --init LIST       orthogonal | gaussian | kaiming-uniform | scaled:G, comma\n"
    "                    list (kaiming-uniform: PyTorch's nn.Linear default); every net is\n"
    "                    run with every initialisation (default orthogonal)\n"
    "  --depth D         layers (default 64); one run gives every layer's error\n"
    "  --width N         input width (default: the first dense layer's)\n"
    "  --batch B         samples per gradient (default 1)\n"
    "  --formats LIST    bfloat16,binary16,binary32,double,mpfr:P, and the mixed\n"
    "                    bfloat16+binary32, binary16+binary32, tf32+binary32\n"
    "                    (storage+accumulation, as matrix hardware computes);\n"
    "                    OCP FP8: e4m3, e5m2 (overflowing to NaN and ±Inf),\n"
    "                    e4m3:sat, e5m2:sat (saturating to ±448, ±57344),\n"
    "                    e4m3+binary32, e5m2+binary32 (FP8 storage)\n"
    "                    OCP MX: mxfp8, mxfp8e5m2, mxfp6, mxfp6e3m2, mxfp4, each\n"
    "                    [:ceil], +binary32 (mxfp4:ceil+binary32)\n"
    "                    STORE+tc:ARCH: a tensor core's accumulation, ARCH v100,\n"
    "                    a100, h100, b200 (bfloat16+tc:h100, e4m3+tc:h100)\n"
    "                    nvfp4+binary32, fp8[:pow2]+binary32 (tensor-scaled)\n"
    "                    :ftz flushes subnormals (bfloat16:ftz+binary32,\n"
    "                    bfloat16+binary32:ftz, binary32:ftz); :sr rounds the\n"
    "                    storage stochastically, from --seeds (bfloat16:sr+binary32)\n"
    "                    (default bfloat16,binary32,double); mpfr:P up to\n"
    "                    P = R/2 - 64 for --ref-prec-max R (R/4 under 256):\n"
    "                    mpfr:%ld by default;\n"
    "                    double@ref, double@avx2, double@avx512, double@cuda:\n"
    "                    double through that kernel set (VIJP_KERNELS picks\n"
    "                    plain double's);\n"
    "                    binary32@ref, binary32@avx2, …: float32 through that\n"
    "                    set and BLAS's sgemm, the emulation where a layer has\n"
    "                    no float operators; bfloat16+binary32@SET and\n"
    "                    binary16+binary32@SET: the same on storage values,\n"
    "                    each result rounded to storage; @cuda: on a GPU\n"
    "                    (cuBLAS, tensor cores for the mixed ones)\n"
    "  --engines LIST    engines that rebuild gradients: moonwalk, pure-forward,\n"
    "                    reversible, checkpoint, or all\n"
    "                    (default moonwalk); backprop is always measured\n"
    "  --seeds LIST      comma list of seeds (default 1,2,3); spreads are over seeds\n"
    "  --segment K       checkpoint engine: layers per segment (default ⌈√depth⌉)\n"
    "  --loss L          square | linear (default square)\n"
    "  --tol F=T,...     tolerance of the safe depth per format (defaults: 2e-1\n"
    "                    e4m3, 3e-1 e5m2, and their :sat and +binary32, 1e-2\n"
    "                    bfloat16/binary16 and their +binary32 and tf32+binary32,\n"
    "                    1e-4 binary32, 1e-10 double, 2^(-P/2) mpfr:P)\n"
    "  --ref-prec P      first reference precision (default max(64, min(2P, P+64))),\n"
    "                    doubled until two successive references agree\n"
    "  --ref-prec-max P  give up past P bits (default 8192, at most 65536); the\n"
    "                    first reference precision must double at least once\n"
    "                    within it\n"
    "  --out DIR         report folder (default reports/drift); not ., nor a\n"
    "                    folder holding the working directory or a mount point\n"
    "  --resume          continue a study that was killed or failed: curves it\n"
    "                    finished are kept beside DIR (.DIR.vijp-units/, removed\n"
    "                    once the report is written) and only the others are\n"
    "                    computed; the report is the one an uninterrupted run\n"
    "                    writes.  Refused (exit 2) if any parameter of the study\n"
    "                    changed.  Without --resume, kept curves are discarded\n"
    "  --jobs N          worker threads (default: the online CPUs; under mpirun,\n"
    "                    rank 0's, default 1: start one rank per core)\n"
    "  --progress, --no-progress\n"
    "                    progress meter on stderr: curves done, time elapsed and\n"
    "                    left (default: only when stderr is a terminal, without -q,\n"
    "                    and not in CI)\n"
    "  --no-plots        skip gnuplot (the CSVs still hold every curve)\n"
    "  --max-memory BYTES\n"
    "                    the most resident memory the study may take (K, M, G\n"
    "                    allowed; default: what is available): curves run at\n"
    "                    once only as far as they fit, the jobs left over inside\n"
    "                    them; refused (exit 2) if one curve alone does not fit\n"
    "  --estimate-memory print the study's peak memory (resident set) as it is\n"
    "                    sized before running, and how many curves at once, and\n"
    "                    stop (docs/memory.md)\n"
    "  -q, --quiet       print nothing on success, and no progress meter\n"
    "  -h, --help        this help\n"
    "\n"
    "Under mpirun -n P (a vijp built with MPI), the curves are spread over the\n"
    "ranks, largest first, each rank taking the next as it finishes one; rank 0\n"
    "also computes, gathers every curve and writes the report, byte for byte the\n"
    "one a single process writes.  A rank that dies ends the run (mpirun stops\n"
    "them all): rank 0 names the curves the ranks had, and --resume continues.\n"
    "\n"
    "Exit status: 0 success, 1 the computation or the writing failed (e.g. the\n"
    "reference did not settle, the disk is full, something was mounted in the\n"
    "folder during the run; the previous report is left as it was), 2 bad usage\n"
    "or input, or another run is writing the same folder, or the folder is\n"
    "refused as above (nothing is written), or --resume found the curves of\n"
    "another study.\n"
    "Stopped by SIGINT or SIGTERM, the run leaves the previous report as it was\n"
    "and dies of the signal (a shell shows 130, 143); the curves it finished\n"
    "are kept for --resume.\n";

static const char help_report[] =
    "usage: vijp report [options]\n"
    "\n"
    "The default study, the toolkit's main job: dense:32 + leaky ReLU with slope\n"
    "0.1, 0.5 and 0.9; a RevNet stack (additive coupling blocks, F = G = dense:16 +\n"
    "tanh); dense:32 + GELU and + Mish (nested forward-mode AD); and a mixed\n"
    "ReLU/LayerNorm network whose vijps need fragments.  Orthogonal and Gaussian\n"
    "initialisation, in bfloat16, bfloat16+binary32 (bf16 storage, binary32\n"
    "accumulation: how much of bf16's loss is the accumulation), fp8+binary32\n"
    "(TransformerEngine's FP8 with per-tensor scales), mxfp8+binary32 (OCP MX\n"
    "blocks), binary32, double and mpfr:113, to depth 256,\n"
    "seeds 1,2,3; Moonwalk and the reversible engine against backprop, and every\n"
    "engine's stored bytes against depth.\n"
    "Writes reports/latest/, replaced all or nothing as 'vijp drift' replaces its\n"
    "--out folder.  Takes every option of 'vijp drift' to change a part of the\n"
    "study (for example --depth 64 --seeds 1 for a quick look).\n"
    "\n"
    "--resume and mpirun -n P work as for 'vijp drift'.\n"
    "\n"
    "Exit status: 0 success, 1 the computation or the writing failed (the previous\n"
    "report is left as it was), 2 bad usage or input, or another run is writing\n"
    "the same folder, or the folder is refused as 'vijp drift' refuses its --out\n"
    "(a mount point in it, the working directory in it, an owner this run cannot\n"
    "keep).  Stopped by SIGINT or SIGTERM: as 'vijp drift'.\n";

static char *quoted_command(int argc, char **argv, const char *prefix)
{
    size_t len = strlen(prefix) + 1;
    for (int i = 0; i < argc; i++) len += 4 * strlen(argv[i]) + 3;
    char *out = vijp_alloc(len), *p = out;
    if (!out) return NULL;
    p += sprintf(p, "%s", prefix);
    for (int i = 0; i < argc; i++) {
        int plain = *argv[i] != 0;
        for (const char *c = argv[i]; *c; c++) plain &= !!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/+", *c);
        *p++ = ' ';
        if (plain) p += sprintf(p, "%s", argv[i]);
        else {
            *p++ = '\'';
            for (const char *c = argv[i]; *c; c++) p += *c == '\'' ? sprintf(p, "'\\''") : sprintf(p, "%c", *c);
            *p++ = '\'';
        }
    }
    *p = 0;
    return out;
}

/* A statistic in the verdict table; "-" where there is none (a growth or
 * bits-needed fit needs 4 layers under the ceiling): never "nan" as if it
 * were a number. */
static const char *cell(char *buf, size_t size, const char *fmt, double v)
{
    if (isfinite(v)) snprintf(buf, size, fmt, v);
    else snprintf(buf, size, "-");
    return buf;
}

/* Gradients that left the format's range are measured, not failed (see
 * vijp_drift_run_result.nonfinite): said in words under the table. */
static void print_overflows(const study *s)
{
    FILE *out = cli_out();
    size_t shown = 0, total = 0;
    for (size_t c = 0; c < s->n_configs; c++)
        for (size_t f = 0; f < s->n_formats; f++)
            for (size_t k = 0; k < s->n_seeds; k++) {
                const vijp_drift_curve *cu = study_curve(s, c, f, k);
                for (size_t r = 0; r < cu->n_runs; r++) {
                    if (!cu->runs[r].nonfinite[0]) continue;
                    if (total++ < 8)
                        fprintf(out, "c%zu %s seed %llu, %s: %s\n", c + 1, s->formats[f].name, (unsigned long long)s->seeds[k],
                               vijp_engine_name(cu->runs[r].engine), cu->runs[r].nonfinite), shown++;
                }
            }
    if (total > shown) fprintf(out, "(and %zu more runs whose gradients left their format's range)\n", total - shown);
    if (total) fprintf(out, "(those errors are infinite: above every tolerance, as the safe depths say)\n");
}

static void print_verdicts(const study *s)
{
    FILE *out = cli_out();
    int wn = 24, wf = 9; /* columns as wide as their longest entry */
    for (size_t c = 0; c < s->n_configs; c++)
        if ((int)strlen(s->configs[c].spec) > wn) wn = (int)strlen(s->configs[c].spec);
    for (size_t f = 0; f < s->n_formats; f++)
        if ((int)strlen(s->formats[f].name) > wf) wf = (int)strlen(s->formats[f].name);
    fprintf(out, "%-4s %-*s %-11s %-*s %8s %10s %14s %12s %12s %8s %10s\n", "cfg", wn, "net", "init", wf, "format", "tol",
           "safe depth", "backprop depth", "growth/layer", "predicted", "bits", "price");
    for (size_t c = 0; c < s->n_configs; c++) {
        int *hp = config_has_param(s, c);
        for (size_t f = 0; f < s->n_formats && hp; f++) {
            double v[6][STUDY_MAX];
            for (size_t k = 0; k < s->n_seeds; k++) {
                run_stats st, bp;
                const vijp_drift_curve *cu = study_curve(s, c, f, k);
                run_stats_of(cu, verdict_run(s), hp, s->tol[f], (long)s->formats[f].prec, &st);
                run_stats_of(cu, 0, hp, s->tol[f], (long)s->formats[f].prec, &bp); /* backprop's own, in the same format */
                v[0][k] = st.safe_depth, v[1][k] = st.growth_rate, v[2][k] = cu->predicted_rate, v[3][k] = st.bits_needed;
                if (st.bits_extrapolated) v[3][k] = -v[3][k];
                v[4][k] = st.price, v[5][k] = bp.safe_depth;
            }
            double bits = spread_of(v[3], s->n_seeds).median;
            char g[32], p[32], b[32], pr[32];
            char tol[40];
            vijp_xnum_snprintf(tol, sizeof tol, "%8.0e", s->tol[f]);
            fprintf(out, "c%-3zu %-*s %-11s %-*s %s %10.0f %14.0f %12s %12s %7s%s %10s\n", c + 1, wn, s->configs[c].spec,
                   s->configs[c].init_name, wf, s->formats[f].name, tol, spread_of(v[0], s->n_seeds).median,
                   spread_of(v[5], s->n_seeds).median,
                   cell(g, sizeof g, "%.3g", spread_of(v[1], s->n_seeds).median),
                   cell(p, sizeof p, "%.3g", spread_of(v[2], s->n_seeds).median), cell(b, sizeof b, "%.0f", fabs(bits)),
                   bits < 0 ? "†" : " ", cell(pr, sizeof pr, "%.3g", spread_of(v[4], s->n_seeds).median));
        }
        free(hp);
    }
    fprintf(out, "(medians over %zu seed%s; † extrapolated along the growth fit; - none: no fit, fewer than 4 layers under "
           "its ceiling, or no finite price; report: %s/report.md)\n", s->n_seeds, s->n_seeds > 1 ? "s" : "", s->out_dir);
    print_overflows(s);
}

/* The bytes of the nets the study's curves draw (study/draws.h): one per
 * config and seed.  All may be held at once: a draw is kept until the last
 * of its curves has rounded it, and the curves run format by format. */
static double curve_draw_bytes(const study *s)
{
    double bytes = 0;
    for (size_t c = 0; c < s->n_configs; c++)
        bytes += (double)s->n_seeds * drift_peak_draw_bytes(&s->nets[s->configs[c].net]);
    return bytes;
}

/* Whether the report's memory table holds net k's draw while it runs
 * config c: it draws each config's net again (the curves handed theirs
 * back, sections.c) and keeps it from the net's first config to its last. */
static int table_holds(const study *s, size_t k, size_t c)
{
    int from = 0, until = 0;
    for (size_t d = 0; d < s->n_configs; d++)
        if (s->configs[d].net == k) from |= d <= c, until |= d >= c;
    return from && until;
}

/* The bytes of the nets the memory table holds at once. */
static double table_draw_bytes(const study *s)
{
    double most = 0;
    for (size_t c = 0; c < s->n_configs; c++) {
        double held = 0;
        for (size_t k = 0; k < s->n_nets; k++)
            if (table_holds(s, k, c)) held += drift_peak_draw_bytes(&s->nets[k]);
        if (held > most) most = held;
    }
    return most;
}

/* Size the study before running it (drift/peak.h, docs/memory.md): the peak
 * RSS is this process's RSS now, plus, for each worker running at once,
 * one of the largest curves' peaks, beside the nets drawn where a curve may still
 * start while others run; or, later, the report's memory table (engines
 * run in double on the study's jobs) beside its nets, whichever is larger:
 * the curves' heaps give their free pages back before the report
 * (study.c's study_pool_finish).  The parts that do not depend on the
 * curves at once, found once. */
typedef struct {
    double fixed;     /* the process now and its arenas */
    double draws;     /* the nets the curves draw */
    size_t curves, groups; /* curves, and groups of them sharing a reference (run in turn on one worker) */
    double *peaks;    /* every curve's peak, largest first (curves of them) */
    /* the report's memory table: its nets, its problem, an engine's run */
    double profile_draws, profile_problem, profile_engine;
} study_sizes;

static int larger_first(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static study_sizes study_sizes_of(const study *s)
{
    study_sizes z = {.fixed = cli_resident_bytes() + DRIFT_PEAK_PROCESS_BYTES, .draws = curve_draw_bytes(s),
                     .curves = s->n_configs * s->n_formats * s->n_seeds, .groups = study_reference_groups(s),
                     .profile_draws = table_draw_bytes(s)};
    z.peaks = vijp_alloc_array(z.curves, sizeof *z.peaks);
    size_t k = 0;
    for (size_t c = 0; c < s->n_configs; c++) {
        const vijp_net *net = &s->nets[s->configs[c].net];
        for (size_t f = 0; f < s->n_formats; f++) {
            const vijp_format *F = &s->formats[f];
            drift_peak b = drift_peak_bytes(net, s->batch, F, vijp_drift_ref_prec_first(F, s->ref_prec_start),
                                            study_format_shares_reference(s, f));
            for (size_t seed = 0; seed < s->n_seeds; seed++) z.peaks[k++] = b.peak;
        }
        double p = drift_peak_profile_bytes(net, s->batch, 1), e = drift_peak_profile_bytes(net, s->batch, 2) - p;
        if (p - e > z.profile_problem) z.profile_problem = p - e;
        if (e > z.profile_engine) z.profile_engine = e;
    }
    qsort(z.peaks, z.curves, sizeof *z.peaks, larger_first);
    return z;
}

/* The peak with at_once workers each running a group of curves (those
 * sharing a reference) in turn, and the memory table's engines table at a
 * time: the at_once largest curves' peaks at once (curves of one group run
 * in turn, so this bounds the groups' too).  Where every curve starts at
 * once, each alone in its group, the draws are handed back before any
 * curve's peak (after its first seconds: drift/drawn.h); else a curve may
 * start while others peak. */
static double study_peak_bytes(const study_sizes *z, size_t at_once, size_t table)
{
    double draws = z->curves <= at_once && z->groups == z->curves ? 0 : z->draws, curves = draws;
    for (size_t k = 0; k < at_once && k < z->curves; k++) curves += z->peaks[k];
    double profile = z->profile_draws + z->profile_problem + (double)table * z->profile_engine;
    return z->fixed + (curves > profile ? curves : profile);
}

/* The curves computed at once (s->at_once): one per job, as many as there
 * are groups of curves to run (a group shares a reference), or fewer
 * where that many would not fit the memory, the least of what is
 * available and max_memory (0: no such limit); the jobs left over then
 * run inside the curves (study.c's curve_threads, docs/scale-out.md), the
 * same numbers on any threads.  0 if even one curve at a time does not
 * fit, said on stderr; with estimate_only, the estimate is said on stdout
 * instead and the study is not refused. */
static int plan_memory(study *s, const char *name, size_t max_memory, int estimate_only)
{
    size_t units = study_reference_groups(s), jobs = s->jobs > 0 ? (size_t)s->jobs : 1;
    size_t most = jobs < units ? jobs : units, k = most > 0 ? most : 1;
    char why[64];
    double avail = cli_memory_limit((double)max_memory, "--max-memory", why, sizeof why);
    study_sizes z = study_sizes_of(s);
    size_t t = jobs < VIJP_ENGINE_COUNT ? jobs : VIJP_ENGINE_COUNT; /* the memory table's engines at once */
    while (t > 1 && study_peak_bytes(&z, 1, t) > avail) t--;
    while (k > 1 && study_peak_bytes(&z, k, t) > avail) k--;
    double need = study_peak_bytes(&z, k, t);
    s->at_once = (int)k, s->table_at_once = (int)t;
    free(z.peaks);
    if (!estimate_only) return cli_memory_fits_in(name + 5 /* past "vijp " */, need, avail, why);
    char h[32];
    cli_human_bytes(need, h, sizeof h);
    fprintf(cli_out(), "%s: peak memory about %s (%.0f bytes of resident set), %zu curve%s at once on %zu job%s", name,
            h, need, k, k == 1 ? "" : "s", jobs, jobs == 1 ? "" : "s");
    if (need > avail) {
        char b[32];
        cli_human_bytes(avail, b, sizeof b);
        fprintf(cli_out(), "; more than the %s available (%s): it would be refused", b, why);
    }
    fputc('\n', cli_out());
    return 1;
}

static void keep_unit(void *units, size_t j, const vijp_drift_curve *c) { unit_store_save(units, j, c); }

/* What the command line asked for, beside what it sets in the study. */
typedef struct {
    const char *name; /* "vijp drift" or "vijp report" */
    int is_report;
    const char *specs[STUDY_MAX];
    size_t n_specs;
    const char *inits, *formats, *seeds, *engines, *tols;
    int forced_progress; /* --progress 1, --no-progress -1 */
    int quiet, depth_given, batch_given, loss_given, resume, jobs_given;
    int estimate_memory; /* --estimate-memory: say the study's peak memory and stop */
    size_t max_memory;   /* --max-memory BYTES (0: what is available) */
} drift_args;

/* The defaults of drift, or of report (its embedded default study). */
static void defaults(drift_args *a, study *s, int is_report)
{
    *a = (drift_args){.name = is_report ? "vijp report" : "vijp drift", .is_report = is_report,
                      .inits = is_report ? "orthogonal,gaussian" : "orthogonal",
                      .formats = is_report ? "bfloat16,bfloat16+binary32,fp8+binary32,mxfp8+binary32,binary32,double,mpfr:113"
                                           : "bfloat16,binary32,double",
                      .seeds = "1,2,3", .engines = is_report ? "moonwalk,reversible" : "moonwalk"};
    memset(s, 0, sizeof *s);
    s->depth = is_report ? 256 : 64;
    s->batch = 1;
    s->out_dir = is_report ? "reports/latest" : "reports/drift";
    s->jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    s->plots = 1;
}

/* Options into a and s; -1 to go on, or the exit status (--help, bad usage). */
static int parse_args(int argc, char **argv, drift_args *a, study *s)
{
    enum { O_INPUT = 300, O_WEIGHTS, O_RESUME, O_FORMAT, O_TOL = 256, O_REFP, O_REFMAX, O_PROG, O_NOPROG, O_NOPLOTS, O_SEGMENT, O_ESTMEM, O_MAXMEM };
    static const struct option opts[] = {
        {"net", 1, 0, 'n'},      {"init", 1, 0, 'i'},       {"depth", 1, 0, 'd'},    {"width", 1, 0, 'w'},
        {"batch", 1, 0, 'b'},    {"formats", 1, 0, 'f'},    {"engines", 1, 0, 'e'},  {"seeds", 1, 0, 's'},
        {"loss", 1, 0, 'l'},     {"tol", 1, 0, O_TOL},      {"ref-prec", 1, 0, O_REFP}, {"ref-prec-max", 1, 0, O_REFMAX},
        {"out", 1, 0, 'o'},      {"jobs", 1, 0, 'j'},       {"progress", 0, 0, O_PROG}, {"no-progress", 0, 0, O_NOPROG},
        {"no-plots", 0, 0, O_NOPLOTS}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},   {"segment", 1, 0, O_SEGMENT},
        {"input", 1, 0, O_INPUT}, {"weights", 1, 0, O_WEIGHTS}, {"resume", 0, 0, O_RESUME},
        {"estimate-memory", 0, 0, O_ESTMEM}, {"max-memory", 1, 0, O_MAXMEM},
        {"format", 2, 0, O_FORMAT}, /* refused: not an abbreviation of --formats */
        {0, 0, 0, 0},
    };
    const char *name = a->name;
    vijp_error err = {0};
    unsigned long long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (a->n_specs == STUDY_MAX) return fprintf(stderr, "%s: at most %d --net\n", name, STUDY_MAX), EXIT_USAGE;
            a->specs[a->n_specs++] = optarg;
            break;
        case 'i': a->inits = optarg; break;
        case 'd': if (cli_parse_size("--depth", optarg, 1, 100000, &v)) return EXIT_USAGE; s->depth = v, a->depth_given = 1; break;
        case 'w': if (cli_parse_size("--width", optarg, 1, 1u << 16, &v)) return EXIT_USAGE; s->width = v; break;
        case 'b': if (cli_parse_size("--batch", optarg, 1, 1000000, &v)) return EXIT_USAGE; s->batch = v, a->batch_given = 1; break;
        case 'f': a->formats = optarg; break;
        case 'e': a->engines = optarg; break;
        case 's': a->seeds = optarg; break;
        case 'l': if (vijp_loss_parse(optarg, &s->loss, &err)) return cli_usage_error(a->name, &err); a->loss_given = 1; break;
        case O_INPUT: s->input = optarg; break;
        case O_WEIGHTS: s->weights = optarg; break;
        case O_RESUME: a->resume = 1; break;
        case O_TOL: a->tols = optarg; break;
        case O_REFP: if (cli_parse_size("--ref-prec", optarg, VIJP_PREC_MIN, VIJP_PREC_MAX, &v)) return EXIT_USAGE; s->ref_prec_start = (long)v; break;
        case O_REFMAX: if (cli_parse_size("--ref-prec-max", optarg, VIJP_PREC_MIN, VIJP_PREC_MAX, &v)) return EXIT_USAGE; s->ref_prec_max = (long)v; break;
        case 'o': s->out_dir = optarg; break;
        case 'j': if (cli_parse_size("--jobs", optarg, 1, 256, &v)) return EXIT_USAGE; s->jobs = (int)v, a->jobs_given = 1; break;
        case O_PROG: a->forced_progress = 1; break;
        case O_NOPROG: a->forced_progress = -1; break;
        case O_NOPLOTS: s->plots = 0; break;
        case O_SEGMENT: if (cli_parse_size("--segment", optarg, 1, 100000, &v)) return EXIT_USAGE; s->opts.checkpoint_segment = v; break;
        case O_ESTMEM: a->estimate_memory = 1; break;
        case O_MAXMEM: if (cli_parse_bytes(name, "--max-memory", optarg, &a->max_memory)) return EXIT_USAGE; break;
        case 'q': a->quiet = 1; break;
        case 'h':
            /* help_drift's one conversion: the largest mpfr:P the default cap validates */
            if (a->is_report) fputs(help_report, cli_out());
            else fprintf(cli_out(), help_drift, vijp_drift_largest_mpfr(VIJP_DRIFT_REF_PREC_MAX));
            cli_print_layer_syntax(cli_out(), CLI_SPEC_ITEMS);
            return EXIT_OK;
        case O_FORMAT:
            /* getopt_long would take --format (grad's, eval's option) as an abbreviation of --formats */
            fprintf(stderr, "%s: --format is not an option here: give the formats with --formats LIST, a comma list "
                            "(e.g. --formats bfloat16,binary32)\n", name);
            return EXIT_USAGE;
        default: fprintf(stderr, "run '%s --help' for the options\n", name); return EXIT_USAGE;
        }
    }
    if (optind < argc) return cli_say("%s: unexpected argument '%s'\n", name, argv[optind]), EXIT_USAGE;
    return -1;
}

/* The nets (report's default ones when none is given), a JSON net's depth
 * and loss, --weights and --input against them: bad input, exit 2. */
static int resolve_nets(drift_args *a, study *s, vijp_error *err)
{
    if (a->n_specs == 0) {
        if (a->is_report) {
            static const char *const report_specs[] = {"dense:32,leaky:0.1", "dense:32,leaky:0.5", "dense:32,leaky:0.9",
                                                       "additive", "dense:32,gelu", "dense:32,mish",
                                                       "dense:32,relu,dense:32,layernorm"};
            for (size_t k = 0; k < sizeof report_specs / sizeof *report_specs; k++) a->specs[a->n_specs++] = report_specs[k];
        }
        else a->specs[a->n_specs++] = "dense:32,leaky:0.5";
    }
    /* JSON nets, parsed first: the depth is the file's (every net of the
     * study shares it); study_add_configs parses the others at it. */
    for (size_t k = 0; k < a->n_specs; k++) {
        if (!vijp_net_spec_is_json(a->specs[k])) continue;
        int loss = (int)s->loss;
        if (cli_net_parse("--depth", a->specs[k], &s->depth, a->depth_given, &loss, a->loss_given, s->width, &s->nets[k], err))
            return -1;
        s->loss = (vijp_loss_kind)loss;
        a->depth_given = 1;
    }
    return 0;
}

/* What is checked against the parsed nets: --weights against each, and
 * --input's columns against the first one's width. */
static int check_net_inputs(const drift_args *a, study *s, vijp_error *err)
{
    int rc = 0;
    for (size_t k = 0; s->weights && k < s->n_nets && !rc; k++) rc = cli_check_weights(&s->nets[k], s->weights, err);
    if (!rc && s->input) rc = cli_input_batch(s->input, s->nets[0].width, &s->batch, a->batch_given, err);
    return rc;
}

/* Everything checked before the report folder is touched: the nets, the
 * lists, each format's reference cap, the memory the run needs, the folder's
 * name, gnuplot.  -1 to go on, or the exit status. */
static int resolve(drift_args *a, study *s, vijp_error *err)
{
    s->n_plugins = cli_plugin_paths(&s->plugins); /* part of what a resumed run must match */
    if (resolve_nets(a, s, err)) return cli_usage_error(a->name, err);
    s->progress = progress_wanted_here(a->forced_progress, a->quiet);
    if (study_parse_formats(s, a->formats, err) || study_parse_seeds(s, a->seeds, err) ||
        study_parse_engines(s->engines, &s->n_engines, a->engines, 0, err) ||
        (a->tols && study_parse_tols(s, a->tols, err)) || study_add_configs(s, a->specs, a->n_specs, a->inits, err) ||
        check_net_inputs(a, s, err))
        return cli_usage_error(a->name, err);
    /* Each format's reference must be able to double at least once under the
     * cap, or the run would fail after its first curve and leave an empty folder. */
    for (size_t f = 0; f < s->n_formats; f++)
        if (vijp_drift_check_ref_prec(&s->formats[f], s->ref_prec_start, s->ref_prec_max, err)) return cli_usage_error(a->name, err);
    if (!plan_memory(s, a->name, a->max_memory, a->estimate_memory)) return EXIT_USAGE;
    if (a->estimate_memory) return EXIT_OK;
    for (const char *q = s->out_dir; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) { /* gnuplot (and most readers) cannot take them */
            vijp_fail(err, VIJP_EINVAL, "--out: control characters in the folder name");
            return cli_usage_error(a->name, err);
        }
    if (s->plots && !study_plots_available()) {
        fprintf(stderr, "%s: warning: gnuplot not found, plots skipped (install gnuplot-nox)\n", a->name);
        s->plots = 0;
    }
    return -1;
}

/* A rank other than 0 under mpirun: the parameter hash every unit it sends
 * carries (rank 0 checks them against its own), taken while parsing so that
 * all ranks agree on going on.  -1 to go on, or the exit status. */
static int worker_hash_of(const drift_args *a, study *s, uint64_t *hash, vijp_error *err)
{
    char *desc = NULL;
    if (study_description(s, &desc, err)) return cli_usage_error(a->name, err);
    *hash = unit_hash(UNIT_HASH_START, desc, strlen(desc));
    free(desc);
    s->progress = 0;
    return -1;
}

/* A rank other than 0: its share of the curves, sent to rank 0. */
static int run_worker(const mpi_world *w, study *s, uint64_t hash, const char *name)
{
    vijp_error err = {0};
    int go = mpi_world_share(w, 0);
    if (go >= 0) return go; /* rank 0 could not open the report folder: its status */
    if (mpi_study_run(w, s, 0, hash, &err)) fprintf(stderr, "%s (rank %d): %s\n", name, w->rank, err.msg);
    return EXIT_OK;
}

/* Rank 0 (or the only process): the report folder locked, the curves
 * computed (those --resume kept aside), the report written and published
 * all or nothing, the verdicts printed.  The exit status. */
static int run_and_publish(const mpi_world *w, study *s, const drift_args *a, int threads, int argc, char **argv)
{
    /* The command the report names loads the run's plugins (main.c took
     * them out of argv) and leaves --resume out: a resumed report is the one
     * the command without it writes, byte for byte. */
    char **kept_args = vijp_alloc_array((size_t)argc + 2 * s->n_plugins, sizeof *kept_args);
    int n_kept = 0;
    for (size_t k = 0; k < s->n_plugins; k++) {
        kept_args[n_kept++] = "--plugin";
        kept_args[n_kept++] = (char *)s->plugins[k];
    }
    for (int k = 1; k < argc; k++)
        if (strcmp(argv[k], "--resume")) kept_args[n_kept++] = argv[k];
    s->command = quoted_command(n_kept, kept_args, a->name);
    free(kept_args);
    vijp_error err = {0};
    /* The report folder is locked for the whole run and replaced all or
     * nothing at its end (atomic.h). */
    report_out out;
    if (report_out_open(&out, s->out_dir, s->command, &err)) {
        mpi_world_share(w, EXIT_USAGE);
        int rc = cli_usage_error(a->name, &err);
        if (report_out_holder()) cli_say("%s: the run writing it: %s\n", a->name, report_out_holder());
        return rc;
    }
    /* Finished curves are kept beside the folder as they come (resume.h). */
    unit_store units;
    size_t kept;
    int rc = unit_store_open(&units, &out, s, a->resume, !a->quiet, &kept, &err);
    if (rc) {
        report_out_close(&out);
        mpi_world_share(w, rc == VIJP_EINVAL ? EXIT_USAGE : EXIT_FAILED);
        if (rc == VIJP_EINVAL) return cli_usage_error(a->name, &err);
        fprintf(stderr, "%s: %s (%s left as it was)\n", a->name, err.msg, s->out_dir);
        return EXIT_FAILED;
    }
    mpi_world_share(w, -1); /* the other ranks: go */
    s->on_unit = keep_unit;
    s->on_unit_ctx = &units;
    rc = mpi_study_run(w, s, threads, units.hash, &err);
    if (!rc) rc = report_out_begin(&out, &err);
    if (!rc) rc = study_write(s, &out, &err);
    /* The verdicts go out, and stdout is closed and checked, before the
     * report is published: a stdout that fails (a full disk, EIO at the
     * close) is then a failed run that leaves the old report, as exit 1
     * promises, rather than a failure after the new one is in place. */
    if (!rc && !a->quiet) print_verdicts(s);
    if (!rc && cli_finish_stdout()) rc = vijp_fail(&err, VIJP_EIO, "the verdicts could not be written to standard output");
    if (!rc) rc = report_out_commit(&out, &err);
    if (rc) report_out_abort(&out);
    if (!rc) unit_store_finish(&units);
    unit_store_close(&units);
    report_out_close(&out);
    report_out_reraise(); /* a signal stopped the run: the folder is as it was */
    if (rc) {
        fprintf(stderr, "%s: %s (%s left as it was)\n", a->name, err.msg, s->out_dir);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

static int study_command(const mpi_world *w, int argc, char **argv, int is_report)
{
    static study s; /* large (configs table): kept off the stack */
    drift_args a;
    defaults(&a, &s, is_report);
    vijp_error err = {0};
    rank_output quiet_rank; /* under mpirun every rank parses; rank 0 alone speaks */
    rank_output_hide(&quiet_rank, w->rank, cli_out());
    int code = parse_args(argc, argv, &a, &s); /* -1 to go on, else the exit status */
    if (code < 0) code = resolve(&a, &s, &err);
    uint64_t worker_hash = 0;
    if (code < 0 && w->rank) code = worker_hash_of(&a, &s, &worker_hash, &err);
    /* Every rank parsed the same command line: all go on, or all stop (with
     * rank 0's status; a worker that alone failed says why). */
    int stop = rank_parse_agree(w, &quiet_rank, code, a.name, "the study");
    if (stop < 0) {
        /* Rank 0 computes on one thread beside the other ranks (one rank a
         * core), or on --jobs threads when given. */
        int threads = w->size > 1 && !a.jobs_given ? 1 : s.jobs;
        stop = w->rank ? run_worker(w, &s, worker_hash, a.name) : run_and_publish(w, &s, &a, threads, argc, argv);
    }
    study_free(&s);
    return stop;
}

static int run_study(int argc, char **argv, int is_report)
{
    mpi_world w;
    mpi_world_start(&w, NULL, NULL);
    int rc = study_command(&w, argc, argv, is_report);
    mpi_world_end(&w);
    return rc;
}

int cli_drift(int argc, char **argv) { return run_study(argc, argv, 0); }
int cli_report(int argc, char **argv) { return run_study(argc, argv, 1); }

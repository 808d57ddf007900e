/* The vijp command: dispatch to subcommands (their shared helpers: common.c). */
#include "cli.h"
#include "vijp/vijp.h"
#include "vijp/plugin.h"
#include "vijp/kernels.h"
#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: vijp [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "Measure and certify the numerical risk of memory-efficient gradients\n"
    "(Moonwalk vijp, reversible blocks, forward-mode derivatives).\n"
    "\n"
    "commands:\n"
    "  grad     run one network with an engine and compare with an MPFR reference\n"
    "  drift    error-versus-depth study of rebuilt gradients, written as a report\n"
    "  report   the default drift study (the main job), into reports/latest/\n"
    "  regress  compare two drift.json (baseline, current); non-zero if worse\n"
    "  certify  prove (or refute) that a layer is submersive at sampled points\n"
    "  memory   stored bytes against depth per engine; deepest net within a budget\n"
    "  check-layer  the layer battery on one layer type (built-in or --plugin):\n"
    "           adjoint, finite differences, vijp and inverse round trips, MPFR\n"
    "           oracle, declarations, certification; each check in its own process\n"
    "  eval     one layer's forward, jvp, vjp, vijp (and f′) at given points, as .npy\n"
    "\n"
    "Run 'vijp COMMAND --help' for a command's options.\n"
    "Every command that takes a net or a layer also takes --plugin FILE.so\n"
    "(repeatable): layer types defined outside vijp (see vijp/plugin.h).\n"
    "Exit status: 0 success, 1 the computation failed (e.g. a singular vijp),\n"
    "2 bad usage or input; regress and certify add their own (see their --help);\n"
    "check-layer: 1 some check failed.\n"
    "Environment: VIJP_KERNELS=ref|avx2|avx512|cuda forces one kernel set (default:\n"
    "the portable kernels, with the CPU's fastest exact ones); VIJP_CUDA_LIBRARY\n"
    "names the libvijp-cuda.so that the @cuda formats and VIJP_KERNELS=cuda load\n"
    "(default: beside vijp, or in ../lib from it).\n";

/* stdout checked once every command has printed all it will
 * (cli_finish_stdout); a command that publishes something (drift's report
 * folder) has already done so before publishing, and this finds it closed. */
static int close_stdout(int rc) { return cli_finish_stdout() && !rc ? EXIT_FAILED : rc; }

static int run(int argc, char **argv);

int main(int argc, char **argv)
{
    int rc = cli_blas_room(argc, argv);
    if (rc >= 0) return rc;
    /* One OpenBLAS thread for every command (the one place: certify and
     * check-layer rely on it too), as a drift study's curves run:
     * OpenBLAS's blocking, so a double result's last bits, changes with its
     * thread count, which is the machine's core count by default (vijp grad
     * gave other errors on 2 threads than on 1), and its parallel LU spins
     * on the conv layers' small per-frequency matrices. */
    openblas_set_num_threads(1);
    return close_stdout(run(argc, argv));
}

/* --plugin FILE (or --plugin=FILE) anywhere after the command: load it and
 * drop it from the arguments the command sees (*argc shrinks).  0, or the
 * exit status having said why. */
static int load_plugins(int *argc, char **argv)
{
    int kept = 2;
    for (int i = 2; i < *argc; i++) {
        const char *file = NULL;
        if (!strcmp(argv[i], "--plugin")) {
            if (i + 1 >= *argc) {
                fputs("vijp: --plugin needs a file (a layer plugin, see vijp/plugin.h)\n", stderr);
                return EXIT_USAGE;
            }
            file = argv[++i];
        } else if (!strncmp(argv[i], "--plugin=", 9)) {
            file = argv[i] + 9;
        }
        if (!file) {
            argv[kept++] = argv[i];
            continue;
        }
        int rc = cli_plugin_load(file);
        if (rc) return rc;
    }
    *argc = kept;
    argv[kept] = NULL;
    return 0;
}

/* The subcommands, by name. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"grad", cli_grad},       {"drift", cli_drift},   {"report", cli_report}, {"regress", cli_regress},
    {"certify", cli_certify}, {"memory", cli_memory}, {"check-layer", cli_check_layer}, {"eval", cli_eval},
};

static int run(int argc, char **argv)
{
    /* First, before any GMP value exists: one memory policy (vijp/error.h). */
    vijp_memory_policy_install();
    vijp_memory_keep_freed(); /* curve after curve, the same large blocks (vijp/memory.h) */
    /* VIJP_KERNELS names an unknown or absent kernel set: a usage error now,
     * not a failure in the middle of a run. */
    vijp_error kerr = {0};
    if (vijp_kernels_init(&kerr)) {
        fprintf(stderr, "vijp: %s\n", kerr.msg);
        return EXIT_USAGE;
    }
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    /* A writer whose reader died (gnuplot) gets EPIPE, reported as an error,
     * rather than a silent death that would leave temporaries behind. */
    signal(SIGPIPE, SIG_IGN);
    int rc = load_plugins(&argc, argv);
    if (rc) return rc;
    const char *cmd = argv[1];
    static char context[64];
    snprintf(context, sizeof context, "running vijp %.40s", cmd);
    vijp_memory_context(context);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, cli_out());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        fprintf(cli_out(), "vijp %s (MPFR %s, GMP %s)\n", VIJP_VERSION, mpfr_get_version(), gmp_version);
        return EXIT_OK;
    }
    size_t k = 0, n = sizeof commands / sizeof *commands;
    while (k < n && strcmp(cmd, commands[k].name)) k++;
    if (k < n) rc = commands[k].run(argc - 1, argv + 1);
    else rc = EXIT_USAGE, cli_say("vijp: unknown command '%s' (run 'vijp --help')\n", cmd);
    /* The allocation-failure walk's range (a test hook, like VIJP_FAIL_ALLOC). */
    if (getenv("VIJP_ALLOC_STATS")) fprintf(stderr, "vijp: %llu allocations\n", vijp_memory_allocations());
    return rc;
}

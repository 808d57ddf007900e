/* Room for OpenBLAS under an address-space limit (cli.h: cli_blas_room).
 *
 * OpenBLAS maps a work buffer of BLAS_BUFFER bytes for each of its threads:
 * the workers map theirs as the library loads (before main), the calling
 * thread at its first matrix product.  When the mmap fails (ulimit -v, or
 * ulimit -d since Linux 4.7 counts private mappings against RLIMIT_DATA) it
 * retries forever: a worker then never finishes, and exit() waits for it in
 * OpenBLAS's destructor, so even `vijp --version` hangs, and the first
 * product of any command spins.  So, before anything else: with too little
 * room for every thread's buffer, vijp runs itself again with one OpenBLAS
 * thread (no workers); with too little for one, a command that computes is
 * refused, as a run too large for memory is, and never starts. */
#include "cli.h"
#include "vijp/memory.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Debian's OpenBLAS 0.3.21 (x86_64): BUFFER_SIZE = 32 << 22 bytes, the
 * mmap length a stuck thread retries (seen with gdb: len=134217728). */
#define BLAS_BUFFER (128.0 * 1024 * 1024)
/* Beyond the buffers, a margin for the command's own first allocations
 * (a chosen margin, not a bound).  Measured with one OpenBLAS thread:
 * `vijp grad --net dense:8,tanh --depth 2` spun with 121 MiB left
 * (ulimit -v 200000) and ran with about 220 MiB left (300000). */
#define BLAS_SLACK (32.0 * 1024 * 1024)

/* The arguments of a run that computes nothing: --help and --version
 * anywhere, and regress (it reads two files and compares numbers). */
static int computes(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "regress") || !strcmp(argv[1], "help")) return 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || !strcmp(argv[i], "--version")) return 0;
    return 1;
}

int cli_blas_room(int argc, char **argv)
{
    double left = vijp_address_space_left();
    int threads = openblas_get_num_threads();
    if (!isfinite(left) || left >= threads * BLAS_BUFFER + BLAS_SLACK) return -1;
    if (threads > 1) { /* run again without workers: none is left stuck at exit */
        if (!getenv("VIJP_BLAS_ONE_THREAD")) {
            setenv("OPENBLAS_NUM_THREADS", "1", 1);
            setenv("VIJP_BLAS_ONE_THREAD", "1", 1);
            fflush(NULL);
            execv("/proc/self/exe", argv);
        }
        fprintf(stderr, "vijp: the address-space limit leaves %.0f MiB, too little for OpenBLAS's %d threads, and "
                "vijp could not run itself again with one: raise ulimit -v (and -d), or set OPENBLAS_NUM_THREADS=1\n",
                left / 1048576, threads);
        fflush(NULL);
        _exit(EXIT_USAGE); /* exit() would wait for a worker that cannot map its buffer, forever */
    }
    if (!computes(argc, argv) || left >= BLAS_BUFFER + BLAS_SLACK) return -1;
    fprintf(stderr, "vijp: the address-space limit leaves %.0f MiB, and OpenBLAS needs a %.0f MiB work buffer (and "
            "%.0f MiB beside it) for the first matrix product: raise ulimit -v (and -d) by at least %.0f MiB\n",
            left / 1048576, BLAS_BUFFER / 1048576, BLAS_SLACK / 1048576, ceil((BLAS_BUFFER + BLAS_SLACK - left) / 1048576));
    return EXIT_USAGE;
}

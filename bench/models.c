/* make bench (models part): what studying users' own models costs.
 *
 * 1. The RevViT example study (examples/studies/revvit/run.sh: 64
 *    reversible ViT blocks, embedding 32, 2 heads, 8 tokens, three formats,
 *    reversible and Moonwalk against backprop and the MPFR reference):
 *    wall time and peak memory of the whole `vijp drift` on this machine's
 *    cores, beside one double backprop of the same net checked against its
 *    MPFR reference (`vijp grad --engine backprop`, which always computes
 *    the reference) measured in the same run: the study's price in units
 *    of one checked gradient.
 * 2. A ResNet stack of CIFAR size (input 3 × 32 × 32, batch 1): a stem
 *    convolution to C channels with BatchNorm and ReLU, then 8 BasicBlocks
 *    (conv 3 × 3, BatchNorm, ReLU, conv 3 × 3, BatchNorm, identity skip,
 *    ReLU), written as a JSON net as scripts/export_torch.py writes a
 *    torchvision-style block: `vijp grad --engine all` (backprop,
 *    Moonwalk, pure forward, reversible, checkpoint, and the MPFR reference
 *    they are compared with), beside `--engine backprop` alone.
 * Each program runs as a child; its peak resident memory is wait4's
 * ru_maxrss, its time the wall clock. */
#include "bench.h"
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define REVVIT_NET "examples/studies/revvit/revvit-d32-l8-depth64.json"
#define RESNET_CHANNELS 4
#define RESNET_BLOCKS 8

typedef struct {
    double seconds, peak_mb;
} run_cost;

/* Run argv (stdout and stderr to /dev/null); exit 1 if it fails. */
static run_cost run(char *const argv[])
{
    fflush(stdout); /* else the child's freopen would print what is buffered again */
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0) exit(1);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench-models: %s %s ... failed (status %d)\n", argv[0], argv[1], status);
        exit(1);
    }
    return (run_cost){bench_now() - t0, (double)ru.ru_maxrss / 1024};
}

/* The ResNet stack as a JSON net (vijp-net/1) in path. */
/* The ResNet stack on side × side images with blocks BasicBlocks. */
static void write_resnet(const char *path, int side, int blocks)
{
    FILE *f = fopen(path, "w");
    if (!f) exit(1);
    const int C = RESNET_CHANNELS, S = side;
    fprintf(f, "{\"schema\": \"vijp-net/1\", \"width\": %d, \"loss\": \"square\", \"layers\": [\n", 3 * S * S);
    fprintf(f, " {\"type\": \"conv2d\", \"args\": \"3x3x%d:out=%d\"}, {\"type\": \"batchnorm\", \"args\": \"%d:affine\"}, "
               "{\"type\": \"relu\"}",
            S, C, C);
    for (int b = 0; b < blocks; b++)
        fprintf(f, ",\n {\"type\": \"residual\", \"layers\": [{\"type\": \"conv2d\", \"args\": \"%dx3x%d\"}, "
                   "{\"type\": \"batchnorm\", \"args\": \"%d:affine\"}, {\"type\": \"relu\"}, {\"type\": \"conv2d\", "
                   "\"args\": \"%dx3x%d\"}, {\"type\": \"batchnorm\", \"args\": \"%d:affine\"}]}, {\"type\": \"relu\"}",
                C, S, C, C, S, C);
    fprintf(f, "]}\n");
    if (fclose(f)) exit(1);
}

int main(int argc, char **argv)
{
    int smoke = bench_smoke(&argc, argv);
    bench_args(argc, argv, 1,
               "Usage: bench-models [--smoke] [VIJP]\n  the RevViT example study and a CIFAR-sized ResNet stack through every "
               "engine: time and peak memory; VIJP is the command (default build/vijp).\n");
    char *vijp = argc > 1 ? argv[1] : "build/vijp";
    char out[64], resnet[64], tiny[64];
    snprintf(out, sizeof out, "/tmp/vijp-bench-models-%d", (int)getpid());
    snprintf(resnet, sizeof resnet, "/tmp/vijp-bench-models-%d.json", (int)getpid());

    /* under --smoke: one of the RevViT's blocks, on 2 tokens a half */
    snprintf(tiny, sizeof tiny, "/tmp/vijp-bench-models-%d-revvit.json", (int)getpid());
    char *revvit = REVVIT_NET;
    if (smoke) {
        FILE *f = fopen(tiny, "w");
        static const char *const block =
            "{\"type\": \"additive\", \"F\": [{\"type\": \"layernorm\", \"args\": \"32:eps=1e-06:affine\"}, "
            "{\"type\": \"attention\", \"args\": \"32x2\"}], \"G\": [{\"type\": \"layernorm\", \"args\": "
            "\"32:eps=1e-06:affine\"}, {\"type\": \"linear\", \"args\": \"128x32\"}, {\"type\": \"gelu\"}, "
            "{\"type\": \"linear\", \"args\": \"32x128\"}]}";
        if (!f || fprintf(f, "{\"schema\": \"vijp-net/1\", \"width\": 128, \"loss\": \"square\", \"layers\": [%s]}\n", block) < 0 || fclose(f))
            return 1;
        revvit = tiny;
    }
    printf("RevViT example study (%s; 3 formats, reversible and Moonwalk, 1 seed):\n", revvit);
    char *study[] = {vijp, "drift", "--net", revvit, "--formats", "bfloat16+binary32,binary16+binary32,binary32",
                     "--engines", "reversible,moonwalk", "--init", "kaiming-uniform", "--seeds", "1", "--out", out,
                     "--no-progress", smoke ? "--no-plots" : NULL, NULL};
    char *one[] = {vijp, "grad", "--net", revvit, "--engine", "backprop", "--format", "double", "--init",
                   "kaiming-uniform", "-q", NULL};
    run_cost s = run(study);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    if (system(rm)) return 1;
    run_cost b = run(one);
    if (smoke) unlink(tiny);
    printf("  study             %8.1f s   peak %7.0f MB\n", s.seconds, s.peak_mb);
    printf("  one grad          %8.2f s   peak %7.0f MB   (backprop in double and its MPFR reference)\n", b.seconds, b.peak_mb);
    printf("  ratio study / grad: %.0f\n", s.seconds / b.seconds);

    int side = smoke ? 8 : 32, blocks = smoke ? 1 : RESNET_BLOCKS;
    write_resnet(resnet, side, blocks);
    printf("ResNet stack, input 3x%dx%d, stem to %d channels + %d BasicBlocks (width %d), batch 1, double:\n", side,
           side, RESNET_CHANNELS, blocks, RESNET_CHANNELS * side * side);
    char *all[] = {vijp, "grad", "--net", resnet, "--engine", "all", "--format", "double", "--init", "kaiming-uniform",
                   "-q", NULL};
    char *bp[] = {vijp, "grad", "--net", resnet, "--engine", "backprop", "--format", "double", "--init",
                  "kaiming-uniform", "-q", NULL};
    run_cost a = run(all), p = run(bp);
    unlink(resnet);
    printf("  grad --engine all      %8.2f s   peak %7.0f MB\n", a.seconds, a.peak_mb);
    printf("  grad --engine backprop %8.2f s   peak %7.0f MB\n", p.seconds, p.peak_mb);
    printf("  ratio all / backprop: %.1f (both with the MPFR reference)\n", a.seconds / p.seconds);
    return 0;
}

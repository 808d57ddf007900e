/* Kernel selection (contract in kernels.h): each set completed from ref,
 * the active table chosen once. */
#include "kernels.h"
#include "vijp/kernels.h"
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const vijp_kact_names[VIJP_KACT_COUNT] = {"sigmoid", "softplus", "tanh", "silu", "gelu", "mish"};
const char *const vijp_kset_names[VIJP_KSET_COUNT] = {"ref", "avx2", "avx512", "cuda"};

static vijp_kernels sets[VIJP_KSET_COUNT], active;
static const char *absent[VIJP_KSET_COUNT];
static char select_error[256];
static int active_set = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT, cuda_once = PTHREAD_ONCE_INIT;
static char cuda_absent[512] = "the CUDA kernel set was not looked for";

/* dst's empty entries from src, each bound with its function; an
 * activation bound dst leaves unset (f_u = 0: its own kernels keep src's
 * bound, kernels.h) from src too. */
static void complete(vijp_kernels *dst, const vijp_kernels *src)
{
    if (!dst->erfc_d) /* a bound goes with its function */
        dst->erfc_bound_u = src->erfc_bound_u, dst->erfc_zero_above = src->erfc_zero_above;
#define FILL(e) if (!dst->e) dst->e = src->e;
    VIJP_KERNEL_ENTRIES(FILL)
#undef FILL
    for (int a = 0; a < VIJP_KACT_COUNT; a++) {
        if (!dst->act_d[a] || dst->act_bound[a].f_u == 0) dst->act_bound[a] = src->act_bound[a];
        if (!dst->act_d[a]) dst->act_d[a] = src->act_d[a];
        if (!dst->act_f[a]) dst->act_f[a] = src->act_f[a];
    }
}

/* The exact kernels of src over dst, whose bounded ones (and their bounds)
 * stay: the default table's. */
static void overlay_exact(vijp_kernels *dst, const vijp_kernels *src)
{
    vijp_kernels keep = *dst;
    *dst = *src;
#define KEEP(e) dst->e = keep.e; /* the bounded ones stay ref's */
    VIJP_KERNEL_BOUNDED_ENTRIES(KEEP)
#undef KEEP
    dst->erfc_bound_u = keep.erfc_bound_u, dst->erfc_zero_above = keep.erfc_zero_above;
    memcpy(dst->act_d, keep.act_d, sizeof keep.act_d);
    memcpy(dst->act_f, keep.act_f, sizeof keep.act_f);
    memcpy(dst->act_bound, keep.act_bound, sizeof keep.act_bound);
}

/* Which sets the build has and the CPU runs. */
static void build_sets(void)
{
    sets[0] = vijp_kernels_ref_exact;
    complete(&sets[0], &vijp_kernels_ref_bounded);
    const vijp_kernels *cand[VIJP_KSET_COUNT] = {NULL};
#ifdef VIJP_GENERIC
    absent[1] = absent[2] = "this is a GENERIC=1 build (reference kernels only)";
#else
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cand[1] = &vijp_kernels_avx2;
    else absent[1] = "this CPU lacks AVX2 or FMA";
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) cand[2] = &vijp_kernels_avx512;
    else absent[2] = "this CPU lacks AVX-512F/DQ";
#endif
    absent[3] = cuda_absent; /* until load_cuda, on demand */
    for (int i = 1; i < 3; i++) {
        if (!cand[i]) continue;
        sets[i] = *cand[i];
        complete(&sets[i], &sets[0]);
    }
}

/* The CUDA set lives in libvijp-cuda.so (src/kernels/cuda/kernel_set.c),
 * loaded only when asked for: VIJP_CUDA_LIBRARY names it, else it is looked
 * for beside the object that holds this code (the program, or libvijp.so)
 * and in ../lib from there (an installed vijp), else the dynamic loader's
 * path.  It stays loaded: the CUDA runtime registers exit handlers. */
static void *open_cuda(char *tried, size_t n)
{
    const char *env = getenv("VIJP_CUDA_LIBRARY");
    if (env && *env) return snprintf(tried, n, "%s", env), dlopen(env, RTLD_NOW | RTLD_LOCAL);
    char dirs[2][PATH_MAX] = {"", ""}, path[2 * PATH_MAX + 32];
    Dl_info info;
    if (dladdr((void *)&vijp_kernels_set, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
        snprintf(dirs[0], sizeof dirs[0], "%s", info.dli_fname);
    ssize_t len = readlink("/proc/self/exe", dirs[1], sizeof dirs[1] - 1);
    dirs[1][len > 0 ? len : 0] = 0;
    for (int d = 0; d < 2; d++) {
        char *slash = strrchr(dirs[d], '/');
        if (!slash) continue;
        *slash = 0;
        for (int up = 0; up < 2; up++) {
            snprintf(path, sizeof path, up ? "%s/../lib/libvijp-cuda.so" : "%s/libvijp-cuda.so", dirs[d]);
            if (!access(path, R_OK)) return snprintf(tried, n, "%s", path), dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    snprintf(tried, n, "libvijp-cuda.so");
    return dlopen("libvijp-cuda.so", RTLD_NOW | RTLD_LOCAL);
}

static void load_cuda(void)
{
    char tried[2 * PATH_MAX + 32], why[256] = "";
    void *h = open_cuda(tried, sizeof tried);
    if (!h) {
        const char *e = dlerror();
        snprintf(cuda_absent, sizeof cuda_absent, "cannot load %.200s (builds without nvcc, or with CUDA=0, GENERIC=1 "
                 "or SANITIZE=1, have none): %.200s", tried, e ? e : "?");
        return;
    }
    const vijp_kernels *(*entry)(size_t, int, char *, size_t);
    *(void **)&entry = dlsym(h, "vijp_cuda_kernel_set"); /* POSIX's way to a function pointer */
    const vijp_kernels *k = entry ? entry(sizeof(vijp_kernels), VIJP_KERNELS_TABLE_VERSION, why, sizeof why) : NULL;
    if (!k) {
        if (entry) snprintf(cuda_absent, sizeof cuda_absent, "%s", why);
        else snprintf(cuda_absent, sizeof cuda_absent, "%.400s lacks vijp_cuda_kernel_set", tried);
        return;
    }
    sets[3] = *k;
    complete(&sets[3], &sets[0]);
    absent[3] = NULL;
}

static void choose(void)
{
    build_sets();
    const char *want = getenv("VIJP_KERNELS");
    if (!want || !*want || !strcmp(want, "auto")) {
        active = sets[0], active_set = 0;
        for (int i = 2; i >= 1; i--) /* the widest CPU set's exact kernels (never cuda's: host pointers) */
            if (!absent[i]) {
                overlay_exact(&active, &sets[i]), active_set = i;
                break;
            }
        active.name = vijp_kset_names[active_set];
        return;
    }
    for (int i = 0; i < VIJP_KSET_COUNT; i++)
        if (!strcmp(want, vijp_kset_names[i])) {
            if (i == 3) pthread_once(&cuda_once, load_cuda);
            if (absent[i]) {
                snprintf(select_error, sizeof select_error, "VIJP_KERNELS=%s: that kernel set is not available: %s",
                         want, absent[i]);
                return;
            }
            active = sets[i], active_set = i;
            return;
        }
    snprintf(select_error, sizeof select_error, "VIJP_KERNELS=%.64s: unknown kernel set (ref, avx2, avx512, cuda or auto)",
             want);
}

int vijp_kernels_init(vijp_error *err)
{
    pthread_once(&once, choose);
    return select_error[0] ? vijp_fail(err, VIJP_EINVAL, "%s", select_error) : 0;
}

const char *vijp_kernels_name(void)
{
    pthread_once(&once, choose);
    return select_error[0] ? NULL : vijp_kset_names[active_set];
}

const vijp_kernels *vijp_kernels_active(void)
{
    pthread_once(&once, choose);
    if (select_error[0]) { /* a library cannot return an error from a void operator: fatal, like out of memory */
        fprintf(stderr, "vijp: %s\n", select_error);
        exit(1);
    }
    return &active;
}

int vijp_kernels_follow(const int have[3])
{
    const char *name = vijp_kernels_active()->name;
    if (!strcmp(name, "ref")) return 0;
    if (!strcmp(name, "avx2")) return have[1] ? 1 : 0;
    return have[2] ? 2 : have[1] ? 1 : 0;
}

const vijp_kernels *vijp_kernels_set(int i, const char **why)
{
    pthread_once(&once, choose);
    if (i < 0 || i >= VIJP_KSET_COUNT) return NULL;
    if (i == 3) pthread_once(&cuda_once, load_cuda);
    if (why) *why = absent[i];
    return absent[i] ? NULL : &sets[i];
}

void vijp_kdrift_metric(const vijp_kdrift *p, double *rel, double *ulps, double *angle_deg)
{
    *ulps = p->max_ulps;
    *rel = p->dd == 0 ? 0 : p->rr == 0 ? INFINITY : sqrt(p->dd / p->rr);
    if (p->aa == 0 || p->rr == 0) {
        *angle_deg = p->aa == 0 && p->rr == 0 ? 0 : NAN;
        return;
    }
    double nr = sqrt(p->rr), perp2 = p->dd - p->dr * (p->dr / p->rr);
    *angle_deg = atan2(sqrt(perp2 > 0 ? perp2 : 0), nr + p->dr / nr) * (180 / M_PI);
}

#include "vijp/vijp.h"
#include "kernels/kernels.h"
#include "tc.h"
#include "modifiers.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>

#if defined(__LP64__)
/* threads sits in what was padding after emulated (format.h): the struct's
 * size and every other member's offset are plugin ABI 8's. */
_Static_assert(offsetof(vijp_format, threads) + sizeof(int) <= offsetof(vijp_format, emin) && sizeof(vijp_format) == 232,
               "vijp_format changed shape: bump VIJP_PLUGIN_ABI (include/vijp/plugin.h)");
#endif

static void emulated(vijp_format *f, vijp_format_kind k, const char *name, mpfr_prec_t p,
                     mpfr_exp_t emin, mpfr_exp_t emax, size_t bytes)
{
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->prec = p;
    f->emulated = 1;
    f->emin = emin;
    f->emax = emax;
    f->value_bytes = bytes;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->store_prec = p, f->store_emin = emin, f->store_emax = emax;
    f->store_max = ldexp(1 - ldexp(1.0, -(int)p), (int)emax); /* IEEE's: every p-bit value below 2^emax */
}

/* OCP OFP8 1.0 in MPFR's convention (parse's comment below): e4m3's
 * smallest subnormal 2^-9 (bias 7, 3 trailing bits: 2^(1-7-3)) gives
 * emin -8; its top binade [2^8, 2^9) gives emax 9, but its all-ones
 * significand there is the NaN, so its largest finite value is 448 = 1.75·2^8,
 * not 480.  e5m2's 2^-16 (2^(1-15-2)) gives emin -15, 57344 = 1.75·2^15
 * emax 16, IEEE's layout.  Both one byte.  ":sat" chooses OFP8's saturating
 * conversion. */
static int fp8(vijp_format *f, const char *s)
{
    static const struct {
        const char *name;
        vijp_format_kind kind;
        mpfr_prec_t p;
        mpfr_exp_t emin, emax;
        double max;
        vijp_overflow overflow; /* the non-saturating conversion's */
    } fp8s[] = {{"e4m3", VIJP_E4M3, 4, -8, 9, 448, VIJP_OVERFLOW_NAN},
                {"e5m2", VIJP_E5M2, 3, -15, 16, 57344, VIJP_OVERFLOW_INF}};
    for (size_t i = 0; i < sizeof fp8s / sizeof *fp8s; i++) {
        size_t n = strlen(fp8s[i].name);
        if (strncmp(s, fp8s[i].name, n) || (s[n] && strcmp(s + n, ":sat"))) continue;
        emulated(f, fp8s[i].kind, s, fp8s[i].p, fp8s[i].emin, fp8s[i].emax, 1);
        f->store_max = fp8s[i].max;
        f->store_overflow = s[n] ? VIJP_OVERFLOW_SATURATE : fp8s[i].overflow;
        return 1;
    }
    return 0;
}

/* STORE+binary32: storage as the emulated format `store`, every operation
 * in binary32 (format.h).  tf32 is binary32 storage whose matrix-product
 * operands keep 11 significand bits (TF32: 10 stored + the hidden bit),
 * rounded to nearest even; binary32's exponent range. */
static int mixed(vijp_format *f, const char *name, const char *store)
{
    vijp_format s;
    if (vijp_format_parse(store, &s, NULL)) return -1;
    vijp_format_fixed(f, VIJP_BINARY32);
    f->kind = VIJP_MIXED;
    f->mixed = 1;
    f->store_prec = s.prec, f->store_emin = s.emin, f->store_emax = s.emax;
    f->store_overflow = s.store_overflow, f->store_max = s.store_max;
    f->value_bytes = s.value_bytes;
    snprintf(f->name, sizeof f->name, "%s", name);
    return 0;
}

/* OCP MX v1.0's element formats in MPFR's convention (as fp8's above): the
 * smallest subnormal 2^(emin-1), the top binade [2^(emax-1), 2^emax).
 * E2M3: bias 1, 3 trailing bits, subnormals 2^(1-1-3) = 2^-3, largest
 * 1.875·2^2 = 7.5; E3M2: bias 3, 2 bits, 2^(1-3-2) = 2^-4, 1.75·2^4 = 28;
 * E2M1: bias 1, 1 bit, 2^(1-1-1) = 2^-1, 1.5·2^2 = 6; E4M3 and E5M2 as
 * e4m3 and e5m2.  elem_emax: the exponent of the largest normal (the
 * specification's emax_elem, Table 1 of §5.3).  A value's storage takes a
 * byte in the accounting (value_bytes): 8, 6 or 4 bits and a 32nd of the
 * scale's byte, rounded up. */
static int mx_format(vijp_format *f, const char *s)
{
    static const struct {
        const char *name;
        mpfr_prec_t p;
        mpfr_exp_t emin, emax;
        double max;
        int elem_emax;
    } mxs[] = {{"mxfp8", 4, -8, 9, 448, 8}, {"mxfp8e5m2", 3, -15, 16, 57344, 15}, {"mxfp6", 4, -2, 3, 7.5, 2},
               {"mxfp6e3m2", 3, -3, 5, 28, 4}, {"mxfp4", 2, 0, 3, 6, 2}};
    for (size_t i = 0; i < sizeof mxs / sizeof *mxs; i++) {
        size_t n = strlen(mxs[i].name);
        if (strncmp(s, mxs[i].name, n)) continue; /* s is at least n long past here */
        size_t ceil_ = !strncmp(s + n, ":ceil", 5) ? 5 : 0;
        if (strcmp(s + n + ceil_, "+binary32")) continue;
        vijp_format_fixed(f, VIJP_BINARY32);
        f->kind = VIJP_MIXED;
        f->mixed = 1;
        f->store_prec = mxs[i].p, f->store_emin = mxs[i].emin, f->store_emax = mxs[i].emax;
        f->store_overflow = VIJP_OVERFLOW_SATURATE, f->store_max = mxs[i].max;
        f->value_bytes = 1;
        f->mx_block = 32, f->mx_elem_emax = mxs[i].elem_emax, f->mx_scale_ceil = ceil_ != 0;
        snprintf(f->name, sizeof f->name, "%s", s);
        return 1;
    }
    return 0;
}

/* The tensor-scaled formats (format.h; their recipes: scaled.c), binary32
 * accumulation.  nvfp4: E2M1 elements as mxfp4's (2 bits from 2^-1, 6),
 * blocks of 16; fp8: forward values E4M3, gradients E5M2, both saturating
 * (TransformerEngine's casts), ":pow2" power-of-two scales.  A value takes
 * a byte in the accounting (value_bytes), as MX's: 4 or 8 bits and a 16th
 * of a block scale's byte or a tensor's share of 4 bytes, rounded up. */
static int scaled_format(vijp_format *f, const char *s)
{
    int nvfp4 = !strcmp(s, "nvfp4+binary32"), pow2 = !strcmp(s, "fp8:pow2+binary32");
    if (!nvfp4 && !pow2 && strcmp(s, "fp8+binary32")) return 0;
    vijp_format_fixed(f, VIJP_BINARY32);
    f->kind = VIJP_MIXED;
    f->mixed = 1;
    f->tensor_scaled = 1;
    f->store_overflow = VIJP_OVERFLOW_SATURATE;
    f->value_bytes = 1;
    if (nvfp4) {
        f->store_prec = 2, f->store_emin = 0, f->store_emax = 3, f->store_max = 6;
        f->scale_block = 16;
    } else {
        f->store_prec = 4, f->store_emin = -8, f->store_emax = 9, f->store_max = 448;
        f->grad_prec = 3, f->grad_emin = -15, f->grad_emax = 16, f->grad_max = 57344;
        f->scale_pow2 = pow2;
    }
    snprintf(f->name, sizeof f->name, "%s", s);
    return 1;
}

int vijp_format_mpfr(vijp_format *f, long prec, vijp_error *err)
{
    if (prec < VIJP_PREC_MIN || prec > VIJP_PREC_MAX)
        return vijp_fail(err, VIJP_EINVAL, "precision %ld out of range [%d, %d] bits", prec,
                         VIJP_PREC_MIN, VIJP_PREC_MAX);
    memset(f, 0, sizeof *f);
    f->kind = VIJP_MPFR;
    f->prec = prec;
    /* Stored bytes of one mpfr:P value: sign, exponent and precision fields
     * (the mpfr struct) plus the limbs of the significand. */
    f->value_bytes = sizeof(__mpfr_struct) + (size_t)((prec + mp_bits_per_limb - 1) / mp_bits_per_limb) * sizeof(mp_limb_t);
    snprintf(f->name, sizeof f->name, "mpfr:%ld", prec);
    f->store_prec = prec, f->store_emin = f->emin, f->store_emax = f->emax;
    return 0;
}

void vijp_format_fixed(vijp_format *f, vijp_format_kind kind)
{
    static const char *const names[] = {[VIJP_DOUBLE] = "double",     [VIJP_BINARY32] = "binary32",
                                        [VIJP_BINARY16] = "binary16", [VIJP_BFLOAT16] = "bfloat16",
                                        [VIJP_E4M3] = "e4m3",         [VIJP_E5M2] = "e5m2"};
    if ((unsigned)kind >= sizeof names / sizeof *names || !names[kind] || vijp_format_parse(names[kind], f, NULL)) {
        fprintf(stderr, "vijp_format_fixed: kind %d is not a fixed format (mpfr:P needs vijp_format_mpfr)\n", (int)kind);
        abort(); /* a programming error, reported */
    }
}

int vijp_format_values_double(const vijp_format *f)
{
    if (f->kind == VIJP_DOUBLE) return 1;
    /* MPFR's convention x = m·2^e, 1/2 <= |m| < 1: the smallest subnormal
     * is 2^(emin−1), binary64's 2^-1074, and binary64 is finite below 2^1024 */
    return f->emulated && f->prec <= 53 && f->emin - 1 >= -1074 && f->emax <= 1024 && f->store_prec <= f->prec;
}

void vijp_format_accumulator(const vijp_format *f, vijp_format *acc)
{
    *acc = *f;
    if (!f->mixed || f->store_prec >= f->prec) return; /* every result is a value of f already */
    vijp_format_fixed(acc, VIJP_BINARY32);
    acc->ftz = acc->store_ftz = f->ftz; /* binary32:ftz where f's accumulation flushes */
    acc->kernel_set = f->kernel_set; /* bfloat16+binary32@SET: binary32@SET, the same float route */
    acc->threads = f->threads;
    if (f->kernel_set) snprintf(acc->name, sizeof acc->name, "binary32@%s", vijp_kset_names[f->kernel_set - 1]);
}

/* The formats that run through a kernel set (FORMAT@SET). */
static const char *const kset_bases[] = {"double", "binary32", "bfloat16+binary32", "binary16+binary32"};

/* One part of a format name (between '+' and '@') as the user may have
 * written it: another library's or language's name for the format
 * (PyTorch's, NumPy's, C's, IEEE 754's), any case.  Written into out;
 * 0 if none is known. */
static int format_part_alias(const char *part, size_t len, char *out, size_t size)
{
    static const struct {
        const char *alias, *name;
    } aliases[] = {
        {"bfloat16", "bfloat16"}, {"bf16", "bfloat16"},     {"bfloat", "bfloat16"},
        {"binary16", "binary16"}, {"fp16", "binary16"},     {"f16", "binary16"},      {"half", "binary16"},
        {"float16", "binary16"},  {"binary32", "binary32"}, {"fp32", "binary32"},     {"f32", "binary32"},
        {"float", "binary32"},    {"single", "binary32"},   {"float32", "binary32"},  {"double", "double"},
        {"fp64", "double"},       {"f64", "double"},        {"float64", "double"},    {"binary64", "double"},
        {"tf32", "tf32"},         {"fp128", "mpfr:113"},    {"f128", "mpfr:113"},     {"float128", "mpfr:113"},
        {"binary128", "mpfr:113"}, {"quad", "mpfr:113"},
        {"e4m3", "e4m3"},         {"e5m2", "e5m2"},         {"float8_e4m3fn", "e4m3"}, {"float8_e5m2", "e5m2"},
        {"fp8_e4m3", "e4m3"},     {"fp8_e5m2", "e5m2"},     {"e4m3:sat", "e4m3:sat"}, {"e5m2:sat", "e5m2:sat"},
        {"e4m3sat", "e4m3:sat"},  {"e5m2sat", "e5m2:sat"},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strlen(aliases[i].alias) == len && !strncasecmp(part, aliases[i].alias, len))
            return snprintf(out, size, "%s", aliases[i].name), 1;
    /* mpfr113, MPFR:113, mpfr-113, mpfr_113 */
    if (len > 4 && !strncasecmp(part, "mpfr", 4)) {
        size_t d = 4 + (part[4] == ':' || part[4] == '-' || part[4] == '_' || part[4] == '=');
        if (d < len && strspn(part + d, "0123456789") == len - d)
            return snprintf(out, size, "mpfr:%.*s", (int)(len - d), part + d), 1;
    }
    return 0;
}

/* The format the user probably meant by s, an unknown name (bf16:
 * bfloat16, fp32: binary32, bf16+fp32: bfloat16+binary32, fp32@avx2:
 * binary32@avx2), into out; 0 if there is none. */
static int format_suggestion(const char *s, char *out, size_t size)
{
    char base[64] = "", part[32];
    size_t len = strcspn(s, "@"), n = 0, parts = 0;
    for (size_t i = 0; i <= len; parts++) {
        size_t k = strcspn(s + i, "+@");
        if (k > len - i) k = len - i;
        if (!format_part_alias(s + i, k, part, sizeof part)) return 0;
        n += (size_t)snprintf(base + n, sizeof base - (n < sizeof base ? n : sizeof base), "%s%s", i ? "+" : "", part);
        if (n >= sizeof base) return 0;
        i += k + 1;
    }
    if (parts == 1 && !strcmp(base, "tf32")) snprintf(base, sizeof base, "tf32+binary32"); /* tf32 alone: its one format */
    if (strlen(base) == len && !strncmp(base, s, len)) return 0; /* s's own spelling: not a format, nothing to suggest */
    if (s[len] == '@') { /* a base that runs through kernel sets, and a set that exists (available or not) */
        size_t b = 0, k = 0;
        while (b < sizeof kset_bases / sizeof *kset_bases && strcmp(base, kset_bases[b])) b++;
        while (k < VIJP_KSET_COUNT && strcmp(s + len + 1, vijp_kset_names[k])) k++;
        if (b == sizeof kset_bases / sizeof *kset_bases || k == VIJP_KSET_COUNT) return 0;
    } else {
        vijp_format f;
        if (vijp_format_parse(base, &f, NULL)) return 0;
    }
    return (size_t)snprintf(out, size, "%s%s", base, s + len) < size;
}

int vijp_format_parse(const char *s, vijp_format *f, vijp_error *err)
{
    if (!s) return vijp_fail(err, VIJP_EINVAL, "missing format name");
    vijp_format_mods mods; /* :ftz, :sr: the name without them, then them */
    int modified = vijp_format_mods_split(s, &mods, err), rc_base;
    if (modified < 0) return modified;
    if (modified) return (rc_base = vijp_format_parse(mods.base, f, err)) ? rc_base : vijp_format_mods_apply(s, &mods, f, err);
    /* MPFR exponent convention: x = m·2^e, 1/2 <= |m| < 1.  emin is chosen so
     * that the smallest subnormal 2^(emin-1) is the format's: binary32 2^-149,
     * binary16 2^-24, bfloat16 2^-133; emax so that 2^emax is the first overflow. */
    if (!strcmp(s, "double")) {
        memset(f, 0, sizeof *f);
        f->kind = VIJP_DOUBLE;
        f->prec = 53;
        f->emin = -1073;
        f->emax = 1024;
        f->value_bytes = sizeof(double);
        snprintf(f->name, sizeof f->name, "double");
        f->store_prec = 53, f->store_emin = f->emin, f->store_emax = f->emax;
        return 0;
    }
    const char *at = strchr(s, '@');
    if (at) { /* a format through one kernel set (src/kernels/kernels.h) */
        const char *const *bases = kset_bases;
        size_t len = (size_t)(at - s), b = 0;
        while (b < sizeof kset_bases / sizeof *kset_bases && !(strlen(bases[b]) == len && !strncmp(s, bases[b], len))) b++;
        char hint[96];
        if (b == sizeof kset_bases / sizeof *kset_bases && format_suggestion(s, hint, sizeof hint))
            return vijp_fail(err, VIJP_EINVAL, "format '%s': did you mean %s? (only double, binary32, bfloat16+binary32 "
                             "and binary16+binary32 run through a kernel set, FORMAT@SET)", s, hint);
        if (b == sizeof kset_bases / sizeof *kset_bases)
            return vijp_fail(err, VIJP_EINVAL, "format '%s': only double, binary32, bfloat16+binary32 and "
                             "binary16+binary32 run through a kernel set (FORMAT@SET)", s);
        for (int i = 0; i < VIJP_KSET_COUNT; i++) {
            const char *why = NULL;
            if (strcmp(at + 1, vijp_kset_names[i])) continue;
            if (!vijp_kernels_set(i, &why))
                return vijp_fail(err, VIJP_EINVAL, "format '%s': that kernel set is not available: %s", s, why);
            int rc = vijp_format_parse(bases[b], f, err);
            f->kernel_set = 1 + i;
            snprintf(f->name, sizeof f->name, "%s@%s", bases[b], vijp_kset_names[i]);
            return rc;
        }
        return vijp_fail(err, VIJP_EINVAL, "format '%s': unknown kernel set (%s@ref, @avx2, @avx512, @cuda)", s,
                         bases[b]);
    }
    if (!strcmp(s, "binary32")) return emulated(f, VIJP_BINARY32, s, 24, -148, 128, 4), 0;
    if (!strcmp(s, "binary16")) return emulated(f, VIJP_BINARY16, s, 11, -23, 16, 2), 0;
    if (!strcmp(s, "bfloat16")) return emulated(f, VIJP_BFLOAT16, s, 8, -132, 128, 2), 0;
    if (fp8(f, s) || mx_format(f, s) || scaled_format(f, s)) return 0;
    if (vijp_tc_named(s)) { /* STORE+tc:ARCH: STORE+binary32 with a tensor core's accumulation */
        vijp_tc_params p;
        char base[32];
        if (vijp_tc_lookup(s, &p, base, sizeof base, err) || vijp_format_parse(base, f, err)) return VIJP_EINVAL;
        f->tc_group = p.group, f->tc_align_bits = p.align_bits, f->tc_acc_prec = p.acc_prec, f->tc_promote = p.promote;
        snprintf(f->name, sizeof f->name, "%s", s);
        return 0;
    }
    static const char *const stores[] = {"bfloat16", "binary16", "e4m3", "e4m3:sat", "e5m2", "e5m2:sat"};
    for (size_t i = 0; i < sizeof stores / sizeof *stores; i++) { /* STORE+binary32 */
        size_t n = strlen(stores[i]);
        if (!strncmp(s, stores[i], n) && !strcmp(s + n, "+binary32")) return mixed(f, s, stores[i]);
    }
    if (!strcmp(s, "tf32+binary32")) {
        int rc = mixed(f, s, "binary32");
        f->operand_prec = 11;
        return rc;
    }
    if (!strncmp(s, "mpfr:", 5)) {
        char *end;
        errno = 0;
        long p = strtol(s + 5, &end, 10);
        if (s[5] < '0' || s[5] > '9' || *end || errno)
            return vijp_fail(err, VIJP_EINVAL, "bad precision in format '%s' (want mpfr:P, P bits)", s);
        return vijp_format_mpfr(f, p, err);
    }
    char hint[96];
    if (format_suggestion(s, hint, sizeof hint)) /* shorter: the message holds 255 characters */
        return vijp_fail(err, VIJP_EINVAL, "unknown format '%s': did you mean %s? (known: double, mpfr:P, binary32, "
                         "binary16, bfloat16, e4m3[:sat], e5m2[:sat], bfloat16+binary32, binary16+binary32, "
                         "tf32+binary32, FP8+binary32, MX+binary32, FORMAT@SET)", s, hint);
    return vijp_fail(err, VIJP_EINVAL,
                     "unknown format '%s' (known: double, mpfr:P, binary32, binary16, bfloat16, e4m3[:sat], e5m2[:sat], "
                     "bfloat16+binary32, binary16+binary32, tf32+binary32, FP8+binary32, MX[:ceil]+binary32, "
                     "nvfp4+binary32, fp8[:pow2]+binary32, FORMAT@SET)", s);
}

mpfr_prec_t vijp_format_value_prec(const vijp_format *f)
{
    mpfr_prec_t p = f->operand_prec && f->operand_prec < f->store_prec ? f->operand_prec : f->store_prec;
    return f->grad_prec && f->grad_prec < p ? f->grad_prec : p; /* fp8+binary32: its E5M2 gradients */
}

double vijp_format_unit_roundoff(const vijp_format *f) { return ldexp(1.0, -(int)vijp_format_value_prec(f)); }

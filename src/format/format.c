#include "vijp/vijp.h"
#include "kernels/kernels.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    f->value_bytes = s.value_bytes;
    snprintf(f->name, sizeof f->name, "%s", name);
    return 0;
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
    static const char *const names[] = {[VIJP_DOUBLE] = "double", [VIJP_BINARY32] = "binary32",
                                        [VIJP_BINARY16] = "binary16", [VIJP_BFLOAT16] = "bfloat16"};
    if ((unsigned)kind >= sizeof names / sizeof *names || !names[kind] || vijp_format_parse(names[kind], f, NULL)) {
        fprintf(stderr, "vijp_format_fixed: kind %d is not a fixed format (mpfr:P needs vijp_format_mpfr)\n", (int)kind);
        abort(); /* a programming error, reported */
    }
}

int vijp_format_parse(const char *s, vijp_format *f, vijp_error *err)
{
    if (!s) return vijp_fail(err, VIJP_EINVAL, "missing format name");
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
        static const char *const bases[] = {"double", "binary32", "bfloat16+binary32", "binary16+binary32"};
        size_t len = (size_t)(at - s), b = 0;
        while (b < sizeof bases / sizeof *bases && !(strlen(bases[b]) == len && !strncmp(s, bases[b], len))) b++;
        if (b == sizeof bases / sizeof *bases)
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
    if (!strcmp(s, "bfloat16+binary32")) return mixed(f, s, "bfloat16");
    if (!strcmp(s, "binary16+binary32")) return mixed(f, s, "binary16");
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
    return vijp_fail(err, VIJP_EINVAL,
                     "unknown format '%s' (known: double, mpfr:P, binary32, binary16, bfloat16, "
                     "bfloat16+binary32, binary16+binary32, tf32+binary32; double, binary32, bfloat16+binary32 and "
                     "binary16+binary32 also as FORMAT@SET, SET ref, avx2, avx512 or cuda)", s);
}

mpfr_prec_t vijp_format_value_prec(const vijp_format *f)
{
    return f->operand_prec && f->operand_prec < f->store_prec ? f->operand_prec : f->store_prec;
}

double vijp_format_unit_roundoff(const vijp_format *f) { return ldexp(1.0, -(int)vijp_format_value_prec(f)); }

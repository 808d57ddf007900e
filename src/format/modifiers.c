/* Format-name modifiers: ":ftz", flush to zero (format.h's store_ftz and
 * ftz; docs/formats.md says which values are flushed), and ":sr",
 * stochastic rounding of the storage (store_sr, sr.c).  A modifier ends a
 * part of the name: the storage part of a mixed format (bfloat16:ftz+binary32,
 * e4m3:sat:ftz+binary32), its accumulation part (bfloat16+binary32:ftz), or a
 * plain format's name (binary32:ftz), which is both. */
#include "modifiers.h"
#include "vijp/error.h"
#include <stdio.h>
#include <string.h>

/* Whether the part s[0..*len) ends with mod; if so *len drops it. */
static int strip(const char *s, size_t *len, const char *mod)
{
    size_t n = strlen(mod);
    if (*len < n || strncmp(s + *len - n, mod, n)) return 0;
    *len -= n;
    return 1;
}

int vijp_format_mods_split(const char *s, vijp_format_mods *m, vijp_error *err)
{
    size_t len = strlen(s), plus = strcspn(s, "+"), store_len = plus, acc_len = plus < len ? len - plus - 1 : 0;
    m->store_ftz = strip(s, &store_len, ":ftz");
    m->store_sr = !m->store_ftz && strip(s, &store_len, ":sr");
    m->acc_ftz = plus < len && strip(s + plus + 1, &acc_len, ":ftz");
    if (!m->store_ftz && !m->acc_ftz && !m->store_sr) return 0;
    if (strchr(s, '@')) /* before the length check: the kernel sets' names are long */
        return vijp_fail(err, VIJP_EINVAL, "format '%s': :ftz and :sr run through the MPFR emulation only, "
                          "not through a kernel set (@SET)", s);
    vijp_format f;
    if (len >= sizeof f.name || snprintf(m->base, sizeof m->base, "%.*s%s%.*s", (int)store_len, s, plus < len ? "+" : "",
                                         (int)acc_len, s + plus + (plus < len)) >= (int)sizeof m->base)
        return vijp_fail(err, VIJP_EINVAL, "format name '%s' too long", s);
    if (strstr(m->base, ":ftz") || strstr(m->base, ":sr"))
        return vijp_fail(err, VIJP_EINVAL, "format '%s': :ftz and :sr go once each, not together, at the end "
                          "of a part", s);
    return 1;
}

int vijp_format_mods_apply(const char *s, const vijp_format_mods *m, vijp_format *f, vijp_error *err)
{
    /* Subnormals exist in the emulated formats' grids only (double's native
     * arithmetic, mpfr:P's unbounded exponent have none to flush); MX and
     * tf32 are left out: their scales and operand rounding have no
     * flush-to-zero or stochastic model here. */
    if (!f->emulated || f->mx_block || f->operand_prec)
        return vijp_fail(err, VIJP_EINVAL, "format '%s': only binary32, binary16, bfloat16, e4m3 and e5m2 "
                         "(plain or as the storage of STORE+binary32) take :ftz and :sr", s);
    /* Stochastic rounding keys the values operators store (mat.h's stream):
     * a plain format rounds inside every operation, where no key reaches
     * (docs/formats.md) */
    if (m->store_sr && (!f->mixed || f->store_prec >= f->prec))
        return vijp_fail(err, VIJP_EINVAL, "format '%s': :sr rounds a narrow storage format stochastically: "
                         "bfloat16:sr+binary32, binary16:sr+binary32, e4m3:sr+binary32, e5m2:sr+binary32 "
                         "(a plain format rounds inside every operation, where no stream is known)", s);
    f->store_sr = m->store_sr;
    f->store_ftz = m->store_ftz;
    f->ftz = m->acc_ftz || (m->store_ftz && !f->mixed); /* a plain format stores what it computes */
    snprintf(f->name, sizeof f->name, "%s", s);
    return 0;
}

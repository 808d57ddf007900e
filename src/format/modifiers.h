/* The format-name modifiers ":ftz" and ":sr" (modifiers.c), for format.c's
 * vijp_format_parse, which parses the name without them and then applies
 * them: calls run one way, format.c → modifiers.c. */
#ifndef VIJP_FORMAT_MODIFIERS_H
#define VIJP_FORMAT_MODIFIERS_H

#include "vijp/format.h"

typedef struct {
    int store_ftz, acc_ftz, store_sr; /* ":ftz" on the storage or the accumulation part; ":sr" on the storage */
    char base[64];                    /* the name without them */
} vijp_format_mods;

/* 1 when s carries a modifier (":ftz" after the storage part, the
 * accumulation part or a plain format's name; ":sr" after the storage
 * part), with m filled; 0 when it carries none; VIJP_EINVAL (negative) with
 * err filled for a malformed one. */
int vijp_format_mods_split(const char *s, vijp_format_mods *m, vijp_error *err);
/* f, parsed from m->base, given the modifiers and named s: 0, or
 * VIJP_EINVAL with err filled for a format that takes none of them. */
int vijp_format_mods_apply(const char *s, const vijp_format_mods *m, vijp_format *f, vijp_error *err);

#endif

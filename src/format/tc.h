/* Tensor-core accumulation (tc.c): the STORE+tc:ARCH formats and their
 * block step, shared by the format module's parser and vo_dot_acc. */
#ifndef VIJP_FORMAT_TC_H
#define VIJP_FORMAT_TC_H

#include "vijp/format.h"

/* Nonzero when s names a tensor-core format (it contains "+tc:"). */
int vijp_tc_named(const char *s);

/* A model's parameters (format.h's tc_* fields). */
typedef struct {
    int group, align_bits, acc_prec, promote;
} vijp_tc_params;

/* The model "STORE+tc:ARCH" names: its parameters into *p and the mixed
 * format it otherwise is, "STORE+binary32", into base; VIJP_EINVAL with a
 * message for an unknown storage or ARCH, or a storage ARCH does not take. */
int vijp_tc_lookup(const char *s, vijp_tc_params *p, char *base, size_t size, vijp_error *err);

/* c := c + Σ_k a[k]·b[k] in f's tensor-core model (f->tc_group nonzero):
 * blocks of tc_group products in index order, each added to c in one
 * step.  The operands are values of f's matrix-product operands (already
 * rounded to operand_prec, if f has one); c is the tensor core's
 * accumulator (its promotion, tc_promote, is vo_dot_acc's). */
void vijp_tc_blocks(mpfr_t c, const mpfr_srcptr *a, const mpfr_srcptr *b, size_t n, const vijp_format *f);

#endif

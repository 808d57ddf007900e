/* A format's route and kernel context (route.h). */
#include "route.h"

int vijp_route_float(const vijp_format *f, int *storage)
{
    *storage = 0;
    if (!f->kernel_set) return 0;
    if (f->kind == VIJP_BINARY32 && !f->mixed) return 1;
    if (f->kind != VIJP_MIXED || f->operand_prec || f->prec != 24) return 0;
    *storage = f->store_prec == 8 ? VIJP_KSTORE_BF16 : f->store_prec == 11 ? VIJP_KSTORE_F16 : 0;
    return *storage != 0;
}

vijp_kctx vijp_kctx_of(const vijp_format *f)
{
    vijp_kctx cx = {NULL, 0};
    if (f->kind != VIJP_DOUBLE && !vijp_route_float(f, &cx.storage)) return cx; /* MPFR operators: no kernels */
    cx.k = f->kernel_set ? vijp_kernels_set(f->kernel_set - 1, NULL) : vijp_kernels_active();
    return cx;
}

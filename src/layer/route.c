/* A format's route and kernel context (route.h). */
#include "route.h"
#include "format/emulable.h"

static int vijp_route_float(const vijp_format *f, int *storage)
{
    *storage = 0;
    if (!f->kernel_set) return 0;
    if (f->kind == VIJP_BINARY32 && !f->mixed) return 1;
    if (f->kind != VIJP_MIXED || f->operand_prec || f->prec != 24) return 0;
    *storage = f->store_prec == 8 ? VIJP_KSTORE_BF16 : f->store_prec == 11 ? VIJP_KSTORE_F16 : 0;
    return *storage != 0;
}

vijp_route vijp_route_of(const vijp_format *f)
{
    vijp_route r = {VIJP_ROUTE_MPFR, {NULL, 0}};
    if (f->kind == VIJP_DOUBLE) r.kind = VIJP_ROUTE_DOUBLE;
    else if (vijp_route_float(f, &r.cx.storage)) r.kind = VIJP_ROUTE_FLOAT;
    else if (vijp_emu_applies(f)) r.kind = VIJP_ROUTE_EMULATED;
    if (r.kind <= VIJP_ROUTE_FLOAT) r.cx.k = f->kernel_set ? vijp_kernels_set(f->kernel_set - 1, NULL) : vijp_kernels_active();
    return r;
}

vijp_kctx vijp_kctx_of(const vijp_format *f) { return vijp_route_of(f).cx; }

const vijp_ops_mp *vijp_route_mp_ops(const vijp_layer_type *T, const vijp_route *r)
{
    int emulates = r->kind == VIJP_ROUTE_FLOAT || r->kind == VIJP_ROUTE_EMULATED;
    return emulates && T->emu ? T->emu : T->mp;
}

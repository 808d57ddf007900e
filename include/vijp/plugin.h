/* Layer plugins: layer types defined outside vijp, loaded at run time with
 * `vijp COMMAND --plugin ./mylayer.so` (repeatable, on every command that
 * takes a net or a layer).
 *
 * A plugin is a shared object that defines, with C linkage,
 *
 *     int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
 *     int vijp_plugin_init(vijp_error *err);
 *
 * vijp_plugin_init registers the plugin's types with vijp_layer_register
 * (include/vijp/layer.h) and returns 0, or a VIJP_E* code with err filled.
 * A type gives (see vijp_layer_type):
 *   - its shapes: parse (in/out from the spec argument and the incoming
 *     width; arguments into L->state), param_count, init, declare, residual;
 *   - its double operators (vijp_ops_d): forward, jvp, vjp, vijp, jacobian,
 *     and vjp_param when it has parameters; fragment_count, fragment and
 *     cokernel when its Jacobian can lose rank; inverse when it has one.
 *     Each takes the kernel context (vijp_kctx) second: ignore it, or pass
 *     it on to any operator the type calls;
 *   - optionally its MPFR operators (vijp_ops_mp), written with
 *     include/vijp/arith.h so every format is emulated exactly: without them
 *     the type runs in double only, and drift, report and every MPFR format
 *     refuse it with a message;
 *   - optionally, for elementwise types, dual_eval (f and f′ at θ) and
 *     interval->deriv_enclose (an MPFI enclosure of f′ at θ, vijp/interval.h),
 *     which vijp certify needs;
 *   - optionally, for other types, interval->jacobian_box (an MPFI
 *     enclosure of J over a box) or interval->jacobian_lipschitz (a
 *     Lipschitz constant of J, with the MPFR operators), which vijp certify
 *     --box needs (vijp/interval.h).
 * Registration checks the descriptor and refuses contradictions with a
 * message (vijp_layer_type_check).
 *
 * Build a plugin against the installed headers only, and do not link it
 * with libvijp: its vijp symbols resolve to the program that loads it, whose
 * registry it must fill.
 *
 *     cc -shared -fPIC $(pkg-config --cflags vijp) mylayer.c -o mylayer.so
 *
 * examples/layer-template/ holds two complete plugins.  Check a type with
 * the layer battery, through its own error-bound contract:
 *
 *     vijp check-layer mylayer --plugin ./mylayer.so
 *
 * (vijp/check_layer.h; examples/broken-layers/ shows what it catches). */
#ifndef VIJP_PLUGIN_H
#define VIJP_PLUGIN_H

#include "vijp/api.h"
#include "vijp/layer.h"
#include "vijp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever vijp_layer_type or the operator contracts change shape
 * (6: vijp_format grew the storage format's overflow rule; 7:
 * vijp_interval_ops grew jacobian_box and jacobian_lipschitz; 8:
 * vijp_format grew flush-to-zero and stochastic rounding; 9:
 * vijp_layer_type grew emu_native, the library's own, at its end: an ABI
 * 8 type registers as a copy of its shorter descriptor, nothing else
 * changed).  Plugins built
 * for ABI 6 and 7 still load, as a copy of each type's descriptor that the
 * registry keeps (so such a type's descriptor in the registry is not the
 * plugin's own object): without the interval members an ABI 6 table lacks,
 * and without MPFR operators, since those receive a vijp_format, whose
 * size the plugin's code may have compiled in (a copy of *f, or an object
 * vijp_format_accumulator fills) and no loader can see whether it did.
 * Such a type runs in double only, with its interval enclosures; rebuild
 * it to run it in the MPFR and emulated formats. */
#define VIJP_PLUGIN_ABI 9
#define VIJP_PLUGIN_ABI_OLDEST 6

#if defined(__GNUC__)
#define VIJP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define VIJP_PLUGIN_EXPORT
#endif

VIJP_PLUGIN_EXPORT int vijp_plugin_abi(void);
VIJP_PLUGIN_EXPORT int vijp_plugin_init(vijp_error *err);

/* Load one plugin (dlopen, ABI check, vijp_plugin_init).  The object stays
 * loaded for the life of the process: its types are in the registry.
 * VIJP_EINVAL with a message naming the file when any step fails. */
VIJP_API VIJP_MUST_CHECK int vijp_plugin_load(const char *path, vijp_error *err);

#ifdef __cplusplus
}
#endif

#endif

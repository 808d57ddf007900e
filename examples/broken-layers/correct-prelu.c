/* Not broken: prelu.h's layer as it is, with its MPFR operators.  `vijp
 * check-layer correct_prelu --plugin correct-prelu.so` passes every check
 * that applies, vjp-param-vs-differences included, so the prelu-drops-term
 * plugins fail because of their one defect alone. */
#define PRELU_MPFR
#include "prelu.h"

static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    type = prelu_type("correct_prelu", &prelu_ops, &prelu_ops_mp);
    return vijp_layer_register(&type, err);
}

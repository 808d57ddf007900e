/* Not broken: linear.h's layer as it is.  `vijp check-layer correct_linear
 * --plugin correct.so` passes every check that needs no MPFR operators, so
 * each broken plugin fails because of its one defect alone. */
#include "linear.h"

static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    type = linear_type("correct_linear", &linear_ops, NULL);
    return vijp_layer_register(&type, err);
}

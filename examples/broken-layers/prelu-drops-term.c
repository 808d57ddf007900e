/* Broken on purpose: PReLU's parameter gradient keeps the first sample's
 * terms only (prelu-drops-term.h).  No MPFR operators: nothing checks ∇θ
 * against a twin.  Caught by check-layer's `vijp-param-vs-differences`:
 * the differences of forward in a see every sample's terms. */
#define PRELU_DROPS_TERM_NAME "prelu_drops_term"
#include "prelu-drops-term.h"

/* Broken on purpose, twice alike: prelu-drops-term.c's parameter gradient
 * (the first sample's terms only), and an MPFR twin written from the same
 * derivation with the same slip (prelu-drops-term.h).  vjp-param-vs-mpfr
 * compares the two and passes: a twin that shares a bug cannot see it.
 * Caught by check-layer's `vijp-param-vs-differences`, which differences
 * the MPFR forward in a and reads neither gradient operator. */
#define PRELU_MPFR
#define PRELU_DROPS_TERM_NAME "prelu_drops_term_twin"
#include "prelu-drops-term.h"

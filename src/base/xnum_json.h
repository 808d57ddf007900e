/* vijp_xnum in JSON files (drift.json from schema 2, grad --json, regress's
 * findings): a number where the value is a double, as files always held
 * it; a decimal string of 17 digits past double's range, which reads back
 * to the same value ("1.61e-1214": a JSON number that small reads as 0 in
 * most parsers, and jansson refuses one that large); null where it is not
 * finite.  Internal to vijp (the library and its command). */
#ifndef VIJP_BASE_XNUM_JSON_H
#define VIJP_BASE_XNUM_JSON_H

#include "vijp/xnum.h"
#include <jansson.h>

json_t *vijp_xnum_to_json(vijp_xnum x);
/* A number or such a string into *x: 0; anything else (null included): −1. */
int vijp_xnum_from_json(const json_t *j, vijp_xnum *x);

#endif

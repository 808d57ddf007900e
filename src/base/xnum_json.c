/* vijp_xnum as JSON (xnum_json.h). */
#include "xnum_json.h"

json_t *vijp_xnum_to_json(vijp_xnum x)
{
    if (!vijp_xnum_isfinite(x)) return json_null();
    if (vijp_xnum_is_double(x)) return json_real(x.m);
    char buf[64];
    vijp_xnum_snprintf(buf, sizeof buf, VIJP_XNUM_ROUND_TRIP, x);
    return json_string(buf);
}

int vijp_xnum_from_json(const json_t *j, vijp_xnum *x)
{
    if (json_is_number(j)) {
        *x = vijp_xnum_of(json_number_value(j));
        return 0;
    }
    char *end;
    if (!json_is_string(j) || vijp_xnum_parse(json_string_value(j), x, &end) || *end || !vijp_xnum_isfinite(*x))
        return -1;
    return 0;
}

/* A spec argument's number as text: the shortest decimal that reads back as
 * the same double, without the '+' of a positive exponent ("1e05", not
 * "1e+05"), since '+' separates the layers of a coupling block's list and
 * ',' the items of a spec. */
#ifndef VIJP_LAYERS_DECIMAL_H
#define VIJP_LAYERS_DECIMAL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void vijp_shortest_decimal(double v, char *num, size_t size)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(num, size, "%.*g", p, v);
        if (strtod(num, NULL) == v) break;
    }
    char *plus = strchr(num, '+');
    if (plus) memmove(plus, plus + 1, strlen(plus));
}

#endif

#include "testutil.h"

Suite *suite_format(void)
{
    Suite *s = suite_create("format");
    return s;
}

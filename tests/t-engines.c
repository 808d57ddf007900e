#include "testutil.h"

Suite *suite_engines(void)
{
    Suite *s = suite_create("engines");
    return s;
}

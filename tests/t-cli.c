#include "testutil.h"

Suite *suite_cli(void)
{
    Suite *s = suite_create("cli");
    return s;
}

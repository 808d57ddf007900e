/* A plugin whose constructor dies of SIGSEGV while dlopen runs it, before
 * vijp can look up a single symbol (tests/t-plugin-load.c). */
#include <vijp/plugin.h>

static int *volatile nowhere; /* NULL */

__attribute__((constructor)) static void crash(void) { *nowhere = 1; /* SIGSEGV */ }

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    (void)err;
    return 0;
}

/* A plugin whose vijp_plugin_init dies of SIGSEGV (a store through a null
 * pointer) after saying so on stderr: vijp must name the plugin and the
 * signal, and exit 2 (tests/t-plugin-load.c). */
#include <vijp/plugin.h>
#include <stdio.h>

static int *volatile nowhere; /* NULL */

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    (void)err;
    fputs("init-crash: about to fault\n", stderr);
    *nowhere = 1; /* SIGSEGV */
    return 0;
}

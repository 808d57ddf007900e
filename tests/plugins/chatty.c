/* A correct layer (linear.h's) that prints on standard output while it is
 * loaded (a constructor, vijp_plugin_init) and from its operators, through
 * printf and through write(1): vijp's results, --json above all, must not
 * receive a byte of it (tests/t-plugin-load.c). */
#include "linear.h" /* examples/broken-layers/, on the include path of these plugins */
#include <stdio.h>
#include <unistd.h>

#define CHATTER "chatty plugin says hello\n"

__attribute__((constructor)) static void greet(void) { printf(CHATTER); }

static void chatty_forward(const vijp_layer *L, const vijp_kctx *cx, const double *th, const double *X, size_t B,
                           double *Y)
{
    printf(CHATTER);
    fflush(stdout);
    ssize_t w = write(STDOUT_FILENO, CHATTER, sizeof CHATTER - 1);
    (void)w;
    linear_ops.forward(L, cx, th, X, B, Y);
}

static vijp_ops_d ops;
static vijp_layer_type type;

int vijp_plugin_abi(void) { return VIJP_PLUGIN_ABI; }
int vijp_plugin_init(vijp_error *err)
{
    puts(CHATTER);
    ops = linear_ops, ops.forward = chatty_forward;
    type = linear_type("chatty_linear", &ops, NULL);
    return vijp_layer_register(&type, err);
}

/* The open layer model: per-instance state with copy and clear,
 * specs printed back, vijp_layer_register for a type defined outside the
 * tree, and the contradictions registration and parsing refuse.
 *
 * The out-of-tree type is the shipped example plugin scaledtanh
 * (examples/layer-template/scaledtanh.c, linked into this test binary and
 * registered through its own vijp_plugin_init): y = tanh(a·x) with one
 * learned scale a, written against the public headers only, as a user
 * would.  Variants of its descriptor make the contradictions. */
#include "fixtures/clirun.h"
#include "vijp/interval.h"
#include "fixtures/testutil.h"
#include "vijp/catalogue.h"
#include "vijp/certify.h"
#include "vijp/plugin.h"
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const vijp_layer_type *scaledtanh(void)
{
    vijp_error err = {0};
    if (!vijp_layer_type_find("scaledtanh")) ck_assert_msg(!vijp_plugin_init(&err), "%s", err.msg);
    const vijp_layer_type *T = vijp_layer_type_find("scaledtanh");
    ck_assert(T != NULL);
    return T;
}

/* A variant of scaledtanh under another name, registered once. */
static const vijp_layer_type *register_variant(vijp_layer_type *T, const char *name)
{
    vijp_error err = {0};
    T->name = name;
    if (!vijp_layer_type_find(name)) ck_assert_msg(!vijp_layer_register(T, &err), "%s: %s", name, err.msg);
    return vijp_layer_type_find(name);
}

static size_t no_params(const vijp_layer *L) { (void)L; return 0; }

/* Every built-in type satisfies the checks registration makes. */
START_TEST(builtins_pass_the_checks)
{
    size_t n;
    const vijp_layer_type *const *all = vijp_layer_types(&n);
    ck_assert_uint_ge(n, 18);
    for (size_t i = 0; i < n; i++) {
        vijp_error err = {0};
        ck_assert_msg(!vijp_layer_type_check(all[i], &err), "%s: %s", all[i]->name, err.msg);
    }
}
END_TEST

/* Each contradiction is refused with a message naming it. */
START_TEST(contradictions_refused)
{
    const vijp_layer_type *base = scaledtanh();
    static vijp_ops_d no_vijp;
    no_vijp = *base->d, no_vijp.vijp = NULL;
    static const struct {
        const char *name, *msg;
    } want[] = {
        {"deriv_with_params", "drops it"},   /* DERIV keeps only f′: the parameter gradient would be lost */
        {"no_enclosure", "f' enclosure"},     /* elementwise without deriv_enclose */
        {"inverse_residual", "no inverse"},   /* residual INVERSE without the operator */
        {"missing_vijp", "d->vijp"},          /* a required operator missing */
        {"Bad-Name", "name"},                 /* not [a-z][a-z0-9_]* */
        {"scaledtanh", "already registered"}, /* taken */
    };
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        vijp_layer_type T = *base;
        T.name = want[k].name;
        if (k == 0) T.residual = VIJP_RESIDUAL_DERIV;
        if (k == 1) T.interval = NULL;
        if (k == 2) T.residual = VIJP_RESIDUAL_INVERSE; /* scaledtanh has no inverse */
        if (k == 3) T.d = &no_vijp;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_layer_register(&T, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, want[k].msg), "%s: message '%s' lacks '%s'", want[k].name, err.msg, want[k].msg);
        if (k + 1 < sizeof want / sizeof *want) ck_assert_ptr_null(vijp_layer_type_find(want[k].name)); /* not half-registered */
    }
}
END_TEST

/* A parameterised layer whose residual kind would drop its gradient, found
 * at parse time when the type lacks vjp_param (so registration cannot see
 * it): once |∇θ| 6.747 reported, 7.0933 true, exit 0. */
START_TEST(instance_contradictions_refused)
{
    static vijp_ops_d no_param_grad;
    static vijp_ops_mp no_param_grad_mp;
    static vijp_layer_type T, T2;
    T = *scaledtanh();
    no_param_grad = *T.d, no_param_grad.vjp_param = NULL;
    no_param_grad_mp = *T.mp, no_param_grad_mp.vjp_param = NULL;
    T.residual = VIJP_RESIDUAL_DERIV, T.d = &no_param_grad, T.mp = &no_param_grad_mp;
    register_variant(&T, "scaledtanh_deriv");
    vijp_layer L;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_layer_parse(&L, "scaledtanh_deriv", 4, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "drop their gradient"), "%s", err.msg);
    ck_assert_ptr_null(L.type); /* nothing half-built */
    /* the same type without parameters is fine */
    T2 = T, T2.param_count = no_params, T2.init = NULL;
    register_variant(&T2, "tanh_deriv_noparams");
    ck_assert_msg(!vijp_layer_parse(&L, "tanh_deriv_noparams", 4, &err), "%s", err.msg);
    vijp_layer_clear(&L);
}
END_TEST

/* The registered layer in a net: backprop's parameter gradient, in double
 * and through the plugin's MPFR operators at 128 bits, against central
 * differences of the loss (h = 2^-20: truncation h²|ℓ‴|/6 ~ 1e-13, rounding
 * ~ u·|ℓ|/h ~ 1e-10 for |ℓ| ~ 1; 1e-8 relative covers both with a margin of
 * 100).  A variant without MPFR operators is refused in MPFR, naming the
 * layer. */
START_TEST(registered_type_in_a_net)
{
    scaledtanh();
    vijp_net net;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_build(&net, "scaledtanh,dense:4", 3, 4, &err), "%s", err.msg);
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 5, &err));
    net.loss = VIJP_LOSS_SQUARE;
    vijp_format F;
    vijp_format_fixed(&F, VIJP_DOUBLE);
    double X[8], T[8];
    vijp_net_sample(&net, 2, 9, X, T);
    vijp_mat th[3], Xm, Tm;
    ck_assert(!vijp_net_params(&net, &F, th, &err));
    vijp_mat_init(&Xm, 4, 2, &F), vijp_mat_init(&Tm, 4, 2, &F);
    vijp_mat_set_d(&Xm, X), vijp_mat_set_d(&Tm, T);
    vijp_grads g;
    ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &Xm, &Tm, &g, &err), "%s", err.msg);
    double fd[3] = {0};
    for (size_t layer = 0; layer < 3; layer += 2) { /* the two scaledtanh layers */
        double a = net.theta[layer][0], h = 0x1p-20, lp, lm;
        vijp_grads gp;
        th[layer].d[0] = a + h;
        ck_assert(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &Xm, &Tm, &gp, &err));
        lp = gp.loss, vijp_grads_clear(&gp);
        th[layer].d[0] = a - h;
        ck_assert(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &Xm, &Tm, &gp, &err));
        lm = gp.loss, vijp_grads_clear(&gp);
        th[layer].d[0] = a;
        fd[layer] = (lp - lm) / (2 * h);
        double got = g.grad_theta[layer].d[0];
        ck_assert_msg(fabs(got - fd[layer]) <= 1e-8 * fmax(1, fabs(fd[layer])), "layer %zu: dl/da %.17g, differences %.17g",
                      layer + 1, got, fd[layer]);
        ck_assert_msg(fabs(got) > 1e-3, "layer %zu: a vanishing gradient proves nothing (%g)", layer + 1, got);
    }
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, th);
    vijp_format M;
    ck_assert(!vijp_format_parse("mpfr:128", &M, NULL));
    ck_assert(!vijp_net_params(&net, &M, th, &err));
    vijp_mat XM, TM;
    vijp_mat_init(&XM, 4, 2, &M), vijp_mat_init(&TM, 4, 2, &M);
    vijp_mat_set_d(&XM, X), vijp_mat_set_d(&TM, T);
    ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &XM, &TM, &g, &err), "%s", err.msg);
    for (size_t layer = 0; layer < 3; layer += 2) {
        double got = vijp_mat_get_d(&g.grad_theta[layer], 0);
        ck_assert_msg(fabs(got - fd[layer]) <= 1e-8 * fmax(1, fabs(fd[layer])),
                      "layer %zu in MPFR: dl/da %.17g, differences %.17g", layer + 1, got, fd[layer]);
    }
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, th);
    vijp_net_free(&net);

    static vijp_layer_type Td;
    Td = *scaledtanh(), Td.mp = NULL;
    register_variant(&Td, "scaledtanh_double");
    ck_assert(!vijp_net_build(&net, "scaledtanh_double,dense:4", 3, 4, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 5, &err));
    ck_assert(!vijp_net_params(&net, &M, th, &err));
    ck_assert_int_eq(vijp_engine_run(VIJP_ENGINE_BACKPROP, &net, th, &XM, &TM, &g, &err), VIJP_EUNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "scaledtanh_double") && strstr(err.msg, "MPFR"), "%s", err.msg);
    vijp_net_params_clear(&net, th);
    vijp_mat_clear(&Xm), vijp_mat_clear(&Tm), vijp_mat_clear(&XM), vijp_mat_clear(&TM);
    vijp_net_free(&net);
}
END_TEST

/* θ reaches f′'s enclosure and the per-format underflow table: the computed
 * f′ = 4a·e/(1 + e)², e = exp(−2|a·x|), is 0 once e underflows (a|x| near
 * 372.6 in double), so doubling a (an exact scaling of a·x) halves the |x|
 * where it first does, to the bisection's 2^-60 relative width. */
START_TEST(activation_analysis_sees_theta)
{
    scaledtanh();
    vijp_layer L;
    vijp_error err = {0};
    ck_assert(!vijp_layer_parse(&L, "scaledtanh", 1, &err));
    double a1 = 1, a2 = 2;
    vijp_activation_report r1, r2;
    ck_assert_msg(!vijp_activation_analyze(&L, &a1, 100, 1e-9, &r1, &err), "%s", err.msg);
    ck_assert_msg(!vijp_activation_analyze(&L, &a2, 100, 1e-9, &r2, &err), "%s", err.msg);
    ck_assert(r1.complete && r1.n_bad == 0 && r2.complete && r2.n_bad == 0);
    double u1 = r1.fmt[0].underflow_at, u2 = r2.fmt[0].underflow_at;
    ck_assert_msg(isfinite(u1) && fabs(u2 / u1 - 0.5) < 1e-6, "underflow at %g (a = 1) and %g (a = 2)", u1, u2);
    /* a = 0: f′ ≡ 0, the bisection reports the whole range */
    double a0 = 0;
    vijp_activation_report r0;
    ck_assert(!vijp_activation_analyze(&L, &a0, 100, 1e-9, &r0, &err));
    ck_assert_msg(r0.n_bad == 1 && r0.bad[0].lo <= -100 && r0.bad[0].hi >= 100, "%zu spans", r0.n_bad);
    vijp_activation_report_clear(&r0), vijp_activation_report_clear(&r1), vijp_activation_report_clear(&r2);
    vijp_layer_clear(&L);
}
END_TEST

/* Instances own their state: a copy outlives its original, and each
 * catalogue item prints back as a spec that parses to the same instance. */
START_TEST(state_copy_and_spec)
{
    static const struct {
        const char *item;
        size_t width;
    } items[] = {
        {"leaky:0.1", 8}, {"conv1d:2x3s2:circular", 8}, {"conv2d:1x3x4", 16}, {"avgpool:2", 8}, {"squeeze:2x2", 8},
        {"inv1x1:4", 8}, {"additive:conv1d:1x3:circular+tanh", 8}, {"affine:exp+dense:4+leaky:0.5", 8},
        {"dense:4", 6}, {"gelu", 4}, {"conv2d:2x2x4s2:out=3:pad=0:reflect", 32}, {"conv1d:2x4:out=1:pad=1:circular", 8},
        {"avgpool2d:2x2x4", 32}, {"maxpool1d:2x3s1", 8}, {"maxpool2d:1x3x4s2", 16},
        {"affine:leaky:170", 8}, /* printed as leaky:1.7e+02 once, whose '+' split the block (fuzzer) */
    };
    for (size_t k = 0; k < sizeof items / sizeof *items; k++) {
        vijp_layer L, C, R;
        vijp_error err = {0};
        ck_assert_msg(!vijp_layer_parse(&L, items[k].item, items[k].width, &err), "%s: %s", items[k].item, err.msg);
        vijp_layer_copy(&C, &L);
        char s1[128], s2[128];
        vijp_layer_spec(&L, s1, sizeof s1);
        vijp_layer_clear(&L); /* the copy must not share the original's state */
        ck_assert_msg(!vijp_layer_parse(&R, s1, items[k].width, &err), "'%s' printed as '%s': %s", items[k].item, s1, err.msg);
        vijp_layer_spec(&C, s2, sizeof s2);
        ck_assert_str_eq(s1, s2);
        vijp_layer_spec(&R, s2, sizeof s2);
        ck_assert_str_eq(s1, s2);
        ck_assert(R.in == C.in && R.out == C.out && R.type->param_count(&R) == C.type->param_count(&C));
        vijp_layer_clear(&C), vijp_layer_clear(&R);
    }
    /* the accessors read what was parsed */
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "conv2d:2x3x4s2:circular", 32, NULL));
    const vijp_conv_args *a = vijp_conv_get(&L);
    ck_assert(a->channels == 2 && a->kernel == 3 && a->rows == 4 && a->stride == 2 && a->circular);
    vijp_layer_clear(&L);
    ck_assert(!vijp_layer_parse(&L, "additive:conv1d:1x3+tanh", 8, NULL));
    ck_assert_uint_eq(vijp_coupling_count(&L, 0), 2);
    ck_assert_str_eq(vijp_coupling_sub(&L, 0, 0)->type->name, "conv1d");
    vijp_layer_clear(&L);
}
END_TEST

/* The catalogue's accessors (src/layer/catalogue.c) know a built-in type by
 * its name, which holds because no other type can be registered under a
 * built-in name; on another type an accessor reports the call and aborts. */
START_TEST(accessors_check_the_type)
{
    static const char *const builtin[] = {"leaky", "conv1d", "conv2d", "avgpool", "squeeze", "inv1x1", "additive", "affine",
                                          "avgpool2d", "maxpool1d", "maxpool2d"};
    for (size_t k = 0; k < sizeof builtin / sizeof *builtin; k++) {
        vijp_layer_type T = *scaledtanh();
        T.name = builtin[k];
        vijp_error err = {0};
        ck_assert_int_eq(vijp_layer_register(&T, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, "already registered"), "%s: %s", builtin[k], err.msg);
        ck_assert(vijp_layer_type_find(builtin[k]) != &T);
    }
    vijp_layer L;
    ck_assert(!vijp_layer_parse(&L, "dense:4", 4, NULL));
    int fd[2];
    ck_assert(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        (void)vijp_conv_get(&L);
        _exit(0);
    }
    close(fd[1]);
    char msg[256] = "";
    size_t got = 0;
    for (ssize_t r; got + 1 < sizeof msg && (r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0;) got += (size_t)r;
    msg[got] = 0;
    close(fd[0]);
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "vijp_conv_get on a dense layer did not abort");
    ck_assert_str_eq(msg, "vijp: vijp_conv_get called on a dense layer\n");
    vijp_layer_clear(&L);
}
END_TEST

/* A study of a plugin's type records the --plugin it loaded: the command
 * drift.json and report.md name can be run again as written, and writes
 * the same curves. */
START_TEST(recorded_command_loads_its_plugins)
{
    const char *bin = getenv("VIJP_BIN");
    ck_assert_msg(bin && *bin, "VIJP_BIN is unset: run the suite through make check");
    char so[4200], base[256], out[300], args[8192];
    test_plugin_path("scaledtanh", so, sizeof so);
    make_temp_dir(base, sizeof base, "plugin-cmd");
    snprintf(out, sizeof out, "%s/out", base);
    snprintf(args, sizeof args, "drift --net dense:4,scaledtanh --depth 4 --formats double --seeds 1 --no-plots -q "
             "--plugin '%s' --out '%s'", so, out);
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK, "vijp %s: exit %d: %s", args, r.rc, r.err);
    run_free(&r);
    char path[400];
    snprintf(path, sizeof path, "%s/drift.json", out);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    ck_assert_msg(o, "%s: %s", path, je.text);
    const char *cmd = json_string_value(json_object_get(json_object_get(o, "meta"), "command"));
    ck_assert_msg(cmd && !strncmp(cmd, "vijp drift --plugin ", 20) && strstr(cmd, "scaledtanh.so"), "command: %s",
                  cmd ? cmd : "(none)");
    /* run as recorded (vijp is VIJP_BIN; the shell reads its quoting), into the same folder */
    r = run_bin(bin, cmd + strlen("vijp "));
    ck_assert_msg(r.rc == CLI_OK, "the recorded command: exit %d: %s", r.rc, r.err);
    run_free(&r);
    json_decref(o);
    remove_tree(base);
}
END_TEST

/* --plugin failures: exit 2 with a message naming the file and the problem,
 * whatever the command (the happy path, plugins built against the installed
 * headers, runs in scripts/check-install.sh). */
START_TEST(plugin_errors)
{
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"grad --net dense:4 --plugin", "--plugin needs a file"},
        {"grad --net dense:4 --plugin /nonexistent/x.so", "cannot load plugin '/nonexistent/x.so'"},
        {"certify --layer tanh --plugin=/dev/null", "cannot load plugin '/dev/null'"},
        {"drift --plugin no-such-plugin.so --net dense:4", "cannot load plugin 'no-such-plugin.so'"},
    };
    /* a loadable object that is no plugin: LAPACKE's shared library, found
     * through one of its functions (already loaded, so nothing new is mapped;
     * not MPFR's, which the programs link statically where they can) */
    Dl_info where;
    char args[4200];
    ck_assert(dladdr(dlsym(RTLD_DEFAULT, "LAPACKE_dgesv"), &where) && where.dli_fname && strchr(where.dli_fname, '/'));
    snprintf(args, sizeof args, "grad --net dense:4 --plugin %s", where.dli_fname);
    run_result r0 = run_vijp(args);
    ck_assert_msg(r0.rc == CLI_USAGE && strstr(r0.err, "defines no vijp_plugin_abi"), "vijp %s: exit %d, stderr '%s'", args,
                  r0.rc, r0.err);
    run_free(&r0);
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        run_result r = run_vijp(bad[k].args);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k].msg), "vijp %s: exit %d, stderr '%s'", bad[k].args, r.rc,
                      r.err);
        ck_assert_msg(r.out[0] == 0, "vijp %s wrote to stdout: %s", bad[k].args, r.out);
        run_free(&r);
    }
}
END_TEST

Suite *suite_registry(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, builtins_pass_the_checks);
    tcase_add_test(tc, contradictions_refused);
    tcase_add_test(tc, instance_contradictions_refused);
    tcase_add_test(tc, registered_type_in_a_net);
    tcase_add_test(tc, activation_analysis_sees_theta);
    tcase_add_test(tc, state_copy_and_spec);
    tcase_add_test(tc, accessors_check_the_type);
    tcase_add_test(tc, plugin_errors);
    tcase_add_test(tc, recorded_command_loads_its_plugins);
    suite_add_tcase(s, tc);
    return s;
}

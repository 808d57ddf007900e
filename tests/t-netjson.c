/* Nets in JSON (vijp-net/1), --weights and --input: the loader builds the
 * same net as the spec with the same θ (gradients equal bit for bit), maps
 * PyTorch's layout as written out by hand here, and refuses every malformed
 * file with exit 2 naming the layer index and the field. */
#include "fixtures/clirun.h"
#include <jansson.h>
#include "vijp/array_io.h"
#include "vijp/vijp.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static char dir[512];

static void dir_make(void) { make_temp_dir(dir, sizeof dir, "netjson"); }

static void dir_remove(void) { remove_tree(dir); }

static const char *at(const char *name)
{
    static char buf[8][600];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put_text(const char *name, const char *text)
{
    FILE *f = fopen(at(name), "w");
    ck_assert(f != NULL);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void npy(const char *name, size_t ndim, const size_t *shape, const double *v)
{
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_write(at(name), ndim, shape, v, &err), "%s", err.msg);
}

/* A safetensors file byte by byte (the README's "Format"): F64 tensors
 * back to back, the header padded with spaces to a multiple of 8. */
static void safetensors(const char *name, size_t n, const char *const *names, const char *const *shapes,
                        const double *const *vals, const size_t *lens)
{
    char hdr[2048] = "{";
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        snprintf(hdr + strlen(hdr), sizeof hdr - strlen(hdr), "%s\"%s\": {\"dtype\": \"F64\", \"shape\": %s, "
                 "\"data_offsets\": [%zu, %zu]}", k ? ", " : "", names[k], shapes[k], off, off + 8 * lens[k]);
        off += 8 * lens[k];
    }
    strcat(hdr, "}");
    size_t h = (strlen(hdr) + 7) / 8 * 8;
    while (strlen(hdr) < h) strcat(hdr, " ");
    FILE *f = fopen(at(name), "wb");
    ck_assert(f != NULL);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(h >> 8 * i);
    fwrite(len, 1, 8, f), fwrite(hdr, 1, h, f);
    for (size_t k = 0; k < n; k++) fwrite(vals[k], 8, lens[k], f); /* x86-64 and arm64: little-endian doubles */
    ck_assert_int_eq(fclose(f), 0);
}

/* dense:3x4 (PyTorch weight [3, 4] from .npy), tanh, dense:2 (θ from a
 * safetensors file): 15 + 0 + 8 parameters. */
static const double W0[12] = {0.5, -1, 0.25, 2, -0.75, 0.125, 1.5, -0.5, 1, 0.375, -1.25, 0.625}, B0[3] = {0.1, -0.2, 0.3};
static double T2[8] = {0.3, -0.6, 0.9, 1.2, -0.15, 0.45, 0.05, -0.7};

static void write_net(void)
{
    size_t ws[2] = {3, 4}, bs = 3;
    npy("w0.npy", 2, ws, W0), npy("b0.npy", 1, &bs, B0);
    const char *names[] = {"2.theta"}, *shapes[] = {"[8]"};
    const double *vals[] = {T2};
    size_t lens[] = {8};
    safetensors("m.safetensors", 1, names, shapes, vals, lens);
    put_text("net.json", "{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": ["
             "{\"type\": \"dense\", \"args\": \"3x4\", \"params\": {\"weight\": \"w0.npy\", \"bias\": {\"file\": \"b0.npy\"}}},"
             "{\"type\": \"tanh\"},"
             "{\"type\": \"dense\", \"args\": \"2\", \"params\": {\"theta\": {\"file\": \"m.safetensors\", \"tensor\": \"2.theta\"}}}]}");
}

static void run(const vijp_net *net, vijp_grads *g)
{
    vijp_format f;
    vijp_error err = {0};
    ck_assert(!vijp_format_parse("double", &f, &err));
    size_t B = 3;
    double X[12], T[6];
    vijp_net_sample(net, B, 5, X, T);
    vijp_mat x, t, theta[3];
    vijp_mat_init(&x, 4, B, &f), vijp_mat_init(&t, 2, B, &f);
    vijp_mat_set_d(&x, X), vijp_mat_set_d(&t, T);
    ck_assert(!vijp_net_params(net, &f, theta, &err));
    ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_BACKPROP, net, theta, &x, &t, g, &err), "%s", err.msg);
    vijp_net_params_clear(net, theta);
    vijp_mat_clear(&x), vijp_mat_clear(&t);
}

static void same_mat(const vijp_mat *a, const vijp_mat *b, const char *what)
{
    ck_assert_uint_eq(vijp_mat_len(a), vijp_mat_len(b));
    for (size_t k = 0; k < vijp_mat_len(a); k++) {
        double x = vijp_mat_get_d(a, k), y = vijp_mat_get_d(b, k);
        ck_assert_msg(!memcmp(&x, &y, sizeof x), "%s[%zu]: %.17g vs %.17g", what, k, x, y);
    }
}

START_TEST(test_same_as_spec)
{
    write_net();
    vijp_net j, s;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_load_json(&j, at("net.json"), &err), "%s", err.msg);
    ck_assert(j.given[0] && !j.given[1] && j.given[2]);
    ck_assert(!vijp_net_build(&s, "dense:3x4,tanh,dense:2", 3, 4, &err));
    for (size_t o = 0; o < 3; o++) /* W column-major: W(o, c) at o + 3c */
        for (size_t c = 0; c < 4; c++) s.theta[0][o + 3 * c] = W0[o * 4 + c];
    memcpy(s.theta[0] + 12, B0, sizeof B0);
    memcpy(s.theta[2], T2, sizeof T2);
    vijp_grads gj = {0}, gs = {0};
    run(&j, &gj), run(&s, &gs);
    same_mat(&gj.grad_x, &gs.grad_x, "grad_x");
    for (size_t i = 0; i < 3; i++) {
        same_mat(&gj.grad_theta[i], &gs.grad_theta[i], "grad_theta");
        same_mat(&gj.g[i], &gs.g[i], "g");
    }
    vijp_grads_clear(&gj), vijp_grads_clear(&gs);
    vijp_net_free(&j), vijp_net_free(&s);
}
END_TEST

START_TEST(test_torch_layout)
{
    /* dense 2 → 3: nn.Linear weight [[1,2],[3,4],[5,6]], bias [7,8,9];
     * θ = W column-major (columns (1,3,5), (2,4,6)) then b.  conv1d:2x3
     * (2 channels of 4 positions): weight [2][2][3] = 1..12, bias 13, 14;
     * θ = W[o][c][k] at (o·2 + c)·3 + k, which is 1..12, then 13, 14. */
    static const double w[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9}, dense_theta[9] = {1, 3, 5, 2, 4, 6, 7, 8, 9};
    double cw[12], cb[2] = {13, 14}, conv_theta[14];
    for (int k = 0; k < 12; k++) cw[k] = k + 1;
    for (int k = 0; k < 14; k++) conv_theta[k] = k + 1;
    size_t ws[2] = {3, 2}, bs = 3, cws[3] = {2, 2, 3}, cbs = 2;
    npy("w.npy", 2, ws, w), npy("b.npy", 1, &bs, b), npy("cw.npy", 3, cws, cw), npy("cb.npy", 1, &cbs, cb);
    put_text("t.json", "{\"schema\": \"vijp-net/1\", \"width\": 2, \"layers\": ["
             "{\"type\": \"dense\", \"args\": \"3x2\", \"params\": {\"weight\": \"w.npy\", \"bias\": \"b.npy\"}},"
             "{\"type\": \"dense\", \"args\": \"8\"},"
             "{\"type\": \"conv1d\", \"args\": \"2x3\", \"params\": {\"weight\": \"cw.npy\", \"bias\": \"cb.npy\"}}]}");
    vijp_net n;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_load_json(&n, at("t.json"), &err), "%s", err.msg);
    for (int k = 0; k < 9; k++) ck_assert_msg(n.theta[0][k] == dense_theta[k], "dense θ[%d] = %g", k, n.theta[0][k]);
    for (int k = 0; k < 14; k++) ck_assert_msg(n.theta[2][k] == conv_theta[k], "conv θ[%d] = %g", k, n.theta[2][k]);
    ck_assert(!n.given[1]);
    /* vijp_net_init leaves given layers alone */
    ck_assert(!vijp_net_init(&n, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, 3, &err));
    ck_assert(n.theta[0][0] == 1 && n.theta[2][13] == 14 && n.theta[1][0] != 0);
    vijp_net_free(&n);
}
END_TEST

/* conv1d:2x2:out=3 on 2 channels of 4: torch's weight [3, 2, 2] and bias
 * [3] land in θ in C order (nn.Conv1d's state_dict); [2, 2, 2] (in = out,
 * the layout before output channels) is refused with the shape wanted. */
START_TEST(test_torch_layout_out_channels)
{
    double w[12], b[3] = {13, 14, 15};
    for (int k = 0; k < 12; k++) w[k] = k + 1;
    size_t ws[3] = {3, 2, 2}, bad[3] = {2, 2, 2}, bs = 3;
    npy("w3.npy", 3, ws, w), npy("b3.npy", 1, &bs, b), npy("w2.npy", 3, bad, w);
    put_text("o.json", "{\"schema\": \"vijp-net/1\", \"width\": 8, \"layers\": [{\"type\": \"conv1d\", \"args\": "
             "\"2x2:out=3\", \"params\": {\"weight\": \"w3.npy\", \"bias\": \"b3.npy\"}}]}");
    vijp_net n;
    vijp_error err = {0};
    ck_assert_msg(!vijp_net_load_json(&n, at("o.json"), &err), "%s", err.msg);
    for (int k = 0; k < 15; k++) ck_assert_msg(n.theta[0][k] == k + 1, "conv θ[%d] = %g", k, n.theta[0][k]);
    vijp_net_free(&n);
    put_text("o.json", "{\"schema\": \"vijp-net/1\", \"width\": 8, \"layers\": [{\"type\": \"conv1d\", \"args\": "
             "\"2x2:out=3\", \"params\": {\"weight\": \"w2.npy\", \"bias\": \"b3.npy\"}}]}");
    ck_assert_int_eq(vijp_net_load_json(&n, at("o.json"), &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, "(3, 2, 2)") || strstr(err.msg, "[3, 2, 2]") || strstr(err.msg, "3x2x2"), "%s", err.msg);
}
END_TEST

/* Each malformed file: exit 2, and stderr names the layer and the field. */
START_TEST(test_malformed)
{
    write_net();
    static const struct {
        const char *layers, *want;
    } bad[] = {
        {"{\"args\": \"3x4\"}", "layers[1].type: missing"},
        {"{\"type\": 3}", "layers[1].type: not a string"},
        {"{\"type\": \"tanh\", \"parms\": {}}", "layers[1]: unknown field 'parms'"},
        {"{\"type\": \"dense\", \"args\": \"2\", \"params\": {\"weight\": \"w0.npy\", \"bias\": \"b0.npy\"}}",
         "layers[1].params.weight: shape (3, 4), want (2, 3)"},
        {"{\"type\": \"dense\", \"args\": \"3\", \"params\": {\"weight\": \"w33.npy\", \"bias\": \"w0.npy\"}}",
         "layers[1].params.bias: shape (3, 4), want (3,)"},
        {"{\"type\": \"dense\", \"args\": \"3\", \"params\": {\"weight\": \"w0.npy\"}}", "layers[1].params.bias: missing"},
        {"{\"type\": \"dense\", \"args\": \"3\", \"params\": {\"theta\": {\"file\": \"m.safetensors\", \"tensor\": \"9.theta\"}}}",
         "layers[1].params.theta: "},
        {"{\"type\": \"dense\", \"args\": \"3\", \"params\": {\"theta\": \"nothere.npy\"}}", "layers[1].params.theta: "},
        {"{\"type\": \"bogus\"}", "layers[1].type: unknown layer type 'bogus'"},
        {"{\"type\": \"leaky\", \"args\": \"x\"}", "layers[1].args: "},
        {"{\"type\": \"tanh\", \"params\": {\"theta\": \"b0.npy\"}}", "layers[1].params: layer type tanh has no parameters"},
    };
    char text[1024], cmd[1400];
    static const double w33[9] = {0};
    size_t s33[2] = {3, 3};
    npy("w33.npy", 2, s33, w33);
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(text, sizeof text, "{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": [{\"type\": \"dense\", \"args\": "
                 "\"3x4\"}, %s]}", bad[k].layers);
        put_text("bad.json", text);
        snprintf(cmd, sizeof cmd, "grad --net '%s'", at("bad.json"));
        run_result r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k].want) && strstr(r.err, "bad.json"),
                      "case %zu: exit %d, stderr '%s' (want '%s')", k, r.rc, r.err, bad[k].want);
        run_free(&r);
    }
    static const struct {
        const char *text, *want;
    } top[] = {
        {"{\"width\": 4, \"layers\": [{\"type\": \"tanh\"}]}", "schema: missing"},
        {"{\"schema\": \"vijp-net/1\", \"layers\": [{\"type\": \"tanh\"}]}", "width: missing"},
        {"{\"schema\": \"vijp-net/1\", \"width\": \"4\", \"layers\": [{\"type\": \"tanh\"}]}", "width: want an integer"},
        {"{\"schema\": \"vijp-net/1\", \"width\": 4, \"layer\": []}", "unknown field 'layer'"},
        {"{\"schema\": \"vijp-net/1\", \"width\": 4, \"layers\": [{\"type\": \"tanh\"}], \"loss\": \"l1\"}", "loss: want"},
    };
    for (size_t k = 0; k < sizeof top / sizeof *top; k++) {
        put_text("bad.json", top[k].text);
        snprintf(cmd, sizeof cmd, "grad --net '%s'", at("bad.json"));
        run_result r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, top[k].want), "top %zu: exit %d, stderr '%s'", k, r.rc, r.err);
        run_free(&r);
    }
}
END_TEST

START_TEST(test_commands)
{
    write_net();
    char cmd[1600];
    /* --depth must be the file's number of layers */
    snprintf(cmd, sizeof cmd, "grad --net '%s' --depth 4", at("net.json"));
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "--depth 4, but") && strstr(r.err, "3 layers"), "exit %d: %s", r.rc,
                  r.err);
    run_free(&r);
    /* memory names its own option */
    snprintf(cmd, sizeof cmd, "memory --net '%s' --depth-max 8 --budget 8K", at("net.json"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "--depth-max 8, but") && strstr(r.err, "3 layers"), "exit %d: %s",
                  r.rc, r.err);
    run_free(&r);
    /* --input: a row per sample; the wrong width is bad input */
    double X[8] = {1, 2, 3, 4, -1, -2, -3, -4}, X5[10] = {0};
    size_t s24[2] = {2, 4}, s25[2] = {2, 5};
    npy("x.npy", 2, s24, X), npy("x5.npy", 2, s25, X5);
    snprintf(cmd, sizeof cmd, "grad --net '%s' --input '%s' --json", at("net.json"), at("x.npy"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "\"batch\": 2"), "exit %d: %s%s", r.rc, r.out, r.err);
    char *first = strdup(r.out);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "grad --net '%s' --input '%s'", at("net.json"), at("x5.npy"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "x5.npy"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    /* --weights: the same parameters by safetensors for the spec net give
     * the same run ("0.weight"/"0.bias" in PyTorch's layout, "2.theta") */
    const char *names[] = {"0.weight", "0.bias", "2.theta"}, *shapes[] = {"[3, 4]", "[3]", "[8]"};
    const double *vals[] = {W0, B0, T2};
    size_t lens[] = {12, 3, 8};
    safetensors("all.safetensors", 3, names, shapes, vals, lens);
    snprintf(cmd, sizeof cmd, "grad --net dense:3x4,tanh,dense:2 --depth 3 --width 4 --weights '%s' --input '%s' --json",
             at("all.safetensors"), at("x.npy"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    const char *a = strstr(first, "\"loss\""), *b = strstr(r.out, "\"loss\"");
    ck_assert(a && b);
    ck_assert_msg(!strcmp(a, b), "JSON net and --weights differ:\n%s\n%s", first, r.out);
    free(first);
    run_free(&r);
    /* --weights over a JSON net that gives parameters itself: refused, not
     * one source silently replacing the other (drift too, before computing) */
    for (int drift = 0; drift < 2; drift++) {
        snprintf(cmd, sizeof cmd, "%s --net '%s' --weights '%s'%s", drift ? "drift" : "grad", at("net.json"),
                 at("all.safetensors"), drift ? " --out /nonexistent/never" : "");
        r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "gives layer 0's parameters itself") && !r.out[0],
                      "%s: exit %d: %s", cmd, r.rc, r.err);
        run_free(&r);
    }
    /* a tensor naming no layer with parameters is an error, not ignored */
    const char *n2[] = {"1.weight"}, *s2[] = {"[3]"};
    const double *v2[] = {B0};
    size_t l2[] = {3};
    safetensors("typo.safetensors", 1, n2, s2, v2, l2);
    snprintf(cmd, sizeof cmd, "grad --net dense:3x4,tanh,dense:2 --depth 3 --width 4 --weights '%s'", at("typo.safetensors"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "1.weight"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    /* a NaN or infinite parameter is bad input, named by file and tensor,
     * before anything runs (drift once started, then stopped with exit 1) */
    double T2bad[8];
    memcpy(T2bad, T2, sizeof T2bad);
    T2bad[5] = -INFINITY;
    const double *vbad[] = {W0, B0, T2bad};
    safetensors("inf.safetensors", 3, names, shapes, vbad, lens);
    for (int drift = 0; drift < 2; drift++) {
        snprintf(cmd, sizeof cmd, "%s --net dense:3x4,tanh,dense:2 --depth 3 --width 4 --weights '%s'%s",
                 drift ? "drift" : "grad", at("inf.safetensors"), drift ? " --out /nonexistent/never" : "");
        r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "inf.safetensors: tensor 2.theta: entry 5 is -Inf"),
                      "%s: exit %d: %s", cmd, r.rc, r.err);
        run_free(&r);
    }
    /* certify at the user's point: dense:2x2 with W = [[2, 0], [0, 0]] (θ
     * column-major 2, 0, 0, 0, then b) is singular: not submersive there */
    static const double th[6] = {2, 0, 0, 0, 0, 0}, pts[4] = {1, 2, 3, 4};
    size_t ps = 6, xs[2] = {2, 2};
    npy("p.npy", 1, &ps, th), npy("pts.npy", 2, xs, pts);
    snprintf(cmd, sizeof cmd, "certify --layer dense:2x2 --params '%s' --input '%s' --json", at("p.npy"), at("pts.npy"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc != CLI_USAGE && strstr(r.out, "\"samples\": 2") && !strstr(r.out, "certified-submersive"),
                  "exit %d: %s%s", r.rc, r.out, r.err);
    /* and it says where θ and the points came from, not "gaussian" */
    char said[1200];
    snprintf(said, sizeof said, "\"parameters\": \"%s\"", at("p.npy"));
    ck_assert_msg(strstr(r.out, said) && strstr(r.out, "\"input\": \""), "%s", r.out);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "certify --layer dense:2x2 --params '%s' --input '%s'", at("p.npy"), at("pts.npy"));
    r = run_vijp(cmd);
    snprintf(said, sizeof said, "2 samples, seed 1, parameters from %s, points from %s\n", at("p.npy"), at("pts.npy"));
    ck_assert_msg(strstr(r.out, said), "%s", r.out);
    run_free(&r);
    /* a one-layer JSON net with its weights in files */
    put_text("one.json", "{\"schema\": \"vijp-net/1\", \"width\": 2, \"layers\": ["
             "{\"type\": \"dense\", \"args\": \"2x2\", \"params\": {\"theta\": \"p.npy\"}}]}");
    snprintf(cmd, sizeof cmd, "certify --layer '%s' --samples 1", at("one.json"));
    r = run_vijp(cmd);
    snprintf(said, sizeof said, "1 samples, seed 1, parameters from %s, points 1·N(0,1)\n", at("one.json"));
    ck_assert_msg(strstr(r.out, said) && strstr(r.out, "not-submersive"), "exit %d: %s%s", r.rc, r.out, r.err);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "certify --layer dense:2x2 --params '%s'", at("b0.npy"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "b0.npy"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
    /* a net reached through a symbolic link is read as every input is: the
     * study's description (what --resume compares) once refused it, exit 1 */
    ck_assert(symlink(at("net.json"), at("link.json")) == 0);
    snprintf(cmd, sizeof cmd, "drift --net '%s' --formats double --seeds 1 --no-plots -q --out '%s'", at("link.json"),
             at("report"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* certify --net: each layer at its own weights and at the inputs that
 * reach it.  Layer 1, dense:2x2 with W = [[2, 0], [0, 0]], b = 0, is
 * singular: not submersive, proven; layer 2, tanh, sees h = (2·x1, 0),
 * computed here by hand, and must give the certificates that certify
 * --layer tanh gives at those points. */
START_TEST(test_certify_net)
{
    static const double th[6] = {2, 0, 0, 0, 0, 0}, pts[6] = {0.25, -1, 1, 3, -0.5, 2}, h1[6] = {0.5, 0, 2, 0, -1, 0};
    size_t ps = 6, xs[2] = {3, 2};
    npy("sing.npy", 1, &ps, th), npy("x.npy", 2, xs, pts), npy("h1.npy", 2, xs, h1);
    put_text("n.json", "{\"schema\": \"vijp-net/1\", \"width\": 2, \"layers\": ["
             "{\"type\": \"dense\", \"args\": \"2x2\", \"params\": {\"theta\": \"sing.npy\"}}, {\"type\": \"tanh\"}]}");
    char cmd[4096], said[1200];
    snprintf(cmd, sizeof cmd, "certify --net '%s' --input '%s' --json", at("n.json"), at("x.npy"));
    run_result r = run_vijp(cmd);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    ck_assert_msg(r.rc == CLI_FAILED && o, "exit %d: %s%s", r.rc, r.out, r.err);
    json_t *layers = json_object_get(o, "layers");
    ck_assert_int_eq(json_array_size(layers), 2);
    ck_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "not-submersive");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "layers_certified")), 1);
    json_t *l1 = json_array_get(layers, 0), *l2 = json_array_get(layers, 1);
    ck_assert_str_eq(json_string_value(json_object_get(l1, "verdict")), "not-submersive");
    ck_assert_str_eq(json_string_value(json_object_get(l1, "parameters")), at("n.json"));
    ck_assert_int_eq(json_integer_value(json_object_get(l1, "cokernel_dim")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(l2, "verdict")), "certified-submersive");
    run_result alone = run_vijp((snprintf(said, sizeof said, "certify --layer tanh --width 2 --input '%s' --json", at("h1.npy")), said));
    json_t *t = json_loads(alone.out, 0, &je);
    ck_assert_msg(alone.rc == CLI_OK && t, "exit %d: %s", alone.rc, alone.err);
    json_t *pa = json_object_get(l2, "points"), *pb = json_object_get(t, "points");
    ck_assert_int_eq(json_array_size(pa), 3);
    for (size_t k = 0; k < 3; k++) /* the same points, the same arithmetic: equal to the last bit */
        ck_assert_msg(json_real_value(json_object_get(json_array_get(pa, k), "sigma_min")) ==
                          json_real_value(json_object_get(json_array_get(pb, k), "sigma_min")),
                      "sample %zu: layer 2's points are not h = (2·x1, 0)", k + 1);
    json_decref(t), json_decref(o);
    run_free(&alone), run_free(&r);
    /* one layer of it, as a table */
    snprintf(cmd, sizeof cmd, "certify --net '%s' --input '%s' --layer-index 2", at("n.json"), at("x.npy"));
    r = run_vijp(cmd);
    snprintf(said, sizeof said, "layer 2 of %s: tanh (2 → 2), 3 samples, seed 1, gaussian parameters, points from %s "
             "through layer 1\n", at("n.json"), at("x.npy"));
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, said) && strstr(r.out, ": 1 of 1 layer certified"), "exit %d: %s%s",
                  r.rc, r.out, r.err);
    run_free(&r);
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"--layer-index 3", "has 2 layers"},
        {"--params x.npy", "--params applies to --layer"},
        {"--layer tanh", "exclude each other"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(cmd, sizeof cmd, "certify --net '%s' %s", at("n.json"), bad[k].args);
        r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, bad[k].says) && !r.out[0], "%s: exit %d: %s", cmd, r.rc, r.err);
        run_free(&r);
    }
    r = run_vijp("certify --layer tanh --layer-index 1");
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "--layer-index applies to --net"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

Suite *suite_netjson(void)
{
    Suite *s = suite_create("netjson");
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, dir_make, dir_remove);
    tcase_add_test(tc, test_same_as_spec);
    tcase_add_test(tc, test_torch_layout);
    tcase_add_test(tc, test_torch_layout_out_channels);
    suite_add_tcase(s, tc);
    const char *bin = getenv("VIJP_BIN");
    if (bin && *bin) {
        TCase *cli = tcase_create("commands");
        tcase_add_checked_fixture(cli, dir_make, dir_remove);
        tcase_set_timeout(cli, 120);
        tcase_add_test(cli, test_malformed);
        tcase_add_test(cli, test_commands);
        tcase_add_test(cli, test_certify_net);
        suite_add_tcase(s, cli);
    }
    return s;
}

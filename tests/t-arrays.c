/* Arrays in and out (include/vijp/array_io.h), and the commands that use
 * them (certify --jacobian, grad --save).
 *
 * The oracles are independent of the code under test: .npy and safetensors
 * files built byte by byte here from the format descriptions (numpy's
 * format.py, the safetensors README), with expected values written as
 * literals from their bit patterns; files written by NumPy itself, and our
 * files read back by NumPy, when a python3 with numpy is installed
 * (scripts/install-deps.sh installs python3-numpy); matrices whose singular
 * values are exact by construction; gradients recomputed through
 * vijp_engine_run. */
#include "fixtures/clirun.h"
#include "vijp/array_io.h"
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static char dir[512];

/* Each test's own folder: a checked fixture, so a failing test removes it too. */
static void dir_make(void) { make_temp_dir(dir, sizeof dir, "arrays"); }

static void dir_remove(void) { remove_tree(dir); }

/* dir/name, in one of a few rotating buffers (several live at once). */
static const char *at(const char *name)
{
    static char buf[8][600];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void le(unsigned char *p, uint64_t v, int bytes)
{
    for (int k = 0; k < bytes; k++) p[k] = (unsigned char)(v >> 8 * k);
}

static uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

/* Same value, bit for bit (so -0.0 differs from 0.0, and NaN is NaN). */
static int same(double a, double b) { return (isnan(a) && isnan(b)) || bits(a) == bits(b); }

/* A .npy file as format.py describes it: "\x93NUMPY", major, minor 0, the
 * header length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), the dict
 * padded with spaces and '\n' to a multiple of 64, then the data. */
static size_t npy_build(unsigned char *out, int major, const char *dict, const void *data, size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12, text = strlen(dict);
    size_t total = (pre + text + 1 + 63) / 64 * 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major, out[7] = 0;
    le(out + 8, total - pre, (int)pre - 8);
    memcpy(out + pre, dict, text);
    memset(out + pre + text, ' ', total - pre - text - 1);
    out[total - 1] = '\n';
    if (dlen) memcpy(out + total, data, dlen);
    return total + dlen;
}

/* A python3 that imports numpy, or NULL: VIJP_PYTHON, python3, /usr/bin/python3
 * (a pyenv python3 may shadow the system one that python3-numpy serves). */
static const char *numpy_python(void)
{
    static const char *cands[] = {NULL, "python3", "/usr/bin/python3"};
    cands[0] = getenv("VIJP_PYTHON");
    for (size_t k = 0; k < 3; k++) {
        char cmd[512];
        if (!cands[k] || !*cands[k]) continue;
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", cands[k]);
        if (system(cmd) == 0) return cands[k];
    }
    return NULL;
}

/* ---------------------------------------------------------------- .npy read */

/* Version 1.0, 2.0 and 3.0 headers around the same '<f8' data, special values
 * included, and the header variants Python's literal syntax allows. */
START_TEST(test_npy_hand_built)
{
    static const uint64_t f8[6] = {0x3FF0000000000000u, 0xC004000000000000u, 0x0000000000000001u,
                                   0x8000000000000000u, 0x7FF0000000000000u, 0x3FB999999999999Au};
    const double want8[6] = {1.0, -2.5, 0x1p-1074, -0.0, INFINITY, 0.1};
    unsigned char data[64], buf[512];
    for (int i = 0; i < 6; i++) le(data + 8 * i, f8[i], 8);
    static const char *dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
        "{\"shape\": (2,3), \"descr\": \"<f8\", \"fortran_order\": False}",
        "{ 'fortran_order' : False ,\n 'descr':'<f8','shape':( 2 , 3 , ) }",
    };
    for (int major = 1; major <= 3; major++)
        for (size_t d = 0; d < 3; d++) {
            size_t n = npy_build(buf, major, dicts[d], data, 48);
            put(at("a.npy"), buf, n);
            vijp_array a;
            vijp_error err = {0};
            ck_assert_msg(!vijp_npy_read(at("a.npy"), &a, &err), "v%d header %zu: %s", major, d, err.msg);
            ck_assert_uint_eq(a.ndim, 2);
            ck_assert_uint_eq(a.shape[0], 2); ck_assert_uint_eq(a.shape[1], 3); ck_assert_uint_eq(a.len, 6);
            for (int i = 0; i < 6; i++) ck_assert_msg(same(a.data[i], want8[i]), "v%d [%d] = %a", major, i, a.data[i]);
            vijp_array_clear(&a);
            vijp_array m; /* from memory, the same */
            ck_assert(!vijp_npy_parse(buf, n, "mem", &m, &err));
            for (int i = 0; i < 6; i++) ck_assert(same(m.data[i], want8[i]));
            vijp_array_clear(&m);
        }
    /* '<f4': 1, the least subnormal 2^-149, fl32(−π); '<f2': 1, 2^-24, 65504, −2 */
    static const uint32_t f4[3] = {0x3F800000u, 0x00000001u, 0xC0490FDBu};
    const double want4[3] = {1.0, 0x1p-149, -0x1.921fb6p+1};
    for (int i = 0; i < 3; i++) le(data + 4 * i, f4[i], 4);
    put(at("f4.npy"), buf, npy_build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data, 12));
    static const uint16_t f2[4] = {0x3C00, 0x0001, 0x7BFF, 0xC000};
    const double want2[4] = {1.0, 0x1p-24, 65504.0, -2.0};
    vijp_array a;
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_read(at("f4.npy"), &a, &err), "%s", err.msg);
    ck_assert_uint_eq(a.ndim, 1); ck_assert_uint_eq(a.len, 3);
    for (int i = 0; i < 3; i++) ck_assert_msg(same(a.data[i], want4[i]), "f4[%d] = %a", i, a.data[i]);
    vijp_array_clear(&a);
    for (int i = 0; i < 4; i++) le(data + 2 * i, f2[i], 2);
    put(at("f2.npy"), buf, npy_build(buf, 2, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", data, 8));
    ck_assert_msg(!vijp_npy_read(at("f2.npy"), &a, &err), "%s", err.msg);
    for (int i = 0; i < 4; i++) ck_assert_msg(same(a.data[i], want2[i]), "f2[%d] = %a", i, a.data[i]);
    vijp_array_clear(&a);
    /* a scalar (shape ()), an empty array, a 1-D array marked Fortran order
     * (the same bytes either way) */
    le(data, f8[5], 8);
    put(at("s.npy"), buf, npy_build(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", data, 8));
    ck_assert_msg(!vijp_npy_read(at("s.npy"), &a, &err), "%s", err.msg);
    ck_assert(a.ndim == 0 && a.len == 1 && same(a.data[0], 0.1));
    vijp_array_clear(&a);
    put(at("e.npy"), buf, npy_build(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }", data, 0));
    ck_assert_msg(!vijp_npy_read(at("e.npy"), &a, &err), "%s", err.msg);
    ck_assert(a.ndim == 2 && a.shape[0] == 0 && a.shape[1] == 3 && a.len == 0);
    vijp_array_clear(&a);
    put(at("v.npy"), buf, npy_build(buf, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (1,), }", data, 8));
    ck_assert_msg(!vijp_npy_read(at("v.npy"), &a, &err), "%s", err.msg);
    ck_assert(a.len == 1 && same(a.data[0], 0.1));
    vijp_array_clear(&a);
}
END_TEST

/* Every refusal names the file and says what is wrong. */
START_TEST(test_npy_refusals)
{
    unsigned char data[64] = {0}, buf[70000];
    struct {
        const char *file, *dict; /* dict NULL: bytes made below */
        size_t dlen;
        const char *why;
    } cases[] = {
        {"fortran.npy", "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", 48, "Fortran-order"},
        {"big-endian.npy", "{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }", 48, "big-endian"},
        {"native.npy", "{'descr': '=f8', 'fortran_order': False, 'shape': (2, 3), }", 48, "byte order"},
        {"pipe.npy", "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "byte order"},
        {"object.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, "'|O' is not supported"},
        {"int.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 48, "'<i8' is not supported"},
        {"complex.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }", 48, "not supported"},
        {"structured.npy", "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (6,), }", 48, "structured"},
        {"no-shape.npy", "{'descr': '<f8', 'fortran_order': False, }", 8, "lacks 'shape'"},
        {"extra-key.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1, }", 8, "unexpected key 'x'"},
        {"twice.npy", "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8, "twice"},
        {"not-tuple.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (6), }", 48, "not a tuple"},
        {"list.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': [2, 3], }", 48, "list"},
        {"negative.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", 0, "negative"},
        {"huge.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 0, "too large"},
        {"truncated-data.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 40,
         "truncated .npy file: shape (2, 3) needs 48 bytes of data, the file has 40"},
        {"extra-data.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 56, "size mismatch"},
        {"garbage.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), } x", 8, "malformed"},
        {"unclosed.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), ", 8, "malformed"},
        {"bool.npy", "{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }", 8, "True or False"},
        {"escape.npy", "{'descr': '<f\\x38', 'fortran_order': False, 'shape': (1,), }", 8, "malformed"},
        {"empty.npy", NULL, 0, "empty file"},
        {"magic.npy", NULL, 0, "not a .npy file"},
        {"preamble.npy", NULL, 0, "truncated .npy file (7 bytes)"},
        {"version.npy", NULL, 0, "version 4.0 is not supported"},
        {"minor.npy", NULL, 0, "version 1.1 is not supported"},
        {"header-cut.npy", NULL, 0, "truncated .npy file: the header needs"},
        {"header-big.npy", NULL, 0, "exceeds the limit of 10000"},
        {"dims.npy", NULL, 0, "more than 64 dimensions"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = 0;
        if (cases[c].dict) n = npy_build(buf, 1, cases[c].dict, data, cases[c].dlen);
        else if (!strcmp(cases[c].file, "magic.npy")) n = npy_build(buf, 1, cases[1].dict, data, 48), buf[1] = 'n';
        else if (!strcmp(cases[c].file, "preamble.npy")) n = 7, memcpy(buf, "\x93NUMPY\x01", 7);
        else if (!strcmp(cases[c].file, "version.npy")) n = npy_build(buf, 1, cases[1].dict, data, 48), buf[6] = 4;
        else if (!strcmp(cases[c].file, "minor.npy")) n = npy_build(buf, 1, cases[1].dict, data, 48), buf[7] = 1;
        else if (!strcmp(cases[c].file, "header-cut.npy")) n = npy_build(buf, 1, cases[1].dict, data, 0) - 5;
        else if (!strcmp(cases[c].file, "header-big.npy")) { /* a valid dict padded past NumPy's limit */
            char *dict = malloc(20001);
            snprintf(dict, 20001, "%s", "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }");
            memset(dict + strlen(dict), ' ', 20000 - strlen(dict)), dict[20000] = 0;
            n = npy_build(buf, 2, dict, data, 0);
            free(dict);
        } else if (!strcmp(cases[c].file, "dims.npy")) {
            char dict[512] = "{'descr': '<f8', 'fortran_order': False, 'shape': (";
            for (int k = 0; k < 65; k++) strcat(dict, "1, ");
            strcat(dict, "), }");
            n = npy_build(buf, 1, dict, data, 8);
        }
        put(at(cases[c].file), buf, n);
        vijp_array a;
        vijp_error err = {0};
        int rc = vijp_npy_read(at(cases[c].file), &a, &err);
        ck_assert_msg(rc == VIJP_EINVAL, "%s: rc %d (%s)", cases[c].file, rc, err.msg);
        ck_assert_msg(strstr(err.msg, at(cases[c].file)) && strstr(err.msg, cases[c].why), "%s: message '%s' lacks '%s'",
                      cases[c].file, err.msg, cases[c].why);
        ck_assert_ptr_null(a.data);
        vijp_array_clear(&a);
        /* and from memory, named as given */
        rc = vijp_npy_parse(buf, n, "buffer-name", &a, &err);
        ck_assert_msg(rc == VIJP_EINVAL && strstr(err.msg, "buffer-name"), "%s from memory: %s", cases[c].file, err.msg);
        vijp_array_clear(&a);
    }
}
END_TEST

/* Files that cannot be read are VIJP_EIO with the path and strerror; a
 * folder is not a file at all (VIJP_EINVAL, bad input), said before reading
 * it (test_device_inputs: devices). */
START_TEST(test_npy_read_errors)
{
    vijp_array a;
    vijp_error err = {0};
    ck_assert_int_eq(vijp_npy_read(at("absent.npy"), &a, &err), VIJP_EIO);
    ck_assert_msg(strstr(err.msg, at("absent.npy")) && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
    ck_assert_int_eq(vijp_npy_read(dir, &a, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "is a folder, not a file"), "%s", err.msg);
    vijp_safetensors st;
    ck_assert_int_eq(vijp_safetensors_read(at("absent.safetensors"), &st, &err), VIJP_EIO);
    ck_assert_msg(strstr(err.msg, at("absent.safetensors")) && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
}
END_TEST

/* ----------------------------------------------------------- .npy write */

/* The header is NumPy's own ('<f8', C order, version 1.0, data at a
 * multiple of 64), and every value comes back bit for bit. */
START_TEST(test_npy_round_trip)
{
    const double specials[] = {0.0, -0.0, 0x1p-1074, -0x1.fffffffffffffp+1023, INFINITY, -INFINITY, NAN, 0.1, -1.0 / 3};
    static const size_t shapes[][4] = {{0}, {1, 9}, {2, 3, 3}, {3, 1, 3, 3}, {2, 0, 5}};
    static const size_t ndims[] = {0, 2, 3, 4, 3};
    static const char *const texts[] = {"()", "(1, 9)", "(2, 3, 3)", "(3, 1, 3, 3)", "(2, 0, 5)"};
    double x[27];
    for (int i = 0; i < 27; i++) x[i] = specials[i % 9] * (i < 9 ? 1 : -3);
    for (size_t c = 0; c < 5; c++) {
        vijp_error err = {0};
        ck_assert_msg(!vijp_npy_write(at("w.npy"), ndims[c], shapes[c], x, &err), "%s", err.msg);
        FILE *f = fopen(at("w.npy"), "rb");
        unsigned char head[128];
        size_t got = fread(head, 1, sizeof head, f);
        fclose(f);
        ck_assert_uint_ge(got, 64);
        char want[128];
        snprintf(want, sizeof want, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }", texts[c]);
        ck_assert(!memcmp(head, "\x93NUMPY\x01\x00", 8));
        size_t hlen = head[8] | (size_t)head[9] << 8;
        ck_assert_msg((10 + hlen) % 64 == 0 && head[10 + hlen - 1] == '\n', "header length %zu", hlen);
        ck_assert_msg(!memcmp(head + 10, want, strlen(want)), "header '%.60s'", (const char *)head + 10);
        vijp_array a;
        ck_assert_msg(!vijp_npy_read(at("w.npy"), &a, &err), "%s", err.msg);
        ck_assert_uint_eq(a.ndim, ndims[c]);
        for (size_t k = 0; k < a.ndim; k++) ck_assert_uint_eq(a.shape[k], shapes[c][k]);
        for (size_t i = 0; i < a.len; i++) ck_assert_msg(same(a.data[i], x[i]), "[%zu] %a != %a", i, a.data[i], x[i]);
        unsigned char *mem;
        size_t len;
        ck_assert(!vijp_npy_encode(ndims[c], shapes[c], x, &mem, &len, &err)); /* the same bytes from memory */
        ck_assert_uint_eq(len, 10 + hlen + 8 * a.len);
        vijp_array b;
        ck_assert(!vijp_npy_parse(mem, len, "mem", &b, &err));
        ck_assert_uint_eq(b.len, a.len);
        vijp_free(mem), vijp_array_clear(&a), vijp_array_clear(&b);
    }
}
END_TEST

/* Temporaries (array_io's .vijp-tmp-*) left in folder. */
static int tmp_left(const char *folder)
{
    DIR *d = opendir(folder);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, ".vijp-tmp-", 10);
    if (d) closedir(d);
    return n;
}

/* A write that fails (here: past a file size limit, SIGXFSZ ignored so write
 * returns EFBIG) says which file, leaves the old file whole and no
 * temporary behind; a missing folder is refused naming the file. */
START_TEST(test_npy_write_failure)
{
    put(at("keep.npy"), "old", 3);
    size_t n = 20000, shape[1] = {n};
    double *x = calloc(n, sizeof *x);
    struct rlimit old, lim;
    ck_assert(!getrlimit(RLIMIT_FSIZE, &old));
    lim = old, lim.rlim_cur = 4096;
    void (*h)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert(!setrlimit(RLIMIT_FSIZE, &lim));
    vijp_error err = {0};
    int rc = vijp_npy_write(at("keep.npy"), 1, shape, x, &err);
    ck_assert(!setrlimit(RLIMIT_FSIZE, &old));
    signal(SIGXFSZ, h);
    ck_assert_msg(rc == VIJP_EIO, "rc %d: %s", rc, err.msg);
    ck_assert_msg(strstr(err.msg, at("keep.npy")) && strstr(err.msg, strerror(EFBIG)), "message: %s", err.msg);
    FILE *f = fopen(at("keep.npy"), "rb");
    char back[8] = {0};
    ck_assert_uint_eq(fread(back, 1, sizeof back, f), 3);
    fclose(f);
    ck_assert_str_eq(back, "old");
    ck_assert_int_eq(tmp_left(dir), 0);
    ck_assert_int_eq(vijp_npy_write(at("no-such-folder/x.npy"), 1, shape, x, &err), VIJP_EIO);
    ck_assert_msg(strstr(err.msg, at("no-such-folder/x.npy")) && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------ NumPy */

static const char numpy_script[] =
    "import numpy as np, sys\n"
    "d = sys.argv[1]\n"
    "a = (np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 11) / 7\n"
    "for v in (1, 2, 3):\n"
    "    with open(d + '/f8_v%d.npy' % v, 'wb') as f:\n"
    "        np.lib.format.write_array(f, a, version=(v, 0))\n"
    "np.save(d + '/f4.npy', a.astype('<f4'))\n"
    "np.save(d + '/f2.npy', ((np.arange(24) - 11) / 8).reshape(4, 6).astype('<f2'))\n"
    "np.save(d + '/scalar.npy', np.float64(0.1))\n"
    "np.save(d + '/empty.npy', np.zeros((0, 5)))\n"
    "np.save(d + '/big.npy', a.astype('>f8'))\n"
    "np.save(d + '/fortran.npy', np.asfortranarray(a))\n"
    "np.save(d + '/transposed.npy', a[0].T)\n"
    "np.save(d + '/object.npy', np.array([1, 'x'], dtype=object), allow_pickle=True)\n"
    "np.save(d + '/int.npy', np.arange(6).reshape(2, 3))\n"
    "np.save(d + '/complex.npy', np.ones(3, dtype=complex))\n"
    "np.save(d + '/bool.npy', np.ones(3, dtype=bool))\n";

/* What NumPy reads from our file: values (i − 11)/7, shape (2, 3, 4). */
static const char numpy_check[] =
    "import numpy as np, sys\n"
    "f = open(sys.argv[1] + '/ours.npy', 'rb')\n"
    "v = np.lib.format.read_magic(f)\n"
    "shape, fortran, dtype = np.lib.format.read_array_header_1_0(f) if v == (1, 0) else (None, None, None)\n"
    "assert (shape, fortran, dtype.str) == ((2, 3, 4), False, '<f8'), (v, shape, fortran, dtype)\n"
    "assert f.tell() % 64 == 0\n"
    "b = np.load(sys.argv[1] + '/ours.npy')\n"
    "a = (np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 11) / 7\n"
    "assert np.array_equal(a, b) and (a.view(np.uint64) == b.view(np.uint64)).all()\n"
    "print('numpy-ok')\n";

START_TEST(test_npy_numpy)
{
    const char *py = numpy_python();
    if (!py) {
        fputs("t-arrays: no python3 with numpy (install python3-numpy): NumPy files not tested, hand-built ones are\n", stderr);
        return;
    }
    put(at("gen.py"), numpy_script, strlen(numpy_script));
    put(at("check.py"), numpy_check, strlen(numpy_check));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", py, at("gen.py"), dir);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    vijp_array a;
    vijp_error err = {0};
    for (int v = 1; v <= 3; v++) { /* IEEE division is correctly rounded in C as in NumPy */
        char name[32];
        snprintf(name, sizeof name, "f8_v%d.npy", v);
        ck_assert_msg(!vijp_npy_read(at(name), &a, &err), "%s", err.msg);
        ck_assert(a.ndim == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4);
        for (int i = 0; i < 24; i++) ck_assert_msg(same(a.data[i], (i - 11) / 7.0), "%s[%d] = %a", name, i, a.data[i]);
        vijp_array_clear(&a);
    }
    ck_assert_msg(!vijp_npy_read(at("f4.npy"), &a, &err), "%s", err.msg);
    for (int i = 0; i < 24; i++) ck_assert_msg(same(a.data[i], (float)((i - 11) / 7.0)), "f4[%d] = %a", i, a.data[i]);
    vijp_array_clear(&a);
    ck_assert_msg(!vijp_npy_read(at("f2.npy"), &a, &err), "%s", err.msg);
    ck_assert(a.ndim == 2 && a.shape[0] == 4 && a.shape[1] == 6);
    for (int i = 0; i < 24; i++) ck_assert_msg(same(a.data[i], (i - 11) / 8.0), "f2[%d] = %a", i, a.data[i]);
    vijp_array_clear(&a);
    ck_assert(!vijp_npy_read(at("scalar.npy"), &a, &err) && a.ndim == 0 && a.len == 1 && same(a.data[0], 0.1));
    vijp_array_clear(&a);
    ck_assert(!vijp_npy_read(at("empty.npy"), &a, &err) && a.ndim == 2 && a.shape[1] == 5 && a.len == 0);
    vijp_array_clear(&a);
    static const char *const bad[][2] = {{"big.npy", "big-endian"},        {"fortran.npy", "Fortran-order"},
                                         {"transposed.npy", "Fortran-order"}, {"object.npy", "'|O' is not supported"},
                                         {"int.npy", "'<i8' is not supported"}, {"complex.npy", "'<c16' is not supported"},
                                         {"bool.npy", "'|b1' is not supported"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ck_assert_int_eq(vijp_npy_read(at(bad[k][0]), &a, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, at(bad[k][0])) && strstr(err.msg, bad[k][1]), "%s: %s", bad[k][0], err.msg);
    }
    /* and NumPy reads ours */
    size_t shape[3] = {2, 3, 4};
    double x[24];
    for (int i = 0; i < 24; i++) x[i] = (i - 11) / 7.0;
    ck_assert_msg(!vijp_npy_write(at("ours.npy"), 3, shape, x, &err), "%s", err.msg);
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' | grep -q numpy-ok", py, at("check.py"), dir);
    ck_assert_msg(system(cmd) == 0, "NumPy does not read our file back: %s", cmd);
}
END_TEST

/* ------------------------------------------------------------- safetensors */

/* A safetensors file as the README describes it: the header's size as 8
 * bytes little-endian, the JSON header (padded with spaces to a multiple of
 * 8, as the README allows), then the byte buffer. */
static size_t st_build(unsigned char *out, const char *json, const unsigned char *data, size_t dlen)
{
    size_t n = strlen(json), N = (n + 7) / 8 * 8;
    le(out, N, 8);
    memcpy(out + 8, json, n);
    memset(out + 8 + n, ' ', N - n);
    if (dlen) memcpy(out + 8 + N, data, dlen);
    return 8 + N + dlen;
}

START_TEST(test_safetensors_hand_built)
{
    /* The buffer has no holes, so the tensors follow each other (not in the
     * header's order): f32 [0,12), f64 [12,28), bf16 [28,36), f16 [36,48),
     * empty [48,48), scalar [48,56), ints [56,64).  Expected values are the
     * bit patterns' meanings: BF16 0x3F80 = 1, 0xC040 = −3, 0x0001 = 2^-133
     * (its least subnormal), 0x7F80 = ∞; F16 0x3C00 = 1, 0x0001 = 2^-24,
     * 0x7BFF = 65504 (its largest), 0x8000 = −0, 0x3555 = 1365·2^-12,
     * 0xFC00 = −∞. */
    const char *json =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"f64\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[12,28]},"
        "\"f32\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
        "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[28,36]},"
        "\"f16\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[36,48]},"
        "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[48,48]},"
        "\"scalar\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[48,56]},"
        "\"ints\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[56,64]}}";
    unsigned char d[64], buf[1024];
    le(d + 0, 0x3F800000u, 4), le(d + 4, 0x00000001u, 4), le(d + 8, 0xC0490FDBu, 4);
    le(d + 12, 0x3FF0000000000000u, 8), le(d + 20, 0xC004000000000000u, 8);
    le(d + 28, 0x3F80, 2), le(d + 30, 0xC040, 2), le(d + 32, 0x0001, 2), le(d + 34, 0x7F80, 2);
    le(d + 36, 0x3C00, 2), le(d + 38, 0x0001, 2), le(d + 40, 0x7BFF, 2), le(d + 42, 0x8000, 2), le(d + 44, 0x3555, 2),
        le(d + 46, 0xFC00, 2);
    le(d + 48, 0x3FB999999999999Au, 8), le(d + 56, 7, 8);
    put(at("m.safetensors"), buf, st_build(buf, json, d, 64));
    struct {
        const char *name;
        size_t ndim, shape[2], len;
        double want[6];
    } t[] = {
        {"f64", 1, {2}, 2, {1.0, -2.5}},
        {"f32", 1, {3}, 3, {1.0, 0x1p-149, -0x1.921fb6p+1}},
        {"bf16", 2, {2, 2}, 4, {1.0, -3.0, 0x1p-133, INFINITY}},
        {"f16", 2, {2, 3}, 6, {1.0, 0x1p-24, 65504.0, -0.0, 0x1.554p-2, -INFINITY}},
        {"empty", 2, {0, 4}, 0, {0}},
        {"scalar", 0, {0}, 1, {0.1}},
    };
    vijp_safetensors st;
    vijp_error err = {0};
    ck_assert_msg(!vijp_safetensors_read(at("m.safetensors"), &st, &err), "%s", err.msg);
    ck_assert_uint_eq(st.n, 7); /* __metadata__ is not a tensor */
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        vijp_array a;
        ck_assert_msg(!vijp_safetensors_tensor(&st, t[k].name, &a, &err), "%s: %s", t[k].name, err.msg);
        ck_assert_uint_eq(a.ndim, t[k].ndim); ck_assert_uint_eq(a.len, t[k].len);
        for (size_t j = 0; j < a.ndim; j++) ck_assert_uint_eq(a.shape[j], t[k].shape[j]);
        for (size_t i = 0; i < a.len; i++)
            ck_assert_msg(same(a.data[i], t[k].want[i]), "%s[%zu] = %a, want %a", t[k].name, i, a.data[i], t[k].want[i]);
        vijp_array_clear(&a);
    }
    vijp_array a;
    ck_assert_int_eq(vijp_safetensors_tensor(&st, "ints", &a, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, at("m.safetensors")) && strstr(err.msg, "'ints' has dtype I64"), "%s", err.msg);
    ck_assert_int_eq(vijp_safetensors_tensor(&st, "absent", &a, &err), VIJP_EINVAL);
    ck_assert_msg(strstr(err.msg, at("m.safetensors")) && strstr(err.msg, "no tensor named 'absent'"), "%s", err.msg);
    vijp_safetensors_clear(&st);
}
END_TEST

START_TEST(test_safetensors_refusals)
{
    static const char *const ok = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
    struct {
        const char *file, *json;
        size_t dlen;
        const char *why;
    } cases[] = {
        {"not-object", "{\"a\":[1]}", 0, "'a': its header entry is not an object"},
        {"no-dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,16]}}", 16, "needs \"dtype\""},
        {"dtype", "{\"a\":{\"dtype\":\"F128\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, "unknown dtype 'F128'"},
        {"shape-type", "{\"a\":{\"dtype\":\"F64\",\"shape\":2,\"data_offsets\":[0,16]}}", 16, "\"shape\" is not an array"},
        {"shape-neg", "{\"a\":{\"dtype\":\"F64\",\"shape\":[-2],\"data_offsets\":[0,16]}}", 16, "shape entry 0"},
        {"shape-real", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2.0],\"data_offsets\":[0,16]}}", 16, "shape entry 0"},
        {"shape-huge", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}", 16, "too large"},
        {"dims", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                 "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,8]}}", 8, "more than 64"},
        {"offsets", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0]}}", 16, "\"data_offsets\" is not [BEGIN, END]"},
        {"backwards", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,0]}}", 16, "end before they begin"},
        {"range", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}", 16,
         "data offsets [8, 24] out of range: the data buffer has 16 bytes"},
        {"size", "{\"a\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16,
         "size mismatch: shape (3,) of F64 needs 24 bytes, its offsets hold 16"},
        {"overlap", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                    "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}", 24, "tensors 'a' and 'b' overlap"},
        {"overlap-empty", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                          "\"e\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]}}", 16, "overlap"},
        {"hole", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]}}", 24, "hole: bytes [8, 16)"},
        {"trailing", ok, 24, "8 bytes after the last tensor's end"},
        {"duplicate", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, "duplicate"},
        {"json", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}", 16, "bad JSON"},
        {"brace", " {}", 0, "does not start with '{'"},
    };
    unsigned char d[64] = {0}, buf[2048];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = st_build(buf, cases[c].json, d, cases[c].dlen);
        put(at(cases[c].file), buf, n);
        vijp_safetensors st;
        vijp_error err = {0};
        int rc = vijp_safetensors_read(at(cases[c].file), &st, &err);
        ck_assert_msg(rc == VIJP_EINVAL, "%s: rc %d", cases[c].file, rc);
        ck_assert_msg(strstr(err.msg, at(cases[c].file)) && strstr(err.msg, cases[c].why), "%s: message '%s' lacks '%s'",
                      cases[c].file, err.msg, cases[c].why);
        ck_assert_uint_eq(st.n, 0);
    }
    /* the header's size: cut, over the file, over the limit */
    size_t n = st_build(buf, ok, d, 16);
    struct {
        const char *file;
        size_t len;
        uint64_t N;
        const char *why;
    } sizes[] = {
        {"short", 5, 0, "truncated safetensors file (5 bytes"},
        {"header-cut", 0, 4096, "truncated safetensors file: the header needs 4096 bytes"},
        {"header-big", 0, 200000000, "header size 200000000 exceeds the limit of 100000000"},
        {"header-2^64", 0, UINT64_MAX, "exceeds the limit"},
    };
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++) {
        unsigned char b2[2048];
        memcpy(b2, buf, n);
        if (sizes[c].N) le(b2, sizes[c].N, 8);
        put(at(sizes[c].file), b2, sizes[c].len ? sizes[c].len : n);
        vijp_safetensors st;
        vijp_error err = {0};
        ck_assert_int_eq(vijp_safetensors_read(at(sizes[c].file), &st, &err), VIJP_EINVAL);
        ck_assert_msg(strstr(err.msg, at(sizes[c].file)) && strstr(err.msg, sizes[c].why), "%s: %s", sizes[c].file, err.msg);
    }
    /* the valid one reads */
    vijp_safetensors st;
    vijp_error err = {0};
    ck_assert_msg(!vijp_safetensors_parse(buf, n, "ok", &st, &err), "%s", err.msg);
    vijp_safetensors_clear(&st);
}
END_TEST

/* ------------------------------------------------------ certify --jacobian */

/* A '<f8' C-order .npy file of an m × n matrix given row by row. */
static void npy_matrix(const char *path, size_t m, size_t n, const double *rows)
{
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '<f8', 'fortran_order': False, 'shape': (%zu, %zu), }", m, n);
    unsigned char *data = malloc(8 * m * n + 1), *buf = malloc(8 * m * n + 256);
    for (size_t i = 0; i < m * n; i++) le(data + 8 * i, bits(rows[i]), 8);
    put(path, buf, npy_build(buf, 1, dict, data, 8 * m * n));
    free(data), free(buf);
}

/* J = U·diag(s)·Vᵀ (4 × 16) with U = H₄/2 and V = H₁₆/4, Sylvester-Hadamard
 * matrices scaled to be exactly orthogonal: every entry is a sum of four
 * ±s_k/8, exact in double for the s used, so the singular values are s
 * exactly. */
static int hadamard(size_t i, size_t j) { return __builtin_popcountll(i & j) % 2 ? -1 : 1; }

static void usv(double *J, const double s[4])
{
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 16; j++) {
            double v = 0;
            for (size_t k = 0; k < 4; k++) v += hadamard(i, k) * 0.5 * s[k] * hadamard(j, k) * 0.25;
            J[i * 16 + j] = v;
        }
}

static json_t *certify_json(const char *args, int want_rc)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "certify --json %s", args);
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == want_rc, "vijp %s: exit %d, want %d: %s", cmd, r.rc, want_rc, r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    ck_assert_msg(o != NULL, "vijp %s printed no JSON: %s", cmd, r.out);
    run_free(&r);
    return o;
}

static double jnum(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }
static const char *jstr(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

START_TEST(test_certify_jacobian)
{
    double J[64], Jt[64], R[64];
    char args[1400];
    usv(J, (double[]){4, 2, 1, 0.5});
    npy_matrix(at("J.npy"), 4, 16, J);
    /* σ_min = 0.5 exactly: certified, with 0 < s < 0.5 */
    snprintf(args, sizeof args, "--jacobian '%s'", at("J.npy"));
    json_t *o = certify_json(args, CLI_OK);
    ck_assert_str_eq(jstr(o, "verdict"), "certified-submersive");
    ck_assert_int_eq((int)jnum(o, "out"), 4); ck_assert_int_eq((int)jnum(o, "in"), 16);
    double s = jnum(o, "sigma_min_lower_bound");
    ck_assert_msg(s > 0.4 && s < 0.5, "proven s = %.17g for σ_min 0.5", s);
    /* LAPACK's σ are backward stable: within a few u·σ_max of the exact ones */
    ck_assert_msg(fabs(jnum(o, "sigma_min") - 0.5) < 1e-13 && fabs(jnum(o, "sigma_max") - 4) < 1e-13, "σ %.17g %.17g",
                  jnum(o, "sigma_min"), jnum(o, "sigma_max"));
    json_decref(o);
    /* its transpose, 16 × 4: more outputs than inputs, proven not submersive */
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 16; j++) Jt[j * 4 + i] = J[i * 16 + j];
    npy_matrix(at("Jt.npy"), 16, 4, Jt);
    snprintf(args, sizeof args, "--jacobian '%s'", at("Jt.npy"));
    o = certify_json(args, CLI_FAILED);
    ck_assert_str_eq(jstr(o, "verdict"), "not-submersive");
    ck_assert_int_eq((int)jnum(o, "cokernel_dim"), 12);
    json_decref(o);
    /* C order: rows [1 1 0] and [0 0 1] have σ = √2 and 1; read column by
     * column the same bytes would give (√5 ± 1)/2 */
    npy_matrix(at("small.npy"), 2, 3, (double[]){1, 1, 0, 0, 0, 1});
    snprintf(args, sizeof args, "--jacobian '%s'", at("small.npy"));
    o = certify_json(args, CLI_OK);
    ck_assert_msg(fabs(jnum(o, "sigma_max") - sqrt(2)) < 1e-15 && fabs(jnum(o, "sigma_min") - 1) < 1e-15, "σ %g %g",
                  jnum(o, "sigma_max"), jnum(o, "sigma_min"));
    json_decref(o);
    /* exactly rank 3: not submersive, a cokernel of dimension 1 */
    double D[64];
    usv(D, (double[]){4, 2, 1, 0});
    npy_matrix(at("D.npy"), 4, 16, D);
    snprintf(args, sizeof args, "--jacobian '%s'", at("D.npy"));
    o = certify_json(args, CLI_FAILED);
    ck_assert_str_eq(jstr(o, "verdict"), "not-submersive");
    ck_assert_int_eq((int)jnum(o, "cokernel_dim"), 1);
    json_decref(o);
    /* a radius of 2^-10 per entry (‖R‖_F = 2^-7): still certified, and by
     * Weyl s <= 0.5 − 2^-7 */
    for (int i = 0; i < 64; i++) R[i] = 0x1p-10;
    npy_matrix(at("R.npy"), 4, 16, R);
    snprintf(args, sizeof args, "--jacobian '%s' --radius '%s'", at("J.npy"), at("R.npy"));
    o = certify_json(args, CLI_OK);
    s = jnum(o, "sigma_min_lower_bound");
    ck_assert_msg(s > 0.4 && s <= 0.5 - 0x1p-7, "proven s = %.17g with ‖R‖_F = 2^-7", s);
    ck_assert_str_eq(jstr(o, "radius"), at("R.npy"));
    json_decref(o);
    /* a radius of 1/4 per entry (‖R‖_F = 2 > σ_min): the interval matrix
     * holds singular matrices, so no certificate: inconclusive */
    for (int i = 0; i < 64; i++) R[i] = 0.25;
    npy_matrix(at("Rbig.npy"), 4, 16, R);
    snprintf(args, sizeof args, "--jacobian '%s' --radius '%s'", at("J.npy"), at("Rbig.npy"));
    o = certify_json(args, CLI_FAILED);
    ck_assert_str_eq(jstr(o, "verdict"), "inconclusive");
    json_t *pt = json_array_get(json_object_get(o, "points"), 0);
    ck_assert_msg(strstr(jstr(pt, "reason"), "radius"), "reason: %s", jstr(pt, "reason"));
    json_decref(o);
    /* the table */
    snprintf(args, sizeof args, "certify --jacobian '%s'", at("J.npy"));
    run_result r = run_vijp(args);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "jacobian ") && strstr(r.out, "(4 × 16")
                      && strstr(r.out, "\nverdict: certified-submersive — proven σ_min(J) > 0.49"),
                  "%s", r.out);
    run_free(&r);
}
END_TEST

/* Bad input: exit 2, nothing on stdout, a message naming the file. */
START_TEST(test_certify_jacobian_bad)
{
    double J[64], R[64];
    usv(J, (double[]){4, 2, 1, 0.5});
    npy_matrix(at("J.npy"), 4, 16, J);
    for (int i = 0; i < 64; i++) R[i] = i == 17 ? -0x1p-20 : 0;
    npy_matrix(at("Rneg.npy"), 4, 16, R);
    npy_matrix(at("Rshape.npy"), 16, 4, J);
    npy_matrix(at("empty.npy"), 0, 4, J);
    J[5] = NAN;
    npy_matrix(at("nan.npy"), 4, 16, J);
    unsigned char buf[1024], data[64] = {0};
    put(at("vec.npy"), buf, npy_build(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", data, 24));
    put(at("fortran.npy"), buf, npy_build(buf, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", data, 48));
    struct {
        const char *jacobian, *radius, *why; /* the message names the radius's file when there is one */
    } cases[] = {
        {"absent.npy", NULL, "No such file"},
        {"vec.npy", NULL, "must be a 2-D array (m × n), got shape (3,)"},
        {"fortran.npy", NULL, "Fortran-order"},
        {"empty.npy", NULL, "empty"},
        {"nan.npy", NULL, "entry (0, 5) of the Jacobian is not finite"},
        {"J.npy", "Rneg.npy", "entry (1, 1) of the radius is negative"},
        {"J.npy", "Rshape.npy", "shape (16, 4)"},
        {"J.npy", "absent.npy", "No such file"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char cmd[1500];
        const char *named = at(cases[c].radius ? cases[c].radius : cases[c].jacobian);
        int k = snprintf(cmd, sizeof cmd, "certify --jacobian '%s'", at(cases[c].jacobian));
        if (cases[c].radius) snprintf(cmd + k, sizeof cmd - (size_t)k, " --radius '%s'", named);
        run_result r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0], "vijp %s: exit %d, out '%s'", cmd, r.rc, r.out);
        ck_assert_msg(strstr(r.err, named) && strstr(r.err, cases[c].why), "vijp %s: '%s' lacks '%s'", cmd, r.err,
                      cases[c].why);
        run_free(&r);
    }
    static const char *const usage[][2] = {
        {"certify --layer tanh --jacobian x.npy", "exclude each other"},
        {"certify --radius x.npy --layer tanh", "--radius needs --jacobian"},
        {"certify --jacobian x.npy --samples 3", "--samples applies to --layer"},
    };
    for (size_t c = 0; c < 3; c++) {
        run_result r = run_vijp(usage[c][0]);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, usage[c][1]), "vijp %s: exit %d: %s", usage[c][0], r.rc, r.err);
        run_free(&r);
    }
}
END_TEST

/* ---------------------------------------------------------------- grad --save */

/* What grad --save wrote, against the same run made here through the
 * library (vijp_grad_setup's recipe: vijp_net_build, vijp_net_init,
 * vijp_net_sample, vijp_net_params, then vijp_engine_run): equal bit for bit,
 * rows being samples. */
static void check_npy_mat(const char *path, const vijp_mat *m, int vector)
{
    vijp_array a;
    vijp_error err = {0};
    ck_assert_msg(!vijp_npy_read(path, &a, &err), "%s", err.msg);
    if (vector) ck_assert_msg(a.ndim == 1 && a.shape[0] == m->rows, "%s: ndim %zu", path, a.ndim);
    else ck_assert_msg(a.ndim == 2 && a.shape[0] == m->cols && a.shape[1] == m->rows, "%s: shape (%zu, %zu)", path, a.shape[0], a.shape[1]);
    for (size_t s = 0; s < m->cols; s++)
        for (size_t k = 0; k < m->rows; k++) /* entry k of sample s */
            ck_assert_msg(same(a.data[s * m->rows + k], vijp_mat_get_d(m, k + s * m->rows)), "%s: sample %zu entry %zu", path, s, k);
    vijp_array_clear(&a);
}

START_TEST(test_grad_save)
{
    const char *spec = "dense:6,leaky:0.5,dense:5";
    size_t depth = 3, B = 2;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "grad --net %s --depth %zu --batch %zu --format binary32 --engine moonwalk,backprop "
                              "--seed 7 --save '%s'", spec, depth, B, at("out/sub"));
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK && strstr(r.out, "moonwalk"), "vijp %s: exit %d: %s", cmd, r.rc, r.err);
    run_free(&r);

    vijp_format f;
    vijp_error err = {0};
    vijp_net net;
    ck_assert(!vijp_format_parse("binary32", &f, &err));
    ck_assert(!vijp_net_build(&net, spec, depth, 0, &err));
    net.loss = VIJP_LOSS_SQUARE;
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_ORTHOGONAL, .gain = 1}, 7, &err));
    size_t n0 = net.width, mD = vijp_net_out_width(&net);
    double *X = calloc(n0 * B, sizeof *X), *T = calloc(mD * B, sizeof *T);
    vijp_net_sample(&net, B, 7, X, T);
    vijp_mat Xm, Tm, *theta = calloc(depth, sizeof *theta);
    vijp_mat_init(&Xm, n0, B, &f), vijp_mat_init(&Tm, mD, B, &f);
    vijp_mat_set_d(&Xm, X), vijp_mat_set_d(&Tm, T);
    ck_assert(!vijp_net_params(&net, &f, theta, &err));
    vijp_grads g;
    ck_assert_msg(!vijp_engine_run(VIJP_ENGINE_MOONWALK, &net, theta, &Xm, &Tm, &g, &err), "%s", err.msg);
    check_npy_mat(at("out/sub/grad_x.npy"), &g.grad_x, 0);
    for (size_t i = 0; i < depth; i++) {
        char name[64];
        snprintf(name, sizeof name, "out/sub/grad_theta_%zu.npy", i + 1);
        if (g.grad_theta[i].rows) check_npy_mat(at(name), &g.grad_theta[i], 1);
        else ck_assert_msg(access(at(name), F_OK) != 0, "%s written for a layer without parameters", name);
        snprintf(name, sizeof name, "out/sub/cotangent_%zu.npy", i + 1);
        check_npy_mat(at(name), &g.g[i], 0);
    }
    ck_assert_uint_eq(g.grad_theta[1].rows, 0); /* leaky has no parameters: the test above saw one missing */
    vijp_grads_clear(&g);
    vijp_net_params_clear(&net, theta);
    vijp_mat_clear(&Xm), vijp_mat_clear(&Tm);
    free(theta), free(X), free(T);
    vijp_net_free(&net);

    /* a write that fails (a file size limit of 512 bytes, SIGXFSZ ignored so
     * write returns EFBIG): exit 1 naming the file, stdout empty, no file
     * and no temporary left */
    snprintf(cmd, sizeof cmd, "-c 'trap \"\" XFSZ; ulimit -f 1; exec \"$VIJP_BIN\" grad --net dense:64 --depth 1 --batch 4 "
                              "--save \"%s\"'", at("full"));
    r = run_bin("sh", cmd);
    ck_assert_msg(r.rc == CLI_FAILED && !r.out[0] && strstr(r.err, at("full/grad_x.npy")) && strstr(r.err, strerror(EFBIG)),
                  "grad --save past a size limit: exit %d, out '%s', err '%s'", r.rc, r.out, r.err);
    run_free(&r);
    ck_assert(access(at("full/grad_x.npy"), F_OK) != 0);
    ck_assert_int_eq(tmp_left(at("full")), 0);

    /* a folder that cannot be made: bad input, before running */
    put(at("file"), "x", 1);
    snprintf(cmd, sizeof cmd, "grad --net dense:4 --depth 1 --save '%s'", at("file/sub"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, at("file")), "vijp %s: exit %d: %s", cmd, r.rc, r.err);
    run_free(&r);
}
END_TEST

/* The folder's entries, each with its bytes ("NAME SIZE HEX…" a line),
 * hidden ones included: what a run left there. */
static char *listing(const char *folder)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cd '%s' && for f in * .[!.]*; do [ -e \"$f\" ] && { printf '%%s ' \"$f\"; "
                              "if [ -d \"$f\" ]; then echo dir; else od -An -tx1 \"$f\" | tr -d ' \\n'; echo; fi; }; done; true",
             folder);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char *text = slurp_fd(fileno(p));
    ck_assert_int_eq(pclose(p), 0);
    return text;
}

/* grad --save writes its set all or none: a run stopped by a file-size
 * limit after its first file (grad_x.npy fits in 4 KB, grad_theta_1.npy
 * does not) leaves the earlier run's files as they were and nothing
 * hidden; a folder where one of the files goes is refused before the run
 * (exit 2), the others untouched; a link to nothing as DIR too. */
START_TEST(test_grad_save_all_or_none)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "grad --net dense:64 --depth 2 --batch 4 --seed 1 --save '%s'", at("set"));
    run_result r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_OK, "exit %d: %s", r.rc, r.err);
    run_free(&r);
    char *before = listing(at("set"));
    ck_assert_msg(strstr(before, "grad_x.npy ") && strstr(before, "cotangent_2.npy "), "%s", before);
    snprintf(cmd, sizeof cmd, "-c 'trap \"\" XFSZ; ulimit -f 8; exec \"$VIJP_BIN\" grad --net dense:64 --depth 2 --batch 4 "
                              "--seed 2 --save \"%s\"'", at("set"));
    r = run_bin("sh", cmd);
    char *after = listing(at("set"));
    ck_assert_msg(r.rc == CLI_FAILED && !r.out[0] && strstr(r.err, at("set/grad_theta_1.npy not written")),
                  "exit %d, out '%s', err '%s'", r.rc, r.out, r.err);
    size_t d = 0;
    while (before[d] && before[d] == after[d]) d++;
    const char *line = after + d;
    while (line > after && line[-1] != '\n') line--;
    ck_assert_msg(!strcmp(before, after), "a failed --save changed the folder, from: %.60s", line);
    run_free(&r), free(after);
    char sub[700];
    snprintf(sub, sizeof sub, "%s/cotangent_2.npy", at("set"));
    ck_assert(!remove(sub) && !mkdir(sub, 0700));
    free(before), before = listing(at("set"));
    snprintf(cmd, sizeof cmd, "grad --net dense:64 --depth 2 --batch 4 --seed 2 --save '%s'", at("set"));
    r = run_vijp(cmd);
    after = listing(at("set"));
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "cotangent_2.npy is a folder") && !strcmp(before, after),
                  "exit %d: %s", r.rc, r.err);
    run_free(&r), free(after), free(before);
    ck_assert(!symlink(at("nowhere"), at("link")));
    snprintf(cmd, sizeof cmd, "grad --net dense:4 --depth 1 --save '%s'", at("link"));
    r = run_vijp(cmd);
    ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, "a link to a missing"), "exit %d: %s", r.rc, r.err);
    run_free(&r);
}
END_TEST

/* A sample that is not a number is named by its row and column in the
 * file, as numpy indexes it (the engines hold samples as columns, and said
 * "row 2, column 0" for the file's row 0, column 2), and refused with the
 * other inputs, before anything runs: exit 2 (drift ran its study first and
 * exited 1).  grad's --target likewise, where a missing file was exit 1. */
START_TEST(test_rows_not_finite_named)
{
    double x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* 2 × 4 files, and a 3 × 3 one */
    x[2] = NAN;
    npy_matrix(at("nan.npy"), 2, 4, x);
    x[2] = 3, x[7] = -INFINITY;
    npy_matrix(at("inf.npy"), 2, 4, x);
    npy_matrix(at("t33.npy"), 3, 3, x);
    static const struct {
        const char *args, *file, *says;
    } cases[] = {
        {"grad --net dense:4,tanh --depth 2 --input '%s'", "nan.npy", "--input %s: row 0, column 2 is NaN"},
        {"grad --net dense:4,tanh --depth 2 --input '%s'", "inf.npy", "--input %s: row 1, column 3 is infinite"},
        {"drift --net dense:4,tanh --depth 2 --formats double --seeds 1 --no-plots --input '%s' --out '%s'", "nan.npy",
         "--input %s: row 0, column 2 is NaN"},
        {"grad --net dense:4,tanh --depth 2 --batch 2 --target '%s'", "inf.npy", "--target %s: row 1, column 3 is infinite"},
        {"grad --net dense:4,tanh --depth 2 --target '%s'", "t33.npy", "--target %s: shape (3, 3), want [1, 4]"},
        {"grad --net dense:4,tanh --depth 2 --target '%s'", "absent.npy", "--target %s: cannot open"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char cmd[1400], want[800];
        snprintf(cmd, sizeof cmd, cases[c].args, at(cases[c].file), at("report"));
        snprintf(want, sizeof want, cases[c].says, at(cases[c].file));
        run_result r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_USAGE && !r.out[0] && strstr(r.err, want), "vijp %s: exit %d, want 2 and '%s': %s", cmd,
                      r.rc, want, r.err);
        run_free(&r);
    }
    ck_assert_msg(access(at("report"), F_OK) != 0, "the refused drift made its report folder");
}
END_TEST

/* --save's folder is made once the run has its results: a run that fails
 * (grad's forward pass past double's range; eval's vijp at a NaN, where
 * f' is NaN) exits 1 and leaves no empty folder, nor do its missing
 * parents; the folder was made with the inputs' checks. */
START_TEST(test_failed_run_leaves_no_folder)
{
    double x[4] = {1, 2, NAN, 4};
    npy_matrix(at("nan.npy"), 1, 4, x);
    static const char *const cmds[] = {
        "grad --net dense:16,leaky:0.5 --depth 4 --init scaled:1e200 --save '%s'",
        "eval --layer tanh --width 4 --input '%s' --save '%s'",
    };
    for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
        char cmd[1400];
        if (c == 0) snprintf(cmd, sizeof cmd, cmds[c], at("out/sub"));
        else snprintf(cmd, sizeof cmd, cmds[c], at("nan.npy"), at("out/sub"));
        run_result r = run_vijp(cmd);
        ck_assert_msg(r.rc == CLI_FAILED && !r.out[0], "vijp %s: exit %d, want 1: %s", cmd, r.rc, r.err);
        run_free(&r);
        ck_assert_msg(access(at("out"), F_OK) != 0, "vijp %s failed and left its --save folder", cmd);
    }
}
END_TEST

/* LAPACKE out of memory: with every malloc LAPACKE makes refused (the
 * preload library build/tests/nomem-lapacke.so, beside VIJP_BIN), every
 * LAPACK call that needs workspace, which now takes it from vijp_alloc
 * (src/base/lapack.h), gives the very output of a plain run: certify's
 * SVDs, dense's QR and least squares in grad, drift's singular values and
 * Lyapunov QR.  Before, LAPACKE printed "Not enough memory to allocate work
 * array in LAPACKE_dgesdd" on stdout and certify exited 2 as if the SVD had
 * not converged, and grad went on with R never formed and exited 0 with
 * wrong gradients.  And that workspace, refused by
 * VIJP_FAIL_ALLOC at every allocation of the run, is the memory policy's:
 * exit 1 "out of memory", stdout empty. */
START_TEST(test_certify_lapack_memory)
{
#if defined(__SANITIZE_ADDRESS__)
    fputs("# test_certify_lapack_memory: skipped under AddressSanitizer (its allocator cannot be preloaded over)\n", stderr);
#else
    char shim[1024], args[2600];
    snprintf(shim, sizeof shim, "%s", getenv("VIJP_BIN"));
    char *slash = strrchr(shim, '/');
    ck_assert(slash != NULL);
    snprintf(slash + 1, sizeof shim - (size_t)(slash + 1 - shim), "tests/nomem-lapacke.so");
    ck_assert_msg(access(shim, R_OK) == 0, "%s is missing: make check builds it (make %s)", shim, shim);
    double J[64];
    usv(J, (double[]){4, 2, 1, 0});
    npy_matrix(at("J.npy"), 4, 16, J); /* rank 3: the SVD with vectors too, for the cokernel */
    /* certify's SVDs; grad through dense's QR (tall: fragment, vijp, cokernel)
     * and least squares (wide), in double and binary32@ref (sgels); drift's
     * singular values and Lyapunov QR */
    static const char *const cmds[] = {
        "certify --jacobian '%s'", "certify --layer layernorm --width 4 --samples 2%.0s",
        "certify --layer dense:4x8 --samples 2%.0s",
        "grad --net dense:8x4,tanh,dense:4x8 --depth 3 --engine all%.0s",
        "grad --net dense:8x4,tanh,dense:4x8 --depth 3 --engine all --format binary32@ref%.0s",
        "drift --net dense:6,tanh --depth 4 --formats double --seeds 1 --no-plots -q --out '%s'"};
    for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, cmds[c], strstr(cmds[c], "drift") ? at("lapack-drift") : at("J.npy"));
        run_result plain = run_vijp(cmd);
        snprintf(args, sizeof args, "LD_PRELOAD='%s' '%s' %s", shim, getenv("VIJP_BIN"), cmd);
        run_result r = run_bin("/usr/bin/env", args);
        ck_assert_msg(r.rc == plain.rc && !strcmp(r.out, plain.out) && !strstr(r.out, "LAPACKE"),
                      "vijp %s with LAPACKE's allocations refused: exit %d (plain %d)\nstdout: %s\nstderr: %s", cmd, r.rc,
                      plain.rc, r.out, r.err);
        run_free(&r), run_free(&plain);
    }
    /* the walk: every allocation of the run, counted by VIJP_ALLOC_STATS */
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "VIJP_ALLOC_STATS=1 '%s' certify --jacobian '%s'", getenv("VIJP_BIN"), at("J.npy"));
    run_result r = run_bin("/usr/bin/env", cmd);
    const char *stats = strstr(r.err, "vijp: ");
    unsigned long n = 0;
    ck_assert_msg(stats && sscanf(stats, "vijp: %lu allocations", &n) == 1 && n > 0, "no allocation count: %s", r.err);
    run_free(&r);
    for (unsigned long k = 1; k <= n; k++) {
        snprintf(cmd, sizeof cmd, "VIJP_FAIL_ALLOC=%lu '%s' certify --jacobian '%s'", k, getenv("VIJP_BIN"), at("J.npy"));
        r = run_bin("/usr/bin/env", cmd);
        ck_assert_msg(r.rc == CLI_FAILED && !r.out[0] && strstr(r.err, "out of memory"),
                      "allocation %lu of %lu refused: exit %d, stdout '%s', stderr '%s'", k, n, r.rc, r.out, r.err);
        run_free(&r);
    }
#endif
}
END_TEST

/* vijp KIND args, bounded: killed after 20 s, and (outside AddressSanitizer,
 * which cannot run under it) within 4 GB of address space, so that a reader
 * that reads a device without end fails the test rather than the machine. */
static run_result run_bounded(const char *args)
{
    char cmd[2400];
#if defined(__SANITIZE_ADDRESS__)
    const char *limit = "";
#else
    const char *limit = "ulimit -v 4000000; ";
#endif
    snprintf(cmd, sizeof cmd, "-c '%sexec timeout -s KILL 20 \"$@\"' sh '%s' %s", limit, getenv("VIJP_BIN"), args);
    return run_bin("/bin/sh", cmd);
}

/* A device as an input file, directly or through a link with the right
 * name (.json, .npy, .safetensors), is refused before a byte is read: exit 2
 * at once, naming the file, where /dev/zero was read until memory ran out
 * (exit 1, "out of memory") and a folder was parsed as an empty file.  Every
 * reader: a net in JSON, --weights in both formats, --input, certify's
 * --jacobian and --params, eval's --input, drift's --net (nothing written),
 * regress's files. */
START_TEST(test_device_inputs)
{
    static const char *const links[][2] = {{"z.json", "/dev/zero"}, {"z.npy", "/dev/zero"},
                                           {"z.safetensors", "/dev/zero"}, {"u.npy", "/dev/urandom"},
                                           {"u.json", "/dev/urandom"}};
    for (size_t k = 0; k < sizeof links / sizeof *links; k++)
        ck_assert_msg(symlink(links[k][1], at(links[k][0])) == 0, "symlink %s: %s", links[k][0], strerror(errno));
    ck_assert(mkdir(at("folder.json"), 0755) == 0);
    static const struct {
        const char *args, *file, *what; /* file: the one the message names ("": the device itself) */
    } cases[] = {
        {"grad --net '%s'", "z.json", "character device"},
        {"grad --net '%s'", "u.json", "character device"},
        {"grad --net '%s'", "folder.json", "folder"},
        {"grad --net dense:8,tanh --depth 2 --weights '%s'", "z.npy", "character device"},
        {"grad --net dense:8,tanh --depth 2 --weights '%s'", "z.safetensors", "character device"},
        {"grad --net dense:8,tanh --depth 2 --input '%s'", "u.npy", "character device"},
        {"grad --net dense:8,tanh --depth 2 --input '%s'", "/dev/zero", "character device"},
        {"certify --jacobian '%s'", "z.npy", "character device"},
        {"certify --layer dense:2x2 --params '%s'", "z.npy", "character device"},
        {"eval --layer tanh --width 4 --input '%s' --save '%s'", "z.npy", "character device"},
        {"drift --net '%s' --depth 2 --no-plots --out '%s'", "z.json", "character device"},
        {"regress '%s' '%s'", "z.json", "character device"},
        {"regress '%s' '%s'", "/dev/urandom", "character device"},
        {"regress '%s' '%s'", "folder.json", "folder"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char args[2000];
        const char *file = cases[c].file[0] == '/' ? cases[c].file : at(cases[c].file);
        snprintf(args, sizeof args, cases[c].args, file, strncmp(cases[c].args, "regress", 7) ? at("out") : file);
        run_result r = run_bounded(args);
        char want[1200];
        snprintf(want, sizeof want, "%s: is a %s, not a file", file, cases[c].what);
        ck_assert_msg(r.rc == CLI_USAGE && strstr(r.err, want) && !r.out[0], "vijp %s: exit %d, want 2 and '%s': %s",
                      args, r.rc, want, r.err);
        run_free(&r);
    }
    ck_assert_msg(access(at("out"), F_OK) != 0, "a refused run created its output folder");
}
END_TEST

Suite *suite_arrays(void)
{
    Suite *s = suite_create("arrays");
    TCase *tc = tcase_create("formats");
    tcase_add_checked_fixture(tc, dir_make, dir_remove);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_npy_hand_built);
    tcase_add_test(tc, test_npy_refusals);
    tcase_add_test(tc, test_npy_read_errors);
    tcase_add_test(tc, test_npy_round_trip);
    tcase_add_test(tc, test_npy_write_failure);
    tcase_add_test(tc, test_npy_numpy);
    tcase_add_test(tc, test_safetensors_hand_built);
    tcase_add_test(tc, test_safetensors_refusals);
    suite_add_tcase(s, tc);
    const char *bin = getenv("VIJP_BIN");
    if (bin && *bin) { /* without it, the cli suite fails (test_no_vijp_bin) */
        TCase *cli = tcase_create("commands");
        tcase_add_checked_fixture(cli, dir_make, dir_remove);
        tcase_set_timeout(cli, 120);
        tcase_add_test(cli, test_certify_jacobian);
        tcase_add_test(cli, test_certify_jacobian_bad);
        tcase_add_test(cli, test_grad_save);
        tcase_add_test(cli, test_grad_save_all_or_none);
        tcase_add_test(cli, test_device_inputs);
        tcase_add_test(cli, test_rows_not_finite_named);
        tcase_add_test(cli, test_failed_run_leaves_no_folder);
        tcase_add_test(cli, test_certify_lapack_memory);
        suite_add_tcase(s, cli);
    }
    return s;
}

/* MX formats (format.h: OCP Microscaling v1.0), against the specification
 * itself.  Every expected value comes from this file: the element values
 * from tables written out from the specification's §5.3 (E2M1, E2M3, E3M2
 * listed value by value; E4M3, E5M2 by OFP8's formula from the bit fields),
 * the scale by searching powers of two (largest 2^e <= amax; or, for the
 * ceil rule, the smallest X with amax <= max·X), and each element by brute
 * force over the table: nearest value, ties to the even code, nothing past
 * the largest (saturation).  All in doubles, where every step here is
 * exact (values, their scalings by powers of two and the table's entries
 * are doubles far from double's limits).  The code under test is reached
 * through the public matrix store (vijp_mat_store, vijp_mat_set_d,
 * vijp_mat_store_line, vijp_mat_set_d_line, vijp_mat_convert), vo_store,
 * the parameters of a dense net, and the code decoders.  No tolerance:
 * every claim is equality (the sign of zero included, NaN as a class). */
#include "fixtures/testutil.h"
#include "vijp/arith.h"
#include "vijp/mat.h"
#include "vijp/net.h"
#include "vijp/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;      /* the MX format's name, less "+binary32" */
    int ebits, mbits;      /* the element's fields */
    int emax_elem;         /* the exponent of its largest normal */
    double table[128];     /* the value of each non-negative code, NaN/Inf where the code is one */
} elem;

/* §5.3's FP4 and FP6 values, code 0 (S.00.0, S.00.000, S.000.00) upwards. */
static const double E2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
static const double E2M3[32] = {0,   0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1,   1.125, 1.25,
                                1.375, 1.5, 1.625, 1.75, 1.875, 2,   2.25,  2.5, 2.75,  3,   3.25,
                                3.5, 3.75,  4,   4.5,   5,   5.5,   6,   6.5,   7,   7.5};
static const double E3M2[32] = {0, 0.0625, 0.125, 0.1875, 0.25, 0.3125, 0.375, 0.4375, 0.5, 0.625, 0.75,
                                0.875, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28};

static elem ELEMS[5];

/* OFP8's formula: (−1)^S·2^(E−bias)·1.M, E = 0: 2^(1−bias)·0.M; E4M3's
 * S.1111.111 NaN, E5M2's top exponent ±Inf (M = 0) or NaN. */
static double ofp8(int ebits, int mbits, unsigned c)
{
    int bias = (1 << (ebits - 1)) - 1;
    unsigned e = c >> mbits, m = c & ((1u << mbits) - 1), etop = (1u << ebits) - 1;
    if (ebits == 4 && e == etop && m == (1u << mbits) - 1) return NAN;
    if (ebits == 5 && e == etop) return m ? NAN : INFINITY;
    return e ? ldexp((1u << mbits) + m, (int)e - bias - mbits) : ldexp(m, 1 - bias - mbits);
}

static void tables(void)
{
    static const elem shapes[5] = {{"mxfp8", 4, 3, 8, {0}}, {"mxfp8e5m2", 5, 2, 15, {0}}, {"mxfp6", 2, 3, 2, {0}},
                                   {"mxfp6e3m2", 3, 2, 4, {0}}, {"mxfp4", 2, 1, 2, {0}}};
    for (int k = 0; k < 5; k++) {
        ELEMS[k] = shapes[k];
        unsigned n = 1u << (shapes[k].ebits + shapes[k].mbits);
        for (unsigned c = 0; c < n; c++)
            ELEMS[k].table[c] = k < 2 ? ofp8(shapes[k].ebits, shapes[k].mbits, c) : k == 2 ? E2M3[c] : k == 3 ? E3M2[c] : E2M1[c];
    }
}

static unsigned codes(const elem *e) { return 1u << (e->ebits + e->mbits); }

static double elem_max(const elem *e)
{
    double m = 0;
    for (unsigned c = 0; c < codes(e); c++)
        if (isfinite(e->table[c]) && e->table[c] > m) m = e->table[c];
    return m;
}

static void fmt_of(const elem *e, int ceil_rule, vijp_format *f)
{
    char name[40];
    snprintf(name, sizeof name, "%s%s+binary32", e->name, ceil_rule ? ":ceil" : "");
    ck_assert_msg(!vijp_format_parse(name, f, NULL), "%s does not parse", name);
}

/* x (>= 0, finite) to the nearest finite element, ties to the even code;
 * past the largest, the largest. */
static double nearest(const elem *e, double x)
{
    unsigned best = 0;
    for (unsigned c = 1; c < codes(e); c++) {
        double t = e->table[c];
        if (!isfinite(t)) continue;
        double d = fabs(x - t), bd = fabs(x - e->table[best]);
        if (d < bd || (d == bd && !(c & 1))) best = c;
    }
    return e->table[best];
}

/* The oracle: one block v[0 … n) quantised into out. */
static void oracle_block(const elem *e, int ceil_rule, const double *v, size_t n, double *out)
{
    double amax = 0;
    int special = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(v[k])) special = 1;
        else if (fabs(v[k]) > amax) amax = fabs(v[k]);
    }
    int s = 0;
    if (amax > 0 && !special) {
        if (!ceil_rule) { /* the largest 2^f <= amax, s = f − emax_elem */
            int f = 0;
            while (ldexp(1, f) > amax) f--;
            while (ldexp(1, f + 1) <= amax) f++;
            s = f - e->emax_elem;
        } else { /* the smallest s with amax <= max·2^s */
            double max = elem_max(e);
            s = 0;
            while (amax > ldexp(max, s)) s++;
            while (amax <= ldexp(max, s - 1)) s--;
        }
        if (s < -127) s = -127;
        if (s > 127) special = 1; /* past E8M0: the NaN scale */
    }
    for (size_t k = 0; k < n; k++) {
        if (special) out[k] = NAN;
        else {
            double q = nearest(e, fabs(v[k]) / ldexp(1, s)) * ldexp(1, s);
            out[k] = signbit(v[k]) ? -q : q;
        }
    }
}

/* A line of n values at stride in v, in blocks of 32 from its start. */
static void oracle_line(const elem *e, int ceil_rule, const double *v, size_t n, size_t stride, double *out)
{
    double in[32], q[32];
    for (size_t k = 0; k < n; k += 32) {
        size_t nb = n - k < 32 ? n - k : 32;
        for (size_t i = 0; i < nb; i++) in[i] = v[(k + i) * stride];
        oracle_block(e, ceil_rule, in, nb, q);
        for (size_t i = 0; i < nb; i++) out[(k + i) * stride] = q[i];
    }
}

static void expect_entry(mpfr_srcptr got, double want, const char *what, size_t i, double from)
{
    if (isnan(want)) {
        ck_assert_msg(mpfr_nan_p(got), "%s, entry %zu (from %a): got %a, want NaN", what, i, from,
                      mpfr_get_d(got, MPFR_RNDN));
        return;
    }
    ck_assert_msg(!mpfr_nan_p(got) && mpfr_cmp_d(got, want) == 0 && !mpfr_signbit(got) == !signbit(want),
                  "%s, entry %zu (from %a): got %a, want %a", what, i, from, mpfr_get_d(got, MPFR_RNDN), want);
}

/* Every element code of every MX format decodes to the table's value (the
 * sign bit negating it), a code wider than the element is refused; every
 * E8M0 code is 2^(code − 127), 0xFF NaN. */
START_TEST(decode_every_code)
{
    tables();
    mpfr_t r;
    mpfr_init2(r, 8);
    for (int k = 0; k < 5; k++) {
        vijp_format f;
        fmt_of(&ELEMS[k], 0, &f);
        unsigned n = codes(&ELEMS[k]);
        for (unsigned c = 0; c < 2 * n; c++) {
            double want = c < n ? ELEMS[k].table[c] : -ELEMS[k].table[c - n];
            ck_assert(!vijp_mx_decode(&f, c, r, NULL));
            char what[48];
            snprintf(what, sizeof what, "%s code 0x%x", ELEMS[k].name, c);
            if (isinf(want)) ck_assert_msg(mpfr_inf_p(r) && !mpfr_signbit(r) == !signbit(want), "%s", what);
            else expect_entry(r, want, what, c, want);
        }
        ck_assert(vijp_mx_decode(&f, 2 * n, r, NULL) == VIJP_EINVAL);
    }
    for (unsigned c = 0; c < 256; c++) {
        ck_assert(!vijp_e8m0_decode(c, r, NULL));
        ck_assert_msg(c == 255 ? mpfr_nan_p(r) : mpfr_cmp_ui_2exp(r, 1, (long)c - 127) == 0, "E8M0 0x%x", c);
    }
    ck_assert(vijp_e8m0_decode(256, r, NULL) == VIJP_EINVAL);
    vijp_format b;
    vijp_format_fixed(&b, VIJP_E4M3);
    ck_assert(vijp_mx_decode(&b, 0, r, NULL) == VIJP_EINVAL); /* e4m3 alone is no MX format */
    mpfr_clear(r);
}
END_TEST

/* The names: each element format with either rule, binary32 accumulation;
 * nothing else. */
START_TEST(parse_names)
{
    tables();
    for (int k = 0; k < 5; k++)
        for (int c = 0; c < 2; c++) {
            vijp_format f;
            fmt_of(&ELEMS[k], c, &f);
            ck_assert(f.mixed && f.mx_block == 32 && f.prec == 24 && f.mx_scale_ceil == c);
            ck_assert(f.store_max == elem_max(&ELEMS[k]) && f.mx_elem_emax == ELEMS[k].emax_elem);
            ck_assert((long)f.store_prec == ELEMS[k].mbits + 1);
        }
    static const char *const bad[] = {"mxfp8", "mxfp8:ceil", "mxfp8:floor+binary32", "mxfp3+binary32",
                                      "mxfp8+binary16", "mxfp8:ceil:ceil+binary32", "mxfp8@ref"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vijp_format f;
        vijp_error err = {0};
        ck_assert_msg(vijp_format_parse(bad[i], &f, &err) == VIJP_EINVAL, "%s parses", bad[i]);
    }
}
END_TEST

/* Columns that reach each case of the conversion, for element e (scale
 * X = 2^s with s chosen by the values): 8 columns of `rows` values, all
 * binary32 numbers (exact in the matrix's 24 bits). */
static void case_columns(const elem *e, size_t rows, double *v, uint64_t seed)
{
    double max = elem_max(e), sub = e->table[1], top = ldexp(1, e->emax_elem + 1);
    vijp_rng rng;
    vijp_rng_seed(&rng, seed);
    for (size_t j = 0; j < 8; j++)
        for (size_t i = 0; i < rows; i++) {
            double *x = &v[i + j * rows];
            double r = (double)(float)(vijp_rng_normal(&rng) * ldexp(1, (int)(vijp_rng_uniform(&rng) * 8) - 4));
            switch (j) {
            case 0: *x = i % 3 ? 0.0 : -0.0; break;                  /* all zeros */
            case 1: *x = i == 5 ? NAN : r; break;                     /* NaN in block 0 only */
            case 2: *x = i == 31 ? -INFINITY : r; break;              /* −Inf in block 0 only */
            case 3: /* amax at the top of the range: max·2^3 exactly, then past max (saturating) */
                *x = i == 0 ? ldexp(max, 3) : i == 1 ? -ldexp((max + top) / 2, 3) : i == 2 ? (double)(float)(ldexp(top, 3) * 0.99) : r;
                break;
            case 4: /* one huge value, tiny ones: X = 2^(20 − emax_elem) under the specification's rule */
                if (i == 0) *x = ldexp(1, 20);
                else {
                    double X = ldexp(1, 20 - e->emax_elem), t[6] = {sub / 2, -sub / 2, sub * 0.75, sub / 2 * (1 + 0x1p-20),
                                                                    sub / 2 * (1 - 0x1p-20), sub};
                    *x = (double)(float)(t[i % 6] * X);
                }
                break;
            case 5: { /* ties: midpoints of consecutive elements, with amax 2^emax_elem (X = 1 under the rule) */
                unsigned c = 1 + (unsigned)(i * 7) % (codes(e) / 2 - 2);
                while (!isfinite(e->table[c + 1])) c--;
                *x = i == 0 ? ldexp(1, e->emax_elem) : (i & 1 ? -1 : 1) * (e->table[c] + e->table[c + 1]) / 2;
                break;
            }
            case 6: /* magnitudes across 2^±30, E8M0's clamp reached below (2^-140) */
                *x = i == 7 ? ldexp(1, -140) * 1.5
                            : (double)(float)(r * ldexp(1, (int)(vijp_rng_uniform(&rng) * 60) - 30));
                if (i >= 32) *x = ldexp(r, -150 + (int)(vijp_rng_uniform(&rng) * 6)); /* a block all below 2^-140 */
                break;
            default: *x = r; break;
            }
        }
}

static void check_matrix(const elem *e, int ceil_rule, const vijp_mat *a, const double *v, const char *how)
{
    double *want = malloc(vijp_mat_len(a) * sizeof *want);
    for (size_t j = 0; j < a->cols; j++) oracle_line(e, ceil_rule, v + j * a->rows, a->rows, 1, want + j * a->rows);
    char what[96];
    snprintf(what, sizeof what, "%s%s, %zu rows, %s", e->name, ceil_rule ? ":ceil" : "", a->rows, how);
    for (size_t i = 0; i < vijp_mat_len(a); i++) expect_entry(a->m[i], want[i], what, i, v[i]);
    free(want);
}

/* Blocks of 32 down each column, the last one short (7 rows: one block of
 * 7; 45: 32 + 13; 70: 32 + 32 + 6), through vijp_mat_store on binary32
 * values, and vijp_mat_convert from doubles. */
START_TEST(blocks_down_columns)
{
    tables();
    static const size_t heights[] = {7, 45, 70};
    for (int k = 0; k < 5; k++)
        for (int c = 0; c < 2; c++)
            for (size_t h = 0; h < 3; h++) {
                vijp_format f, fd;
                fmt_of(&ELEMS[k], c, &f);
                vijp_format_fixed(&fd, VIJP_DOUBLE);
                size_t rows = heights[h];
                double *v = malloc(rows * 8 * sizeof *v);
                case_columns(&ELEMS[k], rows, v, test_seed() + 17 * (uint64_t)k + h);
                vijp_mat a, d, b;
                test_mat_init_mp(&a, rows, 8, &f);
                for (size_t i = 0; i < rows * 8; i++) mpfr_set_d(a.m[i], v[i], MPFR_RNDN); /* exact: binary32 values */
                vijp_mat_store(&a);
                check_matrix(&ELEMS[k], c, &a, v, "vijp_mat_store");
                test_mat_init_mp(&d, rows, 8, &fd);
                memcpy(d.d, v, rows * 8 * sizeof *v);
                test_mat_init_mp(&b, rows, 8, &f);
                vijp_mat_convert(&b, &d);
                check_matrix(&ELEMS[k], c, &b, v, "vijp_mat_convert");
                vijp_mat_clear(&a), vijp_mat_clear(&b), vijp_mat_clear(&d);
                free(v);
            }
}
END_TEST

/* From doubles with more bits than binary32 (vijp_mat_set_d): one
 * rounding, no binary32 rounding first.  Values a hair (2^-30 relative)
 * either side of a tie, which binary32 would put on the tie; a block past
 * E8M0's top (2^200: NaN scale), one at its top (2^(127 + emax_elem)). */
START_TEST(set_from_doubles)
{
    tables();
    for (int k = 0; k < 5; k++)
        for (int c = 0; c < 2; c++) {
            const elem *e = &ELEMS[k];
            vijp_format f;
            fmt_of(e, c, &f);
            size_t rows = 40, cols = 3;
            double v[120];
            for (size_t i = 0; i < rows; i++) {
                unsigned code = 1 + (unsigned)i % (codes(e) / 2 - 2);
                while (!isfinite(e->table[code + 1])) code--;
                double mid = (e->table[code] + e->table[code + 1]) / 2;
                v[i] = i == 0 ? ldexp(1, e->emax_elem) : mid * (1 + (i & 1 ? 0x1p-30 : -0x1p-30));
                v[i + rows] = i == 3 ? ldexp(1, 200) : mid;
                v[i + 2 * rows] = i == 0 ? ldexp(1, 127 + e->emax_elem) : ldexp(mid, 120);
            }
            vijp_mat a;
            test_mat_init_mp(&a, rows, cols, &f);
            vijp_mat_set_d(&a, v);
            check_matrix(e, c, &a, v, "vijp_mat_set_d");
            vijp_mat_clear(&a);
        }
}
END_TEST

/* A dense layer's W (out × in, column-major) is blocked along its rows, the
 * reduction dimension of W·x: row o is the line o, o + out, …; its bias
 * down the vector.  40 × 40: each row a block of 32 and one of 8.  Also
 * vijp_mat_store_line on a matrix, leaving the other entries alone. */
START_TEST(weights_along_rows)
{
    tables();
    const elem *e = &ELEMS[4]; /* mxfp4: the coarsest, where a wrong block shows most */
    vijp_format f;
    fmt_of(e, 0, &f);
    vijp_net net;
    vijp_error err = {0};
    ck_assert(!vijp_net_build(&net, "dense:40", 1, 40, &err));
    ck_assert(!vijp_net_init(&net, (vijp_init){.kind = VIJP_INIT_GAUSSIAN, .gain = 1}, test_seed(), &err));
    const double *th = net.theta[0];
    for (size_t i = 0; i < 40 * 40; i += 41) net.theta[0][i] *= 64; /* a large entry in each row's first block: rows differ */
    vijp_mat theta;
    ck_assert(!vijp_net_params(&net, &f, &theta, &err));
    double want[1640];
    for (size_t o = 0; o < 40; o++) oracle_line(e, 0, th + o, 40, 40, want + o);
    oracle_line(e, 0, th + 1600, 40, 1, want + 1600);
    vijp_mat tm; /* θ's values in MPFR, exactly (held as doubles: vijp/mat.h) */
    vijp_mat_init_mp(&tm, &theta, 1);
    for (size_t i = 0; i < 1640; i++) expect_entry(tm.m[i], want[i], "dense:40 θ in mxfp4", i, th[i]);
    vijp_mat_clear(&tm);
    vijp_net_params_clear(&net, &theta);

    vijp_mat a; /* one row of a 40 × 40 matrix of θ's values, stored as a line */
    test_mat_init_mp(&a, 40, 40, &f);
    for (size_t i = 0; i < 1600; i++) mpfr_set_d(a.m[i], (double)(float)th[i], MPFR_RNDN);
    double row[1600];
    for (size_t i = 0; i < 1600; i++) row[i] = (double)(float)th[i];
    vijp_mat_store_line(&a, 3, 40, 40);
    oracle_line(e, 0, row + 3, 40, 40, want + 3);
    for (size_t i = 0; i < 1600; i++)
        expect_entry(a.m[i], i % 40 == 3 ? want[i] : row[i], "vijp_mat_store_line, row 3", i, row[i]);
    vijp_mat_clear(&a);
    vijp_net_free(&net);
}
END_TEST

/* One value (vo_store, vijp_mat_set_entry_d), whose block is unknown: a
 * block of its own. */
START_TEST(one_value_is_a_block)
{
    tables();
    static const double xs[] = {1, -3.3, 1e-30, 7.9, 0.0, -0.0, 1e38, 0x1.fffffep-1};
    mpfr_t r, x;
    mpfr_inits2(53, r, x, (mpfr_ptr)0); /* x: the double itself */
    for (int k = 0; k < 5; k++)
        for (int c = 0; c < 2; c++) {
            vijp_format f;
            fmt_of(&ELEMS[k], c, &f);
            vijp_mat a;
            test_mat_init_mp(&a, 1, 1, &f);
            for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
                double want;
                oracle_block(&ELEMS[k], c, &xs[i], 1, &want);
                mpfr_set_d(x, xs[i], MPFR_RNDN);
                vo_store(r, x, &f);
                expect_entry(r, want, "vo_store", i, xs[i]);
                vijp_mat_set_entry_d(&a, 0, xs[i]);
                expect_entry(a.m[0], want, "vijp_mat_set_entry_d", i, xs[i]);
            }
            vijp_mat_clear(&a);
        }
    mpfr_clears(r, x, (mpfr_ptr)0);
}
END_TEST

Suite *suite_mx(void)
{
    Suite *s = suite_create("mx");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, decode_every_code);
    tcase_add_test(tc, parse_names);
    tcase_add_test(tc, blocks_down_columns);
    tcase_add_test(tc, set_from_doubles);
    tcase_add_test(tc, weights_along_rows);
    tcase_add_test(tc, one_value_is_a_block);
    suite_add_tcase(s, tc);
    return s;
}

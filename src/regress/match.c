/* vijp regress: which curves the baseline and the current file share.
 *
 * Curves are matched by what they are (net spec, init, format, engine,
 * seed), never by their position in the file, so a baseline with more or
 * fewer configurations, formats, engines or seeds is compared on the common
 * part; what only one file has is kept as a skipped curve saying why.  What
 * cannot be compared at all (another depth, width, batch, loss, or another
 * tolerance for the same format) makes it another study. */
#include "regress.h"
#include "base/xnum_json.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *regress_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = vijp_alloc((size_t)(n > 0 ? n : 0) + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
    va_end(ap);
    return s;
}

json_int_t regress_int(json_t *x) { return json_is_integer(x) ? json_integer_value(x) : (json_int_t)json_number_value(x); }

vijp_xnum regress_value(json_t *x, int higher)
{
    vijp_xnum v;
    return vijp_xnum_from_json(x, &v) ? vijp_xnum_of(higher ? -INFINITY : INFINITY) : v;
}

static const char *str(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }
static json_t *study_of(json_t *doc) { return json_object_get(doc, "study"); }

static int has_string(json_t *array, const char *s)
{
    size_t i;
    json_t *x;
    json_array_foreach(array, i, x) if (!strcmp(json_string_value(x), s)) return 1;
    return 0;
}

static int has_integer(json_t *array, json_int_t v)
{
    size_t i;
    json_t *x;
    json_array_foreach(array, i, x) if (regress_int(x) == v) return 1;
    return 0;
}

static int has_config(json_t *doc, const char *spec, const char *init)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(study_of(doc), "configs"), i, c)
        if (!strcmp(str(c, "spec"), spec) && !strcmp(str(c, "init"), init)) return 1;
    return 0;
}

/* A study may list a configuration twice ('vijp drift --net A --net A'):
 * the k-th time in one file pairs with the k-th time in the other. */
static int occurrence(json_t *doc, json_int_t config)
{
    json_t *configs = json_object_get(study_of(doc), "configs"), *me = json_array_get(configs, (size_t)config - 1);
    int n = 0;
    for (size_t i = 0; i + 1 < (size_t)config; i++) {
        json_t *c = json_array_get(configs, i);
        n += !strcmp(str(c, "spec"), str(me, "spec")) && !strcmp(str(c, "init"), str(me, "init"));
    }
    return n;
}

/* The index (1-based) of the occ-th configuration with this spec and init; 0 if none. */
static json_int_t config_index(json_t *doc, const char *spec, const char *init, int occ)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(study_of(doc), "configs"), i, c)
        if (!strcmp(str(c, "spec"), spec) && !strcmp(str(c, "init"), init) && occ-- == 0) return (json_int_t)i + 1;
    return 0;
}

static json_t *find_curve(json_t *doc, json_int_t config, const char *format)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "curves"), i, c)
        if (regress_int(json_object_get(c, "config")) == config && !strcmp(str(c, "format"), format)) return c;
    return NULL;
}

json_t *regress_seed_entry(json_t *curve, json_int_t seed)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(curve, "seeds"), i, s)
        if (regress_int(json_object_get(s, "seed")) == seed) return s;
    return NULL;
}

json_t *regress_engine_run(json_t *seed_entry, const char *engine)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(seed_entry, "engines"), i, e) if (!strcmp(str(e, "engine"), engine)) return e;
    return NULL;
}

void regress_seed_list(json_t *seeds, const char *word, char *buf, size_t size)
{
    size_t n = json_array_size(seeds), at = (size_t)snprintf(buf, size, "%s%s ", word, n == 1 ? "" : "s");
    for (size_t i = 0; i < n && at < size; i++) {
        json_int_t a = regress_int(json_array_get(seeds, i)), b = a;
        const char *sep = i ? "," : "";
        while (i + 1 < n && regress_int(json_array_get(seeds, i + 1)) == b + 1) b++, i++;
        at += (size_t)(a == b ? snprintf(buf + at, size - at, "%s%lld", sep, (long long)a)
                              : snprintf(buf + at, size - at, "%s%lld-%lld", sep, (long long)a, (long long)b));
    }
}

/* What study a has and study b has not. */
static json_t *only(json_t *a, json_t *b)
{
    json_t *sa = study_of(a), *sb = study_of(b), *x;
    json_t *out = json_pack("{s:[], s:[], s:[], s:[]}", "configs", "formats", "engines", "seeds");
    size_t i;
    json_array_foreach(json_object_get(sa, "configs"), i, x)
        if (!has_config(b, str(x, "spec"), str(x, "init")))
            json_array_append_new(json_object_get(out, "configs"), json_sprintf("%s %s", str(x, "spec"), str(x, "init")));
    static const char *const lists[] = {"formats", "engines"};
    for (int l = 0; l < 2; l++)
        json_array_foreach(json_object_get(sa, lists[l]), i, x)
            if (!has_string(json_object_get(sb, lists[l]), json_string_value(x)))
                json_array_append(json_object_get(out, lists[l]), x);
    json_array_foreach(json_object_get(sa, "seeds"), i, x)
        if (!has_integer(json_object_get(sb, "seeds"), regress_int(x))) json_array_append(json_object_get(out, "seeds"), x);
    return out;
}

void regress_only_text(json_t *o, char *buf, size_t size)
{
    size_t at = 0, i;
    json_t *x;
    *buf = 0;
    if (json_array_size(json_object_get(o, "seeds"))) {
        regress_seed_list(json_object_get(o, "seeds"), "seed", buf, size);
        at = strlen(buf);
    }
    static const char *const lists[] = {"formats", "engines", "configs"}, *const words[] = {"format", "engine", "config"};
    for (int l = 0; l < 3; l++) {
        json_t *a = json_object_get(o, lists[l]);
        if (json_array_size(a) && at < size)
            at += (size_t)snprintf(buf + at, size - at, "%s%s ", at ? "; " : "", json_array_size(a) > 1 ? lists[l] : words[l]);
        json_array_foreach(a, i, x) {
            if (at < size) at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", json_string_value(x));
        }
    }
}

/* Depth, width, batch and loss, and each shared format's tolerance and
 * reproducibility: what makes two files one study. */
static int same_study(json_t *base, json_t *cur, char *msg, size_t size)
{
    static const char *const keys[] = {"depth", "width", "batch", "loss"};
    json_t *bs = study_of(base), *cs = study_of(cur), *f;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!json_equal(json_object_get(bs, keys[k]), json_object_get(cs, keys[k]))) {
            char *b = json_dumps(json_object_get(bs, keys[k]), JSON_ENCODE_ANY),
                 *c = json_dumps(json_object_get(cs, keys[k]), JSON_ENCODE_ANY);
            snprintf(msg, size, "the baseline is from another study: %s is %s there and %s here", keys[k], b ? b : "?",
                     c ? c : "?");
            free(b), free(c);
            return -1;
        }
    size_t i;
    json_array_foreach(json_object_get(cs, "formats"), i, f) {
        const char *name = json_string_value(f);
        if (!has_string(json_object_get(bs, "formats"), name)) continue;
        json_t *tb = json_object_get(json_object_get(bs, "tolerances"), name),
               *tc = json_object_get(json_object_get(cs, "tolerances"), name);
        vijp_xnum xb, xc;
        if (vijp_xnum_from_json(tb, &xb) || vijp_xnum_from_json(tc, &xc) || vijp_xnum_cmp(xb, xc)) {
            char gb[40] = "?", gc[40] = "?";
            if (!vijp_xnum_from_json(tb, &xb)) vijp_xnum_snprintf(gb, sizeof gb, "%g", xb);
            if (!vijp_xnum_from_json(tc, &xc)) vijp_xnum_snprintf(gc, sizeof gc, "%g", xc);
            snprintf(msg, size, "the baseline is from another study: the tolerance of %s is %s there and %s here", name,
                     gb, gc);
            return -1;
        }
        size_t k;
        json_t *c, *rb = NULL, *rc = NULL;
        json_array_foreach(json_object_get(base, "curves"), k, c) if (!rb && !strcmp(str(c, "format"), name)) rb = c;
        json_array_foreach(json_object_get(cur, "curves"), k, c) if (!rc && !strcmp(str(c, "format"), name)) rc = c;
        if (rb && rc && json_is_true(json_object_get(rb, "reproducible")) != json_is_true(json_object_get(rc, "reproducible"))) {
            snprintf(msg, size, "the two files disagree on whether %s is bit-reproducible (a damaged file?)", name);
            return -1;
        }
    }
    return 0;
}

static regress_curve *push(regress_result *r)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = vijp_realloc(r->v, r->cap * sizeof *r->v);
    }
    regress_curve *u = &r->v[r->n++];
    memset(u, 0, sizeof *u);
    return u;
}

/* One curve of file doc (the current file when from_cur) for engine and seed
 * (-1: over the seeds), unless the other file already gave it. */
static void unit(regress_result *r, json_t *set, int from_cur, json_t *c, json_t *other, const char *engine,
                 json_int_t seed, int exact)
{
    const char *spec = str(c, "spec"), *init = str(c, "init"), *format = str(c, "format");
    json_t *doc = from_cur ? r->cur : r->base;
    int occ = occurrence(doc, regress_int(json_object_get(c, "config")));
    char *key = regress_printf("%s\x1f%s\x1f%d\x1f%s\x1f%s\x1f%lld", spec, init, occ, format, engine, (long long)seed);
    int seen = json_object_get(set, key) != NULL;
    if (!seen) json_object_set_new(set, key, json_true());
    free(key);
    if (seen) return;
    regress_curve *u = push(r);
    json_int_t other_config = config_index(other, spec, init, occ);
    json_t *oc = other_config ? find_curve(other, other_config, format) : NULL;
    const char *where = from_cur ? "the current file" : "the baseline";
    u->spec = spec, u->init = init, u->format = format, u->engine = engine, u->seed = seed, u->exact = exact;
    u->bc = from_cur ? oc : c, u->cc = from_cur ? c : oc;
    u->config = regress_int(json_object_get(u->cc ? u->cc : c, "config"));
    u->seeds = json_array();
    if (exact) json_array_append_new(u->seeds, json_integer(seed));
    if (!oc)
        u->skipped = other_config ? regress_printf("format %s only in %s", format, where)
                                  : regress_printf("config %s %s only in %s", spec, init, where);
    else if (!has_string(json_object_get(study_of(other), "engines"), engine))
        u->skipped = regress_printf("engine %s only in %s", engine, where);
    else if (exact && !regress_seed_entry(oc, seed))
        u->skipped = regress_printf("seed %lld only in %s", (long long)seed, where);
    if (u->skipped) u->only_in = from_cur ? "current" : "baseline";
    if (!exact) {
        size_t k;
        json_t *sd;
        json_array_foreach(json_object_get(c, "seeds"), k, sd) {
            json_t *s = json_object_get(sd, "seed");
            if (u->skipped || (oc && regress_seed_entry(oc, regress_int(s)))) json_array_append(u->seeds, s);
        }
        if (!u->skipped && !json_array_size(u->seeds)) { /* then name it by this file's seeds */
            char in_base[128], in_cur[128];
            json_t *os = json_array();
            json_array_foreach(json_object_get(c, "seeds"), k, sd) json_array_append(u->seeds, json_object_get(sd, "seed"));
            json_array_foreach(json_object_get(oc, "seeds"), k, sd) json_array_append(os, json_object_get(sd, "seed"));
            regress_seed_list(from_cur ? os : u->seeds, "seed", in_base, sizeof in_base);
            regress_seed_list(from_cur ? u->seeds : os, "seed", in_cur, sizeof in_cur);
            u->skipped = regress_printf("no seed in common (%s in the baseline, %s in the current file)", in_base, in_cur);
            json_decref(os);
        }
    }
    char seeds[1024];
    regress_seed_list(u->seeds, "seed", seeds, sizeof seeds);
    u->name = regress_printf("c%lld %s %s / %s / %s / %s", (long long)u->config, spec, init, format, engine, seeds);
    r->compared += !u->skipped;
}

/* Every curve of doc, in its order: configurations, formats, engines, seeds. */
static void units(regress_result *r, json_t *set, json_t *doc, json_t *other, int from_cur, int all_tolerant)
{
    json_t *engines = json_object_get(study_of(doc), "engines"), *c, *e, *sd;
    size_t i, j, k;
    json_array_foreach(json_object_get(doc, "curves"), i, c) {
        int exact = json_is_true(json_object_get(c, "reproducible")) && !all_tolerant;
        json_array_foreach(engines, j, e) {
            if (!exact) unit(r, set, from_cur, c, other, json_string_value(e), -1, 0);
            else
                json_array_foreach(json_object_get(c, "seeds"), k, sd)
                    unit(r, set, from_cur, c, other, json_string_value(e), regress_int(json_object_get(sd, "seed")), 1);
        }
    }
}

int regress_match(json_t *base, json_t *cur, int all_tolerant, regress_result *r, char *msg, size_t size)
{
    memset(r, 0, sizeof *r);
    if (same_study(base, cur, msg, size)) return -1;
    r->base = base, r->cur = cur;
    r->only_base = only(base, cur);
    r->only_cur = only(cur, base);
    json_t *set = json_object();
    units(r, set, cur, base, 1, all_tolerant);
    units(r, set, base, cur, 0, all_tolerant);
    json_decref(set);
    return 0;
}

void regress_free(regress_result *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].name), free(r->v[i].skipped);
        json_decref(r->v[i].seeds), json_decref(r->v[i].findings);
    }
    free(r->v);
    json_decref(r->only_base), json_decref(r->only_cur);
    memset(r, 0, sizeof *r);
}

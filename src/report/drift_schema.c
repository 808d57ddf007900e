/* The drift.json validator: an interpreter of docs/drift.schema.json itself,
 * compiled in (the Makefile makes it a C string), so the document the project
 * publishes and what vijp regress accepts cannot drift apart.  It implements
 * the part of JSON Schema 2020-12 that document uses (type, const, enum,
 * minimum, minItems, required, properties, additionalProperties, items,
 * local $ref; title, description and $schema are notes) and refuses any other
 * keyword, so the schema cannot grow a rule this file would silently skip.
 * scripts/check-drift-schema.py checks that it and python's jsonschema agree
 * on every required field. */
#include "drift_schema.h"
#include <regex.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char schema_text[] =
#include "drift_schema.inc"
    ;

typedef struct {
    json_t *root; /* the schema, for $ref */
    char *msg;
    size_t size;
} ctx;

static int fail(ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ctx *c, const char *path, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->msg, c->size, "%s: %s", *path ? path : "(the document)", what);
    return -1;
}

/* JSON Schema's type names; an integer is also a number, and 2020-12 counts
 * a real with no fractional part as an integer (jansson reads "3.0" as real). */
static int has_type(json_t *v, const char *t)
{
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) || (json_is_real(v) && isfinite(json_real_value(v)) &&
                                      json_real_value(v) == floor(json_real_value(v)));
    return 0;
}

static const char *type_name(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* path + ".key" or "[i]" into buf. */
static const char *child(char *buf, size_t size, const char *path, const char *key, size_t index)
{
    if (key) snprintf(buf, size, "%s%s%s", path, *path ? "." : "", key);
    else snprintf(buf, size, "%s[%zu]", path, index);
    return buf;
}

static int check(ctx *c, json_t *s, json_t *v, const char *path);

static int check_type(ctx *c, json_t *t, json_t *v, const char *path)
{
    char want[96] = "";
    size_t i;
    json_t *one;
    if (json_is_string(t)) {
        if (has_type(v, json_string_value(t))) return 0;
        snprintf(want, sizeof want, "%s", json_string_value(t));
    } else {
        json_array_foreach(t, i, one) {
            if (has_type(v, json_string_value(one))) return 0;
            size_t at = strlen(want);
            snprintf(want + at, sizeof want - at, "%s%s", i ? " or " : "", json_string_value(one));
        }
    }
    return fail(c, path, "%s, want %s", type_name(v), want);
}

static int check_object(ctx *c, json_t *s, json_t *v, const char *path)
{
    char sub[512];
    size_t i;
    const char *key;
    json_t *req, *x, *props = json_object_get(s, "properties"), *extra = json_object_get(s, "additionalProperties");
    json_array_foreach(json_object_get(s, "required"), i, req)
        if (!json_object_get(v, json_string_value(req)))
            return fail(c, child(sub, sizeof sub, path, json_string_value(req), 0), "missing");
    json_object_foreach(v, key, x) {
        json_t *ps = json_object_get(props, key);
        if (!ps && json_is_false(extra)) return fail(c, child(sub, sizeof sub, path, key, 0), "not a field of this object");
        if (!ps && json_is_object(extra)) ps = extra;
        if (ps && check(c, ps, x, child(sub, sizeof sub, path, key, 0))) return -1;
    }
    return 0;
}

static int check(ctx *c, json_t *s, json_t *v, const char *path)
{
    static const char *const known[] = {"$schema", "$defs", "title", "description", "$ref", "type", "const", "enum",
                                        "minimum", "minItems", "required", "properties", "additionalProperties", "items",
                                        "pattern"};
    const char *key;
    json_t *k;
    json_object_foreach(s, key, k) {
        size_t i = 0;
        while (i < sizeof known / sizeof *known && strcmp(key, known[i])) i++;
        if (i == sizeof known / sizeof *known)
            return fail(c, path, "the schema uses '%s', which this validator does not implement", key);
    }
    if ((k = json_object_get(s, "$ref"))) {
        const char *ref = json_string_value(k);
        json_t *target = ref && !strncmp(ref, "#/$defs/", 8) ? json_object_get(json_object_get(c->root, "$defs"), ref + 8) : NULL;
        if (!target) return fail(c, path, "the schema's $ref '%s' is not one of its $defs", ref ? ref : "?");
        if (check(c, target, v, path)) return -1;
    }
    if ((k = json_object_get(s, "type")) && check_type(c, k, v, path)) return -1;
    if ((k = json_object_get(s, "const")) && !json_equal(k, v)) {
        char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT), *want = json_dumps(k, JSON_ENCODE_ANY);
        int rc = fail(c, path, "%.60s, want %s", got ? got : "?", want ? want : "?");
        free(got), free(want);
        return rc;
    }
    if ((k = json_object_get(s, "enum"))) {
        size_t i;
        json_t *e;
        int found = 0;
        json_array_foreach(k, i, e) found |= json_equal(e, v);
        if (!found) {
            char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT), *want = json_dumps(k, JSON_COMPACT);
            int rc = fail(c, path, "%.60s, want one of %s", got ? got : "?", want ? want : "?");
            free(got), free(want);
            return rc;
        }
    }
    if ((k = json_object_get(s, "pattern")) && json_is_string(v)) { /* POSIX ERE: the schema's patterns use its common part */
        regex_t re;
        if (regcomp(&re, json_string_value(k), REG_EXTENDED | REG_NOSUB))
            return fail(c, path, "the schema's pattern '%s' does not compile", json_string_value(k));
        int miss = regexec(&re, json_string_value(v), 0, NULL, 0);
        regfree(&re);
        if (miss) return fail(c, path, "'%.60s' does not match %s", json_string_value(v), json_string_value(k));
    }
    if ((k = json_object_get(s, "minimum")) && json_is_number(v) && json_number_value(v) < json_number_value(k))
        return fail(c, path, "%g, want at least %g", json_number_value(v), json_number_value(k));
    if (json_is_object(v) && check_object(c, s, v, path)) return -1;
    if (json_is_array(v)) {
        if ((k = json_object_get(s, "minItems")) && json_array_size(v) < (size_t)json_integer_value(k))
            return fail(c, path, "%zu items, want at least %lld", json_array_size(v), (long long)json_integer_value(k));
        if ((k = json_object_get(s, "items"))) {
            char sub[512];
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x) if (check(c, k, x, child(sub, sizeof sub, path, NULL, i))) return -1;
        }
    }
    return 0;
}

int drift_schema_validate(json_t *doc, char *msg, size_t size)
{
    json_error_t e;
    ctx c = {json_loads(schema_text, 0, &e), msg, size};
    if (!c.root) { /* the compiled-in docs/drift.schema.json: a build defect, not the user's file */
        snprintf(msg, size, "(vijp's own drift.schema.json does not parse: %s, line %d)", e.text, e.line);
        return -1;
    }
    int rc = check(&c, c.root, doc, "");
    json_decref(c.root);
    return rc;
}

/* An integer of the schema, which may be written as a real without a
 * fractional part (has_type). */
static json_int_t int_of(json_t *x) { return json_is_integer(x) ? json_integer_value(x) : (json_int_t)json_number_value(x); }

/* What the comparison relies on beyond the schema: one curve per config and
 * format, one seed entry per study seed, one run per study engine, one value
 * per layer in every per-layer array (a seed's kappa, lyapunov_cumulative and
 * predicted; a run's metrics, bound, stored_bytes and reconstruction), each
 * named as the study lists it (regress matches curves by
 * those names).  A file short of any compares less than it claims. */
static int consistent(json_t *j, char *msg, size_t size)
{
    json_t *st = json_object_get(j, "study"), *curves = json_object_get(j, "curves"), *c, *sd, *run;
    size_t D = (size_t)int_of(json_object_get(st, "depth"));
    size_t nc = json_array_size(json_object_get(st, "configs")) * json_array_size(json_object_get(st, "formats"));
    size_t ns = json_array_size(json_object_get(st, "seeds")), ne = json_array_size(json_object_get(st, "engines"));
    size_t i, k, e;
    if (json_array_size(curves) != nc)
        return snprintf(msg, size, "curves: %zu, but study.configs × study.formats makes %zu", json_array_size(curves), nc), -1;
    size_t nf = json_array_size(json_object_get(st, "formats"));
    json_array_foreach(curves, i, c) {
        json_t *seeds = json_object_get(c, "seeds");
        /* what vijp regress matches curves by: the names the study lists */
        json_t *cfg = json_array_get(json_object_get(st, "configs"), i / nf);
        const char *fmt = json_string_value(json_array_get(json_object_get(st, "formats"), i % nf));
        if (int_of(json_object_get(c, "config")) != (json_int_t)(i / nf + 1))
            return snprintf(msg, size, "curves[%zu].config: %lld, but curves[c · formats + f] is configuration %zu", i,
                            (long long)int_of(json_object_get(c, "config")), i / nf + 1), -1;
        static const char *const names[] = {"spec", "init"};
        for (int n = 0; n < 2; n++)
            if (strcmp(json_string_value(json_object_get(c, names[n])), json_string_value(json_object_get(cfg, names[n]))))
                return snprintf(msg, size, "curves[%zu].%s: \"%s\", but study.configs[%zu].%s is \"%s\"", i, names[n],
                                json_string_value(json_object_get(c, names[n])), i / nf, names[n],
                                json_string_value(json_object_get(cfg, names[n]))), -1;
        if (strcmp(json_string_value(json_object_get(c, "format")), fmt))
            return snprintf(msg, size, "curves[%zu].format: \"%s\", but study.formats[%zu] is \"%s\"", i,
                            json_string_value(json_object_get(c, "format")), i % nf, fmt), -1;
        if (json_array_size(seeds) != ns)
            return snprintf(msg, size, "curves[%zu].seeds: %zu, but study.seeds lists %zu", i, json_array_size(seeds), ns), -1;
        json_array_foreach(seeds, k, sd) {
            json_t *runs = json_object_get(sd, "engines");
            json_int_t want = int_of(json_array_get(json_object_get(st, "seeds"), k));
            if (int_of(json_object_get(sd, "seed")) != want)
                return snprintf(msg, size, "curves[%zu].seeds[%zu].seed: %lld, but study.seeds[%zu] is %lld", i, k,
                                (long long)int_of(json_object_get(sd, "seed")), k, (long long)want), -1;
            static const char *const per_layer[] = {"kappa", "lyapunov_cumulative", "predicted"};
            for (int p = 0; p < 3; p++) {
                size_t n = json_array_size(json_object_get(sd, per_layer[p]));
                if (n != D)
                    return snprintf(msg, size, "curves[%zu].seeds[%zu].%s: %zu values, but study.depth is %zu", i, k,
                                    per_layer[p], n, D), -1;
            }
            if (json_array_size(runs) != ne)
                return snprintf(msg, size, "curves[%zu].seeds[%zu].engines: %zu, but study.engines lists %zu", i, k,
                                json_array_size(runs), ne), -1;
            json_array_foreach(runs, e, run) {
                const char *name = json_string_value(json_object_get(run, "engine")),
                           *want_e = json_string_value(json_array_get(json_object_get(st, "engines"), e));
                if (strcmp(name, want_e))
                    return snprintf(msg, size, "curves[%zu].seeds[%zu].engines[%zu].engine: \"%s\", but study.engines[%zu] "
                                    "is \"%s\"", i, k, e, name, e, want_e), -1;
                /* bound is null for the engines without one, reconstruction absent but for the reversible one */
                static const char *const arrays[] = {"bound", "stored_bytes", "reconstruction"};
                for (int p = 0; p < 3; p++) {
                    json_t *v = json_object_get(run, arrays[p]);
                    if (json_is_array(v) && json_array_size(v) != D)
                        return snprintf(msg, size, "curves[%zu].seeds[%zu].engines[%zu].%s: %zu values, but study.depth "
                                        "is %zu", i, k, e, arrays[p], json_array_size(v), D), -1;
                }
                static const char *const parts[] = {"g", "theta"}, *const ms[] = {"rel", "ulps", "angle_deg"};
                for (int p = 0; p < 2; p++)
                    for (int m = 0; m < 3; m++) {
                        size_t n = json_array_size(json_object_get(json_object_get(run, parts[p]), ms[m]));
                        if (n != D)
                            return snprintf(msg, size, "curves[%zu].seeds[%zu].engines[%zu].%s.%s: %zu values, but "
                                            "study.depth is %zu", i, k, e, parts[p], ms[m], n, D), -1;
                    }
            }
        }
    }
    return 0;
}

int drift_json_check(json_t *doc, char *msg, size_t size)
{
    json_t *schema = json_object_get(doc, "schema");
    if (!json_is_string(schema) || (strcmp(json_string_value(schema), DRIFT_SCHEMA_VERSION) &&
                                    strcmp(json_string_value(schema), DRIFT_SCHEMA_VERSION_1))) {
        char *got = schema ? json_dumps(schema, JSON_ENCODE_ANY) : NULL;
        snprintf(msg, size, "schema: %s is not %s or %s, the versions this vijp reads (not a drift.json it knows)",
                 got ? got : "missing", DRIFT_SCHEMA_VERSION, DRIFT_SCHEMA_VERSION_1);
        free(got);
        return -1;
    }
    return drift_schema_validate(doc, msg, size) || consistent(doc, msg, size) ? -1 : 0;
}

#!/usr/bin/env python3
"""docs/drift.schema.json, vijp's drift.json and vijp regress agree.

Usage: check-drift-schema.py VIJP_BIN

1. A drift.json that vijp writes (two formats, Moonwalk and the reversible
   engine, so the optional fields appear too) validates against
   docs/drift.schema.json with python's jsonschema (draft 2020-12).
2. For every required field of the schema (at its first place in that file)
   and every array's items: a copy with the field removed, or with a value of
   a type the schema does not allow, is refused by jsonschema AND by
   `vijp regress` (exit 2, naming the file and the field's JSON path).  Both
   files go through the same loader in vijp regress, so each mutation is
   given as the baseline or as the current file, in turn, and the first
   BOTH_SIDES of them (and the unknown version) as both: every field is
   checked once, each place many times, at half the runs of vijp (each one
   costs a process start, which dominates this check under the sanitizers).
   So the C validator and the published document agree field by field.
3. An unknown schema version is refused by both.

Exit 0 when all agree, 1 otherwise, 77 (skipped) when python's jsonschema
module is missing (Debian: python3-jsonschema, see scripts/install-deps.sh).
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("check-drift-schema: SKIPPED: python3's jsonschema module is missing "
          "(install python3-jsonschema: scripts/install-deps.sh)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = json.load(open(os.path.join(ROOT, "docs", "drift.schema.json"), encoding="utf-8"))
jsonschema.Draft202012Validator.check_schema(SCHEMA)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
failures = []
BOTH_SIDES = 8


def resolve(s):
    while "$ref" in s:
        extra = {k: v for k, v in s.items() if k != "$ref"}
        s = dict(SCHEMA["$defs"][s["$ref"].split("/")[-1]], **extra)
    return s


def path_text(path):
    out = ""
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else ("." if out else "") + p
    return out


def wrong_value(s):
    """A value the (resolved) schema s refuses by its type, const or enum."""
    s = resolve(s)
    if "const" in s:
        return "vijp-drift/999"
    if "enum" in s:
        return "no-such-value"
    types = s.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "string" not in types or "pattern" in s:
        return "wrong"  # a string where none is allowed, or one the pattern refuses
    return 12345


def places(s, inst, path, out):
    """(path, schema, kind) of every required field, array item and free-form
    field (additionalProperties), at its first occurrence in inst."""
    s = resolve(s)
    if isinstance(inst, dict):
        props = s.get("properties", {})
        for key in s.get("required", []):
            out.append((path + [key], props.get(key, {}), "required"))
        for key, sub in props.items():
            if key in inst:
                places(sub, inst[key], path + [key], out)
        extra = s.get("additionalProperties")
        others = [k for k in inst if k not in props]
        if isinstance(extra, dict) and others:
            out.append((path + [others[0]], extra, "free"))
    elif isinstance(inst, list) and "items" in s and inst:
        out.append((path + [0], s["items"], "item"))
        places(s["items"], inst[0], path + [0], out)
    return out


def get_parent(doc, path):
    for p in path[:-1]:
        doc = doc[p]
    return doc


def regress(bin_, base, cur):
    r = subprocess.run([bin_, "regress", base, cur], capture_output=True, text=True)
    return r.returncode, r.stderr


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    vijp = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="vijp-schema-") as tmp:
        out = os.path.join(tmp, "study")
        r = subprocess.run([vijp, "drift", "--net", "dense:8,leaky:0.5", "--depth", "4", "--formats",
                            "binary32,double", "--seeds", "1,2", "--engines", "moonwalk,reversible",
                            "--no-plots", "-q", "--out", out], capture_output=True, text=True)
        if r.returncode:
            sys.exit("check-drift-schema: vijp drift failed (%d): %s" % (r.returncode, r.stderr))
        good_path = os.path.join(out, "drift.json")
        good = json.load(open(good_path, encoding="utf-8"))
        errors = sorted(VALIDATOR.iter_errors(good), key=str)
        if errors:
            sys.exit("check-drift-schema: vijp's own drift.json does not validate: %s at %s"
                     % (errors[0].message, path_text(list(errors[0].absolute_path))))
        if "reconstruction" not in good["curves"][0]["seeds"][0]["engines"][2]:
            sys.exit("check-drift-schema: the study lacks the reversible engine's reconstruction")
        rc, err = regress(vijp, good_path, good_path)
        if rc:
            sys.exit("check-drift-schema: regress refuses vijp's own file (%d): %s" % (rc, err))

        cases = []
        for path, sub, kind in places(SCHEMA, good, [], []):
            if kind == "required":
                removed = copy.deepcopy(good)
                del get_parent(removed, path)[path[-1]]
                cases.append((path, "removed", removed, path_text(path) + ": missing"))
            wrong = copy.deepcopy(good)
            get_parent(wrong, path)[path[-1]] = wrong_value(sub)
            cases.append((path, "of the wrong type", wrong, path_text(path) + ":"))
        version = copy.deepcopy(good)
        version["schema"] = "vijp-drift/999"
        cases.append((["schema"], "an unknown version", version, "schema:"))

        bad_path = os.path.join(tmp, "bad.json")
        runs = 0
        for k, (path, how, doc, says) in enumerate(cases):
            if VALIDATOR.is_valid(doc):
                failures.append("jsonschema accepts %s %s" % (path_text(path), how))
            with open(bad_path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            sides = ((bad_path, good_path), (good_path, bad_path))
            if k >= BOTH_SIDES and k != len(cases) - 1:
                sides = (sides[k % 2],)
            for base, cur in sides:
                runs += 1
                rc, err = regress(vijp, base, cur)
                want = "%s: %s" % (bad_path, says)
                if rc != 2 or want not in err:
                    failures.append("vijp regress %s with %s %s: exit %d, want 2 and '%s'; stderr: %s"
                                    % ("baseline" if base == bad_path else "current", path_text(path), how, rc,
                                       want, err.strip()))
        if len(cases) < 100:
            failures.append("only %d cases: the walk over the schema missed fields" % len(cases))
    for f in failures[:20]:
        print("check-drift-schema: FAIL: " + f)
    if failures:
        print("check-drift-schema: %d disagreements" % len(failures))
        sys.exit(1)
    print("check-drift-schema: all %d mutations refused by jsonschema and by vijp regress (%d runs, as baseline "
          "and as current file)" % (len(cases), runs))


main()

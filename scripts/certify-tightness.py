#!/usr/bin/python3
"""How tight `vijp certify --box` is, per layer type (docs/certify.md quotes
the tables).  For a box c ± r (every coordinate) about a centre c:

  certified  the largest r (bisection, 30 steps) whose box `certify --layer
             T --box-file` certifies within --budget 5000;
  true       the distance (∞-norm) from c to the nearest point where J is
             singular, from the maths (a zero of f′ found with mpmath; the
             csquare plugin's J is singular where a pair of units is 0);
  sampled    the largest r on which 400 uniform points and the vertices of
             the box all keep σ_min(J) >= TAU·σ_min(J(c)) (LAPACK's σ_min
             from `certify --input`): what sampling calls safe with a
             margin.  Without the margin (every sampled point merely
             certified) sampling calls every r safe: a singular point has
             measure zero.

With --before OLD_VIJP it also measures the radius test's price: the largest
r one box (--budget 1) of the csquare plugin certifies at width 8, and s over
a fixed box, under OLD_VIJP's ‖rad‖_F and this build's bound on ‖rad‖₂.

Run from the repository root after `make` and `make check-build` (the
plugins):  /usr/bin/python3 scripts/certify-tightness.py [--before OLD_VIJP]
(numpy and mpmath; a minute or two)."""
import json
import os
import subprocess
import sys
import tempfile

import mpmath
import numpy as np

VIJP = os.environ.get("VIJP", "build/vijp")
PLUGIN = "build/plugins/csquare.so"
TAU = 1e-3


def run(vijp, args):
    r = subprocess.run([vijp] + args, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"{vijp} {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def plugin_args(spec):
    return ["--plugin", PLUGIN] if spec.startswith("csquare") else []


def box_result(vijp, spec, c, r, budget, tmp):
    np.save(f"{tmp}/lo.npy", c - r), np.save(f"{tmp}/hi.npy", c + r)
    return run(vijp, ["certify"] + plugin_args(spec) + ["--layer", spec, "--width", str(len(c)), "--box-file",
                                          f"{tmp}/lo.npy,{tmp}/hi.npy", "--budget", str(budget), "--json"])


def certified_radius(vijp, spec, c, hi, budget, tmp):
    lo = 0.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if box_result(vijp, spec, c, mid, budget, tmp)["verdict"] == "certified-submersive":
            lo = mid
        else:
            hi = mid
    return lo


def sigma_mins(spec, X, tmp):
    np.save(f"{tmp}/x.npy", X)
    o = run(VIJP, ["certify"] + plugin_args(spec) + ["--layer", spec, "--width", str(X.shape[1]), "--input",
                                       f"{tmp}/x.npy", "--json"])
    return np.array([p["sigma_min"] for p in o["points"]])


def sampled_radius(spec, c, hi, tmp, rng):
    floor = TAU * sigma_mins(spec, c[None, :], tmp)[0]
    n = len(c)
    vertices = np.array([[(k >> i) & 1 for i in range(n)] for k in range(2 ** n)]) * 2.0 - 1
    lo = 0.0
    for _ in range(20):
        mid = 0.5 * (lo + hi)
        X = c + mid * np.vstack([rng.uniform(-1, 1, (400, n)), vertices])
        if sigma_mins(spec, X, tmp).min() >= floor:
            lo = mid
        else:
            hi = mid
    return lo


def zero_of(fprime, guess):
    return float(mpmath.findroot(fprime, guess))


def main():
    mpmath.mp.dps = 30
    sigmoid = lambda x: 1 / (1 + mpmath.exp(-x))
    silu = lambda x: sigmoid(x) * (1 + x * (1 - sigmoid(x)))
    gelu = lambda x: mpmath.ncdf(x) + x * mpmath.npdf(x)
    mish = lambda x: mpmath.diff(lambda t: t * mpmath.tanh(mpmath.log(1 + mpmath.exp(t))), x)
    cases = [  # spec, width, centre, true radius, search bound
        ("silu", 4, 0.0, -zero_of(silu, -1.3), 4),
        ("gelu", 4, 0.0, -zero_of(gelu, -0.75), 4),
        ("mish", 4, 0.0, -zero_of(mish, -1.2), 4),
        ("hardswish", 4, 0.0, 1.5, 4),
        ("relu", 4, 1.0, 1.0, 4),
        ("csquare", 4, 1.0, 1.0, 4),
        ("csquarelip", 4, 1.0, 1.0, 4),
    ]
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        print("| layer | centre | certified r | true r | certified / true | sampled r (margin 1e-3) |")
        print("|---|---|---|---|---|---|")
        for spec, n, c0, true, bound in cases:
            c = np.full(n, c0)
            rc = certified_radius(VIJP, spec, c, bound, 5000, tmp)
            rs = sampled_radius(spec, c, bound, tmp, rng)
            print(f"| `{spec}` | {c0:g} | {rc:.6g} | {true:.6g} | {rc / true:.4f} | {rs:.4g} |")
        if "--before" in sys.argv:
            old = sys.argv[sys.argv.index("--before") + 1]
            c = np.array([1.0, 0.5, -0.8, 0.6, 0.9, -0.7, 1.1, 0.4])
            print("\n| csquare, width 8 | ‖rad‖_F (before) | bound on ‖rad‖₂ (after) |")
            print("|---|---|---|")
            r_old = certified_radius(old, "csquare", c, 1, 1, tmp)
            r_new = certified_radius(VIJP, "csquare", c, 1, 1, tmp)
            print(f"| largest r certified in one box | {r_old:.6g} | {r_new:.6g} |")
            for r in (0.2, 0.4):
                a, b = box_result(old, "csquare", c, r, 5000, tmp), box_result(VIJP, "csquare", c, r, 5000, tmp)
                print(f"| s over c ± {r:g} (boxes) | {a['sigma_min_lower_bound']:.6g} ({a['intervals']}) | "
                      f"{b['sigma_min_lower_bound']:.6g} ({b['intervals']}) |")


if __name__ == "__main__":
    main()

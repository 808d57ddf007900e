#!/usr/bin/python3
"""How much the affine forms of `vijp certify --net NET --box` gain over
interval boxes (docs/certify.md, "Which form, and how tight", quotes the
table).  For each net, a chain that ends in silu, whose f′ vanishes at
x0 = −1.2784645: the net is singular at a point of the box [−r, r]^4 once
the silu input reaches x0 there.

  certified  the largest r (bisection to 1e-3 relative) whose box the
             command certifies, with --box-form interval and affine;
  sampled    the least r at which one of the box's 16 vertices or 4000
             uniform points (numpy, float64, along rays through the
             centre) sends a silu input to <= x0: an upper bound on the
             true first singular radius;
  time       seconds of one run at the certified radius.

Nets (weights written here as .npy, zero biases):
  diagonal   dense:4 (2I) → tanh → dense:4 (W2) → silu
  rotated    dense:4 (2H, H the orthogonal Hadamard matrix over 2) → tanh
             → dense:4 (W2) → silu
  deep       [dense:4 (1.5·Q_l, Q_l a seeded random orthogonal) → tanh] × 4
             → dense:4 (W2) → silu
W2's first row (½, ½, ½, ½), its others 0.3·e_k, as in t-certify-box.

Run from the repository root after `make`:
    /usr/bin/python3 scripts/certify-affine-tightness.py   (numpy; a minute)"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
X0 = -1.278464542761074
W2 = np.array([[.5, .5, .5, .5], [.3, 0, 0, 0], [0, .3, 0, 0], [0, 0, .3, 0]])


def write_net(folder, name, firsts):
    layers = []
    for k, w in enumerate(firsts + [W2]):
        wp, bp = os.path.join(folder, f"{name}_w{k}.npy"), os.path.join(folder, f"{name}_b{k}.npy")
        np.save(wp, w), np.save(bp, np.zeros(4))
        layers.append({"type": "dense", "args": "4", "params": {"weight": wp, "bias": bp}})
        layers.append({"type": "tanh" if k < len(firsts) else "silu"})
    path = os.path.join(folder, name + ".json")
    with open(path, "w") as f:
        json.dump({"schema": "vijp-net/1", "width": 4, "layers": layers}, f)
    return path


def certified(net, r, form):
    out = subprocess.run([VIJP, "certify", "--net", net, "--box", f"{-r!r},{r!r}", "--json", "--box-form", form],
                         capture_output=True, text=True)
    return json.loads(out.stdout)["verdict"] == "certified-submersive"


def largest_certified(net, form, hi):
    lo = 0.0
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if certified(net, mid, form) else (lo, mid)
    return lo


def first_singular_sampled(firsts):
    rng = np.random.default_rng(5)
    corners = np.array([[1 if p >> i & 1 else -1 for i in range(4)] for p in range(16)], float)
    u = np.vstack([corners, rng.uniform(-1, 1, (4000, 4))])
    def singular(r):
        h = u * r
        for w in firsts:
            h = np.tanh(h @ w.T)
        return ((h @ W2.T) <= X0).any()
    a, b = 0.0, 4.0
    for _ in range(40):
        m = (a + b) / 2
        a, b = (a, m) if singular(m) else (m, b)
    return b


def main():
    H = np.array([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], float) / 2
    rng = np.random.default_rng(7)
    Qs = [np.linalg.qr(rng.standard_normal((4, 4)))[0] * 1.5 for _ in range(4)]
    nets = {"diagonal": [2 * np.eye(4)], "rotated": [2 * H], "deep": Qs}
    print("| net | certified, intervals | certified, affine | sampled | time, intervals / affine |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, firsts in nets.items():
            net = write_net(folder, name, firsts)
            samp = first_singular_sampled(firsts)
            row, times = [], []
            for form in ("interval", "affine"):
                r = largest_certified(net, form, samp * 1.01)
                t0 = time.perf_counter()
                certified(net, r, form)
                times.append(time.perf_counter() - t0)
                row.append(r)
            print(f"| {name} | {row[0]:.4f} | {row[1]:.4f} | {samp:.4f} | {times[0]:.2f} s / {times[1]:.2f} s |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

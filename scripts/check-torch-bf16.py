#!/usr/bin/env python3
"""bfloat16+binary32 against PyTorch's CPU bf16 matmul (make check).

A dense layer y = W x + b with bf16 W, x, b is evaluated by `vijp eval
--format bfloat16+binary32` and by torch.nn.functional.linear on bf16
tensors, which multiplies bf16 values exactly and accumulates in binary32
(its "opmath" type), rounding to bf16 once at the output.

The bound, per output.  Let s be the exact W x + b (computed here exactly,
with fractions: bf16 values are dyadic) and S = Σ|w_k x_k| + |b|.  Each side
sums n + 1 exact terms in binary32 in some order, so its sum ŝ is within
γ_{n+1}·S of s (Higham, ASNA §4.2; γ_k = k u/(1 − k u), u = 2^-24), whatever
the order; each then rounds ŝ to bf16 once, moving it by at most 2^-8·|ŝ|
(round to nearest, normal range).  So the two outputs differ by at most
    2 γ_{n+1} S + 2^-8 (|ŝ_vijp| + |ŝ_torch|),  |ŝ| <= |s| + γ_{n+1} S.
The first sample is the hand case [1, 2^-9, 2^-9, 2^-9, 2^-9, 0, …] with
unit weights: in binary32 it sums to 1 + 2^-7 exactly (a bf16 number), while
rounding every partial sum to bf16 leaves 1; the check asserts that the
plain `bfloat16` format misses torch there by more than the bound, so the
bound does tell the two accumulation models apart.
Skipped, with the reason, where torch does not import."""
import os
import sys
import tempfile
from fractions import Fraction

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"check-torch-bf16: SKIPPED: python3 cannot import torch/numpy ({e}); "
          "scripts/install-deps.sh installs python3-torch")
    sys.exit(0)

from vijp_dense_eval import dense_forward  # noqa: E402 (after the SKIPPED guard)

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
N_IN, N_OUT, BATCH = 48, 16, 8
U32 = Fraction(1, 2 ** 24)


def gamma(k):
    return k * U32 / (1 - k * U32)


def vijp_forward(fmt, d, W, b, X):
    return dense_forward(VIJP, "check-torch-bf16", fmt, d, W, b, X)


def main():
    g = torch.Generator().manual_seed(11)
    bf = lambda t: t.to(torch.bfloat16)  # noqa: E731
    W = bf(torch.randn(N_OUT, N_IN, generator=g, dtype=torch.float64))
    b = bf(torch.randn(N_OUT, generator=g, dtype=torch.float64))
    X = bf(torch.randn(BATCH, N_IN, generator=g, dtype=torch.float64))
    W[0, :] = 1  # the hand case: unit weights, no bias, on sample 0
    b[0] = 0
    X[0, :] = 0
    X[0, 0] = 1
    X[0, 1:5] = 2.0 ** -9
    y_torch = torch.nn.functional.linear(X, W, b).to(torch.float64).numpy()
    Wd, bd, Xd = W.to(torch.float64).numpy(), b.to(torch.float64).numpy(), X.to(torch.float64).numpy()
    with tempfile.TemporaryDirectory() as d:
        y_mixed = vijp_forward("bfloat16+binary32", d, Wd, bd, Xd)
        y_plain = vijp_forward("bfloat16", d, Wd, bd, Xd)
    worst, plain_beyond, identical = Fraction(0), False, 0
    for j in range(BATCH):
        for i in range(N_OUT):
            terms = [Fraction(Wd[i, k]) * Fraction(Xd[j, k]) for k in range(N_IN)] + [Fraction(bd[i])]
            s, S = sum(terms), sum(abs(t) for t in terms)
            gm = gamma(N_IN + 1)
            shat = abs(s) + gm * S
            bound = 2 * gm * S + Fraction(1, 256) * 2 * shat
            diff = abs(Fraction(y_mixed[j, i]) - Fraction(y_torch[j, i]))
            if diff > bound:
                sys.exit(f"check-torch-bf16: FAILED: sample {j} output {i}: vijp {y_mixed[j, i]!r}, "
                         f"torch {y_torch[j, i]!r}, |diff| {float(diff):.3g} > bound {float(bound):.3g}")
            if bound:
                worst = max(worst, diff / bound)
            identical += diff == 0
            if abs(Fraction(y_plain[j, i]) - Fraction(y_torch[j, i])) > bound:
                plain_beyond = True
    if y_torch[0, 0] != 1 + 2.0 ** -7 or y_mixed[0, 0] != 1 + 2.0 ** -7 or y_plain[0, 0] != 1.0:
        sys.exit(f"check-torch-bf16: FAILED: hand case: torch {y_torch[0, 0]!r}, bfloat16+binary32 "
                 f"{y_mixed[0, 0]!r} (both want 1 + 2^-7), bfloat16 {y_plain[0, 0]!r} (wants 1)")
    if not plain_beyond:
        sys.exit("check-torch-bf16: FAILED: plain bfloat16 is within the bound everywhere: the check cannot "
                 "tell the accumulation models apart")
    print(f"check-torch-bf16: {BATCH * N_OUT} outputs of a bf16 dense:{N_OUT} (n = {N_IN}) agree with torch "
          f"{torch.__version__} within the bound (worst {float(worst):.3g} of it, {identical} bit for bit); "
          "plain bfloat16 does not")


main()

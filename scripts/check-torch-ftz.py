#!/usr/bin/env python3
"""bfloat16:ftz+binary32 against PyTorch's CPU bf16 matmul flushing (make check).

On this CPU torch's bf16 `linear` (oneDNN, AVX-512 BF16: VDPBF16PS treats
subnormal inputs as zero and flushes subnormal results, whatever MXCSR says)
keeps bf16 subnormals in a tensor but gives 0 for their products, where
vijp's bfloat16+binary32 keeps them (2^-130 stays 7.35e-40).  A dense
layer y = W x + b (n = 48 inputs, 16 outputs, batch 8: a shape torch sends
to oneDNN) is evaluated by `vijp eval` and by torch, and compared bit for bit
(the float64 patterns of the bf16 results, the sign of zero included):

  A. subnormal inputs and weights: x = ±2^-130, ±2^-133 (the smallest bf16
     subnormal), 2^-126 − 2^-133 (the largest), beside normal values, and
     rows of W with some subnormal entries; some outputs have b = 0 and only
     subnormal terms (sample 0: subnormal inputs only; samples 1, 2: inputs
     only where rows 1, 2 hold subnormal weights), which torch flushes to 0.
     `bfloat16:ftz+binary32` (storage flushed: the subnormal operands are
     zeros before the product) gives torch's every output.
  B. products that are subnormal although both operands are normal (rows 0,
     1 of W in [2^-65, 2^-64) and [2^-57, 2^-56), samples 0, 1 in
     [2^-66, 2^-65) and [2^-75, 2^-74), all positive: 48 terms in
     [2^-131, 2^-129) and [2^-132, 2^-130), whose exact sums are normal or
     nearly; the cross terms are all normal, 2^-123 and up, or all tiny):
     torch flushes every partial sum to 0; so does
     `bfloat16:ftz+binary32:ftz` (the binary32 accumulation flushed too),
     bit for bit; `bfloat16:ftz+binary32` sums them with subnormals and
     reaches the normal range.  (With terms of both signs near the boundary
     which partial sums are tiny depends on the order of summation, which
     torch's kernel and vijp do not share: not a case for bit-for-bit.
     Both flush a sum, not a product fused into a normal sum: a tiny term
     added to a normal running sum counts.)

`bfloat16+binary32` (no flushing) must differ from torch on the subnormal
rows, so the check can tell the models apart.  If torch keeps the
subnormals here (another CPU, another kernel), the check says SKIPPED.
Random data: the normal outputs agree bit for bit as in check-torch-bf16.py
(binary32 sums of exact products in torch's and vijp's orders agree here)."""
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"check-torch-ftz: SKIPPED: python3 cannot import torch/numpy ({e})")
    sys.exit(0)

from vijp_dense_eval import dense_forward  # noqa: E402 (after the SKIPPED guard)

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
N_IN, N_OUT, BATCH = 48, 16, 8


def vijp_forward(fmt, d, W, b, X):
    return dense_forward(VIJP, "check-torch-ftz", fmt, d, W, b, X)


def bits(a):
    return np.ascontiguousarray(a, dtype="<f8").view("<u8")


def data(case):
    g = torch.Generator().manual_seed(29 + "AB".index(case))
    bf = lambda t: t.to(torch.bfloat16)  # noqa: E731
    W = torch.randn(N_OUT, N_IN, generator=g, dtype=torch.float64)
    b = torch.randn(N_OUT, generator=g, dtype=torch.float64)
    X = torch.randn(BATCH, N_IN, generator=g, dtype=torch.float64)
    subs = [2.0 ** -130, -2.0 ** -133, 2.0 ** -126 - 2.0 ** -133, -2.0 ** -130, 2.0 ** -128]
    if case == "A":
        for j in range(3, BATCH):  # a few subnormal inputs among normal ones
            for k, s in enumerate(subs):
                X[j, (7 * j + 5 * k) % N_IN] = s
        X[0, :] = 0  # sample 0: subnormal inputs only
        for k, s in enumerate(subs):
            X[0, 3 * k] = s
        for i in (1, 2):  # rows 1, 2: some subnormal weights, which samples 1, 2 alone meet
            X[i, :] = 0
            for k, s in enumerate(subs):
                W[i, 4 * k + i] = s
                X[i, 4 * k + i] = 1.5
            b[i] = 0
        b[0] = b[3] = 0
    else:  # B: normal operands, subnormal positive products whose sum is normal
        u = lambda n: 0.5 + 0.5 * torch.rand(n, generator=g, dtype=torch.float64)  # noqa: E731
        W[0, :], X[0, :] = u(N_IN) * 2.0 ** -64, u(N_IN) * 2.0 ** -65  # terms in [2^-131, 2^-129)
        W[1, :], X[1, :] = u(N_IN) * 2.0 ** -56, u(N_IN) * 2.0 ** -74  # terms in [2^-132, 2^-130)
        b[0] = b[1] = 0
    return bf(W), bf(b), bf(X)


def main():
    sub_rows = {"A": [(0, i) for i in range(N_OUT)] + [(1, 1), (2, 2)],
                "B": [(j, i) for j in (0, 1) for i in (0, 1)]}
    want = {"A": "bfloat16:ftz+binary32", "B": "bfloat16:ftz+binary32:ftz"}
    report = []
    with tempfile.TemporaryDirectory() as d:
        for case in ("A", "B"):
            W, b, X = data(case)
            y_torch = torch.nn.functional.linear(X, W, b).to(torch.float64).numpy()
            Wd, bd, Xd = (t.to(torch.float64).numpy() for t in (W, b, X))
            if case == "A" and any(y_torch[0, i] != 0 for i in (0, 3)):
                print(f"check-torch-ftz: SKIPPED: torch {torch.__version__}'s bf16 linear keeps subnormal "
                      f"inputs on this CPU (sample 0, output 0: {y_torch[0, 0]!r})")
                return
            y = vijp_forward(want[case], d, Wd, bd, Xd)
            diff = np.nonzero(bits(y) != bits(y_torch))
            if diff[0].size:
                j, i = diff[0][0], diff[1][0]
                sys.exit(f"check-torch-ftz: FAILED: case {case}, {want[case]}: {diff[0].size} outputs differ from "
                         f"torch, first sample {j} output {i}: vijp {y[j, i]!r}, torch {y_torch[j, i]!r}")
            y_keep = vijp_forward("bfloat16+binary32", d, Wd, bd, Xd)
            kept = sum(bits(y_keep[j:j + 1, i])[0] != bits(y_torch[j:j + 1, i])[0] for j, i in sub_rows[case])
            if not kept:
                sys.exit(f"check-torch-ftz: FAILED: case {case}: bfloat16+binary32 equals torch on every "
                         "subnormal row: the check cannot tell flushing from keeping")
            note = ""
            if case == "B":
                y_store = vijp_forward("bfloat16:ftz+binary32", d, Wd, bd, Xd)
                note = f", bfloat16:ftz+binary32 on {int((bits(y_store) != bits(y_torch)).sum())}"
            report.append(f"{case}: {want[case]} all {BATCH * N_OUT} bit for bit (bfloat16+binary32 differs on "
                          f"{kept} of {len(sub_rows[case])} subnormal outputs{note})")
    print(f"check-torch-ftz: torch {torch.__version__} bf16 linear, flushing: " + "; ".join(report))


main()

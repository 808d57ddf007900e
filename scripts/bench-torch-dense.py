#!/usr/bin/env python3
"""make bench (bench-emu-dense's yardstick): PyTorch's bfloat16 dense layer,
forward and backward (y = x Wᵀ + b; ∂x, ∂W, ∂b from ∂y), on the CPU, one
thread (the emulated products run on one core), best of several runs.

Usage: bench-torch-dense.py WIDTH BATCH
Prints one line, "torch_bf16_dense_fwd_bwd_s SECONDS", or "torch unavailable:
REASON" and exits 0 when torch does not import (the benchmark then prints
no ratio)."""
import sys
import time

if len(sys.argv) != 3:
    sys.stderr.write(__doc__)
    sys.exit(2)
width, batch = int(sys.argv[1]), int(sys.argv[2])
try:
    import torch
except Exception as e:  # no torch here: say so, the benchmark goes on without
    print(f"torch unavailable: {type(e).__name__}")
    sys.exit(0)

torch.set_num_threads(1)
gen = torch.Generator().manual_seed(1)
x = torch.randn(batch, width, generator=gen).bfloat16().requires_grad_()
w = (torch.randn(width, width, generator=gen) / width ** 0.5).bfloat16().requires_grad_()
b = torch.randn(width, generator=gen).bfloat16().requires_grad_()
gy = torch.randn(batch, width, generator=gen).bfloat16()


def step():
    y = torch.nn.functional.linear(x, w, b)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), gy)
    return gx, gw, gb


for _ in range(20):
    step()
calls, best = 50, float("inf")
for _ in range(7):
    t0 = time.perf_counter()
    for _ in range(calls):
        step()
    best = min(best, (time.perf_counter() - t0) / calls)
print(f"torch_bf16_dense_fwd_bwd_s {best:.9g}")

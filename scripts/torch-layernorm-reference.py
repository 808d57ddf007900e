#!/usr/bin/env python3
"""PyTorch's LayerNorm in float64: the reference values of
tests/t-normlayers.c (layernorm_matches_torch), printed case by case.

Usage: scripts/torch-layernorm-reference.py   (needs PyTorch)
"""
import torch
torch.set_default_dtype(torch.float64)
def case(N, eps, affine, width, B, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, width // N, N, generator=g)
    gy = torch.randn(B, width // N, N, generator=g)
    ln = torch.nn.LayerNorm(N, eps=eps, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            ln.weight.copy_(torch.randn(N, generator=g))
            ln.bias.copy_(torch.randn(N, generator=g))
    x.requires_grad_(True)
    y = ln(x)
    (y * gy).sum().backward()
    fmt = lambda t: ", ".join("%.17g" % v for v in t.detach().reshape(-1).tolist())
    print("spec layernorm:%d:eps=%r%s width %d B %d" % (N, eps, ":affine" if affine else "", width, B))
    print("theta", fmt(torch.cat([ln.weight, ln.bias])) if affine else "")
    print("x", fmt(x)); print("g", fmt(gy)); print("y", fmt(y)); print("gx", fmt(x.grad))
    if affine: print("gtheta", fmt(torch.cat([ln.weight.grad, ln.bias.grad])))
case(3, 0.5, True, 6, 2, 1)
case(4, 1e-5, True, 8, 2, 2)
case(5, 0.0, False, 5, 2, 3)

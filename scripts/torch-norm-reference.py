#!/usr/bin/env python3
"""PyTorch's LayerNorm, eval BatchNorm1d, GroupNorm and LogSoftmax in
float64: the reference values of tests/t-normlayers.c (norms_match_torch),
printed case by case.

Usage: scripts/torch-norm-reference.py   (needs PyTorch)
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

def batchnorm_case(C, eps, affine, S, B, seed):
    """BatchNorm1d in eval mode: running statistics, not the batch's."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, S, generator=g)
    gy = torch.randn(B, C, S, generator=g)
    bn = torch.nn.BatchNorm1d(C, eps=eps, affine=affine)
    with torch.no_grad():
        if affine:
            bn.weight.copy_(torch.randn(C, generator=g))
            bn.bias.copy_(torch.randn(C, generator=g))
        bn.running_mean.copy_(torch.randn(C, generator=g))
        bn.running_var.copy_(torch.rand(C, generator=g) + 0.5)
    bn.eval()
    x.requires_grad_(True)
    y = bn(x)
    (y * gy).sum().backward()
    fmt = lambda t: ", ".join("%.17g" % v for v in t.detach().reshape(-1).tolist())
    print("spec batchnorm:%d:eps=%r%s width %d B %d" % (C, eps, ":affine" if affine else "", C * S, B))
    theta = ([bn.weight, bn.bias] if affine else []) + [bn.running_mean, bn.running_var]
    print("theta", fmt(torch.cat(theta)))
    print("x", fmt(x)); print("g", fmt(gy)); print("y", fmt(y)); print("gx", fmt(x.grad))
    if affine: print("gtheta", fmt(torch.cat([bn.weight.grad, bn.bias.grad])))
batchnorm_case(2, 1e-5, True, 3, 2, 4)
batchnorm_case(3, 0.1, False, 2, 2, 5)

def groupnorm_case(G, C, eps, affine, S, B, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, S, generator=g)
    gy = torch.randn(B, C, S, generator=g)
    gn = torch.nn.GroupNorm(G, C, eps=eps, affine=affine)
    if affine:
        with torch.no_grad():
            gn.weight.copy_(torch.randn(C, generator=g))
            gn.bias.copy_(torch.randn(C, generator=g))
    x.requires_grad_(True)
    y = gn(x)
    (y * gy).sum().backward()
    fmt = lambda t: ", ".join("%.17g" % v for v in t.detach().reshape(-1).tolist())
    print("spec groupnorm:%dx%d:eps=%r%s width %d B %d" % (G, C, eps, ":affine" if affine else "", C * S, B))
    print("theta", fmt(torch.cat([gn.weight, gn.bias])) if affine else "")
    print("x", fmt(x)); print("g", fmt(gy)); print("y", fmt(y)); print("gx", fmt(x.grad))
    if affine: print("gtheta", fmt(torch.cat([gn.weight.grad, gn.bias.grad])))
groupnorm_case(2, 4, 1e-5, True, 2, 2, 6)
groupnorm_case(1, 3, 0.1, False, 2, 2, 7)

def logsoftmax_case(N, width, B, seed):
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(B, width // N, N, generator=g)
    gy = torch.randn(B, width // N, N, generator=g)
    x.requires_grad_(True)
    y = torch.nn.LogSoftmax(dim=-1)(x)
    (y * gy).sum().backward()
    fmt = lambda t: ", ".join("%.17g" % v for v in t.detach().reshape(-1).tolist())
    print("spec logsoftmax:%d width %d B %d" % (N, width, B))
    print("theta", "")
    print("x", fmt(x)); print("g", fmt(gy)); print("y", fmt(y)); print("gx", fmt(x.grad))
logsoftmax_case(4, 8, 2, 8)

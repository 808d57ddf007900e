#!/usr/bin/env python3
"""Write a RevViT stack as a vijp JSON net (vijp-net/1) on stdout.

usage: make-net.py [--dim D] [--heads H] [--tokens L] [--depth K] [--mlp-ratio R] [--eps E]

A reversible ViT block (Mangalam et al., "Reversible Vision Transformers",
CVPR 2022) keeps two residual streams X1, X2 of L tokens × D features and
computes
    Y1 = X1 + F(X2),  F = multi-head self-attention(LayerNorm(X2)),
    Y2 = X2 + G(Y1),  G = MLP(LayerNorm(Y1)),  MLP = Linear(D, R·D), GELU, Linear(R·D, D),
which is vijp's additive coupling block with F and G as given here.  vijp's
row is (X1, X2), each token-major (token l at units [l·D, (l+1)·D)), so the
net's width is 2·L·D.  Parameters are left to vijp's --init (no "params"):
kaiming-uniform is PyTorch's nn.Linear default.  Needs only the standard
library."""
import argparse
import json
import sys


def block(d, heads, ratio, eps):
    ln = {"type": "layernorm", "args": f"{d}:eps={eps}:affine"}
    return {"type": "additive",
            "F": [ln, {"type": "attention", "args": f"{d}x{heads}"}],
            "G": [dict(ln), {"type": "linear", "args": f"{ratio * d}x{d}"}, {"type": "gelu"},
                  {"type": "linear", "args": f"{d}x{ratio * d}"}]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=192, help="embedding dimension D (default 192)")
    p.add_argument("--heads", type=int, default=3, help="attention heads H, dividing D (default 3)")
    p.add_argument("--tokens", type=int, default=16, help="sequence length L (default 16)")
    p.add_argument("--depth", type=int, default=64, help="number of reversible blocks (default 64)")
    p.add_argument("--mlp-ratio", type=int, default=4, help="MLP hidden width over D (default 4)")
    p.add_argument("--eps", default="1e-06", help="LayerNorm epsilon as written (default 1e-06, timm's ViT)")
    a = p.parse_args()
    for name, v in (("--dim", a.dim), ("--heads", a.heads), ("--tokens", a.tokens), ("--depth", a.depth),
                    ("--mlp-ratio", a.mlp_ratio)):
        if v < 1:
            p.error(f"{name} must be a positive integer, got {v}")
    if a.dim % a.heads:
        p.error(f"--heads {a.heads} does not divide --dim {a.dim}")
    net = {"schema": "vijp-net/1", "width": 2 * a.tokens * a.dim, "loss": "square",
           "layers": [block(a.dim, a.heads, a.mlp_ratio, a.eps) for _ in range(a.depth)]}
    layers = ",\n  ".join(json.dumps(b) for b in net.pop("layers"))  # one block a line
    head = json.dumps(net)[:-1]
    sys.stdout.write(f'{head}, "layers": [\n  {layers}]}}\n')


main()

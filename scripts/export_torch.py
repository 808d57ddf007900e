#!/usr/bin/env python3
"""Export a PyTorch nn.Sequential to a vijp net: OUT/model.json (format
vijp-net/1, docs/net.schema.json) and OUT/weights.safetensors (float64).

usage: scripts/export_torch.py MODEL.pt|module:factory OUT [--grid H] [--width N]

MODEL.pt is a whole pickled module (torch.save(model, path)); module:factory
imports `module` and calls `factory()` for the module.  --width is the
input width (the first Linear's in_features when omitted); --grid H gives
Conv2d's input grid rows (vijp's conv2d:CxKxH needs them; the columns follow
from the width).

Covered (anything else is refused, naming the module):
  Linear                  dense:OUTxIN (no bias: a zero bias)
  LeakyReLU(a)            leaky:a
  ReLU Tanh Sigmoid GELU('none') SiLU Mish   relu tanh sigmoid gelu silu mish
  Softplus(beta=1)        softplus (PyTorch returns x past `threshold`, 20 by
                          default; vijp computes log(1 + e^x) exactly there:
                          they differ by at most e^-20 relative)
  LayerNorm(n, elementwise_affine=False, eps=0)   layernorm (vijp has no eps:
                          an eps changes the function, so it is refused)
  Softmax(dim=-1)         softmax
  Conv1d/Conv2d(C, C, k, stride, padding=k//2, padding_mode='circular' or
                          'zeros')   conv1d:CxK[sS][:circular], conv2d:CxKxH...
  an additive coupling block: a module with attribute vijp_coupling =
                          "additive" and two nn.Sequential attributes F and G
                          of the same layers (y1 = x1 + F(x2), y2 = x2 +
                          G(y1)), exported as additive:ITEM+ITEM... with its
                          θ (F's layers, then G's) in vijp's order.

Parameters are written in PyTorch's layout (weight [out, in] for Linear,
[out, in, k(, k)] for convolutions, bias [out]) and named as nn.Sequential's
state_dict names them ("0.weight"); coupling blocks get one flat "<i>.theta"
in vijp's own order.  Needs only torch (for the model) and the standard
library (the safetensors file is written here, little-endian F64)."""
import importlib
import json
import os
import struct
import sys

import torch
import torch.nn as nn


class Refused(Exception):
    pass


def slope_text(a):
    return repr(float(a))


def conv_item(m, two_d, grid):
    c_out, c_in = m.out_channels, m.in_channels
    k = m.kernel_size[0]
    if c_out != c_in:
        raise Refused(f"{m}: vijp's convolutions keep their channels (in {c_in}, out {c_out})")
    if any(x != k for x in m.kernel_size) or k % 2 == 0:
        raise Refused(f"{m}: vijp takes an odd, square kernel")
    pad = m.padding if isinstance(m.padding, tuple) else (m.padding,)
    if any(p != k // 2 for p in pad) or m.dilation != (1,) * len(m.kernel_size) or m.groups != 1:
        raise Refused(f"{m}: vijp takes 'same' padding k//2, no dilation, no groups")
    s = m.stride[0]
    if any(x != s for x in m.stride):
        raise Refused(f"{m}: vijp takes one stride for both axes")
    if m.padding_mode not in ("circular", "zeros"):
        raise Refused(f"{m}: padding_mode {m.padding_mode!r} (vijp has circular and zeros)")
    if two_d and not grid:
        raise Refused(f"{m}: Conv2d needs --grid H, the input grid's rows")
    arg = f"{c_in}x{k}" + (f"x{grid}" if two_d else "") + (f"s{s}" if s > 1 else "")
    arg += ":circular" if m.padding_mode == "circular" else ""
    return ("conv2d" if two_d else "conv1d"), arg, None


def item(m, grid):
    """(type, args or None, torch parameter tensors in vijp's θ order or None)."""
    if isinstance(m, nn.Linear):
        return "dense", f"{m.out_features}x{m.in_features}", None
    if isinstance(m, nn.LeakyReLU):
        return "leaky", slope_text(m.negative_slope), None
    simple = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.SiLU: "silu", nn.Mish: "mish"}
    for cls, name in simple.items():
        if type(m) is cls:
            return name, None, None
    if isinstance(m, nn.GELU):
        if m.approximate != "none":
            raise Refused(f"{m}: vijp's gelu is the erf form (approximate='none')")
        return "gelu", None, None
    if isinstance(m, nn.Softplus):
        if m.beta != 1:
            raise Refused(f"{m}: vijp's softplus has beta = 1")
        return "softplus", None, None
    if isinstance(m, nn.LayerNorm):
        if m.elementwise_affine or m.eps != 0 or len(m.normalized_shape) != 1:
            raise Refused(f"{m}: vijp's layernorm is over the last axis, without affine and without eps "
                          "(construct it with elementwise_affine=False, eps=0)")
        return "layernorm", None, None
    if isinstance(m, nn.Softmax):
        if m.dim not in (-1, 1):
            raise Refused(f"{m}: vijp's softmax is over the features (dim=-1)")
        return "softmax", None, None
    if isinstance(m, nn.Conv1d):
        return conv_item(m, False, grid)
    if isinstance(m, nn.Conv2d):
        return conv_item(m, True, grid)
    raise Refused(f"{type(m).__name__} ({m}) has no vijp layer type here")


def vijp_theta(m):
    """A parametric module's θ in vijp's order (dense: W column-major, then b;
    conv: W[o][c][ky][kx] row-major, then b), float64."""
    w = m.weight.detach().to(torch.float64)
    b = m.bias.detach().to(torch.float64) if m.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
    if isinstance(m, nn.Linear):
        return torch.cat([w.t().reshape(-1), b])  # W[i, k] at i + k·m: column-major
    return torch.cat([w.reshape(-1), b])


def vijp_theta_grad(m):
    """The gradient of a parametric module's θ, in vijp's order (as vijp_theta)."""
    w = m.weight.grad.to(torch.float64)
    b = m.bias.grad.to(torch.float64) if m.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
    if isinstance(m, nn.Linear):
        return torch.cat([w.t().reshape(-1), b])
    return torch.cat([w.reshape(-1), b])


def coupling(m, grid):
    if getattr(m, "vijp_coupling", None) != "additive":
        return None
    F, G = getattr(m, "F", None), getattr(m, "G", None)
    if not isinstance(F, nn.Sequential) or not isinstance(G, nn.Sequential) or len(F) != len(G):
        raise Refused(f"{m}: an additive coupling block needs nn.Sequential F and G of the same layers")
    items, thetas = [], []
    for f_sub, g_sub in zip(F, G):
        kind, args, _ = item(f_sub, grid)
        if item(g_sub, grid)[:2] != (kind, args):
            raise Refused(f"{m}: F and G differ ({f_sub} against {g_sub})")
        items.append(kind + (":" + args if args else ""))
    for seq in (F, G):
        for sub in seq:
            if isinstance(sub, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                thetas.append(vijp_theta(sub))
    theta = torch.cat(thetas) if thetas else torch.zeros(0, dtype=torch.float64)
    return "+".join(items), theta


def load_model(what):
    if what.endswith(".pt"):
        try:
            return torch.load(what, weights_only=False)  # a whole module, not a state_dict
        except TypeError:  # a torch without weights_only
            return torch.load(what)
    module, _, factory = what.partition(":")
    if not factory:
        raise Refused(f"{what}: give MODEL.pt or module:factory")
    sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module), factory)()


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        values = t.detach().to(torch.float64).reshape(-1).tolist()
        data = struct.pack("<%dd" % len(values), *values)
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def export(model, out, width=None, grid=None):
    if not isinstance(model, nn.Sequential):
        raise Refused(f"the model is a {type(model).__name__}: export an nn.Sequential")
    layers, tensors = [], {}
    for i, m in enumerate(model):
        block = coupling(m, grid)
        if block:
            args, theta = block
            layers.append({"type": "additive", "args": args, "params": {"theta": {"file": "weights.safetensors",
                                                                                  "tensor": f"{i}.theta"}}})
            tensors[f"{i}.theta"] = theta
            continue
        kind, args, _ = item(m, grid)
        entry = {"type": kind}
        if args:
            entry["args"] = args
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            w = m.weight.detach().to(torch.float64)
            b = m.bias.detach().to(torch.float64) if m.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
            tensors[f"{i}.weight"], tensors[f"{i}.bias"] = w, b
            entry["params"] = {"weight": {"file": "weights.safetensors", "tensor": f"{i}.weight"},
                               "bias": {"file": "weights.safetensors", "tensor": f"{i}.bias"}}
        layers.append(entry)
    if width is None:
        first = next((m for m in model if isinstance(m, nn.Linear)), None)
        if first is None:
            raise Refused("give --width: the model does not start from a Linear whose in_features would say it")
        width = first.in_features
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "weights.safetensors"), tensors)
    net = {"schema": "vijp-net/1", "width": int(width), "layers": layers}
    tmp = os.path.join(out, "model.json.tmp")
    with open(tmp, "w") as f:
        json.dump(net, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "model.json"))
    return net


def main(argv):
    args, width, grid = [], None, None
    it = iter(argv[1:])
    for a in it:
        if a == "--width":
            width = int(next(it))
        elif a == "--grid":
            grid = int(next(it))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            args.append(a)
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        net = export(load_model(args[0]), args[1], width, grid)
    except Refused as e:
        print(f"export_torch: {e}", file=sys.stderr)
        return 2
    print(f"export_torch: {len(net['layers'])} layers, width {net['width']} -> {args[1]}/model.json, "
          f"{args[1]}/weights.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

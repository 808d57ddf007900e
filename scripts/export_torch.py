#!/usr/bin/env python3
"""Export a PyTorch model to a vijp net: OUT/model.json (format vijp-net/1,
docs/net.schema.json) and OUT/weights.safetensors (float64).

usage: scripts/export_torch.py MODEL.pt|module:factory OUT
                               [--example-input X.npy] [--width N] [--map FILE.json]

MODEL.pt is a whole pickled module (torch.save(model, path)); module:factory
imports `module` and calls `factory()` for the module.  The model is traced
by torch.fx (symbolic_trace with the leaves below), put in eval mode and in
float64, and run once on the example input by torch.fx's ShapeProp, which
gives every node's shape.

--example-input X.npy is a batch in the model's own input shape (N x F,
N x C x L, N x C x H x W, N x L x D, ...).  vijp's rows are those samples
flattened in C order: a row of N x C x H x W holds channel c at units
[c*H*W, (c+1)*H*W) ("channel-major"); a row of N x L x D holds token l at
units [l*D, (l+1)*D) ("token-major").  Without it, --width N (default: the
first Linear's in_features) makes a 2 x N example.

Mapped (anything else is refused, exit 2, naming the node, its module path
and its op, and nothing is written):
  Linear                  dense:OUTxIN on an N x F input ({weight, bias});
                          linear:OUTxIN on N x L x F ({theta}); no bias: zeros
  ReLU LeakyReLU(a) Tanh Sigmoid SiLU Mish SELU Softsign ReLU6 Hardswish
                          relu leaky:a tanh sigmoid silu mish selu softsign
                          relu6 hardswish
  GELU                    gelu (erf form), gelu:tanh (approximate='tanh')
  Softplus(b, t)          softplus:b/t (torch's default is softplus:1/20)
  ELU(a) Hardtanh(lo, hi) PReLU(C)   elu[:a] hardtanh[:lo/hi] prelu:C
  Softmax(dim=-1)         softmax (over the whole sample only)
  LogSoftmax(dim=-1)      logsoftmax:N (N the last axis)
  LayerNorm(shape, eps, affine)   layernorm:N[:eps=E][:affine], N the product
                          of normalized_shape (plain layernorm when N is the
                          whole sample, eps = 0 and no affine)
  BatchNorm1d/2d (eval)   batchnorm:C[:eps=E][:affine] (running stats in θ)
  GroupNorm(G, C)         groupnorm:GxC[:eps=E][:affine]
  Dropout(p) Identity     dropout:p identity (eval mode)
  Flatten, torch.flatten  flatten; view, reshape, contiguous, Unflatten,
                          (un)squeeze keeping the batch axis: nothing (C order
                          is kept, so the rows do not change)
  transpose/permute swapping two trailing runs of axes   transpose:AxB
  Conv1d/Conv2d           conv1d:CxK[sS], conv2d:CxKxH[sS] (C in channels, H
                          grid rows) with :out=D, :pad=P, :circular/:reflect
  AvgPool1d(K) (stride K) avgpool:K;  AvgPool2d, MaxPool1d, MaxPool2d
                          avgpool2d:CxKxH[sS], maxpool1d:CxK[sS],
                          maxpool2d:CxKxH[sS]
  MultiheadAttention      attention:DxH (self-attention, batch_first, no mask;
                          the output's item 0)
  TransformerEncoder      its layers expanded as below, then its norm
  TransformerEncoderLayer (batch_first, eval) expanded into residual blocks:
                          post-norm x = LN1(x + SA(x)); x = LN2(x + FF(x)),
                          norm_first x = x + SA(LN1(x)); x = x + FF(LN2(x)),
                          FF = linear, activation, dropout, linear
  functional: F.relu, F.gelu, torch.tanh, torch.sigmoid, F.silu, F.elu,
              F.leaky_relu, F.softplus, F.layer_norm, F.log_softmax, F.linear
              (its weight and bias module parameters), ...
  x + f(x), f(x) + P(x)   {"type": "residual", "layers": f, "skip": P}
  additive coupling       a module with vijp_coupling = "additive" and
                          submodules F and G: y1 = x1 + F(x2), y2 = x2 +
                          G(y1), x1 and x2 the first and second half of the
                          flattened sample (F and G see them reshaped as the
                          module reshapes them; checked by running it);
                          {"type": "additive", "F": [...], "G": [...]}

--map FILE.json maps your own module classes (traced as leaves) to your
plugin's layer types:
  {"mypkg.blocks.Scale": {"type": "scale", "args": "{features}x{gain}",
                          "theta": ["weight", "inner.bias"]}}
The key is the class's qualified name (cls.__module__ + "." +
cls.__qualname__); "args" (optional) is a template of the module's
attributes ({name} or {name.sub}; {width} is the input's units per sample;
numbers print as the shortest decimal that reads back); "theta" (optional)
lists named tensors (parameters or buffers, dotted paths), flattened in C
order and concatenated into one {"theta": ...}.  A map entry wins over the
built-in mapping.  Run vijp with --plugin YOURS.so.

Parameters: dense and conv as {weight, bias} in PyTorch's layout, every
other type as one flat "<path>.theta" in the type's θ order; tensors are
named by their module's qualified name.  Needs only torch (the safetensors
and .npy files are read and written here)."""
import ast
import copy
import importlib
import json
import math
import operator
import os
import struct
import sys

try:
    import torch
    import torch.fx as fx
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.fx.passes.shape_prop import ShapeProp
except ImportError as e:
    print(f"export_torch: this python3 cannot import torch with torch.fx ({e}); "
          "scripts/install-deps.sh installs python3-torch", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layers import (Layer, Refused, fn_activation, linear_layer, mha_layer, module_layers,  # noqa: E402
                          norm_args, num, permutation, qualname, residual, rows_fn, transpose_args)

__all__ = ["Refused", "qualname", "plan", "export", "npy_read", "npy_write", "main"]


RESHAPES = {"view", "reshape", "contiguous", "unsqueeze", "squeeze", torch.reshape, torch.unsqueeze,
            torch.squeeze}
FLATTENS = {"flatten", torch.flatten}
ADDS = {operator.add, operator.iadd, torch.add, "add", "add_", "__add__"}
SIZES = {"size", "dim"}


class Chain:
    """A tensor value: the layers from the graph's input to it."""

    def __init__(self, layers):
        self.layers = tuple(layers)


class Pending:
    """MultiheadAttention's output tuple: item 0 appends the layer."""

    def __init__(self, chain, layer):
        self.chain, self.layer = chain, layer


class Meta:
    """A non-tensor value (a size, a shape) that only reshapes may use."""


def add_values(a, b):
    k = 0
    while k < min(len(a.layers), len(b.layers)) and a.layers[k] is b.layers[k]:
        k += 1
    fa, fb = list(a.layers[k:]), list(b.layers[k:])
    if not fa and not fb:
        raise Refused("adds a value to itself (2x has no vijp type)")
    if not fb or not fa:
        return Chain(a.layers[:k] + (residual(fa or fb),))
    f, p = (fa, fb) if len(fa) >= len(fb) else (fb, fa)
    return Chain(a.layers[:k] + (residual(f, p),))


class PathTracer(fx.Tracer):
    """symbolic_trace's tracer that keeps each node's calling module path and
    treats mapped classes, coupling blocks and TransformerEncoderLayer as leaves."""

    def __init__(self, mapping):
        super().__init__()
        self.mapping, self.path, self.failed_in = mapping, [""], None

    def is_leaf_module(self, m, qualified_name):
        return (qualname(type(m)) in self.mapping or getattr(m, "vijp_coupling", None) is not None
                or super().is_leaf_module(m, qualified_name))

    def call_module(self, m, forward, args, kwargs):
        self.path.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            self.failed_in = self.failed_in or self.path[-1]  # the innermost module
            raise
        finally:
            self.path.pop()

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["vijp_path"] = node.target if node.op == "call_module" else self.path[-1]
        return node


class Recorder(ShapeProp):
    """ShapeProp that also keeps every node's value (the coupling check needs them)."""

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n.name] = out
        return out


class Whole(nn.Module):
    """A model that is itself a leaf (a Linear, an encoder layer, a coupling
    block), wrapped so that the tracer sees one call of it."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


def trace(model, example, mapping):
    tracer = PathTracer(mapping)
    if tracer.is_leaf_module(model, ""):
        model = Whole(model)
    try:
        graph = tracer.trace(model)
    except Exception as e:  # fx raises many kinds (TraceError, TypeError on control flow, ...)
        where = tracer.failed_in or "(the model)"
        raise Refused(f"torch.fx cannot trace {type(model).__name__} (in module path '{where}'): "
                      f"{type(e).__name__}: {e}")
    gm = fx.GraphModule(tracer.root, graph)
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    if len(inputs) != 1:
        raise Refused(f"{describe(inputs[1], gm)}: a second input (vijp nets take one)" if inputs else "no input")
    rec = Recorder(gm)
    rec.values = {}
    try:
        with torch.no_grad():
            model(example)  # first on its own: ShapeProp would print a traceback of a failure
            rec.propagate(example)
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        raise Refused(f"the model does not run on the example input {list(example.shape)}: {e}".split("\n")[0])
    return gm, rec.values


def describe(node, gm):
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", repr(node.target))
    if node.op == "call_module":
        target = type(gm.get_submodule(node.target)).__name__
    path = node.meta.get("vijp_path", "") or "(the model)"
    return f"node '{node.name}' (module path '{path}', op {node.op} {target})"


def shape_of(node):
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if hasattr(meta, "shape") else None


def convert(model, example, mapping, name=""):
    """The vijp layers of `model` on `example`: a chain of layers."""
    gm, values = trace(model, example, mapping)
    val = {}
    for node in gm.graph.nodes:
        try:
            val[node.name] = convert_node(gm, node, val, values, mapping, name)
        except Refused as e:
            raise Refused(f"{describe(node, gm)}: {e}") from None
        if node.op == "output":
            return val[node.name].layers, shape_of(node)
    raise Refused("the traced graph has no output")


def convert_node(gm, node, val, values, mapping, prefix):
    op, t = node.op, node.target
    if op == "placeholder":  # the one input (trace() refuses others)
        return Chain(())
    if op == "get_attr":
        return Meta()
    if op == "output":
        out = val[node.args[0].name] if isinstance(node.args[0], fx.Node) else None
        if not isinstance(out, Chain):
            raise Refused("the output is not one tensor")
        return out
    ins = [a for a in node.args if isinstance(a, fx.Node)]
    x = val.get(ins[0].name) if ins else None
    in_shape = shape_of(ins[0]) if ins else None
    out_shape = shape_of(node)
    qual = ((prefix + ".") if prefix else "") + str(node.meta.get("vijp_path") or node.name)
    if op == "call_module":
        m = gm.get_submodule(t)
        if not isinstance(x, Chain) or len(ins) != len(node.args):
            raise Refused("a module applied to something other than one traced tensor")
        if isinstance(m, nn.MultiheadAttention) and qualname(type(m)) not in mapping:
            if any(a is not ins[0] for a in node.args) or len(node.args) != 3:
                raise Refused("not self-attention m(x, x, x)")
            for k, v in node.kwargs.items():
                if k not in ("need_weights", "average_attn_weights") and v is not None:
                    raise Refused(f"MultiheadAttention's {k} (vijp's attention takes no mask)")
            return Pending(x, mha_layer(m, in_shape[1:], qual))
        if node.kwargs and any(v is not None for v in node.kwargs.values()):
            raise Refused(f"called with {sorted(node.kwargs)} (vijp maps the plain call)")
        if getattr(m, "vijp_coupling", None) is not None and qualname(type(m)) not in mapping:
            return Chain(x.layers + (coupling(m, values[ins[0].name], mapping, qual),))
        return Chain(x.layers + tuple(module_layers(m, in_shape[1:], qual, mapping)))
    if t is operator.getitem:
        src = val[ins[0].name]
        if isinstance(src, Pending):
            if node.args[1] != 0:
                raise Refused("uses MultiheadAttention's attention weights (vijp gives the output only)")
            return Chain(src.chain.layers + (src.layer,))
        if isinstance(src, Meta):
            return Meta()
        raise Refused("indexes or slices a tensor (vijp has no such layer)")
    if t in SIZES or (t is getattr and node.args[1] in ("shape", "ndim")):
        return Meta()
    if t in ADDS:
        if len(ins) != 2 or len(node.args) != 2 or node.kwargs:
            raise Refused("an add that is not tensor + tensor")
        a, b = val[ins[0].name], val[ins[1].name]
        if not isinstance(a, Chain) or not isinstance(b, Chain) or shape_of(ins[0]) != shape_of(ins[1]):
            raise Refused("adds tensors of different shapes or a non-traced tensor (vijp adds residuals only)")
        return add_values(a, b)
    if not isinstance(x, Chain):
        raise Refused("its input is not a traced tensor")
    rest = list(node.args[1:])
    if any(isinstance(a, fx.Node) and not isinstance(val[a.name], Meta) for a in rest + list(node.kwargs.values())):
        raise Refused("takes a second traced tensor (vijp maps one-input functions and x + f(x) only)")
    fn = rows_fn(lambda h: evaluate(gm, node, ins[0], h), in_shape[1:])
    if t in RESHAPES or t in FLATTENS:
        if out_shape[0] != in_shape[0]:
            raise Refused(f"reshapes {list(in_shape)} to {list(out_shape)}: the batch axis changes")
        return Chain(x.layers + ((Layer("flatten", None, fn, name=qual),) if t in FLATTENS else ()))
    if t in ("transpose", "permute", torch.transpose, torch.permute):
        args = transpose_args(permutation(node, len(in_shape)), in_shape)
        return Chain(x.layers + ((Layer("transpose", args, fn, name=qual),) if args else ()))
    act = fn_activation(node, rest, node.kwargs)
    if act:
        return Chain(x.layers + (Layer(act[0], act[1], fn, name=qual),))
    if t in (F.softmax, F.log_softmax, "softmax", "log_softmax"):
        dim = rest[0] if rest else node.kwargs.get("dim")
        if dim not in (-1, len(in_shape) - 1):
            raise Refused(f"dim={dim}: vijp's is over the last axis")
        if t in (F.log_softmax, "log_softmax"):
            return Chain(x.layers + (Layer("logsoftmax", f"{in_shape[-1]}", fn, name=qual),))
        if math.prod(in_shape[1:]) != in_shape[-1]:
            raise Refused("softmax over the last axis of a sequence: vijp's softmax is over the whole sample")
        return Chain(x.layers + (Layer("softmax", None, fn, name=qual),))
    if t is F.layer_norm:
        return Chain(x.layers + (functional_layer_norm(gm, node, in_shape, fn, qual),))
    if t is F.linear:
        given = dict(zip(("input", "weight", "bias"), node.args), **node.kwargs)
        w, b = fetch(gm, given["weight"]), fetch(gm, given.get("bias"))
        return Chain(x.layers + (linear_layer(w, b, in_shape[1:], qual, fn),))
    raise Refused("has no vijp layer type")


def fetch(gm, a):
    if isinstance(a, fx.Node):
        if a.op != "get_attr":
            raise Refused(f"argument '{a.name}' is computed (vijp takes parameters only)")
        t = gm
        for part in a.target.split("."):
            t = getattr(t, part)
        return t
    return a


def functional_layer_norm(gm, node, in_shape, fn, qual):
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    given = dict(zip(names, node.args))
    given.update(node.kwargs)
    shape = given["normalized_shape"]
    shape = [shape] if isinstance(shape, int) else list(shape)
    w, b, eps = fetch(gm, given.get("weight")), fetch(gm, given.get("bias")), given.get("eps", 1e-5)
    if (w is None) != (b is None):
        raise Refused("F.layer_norm with a weight and no bias (or the reverse)")
    n = math.prod(shape)
    return Layer("layernorm", norm_args(n, eps, w is not None), fn, [(w, "C"), (b, "C")] if w is not None else [],
                 name=qual)


def evaluate(gm, node, input_node, h):
    """The node's own call with `h` in place of its traced input (for tests)."""
    def sub(a):
        if a is input_node:
            return h
        if isinstance(a, fx.Node):
            return fetch(gm, a) if a.op == "get_attr" else None
        if isinstance(a, (list, tuple)):
            return type(a)(sub(v) for v in a)
        return a
    args, kwargs = [sub(a) for a in node.args], {k: sub(v) for k, v in node.kwargs.items()}
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    return node.target(*args, **kwargs)


def coupling(m, x, mapping, qual):
    """An additive coupling block: F and G traced on the halves they see."""
    if m.vijp_coupling != "additive":
        raise Refused(f"vijp_coupling = {m.vijp_coupling!r} (the exporter knows \"additive\")")
    subs = [getattr(m, "F", None), getattr(m, "G", None)]
    if not all(isinstance(s, nn.Module) for s in subs):
        raise Refused("an additive coupling block needs submodules F and G")
    seen = {}
    def keep_shape(key):
        def hook(mod, inp):
            seen.setdefault(key, inp[0].shape)  # returns None: the input is left as it is
        return hook
    hooks = [s.register_forward_pre_hook(keep_shape(key)) for key, s in zip("FG", subs)]
    try:
        with torch.no_grad():
            y = m(x).reshape(x.shape[0], -1)
    finally:
        for hk in hooks:
            hk.remove()
    if set(seen) != {"F", "G"}:
        raise Refused("F or G is not called by the block's forward")
    rows = x.reshape(x.shape[0], -1)
    h = rows.shape[1] // 2
    with torch.no_grad():  # the convention, checked: y1 = x1 + F(x2), y2 = x2 + G(y1) on the flat halves
        y1 = rows[:, :h] + subs[0](rows[:, h:].reshape(seen["F"])).reshape(x.shape[0], -1)
        y2 = rows[:, h:] + subs[1](y1.reshape(seen["G"])).reshape(x.shape[0], -1)
    if rows.shape[1] % 2 or y1.shape != rows[:, :h].shape or y2.shape != rows[:, h:].shape or \
            not torch.allclose(torch.cat([y1, y2], 1), y, rtol=1e-9, atol=1e-9 * float(y.abs().max())):
        raise Refused("the block is not y1 = x1 + F(x2), y2 = x2 + G(y1) on the flattened halves "
                      "(F and G mapping h units to h units)")
    block = Layer("additive", fn=rows_fn(m, tuple(x.shape[1:])), name=qual)
    block.F, _ = convert(subs[0], rows[:, h:].reshape(seen["F"]), mapping, qual + ".F")
    block.G, _ = convert(subs[1], y1.reshape(seen["G"]), mapping, qual + ".G")
    block.F, block.G = list(block.F), list(block.G)
    return block


# ------------------------------------------------------------- the export --

class Export:
    """What export() writes, and the torch side the tests compare with."""

    def __init__(self, net, tensors, layers, example):
        self.net, self.tensors, self.layers, self.example = net, tensors, layers, example


def plan(model, example, mapping=None):
    """Trace, map and validate everything; writes nothing."""
    mapping = check_mapping(mapping or {})
    if not all(p.dtype == torch.float64 for p in list(model.parameters()) + list(model.buffers())
               if p.is_floating_point()):
        model = copy.deepcopy(model).double()
    model.eval()
    example = example.to(torch.float64)
    if example.dim() < 2:
        raise Refused(f"the example input has shape {list(example.shape)}: give a batch, N x ...")
    layers, _ = convert(model, example, mapping)
    tensors = {}
    entries = [layer.entry(tensors) for layer in layers]
    net = {"schema": "vijp-net/1", "width": int(math.prod(example.shape[1:])), "layers": entries}
    if not entries:
        raise Refused("the model maps to no layer (vijp nets have at least one)")
    return Export(net, tensors, layers, example)


def check_mapping(mapping):
    if not isinstance(mapping, dict):
        raise Refused("--map: the file holds an object {class qualified name: {type, args, theta}}")
    for key, e in mapping.items():
        if not isinstance(e, dict) or not isinstance(e.get("type"), str) or set(e) - {"type", "args", "theta"} or \
                not isinstance(e.get("args", ""), str) or \
                not (isinstance(e.get("theta", []), list) and all(isinstance(s, str) for s in e.get("theta", []))):
            raise Refused(f"--map {key!r}: want {{\"type\": TYPE, \"args\": TEMPLATE, \"theta\": [NAMES]}}")
    return mapping


def export(model, out, example=None, width=None, mapping=None):
    """Write OUT/model.json and OUT/weights.safetensors; returns the Export.
    Everything is validated before anything is written."""
    if example is None:
        if width is None:
            first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
            if first is None:
                raise Refused("give --example-input (or --width): no Linear says the input width")
            width = first.in_features
        example = torch.randn(2, width, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    result = plan(model, example, mapping)
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "weights.safetensors"), result.tensors)
    tmp = os.path.join(out, "model.json.tmp")
    with open(tmp, "w") as f:
        json.dump(result.net, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "model.json"))
    return result


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


def npy_write(path, a):
    """A '<f8' C-order .npy, version 1.0 (no numpy needed)."""
    a = a.detach().to(torch.float64).contiguous()
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(s) for s in a.shape) + ("," if a.dim() == 1 else ""))
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    vals = a.reshape(-1).tolist()
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(vals), *vals))


def npy_read(path):
    """A little-endian '<f8' or '<f4' C-order .npy."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] != b"\x93NUMPY":
        raise Refused(f"{path}: not a .npy file")
    major = raw[6]
    hlen = struct.unpack("<H", raw[8:10])[0] if major == 1 else struct.unpack("<I", raw[8:12])[0]
    start = 10 if major == 1 else 12
    hdr = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    codes = {"<f8": "d", "<f4": "f"}
    if hdr.get("descr") not in codes or hdr.get("fortran_order"):
        raise Refused(f"{path}: want '<f8' or '<f4' in C order, not {hdr.get('descr')!r}"
                      f"{' in Fortran order' if hdr.get('fortran_order') else ''}")
    shape, size = tuple(hdr["shape"]), struct.calcsize(codes[hdr["descr"]])
    count = math.prod(shape)
    body = raw[start + hlen:start + hlen + size * count]
    if len(body) != size * count:
        raise Refused(f"{path}: truncated")
    vals = struct.unpack("<%d%s" % (count, codes[hdr["descr"]]), body)
    return torch.tensor(vals, dtype=torch.float64).reshape(shape)


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


def main(argv):
    args, width, example, mapping = [], None, None, None
    it = iter(argv[1:])
    try:
        for a in it:
            if a in ("--width", "--example-input", "--map"):
                v = next(it, None)
                if v is None:
                    raise Refused(f"{a} needs a value")
                if a == "--width":
                    width = int(v)
                elif a == "--example-input":
                    example = npy_read(v)
                else:
                    with open(v) as f:
                        mapping = json.load(f)
            elif a in ("-h", "--help"):
                print(__doc__)
                return 0
            elif a.startswith("-"):
                raise Refused(f"unknown option {a}")
            else:
                args.append(a)
        if len(args) != 2:
            print(__doc__, file=sys.stderr)
            return 2
        result = export(load_model(args[0]), args[1], example, width, mapping)
    except (Refused, OSError, ValueError) as e:
        print(f"export_torch: {e}", file=sys.stderr)
        return 2
    print(f"export_torch: {len(result.net['layers'])} layers, width {result.net['width']} -> "
          f"{args[1]}/model.json, {args[1]}/weights.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""PyTorch modules and functions to vijp layers, for scripts/export_torch.py:
one leaf module (or functional call) on a per-sample input shape gives its
vijp layer(s): the spec type and arguments of the shared contract
(docs/nets.md), the torch tensors whose values give the layer's θ in the
type's order, and a torch function on rows (B x units) that the round trip
(scripts/check-torch-roundtrip.py) differentiates for its bound.  The
graph itself (tracing, residual adds, coupling blocks, writing) is
export_torch.py's."""
import math
import string

import torch
import torch.nn as nn
import torch.nn.functional as F


class Refused(Exception):
    pass


def num(v):
    """The shortest decimal that reads back, without '+' (a spec separator)."""
    if isinstance(v, bool):
        raise Refused(f"{v!r} is not a number")
    if isinstance(v, int):
        return str(v)
    s = repr(float(v)).replace("e+", "e")
    return s[:-2] if s.endswith(".0") else s


def one(v, what):
    """A kernel size, stride or padding given per axis: the one value of all axes."""
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if any(x != vals[0] for x in vals):
        raise Refused(f"{what} {v} differs between axes (vijp takes one value for all)")
    return vals[0]


def qualname(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


class Layer:
    """One vijp layer: its JSON entry and, for tests, its torch side: `fn`
    maps rows (B x units) to rows, `theta` lists the torch tensors whose
    values (and .grad) give vijp's θ in order, each with "C" (flattened in C
    order), "T" (dense's column-major W) or "Z" (a zero bias made here)."""

    def __init__(self, kind, args=None, fn=None, theta=(), style="theta", name=""):
        self.kind, self.args, self.fn, self.theta, self.style, self.name = kind, args, fn, list(theta), style, name
        self.layers, self.skip, self.F, self.G = None, None, None, None

    def leaves(self):
        if self.kind in ("residual", "additive"):
            subs = (self.layers + (self.skip or [])) if self.kind == "residual" else self.F + self.G
            return [leaf for s in subs for leaf in s.leaves()]
        return [self]

    def entry(self, tensors):
        e = {"type": self.kind}
        if self.kind == "residual":
            e["layers"] = [s.entry(tensors) for s in self.layers]
            if self.skip:
                e["skip"] = [s.entry(tensors) for s in self.skip]
            return e
        if self.kind == "additive":
            e["F"] = [s.entry(tensors) for s in self.F]
            e["G"] = [s.entry(tensors) for s in self.G]
            return e
        if self.args:
            e["args"] = self.args
        if self.theta:
            if self.style == "weight_bias":
                e["params"] = {"weight": ref(tensors, self.name + ".weight", self.theta[0][0]),
                               "bias": ref(tensors, self.name + ".bias", self.theta[1][0])}
            else:
                flat = torch.cat([t.detach().to(torch.float64).reshape(-1) for t, _ in self.theta])
                e["params"] = {"theta": ref(tensors, self.name + ".theta", flat)}
        return e


def ref(tensors, name, t):
    """A safetensors reference; a name used for another tensor gets a suffix."""
    base, i = name, 1
    while name in tensors and not (tensors[name] is t or torch.equal(tensors[name], t.detach().to(torch.float64))):
        i += 1
        name = f"{base}#{i}"
    tensors[name] = t
    return {"file": "weights.safetensors", "tensor": name}


def rows_fn(f, shape):
    """f on rows: each row reshaped to the per-sample shape, f's output flattened."""
    return lambda h: f(h.reshape((h.shape[0],) + tuple(shape))).reshape(h.shape[0], -1)


def chain_fn(layers):
    def run(h):
        for layer in layers:
            h = layer.fn(h)
        return h
    return run


def bias_part(bias, n, like):
    """A θ part for a bias: the module's, or zeros for a module without one
    ("Z": made here, so torch has no gradient of it)."""
    if bias is not None:
        return bias, "C"
    return torch.zeros(n, dtype=torch.float64, device=like.device), "Z"


# ---------------------------------------------------------------- modules --

SIMPLE = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.SiLU: "silu", nn.Mish: "mish",
          nn.SELU: "selu", nn.Softsign: "softsign", nn.ReLU6: "relu6", nn.Hardswish: "hardswish",
          nn.Identity: "identity"}


def linear_layer(weight, bias, shape, name, fn):
    """nn.Linear or F.linear: dense on N x F, linear on N x L x F."""
    out, inp = weight.shape
    b = bias_part(bias, out, weight)
    if len(shape) == 1:
        return Layer("dense", f"{out}x{inp}", fn, [(weight, "T"), b], "weight_bias", name)
    return Layer("linear", f"{out}x{inp}", fn, [(weight, "C"), b], name=name)


def module_linear(m, shape, name):
    return linear_layer(m.weight, m.bias, shape, name, rows_fn(m, shape))


def conv_layer(m, shape, name):
    two_d = isinstance(m, nn.Conv2d)
    k = one(m.kernel_size, "kernel size")
    s = one(m.stride, "stride")
    if one(m.dilation, "dilation") != 1 or m.groups != 1:
        raise Refused("vijp's convolutions take no dilation and no groups")
    if m.padding == "valid":
        p = 0
    elif m.padding == "same":
        if k % 2 == 0:
            raise Refused("padding='same' with an even kernel pads asymmetrically (vijp pads symmetrically)")
        p = k // 2
    else:
        p = one(m.padding, "padding")
    modes = {"zeros": "", "circular": ":circular", "reflect": ":reflect"}
    if m.padding_mode not in modes:
        raise Refused(f"padding_mode {m.padding_mode!r} (vijp has zeros, circular and reflect)")
    arg = f"{m.in_channels}x{k}" + (f"x{shape[1]}" if two_d else "") + (f"s{s}" if s > 1 else "")
    arg += (f":out={m.out_channels}" if m.out_channels != m.in_channels else "")
    arg += (f":pad={p}" if p != k // 2 else "") + modes[m.padding_mode]
    b = bias_part(m.bias, m.out_channels, m.weight)
    return Layer("conv2d" if two_d else "conv1d", arg, rows_fn(m, shape), [(m.weight, "C"), b],
                 "weight_bias", name)


def pool_layer(m, shape, name):
    k, s = one(m.kernel_size, "kernel size"), one(m.stride if m.stride is not None else m.kernel_size, "stride")
    if one(m.padding, "padding") != 0 or m.ceil_mode:
        raise Refused("vijp's pools take no padding and no ceil_mode")
    if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d)) and (one(m.dilation, "dilation") != 1 or m.return_indices):
        raise Refused("vijp's max pools take no dilation and no return_indices")
    if isinstance(m, nn.AvgPool2d) and m.divisor_override is not None:
        raise Refused("vijp's avgpool2d takes no divisor_override")
    fn = rows_fn(m, shape)
    if isinstance(m, nn.AvgPool1d):
        if len(shape) != 2 or s != k or shape[1] % k:
            raise Refused("AvgPool1d maps to avgpool:K only with stride K dividing the length")
        return Layer("avgpool", f"{k}", fn, name=name)
    two_d = isinstance(m, (nn.AvgPool2d, nn.MaxPool2d))
    if len(shape) != (3 if two_d else 2):
        raise Refused(f"the input {list(shape)} per sample is not C x {'H x W' if two_d else 'L'}")
    kind = ("avgpool2d" if isinstance(m, nn.AvgPool2d) else "maxpool2d") if two_d else "maxpool1d"
    arg = f"{shape[0]}x{k}" + (f"x{shape[1]}" if two_d else "") + (f"s{s}" if s != k else "")
    return Layer(kind, arg, fn, name=name)


def norm_args(n, eps, affine):
    return f"{n}" + (f":eps={num(eps)}" if eps else "") + (":affine" if affine else "")


def mha_layer(m, shape, name):
    if not m.batch_first:
        raise Refused("MultiheadAttention needs batch_first=True (vijp's rows are samples)")
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise Refused("MultiheadAttention with kdim/vdim, add_bias_kv or add_zero_attn has no vijp type")
    if len(shape) != 2 or shape[1] != m.embed_dim:
        raise Refused(f"MultiheadAttention wants L x {m.embed_dim} per sample, gets {list(shape)}")
    d = m.embed_dim
    ib = bias_part(m.in_proj_bias, 3 * d, m.in_proj_weight)
    ob = bias_part(m.out_proj.bias, d, m.in_proj_weight)
    fn = rows_fn(lambda t: m(t, t, t, need_weights=False)[0], shape)
    return Layer("attention", f"{d}x{m.num_heads}", fn,
                 [(m.in_proj_weight, "C"), ib, (m.out_proj.weight, "C"), ob], name=name)


def activation_layer(act, shape, name):
    """TransformerEncoderLayer's activation: F.relu, F.gelu or a module."""
    if act is F.relu:
        return Layer("relu", None, rows_fn(F.relu, shape), name=name)
    if act is F.gelu:
        return Layer("gelu", None, rows_fn(F.gelu, shape), name=name)
    if isinstance(act, nn.Module):
        return module_layers(act, shape, name, {})[0]
    raise Refused(f"activation {act!r} has no vijp type")


def encoder_layers(m, shape, name):
    """nn.TransformerEncoderLayer (eval, batch_first) as vijp residual blocks."""
    if not m.self_attn.batch_first:
        raise Refused("TransformerEncoderLayer needs batch_first=True")
    ff = m.linear1.out_features
    sa = mha_layer(m.self_attn, shape, name + ".self_attn")
    lin1 = module_linear(m.linear1, shape, name + ".linear1")
    act = activation_layer(m.activation, (shape[0], ff), name + ".activation")
    drop = Layer("dropout", num(m.dropout.p), lambda h: h, name=name + ".dropout")
    lin2 = module_linear(m.linear2, (shape[0], ff), name + ".linear2")
    ln1, ln2 = (module_layers(ln, shape, f"{name}.{nm}", {})[0]
                for nm, ln in (("norm1", m.norm1), ("norm2", m.norm2)))
    if m.norm_first:
        return [residual([ln1, sa]), residual([ln2, lin1, act, drop, lin2])]
    return [residual([sa]), ln1, residual([lin1, act, drop, lin2]), ln2]


def residual(layers, skip=None):
    block = Layer("residual")
    block.layers, block.skip = list(layers), list(skip) if skip else None
    f, p = chain_fn(block.layers), chain_fn(block.skip or [])
    block.fn = lambda h: f(h) + p(h)
    return block


def mapped_layer(m, entry, shape, name):
    class Attrs(string.Formatter):
        def get_value(self, key, args, kwargs):
            if key == "width":
                return math.prod(shape)
            if not hasattr(m, key):
                raise Refused(f"--map args template: the module has no attribute {key!r}")
            return getattr(m, key)

        def format_field(self, value, spec):
            return num(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and not spec \
                else format(value, spec)

    args = None
    if entry.get("args"):
        try:
            args = Attrs().format(entry["args"])
        except (AttributeError, IndexError, KeyError, ValueError) as e:
            raise Refused(f"--map args template {entry['args']!r}: {e}")
        if "," in args or "+" in args:
            raise Refused(f"--map args {args!r} contain ',' or '+' (spec separators)")
    theta = []
    for path in entry.get("theta", []):
        t = m
        for part in path.split("."):
            t = getattr(t, part, None)
        if not isinstance(t, torch.Tensor):
            raise Refused(f"--map theta {path!r} is not a tensor of the module")
        theta.append((t, "C"))
    return Layer(entry["type"], args, rows_fn(m, shape), theta, name=name)


def module_layers(m, shape, name, mapping):
    """The vijp layers of one leaf module applied to per-sample shape `shape`."""
    fn = rows_fn(m, shape)
    cls = type(m)
    if qualname(cls) in mapping:
        return [mapped_layer(m, mapping[qualname(cls)], shape, name)]
    if cls in SIMPLE:
        return [Layer(SIMPLE[cls], None, fn, name=name)]
    if cls is nn.Linear:
        return [module_linear(m, shape, name)]
    if cls is nn.LeakyReLU:
        return [Layer("leaky", num(m.negative_slope), fn, name=name)]
    if cls is nn.GELU:
        return [Layer("gelu", None if m.approximate == "none" else m.approximate, fn, name=name)]
    if cls is nn.Softplus:
        return [Layer("softplus", f"{num(m.beta)}/{num(m.threshold)}", fn, name=name)]
    if cls is nn.ELU:
        return [Layer("elu", None if m.alpha == 1 else num(m.alpha), fn, name=name)]
    if cls is nn.Hardtanh:
        lohi = None if (m.min_val, m.max_val) == (-1, 1) else f"{num(m.min_val)}/{num(m.max_val)}"
        return [Layer("hardtanh", lohi, fn, name=name)]
    if cls is nn.PReLU:
        c = m.num_parameters
        if c > 1 and (len(shape) < 1 or shape[0] != c):
            raise Refused(f"PReLU({c}) on {list(shape)} per sample: its channels are not the first axis")
        return [Layer("prelu", f"{c}", fn, [(m.weight, "C")], name=name)]
    if cls in (nn.Softmax, nn.LogSoftmax):
        if m.dim not in (-1, len(shape)):
            raise Refused(f"{cls.__name__}(dim={m.dim}): vijp's is over the last axis")
        if cls is nn.LogSoftmax:
            return [Layer("logsoftmax", f"{shape[-1]}", fn, name=name)]
        if math.prod(shape) != shape[-1]:
            raise Refused(f"Softmax over the last axis of {list(shape)}: vijp's softmax is over the whole sample")
        return [Layer("softmax", None, fn, name=name)]
    if cls is nn.LayerNorm:
        n, affine = math.prod(m.normalized_shape), m.elementwise_affine
        if not affine and m.eps == 0 and n == math.prod(shape):
            return [Layer("layernorm", None, fn, name=name)]
        return [Layer("layernorm", norm_args(n, m.eps, affine), fn,
                      [(m.weight, "C"), (m.bias, "C")] if affine else [], name=name)]
    if cls in (nn.BatchNorm1d, nn.BatchNorm2d):
        if m.running_mean is None:
            raise Refused("BatchNorm without running statistics (track_running_stats=False) has no eval form")
        theta = ([(m.weight, "C"), (m.bias, "C")] if m.affine else []) + [(m.running_mean, "C"),
                                                                           (m.running_var, "C")]
        return [Layer("batchnorm", norm_args(m.num_features, m.eps, m.affine), fn, theta, name=name)]
    if cls is nn.GroupNorm:
        return [Layer("groupnorm", norm_args(f"{m.num_groups}x{m.num_channels}", m.eps, m.affine), fn,
                      [(m.weight, "C"), (m.bias, "C")] if m.affine else [], name=name)]
    if cls in (nn.Dropout, nn.Dropout1d, nn.Dropout2d):
        return [Layer("dropout", num(m.p), fn, name=name)]
    if cls is nn.Flatten:
        if m.start_dim == 0 or m.start_dim == -len(shape) - 1:
            raise Refused("Flatten(start_dim=0) merges the batch axis")
        return [Layer("flatten", None, fn, name=name)]
    if cls is nn.Unflatten:
        return []
    if cls in (nn.Conv1d, nn.Conv2d):
        return [conv_layer(m, shape, name)]
    if cls in (nn.AvgPool1d, nn.AvgPool2d, nn.MaxPool1d, nn.MaxPool2d):
        return [pool_layer(m, shape, name)]
    if cls is nn.TransformerEncoderLayer:
        return encoder_layers(m, shape, name)
    if cls is nn.TransformerEncoder:  # its layers, then its final norm
        layers = [sub for i, layer in enumerate(m.layers) for sub in encoder_layers(layer, shape, f"{name}.layers.{i}")]
        return layers + (module_layers(m.norm, shape, name + ".norm", mapping) if m.norm is not None else [])
    raise Refused(f"{cls.__name__} has no vijp layer type here (--map FILE.json maps your own types)")


# --------------------------------------------------------------- functions --

def fn_activation(node, rest, kwargs):
    """(type, args) of a functional activation call, or None."""
    t = node.target
    arg = (lambda i, key, default: rest[i - 1] if len(rest) >= i else kwargs.get(key, default))
    table = {F.relu: "relu", torch.relu: "relu", "relu": "relu", torch.tanh: "tanh", "tanh": "tanh",
             F.tanh: "tanh", torch.sigmoid: "sigmoid", "sigmoid": "sigmoid", F.sigmoid: "sigmoid",
             F.silu: "silu", F.mish: "mish", F.selu: "selu", torch.selu: "selu", F.softsign: "softsign",
             F.relu6: "relu6", F.hardswish: "hardswish"}
    if t in table:
        return table[t], None
    if t is F.gelu:
        return ("gelu", None) if arg(1, "approximate", "none") == "none" else ("gelu", "tanh")
    if t is F.leaky_relu:
        return "leaky", num(arg(1, "negative_slope", 0.01))
    if t is F.elu:
        a = arg(1, "alpha", 1.0)
        return "elu", (None if a == 1 else num(a))
    if t is F.softplus:
        return "softplus", f"{num(arg(1, 'beta', 1))}/{num(arg(2, 'threshold', 20))}"
    if t is F.hardtanh:
        lo, hi = arg(1, "min_val", -1.0), arg(2, "max_val", 1.0)
        return "hardtanh", (None if (lo, hi) == (-1, 1) else f"{num(lo)}/{num(hi)}")
    return None


def permutation(node, ndim):
    """The axis permutation of a transpose/permute node (axes per sample + 1)."""
    rest = list(node.args[1:])
    if node.target in ("transpose", torch.transpose):
        a, b = (d % ndim for d in rest[:2])
        p = list(range(ndim))
        p[a], p[b] = p[b], p[a]
        return p
    dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
    return [d % ndim for d in dims]


def transpose_args(p, shape):
    """`transpose:AxB` for a permutation that swaps two trailing runs of axes."""
    k = 0
    while k < len(p) and p[k] == k:
        k += 1
    if k == len(p):
        return None  # the identity
    if k == 0:
        raise Refused("the permutation moves the batch axis")
    tail = p[k:]
    m = tail[0]
    want = list(range(m, len(p))) + list(range(k, m))
    if tail != want:
        raise Refused(f"the permutation {p} is not a swap of two trailing runs of axes")
    return f"{math.prod(shape[k:m])}x{math.prod(shape[m:])}"

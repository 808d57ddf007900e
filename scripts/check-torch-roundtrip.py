#!/usr/bin/env python3
"""The PyTorch round trip (make check): every module scripts/export_torch.py
maps, and graphs of them (residuals, projections on the skip, nested blocks,
a ResNet BasicBlock with BatchNorm and a downsampling skip, an
nn.TransformerEncoderLayer in both norm orders, a RevViT-style additive
block, a --map'ed plugin type), is exported from an example input in float64,
run by `vijp grad --format double --engine backprop --save`, and vijp's
forward output, ∇ₓℓ and every layer's ∇θ are compared with torch.autograd in
float64 on the same inputs, targets and loss ½‖h − t‖² (summed over the
batch).  Then every unsupported construct is refused, naming the node, with
nothing written.

The bound, per tensor, derived as for this script's first model (an 11-layer
chain, kept below as "roundtrip"): both sides compute the same real function
in double.  Each rounding stage (a dot product of <= n terms, n the widest
per-sample width of the net, an activation within 8 ulps; attention counts 5
stages: projections, scores, softmax, weighted sum, output projection; the
norms 3: mean, variance, scaling; a residual block's add 1) commits a
relative error of at most (n + 8)·u in its output or cotangent (Higham, ASNA
§3.1: γ_n), and to first order an error made at one stage reaches any later
quantity amplified by at most K = Π max(1, ‖J‖₂) over the net's layers,
nested ones included (a nested layer's error passes its block's later layers,
then the blocks after it), measured by torch at these points, the largest
over the samples.  So each side is within S·(n + 8)·u·K·max|value| of the
exact value, S the number of stages, and the two within twice that; a ∇θ also
sums over the B samples of the batch, so its dot products have up to B·n
terms and its bound uses B·n for n.  u = 2^-53.  A layout, order or sign slip
gives errors of the size of the values themselves.  A case whose layer type
this vijp does not register is reported as skipped, naming the type; the run
fails on any disagreement.  Skipped, with the reason, where torch does not
import.
-v prints each case's worst ratio to its bound."""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"check-torch-roundtrip: SKIPPED: this python3 cannot import torch ({e}); "
          "scripts/install-deps.sh installs python3-torch")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch as ex  # noqa: E402

U = 2.0 ** -53
STAGES = {"attention": 5, "layernorm": 3, "groupnorm": 3, "batchnorm": 2, "logsoftmax": 2, "softmax": 2}
torch.set_default_dtype(torch.float64)
import json  # noqa: E402

try:
    import jsonschema
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                           "net.schema.json")) as f:
        SCHEMA = json.load(f)
except ImportError:
    SCHEMA = None


def bn_reference(self, x):
    """Eval BatchNorm by its defining formula, so that torch gives ∇ of the
    running statistics too (native_batch_norm refuses them)."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    y = (x - self.running_mean.reshape(shape)) / torch.sqrt(self.running_var.reshape(shape) + self.eps)
    return y * self.weight.reshape(shape) + self.bias.reshape(shape) if self.affine else y


nn.modules.batchnorm._BatchNorm.forward = bn_reference


# ------------------------------------------------------------------ models --

class Additive(nn.Module):
    """The exporter's coupling convention on the flattened halves."""
    vijp_coupling = "additive"

    def __init__(self, f, g, half_shape):
        super().__init__()
        self.F, self.G, self.half_shape = f, g, half_shape

    def forward(self, x):
        rows = x.flatten(1)
        h = rows.shape[1] // 2
        x1, x2 = rows[:, :h], rows[:, h:]
        y1 = x1 + self.F(x2.reshape((-1,) + self.half_shape)).flatten(1)
        y2 = x2 + self.G(y1.reshape((-1,) + self.half_shape)).flatten(1)
        return torch.cat([y1, y2], 1).reshape(x.shape)


class SelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Residual(nn.Module):
    def __init__(self, f, skip=None):
        super().__init__()
        self.f, self.skip = f, skip

    def forward(self, x):
        return self.f(x) + (self.skip(x) if self.skip is not None else x)


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock with a downsampling skip."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return F.relu(out)


class Functional(nn.Module):
    def forward(self, x):
        y = torch.tanh(F.gelu(x, approximate="tanh"))
        y = F.softplus(F.leaky_relu(y, 0.2), beta=2, threshold=10)
        return torch.flatten(F.relu(y.transpose(1, 2)).reshape(x.shape[0], 4, 3), 1)


class FunctionalLinear(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(n, n) / n), nn.Parameter(torch.randn(n))

    def forward(self, x):
        return F.relu(F.linear(x, self.w, self.b))


class ScaledTanh(nn.Module):
    """Mapped by --map to examples/layer-template/scaledtanh.c: tanh(a·x)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.tensor([0.8]))

    def forward(self, x):
        return torch.tanh(self.a * x)


def bn(c, cls=nn.BatchNorm1d, affine=True):
    m = cls(c, eps=1e-3, affine=affine)
    m.running_mean.uniform_(-0.5, 0.5)
    m.running_var.uniform_(0.5, 2)
    return m


def mixing(shape):
    """A parametric first layer of a type vijp has had for long (dense on
    N x F, a 1x1 conv1d on N x C x L), so that each case tests one new type."""
    return nn.Linear(shape[0], shape[0]) if len(shape) == 1 else nn.Conv1d(shape[0], shape[0], 1)


def cases():
    """(name, model, example input shape)."""
    act = [("relu", nn.ReLU()), ("leaky", nn.LeakyReLU(0.1)), ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()),
           ("gelu", nn.GELU()), ("gelu-tanh", nn.GELU("tanh")), ("silu", nn.SiLU()), ("mish", nn.Mish()),
           ("softplus", nn.Softplus(2, 3)), ("elu", nn.ELU(0.7)), ("selu", nn.SELU()), ("softsign", nn.Softsign()),
           ("prelu", nn.PReLU(3, 0.3)), ("hardtanh", nn.Hardtanh(-0.5, 0.75)), ("relu6", nn.ReLU6()),
           ("hardswish", nn.Hardswish()), ("logsoftmax", nn.LogSoftmax(-1)), ("softmax", nn.Softmax(-1))]
    out = []
    for name, m in act:  # scaled so that hardtanh, relu6, hardswish, softplus's threshold see both sides
        shape = (3, 4) if name in ("prelu", "logsoftmax") else (12,)
        out.append((name, nn.Sequential(mixing(shape), m), (2,) + shape))
    out += [
        ("dense", nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4)), (2, 6)),
        ("linear-seq", nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 4)), (2, 3, 4)),
        ("layernorm", nn.Sequential(mixing((3, 4)), nn.LayerNorm(4, eps=1e-3)), (2, 3, 4)),
        ("layernorm-two-axes", nn.Sequential(mixing((3, 4)), nn.LayerNorm([3, 4])), (2, 3, 4)),
        ("layernorm-noaffine", nn.Sequential(mixing((3, 4)), nn.LayerNorm(4, elementwise_affine=False)), (2, 3, 4)),
        ("batchnorm1d", nn.Sequential(nn.Linear(5, 5), bn(5)), (2, 5)),
        ("batchnorm2d", nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), bn(2, nn.BatchNorm2d)), (2, 2, 3, 3)),
        ("groupnorm", nn.Sequential(nn.Conv1d(4, 4, 3, padding=1), nn.GroupNorm(2, 4, eps=1e-3)), (2, 4, 3)),
        ("dropout-identity", nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.3), nn.Identity(), nn.Tanh()), (2, 4)),
        ("flatten", nn.Sequential(nn.Conv1d(2, 2, 3, padding=1), nn.Flatten(), nn.Linear(8, 3)), (2, 2, 4)),
        ("conv1d-circular", nn.Sequential(nn.Conv1d(2, 2, 3, padding=1, padding_mode="circular")), (2, 2, 5)),
        ("conv1d-channels", nn.Sequential(nn.Conv1d(2, 3, 3, padding=1)), (2, 2, 5)),
        ("conv1d-valid-even", nn.Sequential(nn.Conv1d(2, 3, 4, padding=0)), (2, 2, 7)),
        ("conv1d-reflect-stride", nn.Sequential(nn.Conv1d(2, 2, 3, stride=2, padding=1, padding_mode="reflect")),
         (2, 2, 6)),
        ("conv2d-channels-stride", nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1)), (2, 2, 4, 4)),
        ("conv2d-even", nn.Sequential(nn.Conv2d(2, 2, 2, padding=1)), (2, 2, 3, 3)),
        ("avgpool1d", nn.Sequential(nn.Linear(6, 6), nn.Unflatten(1, (2, 3)), nn.AvgPool1d(3)),
         (2, 6)),
        ("avgpool2d", nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.AvgPool2d(2)), (2, 2, 4, 4)),
        ("maxpool1d", nn.Sequential(nn.Conv1d(2, 2, 3, padding=1), nn.MaxPool1d(2)), (2, 2, 6)),
        ("maxpool2d", nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.MaxPool2d(2, 1)), (2, 2, 3, 3)),
        ("attention", nn.Sequential(nn.Linear(4, 4), SelfAttention(4, 2)), (2, 3, 4)),
        ("functional-linear", nn.Sequential(FunctionalLinear(5), nn.Tanh()), (2, 5)),
        ("transpose", nn.Sequential(mixing((3, 4)), Functional()), (2, 3, 4)),
        ("residual", nn.Sequential(nn.Linear(5, 5), Residual(nn.Sequential(nn.Linear(5, 5), nn.Tanh()))), (2, 5)),
        ("projection", nn.Sequential(Residual(nn.Sequential(nn.Linear(4, 6), nn.Tanh()), nn.Linear(4, 6)),
                                     nn.Linear(6, 3)), (2, 4)),
        ("nested", nn.Sequential(Residual(nn.Sequential(nn.Linear(4, 4), Residual(nn.Sequential(
            nn.Tanh(), nn.Linear(4, 4))), nn.SiLU())), nn.Linear(4, 4)), (2, 4)),
        # 3 -> 6 channels: the 1x1 stride-2 skip widening the channels loses rank at every weight (vijp keeps it,
        # declared never submersive; the block's J_f + J_P is what a vijp needs)
        ("basicblock", nn.Sequential(BasicBlock(3, 6, 2), nn.Flatten(), nn.Linear(24, 3)), (2, 3, 4, 4)),
        ("encoder", nn.TransformerEncoderLayer(4, 2, 6, batch_first=True), (2, 3, 4)),
        ("encoder-normfirst", nn.TransformerEncoderLayer(4, 2, 6, activation="gelu", batch_first=True,
                                                         norm_first=True), (2, 3, 4)),
        ("encoder-stack", nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6, batch_first=True), 2,
                                                nn.LayerNorm(4)), (2, 3, 4)),
        ("revvit", Additive(nn.Sequential(nn.LayerNorm(4), SelfAttention(4, 2)),
                            nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 4)), (3, 4)),
         (2, 2, 3, 4)),
        ("roundtrip", nn.Sequential(  # this script's first model, 11 layers
            nn.Linear(8, 8), nn.LeakyReLU(0.1), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(),
            nn.Unflatten(1, (2, 4)), nn.Conv1d(2, 2, 3, padding=1, padding_mode="circular"), nn.Flatten(), nn.SiLU(),
            Additive(nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Sequential(nn.Linear(4, 4), nn.Tanh()), (4,)),
            nn.Linear(8, 8), nn.Softplus()), (3, 8)),
        ("additive-attention", Additive(nn.Sequential(nn.LayerNorm(4), SelfAttention(4, 2)),
                                        nn.Sequential(nn.LayerNorm(4), SelfAttention(4, 2)), (3, 4)), (2, 2, 3, 4)),
        ("additive-dense", Additive(nn.Sequential(nn.Linear(3, 3), nn.Tanh()),
                                    nn.Sequential(nn.Linear(3, 3), nn.Tanh()), (3,)), (2, 6)),
    ]
    return out


# ------------------------------------------------------------------- torch --

def gain_and_stages(layers, h):
    """(Π max(1, ‖J‖₂) over the layers and their nested layers, the stages,
    the output rows) from rows h, the largest product over the samples."""
    k_all, stages, out = 1.0, 0, []
    for b in range(h.shape[0]):
        k, s, z = walk(layers, h[b:b + 1])
        k_all, stages = max(k_all, k), s
        out.append(z)
    return k_all, stages, torch.cat(out)


def walk(layers, z):
    k, s = 1.0, 0
    for layer in layers:
        for subs in ([layer.layers, layer.skip or []] if layer.kind == "residual" else
                     [layer.F, layer.G] if layer.kind == "additive" else []):
            k_sub, s_sub, _ = walk(subs, z if layer.kind == "residual" else z[:, :z.shape[1] // 2])
            k, s = k * k_sub, s + s_sub
        J = torch.autograd.functional.jacobian(layer.fn, z).reshape(-1, z.shape[1])
        k *= max(1.0, torch.linalg.matrix_norm(J, ord=2).item())
        s += STAGES.get(layer.kind, 1)
        z = layer.fn(z).detach()
    return k, s, z


def theta_grad(layer):
    """∇θ of a layer (a block: its layers' in order) from torch, in vijp's θ
    order, and which entries to compare: a zero bias the exporter gives a
    module without one has no torch gradient (NaN here, not compared)."""
    parts = []
    for leaf in layer.leaves():
        for t, order in leaf.theta:
            g = torch.full_like(t, float("nan")) if order == "Z" else t.grad
            parts.append((g.t() if order == "T" else g).reshape(-1))
    return torch.cat(parts) if parts else None


def run_case(name, model, shape, vijp, tmp, plugin=None, mapping=None):
    torch.manual_seed(sum(map(ord, name)))
    model = model.double().eval()
    for p in model.parameters():  # non-trivial weights everywhere, biases included
        if p.dim() == 1 and p.requires_grad:
            p.data.uniform_(-0.5, 0.5)
    x = torch.randn(shape)
    out = os.path.join(tmp, name)
    res = ex.export(model, out, x, mapping=mapping)
    if SCHEMA:  # the exporter writes what docs/net.schema.json describes
        try:
            jsonschema.validate(res.net, SCHEMA)
        except jsonschema.ValidationError as e:
            return "fail", f"model.json does not follow docs/net.schema.json: {e.message}"
    rows = x.reshape(x.shape[0], -1)
    y = model(x).reshape(x.shape[0], -1).detach()
    t = torch.randn(y.shape)
    ex.npy_write(os.path.join(tmp, name + "-X.npy"), rows)
    ex.npy_write(os.path.join(tmp, name + "-T.npy"), t)
    cmd = [vijp, "grad", "--net", os.path.join(out, "model.json"), "--input", os.path.join(tmp, name + "-X.npy"),
           "--target", os.path.join(tmp, name + "-T.npy"), "--format", "double", "--engine", "backprop",
           "--save", os.path.join(out, "grads"), "-q"] + (["--plugin", plugin] if plugin else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 2 and "unknown layer type" in r.stderr:
        return "skip", r.stderr.strip().split(": ")[-1]
    if r.returncode != 0:
        return "fail", f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    for layer in [leaf for top in res.layers for leaf in top.leaves()]:
        for tt, _ in layer.theta:
            if tt.is_floating_point() and not tt.requires_grad:
                tt.requires_grad_(True)  # BatchNorm's running statistics
    model.zero_grad()
    xg = x.clone().requires_grad_(True)
    yg = model(xg).reshape(x.shape[0], -1)
    (0.5 * ((yg - t) ** 2).sum()).backward()
    theta_want = [theta_grad(layer) for layer in res.layers]  # before the cotangent pass adds to .grad
    K, stages, y_chain = gain_and_stages(res.layers, rows)
    n = max(widths(res.layers, rows[:1]))  # no dot product is longer than its layer's input
    bound = 2 * stages * (n + 8) * U * K
    bound_theta = 2 * stages * (x.shape[0] * n + 8) * U * K  # ∇θ sums over the batch too
    D = len(res.layers)
    gdir = os.path.join(out, "grads")
    checks = [("forward (the exporter's own layers)", y, y_chain),
              ("forward", y, ex.npy_read(os.path.join(gdir, f"cotangent_{D}.npy")) + t),
              ("grad_x", xg.grad.reshape(x.shape[0], -1), ex.npy_read(os.path.join(gdir, "grad_x.npy")))]
    zs, z = [], rows.clone()
    for layer in res.layers:  # the cotangent of each layer's output, by torch through the exported layers
        z = layer.fn(z)
        z.retain_grad()
        zs.append(z)
    (0.5 * ((z - t) ** 2).sum()).backward()
    for i, zi in enumerate(zs, 1):
        checks.append((f"cotangent_{i}", zi.grad, ex.npy_read(os.path.join(gdir, f"cotangent_{i}.npy"))))
    for i, (layer, g) in enumerate(zip(res.layers, theta_want), 1):
        if g is not None:
            checks.append((f"grad_theta_{i} ({layer.kind})", g, ex.npy_read(os.path.join(gdir, f"grad_theta_{i}.npy"))))
    worst = 0.0
    for what, want, got in checks:
        if want.numel() != got.numel():
            return "fail", f"{what}: {got.numel()} values from vijp, {want.numel()} from torch"
        known = ~torch.isnan(want.reshape(-1))
        want, got = want.reshape(-1)[known], got.reshape(-1)[known]
        scale = want.abs().max().item() + (t.abs().max().item() if what == "forward" else 0.0)
        tol = (bound_theta if what.startswith("grad_theta") else bound) * scale + \
            (2 * U * scale if what == "forward" else 0.0)  # h = g + t: one more rounding
        err = (want - got).abs().max().item()
        worst = max(worst, err / tol if tol else (0.0 if err == 0 else float("inf")))
        if not err <= tol:
            return "fail", f"{what}: vijp and torch differ by {err:.3g} > {tol:.3g} (K = {K:.3g}, n = {n})"
    return "ok", worst


def widths(layers, z):
    """Every per-sample width along the net, nested layers included."""
    out = [z.shape[1]]
    for layer in layers:
        if layer.kind == "residual":
            out += widths(layer.layers, z) + widths(layer.skip or [], z)
        elif layer.kind == "additive":
            out += widths(layer.F, z[:, :z.shape[1] // 2])
        z = layer.fn(z).detach()
        out.append(z.shape[1])
    return out


# ------------------------------------------------------------ refusals --

class Doubling(nn.Module):
    def forward(self, x):
        return x * 2


class Slicing(nn.Module):
    def forward(self, x):
        return torch.cat([x[:, :2], x[:, 2:]], 1)


class Branching(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)
        self.register_buffer("mask", torch.zeros(3, 3))

    def forward(self, x):
        return self.attn(x, x, x, attn_mask=self.mask)[0]


def refusals():
    """(model, example shape, words the message must hold)."""
    return [
        (nn.Sequential(nn.Linear(4, 4), Doubling()), (2, 4), ["node 'mul'", "module path '1'", "mul"]),
        (nn.Sequential(nn.Linear(4, 4), Slicing()), (2, 4), ["getitem", "module path '1'"]),
        (nn.Sequential(nn.Linear(4, 4), Branching()), (2, 4), ["torch.fx cannot trace", "module path '1'"]),
        (TwoInputs(), (2, 4), ["node 'y'", "second input"]),
        (nn.Sequential(nn.Conv1d(2, 2, 3, groups=2, padding=1)), (2, 2, 4), ["module path '0'", "Conv1d", "groups"]),
        (nn.Sequential(nn.Linear(4, 4), nn.AdaptiveAvgPool1d(2)), (2, 2, 4), ["AdaptiveAvgPool1d", "module path '1'"]),
        (nn.Sequential(nn.Linear(4, 4), nn.Softmax(dim=1)), (2, 3, 4), ["Softmax", "last axis"]),
        (nn.Sequential(Masked()), (2, 3, 4), ["module path '0.attn'", "attn_mask"]),
        (nn.Sequential(nn.Linear(4, 4), nn.Softmax(-1)), (2, 3, 4), ["whole sample"]),
        (nn.TransformerEncoderLayer(4, 2, 6), (3, 2, 4), ["batch_first"]),
    ]


def check_refusals(tmp):
    for i, (model, shape, words) in enumerate(refusals()):
        out = os.path.join(tmp, f"refused-{i}")
        try:
            ex.export(model.double().eval(), out, torch.randn(shape))
            return f"{type(model).__name__} {i} was exported, not refused"
        except ex.Refused as e:
            msg = str(e)
        if any(w not in msg for w in words) or os.path.exists(out):
            return f"refusal {i}: {msg!r} lacks one of {words}, or {out} was written"
    # the command line: exit 2, the message, nothing written
    torch.save(nn.Sequential(nn.Linear(4, 4), Doubling()), os.path.join(tmp, "bad.pt"))
    ex.npy_write(os.path.join(tmp, "bad-X.npy"), torch.randn(2, 4))
    out = os.path.join(tmp, "bad-out")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = ex.main(["export_torch.py", os.path.join(tmp, "bad.pt"), out, "--example-input",
                      os.path.join(tmp, "bad-X.npy")])
    if rc != 2 or os.path.exists(out) or "node 'mul'" not in err.getvalue():
        return f"the command line said {err.getvalue()!r} with exit {rc} (want 2, naming node 'mul'), or wrote {out}"
    # and a good one, with --map in a file
    torch.save(nn.Sequential(nn.Linear(4, 4), ScaledTanh()), os.path.join(tmp, "good.pt"))
    with open(os.path.join(tmp, "map.json"), "w") as f:
        json.dump({ex.qualname(ScaledTanh): {"type": "scaledtanh", "theta": ["a"]}}, f)
    out = os.path.join(tmp, "good-out")
    with contextlib.redirect_stdout(io.StringIO()):
        rc = ex.main(["export_torch.py", os.path.join(tmp, "good.pt"), out, "--example-input",
                      os.path.join(tmp, "bad-X.npy"), "--map", os.path.join(tmp, "map.json")])
    with open(os.path.join(out, "model.json")) as f:
        types = [layer["type"] for layer in json.load(f)["layers"]]
    if rc != 0 or types != ["dense", "scaledtanh"]:
        return f"the command line with --map gave exit {rc} and layers {types}"
    return None


def main():
    start = time.time()
    vijp = os.environ.get("VIJP_BIN", "build/vijp")
    plugin = os.path.join(os.path.dirname(vijp), "plugins", "scaledtanh.so")
    ok, skipped, failed, worst = 0, [], [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(7)  # the models' initial weights
        todo = [(name, m, s, None, None) for name, m, s in cases()]
        if os.path.exists(plugin):
            todo.append(("map-plugin", nn.Sequential(nn.Linear(4, 4), ScaledTanh()), (2, 4), plugin,
                         {ex.qualname(ScaledTanh): {"type": "scaledtanh", "theta": ["a"]}}))
        else:
            skipped.append(("map-plugin", f"{plugin} not built"))
        for name, model, shape, plug, mapping in todo:
            try:
                verdict, detail = run_case(name, model, shape, vijp, tmp, plug, mapping)
            except ex.Refused as e:
                verdict, detail = "fail", f"refused: {e}"
            if verdict == "ok":
                ok, worst = ok + 1, max(worst, detail)
                if "-v" in sys.argv[1:]:
                    print(f"check-torch-roundtrip: {name}: worst {detail:.3g} of the bound")
            elif verdict == "skip":
                skipped.append((name, detail))
            else:
                failed.append((name, detail))
        problem = check_refusals(tmp)
    for name, why in skipped:
        print(f"check-torch-roundtrip: skipped {name}: {why}")
    for name, why in failed:
        print(f"check-torch-roundtrip: FAILED {name}: {why}")
    if problem:
        print(f"check-torch-roundtrip: FAILED refusals: {problem}")
    if SCHEMA is None:
        print("check-torch-roundtrip: note: jsonschema not importable, model.json not validated against "
              "docs/net.schema.json")
    print(f"check-torch-roundtrip: {ok} models agree with torch.float64 (worst {worst:.3g} of the bound), "
          f"{len(skipped)} skipped, {len(refusals()) + 1} refusals named, the command line, "
          f"{time.time() - start:.1f} s")
    return 1 if failed or problem else 0


if __name__ == "__main__":
    sys.exit(main())

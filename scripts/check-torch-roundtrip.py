#!/usr/bin/env python3
"""The PyTorch round trip (make check): a small nn.Sequential in float64 is
exported (scripts/export_torch.py), run by `vijp grad --net model.json
--input X.npy --target T.npy --save DIR`, and vijp's ∇ₓℓ, every layer's
output cotangent g_i and every parametric layer's ∇θ_i are compared with
torch.autograd's on the same inputs, targets and loss ½‖h_D − t‖² (summed
over the batch).

The bound, per tensor: both sides compute the same real-number function in
double.  Each layer's operator (a dot product of <= n terms, an activation
within a few ulps, the coupling block's two sub-layers) commits a relative
error of at most (n + 8)·u in its output or cotangent (Higham, ASNA §3.1:
γ_n for the dot products; the activations' own bounds are <= 8u here); to
first order, an error made at layer j reaches any later quantity amplified
by at most K = Π_j max(1, ‖J_j‖₂), measured by torch at these points.  So
each side is within D·(n + 8)·u·K·max|value| of the exact gradient, and the
two within twice that.  u = 2^-53.  A layout or sign slip gives errors of
the size of the values themselves, far above this.  Skipped, with the reason, where
torch does not import."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
except ImportError as e:
    print(f"check-torch-roundtrip: SKIPPED: python3 cannot import torch ({e}); "
          "scripts/install-deps.sh installs python3-torch")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

U = 2.0 ** -53
torch.manual_seed(7)
torch.set_default_dtype(torch.float64)


class Additive(nn.Module):
    """The exporter's coupling convention: y1 = x1 + F(x2), y2 = x2 + G(y1)."""
    vijp_coupling = "additive"

    def __init__(self, h):
        super().__init__()
        self.F = nn.Sequential(nn.Linear(h, h), nn.Tanh())
        self.G = nn.Sequential(nn.Linear(h, h), nn.Tanh())

    def forward(self, x):
        h = x.shape[1] // 2
        x1, x2 = x[:, :h], x[:, h:]
        y1 = x1 + self.F(x2)
        return torch.cat([y1, x2 + self.G(y1)], dim=1)


def model():
    n = 8
    return nn.Sequential(nn.Linear(n, n), nn.LeakyReLU(0.1), nn.Linear(n, n), nn.Tanh(), nn.Linear(n, n), nn.GELU(),
                         nn.Conv1d(2, 2, 3, padding=1, padding_mode="circular"), nn.SiLU(), Additive(n // 2),
                         nn.Linear(n, n), nn.Softplus())


def npy_write(path, a):
    """A '<f8' C-order .npy, version 1.0, written here (no numpy needed)."""
    a = a.detach().to(torch.float64).contiguous()
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(s) for s in a.shape) + ("," if a.dim() == 1 else ""))
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    import struct
    vals = a.reshape(-1).tolist()
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(vals), *vals))


def npy_read(path):
    import ast
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    major = raw[6]
    hlen = struct.unpack("<H", raw[8:10])[0] if major == 1 else struct.unpack("<I", raw[8:12])[0]
    start = 10 if major == 1 else 12
    hdr = ast.literal_eval(raw[start:start + hlen].decode())
    shape = hdr["shape"]
    count = 1
    for s in shape:
        count *= s
    vals = struct.unpack("<%dd" % count, raw[start + hlen:start + hlen + 8 * count])
    return torch.tensor(vals).reshape(shape)


def run_conv(m, h):  # torch's Conv1d wants [B, C, L]; vijp's flat layout is channel-major
    return m(h.reshape(h.shape[0], m.in_channels, -1)).reshape(h.shape[0], -1)


def forward(net, x, keep):
    h = x
    for m in net:
        h = run_conv(m, h) if isinstance(m, nn.Conv1d) else m(h)
        if keep is not None:
            h.retain_grad()
            keep.append(h)
    return h


def chain_gain(net, x):
    """K = Π_j max(1, ‖J_j‖₂) over the layers, the largest over the samples:
    how much a perturbation of any layer's output or cotangent can grow
    through the rest of the chain, to first order."""
    K = 1.0
    for b in range(x.shape[0]):
        h, k = x[b:b + 1], 1.0
        for m in net:
            f = (lambda z, m=m: run_conv(m, z) if isinstance(m, nn.Conv1d) else m(z))
            J = torch.autograd.functional.jacobian(f, h).reshape(h.shape[1], -1)
            k *= max(1.0, torch.linalg.matrix_norm(J, ord=2).item())
            h = f(h).detach()
        K = max(K, k)
    return K


def main():
    vijp = os.environ.get("VIJP_BIN", "build/vijp")
    net = model()
    B, n = 3, 8
    x = torch.randn(B, n)
    t = torch.randn(B, n)
    with tempfile.TemporaryDirectory() as d:
        exported = export_torch.export(net, os.path.join(d, "m"))
        try:  # the exporter writes what docs/net.schema.json describes
            import jsonschema
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            with open(os.path.join(root, "docs", "net.schema.json")) as f:
                jsonschema.validate(exported, json.load(f))
        except ImportError:
            print("check-torch-roundtrip: note: jsonschema not importable, model.json not validated against "
                  "docs/net.schema.json")
        npy_write(os.path.join(d, "X.npy"), x)
        npy_write(os.path.join(d, "T.npy"), t)
        cmd = [vijp, "grad", "--net", os.path.join(d, "m", "model.json"), "--input", os.path.join(d, "X.npy"),
               "--target", os.path.join(d, "T.npy"), "--engine", "backprop", "--save", os.path.join(d, "out"), "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("check-torch-roundtrip: FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
            return 1
        xg = x.clone().requires_grad_(True)
        outs = []
        y = forward(net, xg, outs)
        loss = 0.5 * ((y - t) ** 2).sum()
        loss.backward()
        D = len(net)
        K = chain_gain(net, x)
        worst = 0.0
        checks = [("grad_x", xg.grad, npy_read(os.path.join(d, "out", "grad_x.npy")))]
        for i, h in enumerate(outs, 1):
            checks.append((f"cotangent_{i}", h.grad, npy_read(os.path.join(d, "out", f"cotangent_{i}.npy"))))
        for i, m in enumerate(net, 1):
            path = os.path.join(d, "out", f"grad_theta_{i}.npy")
            if isinstance(m, (nn.Linear, nn.Conv1d)):
                checks.append((f"grad_theta_{i}", export_torch.vijp_theta_grad(m), npy_read(path)))
            elif isinstance(m, Additive):  # θ_F's layers, then θ_G's, each in vijp's order
                subs = [s for seq in (m.F, m.G) for s in seq if isinstance(s, nn.Linear)]
                checks.append((f"grad_theta_{i}", torch.cat([export_torch.vijp_theta_grad(s) for s in subs]),
                               npy_read(path)))
        for name, want, got in checks:
            tol = 2 * D * (n + 8) * U * K * want.abs().max().item()
            err = (want.reshape(-1) - got.reshape(-1)).abs().max().item()
            worst = max(worst, err / tol)
            if not err <= tol:
                print(f"check-torch-roundtrip: FAILED: {name}: vijp and torch differ by {err:.3g} > {tol:.3g}")
                return 1
        print(f"check-torch-roundtrip: {len(checks)} gradients of a {D}-layer model agree with torch.float64 "
              f"(worst {worst:.3g} of the bound; chain gain K = {K:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

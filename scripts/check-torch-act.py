#!/usr/bin/env python3
"""bfloat16+binary32 activations and stacks against PyTorch's CPU bf16 (make check).

vijp's rule for an elementwise layer in a mixed format: f, f' and g·f' are
computed in the accumulation format (binary32) and rounded once to storage
(bfloat16).  So its forward is bf16(f32(f(x))) and its vjp
bf16(f32(g · f32(f'(x)))).  f32(f) and f32(f') are sequences of binary32
operations, not always the correctly rounded binary32 value (GELU's f' is
off by hundreds of binary32 ulps next to its zero); the check below holds
because, at these points, the rounding to bfloat16 erases the difference.
scripts/check-torch-stack.py names every point where it does not.

Three checks, on 2048 bf16 points x in [-8, 8] with bf16 cotangents g:

1. vijp against an independent oracle: f and f' in mpmath at 200 bits
   (their rounding to 24 bits is then decided unless the exact value lies
   within 2^-170 relatively of a rounding boundary), rounded as above with
   mpmath's round-half-even at 24 and 8 bits.  Every bfloat16 value must be
   equal (at these 2048 points they are).
2. vijp against torch, value for value.  Where they differ, torch must be
   the one that is not correctly rounded: its value at least as far from
   the exact one as vijp's.  Torch 1.13's CPU kernels are also reproduced
   (their formulas read from ATen): tanh and sigmoid backward use the
   rounded bf16 output y, g·(1 − y²) and g·y·(1 − y) in binary32, which
   binary32 arithmetic here reproduces, so under torch 1.13 every such
   value must equal that formula's.  (SiLU rounds every operation to bf16,
   which explains its differences; its exp is not reproduced bit for bit
   here, so the accuracy rule judges it.)
3. Stacks dense:W + an exact activation (leaky ReLU, ReLU) through
   `vijp grad --engine backprop --format bfloat16+binary32 --save`: the
   input gradient, each layer's cotangent and each ∇θ against torch's bf16
   autograd.  Both sides sum exact bf16 products in binary32 and round once
   to bf16, in different orders; the rounding of each sum then differs by
   at most one bf16 ulp when the two binary32 sums straddle a bf16 rounding
   boundary.  vijp's bf16 inputs to each layer equal torch's only while no
   such straddle happened upstream, so the check is: the first layer where
   anything differs differs by at most one bf16 ulp in each value
   (2^-8 relative of the larger, |a − b| <= 2^-7·max(|a|, |b|) with
   subnormals aside), and the table reports how many values agree bit for
   bit.

Skipped, with the reason, where torch or mpmath does not import."""
import os
import subprocess
import sys
import tempfile

try:
    import mpmath
    import numpy as np
    import torch
except ImportError as e:
    print(f"check-torch-act: SKIPPED: python3 cannot import torch/numpy/mpmath ({e}); "
          "scripts/install-deps.sh installs python3-torch and python3-mpmath")
    sys.exit(0)

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
N_POINTS = 2048
mp = mpmath.mp
mp.prec = 200


def fail(msg):
    sys.exit(f"check-torch-act: FAILED: {msg}")


def round_bits(v, bits):
    """v rounded to nearest even at `bits` significant bits (unbounded exponent:
    every value here is a normal binary32 or zero)."""
    with mpmath.workprec(bits):
        return +v


def mixed(v):
    """bf16(f32(v)): the accumulation format's rounding, then the storage's."""
    return round_bits(round_bits(v, 24), 8)


# Exact f and f' in mpmath (x an mpf at 200 bits).
def phi_cdf(x):
    return mpmath.erfc(-x / mpmath.sqrt(2)) / 2


def sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


EXACT = {
    "tanh": (mpmath.tanh, lambda x: 1 - mpmath.tanh(x) ** 2),
    "sigmoid": (sigmoid, lambda x: sigmoid(x) * (1 - sigmoid(x))),
    "silu": (lambda x: x * sigmoid(x), lambda x: sigmoid(x) * (1 + x * (1 - sigmoid(x)))),
    "gelu": (lambda x: x * phi_cdf(x), lambda x: phi_cdf(x) + x * mpmath.npdf(x)),
    "softplus": (lambda x: mpmath.log1p(mpmath.exp(x)), sigmoid),
}
TORCH = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "softplus": torch.nn.functional.softplus,
}


def bf16(a):
    return torch.tensor(np.asarray(a, dtype=np.float32)).to(torch.bfloat16).to(torch.float32).numpy()


def torch113_formula(name, x, g, y):
    """Torch 1.13's CPU bf16 kernels where they are not f and g·f' rounded
    once from binary32 and where binary32 IEEE operations alone reproduce
    them (x, g, y float32 arrays holding bf16 values; y torch's forward
    output): tanh's and sigmoid's backward from y.  None elsewhere: the
    accuracy rule decides (SiLU's every-operation-in-bf16 kernel calls a
    vectorised exp that numpy's does not reproduce bit for bit)."""
    one = np.float32(1)
    if name == "tanh":
        return None, bf16(g * (one - y * y))
    if name == "sigmoid":
        return None, bf16(g * ((one - y) * y))
    return None, None


def vijp_eval(name, d, X, G):
    np.save(f"{d}/x.npy", X.reshape(1, -1).astype("<f8"))
    np.save(f"{d}/g.npy", G.reshape(1, -1).astype("<f8"))
    out = f"{d}/{name}"
    cmd = [VIJP, "eval", "--layer", name, "--width", str(X.size), "--input", f"{d}/x.npy", "--cotangent",
           f"{d}/g.npy", "--format", "bfloat16+binary32", "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return np.load(f"{out}/forward.npy")[0], np.load(f"{out}/vjp.npy")[0]


def points():
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(N_POINTS, generator=g, dtype=torch.float64) * 16 - 8).to(torch.bfloat16)
    x[:4] = torch.tensor([0.0, 2.0 ** -20, -(2.0 ** -20), 8.0])  # zero, tiny of both signs, the edge
    gy = torch.randn(N_POINTS, generator=g, dtype=torch.float64).to(torch.bfloat16)
    return x, gy


def check_activation(name, d, x, gy, table):
    xd, gd = x.double().numpy(), gy.double().numpy()
    vf, vg = vijp_eval(name, d, xd, gd)
    f, df = EXACT[name]
    ef = [f(mpmath.mpf(v)) for v in xd]
    eg = [mpmath.mpf(gv) * round_bits(df(mpmath.mpf(v)), 24) for v, gv in zip(xd, gd)]
    for i in range(len(xd)):  # 1. vijp is the once-rounded exact value
        for what, got, exact in (("forward", vf[i], ef[i]), ("vjp", vg[i], eg[i])):
            want = float(mixed(exact))
            if got != want:
                fail(f"{name} {what} at x = {xd[i]!r}, g = {gd[i]!r}: vijp {got!r}, want bf16(f32(exact)) = {want!r}")
    xx = x.clone().requires_grad_(True)
    y = TORCH[name](xx)
    y.backward(gy)
    tf, tg = y.detach().double().numpy(), xx.grad.double().numpy()
    known_f, known_g = torch113_formula(name, xd.astype(np.float32), gd.astype(np.float32),
                                        y.detach().float().numpy())
    is_113 = torch.__version__.startswith("1.13")
    row = [name]
    for what, got, ref, exact, known in (("forward", tf, vf, ef, known_f), ("vjp", tg, vg, eg, known_g)):
        same = int(np.sum(got == ref))
        for i in np.nonzero(got != ref)[0]:  # 2. each difference is torch's
            if known is not None and is_113:
                if got[i] != known[i]:
                    fail(f"{name} {what} at x = {xd[i]!r}: torch {got[i]!r} is neither vijp's {ref[i]!r} nor "
                         f"torch 1.13's own formula's {known[i]!r}")
            elif abs(mpmath.mpf(got[i]) - exact[i]) < abs(mpmath.mpf(ref[i]) - exact[i]):
                fail(f"{name} {what} at x = {xd[i]!r}: torch {got[i]!r} is nearer the exact value than "
                     f"vijp's {ref[i]!r}: vijp is not correctly rounded there")
        row.append(f"{same}/{len(xd)}")
    row.append("g·(1 − y²) from bf16 y" if name == "tanh" else "g·y(1 − y) from bf16 y" if name == "sigmoid"
               else "every operation in bf16" if name == "silu" else "-")
    table.append(row)


def vijp_grad(d, spec, depth, width, X, theta, C):
    np.save(f"{d}/x.npy", X.astype("<f8"))
    np.save(f"{d}/c.npy", C.astype("<f8"))
    # Parameters through a safetensors file: <i>.weight, <i>.bias in torch's layout.
    import json
    import struct
    header, blobs, off = {}, [], 0
    for name, t in theta.items():
        a = np.ascontiguousarray(t, dtype="<f8")
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    with open(f"{d}/w.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    out = f"{d}/grad-{spec.replace(':', '_').replace(',', '_')}"
    cmd = [VIJP, "grad", "--net", spec, "--depth", str(depth), "--width", str(width), "--input", f"{d}/x.npy",
           "--target", f"{d}/c.npy", "--loss", "linear", "--weights", f"{d}/w.safetensors", "--engine",
           "backprop", "--format", "bfloat16+binary32", "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return out


def within_one_ulp(a, b):
    """|a − b| <= one bf16 ulp of the larger: 2^-7 relative bounds it (an ulp
    is 2^-7 of the binade's bottom)."""
    return np.abs(a - b) <= 2.0 ** -7 * np.maximum(np.abs(a), np.abs(b))


def check_stack(d, act, act_torch, width, depth, table):
    g = torch.Generator().manual_seed(17)
    layers, theta = [], {}
    for i in range(depth):
        if i % 2 == 0:
            lin = torch.nn.Linear(width, width).to(torch.bfloat16)
            with torch.no_grad():  # orthogonal-like scale keeps the stack's values O(1)
                lin.weight.copy_((torch.randn(width, width, generator=g) / width ** 0.5).to(torch.bfloat16))
                lin.bias.copy_((torch.randn(width, generator=g) * 0.1).to(torch.bfloat16))
            theta[f"{i}.weight"] = lin.weight.detach().double().numpy()
            theta[f"{i}.bias"] = lin.bias.detach().double().numpy()
            layers.append(lin)
        else:
            layers.append(act_torch)
    X = torch.randn(2, width, generator=g).to(torch.bfloat16)
    C = torch.randn(2, width, generator=g).to(torch.bfloat16)
    out = vijp_grad(d, f"dense:{width},{act}", depth, width, X.double().numpy(), theta, C.double().numpy())
    x0 = X.clone().requires_grad_(True)
    h, acts = x0, []
    for L in layers:
        h = L(h)
        h.retain_grad()
        acts.append(h)
    (h * C).sum().backward()
    # In the order backprop computes them, so that the first difference
    # found is where the two first parted: g_D, then ∇θ_D, g_{D-1}, …, ∇_x.
    pairs = []
    for i in reversed(range(depth)):
        pairs.append((f"cotangent_{i + 1}", np.load(f"{out}/cotangent_{i + 1}.npy"), acts[i].grad))
        if i % 2 == 0:
            lin = layers[i]  # vijp's dense θ: W column-major (out × in), then b
            t = np.concatenate([lin.weight.grad.double().numpy().T.reshape(-1), lin.bias.grad.double().numpy()])
            pairs.append((f"grad_theta_{i + 1}", np.load(f"{out}/grad_theta_{i + 1}.npy"), torch.tensor(t)))
    pairs.append(("grad_x", np.load(f"{out}/grad_x.npy"), x0.grad))
    same = total = 0
    first_bad = None
    for what, got, want in pairs:
        want = want.double().numpy().reshape(got.shape)
        same += int(np.sum(got == want))
        total += got.size
        if first_bad is None and np.any(got != want):
            first_bad = what
            if not np.all(within_one_ulp(got, want)):
                i = np.argmax(np.abs(got - want))
                fail(f"dense:{width},{act} depth {depth}: {what} differs from torch by more than one bf16 ulp "
                     f"where it first differs: vijp {got.flat[i]!r}, torch {want.flat[i]!r}")
    table.append([f"dense:{width},{act} (depth {depth})", f"{same}/{total}", "-",
                  f"first difference: {first_bad}" if first_bad else "every value bit for bit"])


def main():
    x, gy = points()
    table = []
    with tempfile.TemporaryDirectory() as d:
        for name in EXACT:
            check_activation(name, d, x, gy, table)
        check_stack(d, "leaky:0.5", torch.nn.LeakyReLU(0.5), 64, 16, table)
        check_stack(d, "relu", torch.nn.ReLU(), 64, 16, table)
    print(f"check-torch-act: bfloat16+binary32 against torch {torch.__version__} (CPU, bf16); vijp's values are "
          "bf16(f32(exact)) everywhere (mpmath at 200 bits); where torch differs it is not correctly rounded:")
    print(f"  {'layer':<28} {'forward same':>13} {'vjp same':>11}  torch's kernel")
    for r in table:
        print(f"  {r[0]:<28} {r[1]:>13} {r[2]:>11}  {r[3]}")


main()

#!/usr/bin/env python3
"""Whole bf16 training stacks against PyTorch's CPU bf16 autograd (make check).

A stack dense:64 + ACT cycled to depth D (ACT: tanh, gelu (erf form),
gelu:tanh, silu; batch 4) runs through `vijp grad --engine backprop --format
bfloat16+binary32 --save` and through torch's bf16 autograd, with the same bf16
weights (a safetensors file, torch's state_dict layout) and inputs, and the
square loss against 0, whose cotangent at the output is the output itself:
vijp's cotangent_D is its forward output h_D, torch's is h_D.detach().  Every
cotangent g_1 … g_D (of each layer's output, so of the next one's input), ∇x
and every ∇θ is then compared bit for bit.

Where the two differ it is torch's activation kernel: vijp computes an
activation's f(x), f′(x) and g·f′ in binary32 and rounds once to bf16 (its
vjp is bf16(f32(g·f32(f′(x))))), which is bf16(f32(exact)) at every value
the stacks meet (run 2 below; check-torch-act.py checks it point by point
for tanh, SiLU and GELU), while torch 1.13's bf16 kernels are not all
correctly rounded (tanh's backward g·(1 − y²) from the bf16 output y, SiLU's
every operation in bf16, GELU's 1 + erf cancelling for x < 0; GELU-tanh's
forward and backward).  Two runs show it:

  1. torch with its own kernels (native): per stack, how many outputs of each
     kind equal vijp's bit for bit; and, at every activation of that run, at
     torch's own inputs x and incoming cotangents g, where torch's f(x) and
     its input cotangent differ from the correctly rounded bf16(f32(f(x)))
     and bf16(f32(g·f32(f′(x)))), computed here in mpmath at 200 bits (a
     rounding to 24 bits is then decided unless the exact value lies within
     2^-170 relatively of a boundary).  At each such element torch's value
     must be at least as far from the exact f(x) or g·f′(x) as the
     correctly rounded one: torch's kernel is the less accurate.
  2. torch with its linear layers and autograd unchanged but each activation
     replaced by those correctly rounded values (a torch.autograd.Function
     that looks them up): every output must equal vijp's bit for bit.  So
     every difference in run 1 comes from torch's elementwise kernels and
     none from the matrix products (torch's oneDNN bf16 GEMMs, forward,
     input gradient and weight gradient, and its bias-gradient sum: exact
     bf16 products summed in binary32 and rounded once, which vijp's index
     order reproduces bit for bit on these data) or from vijp.  Two rare
     causes may part the two runs first (parting, forward_parting,
     theta_parting: each such value checked, and nothing after it compared
     bit for bit): the order of a binary32 sum (vijp's index order, torch's
     VDPBF16PS pairs, element 2i+1 before 2i), where the two sums straddle
     a bf16 rounding boundary, and vijp's own binary32 f or f′, computed
     operation by operation within the layer's stated ulps and so not always
     correctly rounded, where f or g·f′ lies near a bf16 boundary: vijp's
     value is then its layer's own (vijp eval) at the agreed x.  How often:
     docs/formats.md; check_own_rounding (check-long) counts the second.

Flushing (`:ftz`): a second stack per tanh and GELU (make_ftz_stack) whose
sums cross into the subnormal range where no flush decision depends on the
order of summation, with the linear loss (random c), against
bfloat16:ftz+binary32:ftz: every cotangent, ∇x and ∇θ equals torch's with
correctly rounded, flushed activations as a value; zeros of the other sign
appear only where a whole sum flushed, each side's zero taking the sign of
the last product it added (signs_explained); bfloat16+binary32 must differ.

Exit 1 on an unexplained difference.  Skipped, with the reason, where torch,
numpy or mpmath does not import.  VIJP_TEST_SCALE > 1 (make check-long) runs
depth 64 instead of 16 and check_own_rounding; VIJP_STACK_SEEDS=FIRST:END
surveys the stacks of other seeds instead (survey)."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import mpmath
    import numpy as np
    import torch
except ImportError as e:
    print(f"check-torch-stack: SKIPPED: python3 cannot import torch/numpy/mpmath ({e}); "
          "scripts/install-deps.sh installs python3-torch and python3-mpmath")
    sys.exit(0)

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
WIDTH, BATCH = 64, 4
DEPTH = 64 if int(os.environ.get("VIJP_TEST_SCALE", "1") or 1) > 1 else 16
FORMAT = "bfloat16+binary32"
mp = mpmath.mp
mp.prec = 200


def fail(msg):
    sys.exit(f"check-torch-stack: FAILED: {msg}")


# ---- the exact functions (mpmath) and their correct rounding ----

def sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def phi_cdf(x):
    return mpmath.erfc(-x / mpmath.sqrt(2)) / 2


GELU_TANH_K2 = 2 * mpmath.sqrt(2 / mpmath.pi)  # torch's 2·kBeta, exact
GELU_TANH_C = mpmath.mpf("0.044715")  # torch's kKappa, the decimal


def gelu_tanh(x):
    return x * sigmoid(GELU_TANH_K2 * (x + GELU_TANH_C * x ** 3))  # 0.5(1 + tanh(v/2)) = σ(v)


def gelu_tanh_prime(x):
    s = sigmoid(GELU_TANH_K2 * (x + GELU_TANH_C * x ** 3))
    return s + x * s * (1 - s) * GELU_TANH_K2 * (1 + 3 * GELU_TANH_C * x ** 2)


EXACT = {  # name: (f, f′)
    "tanh": (mpmath.tanh, lambda x: 1 - mpmath.tanh(x) ** 2),
    "gelu": (lambda x: x * phi_cdf(x), lambda x: phi_cdf(x) + x * mpmath.npdf(x)),
    "gelu:tanh": (gelu_tanh, gelu_tanh_prime),
    "silu": (lambda x: x * sigmoid(x), lambda x: sigmoid(x) * (1 + x * (1 - sigmoid(x)))),
}
TORCH = {
    "tanh": torch.tanh,
    "gelu": torch.nn.functional.gelu,
    "gelu:tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


def round_bits(v, bits):
    """v to nearest even at `bits` significant bits (unbounded exponent:
    every value here is a normal binary32 or zero)."""
    with mpmath.workprec(bits):
        return +v


class Rounded:
    """One activation's correctly rounded values, by bf16 input (cached: a
    stack meets far fewer distinct bf16 values than elements).  With flush,
    as the `:ftz` formats (docs/formats.md): a binary32 result whose
    rounding to 24 bits with an unbounded exponent lies below 2^-126 becomes
    a zero of its sign (f, f′ and g·f′; their bf16 roundings are then never
    subnormal either)."""

    def __init__(self, name, flush=False):
        self.f, self.df = EXACT[name]
        self.flush = flush
        self.cache = {}

    def at(self, x):
        """(exact f(x), f32(f(x)), exact f′(x), f32(f′(x))): mpf, float, mpf, float."""
        if x not in self.cache:
            fx, dfx = self.f(mpmath.mpf(x)), self.df(mpmath.mpf(x))
            self.cache[x] = (fx, self.f32(round_bits(fx, 24)), dfx, self.f32(round_bits(dfx, 24)))
        return self.cache[x]

    def f32(self, r24):
        """A 24-bit value (mpf, unbounded exponent) as binary32, flushed when tiny."""
        return float(r24) if not (self.flush and abs(r24) < mpmath.mpf(2) ** -126) else math.copysign(0.0, r24)

    def forward(self, xs):
        return as64(bf16_of(np.array([self.at(v)[1] for v in xs.ravel()]).reshape(xs.shape)))

    def fprime32(self, xs):
        return np.array([self.at(v)[3] for v in xs.ravel()], dtype=np.float32).reshape(xs.shape)

    def vjp(self, xs, gs):
        """bf16(f32(g·f32(f′(x)))).  The product of a bf16 g and a binary32 f′
        (8 and 24 bits) is exact in float64; binary32 rounds it correctly
        where it is normal, and scaled by 2^100 (exact) it rounds to 24 bits
        with an unbounded exponent, which decides tininess; torch's bf16
        conversion rounds to nearest even."""
        p = gs.astype(np.float64) * self.fprime32(xs).astype(np.float64)
        p32 = p.astype(np.float32)
        if self.flush:
            p32 = np.where(np.abs((p * 2.0 ** 100).astype(np.float32)) < 2.0 ** -26, np.copysign(np.float32(0), p32),
                           p32)
        return bf16_of(p32)


def bf16_of(a32):
    return torch.from_numpy(np.ascontiguousarray(a32, dtype=np.float32)).to(torch.bfloat16)


def as64(t):
    return t.detach().to(torch.float64).numpy()


class RoundedAct(torch.autograd.Function):
    """The activation as vijp's rule computes it, inside torch's autograd."""

    @staticmethod
    def forward(ctx, x, rounded):
        ctx.save_for_backward(x)
        ctx.rounded = rounded
        return bf16_of(rounded.forward(as64(x)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return ctx.rounded.vjp(as64(x), as64(g)), None


# ---- the stack ----

def make_stack(name, seed):
    """Dense layers (bf16 weights N(0, gain²/width), biases N(0, 0.1²); gain
    √2 for the GELUs and SiLU, which halve the scale) and bf16 inputs."""
    g = torch.Generator().manual_seed(seed)
    gain = 1.0 if name == "tanh" else 2 ** 0.5
    dense = []
    for _ in range(DEPTH // 2):
        W = (torch.randn(WIDTH, WIDTH, generator=g, dtype=torch.float64) * gain / WIDTH ** 0.5).to(torch.bfloat16)
        b = (torch.randn(WIDTH, generator=g, dtype=torch.float64) * 0.1).to(torch.bfloat16)
        dense.append((W, b))
    X = torch.randn(BATCH, WIDTH, generator=g, dtype=torch.float64).to(torch.bfloat16)
    return dense, X


def torch_run(dense, X, act, C=None):
    """Forward and backward in torch bf16; act(x) the activation; the loss
    ⟨C, h_D⟩, or ½‖h_D‖² without C.  Returns the stack's tensors in vijp's
    --save names (and "forward", h_D, without C), and per activation its
    input, output, incoming and outgoing cotangents."""
    x0 = X.clone().requires_grad_(True)
    h, outs, params = x0, [], []
    for W, b in dense:
        lin = torch.nn.Linear(WIDTH, WIDTH).to(torch.bfloat16)
        with torch.no_grad():
            lin.weight.copy_(W)
            lin.bias.copy_(b)
        params.append(lin)
        for layer in (lin, act):
            h = layer(h)
            h.retain_grad()
            outs.append(h)
    h.backward(h.detach().clone() if C is None else C)  # ½‖h_D‖²'s gradient is h_D itself
    got = {"grad_x": as64(x0.grad)}
    for i, o in enumerate(outs):
        got[f"cotangent_{i + 1}"] = as64(o.grad)
    for k, lin in enumerate(params):  # vijp's dense θ: W column-major (out × in), then b
        got[f"grad_theta_{2 * k + 1}"] = np.concatenate([as64(lin.weight.grad).T.reshape(-1), as64(lin.bias.grad)])
    if C is None:
        got["forward"] = as64(outs[-1])
    acts = [(as64(outs[i - 1]), as64(outs[i]), as64(outs[i].grad), as64(outs[i - 1].grad))
            for i in range(1, len(outs), 2)]
    return got, acts


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for key, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f8")
        header[key] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def vijp_run(d, name, dense, X, fmt=FORMAT, C=None, depth=None):
    """vijp grad's --save tensors for the loss torch_run's C names (and
    "forward", h_D, without C: the square loss against 0 has cotangent
    h_D − 0 = h_D, stored as it is)."""
    write_safetensors(f"{d}/w.safetensors", {k: v for i, (W, b) in enumerate(dense)
                                             for k, v in ((f"{2 * i}.weight", as64(W)), (f"{2 * i}.bias", as64(b)))})
    np.save(f"{d}/x.npy", as64(X).astype("<f8"))
    np.save(f"{d}/t.npy", np.zeros((BATCH, WIDTH)) if C is None else as64(C).astype("<f8"))
    out = tempfile.mkdtemp(dir=d)  # a fresh folder: nothing left from another run
    depth = depth or 2 * len(dense)
    cmd = [VIJP, "grad", "--net", f"dense:{WIDTH},{name}", "--depth", str(depth), "--width", str(WIDTH),
           "--input", f"{d}/x.npy", "--target", f"{d}/t.npy", "--loss", "square" if C is None else "linear",
           "--weights", f"{d}/w.safetensors", "--engine", "backprop", "--format", fmt, "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    got = {}
    for f in os.listdir(out):
        got[f[:-4]] = np.load(f"{out}/{f}")
    if C is None:
        got["forward"] = got[f"cotangent_{depth}"]
    return got


def bits(a):
    return np.ascontiguousarray(a, dtype="<f8").view("<u8")


KINDS = (("forward", lambda k: k == "forward"), ("cotangents", lambda k: k.startswith("cotangent") or k == "grad_x"),
         ("∇θ", lambda k: k.startswith("grad_theta")))


def agreement(a, b, values=False):
    """Per kind, (bit-identical values, values) between two runs' tensors
    (equal values, ±0 alike, with values)."""
    rows = {}
    for kind, pick in KINDS:
        same = total = 0
        for k in a:
            if pick(k):
                want = b[k].reshape(a[k].shape)
                same += int(np.sum(a[k] == want)) if values else int(np.sum(bits(a[k]) == bits(want)))
                total += a[k].size
        rows[kind] = (same, total)
    return rows


def torch_not_rounded(name, rounded, acts):
    """At torch's own activations: the elements where its forward and its
    input cotangent are not the correctly rounded ones bf16(f32(·)); each
    must be no nearer the exact value than those, unless torch's is bf16 of
    the exact value rounded once and the binary32 step is what moved
    bf16(f32(·)) off it (the exact value within a binary32 rounding of a
    bf16 midpoint: double rounding, counted apart).  Returns counts, totals
    and the first example of each."""
    counts = {"f": 0, "g·f′": 0, "double": 0}
    total = 0
    example = {}
    for x, y, gy, gx in acts:
        total += x.size
        cr_f, cr_g = rounded.forward(x), as64(rounded.vjp(x, gy))
        for what, got, cr in (("f", y, cr_f), ("g·f′", gx, cr_g)):
            for i in zip(*np.nonzero(bits(got) != bits(cr))):
                ex = rounded.at(x[i])
                exact = ex[0] if what == "f" else mpmath.mpf(gy[i]) * ex[2]
                if abs(mpmath.mpf(got[i]) - exact) < abs(mpmath.mpf(cr[i]) - exact):
                    if got[i] != float(round_bits(exact, 8)):
                        fail(f"{name} {what} at x = {x[i]!r}, g = {gy[i]!r}: torch's {got[i]!r} is nearer the "
                             f"exact {mpmath.nstr(exact, 12)} than the correctly rounded {cr[i]!r}")
                    counts["double"] += 1
                    example.setdefault("double", (x[i], gy[i], got[i], cr[i], exact))
                    continue
                counts[what] += 1
                example.setdefault(what, (x[i], gy[i], got[i], cr[i], exact))
    return counts, total, example


def backward_order():
    """vijp's --save names in the order backprop computes them: g_D, then for
    each layer i = D … 1 its ∇θ_i (dense layers: odd i) and its input's
    cotangent g_(i−1) (∇x for i = 1)."""
    names = [f"cotangent_{DEPTH}"]
    for i in range(DEPTH, 0, -1):
        if i % 2:
            names.append(f"grad_theta_{i}")
        names.append(f"cotangent_{i - 1}" if i > 1 else "grad_x")
    return names


def binary32_sums(g, W, order):
    """Σ_j g[b, j]·W[j, k] summed in binary32 from +0 in the given order of j,
    each exact bf16 product (16 bits) added and rounded."""
    s = np.zeros((g.shape[0], W.shape[1]), dtype=np.float32)
    for j in order:
        s = s + (g[:, j:j + 1] * W[j:j + 1, :]).astype(np.float32)
    return as64(bf16_of(s))


INDEX_ORDER = list(range(WIDTH))
PAIR_ORDER = [j for p in range(0, WIDTH, 2) for j in (p + 1, p)]  # VDPBF16PS: element 2i+1, then 2i


def vijp_eval(d, name, xs, gs, fmt=FORMAT):
    """The layer's own f, vjp and f′ (`vijp eval`) in fmt at points xs with
    cotangents gs (1-D)."""
    np.save(f"{d}/ex.npy", xs.reshape(1, -1).astype("<f8"))
    np.save(f"{d}/eg.npy", gs.reshape(1, -1).astype("<f8"))
    out = tempfile.mkdtemp(dir=d)
    cmd = [VIJP, "eval", "--layer", name, "--width", str(xs.size), "--input", f"{d}/ex.npy", "--cotangent",
           f"{d}/eg.npy", "--format", fmt, "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return tuple(np.load(f"{out}/{what}.npy")[0] for what in ("forward", "vjp", "fprime"))


def dense_sums(h, W, b, order):
    """W·h + b for each row of h, the exact products summed in binary32 from
    +0 in the given order of the inputs, the bias added last, rounded once to
    bf16."""
    s = np.zeros((h.shape[0], W.shape[0]), dtype=np.float32)
    for j in order:
        s = s + (h[:, j:j + 1] * W[:, j][None, :]).astype(np.float32)
    return as64(bf16_of(s + b[None, :].astype(np.float32)))


def forward_parting(d, name, where, sacts, dense, X, required):
    """The forward output differs: vijp's layer outputs h_1 … h_D (each the
    cotangent_J of a depth-J run under the square loss against 0) against
    torch's, layer by layer, to the first that differs; it must be a dense
    layer parted by the order of summation (as the input cotangents) or an
    activation whose vijp value is its own f at the agreed x.  None where
    every layer's output agrees (and not required)."""
    for j in range(1, DEPTH + 1):  # layer j: dense for odd j (sacts[(j − 1)/2]'s input), ACT for even j
        mine = vijp_run(d, name, dense[:(j + 1) // 2], X, depth=j)["forward"]
        theirs = sacts[(j - 1) // 2][0] if j % 2 else sacts[(j - 1) // 2][1]
        bad = bits(mine) != bits(theirs)
        if not np.any(bad):
            continue
        if j % 2:
            h = as64(X) if j == 1 else sacts[(j - 3) // 2][1]
            W, b = (as64(t) for t in dense[(j - 1) // 2])
            ours, torchs = dense_sums(h, W, b, INDEX_ORDER), dense_sums(h, W, b, PAIR_ORDER)
            if np.any(bits(mine[bad]) != bits(ours[bad])) or np.any(bits(theirs[bad]) != bits(torchs[bad])):
                fail(f"{where}: the forward parts at layer {j} (dense) where the orders of summation do not explain "
                     f"it ({int(np.sum(bad))} values, first: vijp {mine[bad][0]!r}, index order {ours[bad][0]!r}; "
                     f"torch {theirs[bad][0]!r}, pair order {torchs[bad][0]!r})")
            return f"h_{j}: {int(np.sum(bad))} by the order of summation"
        x = sacts[(j - 1) // 2][0]
        own = vijp_eval(d, name, x[bad], x[bad])[0]
        f32 = vijp_eval(d, name, x[bad], x[bad], "binary32")[0]
        correct = np.array([Rounded(name).at(v)[1] for v in x[bad]])
        if (np.any(bits(own) != bits(mine[bad])) or np.any(f32 == correct)
                or np.any(bits(as64(bf16_of(f32))) != bits(mine[bad]))):
            fail(f"{where}: the forward parts at layer {j} ({name}) at {int(np.sum(bad))} values, first x = "
                 f"{x[bad][0]!r}: vijp {mine[bad][0]!r} is not its layer's own f(x) {own[0]!r} = bf16 of its "
                 f"binary32 f(x) {f32[0]!r} where that is not correctly rounded")
        return f"h_{j}: {int(np.sum(bad))} where vijp's binary32 f is not correctly rounded"
    if required:
        fail(f"{where}, but no layer's output does")
    return None


def theta_parting(k, mine, theirs, subst, sacts, X):
    """A dense layer's ∇θ parted first: ∇W_jk = Σ_b g_bj h_bk and ∇b_j =
    Σ_b g_bj over the batch, each exact product summed in binary32 and rounded
    once to bf16; vijp's in index order, torch's in VDPBF16PS's pair order
    (b = 1, 0, 3, 2).  The note, or None where that does not explain it."""
    layer = int(k.split("_")[2])
    g = subst[f"cotangent_{layer}"]
    h = as64(X) if layer == 1 else sacts[(layer - 3) // 2][1]
    pairs = [b for p in range(0, BATCH, 2) for b in (p + 1, p)]

    def sums(order):
        w = np.zeros((WIDTH, WIDTH), dtype=np.float32)
        bias = np.zeros(WIDTH, dtype=np.float32)
        for b in order:
            w = w + (g[b][:, None] * h[b][None, :]).astype(np.float32)
            bias = bias + g[b].astype(np.float32)
        return np.concatenate([as64(bf16_of(w)).T.reshape(-1), as64(bf16_of(bias))])  # W column-major, then b

    bad = bits(mine) != bits(theirs)
    if np.any(bits(mine[bad]) != bits(sums(range(BATCH))[bad])) or np.any(bits(theirs[bad]) != bits(sums(pairs)[bad])):
        return None
    return f"{k}: {int(np.sum(bad))} by the order of summation"


def local_parting(d, name, k, mine, theirs, subst, sacts, dense, X):
    """The first differing value set k explained by its own layer's inputs,
    which agreed: (note, None), or (None, why not)."""
    bad = bits(mine) != bits(theirs)
    if k.startswith("grad_theta"):
        note = theta_parting(k, mine, theirs, subst, sacts, X)
        return (note, None) if note else (None, f"at {int(np.sum(bad))} of {mine.size} values (first: vijp "
                                          f"{mine[bad][0]!r}, torch {theirs[bad][0]!r}), not by the order of summation")
    layer = int(k.split("_")[1]) + 1 if k.startswith("cotangent") else 1
    if layer % 2 == 0:
        x, _, gy, _ = sacts[layer // 2 - 1]
        _, own, _ = vijp_eval(d, name, x[bad], gy[bad])
        _, _, f32 = vijp_eval(d, name, x[bad], gy[bad], "binary32")  # vijp's binary32 f′
        rounded = Rounded(name)
        if (np.any(bits(own) != bits(mine[bad])) or np.any(f32 == rounded.fprime32(x[bad]))
                or np.any(bits(as64(bf16_of(gy[bad] * f32))) != bits(mine[bad]))):
            return None, (f"at {int(np.sum(bad))} values, first x = {x[bad][0]!r}, g = {gy[bad][0]!r}: vijp "
                          f"{mine[bad][0]!r} is not its layer's own vjp {own[0]!r} = bf16(f32(g·f′)) with its "
                          f"binary32 f′ {f32[0]!r} where that is not correctly rounded (torch with correctly rounded "
                          f"activations {theirs[bad][0]!r})")
        return f"{k}: {int(np.sum(bad))} where vijp's binary32 f′ is not correctly rounded", None
    g, W = subst[f"cotangent_{layer}"], as64(dense[(layer - 1) // 2][0])
    ours, torchs = binary32_sums(g, W, INDEX_ORDER), binary32_sums(g, W, PAIR_ORDER)
    if np.any(bits(mine[bad]) != bits(ours[bad])) or np.any(bits(theirs[bad]) != bits(torchs[bad])):
        return None, f"at {int(np.sum(bad))} values, where the two orders of summation do not explain it"
    return f"{k}: {int(np.sum(bad))} by the order of summation", None


def parting(d, name, v, subst, sacts, dense, X):
    """vijp against torch with correctly rounded activations, in backprop's
    order: equal bit for bit, or parted first, at a layer's input cotangent,
    by one of two causes, checked value by value (everything before agreed,
    so both sides start from the same g, W and x):
      - a dense layer's: the order of summation: vijp's value is the binary32
        sum in index order, torch's the sum in VDPBF16PS's pair order (its
        oneDNN kernel), of the same exact products, each rounded once to bf16;
      - an activation's: vijp's binary32 f′ is computed operation by
        operation (within the layer's stated ulps, not always correctly
        rounded), and where g·f′ lies near a bf16 rounding boundary its
        bf16(f32(g·f′)) can differ from the correctly rounded one: vijp's
        value must then be its layer's own vjp at that x and g (vijp eval).
    What follows a parting is not compared bit for bit (the two then compute
    from different values).  Returns the table's note; exits on any other
    difference."""
    for k in backward_order():
        want = subst[k].reshape(v[k].shape)
        bad = bits(v[k]) != bits(want)
        if not np.any(bad):
            continue
        where = f"dense:{WIDTH},{name} depth {DEPTH}: {k} differs from torch with correctly rounded activations"
        if k == f"cotangent_{DEPTH}":  # the forward output h_D: find where the forward parted
            return forward_parting(d, name, where, sacts, dense, X, required=True)
        note, why = local_parting(d, name, k, v[k], want, subst, sacts, dense, X)
        if note:
            return note
        # A forward parting absorbed before h_D would show here first (in the
        # x of an f′ or the h of a ∇W): look for one before calling it unexplained.
        note = forward_parting(d, name, where, sacts, dense, X, required=False)
        if note:
            return note
        fail(f"{where}: {why}")
    return "every value"


def check_stack(d, name, seed, table, notes):
    rounded = Rounded(name)
    dense, X = make_stack(name, seed)
    v = vijp_run(d, name, dense, X)
    native, acts = torch_run(dense, X, TORCH[name])
    subst, sacts = torch_run(dense, X, lambda x: RoundedAct.apply(x, rounded))
    parted = parting(d, name, v, subst, sacts, dense, X)  # 2.
    counts, total, example = torch_not_rounded(name, rounded, acts)  # 1.
    rows = agreement(v, native)
    table.append([name] + [f"{s}/{t}" for s, t in (rows[k] for k, _ in KINDS)]
                 + [f"{counts['f']}/{total}", f"{counts['g·f′']}/{total}", parted])
    for what, (x, g, t, cr, exact) in sorted(example.items()):
        if what == "double":
            notes.append(f"{name}: {counts['double']} where torch's is bf16(exact) and bf16(f32(·)) rounds twice, "
                         f"e.g. x = {x!r}, g = {g!r}: torch {t!r}, bf16(f32(·)) {cr!r}, "
                         f"exact {mpmath.nstr(exact, 12)}")
            continue
        notes.append(f"{name} {what}: x = {x!r}" + (f", g = {g!r}" if what != "f" else "")
                     + f": torch {t!r}, correctly rounded {cr!r}, exact {mpmath.nstr(exact, 10)}")


FTZ_A, FTZ_B = 2, 3  # the flushing stack's shrinking and flushed dense layers (0-based among the dense)
FTZ_FORMAT = "bfloat16:ftz+binary32:ftz"
FTZ_DEPTH = 16  # at any scale: deeper, the cotangents reaching B shrink past what the flush decides
TINY = 2.0 ** -126


def make_ftz_stack(name, seed, scale_b):
    """A depth-16 stack that crosses the subnormal range where no flush decision can
    depend on the order of summation: dense layers N(0, 1/64) with biases
    N(0, 0.1²), except A, whose weights and biases are scaled by 2^-50
    (outputs near 2^-50, every product normal), and B after it, whose
    weights are scaled by scale_b (check_ftz_stack picks it): every partial
    sum of B's 64 products, in any order, then lies below 2^-127, so B's
    W·h is tiny (torch's oneDNN GEMM flushes it; binary32:ftz too; without
    flushing a bf16 subnormal), and so is every cotangent of A's input going
    back (A's output cotangent ∝ scale_b, times A's weights near 2^-50).  B's
    biases are 0 on a third of the units (the output is then the flushed sum:
    0) and, in the GELU stack, in [2^-126, 2^-125) on another third: GELU
    halves them into the subnormal range, which torch's vectorised GELU kernel
    flushes to 0, as vijp's `:ftz` storage does.  Returns the layers, the
    inputs and the linear loss's c."""
    g = torch.Generator().manual_seed(seed)
    dense = []
    for k in range(FTZ_DEPTH // 2):
        W = torch.randn(WIDTH, WIDTH, generator=g, dtype=torch.float64) / WIDTH ** 0.5
        b = torch.randn(WIDTH, generator=g, dtype=torch.float64) * 0.1
        if k == FTZ_A:
            W, b = W * 2.0 ** -50, b * 2.0 ** -50
        elif k == FTZ_B:
            W = W * scale_b
            third = WIDTH // 3
            b[:third] = 0
            if name == "gelu":
                b[third:2 * third] = TINY * (1 + torch.rand(third, generator=g, dtype=torch.float64))
        dense.append((W.to(torch.bfloat16), b.to(torch.bfloat16)))
    X = torch.randn(BATCH, WIDTH, generator=g, dtype=torch.float64).to(torch.bfloat16)
    C = torch.randn(BATCH, WIDTH, generator=g, dtype=torch.float64).to(torch.bfloat16)
    return dense, X, C


def flushed_sums(dense, acts):
    """The largest Σ|terms| of B's forward sums and of the sums giving A's
    input cotangent (float64: exact to 2^-50 relatively here)."""
    WA, WB = as64(dense[FTZ_A][0]), as64(dense[FTZ_B][0])
    h_a = acts[FTZ_A][1]  # A's activation output, B's input
    g_a = acts[FTZ_A][3]  # the cotangent of A's output
    return float(np.max(np.abs(h_a) @ np.abs(WB).T)), float(np.max(np.abs(g_a) @ np.abs(WA)))


def signs_explained(name, dense, acts, v, native, subst):
    """Zeros of the other sign, only where a sum flushed whole: the cotangent
    of A's input g_j = Σ_i c_i W_ij (c A's output cotangent), whose every
    partial sum flushes, so each side's zero takes the sign of the last
    product it adds (x86's FTZ keeps the result's sign): vijp's binary32:ftz
    sums in index order, i = 63 last; torch's oneDNN kernel sums pairs with
    VDPBF16PS, whose pseudo-code (Intel SDM) adds element 2i+1, then 2i, so
    i = 62 last.  And the cotangent of A's activation input, that zero times
    f′.  Anywhere else the signs must agree."""
    k_in, k_act = f"cotangent_{2 * FTZ_A}", f"cotangent_{2 * FTZ_A - 1}"
    for k in v:
        if k not in (k_in, k_act) and np.any(bits(v[k]) != bits(subst[k].reshape(v[k].shape))):
            fail(f"flushing stack {name}: {k} has zeros of the other sign than torch's, which no flushed sum explains")
    terms = acts[FTZ_A][3][:, :, None] * as64(dense[FTZ_A][0])[None, :, :]  # [b, i, j]: c_bi W_ij
    for who, got, last in (("vijp", v[k_in], WIDTH - 1), ("torch", native[k_in], WIDTH - 2)):
        zero = got == 0
        want_neg = terms[:, last, :] < 0
        if np.any(zero & (np.signbit(got) != want_neg)):
            fail(f"flushing stack {name}: {who}'s flushed {k_in} does not take the sign of product {last}")


def check_ftz_stack(d, name, seed, table, notes):
    """vijp's FTZ_FORMAT against torch through the flushing stack: every value
    equal to torch's with correctly rounded, flushed activations (a zero's
    sign aside, which follows each side's order of summation) and to
    torch's own; bfloat16+binary32 (no flushing) must differ."""
    probe = make_ftz_stack(name, seed, 2.0 ** -100)  # B surely tiny: find the sums' size at that scale
    _, acts = torch_run(probe[0], probe[1], TORCH[name], probe[2])
    largest = max(flushed_sums(probe[0], acts))
    scale_b = 2.0 ** (-100 + math.floor(math.log2(2.0 ** -127 / largest)))
    dense, X, C = make_ftz_stack(name, seed, scale_b)
    native, acts = torch_run(dense, X, TORCH[name], C)
    fwd, back = flushed_sums(dense, acts)
    if not (max(fwd, back) * (1 + 2.0 ** -18) < TINY and fwd > 2.0 ** -132):
        fail(f"flushing stack {name}: B's sums reach {fwd:.3g}, A's cotangent sums {back:.3g}: the design "
             "wants both below 2^-126 in any order of summation and B's above 2^-132")
    rounded = Rounded(name, flush=True)
    subst, _ = torch_run(dense, X, lambda x: RoundedAct.apply(x, rounded), C)
    v = vijp_run(d, name, dense, X, FTZ_FORMAT, C)
    signs = 0
    for k in v:
        want = subst[k].reshape(v[k].shape)
        if np.any(v[k] != want):
            i = np.argmax(v[k].ravel() != want.ravel())
            fail(f"flushing stack {name}, {FTZ_FORMAT}: {k} differs from torch with correctly rounded flushed "
                 f"activations at {np.sum(v[k] != want)} of {v[k].size} values (first: vijp {v[k].ravel()[i]!r}, "
                 f"torch {want.ravel()[i]!r})")
        signs += int(np.sum(bits(v[k]) != bits(want)))
    signs_explained(name, dense, acts, v, native, subst)
    same_native = agreement(v, native, values=True)
    plain = vijp_run(d, name, dense, X, "bfloat16+binary32", C)
    plain_diff = sum(int(np.sum(plain[k] != subst[k].reshape(plain[k].shape))) for k in plain)
    storage = vijp_run(d, name, dense, X, "bfloat16:ftz+binary32", C)
    storage_diff = sum(int(np.sum(storage[k] != subst[k].reshape(storage[k].shape))) for k in storage)
    if not plain_diff:
        fail(f"flushing stack {name}: bfloat16+binary32 equals torch everywhere: the check cannot tell "
             "flushing from keeping")
    table.append([f"{name} (flushing)"] + [f"{s}/{t}" for s, t in (same_native[k] for k, _ in KINDS[1:])]
                 + [f"{signs}", f"{plain_diff}", f"{storage_diff}"])


def check_own_rounding(d, name, table):
    """(make check-long) vijp's own bf16 vjp, bf16(f32(g·f′)) with its
    binary32 f′ computed operation by operation, against the correctly
    rounded one over every bf16 x in ±[2^-10, 8) with 32 N(0, 1) cotangents
    each; where they differ, vijp's value must be within one bf16 ulp of the
    exact g·f′ (2^-7 relatively bounds an ulp), and the row says how often
    torch's own kernel gives the correctly rounded value there and how often
    vijp's."""
    xs = np.array([s * (1 + m / 128) * 2.0 ** e for e in range(-10, 3) for m in range(128) for s in (1, -1)])
    g = torch.Generator().manual_seed(71)
    G = as64(torch.randn(32, xs.size, generator=g, dtype=torch.float64).to(torch.bfloat16))
    X = np.tile(xs, (32, 1))
    mine = vijp_eval(d, name, X.ravel(), G.ravel())[1].reshape(X.shape)
    rounded = Rounded(name)
    cr = as64(rounded.vjp(X, G))
    xt = torch.tensor(X).to(torch.bfloat16).requires_grad_(True)
    TORCH[name](xt).backward(torch.tensor(G).to(torch.bfloat16))
    theirs = as64(xt.grad)
    bad = bits(mine) != bits(cr)
    for x, gv, m in zip(X[bad], G[bad], mine[bad]):
        exact = mpmath.mpf(gv) * rounded.at(x)[2]
        if abs(mpmath.mpf(m) - exact) > abs(exact) * 2.0 ** -7:
            fail(f"{name} vjp at x = {x!r}, g = {gv!r}: vijp {m!r} is more than one bf16 ulp from the exact "
                 f"{mpmath.nstr(exact, 12)}")
    table.append(f"{name}: {int(np.sum(bad))} of {X.size} (torch there: correctly rounded "
                 f"{int(np.sum(theirs[bad] == cr[bad]))}, vijp's value {int(np.sum(theirs[bad] == mine[bad]))})")


def survey(first, end):
    """VIJP_STACK_SEEDS=FIRST:END: the stacks of seeds FIRST … END−1 (each
    activation), each checked as above; prints where each parted."""
    parted = 0
    with tempfile.TemporaryDirectory() as d:
        for seed in range(first, end):
            for name in EXACT:
                table = []
                check_stack(d, name, seed, table, [])
                if table[0][-1] != "every value":
                    parted += 1
                    print(f"  seed {seed} {name}: {table[0][-1]}", flush=True)
    print(f"check-torch-stack: {(end - first) * len(EXACT)} stacks of depth {DEPTH}, {parted} parted (where: above), "
          "none unexplained")


def main():
    if os.environ.get("VIJP_STACK_SEEDS"):
        return survey(*(int(v) for v in os.environ["VIJP_STACK_SEEDS"].split(":")))
    table, notes, ftz_table = [], [], []
    with tempfile.TemporaryDirectory() as d:
        for seed, name in enumerate(EXACT):
            check_stack(d, name, 41 + seed, table, notes)
        for seed, name in enumerate(("tanh", "gelu")):
            check_ftz_stack(d, name, 61 + seed, ftz_table, notes)
        own = []
        if DEPTH > 16:
            for name in EXACT:
                check_own_rounding(d, name, own)
    print(f"check-torch-stack: dense:{WIDTH},ACT depth {DEPTH}, batch {BATCH}, {FORMAT} against torch "
          f"{torch.__version__} CPU bf16 autograd: with torch's own activations (values the same as vijp's / "
          "all; values where torch's kernel is not correctly rounded at its own inputs, never nearer the exact "
          "one) and with correctly rounded ones (then vijp's bit for bit, up to a rare parting by the order of "
          "a sum or vijp's own binary32 f′):")
    print(f"  {'ACT':<10} {'forward':>9} {'cotangents':>12} {'∇θ':>12} {'torch f not CR':>15} "
          f"{'torch g·f′ not CR':>18}  vijp = torch with CR activations: bit for bit, up to")
    for r in table:
        print(f"  {r[0]:<10} {r[1]:>9} {r[2]:>12} {r[3]:>12} {r[4]:>15} {r[5]:>18}  {r[6]}")
    for n in notes:
        print(f"  e.g. {n}")
    print(f"  through a stack whose sums flush: {FTZ_FORMAT} equals torch with correctly rounded flushed "
          "activations as values everywhere (zeros of the other sign: each side's last product in its order "
          "of summation); against torch's own (equal values / all) and where the other formats differ from "
          "torch with correctly rounded activations:")
    print(f"  {'ACT':<16} {'cotangents':>12} {'∇θ':>12} {'±0':>5} {'bfloat16+binary32':>18} "
          f"{'bfloat16:ftz+binary32':>22}")
    for r in ftz_table:
        print(f"  {r[0]:<16} {r[1]:>12} {r[2]:>12} {r[3]:>5} {r[4]:>18} {r[5]:>22}")
    if own:
        print("  vijp's own bf16 vjp not correctly rounded (binary32 f′ operation by operation), within one bf16 "
              "ulp: " + "; ".join(own))


main()

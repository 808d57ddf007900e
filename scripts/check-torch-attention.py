#!/usr/bin/env python3
"""linear and attention against PyTorch in float64 (make check).

`vijp eval --format double` writes forward.npy, vjp.npy (gᵀJ) and
vjp_param.npy (∇θ = Σ_b g_bᵀ ∂f/∂θ) for linear:OUTxIN and
attention:DxH[:causal] at seeded θ, x and g; torch computes the same with
nn.Linear on the last axis and nn.MultiheadAttention(D, H,
batch_first=True) called as mha(x, x, x[, attn_mask=causal]) in eval mode,
θ loaded from the flat vector in state_dict order (the layout the contract
fixes), and autograd for ∇x and ∇θ of ⟨g, y⟩.

The bound, per entry: both sides compute the same formulas in binary64 in
some order, each within c·u·M of the exact value (u = 2^-53, M the
magnitudes of the terms the entry is formed from, computed here from the
formulas with |·| everywhere; Higham, ASNA §3.1 and eq. 3.5: γ bounds hold
for every order of the sums), so they differ by at most 2·1.01·c·u·M:
  linear (a dot product of IN terms and a bias per output, torch's addmm
    likewise): forward c = IN + 1, M = |W||x| + |b|; vjp c = OUT,
    M = |W|ᵀ|g|; ∇W, ∇b sums of T = L·B terms: c = T + 1, M = Σ|g||x|, Σ|g|.
  attention: the chain bound of src/layers/attention.c (chain_ulps),
    c = 4D + 2d + 6L + 16 + (16D + 8d + 32)·S, S the largest score's
    terms ⟨qa, ka⟩/√d (qa = |W_q||x| + |b_q|, …), for the forward, the vjp
    and (plus L·B + 1 for the batch sums) ∇θ, M the magnitudes jvp1 and
    backward1 form there (P ⊙ (t + ⟨P, t⟩) for the softmax's derivative).
Then the check asserts that the bound can tell: the linear weight read
transposed, and attention without its causal mask, miss torch by more.
Skipped, with the reason, where torch does not import."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"check-torch-attention: SKIPPED: python3 cannot import torch/numpy ({e}); "
          "scripts/install-deps.sh installs python3-torch")
    sys.exit(0)

VIJP = os.environ.get("VIJP_BIN", "build/vijp")
U = 2.0 ** -53
BATCH = 3


def fail(msg):
    sys.exit(f"check-torch-attention: FAILED: {msg}")


def vijp_eval(d, spec, width, theta, X, G):
    np.save(f"{d}/theta.npy", theta.astype("<f8"))
    np.save(f"{d}/x.npy", X.reshape(BATCH, -1).astype("<f8"))
    np.save(f"{d}/g.npy", G.reshape(BATCH, -1).astype("<f8"))
    out = f"{d}/out"
    cmd = [VIJP, "eval", "--layer", spec, "--width", str(width), "--input", f"{d}/x.npy", "--params",
           f"{d}/theta.npy", "--cotangent", f"{d}/g.npy", "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return [np.load(f"{out}/{f}.npy") for f in ("forward", "vjp", "vjp_param")]


def torch_run(module, theta, X, G, **kw):
    """forward, ∇x and ∇θ (state_dict order, flattened) of ⟨G, module(X)⟩."""
    with torch.no_grad():
        at = 0
        for p in module.parameters():  # registration order = state_dict order here
            p.copy_(torch.from_numpy(theta[at:at + p.numel()]).view_as(p))
            at += p.numel()
    module.eval()
    x = torch.from_numpy(X).clone().requires_grad_(True)
    y = module(x, **kw)
    y = y[0] if isinstance(y, tuple) else y
    (y * torch.from_numpy(G)).sum().backward()
    names = [n for n, _ in module.named_parameters()]
    grads = dict(module.named_parameters())
    gt = np.concatenate([grads[n].grad.reshape(-1).numpy() for n in names])
    return y.detach().reshape(BATCH, -1).numpy(), x.grad.reshape(BATCH, -1).numpy(), gt


def compare(what, mine, theirs, bound):
    diff = np.abs(mine - theirs)
    over = diff > bound
    if over.any():
        i = np.unravel_index(np.argmax(diff - bound), diff.shape)
        fail(f"{what}{list(i)}: vijp {mine[i]!r}, torch {theirs[i]!r}, |diff| {diff[i]:.3g} > bound {bound[i]:.3g}")
    return float(np.max(diff / np.where(bound > 0, bound, 1)))


def beyond(mine, theirs, bound):
    return bool((np.abs(mine - theirs) > bound).any())


def check_linear(d, out_f, in_f, tokens, rng):
    spec, width = f"linear:{out_f}x{in_f}", in_f * tokens
    W, b = rng.standard_normal((out_f, in_f)), rng.standard_normal(out_f)
    X, G = rng.standard_normal((BATCH, tokens, in_f)), rng.standard_normal((BATCH, tokens, out_f))
    theta = np.concatenate([W.reshape(-1), b])
    y, gx, gt = vijp_eval(d, spec, width, theta, X, G)
    ty, tgx, tgt = torch_run(torch.nn.Linear(in_f, out_f).double(), theta, X, G)
    aW, aX, aG = np.abs(W), np.abs(X), np.abs(G)
    T = tokens * BATCH
    by = 2 * 1.01 * (in_f + 1) * U * (aX @ aW.T + np.abs(b)).reshape(BATCH, -1)
    bx = 2 * 1.01 * out_f * U * (aG @ aW).reshape(BATCH, -1)
    bW = np.einsum("bli,blk->ik", aG, aX).reshape(-1)
    bt = 2 * 1.01 * (T + 1) * U * np.concatenate([bW, aG.sum(axis=(0, 1))])
    worst = max(compare(f"{spec} forward", y, ty, by), compare(f"{spec} vjp", gx, tgx, bx),
                compare(f"{spec} grad theta", gt, tgt, bt))
    if out_f == in_f:  # the weight read transposed (dense's column-major layout) must miss
        yT, _, _ = torch_run(torch.nn.Linear(in_f, out_f).double(),
                             np.concatenate([W.T.reshape(-1), b]), X, G)
        if not beyond(y, yT, by):
            fail(f"{spec}: the transposed weight is within the bound: it cannot tell the layouts apart")
    return worst


def attention_bounds(D, H, causal, theta, X, G):
    """2·1.01·c·u·M for forward, ∇x, ∇θ (attention.c's chain bound)."""
    d, T = D // H, X.shape[1]
    Win, bin_ = theta[:3 * D * D].reshape(3 * D, D), theta[3 * D * D:3 * D * D + 3 * D]
    Wo = theta[3 * D * D + 3 * D:4 * D * D + 3 * D].reshape(D, D)
    bo = theta[4 * D * D + 3 * D:]
    scale = 1 / np.sqrt(d)
    by, bx = np.zeros((BATCH, T * D)), np.zeros((BATCH, T * D))
    gt_mag, gt_e = np.zeros_like(theta), np.zeros_like(theta)
    mask = np.tril(np.ones((T, T))) if causal else np.ones((T, T))
    for b in range(BATCH):
        x, g = X[b], G[b]
        a = x @ Win.T + bin_
        am = np.abs(x) @ np.abs(Win).T + np.abs(bin_)
        q, k = a[:, :D], a[:, D:2 * D]
        qa, ka, va = am[:, :D], am[:, D:2 * D], am[:, 2 * D:]
        oa, S = np.zeros((T, D)), 0.0
        go = np.abs(g) @ np.abs(Wo)
        gaa = np.zeros((T, 3 * D))
        for h in range(H):
            f = slice(h * d, (h + 1) * d)
            s = np.where(mask > 0, q[:, f] @ k[:, f].T * scale, -np.inf)
            P = np.exp(s - s.max(axis=1, keepdims=True))
            P /= P.sum(axis=1, keepdims=True)
            S = max(S, float(np.max(np.where(mask > 0, qa[:, f] @ ka[:, f].T * scale, 0))))
            oa[:, f] = P @ va[:, f]
            gP = go[:, f] @ va[:, f].T
            gs = P * (gP + (P * gP).sum(axis=1, keepdims=True)) * scale
            gaa[:, f] += gs @ ka[:, f]
            gaa[:, D + h * d:D + (h + 1) * d] += gs.T @ qa[:, f]
            gaa[:, 2 * D + h * d:2 * D + (h + 1) * d] += P.T @ go[:, f]
        c = 4 * D + 2 * d + 6 * T + 16 + (16 * D + 8 * d + 32) * S
        by[b] = (2 * 1.01 * c * U * (oa @ np.abs(Wo).T + np.abs(bo))).reshape(-1)
        bx[b] = (2 * 1.01 * c * U * (gaa @ np.abs(Win))).reshape(-1)
        gt_mag += np.concatenate([(gaa.T @ np.abs(x)).reshape(-1), gaa.sum(axis=0),
                                  (np.abs(g).T @ oa).reshape(-1), np.zeros(D)])
        gt_e = np.maximum(gt_e, c)
    TB = T * BATCH
    aGs = np.abs(G).sum(axis=(0, 1))
    bt = 2 * 1.01 * U * ((TB + 1 + gt_e) * gt_mag)
    bt[4 * D * D + 3 * D:] = 2 * 1.01 * (TB + 1) * U * aGs
    return by, bx, bt


def check_attention(d, D, H, tokens, causal, rng):
    spec = f"attention:{D}x{H}" + (":causal" if causal else "")
    width = D * tokens
    theta = 0.5 * rng.standard_normal(4 * D * D + 4 * D)
    X, G = rng.standard_normal((BATCH, tokens, D)), rng.standard_normal((BATCH, tokens, D))
    y, gx, gt = vijp_eval(d, spec, width, theta, X, G)
    mha = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
    mask = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1) if causal else None

    class SelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]

    ty, tgx, tgt = torch_run(SelfAttention(), theta, X, G)
    by, bx, bt = attention_bounds(D, H, causal, theta, X, G)
    worst = max(compare(f"{spec} forward", y, ty, by), compare(f"{spec} vjp", gx, tgx, bx),
                compare(f"{spec} grad theta", gt, tgt, bt))
    if causal:  # without the mask torch must miss
        unmasked = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
        mask = None
        mha = unmasked
        uy, _, _ = torch_run(SelfAttention(), theta, X, G)
        if not beyond(y, uy, by):
            fail(f"{spec}: the unmasked attention is within the bound: it cannot tell them apart")
    return worst


def main():
    rng = np.random.default_rng(2024)
    torch.manual_seed(0)
    results = []
    with tempfile.TemporaryDirectory() as d:
        for out_f, in_f, tokens in ((6, 4, 3), (5, 5, 2), (3, 7, 4)):
            results.append((f"linear:{out_f}x{in_f}", check_linear(d, out_f, in_f, tokens, rng)))
        for D, H, tokens, causal in ((4, 2, 3, False), (4, 2, 3, True), (6, 3, 4, True), (8, 1, 2, False)):
            spec = f"attention:{D}x{H}" + (":causal" if causal else "")
            results.append((spec, check_attention(d, D, H, tokens, causal, rng)))
    print(f"check-torch-attention: forward, vjp and grad theta of {len(results)} layers agree with torch "
          f"{torch.__version__} float64 within the bound (worst " +
          ", ".join(f"{s} {w:.2g}" for s, w in results) + " of it); a transposed weight and a dropped causal "
          "mask do not")


main()

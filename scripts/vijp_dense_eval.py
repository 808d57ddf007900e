"""One dense layer through `vijp eval`, for the torch comparison scripts
(check-torch-bf16.py, check-torch-ftz.py): the layer's forward on a batch,
in a vijp format, read back from its --save folder."""
import subprocess
import sys

import numpy as np


def dense_forward(vijp, who, fmt, d, W, b, X):
    """W (out × in), b (out), X (batch × in), float64 arrays; d a scratch
    folder.  The forward values (batch × out); exits naming `who` when vijp
    fails."""
    n_out, n_in = W.shape
    theta = np.concatenate([W.T.reshape(-1), b])  # dense θ: W column-major (out × in), then b
    np.save(f"{d}/theta.npy", theta.astype("<f8"))
    np.save(f"{d}/x.npy", X.astype("<f8"))
    out = f"{d}/out-{fmt.replace('+', '_').replace(':', '_')}"
    cmd = [vijp, "eval", "--layer", f"dense:{n_out}", "--width", str(n_in), "--input", f"{d}/x.npy",
           "--params", f"{d}/theta.npy", "--format", fmt, "--save", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{who}: FAILED: {' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
    return np.load(f"{out}/forward.npy")

#!/bin/sh
# The RevViT study: reversible and Moonwalk engines against backprop on a
# 64-block reversible ViT stack (embedding dim 32, 2 heads, 8 tokens: width
# 512) in bfloat16+binary32, binary16+binary32, binary32 and e4m3+binary32,
# PyTorch's default initialisation, against the validated MPFR reference.
#   sh examples/studies/revvit/run.sh [VIJP] [OUT]
# (defaults build/vijp and reports/revvit; about 90 seconds on 2 cores).
set -eu
here=$(dirname "$0")
vijp=${1:-build/vijp}
out=${2:-reports/revvit}
"$vijp" drift --net "$here/revvit-d32-l8-depth64.json" \
  --formats bfloat16+binary32,binary16+binary32,binary32,e4m3+binary32 \
  --engines reversible,moonwalk --init kaiming-uniform --seeds 1 --out "$out"

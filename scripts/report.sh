#!/usr/bin/env bash
# The main job on its embedded default, until the drift report exists:
# every engine on dense + leaky ReLU in double, binary32 and bfloat16,
# against the MPFR reference.  Writes reports/latest/ atomically per file.
set -euo pipefail
vijp=${1:-build/vijp}
out=reports/latest
mkdir -p "$out"
net=${VIJP_REPORT_NET:-dense:32,leaky:0.5}
depth=${VIJP_REPORT_DEPTH:-32}
for fmt in double binary32 bfloat16; do
  tmp=$(mktemp "$out/.grad-$fmt.XXXXXX")
  "$vijp" grad --net "$net" --depth "$depth" --batch 4 --engine all --format "$fmt" --json > "$tmp"
  mv "$tmp" "$out/grad-$fmt.json"
  "$vijp" grad --net "$net" --depth "$depth" --batch 4 --engine all --format "$fmt"
  echo
done
echo "JSON written to $out/grad-{double,binary32,bfloat16}.json"

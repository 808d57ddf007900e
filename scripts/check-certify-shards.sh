#!/usr/bin/env bash
# The certification suite's adversarial matrices spread over MPI ranks, with
# the same verdict counts as one process.
#   scripts/check-certify-shards.sh CHECK_BIN SCALE P [P ...]
# runs `CK_RUN_SUITE=certify VIJP_TEST_SCALE=SCALE CHECK_BIN` once alone, then
# under `mpirun -n P` for each P: every rank takes the cases cs with
# cs mod P = rank (tests/fixtures/testutil.c: test_shard, from mpirun's environment;
# each case draws from its own generator, so the cases are the same ones), and
# must pass its own assertions.  The ranks' tallies ("certify: NAME: N cases:
# certified in double …") are summed per name (the largest s/oracle-bound
# ratio: their maximum) and must equal the single process's, line for line.
# make check runs it at SCALE 1 (P = 2, 4); make check-long at SCALE 100
# (10^5 matrices) over the machine's cores.
set -euo pipefail
bin=$1 scale=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun_args=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun_args+=(--allow-run-as-root)

tallies() { grep -hE '^certify: .*(cases: certified|certified by κ band)' "$@" || true; }

CK_RUN_SUITE=certify VIJP_TEST_SCALE=$scale "$bin" >"$tmp/one.out" 2>"$tmp/one.err" ||
  { tail -20 "$tmp/one.err" "$tmp/one.out"; echo "check-certify-shards: FAILED: one process" >&2; exit 1; }
tallies "$tmp/one.err" >"$tmp/one.tally"
[ -s "$tmp/one.tally" ] || { echo "check-certify-shards: FAILED: no tallies in one process's output" >&2; exit 1; }

for p in "$@"; do
  rm -f "$tmp"/rank.*
  # each rank's stderr to its own file (no interleaving of the tally lines)
  if ! CK_RUN_SUITE=certify VIJP_TEST_SCALE=$scale TMPDIR_SHARDS=$tmp \
       mpirun "${mpirun_args[@]}" -n "$p" sh -c 'exec "$0" >"$TMPDIR_SHARDS/rank.$OMPI_COMM_WORLD_RANK.out" \
                                                     2>"$TMPDIR_SHARDS/rank.$OMPI_COMM_WORLD_RANK.err"' "$bin"; then
    tail -20 "$tmp"/rank.*; echo "check-certify-shards: FAILED: P = $p: a rank's tests failed" >&2; exit 1
  fi
  [ "$(ls "$tmp"/rank.*.err | wc -l)" -eq "$p" ] || { echo "check-certify-shards: FAILED: P = $p: not every rank ran" >&2; exit 1; }
  tallies "$tmp"/rank.*.err | python3 -c '
import re, sys
line = re.compile(r"^certify: (.*): (\d+) cases: certified in double (\d+), in MPFR (\d+) \(106:(\d+) 212:(\d+) 424:(\d+) "
                  r"848:(\d+) 1696:(\d+) 3392:(\d+)\), not-submersive (\d+) \((\d+) proven\), inconclusive (\d+); "
                  r"largest s/oracle bound (\S+) over (\d+) bounded certificates$")
band = re.compile(r"^certify: (.*): certified by κ band: \[1,1e5\) (\d+)/(\d+), \[1e5,1e12\) (\d+)/(\d+), "
                  r"\[1e12,1e16\) (\d+)/(\d+), \[1e16,∞\) (\d+)/(\d+)$")
tot, bands, order = {}, {}, []
for l in sys.stdin.read().splitlines():
    m = line.match(l)
    if m:
        name, v = m.group(1), [int(x) for x in m.groups()[1:13]] + [m.group(14), int(m.group(15))]
        if name not in tot:
            tot[name] = [0] * 12 + ["0", 0]
            order.append(("t", name))
        t = tot[name]
        for i in range(12): t[i] += v[i]
        t[12] = max(t[12], v[12], key=float)
        t[13] += v[13]
        continue
    m = band.match(l)
    if not m: sys.exit("unparsed tally: " + l)
    name = m.group(1)
    if name not in bands:
        bands[name] = [0] * 8
        order.append(("b", name))
    bands[name] = [a + int(b) for a, b in zip(bands[name], m.groups()[1:])]
for kind, name in sorted(order, key=lambda k: k[1]):
    if kind == "t":
        t = tot[name]
        print("certify: %s: %d cases: certified in double %d, in MPFR %d (106:%d 212:%d 424:%d 848:%d 1696:%d 3392:%d), "
              "not-submersive %d (%d proven), inconclusive %d; largest s/oracle bound %s over %d bounded certificates"
              % (name, *t))
    else:
        print("certify: %s: certified by κ band: [1,1e5) %d/%d, [1e5,1e12) %d/%d, [1e12,1e16) %d/%d, [1e16,∞) %d/%d"
              % (name, *bands[name]))
' >"$tmp/sum.tally"
  python3 -c '
import sys
a, b = (sorted(open(f).read().splitlines()) for f in sys.argv[1:])
sys.exit(0 if a == b else 1)' "$tmp/one.tally" "$tmp/sum.tally" ||
    { diff <(sort "$tmp/one.tally") <(sort "$tmp/sum.tally") || true
      echo "check-certify-shards: FAILED: P = $p: the ranks' summed verdicts differ from one process's" >&2; exit 1; }
  echo "check-certify-shards: P = $p: the same verdict counts as one process ($(awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "cases:") s += $i} END {print s}' "$tmp/one.tally") matrices, scale $scale)"
done

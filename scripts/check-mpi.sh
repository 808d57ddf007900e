#!/usr/bin/env bash
# A small drift study under mpirun (src/mpi/mpi.h) against the same
# study run as one process: byte for byte the same report (every file:
# drift.json, the CSVs, report.md, the plots, the manifest) at P = 1, 2 and
# 4; a run killed midway (rank 0 SIGKILLed after some curves) resumed with
# --resume at another P; a run whose rank 2 dies: rank 0 names the curve it
# had, nothing is written, and a serial --resume finishes it; a curve that
# fails on some rank: exit 1 naming it, nothing written; vijp certify's
# samples over ranks print what one process prints.
#
# Usage: scripts/check-mpi.sh [VIJP]   (default: build/vijp beside scripts/)
# Run by `make check` in a build with MPI; about 20 s on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
vijp=$(realpath "${1:-${VIJP_BIN:-$root/build/vijp}}")
command -v mpirun >/dev/null || { echo "check-mpi: SKIPPED (no mpirun; scripts/install-deps.sh installs openmpi-bin)"; exit 0; }
mpirun=(mpirun --oversubscribe)
# Open MPI refuses root unless told (containers, CI runners often are root).
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)

work=$(mktemp -d "${TMPDIR:-/tmp}/vijp-mpi-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

# 2 nets × 4 formats × 3 seeds = 24 curves: an emulated format, double,
# mpfr:P, bfloat16; Moonwalk and the reversible engine.  Every run writes
# --out out with the same options, so even the command the report records
# is the same.
study=(--net dense:8,tanh --net dense:8,leaky:0.5 --depth 12 --formats binary32,double,mpfr:64,bfloat16
       --seeds 1,2,3 --engines moonwalk,reversible -q --out out)
fail() { echo "check-mpi: FAILED: $*" >&2; exit 1; }
same() { diff -r ref out >/dev/null || { diff -r ref out | head -20 >&2; fail "$1: the report differs from the single process's"; }; }

"$vijp" drift "${study[@]}" || fail "the single-process run"
mv out ref
for p in 1 2 4; do
  "${mpirun[@]}" -n $p "$vijp" drift "${study[@]}" || fail "mpirun -n $p"
  same "P = $p"
  [ ! -e .out.vijp-units ] || fail "P = $p left its units"
  rm -rf out
  echo "check-mpi: P = $p: the same report, byte for byte"
done

# Rank 0 killed after keeping 6 curves (mpirun then ends the others):
# nothing at out, the curves kept; resumed at P = 2.
rc=0
VIJP_KILL_AFTER_UNITS=6 "${mpirun[@]}" -x VIJP_KILL_AFTER_UNITS -n 3 "$vijp" drift "${study[@]}" >/dev/null 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "the run to be killed finished"
[ ! -e out ] || fail "a killed run left a report folder"
kept=$(ls .out.vijp-units | grep -c '^unit-[0-9]*$' || true)
[ "$kept" -ge 6 ] || fail "only $kept curves kept by the killed run"
"${mpirun[@]}" -n 2 "$vijp" drift "${study[@]}" --resume || fail "mpirun -n 2 --resume"
same "killed and resumed"
echo "check-mpi: killed after $kept curves at P = 3, resumed at P = 2: the same report"

# Rank 2 dies (SIGKILL as it gets its second curve): rank 0 names the curve
# it had; nothing is written; one process resumes it.
# Rank 0 names it from its signal handler once mpirun ends it; mpirun can
# stop forwarding rank 0's stderr before that line arrives (seen once in
# about ten runs of make check, never alone), so up to three tries, each of
# which must fail cleanly, and one must show the name.
named=0
for try in 1 2 3; do
  rm -rf out .out.vijp-units
  rc=0
  VIJP_KILL_RANK=2 "${mpirun[@]}" -x VIJP_KILL_RANK -n 3 "$vijp" drift "${study[@]}" >/dev/null 2>err || rc=$?
  [ $rc -ne 0 ] || fail "the run whose rank 2 died succeeded"
  [ ! -e out ] || fail "a run with a dead rank left a report folder"
  if grep -q "rank 2: dense:8,[a-z:.0-9]* (orthogonal), [a-z0-9:]*, seed [0-9]" err; then named=1; break; fi
  echo "check-mpi: try $try: mpirun dropped rank 0's message naming rank 2's curve" >&2
done
[ $named -eq 1 ] || { cat err >&2; fail "rank 0 did not name rank 2's curve"; }
[ ! -e out ] || fail "a run with a dead rank left a report folder"
"$vijp" drift "${study[@]}" --resume || fail "--resume after a dead rank"
same "a dead rank, resumed"
echo "check-mpi: a dead rank named with its curve, resumed by one process: the same report"

# A curve that fails (binary16 overflows weights scaled by 1e5): exit 1
# naming it, whichever rank had it; nothing written.
rm -rf out
rc=0
"${mpirun[@]}" -n 3 "$vijp" drift --net dense:8,leaky:0.5 --depth 12 --init scaled:1e5 --formats double,binary16 \
  --seeds 1,2 -q --out out >/dev/null 2>err || rc=$?
[ $rc -eq 1 ] || { cat err >&2; fail "a failing curve: exit $rc, not 1"; }
grep -q "binary16, seed [12]: parameters of layer 1 in binary16" err || { cat err >&2; fail "the failing curve is not named"; }
[ ! -e out ] || fail "a failed run left a report folder"
echo "check-mpi: a failing curve: exit 1 naming it, nothing written"
# vijp certify's samples shared over ranks: the same table and JSON, and
# the same exit status (relu: some samples not submersive, exit 1).
for args in "--layer tanh --width 8 --samples 24" "--layer dense:6 --width 8 --samples 20 --json" \
            "--layer relu --width 6 --samples 20"; do
  rc1=0; "$vijp" certify $args >one.out 2>&1 || rc1=$?
  for p in 2 4; do
    rcp=0; "${mpirun[@]}" -n $p "$vijp" certify $args >many.out 2>many.err || rcp=$?
    [ $rcp -eq $rc1 ] || { cat many.err >&2; fail "certify $args: exit $rcp at P = $p, $rc1 alone"; }
    cmp -s one.out many.out || { diff one.out many.out | head >&2; fail "certify $args: P = $p prints otherwise"; }
  done
done
echo "check-mpi: certify at P = 2, 4: the same certificates, byte for byte"
echo "check-mpi: OK"

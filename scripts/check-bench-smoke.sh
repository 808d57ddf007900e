#!/bin/sh
# make check: every benchmark program given as an argument runs to the end
# under --smoke (its smallest sizes, every path it measures: bench/bench.h)
# and exits 0.  make bench itself takes over half an hour and CI does not
# run it: a benchmark that crashed (bench-narrow once did, on a NULL it was
# handed) was found only by whoever ran make bench next.  The benchmarks
# that run the vijp command (usage "[VIJP") get VIJP, the first argument.
# Each run is bounded by a timeout; the figures printed are not read.
# Usage: check-bench-smoke.sh VIJP BENCH...
set -u
vijp=$1
shift
failed=0
count=$#
for b in "$@"; do
    usage=$(timeout 60 "$b" --help 2>/dev/null)
    case $usage in
    *"[--smoke]"*) ;;
    *) echo "FAIL: $b --help does not offer --smoke"; failed=1; continue ;;
    esac
    with_vijp=
    case $usage in
    *"[VIJP"*) with_vijp=$vijp ;;
    esac
    out=$(timeout 120 "$b" --smoke $with_vijp 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $b --smoke $with_vijp exited $rc; its last lines:"
        printf '%s\n' "$out" | tail -n 5
        failed=1
    elif ! printf '%s\n' "$out" | head -n 1 | grep -q -- '--smoke: the smallest sizes'; then
        echo "FAIL: $b did not say first that it ran the smoke sizes"
        failed=1
    fi
done
[ $failed -eq 0 ] && echo "check-bench-smoke: $count benchmark programs ran to the end at their smallest sizes"
exit $failed

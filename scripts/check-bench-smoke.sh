#!/bin/sh
# make check: every benchmark program given as an argument runs to the end
# under --smoke (small sizes, every path it measures: bench/bench.h)
# and exits 0.  make bench itself takes over half an hour and CI does not
# run it: a benchmark that crashed (bench-narrow once did, on a NULL it was
# handed) was found only by whoever ran make bench next.  The benchmarks
# that run the vijp command (usage "[VIJP") get VIJP, the first argument.
# Each run is bounded by a timeout; the figures printed are not read, and
# what a library prints on stderr as it loads does not count.
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
    errors=$(mktemp) || exit 1
    case $usage in
    *"[VIJP"*) out=$(timeout 120 "$b" --smoke "$vijp" 2>"$errors") ;;
    *) out=$(timeout 120 "$b" --smoke 2>"$errors") ;;
    esac
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $b --smoke exited $rc; its last lines (stdout, then stderr):"
        printf '%s\n' "$out" | tail -n 5
        tail -n 5 "$errors"
        failed=1
    elif ! printf '%s\n' "$out" | head -n 1 | grep -q -- '--smoke: small sizes'; then
        echo "FAIL: $b did not say first that it ran the smoke sizes"
        failed=1
    fi
    rm -f "$errors"
done
programs=programs
[ "$count" -eq 1 ] && programs=program
[ $failed -eq 0 ] && echo "check-bench-smoke: $count benchmark $programs ran to the end at small sizes"
exit $failed

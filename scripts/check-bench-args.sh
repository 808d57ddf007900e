#!/bin/sh
# make check: every benchmark program given as an argument answers --help
# (usage on stdout, exit 0) and refuses what it does not take (usage on
# stderr, exit 2) before it measures anything.  A count it takes (REPS,
# MAX_ELEMENTS) must be a whole number in range: bench-engines once read
# "--help" as 0 repetitions and printed PASS for times it never measured.
# Each call is bounded by a timeout, so one that starts measuring fails
# instead of running for minutes.
# Their words too: what a benchmark prints (its usage, its targets and
# verdicts) and says in its source (bench/NAME.c for build/bench-NAME) names
# targets in the product's terms, never an issue of the tracker: a verdict
# labelled with a tracker number means nothing to whoever reads the output.
set -u
failed=0
expect() { # expect RC PROGRAM ARGS...: run it, fail unless it exits RC
    want=$1
    shift
    timeout 60 "$@" >/dev/null 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $* exited $got, expected $want"
        failed=1
    fi
}
for b in "$@"; do
    usage=$(timeout 60 "$b" --help 2>/dev/null)
    rc=$?
    case $usage in
    "Usage: "*) ;;
    *) echo "FAIL: $b --help exited $rc without a usage line on stdout"; failed=1; continue ;;
    esac
    [ $rc -eq 0 ] || { echo "FAIL: $b --help exited $rc"; failed=1; }
    name=$(basename "$b")
    src="$(dirname "$0")/../bench/${name#bench-}.c"
    [ -f "$src" ] || { echo "FAIL: no source $src for $b"; failed=1; }
    if printf '%s\n' "$usage" | grep -i -q '\<issue'; then
        echo "FAIL: $b --help names an issue: $usage"; failed=1
    fi
    if [ -f "$src" ] && grep -n -i '\<issue' "$src"; then
        echo "FAIL: $src names issues (above): say what the target is instead"; failed=1
    fi
    expect 2 "$b" --bogus
    expect 2 "$b" x y z
    case $usage in
    *"[REPS]"* | *"[MAX_ELEMENTS]"*)
        for bad in 0 -1 3x "" 99999999999999999999; do expect 2 "$b" "$bad"; done ;;
    esac
    case $usage in
    *"[MAXWIDTH]"*) # refused before VIJP runs (bench-drift-width once read "1024x" as 1024)
        for bad in 1024x x -1 "" 99999999999999999999; do expect 2 "$b" /bin/false "$bad"; done ;;
    esac
done
[ $failed -eq 0 ] && echo "check-bench-args: $# benchmark programs: --help answered, bad arguments refused, no issue named"
exit $failed

#!/usr/bin/env bash
# Check that the README's examples still say what the command prints.
#
# An example is an indented block in README.md whose first line is
#     $ build/vijp ARGS
# followed by the output shown for it (indented lines, blank lines allowed),
# up to the next unindented line.  Each example is run from the repository
# root, with build/vijp replaced by $VIJP_BIN when that is set (make check
# sets it, so a sanitized check runs the sanitized command), and must
#   * exit with status 0, and
#   * print output of the same shape as the README shows: line for line, after
#     every number is replaced by '#' and runs of spaces by one space.  A line
#     "..." in the README stands for any number of output lines (an elision).
# Numbers are masked because double results may differ in the last digits
# between machines; the lines, their words and their count may not.
#
# Usage: scripts/check-readme.sh [README]   (default: README.md beside scripts/)
# Exit status: 0 every example matches; 1 some example does not, or the
# README has no example; 2 bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readme=${1:-$root/README.md}
[ $# -le 1 ] || { echo "usage: $0 [README]" >&2; exit 2; }
[ -r "$readme" ] || { echo "check-readme: cannot read $readme" >&2; exit 2; }
vijp=${VIJP_BIN:-$root/build/vijp}
[ -x "$vijp" ] || { echo "check-readme: no command at $vijp (run make first, or set VIJP_BIN)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/vijp-readme-XXXXXX")
trap 'rm -rf "$work"' EXIT

# Split the README into $work/N.cmd (the command) and $work/N.want (its output).
awk -v dir="$work" '
  function close_example() {
    if (n == 0) return
    while (nw > 0 && want[nw] == "") nw--          # trailing blank lines
    f = dir "/" n ".want"
    printf "" > f
    for (i = 1; i <= nw; i++) print want[i] > f
    close(f)
    in_ex = 0
  }
  /^    \$ build\/vijp( |$)/ {
    close_example()
    n++; in_ex = 1; nw = 0
    f = dir "/" n ".cmd"
    print substr($0, 7) > f
    close(f)
    next
  }
  in_ex && ($0 == "" || substr($0, 1, 4) == "    ") { want[++nw] = substr($0, 5); next }
  in_ex { close_example() }
  END { close_example(); print n + 0 > (dir "/count") }
' "$readme"

count=$(cat "$work/count")
if [ "$count" -eq 0 ]; then
  echo "check-readme: no example ('    \$ build/vijp ...') found in $readme" >&2
  exit 1
fi

# The shape of a text: numbers as '#' (not digits inside a word such as
# binary32 or bfloat16), runs of blanks as one space, no trailing blanks.
shape() {
  LC_ALL=C sed -E \
    -e 's/(^|[^[:alnum:]_])[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?/\1#/g' \
    -e 's/[[:space:]]+/ /g' -e 's/ $//' "$1"
}

# Does output shape $2 match wanted shape $1, where a wanted line "..." stands
# for any number of lines?  Prints the first mismatch when it does not.
match() {
  awk '
    NR == FNR { w[++nw] = $0; next }
    { o[++no] = $0 }
    function m(i, j,   k) {              # wanted from line i, output from line j
      if (i > nw) {
        if (j <= no && (i > bi || (i == bi && j > bj))) { bi = i; bj = j }
        return j > no
      }
      if (w[i] == "...") {
        for (k = j; k <= no + 1; k++) if (m(i + 1, k)) return 1
        return 0
      }
      if (j > no || w[i] != o[j]) {
        if (i > bi || (i == bi && j > bj)) { bi = i; bj = j }
        return 0
      }
      return m(i + 1, j + 1)
    }
    END {
      if (m(1, 1)) exit 0
      if (bi == 0) { bi = 1; bj = 1 }
      if (bi <= nw) printf "  README line %d (shape): %s\n", bi, w[bi]
      else          printf "  README example ended after %d lines\n", nw
      if (bj <= no) printf "  output line %d (shape): %s\n", bj, o[bj]
      else          printf "  output ended after %d lines\n", no
      exit 1
    }
  ' "$1" "$2"
}

failed=0
for ((k = 1; k <= count; k++)); do
  cmd=$(cat "$work/$k.cmd")
  run=${cmd/#build\/vijp/\"\$VIJP_EXAMPLE_BIN\"}
  status=0
  (cd "$root" && VIJP_EXAMPLE_BIN=$vijp bash -c "$run") >"$work/$k.out" 2>"$work/$k.err" </dev/null || status=$?
  if [ "$status" -ne 0 ]; then
    echo "check-readme: FAIL \$ $cmd: exit status $status, want 0" >&2
    sed 's/^/  stderr: /' "$work/$k.err" | head -5 >&2
    failed=$((failed + 1))
    continue
  fi
  shape "$work/$k.want" >"$work/$k.want.shape"
  shape "$work/$k.out" >"$work/$k.out.shape"
  if ! match "$work/$k.want.shape" "$work/$k.out.shape" >"$work/$k.why"; then
    echo "check-readme: FAIL \$ $cmd: output differs from the README's example" >&2
    cat "$work/$k.why" >&2
    failed=$((failed + 1))
    continue
  fi
  echo "check-readme: ok   \$ $cmd"
done

if [ "$failed" -ne 0 ]; then
  echo "check-readme: $failed of $count README examples do not match the command" >&2
  exit 1
fi
echo "check-readme: all $count README examples match the command"

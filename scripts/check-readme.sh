#!/usr/bin/env bash
# Check that the examples in the documentation still say what the command
# prints: README.md, CONTRIBUTING.md and every docs/*.md.
#
# An example is an indented block whose first line is
#     $ build/vijp ARGS
# (or "$ build/vijp-perturbed ARGS", the test build with one ulp more on
# every vijp), followed by the output shown for it (indented lines, blank
# lines allowed), up to the next unindented line.  Each example is run with
# bash from the repository root and must
#   * exit with status 0, or with N when the last line shown is
#     "(exit status N)" (that line is not part of the output), and
#   * print on stdout output of the same shape as the example shows: line for
#     line, after every number is replaced by '#' and runs of spaces by one
#     space.  A line "..." in the example stands for any number of output
#     lines (an elision).  Standard error is not compared.
# Numbers are masked because double results may differ in the last digits
# between machines; the lines, their words and their count may not.
#
# In an example's command,
#   * build/vijp at its start is $VIJP_BIN when that is set (make check sets
#     it, so a sanitized check runs the sanitized command), and any other
#     path starting with build/ (build/vijp-perturbed, build/plugins/X.so)
#     is taken from the folder of $VIJP_BIN;
#   * /tmp/vijp-example is a scratch folder of this run, made empty for each
#     file, so that the examples of one file can use what an earlier one
#     wrote there, parallel runs do not collide and nothing is left behind.
# Both are written back in the output before it is compared, so an example
# shows the paths a reader would type.  An example that names a program or
# file under build/ that was not built fails, saying so.
#
# Usage: scripts/check-readme.sh [FILE...]
#   (default: README.md, CONTRIBUTING.md and docs/*.md beside scripts/)
# Exit status: 0 every example matches; 1 some example does not, or the files
# hold no example at all; 2 bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "usage: $0 [FILE...]" >&2; exit 2 ;;
esac
if [ $# -eq 0 ]; then
  files=("$root/README.md")
  if [ -e "$root/CONTRIBUTING.md" ]; then files+=("$root/CONTRIBUTING.md"); fi
  for f in "$root"/docs/*.md; do
    if [ -e "$f" ]; then files+=("$f"); fi
  done
else
  files=("$@")
fi
for f in "${files[@]}"; do
  [ -r "$f" ] || { echo "check-readme: cannot read $f" >&2; exit 2; }
done
vijp=${VIJP_BIN:-$root/build/vijp}
[ -x "$vijp" ] || { echo "check-readme: no command at $vijp (run make first, or set VIJP_BIN)" >&2; exit 2; }
vijp=$(cd "$(dirname "$vijp")" && pwd)/$(basename "$vijp")
bindir=$(dirname "$vijp")
scratch_name=/tmp/vijp-example

work=$(mktemp -d "${TMPDIR:-/tmp}/vijp-readme-XXXXXX")
trap 'rm -rf "$work"' EXIT

# A file's name as the messages give it: relative to the root when inside it.
display() {
  case "$1" in
    "$root"/*) printf '%s' "${1#"$root"/}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# Split FILE into DIR/N.cmd (the command), DIR/N.want (its output), DIR/N.line
# (the file's line of the command, then of each output line), DIR/N.status
# (the exit status it must end with) and DIR/count.
split_examples() {
  awk -v dir="$2" '
    function close_example(   f, i, status) {
      if (n == 0 || !in_ex) return
      while (nw > 0 && want[nw] == "") nw--          # trailing blank lines
      status = 0
      if (nw > 0 && want[nw] ~ /^\(exit status [0-9]+\)$/) {
        status = want[nw]; gsub(/[^0-9]/, "", status); status += 0
        nw--
        while (nw > 0 && want[nw] == "") nw--
      }
      f = dir "/" n ".status"; print status > f; close(f)
      f = dir "/" n ".want"; printf "" > f
      for (i = 1; i <= nw; i++) print want[i] > f
      close(f)
      f = dir "/" n ".line"; print start > f
      for (i = 1; i <= nw; i++) print wline[i] > f
      close(f)
      in_ex = 0
    }
    /^    \$ build\/vijp(-perturbed)?( |$)/ {
      close_example()
      n++; in_ex = 1; nw = 0; start = FNR
      f = dir "/" n ".cmd"; print substr($0, 7) > f; close(f)
      next
    }
    in_ex && ($0 == "" || substr($0, 1, 4) == "    ") { want[++nw] = substr($0, 5); wline[nw] = FNR; next }
    in_ex { close_example() }
    END { close_example(); print n + 0 > (dir "/count") }
  ' "$1"
}

# The shape of a text: numbers as '#' (not digits inside a word such as
# binary32 or bfloat16), runs of blanks as one space, no trailing blanks.
shape() {
  LC_ALL=C sed -E \
    -e 's/(^|[^[:alnum:]_])[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?/\1#/g' \
    -e 's/[[:space:]]+/ /g' -e 's/ $//' "$1"
}

# Does output shape $2 match wanted shape $1, where a wanted line "..." stands
# for any number of lines?  Prints the first mismatch when it does not, with
# the documentation's line numbers from $3 (the example's first line first).
match() {
  awk -v lines="$3" -v name="$4" '
    BEGIN { while ((getline l < lines) > 0) ln[k++] = l }
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
      if (bi <= nw) printf "  %s:%d (shape): %s\n", name, ln[bi], w[bi]
      else          printf "  %s: the example ends at line %d\n", name, nw ? ln[nw] : ln[0]
      if (bj <= no) printf "  output line %d (shape): %s\n", bj, o[bj]
      else          printf "  output ended after %d lines\n", no
      exit 1
    }
  ' "$1" "$2"
}

# The command as bash runs it: build/vijp at its start the command under
# test, any other build/ path from its folder, /tmp/vijp-example the scratch
# (as variables bash expands when it runs the command, hence single quotes).
# shellcheck disable=SC2016
runnable() {
  printf '%s\n' "$1" | sed -E \
    -e 's#^build/vijp( |$)#"$VIJP_EXAMPLE_BIN"\1#' \
    -e 's#(^|[[:space:]=(])build/#\1"$VIJP_EXAMPLE_BUILD"/#g' \
    -e 's#(^|[[:space:]=(])/tmp/vijp-example(/|[[:space:]]|$)#\1"$VIJP_EXAMPLE_TMP"\2#g'
}

# Output with the scratch folder and the build folder written back.
unrewrite() {
  local text
  text=$(cat "$1"; printf x)
  text=${text%x}
  text=${text//"$2"/"$scratch_name"}
  text=${text//"$vijp"/build/vijp}
  text=${text//"$bindir/"/build/}
  printf '%s' "$text"
}

# A command shown in more than one place (the README and a guide) runs once:
# each place's output is compared with that run.  Only a command that names
# no scratch path: those depend on what the file's earlier examples wrote.
# Under the sanitizers the three such commands cost the cli suite 9 s.
declare -A ran
total=0 failed=0 nfiles=0
for ((fi = 0; fi < ${#files[@]}; fi++)); do
  file=${files[$fi]}
  name=$(display "$file")
  dir=$work/$fi
  mkdir -p "$dir"
  split_examples "$file" "$dir"
  count=$(cat "$dir/count")
  [ "$count" -gt 0 ] || continue
  nfiles=$((nfiles + 1))
  scratch=$dir/scratch
  mkdir -p "$scratch"
  for ((k = 1; k <= count; k++)); do
    total=$((total + 1))
    cmd=$(cat "$dir/$k.cmd")
    line=$(head -1 "$dir/$k.line")
    want_status=$(cat "$dir/$k.status")
    run=$(runnable "$cmd")
    missing=
    while read -r p; do
      [ -n "$p" ] && [ "$p" != build/vijp ] && [ ! -e "$bindir/${p#build/}" ] && missing="$missing $p"
    done < <(printf '%s\n' "$cmd" | grep -oE '(^|[[:space:]=(])build/[^[:space:];|&)]+' | sed -E 's/^[[:space:]=(]//')
    if [ -n "$missing" ]; then
      echo "check-readme: FAIL $name:$line \$ $cmd: needs$missing, not built in $bindir" \
           "(make check builds vijp-perturbed and plugins/; make plugins the plugins)" >&2
      failed=$((failed + 1))
      continue
    fi
    status=0 same=
    if [[ $cmd != */tmp/vijp-example* && -n ${ran[$cmd]:-} ]]; then
      read -r prev same <<<"${ran[$cmd]}"
      cp "$prev.raw" "$dir/$k.raw" && cp "$prev.err" "$dir/$k.err" && status=$(cat "$prev.rc")
      same=" (output of the same command at $same)"
    else
      (cd "$root" && VIJP_EXAMPLE_BIN=$vijp VIJP_EXAMPLE_BUILD=$bindir VIJP_EXAMPLE_TMP=$scratch bash -c "$run") \
        >"$dir/$k.raw" 2>"$dir/$k.err" </dev/null || status=$?
      echo "$status" >"$dir/$k.rc"
      if [[ $cmd != */tmp/vijp-example* ]]; then ran[$cmd]="$dir/$k $name:$line"; fi
    fi
    if [ "$status" -ne "$want_status" ]; then
      echo "check-readme: FAIL $name:$line \$ $cmd: exit status $status, want $want_status" >&2
      unrewrite "$dir/$k.err" "$scratch" | sed 's/^/  stderr: /' | head -5 >&2
      failed=$((failed + 1))
      continue
    fi
    unrewrite "$dir/$k.raw" "$scratch" >"$dir/$k.out"
    shape "$dir/$k.want" >"$dir/$k.want.shape"
    shape "$dir/$k.out" >"$dir/$k.out.shape"
    if ! match "$dir/$k.want.shape" "$dir/$k.out.shape" "$dir/$k.line" "$name" >"$dir/$k.why"; then
      echo "check-readme: FAIL $name:$line \$ $cmd: output differs from the example" >&2
      cat "$dir/$k.why" >&2
      failed=$((failed + 1))
      continue
    fi
    echo "check-readme: ok   $name:$line \$ $cmd$same"
  done
  rm -rf "$scratch"
done

if [ "$total" -eq 0 ]; then
  echo "check-readme: no example ('    \$ build/vijp ...') found in ${files[*]}" >&2
  exit 1
fi
if [ "$failed" -ne 0 ]; then
  echo "check-readme: $failed of $total examples in $nfiles files do not match the command" >&2
  exit 1
fi
echo "check-readme: all $total examples match in $nfiles files"

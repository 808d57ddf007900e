#!/bin/sh
# check-gpu-check: the paths of scripts/gpu-check.sh and scripts/gpu-bundle.sh
# that a machine without a GPU can take (make check runs it in a CUDA build):
#   1. a bundle holds every library its programs load but glibc's, CUDA's and
#      libstdc++/libgcc_s, and they are the ones loaded with its lib/ first;
#   2. building here, and from that bundle: no GPU, so exit 77, reason said;
#   3. a missing or corrupt bundle: exit 1, nothing run;
#   4. a failing step stops the check, or with GPU_CHECK_KEEP_GOING=1 does
#      not (a bundle whose check_cuda fails).
# On a machine with a usable GPU, step 2 runs the whole GPU check instead.
# Usage: scripts/check-gpu-check.sh (from a tree where make built with CUDA)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "check-gpu-check: FAIL: $*"
  exit 1
}
# run NAME [VAR=VALUE...]: gpu-check.sh with logs in $tmp/NAME, status in $rc
run() {
  name=$1
  shift
  env OUT="$tmp/$name" "$@" sh scripts/gpu-check.sh > "$tmp/$name.out" 2>&1
  rc=$?
}
has() { grep -q -- "$2" "$tmp/$1/summary.txt" || fail "$1: no '$2' in its summary: $(cat "$tmp/$1/summary.txt")"; }

# 1. The bundle and its libraries.
scripts/gpu-bundle.sh "$tmp/b.tar.gz" > "$tmp/bundle.out" 2>&1 || fail "gpu-bundle.sh: $(cat "$tmp/bundle.out")"
mkdir "$tmp/x" && tar -C "$tmp/x" -xf "$tmp/b.tar.gz" || fail "cannot unpack the bundle"
for p in check_cuda check_vijp vijp bench-gpu libvijp-cuda.so tc-gemm commit; do
  [ -s "$tmp/x/build/$p" ] || fail "the bundle has no build/$p"
done
n=0
for p in check_cuda check_vijp vijp bench-gpu libvijp-cuda.so tc-gemm; do
  LD_LIBRARY_PATH="$tmp/x/lib" ldd "$tmp/x/build/$p" > "$tmp/ldd" || fail "ldd $p"
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*|libcu*|libnvJitLink*) continue ;;
    esac
    case $path in
      "$tmp/x/lib/$name") n=$((n + 1)) ;;
      *) fail "$p loads $name from $path, not from the bundle ($rest)" ;;
    esac
  done < "$tmp/ldd"
done
[ "$n" -gt 10 ] || fail "only $n libraries came from the bundle"

# 2. No GPU: 77 with the reason, built here and from the bundle.
run built
if [ "$rc" -eq 0 ]; then
  echo "check-gpu-check: a GPU is usable here and scripts/gpu-check.sh passed on it; the no-GPU paths were not run"
  exit 0
fi
[ "$rc" -eq 77 ] || fail "built here: exit $rc, not 77: $(tail -n 20 "$tmp/built.out")"
has built "tests: ok"
has built "SKIPPED: no usable GPU"
run bundled GPU_CHECK_BUNDLE="$tmp/b.tar.gz"
[ "$rc" -eq 77 ] || fail "from the bundle: exit $rc, not 77: $(tail -n 20 "$tmp/bundled.out")"
has bundled "bundle: built at $(cat "$tmp/x/build/commit")"
has bundled "libraries: /"
has bundled "SKIPPED: no usable GPU"

# 3. A missing or corrupt bundle.
run missing GPU_CHECK_BUNDLE="$tmp/none.tar.gz"
[ "$rc" -eq 1 ] || fail "missing bundle: exit $rc, not 1"
has missing "FAILED: no bundle"
head -c 1000 "$tmp/b.tar.gz" > "$tmp/cut.tar.gz"
run corrupt GPU_CHECK_BUNDLE="$tmp/cut.tar.gz"
[ "$rc" -eq 1 ] || fail "corrupt bundle: exit $rc, not 1"
has corrupt "FAILED: cannot unpack"
! grep -q "tests:" "$tmp/corrupt/summary.txt" || fail "corrupt bundle: a step ran"

# 4. A failing step: a bundle whose check_cuda exits 3.
mkdir -p "$tmp/y/build" && cp -R "$tmp/x/lib" "$tmp/y/" && cp "$tmp/x/build/"* "$tmp/y/build/" &&
  printf '#!/bin/sh\necho broken on purpose\nexit 3\n' > "$tmp/y/build/check_cuda" && chmod +x "$tmp/y/build/check_cuda" &&
  tar -C "$tmp/y" -czf "$tmp/broken.tar.gz" build lib || fail "cannot make the broken bundle"
run stop GPU_CHECK_BUNDLE="$tmp/broken.tar.gz"
[ "$rc" -eq 1 ] || fail "failing step: exit $rc, not 1"
has stop "tests: FAILED (exit 3)"
! grep -q "set-kernels" "$tmp/stop/summary.txt" || fail "a step ran after the failed one"
run keep GPU_CHECK_BUNDLE="$tmp/broken.tar.gz" GPU_CHECK_KEEP_GOING=1
[ "$rc" -eq 1 ] || fail "failing step, keep going: exit $rc, not 1"
has keep "tests: FAILED (exit 3)"
has keep "set-kernels: ok"
echo "check-gpu-check: ok (bundle of $n library loads; no GPU: exit 77; bad bundles and a failed step: exit 1)"

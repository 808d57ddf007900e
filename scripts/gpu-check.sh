#!/bin/sh
# gpu-check: on a machine with an NVIDIA GPU, from a bare checkout: build vijp
# with CUDA, run the CUDA test suite (CK_RUN_SUITE=cuda), the kernel-set
# suites with the CUDA set loaded (kernels, b32set, mixedset: its entries
# against the MPFR oracles and ref) and the GPU benchmark, print a summary.  About 3-8 minutes (the build is most of it).
#   scripts/gpu-check.sh            logs in build/gpu-check/, or in $OUT if set
#   JOBS=1 scripts/gpu-check.sh     build with one job (default: every core)
#   GPU_CHECK_BUNDLE=A scripts/gpu-check.sh   use the binaries and libraries
#       that scripts/gpu-bundle.sh packed into archive A on another machine
#       (for a GPU machine with CUDA but no network to install MPFR & co.)
#   GPU_CHECK_KEEP_GOING=1          run every step even after one fails
#   GPU_CHECK_TC=0                  skip the tensor-core models' check
#       (cuBLAS GEMMs against STORE+tc:ARCH, step 6b)
#   GPU_CHECK_SANITIZE=1            also run the CUDA suite under
#       compute-sanitizer's memcheck (out-of-bounds and misaligned accesses)
# Exit status: 0 all passed; 1 a step failed (its log's tail is printed);
# 77 no usable GPU here (the host-side tests still ran; nothing was tested on
# a GPU, so this is not a pass).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
logs=${OUT:-$root/build/gpu-check}
mkdir -p "$logs"
summary=$logs/summary.txt
: > "$summary"
t_start=$(date +%s)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)} # JOBS=1 on a shared machine

say() { echo "gpu-check: $*" | tee -a "$summary"; }
elapsed() { echo $(( $(date +%s) - t_start ))s; }
# step NAME SECONDS COMMAND...: run with a time limit, log to $logs/NAME.log
step() {
  name=$1 limit=$2
  shift 2
  t0=$(date +%s)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    say "$name: ok ($(( $(date +%s) - t0 ))s)"
    return 0
  fi
  [ "$rc" -eq 124 ] && say "$name: FAILED: over its ${limit}s limit" || say "$name: FAILED (exit $rc)"
  tail -n 40 "$logs/$name.log" | sed 's/^/  | /'
  say "log: $logs/$name.log; total $(elapsed)"
  [ "${GPU_CHECK_KEEP_GOING:-0}" = 1 ] || exit 1
  failed="$failed $name"
  return 1
}
failed=

# 1. The GPU, as the driver sees it (informational: the test suite decides).
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader > "$logs/nvidia-smi.log" 2>&1 ||
    nvidia-smi -L > "$logs/nvidia-smi.log" 2>&1
  say "nvidia-smi: $(head -n 1 "$logs/nvidia-smi.log")"
else
  say "nvidia-smi: not installed"
fi

NVCC=$(command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
bin=$root/build # the programs under test
if [ -n "${GPU_CHECK_BUNDLE:-}" ]; then
  # 2-3. Prebuilt: unpack, load the bundled libraries first, and find the
  # CUDA libraries the binaries ask for wherever this machine keeps them.
  [ -r "$GPU_CHECK_BUNDLE" ] || { say "FAILED: no bundle at $GPU_CHECK_BUNDLE"; exit 1; }
  unpack=$(mktemp -d) || exit 1
  trap 'rm -rf "$unpack"' EXIT
  if ! tar -C "$unpack" -xf "$GPU_CHECK_BUNDLE" || [ ! -x "$unpack/build/check_cuda" ]; then
    say "FAILED: cannot unpack $GPU_CHECK_BUNDLE (not an archive of scripts/gpu-bundle.sh)"
    exit 1
  fi
  bin=$unpack/build
  here=$(git rev-parse HEAD 2> /dev/null || echo unknown)
  say "bundle: built at $(cat "$bin/commit"), checkout at $(echo "$here" | cut -c1-12)"
  libpath=$unpack/lib
  for lib in $(LD_LIBRARY_PATH=$libpath ldd "$bin/check_cuda" "$bin/bench-gpu" "$bin/libvijp-cuda.so" 2> /dev/null |
               awk '$3 == "not" { print $1 }' | sort -u); do
    found=$(find /usr/local /opt /usr/lib -name "$lib" 2> /dev/null | head -n 1)
    [ -n "$found" ] || { say "FAILED: $lib not found on this machine"; exit 1; }
    libpath=$libpath:$(dirname "$found")
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "libraries: $LD_LIBRARY_PATH"
  ldd "$bin/check_cuda" | grep -E 'cublas|cusolver|cudart' | sed 's/^[[:space:]]*/gpu-check:   /' | tee -a "$summary"
else
  # 2. Build dependencies: only when something is missing (the device machine
  # may have no network; install-deps.sh then says what is missing).
  if [ -z "$NVCC" ]; then
    say "FAILED: nvcc not found (PATH, /usr/local/cuda/bin): the CUDA toolkit is needed"
    exit 1
  fi
  say "nvcc: $NVCC ($("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  missing=
  for p in mpfr lapacke openblas jansson fftw3 check; do
    pkg-config --exists "$p" 2> /dev/null || missing="$missing $p"
  done
  for h in flint/flint.h mpfi.h; do
    [ -e "/usr/include/$h" ] || missing="$missing $h"
  done
  if [ -n "$missing" ]; then
    say "missing:$missing; running scripts/install-deps.sh"
    step install-deps 300 bash scripts/install-deps.sh
  fi

  # 3. Build what the check needs (all cores: this is a machine of its own).
  step build 360 make -j"$jobs" NVCC="$NVCC" build/check_cuda build/bench-gpu build/vijp build/libvijp-cuda.so build/check_vijp \
    build/tc-gemm
  grep -q '^CUDA=1' build/cuda.cfg || { say "FAILED: the build did not enable CUDA: $(cat build/cuda.cfg)"; exit 1; }
fi

# 4. The CUDA suite.  Without a usable GPU its gpu_* tests skip with a reason.
step tests 180 env CK_VERBOSITY=verbose CK_RUN_SUITE=cuda VIJP_BIN="$bin/vijp" "$bin/check_cuda"
grep '%: Checks' "$logs/tests.log" | sed 's/^/gpu-check:   /' | tee -a "$summary"
grep '^# t-cuda gpu' "$logs/tests.log" | sed 's/^# t-cuda /gpu-check:   /' | tee -a "$summary"
skipped=$(grep -m 1 'SKIPPED' "$logs/tests.log")
if [ -n "$skipped" ]; then
  say "SKIPPED: no usable GPU, nothing ran on a GPU: ${skipped#*SKIPPED: }"
  say "total $(elapsed); logs in $logs"
  exit 77
fi

# 5. The kernel table's CUDA set (libvijp-cuda.so, loaded by libvijp) in the
# suites that test every set: t-kernels, t-b32set, t-mixedset.
for suite in kernels b32set mixedset; do
  step "set-$suite" 300 env CK_RUN_SUITE=$suite VIJP_BIN="$bin/vijp" "$bin/check_vijp"
  grep '%: Checks' "$logs/set-$suite.log" | sed "s/^/gpu-check:   $suite: /" | tee -a "$summary"
  grep -q 'cuda skipped' "$logs/set-$suite.log" && { say "FAILED: $suite skipped the CUDA set: $(grep -m 1 'cuda skipped' "$logs/set-$suite.log")"; exit 1; }
done
grep -E '^# kernels: cuda ' "$logs/set-kernels.log" | sed 's/^# /gpu-check:   /' | tee -a "$summary"

# 6. The benchmark (HBM copy bandwidth and the dgemm rate measured in the same run).
step bench 120 "$bin/bench-gpu"
head -n 1 "$logs/bench.log" | sed 's/^/gpu-check:   /' | tee -a "$summary"
grep -E ' (8388608|16777216) ' "$logs/bench.log" | sed 's/^/gpu-check:   /' | tee -a "$summary"
grep -E 'GFLOP/s|^dense ' "$logs/bench.log" | sed 's/^/gpu-check:   /' | tee -a "$summary"
# 6b. The tensor-core models (docs/formats.md, STORE+tc:ARCH): cuBLAS GEMMs
# (scripts/tc-gemm.cu; its e4m3 GEMM through cuBLASLt, sm_89+) recomputed
# in the model of this GPU's architecture, bit for bit (tests/t-tc.c, case
# gpu).  GPU_CHECK_TC=0 skips it, as does a GPU without a model (V100,
# A100, H100 and H200, B200 have one).
if [ "${GPU_CHECK_TC:-1}" = 0 ]; then
  say "tc: skipped (GPU_CHECK_TC=0)"
else
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n 1)
  case "$cap" in
    7.0) arch=v100 ;; 8.0) arch=a100 ;; 9.0) arch=h100 ;; 10.0) arch=b200 ;; *) arch= ;;
  esac
  tcbin=$bin/tc-gemm
  if [ -z "$arch" ]; then
    say "tc: skipped (no model for compute capability '$cap')"
  elif [ ! -x "$tcbin" ] && [ -z "$NVCC" ]; then
    say "tc: skipped (no nvcc to build scripts/tc-gemm.cu)"
  else
    if [ ! -x "$tcbin" ]; then
      tcbin=$logs/tc-gemm
      step tc-build 180 "$NVCC" -O2 -o "$tcbin" scripts/tc-gemm.cu -lcublasLt -lcublas
    fi
    mkdir -p "$logs/tc"
    step tc-gemm 60 "$tcbin" "$logs/tc"
    step tc-compare 180 env VIJP_TC_GEMM_DIR="$logs/tc" VIJP_TC_ARCH="$arch" CK_RUN_SUITE=tc CK_RUN_CASE=gpu \
      VIJP_BIN="$bin/vijp" "$bin/check_vijp"
    grep '^# t-tc gpu_gemm' "$logs/tc-compare.log" | sed 's/^# t-tc /gpu-check:   /' | tee -a "$summary"
  fi
fi
# 7. Optional: the CUDA suite under compute-sanitizer (unforked, so that the
# tool sees every kernel; it finds out-of-bounds and misaligned accesses).
if [ "${GPU_CHECK_SANITIZE:-0}" = 1 ]; then
  CS=$(command -v compute-sanitizer 2>/dev/null || echo "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")/compute-sanitizer")
  step sanitize 240 env CK_FORK=no CK_RUN_SUITE=cuda VIJP_BIN="$bin/vijp" "$CS" --tool memcheck --error-exitcode 3 "$bin/check_cuda"
  grep -E 'ERROR SUMMARY' "$logs/sanitize.log" | sed 's/^=* */gpu-check:   sanitize: /' | tee -a "$summary"
fi
if [ -n "$failed" ]; then
  say "FAILED:$failed; total $(elapsed); logs in $logs"
  exit 1
fi
say "PASS: CUDA suite and benchmark; total $(elapsed); logs in $logs"
exit 0

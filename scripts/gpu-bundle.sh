#!/bin/sh
# gpu-bundle: build here what scripts/gpu-check.sh runs and pack it, with the
# shared libraries it needs, into one archive for a GPU machine that has the
# CUDA toolkit and driver but none of vijp's other dependencies and no network
# to install them (MPFR, OpenBLAS, FFTW, Check, FLINT...).
#   scripts/gpu-bundle.sh [ARCHIVE]    default .gpu-bundle/vijp-gpu.tar.gz
# Then, on the GPU machine, from a checkout of the same commit:
#   GPU_CHECK_BUNDLE=ARCHIVE scripts/gpu-check.sh
# The archive holds build/{check_cuda,check_vijp,vijp,bench-gpu,
# libvijp-cuda.so,tc-gemm} (tc-gemm: step 6b's cuBLAS GEMMs, which
# gpu-check.sh would otherwise have to compile there) and lib/ with every library they load except glibc's and
# CUDA's own (the GPU machine's CUDA libraries are used: the driver must
# match them).  Binaries built against glibc 2.36 run on any newer glibc.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
archive=${1:-.gpu-bundle/vijp-gpu.tar.gz}
progs="build/check_cuda build/check_vijp build/vijp build/bench-gpu build/libvijp-cuda.so build/tc-gemm"

# shellcheck disable=SC2086 # $progs is a list
make -j"$(nproc)" $progs
grep -q '^CUDA=1' build/cuda.cfg || { echo "gpu-bundle: the build did not enable CUDA: $(cat build/cuda.cfg)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib"
# shellcheck disable=SC2086
cp $progs "$stage/build/"
git describe --always --dirty --abbrev=12 > "$stage/build/commit"
# Each dependency under the name the loader asks for (ldd's first column),
# its target copied (Debian's alternatives make libblas.so.3 a link chain).
# Left out: glibc (the machine's own, newer, is compatible), CUDA's
# libraries, and libstdc++/libgcc_s (the machine's are newer).
for f in $progs; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) continue ;;
      libcu*|libnvJitLink*|libnvrtc*) continue ;;
    esac
    cp -L "$path" "$stage/lib/$name"
  done
mkdir -p "$(dirname "$archive")"
# gzip -1: 34 MB in 2 s (xz: 17 MB in 35 s); what travels must stay under 64 MB
tar -C "$stage" -cf "$stage/bundle.tar" build lib
gzip -1 -c "$stage/bundle.tar" > "$stage/bundle.tar.gz"
mv "$stage/bundle.tar.gz" "$archive"
echo "gpu-bundle: $archive ($(du -h "$archive" | cut -f1), $(find "$stage/lib" -type f | wc -l) libraries, commit $(cat "$stage/build/commit"))"

#!/usr/bin/env bash
# Install the Debian packages vijp needs to build, test and report.
# Does nothing (and needs no network) when every package is already present.
set -euo pipefail

packages=(
  build-essential pkg-config
  libmpfr-dev libgmp-dev          # multiprecision oracles and format emulation
  libmpfi-dev                     # interval arithmetic: rigorous Jacobian enclosures (certify)
  libflint-dev                    # exact integer rank: proven rank deficiency (certify)
  liblapacke-dev libopenblas-dev  # LAPACK(E) for dense solves and factorisations
  libfftw3-dev                    # FFTs: circular convolutions' vijp and inverse
  libsleef-dev                    # vector exp, log1p, tanh, erfc of the SIMD kernels (src/kernels/simd)
  check libsubunit-dev            # the unit-test framework (libcheck) and its pkg-config deps
  libjansson-dev                  # JSON output
  gnuplot-nox                     # drift report plots (PNG and SVG)
  clang libclang-rt-dev           # libFuzzer harnesses (tests/fuzz), replayed by make check
  python3 python3-jsonschema      # make check: drift.json against docs/drift.schema.json
  python3-numpy                   # the test suite's independent .npy writer and reader (tests/t-arrays.c)
  python3-torch                   # scripts/export_torch.py and its round trip against torch.float64 (make check)
  python3-mpmath                  # make check: the exact activations scripts/check-torch-act.py rounds
  libopenmpi-dev openmpi-bin      # mpirun -n P vijp drift|report: a study over MPI ranks (make check-mpi)
  libflint-arb-dev                # make bench only: Arb's arb_dot beside the reference's dot products (bench-reference)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

# As root, apt-get runs directly (a fresh Debian machine often has no sudo);
# otherwise through sudo, which must then exist.
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and sudo is not installed; missing packages: ${missing[*]}" >&2
    echo "install-deps: run this script as root (e.g. su -c 'bash scripts/install-deps.sh'), or install sudo" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs meshsim's build dependencies from Debian 12 packages (only those missing), then
# configures the Release build in build/ and builds the targets named (run.sh: `meshsim` alone, so
# that the first run does not wait for the test suite), or everything when none is named (test.sh).
# Usage: tools/bootstrap.sh [--tests] [TARGET...]. With --tests it
# also installs what only the test suite needs: Debian's PyTorch (python3-torch), with which the
# tests run the reference trainer's PyTorch twin on the CPU and validate its trace end to end, and
# Chromium, in which they render the sweep report, and
# clang with its sanitizer and libFuzzer runtimes (clang, libclang-rt-14-dev) for the sanitizer
# build that test.sh runs (the fuzz preset). Open MPI lets sweeps and plan searches run
# over `mpirun` (the build works without it); libjs-vega draws the sweep report's plots.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ pkg-config python3
  libboost-graph-dev libsimgrid-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev libnlopt-cxx-dev libsimdjson-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libjs-vega
)
if [ "${1:-}" = "--tests" ]; then
  packages+=(python3-torch chromium clang libclang-rt-14-dev)
  shift
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "meshsim: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake --preset release >/dev/null
targets=()
for t in "$@"; do
  targets+=(--target "$t")
done
cmake --build --preset release -j "$(nproc)" "${targets[@]}"

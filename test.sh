#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build, and run the whole test suite (CTest):
# first the Release build (build/), then the sanitizer build (build-fuzz/: clang with ASan and
# UBSan, the `fuzz` preset), which runs the whole suite again under the sanitizers and a few
# seconds of each loader's libFuzzer target (the tests labelled "fuzz").
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh --tests
ctest --preset release -j "$(nproc)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
ctest --preset fuzz -j "$(nproc)"

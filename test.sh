#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build, and run the whole test suite (CTest):
# first the Release build (build/), then the sanitizer build (build-fuzz/: clang with ASan and
# UBSan, the `fuzz` preset), which runs the suite again under the sanitizers and a few
# seconds of each loader's libFuzzer target (the tests labelled "fuzz"). The sanitizer pass leaves
# out five exhaustive sweeps (the fuzz test preset in CMakePresets.json names them: the plan
# search's two against every plan simulated, three of the step lower bound's, and the whole
# published-runs set), about 380 s of the pass's CPU time; they repeat code that the rest of the
# suite runs under the sanitizers, and the Release pass runs them.
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh --tests
ctest --preset release -j "$(nproc)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
ctest --preset fuzz -j "$(nproc)"

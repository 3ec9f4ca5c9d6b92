#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build, and run the whole test suite (CTest):
# first the Release build (build/), then the sanitizer build (build-fuzz/: clang with ASan and
# UBSan, the `fuzz` preset), which runs the suite again under the sanitizers and a few
# seconds of each loader's libFuzzer target (the tests labelled "fuzz"). The sanitizer pass leaves
# out eleven tests (the fuzz test preset in CMakePresets.json names them): the plan search's two
# sweeps against every plan simulated, three of the step lower bound's sweeps, the two
# whole-set validations (validation_published, validation_committed_traces), three tests of
# Python code (the reference trainers' unit tests, 40 s under the sanitizers, the host
# microbenchmarks' smoke test, and the sweep report's rendering, 16 s), about 500 s of the pass's
# CPU time, and the documented examples
# (docs_examples: the commands README.md and docs/ show, with their output as the Release build
# prints it). They repeat code that the rest of the suite runs under the sanitizers; the Release
# pass runs them.
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh --tests
ctest --preset release -j "$(nproc)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
ctest --preset fuzz -j "$(nproc)"

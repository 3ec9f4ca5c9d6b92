#!/usr/bin/env bash
# Regenerates the golden traces and reports in tests/golden/ from the current build. Run it only
# when a change to the trace or the model is intended, then review `git diff tests/golden`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset release --target golden_trace_test meshsim
MESHSIM_UPDATE_GOLDENS=1 ./build/tests/golden/golden_trace_test --gtest_filter=Golden.TraceAndReportMatchByteForByte
git --no-pager diff --stat tests/golden || true

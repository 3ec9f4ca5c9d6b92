#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build, and run the whole test suite (CTest).
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh --tests
ctest --preset release -j "$(nproc)"

#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build the meshsim command (Release; only it,
# not the tests and benchmarks, which test.sh builds), run it. Without arguments it runs the
# default scenario; any arguments are passed to build/meshsim.
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh meshsim
exec ./build/meshsim "$@"

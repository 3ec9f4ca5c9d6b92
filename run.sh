#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build (Release), run meshsim.
# Without arguments it runs the default scenario; any arguments are passed to build/meshsim.
set -euo pipefail
cd "$(dirname "$0")"
tools/bootstrap.sh
exec ./build/meshsim "$@"

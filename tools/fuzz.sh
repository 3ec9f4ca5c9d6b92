#!/usr/bin/env bash
# Fuzzes one loader for longer than CI's smoke run (issue 15):
#
#   tools/fuzz.sh TARGET [SECONDS] [extra libFuzzer flags...]
#
# TARGET is one of model hf_config cluster chips scenario manifest profile pytorch_trace jax_trace
# sweep_spec failure_table published_runs nccl_tests_log chakra_trace
# (build-fuzz/tests/fuzz/fuzz_TARGET, built by `cmake --preset fuzz && cmake --build --preset
# fuzz`). Runs SECONDS (default 3600) with the format's dictionary, the repository's seeds and the
# committed findings, keeping what it finds in build-fuzz/fuzz/corpus/TARGET; a crash, hang,
# leak, memory past 2 GiB or sanitizer report is written under build-fuzz/fuzz/artifacts/TARGET/.
# One fuzzer at a time on a shared machine (each takes a core).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: tools/fuzz.sh TARGET [SECONDS] [libFuzzer flags...]}
seconds=${2:-3600}
shift $(($# >= 2 ? 2 : 1))
bin=build-fuzz/tests/fuzz/fuzz_${target}
if [ ! -x "$bin" ]; then
  echo "fuzz.sh: no $bin (cmake --preset fuzz && cmake --build --preset fuzz)" >&2
  exit 2
fi
mkdir -p "build-fuzz/fuzz/corpus/${target}" "build-fuzz/fuzz/artifacts/${target}"
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -dict="tests/fuzz/dict/${target}.dict" \
  -artifact_prefix="build-fuzz/fuzz/artifacts/${target}/" \
  "build-fuzz/fuzz/corpus/${target}" "build-fuzz/fuzz/seeds/${target}" \
  "tests/fuzz/regressions/${target}" "$@"

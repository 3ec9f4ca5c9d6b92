#!/usr/bin/env bash
# One short GPU lease, batched: the kernel sweeps (validation/microbench/gpu_sweep.py), then the
# reference trainers' GPU cases (validation/cases.json, set "gpu") one at a time until the
# deadline, with nvidia-smi's clocks, power and temperature logged every second throughout.
#
#   validation/gpu_lease.sh [TOTAL_SECONDS [SWEEP_SECONDS]]     (defaults 470 and 210)
#
# Writes into $OUT (or /tmp/meshsim-gpu): gemm_raw.csv, attention_raw.csv, memory_raw.csv,
# misc.json, smi.csv, run.log and traces.tar.gz (traces/<hardware>/<case>/ as measure.py files
# them: unpack at validation/). Every step is time-boxed, so the files come back even when a step
# fails or runs out of time; run.log says which.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/meshsim-gpu}
total=${1:-470}
sweep=${2:-210}
t0=$(date +%s)
mkdir -p "$out"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
  --format=csv -lms 1000 > "$out/smi.csv" 2>&1 &
smi=$!
PYTHONUNBUFFERED=1 timeout $((sweep + 40)) python3 validation/microbench/gpu_sweep.py \
  --out "$out" --budget "$sweep" 2>&1 | tee "$out/run.log"
work=/tmp/meshsim-traces
mkdir -p "$work/traces"
for c in torch-val100m-s1024-b16 torch-llama3.2-1b-s2048-b4 torch-llama3-8b-4l-s2048-b2 \
         jax-val100m-s1024-b16 jax-llama3.2-1b-s2048-b4 jax-llama3-8b-4l-s2048-b2; do
  rem=$((t0 + total - $(date +%s)))
  if [ "$rem" -lt 45 ]; then
    echo "== $c skipped: ${rem} s left" | tee -a "$out/run.log"
    continue
  fi
  echo "== $c (${rem} s left)" | tee -a "$out/run.log"
  PYTHONUNBUFFERED=1 timeout "$rem" python3 validation/reference_trainer/measure.py --set gpu \
    --only "$c" --out "$work/traces" 2>&1 | tee -a "$out/run.log"
done
kill "$smi" 2>/dev/null
tar -C "$work" -czf "$out/traces.tar.gz" traces
ls -la "$out" "$work/traces"/* 2>&1 | tee -a "$out/run.log"

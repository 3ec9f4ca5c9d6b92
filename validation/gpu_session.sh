#!/usr/bin/env bash
# Measures the GPU case set of validation/cases.json on a machine with one NVIDIA GPU (CUDA,
# PyTorch, JAX and optax installed; no network needed) and packs the traces for the repository.
#
#   validation/gpu_session.sh [torch|jax|all] [OUT_DIR]
#
# Runs validation/reference_trainer/measure.py --set gpu (the PyTorch twin's cases, the JAX
# trainer's, or both), writing <OUT_DIR>/traces/<hardware>/<case>/{manifest.json,trace.json.gz},
# then packs them as <OUT_DIR>/gpu-traces-<which>.tar.gz together with nvidia-smi's description of
# the GPU and the framework versions (env.txt). Unpack it at the repository root, run
# `meshsim validate` on each manifest with the GPU's hardware profile, and commit
# validation/traces/<hardware>/ (validation/README.md, "GPU traces").
#
# Each half fits in about ten minutes on an H100 (three models, warm-up and compilation included).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
out=${2:-${OUT:-/tmp/meshsim-gpu}}
case "$which" in
  torch) only=(torch-val100m-s1024-b16 torch-llama3.2-1b-s2048-b4 torch-llama3-8b-4l-s2048-b2) ;;
  jax) only=(jax-val100m-s1024-b16 jax-llama3.2-1b-s2048-b4 jax-llama3-8b-4l-s2048-b2) ;;
  all) only=() ;;
  *) echo "usage: $0 [torch|jax|all] [OUT_DIR]" >&2; exit 2 ;;
esac
mkdir -p "$out/traces"
{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
  python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())' || true
} > "$out/env.txt" 2>&1
args=(--set gpu --out "$out/traces")
if ((${#only[@]})); then
  args+=(--only "${only[@]}")
fi
PYTHONUNBUFFERED=1 python3 validation/reference_trainer/measure.py "${args[@]}" 2>&1 | tee "$out/measure-$which.log"
tar -C "$out" -czf "$out/gpu-traces-$which.tar.gz" traces env.txt "measure-$which.log"
ls -la "$out/gpu-traces-$which.tar.gz"

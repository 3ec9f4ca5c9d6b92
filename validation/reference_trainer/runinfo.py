"""What both trainers write about a run: the host, the command line and manifest.json.

The manifest schema (MANIFEST_SCHEMA, one object per run directory):

  schema            "meshsim-validation-manifest/1"
  case              the case name (measure.py) or "adhoc"
  framework         {name: "jax"|"pytorch", version, python, ...framework-specific versions}
  hardware          {platform: "cpu"|"gpu"|"tpu", device_kind, device_count (as the framework
                     reports them), cpu_model (/proc/cpuinfo "model name"), cpu_cores (usable by
                     this process), threads (intra-op threads the framework was given),
                     blas (the BLAS libraries mapped into the process, resolved paths)}
  model             the model in meshsim's schema, inline (`meshsim --model` reads it back)
  model_file        the path the model was read from
  parameters        the parameter count the framework built (== meshsim's count, checked)
  batch             {global_batch, micro_batch (sequences per data-parallel rank per step)}
  seq_len           tokens per sequence
  dtype             "fp32" or "bf16" (the matmul format; fp32 master weights under bf16)
  mesh              {data, fsdp, tensor}: the device mesh (all 1 on one device)
  optimizer         {name, lr, betas, weight_decay, eps, ...}
  execution         how the step ran, in meshsim's terms (meshsim run --kernels, --attention,
                    --optimizer-kernels): {kernels: "eager" (PyTorch eager) | "fused" (XLA),
                    attention: "naive" (s x s scores through memory) | "flash",
                    optimizer_kernels: "per-tensor" | "foreach" | "fused"}
  warmup_steps      steps run before timing (the first includes compilation)
  step_times_s      every timed step, seconds, wall clock from dispatch to a blocking read of the
                    step's results
  median_step_time_s
  tokens_per_second global_batch * seq_len / median step time
  trace             {path (relative to the manifest), format, profiled_steps, note}
  command           the exact command line (shell-quoted)
  started_at        UTC ISO-8601 time the run started
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = "meshsim-validation-manifest/1"


def cpu_model_name() -> str:
    """The "model name" line of /proc/cpuinfo (the first one), or platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def blas_libraries() -> list[str]:
    """The BLAS/LAPACK/oneDNN-style math libraries mapped into this process (resolved paths).

    On Debian, libblas.so.3 is an alternative: the reference (netlib) BLAS unless OpenBLAS or BLIS
    is installed; CPU timings mean little without knowing which one ran.
    """
    found = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split()[-1] if "/" in line else ""
                name = os.path.basename(path).lower()
                if any(k in name for k in ("blas", "mkl", "blis", "lapack", "dnnl")):
                    found.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(found)


def uses_reference_blas(libs: list[str]) -> bool:
    return any(p.endswith("/blas/libblas.so.3") for p in libs) and not any("openblas" in p or "blis" in p for p in libs)


def command_line() -> str:
    return shlex.join([sys.executable] + sys.argv)


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_mesh(text: str) -> dict[str, int]:
    """"data=2,fsdp=1,tensor=4" -> {"data": 2, "fsdp": 1, "tensor": 4}; absent axes are 1."""
    mesh = {"data": 1, "fsdp": 1, "tensor": 1}
    if not text:
        return mesh
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in mesh or not value.strip().isdigit() or int(value) < 1:
            raise SystemExit(f"--mesh: \"{part}\": expected AXIS=N with AXIS one of data, fsdp, "
                             f"tensor and N a positive integer (e.g. data=2,tensor=4)")
        mesh[key] = int(value)
    return mesh


def summarize_times(step_times: list[float]) -> dict[str, Any]:
    if not step_times:
        raise ValueError("no timed steps")
    return {
        "step_times_s": [round(t, 9) for t in step_times],
        "median_step_time_s": round(statistics.median(step_times), 9),
    }


def run_fields(tokens_per_step: int, summary: dict[str, Any], final_loss: float,
               trace: Any, started_at: str) -> dict[str, Any]:
    """The manifest fields both trainers fill the same way: step times, throughput, the loss,
    the trace, the command and when the run started."""
    return {
        **summary,
        "tokens_per_second": round(tokens_per_step / summary["median_step_time_s"], 3),
        "final_loss": round(final_loss, 6),
        "trace": trace,
        "command": command_line(),
        "started_at": started_at,
    }


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> Path:
    manifest = {"schema": MANIFEST_SCHEMA, **manifest}
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return path


def python_version() -> str:
    return platform.python_version()


def add_run_args(p: argparse.ArgumentParser, *, devices: list[str], dtype_auto: str,
                 warmup_help: str) -> None:
    """The options both trainers take: the model and its shape, the steps, the precision, the
    device and where the run is recorded. `devices` are the --device choices besides "auto";
    `dtype_auto` says what --dtype auto picks; `warmup_help` what the untimed steps are for."""
    p.add_argument("--model", required=True, help="meshsim model JSON or HF config.json (Llama)")
    p.add_argument("--seq", type=int, required=True, help="sequence length (tokens)")
    p.add_argument("--batch", type=int, required=True, help="global batch (sequences per step)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help=warmup_help)
    p.add_argument("--profile-steps", type=int, default=3, help="steps in the profiler trace (0: none)")
    p.add_argument("--dtype", choices=["auto", "fp32", "bf16"], default="auto",
                   help=f"auto: {dtype_auto}")
    p.add_argument("--device", choices=["auto", *devices], default="auto")
    p.add_argument("--case", default="adhoc", help="case name recorded in the manifest")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output directory")


def check_run_args(p: argparse.ArgumentParser, args: argparse.Namespace, *, min_warmup: int,
                   why: str = "") -> None:
    """Refuses (argparse's exit 2) a non-positive shape or step count, fewer warm-up steps than
    `min_warmup` (`why` says what needs them) and a negative profile."""
    for name in ("seq", "batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be positive")
    if args.warmup < min_warmup:
        p.error(f"--warmup must be at least {min_warmup}{f' ({why})' if why else ''}")
    if args.profile_steps < 0:
        p.error("--profile-steps must not be negative")

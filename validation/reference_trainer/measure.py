#!/usr/bin/env python3
"""Runs measurement cases and files each as validation/traces/<hardware>/<case>/.

    /usr/bin/python3 validation/reference_trainer/measure.py --set cpu
    python3 validation/reference_trainer/measure.py --set gpu --only jax-val100m-s1024-b16
    python3 validation/reference_trainer/measure.py --set smoke --out /tmp/traces

Cases come from validation/cases.json (--cases for another file). Each case runs its trainer
(train_torch.py or train_jax.py) in a fresh process, in a scratch directory, then this script
writes into <out>/<hardware>/<case>/:
  manifest.json    the trainer's manifest, its trace entry pointing at trace.json.gz, plus
                   "measured_by" (this command) and "kept_steps"
  trace.json.gz    the profiler trace trimmed to the case's keep_steps steps (trace_tools.py),
                   gzipped; if it is still larger than --max-trace-mb, fewer steps are kept
<hardware> is derived from the manifest: "cpu-<cpu model>-<cores>c" on CPU (e.g.
cpu-amd-epyc-2c), "<device kind>-x<count>" on accelerators (e.g. nvidia-h100-80gb-hbm3-x1).

Run it on a quiet machine: other processes (compilers, tests) distort the timings.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import trace_tools  # noqa: E402

TRAINERS = {"pytorch": HERE / "train_torch.py", "jax": HERE / "train_jax.py"}
CASE_KEYS = {"name", "framework", "model", "seq", "batch", "steps", "warmup", "profile_steps",
             "keep_steps", "dtype", "mesh", "device", "threads"}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def hardware_name(manifest: dict) -> str:
    hw = manifest["hardware"]
    if hw.get("platform") == "cpu":
        return f"cpu-{slug(hw.get('cpu_model', 'unknown'))}-{hw.get('cpu_cores', 0)}c"
    return f"{slug(hw.get('device_kind', hw.get('platform', 'device')))}-x{hw.get('device_count', 1)}"


def load_cases(path: Path, set_name: str, only: list[str]) -> list[dict]:
    sets = json.loads(path.read_text())
    if set_name not in sets or set_name.startswith("_"):
        raise SystemExit(f"{path}: no case set \"{set_name}\" (sets: "
                         f"{', '.join(k for k in sets if not k.startswith('_'))})")
    cases = sets[set_name]
    for i, case in enumerate(cases):
        unknown = set(case) - CASE_KEYS
        if unknown:
            raise SystemExit(f"{path}: /{set_name}/{i}: unknown key {sorted(unknown)[0]!r}")
        if case.get("framework") not in TRAINERS:
            raise SystemExit(f"{path}: /{set_name}/{i}/framework: expected one of {sorted(TRAINERS)}")
    if only:
        missing = set(only) - {c["name"] for c in cases}
        if missing:
            raise SystemExit(f"--only: no case named {sorted(missing)[0]!r} in set {set_name}")
        cases = [c for c in cases if c["name"] in only]
    return cases


def trainer_command(case: dict, python: str, out_dir: Path) -> list[str]:
    # Paths relative to the repository root (the trainer runs there), so manifests hold no
    # machine-specific paths.
    cmd = [python, str(TRAINERS[case["framework"]].relative_to(REPO)),
           "--model", case["model"],
           "--seq", str(case["seq"]), "--batch", str(case["batch"]),
           "--steps", str(case["steps"]), "--warmup", str(case["warmup"]),
           "--profile-steps", str(case["profile_steps"]),
           "--dtype", case.get("dtype", "auto"),
           "--case", case["name"], "--out", str(out_dir)]
    if "mesh" in case:
        cmd += ["--mesh", case["mesh"]]
    if "device" in case:
        cmd += ["--device", case["device"]]
    if "threads" in case:
        cmd += ["--threads", str(case["threads"])]
    return cmd


def file_trace(scratch: Path, manifest: dict, dest: Path, keep: int, max_bytes: int) -> None:
    src = scratch / manifest["trace"]["path"]
    doc = trace_tools.load(src)
    out = dest / "trace.json.gz"
    for k in range(keep, 0, -1):
        trace_tools.save(trace_tools.trim(doc, k), out)
        if out.stat().st_size <= max_bytes or k == 1:
            break
    manifest["trace"]["path"] = out.name
    manifest["trace"]["kept_steps"] = k
    manifest["trace"]["note"] = (f"trimmed by trace_tools.py to the first {k} of "
                                 f"{manifest['trace']['profiled_steps']} profiled steps, gzipped")
    if out.stat().st_size > max_bytes:
        print(f"warning: {out} is {out.stat().st_size / 1e6:.1f} MB even with one step",
              file=sys.stderr)


def run_case(case: dict, python: str, out_root: Path, max_bytes: int) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"meshsim-{case['name']}-") as tmp:
        scratch = Path(tmp)
        cmd = trainer_command(case, python, scratch)
        print(f"== {case['name']}: {shlex.join(cmd)}", flush=True)
        t0 = time.time()
        subprocess.run(cmd, check=True, cwd=REPO)
        manifest = json.loads((scratch / "manifest.json").read_text())
        dest = out_root / hardware_name(manifest) / case["name"]
        dest.mkdir(parents=True, exist_ok=True)
        if manifest.get("trace"):
            file_trace(scratch, manifest, dest, case.get("keep_steps", 2), max_bytes)
        manifest["measured_by"] = shlex.join([sys.executable] + sys.argv)
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"   {dest} (median step {manifest['median_step_time_s'] * 1e3:.1f} ms, "
              f"{time.time() - t0:.0f} s)", flush=True)
        return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", required=True, help="case set in the cases file (smoke, cpu, gpu)")
    p.add_argument("--only", nargs="*", default=[], help="run only these case names")
    p.add_argument("--cases", default=str(REPO / "validation" / "cases.json"))
    p.add_argument("--out", default=str(REPO / "validation" / "traces"))
    p.add_argument("--python", default=sys.executable, help="interpreter for the trainers")
    p.add_argument("--max-trace-mb", type=float, default=4.0)
    p.add_argument("--dry-run", action="store_true", help="print the trainer commands only")
    args = p.parse_args(argv)
    cases = load_cases(Path(args.cases), args.set, args.only)
    if args.dry_run:
        for case in cases:
            print(shlex.join(trainer_command(case, args.python, Path("<scratch>"))))
        return 0
    out_root = Path(args.out)
    for case in cases:
        run_case(case, args.python, out_root, int(args.max_trace_mb * 1e6))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

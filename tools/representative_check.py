#!/usr/bin/env python3
"""Representative mode against full simulation on every published run.

    tools/representative_check.py MESHSIM_BIN RUNS_JSON [--tolerance F] [--json FILE] [-k SUBSTR]

Representative mode (the default) simulates one rank per class of identical ranks and lets the
groups it simulates stand for their images; it is meant to give the step a full simulation gives.
For each run that `meshsim validate-published RUNS_JSON` can express, this runs
`validate-published RUNS_JSON --run ID` once as is and once with `--full-simulation`, reads both
step times from the reports (`--json`) and prints their relative difference. Exits 1 when any
run differs by more than the tolerance (default 0.5 %: a fat tree whose leaves split a group
unevenly is known to move a step by a fraction of a percent; see docs/validation.md), 0
otherwise. It runs every rank of every run, minutes in all: a developer's check, not CI's.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def step_time(binary: str, runs: str, run_id: str, full: bool, scratch: Path) -> float | None:
    """The run's simulated step in seconds, or None when the run does not map or simulate."""
    report = scratch / ("full.json" if full else "representative.json")
    report.unlink(missing_ok=True)
    command = [binary, "validate-published", runs, "--run", run_id, "--json", str(report)]
    if full:
        command.append("--full-simulation")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    if not report.exists():  # not expressible: the command says why and writes no report
        return None
    value = json.loads(report.read_text()).get("step_time_s")
    return float(value) if value else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", help="the meshsim binary")
    parser.add_argument("runs", help="published_runs.json")
    parser.add_argument("--tolerance", type=float, default=0.005,
                        help="largest |full / representative - 1| accepted (default 0.005)")
    parser.add_argument("--json", help="write every run's two step times to FILE")
    parser.add_argument("-k", dest="substring", default="", help="only runs whose id has SUBSTR")
    args = parser.parse_args()

    ids = [r["id"] for r in json.loads(Path(args.runs).read_text()) if args.substring in r["id"]]
    rows = []
    over = 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for run_id in ids:
            rep = step_time(args.binary, args.runs, run_id, False, scratch)
            if rep is None:
                print(f"  {'-':>9}  {'-':>9}  {'':>8}  {run_id} (not simulated)")
                continue
            full = step_time(args.binary, args.runs, run_id, True, scratch)
            diff = full / rep - 1 if full else float("nan")
            bad = not abs(diff) <= args.tolerance
            over += bad
            rows.append({"id": run_id, "representative_s": rep, "full_s": full, "difference": diff})
            print(f"  {rep:9.4f}  {full:9.4f}  {100 * diff:+7.2f}%  {run_id}{'  <-- differs' if bad else ''}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{len(rows)} runs simulated both ways; {over} differ by more than "
          f"{100 * args.tolerance:.2f}%")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

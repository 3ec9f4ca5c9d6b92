#!/usr/bin/env python3
"""CI's check of meshsim against every committed measured trace.

    tools/validate_traces.py --meshsim build/meshsim [--json summary.json]

For every validation/traces/<hardware>/<case>/manifest.json, runs

    meshsim validate MANIFEST --hardware-profile PROFILE --max-step-error T --json ...

with the hardware's calibrated profile and threshold from validation/thresholds.json, and prints
one line per case (measured and simulated step time, error, threshold). Then, per hardware, it
recalibrates from the base profile on all of that hardware's traces and checks that the held-out
(leave-one-out) step-time errors stay within their threshold and that the fit reproduces the
committed calibrated profile (the same parameters to 1e-6: calibration is deterministic, so a
difference means the model or the data changed without a recalibration).

Where the hardware's entry names a `catalogue_chip` (a chip of topology/chips.json whose entry
the base profile copies), the base profile must still equal that entry, and every case's error
with it (the recalibration's error before the fit) must stay within `max_abs_base_step_time_error`:
the catalogue's own model, uncalibrated, against measured steps.

Exits 1 when a case exceeds its threshold, when meshsim fails, when a committed trace's hardware
has no entry in the thresholds file (a trace nobody checks is a trace nobody trusts), or when the
calibration no longer reproduces. Thresholds are set from what was measured, with headroom; they
are never loosened to make a change pass (validation/README.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_thresholds(path: Path) -> dict:
    doc = json.loads(path.read_text())
    hardware = doc.get("hardware")
    if not isinstance(hardware, dict):
        raise SystemExit(f"{path}: /hardware: expected an object of hardware names")
    for name, entry in hardware.items():
        for key, kind in (("profile", str), ("base_profile", str), ("max_abs_step_time_error", (int, float)),
                          ("max_abs_held_out_step_error", (int, float)), ("source", str)):
            if not isinstance(entry.get(key), kind):
                raise SystemExit(f"{path}: /hardware/{name}/{key}: missing or of the wrong type")
        if "catalogue_chip" in entry:
            if not isinstance(entry["catalogue_chip"], str):
                raise SystemExit(f"{path}: /hardware/{name}/catalogue_chip: expected a chip name")
            if not isinstance(entry.get("max_abs_base_step_time_error"), (int, float)):
                raise SystemExit(f"{path}: /hardware/{name}/max_abs_base_step_time_error: missing or "
                                 f"of the wrong type (catalogue_chip needs it)")
        for key in ("max_abs_step_time_error", "max_abs_held_out_step_error",
                    "max_abs_base_step_time_error"):
            if key in entry and not 0 < entry[key] < 1:
                raise SystemExit(f"{path}: /hardware/{name}/{key}: expected a fraction in (0, 1)")
    return hardware


def efficiency_values(profile: dict) -> dict:
    """The fitted numbers of a one-chip profile: {json pointer: value}."""
    (chip,) = profile["chips"].values()
    out = {}

    def walk(node, pointer):
        if isinstance(node, dict) and "value" in node and "source" in node:
            out[pointer] = node["value"]
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{pointer}/{k}")
    walk(chip["efficiency"], "/efficiency")
    return out


def same(a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str) and a.endswith("us") and b.endswith("us"):
        a, b = float(a[:-2]), float(b[:-2])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)
    return a == b


def check_calibration(meshsim: str, hw: str, entry: dict, manifests: list, tmp: Path) -> list:
    fitted, report = tmp / f"{hw}.calibrated.json", tmp / f"{hw}.calibration.json"
    run = subprocess.run([meshsim, "calibrate", *map(str, manifests), "--hardware-profile",
                          str(REPO / entry["base_profile"]), "--out", str(fitted), "--json", str(report)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return [f"{hw}: meshsim calibrate exited {run.returncode}:\n{run.stdout}{run.stderr}"]
    calibration = json.loads(report.read_text())
    failures = check_base(hw, entry, calibration)
    held = calibration["max_abs_held_out_step_error"]
    limit = entry["max_abs_held_out_step_error"]
    print(f"{hw}: recalibrated on {len(manifests)} trace(s); largest held-out step error "
          f"{100 * held:.1f}% (limit {100 * limit:.1f}%)")
    if held > limit:
        failures.append(f"{hw}: held-out step error {100 * held:.1f}% exceeds {100 * limit:.1f}%")
    now = efficiency_values(json.loads(fitted.read_text()))
    committed = efficiency_values(json.loads((REPO / entry["profile"]).read_text()))
    changed = [k for k in sorted(set(now) | set(committed)) if not same(now.get(k), committed.get(k))]
    if changed:
        failures.append(f"{hw}: the calibration no longer reproduces {entry['profile']} "
                        f"({', '.join(f'{k}: {committed.get(k)} -> {now.get(k)}' for k in changed)}); "
                        f"if the change is intended, recalibrate (validation/README.md)")
    return failures


def check_base(hw: str, entry: dict, report: dict) -> list:
    """The catalogue's chip, uncalibrated: the base profile is still its entry, and every case is
    within max_abs_base_step_time_error with it (the calibration's errors before the fit, which
    are the base profile's, through the engine as meshsim validate runs it)."""
    chip = entry.get("catalogue_chip")
    if chip is None:
        return []
    base = json.loads((REPO / entry["base_profile"]).read_text())
    catalogue = json.loads((REPO / "topology" / "chips.json").read_text())["chips"]
    (profile_chip,) = base["chips"].values()
    if profile_chip != catalogue.get(chip):
        return [f"{hw}: {entry['base_profile']} no longer equals topology/chips.json's {chip!r} entry; "
                f"copy the entry again (validation/README.md, GPU traces) and recalibrate"]
    failures = []
    limit = entry["max_abs_base_step_time_error"]
    for case in report["cases"]:
        e = case["step_time_error_before"]
        print(f"{hw}/{case['case']}: with the catalogue's {chip!r} uncalibrated "
              f"{100 * e:+.1f}% (limit {100 * limit:.1f}%)")
        if abs(e) > limit:
            failures.append(f"{hw}/{case['case']}: step-time error with the catalogue's "
                            f"{chip!r} {100 * e:+.1f}% exceeds {100 * limit:.1f}%")
    return failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meshsim", required=True, help="the meshsim binary")
    p.add_argument("--traces", default=str(REPO / "validation" / "traces"))
    p.add_argument("--thresholds", default=str(REPO / "validation" / "thresholds.json"))
    p.add_argument("--json", help="write every case's result to this file")
    args = p.parse_args(argv)

    hardware = load_thresholds(Path(args.thresholds))
    manifests = sorted(Path(args.traces).glob("*/*/manifest.json"))
    if not manifests:
        print(f"no committed traces under {args.traces}", file=sys.stderr)
        return 1
    failures = []
    results = []
    print(f"{'hardware/case':<46}{'measured s':>12}{'simulated s':>13}{'error':>9}{'limit':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, manifest in enumerate(manifests):
            hw = manifest.parent.parent.name
            case = f"{hw}/{manifest.parent.name}"
            entry = hardware.get(hw)
            if entry is None:
                failures.append(f"{case}: no entry for hardware {hw!r} in {args.thresholds}")
                continue
            out = Path(tmp) / f"{i}.json"
            limit = entry["max_abs_step_time_error"]
            run = subprocess.run([args.meshsim, "validate", str(manifest), "--hardware-profile",
                                  str(REPO / entry["profile"]), "--max-step-error", str(limit),
                                  "--json", str(out)], capture_output=True, text=True)
            if run.returncode not in (0, 4) or not out.exists():
                failures.append(f"{case}: meshsim validate exited {run.returncode}:\n{run.stdout}{run.stderr}")
                continue
            r = json.loads(out.read_text())
            results.append({"case": case, "threshold": limit, **{k: r[k] for k in (
                "step_time_error", "measured_step_s", "simulated_step_s")}})
            flag = "" if run.returncode == 0 else "  FAIL"
            print(f"{case:<46}{r['measured_step_s']:>12.4f}{r['simulated_step_s']:>13.4f}"
                  f"{100 * r['step_time_error']:>+8.1f}%{100 * limit:>7.1f}%{flag}")
            if run.returncode == 4:
                failures.append(f"{case}: step-time error {100 * r['step_time_error']:+.1f}% "
                                f"exceeds {100 * limit:.1f}%")
        for hw in sorted({m.parent.parent.name for m in manifests} & set(hardware)):
            failures += check_calibration(args.meshsim, hw, hardware[hw],
                                          sorted(Path(args.traces, hw).glob("*/manifest.json")), Path(tmp))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"{len(results)} case(s) validated, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

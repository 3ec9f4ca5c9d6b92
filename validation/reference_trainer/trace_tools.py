#!/usr/bin/env python3
"""Trim profiler traces to a few steps (and optionally shallow call depth), plain or gzipped.

    python3 trace_tools.py trim IN OUT [--steps 2] [--first-step K] [--max-op-depth D] [--slim]
    python3 trace_tools.py steps IN

`trim` keeps every metadata ("M") event and the events of the first --steps steps: the host
window from the first kept step's start to the last kept step's end, extended to the end of the
device work those steps launched (PyTorch kernels by their launch correlation id; JAX device
events that start before the next step). OUT is gzipped when its name ends in .gz. The document
keeps its shape (a bare array stays an array; other top-level keys are kept).

--max-op-depth D also drops host events nested D or more operators deep (D=1: only top-level
operators stay; D=2: their direct children too). meshsim's importer reads only top-level
operators of CPU traces, so this shrinks test fixtures without changing what they import to.

--first-step K skips the first K steps (warm-up); --slim keeps only what meshsim's multi-GPU
reader uses: the complete events of SLIM_CATS with the args in SLIM_ARGS, and metadata events.

Steps are found the way meshsim's importer finds them (traces/include/meshsim/traces/import.h):
PyTorch "ProfilerStep#N" ranges, JAX ranges with args.step_num, else events named *train_step*.
Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path: str | Path) -> Any:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def save(doc: Any, path: str | Path) -> None:
    text = json.dumps(doc, separators=(",", ":")).encode()
    path = Path(path)
    if path.name.endswith(".gz"):
        # mtime=0: the same trace gives the same bytes.
        path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    else:
        path.write_bytes(text)


def events_of(doc: Any) -> list[dict]:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"]
    raise ValueError("not a Chrome trace: expected an array or an object with traceEvents")


def with_events(doc: Any, events: list[dict]) -> Any:
    if isinstance(doc, list):
        return events
    out = dict(doc)
    out["traceEvents"] = events
    return out


def _complete(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]


def _device_pids(events: list[dict]) -> set:
    return {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and str(e.get("args", {}).get("name", "")).startswith("/device:")}


def find_steps(events: list[dict]) -> list[tuple[float, float]]:
    """(start, end) in microseconds of each step, in time order."""
    xs = _complete(events)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in xs
             if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    if not steps:
        device = _device_pids(events)
        by_num: dict[str, tuple[float, float]] = {}
        for e in xs:
            if e.get("pid") not in device and "step_num" in (e.get("args") or {}):
                key = str(e["args"]["step_num"])
                s, t = e["ts"], e["ts"] + e["dur"]
                if key in by_num:
                    s, t = min(s, by_num[key][0]), max(t, by_num[key][1])
                by_num[key] = (s, t)
        steps = list(by_num.values())
    if not steps:
        steps = [(e["ts"], e["ts"] + e["dur"]) for e in xs if "train_step" in str(e.get("name", ""))]
    return sorted(steps)


def _window(events: list[dict], steps: list[tuple[float, float]], keep: int) -> tuple[float, float]:
    start, end = steps[0][0], steps[keep - 1][1]
    limit = steps[keep][0] if keep < len(steps) else float("inf")
    xs = _complete(events)
    launched = {(e.get("args") or {}).get("correlation") for e in xs
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and start <= e["ts"] <= end}
    launched.discard(None)
    device = _device_pids(events)
    for e in xs:
        args = e.get("args") or {}
        if e.get("cat") in DEVICE_CATS and args.get("correlation") in launched:
            end = max(end, e["ts"] + e["dur"])
        elif e.get("pid") in device and start <= e["ts"] < limit:
            end = max(end, e["ts"] + e["dur"])
    return start, end


def _op_depths(events: list[dict]) -> dict[int, int]:
    """id(event) -> number of enclosing operators on its thread (legacy and Kineto rules)."""
    def is_operator(e):
        cat = e.get("cat")
        if cat is None or cat == "":
            return "::" in str(e.get("name", ""))
        return cat in ("cpu_op", "operator", "Operator")

    host = [e for e in _complete(events) if e.get("cat") not in DEVICE_CATS | {"gpu_user_annotation"}]
    host.sort(key=lambda e: (e["ts"], -e["dur"]))
    stacks: dict[tuple, list[tuple[dict, int]]] = {}
    depth: dict[int, int] = {}
    for e in host:
        stack = stacks.setdefault((str(e.get("pid")), str(e.get("tid"))), [])
        while stack:
            p, _ = stack[-1]
            p_end = p["ts"] + p["dur"]
            if e["ts"] < p_end or (e["ts"] == p["ts"] and e["ts"] + e["dur"] <= p_end):
                break
            stack.pop()
        ops_above = stack[-1][1] if stack else 0
        depth[id(e)] = ops_above
        stack.append((e, ops_above + (1 if is_operator(e) else 0)))
    return depth


# --slim: what meshsim's multi-GPU reader uses (traces/include/meshsim/traces/kineto.h), and
# nothing else: complete events of these categories with these args, and the metadata events.
SLIM_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
             "operator", "user_annotation"}
SLIM_ARGS = {"External id", "correlation", "device", "stream", "bytes", "Input Dims", "Input type",
             "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
             "Process Group Name", "Process Group Description", "Process Group Ranks",
             "Src Rank", "Dst Rank"}


def slim(events: list[dict]) -> list[dict]:
    out = []
    for e in events:
        if e.get("ph") == "M":
            out.append(e)
        elif e.get("ph") == "X" and e.get("cat") in SLIM_CATS:
            e = dict(e)
            if isinstance(e.get("args"), dict):
                e["args"] = {k: v for k, v in e["args"].items() if k in SLIM_ARGS}
            out.append(e)
    return out


def trim(doc: Any, keep_steps: int, max_op_depth: int | None = None, first_step: int = 0,
         slim_events: bool = False) -> Any:
    events = events_of(doc)
    steps = find_steps(events)[first_step:]
    if not steps:
        raise ValueError("no steps found (ProfilerStep#N, args.step_num or *train_step*)")
    keep = max(1, min(keep_steps, len(steps)))
    start, end = _window(events, steps, keep)
    depth = _op_depths(events) if max_op_depth else {}
    kept = []
    for e in events:
        if e.get("ph") == "M":
            kept.append(e)
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or not (start <= ts <= end):
            continue
        if max_op_depth and depth.get(id(e), 0) >= max_op_depth:
            continue
        kept.append(e)
    return with_events(doc, slim(kept) if slim_events else kept)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trim", help="keep the first steps of a trace")
    t.add_argument("input")
    t.add_argument("output")
    t.add_argument("--steps", type=int, default=2)
    t.add_argument("--max-op-depth", type=int, default=None)
    t.add_argument("--first-step", type=int, default=0, help="skip this many steps first")
    t.add_argument("--slim", action="store_true",
                   help="keep only what meshsim's multi-GPU reader uses (see SLIM_CATS)")
    s = sub.add_parser("steps", help="print the steps a trace holds")
    s.add_argument("input")
    args = p.parse_args(argv)
    doc = load(args.input)
    if args.command == "steps":
        for i, (a, b) in enumerate(find_steps(events_of(doc))):
            print(f"step {i}: ts {a:.3f} us, {(b - a) / 1e3:.3f} ms")
        return 0
    out = trim(doc, args.steps, args.max_op_depth, args.first_step, args.slim)
    save(out, args.output)
    print(f"{args.output}: {len(events_of(out))} of {len(events_of(doc))} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

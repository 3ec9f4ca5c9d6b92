#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets (tests/fuzz) from the repository's own files.

    tools/fuzz_seeds.py REPO_ROOT OUT_DIR

Writes OUT_DIR/<target>/<name> for every target: the tracked presets, fixtures, manifests and
profiles of its format, and the small hand-written seeds under tests/fuzz/seeds/<target>/ (formats
the repository has no file of, e.g. Hugging Face config.json). Large traces are trimmed to their
step ranges and first events, so that each fuzz run stays fast. Run at build time by the fuzz
build (tests/fuzz/CMakeLists.txt); nothing here is committed twice. Standard library only.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

# target -> glob patterns relative to the repository root
SOURCES: dict[str, list[str]] = {
    "model": ["workloads/models/*.json", "validation/models/*.json", "tests/golden/*/model.json"],
    "hf_config": [],
    "cluster": ["topology/clusters/*.json"],
    "chips": ["topology/chips.json"],
    "scenario": ["tests/golden/*/scenario.json"],
    "manifest": ["validation/traces/*/*/manifest.json", "tests/traces/fixtures/*.manifest.json"],
    "profile": ["validation/profiles/*.json"],
    "pytorch_trace": ["tests/traces/fixtures/torch_*.trace.json*"],
    "jax_trace": ["tests/traces/fixtures/jax_*.trace.json*"],
    "kineto_trace": ["validation/traces/multi-gpu/*.json.gz", "tests/traces/fixtures/torch_gpu_*"],
    "sweep_spec": [],
    "failure_table": ["studies/data/failures-*.json"],
    "published_runs": [],  # one seed per source family, split from the dev set (split_runs)
    "published_facts": ["validation/published/run_facts.json"],
    "nccl_tests_log": ["validation/collectives/logs/*.log", "validation/collectives/logs/*.json"],
    "chakra_trace": [],  # hand-written seeds (tests/fuzz/seeds/chakra_trace: small traces)
}

PUBLISHED_RUNS = "validation/published/published_runs.json"


def split_runs(root: Path, target_dir: Path) -> None:
    """The first run of each source family of the committed dev set, each a file of its own (the
    whole set is past the fuzzers' input length)."""
    seen: set[str] = set()
    for run in json.loads((root / PUBLISHED_RUNS).read_text()):
        family = run["id"].split("-")[0]
        if family not in seen:
            seen.add(family)
            (target_dir / f"published_runs__{family}.json").write_text(json.dumps([run]))

# Traces larger than this (inflated) are trimmed (see trim_trace).
MAX_SEED_BYTES = 64 * 1024
KEEP_EVENTS = 300
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def trim_trace(text: str) -> str:
    """The trace trimmed (trim_to) to fit MAX_SEED_BYTES, the fuzzers' -max_len (a longer seed
    would be cut, and a cut trace is refused at once)."""
    keep = KEEP_EVENTS
    out = trim_to(text, keep)
    while len(out) > MAX_SEED_BYTES and keep > 1:
        keep //= 2
        out = trim_to(text, keep)
    return out


def trim_to(text: str, keep: int) -> str:
    """The metadata, the step ranges and the first `keep` other host events and device events
    each, compact (a Kineto trace writes its device events after the host's: without them the
    seed would have no GPU timeline)."""
    doc = json.loads(text)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    kept, others = [], {False: 0, True: 0}
    for e in events:
        step = isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#")
        if not isinstance(e, dict) or e.get("ph") == "M" or step:
            kept.append(e)
            continue
        device = e.get("cat") in DEVICE_CATEGORIES
        if others[device] < keep:
            kept.append(e)
            others[device] += 1
    if isinstance(doc, list):
        return json.dumps(kept, separators=(",", ":"))
    doc["traceEvents"] = kept
    return json.dumps(doc, separators=(",", ":"))


def add_seed(target_dir: Path, name: str, src: Path, is_trace: bool) -> None:
    if is_trace and len(read_text(src)) > MAX_SEED_BYTES:
        (target_dir / (name + ".trimmed.json")).write_text(trim_trace(read_text(src)))
        return
    shutil.copyfile(src, target_dir / name)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    for target, patterns in SOURCES.items():
        target_dir = out / target
        if target_dir.exists():
            shutil.rmtree(target_dir)
        target_dir.mkdir(parents=True)
        if target == "published_runs":
            split_runs(root, target_dir)
        files = [p for pattern in patterns for p in sorted(root.glob(pattern))]
        files += sorted((root / "tests/fuzz/seeds" / target).glob("*"))
        for src in files:
            # Unique names: the path relative to the root, '/' -> '__'.
            name = str(src.relative_to(root)).replace("/", "__")
            add_seed(target_dir, name, src, target in ("pytorch_trace", "jax_trace"))
        if not any(target_dir.iterdir()):
            print(f"fuzz_seeds: no seed for {target}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs a battery of hostile inputs through the meshsim binary (issue 15).

    tools/hostile_inputs.py MESHSIM_BIN REPO_ROOT [--sanitizers] [--timeout S] [-k SUBSTR]

Every case is a command line and the files it reads, made in a scratch directory: absurd sizes
and counts, numbers a double cannot hold, deep nesting, gzip bombs, endless files, overflowing
durations and trace events, outputs that cannot be written. Each runs under a memory limit
(RLIMIT_AS, 4 GiB) and a timeout (60 s), and must end with exit 0, 2 or 3, with no "internal
error", no crash and no sanitizer report; where the case says so, with a message naming the file
or flag and what was expected. Prints one line per case and a summary; exits 1 when any case
fails. --sanitizers is for sanitizer builds, where memory errors are the point and time and
memory are not: no address-space limit (ASan reserves terabytes of it), and the cases that only
measure time or memory against the bounds (`heavy`) are left to the release binary.
Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

MEMORY_LIMIT = 4 << 30
ALLOWED_EXIT = {0, 2, 3}
FORBIDDEN = ("internal error", "terminate called", "Segmentation fault", "AddressSanitizer",
             "runtime error:", "LeakSanitizer", "what():")


@dataclass
class Case:
    name: str
    args: list[str]
    # relative name -> contents (or a function that makes them, for large inputs)
    files: dict = field(default_factory=dict)
    expect: list[str] = field(default_factory=list)  # substrings of the output
    exit_codes: set[int] = field(default_factory=lambda: {2})
    file_size_limit: int | None = None  # RLIMIT_FSIZE in bytes (a full disk)
    heavy: bool = False  # measures time and memory against the bounds: release binary only


def read(root: Path, rel: str) -> dict:
    return json.loads((root / rel).read_text())


def dumps(doc) -> bytes:
    return json.dumps(doc).encode()


def gzip_bomb(inflated: int) -> bytes:
    """Concatenated gzip members of spaces: `inflated` bytes of text from a few MB of file."""
    chunk = 64 << 20
    member = gzip.compress(b" " * chunk, compresslevel=9)
    return member * max(1, inflated // chunk)


def dense(size: int, element: bytes = b'{"":{}}') -> bytes:
    """A JSON array of `size` bytes of tiny objects: the most parsed memory per byte (~35x)."""
    return b"[" + b",".join([element] * ((size - 2) // (len(element) + 1))) + b"]"


def deep(levels: int, inner: str = "1") -> bytes:
    return ("[" * levels + inner + "]" * levels).encode()


def model_cases(root: Path) -> list[Case]:
    base = read(root, "workloads/models/llama3-8b.json")

    def model(**changes) -> bytes:
        return dumps({**base, **changes})

    hf = {"model_type": "gpt2", "n_embd": 4611686018427387904, "n_layer": 12, "n_head": 12,
          "vocab_size": 50257, "n_positions": 1024}
    return [
        Case("model: d_model 8.2e9 (negative parameter counts)",
             ["calc", "--model", "m.json"], {"m.json": model(d_model=8192000000)},
             ["m.json: /d_model", "limit"]),
        Case("model: head_dim 2^40", ["calc", "--model", "m.json"],
             {"m.json": model(head_dim=1 << 40)}, ["/head_dim"]),
        Case("model: 2^30 layers", ["calc", "--model", "m.json"],
             {"m.json": model(num_layers=1 << 30)}, ["/num_layers"]),
        Case("model: d_ff past 2^63 (wraps to negative)", ["calc", "--model", "m.json"],
             {"m.json": model(d_ff=18446744073709551615)}, ["/d_ff", "2^63"]),
        Case("model: 2^40 parameters per layer", ["calc", "--model", "m.json"],
             {"m.json": model(d_model=1 << 20, d_ff=1 << 22, num_heads=1 << 10,
                              num_kv_heads=1 << 10, head_dim=1 << 10)},
             ["parameters per layer", "2^40"]),
        Case("model: 1e400", ["calc", "--model", "m.json"],
             {"m.json": model(d_model=1).replace(b'"d_model": 1', b'"d_model": 1e400')},
             ["m.json: byte", "1e400"]),
        Case("model: 100,000 levels of nesting", ["calc", "--model", "m.json"],
             {"m.json": b'{"name": ' + deep(100000) + b"}"}, ["nested deeper"]),
        Case("model: /dev/zero", ["calc", "--model", "/dev/zero"], {}, ["/dev/zero", "limit"]),
        Case("model: 63 MiB of empty objects (the densest document)", ["calc", "--model",
                                                                       "m.json"],
             {"m.json": dense(63 << 20)}, ["m.json", "expected an object"], heavy=True),
        Case("model: a directory", ["calc", "--model", "."], {}, ["directory"]),
        Case("model: HF gpt2 n_embd 2^62 (4 x n_embd wraps)", ["calc", "--model", "config.json"],
             {"config.json": dumps(hf)}, ["config.json: /n_embd"]),
        Case("model: HF Gemma 3 sliding_window_pattern 2^62 (a flag per layer of the period: "
             "bad_alloc)", ["calc", "--model", "config.json"],
             {"config.json": dumps({**read(root, "tests/workloads/hf_configs/Gemma-3-1B-it.json"),
                                    "sliding_window_pattern": 1 << 62})},
             ["config.json: /sliding_window_pattern", "at most 4096"]),
        Case("model: HF DeepSeek-V3 num_nextn_predict_layers 2^62 (bad_alloc)",
             ["--no-trace", "--model", "config.json", "--dp", "8", "--seq", "1024", "--gbs", "8"],
             {"config.json": dumps({**read(root, "tests/workloads/hf_configs/DeepSeek-V3.json"),
                                    "num_nextn_predict_layers": 1 << 62})},
             ["config.json: /num_nextn_predict_layers", "at most 4096"]),
        Case("model: 2^20 experts", ["calc", "--model", "m.json"],
             {"m.json": model(architecture="mixtral",
                              moe={"num_experts": 1 << 20, "experts_per_token": 2})},
             ["/moe/num_experts"]),
        Case("model: a 256-character name", ["--model", "m.json", "--cluster", "dgx-h100",
                                             "--dp", "8", "--zero", "3", "--json", "r.json"],
             {"m.json": model(name="x" * 256)}, [], {0}),
        Case("calc: --seq near 2^62", ["calc", "--model", "llama3-8b", "--seq",
                                       "4611686018427387904"], {}, ["--seq", "limit"]),
        Case("calc: --mbs near 2^62", ["calc", "--model", "llama3-8b", "--mbs",
                                       "4611686018427387904"], {}, ["--mbs", "limit"]),
    ]


def run_flag_cases() -> list[Case]:
    small = ["--no-trace", "--model", "llama3-8b", "--cluster", "dgx-h100"]
    return [
        Case("run: --mbs and --gbs 2^62", small + ["--dp", "8", "--mbs", "4611686018427387904",
                                                  "--gbs", "4611686018427387904"], {}, ["--mbs"]),
        Case("run: --seq 2^62", small + ["--dp", "8", "--seq", "4611686018427387904"], {},
             ["--seq"]),
        Case("run: --seq 2^24, naive attention (a*s^2*b past 2^63)",
             small + ["--dp", "8", "--seq", "16777216", "--attention", "naive"], {}, [],
             {2, 3}),
        Case("run: --tp and --dp 2^32 (product wraps)", small + ["--tp", "4294967296", "--dp",
                                                                "4294967296"], {}, ["--dp"]),
        Case("run: --nodes 10^12", ["--no-trace", "--nodes", "1000000000000"], {},
             ["--nodes: 1000000000000 nodes"]),
        Case("run: --shape 2^32 x 2^32 x 4 (SIGFPE)",
             ["--no-trace", "--model", "llama3-8b", "--cluster", "tpu-v5p", "--shape",
              "4294967296x4294967296x4", "--dp", "512"], {}, ["shape"]),
        Case("run: --stage-layers summing past 2^63",
             small + ["--pp", "2", "--dp", "4", "--stage-layers",
                      "9223372036854775807,9223372036854775807"], {}, ["stage"]),
        Case("run: --vpp 2^40", small + ["--pp", "8", "--vpp", "1099511627776", "--schedule",
                                         "interleaved"], {}, ["--vpp"]),
        Case("run: 2^20 microbatches", small + ["--dp", "8", "--gbs", "8388608"], {},
             ["--gbs", "microbatches"]),
        Case("run: --offload-layers -1", small + ["--dp", "8", "--offload-layers", "-1"], {},
             ["--offload-layers"]),
        Case("run: --offload-layers of every layer", small + ["--dp", "8", "--offload-layers",
                                                             "32"], {},
             ["--offload-layers", "fewer than the layers of every chunk"]),
        Case("run: --offload-layers 2^62", small + ["--dp", "8", "--offload-layers",
                                                   "4611686018427387904"], {},
             ["--offload-layers"]),
        Case("run: --recompute qkv_out_proj on an MoE model",
             ["--no-trace", "--model", "mixtral-8x7b", "--nodes", "2", "--dp", "16",
              "--recompute", "save_dot_except_mlp"], {},
             ["--recompute", "qkv_out_proj", "mixture of experts"]),
        # MaxText (the TPU's stack) refuses Megatron-Core's offloading; under the custom stack
        # (which cannot run on a TPU) the chip's missing host link would be the next refusal.
        Case("run: --offload-layers on a TPU", ["--no-trace", "--model", "llama3-8b",
                                                "--cluster", "tpu-v5p", "--dp", "64",
                                                "--recompute", "none", "--offload-layers", "4"],
             {}, ["--offload-layers", "maxtext stack does not run"]),
        Case("plan: --offload-layers on a TPU", ["plan", "--model", "llama3-8b", "--cluster",
                                                 "tpu-v5e", "--shape", "4x4", "--gbs", "16",
                                                 "--seq", "2048", "--offload-layers", "2"],
             {}, ["--offload-layers", "host_link"]),
        Case("plan: --offload-layers 2^62", ["plan", "--model", "llama3-8b", "--nodes", "1",
                                             "--gbs", "16", "--offload-layers",
                                             "4611686018427387904"],
             {}, ["--offload-layers", "fewer than the model's 32 layers"]),
        # 32,768 ranks x 64 microbatches x 32 layers: billions of op instances, past 2^30.
        Case("run: full simulation of 32,768 ranks x 64 microbatches (op budget)",
             ["--no-trace", "--full-simulation", "--model", "llama3-8b", "--cluster",
              "c.json", "--nodes", "4096", "--dp", "32768", "--zero", "1", "--gbs", "2097152",
              "--seq", "1024"], {}, ["ops (2^30)"], heavy=True),
    ]


def fabric_cases(root: Path) -> list[Case]:
    """The fabric knobs (flags and scenario keys) and the collectives section of a cluster."""
    base = read(root, "topology/clusters/dgx-h100.json")
    small = ["--no-trace", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--dp", "16",
             "--nodes", "2"]

    def collectives(key, value) -> bytes:
        doc = json.loads(json.dumps(base))
        doc["collectives"][key] = {"value": value, "source": "x"}
        return dumps(doc)

    def radix(value) -> bytes:
        doc = json.loads(json.dumps(base))
        doc["scale_out"]["switch_radix"]["value"] = value
        return dumps(doc)

    def nics(value) -> bytes:
        doc = json.loads(json.dumps(base))
        doc["scale_out"]["nics_per_device"]["value"] = value
        return dumps(doc)

    return [
        Case("fabric: --oversubscription inf", small + ["--oversubscription", "inf"], {},
             ["--oversubscription", "63"]),
        Case("fabric: --oversubscription 1e300", small + ["--oversubscription", "1e300"], {},
             ["--oversubscription", "63"]),
        Case("fabric: --tiers 5", small + ["--tiers", "5"], {}, ["--tiers", "1 to 3"]),
        Case("fabric: --nics-per-device 2^63 - 1 (devices x NICs wraps)",
             small + ["--nics-per-device", "9223372036854775807"], {},
             ["--nics-per-device", "1 to 16"]),
        Case("fabric: --nic-bandwidth 1e-300Gbps (transfers past 106 days)",
             small + ["--nic-bandwidth", "1e-300Gbps"], {}, ["106 days"]),
        Case("fabric: --nic-bandwidth 1e-300Gbps on SimGrid",
             small + ["--backend", "simgrid", "--nic-bandwidth", "1e-300Gbps"], {},
             ["106 days"]),
        Case("fabric: --nodes past what 3 tiers of radix-8 switches attach",
             ["--no-trace", "--model", "llama3.2-1b", "--cluster", "r8.json", "--nodes", "64",
              "--dp", "512"], {"r8.json": radix(8)}, ["--nodes", "3-tier"]),
        Case("fabric: scenario nics_per_device 2^40", ["run", "s.json", "--no-trace"],
             {"s.json": dumps({"model": "llama3.2-1b", "cluster": "dgx-h100", "nodes": 2,
                               "dp": 16, "nics_per_device": 1 << 40})},
             ["s.json: /nics_per_device", "1 to 16"]),
        Case("fabric: scenario oversubscription 1e300", ["run", "s.json", "--no-trace"],
             {"s.json": dumps({"model": "llama3.2-1b", "cluster": "dgx-h100", "nodes": 2,
                               "dp": 16, "oversubscription": 1e300})},
             ["s.json: /oversubscription"]),
        Case("cluster: 65,536 NICs per device", ["topology", "--cluster", "c.json"],
             {"c.json": nics(65536)}, ["c.json: /scale_out/nics_per_device", "16"]),
        Case("cluster: a launch floor of 1e300 s", ["topology", "--cluster", "c.json"],
             {"c.json": collectives("launch_floor", 1e300)},
             ["c.json: /collectives/launch_floor/value"]),
        Case("cluster: ll128_efficiency 1e-300", small[:4] + ["x.json"] + small[5:],
             {"x.json": collectives("ll128_efficiency", 1e-300)}, [], {0, 2}),
        Case("cluster: ll128_efficiency 1e-300, LL128 forced",
             ["collective", "--cluster", "x.json", "--proto", "ll128"],
             {"x.json": collectives("ll128_efficiency", 1e-300)}, ["106 days"]),
        Case("fabric: collective --nics-per-device 2^63 - 1",
             ["collective", "--nics-per-device", "9223372036854775807"], {},
             ["--nics-per-device", "1 to 16"]),
    ]


def cluster_cases(root: Path) -> list[Case]:
    base = read(root, "topology/clusters/dgx-h100.json")
    tpu = read(root, "topology/clusters/tpu-v5p.json")

    def cluster(doc, path, value):
        doc = json.loads(json.dumps(doc))
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return dumps(doc)

    topo = ["topology", "--cluster", "c.json"]
    return [
        Case("cluster: 2^62 nodes", topo, {"c.json": cluster(base, ["nodes"], 1 << 62)},
             ["c.json: /nodes"]),
        Case("cluster: devices_per_node 2^40", topo,
             {"c.json": cluster(base, ["devices_per_node"], 1 << 40)}, ["/devices_per_node"]),
        Case("cluster: switch radix 2^40", topo,
             {"c.json": cluster(base, ["scale_out", "switch_radix", "value"], 1 << 40)},
             ["/scale_out/switch_radix/value"]),
        Case("cluster: a link of 1e308TB/s", topo,
             {"c.json": cluster(base, ["scale_out", "nic_bandwidth"],
                                {"value": "1e308TB/s", "source": "x"})},
             ["/scale_out/nic_bandwidth/value", "limit"]),
        Case("cluster: a latency of 1e300 s", topo,
             {"c.json": cluster(base, ["scale_up", "latency", "value"], 1e300)},
             ["/scale_up/latency/value"]),
        Case("cluster: a torus of 2^32 x 2^32 x 4", ["topology", "--cluster", "t.json"],
             {"t.json": cluster(tpu, ["scale_up", "shape"], [1 << 32, 1 << 32, 4])},
             ["t.json: /scale_up/shape"]),
        Case("cluster: 1e400 latency", topo,
             {"c.json": cluster(base, ["scale_up", "latency", "value"], 1).replace(
                 b'"value": 1,', b'"value": 1e400,')}, ["byte", "1e400"]),
        Case("cluster: 200,000 levels of nesting", topo,
             {"c.json": b'{"description": ' + deep(200000) + b"}"}, ["nested deeper"]),
    ]


def chips_cases(root: Path) -> list[Case]:
    chips = read(root, "topology/chips.json")

    def catalogue(mutate) -> bytes:
        doc = json.loads(json.dumps(chips))
        mutate(doc["chips"]["h100-sxm"])
        return dumps(doc)

    def shape(key, value):
        def mutate(chip):
            chip["efficiency"]["matmul_shape"] = {
                "tile_m": {"value": 128, "source": "x"}, "tile_n": {"value": 128, "source": "x"},
                "units": {"value": 132, "source": "x"}, "k_half": {"value": 64, "source": "x"},
                "call_overhead": {"value": "2us", "source": "x"},
                "batched": {"value": "one_call", "source": "x"}}
            chip["efficiency"]["matmul_shape"][key]["value"] = value
        return mutate

    run = ["--no-trace", "--hardware-catalogue", "chips.json", "--model", "llama3.2-1b",
           "--cluster", "dgx-h100", "--dp", "8"]
    return [
        Case("chips: a peak of 1e308 TFLOP/s", run,
             {"chips.json": catalogue(lambda c: c["peak"]["bf16"].update(value="1e308TFLOP/s"))},
             ["chips.json: /chips/h100-sxm/peak/bf16/value", "limit"]),
        Case("chips: a peak of 1e-300 FLOP/s (kernels past 106 days)", run,
             {"chips.json": catalogue(lambda c: c["peak"]["bf16"].update(value=1e-300))},
             ["106 days"]),
        Case("chips: HBM of 1e-300 B/s", run,
             {"chips.json": catalogue(lambda c: c["hbm"]["bandwidth"].update(value=1e-300))},
             ["106 days"]),
        Case("chips: tile_m of 2^40", run, {"chips.json": catalogue(shape("tile_m", 1 << 40))},
             ["tile_m"]),
        Case("chips: k_half of 1e300", run, {"chips.json": catalogue(shape("k_half", 1e300))},
             ["k_half"]),
        Case("chips: NVLink efficiency 1e-300", run[:-1] + ["1", "--tp", "8"],
             {"chips.json": catalogue(lambda c: c["nvlink"]["efficiency"].update(value=1e-300))},
             ["106 days"]),
        Case("chips: NIC efficiency 1e-300", run[:-1] + ["16", "--nodes", "2"],
             {"chips.json": catalogue(lambda c: c["nic"]["efficiency"].update(value=1e-300))},
             ["106 days"]),
        Case("chips: a host link of 1e-300 B/s, offloading", run + ["--offload-layers", "4"],
             {"chips.json": catalogue(
                 lambda c: c["host_link"]["to_host"].update(value=1e-300))},
             ["106 days"]),
        Case("chips: a host link of 0 B/s", run,
             {"chips.json": catalogue(lambda c: c["host_link"]["to_device"].update(value=0))},
             ["chips.json: /chips/h100-sxm/host_link/to_device"]),
        Case("chips: NVLS efficiency 2", run,
             {"chips.json": catalogue(
                 lambda c: c["nvlink"]["nvls_efficiency"].update(value=2))},
             ["chips.json: /chips/h100-sxm/nvlink/nvls_efficiency/value", "(0, 1]"]),
    ]


def scenario_cases(root: Path) -> list[Case]:
    return [
        Case("scenario: nodes 2^62", ["run", "s.json", "--no-trace"],
             {"s.json": dumps({"nodes": 1 << 62})}, ["s.json: /nodes"]),
        Case("scenario: gbs 2^64 - 1", ["run", "s.json", "--no-trace"],
             {"s.json": b'{"gbs": 18446744073709551615}'}, ["s.json: /gbs"]),
        Case("scenario: deep stage_layers", ["run", "s.json", "--no-trace"],
             {"s.json": b'{"stage_layers": ' + deep(150000) + b"}"}, ["nested deeper"]),
    ]


def trace_manifest(root: Path, trace_name: str, **changes) -> bytes:
    doc = read(root, "tests/traces/fixtures/torch_cpu_smoke.manifest.json")
    doc["trace"]["path"] = trace_name
    doc.update(changes)
    return dumps(doc)


def validate_cases(root: Path) -> list[Case]:
    profile = str((root / "validation/profiles/cpu-amd-epyc-2c.json").resolve())
    val = ["validate", "manifest.json", "--hardware-profile", profile]
    trace = (root / "tests/traces/fixtures/torch_cpu_smoke.trace.json.gz").read_bytes()
    events = json.loads(gzip.decompress(trace))
    overflowing = json.loads(json.dumps(events))
    target = overflowing if isinstance(overflowing, list) else overflowing["traceEvents"]
    target.append({"ph": "X", "name": "aten::mm", "pid": "CPU functions", "tid": 1,
                   "ts": 9.0e12, "dur": 9.0e12})
    dims = json.loads(json.dumps(events))
    target = dims if isinstance(dims, list) else dims["traceEvents"]
    target.append({"ph": "X", "name": "aten::mm", "pid": "CPU functions", "tid": 1, "ts": 10,
                   "dur": 1, "args": {"Input Dims": [[2147483647, 2147483647],
                                                     [2147483647, 2147483647]]}})
    return [
        Case("trace: a gzip bomb (3 MB -> 4 GiB)", val,
             {"manifest.json": trace_manifest(root, "t.json.gz"), "t.json.gz": gzip_bomb(4 << 30)},
             ["t.json.gz", "limit"]),
        Case("trace: an event whose ts + dur passes 2^63 ps", val,
             {"manifest.json": trace_manifest(root, "t.json"), "t.json": dumps(overflowing)},
             ["t.json", "106 days"]),
        Case("trace: GEMM dims of 2^31 - 1", val,
             {"manifest.json": trace_manifest(root, "t.json"), "t.json": dumps(dims)},
             ["t.json", "Input Dims"]),
        Case("trace: 300,000 levels of nesting (gzipped)", val,
             {"manifest.json": trace_manifest(root, "t.json.gz"),
              "t.json.gz": gzip.compress(deep(300000))}, ["nested deeper"]),
        Case("trace: 1e400", val,
             {"manifest.json": trace_manifest(root, "t.json"),
              "t.json": b'{"traceEvents": [{"ph": "X", "ts": 1e400}]}'}, ["1e400"]),
        Case("trace: 63 MiB of empty objects (the densest document)", val,
             {"manifest.json": trace_manifest(root, "t.json"), "t.json": dense(63 << 20)},
             ["t.json", "phase"], heavy=True),
        Case("trace: a sparse 1 GiB file", val,
             {"manifest.json": trace_manifest(root, "t.json"), "t.json": b"SPARSE:1073741824"},
             ["t.json", "limit"]),
        Case("manifest: step time 1e300 s", val,
             {"manifest.json": trace_manifest(root, "t.json.gz", step_times_s=[1e300]),
              "t.json.gz": trace}, ["/step_times_s/0"]),
        Case("manifest: a model nested 100,000 levels", val,
             {"manifest.json": trace_manifest(root, "t.json.gz").replace(
                 b'"model": {', b'"model": {"deep": ' + deep(100000) + b', ', 1),
              "t.json.gz": trace}, ["nested deeper"]),
        Case("profile: 200,000 levels of nesting", ["validate", "manifest.json",
                                                    "--hardware-profile", "p.json"],
             {"manifest.json": trace_manifest(root, "t.json.gz"), "t.json.gz": trace,
              "p.json": b'{"chips": ' + deep(200000) + b"}"}, ["p.json", "nested deeper"]),
    ]


def collective_cases() -> list[Case]:
    return [
        Case("collective: --group 0-10^12", ["collective", "--group", "0-1000000000000"], {},
             ["--group"]),
        Case("collective: --group node:0-10^12", ["collective", "--group",
                                                  "node:0-1000000000000"], {}, ["--group"]),
        Case("collective: --sizes up to 2^63 - 1", ["collective", "--sizes",
                                                    "8B:9223372036854775807B"], {}, ["--sizes"]),
        Case("collective: --sizes 8B:1024TiB", ["collective", "--sizes", "8B:1024TiB"], {}, [],
             {0, 2}),
        Case("collective: --sizes 1 TiB, --factor 2^62", ["collective", "--sizes", "1TiB:1TiB",
                                                          "--factor", "4611686018427387904"], {},
             [], {0}),
    ]


def output_cases() -> list[Case]:
    run = ["--model", "llama3.2-1b", "--cluster", "dgx-h100", "--dp", "8", "--no-trace"]
    bad_utf8 = b"m\xff\xfe.json".decode("utf-8", "surrogateescape")
    long_name = "x" * 256
    return [
        Case("paths: a 256-character --model", ["calc", "--model", long_name], {},
             ["unknown model preset"]),
        Case("paths: a 256-character --model ending in .json", ["calc", "--model",
                                                                long_name + ".json"], {},
             [long_name]),
        Case("paths: a 256-character --json", run + ["--json", long_name + ".json"], {},
             ["--json", "File name too long"]),
        Case("paths: a 256-character --trace", run[:-1] + ["--trace", long_name + ".json"], {},
             ["--trace", "File name too long"]),
        Case("output: --json into a directory", run + ["--json", "."], {}, ["--json", "directory"]),
        Case("output: --json in a missing directory", run + ["--json", "no/such/dir/r.json"], {},
             ["--json", "no/such/dir/r.json"]),
        Case("output: --trace with a full disk", run[:-1] + ["--trace", "t.json"], {},
             ["--trace", "t.json"], file_size_limit=4096),
        Case("output: --json with a full disk", run + ["--json", "r.json"], {},
             ["--json", "r.json"], file_size_limit=512),
        Case("output: a non-UTF-8 model path echoed in the JSON report",
             ["--model", bad_utf8, "--cluster", "dgx-h100", "--dp", "8", "--no-trace",
              "--json", "r.json"], {"SAME:" + bad_utf8: b"workloads/models/llama3.2-1b.json"},
             [], {0}),
    ]


def published_run(root: Path, devices=None, hidden=None, slice_chips=None,
                  base="dgxc2504-llama3.1-8b-32xH100-bf16", **part) -> dict:
    """A run of the committed dev set (by default DGX Cloud's Llama 3.1 8B), renamed h-run, with
    fields made hostile (part: {"model": {"heads": 10**6}} and the like)."""
    runs = read(root, "validation/published/published_runs.json")
    run = next(r for r in runs if r["id"] == base)
    run["id"] = "h-run"
    for section, values in part.items():
        run[section].update(values)
    if devices is not None:
        run["hardware"]["count"] = devices
        run["parallelism"]["dp"] = None
    if hidden is not None:
        run["model"]["hidden"] = hidden
    if slice_chips is not None:
        run["hardware"]["hardware_key"] = "TPU-v3"
        run["hardware"]["interconnect"]["intra_slice"] = f"v3-8 = {slice_chips} chips"
    return run


def studies_cases(root: Path) -> list[Case]:
    """Main's newer inputs: sweep specs, failure and price tables, faults, plan search, goodput,
    compare's reports and validate-published's runs file."""
    small = ["--no-trace", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--dp", "8"]
    failures = read(root, "studies/data/failures-llama3.json")

    def table(**observed) -> bytes:
        doc = json.loads(json.dumps(failures))
        doc["observed"].update(observed)
        return dumps(doc)

    def category_count(count) -> bytes:
        doc = json.loads(json.dumps(failures))
        doc["categories"][0]["count"] = count
        return dumps(doc)

    prices = read(root, "studies/data/prices.json")
    for device in prices["devices"].values():
        if "usd_per_device_hour" in device:
            device["usd_per_device_hour"] = 1e308
    # Eight axes of 256 values: 2^64 points, which wrapped to 0 in 64 bits.
    wide = {"axes": {f: list(range(1, 257)) for f in
                     ("seq", "gbs", "tp", "dp", "pp", "mbs", "cp", "ep")}}
    report = {"step_time_s": 1.0, "tokens_per_s": 1.0, "mfu": 0.5, "compute_s": 1.0,
              "exposed_comm_s": 0.0, "bubble_fraction": 0.0, "peak_memory_bytes": 1,
              "inputs": {}, "exposed_comm_by_kind_s": {"tp": "x"},
              "time_by_op_class_s": {}, "simulated": True}
    goodput = ["goodput"] + small + ["--tokens", "1T"]
    return [
        Case("sweep: eight axes of 256 values (2^64 points)", ["sweep", "s.json"],
             {"s.json": dumps(wide)}, ["s.json: /axes", "2^16"]),
        Case("sweep: 10^6 values on one axis", ["sweep", "s.json"],
             {"s.json": dumps({"axes": {"gpus": [8] * 1000000}})}, ["s.json: /axes/gpus"]),
        Case("sweep: gpus 2^62", ["sweep", "s.json"],
             {"s.json": dumps({"axes": {"gpus": [1 << 62]}, "plans": "given"})}, [], {0, 2, 3}),
        Case("sweep: search top 2^62", ["sweep", "s.json"],
             {"s.json": dumps({"axes": {"gpus": [8]}, "search": {"top": 1 << 62}})},
             ["s.json: /search/top", "limit"]),
        Case("sweep: 100,000 levels of nesting", ["sweep", "s.json"],
             {"s.json": b'{"axes": ' + deep(100000) + b"}"}, ["nested deeper"]),
        Case("sweep: --jobs 2^40", ["sweep", "s.json", "--jobs", "1099511627776"],
             {"s.json": dumps({"axes": {"gpus": [8]}})}, ["--jobs"]),
        Case("plan: --top 2^62", ["plan", "--model", "llama3.2-1b", "--gpus", "8", "--top",
                                  "4611686018427387904"], {}, ["--top"]),
        Case("plan: --max-simulations 2^62", ["plan", "--model", "llama3.2-1b", "--gpus", "8",
                                              "--max-simulations", "4611686018427387904"], {},
             ["--max-simulations"]),
        Case("plan: --jobs 2^40", ["plan", "--model", "llama3.2-1b", "--gpus", "8", "--jobs",
                                   "1099511627776"], {}, ["--jobs"]),
        Case("plan: --pp 2^62 (tp x cp x pp wrapped to 0: SIGFPE)",
             ["plan", "--model", "llama3.2-1b", "--gpus", "8", "--pp", "4611686018427387904"],
             {}, ["--pp", "above the limit"]),
        Case("plan: a global batch of 2^30 sequences (its divisors listed one by one: minutes)",
             ["plan", "--model", "llama3.2-1b", "--gpus", "16", "--max-simulations", "20",
              "--gbs", "1073741824"], {}, ["no plan fits in memory"], {3}, heavy=True),
        Case("faults: --slow-rank 2^32:2 (wrapped to rank 0)",
             small + ["--slow-rank", "4294967296:2"], {}, ["--slow-rank"]),
        Case("faults: --slow-rank 0:1e300", small + ["--slow-rank", "0:1e300"], {},
             ["--slow-rank", "FACTOR <= 1000"]),
        Case("faults: --stragglers 0.5:1:1e300", small + ["--stragglers", "0.5:1:1e300"], {},
             ["--stragglers"]),
        Case("faults: --kernel-jitter 1e300", small + ["--kernel-jitter", "1e300"], {},
             ["--kernel-jitter"]),
        Case("faults: --degrade 2^40:network:0.5", small + ["--degrade",
                                                          "1099511627776:network:0.5"], {},
             ["--degrade"]),
        Case("faults: scenario slow rank 2^32 (wrapped to rank 0)", ["run", "s.json", "--no-trace"],
             {"s.json": dumps({"model": "llama3.2-1b", "dp": 8,
                               "faults": {"slow_ranks": [{"rank": 1 << 32, "factor": 2}]}})},
             ["s.json: /faults/slow_ranks/0/rank"]),
        Case("faults: scenario straggler factor 1e300", ["run", "s.json", "--no-trace"],
             {"s.json": dumps({"model": "llama3.2-1b", "dp": 8,
                               "faults": {"stragglers": {"fraction": 0.5, "min_factor": 1,
                                                         "max_factor": 1e300}}})},
             ["s.json: /faults/stragglers/max_factor"]),
        Case("failure table: 1e300 interruptions", goodput + ["--failure-table", "f.json"],
             {"f.json": category_count(1e300)}, ["interruptions"]),
        Case("failure table: observed over 1e-300 days", goodput + ["--failure-table", "f.json"],
             {"f.json": table(days=1e-300)}, ["interruptions"]),
        Case("failure table: 100,000 levels of nesting", goodput + ["--failure-table", "f.json"],
             {"f.json": b'{"categories": ' + deep(100000) + b"}"}, ["f.json", "nested deeper"]),
        Case("goodput: a restart of 10^6 days", goodput + ["--restart-time", "1000000d"], {},
             [], {0, 2}),
        Case("goodput: --tokens 1e30", ["goodput"] + small + ["--tokens", "1e30"], {},
             ["--tokens"]),
        Case("goodput: --runs 2^40", goodput + ["--runs", "1099511627776"], {}, ["--runs"]),
        Case("price table: $1e308 per device-hour (cost printed $inf)",
             small + ["--tokens", "1T", "--price-table", "p.json"], {"p.json": dumps(prices)},
             ["p.json: /devices/", "/usd_per_device_hour", "limit"]),
        Case("run: --tokens 1e300T (days printed inf)", small + ["--tokens", "1e300T"], {},
             ["--tokens", "at most"]),
        Case("plan: --tokens-per-step 1e300T (cast to int64)",
             ["plan", "--model", "llama3.2-1b", "--gpus", "8", "--tokens-per-step", "1e300T"],
             {}, ["--tokens-per-step"]),
        Case("compare: a report with a non-number time", ["compare", "a.json", "a.json"],
             {"a.json": dumps(report)}, ["a.json: /exposed_comm_by_kind_s/tp"]),
        Case("compare: /dev/zero", ["compare", "/dev/zero", "/dev/zero"], {},
             ["/dev/zero", "limit"]),
        Case("validate-published: 100,000 levels of nesting", ["validate-published", "r.json"],
             {"r.json": b'{"runs": ' + deep(100000) + b"}"}, ["r.json", "nested deeper"]),
        # Well-formed records whose scenario meshsim cannot run: that run is reported as not
        # expressible, with the reason, and the command goes on (it had aborted the batch, or
        # thrown out of stoll).
        Case("validate-published: a run of 10^12 GPUs", ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, devices=10**12)])},
             ["h-run: meshsim refuses the scenario", "131072"], {0}),
        Case("validate-published: a hidden size of 2^40", ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, hidden=1 << 40)])},
             ["h-run: meshsim refuses the scenario", "/d_model", "above the limit"], {0}),
        Case("validate-published: tp 1000 x pp 2^62 (the product wrapped: SIGFPE)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, parallelism={"tp": 1000, "pp": 1 << 62})])},
             ["h-run: the stated tp 1000 is more than the 32 devices"], {0}),
        Case("validate-published: tp 0 (tp x pp x cp was 0: SIGFPE)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, parallelism={"tp": 0})])},
             ["h-run: meshsim rejects the plan: tp: expected a positive integer, got 0"], {0}),
        Case("validate-published: 0 attention heads (head_dim divided by 0: SIGFPE)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, model={"heads": 0})])},
             ["h-run: the number of attention heads is 0"], {0}),
        Case("validate-published: a virtual pipeline size of 0 on pp 8 (SIGFPE)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(
                 root, base="dgxc2504-nemotron4-340b-512xH100-bf16",
                 parallelism={"virtual_pipeline_stages": 0})])},
             ["h-run: meshsim rejects the plan: vpp: expected a positive integer, got 0"], {0}),
        Case("validate-published: DeepSeek-V3 with d_model 1 over tp 2 (MTP's projection: "
             "internal error)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(
                 root, base="mbridge2509-deepseekv3dropless-1024xH100-fp8", hidden=1)])},
             ["h-run: meshsim rejects the plan", "multi-token-prediction"], {0}),
        Case("validate-published: NeMo GPT-3 padding its vocabulary to 128 x tp 2^62 (SIGFPE)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(
                 root, base="nemo2407-gpt3-5b-64xH100-fp8", parallelism={"tp": 1 << 62})])},
             ["h-run: meshsim rejects the plan: tp:", "above the limit"], {0}),
        Case("validate-published: 8192 heads over 4096 (head_dim 0)",
             ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, model={"heads": 8192, "kv_heads": 8192})])},
             ["h-run: meshsim refuses the scenario"], {0}),
        Case("validate-published: a TPU slice of 10^20 chips", ["validate-published", "r.json"],
             {"r.json": dumps([published_run(root, slice_chips="99999999999999999999")])},
             ["h-run: the TPU slice size", "not a chip count"], {0}),
        Case("validate-published --run: an id the file lacks",
             ["validate-published", "r.json", "--run", "no-such-run"],
             {"r.json": dumps([published_run(root)])},
             ["--run", "no run \"no-such-run\" in r.json", "h-run"]),
        Case("validate-published --run: a hidden size of 2^40 (the one run refused, not a crash)",
             ["validate-published", "r.json", "--run", "h-run", "--trace", "t.pftrace"],
             {"r.json": dumps([published_run(root, hidden=1 << 40)])},
             ["not expressible: meshsim refuses the scenario"], {0}),
        Case("validate-published --run: a trace it cannot write",
             ["validate-published", "r.json", "--run", "h-run", "--trace", "t.txt"],
             {"r.json": dumps([published_run(root)])},
             ["--trace", ".pftrace"]),
        Case("validate-published --run: trace ranks past the world",
             ["validate-published", "r.json", "--run", "h-run", "--trace", "t.pftrace",
              "--trace-ranks", "0-99999999"],
             {"r.json": dumps([published_run(root)])},
             ["--trace-ranks"]),
        Case("validate-published --run: a trace in a directory that does not exist",
             ["validate-published", "r.json", "--run", "h-run", "--trace", "no/dir/t.pftrace"],
             {"r.json": dumps([published_run(root)])},
             ["--trace", "no/dir"]),
    ]


def chakra_cases() -> list[Case]:
    """Chakra execution traces (run --workload): framing, graphs and counts that must be refused
    with the file, the node and the field, within the time and memory bounds; and a long
    dependency chain, which must simply run (no recursion). The node bound and gzip bombs are
    tested in tests/traces/chakra_test.cc and by the profiler-trace cases (the same inflater)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import chakra_et as c  # tools/chakra_et.py, beside this script

    meta = c.enc_metadata()

    def node(i, deps=(), dur=1, t=4, attrs=()):
        return c.enc_record(c.enc_node(i, f"n{i}", t, deps, dur, attrs))

    def coll(i, size, deps=()):
        return node(i, deps, 0, 7,
                    [("comm_type", "int64_val", 0), ("comm_size", "int64_val", size)])

    run = ["run", "--workload", "et", "--cluster", "dgx-h100", "--no-trace"]

    def chain() -> bytes:
        out = bytearray(meta)
        for i in range(300000):
            out += node(i, (i - 1,) if i else ())
        return bytes(out)

    return [
        Case("chakra: a truncated varint", run, {"et/rank.0.et": meta + b"\xff\xff"},
             ["et/rank.0.et", "record 1 at byte", "truncated varint"]),
        Case("chakra: a record of 4 GiB in a small file", run,
             {"et/rank.0.et": meta + c.enc_varint(0xFFFFFFFF) + b"x"},
             ["et/rank.0.et", "a record of 4294967295 bytes"]),
        Case("chakra: a varint of 11 bytes", run, {"et/rank.0.et": meta + b"\x80" * 11},
             ["et/rank.0.et", "more than 5 bytes"]),
        Case("chakra: garbage", run, {"et/rank.0.et": bytes(range(256)) * 64}, ["et/rank.0.et"]),
        Case("chakra: a cycle of data dependencies", run,
             {"et/rank.0.et": meta + node(1, (3,)) + node(2, (1,)) + node(3, (2,))},
             ["et/rank.0.et", "node 1, data_deps", "cycle"]),
        Case("chakra: comm_size 2^62", run, {"et/rank.0.et": meta + coll(1, 1 << 62)},
             ["et/rank.0.et", "node 1 ('n1'), comm_size"]),
        Case("chakra: duration_micros 2^63", run, {"et/rank.0.et": meta + node(1, (), 1 << 63)},
             ["node 1 ('n1'), duration_micros"]),
        Case("chakra: collectives that disagree across ranks", run,
             {"et/rank.0.et": meta + coll(1, 8), "et/rank.1.et": meta + coll(1, 16)},
             ["et/rank.", "collective #1"]),
        Case("chakra: a dependency chain of 300,000 nodes (runs)", run + ["--json", "r.json"],
             {"et/rank.0.et": chain}, ["step time"], {0}, heavy=True),
        Case("chakra: --export-chakra into a file", run + ["--export-chakra", "x"],
             {"et/rank.0.et": meta + node(1), "x": b"a file"}, ["x", "cannot create"]),
    ]


def nccl_tests_cases(root: Path) -> list[Case]:
    log = (root / "validation/collectives/logs/dgxc-dgx-h100-all_reduce.log").read_bytes()
    cal = ["calibrate-collectives", "l.log", "--nccl", "2.30", "--out", "f.json"]
    return [
        Case("nccl-tests: a time of 1e400", cal,
             {"l.log": log.replace(b"13.67", b"1e400")}, ["l.log: line", "time \"1e400\""]),
        Case("nccl-tests: a size past 2^63", cal,
             {"l.log": log.replace(b"           8             2",
                                   b"99999999999999999999             2")},
             ["l.log: line", "size"]),
        Case("nccl-tests: /dev/zero", ["calibrate-collectives", "/dev/zero", "--out", "f.json"],
             {}, ["/dev/zero", "64 MiB limit"]),
        Case("nccl-tests: binary garbage", cal, {"l.log": bytes(range(256)) * 256},
             ["l.log", "no nccl-tests measurements"]),
        Case("calibrate-collectives: --min-size 1e30", cal + ["--min-size", "1e30"],
             {"l.log": log}, ["--min-size"]),
        Case("calibrate-collectives: a sweep table of 2^62 ranks",
             ["calibrate-collectives", "s.json", "--out", "f.json"],
             {"s.json": dumps({"source": "s", "test": "all_reduce", "ranks": 1 << 62, "nodes": 1,
                               "nccl": "2.18", "points": [{"bytes": 8, "time_us": 1}]})},
             ["s.json: /nodes"]),
        Case("cluster fragment: its own base", ["topology", "--cluster", "f.json"],
             {"f.json": dumps({"base": "f.json"})}, ["f.json: /base", "not a whole cluster"]),
    ]


def materialize(case: Case, scratch: Path, root: Path) -> None:
    for name, data in case.files.items():
        if name.startswith("SAME:"):
            (scratch / name[5:]).write_bytes((root / data.decode()).read_bytes())
            continue
        path = scratch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(data):  # a large input, made only for the cases that run
            data = data()
        if data.startswith(b"SPARSE:"):
            with open(path, "wb") as f:
                f.truncate(int(data[7:]))
            continue
        path.write_bytes(data)


def write_support_files(scratch: Path, root: Path) -> None:
    """c.json: a 3-tier DGX H100 fabric that holds 32,768 GPUs (used by the op-budget case)."""
    doc = read(root, "topology/clusters/dgx-h100.json")
    doc["scale_out"]["tiers"]["value"] = 3
    (scratch / "c.json").write_text(json.dumps(doc))


def run_case(case: Case, binary: str, root: Path, limit_memory: bool, timeout: float) -> tuple:
    with tempfile.TemporaryDirectory(prefix="meshsim-hostile-") as tmp:
        scratch = Path(tmp)
        write_support_files(scratch, root)
        materialize(case, scratch, root)

        def limits():
            if limit_memory:
                resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
            if case.file_size_limit is not None:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a kill
                resource.setrlimit(resource.RLIMIT_FSIZE,
                                   (case.file_size_limit, case.file_size_limit))

        start = time.monotonic()
        try:
            p = subprocess.run([binary, *case.args], cwd=scratch, preexec_fn=limits,
                               capture_output=True, timeout=timeout)
            code, out = p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            code, out = None, f"(no exit within {timeout:.0f} s)"
        elapsed = time.monotonic() - start
        leftovers = [p.name for p in scratch.iterdir() if p.name.startswith(".meshsim-")]
    problems = [f"left temporary files {leftovers}"] if leftovers else []
    if code is None:
        problems.append("timed out")
    elif code < 0:
        problems.append(f"killed by signal {-code}")
    elif code not in case.exit_codes:
        problems.append(f"exit {code}, expected {sorted(case.exit_codes)}")
    problems += [f"output has {bad!r}" for bad in FORBIDDEN if bad in out]
    if code in case.exit_codes:  # a refusal (2), or a run that reports why it went on (0, 3)
        problems += [f"message lacks {w!r}" for w in case.expect if w not in out]
    return problems, code, elapsed, out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("root", type=Path)
    parser.add_argument("--sanitizers", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("-k", dest="only", default="")
    args = parser.parse_args()
    root = args.root
    cases = (model_cases(root) + run_flag_cases() + fabric_cases(root) + cluster_cases(root) +
             chips_cases(root) + scenario_cases(root) + validate_cases(root) +
             collective_cases() + output_cases() + studies_cases(root) + chakra_cases() +
             nccl_tests_cases(root))
    cases = [c for c in cases if args.only in c.name and not (args.sanitizers and c.heavy)]
    failed = 0
    total_start = time.monotonic()
    for case in cases:
        problems, code, elapsed, out = run_case(case, args.binary, root,
                                                not args.sanitizers, args.timeout)
        last = out.strip().splitlines()[-1] if out.strip() else ""
        status = "ok  " if not problems else "FAIL"
        print(f"{status} {elapsed:6.2f} s  exit {code}  {case.name}")
        if problems:
            failed += 1
            print(f"       {'; '.join(problems)}")
        print(f"       {last[:300]}")
    print(f"{len(cases) - failed} of {len(cases)} hostile inputs handled "
          f"({time.monotonic() - total_start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""meshsim's performance benchmarks: wall time and peak RSS of whole commands.

Usage: tools/bench.py [--build build] [--quick]

Measures, each as the median of several runs (peak RSS from getrusage of the child):
  * one step of the default scenario (Llama-3-70B, 2048 H100s), representative simulation
    (target: under 1 s and 1 GiB on one core);
  * the same step with every rank simulated (--full-simulation);
  * the trace of all 2048 ranks of that step (--trace-ranks all), and its writing rate:
    slices / (wall of the traced run - wall of the untraced full run) (target >= 1 M slices/s);
  * `meshsim collective` all-reduce of 1 GiB over all 2048 GPUs, analytical and SimGrid backends.
Prints a Markdown table for docs/performance.md. Uses only the Python standard library.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, repeat):
    """Median wall seconds, peak RSS (MiB, of that command alone) and the last output of `cmd`."""
    walls, rss, out = [], 0.0, ""
    for _ in range(repeat):
        with tempfile.TemporaryFile(mode="w+") as log:
            t0 = time.perf_counter()
            child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(child.pid, 0)
            walls.append(time.perf_counter() - t0)
            child.returncode = os.waitstatus_to_exitcode(status)
            log.seek(0)
            out = log.read()
        if child.returncode not in (0, 3):
            sys.exit(f"bench: {' '.join(cmd)} failed ({child.returncode}):\n{out}")
        rss = max(rss, usage.ru_maxrss / 1024.0)  # KiB on Linux
    return statistics.median(walls), rss, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="one run each, skip the all-ranks trace")
    a = ap.parse_args()
    exe = os.path.join(a.build, "meshsim")
    n = 1 if a.quick else 5
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        wall, rss, out = run([exe, "--no-trace"], n)
        events = re.search(r"(\d+) events", out).group(1)
        rows.append(("default step, representative (4 ranks)", wall, rss, f"{events} events"))
        full_wall, rss, out = run([exe, "--no-trace", "--full-simulation"], 1 if a.quick else 3)
        events = re.search(r"(\d+) events", out).group(1)
        rows.append(("default step, all 2048 ranks simulated", full_wall, rss, f"{events} events"))
        if not a.quick:
            trace = os.path.join(tmp, "all.pftrace")
            wall, rss, out = run([exe, "--trace-ranks", "all", "--trace", trace], 1)
            slices = int(re.search(r"\((\d+) events; open", out).group(1))
            size = os.path.getsize(trace) / 1e9
            rate = slices / max(1e-9, wall - full_wall) / 1e6
            rows.append(("default step, trace of all 2048 ranks", wall, rss,
                         f"{slices} packets, {size:.2f} GB, {rate:.2f} M packets/s written"))
        for backend in ("analytical", "simgrid"):
            wall, rss, out = run([exe, "collective", "--cluster", "dgx-h100", "--nodes", "256",
                                  "--op", "allreduce", "--group", "all", "--sizes", "1GiB:1GiB",
                                  "--backend", backend], 1 if backend == "simgrid" else n)
            row = out.strip().splitlines()[-1].split()
            rows.append((f"all-reduce 1 GiB over 2048 GPUs, {backend}", wall, rss,
                         f"{float(row[2]) / 1e3:.2f} ms simulated, {row[5]}"))
    print("| benchmark | wall (s) | peak RSS (MiB) | notes |")
    print("| --- | ---: | ---: | --- |")
    for name, wall, rss, note in rows:
        print(f"| {name} | {wall:.3f} | {rss:.0f} | {note} |")


if __name__ == "__main__":
    main()

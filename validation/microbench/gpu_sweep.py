#!/usr/bin/env python3
"""Kernel sweeps on one NVIDIA GPU, for the tables meshsim's kernel model is fitted to.

    PYTHONUNBUFFERED=1 python3 validation/microbench/gpu_sweep.py --out DIR [--budget SECONDS]

Needs PyTorch with CUDA (Triton for the interference section); no network. Writes, under DIR:
  gemm_raw.csv       bf16 GEMMs (torch.mm, cuBLAS) and FP8 GEMMs (torch._scaled_mm, cuBLASLt) over
                     cubes 256..16384 and the projection/MLP shapes of Llama-3 8B, Llama-3 70B at
                     TP 8 and GPT-3 175B at TP 8 (forward, and the dgrad/wgrad shapes of a few)
  attention_raw.csv  scaled_dot_product_attention with the flash (FlashAttention-2) and cuDNN
                     backends: forward and backward timed apart, sequence 512..64K, head dim 64
                     and 128, causal and not, a few GQA shapes
  memory_raw.csv     memory-bound kernels by size: copy, triad, RMSNorm, LayerNorm, SwiGLU, RoPE,
                     softmax, cross entropy, FP8 casts, fused AdamW (PyTorch eager kernels)
  misc.json          the device, driver and library versions; kernel launch cost (eager and in a
                     CUDA graph); a GEMM slowed by a concurrent copy kernel that holds P SMs (the
                     way a collective's kernels hold SMs beside compute)
Every time is the median of CUDA-event-timed repetitions after warm-up, on random data (never
zeros), rotating among input sets where one set would sit in L2. Short kernels are timed as
replays of a captured CUDA graph, so the host's launch cost stays out of the device time. Each
section is time-boxed against --budget and written as soon as it ends: a section that fails
prints its traceback and the others go on.

The tables are turned into validation/microbench/*.csv rows (with this script and the device
named as their source) by hand; validation/microbench/README.md says what was measured where.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

T0 = time.time()
BUDGET = 300.0
DEV = torch.device("cuda")


def left() -> float:
    return BUDGET - (time.time() - T0)


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


def graph_of(fn, inner: int):
    """A CUDA graph of `inner` calls fn(0..inner-1), captured after a warm-up on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn(i)
    torch.cuda.synchronize()
    return g


def bench(fn, target_s: float = 0.04, min_reps: int = 5, max_reps: int = 60,
          allow_graph: bool = True) -> dict:
    """Median seconds per call of fn(i) (i picks the input set), timed with CUDA events."""
    for i in range(2):
        fn(i)
    torch.cuda.synchronize()
    e0, e1 = event(), event()
    e0.record()
    for i in range(3):
        fn(i)
    e1.record()
    torch.cuda.synchronize()
    pilot = e0.elapsed_time(e1) / 3 / 1e3
    mode, inner, run = "eager", 1, None
    if allow_graph and pilot < 150e-6:
        inner = max(1, min(200, math.ceil(1.5e-3 / max(pilot, 1e-6))))
        try:
            g = graph_of(fn, inner)
            run, mode = g.replay, "graph"
        except Exception as exc:  # noqa: BLE001 - fall back to eager launches
            log(f"  graph capture failed ({type(exc).__name__}: {exc}); eager")
            inner = max(1, min(200, math.ceil(1.5e-3 / max(pilot, 1e-6))))
    if run is None:
        calls = [0]

        def run():
            for _ in range(inner):
                fn(calls[0])
                calls[0] += 1
    run()
    torch.cuda.synchronize()
    reps = int(max(min_reps, min(max_reps, target_s / max(pilot * inner, 1e-7))))
    times = []
    for _ in range(reps):
        e0, e1 = event(), event()
        e0.record()
        run()
        e1.record()
        times.append((e0, e1))
    torch.cuda.synchronize()
    per = sorted(a.elapsed_time(b) / 1e3 / inner for a, b in times)
    return {"s": statistics.median(per), "min_s": per[0], "max_s": per[-1], "reps": reps,
            "inner": inner, "mode": mode}


def n_sets(bytes_per_set: int, want: int = 256 << 20, cap: int = 16) -> int:
    return max(1, min(cap, math.ceil(want / max(bytes_per_set, 1))))


def rand(shape, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(shape, device=DEV, dtype=torch.float32) * scale).to(dtype)


class Table:
    """A CSV written row by row (flushed), so a killed run keeps what it measured."""

    def __init__(self, path: str, fields: list[str]):
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=fields)
        self.w.writeheader()
        self.f.flush()

    def add(self, row: dict) -> None:
        self.w.writerow(row)
        self.f.flush()


# ---------------------------------------------------------------- environment

def environment() -> dict:
    p = torch.cuda.get_device_properties(0)
    env = {
        "device": torch.cuda.get_device_name(0),
        "sm_count": p.multi_processor_count,
        "memory_gib": round(p.total_memory / 2**30, 1),
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        env["triton"] = None
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                            "clocks.max.mem,power.limit,pstate", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        env["nvidia_smi"] = q.stdout.strip()
    except Exception as exc:  # noqa: BLE001
        env["nvidia_smi"] = f"failed: {exc}"
    return env


def chip_label(name: str) -> str:
    if "H200" in name:
        return "h200"
    if "H100" in name and ("HBM3" in name or "SXM" in name):
        return "h100-sxm"
    return name.lower().replace(" ", "-")


def warm_up(seconds: float) -> float:
    """Runs 8192^3 bf16 products for `seconds`, so clocks and temperature settle before the
    sweep (a training run's steady state); returns the last second's TFLOP/s."""
    a, b = rand((8192, 8192)), rand((8192, 8192))
    c = torch.empty((8192, 8192), device=DEV, dtype=torch.bfloat16)
    end = time.time() + seconds
    rate = 0.0
    while time.time() < end:
        e0, e1 = event(), event()
        e0.record()
        for _ in range(50):
            torch.mm(a, b, out=c)
        e1.record()
        torch.cuda.synchronize()
        rate = 50 * 2 * 8192**3 / (e0.elapsed_time(e1) / 1e3) / 1e12
    del a, b, c
    return rate


# ---------------------------------------------------------------- GEMM

def gemm_shapes() -> list[tuple[str, int, int, int]]:
    """(role, m, n, k): C[m, n] = A[m, k] B[k, n]."""
    out = [("cube", s, s, s) for s in (256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)]
    models = {
        # name: [(layer, n, k)] forward: y[tokens, n] = x[tokens, k] W^T
        "llama3-8b": [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096),
                      ("down", 4096, 14336)],
        "llama3-70b-tp8": [("qkv", 1280, 8192), ("o", 8192, 1024), ("gate_up", 7168, 8192),
                           ("down", 8192, 3584)],
        "gpt3-175b-tp8": [("qkv", 4608, 12288), ("o", 12288, 1536), ("fc1", 6144, 12288),
                          ("fc2", 12288, 6144)],
    }
    for model, layers in models.items():
        for tokens in (2048, 8192, 16384):
            for layer, n, k in layers:
                out.append((f"{model}.{layer}.fwd", tokens, n, k))
    # Backward of Llama-3 8B at 8192 tokens: dgrad dx[t, k] = dy[t, n] W[n, k];
    # wgrad dW[n, k] = dy^T[n, t] x[t, k].
    for layer, n, k in models["llama3-8b"]:
        out.append((f"llama3-8b.{layer}.dgrad", 8192, k, n))
        out.append((f"llama3-8b.{layer}.wgrad", n, k, 8192))
    out.append(("llama3-8b.lm_head.fwd", 8192, 128256, 4096))
    return out


def gemm_section(table: Table, chip: str, deadline: float) -> None:
    shapes = gemm_shapes()
    fp8 = hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")
    for dtype in ("bf16", "fp8", "fp8-fast-accum"):
        if dtype != "bf16" and not fp8:
            log("  no float8 / _scaled_mm in this PyTorch: FP8 skipped")
            break
        for role, m, n, k in shapes:
            if left() < deadline:
                log(f"  GEMM {dtype}: out of time at {role} {m}x{n}x{k}")
                return
            try:
                row = gemm_one(dtype, role, m, n, k)
            except Exception as exc:  # noqa: BLE001
                log(f"  GEMM {dtype} {role} {m}x{n}x{k} failed: {type(exc).__name__}: {exc}")
                torch.cuda.empty_cache()
                continue
            row["chip"] = chip
            table.add(row)
            log(f"  GEMM {dtype:14s} {role:26s} {m:6d}x{n:6d}x{k:6d} {row['tflops']:7.1f} TFLOP/s "
                f"({row['mode']}, {row['reps']}x{row['inner']})")
            torch.cuda.empty_cache()


def gemm_one(dtype: str, role: str, m: int, n: int, k: int) -> dict:
    width = 2 if dtype == "bf16" else 1
    set_bytes = (m * k + n * k) * width
    sets = n_sets(set_bytes, want=192 << 20, cap=8)
    wgrad = role.endswith(".wgrad")
    if dtype == "bf16":
        # forward y = x W^T: A = x[m, k], B = W^T (W[n, k] stored: a transposed view);
        # dgrad dx = dy W: A = dy[m, k], B = W[k, n] as stored;
        # wgrad dW = dy^T x: A = dy^T (dy[k, m] stored: a transposed view), B = x[k, n].
        if wgrad:
            As = [rand((k, m)).t() for _ in range(sets)]
            Bs = [rand((k, n)) for _ in range(sets)]
            layout = "A transposed, B as stored (wgrad)"
        elif role.endswith(".dgrad"):
            As = [rand((m, k)) for _ in range(sets)]
            Bs = [rand((k, n)) for _ in range(sets)]
            layout = "A and B as stored (dgrad)"
        else:
            As = [rand((m, k)) for _ in range(sets)]
            Bs = [rand((n, k)).t() for _ in range(sets)]
            layout = "A as stored, B transposed (forward, x W^T)"
        C = torch.empty((m, n), device=DEV, dtype=torch.bfloat16)

        def fn(i):
            torch.mm(As[i % sets], Bs[i % sets], out=C)
        library = f"cuBLAS via torch.mm (PyTorch {torch.__version__})"
    else:
        fast = dtype == "fp8-fast-accum"
        As = [rand((m, k), scale=0.5).to(torch.float8_e4m3fn) for _ in range(sets)]
        Bs = [rand((n, k), scale=0.5).to(torch.float8_e4m3fn).t() for _ in range(sets)]
        one = torch.ones((), device=DEV, dtype=torch.float32)
        layout = "A_N·B_T (TN, as _scaled_mm requires)"

        def fn(i):
            torch._scaled_mm(As[i % sets], Bs[i % sets], one, one, out_dtype=torch.bfloat16,
                             use_fast_accum=fast)
        library = (f"cuBLASLt via torch._scaled_mm, e4m3 x e4m3 -> bf16, per-tensor scales, "
                   f"use_fast_accum={fast} (PyTorch {torch.__version__})")
    r = bench(fn)
    flops = 2.0 * m * n * k
    return {"dtype": dtype, "role": role, "m": m, "n": n, "k": k, "layout": layout,
            "library": library, "sets": sets, "time_us": round(r["s"] * 1e6, 3),
            "min_us": round(r["min_s"] * 1e6, 3), "max_us": round(r["max_s"] * 1e6, 3),
            "tflops": round(flops / r["s"] / 1e12, 1), "reps": r["reps"], "inner": r["inner"],
            "mode": r["mode"], "t_s": round(time.time() - T0, 1)}


GEMM_FIELDS = ["chip", "dtype", "role", "m", "n", "k", "layout", "library", "sets", "time_us",
               "min_us", "max_us", "tflops", "reps", "inner", "mode", "t_s"]


# ---------------------------------------------------------------- attention

def attention_configs() -> list[dict]:
    out = []
    for d in (128, 64):
        for causal in (True, False):
            for s in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
                # FlashAttention's own benchmark: 16K tokens a batch, model width 2048;
                # beyond 16K one sequence a batch.
                b = max(1, 16384 // s)
                out.append({"batch": b, "heads_q": 2048 // d, "heads_kv": 2048 // d,
                            "head_dim": d, "seq": s, "causal": causal})
    for s in (2048, 8192):  # GQA as Llama-3 8B: 32 query heads, 8 key/value heads
        out.append({"batch": 16384 // s, "heads_q": 32, "heads_kv": 8, "head_dim": 128,
                    "seq": s, "causal": True})
    return out


def attention_section(table: Table, chip: str, deadline: float) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    for cfg in attention_configs():
        for impl, backend in backends:
            if left() < deadline:
                log(f"  attention: out of time at {impl} {cfg}")
                return
            try:
                rows = attention_one(impl, backend, sdpa_kernel, cfg)
            except Exception as exc:  # noqa: BLE001
                log(f"  attention {impl} {cfg} failed: {type(exc).__name__}: {str(exc)[:200]}")
                torch.cuda.empty_cache()
                continue
            for row in rows:
                row["chip"] = chip
                table.add(row)
                log(f"  attention {impl:5s} {row['pass']:3s} d={cfg['head_dim']:3d} "
                    f"causal={cfg['causal']!s:5s} b={cfg['batch']:2d} h={cfg['heads_q']}/"
                    f"{cfg['heads_kv']} s={cfg['seq']:5d} {row['tflops']:6.1f} TFLOP/s")
            torch.cuda.empty_cache()


def attention_one(impl, backend, sdpa_kernel, cfg) -> list[dict]:
    b, hq, hkv, d, s = cfg["batch"], cfg["heads_q"], cfg["heads_kv"], cfg["head_dim"], cfg["seq"]
    causal = cfg["causal"]
    # The trainers' layout: [b, s, h, d] projections viewed as [b, h, s, d].
    q = rand((b, s, hq, d)).transpose(1, 2).requires_grad_(True)
    k = rand((b, s, hkv, d)).transpose(1, 2).requires_grad_(True)
    v = rand((b, s, hkv, d)).transpose(1, 2).requires_grad_(True)
    gqa = {"enable_gqa": True} if hkv != hq else {}
    fwd_flops = 4.0 * b * hq * s * s * d / (2 if causal else 1)
    rows = []
    with sdpa_kernel(backend):
        def fwd(i):
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        r = bench(fwd, allow_graph=False, min_reps=3)
        rows.append(("fwd", r, fwd_flops))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        grad = torch.randn_like(out)

        def bwd(i):
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
        r = bench(bwd, allow_graph=False, min_reps=3)
        rows.append(("bwd", r, 2.5 * fwd_flops))
    return [{"impl": impl, "pass": ps, "causal": str(causal).lower(), "batch": b, "heads_q": hq,
             "heads_kv": hkv, "head_dim": d, "seq": s, "time_us": round(r["s"] * 1e6, 2),
             "min_us": round(r["min_s"] * 1e6, 2), "max_us": round(r["max_s"] * 1e6, 2),
             "tflops": round(f / r["s"] / 1e12, 1), "reps": r["reps"],
             "t_s": round(time.time() - T0, 1)} for ps, r, f in rows]


ATTN_FIELDS = ["chip", "impl", "pass", "causal", "batch", "heads_q", "heads_kv", "head_dim",
               "seq", "time_us", "min_us", "max_us", "tflops", "reps", "t_s"]


# ---------------------------------------------------------------- memory-bound kernels

def timed_pass(f, xs, backward, extra=()):
    """fn(i) for bench: f on input set i forward (no autograd), or the backward of f's output with
    respect to that input (and `extra`) against a random output gradient."""
    sets = len(xs)
    if not backward:
        def fwd(i):
            with torch.no_grad():
                f(xs[i % sets])
        return fwd
    outs = [f(x) for x in xs]
    gs = [torch.randn_like(o) for o in outs]
    return lambda i: torch.autograd.grad(outs[i % sets], (xs[i % sets], *extra), gs[i % sets],
                                         retain_graph=True)


def memory_cases():
    """(op, pass, rows, width, dtype, bytes the kernel must move at least, builder). A builder
    takes the number of input sets and returns fn(i)."""
    cases = []
    bf = 2

    def copy(rows, width):
        def build(sets):
            xs = [rand((rows, width)) for _ in range(sets)]
            ys = [torch.empty_like(xs[0]) for _ in range(sets)]
            return lambda i: ys[i % sets].copy_(xs[i % sets])
        return build

    def triad(rows, width):
        def build(sets):
            bs = [rand((rows, width)) for _ in range(sets)]
            cs = [rand((rows, width)) for _ in range(sets)]
            a = torch.empty_like(bs[0])
            return lambda i: torch.add(bs[i % sets], cs[i % sets], alpha=0.5, out=a)
        return build

    def norm(kind, rows, width, backward):
        def build(sets):
            xs = [rand((rows, width)).requires_grad_(backward) for _ in range(sets)]
            w = (1 + 0.1 * rand((width,))).requires_grad_(backward)
            bias = (0.1 * rand((width,))).requires_grad_(backward)

            def f(x):
                if kind == "rms_norm":
                    return F.rms_norm(x, (width,), w, 1e-5)
                return F.layer_norm(x, (width,), w, bias, 1e-5)
            return timed_pass(f, xs, backward, (w,))
        return build

    def swiglu(rows, width, backward):
        # width: the output width F; the input holds gate and up halves, [rows, 2F]
        def build(sets):
            xs = [rand((rows, 2 * width)).requires_grad_(backward) for _ in range(sets)]

            def f(x):
                g, u = x[:, :width], x[:, width:]
                return F.silu(g) * u
            return timed_pass(f, xs, backward)
        return build

    def rope(tokens, heads, d):
        def build(sets):
            xs = [rand((1, tokens, heads, d)) for _ in range(sets)]
            ang = torch.outer(torch.arange(tokens, device=DEV, dtype=torch.float32),
                              torch.rand(d // 2, device=DEV))
            cos = torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16)[None, :, None, :]
            sin = torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16)[None, :, None, :]

            def fn(i):
                x = xs[i % sets]
                x1, x2 = x[..., : d // 2], x[..., d // 2:]
                return x * cos + torch.cat((-x2, x1), -1) * sin
            return fn
        return build

    def softmax(rows, width):
        def build(sets):
            xs = [rand((rows, width)) for _ in range(sets)]
            return lambda i: F.softmax(xs[i % sets], dim=-1)
        return build

    def cross_entropy(rows, vocab, backward):
        def build(sets):
            xs = [rand((rows, vocab)).requires_grad_(backward) for _ in range(sets)]
            ts = [torch.randint(0, vocab, (rows,), device=DEV) for _ in range(sets)]
            if not backward:
                def fwd(i):
                    with torch.no_grad():
                        F.cross_entropy(xs[i % sets], ts[i % sets])
                return fwd
            losses = [F.cross_entropy(x, t) for x, t in zip(xs, ts)]
            return lambda i: torch.autograd.grad(losses[i % sets], xs[i % sets], retain_graph=True)
        return build

    def fp8_cast(rows, width, scaled):
        def build(sets):
            xs = [rand((rows, width)) for _ in range(sets)]
            if not scaled:
                return lambda i: xs[i % sets].to(torch.float8_e4m3fn)

            def fn(i):  # delayed-scaling recipe's pieces, eager: amax, scale, cast
                x = xs[i % sets]
                amax = x.abs().amax().float()
                return (x.float() * (448.0 / amax)).to(torch.float8_e4m3fn)
            return fn
        return build

    def adamw(params):
        def build(sets):
            p = torch.nn.Parameter(torch.randn(params, device=DEV, dtype=torch.float32))
            p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
            opt.step()
            return lambda i: opt.step()
        return build

    for rows, width in ((4096, 4096), (16384, 4096), (16384, 8192), (65536, 8192)):
        n = rows * width
        cases.append(("copy", "fwd", rows, width, "bf16", 2 * bf * n, copy(rows, width)))
        cases.append(("triad", "fwd", rows, width, "bf16", 3 * bf * n, triad(rows, width)))
    for rows, width in ((4096, 4096), (16384, 4096), (16384, 8192), (65536, 8192)):
        n = rows * width
        for kind in ("rms_norm", "layer_norm"):
            cases.append((kind, "fwd", rows, width, "bf16", 2 * bf * n + bf * width,
                          norm(kind, rows, width, False)))
            cases.append((kind, "bwd", rows, width, "bf16", 3 * bf * n + bf * width,
                          norm(kind, rows, width, True)))
        cases.append(("softmax", "fwd", rows, width, "bf16", 2 * bf * n, softmax(rows, width)))
        cases.append(("fp8_cast", "fwd", rows, width, "bf16->e4m3", 3 * n,
                      fp8_cast(rows, width, False)))
        cases.append(("fp8_cast_amax_scale", "fwd", rows, width, "bf16->e4m3", 3 * n,
                      fp8_cast(rows, width, True)))
    for rows, width in ((4096, 14336), (16384, 14336), (8192, 28672)):
        n = rows * width
        cases.append(("swiglu", "fwd", rows, width, "bf16", 3 * bf * n, swiglu(rows, width, False)))
        cases.append(("swiglu", "bwd", rows, width, "bf16", 5 * bf * n, swiglu(rows, width, True)))
    for tokens, heads in ((8192, 32), (32768, 32), (65536, 64)):
        n = tokens * heads * 128
        cases.append(("rope", "fwd", tokens, heads * 128, "bf16", 2 * bf * n, rope(tokens, heads, 128)))
    for rows, vocab in ((4096, 32768), (8192, 128256), (16384, 128256)):
        n = rows * vocab
        cases.append(("cross_entropy", "fwd", rows, vocab, "bf16", bf * n,
                      cross_entropy(rows, vocab, False)))
        cases.append(("cross_entropy", "bwd", rows, vocab, "bf16", 2 * bf * n,
                      cross_entropy(rows, vocab, True)))
    for params in (1 << 24, 1 << 26, 1 << 28):
        # fp32 parameters, gradients and two moments: read p, g, m, v; write p, m, v
        cases.append(("adamw_fused", "step", params, 1, "fp32", 28 * params, adamw(params)))
    return cases


def catalogue_hbm(chip: str):
    """The chip's HBM bandwidth in B/s from topology/chips.json (its datasheet figure, with the
    source named there), read as tools/fit_kernels.py reads it; None for a chip not in it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import fit_kernels
    entry = fit_kernels.chips().get(chip)
    return entry["hbm"] if entry else None


def memory_section(table: Table, chip: str, hbm_peak, deadline: float) -> None:
    for op, ps, rows, width, dtype, nbytes, build in memory_cases():
        if left() < deadline:
            log(f"  memory-bound: out of time at {op} {rows}x{width}")
            return
        try:
            sets = 1 if op.startswith("adamw") else n_sets(nbytes, want=512 << 20, cap=8)
            fn = build(sets)
            r = bench(fn, allow_graph=ps == "fwd")
        except Exception as exc:  # noqa: BLE001
            log(f"  memory {op} {ps} {rows}x{width} failed: {type(exc).__name__}: {str(exc)[:200]}")
            torch.cuda.empty_cache()
            continue
        gbps = nbytes / r["s"] / 1e9
        table.add({"chip": chip, "op": op, "pass": ps, "rows": rows, "width": width,
                   "dtype": dtype, "min_bytes": nbytes, "time_us": round(r["s"] * 1e6, 3),
                   "min_us": round(r["min_s"] * 1e6, 3), "max_us": round(r["max_s"] * 1e6, 3),
                   "gbps": round(gbps, 1),
                   "of_datasheet_hbm": round(gbps * 1e9 / hbm_peak, 3) if hbm_peak else "",
                   "sets": sets, "reps": r["reps"], "inner": r["inner"], "mode": r["mode"],
                   "provider": f"PyTorch {torch.__version__} eager", "t_s": round(time.time() - T0, 1)})
        log(f"  memory {op:20s} {ps:4s} {rows:6d}x{width:6d} {r['s'] * 1e6:9.1f} us "
            f"{gbps:7.0f} GB/s ({r['mode']})")
        del fn
        torch.cuda.empty_cache()


MEM_FIELDS = ["chip", "op", "pass", "rows", "width", "dtype", "min_bytes", "time_us", "min_us",
              "max_us", "gbps", "of_datasheet_hbm", "sets", "reps", "inner", "mode", "provider", "t_s"]


# ---------------------------------------------------------------- launch cost

def per_graph_kernel_us(fn) -> float:
    """Device microseconds per kernel of fn, 1000 launches captured in a CUDA graph, replayed 5x."""
    g = graph_of(fn, 1000)
    e0, e1 = event(), event()
    e0.record()
    for _ in range(5):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    return round(e0.elapsed_time(e1) * 1e3 / 5000, 3)


def launch_section() -> dict:
    x = torch.zeros(1, device=DEV)
    x.add_(1.0)
    torch.cuda.synchronize()
    out = {}
    n = 5000
    t = time.perf_counter()
    e0, e1 = event(), event()
    e0.record()
    for _ in range(n):
        x.add_(1.0)
    e1.record()
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    out["eager_add_host_us_per_launch"] = round(host * 1e6, 3)
    out["eager_add_device_us_per_launch"] = round(e0.elapsed_time(e1) * 1e3 / n, 3)
    out["graph_add_device_us_per_kernel"] = per_graph_kernel_us(lambda i: x.add_(1.0))
    a, b = rand((64, 64)), rand((64, 64))
    c = torch.empty((64, 64), device=DEV, dtype=torch.bfloat16)
    torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        torch.mm(a, b, out=c)
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    out["eager_mm64_host_us_per_launch"] = round(host * 1e6, 3)
    out["graph_mm64_device_us_per_kernel"] = per_graph_kernel_us(lambda i: torch.mm(a, b, out=c))
    log(f"  launch: {out}")
    return out


# ---------------------------------------------------------------- interference

try:
    import triton
    import triton.language as tl

    @triton.jit
    def stream_copy(src, dst, n, iters, BLOCK: tl.constexpr):
        """Each of the grid's CTAs copies its share of src to dst, `iters` times over."""
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        for _ in range(iters):
            for start in range(pid * BLOCK, n, nprog * BLOCK):
                offs = start + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
except Exception:  # noqa: BLE001 - no Triton, or one that cannot compile here
    stream_copy = None


def interference_section() -> dict:
    """A many-wave GEMM slowed by a concurrent kernel that holds P SMs and streams memory (what
    a collective's kernels do beside compute: NCCL runs one CTA per channel)."""
    if stream_copy is None:
        raise RuntimeError("no Triton: interference not measured")
    n = 1 << 27  # 256 MiB of bf16 a buffer: streams HBM, not L2
    src, dst = rand((n,)), torch.empty((n,), device=DEV, dtype=torch.bfloat16)
    a, b = rand((8192, 8192)), rand((8192, 8192))
    c = torch.empty((8192, 8192), device=DEV, dtype=torch.bfloat16)
    gemms = 12
    g = graph_of(lambda i: torch.mm(a, b, out=c), gemms)

    def time_gemms(stream):
        e0, e1 = event(), event()
        with torch.cuda.stream(stream):
            e0.record(stream)
            g.replay()
            e1.record(stream)
        return e0, e1

    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    alone = []
    for _ in range(5):
        e0, e1 = time_gemms(s1)
        torch.cuda.synchronize()
        alone.append(e0.elapsed_time(e1) / 1e3)
    t_alone = statistics.median(alone)
    out = {"gemm": "8192^3 bf16 torch.mm x %d in a CUDA graph" % gemms,
           "gemm_alone_ms": round(t_alone * 1e3, 3),
           "gemm_alone_tflops": round(gemms * 2 * 8192**3 / t_alone / 1e12, 1),
           "copy_kernel": "Triton grid-stride copy, 16 warps a CTA, BLOCK 4096 bf16, 256 MiB",
           "rows": []}
    for ctas in (8, 16, 24, 32, 66):
        # the copy alone, one pass
        stream_copy[(ctas,)](src, dst, n, 1, BLOCK=4096, num_warps=16)
        torch.cuda.synchronize()
        e0, e1 = event(), event()
        e0.record()
        stream_copy[(ctas,)](src, dst, n, 1, BLOCK=4096, num_warps=16)
        e1.record()
        torch.cuda.synchronize()
        one = e0.elapsed_time(e1) / 1e3
        iters = max(1, math.ceil(3.0 * t_alone / one))
        slow, copy_rates = [], []
        for _ in range(3):
            torch.cuda.synchronize()
            c0, c1 = event(), event()
            with torch.cuda.stream(s2):
                c0.record(s2)
                stream_copy[(ctas,)](src, dst, n, iters, BLOCK=4096, num_warps=16)
                c1.record(s2)
            time.sleep(0.002)  # the copy's CTAs are resident before the GEMMs arrive
            e0, e1 = time_gemms(s1)
            torch.cuda.synchronize()
            slow.append(e0.elapsed_time(e1) / 1e3 / t_alone - 1)
            copy_rates.append(4 * n * iters / (c0.elapsed_time(c1) / 1e3) / 1e9)
        row = {"ctas": ctas, "copy_alone_gbps": round(4 * n / one / 1e9, 1),
               "copy_during_gemm_gbps": round(statistics.median(copy_rates), 1),
               "gemm_slowdown": round(statistics.median(slow), 4),
               "gemm_slowdown_runs": [round(x, 4) for x in slow]}
        out["rows"].append(row)
        log(f"  interference: {row}")
    return out


# ---------------------------------------------------------------- main

def main() -> int:
    global BUDGET
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the whole sweep")
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--only", nargs="*", default=[], help="sections: gemm attention memory launch interference")
    args = ap.parse_args()
    BUDGET = args.budget
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    env = environment()
    chip = chip_label(env["device"])
    hbm = catalogue_hbm(chip)
    env["chip"] = chip
    log(f"env: {json.dumps(env)}")
    misc = {"env": env}

    def save():
        with open(os.path.join(args.out, "misc.json"), "w") as f:
            json.dump(misc, f, indent=1)
    save()
    want = set(args.only) or {"gemm", "attention", "memory", "launch", "interference"}
    try:
        misc["warmup_tflops"] = round(warm_up(args.warmup), 1)
        log(f"warm-up: {misc['warmup_tflops']} TFLOP/s at the end")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    # Budget shares: each section stops when less than its reserve is left for the ones after.
    plan = [("launch", 0.90), ("gemm", 0.62), ("attention", 0.30), ("memory", 0.10),
            ("interference", 0.0)]
    for name, reserve_frac in plan:
        if name not in want:
            continue
        reserve = reserve_frac * BUDGET
        log(f"== {name} (stops with {reserve:.0f} s left)")
        try:
            if name == "gemm":
                t = Table(os.path.join(args.out, "gemm_raw.csv"), GEMM_FIELDS)
                gemm_section(t, chip, reserve)
            elif name == "attention":
                t = Table(os.path.join(args.out, "attention_raw.csv"), ATTN_FIELDS)
                attention_section(t, chip, reserve)
            elif name == "memory":
                t = Table(os.path.join(args.out, "memory_raw.csv"), MEM_FIELDS)
                memory_section(t, chip, hbm, reserve)
            elif name == "launch":
                misc["launch"] = launch_section()
            elif name == "interference":
                if left() > 8:
                    misc["interference"] = interference_section()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            misc.setdefault("failed", []).append(name)
        torch.cuda.empty_cache()
        save()
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

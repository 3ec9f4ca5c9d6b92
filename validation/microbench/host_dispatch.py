#!/usr/bin/env python3
"""Host (CPU) cost of issuing training-step operators in PyTorch, per operator: what meshsim's
host model charges a rank's host thread for each op it issues (docs/model.md, "The host").

Every case runs on one-element CPU tensors, so that the operator's own arithmetic is negligible
and what is timed is the framework's work around it: the Python call, the argument parsing and
dispatcher, autograd's recording of the graph in the forward, autograd's engine walking that graph
in the backward, an nn.Module's __call__, a Python torch.autograd.Function (Megatron's TP
mappings and fused kernels are such functions), and the optimizer's Python loop. On a GPU the
same work precedes each cudaLaunchKernel; the launch itself is timed on the GPU host
(validation/microbench/h200-2026-11-28/run*/misc.json, `launch`).

Two cases time a whole decoder block of the reference trainer (reference_trainer/train_torch.py's
Block, Llama-style, bf16 autocast as on a GPU) at a width of 16, forward and backward: the host
work of a real model's code per block, which meshsim divides by the kernels the same block launches
on a GPU (docs/model.md).

Times are the thread's CPU time (time.thread_time), so that other processes on the machine do not
inflate them; each case is the fastest of --repeats timed loops, divided by the operators it
issued. Writes CSV to stdout (or --out): case, us_per_op, ops, torch, python, cpu.
"""
import argparse
import csv
import platform
import sys
import time

from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reference_trainer"))

def best_of(fn, repeats):
    fn()
    return min(fn() for _ in range(repeats))


def timed(body, n):
    def run():
        t0 = time.thread_time()
        body(n)
        return (time.thread_time() - t0) / n
    return run


def case_add_no_grad(n):
    x = torch.zeros(1)
    y = torch.zeros(1)
    with torch.no_grad():
        for _ in range(n):
            torch.add(x, y)


def case_add_recorded(n):
    # A forward op whose input requires grad: autograd records a node for it.
    x = torch.zeros(1, requires_grad=True)
    y = torch.zeros(1)
    for _ in range(n):
        torch.add(x, y)


def case_mm_recorded(n):
    a = torch.zeros(1, 1, requires_grad=True)
    b = torch.zeros(1, 1)
    for _ in range(n):
        torch.mm(a, b)


def case_linear_module(n):
    lin = torch.nn.Linear(1, 1, bias=False)
    x = torch.zeros(1, 1)
    for _ in range(n):
        lin(x)


class Identity(torch.autograd.Function):
    """The shape of Megatron's _CopyToModelParallelRegion: a Python autograd.Function."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


def case_autograd_function_forward(n):
    x = torch.zeros(1, requires_grad=True)
    for _ in range(n):
        Identity.apply(x)


def chain_backward(n, op):
    """Seconds per backward node: a chain of n recorded ops, then one backward through it."""
    def run():
        x = torch.zeros(1, requires_grad=True)
        y = x
        for _ in range(n):
            y = op(y)
        t0 = time.thread_time()
        y.backward()
        return (time.thread_time() - t0) / n
    return run


def optimizer_step(foreach, tensors):
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.zeros(1)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)

    def run():
        t0 = time.thread_time()
        opt.step()
        return (time.thread_time() - t0) / tensors
    return run


def llama_block(repeats):
    """Seconds of host work for one forward and one backward of a reference-trainer block."""
    import dataclasses

    import model_config
    import train_torch

    models = Path(__file__).resolve().parent.parent / "models"
    cfg = model_config.load_model(str(models / "val-100m.json"))
    # The block's code at a width where its arithmetic is negligible.
    cfg = dataclasses.replace(cfg, d_model=16, num_heads=4, num_kv_heads=2, head_dim=4, d_ff=32)
    block = train_torch.Block(cfg)
    seq = 4
    cos, sin = train_torch.rope_tables(seq, cfg.head_dim, cfg.rope_theta, "cpu")
    x = torch.randn(1, seq, cfg.d_model, requires_grad=True)
    forward, backward = [], []
    for _ in range(repeats * 20):
        t0 = time.thread_time()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = block(x, cos, sin)
        t1 = time.thread_time()
        y.backward(torch.ones_like(y))
        t2 = time.thread_time()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
    return min(forward), min(backward)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="-")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    n, r = args.ops, args.repeats
    cases = [
        ("forward_add_no_grad", best_of(timed(case_add_no_grad, n), r), n),
        ("forward_add_recorded", best_of(timed(case_add_recorded, n), r), n),
        ("forward_mm_recorded", best_of(timed(case_mm_recorded, n), r), n),
        ("forward_linear_module", best_of(timed(case_linear_module, n), r), n),
        ("forward_autograd_function", best_of(timed(case_autograd_function_forward, n), r), n),
        ("backward_node_add", best_of(chain_backward(n // 4, lambda y: y + 1.0), r), n // 4),
        ("backward_node_mul", best_of(chain_backward(n // 4, lambda y: y * 1.0), r), n // 4),
        ("backward_node_autograd_function", best_of(chain_backward(n // 4, Identity.apply), r),
         n // 4),
        ("optimizer_adamw_per_tensor", best_of(optimizer_step(False, 2000), r), 2000),
        ("optimizer_adamw_foreach_per_tensor", best_of(optimizer_step(True, 2000), r), 2000),
    ]
    block_forward, block_backward = llama_block(r)
    cases += [("llama_block_forward", block_forward, 1), ("llama_block_backward", block_backward, 1)]
    out = sys.stdout if args.out == "-" else open(args.out, "w", newline="")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["case", "us_per_op", "ops", "torch", "python", "cpu"])
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for name, seconds, ops in cases:
        w.writerow([name, f"{seconds * 1e6:.3f}", ops, torch.__version__,
                    platform.python_version(), cpu])
    return 0


if __name__ == "__main__":
    sys.exit(main())

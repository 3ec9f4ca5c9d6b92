#!/usr/bin/env python3
"""The host's work as it is on a GPU machine: host_dispatch.py's Megatron-LM layer issuing real
kernels, the host cost of a c10d collective call, and whole training steps of small GPT models
built from that layer, the regime where a step is bound by its host (docs/model.md, "The host").

    python3 validation/microbench/host_gpu.py [--out DIR] [--quick]
    python3 validation/microbench/host_gpu.py --only steps|layer-fused|layer-unfused|...
    python3 validation/microbench/host_gpu.py --micro | --profile | --phases

Writes DIR/host_gpu.json (default $OUT or /tmp/meshsim-host) and prints a summary. Needs one CUDA
GPU; with --cpu it runs the same code on CPU tensors at small sizes (a check of the script, no
figure of it is used).

--phases times a step's forward, backward and optimizer apart (each ended by a synchronisation)
for 12 and 24 layers of GPT at hidden 768 and 1024 and a small vocabulary: written to find the
part of the 125M model's step that does not shrink with its layers (README.md beside this file);
not yet run on a GPU.

Cases:
  * layer_*: host_dispatch.py's replica of Megatron-LM's ParallelTransformerLayer @ cfd2e21607
    (TP 2 semantics, all-reduces not run) at hidden 16, 4 tokens, where every kernel is shorter
    than its launch: host CPU time (time.thread_time) of a forward and of a backward, the fastest
    of the repeats, and the wall time of many forward+backward passes back to back, synchronised
    once (the rate the host issues a layer at). Three settings of the four TorchScript functions:
    "unfused" (Megatron's JIT flags without nvfuser, which PyTorch 2.x no longer has: each op of
    them a kernel), "fused" (the profiling executor with the tensor-expression fuser on the GPU,
    one kernel each: what nvfuser gave Megatron), "one_op" (host_dispatch.py's one-op stand-ins).
    Kernels per pass are counted with the profiler (cudaLaunchKernel calls).
  * collective: c10d all_reduce of one element over a one-rank NCCL group, synchronous and
    async_op=True (with the handle's wait), host CPU time per call; NCCL runs its kernel for
    one rank, so what is timed is c10d's Python and C++ path and NCCL's enqueue.
  * steps: one training step of a GPT (Megatron-LM 2022 as the replica issues it: learned
    positions, the layer above at real width with bf16 parameters, tied logits through the
    column-linear's autograd function, Megatron's vocab-parallel cross entropy over an fp32 copy of
    the logits, the gradient norm read on the host, Adam over fp32 master weights, their copy back
    to bf16). Per step: wall time of ten steps back to back (steady state), the host's CPU time,
    and from the profiler the device's busy time and the kernels launched. Deviations from
    Megatron-LM: apex's FusedAdam and multi-tensor norm are PyTorch's fused AdamW over one flat
    fp32 tensor and _foreach_norm; the gradient buffer is bf16 (the replica's fused weight-gradient
    GEMM accumulates in the operands' type: the same one kernel, half the bytes of fp32); the fused
    softmax kernel is PyTorch's softmax (scale and mask not applied).
"""
import argparse
import contextlib
import json
import os
import platform
import sys
import time

from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import host_dispatch as hd  # noqa: E402


def sync():
    if hd.DEVICE == "cuda":
        torch.cuda.synchronize()


def set_jit(mode):
    """Megatron's flags (initialize.py's _set_jit_fusion_options for torch >= 1.10), with the
    GPU fuser PyTorch 2.x has in place of nvfuser when mode is "fused"."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_profiling_mode(True)
    torch._C._jit_override_can_fuse_on_cpu(False)
    torch._C._jit_override_can_fuse_on_gpu(mode == "fused")
    torch._C._jit_set_texpr_fuser_enabled(mode == "fused")
    torch._C._debug_set_autodiff_subgraph_inlining(False)


def launches(prof):
    names = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
             "cudaGraphLaunch")
    return sum(1 for e in prof.events() if e.name in names)


def device_busy_us(prof):
    """Union of the device's kernel and copy intervals, microseconds."""
    spans = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            spans.append((e.time_range.start, e.time_range.end))
    spans.sort()
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy, len(spans)


RECORD_SHAPES = False  # --profile: the operators' input shapes in the exported traces


def profiled(fn):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if hd.DEVICE == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts, record_shapes=RECORD_SHAPES) as prof:
        fn()
        sync()
    return prof


@contextlib.contextmanager
def tiny_layer(mode):
    """Megatron's layer at a negligible width (TP 2 semantics, as host_dispatch.py measures it),
    its TorchScript functions unfused, fused or one op each (mode): (layer, x, mask, grad,
    params)."""
    saved = {name: getattr(hd, name) for name in hd._one_op_fusions()}
    if mode == "one_op":
        for name, fn in hd._one_op_fusions().items():
            setattr(hd, name, fn)
    try:
        a = hd.MegatronArgs
        a.hidden_size, a.num_attention_heads, a.kv_channels, a.ffn_hidden_size = 16, 4, 4, 64
        a.seq_length, a.micro_batch_size, a.tensor_model_parallel_size = 4, 1, 2
        a.dtype = torch.bfloat16 if hd.DEVICE == "cuda" else torch.float32
        hd._RNG_TRACKER.states_.clear()
        set_jit("fused" if mode == "fused" else "unfused")
        hd._rng_tracker().add("model-parallel-rng", 1234 + 2718)
        layer = hd.MegatronLayer(layer_number=1)
        layer.train()
        x = torch.randn(a.seq_length, a.micro_batch_size, a.hidden_size, dtype=a.dtype,
                        device=hd.DEVICE, requires_grad=True)
        mask = torch.ones(1, 1, a.seq_length, a.seq_length, dtype=torch.bool,
                          device=hd.DEVICE).triu(1)
        yield layer, x, mask, torch.ones_like(x), list(layer.parameters())
    finally:
        for name, fn in saved.items():
            setattr(hd, name, fn)


def layer_case(mode, repeats, passes):
    """Host work of one Megatron-LM layer at negligible width, per forward and backward."""
    with tiny_layer(mode) as (layer, x, mask, grad, params):
        fwd, bwd = hd.layer_passes(layer, x, mask, grad, params, repeats)
        sync()
        # The rate the host issues whole passes at, the device kept behind it.
        t0 = time.perf_counter()
        c0 = time.thread_time()
        for _ in range(passes):
            y = layer(x, mask)
            y.backward(grad)
            hd.zero_layer_grads(x, params)
        sync()
        wall = (time.perf_counter() - t0) / passes
        cpu = (time.thread_time() - c0) / passes
        prof_f = profiled(lambda: layer(x, mask))
        y = layer(x, mask)
        sync()
        prof_b = profiled(lambda: y.backward(grad))
        hd.zero_layer_grads(x, params)
        prof_z = profiled(lambda: hd.zero_layer_grads(x, params))
        return {
            "forward_host_us": min(fwd) * 1e6,
            "backward_host_us": min(bwd) * 1e6,
            "pass_wall_us": wall * 1e6,
            "pass_host_us": cpu * 1e6,
            "forward_launches": launches(prof_f),
            "backward_launches": launches(prof_b),
            "grad_zeroing_launches": launches(prof_z),
        }


def collective_case(n):
    if hd.DEVICE != "cuda":
        return None
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        t = torch.ones(1, device="cuda")
        for _ in range(50):
            dist.all_reduce(t)
        sync()
        out = {}
        for name, async_op in (("all_reduce_sync", False), ("all_reduce_async_wait", True)):
            best = None
            for _ in range(5):
                c0 = time.thread_time()
                for _ in range(n):
                    h = dist.all_reduce(t, async_op=async_op)
                    if async_op:
                        h.wait()
                c = (time.thread_time() - c0) / n
                sync()
                best = c if best is None else min(best, c)
            out[name + "_host_us"] = best * 1e6
        prof = profiled(lambda: [dist.all_reduce(t) for _ in range(10)])
        out["launches_per_call"] = launches(prof) / 10
        return out
    finally:
        dist.destroy_process_group()


def per_op(run, n, repeats=5, prepare=lambda: None):
    """Wall and host CPU time per op of run(prepared, n), the fastest of the repeats, each
    synchronised before and after (prepare() untimed before each)."""
    best = None
    for _ in range(repeats):
        prepared = prepare()
        sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        run(prepared, n)
        c = time.thread_time() - c0
        sync()
        w = time.perf_counter() - t0
        if best is None or w < best[0]:
            best = (w, c)
    return {"wall_us": best[0] / n * 1e6, "host_us": best[1] / n * 1e6}


def chain(n, op):
    x = torch.zeros(1, device=hd.DEVICE, requires_grad=True)
    y = x
    for _ in range(n):
        y = op(y)
    return y


def backward_per_node(n, op, repeats=5):
    """A chain of n recorded ops, then its backward timed: per node."""
    return per_op(lambda y, _: y.backward(), n, repeats, prepare=lambda: chain(n, op))


def micro_cases():
    """Single operators on the device: what one launch costs the host, forward and backward."""
    out = {}
    x = torch.zeros(1, device=hd.DEVICE)
    y = torch.zeros(1, device=hd.DEVICE)
    xr = torch.zeros(1, device=hd.DEVICE, requires_grad=True)

    def add_no_grad(n):
        with torch.no_grad():
            for _ in range(n):
                torch.add(x, y)

    def add_recorded(n):
        for _ in range(n):
            torch.add(xr, y)
    out["forward_add_no_grad"] = per_op(lambda _, n: add_no_grad(n), 20000)
    out["forward_add_recorded"] = per_op(lambda _, n: add_recorded(n), 20000)
    out["backward_node_add"] = backward_per_node(5000, lambda t: t + 1.0)
    out["backward_node_autograd_function_and_add"] = backward_per_node(
        2500, lambda t: hd.Identity.apply(t + 1.0))
    if hasattr(torch.autograd, "set_multithreading_enabled"):
        with torch.autograd.set_multithreading_enabled(False):
            out["backward_node_add_on_calling_thread"] = backward_per_node(5000, lambda t: t + 1.0)
    return out


def split_layer(mode, repeats):
    """One layer's forward and backward timed apart (each synchronised), wall and host, and the
    backward again on the calling thread (autograd's device threads off)."""
    with tiny_layer(mode) as (layer, x, mask, grad, params):
        res = {}
        for label, threads in (("", True), ("_calling_thread", False)):
            ctx = (torch.autograd.set_multithreading_enabled(threads)
                   if hasattr(torch.autograd, "set_multithreading_enabled") else None)
            if ctx is None and not threads:
                continue
            fw, bw = [], []
            with (ctx if ctx is not None else contextlib.nullcontext()):
                for _ in range(repeats):
                    sync()
                    t0 = time.perf_counter()
                    y = layer(x, mask)
                    sync()
                    t1 = time.perf_counter()
                    y.backward(grad)
                    sync()
                    t2 = time.perf_counter()
                    fw.append(t1 - t0)
                    bw.append(t2 - t1)
                    hd.zero_layer_grads(x, params)
            fw.sort()
            bw.sort()
            res["forward_wall_us" + label] = fw[len(fw) // 2] * 1e6
            res["backward_wall_us" + label] = bw[len(bw) // 2] * 1e6
        return res


def llama_block_case(repeats):
    """host_dispatch.py's reference-trainer block (Llama-style, bf16 autocast) on the device at a
    negligible width: forward and backward wall time, each synchronised, and launches."""
    import dataclasses
    import model_config
    import train_torch
    models = Path(__file__).resolve().parent.parent / "models"
    cfg = model_config.load_model(str(models / "val-100m.json"))
    cfg = dataclasses.replace(cfg, d_model=16, num_heads=4, num_kv_heads=2, head_dim=4, d_ff=32)
    block = train_torch.Block(cfg).to(hd.DEVICE)
    seq = 4
    cos, sin = train_torch.rope_tables(seq, cfg.head_dim, cfg.rope_theta, hd.DEVICE)
    x = torch.randn(1, seq, cfg.d_model, device=hd.DEVICE, requires_grad=True)
    dev = "cuda" if hd.DEVICE == "cuda" else "cpu"
    fw, bw, fh = [], [], []

    def fwd():
        with torch.autocast(dev, dtype=torch.bfloat16):
            return block(x, cos, sin)
    for _ in range(repeats):
        sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        y = fwd()
        c1 = time.thread_time()
        sync()
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        sync()
        t2 = time.perf_counter()
        fw.append(t1 - t0)
        fh.append(c1 - c0)
        bw.append(t2 - t1)
        x.grad = None
        block.zero_grad(set_to_none=True)
    prof_f = profiled(fwd)
    y = fwd()
    prof_b = profiled(lambda: y.backward(torch.ones_like(y)))
    med = lambda v: sorted(v)[len(v) // 2] * 1e6  # noqa: E731
    return {"forward_wall_us": med(fw), "forward_host_us": med(fh), "backward_wall_us": med(bw),
            "forward_launches": launches(prof_f), "backward_launches": launches(prof_b)}


# ---------------------------------------------------------------------------------------------
# A GPT of Megatron-LM 2022 around the replica's layer.
# ---------------------------------------------------------------------------------------------

class _VocabParallelCE(torch.autograd.Function):
    """mpu/cross_entropy.py's _VocabParallelCrossEntropy at one TP rank (its all-reduces not run):
    the max, the shift in place, the predicted logit's gather and masking, exp in place, the sum,
    the loss, the softmax in place saved for the backward."""

    @staticmethod
    def forward(ctx, logits, target):
        logits_max = torch.max(logits, dim=-1)[0]
        logits.sub_(logits_max.unsqueeze(dim=-1))
        part = logits.size()[-1]
        start, end = 0, part
        target_mask = (target < start) | (target >= end)
        masked_target = target.clone() - start
        masked_target[target_mask] = 0
        logits_2d = logits.view(-1, part)
        masked_target_1d = masked_target.view(-1)
        arange_1d = torch.arange(start=0, end=logits_2d.size()[0], device=logits_2d.device)
        predicted_1d = logits_2d[arange_1d, masked_target_1d]
        predicted_1d = predicted_1d.clone().contiguous()
        predicted = predicted_1d.view_as(target)
        predicted[target_mask] = 0.0
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        sum_exp = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp) - predicted
        exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax
        part = softmax.size()[-1]
        grad_2d = grad_input.view(-1, part)
        arange_1d = torch.arange(start=0, end=grad_2d.size()[0], device=grad_2d.device)
        grad_2d[arange_1d, masked_target_1d] -= (1.0 - target_mask.view(-1).float())
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None


class GPT(torch.nn.Module):
    def __init__(self, layers, vocab):
        super().__init__()
        a = hd.MegatronArgs
        self.word = torch.nn.Parameter(
            torch.randn(vocab, a.hidden_size, dtype=a.dtype, device=hd.DEVICE) * 0.02)
        self.word.main_grad = None
        self.position = torch.nn.Parameter(
            torch.randn(a.seq_length, a.hidden_size, dtype=a.dtype, device=hd.DEVICE) * 0.02)
        self.embedding_dropout = torch.nn.Dropout(a.hidden_dropout)
        self.layers = torch.nn.ModuleList(hd.MegatronLayer(i + 1) for i in range(layers))
        self.final_layernorm = hd._MixedFusedLayerNorm(a.hidden_size, a.layernorm_epsilon)

    def forward(self, tokens, positions, mask):
        e = torch.nn.functional.embedding(tokens, self.word) + \
            torch.nn.functional.embedding(positions, self.position)
        e = e.transpose(0, 1).contiguous()  # [b, s, h] -> [s, b, h]
        h = self.embedding_dropout(e)
        for layer in self.layers:
            h = layer(h, mask)
        h = self.final_layernorm(h)
        # parallel_lm_logits: the column linear's function against the tied embedding.
        return hd._LinearGradAccumAsync.apply(h, self.word, None, True, False, False)


class Trainer:
    """Local DDP's contiguous gradient buffer and hooks, Float16Optimizer's step."""

    def __init__(self, model):
        self.model = model
        params = [p for p in model.parameters()]
        total = sum(p.numel() for p in params)
        a = hd.MegatronArgs
        flat = torch.empty(total, dtype=a.dtype, device=hd.DEVICE)
        self.grad_buffer = torch.zeros(total, dtype=a.dtype, device=hd.DEVICE)
        o = 0
        self.hooks = []
        for p in params:
            n = p.numel()
            v = flat[o:o + n].view_as(p)
            v.copy_(p.data)
            p.data = v
            p.main_grad = self.grad_buffer[o:o + n].view_as(p)
            o += n
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._hook(p))
            self.hooks.append(acc)  # keep the accumulators alive, as distributed.py does
        self.flat = flat
        self.master = flat.detach().to(torch.float32, copy=True).requires_grad_()
        kw = {"fused": True} if hd.DEVICE == "cuda" else {}
        self.opt = torch.optim.AdamW([self.master], lr=1e-5, weight_decay=0.01, **kw)
        self.params = params

    @staticmethod
    def _hook(p):
        def hook(*unused):
            if p.grad is not None:
                p.main_grad.add_(p.grad.data)
                p.grad = None
        return hook

    def forward(self, tokens, positions, labels, mask):
        """The gradient buffer zeroed, the model, the loss (pretrain_gpt.py's loss_func)."""
        self.grad_buffer.zero_()
        logits = self.model(tokens, positions, mask)
        losses = _VocabParallelCE.apply(logits.float(), labels)
        loss_mask = torch.ones_like(losses)
        return torch.sum(losses.view(-1) * loss_mask.reshape(-1)) / loss_mask.sum()

    def optimizer_step(self):
        """Float16OptimizerWithFloat16Params.step: the main grads, the norm read on the host
        (clip_grad_norm_fp32: total_norm.item()), Adam, the copy back to the model's dtype."""
        self.master.grad = self.grad_buffer.float()
        norms = torch._foreach_norm([self.master.grad])
        total = torch.linalg.vector_norm(torch.stack(norms)).item()
        if total > 1.0:
            self.master.grad.mul_(1.0 / (total + 1e-6))
        self.opt.step()
        with torch.no_grad():
            self.flat.copy_(self.master)

    def step(self, tokens, positions, labels, mask):
        loss = self.forward(tokens, positions, labels, mask)
        loss.backward()
        self.optimizer_step()
        return loss


def gpt_setup(layers, hidden, heads, seq, mbs, vocab):
    """A GPT of the replica's layers at real width (TP 1, bf16 on a GPU) and one batch:
    (trainer, batch) with batch = (tokens, positions, labels, mask)."""
    a = hd.MegatronArgs
    a.hidden_size, a.num_attention_heads = hidden, heads
    a.kv_channels, a.ffn_hidden_size = hidden // heads, 4 * hidden
    a.seq_length, a.micro_batch_size, a.tensor_model_parallel_size = seq, mbs, 1
    a.dtype = torch.bfloat16 if hd.DEVICE == "cuda" else torch.float32
    hd._RNG_TRACKER.states_.clear()
    set_jit("fused")
    hd._rng_tracker().add("model-parallel-rng", 1234 + 2718)
    torch.manual_seed(0)
    model = GPT(layers, vocab)
    model.train()
    tokens = torch.randint(0, vocab, (mbs, seq), device=hd.DEVICE)
    labels = torch.randint(0, vocab, (seq, mbs), device=hd.DEVICE)
    positions = torch.arange(seq, device=hd.DEVICE).unsqueeze(0).expand(mbs, seq)
    mask = torch.ones(1, 1, seq, seq, dtype=torch.bool, device=hd.DEVICE).triu(1)
    return Trainer(model), (tokens, positions, labels, mask)


def phase_case(layers, hidden, heads, seq, mbs, vocab, steps):
    """One training step's phases timed apart, each ended by a synchronisation: the forward with
    the loss, the backward, the optimizer (the gradient norm's read included); wall and the main
    thread's CPU time, medians over the steps, after a warm-up."""
    tr, (tokens, positions, labels, mask) = gpt_setup(layers, hidden, heads, seq, mbs, vocab)
    for _ in range(5):
        tr.step(tokens, positions, labels, mask)
    sync()
    rows = []
    for _ in range(steps):
        w, c = [time.perf_counter()], [time.thread_time()]
        loss = tr.forward(tokens, positions, labels, mask)
        sync()
        w.append(time.perf_counter()); c.append(time.thread_time())
        loss.backward()
        sync()
        w.append(time.perf_counter()); c.append(time.thread_time())
        tr.optimizer_step()
        sync()
        w.append(time.perf_counter()); c.append(time.thread_time())
        rows.append([(w[i + 1] - w[i]) * 1e3 for i in range(3)] +
                    [(c[i + 1] - c[i]) * 1e3 for i in range(3)])
    med = [sorted(r[i] for r in rows)[len(rows) // 2] for i in range(6)]
    t0 = time.perf_counter()
    for _ in range(steps):
        tr.step(tokens, positions, labels, mask)
    sync()
    free = (time.perf_counter() - t0) / steps * 1e3
    del tr
    return {"layers": layers, "hidden": hidden, "mbs": mbs, "step_ms": free,
            "forward_ms": med[0], "backward_ms": med[1], "optimizer_ms": med[2],
            "forward_cpu_ms": med[3], "backward_cpu_ms": med[4], "optimizer_cpu_ms": med[5]}


def step_case(layers, hidden, heads, seq, mbs, vocab, warmup, steps, trace=None):
    trainer, (tokens, positions, labels, mask) = gpt_setup(layers, hidden, heads, seq, mbs, vocab)
    model = trainer.model
    for _ in range(warmup):
        trainer.step(tokens, positions, labels, mask)
    sync()
    t0 = time.perf_counter()
    c0 = time.thread_time()
    for _ in range(steps):
        loss = trainer.step(tokens, positions, labels, mask)
    sync()
    wall = (time.perf_counter() - t0) / steps
    host = (time.thread_time() - c0) / steps
    prof = profiled(lambda: trainer.step(tokens, positions, labels, mask))
    busy, kernels = device_busy_us(prof)
    table = {}
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            c, us = table.get(e.name, (0, 0.0))
            table[e.name] = (c + 1, us + e.time_range.elapsed_us())
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    out = {
        "layers": layers, "hidden": hidden, "heads": heads, "seq": seq, "mbs": mbs,
        "vocab": vocab, "parameters": sum(p.numel() for p in model.parameters()),
        "step_ms": wall * 1e3, "host_cpu_ms": host * 1e3, "device_busy_ms": busy / 1e3,
        "device_ops": kernels, "launches": launches(prof), "loss": float(loss.detach()),
    }
    if trace is not None:
        out["kernels"] = table
    del trainer, model
    if hd.DEVICE == "cuda":
        torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/meshsim-host"))
    ap.add_argument("--cpu", action="store_true", help="run on CPU tensors (a check of the script)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--only", choices=["layer-unfused", "layer-fused", "layer-one_op",
                                       "collective", "steps"],
                    help="one group of cases (each fusion setting needs its own process)")
    ap.add_argument("--phases", action="store_true",
                    help="only steps with their forward, backward and optimizer timed apart")
    ap.add_argument("--profile", action="store_true",
                    help="only two steps of the 350M model, with their traces and kernel tables")
    ap.add_argument("--micro", action="store_true",
                    help="only single operators, the reference block and the layer split")
    args = ap.parse_args(argv)
    hd.DEVICE = "cpu" if args.cpu else "cuda"
    if not args.cpu and not torch.cuda.is_available():
        print("host_gpu.py: no CUDA device (use --cpu to check the script)", file=sys.stderr)
        return 2
    torch.set_num_threads(1 if args.cpu else torch.get_num_threads())
    Path(args.out).mkdir(parents=True, exist_ok=True)
    cpu_name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu_name = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    result = {"env": {
        "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu_name,
        "device": torch.cuda.get_device_name(0) if hd.DEVICE == "cuda" else "cpu",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    quick = args.quick or args.cpu
    if args.phases:
        out = []
        for cfg in ((12, 768, 12, 1024, 1, 51200), (24, 768, 12, 1024, 1, 51200),
                    (24, 1024, 16, 1024, 1, 51200), (12, 768, 12, 1024, 4, 51200),
                    (12, 768, 12, 1024, 1, 8192)):
            r = phase_case(*cfg, 3 if args.cpu else 15)
            out.append(r)
            print("phases " + " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in r.items()), flush=True)
        with open(Path(args.out) / "host_gpu_phases.json", "w") as f:
            json.dump({"env": result["env"], "phases": out}, f, indent=1)
        return 0
    if args.profile:
        global RECORD_SHAPES
        RECORD_SHAPES = True
        import gzip
        import shutil
        for mbs in (1, 8):
            cfg = (24, 1024, 16, 1024, mbs, 51200)
            trace = Path(args.out) / f"step_h1024_l24_mbs{mbs}.json"
            r = step_case(*cfg, 3, 3, trace=trace)
            with open(trace, "rb") as f, gzip.open(str(trace) + ".gz", "wb") as g:
                shutil.copyfileobj(f, g)
            trace.unlink()
            print("step " + " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                     for k, v in r.items() if k != "kernels"), flush=True)
            with open(Path(args.out) / f"kernels_h1024_l24_mbs{mbs}.csv", "w") as f:
                f.write("kernel,count,device_us\n")
                for name, (count, us) in sorted(r["kernels"].items(), key=lambda kv: -kv[1][1]):
                    f.write(f"\"{name}\",{count},{us:.1f}\n")
        return 0
    if args.micro:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reference_trainer"))
        for name, fn in (("micro", micro_cases),
                         ("llama_block", lambda: llama_block_case(20 if quick else 200)),
                         ("layer_split_one_op", lambda: split_layer("one_op", 20 if quick else 200)),
                         ("layer_split_unfused",
                          lambda: split_layer("unfused", 20 if quick else 200))):
            try:
                result[name] = fn()
            except Exception as e:
                result[name] = {"error": repr(e)}
            print(name, json.dumps(result[name]), flush=True)
        with open(Path(args.out) / "host_gpu_micro.json", "w") as f:
            json.dump(result, f, indent=1)
        return 0
    # TorchScript keeps the plan it optimised a scripted function with first, fuser or not: each
    # fusion setting must be measured in its own process (--only).
    only = args.only
    result["layer"] = {}
    for mode in ("unfused", "fused", "one_op"):
        if only and only != "layer-" + mode:
            continue
        try:
            r = layer_case(mode, 20 if quick else 200, 20 if quick else 500)
        except Exception as e:  # keep the other cases' figures
            r = {"error": repr(e)}
        result["layer"][mode] = r
        print(f"layer {mode:8s} " + " ".join(f"{k} {v:.1f}" if isinstance(v, float) else
                                            f"{k} {v}" for k, v in r.items()), flush=True)
    try:
        if only and only != "collective":
            raise RuntimeError("not run")
        result["collective"] = collective_case(200 if quick else 2000)
    except Exception as e:
        result["collective"] = {"error": repr(e)}
    print("collective", result["collective"], flush=True)
    if args.cpu:
        configs = [(2, 64, 4, 32, 2, 512)]
    else:
        configs = [(24, 1024, 16, 1024, mbs, 51200) for mbs in (1, 2, 4, 8)] + \
                  [(24, 2048, 16, 1024, mbs, 51200) for mbs in (1, 2, 4)] + \
                  [(12, 768, 12, 1024, mbs, 51200) for mbs in (1, 4)]
        if quick:
            configs = configs[:2]
    if only and only != "steps":
        configs = []
    result["steps"] = []
    for layers, hidden, heads, seq, mbs, vocab in configs:
        try:
            r = step_case(layers, hidden, heads, seq, mbs, vocab, 3 if quick else 5,
                          3 if quick else 10)
        except Exception as e:
            r = {"layers": layers, "hidden": hidden, "mbs": mbs, "error": repr(e)}
        result["steps"].append(r)
        print("step " + " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                 for k, v in r.items()), flush=True)
        with open(Path(args.out) / (f"host_gpu_{only}.json" if only else "host_gpu.json"),
                  "w") as f:
            json.dump(result, f, indent=1)
    name = f"host_gpu_{only}.json" if only else "host_gpu.json"
    with open(Path(args.out) / name, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch twin of the JAX reference trainer: the same Llama-style decoder, timed and profiled.

    python3 train_torch.py --model ../models/val-10m.json --seq 256 --batch 2 \
        --steps 5 --warmup 2 --profile-steps 2 --out /tmp/run

Builds the model meshsim describes (same parameter count, checked at start-up), trains it on random
tokens with torch.optim.AdamW, and writes into --out:
  manifest.json   hardware, model, batch, dtype, every timed step and the median (runinfo.py)
  trace.json      a torch profiler Chrome trace of --profile-steps steps, each step a
                  "ProfilerStep#N" range (what meshsim's importer segments on)

Works with torch 1.13 on CPU (Debian's python3-torch, built without Kineto: the legacy autograd
profiler writes the trace) and with recent torch on CUDA (Kineto: CPU ops and GPU kernels).
Precision: bf16 autocast on CUDA, fp32 on CPU (unless --dtype says otherwise).

Record-function ranges name the parts of the model ("embedding", "rmsnorm", "attention", "loss";
torch names the optimizer step itself): the importer uses them to classify the ops inside.
Single device only; the JAX trainer covers device meshes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.profiler import record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_config  # noqa: E402
import runinfo  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with record_function("rmsnorm"):
            xf = x.to(torch.float32)
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * self.weight).to(x.dtype)


def rope_tables(seq: int, head_dim: int, theta: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)  # [seq, head_dim], rotate-half layout
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: model_config.ModelConfig):
        super().__init__()
        self.cfg = cfg
        # Q, K and V in one GEMM (Megatron's fused QKV, the kernel meshsim models).
        self.wqkv = nn.Linear(cfg.d_model, cfg.q_dim + 2 * cfg.kv_dim, bias=cfg.attention_bias)
        self.wo = nn.Linear(cfg.q_dim, cfg.d_model, bias=cfg.attention_bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        c = self.cfg
        q, k, v = self.wqkv(x).split([c.q_dim, c.kv_dim, c.kv_dim], dim=-1)
        q = q.reshape(b, s, c.num_heads, c.head_dim).transpose(1, 2)
        k = k.reshape(b, s, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = v.reshape(b, s, c.num_kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        with record_function("attention"):
            if c.num_kv_heads != c.num_heads:  # GQA: each KV head serves a group of query heads
                k = k.repeat_interleave(c.num_heads // c.num_kv_heads, dim=1)
                v = v.repeat_interleave(c.num_heads // c.num_kv_heads, dim=1)
            if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0: flash / efficient kernels
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # torch 1.13: the textbook formulation
                scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c.head_dim))
                mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
                o = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
        return self.wo(o.transpose(1, 2).reshape(b, s, c.q_dim))


class SwiGLU(nn.Module):
    def __init__(self, cfg: model_config.ModelConfig):
        super().__init__()
        # Gate and up projections in one GEMM, as Megatron fuses them (meshsim's "mlp_up" kernel).
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=cfg.mlp_bias)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: model_config.ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: model_config.ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.lm_head.weight = self.embed.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor, cos, sin) -> torch.Tensor:
        with record_function("embedding"):
            x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        with record_function("loss"):
            return F.cross_entropy(logits.float().view(-1, self.cfg.vocab_size), targets.view(-1))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runinfo.add_run_args(p, devices=["cpu", "cuda"], dtype_auto="bf16 autocast on CUDA, fp32 on CPU",
                         warmup_help="untimed steps before timing")
    p.add_argument("--threads", type=int, default=0, help="CPU intra-op threads (0: usable cores)")
    args = p.parse_args(argv)
    runinfo.check_run_args(p, args, min_warmup=0)
    return args


class Trainer:
    """Model, optimizer and one batch of random tokens on one device."""

    def __init__(self, cfg: model_config.ModelConfig, args: argparse.Namespace, device: torch.device, dtype: str):
        if args.seq > cfg.max_position_embeddings:
            raise SystemExit(f"--seq {args.seq} exceeds the model's max_position_embeddings "
                             f"{cfg.max_position_embeddings}")
        torch.manual_seed(args.seed)
        self.device = device
        self.dtype = dtype
        self.model = Llama(cfg).to(device)
        built = sum(p.numel() for p in self.model.parameters())
        expected = model_config.parameter_count(cfg)
        if built != expected:
            raise RuntimeError(f"built {built} parameters, meshsim counts {expected}")
        self.parameters = built
        kwargs = {"lr": 3e-4, "betas": (0.9, 0.95), "weight_decay": 0.1, "eps": 1e-8}
        # torch's own default, made explicit so that the manifest can say which kernels ran: the
        # multi-tensor (foreach) path on CUDA, one tensor at a time on CPU.
        foreach = device.type == "cuda"
        self.optimizer_info = {"name": "torch.optim.AdamW", "foreach": foreach, **kwargs}
        self.optimizer = torch.optim.AdamW(self.model.parameters(), foreach=foreach, **kwargs)
        # What meshsim must simulate to run the same kernels (meshsim run --kernels,
        # --attention, --optimizer-kernels).
        self.execution = {
            "kernels": "eager",
            "attention": "flash" if hasattr(F, "scaled_dot_product_attention") else "naive",
            "optimizer_kernels": "foreach" if foreach else "per-tensor",
        }
        gen = torch.Generator().manual_seed(args.seed)
        data = torch.randint(0, cfg.vocab_size, (args.batch, args.seq + 1), generator=gen)
        self.tokens = data[:, :-1].contiguous().to(device)
        self.targets = data[:, 1:].contiguous().to(device)
        self.cos, self.sin = rope_tables(args.seq, cfg.head_dim, cfg.rope_theta, device)

    def step(self) -> torch.Tensor:
        if self.dtype == "bf16":
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                loss = self.model(self.tokens, self.targets, self.cos, self.sin)
        else:
            loss = self.model(self.tokens, self.targets, self.cos, self.sin)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def sync(self, loss: torch.Tensor) -> float:
        value = loss.item()  # blocks until the step's work is done
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return value


def time_steps(trainer: Trainer, steps: int) -> tuple[list[float], float]:
    times = []
    loss = float("nan")
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = trainer.sync(trainer.step())
        times.append(time.perf_counter() - t0)
    return times, loss


def profile_steps(trainer: Trainer, steps: int, trace_path: Path) -> dict:
    """Writes a Chrome trace of `steps` steps; each is a ProfilerStep#N range."""
    if torch.autograd.kineto_available():
        activities = [torch.profiler.ProfilerActivity.CPU]
        if trainer.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # One untraced warm-up step in the schedule lets the profiler settle.
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True) as prof:
            for _ in range(steps + 1):
                trainer.sync(trainer.step())
                prof.step()
        prof.export_chrome_trace(str(trace_path))
        return {"format": "pytorch-kineto-chrome-json", "profiler": "torch.profiler (Kineto)",
                "shapes": "record_shapes=True"}
    # No Kineto (e.g. Debian's CPU build): the legacy autograd profiler, with the step ranges that
    # torch.profiler would have written. Recording shapes slows host operators by several
    # microseconds each (measured: val-10m steps 0.43 s instead of 0.33 s; without shapes the
    # profiler's cost is within the run-to-run noise), so the timed steps are profiled without
    # them and one more step with them; every step runs the same operators in the same order, so
    # the shapes are attached to the timed steps' operators by position.
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        for i in range(steps):
            with record_function(f"ProfilerStep#{i}"):
                trainer.sync(trainer.step())
    with torch.autograd.profiler.profile(use_kineto=False, record_shapes=True) as shaped:
        with record_function("ProfilerStep#shapes"):
            trainer.sync(trainer.step())
    matched = export_legacy_trace(prof.function_events, step_events(shaped.function_events)[0],
                                  trace_path)
    return {"format": "pytorch-legacy-chrome-json",
            "profiler": "torch.autograd.profiler (legacy, no Kineto)",
            "shapes": (f"GEMM operators' Input Dims from one more step profiled with "
                       f"record_shapes=True, attached in recording order to {matched} of {steps} "
                       f"timed steps")}


GEMM_OPERATORS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def step_events(events) -> list[list]:
    """The events of each ProfilerStep#* range (the range itself first), the others in recording
    order (FunctionEvent.id is the RecordFunction handle, assigned as operators start)."""
    events = [e for e in events if e.trace_name is not None]
    steps = []
    for i, e in enumerate(events):
        if e.trace_name.startswith("ProfilerStep#"):  # e.name reads "ProfilerStep*"
            end = e.time_range.end
            inside = [x for x in events[i + 1:] if x.time_range.start <= end]
            steps.append([e] + sorted(inside, key=lambda x: x.id))
    return steps


def export_legacy_trace(events, shaped_step: list, path: Path) -> int:
    """The legacy profiler's Chrome trace (what EventList.export_chrome_trace writes: one "X" event
    per operator on pid "CPU functions"), plus what the legacy exporter drops and Kineto writes,
    under Kineto's keys: the autograd sequence number ("Sequence number"), which ties each
    backward op to the forward op it differentiates, and the input shapes of the GEMM operators
    ("Input Dims"), which meshsim's importer needs to match measured GEMMs to simulated ones. The
    shapes come from `shaped_step`, a step profiled with record_shapes=True: its k-th GEMM operator
    gives its dims to the k-th GEMM operator of each timed step (in recording order; the other
    operators' order can differ between steps where timestamps tie). Returns the number of timed
    steps whose GEMM operators matched the shaped step's one for one (the others carry none)."""
    def gemms(step):
        return [e for e in step[1:] if e.trace_name in GEMM_OPERATORS]

    reference = gemms(shaped_step)
    shapes = {}
    matched = 0
    for step in step_events(events):
        ops = gemms(step)
        if [e.trace_name for e in ops] == [e.trace_name for e in reference]:
            matched += 1
            for e, src in zip(ops, reference):
                shapes[id(e)] = src.input_shapes
    out = []
    for evt in events:
        if evt.trace_name is None:
            continue
        args = {}
        dims = shapes.get(id(evt))
        if dims and any(dims):
            args["Input Dims"] = [list(d) for d in dims]
        if evt.sequence_nr >= 0:
            args["Sequence number"] = evt.sequence_nr
        out.append({"name": evt.trace_name, "ph": "X", "ts": evt.time_range.start,
                    "dur": evt.time_range.elapsed_us(), "tid": evt.thread, "pid": "CPU functions",
                    "args": args})
    path.write_text(json.dumps(out, separators=(",", ":")))
    return matched


def profiler_overhead_per_event(ops: int = 20000, repeats: int = 5) -> float:
    """Seconds the legacy profiler (as profile_steps times steps: without shapes) adds per
    recorded event: a loop of `ops` in-place adds on a one-element tensor, timed without and with
    the profiler (the fastest of `repeats` each). On host operators this cost lands inside the
    recorded durations (a top-level op holds every event nested in it); meshsim validate removes
    it. Kineto traces of GPU kernels need no correction and do not use this."""
    x = torch.zeros(1)

    def loop() -> float:
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(1.0)
        return time.perf_counter() - t0

    loop()
    plain = min(loop() for _ in range(repeats))
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        profiled = min(loop() for _ in range(repeats))
    events = len(prof.function_events) / repeats
    return max(0.0, (profiled - plain) / events)


def hardware_info(device: torch.device, threads: int) -> dict:
    info = {"cpu_model": runinfo.cpu_model_name(), "cpu_cores": runinfo.usable_cores(), "threads": threads,
            "blas": runinfo.blas_libraries()}
    if device.type == "cuda":
        info.update(platform="gpu", device_kind=torch.cuda.get_device_name(device),
                    device_count=1, visible_devices=torch.cuda.device_count())
    else:
        info.update(platform="cpu", device_kind="cpu", device_count=1)
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    started = runinfo.utc_now()
    cfg = model_config.load_model(args.model)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    threads = args.threads or runinfo.usable_cores()
    torch.set_num_threads(threads)
    dtype = args.dtype if args.dtype != "auto" else ("bf16" if device.type == "cuda" else "fp32")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(cfg, args, device, dtype)
    if device.type == "cpu" and runinfo.uses_reference_blas(runinfo.blas_libraries()):
        print("warning: the reference (netlib) BLAS is in use; CPU matmuls will be slow and "
              "unrepresentative (Debian: apt-get install libopenblas0-openmp)", file=sys.stderr)
    print(f"{cfg.name}: {trainer.parameters:,} parameters on {device} ({dtype}), "
          f"batch {args.batch} x seq {args.seq}", flush=True)
    time_steps(trainer, args.warmup)
    times, loss = time_steps(trainer, args.steps)
    summary = runinfo.summarize_times(times)
    print(f"median step {summary['median_step_time_s'] * 1e3:.1f} ms over {args.steps} steps, "
          f"loss {loss:.4f}", flush=True)

    trace = None
    if args.profile_steps:
        trace_path = out / "trace.json"
        fmt = profile_steps(trainer, args.profile_steps, trace_path)
        trace = {"path": trace_path.name, "profiled_steps": args.profile_steps, **fmt}
        if fmt["format"] == "pytorch-legacy-chrome-json":
            trace["profiler_overhead_per_event_s"] = round(profiler_overhead_per_event(), 9)

    versions = {"name": "pytorch", "version": torch.__version__, "python": runinfo.python_version(),
                "kineto": bool(torch.autograd.kineto_available())}
    if device.type == "cuda":
        versions["cuda"] = torch.version.cuda
        versions["cudnn"] = torch.backends.cudnn.version()
    runinfo.write_manifest(out, {
        "case": args.case,
        "framework": versions,
        "hardware": hardware_info(device, threads),
        "model": cfg.to_meshsim_json(),
        "model_file": args.model,
        "parameters": trainer.parameters,
        "batch": {"global_batch": args.batch, "micro_batch": args.batch},
        "seq_len": args.seq,
        "dtype": dtype,
        "mesh": {"data": 1, "fsdp": 1, "tensor": 1},
        "optimizer": trainer.optimizer_info,
        "execution": trainer.execution,
        "warmup_steps": args.warmup,
        **runinfo.run_fields(args.batch * args.seq, summary, loss, trace, started),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

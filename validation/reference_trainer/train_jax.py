#!/usr/bin/env python3
"""The JAX reference trainer: a Llama-style decoder on a device mesh, timed and profiled.

    python3 train_jax.py --model ../../workloads/models/llama3.2-1b.json --seq 2048 --batch 8 \
        --mesh data=1,fsdp=8,tensor=1 --steps 20 --warmup 3 --profile-steps 3 --out /tmp/run

The model is the one meshsim describes (RMSNorm, RoPE, GQA attention, SwiGLU MLP, untied or tied
head; same parameter count, checked at start-up), trained on random tokens with optax.adamw.
Parameters, optimizer state and the batch are laid out on a ("data", "fsdp", "tensor") mesh with
NamedSharding / PartitionSpec:
  * batch: sharded over data x fsdp;
  * weights: FSDP-sharded over "fsdp" on d_model, Megatron-style over "tensor" (the fused QKV
    weight by KV-head group and the fused gate/up weight column-parallel, output and down
    projections row-parallel, the vocabulary of the embedding and the head), norms replicated;
    XLA's SPMD partitioner inserts the collectives.
Precision: bf16 compute with fp32 master weights and fp32 loss on GPU/TPU, fp32 on CPU.

It runs --warmup steps (the first compiles), times --steps steps (each blocking on all of the
step's results), then profiles --profile-steps steps with jax.profiler.trace(...,
create_perfetto_trace=True), each step inside jax.profiler.StepTraceAnnotation("train",
step_num=i) and blocked on before the annotation closes, so meshsim's importer finds one range per
step. Named scopes ("embedding", "rmsnorm", "attention", "loss", "optimizer") label the ops.
Writes manifest.json and trace.json.gz (the Perfetto JSON trace) into --out.

Not run on the development machine (JAX is not installed there): written for the GPU machines
(Python 3.12, recent jax / optax). For several CPU devices:
XLA_FLAGS=--xla_force_host_platform_device_count=8.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_config  # noqa: E402
import runinfo  # noqa: E402

BATCH = ("data", "fsdp")


# ----------------------------------------------------------------------------- parameters

def param_shapes(cfg: model_config.ModelConfig) -> dict:
    """Shape and PartitionSpec of every parameter, as a pytree of (shape, spec) pairs.

    Q, K and V are one weight, as are the gate and up projections (the GEMMs meshsim models).
    The QKV weight is laid out [d_model, kv_heads, group + 2, head_dim] (each KV head's query
    group, then its K and V), so that sharding the KV-head axis over "tensor" gives each tensor
    rank whole groups, as Megatron's fused QKV does."""
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    k, g, hd = cfg.num_kv_heads, cfg.num_heads // cfg.num_kv_heads, cfg.head_dim
    layer = {
        "attn_norm": ((d,), P(None)),
        "wqkv": ((d, k, g + 2, hd), P("fsdp", "tensor", None, None)),
        "wo": ((cfg.q_dim, d), P("tensor", "fsdp")),
        "mlp_norm": ((d,), P(None)),
        "w_gate_up": ((d, 2, f), P("fsdp", None, "tensor")),
        "w_down": ((f, d), P("tensor", "fsdp")),
    }
    if cfg.attention_bias:
        layer.update(bqkv=((k, g + 2, hd), P("tensor", None, None)), bo=((d,), P(None)))
    if cfg.mlp_bias:
        layer.update(b_gate_up=((2, f), P(None, "tensor")), b_down=((d,), P(None)))
    shapes = {
        "embed": ((v, d), P("tensor", "fsdp")),
        "layers": [dict(layer) for _ in range(cfg.num_layers)],
        "final_norm": ((d,), P(None)),
    }
    if not cfg.tied_embeddings:
        shapes["lm_head"] = ((d, v), P("fsdp", "tensor"))
    return shapes


def is_leaf(x) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], P)


def check_divisible(shapes: dict, mesh: Mesh, cfg: model_config.ModelConfig) -> None:
    t = mesh.shape["tensor"]
    if cfg.num_heads % t or cfg.num_kv_heads % t:
        raise SystemExit(f"--mesh tensor={t} must divide num_heads {cfg.num_heads} and "
                         f"num_kv_heads {cfg.num_kv_heads}")
    for path, (shape, spec) in jax.tree_util.tree_flatten_with_path(shapes, is_leaf=is_leaf)[0]:
        for dim, axes in zip(shape, spec):
            if axes is None:
                continue
            ways = math.prod(mesh.shape[a] for a in (axes if isinstance(axes, tuple) else (axes,)))
            if dim % ways:
                raise SystemExit(f"parameter {jax.tree_util.keystr(path)} {shape}: dimension {dim} "
                                 f"is not divisible by the {ways}-way sharding {spec}")


def init_params(cfg: model_config.ModelConfig, shapes: dict, key: jax.Array) -> dict:
    """Weights from N(0, 0.02), norm weights one, biases zero."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(shapes, is_leaf=is_leaf)
    keys = jax.random.split(key, len(leaves))
    out = []
    for (path, (shape, _)), k in zip(leaves, keys):
        name = str(getattr(path[-1], "key", ""))
        if name.endswith("norm"):
            out.append(jnp.ones(shape, jnp.float32))
        elif name.startswith("b"):  # bqkv, bo, b_gate_up, b_down
            out.append(jnp.zeros(shape, jnp.float32))
        else:
            out.append(0.02 * jax.random.normal(k, shape, jnp.float32))
    return jax.tree_util.tree_unflatten(treedef, out)


# ----------------------------------------------------------------------------- model

def rmsnorm(x, w, eps):
    with jax.named_scope("rmsnorm"):
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
        return (y * w.astype(jnp.float32)).astype(x.dtype)


def rope_tables(seq: int, head_dim: int, theta: float):
    inv_freq = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    angles = np.outer(np.arange(seq, dtype=np.float32), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)  # [seq, head_dim], rotate-half layout
    return jnp.asarray(np.cos(angles)), jnp.asarray(np.sin(angles))


def apply_rope(x, cos, sin):  # x: [batch, seq, heads, head_dim]
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None, :, None, :].astype(x.dtype) + rotated * sin[None, :, None, :].astype(x.dtype)


def causal_attention(q, k, v, implementation: str):
    """q: [B, S, N, H]; k, v: [B, S, K, H] with K dividing N (GQA).

    "cudnn": jax.nn.dot_product_attention's cuDNN flash kernel (GPUs, bf16). "naive": the
    explicit formulation, whose s x s scores XLA materializes."""
    if implementation == "cudnn":
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("bqnh,bknh->bnqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    s = q.shape[1]
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    return jnp.einsum("bnqk,bknh->bqnh", jax.nn.softmax(scores, axis=-1).astype(v.dtype), v)


def linear(x, w, b=None):
    y = x @ w
    return y if b is None else y + b


def block(p, x, cos, sin, cfg: model_config.ModelConfig, attention: str):
    b, s, _ = x.shape
    g = cfg.num_heads // cfg.num_kv_heads
    h = rmsnorm(x, p["attn_norm"], cfg.norm_eps)
    qkv = jnp.einsum("bsd,dkgh->bskgh", h, p["wqkv"])  # one GEMM for Q, K and V
    if "bqkv" in p:
        qkv = qkv + p["bqkv"]
    q = qkv[:, :, :, :g, :].reshape(b, s, cfg.num_heads, cfg.head_dim)
    k, v = qkv[:, :, :, g, :], qkv[:, :, :, g + 1, :]
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    with jax.named_scope("attention"):
        o = causal_attention(q, k, v, attention)
    x = x + linear(o.reshape(b, s, cfg.q_dim), p["wo"], p.get("bo"))
    h = rmsnorm(x, p["mlp_norm"], cfg.norm_eps)
    gu = jnp.einsum("bsd,dtf->bstf", h, p["w_gate_up"])  # one GEMM for gate and up
    if "b_gate_up" in p:
        gu = gu + p["b_gate_up"]
    return x + linear(jax.nn.silu(gu[:, :, 0]) * gu[:, :, 1], p["w_down"], p.get("b_down"))


def loss_fn(params, tokens, targets, cfg, compute_dtype, cos, sin, act_sharding, attention):
    p = jax.tree_util.tree_map(lambda w: w.astype(compute_dtype), params)
    with jax.named_scope("embedding"):
        x = jnp.take(p["embed"], tokens, axis=0)
    x = jax.lax.with_sharding_constraint(x, act_sharding)
    for layer in p["layers"]:
        x = jax.lax.with_sharding_constraint(block(layer, x, cos, sin, cfg, attention), act_sharding)
    x = rmsnorm(x, p["final_norm"], cfg.norm_eps)
    head = p["embed"].T if cfg.tied_embeddings else p["lm_head"]
    logits = (x @ head).astype(jnp.float32)
    with jax.named_scope("loss"):
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def make_train_step(cfg, optimizer, compute_dtype, cos, sin, act_sharding, attention):
    def train_step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets, cfg, compute_dtype,
                                                  cos, sin, act_sharding, attention)
        with jax.named_scope("optimizer"):
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        return params, opt_state, loss
    return train_step


# ----------------------------------------------------------------------------- driver

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    runinfo.add_run_args(p, devices=["cpu", "gpu", "tpu"], dtype_auto="bf16 on GPU/TPU, fp32 on CPU",
                         warmup_help="untimed steps before timing (>= 1: compile)")
    p.add_argument("--mesh", default="", help="data=N,fsdp=N,tensor=N (default: data = all devices)")
    args = p.parse_args(argv)
    runinfo.check_run_args(p, args, min_warmup=1, why="the first step compiles")
    return args


def build_mesh(args) -> Mesh:
    devices = jax.devices() if args.device == "auto" else jax.devices(args.device)
    shape = runinfo.parse_mesh(args.mesh) if args.mesh else {"data": len(devices), "fsdp": 1, "tensor": 1}
    n = shape["data"] * shape["fsdp"] * shape["tensor"]
    if n > len(devices):
        raise SystemExit(f"--mesh {shape} needs {n} devices, {len(devices)} available")
    grid = np.array(devices[:n]).reshape(shape["data"], shape["fsdp"], shape["tensor"])
    return Mesh(grid, ("data", "fsdp", "tensor"))


def run_steps(step, params, opt_state, batch, n: int):
    """n steps, each timed from dispatch until all of its results are ready."""
    times, loss = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, *batch)
        jax.block_until_ready((params, opt_state, loss))
        times.append(time.perf_counter() - t0)
    return params, opt_state, loss, times


def profile(step, params, opt_state, batch, n: int, out: Path) -> dict:
    trace_dir = out / "jax_profile"
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
        for i in range(n):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, *batch)
                jax.block_until_ready((params, opt_state, loss))
    found = sorted(trace_dir.rglob("perfetto_trace.json.gz")) or sorted(trace_dir.rglob("*.trace.json.gz"))
    if not found:
        raise SystemExit(f"jax.profiler wrote no perfetto_trace.json.gz or *.trace.json.gz under {trace_dir}")
    shutil.copyfile(found[-1], out / "trace.json.gz")
    shutil.rmtree(trace_dir, ignore_errors=True)  # the xplane.pb is large; the JSON is what we keep
    return {"path": "trace.json.gz", "profiled_steps": n, "format": "jax-perfetto-json",
            "profiler": "jax.profiler.trace(create_perfetto_trace=True)",
            "original_name": found[-1].name}


def versions() -> dict:
    import jaxlib
    info = {"name": "jax", "version": jax.__version__, "jaxlib": jaxlib.__version__,
            "optax": optax.__version__, "python": runinfo.python_version()}
    try:
        import flax
        info["flax"] = flax.__version__
    except ImportError:
        pass
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    started = runinfo.utc_now()
    cfg = model_config.load_model(args.model)
    if args.seq > cfg.max_position_embeddings:
        raise SystemExit(f"--seq {args.seq} exceeds max_position_embeddings {cfg.max_position_embeddings}")
    mesh = build_mesh(args)
    dev0 = mesh.devices.flat[0]
    platform = dev0.platform
    dtype = args.dtype if args.dtype != "auto" else ("fp32" if platform == "cpu" else "bf16")
    compute_dtype = jnp.bfloat16 if dtype == "bf16" else jnp.float32
    dp = mesh.shape["data"] * mesh.shape["fsdp"]
    if args.batch % dp:
        raise SystemExit(f"--batch {args.batch} is not divisible by data x fsdp = {dp}")

    shapes = param_shapes(cfg)
    check_divisible(shapes, mesh, cfg)
    param_sh = jax.tree_util.tree_map(lambda leaf: NamedSharding(mesh, leaf[1]), shapes, is_leaf=is_leaf)
    params = jax.jit(partial(init_params, cfg, shapes), out_shardings=param_sh)(jax.random.key(args.seed))
    built = sum(x.size for x in jax.tree_util.tree_leaves(params))
    if built != model_config.parameter_count(cfg):
        raise RuntimeError(f"built {built} parameters, meshsim counts {model_config.parameter_count(cfg)}")

    opt_kwargs = {"learning_rate": 3e-4, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
    optimizer = optax.adamw(**opt_kwargs)
    opt_state = jax.jit(optimizer.init)(params)
    opt_sh = jax.tree_util.tree_map(lambda x: x.sharding, opt_state)

    batch_sh = NamedSharding(mesh, P(BATCH, None))
    rng = np.random.default_rng(args.seed)
    data = rng.integers(0, cfg.vocab_size, size=(args.batch, args.seq + 1), dtype=np.int32)
    batch = (jax.device_put(data[:, :-1], batch_sh), jax.device_put(data[:, 1:], batch_sh))
    cos, sin = rope_tables(args.seq, cfg.head_dim, cfg.rope_theta)
    act_sh = NamedSharding(mesh, P(BATCH, None, None))
    def compile_step(attention: str):
        return jax.jit(make_train_step(cfg, optimizer, compute_dtype, cos, sin, act_sh, attention),
                       in_shardings=(param_sh, opt_sh, batch_sh, batch_sh),
                       out_shardings=(param_sh, opt_sh, NamedSharding(mesh, P())),
                       donate_argnums=(0, 1))

    # cuDNN's flash attention where it can run (GPU, bf16), else the explicit formulation; if
    # cuDNN refuses the shapes, the explicit one. The manifest says which ran.
    attention = "cudnn" if platform == "gpu" and dtype == "bf16" else "naive"
    step = compile_step(attention)
    if attention == "cudnn":
        try:
            step.lower(params, opt_state, *batch).compile()
        except Exception as e:  # noqa: BLE001 - any refusal: fall back, and say so
            print(f"cuDNN attention unavailable ({type(e).__name__}: {e}); using the explicit "
                  f"formulation", file=sys.stderr)
            attention = "naive"
            step = compile_step(attention)

    print(f"{cfg.name}: {built:,} parameters on {mesh.devices.size} x {dev0.device_kind} "
          f"({dtype}), mesh {dict(mesh.shape)}, batch {args.batch} x seq {args.seq}, "
          f"attention {attention}", flush=True)
    t0 = time.perf_counter()
    params, opt_state, _, _ = run_steps(step, params, opt_state, batch, args.warmup)
    compile_and_warmup = time.perf_counter() - t0
    params, opt_state, loss_value, times = run_steps(step, params, opt_state, batch, args.steps)
    loss = float(loss_value)
    summary = runinfo.summarize_times(times)
    print(f"median step {summary['median_step_time_s'] * 1e3:.1f} ms over {args.steps} steps, "
          f"loss {loss:.4f}", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace = profile(step, params, opt_state, batch, args.profile_steps, out) if args.profile_steps else None

    runinfo.write_manifest(out, {
        "case": args.case,
        "framework": versions(),
        "hardware": {"platform": platform, "device_kind": dev0.device_kind,
                     "device_count": int(mesh.devices.size), "visible_devices": jax.device_count(),
                     "cpu_model": runinfo.cpu_model_name(), "cpu_cores": runinfo.usable_cores(),
                     "threads": runinfo.usable_cores(), "blas": runinfo.blas_libraries()},
        "model": cfg.to_meshsim_json(),
        "model_file": args.model,
        "parameters": int(built),
        "batch": {"global_batch": args.batch, "micro_batch": args.batch // dp},
        "seq_len": args.seq,
        "dtype": dtype,
        "mesh": {k: int(v) for k, v in mesh.shape.items()},
        "optimizer": {"name": "optax.adamw", **opt_kwargs},
        # XLA fuses the element-wise work (norms, RoPE, SwiGLU, the loss, the AdamW update) into
        # a few kernels: meshsim's fused kernels.
        "execution": {"kernels": "fused", "attention": "flash" if attention == "cudnn" else "naive",
                      "optimizer_kernels": "fused"},
        "warmup_steps": args.warmup,
        "warmup_and_compile_s": round(compile_and_warmup, 6),
        **runinfo.run_fields(args.batch * args.seq, summary, loss, trace, started),
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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

Four cases time one layer of Megatron-LM as its legacy GPU code issues it
(megatron/model/transformer.py's ParallelTransformerLayer @ cfd2e21607, 2022-04-28), replicated
below for its Python structure: the modules' __call__s; ColumnParallelLinear and RowParallelLinear
through LinearWithGradAccumulationAndAsyncCommunication (async TP all-reduce of the column
linears' input gradient with its one-element "delay" kernel, gradient-accumulation fusion into
main_grad); the reduce mapping as an autograd Function; apex's layer norm through its autograd
Function; FusedScaleMaskSoftmax's checks and the causal fused softmax as an autograd Function; the
attention dropout inside the RNG tracker's fork; the TorchScript bias-GeLU (inside an autograd
Function) and bias-dropout-add (under enable_grad), with Megatron's JIT flags. Settings: --bf16
flags (the tensors are fp32: CPU torch 1.13 has no fp16 matmul or layer norm, and its bf16 GEMMs
are arithmetic-bound even at this width; the layer's Python never reads a tensor's dtype), TP 2
(this process plays rank 0), sequence parallel off, dropout 0.1, layer scaling on; hidden 16,
4 heads, 4 tokens, batch 1. Arithmetic is negligible there: twice the tokens adds at most 4%;
at 20 tokens and batch 2, 4 and 8 (shapes where the fused softmax's checks pass) the times, fitted
linearly in the batch, extrapolate to within 3% of this width's at batch 0. What differs from the
GPU run:
  * each CUDA extension call is the nearest CPU torch op (apex layer norm: native_layer_norm and
    its backward; the fused softmax: softmax and its backward, without the scale and mask;
    wgrad_gemm_accum_fp32: addmm_ into main_grad);
  * the TP all-reduces (two forward, two backward) are not run and their host cost (c10d's Python
    and NCCL's enqueue) is not counted;
  * the RNG fork gets and sets the CPU generator's state (CUDA's is a 16-byte Philox seed and
    offset, set through torch.cuda's lazy-call path; the CPU's is 5056 bytes);
  * at 4 tokens the fused-softmax check fails at its sequence bound, so the check stops there and
    the fused path is taken, as at any real width;
  * aten's dropout on CPU is bernoulli_, div_ and mul (one native_dropout kernel on CUDA): within
    2 us of a native_dropout call, forward or backward, measured alone;
  * the TorchScript functions run unfused on CPU, each op through the interpreter (nvfuser is not
    in a CPU build); on a GPU each is one nvfuser kernel, whose host cost per launch is not
    measured here. The megatron_layer_one_op_fusions cases show how much of the figure that is:
    the same layer with each scripted function's body replaced by one op.
Local DDP's per-parameter gradient hooks (main_grad.add_ for the 8 parameters whose gradient is
not fused, 8 more kernels) are outside the layer and not run.

The kernels the layer launches on a GPU, read from that code (fp16/bf16, TP > 1, the fused
kernels available):
  forward, 15 (and 2 TP all-reduces): input layer norm (apex); QKV GEMM; QKV bias add (the column
    linear adds its bias in a separate op); Q.K^T baddbmm (beta 0: no copy of its input); causal
    fused softmax; attention dropout (fused_dropout); probs.V bmm; permute(...).contiguous()
    copy; attention output GEMM; [all-reduce]; bias-dropout-add (nvfuser); post-attention layer
    norm; h->4h GEMM; bias-GeLU (nvfuser); 4h->h GEMM; [all-reduce]; bias-dropout-add (nvfuser).
  backward, 34 (and 2 TP all-reduces): bias-dropout-add backward (nvfuser); 4h->h bias gradient
    (the expand's sum); 4h->h dgrad and wgrad GEMMs; bias-GeLU backward (nvfuser); h->4h bias
    gradient (autograd's sum of the full-shape gradient GeLUFunction returns); h->4h dgrad GEMM;
    [all-reduce]; the delay kernel (torch.empty(1) + 1); h->4h wgrad GEMM; post-attention layer
    norm backward (apex: 3 kernels); the residual's gradient accumulation (add); bias-dropout-add
    backward (nvfuser); attention-output bias gradient (sum); attention output dgrad and wgrad
    GEMMs; bmm backward (2 GEMMs); dropout backward; fused softmax backward; baddbmm backward (2
    GEMMs, each followed by a multiply by alpha = 1/sqrt(head dim), autograd's maybe_multiply);
    cat of the Q, K, V gradients (split's backward); QKV dgrad GEMM; [all-reduce]; the delay
    kernel; QKV wgrad GEMM; QKV bias gradient (sum); input layer norm backward (3 kernels); the
    layer input's gradient accumulation (add).

The Megatron layer's tensors live on host_dispatch.DEVICE ("cpu" here); host_gpu.py sets "cuda" to
time the same code issuing real kernels on a GPU.

Times are the thread's CPU time (time.thread_time), so that other processes on the machine do not
inflate them; each case is the fastest of --repeats timed loops, divided by the operators it
issued. Writes CSV to stdout (or --out): case, us_per_op, ops, torch, python, cpu.
"""
import argparse
import contextlib
import csv
import math
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


# ---------------------------------------------------------------------------------------------
# A Megatron-LM transformer layer, replicated for its host work (the megatron_layer cases).
#
# Written after NVIDIA/Megatron-LM @ cfd2e21607 (2022-04-28): megatron/model/transformer.py,
# megatron/mpu/{layers,mappings,random,utils}.py, megatron/model/{fused_softmax,fused_layer_norm,
# fused_bias_gelu}.py. The Python structure is kept (module __call__s, autograd Functions, views,
# the RNG fork, the jit-scripted fused functions); each CUDA extension call is replaced by the
# nearest CPU torch op, and the tensor-parallel all-reduce by nothing (its host cost not counted).
# ---------------------------------------------------------------------------------------------

class MegatronArgs:
    """The layer's arguments: Megatron's defaults at cfd2e21607 with --bf16 and TP 2."""
    hidden_size = 16
    num_attention_heads = 4
    kv_channels = 4                    # hidden_size // num_attention_heads
    ffn_hidden_size = 64               # 4 * hidden_size
    seq_length = 4
    micro_batch_size = 1
    # The causal fused softmax runs when 16 < s <= 4096, s % 4 == 0 and b * heads per rank is a
    # multiple of the kernel's batches per block: never at this width, always at a real one. The
    # check runs on the tensor's sizes as there (and stops at s), then the fused path is taken.
    force_fused_softmax = True
    tensor_model_parallel_size = 2     # semantics only: this process is rank 0 of 2
    params_dtype = torch.bfloat16      # --bf16: the flags the layer's Python checks read
    # The tensors' own dtype. CPU torch 1.13 has no fp16 matmul or layer norm, and its bf16 GEMMs
    # take ~40 us at these shapes (arithmetic, not dispatch); fp32 runs the same control flow,
    # which reads the flags above, never a tensor's dtype.
    dtype = torch.float32
    layernorm_epsilon = 1e-5
    attention_dropout = 0.1
    hidden_dropout = 0.1
    apply_query_key_layer_scaling = True
    attention_softmax_in_fp32 = False  # forced on by the layer scaling
    masked_softmax_fusion = True
    bias_gelu_fusion = True
    bias_dropout_fusion = True
    async_tensor_model_parallel_allreduce = True
    gradient_accumulation_fusion = True  # kept on: bf16 forces fp32 accumulation
    sequence_parallel = False
    no_persist_layer_norm = False      # hidden 64 is not a persistent size: apex's function


def _divide(numerator, denominator):
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


# The device the Megatron layer's tensors live on: "cpu" for this script's cases; host_gpu.py sets
# "cuda" to time the same code issuing real kernels on a GPU.
DEVICE = "cpu"


def _rng_get_state():
    return torch.cuda.get_rng_state() if DEVICE == "cuda" else torch.get_rng_state()


def _rng_seed(seed):
    if DEVICE == "cuda":
        torch.cuda.manual_seed(seed)
    else:
        torch.manual_seed(seed)


def _tp_world_size():
    return MegatronArgs.tensor_model_parallel_size


def _tp_all_reduce(tensor):
    """torch.distributed.all_reduce over the TP group: not run, its host cost not counted."""
    return tensor


def _tp_reduce(tensor):
    if _tp_world_size() == 1:
        return tensor
    _tp_all_reduce(tensor)
    return tensor


class _ReduceFromTPRegion(torch.autograd.Function):
    """mappings.py's reduce: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        return _tp_reduce(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _CopyToTPRegion(torch.autograd.Function):
    """mappings.py's copy: identity forward, all-reduce backward (a no-op at TP 1, and not run
    here at any TP: its host cost not counted)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return _tp_reduce(grad)


def _split_last_dim(tensor, parts):
    last = tensor.dim() - 1
    return torch.split(tensor, _divide(tensor.size()[last], parts), dim=last)


class _RngStatesTracker:
    """random.py's CudaRNGStatesTracker.fork, on the CPU generator (CUDA's state is its Philox
    seed and offset, 16 bytes; the CPU's is the Mersenne Twister's, 5056 bytes)."""

    def __init__(self):
        self.states_ = {}

    def add(self, name, seed):
        orig = _rng_get_state()
        _rng_seed(seed)
        self.states_[name] = _rng_get_state()
        _set_rng_state(orig)

    @contextlib.contextmanager
    def fork(self, name="model-parallel-rng"):
        if name not in self.states_:
            raise Exception(f"rng state {name} is not added")
        orig = _rng_get_state()
        _set_rng_state(self.states_[name])
        try:
            yield
        finally:
            self.states_[name] = _rng_get_state()
            _set_rng_state(orig)


def _lazy_call(callback):
    # torch.cuda._lazy_call: run at once when the device is initialised (always, in training).
    callback()


def _set_rng_state(new_state, device=-1):
    # random.py's _set_cuda_rng_state, newer-PyTorch branch: resolve the device, then set the
    # default generator's state from a callback, without cloning the state.
    if device == -1:
        device = torch.device(DEVICE)
    elif isinstance(device, str):
        device = torch.device(device)

    def callback():
        if device.type == "cuda":
            idx = device.index if device.index is not None else torch.cuda.current_device()
            torch.cuda.default_generators[idx].set_state(new_state)
        else:
            torch.default_generator.set_state(new_state)
    _lazy_call(callback)


_RNG_TRACKER = _RngStatesTracker()


def _rng_tracker():
    return _RNG_TRACKER


class _LayerNormAffine(torch.autograd.Function):
    """fused_layer_norm.py's FusedLayerNormAffineFunction; apex's forward_affine and
    backward_affine become native_layer_norm and its backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, normalized_shape, eps):
        ctx.normalized_shape = normalized_shape
        ctx.eps = eps
        x_ = x.contiguous()
        weight_ = weight.contiguous()
        bias_ = bias.contiguous()
        out, mean, invvar = torch.native_layer_norm(x_, ctx.normalized_shape, weight_, bias_,
                                                    ctx.eps)
        ctx.save_for_backward(x_, weight_, bias_, mean, invvar)
        return out

    @staticmethod
    def backward(ctx, grad):
        x_, weight_, bias_, mean, invvar = ctx.saved_tensors
        gx, gw, gb = torch.ops.aten.native_layer_norm_backward(
            grad.contiguous(), x_, ctx.normalized_shape, mean, invvar, weight_, bias_,
            [True, True, True])
        return gx, gw, gb, None, None


class _MixedFusedLayerNorm(torch.nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.normalized_shape = torch.Size((hidden,))
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden, dtype=MegatronArgs.dtype, device=DEVICE))
        self.bias = torch.nn.Parameter(torch.zeros(hidden, dtype=MegatronArgs.dtype, device=DEVICE))
        self.no_persist_layer_norm = True

    def forward(self, x):
        if self.no_persist_layer_norm:
            return _LayerNormAffine.apply(x, self.weight, self.bias, self.normalized_shape,
                                          self.eps)
        raise NotImplementedError("apex's persistent layer norm (FastLayerNormFN)")


class _LinearGradAccumAsync(torch.autograd.Function):
    """layers.py's LinearWithGradAccumulationAndAsyncCommunication, sequence parallel off."""

    @staticmethod
    def forward(ctx, x, weight, bias, gradient_accumulation_fusion, async_grad_allreduce,
                sequence_parallel):
        ctx.save_for_backward(x, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel = sequence_parallel
        assert not sequence_parallel
        total_input = x
        out = torch.matmul(total_input, weight.t())
        if bias is not None:
            out = out + bias
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        use_bias = ctx.use_bias
        total_input = x
        grad_input = grad.matmul(weight)
        grad = grad.view(grad.shape[0] * grad.shape[1], grad.shape[2])
        total_input = total_input.view(total_input.shape[0] * total_input.shape[1],
                                       total_input.shape[2])
        if ctx.async_grad_allreduce:
            handle = _tp_all_reduce(grad_input)  # async_op=True there: a work handle
            # The 3 us delay kernel that lets the all-reduce be scheduled first.
            _ = torch.empty(1, device=grad.device) + 1
        if ctx.gradient_accumulation_fusion:
            # fused_dense_cuda.wgrad_gemm_accum_fp32: one GEMM accumulating into the fp32
            # main_grad (there from 16-bit operands).
            weight.main_grad.addmm_(grad.t(), total_input)
            grad_weight = None
        else:
            grad_weight = grad.t().matmul(total_input)
        grad_bias = grad.sum(dim=0) if use_bias else None
        if ctx.async_grad_allreduce:
            del handle  # handle.wait() there
        return grad_input, grad_weight, grad_bias, None, None, None


def _parallel_weight(rows, cols):
    w = torch.nn.Parameter(torch.empty(rows, cols, dtype=MegatronArgs.dtype, device=DEVICE))
    torch.nn.init.normal_(w, std=0.02)
    # local DDP's contiguous grad buffer view (distributed.py); zeroed per step.
    w.main_grad = torch.zeros(rows, cols, dtype=MegatronArgs.dtype, device=DEVICE)
    return w


class _ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, skip_bias_add=False):
        super().__init__()
        world = _tp_world_size()
        self.gather_output = False
        self.skip_bias_add = skip_bias_add
        part = _divide(output_size, world)
        self.weight = _parallel_weight(part, input_size)
        self.bias = torch.nn.Parameter(torch.zeros(part, dtype=MegatronArgs.dtype, device=DEVICE))
        self.async_tensor_model_parallel_allreduce = (
            MegatronArgs.async_tensor_model_parallel_allreduce and world > 1)
        self.sequence_parallel = MegatronArgs.sequence_parallel and world > 1
        self.gradient_accumulation_fusion = MegatronArgs.gradient_accumulation_fusion

    def forward(self, x):
        bias = self.bias if not self.skip_bias_add else None
        if self.async_tensor_model_parallel_allreduce or self.sequence_parallel:
            x_parallel = x
        else:
            x_parallel = _CopyToTPRegion.apply(x)
        out = _LinearGradAccumAsync.apply(x_parallel, self.weight, bias,
                                          self.gradient_accumulation_fusion,
                                          self.async_tensor_model_parallel_allreduce,
                                          self.sequence_parallel)
        output_bias = self.bias if self.skip_bias_add else None
        return out, output_bias


class _RowParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, skip_bias_add=False):
        super().__init__()
        self.input_is_parallel = True
        self.skip_bias_add = skip_bias_add
        self.weight = _parallel_weight(output_size, _divide(input_size, _tp_world_size()))
        self.bias = torch.nn.Parameter(torch.zeros(output_size, dtype=MegatronArgs.dtype,
                                                 device=DEVICE))
        self.sequence_parallel = MegatronArgs.sequence_parallel
        self.gradient_accumulation_fusion = MegatronArgs.gradient_accumulation_fusion

    def forward(self, x):
        if self.input_is_parallel:
            x_parallel = x
        else:
            raise NotImplementedError("scatter_to_tensor_model_parallel_region")
        out_parallel = _LinearGradAccumAsync.apply(x_parallel, self.weight, None,
                                                   self.gradient_accumulation_fusion, None, None)
        if self.sequence_parallel:
            raise NotImplementedError("reduce_scatter_to_sequence_parallel_region")
        out_ = _ReduceFromTPRegion.apply(out_parallel)
        if not self.skip_bias_add:
            return out_ + self.bias, None
        return out_, self.bias


class _ScaledUpperTriangMaskedSoftmax(torch.autograd.Function):
    """fused_softmax.py's causal fused softmax; the CUDA kernel (scale, causal mask, softmax in
    one) becomes torch's softmax and its backward (the scale and the mask are not applied)."""

    @staticmethod
    def forward(ctx, inputs, scale):
        scale_t = torch.tensor([scale])
        _ = scale_t[0]  # the scale the kernel takes
        probs = torch.softmax(inputs, -1)
        ctx.save_for_backward(probs, scale_t)
        return probs

    @staticmethod
    def backward(ctx, grad):
        probs, scale_t = ctx.saved_tensors
        _ = scale_t[0]
        return torch._softmax_backward_data(grad, probs, -1, probs.dtype), None


def _batch_per_block(sq, sk, b, np_):
    # scaled_masked_softmax.h's get_batch_per_block (a pybind call into the extension there).
    log2_elements = (sk - 1).bit_length()
    next_pow2 = 1 << log2_elements
    warp_size = min(next_pow2, 32)
    batches_per_warp = 2 if next_pow2 <= 128 else 1
    return (128 // warp_size) * batches_per_warp


def _attention_mask_func(scores, mask):
    scores.masked_fill_(mask, -10000.0)
    return scores


class _FusedScaleMaskSoftmax(torch.nn.Module):
    def __init__(self, input_in_fp16, input_in_bf16, causal, fusion, mask_func,
                 softmax_in_fp32, scale):
        super().__init__()
        self.input_in_fp16 = input_in_fp16
        self.input_in_bf16 = input_in_bf16
        assert not (input_in_fp16 and input_in_bf16)
        self.input_in_float16 = input_in_fp16 or input_in_bf16
        self.causal = causal
        self.scaled_masked_softmax_fusion = fusion
        self.mask_func = mask_func
        self.softmax_in_fp32 = softmax_in_fp32
        self.scale = scale
        assert self.scale is None or softmax_in_fp32

    def forward(self, x, mask):
        assert x.dim() == 4
        if self.is_kernel_available(mask, *x.size()) or MegatronArgs.force_fused_softmax:
            return self.forward_fused_softmax(x, mask)
        raise NotImplementedError("the unfused softmax path")

    def is_kernel_available(self, mask, b, np_, sq, sk):
        attn_batches = b * np_
        if (self.scaled_masked_softmax_fusion and self.input_in_float16 and 16 < sk <= 4096
                and sq % 4 == 0 and attn_batches % 4 == 0):
            if 0 <= sk <= 4096:
                batch_per_block = self.get_batch_per_block(sq, sk, b, np_)
                if self.causal:
                    if attn_batches % batch_per_block == 0:
                        return True
                elif sq % batch_per_block == 0:
                    return True
        return False

    def forward_fused_softmax(self, x, mask):
        b, np_, sq, sk = x.size()
        scale = self.scale if self.scale is not None else 1.0
        assert self.causal and sq == sk
        x = x.view(-1, sq, sk)
        probs = _ScaledUpperTriangMaskedSoftmax.apply(x, scale)
        return probs.view(b, np_, sq, sk)

    @staticmethod
    def get_batch_per_block(sq, sk, b, np_):
        return _batch_per_block(sq, sk, b, np_)


class _CoreAttention(torch.nn.Module):
    matmul_input = None

    def __init__(self, layer_number):
        super().__init__()
        a = MegatronArgs
        self.fp16 = a.params_dtype == torch.float16
        self.bf16 = a.params_dtype == torch.bfloat16
        self.apply_query_key_layer_scaling = a.apply_query_key_layer_scaling
        self.attention_softmax_in_fp32 = a.attention_softmax_in_fp32
        if self.apply_query_key_layer_scaling:
            self.attention_softmax_in_fp32 = True
        self.layer_number = max(1, layer_number)
        self.sequence_parallel = a.sequence_parallel
        projection = a.kv_channels * a.num_attention_heads
        world = _tp_world_size()
        self.hidden_size_per_partition = _divide(projection, world)
        self.hidden_size_per_attention_head = _divide(projection, a.num_attention_heads)
        self.num_attention_heads_per_partition = _divide(a.num_attention_heads, world)
        coeff = None
        self.norm_factor = math.sqrt(self.hidden_size_per_attention_head)
        if self.apply_query_key_layer_scaling:
            coeff = self.layer_number
            self.norm_factor *= coeff
        self.scale_mask_softmax = _FusedScaleMaskSoftmax(
            self.fp16, self.bf16, True, a.masked_softmax_fusion, _attention_mask_func,
            self.attention_softmax_in_fp32, coeff)
        self.attention_dropout = torch.nn.Dropout(a.attention_dropout)

    def forward(self, q, k, v, mask):
        # [b, np, sq, sk]
        size = (q.size(1), q.size(2), q.size(0), k.size(0))
        q = q.view(size[2], size[0] * size[1], -1)
        k = k.view(size[3], size[0] * size[1], -1)
        shape = (size[0] * size[1], size[2], size[3])
        if _CoreAttention.matmul_input is None or _CoreAttention.matmul_input.shape != shape:
            _CoreAttention.matmul_input = torch.empty(*shape, dtype=q.dtype, device=q.device)
        scores = torch.baddbmm(_CoreAttention.matmul_input, q.transpose(0, 1),
                               k.transpose(0, 1).transpose(1, 2), beta=0.0,
                               alpha=(1.0 / self.norm_factor))
        scores = scores.view(*size)
        probs = self.scale_mask_softmax(scores, mask)
        if not self.sequence_parallel:
            with _rng_tracker().fork():
                probs = self.attention_dropout(probs)
        else:
            probs = self.attention_dropout(probs)
        size = (v.size(1), v.size(2), q.size(0), v.size(3))
        v = v.view(v.size(0), size[0] * size[1], -1)
        probs = probs.view(size[0] * size[1], size[2], -1)
        context = torch.bmm(probs, v.transpose(0, 1))
        context = context.view(*size)
        context = context.permute(2, 0, 1, 3).contiguous()
        context = context.view(*(context.size()[:-2] + (self.hidden_size_per_partition,)))
        return context


class _ParallelAttention(torch.nn.Module):
    def __init__(self, layer_number):
        super().__init__()
        a = MegatronArgs
        self.layer_number = max(1, layer_number)
        projection = a.kv_channels * a.num_attention_heads
        self.hidden_size_per_attention_head = _divide(projection, a.num_attention_heads)
        self.num_attention_heads_per_partition = _divide(a.num_attention_heads,
                                                         _tp_world_size())
        self.query_key_value = _ColumnParallelLinear(a.hidden_size, 3 * projection)
        self.core_attention = _CoreAttention(self.layer_number)
        self.checkpoint_core_attention = False
        self.dense = _RowParallelLinear(projection, a.hidden_size, skip_bias_add=True)

    def forward(self, hidden_states, mask, encoder_output=None, inference_params=None):
        mixed, _ = self.query_key_value(hidden_states)
        shape = mixed.size()[:-1] + (self.num_attention_heads_per_partition,
                                     3 * self.hidden_size_per_attention_head)
        mixed = mixed.view(*shape)
        q, k, v = _split_last_dim(mixed, 3)
        if self.checkpoint_core_attention:
            raise NotImplementedError("selective recomputation")
        context = self.core_attention(q, k, v, mask)
        return self.dense(context)


@torch.jit.script
def _bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def _bias_gelu_back(g, bias, y):
    x = bias + y
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + \
        0.5 * (1 + tanh_out)
    return ff * g


class _GeLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias):
        ctx.save_for_backward(x, bias)
        return _bias_gelu(bias, x)

    @staticmethod
    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        tmp = _bias_gelu_back(grad, bias, x)
        return tmp, tmp


class _ParallelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        a = MegatronArgs
        self.dense_h_to_4h = _ColumnParallelLinear(a.hidden_size, a.ffn_hidden_size,
                                                   skip_bias_add=True)
        self.bias_gelu_fusion = a.bias_gelu_fusion
        self.dense_4h_to_h = _RowParallelLinear(a.ffn_hidden_size, a.hidden_size,
                                                skip_bias_add=True)

    def forward(self, hidden_states):
        inter, bias = self.dense_h_to_4h(hidden_states)
        if self.bias_gelu_fusion:
            inter = _GeLUFunction.apply(inter, bias)
        else:
            raise NotImplementedError("unfused gelu")
        return self.dense_4h_to_h(inter)


def _bias_dropout_add(x, bias, residual, prob, training):
    # type: (Tensor, Tensor, Tensor, float, bool) -> Tensor
    out = torch.nn.functional.dropout(x + bias, p=prob, training=training)
    return residual + out


@torch.jit.script
def _bias_dropout_add_fused_train(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor,
                                  prob: float) -> torch.Tensor:
    return _bias_dropout_add(x, bias, residual, prob, True)


class MegatronLayer(torch.nn.Module):
    """transformer.py's ParallelTransformerLayer: encoder type, no drop path, pre-LN."""

    def __init__(self, layer_number=1):
        super().__init__()
        a = MegatronArgs
        self.layer_number = layer_number
        self.apply_residual_connection_post_layernorm = False
        self.bf16 = a.params_dtype == torch.bfloat16
        self.fp32_residual_connection = False
        self.input_layernorm = _MixedFusedLayerNorm(a.hidden_size, a.layernorm_epsilon)
        self.self_attention = _ParallelAttention(layer_number)
        self.hidden_dropout = a.hidden_dropout
        self.bias_dropout_fusion = a.bias_dropout_fusion
        self.drop_path = None
        self.post_attention_layernorm = _MixedFusedLayerNorm(a.hidden_size, a.layernorm_epsilon)
        self.mlp = _ParallelMLP()

    def forward(self, hidden_states, mask, encoder_output=None, enc_dec_attn_mask=None,
                inference_params=None):
        ln_out = self.input_layernorm(hidden_states)
        attn_out, attn_bias = self.self_attention(ln_out, mask,
                                                  inference_params=inference_params)
        if self.apply_residual_connection_post_layernorm:
            residual = ln_out
        else:
            residual = hidden_states
        assert self.drop_path is None and self.bias_dropout_fusion and self.training
        bias_dropout_add_func = _bias_dropout_add_fused_train
        with torch.enable_grad():
            ln_in = bias_dropout_add_func(attn_out, attn_bias.expand_as(residual), residual,
                                          self.hidden_dropout)
        ln_out = self.post_attention_layernorm(ln_in)
        mlp_out, mlp_bias = self.mlp(ln_out)
        if self.apply_residual_connection_post_layernorm:
            residual = ln_out
        else:
            residual = ln_in
        with torch.enable_grad():
            out = bias_dropout_add_func(mlp_out, mlp_bias.expand_as(residual), residual,
                                        self.hidden_dropout)
        return out


def _megatron_jit_options():
    # initialize.py's _set_jit_fusion_options for torch >= 1.10, less the nvfuser switch, which
    # a CPU build refuses (the scripted functions run unfused, op by op, here).
    torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_profiling_mode(True)
    torch._C._jit_override_can_fuse_on_cpu(False)
    torch._C._jit_override_can_fuse_on_gpu(False)
    torch._C._jit_set_texpr_fuser_enabled(False)
    torch._C._debug_set_autodiff_subgraph_inlining(False)


def _one_op_fusions():
    """Stand-ins for the four TorchScript functions, one op each: what their host work would be
    if each cost one op's call, as each is one nvfuser kernel on a GPU (nvfuser's own host work
    per launch is not measured here). Each takes the same inputs, so autograd sees the same
    edges (the bias-dropout-add's backward is AddcmulBackward0: two ops, not one kernel)."""
    return {
        "_bias_gelu": lambda bias, y: torch.add(bias, y),
        "_bias_gelu_back": lambda g, bias, y: torch.mul(g, y),
        "_bias_dropout_add_fused_train":
            lambda x, bias, residual, prob: torch.addcmul(residual, x, bias),
    }


def megatron_layer(repeats, one_op_fusions=False):
    """Seconds of host work for one forward and one backward of the Megatron-LM layer."""
    if one_op_fusions:
        scripted = {name: globals()[name] for name in _one_op_fusions()}
        globals().update(_one_op_fusions())
        try:
            return megatron_layer(repeats)
        finally:
            globals().update(scripted)
    _RNG_TRACKER.states_.clear()
    _megatron_jit_options()
    _rng_tracker().add("model-parallel-rng", 1234 + 2718)
    layer = MegatronLayer(layer_number=1)
    layer.train()
    a = MegatronArgs
    x = torch.randn(a.seq_length, a.micro_batch_size, a.hidden_size, dtype=a.dtype,
                    device=DEVICE, requires_grad=True)
    mask = torch.ones(1, 1, a.seq_length, a.seq_length, dtype=torch.bool, device=DEVICE).triu(1)
    grad = torch.ones(a.seq_length, a.micro_batch_size, a.hidden_size, dtype=a.dtype,
                      device=DEVICE)
    forward, backward = layer_passes(layer, x, mask, grad, list(layer.parameters()), repeats * 20)
    return min(forward), min(backward)


def zero_layer_grads(x, params):
    """Local DDP's hooks add each grad to main_grad and drop it; the step zeroes the buffers."""
    x.grad = None
    for p in params:
        p.grad = None
        if hasattr(p, "main_grad"):
            p.main_grad.zero_()


def layer_passes(layer, x, mask, grad, params, n):
    """The thread's CPU time of n forwards and backwards of the layer, each: two lists."""
    forward, backward = [], []
    for _ in range(n):
        t0 = time.thread_time()
        y = layer(x, mask)
        t1 = time.thread_time()
        y.backward(grad)
        t2 = time.thread_time()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
        zero_layer_grads(x, params)
    return forward, backward


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="-")
    ap.add_argument("--scale-against", metavar="CSV",
                    help="also print this host's time relative to CSV's (host_dispatch.csv, the "
                         "host meshsim's costs were measured on): meshsim's --host-time-scale")
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
    layer_forward, layer_backward = megatron_layer(r)
    cases += [("megatron_layer_forward", layer_forward, 1),
              ("megatron_layer_backward", layer_backward, 1)]
    layer_forward, layer_backward = megatron_layer(r, one_op_fusions=True)
    cases += [("megatron_layer_one_op_fusions_forward", layer_forward, 1),
              ("megatron_layer_one_op_fusions_backward", layer_backward, 1)]
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
    if args.scale_against:
        print_scale(dict((name, seconds * 1e6) for name, seconds, _ in cases), args.scale_against)
    return 0


def print_scale(here, reference_csv):
    """This host's time for the two layers' forward and backward against the reference's: the
    --host-time-scale of the stacks whose host costs come from each (Megatron-LM's legacy layer
    for megatron-2021 to 2023 and the DeepSpeed stacks, the reference block for the eager
    stacks)."""
    with open(reference_csv, newline="") as f:
        ref = {row["case"]: float(row["us_per_op"]) for row in csv.DictReader(f)}
    for label, prefix, stacks in (
            ("Megatron-LM's legacy layer", "megatron_layer_",
             "megatron-2021 to megatron-2023, megatron-deepspeed-2022, deepspeed-zero3-2021"),
            ("the reference block", "llama_block_", "megatron, fsdp, llm-foundry-2023")):
        mine = here[prefix + "forward"] + here[prefix + "backward"]
        theirs = ref[prefix + "forward"] + ref[prefix + "backward"]
        print(f"{label}: {mine:.0f} us here against {theirs:.0f} us: --host-time-scale "
              f"{mine / theirs:.2f} for {stacks}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

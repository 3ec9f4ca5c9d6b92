#include "layer_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "layer_items.h"
#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

bool eager(const LayerContext& c) { return c.plan.kernels == Kernels::kEager; }

ComputeWork norm_work(const LayerContext& c, int64_t tokens, bool backward) {
  const int64_t th = tokens * c.model.d_model;
  // Forward reads x, writes y; backward reads x and dy, writes dx (and reduces dgamma).
  const int64_t passes = backward ? 3 : 2;
  const double flops = c.model.norm == NormKind::kRmsNorm ? 4.0 : 7.0;
  return memory_bound(OpClass::kNorm, backward ? 2 * flops : flops, th,
                      passes * c.plan.activation_bytes * th + c.plan.activation_bytes * c.model.d_model);
}

void norm_items(Items& it, const std::string& name, int64_t tokens, bool backward) {
  // Eager PyTorch runs LayerNorm as one kernel each way (aten::native_layer_norm and its
  // backward); RMSNorm, written out in tensor operations, as several.
  if (eager(it.context()) && it.context().model.norm == NormKind::kRmsNorm) {
    eager_norm(it, name, tokens, backward);
  } else {
    it.kernel(name, norm_work(it.context(), tokens, backward));
  }
}

// out = x + y: read two, write one. Forward: the residual add; backward: autograd's sum of the
// two gradients of the residual stream (the skip and the norm's input). With dropout, the add is
// Megatron's fused bias-dropout-add (megatron/model/transformer.py bias_dropout_add_fused_train
// @ 6985e589): it also writes a one-byte mask per element, which its backward reads; `masks` is
// the number of such masks the kernel moves.
void residual_items(Items& it, const std::string& name, int64_t masks) {
  const int64_t el = it.dims().sp_tokens * it.dims().h;
  const int64_t mask_bytes = it.context().model.dropout ? masks * el : 0;
  it.kernel(name, memory_bound(OpClass::kElementwise, 1.0, el,
                               3 * it.context().plan.activation_bytes * el + mask_bytes));
}

void rope_items(Items& it, bool backward) {
  if (it.context().model.positions != PositionKind::kRope) {
    return;
  }
  if (eager(it.context())) {
    eager_rope(it, backward);
    return;
  }
  const Dims& d = it.dims();
  const int64_t el = d.tokens * (d.q + d.kv);
  it.kernel(backward ? "rope.bwd" : "rope",
            memory_bound(OpClass::kElementwise, 3.0, el, 2 * it.context().plan.activation_bytes * el));
}

// Attention over materialised scores with fused kernels (Megatron-LM's fused scale-mask-softmax
// between two batched GEMMs, before flash attention): the score GEMM Q K^T writes the s x s
// scores of every head, the softmax kernel reads them and writes the probabilities, the context
// GEMM P V reads those. Backward: dP = dO V^T and dV = P^T dO, the softmax backward (reads P and
// dP, writes dS), dQ = dS K and dK = dS^T Q. The GEMMs compute the full s x s (no causal
// skipping). With dropout (Megatron-LM 2021: torch.nn.Dropout on the probabilities,
// megatron/model/transformer.py ParallelAttention @ 6985e589), a dropout kernel reads the
// probabilities and writes the dropped ones and a one-byte mask; its backward reads the
// gradient and the mask and writes the gradient.
void naive_attention_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  SIM_CHECK(c.plan.cp == 1, "naive attention with context parallelism (checked by the plan)");
  const int64_t e = c.plan.activation_bytes;
  const int64_t dh = c.model.head_dim;
  const int64_t bn = d.b * d.heads;
  const int64_t scores = bn * d.s * d.s;
  const OpClass a = OpClass::kAttention;
  const auto bmm = [&](const std::string& name, int64_t m, int64_t k, int64_t n) {
    ComputeWork w = matmul(m, k, n, bn, c.plan.matmul_dtype == Dtype::kFp8 ? Dtype::kBf16
                                                                           : c.plan.matmul_dtype,
                           e);
    w.op_class = a;
    it.kernel(name, w);
  };
  if (!backward) {
    bmm("attention.scores", d.s, dh, d.s);
    it.kernel("attention.softmax", memory_bound(a, 5.0, scores, 2 * e * scores));
    if (c.model.dropout) {
      it.kernel("attention.dropout", memory_bound(a, 1.0, scores, (2 * e + 1) * scores));
    }
    bmm("attention.context", d.s, d.s, dh);
    return;
  }
  bmm("attention.bwd.dprobs", d.s, dh, d.s);
  bmm("attention.bwd.dv", d.s, d.s, dh);
  if (c.model.dropout) {
    it.kernel("attention.bwd.dropout", memory_bound(a, 1.0, scores, (2 * e + 1) * scores));
  }
  it.kernel("attention.bwd.softmax", memory_bound(a, 4.0, scores, 3 * e * scores));
  bmm("attention.bwd.dq", d.s, d.s, dh);
  bmm("attention.bwd.dk", d.s, d.s, dh);
}

void attention_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  if (eager(c)) {
    eager_attention(it, backward);
    return;
  }
  if (c.plan.attention == AttentionKernel::kNaive) {
    naive_attention_items(it, backward);
    return;
  }
  const std::string name = backward ? "attention.bwd" : "attention";
  ComputeWork w = attention_work(c, d, backward);
  if (c.plan.cp == 1) {
    it.kernel(name, w);
    return;
  }
  // Ring attention: CP chunks, each against one K/V block; K and V (and, backward, their
  // gradients) travel around the ring.
  w.flops = w.flops * (1.0 / static_cast<double>(c.plan.cp));
  w.bytes = w.bytes / c.plan.cp;
  const Bytes kv_block = Bytes::of(2 * d.tokens * d.kv * c.plan.activation_bytes);
  it.ring(RingSpec{name, KernelSpec{name + ".chunk", w}, c.plan.cp, backward ? kv_block * 2 : kv_block});
}

struct MoeDims {
  int64_t rows;   // tokens per local expert GEMM
  int64_t batch;  // local experts
  int64_t routed; // token-expert pairs on the rank
};

MoeDims moe_dims(const LayerContext& c, const Dims& d) {
  if (!c.model.moe) {
    return {d.tokens, 1, d.tokens};
  }
  const int64_t e = c.model.moe->num_experts;
  const int64_t k = c.model.moe->experts_per_token;
  // Balanced routing: each local expert receives T*k/E tokens from each of the EP ranks, padded
  // to the capacity factor.
  const auto rows = static_cast<int64_t>(
      std::ceil(static_cast<double>(d.tokens * k * c.plan.ep) / static_cast<double>(e) * c.plan.capacity_factor));
  return {rows, e / c.plan.ep, d.tokens * k};
}

// The MLP's activation function between the up and down projections, on `el` elements.
void activation_items(Items& it, int64_t el, bool backward) {
  const LayerContext& c = it.context();
  const bool gated = c.model.mlp == MlpKind::kGated;
  if (eager(c)) {
    eager_activation(it, el, backward);
    return;
  }
  const ComputeWork act = memory_bound(
      OpClass::kElementwise, gated ? 5.0 : 8.0, el,
      (gated ? (backward ? 5 : 3) : (backward ? 3 : 2)) * c.plan.activation_bytes * el);
  it.kernel(std::string(gated ? "swiglu" : "gelu") + (backward ? ".bwd" : ""), act);
}

void mlp_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const ModelConfig& m = c.model;
  const bool gated = m.mlp == MlpKind::kGated;
  const int64_t up_n = gated ? 2 * d.f : d.f;
  const MoeDims md = moe_dims(c, d);
  const int64_t act_el = md.rows * md.batch * d.f;
  const Bytes routed_bytes = Bytes::of(md.routed * d.h * c.plan.activation_bytes);
  const ComputeWork permute = memory_bound(OpClass::kCopy, 0.0, md.routed * d.h, 2 * routed_bytes.count());
  auto a2a = [&](const std::string& name) {
    if (m.moe && c.plan.ep > 1) {
      it.comm(name, CommKind::kExpert, CollectiveKind::kAllToAll, routed_bytes);
    }
  };
  const char* up = gated ? "mlp_up" : "fc1";
  const char* down = gated ? "mlp_down" : "fc2";
  // The MLP is column-parallel in (up, or the router with MoE) and row-parallel out (down, or
  // MoE's combine).
  if (!backward) {
    if (!it.norm_casts_fp8()) {
      it.fp8_cast(std::string(up) + ".input", d.sp_tokens * d.h);
    }
    if (m.moe) {
      it.column_gemm("mlp", "router", d.tokens, d.h, m.moe->num_experts);
      it.kernel("dispatch", permute);
      a2a("dispatch.ep_alltoall");
      it.gemm(up, md.rows, d.h, up_n, md.batch);
    } else {
      it.column_gemm("mlp", up, md.rows, d.h, up_n, md.batch);
    }
    activation_items(it, act_el, false);
    it.fp8_cast(std::string(down) + ".input", act_el);
    if (m.moe) {
      it.gemm(down, md.rows, d.f, d.h, md.batch);
      a2a("combine.ep_alltoall");
      it.kernel("combine", permute);
      it.tp_exit("mlp");
    } else {
      it.row_gemm(down, "mlp", md.rows, d.f, d.h, md.batch);
    }
    return;
  }
  it.fp8_cast(std::string(down) + ".grad_output", d.sp_tokens * d.h);
  if (m.moe) {
    it.tp_gather_grad("mlp.bwd");
    it.kernel("combine.bwd", permute);
    a2a("combine.bwd.ep_alltoall");
    it.gemm_bwd(down, md.rows, d.f, d.h, md.batch);
  } else {
    it.row_gemm_bwd("mlp.bwd", down, md.rows, d.f, d.h, md.batch);
  }
  activation_items(it, act_el, true);
  if (eager(c) && gated) {
    eager_copy(it, "mlp_up.split.bwd", md.rows * md.batch * up_n);
  }
  it.fp8_cast(std::string(up) + ".grad_output", md.rows * md.batch * up_n);
  it.column_bwd(up, md.rows, d.h, up_n, md.batch);
  if (m.moe) {
    a2a("dispatch.bwd.ep_alltoall");
    it.kernel("dispatch.bwd", permute);
    it.gemm_bwd("router", d.tokens, d.h, m.moe->num_experts);
  }
}

}  // namespace

// The attention core of the rank: its heads (1/TP) over its query chunk (1/CP of the causal work).
ComputeWork attention_work(const LayerContext& c, const Dims& d, bool backward) {
  const bool flash = c.plan.attention != AttentionKernel::kNaive;
  const double s2q = static_cast<double>(d.b) * static_cast<double>(d.s) *
                     static_cast<double>(d.s) * static_cast<double>(d.q) /
                     static_cast<double>(c.plan.cp);
  const double fwd_flops = flash ? 2.0 * s2q : 4.0 * s2q;
  ComputeWork w;
  w.op_class = OpClass::kAttention;
  w.dtype = attention_dtype(c);
  w.flops = Flops::of(backward ? 2.5 * fwd_flops : fwd_flops);
  const int64_t qkv = d.tokens * (d.q + 2 * d.kv) * c.plan.activation_bytes;
  const int64_t o = d.tokens * d.q * c.plan.activation_bytes;
  // Forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV.
  int64_t bytes = backward ? 2 * qkv + 2 * o : qkv + o;
  const int64_t q_len = d.tokens / d.b;  // the rank's queries of each sequence
  if (!flash) {
    const int64_t scores = d.b * d.heads * q_len * d.s * c.plan.activation_bytes;
    bytes += (backward ? 6 : 4) * scores;
  }
  w.bytes = Bytes::of(bytes);
  w.shape = MatmulShape{q_len, c.model.head_dim, d.s, d.b * d.heads};
  if (const std::optional<AttentionImpl> impl = fused_attention(c.plan.attention)) {
    // The rank's query chunk (T / b tokens of each sequence) against its keys: the whole
    // sequence, or one CP chunk per ring step (the chunk kernel of attention_items).
    w.attention = AttentionShape{*impl, backward, true, d.b * d.heads, q_len, q_len,
                                 c.model.head_dim};
  }
  return w;
}

Dtype attention_dtype(const LayerContext& c) {
  return c.plan.matmul_dtype == Dtype::kFp8 ? Dtype::kBf16 : c.plan.matmul_dtype;
}

Bytes pipeline_message_bytes(const LayerContext& c) {
  const Dims d = dims_of(c);
  return Bytes::of(d.sp_tokens * d.h * c.plan.activation_bytes);
}

std::vector<LayerItem> embedding_forward(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const int64_t th = d.tokens * d.h;
  // Gather T rows of the (vocabulary-parallel) table; learned positions add a second gather.
  const bool learned = c.model.positions == PositionKind::kLearned;
  it.kernel("embedding", memory_bound(OpClass::kEmbedding, learned ? 1.0 : 0.0, th,
                                      (learned ? 5 : 2) * c.plan.activation_bytes * th));
  it.tp_exit("embedding");
  return it.take();
}

std::vector<LayerItem> embedding_backward(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const int64_t th = d.tokens * d.h;
  it.tp_gather_grad("embedding.bwd");
  // The table's gradient is dense (PyTorch's embedding_dense_backward, also under Megatron): the
  // local vocabulary x h is zero-filled, then the T gradient rows are scatter-added into it
  // (read-modify-write of each row).
  const bool learned = c.model.positions == PositionKind::kLearned;
  const int64_t table = d.vocab * d.h;
  it.kernel("embedding.bwd",
            memory_bound(OpClass::kEmbedding, learned ? 2.0 : 1.0, th,
                         (learned ? 6 : 3) * c.plan.activation_bytes * th + c.plan.activation_bytes * table));
  return it.take();
}

std::vector<LayerItem> layer_forward(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  norm_items(it, "attn_norm", d.sp_tokens, false);
  if (!it.norm_casts_fp8()) {
    it.fp8_cast("qkv.input", d.sp_tokens * d.h);
  }
  it.column_gemm("qkv", "qkv", d.tokens, d.h, d.q + 2 * d.kv);
  rope_items(it, false);
  attention_items(it, false);
  if (eager(c)) {  // o.transpose(1, 2).reshape(b, s, q): a copy into token-major layout
    eager_copy(it, "attention.out_copy", d.tokens * d.q);
  }
  it.fp8_cast("attn_out.input", d.tokens * d.q);
  it.row_gemm("attn_out", "attn_out", d.tokens, d.q, d.h);
  residual_items(it, "residual_attn", 1);
  norm_items(it, "mlp_norm", d.sp_tokens, false);
  mlp_items(it, false);
  residual_items(it, "residual_mlp", 1);
  return it.take();
}

std::vector<LayerItem> layer_backward(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  mlp_items(it, true);
  norm_items(it, "mlp_norm.bwd", d.sp_tokens, true);
  residual_items(it, "residual.bwd", 2);
  it.fp8_cast("attn_out.grad_output", d.sp_tokens * d.h);
  it.row_gemm_bwd("attn_out.bwd", "attn_out", d.tokens, d.q, d.h);
  if (eager(c)) {
    eager_copy(it, "attention.out_copy.bwd", d.tokens * d.q);
  }
  attention_items(it, true);
  rope_items(it, true);
  if (eager(c)) {  // the gradients of the Q, K and V slices, concatenated for the QKV GEMM
    eager_copy(it, "qkv.split.bwd", d.tokens * (d.q + 2 * d.kv));
  }
  it.fp8_cast("qkv.grad_output", d.tokens * (d.q + 2 * d.kv));
  it.column_bwd("qkv", d.tokens, d.h, d.q + 2 * d.kv);
  norm_items(it, "attn_norm.bwd", d.sp_tokens, true);
  if (eager(c)) {  // autograd sums the residual stream's two gradients at each norm's input
    residual_items(it, "residual_attn.bwd", 0);
  }
  return it.take();
}

namespace {

// The LM head's GEMMs run in the activations' precision also in FP8 runs: Transformer Engine's
// FP8 covers the transformer layers' linears, Megatron's output layer is a plain
// ColumnParallelLinear.
ParallelPlan head_plan(const ParallelPlan& p) {
  ParallelPlan h = p;
  if (h.matmul_dtype == Dtype::kFp8) {
    h.matmul_dtype = Dtype::kBf16;
  }
  return h;
}

}  // namespace

std::vector<LayerItem> head_forward(const LayerContext& layer) {
  const ParallelPlan plan = head_plan(layer.plan);
  const LayerContext c{layer.model, plan, layer.stage};
  const Dims d = dims_of(c);
  Items it(c, d);
  norm_items(it, "final_norm", d.sp_tokens, false);
  it.column_gemm("lm_head", "lm_head", d.tokens, d.h, d.vocab);
  const int64_t tv = d.tokens * d.vocab;
  if (eager(c)) {
    eager_loss(it, false);
  } else {
    // Fused (vocabulary-parallel) cross entropy: read the bf16 logits, write fp32 statistics and
    // the gradient of the logits.
    it.kernel("cross_entropy", memory_bound(OpClass::kLoss, 5.0, tv, 2 * c.plan.activation_bytes * tv));
  }
  // TP ranks all-reduce the max, the sum of exponentials and the target logit, 3 fp32 values
  // per token.
  if (it.tensor_parallel()) {
    it.comm("cross_entropy.tp_allreduce", CommKind::kTensor, CollectiveKind::kAllReduce,
            Bytes::of(3 * 4 * d.tokens));
  }
  return it.take();
}

std::vector<LayerItem> head_backward(const LayerContext& layer) {
  const ParallelPlan plan = head_plan(layer.plan);
  const LayerContext c{layer.model, plan, layer.stage};
  const Dims d = dims_of(c);
  Items it(c, d);
  if (eager(c)) {
    eager_loss(it, true);
  }
  it.column_bwd("lm_head", d.tokens, d.h, d.vocab);
  norm_items(it, "final_norm.bwd", d.sp_tokens, true);
  return it.take();
}

std::vector<KernelSpec> step_work(const LayerContext& c, int64_t params, int64_t layer_weights) {
  std::vector<KernelSpec> out;
  const ParallelPlan& p = c.plan;
  const int64_t g = params * p.state.gradient;
  if (p.matmul_dtype == Dtype::kFp16) {
    // Dynamic loss scaling: the gradients are unscaled and checked for inf/nan (Apex's and
    // Megatron's multi-tensor unscale), one pass reading and writing them.
    out.push_back({"loss_scale.unscale_check",
                   memory_bound(OpClass::kOptimizer, 2.0, params, 2 * g)});
  }
  if (p.step_work.grad_norm) {
    // Clipping by global norm: every local gradient read once (the norm's all-reduce of one
    // value is latency, not modelled).
    out.push_back({"grad_norm", memory_bound(OpClass::kOptimizer, 2.0, params, g)});
  }
  if (p.matmul_dtype == Dtype::kFp8 && layer_weights > 0) {
    // The linear layers' weights cast to FP8 with their transposes once per step (Transformer
    // Engine caches them over the microbatches: is_first_microbatch).
    const Dims d = dims_of(c);
    Items it(c, d);
    it.fp8_cast("fp8.weights", layer_weights);
    for (LayerItem& item : it.take()) {
      out.push_back(std::get<KernelSpec>(std::move(item)));
    }
  }
  return out;
}

std::vector<KernelSpec> optimizer_step(const std::vector<int64_t>& tensors,
                                       const ModelStateBytes& state, OptimizerKernels kernels) {
  int64_t params = 0;
  for (const int64_t t : tensors) {
    params += t;
  }
  if (kernels == OptimizerKernels::kFused) {
    // AdamW: read gradient, master weight, m, v; write master weight, m, v and the bf16 working
    // copy. About 12 FLOPs per parameter (moments, bias correction, sqrt, divide, decay, update).
    const int64_t bytes = params * (state.gradient + 2 * state.optimizer + state.weight);
    return {{"adamw", memory_bound(OpClass::kOptimizer, 12.0, params, bytes)}};
  }
  return eager_adamw(tensors, state, kernels);
}

}  // namespace meshsim::workloads::detail

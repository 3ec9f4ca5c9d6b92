#include "layer_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "layer_items.h"
#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

bool eager(const LayerContext& c) { return c.plan.kernels == Kernels::kEager; }

// apex.contrib's persistent LayerNorm kernel's hidden sizes, as Megatron-LM lists them
// (megatron/model/fused_layer_norm.py persist_ln_hidden_sizes @ cfd2e21607).
bool persistent_layer_norm_size(int64_t h) {
  constexpr std::array<int64_t, 24> kSizes = {
      1024,  1536,  2048,  2304,  3072,  3840,  4096,  5120,  6144,  8192,  10240, 12288,
      12800, 15360, 16384, 18432, 20480, 24576, 25600, 30720, 32768, 40960, 49152, 65536};
  return std::find(kSizes.begin(), kSizes.end(), h) != kSizes.end();
}

ComputeWork norm_work(const LayerContext& c, int64_t tokens, bool backward) {
  const int64_t th = tokens * c.model.d_model;
  // Forward reads x, writes y; backward reads x and dy, writes dx (and reduces dgamma).
  // Megatron-LM's legacy layer's, apex's two-stage backward, reads x and dy twice (ParallelPlan::
  // megatron_legacy_layer).
  const bool rereads =
      backward && legacy(c) && c.model.norm == NormKind::kLayerNorm &&
      !(c.plan.persistent_layer_norm && persistent_layer_norm_size(c.model.d_model));
  const int64_t passes = rereads ? 5 : backward ? 3 : 2;
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
  const LayerContext& c = it.context();
  if (c.model.positions != PositionKind::kRope) {
    return;
  }
  if (eager(c)) {
    eager_rope(it, backward);
    return;
  }
  const Dims& d = it.dims();
  // MLA rotates only the RoPE part of each query head and the one shared RoPE key.
  const int64_t el = c.model.mla ? d.tokens * (d.heads + 1) * c.model.mla->qk_rope_head_dim
                                 : d.tokens * (d.q + d.kv);
  it.kernel(backward ? "rope.bwd" : "rope",
            memory_bound(OpClass::kElementwise, 3.0, el, 2 * c.plan.activation_bytes * el));
}

// Qwen3 / Gemma-3: RMSNorm over head_dim of every Q and K head.
void qk_norm_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  if (!c.model.qk_norm) {
    return;
  }
  const Dims& d = it.dims();
  const int64_t el = d.tokens * (d.q + d.kv);
  const int64_t e = c.plan.activation_bytes;
  it.kernel(backward ? "qk_norm.bwd" : "qk_norm",
            memory_bound(OpClass::kNorm, backward ? 8.0 : 4.0, el, (backward ? 3 : 2) * e * el));
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
  const int64_t dv = c.model.mla ? c.model.mla->v_head_dim : dh;  // MLA: V heads are narrower
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
    bmm("attention.context", d.s, d.s, dv);
    return;
  }
  bmm("attention.bwd.dprobs", d.s, dv, d.s);
  bmm("attention.bwd.dv", d.s, d.s, dv);
  if (c.model.dropout) {
    it.kernel("attention.bwd.dropout", memory_bound(a, 1.0, scores, (2 * e + 1) * scores));
  }
  it.kernel("attention.bwd.softmax", memory_bound(a, 4.0, scores, 3 * e * scores));
  bmm("attention.bwd.dq", d.s, d.s, dh);
  bmm("attention.bwd.dk", d.s, d.s, dh);
  if (legacy(c)) {
    // torch.baddbmm(..., alpha=1/norm_factor)'s backward multiplies each input gradient by alpha
    // (autograd's maybe_multiply): dQ and dK once more through memory.
    elementwise_pass(it, "attention.bwd.dq_alpha", bn * d.s * dh);
    elementwise_pass(it, "attention.bwd.dk_alpha", bn * d.s * dh);
  }
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
  const Bytes kv_block = Bytes::of(d.tokens * (d.kv + d.v) * c.plan.activation_bytes);
  it.ring(RingSpec{name, KernelSpec{name + ".chunk", w}, c.plan.cp, backward ? kv_block * 2 : kv_block});
}

// A norm over a `width`-wide latent of every token (MLA's q_a / kv_a norms): replicated.
void latent_norm(Items& it, const std::string& name, int64_t width, bool backward) {
  const int64_t el = it.dims().tokens * width;
  const int64_t e = it.context().plan.activation_bytes;
  it.kernel(name, memory_bound(OpClass::kNorm, backward ? 8.0 : 4.0, el,
                               (backward ? 3 : 2) * e * el + e * width));
}

// MLA's projections (Megatron-Core MLASelfAttention): the down-projections to the Q latent and to
// the KV latent + shared RoPE key are replicated over TP ("duplicated") and read the (gathered)
// layer input; the up-projections are column-parallel by heads.
// An MLA up-projection from its latent of `width` (normed first) to `n` columns. FP8: the latents'
// norms are fused into the up-projections as the layer norm is into QKV (Megatron-Core's MLA
// spec: TELayerNormColumnParallelLinear for linear_q_up_proj and linear_kv_up_proj), so their
// casts follow the same rule.
void latent_up(Items& it, const std::string& norm, const std::string& name, int64_t width,
               int64_t n) {
  const Dims& d = it.dims();
  latent_norm(it, norm, width, false);
  if (!it.norm_casts_fp8()) {
    it.fp8_cast(name + ".input", d.tokens * width);
  }
  it.gemm(name, d.tokens, width, n);
}

void mla_forward(Items& it) {
  const Dims& d = it.dims();
  const MlaConfig& a = *it.context().model.mla;
  if (a.q_lora_rank > 0) {
    it.column_gemm("qkv", "q_down", d.tokens, d.h, a.q_lora_rank);
    latent_up(it, "q_latent_norm", "q_up", a.q_lora_rank, d.q);
  } else {
    it.column_gemm("qkv", "q_proj", d.tokens, d.h, d.q);
  }
  it.gemm("kv_down", d.tokens, d.h, a.kv_lora_rank + a.qk_rope_head_dim);
  latent_up(it, "kv_latent_norm", "kv_up", a.kv_lora_rank, d.heads * a.qk_nope_head_dim + d.v);
}

// Megatron-Core's mla_up_proj recompute (MultiLatentAttention's qkv_up_proj_and_rope_apply under
// CheckpointWithoutOutput): the Q and KV up-projections and RoPE re-run from the kept latents
// (without a Q latent, the Q projection from the layer input, gathered again under SP).
void mla_up_recompute(Items& it) {
  const Dims& d = it.dims();
  const MlaConfig& a = *it.context().model.mla;
  if (a.q_lora_rank > 0) {
    latent_up(it, "q_latent_norm", "q_up", a.q_lora_rank, d.q);
  } else {
    it.column_gemm("qkv", "q_proj", d.tokens, d.h, d.q);
  }
  latent_up(it, "kv_latent_norm", "kv_up", a.kv_lora_rank, d.heads * a.qk_nope_head_dim + d.v);
  rope_items(it, false);
}

// The backward of a column-parallel up-projection whose input is a replicated latent of `width`:
// its input gradient is partial over TP and is all-reduced (T x width) beside the weight gradient,
// or after it (Items::wgrad_and_reduce).
void latent_up_bwd(Items& it, const std::string& name, int64_t width, int64_t n) {
  const Dims& d = it.dims();
  it.fp8_cast(name + ".grad_output", d.tokens * n);
  it.gemm(name + ".dgrad", d.tokens, n, width);
  if (!it.tensor_parallel()) {
    it.wgrad(name, d.tokens, width, n);
    return;
  }
  it.wgrad_and_reduce({name + ".tp_allreduce", CommKind::kTensor, CollectiveKind::kAllReduce,
                       Bytes::of(d.tokens * width * it.context().plan.activation_bytes)},
                      name, d.tokens, width, n);
}

// The down-projections' input gradients are then whole on every rank: no reduction of T x h
// (with SP each rank keeps its slice); with SP the saved input is re-gathered for their weight
// gradients.
void mla_backward(Items& it) {
  const Dims& d = it.dims();
  const MlaConfig& a = *it.context().model.mla;
  latent_up_bwd(it, "kv_up", a.kv_lora_rank, d.heads * a.qk_nope_head_dim + d.v);
  latent_norm(it, "kv_latent_norm.bwd", a.kv_lora_rank, true);
  if (it.tensor_parallel() && it.context().plan.sp) {
    it.comm("kv_down.tp_allgather_input", CommKind::kTensor, CollectiveKind::kAllGather,
            it.activation_bytes(), true);
  }
  it.fp8_cast("kv_down.grad_output", d.tokens * (a.kv_lora_rank + a.qk_rope_head_dim));
  it.gemm_bwd("kv_down", d.tokens, d.h, a.kv_lora_rank + a.qk_rope_head_dim);
  if (a.q_lora_rank > 0) {
    latent_up_bwd(it, "q_up", a.q_lora_rank, d.q);
    latent_norm(it, "q_latent_norm.bwd", a.q_lora_rank, true);
    it.fp8_cast("q_down.grad_output", d.tokens * a.q_lora_rank);
    it.gemm_bwd("q_down", d.tokens, d.h, a.q_lora_rank);
  } else {
    it.fp8_cast("q_proj.grad_output", d.tokens * d.q);
    it.column_bwd("q_proj", d.tokens, d.h, d.q);
  }
}

// Q, K and V from the normed layer input: one fused column-parallel GEMM, or MLA's projections.
void qkv_forward(Items& it) {
  const Dims& d = it.dims();
  if (!it.norm_casts_fp8()) {
    it.fp8_cast("qkv.input", d.sp_tokens * d.h);
  }
  if (it.context().model.mla) {
    mla_forward(it);
  } else {
    it.column_gemm("qkv", "qkv", d.tokens, d.h, d.q + d.kv + d.v);
    if (legacy(it.context()) && it.context().model.attention_bias) {
      elementwise_pass(it, "qkv.bias", d.tokens * (d.q + d.kv + d.v));
    }
  }
}

void qkv_backward(Items& it) {
  const Dims& d = it.dims();
  if (it.context().model.mla) {
    mla_backward(it);
    return;
  }
  const int64_t qkv = d.tokens * (d.q + d.kv + d.v);
  if (eager(it.context()) || legacy(it.context())) {
    // The gradients of the Q, K and V slices, concatenated for the GEMM (Megatron-LM's
    // split_tensor_along_last_dim's backward: torch.cat).
    layout_copy(it, "qkv.split.bwd", qkv);
  }
  it.fp8_cast("qkv.grad_output", qkv);
  it.column_bwd("qkv", d.tokens, d.h, d.q + d.kv + d.v);
  if (legacy(it.context()) && it.context().model.attention_bias) {
    legacy_bias_grad(it, "qkv.bias.grad", d.tokens, d.q + d.kv + d.v);
  }
}

}  // namespace

// The attention core of the rank: its heads (1/TP) over its query chunk (1/CP of the causal work).
ComputeWork attention_work(const LayerContext& c, const Dims& d, bool backward) {
  const bool flash = c.plan.attention != AttentionKernel::kNaive;
  // Query-key pairs computed, times 2: s^2 for the causal half (flash) or the whole matrix
  // (naive, which masks after computing); a window W < s leaves 2sW - W^2 (flash skips the
  // blocks outside it).
  const auto s = static_cast<double>(d.s);
  const int64_t window = c.layer >= 0 ? c.model.attention_window(c.layer) : 0;
  const bool windowed = flash && window > 0 && window < d.s;
  const double w = static_cast<double>(window);
  const double pairs2 = windowed ? 2.0 * s * w - w * w : s * s;
  // QK^T over the Q/K width and PV over the V width: 2 FLOPs per multiply-add, each over half
  // of s^2 pairs under causal masking.
  const double fwd_flops = static_cast<double>(d.b) * pairs2 * static_cast<double>(d.q + d.o) /
                           static_cast<double>(c.plan.cp) * (flash ? 1.0 : 2.0);
  ComputeWork work;
  work.op_class = OpClass::kAttention;
  work.dtype = attention_dtype(c);
  work.flops = Flops::of(backward ? 2.5 * fwd_flops : fwd_flops);
  const int64_t qkv = d.tokens * (d.q + d.kv + d.v) * c.plan.activation_bytes;
  const int64_t o = d.tokens * d.o * c.plan.activation_bytes;
  // Forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV.
  int64_t bytes = backward ? 2 * qkv + 2 * o : qkv + o;
  const int64_t q_len = d.tokens / d.b;  // the rank's queries of each sequence
  if (!flash) {
    const int64_t scores = d.b * d.heads * q_len * d.s * c.plan.activation_bytes;
    bytes += (backward ? 6 : 4) * scores;
  }
  work.bytes = Bytes::of(bytes);
  // The keys each query block streams: the sequence (or one CP chunk per ring step), or the
  // window when it is shorter.
  const int64_t kv_len = windowed ? std::min(window, q_len) : q_len;
  work.shape = MatmulShape{q_len, c.model.head_dim, windowed ? window : d.s, d.b * d.heads};
  if (const std::optional<AttentionImpl> impl = fused_attention(c.plan.attention)) {
    // The rank's query chunk (T / b tokens of each sequence) against its keys: the whole
    // sequence, or one CP chunk per ring step (the chunk kernel of attention_items).
    work.attention =
        AttentionShape{*impl, backward, true, d.b * d.heads, q_len, kv_len, c.model.head_dim};
  }
  return work;
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
  if (c.model.parallel_blocks && c.model.norms_per_layer == 2) {
    norm_items(it, "mlp_norm", d.sp_tokens, false);  // on the same input (GPT-NeoX, Falcon-40B)
  }
  qkv_forward(it);
  qk_norm_items(it, false);
  rope_items(it, false);
  if (legacy(c) && c.plan.attention != AttentionKernel::kNaive) {
    // FlashSelfAttention's input: rearrange(x, 's b ... -> b s ...').contiguous() of Q, K and V
    // (megatron/model/transformer.py @ b90fb2685f).
    layout_copy(it, "attention.qkv_copy", d.tokens * (d.q + d.kv + d.v));
  }
  attention_items(it, false);
  if (eager(c) || legacy(c)) {
    // A copy into token-major layout: eager o.transpose(1, 2).reshape(b, s, q); Megatron-LM's
    // context_layer.permute(2, 0, 1, 3).contiguous() (with FlashAttention, rearrange(...,
    // 'b s h d -> s b (h d)').contiguous()).
    layout_copy(it, "attention.out_copy", d.tokens * d.o);
  }
  if (c.model.parallel_blocks) {
    // One TP reduction for the attention's and the MLP's partial outputs (Megatron's
    // parallel-attention GPT-NeoX / Falcon layer), then x + attn + mlp (with dropout, a mask
    // for each).
    it.fp8_cast("attn_out.input", d.tokens * d.o);
    it.gemm("attn_out", d.tokens, d.o, d.h);
    parallel_mlp_items(it, false);
    it.tp_exit("layer");
    residual_items(it, "residual", 2);
    return it.take();
  }
  it.fp8_cast("attn_out.input", d.tokens * d.o);
  it.row_gemm("attn_out", "attn_out", d.tokens, d.o, d.h);
  if (c.model.norms_per_layer == 4) {
    norm_items(it, "post_attn_norm", d.sp_tokens, false);
  }
  residual_items(it, "residual_attn", 1);
  norm_items(it, "mlp_norm", d.sp_tokens, false);
  mlp_items(it, false);
  if (c.model.norms_per_layer == 4) {
    norm_items(it, "post_mlp_norm", d.sp_tokens, false);
  }
  residual_items(it, "residual_mlp", 1);
  return it.take();
}

std::vector<LayerItem> recompute_selected_modules(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const Recompute r = c.plan.recompute;
  if (reruns_core_attention(c.plan, r)) {
    // Its checkpoint keeps Q, K and V (after RoPE) and re-runs the kernel (or the score GEMM,
    // softmax, dropout and context GEMM) on them, with CP its ring exchange too.
    attention_items(it, false);
  }
  if (c.model.mla && recomputes(c.plan, r, RecomputeModule::kMlaUpProj)) {
    mla_up_recompute(it);
  }
  if (!c.model.is_moe_layer(c.layer) && recomputes(c.plan, r, RecomputeModule::kMlp)) {
    if (c.model.parallel_blocks) {
      parallel_mlp_items(it, false);
    } else {
      mlp_items(it, false);
    }
  }
  if (c.model.is_moe_layer(c.layer) && recomputes(c.plan, r, RecomputeModule::kMoeAct)) {
    moe_activation_recompute(it);
  }
  return it.take();
}

std::vector<LayerItem> recompute_torchtitan_ops(const LayerContext& c) {
  SIM_CHECK(op_checkpointing_fits(c.model),
            "torchtitan's op policy on a model unlike its Llama blocks (the stack refuses it)");
  const Dims d = dims_of(c);
  Items it(c, d);
  // FP8: every linear's input cast is re-made (no cast's output is saved), once per input as the
  // forward casts it (qkv_forward, mlp_items); the scales are kept.
  norm_items(it, "attn_norm", d.sp_tokens, false);
  it.fp8_recast("qkv.input", d.sp_tokens * d.h);
  it.column_gemm("wk", "wk", d.tokens, d.h, d.kv);
  rope_items(it, false);
  // The MLP norm's input, the residual sum, from the output projection's: under TP with SP its
  // reduce-scatter's output is saved; otherwise wo re-runs (with its all-reduce under TP).
  it.fp8_recast("attn_out.input", d.tokens * d.o);
  if (!it.tensor_parallel() || !c.plan.sp) {
    it.row_gemm("attn_out", "attn_out", d.tokens, d.o, d.h);
  }
  residual_items(it, "residual_attn", 0);
  norm_items(it, "mlp_norm", d.sp_tokens, false);
  // The second of the two up projections (w3; fc2, the down projection, in a plain MLP: the
  // MLP's second matmul, whose output the backward does not read, so only eager re-runs it).
  const bool gated = is_gated(c.model.mlp);
  it.fp8_recast(gated ? "mlp_up.input" : "fc1.input", d.sp_tokens * d.h);
  if (gated) {
    it.column_gemm("mlp_up.w3", "mlp_up.w3", d.tokens, d.h, d.f);
  }
  activation_items(it, d.tokens * d.f, false);
  it.fp8_recast(gated ? "mlp_down.input" : "fc2.input", d.tokens * d.f);
  if (!gated && eager(c)) {
    it.gemm("fc2", d.tokens, d.f, d.h);
  }
  return it.take();
}

std::vector<LayerItem> recompute_jax_policy(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  rope_items(it, false);
  qk_norm_items(it, false);
  attention_items(it, false);
  norm_items(it, "attn_norm", d.sp_tokens, false);
  if (!c.model.parallel_blocks) {
    // The MLP norm's input, the residual sum after the attention, is no matmul output: it is
    // re-made, from the output projection's result, which qkv_proj does not keep either, so
    // that re-runs too (with its TP reduction). A parallel block's MLP reads the attention
    // norm's output instead.
    if (c.plan.recompute == Recompute::kQkvProj) {
      it.fp8_recast("attn_out.input", d.tokens * d.o);
      it.row_gemm("attn_out", "attn_out", d.tokens, d.o, d.h);
    }
    residual_items(it, "residual_attn", 0);
  }
  if (!c.model.parallel_blocks || c.model.norms_per_layer == 2) {
    norm_items(it, "mlp_norm", d.sp_tokens, false);
  }
  if (c.model.norms_per_layer == 4) {
    norm_items(it, "post_attn_norm", d.sp_tokens, false);
    norm_items(it, "post_mlp_norm", d.sp_tokens, false);
  }
  if (keeps_named_projections(c.plan.recompute)) {
    mlp_up_recompute(it);  // its output is not kept
  } else {
    mlp_activation_recompute(it);
  }
  return it.take();
}

namespace {

// The attention half of a layer's backward, from the output projection's input gradient down to
// the layer input.
void attention_backward(Items& it) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  if (eager(c)) {
    layout_copy(it, "attention.out_copy.bwd", d.tokens * d.o);
  }
  attention_items(it, true);
  rope_items(it, true);
  qk_norm_items(it, true);
  qkv_backward(it);
}

}  // namespace

std::vector<LayerItem> layer_backward(const LayerContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  if (c.model.parallel_blocks) {
    it.tp_gather_grad("layer.bwd");
    it.fp8_cast("attn_out.grad_output", d.sp_tokens * d.h);  // also the MLP's down projection's
    parallel_mlp_items(it, true);
    it.gemm_bwd("attn_out", d.tokens, d.o, d.h);
    attention_backward(it);
    if (c.model.norms_per_layer == 2) {
      norm_items(it, "mlp_norm.bwd", d.sp_tokens, true);
    }
    norm_items(it, "attn_norm.bwd", d.sp_tokens, true);
    residual_items(it, "residual.bwd", 2);
    return it.take();
  }
  if (c.model.norms_per_layer == 4) {
    norm_items(it, "post_mlp_norm.bwd", d.sp_tokens, true);
  }
  mlp_items(it, true);
  norm_items(it, "mlp_norm.bwd", d.sp_tokens, true);
  residual_items(it, "residual.bwd", 2);
  if (c.model.norms_per_layer == 4) {
    norm_items(it, "post_attn_norm.bwd", d.sp_tokens, true);
  }
  if (legacy(c) && c.model.attention_out_bias) {  // attention_bias.expand_as(residual)'s sum
    legacy_bias_grad(it, "attn_out.bias.grad", d.sp_tokens, d.h);
  }
  it.fp8_cast("attn_out.grad_output", d.sp_tokens * d.h);
  it.row_gemm_bwd("attn_out.bwd", "attn_out", d.tokens, d.o, d.h);
  attention_backward(it);
  norm_items(it, "attn_norm.bwd", d.sp_tokens, true);
  if (eager(c) || legacy(c)) {
    // Autograd sums the residual stream's two gradients at each norm's input.
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

// Passes of a cross entropy over the logits, each one kernel moving `bytes` bytes an element.
// They are element-wise and reduction kernels (PyTorch's, or torch.compile's for Megatron-Core's
// fused loss), reported as the loss and run at the element-wise rate: Megatron-Core's fused loss,
// costed so, is within 20 % of its measured forward (validation/microbench/memory_bound.csv,
// tools/fit_kernels.py); the loss class is the one-pass kernels'.
void loss_passes(Items& it, const std::string& prefix,
                 std::initializer_list<std::pair<const char*, int64_t>> passes) {
  const int64_t tv = it.dims().tokens * it.dims().vocab;
  for (const auto& [op, bytes] : passes) {
    ComputeWork w = memory_bound(OpClass::kLoss, 1.0, tv, bytes * tv);
    w.rate_class = OpClass::kElementwise;
    it.kernel(prefix + op, std::move(w));
  }
}

// The LM head's backward: the loss, the head's GEMMs, the final norm.
void head_backward_items(Items& it, const std::string& prefix) {
  const Dims& d = it.dims();
  const ParallelPlan& p = it.context().plan;
  const int64_t a = p.activation_bytes;
  if (eager(it.context())) {
    eager_loss(it, true);
  } else if (!p.cross_entropy_fusion) {
    // VocabParallelCrossEntropy.backward: the saved softmax scaled by the loss gradient in place
    // (the target's -1 is a scatter over the tokens), then the autograd of .float() casting the
    // logits' gradient back to 16 bits.
    loss_passes(it, prefix + "cross_entropy.bwd.", {{"scale", 8}, {"cast", 4 + a}});
  } else if (p.fused_cross_entropy == FusedCrossEntropy::kMegatronCore) {
    // calculate_gradients, compiled: the same scaling of the saved fp32 softmax, written back in
    // place (the function mutates its input), and its 16-bit copy returned.
    loss_passes(it, prefix + "cross_entropy.bwd.", {{"gradients", 8 + a}});
  }
  it.column_bwd(prefix + "lm_head", d.tokens, d.h, d.vocab);
  norm_items(it, prefix + "final_norm.bwd", d.sp_tokens, true);
}

// The LM head and its loss (forward): the main head, and each MTP module's.
void head_items(Items& it, const std::string& prefix) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  norm_items(it, prefix + "final_norm", d.sp_tokens, false);
  it.column_gemm(prefix + "lm_head", prefix + "lm_head", d.tokens, d.h, d.vocab);
  const int64_t tv = d.tokens * d.vocab;
  if (eager(c)) {
    eager_loss(it, false);
  } else if (c.plan.cross_entropy_fusion &&
             c.plan.fused_cross_entropy == FusedCrossEntropy::kOnePass) {
    // Fused (vocabulary-parallel) cross entropy: read the bf16 logits, write fp32 statistics and
    // the gradient of the logits.
    it.kernel(prefix + "cross_entropy",
              memory_bound(OpClass::kLoss, 5.0, tv, 2 * c.plan.activation_bytes * tv));
  } else if (c.plan.cross_entropy_fusion) {
    // Megatron-Core's fused loss (megatron/core/fusions/fused_cross_entropy.py @ core_r0.8.0),
    // each compiled function one kernel: calculate_logits_max returns the fp32 copy of the logits
    // and their max; calculate_predicted_logits subtracts the max in place, exponentiates in
    // place and sums; calculate_cross_entropy_loss divides in place, leaving the softmax saved
    // for the backward. 22 bytes an element with 16-bit logits.
    const int64_t a = c.plan.activation_bytes;
    loss_passes(it, prefix + "cross_entropy.",
                {{"logits_max", a + 4}, {"predicted_logits", 8}, {"softmax", 8}});
  } else {
    // Megatron-LM's VocabParallelCrossEntropy.forward, one PyTorch op a pass over the logits
    // (megatron/core/tensor_parallel/cross_entropy.py @ core_r0.8.0): .float(), the max, the
    // in-place subtraction, exp (out=), the sum and the in-place division that leaves the
    // softmax saved for the backward; 38 bytes an element with 16-bit logits.
    const int64_t a = c.plan.activation_bytes;
    loss_passes(it, prefix + "cross_entropy.",
                {{"float", a + 4}, {"max", 4}, {"sub", 8}, {"exp", 8}, {"sum", 4}, {"div", 8}});
  }
  // TP ranks all-reduce the max, the sum of exponentials and the target logit, 3 fp32 values
  // per token.
  if (it.tensor_parallel()) {
    it.comm(prefix + "cross_entropy.tp_allreduce", CommKind::kTensor, CollectiveKind::kAllReduce,
            Bytes::of(3 * 4 * d.tokens));
  }
}

std::string mtp_prefix(int64_t depth) { return fmt::format("mtp{}.", depth); }

// Renames a block's items into an MTP module's namespace.
void append_renamed(std::vector<LayerItem>& out, std::vector<LayerItem> items,
                    const std::string& prefix) {
  for (LayerItem& item : items) {
    std::visit(
        [&](auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, TpOverlapGemm>) {
            x.gemm.name = prefix + x.gemm.name;
            x.comm.name = prefix + x.comm.name;
          } else if constexpr (std::is_same_v<T, RingSpec>) {
            x.name = prefix + x.name;
            x.chunk.name = prefix + x.chunk.name;
          } else {
            x.name = prefix + x.name;
          }
        },
        item);
    out.push_back(std::move(item));
  }
}

// DeepSeek-V3's multi-token prediction (Sec. 2.2 of its report), per depth after the main head:
// enorm and hnorm, the 2h -> h projection (column-parallel over TP), one MoE block, and another
// head and loss over the shared LM head. `c` is the layers' context (the heads run in
// `head_plan`'s precision, the rest in the layers').
std::vector<LayerItem> mtp_items(const LayerContext& c, bool backward) {
  std::vector<LayerItem> out;
  const LayerContext block{c.model, c.plan, c.stage, c.model.num_layers - 1};
  const ParallelPlan hp = head_plan(c.plan);
  const LayerContext hc{c.model, hp, c.stage, c.layer};
  const Dims d = dims_of(c);
  for (int64_t depth = 0; depth < c.model.mtp_layers; ++depth) {
    const std::string prefix = mtp_prefix(depth);
    Items it(c, d);
    if (!backward) {
      norm_items(it, prefix + "enorm", d.sp_tokens, false);
      norm_items(it, prefix + "hnorm", d.sp_tokens, false);
      it.fp8_cast(prefix + "eh_proj.input", d.sp_tokens * 2 * d.h);
      it.column_gemm(prefix + "eh_proj", prefix + "eh_proj", d.tokens, 2 * d.h, d.h / c.plan.tp);
      append_renamed(out, it.take(), "");
      append_renamed(out, layer_forward(block), prefix);
      Items head(hc, d);
      head_items(head, prefix);
      append_renamed(out, head.take(), "");
      continue;
    }
    Items head(hc, d);
    head_backward_items(head, prefix);
    append_renamed(out, head.take(), "");
    append_renamed(out, layer_backward(block), prefix);
    Items in(c, d);
    in.fp8_cast(prefix + "eh_proj.grad_output", d.tokens * d.h / c.plan.tp);
    in.column_bwd(prefix + "eh_proj", d.tokens, 2 * d.h, d.h / c.plan.tp);
    norm_items(in, prefix + "enorm.bwd", d.sp_tokens, true);
    norm_items(in, prefix + "hnorm.bwd", d.sp_tokens, true);
    append_renamed(out, in.take(), "");
  }
  return out;
}

}  // namespace

std::vector<LayerItem> head_forward(const LayerContext& layer) {
  const ParallelPlan plan = head_plan(layer.plan);
  const LayerContext c{layer.model, plan, layer.stage, layer.layer};
  const Dims d = dims_of(c);
  Items it(c, d);
  head_items(it, "");
  std::vector<LayerItem> out = it.take();
  append_renamed(out, mtp_items(layer, false), "");
  return out;
}

std::vector<LayerItem> head_backward(const LayerContext& layer) {
  std::vector<LayerItem> out = mtp_items(layer, true);
  const ParallelPlan plan = head_plan(layer.plan);
  const LayerContext c{layer.model, plan, layer.stage, layer.layer};
  const Dims d = dims_of(c);
  Items it(c, d);
  head_backward_items(it, "");
  append_renamed(out, it.take(), "");
  return out;
}

std::vector<KernelSpec> step_work(const LayerContext& c, int64_t params, int64_t layer_weights) {
  std::vector<KernelSpec> out;
  const ParallelPlan& p = c.plan;
  const int64_t g = params * p.model_state().gradient;
  if (p.matmul_dtype == Dtype::kFp16) {
    // Dynamic loss scaling: the gradients are unscaled and checked for inf/nan (Apex's and
    // Megatron's multi-tensor unscale), one pass reading and writing them.
    out.push_back({"loss_scale.unscale_check",
                   memory_bound(OpClass::kOptimizer, 2.0, params, 2 * g), KernelRole::kHostRead});
  }
  if (p.step_work.grad_norm) {
    // Clipping by global norm: every local gradient read once (the norm's all-reduce of one
    // value is latency, not modelled).
    out.push_back(
        {"grad_norm", memory_bound(OpClass::kOptimizer, 2.0, params, g), KernelRole::kHostRead});
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

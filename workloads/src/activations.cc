// Activation memory saved for the backward pass; formulas and sources in training_memory.h.
#include <fmt/format.h>

#include <initializer_list>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

namespace {

// The product of `factors` bytes. Plans and models are bounded where they are read, but a long
// sequence squared times the heads (naive attention's scores) can still pass 2^63: LimitError.
Bytes bytes_of(std::initializer_list<int64_t> factors) {
  return Bytes::of(checked_product(factors, "activation bytes of one layer"));
}

// Sizes shared by the terms of one layer on one rank.
struct Dims {
  int64_t e = 0;       // bytes per element
  int64_t sb = 0;      // tokens of the rank's share of the microbatch, s/CP * b
  int64_t sb_rep = 0;  // tokens held by the rank for replicated-over-TP tensors (/t with SP)
  int64_t s = 0;       // sequence of a context-parallel rank, s/CP
  int64_t sb_moe = 0;  // tokens the rank routes to experts (ParallelPlan::moe_tokens)
  int64_t b = 0;
  int64_t h = 0;
  int64_t head_dim = 0;
  ShardWidths w;
};

Dims make_dims(const ModelConfig& m, const ParallelPlan& p) {
  Dims d;
  d.w = shard_widths(m, p);  // validates the split
  const StageTokens tokens = stage_tokens(p);
  d.e = p.activation_bytes;
  d.s = p.seq / p.cp;
  d.b = p.mbs;
  d.sb = tokens.per_rank;
  d.sb_rep = tokens.sequence;
  d.sb_moe = p.moe_tokens();
  d.h = m.d_model;
  d.head_dim = m.head_dim;
  return d;
}

void add_attention(const ModelConfig& m, const ParallelPlan& p, Recompute recompute, const Dims& d,
                   LayerActivations& a) {
  a.q = bytes_of({d.e, d.sb, d.w.q_heads, d.head_dim});
  a.k = bytes_of({d.e, d.sb, d.w.kv_heads, d.head_dim});
  a.v = a.k;
  a.attention_output = a.q;
  if (m.mla) {
    const MlaConfig& mla = *m.mla;
    a.v = bytes_of({d.e, d.sb, d.w.q_heads, mla.v_head_dim});
    a.attention_output = a.v;
    a.latents = bytes_of({d.e, d.sb, (mla.q_lora_rank + mla.kv_lora_rank + mla.qk_rope_head_dim)});
  }
  // What the backward re-runs of the attention core, its checkpoint does not keep: a fused
  // kernel's statistics (its output stays, the output projection's saved input), or the scores.
  const bool rerun = reruns_core_attention(p, recompute);
  if (p.attention != AttentionKernel::kNaive) {
    a.softmax_statistics = rerun ? Bytes::zero() : bytes_of({4, d.w.q_heads, d.sb});
    return;
  }
  const int64_t scores = checked_product({d.w.q_heads, d.s, d.s, d.b},
                                         "attention scores of one layer");  // a*s^2*b elements
  if (rerun) {
    return;
  }
  a.softmax_output = bytes_of({d.e, scores});
  a.attention_dropout = m.dropout ? bytes_of({1 + d.e, scores}) : Bytes::zero();
}

void add_mlp(const ModelConfig& m, const Dims& d, int64_t layer, LayerActivations& a) {
  const int64_t hidden_tensors = is_gated(m.mlp) ? 2 : 1;
  if (!m.is_moe_layer(layer)) {
    a.mlp_hidden = bytes_of({hidden_tensors, d.e, d.sb, d.w.d_ff});
    a.mlp_down_input = bytes_of({d.e, d.sb, d.w.d_ff});
    return;
  }
  const int64_t copies = m.moe->experts_per_token;
  // Routed experts: k copies of the routed tokens at the expert's local width (the same product
  // under etp == tp, s x f/TP, and etp 1, s/TP x f); shared experts: every token, split over TP.
  const int64_t elements = copies * d.sb_moe * d.w.expert_d_ff + d.sb * d.w.shared_d_ff;
  a.mlp_hidden = bytes_of({hidden_tensors, d.e, elements});
  a.mlp_down_input = bytes_of({d.e, elements});
  a.router_logits = bytes_of({4, d.sb_rep, m.moe->num_experts});
  a.expert_inputs = bytes_of({copies, d.e, d.sb_rep, d.h});
  a.expert_outputs = a.expert_inputs;
}

}  // namespace

Bytes LayerActivations::total() const {
  return norm_inputs + norm_statistics + qkv_input + mlp_input + dropout_masks + q + k + v +
         attention_output + softmax_output + attention_dropout + softmax_statistics + mlp_hidden +
         mlp_down_input + router_logits + expert_inputs + expert_outputs + latents + checkpoint;
}

LayerActivations layer_activations(const ModelConfig& m, const ParallelPlan& p) {
  return layer_activations(m, p, p.recompute);
}

namespace {

// Megatron-Core's selective recompute_modules (parallel.h): what the listed modules do not keep.
void drop_recomputed_modules(const ModelConfig& m, const ParallelPlan& p, Recompute recompute,
                             const Dims& d, int64_t layer, LayerActivations& a) {
  if (m.mla && recomputes(p, recompute, RecomputeModule::kMlaUpProj)) {
    a.q = Bytes::zero();  // re-made from the kept latents before core attention's backward
    a.k = Bytes::zero();
    a.v = Bytes::zero();
  }
  if (!m.is_moe_layer(layer) && recomputes(p, recompute, RecomputeModule::kMlp)) {
    a.mlp_hidden = Bytes::zero();  // the MLP keeps only its input (mlp_input)
    a.mlp_down_input = Bytes::zero();
  }
  if (m.is_moe_layer(layer) && recomputes(p, recompute, RecomputeModule::kMoeAct)) {
    a.mlp_down_input = bytes_of({d.e, d.sb, d.w.shared_d_ff});  // the routed experts' part goes
  }
}

}  // namespace

LayerActivations layer_activations(const ModelConfig& m, const ParallelPlan& p,
                                   Recompute recompute) {
  return layer_activations(m, p, recompute, m.num_layers - 1);
}

LayerActivations layer_activations(const ModelConfig& m, const ParallelPlan& p, Recompute recompute,
                                   int64_t layer) {
  const Dims d = make_dims(m, p);
  LayerActivations a;
  if (recompute == Recompute::kFull) {
    a.checkpoint = bytes_of({d.e, d.sb_rep, d.h});
    return a;
  }
  const int64_t stats_per_row = m.norm == NormKind::kLayerNorm ? 8 : 4;
  a.norm_inputs = bytes_of({m.norms_per_layer, d.e, d.sb_rep, d.h});
  a.norm_statistics = bytes_of({m.norms_per_layer, stats_per_row, d.sb_rep});
  a.qkv_input = bytes_of({d.e, d.sb_rep, d.h});
  a.mlp_input = bytes_of({d.e, d.sb_rep, d.h});
  a.dropout_masks = m.dropout ? bytes_of({2, d.sb_rep, d.h}) : Bytes::zero();
  add_attention(m, p, recompute, d, a);
  add_mlp(m, d, layer, a);
  if (p.matmul_dtype == Dtype::kFp8 && p.fp8_saves_quantized_inputs) {
    // Transformer Engine's linear layers save their inputs as the FP8 casts they computed with,
    // 1 byte per element: the QKV and up projections' (the norms' outputs) and the down
    // projection's. The attention output stays in 16 bits for the attention's own backward, and
    // the output projection saves its FP8 cast beside it.
    a.qkv_input = a.qkv_input / d.e;
    a.mlp_input = a.mlp_input / d.e;
    a.mlp_down_input = a.mlp_down_input / d.e;
    a.attention_output += a.attention_output / d.e;
  }
  drop_recomputed_modules(m, p, recompute, d, layer, a);
  if (recompute == Recompute::kSelective && p.selective_by_op && op_checkpointing_fits(m)) {
    // torchtitan's op policy (ParallelPlan::selective_by_op; layer_ops.h recompute_torchtitan_ops)
    // keeps, of what the backward reads, the layer input (the checkpoint's argument), Q and V
    // (wq's and wv's outputs), the attention kernel's output and statistics, wo's reduce-scatter
    // under TP with SP (the residual sum's other input), and the first up projection's output
    // (w1; a plain MLP's fc1). The rest is re-made in the backward. Eager (checkpoint's cache of
    // every saved op's output, needed or not) also holds the down projection's output (w2, the
    // block's seventh matmul, before its reduction under TP).
    LayerActivations kept;
    const bool saved_scatter = p.tp > 1 && p.sp;
    kept.checkpoint = bytes_of({saved_scatter ? 2 : 1, d.e, d.sb_rep, d.h});
    if (p.kernels == Kernels::kEager && is_gated(m.mlp)) {
      kept.checkpoint += bytes_of({d.e, d.sb, d.h});
    }
    kept.q = a.q;
    kept.v = a.v;
    kept.attention_output = a.attention_output;
    kept.softmax_statistics = a.softmax_statistics;
    kept.mlp_hidden = bytes_of({d.e, d.sb, d.w.d_ff});
    return kept;
  }
  if (recompute == Recompute::kDots) {
    // JAX's checkpoint_dots_with_no_batch_dims (MaxText remat_policy "minimal"): the weight
    // matmuls' outputs that the backward needs stay (Q, K, V, the MLP's up projections, and the
    // output projection's result, kept with the layer input as the checkpoint: 2h); what norms,
    // RoPE and the activation function produce is recomputed from them. The fused attention
    // kernel's output and statistics are no dot outputs either, so its forward re-runs in the
    // backward: MaxText's "minimal_flash" policy exists to save that output ("context") as well
    // (AI-Hypercomputer/maxtext, layers/decoders.py, remat_policy == "minimal_flash":
    // save_from_both_policies(checkpoint_dots_with_no_batch_dims,
    // save_only_these_names("context"))). The down projection's result is not a residual of the
    // backward: nothing in the layer's backward reads it (the residual add passes the gradient
    // through, and the sum is the next layer's input, saved there), so it is not kept.
    a.attention_output = Bytes::zero();
    a.softmax_statistics = Bytes::zero();
    a.norm_inputs = Bytes::zero();
    a.qkv_input = Bytes::zero();
    a.mlp_input = Bytes::zero();
    a.mlp_down_input = Bytes::zero();
    a.checkpoint = bytes_of({2, d.e, d.sb_rep, d.h});
  }
  if (keeps_named_projections(recompute)) {
    // save_only_these_names over the attention's projections (parallel.h): Q, K and V stay, and
    // with qkv_out_proj the output projection's result, beside the layer input (the
    // checkpointed layer's argument) as the checkpoint, 2h (qkv_proj: h); every other residual
    // of the backward is re-made from them.
    const Bytes q = a.q;
    const Bytes k = a.k;
    const Bytes v = a.v;
    a = LayerActivations{};
    a.q = q;
    a.k = k;
    a.v = v;
    a.checkpoint = bytes_of({recompute == Recompute::kQkvOutProj ? 2 : 1, d.e, d.sb_rep, d.h});
  }
  return a;
}

Bytes OutsideLayerActivations::total() const {
  return embedding_dropout_mask + final_norm_input + lm_head_input + logits;
}

OutsideLayerActivations outside_layer_activations(const ModelConfig& m, const ParallelPlan& p,
                                                  bool first, bool last) {
  const Dims d = make_dims(m, p);
  OutsideLayerActivations out;
  if (first && m.dropout) {
    out.embedding_dropout_mask = bytes_of({d.sb_rep, d.h});
  }
  if (last) {
    out.final_norm_input = bytes_of({d.e, d.sb_rep, d.h});
    out.lm_head_input = out.final_norm_input;
    out.logits = bytes_of({4, d.sb, d.w.vocab});
  }
  return out;
}

}  // namespace meshsim::workloads

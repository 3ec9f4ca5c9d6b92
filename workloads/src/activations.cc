// Activation memory saved for the backward pass; formulas and sources in training_memory.h.
#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/training_memory.h"
#include "sharding.h"

namespace meshsim::workloads {

namespace {

// Sizes shared by the terms of one layer on one rank.
struct Dims {
  int64_t e = 0;       // bytes per element
  int64_t sb = 0;      // tokens of the microbatch, s*b
  int64_t sb_rep = 0;  // tokens held by the rank for replicated-over-TP tensors (/t with SP)
  int64_t s = 0;
  int64_t b = 0;
  int64_t h = 0;
  int64_t head_dim = 0;
  ShardWidths w;
};

Dims make_dims(const ModelConfig& m, const ActivationOptions& o, const ParallelLayout& l) {
  check_layout(m, l);
  if (o.seq_len <= 0 || o.micro_batch <= 0 || o.bytes_per_element <= 0) {
    throw InfeasibleError(fmt::format(
        "activation memory needs a positive sequence length, microbatch and element size "
        "(got s={}, b={}, {} bytes)",
        o.seq_len, o.micro_batch, o.bytes_per_element));
  }
  const int64_t t = l.tensor_parallel;
  if (l.sequence_parallel && o.seq_len % t != 0) {
    throw InfeasibleError(fmt::format(
        "sequence parallelism splits the sequence over the {} tensor-parallel ranks: seq_len {} "
        "is not divisible by it",
        t, o.seq_len));
  }
  Dims d;
  d.e = o.bytes_per_element;
  d.s = o.seq_len;
  d.b = o.micro_batch;
  d.sb = o.seq_len * o.micro_batch;
  d.sb_rep = l.sequence_parallel ? (o.seq_len / t) * o.micro_batch : d.sb;
  d.h = m.d_model;
  d.head_dim = m.head_dim;
  d.w = shard_widths(m, l);
  return d;
}

void add_attention(const ModelConfig& m, const ActivationOptions& o, const Dims& d,
                   LayerActivations& a) {
  a.q = Bytes::of(d.e * d.sb * d.w.q_heads * d.head_dim);
  a.k = Bytes::of(d.e * d.sb * d.w.kv_heads * d.head_dim);
  a.v = a.k;
  a.attention_output = a.q;
  if (o.attention == AttentionKernel::kFlash) {
    a.softmax_statistics = Bytes::of(4 * d.w.q_heads * d.sb);
    return;
  }
  const int64_t scores = d.w.q_heads * d.s * d.s * d.b;  // a*s^2*b elements
  if (o.recompute == Recompute::kSelective) {
    return;  // the attention core is recomputed in the backward pass
  }
  a.softmax_output = Bytes::of(d.e * scores);
  a.attention_dropout = m.dropout ? Bytes::of((1 + d.e) * scores) : Bytes::zero();
}

void add_mlp(const ModelConfig& m, const Dims& d, LayerActivations& a) {
  const int64_t hidden_tensors = m.mlp == MlpKind::kGated ? 2 : 1;
  const int64_t copies = m.moe ? m.moe->experts_per_token : 1;
  a.mlp_hidden = Bytes::of(copies * hidden_tensors * d.e * d.sb * d.w.d_ff);
  a.mlp_down_input = Bytes::of(copies * d.e * d.sb * d.w.d_ff);
  if (m.moe) {
    a.router_logits = Bytes::of(4 * d.sb_rep * m.moe->num_experts);
    a.expert_inputs = Bytes::of(copies * d.e * d.sb_rep * d.h);
    a.expert_outputs = a.expert_inputs;
  }
}

}  // namespace

Bytes LayerActivations::total() const {
  return norm_inputs + norm_statistics + qkv_input + mlp_input + dropout_masks + q + k + v +
         attention_output + softmax_output + attention_dropout + softmax_statistics + mlp_hidden +
         mlp_down_input + router_logits + expert_inputs + expert_outputs + checkpoint;
}

LayerActivations layer_activations(const ModelConfig& m, const ActivationOptions& o,
                                   const ParallelLayout& l) {
  const Dims d = make_dims(m, o, l);
  LayerActivations a;
  if (o.recompute == Recompute::kFull) {
    a.checkpoint = Bytes::of(d.e * d.sb_rep * d.h);
    return a;
  }
  const int64_t stats_per_row = m.norm == NormKind::kLayerNorm ? 8 : 4;
  a.norm_inputs = Bytes::of(2 * d.e * d.sb_rep * d.h);
  a.norm_statistics = Bytes::of(2 * stats_per_row * d.sb_rep);
  a.qkv_input = Bytes::of(d.e * d.sb_rep * d.h);
  a.mlp_input = Bytes::of(d.e * d.sb_rep * d.h);
  a.dropout_masks = m.dropout ? Bytes::of(2 * d.sb_rep * d.h) : Bytes::zero();
  add_attention(m, o, d, a);
  add_mlp(m, d, a);
  return a;
}

Bytes OutsideLayerActivations::total() const {
  return embedding_dropout_mask + final_norm_input + lm_head_input + logits;
}

OutsideLayerActivations outside_layer_activations(const ModelConfig& m, const ActivationOptions& o,
                                                  const ParallelLayout& l) {
  const Dims d = make_dims(m, o, l);
  OutsideLayerActivations out;
  if (l.pipeline_stage == 0 && m.dropout) {
    out.embedding_dropout_mask = Bytes::of(d.sb_rep * d.h);
  }
  if (l.pipeline_stage == l.pipeline_parallel - 1) {
    out.final_norm_input = Bytes::of(d.e * d.sb_rep * d.h);
    out.lm_head_input = out.final_norm_input;
    out.logits = Bytes::of(4 * d.sb * d.w.vocab);
  }
  return out;
}

}  // namespace meshsim::workloads

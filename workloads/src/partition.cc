// The per-stage partition of a plan; what each fact means is in partition.h.
#include "meshsim/workloads/partition.h"

#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {
namespace {

std::vector<LayerRange> chunks_of(const ModelConfig& m, const ParallelPlan& p, int64_t stage) {
  if (p.vpp == 1) {
    const std::vector<int64_t> split =
        p.stage_layers.empty() ? std::vector<int64_t>(static_cast<size_t>(p.pp), m.num_layers / p.pp)
                               : p.stage_layers;
    const auto here = static_cast<size_t>(stage);
    const int64_t first = std::accumulate(split.begin(), split.begin() + stage, int64_t{0});
    return {LayerRange{first, first + split[here]}};
  }
  const int64_t per = m.num_layers / (p.pp * p.vpp);
  std::vector<LayerRange> out;
  for (int64_t chunk = 0; chunk < p.vpp; ++chunk) {
    const int64_t v = chunk * p.pp + stage;
    out.push_back(LayerRange{v * per, (v + 1) * per});
  }
  return out;
}

// One layer's dense parameters on one TP rank: column-parallel weights and biases split,
// row-parallel biases and norms replicated.
int64_t dense_layer_params(const ModelConfig& m, const ShardWidths& w) {
  const int64_t h = m.d_model;
  const int64_t q = w.q_heads * m.head_dim;
  const int64_t kv = w.kv_heads * m.head_dim;
  const int64_t bias = m.attention_bias ? 1 : 0;
  int64_t p = h * q + 2 * h * kv + q * h + bias * (q + 2 * kv + h);
  p += 2 * norm_parameters(m);
  if (m.moe) {
    p += h * m.moe->num_experts;  // router, replicated
  } else {
    p += mlp_parameters(m, w.d_ff);
  }
  return p;
}

// mlp_parameters(m, f/t) counts the row-parallel output bias (h) once per rank: it is
// replicated, so that is right for every TP degree.
int64_t expert_layer_params(const ModelConfig& m, const ParallelPlan& p, const ShardWidths& w) {
  return m.moe ? (m.moe->num_experts / p.ep) * mlp_parameters(m, w.d_ff) : 0;
}

StageParameters parameters_of(const ModelConfig& m, const ParallelPlan& p,
                              const StagePartition& s) {
  StageParameters out;
  out.dense_per_layer = dense_layer_params(m, s.widths);
  out.expert_per_layer = expert_layer_params(m, p, s.widths);
  for (const LayerRange& c : s.chunks) {
    out.layers += c.size();
  }
  const int64_t vocab_table = s.widths.vocab * m.d_model;
  if (s.first) {
    out.embedding = vocab_table;
    out.embedding +=
        m.positions == PositionKind::kLearned ? m.max_position_embeddings * m.d_model : 0;
  }
  if (s.last) {
    out.head = norm_parameters(m);
    // Untied: the LM head. Tied across stages: Megatron's copy of the embedding. Tied on one
    // stage: the embedding is the head.
    if (!m.tied_embeddings || !s.first) {
      out.head += vocab_table;
    }
  }
  return out;
}

StageActivations activations_of(const ModelConfig& m, const ParallelPlan& p,
                                const StagePartition& s) {
  StageActivations out;
  out.saved_per_layer = layer_activations(m, p).total();
  const Recompute materialised = p.recompute == Recompute::kFull ? Recompute::kNone : p.recompute;
  out.materialised_per_layer = layer_activations(m, p, materialised).total();
  const OutsideLayerActivations outside = outside_layer_activations(m, p, s.first, s.last);
  out.embedding = outside.embedding_dropout_mask;
  out.head = outside.final_norm_input + outside.lm_head_input + outside.logits;
  return out;
}

StagePartition make_partition(const ModelConfig& m, const ParallelPlan& p, int64_t stage) {
  SIM_CHECK(stage >= 0 && stage < p.pp, "pipeline stage {} outside 0..{}", stage, p.pp - 1);
  StagePartition s;
  s.stage = stage;
  s.first = stage == 0;
  s.last = stage == p.pp - 1;
  s.chunks = chunks_of(m, p, stage);
  s.widths = shard_widths(m, p);
  s.tokens = stage_tokens(p);
  s.params = parameters_of(m, p, s);
  s.activations = activations_of(m, p, s);
  return s;
}

}  // namespace

ShardWidths shard_widths(const ModelConfig& m, const ParallelPlan& p) {
  validate_sharding(m, p);
  const int64_t t = p.tp;
  ShardWidths w;
  w.q_heads = m.num_heads / t;
  w.kv_heads = m.num_kv_heads % t == 0 ? m.num_kv_heads / t : 1;
  w.d_ff = m.d_ff / t;
  w.vocab = (m.vocab_size + t - 1) / t;
  return w;
}

StageTokens stage_tokens(const ParallelPlan& p) {
  StageTokens t;
  t.per_rank = p.mbs * p.seq / p.cp;
  t.sequence = p.sp ? t.per_rank / p.tp : t.per_rank;
  return t;
}

StagePartition partition_stage(const ModelConfig& model, const ParallelPlan& plan, int64_t stage) {
  validate_split(model, plan);
  return make_partition(model, plan, stage);
}

std::vector<StagePartition> partition_stages(const ModelConfig& model, const ParallelPlan& plan) {
  validate_split(model, plan);
  std::vector<StagePartition> out;
  for (int64_t stage = 0; stage < plan.pp; ++stage) {
    out.push_back(make_partition(model, plan, stage));
  }
  return out;
}

}  // namespace meshsim::workloads

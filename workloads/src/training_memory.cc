// Model state per rank and the assembly of training memory; formulas in training_memory.h.
#include "meshsim/workloads/training_memory.h"

#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "sharding.h"

namespace meshsim::workloads {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) {
    throw InfeasibleError(message);
  }
}

void check_degrees(const ParallelLayout& l) {
  require(l.tensor_parallel >= 1 && l.pipeline_parallel >= 1 && l.data_parallel >= 1 &&
              l.expert_parallel >= 1,
          fmt::format("parallel degrees must be >= 1 (got TP={}, PP={}, DP={}, EP={})",
                      l.tensor_parallel, l.pipeline_parallel, l.data_parallel, l.expert_parallel));
  require(
      l.pipeline_stage >= 0 && l.pipeline_stage < l.pipeline_parallel,
      fmt::format("pipeline stage {} is outside 0..{}", l.pipeline_stage, l.pipeline_parallel - 1));
}

}  // namespace

void check_layout(const ModelConfig& m, const ParallelLayout& l) {
  check_degrees(l);
  const int64_t t = l.tensor_parallel;
  require(m.num_heads % t == 0,
          fmt::format("TP={} does not divide the {} query heads of {}", t, m.num_heads, m.name));
  require(m.num_kv_heads % t == 0 || t % m.num_kv_heads == 0,
          fmt::format("TP={} neither divides nor is a multiple of the {} key/value heads of {}", t,
                      m.num_kv_heads, m.name));
  require(m.d_ff % t == 0, fmt::format("TP={} does not divide d_ff={} of {}", t, m.d_ff, m.name));
  require(
      l.pipeline_parallel <= m.num_layers,
      fmt::format("PP={} exceeds the {} layers of {}", l.pipeline_parallel, m.num_layers, m.name));
  const int64_t experts = m.moe ? m.moe->num_experts : 1;
  require(experts % l.expert_parallel == 0,
          fmt::format("EP={} does not divide the {} experts of {}", l.expert_parallel, experts,
                      m.name));
  require(l.data_parallel % l.expert_parallel == 0,
          fmt::format("EP={} is carved out of DP={} and must divide it", l.expert_parallel,
                      l.data_parallel));
}

ShardWidths shard_widths(const ModelConfig& m, const ParallelLayout& l) {
  const int64_t t = l.tensor_parallel;
  ShardWidths w;
  w.q_heads = m.num_heads / t;
  w.kv_heads = m.num_kv_heads % t == 0 ? m.num_kv_heads / t : 1;
  w.d_ff = m.d_ff / t;
  w.vocab = ceil_div(m.vocab_size, t);
  return w;
}

namespace {

int64_t layers_on_stage(const ModelConfig& m, const ParallelLayout& l) {
  const int64_t base = m.num_layers / l.pipeline_parallel;
  return base + (l.pipeline_stage < m.num_layers % l.pipeline_parallel ? 1 : 0);
}

// One layer's dense parameters on one TP rank: column-parallel weights and biases split,
// row-parallel biases and norms replicated.
int64_t dense_layer_params_per_rank(const ModelConfig& m, const ShardWidths& w) {
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
int64_t expert_layer_params_per_rank(const ModelConfig& m, const ParallelLayout& l,
                                     const ShardWidths& w) {
  if (!m.moe) {
    return 0;
  }
  return (m.moe->num_experts / l.expert_parallel) * mlp_parameters(m, w.d_ff);
}

Bytes shard(int64_t params, int64_t bytes_per_param, int64_t ways, bool sharded) {
  const int64_t bytes = params * bytes_per_param;
  return Bytes::of(sharded ? ceil_div(bytes, ways) : bytes);
}

}  // namespace

RankParameters parameters_per_rank(const ModelConfig& m, const ParallelLayout& l) {
  check_layout(m, l);
  const ShardWidths w = shard_widths(m, l);
  RankParameters r;
  r.layers = layers_on_stage(m, l);
  r.dense = r.layers * dense_layer_params_per_rank(m, w);
  r.expert = r.layers * expert_layer_params_per_rank(m, l, w);
  const bool first = l.pipeline_stage == 0;
  const bool last = l.pipeline_stage == l.pipeline_parallel - 1;
  if (first) {
    r.dense += w.vocab * m.d_model;
    r.dense += m.positions == PositionKind::kLearned ? m.max_position_embeddings * m.d_model : 0;
  }
  if (last) {
    r.dense += norm_parameters(m);
    // Untied: the LM head. Tied across stages: Megatron's copy of the embedding.
    if (!m.tied_embeddings || !first) {
      r.dense += w.vocab * m.d_model;
    }
  }
  return r;
}

TrainingMemory training_memory_per_rank(const ModelConfig& m, const TrainingMemoryOptions& o) {
  const ParallelLayout& l = o.layout;
  const RankParameters p = parameters_per_rank(m, l);
  const int64_t dp = l.data_parallel;
  const int64_t expert_dp = l.data_parallel / l.expert_parallel;
  const int stage = static_cast<int>(l.zero);
  const auto state = [&](int64_t bytes_per_param, int from_stage) {
    const bool sharded = stage >= from_stage;
    return shard(p.dense, bytes_per_param, dp, sharded) +
           shard(p.expert, bytes_per_param, expert_dp, sharded);
  };
  TrainingMemory mem;
  mem.weights = state(o.state.weight, 3);
  mem.gradients = state(o.state.gradient, 2);
  mem.optimizer_states = state(o.state.optimizer, 1);

  const int64_t in_flight =
      o.in_flight_microbatches.value_or(l.pipeline_parallel - l.pipeline_stage);
  require(in_flight >= 1, fmt::format("in-flight microbatches must be >= 1, got {}", in_flight));
  const Bytes per_microbatch = layer_activations(m, o.activations, l).total() * p.layers +
                               outside_layer_activations(m, o.activations, l).total();
  mem.activations = per_microbatch * in_flight;
  if (o.activations.recompute == Recompute::kFull) {
    ActivationOptions stored = o.activations;
    stored.recompute = Recompute::kNone;
    mem.activations += layer_activations(m, stored, l).total();
  }
  return mem;
}

}  // namespace meshsim::workloads

// Model state per rank and the assembly of training memory; formulas in training_memory.h.
#include "meshsim/workloads/training_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/pipeline.h"

namespace meshsim::workloads {
namespace {

// ZeRO pads flat buffers to the sharding degree: sharded amounts round up.
Bytes shard(int64_t params, int64_t bytes_per_param, int64_t ways, bool sharded) {
  const int64_t bytes = params * bytes_per_param;
  return Bytes::of(sharded ? (bytes + ways - 1) / ways : bytes);
}

}  // namespace

TrainingMemory training_memory(const StagePartition& s, const ParallelPlan& plan,
                               int64_t in_flight) {
  if (in_flight < 1) {
    throw InfeasibleError(fmt::format("in-flight microbatches must be >= 1, got {}", in_flight));
  }
  const StageParameters& p = s.params;
  const int64_t dp = plan.zero_shard_group();
  const int64_t expert_dp =
      plan.experts_tp_split() ? plan.dense_grad_group() / plan.ep : plan.expert_grad_group();
  const int zero = static_cast<int>(plan.zero);
  const auto state = [&](int64_t bytes_per_param, int from_stage) {
    const bool sharded = zero >= from_stage;
    return shard(p.dense(), bytes_per_param, dp, sharded) +
           shard(p.expert(), bytes_per_param, expert_dp, sharded);
  };
  TrainingMemory mem;
  mem.weights = state(plan.state.weight, 3);
  mem.gradients = state(plan.model_state().gradient, 2);
  mem.optimizer_states = state(plan.state.optimizer, 1);
  const StageActivations& a = s.activations;
  mem.activations = (a.saved_layers() - a.offloaded_layers() + a.outside()) * in_flight;
  // Offloading: a layer on its way to the host and one on its way back.
  mem.activations += a.max_offloaded() * 2;
  if (plan.recompute == Recompute::kFull) {
    mem.activations += a.max_materialised();  // the backward's working set
  }
  return mem;
}

TrainingMemory training_memory(const ModelConfig& model, const ParallelPlan& plan, int64_t stage,
                               std::optional<int64_t> in_flight) {
  return training_memory(partition_stage(model, plan, stage), plan,
                         in_flight.value_or(plan.pp - stage));
}

std::vector<Bytes> least_peak_memory(const ParallelPlan& plan,
                                     const std::vector<StagePartition>& parts) {
  std::vector<Bytes> out;
  out.reserve(parts.size());
  const std::vector<int64_t> in_flight = max_in_flight_per_stage(plan.pipeline());
  for (const StagePartition& st : parts) {
    const int64_t chunks = in_flight[static_cast<size_t>(st.stage)];
    const TrainingMemory state = training_memory(st, plan, 1);
    // Layers differ (dense first layers, windows, recompute_num_layers): the least of them. The
    // offloaded layers' activations leave the device (at most two of them are on it at once),
    // so only the layers that keep theirs count.
    int64_t kept = 0;
    std::optional<Bytes> least_saved;
    for (const LayerSaved& layer : st.activations.by_layer) {
      if (layer.offloaded) {
        continue;
      }
      ++kept;
      least_saved = least_saved ? std::min(*least_saved, layer.saved) : layer.saved;
    }
    const int64_t chunk_layers = kept / plan.vpp;
    out.push_back(state.model_state() +
                  least_saved.value_or(Bytes::zero()) * (chunk_layers * chunks));
  }
  return out;
}

}  // namespace meshsim::workloads

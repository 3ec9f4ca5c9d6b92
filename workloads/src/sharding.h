// Private to workloads: how a parallel layout splits one layer's widths over a tensor-parallel
// group (Megatron-LM layout; see training_memory.h).
#pragma once

#include <cstdint>

#include "meshsim/workloads/model.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

struct ShardWidths {
  int64_t q_heads = 0;   // a / t
  int64_t kv_heads = 0;  // g / t, or 1 when t > g (replicated)
  int64_t d_ff = 0;      // f / t
  int64_t vocab = 0;     // ceil(V / t)
};

// Throws InfeasibleError naming the degree and the size it does not divide.
void check_layout(const ModelConfig& model, const ParallelLayout& layout);
ShardWidths shard_widths(const ModelConfig& model, const ParallelLayout& layout);

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

}  // namespace meshsim::workloads

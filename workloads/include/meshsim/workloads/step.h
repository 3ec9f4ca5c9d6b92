// Planning one training step: a model plus a parallel plan become per-rank programs.
//
// A planner is a pure function (STYLE A.4): no clock, no engine. It returns the distinct programs
// (one per role), the communication groups, and for every rank which program it runs and how its
// group and peer slots bind. The composition root (cli/) hands that to sim::Simulation.
//
// This version plans pure data parallelism with gradient accumulation, as PyTorch DDP or
// Megatron with DP only run it: for each of the rank's microbatches the forward pass (embedding,
// every layer as separate kernels, final norm, LM head, loss) and then the backward pass (each
// matmul as a data-gradient and a weight-gradient kernel); after the last microbatch one ring
// all-reduce of all bf16 gradients over the data-parallel group on a communication stream; then
// the AdamW step. Memory: weights, gradients and optimizer state are resident from the start;
// each layer's saved activations (workloads/training_memory.h) are allocated by its first forward
// kernel and freed by its last backward kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

struct StepConfig {
  int64_t data_parallel = 1;
  int64_t micro_batch = 1;    // sequences per microbatch per rank
  int64_t global_batch = 1;   // sequences per step, all ranks
  int64_t seq_len = 0;
  Dtype matmul_dtype = Dtype::kBf16;
  AttentionKernel attention = AttentionKernel::kFlash;
  ModelStateBytes state;
};

struct RankBinding {
  uint32_t program = 0;
  std::vector<uint32_t> group_slots;  // indices into StepPlan::groups
  std::vector<uint32_t> peer_slots;   // ranks
};

struct StepPlan {
  std::vector<Program> programs;
  std::vector<std::vector<uint32_t>> groups;  // ranks of each communication group
  std::vector<RankBinding> ranks;
  int64_t microbatches_per_rank = 0;
  int64_t tokens_per_step = 0;
  Flops model_flops_per_step;  // training FLOPs of the model (causal attention), all ranks
  TrainingMemory memory_estimate;  // closed-form per-rank memory, for the OOM pre-check
};

// Validates the configuration (throws InputError with source "--<flag>" naming the flag: the
// global batch must be divisible by data_parallel * micro_batch, sizes positive).
StepPlan plan_data_parallel_step(const ModelConfig& model, const StepConfig& config);

}  // namespace meshsim::workloads
